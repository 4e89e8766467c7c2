#pragma once
// The CPU backend's door to OpenBLAS (the scipy-openblas32 build from PyPI:
// 32-bit BLAS integers, callers check their sizes against INT_MAX).

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu/loops.h"

namespace pyflame::cpu {

// OpenBLAS runs single-threaded (set when the CPU backend starts): work is
// split across OpenMP threads here instead. Two thread pools would take turns
// on the same cores, and another library's OpenMP threads spinning after
// their work (PyTorch's, when it was imported first: its libgomp is the one
// every later library gets) would starve OpenBLAS's; PyFlame then ran a
// training step 8x slower.

// Multiply-adds below which a product runs on one thread.
constexpr int64_t kParallelMacs = int64_t{1} << 20;

// Row-major C = A * B + beta * C (with A, B optionally transposed), float or double, on the calling thread.
template <class T> void gemm_serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                                    const T* b, int64_t ldb, T* c, int64_t ldc, T beta) {
  auto op = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemm(CblasRowMajor, op(ta), op(tb), m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    scipy_cblas_dgemm(CblasRowMajor, op(ta), op(tb), m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// The same, split across threads by rows of C (or by columns when C is wide);
// serial inside a parallel region (conv's tasks).
template <class T> void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                             const T* b, int64_t ldb, T* c, int64_t ldc, T beta = T(0)) {
  const int64_t macs_per_row = std::max<int64_t>(1, n * k), macs_per_col = std::max<int64_t>(1, m * k);
  if (m >= n) {
    parallel_for(m, (kParallelMacs + macs_per_row - 1) / macs_per_row, [&](int64_t r0, int64_t r1) {
      gemm_serial(ta, tb, r1 - r0, n, k, a + (ta ? r0 : r0 * lda), lda, b, ldb, c + r0 * ldc, ldc, beta);
    });
  } else {
    parallel_for(n, (kParallelMacs + macs_per_col - 1) / macs_per_col, [&](int64_t c0, int64_t c1) {
      gemm_serial(ta, tb, m, c1 - c0, k, a, lda, b + (tb ? c0 * ldb : c0), ldb, c + c0, ldc, beta);
    });
  }
}

}  // namespace pyflame::cpu
