#pragma once
// The CPU backend's door to OpenBLAS (the scipy-openblas32 build from PyPI:
// 32-bit BLAS integers, callers check their sizes against INT_MAX).

#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace pyflame::cpu {

// Row-major C = A * B + beta * C (with A, B optionally transposed), float or double.
template <class T> void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                             const T* b, int64_t ldb, T* c, int64_t ldc, T beta = T(0)) {
  auto op = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
  if constexpr (std::is_same_v<T, float>)
    scipy_cblas_sgemm(CblasRowMajor, op(ta), op(tb), m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    scipy_cblas_dgemm(CblasRowMajor, op(ta), op(tb), m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// While alive, BLAS calls run on their calling thread alone: for work that
// is already split across OpenMP threads. Create it outside the parallel
// region: the setting is global (this OpenBLAS build has no per-thread one),
// and its own threads, called from several OpenMP threads at once, would
// only compete for the same cores.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : previous_(scipy_openblas_get_num_threads()) { scipy_openblas_set_num_threads(1); }
  ~SingleThreadedBlas() { scipy_openblas_set_num_threads(previous_); }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_;
};

}  // namespace pyflame::cpu
