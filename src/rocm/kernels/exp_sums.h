#pragma once
// A running maximum and sum of exponentials over values read once (online
// softmax), shared by softmax's long rows and the fused cross_entropy. Values
// are folded in a few at a time: their maximum first, then one rescale of the
// running sum and one exp per value (not a branch and a rescale per value).
// NaN makes the sum NaN (the maximum passes over it), as +inf does
// (exp(inf - inf)), as on the CPU, which subtracts the row's maximum; -inf adds
// nothing (values of only -inf leave max -inf and sum 0). No member
// initializers: states live in shared memory; start from ExpSums<A>::none().

#include <limits>

#include "kernels/math.h"
#include "rocm/kernels/block_reduce.h"

namespace pyflame::backend::rocm {

template <class A> struct ExpSums {
  static constexpr A kNone = -std::numeric_limits<A>::infinity();
  A max, sum;  // max over the non-NaN values; sum exp(x - max)

  static __device__ __forceinline__ ExpSums none() { return {kNone, A(0)}; }

  // While the maximum is -inf the exponents are taken against 0, so that a
  // -inf adds exp(-inf) = 0 instead of exp(-inf - -inf) = NaN.
  template <int N> __device__ __forceinline__ void add(const A (&x)[N]) {
    A top = max;
#pragma unroll
    for (int j = 0; j < N; ++j) top = x[j] > top ? x[j] : top;
    const A base = top == kNone ? A(0) : top;
    A s = sum * math::exp(max - base);
#pragma unroll
    for (int j = 0; j < N; ++j) s += math::exp(x[j] - base);
    sum = s;
    max = top;
  }

  // As add: a side whose maximum is -inf holds 0 (or NaN, which stays).
  __device__ __forceinline__ void merge(const ExpSums& o) {
    const A top = o.max > max ? o.max : max;
    const A base = top == kNone ? A(0) : top;
    sum = sum * math::exp(max - base) + o.sum * math::exp(o.max - base);
    max = top;
  }

  __device__ __forceinline__ ExpSums shuffled(int mask) const { return {shfl_xor(max, mask), shfl_xor(sum, mask)}; }
};

}  // namespace pyflame::backend::rocm
