#pragma once
// The global random generator (Philox4x32-10, seeded by pf.manual_seed). An op
// that draws n numbers reserves n counters and draws number i from counter
// offset + i, so results depend only on the seed and the order of the ops.

#include <cstdint>

namespace pyflame {

struct PhiloxRange {
  uint64_t seed;
  uint64_t offset;
};
PhiloxRange reserve_random(uint64_t count);

}  // namespace pyflame
