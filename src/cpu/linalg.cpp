// CPU kernels of torch.linalg's solvers and decompositions (linalg_ops.h has the ops): LAPACK from
// the OpenBLAS the CPU backend links (scipy-openblas32: 32-bit LAPACK integers),
// one call per matrix of the batch, the batch split across threads (OpenBLAS
// itself runs single-threaded, cpu/blas.h). LAPACKE's row-major entry points
// take the tensors' layout as it is; each works on its own copy (LAPACK
// overwrites its operands), and its info goes to the op's info output: the
// Python layer raises LinAlgError from it where torch raises.

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

// One matrix of n x n a thread's work unit; small matrices go several to a task.
int64_t batch_grain(int64_t n) { return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, n * n * n)); }

void check_lapack(int info, const char* routine, ir::OpType op, int64_t n) {
  PF_CHECK(info >= 0, ValueError, op_name(op), ": LAPACK's ", routine, " rejected argument ", -info, " for a ", n,
           " x ", n, " matrix (a library bug)");
}

void check_size(int64_t n, int64_t k, ir::OpType op) {
  PF_CHECK(n <= INT_MAX && k <= INT_MAX && n * std::max<int64_t>(n, k) <= INT_MAX, NotSupportedError, op_name(op),
           ": matrices of ", n, " x ", std::max(n, k), " exceed LAPACK's 32-bit sizes");
}

template <class T> int getrf(T* a, int m, int n, int* pivots) {
  if constexpr (std::is_same_v<T, float>) return scipy_LAPACKE_sgetrf(LAPACK_ROW_MAJOR, m, n, a, n, pivots);
  else return scipy_LAPACKE_dgetrf(LAPACK_ROW_MAJOR, m, n, a, n, pivots);
}
template <class T> int getri(T* a, int n, const int* pivots) {
  if constexpr (std::is_same_v<T, float>) return scipy_LAPACKE_sgetri(LAPACK_ROW_MAJOR, n, a, n, pivots);
  else return scipy_LAPACKE_dgetri(LAPACK_ROW_MAJOR, n, a, n, pivots);
}
template <class T> int gesv(T* a, int n, int* pivots, T* b, int k) {
  if constexpr (std::is_same_v<T, float>) return scipy_LAPACKE_sgesv(LAPACK_ROW_MAJOR, n, k, a, n, pivots, b, k);
  else return scipy_LAPACKE_dgesv(LAPACK_ROW_MAJOR, n, k, a, n, pivots, b, k);
}
template <class T> int potrf(T* a, int n) {
  if constexpr (std::is_same_v<T, float>) return scipy_LAPACKE_spotrf(LAPACK_ROW_MAJOR, 'L', n, a, n);
  else return scipy_LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', n, a, n);
}

template <class T> int syevd(T* a, int n, T* w) {
  if constexpr (std::is_same_v<T, float>) return scipy_LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, a, n, w);
  else return scipy_LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, a, n, w);
}
template <class T> int gesdd(char job, T* a, int m, int n, T* s, T* u, int ldu, T* vt, int ldvt) {
  if constexpr (std::is_same_v<T, float>) return scipy_LAPACKE_sgesdd(LAPACK_ROW_MAJOR, job, m, n, a, n, s, u, ldu, vt, ldvt);
  else return scipy_LAPACKE_dgesdd(LAPACK_ROW_MAJOR, job, m, n, a, n, s, u, ldu, vt, ldvt);
}

template <class T> int geqrf(T* a, int m, int n, T* tau) {
  if constexpr (std::is_same_v<T, float>) return scipy_LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, m, n, a, n, tau);
  else return scipy_LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, m, n, a, n, tau);
}
template <class T> int orgqr(T* q, int m, int cols, int k, const T* tau) {
  if constexpr (std::is_same_v<T, float>) return scipy_LAPACKE_sorgqr(LAPACK_ROW_MAJOR, m, cols, k, q, cols, tau);
  else return scipy_LAPACKE_dorgqr(LAPACK_ROW_MAJOR, m, cols, k, q, cols, tau);
}

// OpenBLAS's own threads for a batch too small to split across ours (one large matrix): it
// runs single-threaded otherwise (cpu/blas.h), and a 1024 x 1024 factorisation ran at
// 0.2-0.6x PyTorch's (MKL on both cores).
class LapackThreads {
 public:
  LapackThreads(int64_t batch, int64_t n) {
    const int threads = omp_get_max_threads();
    if (batch < threads && n >= 256 && !omp_in_parallel()) {
      scipy_openblas_set_num_threads(threads);
      on_ = true;
    }
  }
  ~LapackThreads() {
    if (on_) scipy_openblas_set_num_threads(1);
  }
  LapackThreads(const LapackThreads&) = delete;
  LapackThreads& operator=(const LapackThreads&) = delete;

 private:
  bool on_ = false;
};

// Calls f(dtype tag) for float32 and float64 (the infer functions allow no other).
template <class F> void float_types(DType dtype, const F& f) {
  if (dtype == DType::Float64) f(double{});
  else f(float{});
}

// Square matrices (input 0) copied into output `into` and worked on there in place:
// work(T* matrix, int n, int64_t index) returns the matrix's info (output `info_output`).
template <class Work> void in_place_kernel(OpCall& call, int into, int info_output, const Work& work) {
  const Tensor& A = call.inputs[0];
  const int64_t n = A.size(-1), batch = call.outputs[info_output].numel();
  check_size(n, n, call.op);
  int* info = call.outputs[info_output].data<int32_t>();
  std::fill(info, info + batch, 0);
  if (n == 0) return;
  const LapackThreads threads(batch, n);
  float_types(A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = A.data<T>();
    T* out = call.outputs[into].data<T>();
    parallel_for(batch, batch_grain(n), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        T* m = out + b * n * n;
        std::copy(a + b * n * n, a + (b + 1) * n * n, m);
        info[b] = work(m, static_cast<int>(n), b);
      }
    });
  });
}

void inv_ex_kernel(OpCall& call) {
  in_place_kernel(call, 0, 1, [&](auto* m, int n, int64_t) {
    std::vector<int> pivots(n);
    int r = getrf(m, n, n, pivots.data());
    check_lapack(r, "getrf", call.op, n);
    if (r == 0) {
      r = getri(m, n, pivots.data());
      check_lapack(r, "getri", call.op, n);
    }
    return r;
  });
}

void solve_ex_kernel(OpCall& call) {
  const Tensor &A = call.inputs[0], &B = call.inputs[1];
  const int64_t n = A.size(-1), k = B.size(-1), batch = call.outputs[1].numel();
  check_size(n, k, call.op);
  int* info = call.outputs[1].data<int32_t>();
  std::fill(info, info + batch, 0);
  if (n == 0 || k == 0) return;
  const LapackThreads threads(batch, n);
  float_types(A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *a = A.data<T>(), *bsrc = B.data<T>();
    T* out = call.outputs[0].data<T>();
    parallel_for(batch, batch_grain(n), [&](int64_t b0, int64_t b1) {
      std::vector<T> lu(n * n);
      std::vector<int> pivots(n);
      for (int64_t b = b0; b < b1; ++b) {
        std::copy(a + b * n * n, a + (b + 1) * n * n, lu.begin());
        T* x = out + b * n * k;
        std::copy(bsrc + b * n * k, bsrc + (b + 1) * n * k, x);
        const int r = gesv(lu.data(), static_cast<int>(n), pivots.data(), x, static_cast<int>(k));
        check_lapack(r, "gesv", call.op, n);
        info[b] = r;
      }
    });
  });
}

void cholesky_ex_kernel(OpCall& call) {
  in_place_kernel(call, 0, 1, [&](auto* m, int n, int64_t) {
    const int r = potrf(m, n);
    check_lapack(r, "potrf", call.op, n);
    for (int i = 0; i < n; ++i) std::fill(m + i * n + i + 1, m + (i + 1) * n, 0);  // A's upper part stays
    return r;
  });
}

// sign = the product of U's diagonal signs and (-1) per row swap; log |det| = sum log |u_ii|.
void slogdet_kernel(OpCall& call) {
  const Tensor& A = call.inputs[0];
  const int64_t n = A.size(-1), batch = call.outputs[0].numel();
  check_size(n, n, call.op);
  const LapackThreads threads(batch, n);
  float_types(A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = A.data<T>();
    T *sign = call.outputs[0].data<T>(), *logabs = call.outputs[1].data<T>();
    parallel_for(batch, batch_grain(n), [&](int64_t b0, int64_t b1) {
      std::vector<T> lu(n * n);
      std::vector<int> pivots(n);
      for (int64_t b = b0; b < b1; ++b) {
        std::copy(a + b * n * n, a + (b + 1) * n * n, lu.begin());
        const int r = n ? getrf(lu.data(), static_cast<int>(n), static_cast<int>(n), pivots.data()) : 0;
        check_lapack(r, "getrf", call.op, n);
        T s = T(1), l = T(0);
        for (int64_t i = 0; i < n; ++i) {
          const T u = lu[i * n + i];
          if (pivots[i] != i + 1) s = -s;
          if (u < T(0)) s = -s;
          l += std::log(std::abs(u));
        }
        if (r > 0) s = T(0), l = -std::numeric_limits<T>::infinity();
        sign[b] = s, logabs[b] = l;
      }
    });
  });
}

// A vector (count entries `stride` apart), and the partner vector of its other factor, negated
// where the vector's entry of largest magnitude (the first such) is negative: eigenvectors and
// singular vectors are unique up to sign only, and this one choice makes results reproducible
// (and comparable with another library's after the same normalisation).
template <class T> void make_positive(T* v, int64_t count, int64_t stride, T* partner = nullptr,
                                      int64_t partner_count = 0, int64_t partner_stride = 1) {
  int64_t at = 0;
  for (int64_t i = 1; i < count; ++i)
    if (std::abs(v[i * stride]) > std::abs(v[at * stride])) at = i;
  if (count == 0 || v[at * stride] >= T(0)) return;
  for (int64_t i = 0; i < count; ++i) v[i * stride] = -v[i * stride];
  for (int64_t i = 0; i < partner_count; ++i) partner[i * partner_stride] = -partner[i * partner_stride];
}

// The eigenvectors overwrite a copy of A in the output (syevd reads its lower triangle).
void eigh_kernel(OpCall& call) {
  in_place_kernel(call, 1, 2, [&](auto* q, int n, int64_t b) {
    const int r = syevd(q, n, call.outputs[0].data<std::remove_pointer_t<decltype(q)>>() + b * n);
    check_lapack(r, "syevd", call.op, n);
    for (int j = 0; j < n; ++j) make_positive(q + j, n, n);  // column j
    return r;
  });
}

// gesdd ('S': min(m, n) singular vectors, 'A': all) on a copy of each matrix.
void svd_kernel(OpCall& call) {
  const Tensor& A = call.inputs[0];
  const bool full = call.attr<SvdAttrs>().full_matrices;
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), batch = call.outputs[3].numel();
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  check_size(m, n, call.op);
  int* info = call.outputs[3].data<int32_t>();
  std::fill(info, info + batch, 0);
  const LapackThreads threads(batch, std::max(m, n));
  float_types(A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = A.data<T>();
    T *u = call.outputs[0].data<T>(), *s = call.outputs[1].data<T>(), *vt = call.outputs[2].data<T>();
    if (k == 0) {  // no singular values; full U and Vh of an empty side are identities, as torch's
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = 0; i < m * ucols; ++i) u[b * m * ucols + i] = i % (ucols + 1) == 0 ? T(1) : T(0);
        for (int64_t i = 0; i < vrows * n; ++i) vt[b * vrows * n + i] = i % (n + 1) == 0 ? T(1) : T(0);
      }
      return;
    }
    parallel_for(batch, batch_grain(std::max(m, n)), [&](int64_t b0, int64_t b1) {
      std::vector<T> work(m * n);
      for (int64_t b = b0; b < b1; ++b) {
        std::copy(a + b * m * n, a + (b + 1) * m * n, work.begin());
        const int r = gesdd(full ? 'A' : 'S', work.data(), static_cast<int>(m), static_cast<int>(n), s + b * k,
                            u + b * m * ucols, static_cast<int>(ucols), vt + b * vrows * n, static_cast<int>(n));
        check_lapack(r, "gesdd", call.op, std::max(m, n));
        info[b] = r;
        T *ub = u + b * m * ucols, *vb = vt + b * vrows * n;
        // U's column j with Vh's row j; the rows of a full Vh past k on their own
        for (int64_t j = 0; j < ucols; ++j) make_positive(ub + j, m, ucols, j < k ? vb + j * n : nullptr, j < k ? n : 0);
        for (int64_t j = k; j < vrows; ++j) make_positive(vb + j * n, n, 1);
      }
    });
  });
}

// trsm in place on a copy of B.
void solve_triangular_kernel(OpCall& call) {
  const Tensor &A = call.inputs[0], &B = call.inputs[1];
  const auto& attrs = call.attr<TriangularAttrs>();
  const int64_t n = A.size(-1), k = B.size(-1), batch = n ? A.numel() / (n * n) : 0;
  check_size(n, k, call.op);
  if (n == 0 || k == 0) return;
  const CBLAS_UPLO uplo = attrs.upper ? CblasUpper : CblasLower;
  const CBLAS_DIAG diag = attrs.unitriangular ? CblasUnit : CblasNonUnit;
  const LapackThreads threads(batch, n);
  float_types(A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T *a = A.data<T>(), *b = B.data<T>();
    T* out = call.out().data<T>();
    parallel_for(batch, batch_grain(n), [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) {
        T* x = out + i * n * k;
        std::copy(b + i * n * k, b + (i + 1) * n * k, x);
        const int N = static_cast<int>(n), K = static_cast<int>(k);
        if constexpr (std::is_same_v<T, float>)
          scipy_cblas_strsm(CblasRowMajor, CblasLeft, uplo, CblasNoTrans, diag, N, K, 1.0f, a + i * n * n, N, x, K);
        else
          scipy_cblas_dtrsm(CblasRowMajor, CblasLeft, uplo, CblasNoTrans, diag, N, K, 1.0, a + i * n * n, N, x, K);
      }
    });
  });
}

// geqrf on a copy of each matrix: R is its upper triangle (rows past min(m, n) zero), Q what
// orgqr makes of the Householder vectors below it (with no vectors: the identity).
void qr_kernel(OpCall& call) {
  const Tensor& A = call.inputs[0];
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const int64_t cols = call.outputs[0].size(-1);
  int64_t batch = 1;
  for (int64_t d = 0; d + 2 < A.dim(); ++d) batch *= A.size(d);
  check_size(m, std::max(n, cols), call.op);
  const LapackThreads threads(batch, std::max(m, n));
  float_types(A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = A.data<T>();
    T *q = call.outputs[0].data<T>(), *r = call.outputs[1].data<T>();
    parallel_for(batch, batch_grain(std::max(m, n)), [&](int64_t b0, int64_t b1) {
      std::vector<T> work(m * n), tau(k);
      for (int64_t b = b0; b < b1; ++b) {
        T *qb = q + b * m * cols, *rb = r + b * cols * n;
        std::copy(a + b * m * n, a + (b + 1) * m * n, work.begin());
        if (k > 0) check_lapack(geqrf(work.data(), static_cast<int>(m), static_cast<int>(n), tau.data()), "geqrf",
                                call.op, std::max(m, n));
        for (int64_t i = 0; i < cols; ++i)
          for (int64_t j = 0; j < n; ++j) rb[i * n + j] = j >= i && i < m ? work[i * n + j] : T(0);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < cols; ++j) qb[i * cols + j] = j < n ? work[i * n + j] : T(0);
        if (k == 0) {
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < cols; ++j) qb[i * cols + j] = i == j ? T(1) : T(0);
        } else {
          check_lapack(orgqr(qb, static_cast<int>(m), static_cast<int>(cols), static_cast<int>(k), tau.data()), "orgqr",
                       call.op, std::max(m, n));
        }
      }
    });
  });
}

// getrf on a copy of each matrix; the row order its swaps make, for the derivative and lu's P.
void lu_factor_ex_kernel(OpCall& call) {
  const Tensor& A = call.inputs[0];
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), batch = call.outputs[3].numel();
  check_size(m, n, call.op);
  int* pivots = call.outputs[1].data<int32_t>();
  int64_t* rows = call.outputs[2].data<int64_t>();
  int* info = call.outputs[3].data<int32_t>();
  const LapackThreads threads(batch, std::max(m, n));
  float_types(A.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = A.data<T>();
    T* out = call.outputs[0].data<T>();
    parallel_for(batch, batch_grain(std::max(m, n)), [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        T* lu = out + b * m * n;
        std::copy(a + b * m * n, a + (b + 1) * m * n, lu);
        int* piv = pivots + b * k;
        const int r = k > 0 ? getrf(lu, static_cast<int>(m), static_cast<int>(n), piv) : 0;
        check_lapack(r, "getrf", call.op, std::max(m, n));
        info[b] = r;
        int64_t* order = rows + b * m;
        for (int64_t i = 0; i < m; ++i) order[i] = i;
        for (int64_t i = 0; i < k; ++i) std::swap(order[i], order[piv[i] - 1]);
      }
    });
  });
}

PF_REGISTER_KERNEL(linalg_lu_factor_ex, CPU, &lu_factor_ex_kernel);
PF_REGISTER_KERNEL(linalg_qr, CPU, &qr_kernel);
PF_REGISTER_KERNEL(linalg_solve_triangular, CPU, &solve_triangular_kernel);
PF_REGISTER_KERNEL(linalg_eigh, CPU, &eigh_kernel);
PF_REGISTER_KERNEL(linalg_svd, CPU, &svd_kernel);
PF_REGISTER_KERNEL(linalg_inv_ex, CPU, &inv_ex_kernel);
PF_REGISTER_KERNEL(linalg_solve_ex, CPU, &solve_ex_kernel);
PF_REGISTER_KERNEL(linalg_cholesky_ex, CPU, &cholesky_ex_kernel);
PF_REGISTER_KERNEL(linalg_slogdet, CPU, &slogdet_kernel);

}  // namespace
}  // namespace pyflame::cpu
