#pragma once
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
// Counter-based: draw i of a tensor is a pure function of (seed, offset + i),
// so any device, thread split or chunking gives the same numbers.

#include <cstdint>

#include "pyflame/macros.h"

namespace pyflame::kernels {

struct Philox4x32 {
  uint32_t out[4];

  PF_HOST_DEVICE Philox4x32(uint64_t seed, uint64_t counter) {
    uint32_t c[4] = {static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u};
    uint32_t k[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
    for (int round = 0; round < 10; ++round) {
      uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
      uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
      uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0];
      uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1];
      c[0] = n0;
      c[1] = static_cast<uint32_t>(p1);
      c[2] = n2;
      c[3] = static_cast<uint32_t>(p0);
      k[0] += 0x9E3779B9u;
      k[1] += 0xBB67AE85u;
    }
    for (int i = 0; i < 4; ++i) out[i] = c[i];
  }
};

// Uniform in [0, 1) from 24 (float) or 53 (double) random bits.
PF_HOST_DEVICE float uniform_float(uint32_t x) { return static_cast<float>(x >> 8) * 5.9604644775390625e-8f; }
PF_HOST_DEVICE double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 1.1102230246251565e-16;
}

}  // namespace pyflame::kernels
