#pragma once
// The vendor mapping of the GPU libraries, as hip_compat.h is the runtime's:
// the BLAS and DNN adapters (blas.cpp, dnn.cpp) are written in rocBLAS and
// MIOpen spelling, which on AMD is the libraries themselves and on NVIDIA is
// mapped here onto cuBLAS and cuDNN (the reverse of ggml's vendors/hip.h).
// Names whose signatures agree are aliases; where they differ (argument order,
// an extra argument), a small inline function with the rocBLAS/MIOpen
// signature calls the NVIDIA one. What the libraries do differently (cuBLAS's
// caller-owned workspace, TF32, cuDNN's math types and algorithm search) is
// not hidden here: the adapters keep a commented #if for each.
//
// Where no rocBLAS/MIOpen name fits both, the mapping has a dnn* name of its
// own on both platforms: a convolution's weight is a tensor descriptor in
// MIOpen and a filter descriptor in cuDNN (dnnWeightDescriptor_t and its three
// functions), and cuDNN's convolution descriptor also takes the type it
// accumulates in (dnnInitConvolutionNdDescriptor).

#include <cstdint>

#include "pyflame/backend/rocm/hip_compat.h"

#if defined(PYFLAME_HIP_NVIDIA)

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
