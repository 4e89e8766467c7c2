#pragma once
// Entry points of the CPU backend that the core calls directly (the rest is
// reached through the kernel registry).

#include <cstdint>

#include "pyflame/tensor.h"

namespace pyflame::cpu {

enum class RandomKind { Uniform, Normal, Integer };
// Uniform: U[a, b). Normal: mean a, std b. Integer: [a, b). `out` is contiguous
// on the CPU; each element consumes one counter, starting at `offset`.
void fill_random(Tensor& out, RandomKind kind, double a, double b, uint64_t seed, uint64_t offset);

}  // namespace pyflame::cpu
