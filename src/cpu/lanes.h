#pragma once
// Sums and maxima along memory in kLanes independent accumulators, so that the
// compiler vectorises the loop (one accumulator keeps the order of a float sum
// and does not); the lanes are combined in a fixed order, so results do not
// depend on the thread count. f(i) gives element i (and may store it too, as
// softmax keeps its exponentials). 16 lanes of float fill a 512-bit vector
// (CMake asks for them where the CPU has AVX-512) or two 256-bit ones; 32
// keep several vector sums in flight on long runs; what is left over goes 8 at
// a time.

#include <algorithm>
#include <cstdint>

namespace pyflame::cpu {

template <class A, int kLanes = 16, class F> A lanes_sum(int64_t n, const F& f) {
  A lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += f(i + l);
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += f(i + l);
  for (; i < n; ++i) lanes[0] += f(i);
  A sum = 0;
  for (A l : lanes) sum += l;
  return sum;
}

template <class A, int kLanes = 16, class F> A lanes_max(int64_t n, A start, const F& f) {
  A lanes[kLanes];
  std::fill(lanes, lanes + kLanes, start);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], f(i + l));
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] = std::max(lanes[l], f(i + l));
  for (; i < n; ++i) lanes[0] = std::max(lanes[0], f(i));
  return *std::max_element(lanes, lanes + kLanes);
}

}  // namespace pyflame::cpu
