// ROCmBLAS and the GPU matmul kernel (see pyflame/backend/rocm/blas.h for the
// design). One code path in rocBLAS's names (lib_compat.h maps them onto cuBLAS
// on NVIDIA); the two #if blocks are where the libraries truly differ.

#include "pyflame/backend/rocm/blas.h"

#include <climits>
#include <unordered_map>

#include "core/dispatch.h"
#include "core/matrix_layout.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/math_mode.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/matmul.h"

namespace pyflame::backend::rocm {

namespace {

// cuBLAS picks Hopper's split-K and stream-K kernels only with enough workspace;
// 32 MiB is what PyTorch gives it on sm_90.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

rocblas_datatype blas_type(DType d) {
  switch (d) {
    case DType::Float16: return rocblas_datatype_f16_r;
    case DType::BFloat16: return rocblas_datatype_bf16_r;
    case DType::Float64: return rocblas_datatype_f64_r;
    default: return rocblas_datatype_f32_r;
  }
}

}  // namespace

void throw_blas_error(rocblas_status status, const char* call, const char* file, int line) {
  std::string msg = std::string(PF_BLAS_LIBRARY " error ") + rocblas_status_to_string(status) + " in " + call +
                    " at " + file + ":" + std::to_string(line);
  if (status == rocblas_status_memory_error) throw ROCmMemoryError(msg);
  throw ROCmError(msg);
}

ROCmBLAS::ROCmBLAS() {
  HIP_CHECK(hipGetDevice(&device_));
  ROCBLAS_CHECK(rocblas_create_handle(&handle_));
}

ROCmBLAS::~ROCmBLAS() {
  DeviceGuard guard(device_);
  for (auto& [stream, ws] : workspaces_) get_memory_manager(device_).deallocate_async(ws, stream);
  (void)rocblas_destroy_handle(handle_);
}

void ROCmBLAS::set_stream(hipStream_t stream) {
  ROCBLAS_CHECK(rocblas_set_stream(handle_, stream));
  stream_ = stream;
}

void ROCmBLAS::use_workspace() {
#if defined(PYFLAME_HIP_NVIDIA)
  // cuBLAS works in memory its caller gives it; rocBLAS manages its own per handle.
  auto it = workspaces_.find(stream_);
  if (it == workspaces_.end())
    it = workspaces_.emplace(stream_, get_memory_manager(device_).allocate_async(kWorkspaceBytes, stream_)).first;
  ROCBLAS_CHECK(cublasSetWorkspace(handle_, it->second, kWorkspaceBytes));
#endif
}

void ROCmBLAS::gemm_ex(DType dtype, rocblas_operation trans_a, rocblas_operation trans_b, int M, int N, int K,
                       double alpha, const void* A, int lda, int64_t stride_a, const void* B, int ldb,
                       int64_t stride_b, double beta, void* C, int ldc, int64_t stride_c, int batch_count, bool tf32) {
  PF_CHECK(is_floating(dtype), TypeError, "ROCmBLAS::gemm_ex: ", dtype, " is not a float dtype");
  use_workspace();
  const bool f64 = dtype == DType::Float64;
  const float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
  const void* pa = f64 ? static_cast<const void*>(&alpha) : &alpha32;
  const void* pb = f64 ? static_cast<const void*>(&beta) : &beta32;
#if defined(PYFLAME_HIP_NVIDIA)
  // TF32 tensor cores for float32, when allowed, are a cuBLAS math mode; rocBLAS has none on these targets.
  ROCBLAS_CHECK(cublasSetMathMode(handle_, dtype == DType::Float32 && tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                           : CUBLAS_DEFAULT_MATH));
#endif
  const rocblas_datatype t = blas_type(dtype);
  const rocblas_datatype compute = f64 ? rocblas_datatype_f64_r : rocblas_datatype_f32_r;
  if (batch_count == 1)
    ROCBLAS_CHECK(rocblas_gemm_ex(handle_, trans_a, trans_b, M, N, K, pa, A, t, lda, B, t, ldb, pb, C, t, ldc, C, t,
                                  ldc, compute, rocblas_gemm_algo_standard, 0, 0));
  else
    ROCBLAS_CHECK(rocblas_gemm_strided_batched_ex(handle_, trans_a, trans_b, M, N, K, pa, A, t, lda, stride_a, B, t,
                                                  ldb, stride_b, pb, C, t, ldc, stride_c, C, t, ldc, stride_c,
                                                  batch_count, compute, rocblas_gemm_algo_standard, 0, 0));
}

void ROCmBLAS::gemm(rocblas_operation trans_a, rocblas_operation trans_b, int M, int N, int K, float alpha,
                    const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  gemm_ex(DType::Float32, trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1, allow_tf32());
}

void ROCmBLAS::gemm_strided_batched(rocblas_operation trans_a, rocblas_operation trans_b, int M, int N, int K,
                                    float alpha, const float* A, int lda, int64_t stride_a, const float* B, int ldb,
                                    int64_t stride_b, float beta, float* C, int ldc, int64_t stride_c,
                                    int batch_count) {
  gemm_ex(DType::Float32, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C, ldc,
          stride_c, batch_count, allow_tf32());
}

void ROCmBLAS::geam(rocblas_operation trans_a, rocblas_operation trans_b, int M, int N, float alpha, const float* A,
                    int lda, float beta, const float* B, int ldb, float* C, int ldc) {
  ROCBLAS_CHECK(rocblas_sgeam(handle_, trans_a, trans_b, M, N, &alpha, A, lda, &beta, B, ldb, C, ldc));
}

namespace {
// Instances live as long as the process unless released: destroying BLAS
// handles during exit races the GPU runtime's own teardown (PyTorch keeps its
// handles too).
thread_local std::unordered_map<int, ROCmBLAS*> t_blas;
}  // namespace

ROCmBLAS& get_blas() {
  auto& per_device = t_blas;
  int device;
  HIP_CHECK(hipGetDevice(&device));
  ROCmBLAS*& blas = per_device[device];
  if (!blas) blas = new ROCmBLAS();
  blas->set_stream(current_stream(device));
  return *blas;
}

void release_blas() {
  for (auto& [device, blas] : t_blas) delete blas;
  t_blas.clear();
}

namespace {

rocblas_operation op_of(const MatrixLayout& l) { return l.trans ? rocblas_operation_transpose : rocblas_operation_none; }

// matmul / batch_matmul on the device. A row-major product C = A B is the
// column-major product C^T = B^T A^T, so B goes first. Batch dims that
// flatten to one stride in both operands become one strided-batched call;
// outer batch dims that do not (a broadcast operand) loop around it.
void matmul_entry(OpCall& call) {
  Tensor a = call.inputs[0], b = call.inputs[1];
  Tensor& out = call.out();
  if (out.numel() == 0) return;
  if (!is_floating(a.dtype())) return integer_matmul(call);
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  for (int64_t s : {m, n, k})
    PF_CHECK(s <= INT_MAX, NotSupportedError, op_name(call.op), ": matrix dimension ", s,
             " exceeds the GPU BLAS limit of 2^31-1 (shapes ", a.shape(), " and ", b.shape(), ")");
  DeviceGuard guard(out.device().index);
  const MatrixLayout la = matrix_layout(a), lb = matrix_layout(b);

  for (int64_t ld : {la.ld, lb.ld})
    PF_CHECK(ld <= INT_MAX, NotSupportedError, op_name(call.op), ": a row stride of ", ld,
             " exceeds the GPU BLAS limit of 2^31-1; make the operand contiguous first");

  int64_t inner = 1, stride_a = 0, stride_b = 0;
  for (int64_t d = out.dim() - 3; d >= 0; --d) {
    const int64_t size = out.shape()[d];
    if (size != 1) {
      if (inner == 1) {
        stride_a = a.strides()[d], stride_b = b.strides()[d];
      } else if (a.strides()[d] != stride_a * inner || b.strides()[d] != stride_b * inner || inner * size > INT_MAX) {
        break;
      }
      inner *= size;
    }
  }
  const int64_t outer = out.numel() / (inner * m * n);
  ROCmBLAS& blas = get_blas();
  const size_t item = itemsize(a.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    const char* pa = static_cast<const char*>(a.data_ptr()) + batch_offset(a, o * inner) * item;
    const char* pb = static_cast<const char*>(b.data_ptr()) + batch_offset(b, o * inner) * item;
    char* pc = static_cast<char*>(out.data_ptr()) + o * inner * m * n * item;
    blas.gemm_ex(a.dtype(), op_of(lb), op_of(la), static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), 1.0,
                 pb, static_cast<int>(lb.ld), stride_b, pa, static_cast<int>(la.ld), stride_a, 0.0, pc,
                 static_cast<int>(n), m * n, static_cast<int>(inner), allow_tf32());
  }
}

PF_REGISTER_KERNEL(matmul, ROCm, &matmul_entry);
PF_REGISTER_KERNEL(batch_matmul, ROCm, &matmul_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
