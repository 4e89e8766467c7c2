#pragma once
// Mean and sum of squared deviations in one pass (Welford), shared by var/std
// and the norms. Each thread folds its elements in; states then merge across
// a warp by shuffles and across a block in shared memory (Chan et al.'s
// pairwise update), which stays accurate for data far from zero where
// sum(x^2) - n mean^2 would cancel. The count is an integer: a float count
// stops counting at 2^24 elements. No member initializers (shared memory
// holds states): start from Welford<A>{}, all zero. CoMoments does the same
// for pairs (x, g), for the norms' backward passes. States merge across a
// warp and a block with block_reduce.h's warp_all_merge and block_all_merge.

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

  // The state of lane (this lane ^ mask).
  __device__ Welford shuffled(int mask) const {
    Welford o{};
    o.mean = shfl_xor(mean, mask);
    o.m2 = shfl_xor(m2, mask);
    o.count = shfl_xor(count, mask);
    return o;
  }
};

// Welford over pairs (x, g): x's mean and squared deviations, g's mean, and
// the co-moment sum((x - mean_x)(g - mean_g)), which equals
// sum(g (x - mean_x)): what the norms' backward passes need besides the
// statistics of x, in the same pass over x and g (sum(g x) - mean_x sum(g)
// would cancel for data far from zero).
template <class A> struct CoMoments {
  A mean_x;
  A m2;  // sum of squared deviations of x
  A mean_g;
  A co;  // sum((x - mean_x)(g - mean_g))
  int64_t count;

  __device__ void push(A x, A g) {
    ++count;
    const A inv = A(1) / static_cast<A>(count);
    const A dx = x - mean_x;
    mean_x += dx * inv;
    m2 += dx * (x - mean_x);
    mean_g += (g - mean_g) * inv;
    co += dx * (g - mean_g);
  }

  __device__ void merge(const CoMoments& o) {
    if (o.count == 0) return;
    if (count == 0) {
      *this = o;
      return;
    }
    const int64_t n = count + o.count;
    const A dx = o.mean_x - mean_x, dg = o.mean_g - mean_g, f = static_cast<A>(o.count) / static_cast<A>(n);
    const A w = static_cast<A>(count) * f;  // count * o.count / n
    mean_x += dx * f;
    mean_g += dg * f;
    m2 += o.m2 + dx * dx * w;
    co += o.co + dx * dg * w;
    count = n;
  }

  __device__ CoMoments shuffled(int mask) const {
    CoMoments o{};
    o.mean_x = shfl_xor(mean_x, mask);
    o.m2 = shfl_xor(m2, mask);
    o.mean_g = shfl_xor(mean_g, mask);
    o.co = shfl_xor(co, mask);
    o.count = shfl_xor(count, mask);
    return o;
  }
};

}  // namespace pyflame::backend::rocm
