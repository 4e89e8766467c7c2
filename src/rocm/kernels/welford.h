#pragma once
// Mean and sum of squared deviations in one pass (Welford), shared by var/std
// and the norms. Each thread folds its elements in; states then merge across
// a warp by shuffles and across a block in shared memory (Chan et al.'s
// pairwise update), which stays accurate for data far from zero where
// sum(x^2) - n mean^2 would cancel. The count is an integer: a float count
// stops counting at 2^24 elements. No member initializers (shared memory
// holds states): start from Welford<A>{}, all zero.

#include <cstdint>

#include "rocm/kernels/block_reduce.h"

namespace pyflame::backend::rocm {

template <class A> struct Welford {
  A mean;
  A m2;  // sum of squared deviations from the mean
  int64_t count;

  __device__ void push(A x) {
    ++count;
    const A d = x - mean;
    mean += d / static_cast<A>(count);
    m2 += d * (x - mean);
  }

  __device__ void merge(const Welford& o) {
    if (o.count == 0) return;
    if (count == 0) {
      *this = o;
      return;
    }
    const int64_t n = count + o.count;
    const A d = o.mean - mean, f = static_cast<A>(o.count) / static_cast<A>(n);
    mean += d * f;
    m2 += o.m2 + d * d * static_cast<A>(count) * f;
    count = n;
  }
};

// Every lane gets the warp's merged state.
template <class A> __device__ __forceinline__ Welford<A> warp_all_merge(Welford<A> s) {
  for (int mask = PF_WARP_SIZE / 2; mask > 0; mask >>= 1) {
    Welford<A> o{};
    o.mean = shfl_xor(s.mean, mask);
    o.m2 = shfl_xor(s.m2, mask);
    o.count = shfl_xor(s.count, mask);
    s.merge(o);
  }
  return s;
}

// Every thread of the block (kThreads threads) gets the block's merged state.
// Contains __syncthreads: all threads must call it.
template <int kThreads, class A> __device__ __forceinline__ Welford<A> block_all_merge(Welford<A> s) {
  constexpr int kWarps = kThreads / PF_WARP_SIZE;
  __shared__ Welford<A> warp_states[kWarps];
  __shared__ Welford<A> result;
  s = warp_all_merge(s);
  if (threadIdx.x % PF_WARP_SIZE == 0) warp_states[threadIdx.x / PF_WARP_SIZE] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    Welford<A> r = warp_states[0];
    for (int w = 1; w < kWarps; ++w) r.merge(warp_states[w]);
    result = r;
  }
  __syncthreads();
  const Welford<A> r = result;
  __syncthreads();  // the shared slots may be reused by the next call
  return r;
}

}  // namespace pyflame::backend::rocm
