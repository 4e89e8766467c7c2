#pragma once
// CPU loop machinery. for_each_strided walks N same-shaped strided operands
// (operand 0 is the output) in their coalesced layout (core/strided_layout.h)
// and hands the body runs along the innermost dim with its byte strides; bodies special-case unit and zero strides so the compiler can
// vectorise them. Work is split over threads with OpenMP once it is large
// enough to pay for the fork.

#include <omp.h>

#include <array>
#include <cstdint>
#include <vector>

#include "core/strided_layout.h"

namespace pyflame::cpu {

// Below this many elements an op runs on one thread.
constexpr int64_t kParallelGrain = 32768;

// Calls f(begin, end) over [0, n), split across threads when n is large.
template <class F> void parallel_for(int64_t n, int64_t grain, const F& f) {
  if (n <= grain || omp_in_parallel() || omp_get_max_threads() == 1) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  int64_t max_chunks = (n + grain - 1) / grain;
#pragma omp parallel num_threads(static_cast<int>(std::min<int64_t>(omp_get_max_threads(), max_chunks)))
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

// body(std::array<char*, N> ptrs, std::array<int64_t, N> inner_strides_bytes, int64_t count)
template <int N, class Body>
void for_each_strided(const std::array<const Tensor*, N>& ops, const Body& body) {
  const Shape& shape = ops[0]->shape();
  int64_t numel = shape_numel(shape);
  if (numel == 0) return;
  const StridedLayout<N> layout = coalesce<N>(ops);
  const std::vector<int64_t>& sizes = layout.sizes;
  const auto& strides = layout.strides;
  std::array<char*, N> base;
  for (int k = 0; k < N; ++k) base[k] = static_cast<char*>(ops[k]->data_ptr());
  const int64_t inner = sizes[0];
  const std::array<int64_t, N> inner_st = strides[0];

  if (sizes.size() == 1) {  // one run: split it between threads
    parallel_for(inner, kParallelGrain, [&](int64_t b, int64_t e) {
      std::array<char*, N> p;
      for (int k = 0; k < N; ++k) p[k] = base[k] + b * inner_st[k];
      body(p, inner_st, e - b);
    });
    return;
  }
  const int64_t rows = numel / inner;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / inner);
  parallel_for(rows, grain, [&](int64_t rb, int64_t re) {
    // Multi-index of row rb over the outer dims, then carry-increment per row.
    std::vector<int64_t> idx(sizes.size(), 0);
    std::array<char*, N> p = base;
    int64_t r = rb;
    for (size_t d = 1; d < sizes.size(); ++d) {
      idx[d] = r % sizes[d];
      r /= sizes[d];
      for (int k = 0; k < N; ++k) p[k] += idx[d] * strides[d][k];
    }
    for (int64_t row = rb; row < re; ++row) {
      body(p, inner_st, inner);
      for (size_t d = 1; d < sizes.size(); ++d) {
        for (int k = 0; k < N; ++k) p[k] += strides[d][k];
        if (++idx[d] < sizes[d]) break;
        for (int k = 0; k < N; ++k) p[k] -= sizes[d] * strides[d][k];
        idx[d] = 0;
      }
    }
  });
}

// The element at byte offset i * stride.
template <class T> T& at(char* p, int64_t i, int64_t stride) { return *reinterpret_cast<T*>(p + i * stride); }

// o[i] = value(i) over a contiguous run, in blocks computed into a local
// buffer and then stored. The output may be one of the inputs (in-place ops),
// so a plain loop gets a run-time overlap check from GCC, and some
// instantiations (float add among them) ran its scalar fallback: 4x slower.
// Block by block, the reads and the writes are separate loops that vectorise
// with no check, and an exactly aliased input is still read before written.
template <class O, class Value> void store_run(O* o, int64_t n, const Value& value) {
  constexpr int64_t kBlock = 64;
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    O block[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) block[j] = value(i + j);
    for (int64_t j = 0; j < kBlock; ++j) o[i + j] = block[j];
  }
  for (; i < n; ++i) o[i] = value(i);
}

}  // namespace pyflame::cpu
