#pragma once
// ROCmBLAS (seed 000): the BLAS adapter of the ROCm backend — rocBLAS on AMD,
// cuBLAS on NVIDIA. It is written in rocBLAS's names; lib_compat.h maps them
// onto cuBLAS on NVIDIA (the handle, operation and status types below are
// cuBLAS's there).
//
// One instance per device and thread (handles are not thread-safe); get_blas()
// returns the current device's, bound to the current stream. Matrices are
// column-major, as in rocBLAS; the matmul kernel maps row-major tensors onto it
// with transpose flags and no copies. Each stream gets its own workspace from
// the caching allocator, so concurrent streams never share one.
// float32 products use TF32 only when allowed (math_mode.h): gemm, matmul and
// linear follow the matmul setting, the convolutions without a DNN library the
// convolution setting (gemm_ex's tf32 says which applies).
//
// linear's GEMM adds its bias in the GEMM itself where the library can
// (try_gemm_bias): the bias epilogue of cuBLASLt (NVIDIA) or hipBLASLt (AMD, where
// the build found it), its descriptors and algorithm made once per problem and
// kept by the instance (blas.cpp says more). rocBLAS has no epilogue: without
// hipBLASLt the caller writes the bias into the output and lets the GEMM
// accumulate onto it.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "pyflame/backend/rocm/hip_compat.h"
#include "pyflame/backend/rocm/lib_compat.h"
#include "pyflame/dtype.h"
#include "pyflame/error.h"

namespace pyflame::backend::rocm {

[[noreturn]] PF_API void throw_blas_error(rocblas_status status, const char* call, const char* file, int line);

inline void check_blas(rocblas_status status, const char* call, const char* file, int line) {
  if (status != rocblas_status_success) throw_blas_error(status, call, file, line);
}

class PF_API ROCmBLAS {
 public:
  ROCmBLAS();  // for the current device
  ~ROCmBLAS();
  ROCmBLAS(const ROCmBLAS&) = delete;
  ROCmBLAS& operator=(const ROCmBLAS&) = delete;

  void set_stream(hipStream_t stream);
  rocblas_handle handle() const { return handle_; }
  int device() const { return device_; }

  // C = alpha * op(A) * op(B) + beta * C (float32; TF32 when allowed).
  void gemm(rocblas_operation trans_a, rocblas_operation trans_b, int M, int N, int K, float alpha, const float* A,
            int lda, const float* B, int ldb, float beta, float* C, int ldc);
  void gemm_strided_batched(rocblas_operation trans_a, rocblas_operation trans_b, int M, int N, int K, float alpha,
                            const float* A, int lda, int64_t stride_a, const float* B, int ldb, int64_t stride_b,
                            float beta, float* C, int ldc, int64_t stride_c, int batch_count);
  // C = alpha * op(A) + beta * op(B): matrix addition, scaling and out-of-place transposition.
  void geam(rocblas_operation trans_a, rocblas_operation trans_b, int M, int N, float alpha, const float* A, int lda,
            float beta, const float* B, int ldb, float* C, int ldc);

  // The general form behind gemm: any float dtype (float16/bfloat16 accumulate
  // in float32, float64 in float64), batch_count 1 for a single product; tf32:
  // float32 may use TF32 (the caller's setting: allow_tf32 or conv_allow_tf32).
  void gemm_ex(DType dtype, rocblas_operation trans_a, rocblas_operation trans_b, int M, int N, int K, double alpha,
               const void* A, int lda, int64_t stride_a, const void* B, int ldb, int64_t stride_b, double beta,
               void* C, int ldc, int64_t stride_c, int batch_count, bool tf32);

  // C (M x N) = op(A) op(B) + bias, the bias (M packed values of `dtype`) added
  // to every column, then ReLU where `relu`, in one library call where the library has that form for
  // the problem: true when done. False (nothing was run) without a Lt library
  // (AMD without hipBLASLt), where it has no algorithm for the problem, or where
  // M, N or K is 1 (PyTorch's addmm keeps those from Lt too); the caller then
  // fills C with the bias and runs gemm_ex with beta = 1. float32 uses TF32 only
  // when `tf32` and on NVIDIA. `op` names the calling op in error messages.
  bool try_gemm_bias(const char* op, DType dtype, rocblas_operation trans_a, rocblas_operation trans_b, int M,
                     int N, int K, const void* A, int lda, const void* B, int ldb, const void* bias, bool relu,
                     void* C, int ldc, bool tf32);

 private:
  void* stream_workspace();  // the current stream's workspace, made on first use
  void use_workspace();      // hands it to cuBLAS

  struct Lt;  // the Lt library's handle and the matmul plans made so far (blas.cpp)

  rocblas_handle handle_ = nullptr;
  int device_ = 0;
  hipStream_t stream_ = nullptr;
  std::map<hipStream_t, void*> workspaces_;
  std::unique_ptr<Lt> lt_;
};

// The current device's instance for this thread, set to the current stream.
PF_API ROCmBLAS& get_blas();
// Destroys this thread's instances (handles, workspaces); get_blas() makes new
// ones. Only for leak checkers and tests: instances otherwise live until exit.
PF_API void release_blas();

}  // namespace pyflame::backend::rocm

#define ROCBLAS_CHECK(call) ::pyflame::backend::rocm::check_blas((call), #call, __FILE__, __LINE__)
