// ROCmBLAS and the GPU matmul and linear kernels (see pyflame/backend/rocm/blas.h
// for the design). One code path in rocBLAS's names (lib_compat.h maps them onto
// cuBLAS on NVIDIA); the #if blocks are where the libraries truly differ:
// cuBLAS's caller-owned workspace, its TF32 math mode, and what only cuBLASLt has.
//
// linear's bias (try_gemm_bias), where a Lt library is built in (PYFLAME_WITH_BLASLT:
// cuBLASLt on NVIDIA, hipBLASLt on AMD where CMake found it; written in hipBLASLt's
// names, which lib_compat.h maps onto cuBLASLt): y^T (n x m) = W (n x k) x^T + b in
// column-major terms, and the BIAS epilogue adds b (one value per row of y^T) while
// the GEMM writes its tiles, so the bias costs no pass over the output (matmul then
// add read and wrote all of it once more, and launched twice). A plan, the matmul
// descriptor (compute type, transposes, epilogue), the three matrix layouts and the
// algorithm the heuristic chose, is made on a problem's first call and kept by the
// instance (one per device and thread, as the handle): later calls set the bias
// pointer and run the matmul, creating nothing and not asking the heuristic again
// (PyTorch's addmm asks it on every call). The key holds each pointer's alignment,
// which cuBLASLt's heuristic takes as a preference: an algorithm chosen for aligned
// operands never meets a misaligned one. Lt's workspace is the stream's BLAS
// workspace (stream order keeps the two libraries' uses apart).

#include "pyflame/backend/rocm/blas.h"

#include <climits>
#include <functional>
#include <unordered_map>
#include <vector>

#include "core/dispatch.h"
#include "core/matrix_layout.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/math_mode.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "pyflame/nn_ops.h"
#include "rocm/device_guard.h"
#include "rocm/library_handles.h"
#include "rocm/kernels/gemv.h"
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
  lt_.reset();
  for (auto& [stream, ws] : workspaces_) get_memory_manager(device_).deallocate_async(ws, stream);
  (void)rocblas_destroy_handle(handle_);
}

void ROCmBLAS::set_stream(hipStream_t stream) {
  ROCBLAS_CHECK(rocblas_set_stream(handle_, stream));
  stream_ = stream;
}

void* ROCmBLAS::stream_workspace() {
  auto it = workspaces_.find(stream_);
  if (it == workspaces_.end())
    it = workspaces_.emplace(stream_, get_memory_manager(device_).allocate_async(kWorkspaceBytes, stream_)).first;
  return it->second;
}

void ROCmBLAS::use_workspace() {
#if defined(PYFLAME_HIP_NVIDIA)
  // cuBLAS works in memory its caller gives it; rocBLAS manages its own per handle.
  ROCBLAS_CHECK(cublasSetWorkspace(handle_, stream_workspace(), kWorkspaceBytes));
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

#if PYFLAME_WITH_BLASLT

namespace {

// One problem of try_gemm_bias, in the library's column-major terms. Alignments
// are of the pointers (bytes, up to 256, as PyTorch computes them); D's is the
// smaller of the output's and the bias's, the stricter need of the two.
struct LtKey {
  DType dtype;
  bool tf32;
  bool relu;  // the ReLU after the bias, in the same epilogue
  hipblasOperation_t trans_a, trans_b;
  int m, n, k, lda, ldb, ldc;
  uint32_t align_a, align_b, align_d;
  bool operator==(const LtKey&) const = default;

  // For messages: the op, the product and its layout.
  std::string describe(const char* op) const {
    auto ta = [](hipblasOperation_t t) { return t == HIPBLAS_OP_T ? "T" : "N"; };
    return std::string(op) + ": " PF_BLASLT_LIBRARY " matmul with bias, D [" + std::to_string(m) + " x " +
           std::to_string(n) + "] = op(A) [" + std::to_string(m) + " x " + std::to_string(k) + "] op(B) [" +
           std::to_string(k) + " x " + std::to_string(n) + "] + bias [" + std::to_string(m) + "]" +
           (relu ? ", relu" : "") + " (column-major, op(A) " + ta(trans_a) + ", op(B) " + ta(trans_b) + ", lda " + std::to_string(lda) +
           ", ldb " + std::to_string(ldb) + ", ldc " + std::to_string(ldc) + "), " + dtype_name(dtype) +
           (tf32 ? " (TF32)" : "");
  }
};

struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = 0;
    for (int64_t v : {int64_t(k.dtype), int64_t(k.tf32), int64_t(k.relu), int64_t(k.trans_a), int64_t(k.trans_b), int64_t(k.m),
                      int64_t(k.n), int64_t(k.k), int64_t(k.lda), int64_t(k.ldb), int64_t(k.ldc),
                      int64_t(k.align_a), int64_t(k.align_b), int64_t(k.align_d)})
      h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
  }
};

// A status of a Lt call for `key`: a failure names the library's status, the op,
// the problem, the call, file and line (allocation failures as ROCmMemoryError).
struct LtCall {
  const LtKey& key;
  const char* op;
  void check(hipblasStatus_t status, const char* call, const char* file, int line) const {
    if (status == HIPBLAS_STATUS_SUCCESS) return;
    const std::string msg = std::string(PF_BLASLT_LIBRARY " error ") + hipblaslt_status_name(status) + " in " +
                            key.describe(op) + ": " + call + " at " + file + ":" + std::to_string(line);
    if (status == HIPBLAS_STATUS_ALLOC_FAILED) throw ROCmMemoryError(msg);
    throw ROCmError(msg);
  }
};
#define LT_CHECK(c, call) (c).check((call), #call, __FILE__, __LINE__)

hipDataType lt_type(DType d) {
  switch (d) {
    case DType::Float16: return HIP_R_16F;
    case DType::BFloat16: return HIP_R_16BF;
    case DType::Float64: return HIP_R_64F;
    default: return HIP_R_32F;
  }
}

hipblasOperation_t lt_operation(rocblas_operation t) {
  return t == rocblas_operation_transpose ? HIPBLAS_OP_T : HIPBLAS_OP_N;
}

// What one problem runs with; the descriptors are destroyed with it.
struct LtPlan {
  hipblasLtMatmulDesc_t desc = nullptr;
  hipblasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  hipblasLtMatmulAlgo_t algo{};
  bool usable = false;  // the heuristic found an algorithm and the library ran it; if not, the caller's GEMM runs

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (d) (void)hipblasLtMatrixLayoutDestroy(d);
    if (b) (void)hipblasLtMatrixLayoutDestroy(b);
    if (a) (void)hipblasLtMatrixLayoutDestroy(a);
    if (desc) (void)hipblasLtMatmulDescDestroy(desc);
  }
};

// The matmul preference of one heuristic query, destroyed when it is done.
struct LtPreference {
  hipblasLtMatmulPreference_t pref = nullptr;
  ~LtPreference() {
    if (pref) (void)hipblasLtMatmulPreferenceDestroy(pref);
  }
};

// The largest power of two dividing the address, up to 256 (PyTorch's _getAlignment).
uint32_t alignment(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (address % a) a /= 2;
  return a;
}

// Plans kept per instance at most; past that the cache starts again (a workload of
// so many shapes then pays the heuristic once more per shape, as PyTorch does per call).
constexpr size_t kMaxLtPlans = 1024;

}  // namespace

struct ROCmBLAS::Lt {
  hipblasLtHandle_t handle = nullptr;
  std::unordered_map<LtKey, std::unique_ptr<LtPlan>, LtKeyHash> plans;

  Lt() {
    const hipblasStatus_t status = hipblasLtCreate(&handle);
    if (status != HIPBLAS_STATUS_SUCCESS)
      throw ROCmError(std::string(PF_BLASLT_LIBRARY " error ") + hipblaslt_status_name(status) +
                      " in hipblasLtCreate at " + __FILE__ + ":" + std::to_string(__LINE__));
  }
  ~Lt() {
    plans.clear();
    (void)hipblasLtDestroy(handle);
  }
  Lt(const Lt&) = delete;
  Lt& operator=(const Lt&) = delete;

  // The plan of `key` (made on first use): the descriptors and the heuristic's first algorithm.
  LtPlan& plan(const LtKey& key, const char* op) {
    auto it = plans.find(key);
    if (it != plans.end()) return *it->second;
    if (plans.size() >= kMaxLtPlans) plans.clear();
    auto p = std::make_unique<LtPlan>();
    const LtCall c{key, op};
    const bool f64 = key.dtype == DType::Float64;
    const hipblasComputeType_t compute = f64        ? HIPBLAS_COMPUTE_64F
                                         : key.tf32 ? HIPBLAS_COMPUTE_32F_FAST_TF32
                                                    : HIPBLAS_COMPUTE_32F;
    const hipDataType type = lt_type(key.dtype), scale = f64 ? HIP_R_64F : HIP_R_32F;
    LT_CHECK(c, hipblasLtMatmulDescCreate(&p->desc, compute, scale));
    const hipblasLtEpilogue_t epilogue = key.relu ? HIPBLASLT_EPILOGUE_RELU_BIAS : HIPBLASLT_EPILOGUE_BIAS;
    LT_CHECK(c, hipblasLtMatmulDescSetAttribute(p->desc, HIPBLASLT_MATMUL_DESC_TRANSA, &key.trans_a,
                                                sizeof(key.trans_a)));
    LT_CHECK(c, hipblasLtMatmulDescSetAttribute(p->desc, HIPBLASLT_MATMUL_DESC_TRANSB, &key.trans_b,
                                                sizeof(key.trans_b)));
    LT_CHECK(c, hipblasLtMatmulDescSetAttribute(p->desc, HIPBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                sizeof(epilogue)));
    // Layouts are of the stored matrices: op(A) is m x k, so A is k x m when transposed.
    const bool a_t = key.trans_a == HIPBLAS_OP_T, b_t = key.trans_b == HIPBLAS_OP_T;
    LT_CHECK(c, hipblasLtMatrixLayoutCreate(&p->a, type, a_t ? key.k : key.m, a_t ? key.m : key.k, key.lda));
    LT_CHECK(c, hipblasLtMatrixLayoutCreate(&p->b, type, b_t ? key.n : key.k, b_t ? key.k : key.n, key.ldb));
    LT_CHECK(c, hipblasLtMatrixLayoutCreate(&p->d, type, key.m, key.n, key.ldc));
    LtPreference pref;
    const uint64_t workspace = kWorkspaceBytes;
    LT_CHECK(c, hipblasLtMatmulPreferenceCreate(&pref.pref));
    LT_CHECK(c, hipblasLtMatmulPreferenceSetAttribute(pref.pref, HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace, sizeof(workspace)));
#if defined(PYFLAME_HIP_NVIDIA)
    // cuBLASLt takes the operands' alignments as preferences (hipBLASLt has no such attribute).
    LT_CHECK(c, cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                     &key.align_a, sizeof(key.align_a)));
    LT_CHECK(c, cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                     &key.align_b, sizeof(key.align_b)));
    LT_CHECK(c, cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                     &key.align_d, sizeof(key.align_d)));
    LT_CHECK(c, cublasLtMatmulPreferenceSetAttribute(pref.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                     &key.align_d, sizeof(key.align_d)));
#endif
    hipblasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const hipblasStatus_t status = hipblasLtMatmulAlgoGetHeuristic(handle, p->desc, p->a, p->b, p->d, p->d,
                                                                   pref.pref, 1, &result, &returned);
    // NOT_SUPPORTED: no heuristic for this configuration (float64 may have none): the caller's GEMM runs.
    if (status != HIPBLAS_STATUS_NOT_SUPPORTED) c.check(status, "hipblasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
    p->usable = status == HIPBLAS_STATUS_SUCCESS && returned > 0 && result.state == HIPBLAS_STATUS_SUCCESS;
    p->algo = result.algo;
    return *plans.emplace(key, std::move(p)).first->second;
  }
};

#else

// An AMD build without hipBLASLt: rocBLAS has no fused bias, so no plans.
struct ROCmBLAS::Lt {};

#endif

bool ROCmBLAS::try_gemm_bias(const char* op, DType dtype, rocblas_operation trans_a, rocblas_operation trans_b,
                             int M, int N, int K, const void* A, int lda, const void* B, int ldb, const void* bias,
                             bool relu, void* C, int ldc, bool tf32) {
  PF_CHECK(is_floating(dtype), TypeError, "ROCmBLAS::try_gemm_bias: ", dtype, " is not a float dtype");
#if PYFLAME_WITH_BLASLT
  // The heuristic fails on a dimension of 1 (PyTorch's addmm keeps those from Lt too).
  if (M <= 1 || N <= 1 || K <= 1) return false;
#if !defined(PYFLAME_HIP_NVIDIA)
  // hipBLASLt has TF32 only over cuBLAS (hipblas-common.h): float32 stays full precision on AMD, as with rocBLAS.
  tf32 = false;
#endif
  if (!lt_) lt_ = std::make_unique<Lt>();
  const LtKey key{dtype, dtype == DType::Float32 && tf32, relu, lt_operation(trans_a), lt_operation(trans_b), M, N, K,
                  lda, ldb, ldc, alignment(A), alignment(B), std::min(alignment(C), alignment(bias))};
  LtPlan& p = lt_->plan(key, op);
  if (!p.usable) return false;
  const LtCall c{key, op};
  LT_CHECK(c, hipblasLtMatmulDescSetAttribute(p.desc, HIPBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const bool f64 = dtype == DType::Float64;
  const float one32 = 1.0f, zero32 = 0.0f;
  const double one64 = 1.0, zero64 = 0.0;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  const hipblasStatus_t status = hipblasLtMatmul(lt_->handle, p.desc, alpha, A, p.a, B, p.b, beta, C, p.d, C, p.d,
                                                 &p.algo, stream_workspace(), kWorkspaceBytes, stream_);
  // An algorithm the heuristic offered may still refuse the call before launching
  // anything (PyTorch then falls back to the unfused GEMM too): the problem stays with it.
  if (status == HIPBLAS_STATUS_NOT_SUPPORTED) {
    p.usable = false;
    return false;
  }
  c.check(status, "hipblasLtMatmul", __FILE__, __LINE__);
  return true;
#else
  return false;
#endif
}

ROCmBLAS& get_blas() { return LibraryHandles<ROCmBLAS>::get(); }

void release_blas() { LibraryHandles<ROCmBLAS>::release(); }

namespace {

rocblas_operation op_of(const MatrixLayout& l) { return l.trans ? rocblas_operation_transpose : rocblas_operation_none; }

// matmul / batch_matmul on the device. A row-major product C = A B is the
// column-major product C^T = B^T A^T, so B goes first. Batch dims that
// flatten to one stride in both operands become one strided-batched call. An
// operand whose batch dims do not (attention's q, k and v, permuted views of
// one projection) arrives copied into batch order (matmul_operand_needs_copy),
// as PyTorch's matmul copies it: one pass over it instead of a GEMM launch per
// outer batch (a 64-image ViT ran 768 small GEMMs a step). Outer dims beyond
// INT_MAX batches loop.
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

// linear on the device: y (m, n) = x (m, k) w (n, k)^T + b, the op layer having
// flattened x's batch dims (modules_ops.cpp); x and w in any strides, a 0-d bias
// expanded to (n). As matmul of x and w^T: column-major, y^T = op(w^T) op(x^T),
// and the bias one value per row of y^T. Where the library adds the bias in the
// GEMM (try_gemm_bias) that is one call; otherwise the bias is written into y and
// the GEMM accumulates onto it (beta = 1), as the CPU kernel and PyTorch's
// unfused addmm do: still no separate pass of an add. linear_relu asks for the ReLU
// in the same epilogue; where the library has none for the problem, a pass of relu's
// functor follows the GEMM (relu_in_place, kernels/matmul.hip). One row of x (a decode
// step at batch 1) goes to the GEMV kernel (kernels/gemv.hip), which reads w faster than the library.
void linear_entry(OpCall& call) {
  Tensor x = call.inputs[0];
  Tensor w_t = call.inputs[1].transpose(0, 1);
  Tensor& out = call.out();
  if (out.numel() == 0) return;
  const bool relu = call.op == ir::OpType::linear_relu;
  const int64_t m = x.size(0), k = x.size(1), n = out.size(1);
  for (int64_t s : {m, n, k})
    PF_CHECK(s <= INT_MAX, NotSupportedError, op_name(call.op), ": matrix dimension ", s,
             " exceeds the GPU BLAS limit of 2^31-1 (input ", x.shape(), ", weight ", call.inputs[1].shape(), ")");
  DeviceGuard guard(out.device().index);
  // The epilogue reads the bias packed; a 0-d bias comes expanded (stride 0). A bias of the
  // result's shape (infer_linear) is one value per output: the GEMV's epilogue adds it for a
  // row (m == 1); otherwise the GEMM accumulates onto it.
  Tensor bias = call.inputs[2].defined() ? call.inputs[2].contiguous() : Tensor();
  const bool vector_bias = bias.defined() && bias.dim() == 1;
  if (bias.defined() && !vector_bias) bias = bias.reshape(out.shape());
  if (k == 0) {  // empty sums; BLAS wants leading dimensions of at least 1
    if (bias.defined()) out.copy_(bias.expand(out.shape()));
    else out.fill_(Scalar(0.0));
    if (relu) relu_in_place(out, op_name(call.op));
    return;
  }
  if (!relu) {
    const std::vector<GemvProblem> part{{&call.inputs[1], bias.defined() ? &bias : nullptr, &out}};
    if (gemv_serves(x, part)) return gemv(x, part, op_name(call.op));
  }
  const MatrixLayout lx = matrix_layout(x), lw = matrix_layout(w_t);
  for (int64_t ld : {lx.ld, lw.ld})
    PF_CHECK(ld <= INT_MAX, NotSupportedError, op_name(call.op), ": a row stride of ", ld,
             " exceeds the GPU BLAS limit of 2^31-1; make the operand contiguous first");
  ROCmBLAS& blas = get_blas();
  const int M = static_cast<int>(n), N = static_cast<int>(m), K = static_cast<int>(k);
  if (vector_bias && blas.try_gemm_bias(op_name(call.op), x.dtype(), op_of(lw), op_of(lx), M, N, K,
                                           w_t.data_ptr(), static_cast<int>(lw.ld), x.data_ptr(),
                                           static_cast<int>(lx.ld), bias.data_ptr(), relu, out.data_ptr(), M,
                                           allow_tf32()))
    return;
  if (bias.defined()) out.copy_(bias.expand(out.shape()));
  blas.gemm_ex(x.dtype(), op_of(lw), op_of(lx), M, N, K, 1.0, w_t.data_ptr(), static_cast<int>(lw.ld), 0,
               x.data_ptr(), static_cast<int>(lx.ld), 0, bias.defined() ? 1.0 : 0.0, out.data_ptr(), M, 0, 1,
               allow_tf32());
  if (relu) relu_in_place(out, op_name(call.op));
}

// grouped_linear on the device: (x, norm_weight, weight0, bias0, ...), one output each (one under
// SwiGLU). One GEMV launch for all weights, the norm and the SwiGLU where it serves the call (a
// decode step); otherwise the norm's kernel, each weight's linear and the SwiGLU's fused kernel.
void grouped_linear_entry(OpCall& call) {
  const auto& a = call.attr<GroupedLinearAttrs>();
  const size_t pairs = (call.inputs.size() - 2) / 2;
  std::vector<Tensor> biases;  // packed, as linear's epilogue reads them
  for (size_t i = 0; i < pairs; ++i) {
    const Tensor& bias = call.inputs[3 + 2 * i];
    biases.push_back(bias.defined() ? bias.contiguous() : Tensor());
  }
  GemvFusion fusion{a.rms_norm, call.inputs[1].defined() ? &call.inputs[1] : nullptr, a.eps,
                    a.swiglu ? &call.outputs[0] : nullptr};
  std::vector<GemvProblem> parts;
  for (size_t i = 0; i < pairs; ++i)
    parts.push_back({&call.inputs[2 + 2 * i], biases[i].defined() ? &biases[i] : nullptr,
                     a.swiglu ? nullptr : &call.outputs[i]});
  const Tensor& x = call.inputs[0];
  if (gemv_serves(x, parts, fusion)) return gemv(x, parts, op_name(call.op), fusion);
  const Tensor input = a.rms_norm ? rms_norm(x, {x.size(-1)}, call.inputs[1], a.eps) : x;
  std::vector<Tensor> products(pairs);
  for (size_t i = 0; i < pairs; ++i) {
    products[i] = a.swiglu ? Tensor::empty(call.outputs[0].shape(), x.dtype(), x.device()) : call.outputs[i];
    OpCall one{ir::OpType::linear, {input, call.inputs[2 + 2 * i], call.inputs[3 + 2 * i]}, NoAttrs{}, {products[i]}};
    linear_entry(one);
  }
  if (a.swiglu) {
    FusedElementwiseAttrs swiglu;
    swiglu.steps = {{ir::OpType::silu, {0}, {}}, {ir::OpType::mul, {-1, 1}, {}}};
    apply({ir::OpType::fused_elementwise, {products[0], products[1]}, std::move(swiglu), {call.outputs[0]}});
  }
}

PF_REGISTER_KERNEL(matmul, ROCm, &matmul_entry);
PF_REGISTER_KERNEL(batch_matmul, ROCm, &matmul_entry);
PF_REGISTER_KERNEL(linear, ROCm, &linear_entry);
PF_REGISTER_KERNEL(linear_relu, ROCm, &linear_entry);
PF_REGISTER_KERNEL(grouped_linear, ROCm, &grouped_linear_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
