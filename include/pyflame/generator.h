#pragma once
// Random number generators. Every random op draws from a counter-based
// generator (Philox4x32-10, src/kernels/philox.h): an op that draws n numbers
// reserves n counters, and draw i is a pure function of (seed, offset + i).
// So the numbers depend only on the seed and the order of the ops, never on
// the device, thread split or launch shape: pf.manual_seed(s) gives the same
// rand/randn/randint/dropout results on the CPU and on the GPU.
//
// A Generator is a seed and a running offset. Ops use the default generator
// unless given one (PyTorch's generator= argument).

#include <cstdint>
#include <mutex>

#include "pyflame/macros.h"

namespace pyflame {

struct PhiloxRange {
  uint64_t seed;
  uint64_t offset;  // the first counter of the draws
};

class PF_API Generator {
 public:
  static constexpr uint64_t kDefaultSeed = 67280421310721ULL;  // PyTorch's: runs are reproducible by default

  explicit Generator(uint64_t seed = kDefaultSeed) : seed_(seed) {}
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // A new seed; the stream of draws starts again.
  void manual_seed(uint64_t seed);
  uint64_t initial_seed() const;
  // The counters consumed so far; with the seed, the whole state.
  uint64_t offset() const;
  void set_state(uint64_t seed, uint64_t offset);
  // Reserves the counters of `count` draws.
  PhiloxRange reserve(uint64_t count);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

PF_API Generator& default_generator();
inline Generator& generator_or_default(Generator* g) { return g ? *g : default_generator(); }
// Seeds the default generator.
PF_API void manual_seed(uint64_t seed);

}  // namespace pyflame
