#pragma once
// The vendor mapping of the GPU libraries, as hip_compat.h is the runtime's:
// the BLAS and DNN adapters (blas.cpp, dnn.cpp) are written in rocBLAS and
// MIOpen spelling, which on AMD is the libraries themselves and on NVIDIA is
// mapped here onto cuBLAS and cuDNN (the reverse of ggml's vendors/hip.h).
// Names whose signatures agree are aliases; where they differ (argument order,
// an extra argument), a small inline function with the rocBLAS/MIOpen
// signature calls the NVIDIA one. What the libraries do differently (cuBLAS's
// caller-owned workspace, TF32, cuDNN's math types and algorithm search) is not
// hidden here: the adapters keep a commented #if for each. linear's fused bias is
// written in hipBLASLt's names, mapped here onto cuBLASLt, which hipBLASLt copies.
//
// Where no rocBLAS/MIOpen name fits both, the mapping has a dnn* name of its
// own on both platforms: a convolution's weight is a tensor descriptor in
// MIOpen and a filter descriptor in cuDNN (dnnWeightDescriptor_t and its three
// functions), and cuDNN's convolution descriptor also takes the type it
// accumulates in (dnnInitConvolutionNdDescriptor).

#include <cstdint>
#include <string>

#include "pyflame/backend/rocm/hip_compat.h"

#if defined(PYFLAME_HIP_NVIDIA)

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>

#define PF_BLAS_LIBRARY "cuBLAS"
#define PF_DNN_LIBRARY "cuDNN"

// ---- BLAS: rocBLAS names for cuBLAS
using rocblas_handle = cublasHandle_t;
using rocblas_operation = cublasOperation_t;
using rocblas_status = cublasStatus_t;
using rocblas_datatype = cudaDataType;
enum rocblas_gemm_algo { rocblas_gemm_algo_standard };  // cuBLAS: CUBLAS_GEMM_DEFAULT

constexpr rocblas_operation rocblas_operation_none = CUBLAS_OP_N;
constexpr rocblas_operation rocblas_operation_transpose = CUBLAS_OP_T;
constexpr rocblas_status rocblas_status_success = CUBLAS_STATUS_SUCCESS;
constexpr rocblas_status rocblas_status_memory_error = CUBLAS_STATUS_ALLOC_FAILED;
constexpr rocblas_datatype rocblas_datatype_f16_r = CUDA_R_16F;
constexpr rocblas_datatype rocblas_datatype_bf16_r = CUDA_R_16BF;
constexpr rocblas_datatype rocblas_datatype_f32_r = CUDA_R_32F;
constexpr rocblas_datatype rocblas_datatype_f64_r = CUDA_R_64F;

#define rocblas_create_handle cublasCreate
#define rocblas_destroy_handle cublasDestroy
#define rocblas_set_stream cublasSetStream
#define rocblas_sgeam cublasSgeam
inline const char* rocblas_status_to_string(rocblas_status s) { return cublasGetStatusName(s); }

// rocBLAS computes in a data type and writes a separate D (here always C);
// cuBLAS computes in a compute type, into C.
inline cublasComputeType_t cublas_compute_type(rocblas_datatype compute) {
  return compute == CUDA_R_64F ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
}
inline rocblas_status rocblas_gemm_ex(rocblas_handle handle, rocblas_operation trans_a, rocblas_operation trans_b,
                                      int m, int n, int k, const void* alpha, const void* a, rocblas_datatype a_type,
                                      int lda, const void* b, rocblas_datatype b_type, int ldb, const void* beta,
                                      const void* /*c*/, rocblas_datatype /*c_type*/, int /*ldc*/, void* d,
                                      rocblas_datatype d_type, int ldd, rocblas_datatype compute, rocblas_gemm_algo,
                                      int32_t /*solution_index*/, uint32_t /*flags*/) {
  return cublasGemmEx(handle, trans_a, trans_b, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, d, d_type, ldd,
                      cublas_compute_type(compute), CUBLAS_GEMM_DEFAULT);
}
inline rocblas_status rocblas_gemm_strided_batched_ex(
    rocblas_handle handle, rocblas_operation trans_a, rocblas_operation trans_b, int m, int n, int k,
    const void* alpha, const void* a, rocblas_datatype a_type, int lda, int64_t stride_a, const void* b,
    rocblas_datatype b_type, int ldb, int64_t stride_b, const void* beta, const void* /*c*/,
    rocblas_datatype /*c_type*/, int /*ldc*/, int64_t /*stride_c*/, void* d, rocblas_datatype d_type, int ldd,
    int64_t stride_d, int batch_count, rocblas_datatype compute, rocblas_gemm_algo, int32_t /*solution_index*/,
    uint32_t /*flags*/) {
  return cublasGemmStridedBatchedEx(handle, trans_a, trans_b, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb,
                                    stride_b, beta, d, d_type, ldd, stride_d, batch_count,
                                    cublas_compute_type(compute), CUBLAS_GEMM_DEFAULT);
}

// ---- BLASLt: hipBLASLt names for cuBLASLt (linear's GEMM with the bias in its
// epilogue). hipBLASLt copies cuBLASLt's API, so these are aliases throughout.
#define PF_BLASLT_LIBRARY "cuBLASLt"
using hipblasLtHandle_t = cublasLtHandle_t;
using hipblasLtMatmulDesc_t = cublasLtMatmulDesc_t;
using hipblasLtMatrixLayout_t = cublasLtMatrixLayout_t;
using hipblasLtMatmulPreference_t = cublasLtMatmulPreference_t;
using hipblasLtMatmulAlgo_t = cublasLtMatmulAlgo_t;
using hipblasLtMatmulHeuristicResult_t = cublasLtMatmulHeuristicResult_t;
using hipblasLtEpilogue_t = cublasLtEpilogue_t;
using hipblasStatus_t = cublasStatus_t;
using hipblasComputeType_t = cublasComputeType_t;
using hipblasOperation_t = cublasOperation_t;
using hipDataType = cudaDataType;

constexpr hipblasStatus_t HIPBLAS_STATUS_SUCCESS = CUBLAS_STATUS_SUCCESS;
constexpr hipblasStatus_t HIPBLAS_STATUS_ALLOC_FAILED = CUBLAS_STATUS_ALLOC_FAILED;
constexpr hipblasStatus_t HIPBLAS_STATUS_NOT_SUPPORTED = CUBLAS_STATUS_NOT_SUPPORTED;
constexpr hipblasOperation_t HIPBLAS_OP_N = CUBLAS_OP_N;
constexpr hipblasOperation_t HIPBLAS_OP_T = CUBLAS_OP_T;
constexpr hipblasComputeType_t HIPBLAS_COMPUTE_32F = CUBLAS_COMPUTE_32F;
constexpr hipblasComputeType_t HIPBLAS_COMPUTE_32F_FAST_TF32 = CUBLAS_COMPUTE_32F_FAST_TF32;
constexpr hipblasComputeType_t HIPBLAS_COMPUTE_64F = CUBLAS_COMPUTE_64F;
constexpr hipDataType HIP_R_16F = CUDA_R_16F;
constexpr hipDataType HIP_R_16BF = CUDA_R_16BF;
constexpr hipDataType HIP_R_32F = CUDA_R_32F;
constexpr hipDataType HIP_R_64F = CUDA_R_64F;
constexpr hipblasLtEpilogue_t HIPBLASLT_EPILOGUE_BIAS = CUBLASLT_EPILOGUE_BIAS;
constexpr hipblasLtEpilogue_t HIPBLASLT_EPILOGUE_RELU_BIAS = CUBLASLT_EPILOGUE_RELU_BIAS;
constexpr cublasLtMatmulDescAttributes_t HIPBLASLT_MATMUL_DESC_TRANSA = CUBLASLT_MATMUL_DESC_TRANSA;
constexpr cublasLtMatmulDescAttributes_t HIPBLASLT_MATMUL_DESC_TRANSB = CUBLASLT_MATMUL_DESC_TRANSB;
constexpr cublasLtMatmulDescAttributes_t HIPBLASLT_MATMUL_DESC_EPILOGUE = CUBLASLT_MATMUL_DESC_EPILOGUE;
constexpr cublasLtMatmulDescAttributes_t HIPBLASLT_MATMUL_DESC_BIAS_POINTER = CUBLASLT_MATMUL_DESC_BIAS_POINTER;
constexpr cublasLtMatmulPreferenceAttributes_t HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES =
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES;

#define hipblasLtCreate cublasLtCreate
#define hipblasLtDestroy cublasLtDestroy
#define hipblasLtMatmulDescCreate cublasLtMatmulDescCreate
#define hipblasLtMatmulDescDestroy cublasLtMatmulDescDestroy
#define hipblasLtMatmulDescSetAttribute cublasLtMatmulDescSetAttribute
#define hipblasLtMatrixLayoutCreate cublasLtMatrixLayoutCreate
#define hipblasLtMatrixLayoutDestroy cublasLtMatrixLayoutDestroy
#define hipblasLtMatmulPreferenceCreate cublasLtMatmulPreferenceCreate
#define hipblasLtMatmulPreferenceDestroy cublasLtMatmulPreferenceDestroy
#define hipblasLtMatmulPreferenceSetAttribute cublasLtMatmulPreferenceSetAttribute
#define hipblasLtMatmulAlgoGetHeuristic cublasLtMatmulAlgoGetHeuristic
#define hipblasLtMatmul cublasLtMatmul
inline std::string hipblaslt_status_name(hipblasStatus_t s) { return cublasGetStatusName(s); }

// ---- DNN: MIOpen names for cuDNN
using miopenHandle_t = cudnnHandle_t;
using miopenStatus_t = cudnnStatus_t;
using miopenDataType_t = cudnnDataType_t;
using miopenTensorDescriptor_t = cudnnTensorDescriptor_t;
using miopenConvolutionDescriptor_t = cudnnConvolutionDescriptor_t;
using miopenConvFwdAlgorithm_t = cudnnConvolutionFwdAlgo_t;
using miopenConvBwdDataAlgorithm_t = cudnnConvolutionBwdDataAlgo_t;
using miopenConvBwdWeightsAlgorithm_t = cudnnConvolutionBwdFilterAlgo_t;
using dnnWeightDescriptor_t = cudnnFilterDescriptor_t;

constexpr miopenStatus_t miopenStatusSuccess = CUDNN_STATUS_SUCCESS;
constexpr miopenStatus_t miopenStatusAllocFailed = CUDNN_STATUS_ALLOC_FAILED;
constexpr miopenStatus_t miopenStatusUnsupportedOp = CUDNN_STATUS_NOT_SUPPORTED;
constexpr miopenDataType_t miopenHalf = CUDNN_DATA_HALF;
constexpr miopenDataType_t miopenBFloat16 = CUDNN_DATA_BFLOAT16;
constexpr miopenDataType_t miopenFloat = CUDNN_DATA_FLOAT;
constexpr miopenDataType_t miopenDouble = CUDNN_DATA_DOUBLE;

#define miopenGetErrorString cudnnGetErrorString
#define miopenCreate cudnnCreate
#define miopenDestroy cudnnDestroy
#define miopenSetStream cudnnSetStream
#define miopenCreateTensorDescriptor cudnnCreateTensorDescriptor
#define miopenDestroyTensorDescriptor cudnnDestroyTensorDescriptor
#define miopenCreateConvolutionDescriptor cudnnCreateConvolutionDescriptor
#define miopenDestroyConvolutionDescriptor cudnnDestroyConvolutionDescriptor
#define miopenSetConvolutionGroupCount cudnnSetConvolutionGroupCount
#define miopenSetTensorDescriptor cudnnSetTensorNdDescriptor

// MIOpen's convolution mode miopenConvolution is cuDNN's cross-correlation;
// cuDNN also takes the type it accumulates in.
inline miopenStatus_t dnnInitConvolutionNdDescriptor(miopenConvolutionDescriptor_t d, int spatial_dims,
                                                     const int* padding, const int* stride, const int* dilation,
                                                     miopenDataType_t accumulate) {
  return cudnnSetConvolutionNdDescriptor(d, spatial_dims, padding, stride, dilation, CUDNN_CROSS_CORRELATION,
                                         accumulate);
}
inline miopenStatus_t miopenConvolutionForward(miopenHandle_t handle, const void* alpha,
                                               miopenTensorDescriptor_t x_desc, const void* x,
                                               dnnWeightDescriptor_t w_desc, const void* w,
                                               miopenConvolutionDescriptor_t conv, miopenConvFwdAlgorithm_t algo,
                                               const void* beta, miopenTensorDescriptor_t y_desc, void* y,
                                               void* workspace, size_t workspace_size) {
  return cudnnConvolutionForward(handle, alpha, x_desc, x, w_desc, w, conv, algo, workspace, workspace_size, beta,
                                 y_desc, y);
}
inline miopenStatus_t miopenConvolutionBackwardData(miopenHandle_t handle, const void* alpha,
                                                    miopenTensorDescriptor_t dy_desc, const void* dy,
                                                    dnnWeightDescriptor_t w_desc, const void* w,
                                                    miopenConvolutionDescriptor_t conv,
                                                    miopenConvBwdDataAlgorithm_t algo, const void* beta,
                                                    miopenTensorDescriptor_t dx_desc, void* dx, void* workspace,
                                                    size_t workspace_size) {
  return cudnnConvolutionBackwardData(handle, alpha, w_desc, w, dy_desc, dy, conv, algo, workspace, workspace_size,
                                      beta, dx_desc, dx);
}

inline miopenStatus_t miopenConvolutionBackwardWeights(miopenHandle_t handle, const void* alpha,
                                                       miopenTensorDescriptor_t dy_desc, const void* dy,
                                                       miopenTensorDescriptor_t x_desc, const void* x,
                                                       miopenConvolutionDescriptor_t conv,
                                                       miopenConvBwdWeightsAlgorithm_t algo, const void* beta,
                                                       dnnWeightDescriptor_t dw_desc, void* dw, void* workspace,
                                                       size_t workspace_size) {
  return cudnnConvolutionBackwardFilter(handle, alpha, x_desc, x, dy_desc, dy, conv, algo, workspace, workspace_size,
                                        beta, dw_desc, dw);
}

// ---- DNN beyond convolution: pooling, batch norm, activation, softmax, reduction
using miopenPoolingDescriptor_t = cudnnPoolingDescriptor_t;
using miopenPoolingMode_t = cudnnPoolingMode_t;
using miopenBatchNormMode_t = cudnnBatchNormMode_t;
using miopenActivationDescriptor_t = cudnnActivationDescriptor_t;
using miopenActivationMode_t = cudnnActivationMode_t;
using miopenSoftmaxAlgorithm_t = cudnnSoftmaxAlgorithm_t;
using miopenSoftmaxMode_t = cudnnSoftmaxMode_t;
using miopenReduceTensorDescriptor_t = cudnnReduceTensorDescriptor_t;
using miopenReduceTensorOp_t = cudnnReduceTensorOp_t;
using miopenNanPropagation_t = cudnnNanPropagation_t;
using miopenReduceTensorIndices_t = cudnnReduceTensorIndices_t;
using miopenIndicesType_t = cudnnIndicesType_t;

// MIOpen's miopenPoolingAverage leaves the padding out of the count.
constexpr miopenPoolingMode_t miopenPoolingMax = CUDNN_POOLING_MAX;
constexpr miopenPoolingMode_t miopenPoolingAverage = CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
constexpr miopenPoolingMode_t miopenPoolingAverageInclusive = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
constexpr miopenBatchNormMode_t miopenBNSpatial = CUDNN_BATCHNORM_SPATIAL;
constexpr miopenActivationMode_t miopenActivationLOGISTIC = CUDNN_ACTIVATION_SIGMOID;
constexpr miopenActivationMode_t miopenActivationTANH = CUDNN_ACTIVATION_TANH;
constexpr miopenActivationMode_t miopenActivationRELU = CUDNN_ACTIVATION_RELU;
constexpr miopenActivationMode_t miopenActivationELU = CUDNN_ACTIVATION_ELU;
constexpr miopenSoftmaxAlgorithm_t MIOPEN_SOFTMAX_ACCURATE = CUDNN_SOFTMAX_ACCURATE;
constexpr miopenSoftmaxAlgorithm_t MIOPEN_SOFTMAX_LOG = CUDNN_SOFTMAX_LOG;
constexpr miopenSoftmaxMode_t MIOPEN_SOFTMAX_MODE_CHANNEL = CUDNN_SOFTMAX_MODE_CHANNEL;
constexpr miopenReduceTensorOp_t MIOPEN_REDUCE_TENSOR_ADD = CUDNN_REDUCE_TENSOR_ADD;
constexpr miopenReduceTensorOp_t MIOPEN_REDUCE_TENSOR_MUL = CUDNN_REDUCE_TENSOR_MUL;
constexpr miopenReduceTensorOp_t MIOPEN_REDUCE_TENSOR_MIN = CUDNN_REDUCE_TENSOR_MIN;
constexpr miopenReduceTensorOp_t MIOPEN_REDUCE_TENSOR_MAX = CUDNN_REDUCE_TENSOR_MAX;
constexpr miopenReduceTensorOp_t MIOPEN_REDUCE_TENSOR_AVG = CUDNN_REDUCE_TENSOR_AVG;
constexpr miopenNanPropagation_t MIOPEN_NOT_PROPAGATE_NAN = CUDNN_NOT_PROPAGATE_NAN;
constexpr miopenNanPropagation_t MIOPEN_PROPAGATE_NAN = CUDNN_PROPAGATE_NAN;
constexpr miopenReduceTensorIndices_t MIOPEN_REDUCE_TENSOR_NO_INDICES = CUDNN_REDUCE_TENSOR_NO_INDICES;
constexpr miopenIndicesType_t MIOPEN_32BIT_INDICES = CUDNN_32BIT_INDICES;

#define miopenCreatePoolingDescriptor cudnnCreatePoolingDescriptor
#define miopenDestroyPoolingDescriptor cudnnDestroyPoolingDescriptor
#define miopenDeriveBNTensorDescriptor cudnnDeriveBNTensorDescriptor
#define miopenBatchNormalizationForwardTraining cudnnBatchNormalizationForwardTraining
#define miopenBatchNormalizationForwardInference cudnnBatchNormalizationForwardInference
#define miopenCreateActivationDescriptor cudnnCreateActivationDescriptor
#define miopenDestroyActivationDescriptor cudnnDestroyActivationDescriptor
#define miopenActivationForward cudnnActivationForward
#define miopenCreateReduceTensorDescriptor cudnnCreateReduceTensorDescriptor
#define miopenDestroyReduceTensorDescriptor cudnnDestroyReduceTensorDescriptor
#define miopenSetReduceTensorDescriptor cudnnSetReduceTensorDescriptor
#define miopenGetReductionWorkspaceSize cudnnGetReductionWorkspaceSize
#define miopenReduceTensor cudnnReduceTensor

// cuDNN asks how max pooling treats NaN: as PyTorch, a NaN in the window is the maximum.
inline miopenStatus_t miopenSet2dPoolingDescriptor(miopenPoolingDescriptor_t d, miopenPoolingMode_t mode,
                                                   int window_h, int window_w, int pad_h, int pad_w, int stride_h,
                                                   int stride_w) {
  return cudnnSetPooling2dDescriptor(d, mode, CUDNN_PROPAGATE_NAN, window_h, window_w, pad_h, pad_w, stride_h,
                                     stride_w);
}
// MIOpen's forward can save the argmax positions for its backward in a
// workspace; cuDNN's backward finds them again from x and y.
inline miopenStatus_t miopenPoolingForward(miopenHandle_t handle, miopenPoolingDescriptor_t pool, const void* alpha,
                                           miopenTensorDescriptor_t x_desc, const void* x, const void* beta,
                                           miopenTensorDescriptor_t y_desc, void* y, bool /*do_backward*/,
                                           void* /*workspace*/, size_t /*workspace_size*/) {
  return cudnnPoolingForward(handle, pool, alpha, x_desc, x, beta, y_desc, y);
}
// MIOpen's activation takes three coefficients (tanh is beta * tanh(alpha * x),
// ELU's alpha is alpha); cuDNN one (ELU's alpha, clipped ReLU's ceiling) and a NaN policy.
inline miopenStatus_t miopenSetActivationDescriptor(miopenActivationDescriptor_t d, miopenActivationMode_t mode,
                                                    double alpha, double /*beta*/, double /*gamma*/) {
  return cudnnSetActivationDescriptor(d, mode, CUDNN_PROPAGATE_NAN, alpha);
}
inline miopenStatus_t miopenSoftmaxForward_V2(miopenHandle_t handle, const void* alpha,
                                              miopenTensorDescriptor_t x_desc, const void* x, const void* beta,
                                              miopenTensorDescriptor_t y_desc, void* y,
                                              miopenSoftmaxAlgorithm_t algorithm, miopenSoftmaxMode_t mode) {
  return cudnnSoftmaxForward(handle, algorithm, mode, alpha, x_desc, x, beta, y_desc, y);
}

inline miopenStatus_t dnnCreateWeightDescriptor(dnnWeightDescriptor_t* d) { return cudnnCreateFilterDescriptor(d); }
inline miopenStatus_t dnnDestroyWeightDescriptor(dnnWeightDescriptor_t d) { return cudnnDestroyFilterDescriptor(d); }
// A cuDNN filter is always packed in its format (NCHW here: NCDHW for 5 dims).
inline miopenStatus_t dnnSetWeightDescriptor(dnnWeightDescriptor_t d, miopenDataType_t t, int dims, const int* sizes,
                                             const int* /*packed strides*/) {
  return cudnnSetFilterNdDescriptor(d, t, CUDNN_TENSOR_NCHW, dims, sizes);
}

#else  // AMD

#include <rocblas/rocblas.h>

#define PF_BLAS_LIBRARY "rocBLAS"
#define PF_DNN_LIBRARY "MIOpen"

// hipBLASLt is optional on AMD: the BLAS adapter uses it for linear's fused bias
// where CMake found it (PYFLAME_WITH_BLASLT; its API of ROCm 6 and later, with
// hipDataType and hipblasComputeType_t). hipblas-common names no status.
#if PYFLAME_WITH_BLASLT
#include <hipblaslt/hipblaslt.h>

#define PF_BLASLT_LIBRARY "hipBLASLt"
inline std::string hipblaslt_status_name(hipblasStatus_t s) { return "hipblasStatus_t " + std::to_string(s); }
#endif

// MIOpen is optional on AMD (it is packaged nowhere; the build leaves the DNN
// adapter out without it), so the BLAS adapter must compile without it.
#if __has_include(<miopen/miopen.h>)
#include <miopen/miopen.h>

using dnnWeightDescriptor_t = miopenTensorDescriptor_t;

inline miopenStatus_t dnnInitConvolutionNdDescriptor(miopenConvolutionDescriptor_t d, int spatial_dims,
                                                     const int* padding, const int* stride, const int* dilation,
                                                     miopenDataType_t /*accumulate: MIOpen chooses*/) {
  return miopenInitConvolutionNdDescriptor(d, spatial_dims, padding, stride, dilation, miopenConvolution);
}
inline miopenStatus_t dnnCreateWeightDescriptor(dnnWeightDescriptor_t* d) { return miopenCreateTensorDescriptor(d); }
inline miopenStatus_t dnnDestroyWeightDescriptor(dnnWeightDescriptor_t d) { return miopenDestroyTensorDescriptor(d); }
inline miopenStatus_t dnnSetWeightDescriptor(dnnWeightDescriptor_t d, miopenDataType_t t, int dims, const int* sizes,
                                             const int* strides) {
  return miopenSetTensorDescriptor(d, t, dims, sizes, strides);
}
#endif  // MIOpen

#endif
