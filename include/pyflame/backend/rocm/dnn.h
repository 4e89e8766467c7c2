#pragma once
// ROCmDNN (seed 000): the DNN adapter of the ROCm backend — MIOpen on AMD,
// cuDNN on NVIDIA. It is written in MIOpen's names; lib_compat.h maps them
// onto cuDNN on NVIDIA (the handle and status types below are cuDNN's there).
//
// cuDNN is used through its descriptor API (kept in cuDNN 9 beside the graph
// API) because it maps one to one onto MIOpen's: descriptors, a find or
// heuristic step choosing an algorithm, a workspace query and the call. The
// convolutions on NVIDIA try cuDNN's graph API first (execution plans of its
// heuristics' engine configurations, which reach kernels the descriptor API's
// algorithms do not) and fall back on the descriptor API (dnn.cpp). The
// choice per problem and direction lives in the MIOpenTuningCache (tuning.h);
// the problem's descriptors (and plan) are made on its first call and kept by
// the instance, so a call looks both up and runs.
//
// Provided now: N-D convolution (2-D and 3-D) forward — pf.conv2d, conv1d and
// conv3d on the device —, its backward data, which is the transposed
// convolution: pf.conv_transpose2d on the device, and its backward weights:
// pf.conv_weight_backward (what autograd runs for a convolution's weight).
// And the spec's other entry points, each one library call on packed
// tensors: pooling2d_forward, batchnorm_forward_training/inference,
// activation_forward, softmax_forward and reduce. The ops (pf.max_pool2d,
// pf.batch_norm, ...) run the project's own kernels; benchmarks/
// rocm_benchmark.py --dnn times both on the same inputs.
// One instance per device and thread; get_dnn() returns the current device's,
// bound to the current stream.

#include <cstdint>
#include <memory>
#include <vector>

#include "pyflame/backend/rocm/hip_compat.h"
#include "pyflame/backend/rocm/lib_compat.h"
#include "pyflame/backend/rocm/tuning.h"
#include "pyflame/dtype.h"
#include "pyflame/error.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame::backend::rocm {

[[noreturn]] PF_API void throw_dnn_error(miopenStatus_t status, const char* call, const char* file, int line);

inline void check_dnn(miopenStatus_t status, const char* call, const char* file, int line) {
  if (status != miopenStatusSuccess) throw_dnn_error(status, call, file, line);
}

// One entry per spatial dim (2 or 3) in padding, stride and dilation.
struct PF_API ConvParams {
  std::vector<int> padding;   // symmetric, per spatial dim
  std::vector<int> stride;
  std::vector<int> dilation;
  int groups = 1;

  static ConvParams Conv2D(int pad_h, int pad_w, int stride_h = 1, int stride_w = 1, int dilation_h = 1,
                           int dilation_w = 1, int groups = 1);
};

// Pooling over the 2 spatial dims: one entry per dim in kernel_size, padding
// and stride (no dilation: neither library has it for pooling).
struct PF_API PoolParams {
  std::vector<int> kernel_size;
  std::vector<int> padding;  // symmetric, at most half the kernel (as PyTorch)
  std::vector<int> stride;
  bool ceil_mode = false;
  // Average pooling divides by the whole window, padding included (PyTorch's default), or by its part in the input.
  bool count_include_pad = true;

  static PoolParams Pool2D(int kernel_h, int kernel_w, int pad_h = 0, int pad_w = 0, int stride_h = 1,
                           int stride_w = 1);
};

// The descriptors of one convolution problem, and its direction: forward,
// backward data or backward weights (dnn.cpp).
struct ConvProblem;
enum class ConvDirection;

class PF_API ROCmDNN {
 public:
  ROCmDNN();  // for the current device
  ~ROCmDNN();
  ROCmDNN(const ROCmDNN&) = delete;
  ROCmDNN& operator=(const ROCmDNN&) = delete;

  void set_stream(hipStream_t stream);
  miopenHandle_t handle() const { return handle_; }

  // output = conv(input, weight): input (N, C, spatial...), weight (O, C/groups,
  // kernel...), output (N, O, spatial...) with 2 or 3 spatial dims, all
  // contiguous and of `dtype`. The algorithm comes from the tuning cache
  // (searched on first use of a problem). `workspace` must hold at least
  // conv_forward_workspace_size(...) bytes.
  void conv_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                    const std::vector<int64_t>& weight_shape, const void* weight,
                    const std::vector<int64_t>& output_shape, void* output, const ConvParams& params,
                    void* workspace, size_t workspace_size);

  // The same, with the workspace taken from the caching allocator (stream
  // ordered): one algorithm lookup per call. pf.conv1d/2d/3d run this.
  void conv_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                    const std::vector<int64_t>& weight_shape, const void* weight,
                    const std::vector<int64_t>& output_shape, void* output, const ConvParams& params);

  // The workspace the chosen algorithm (or cuDNN graph plan) needs. The first
  // call for a problem chooses it (a timed search runs on scratch buffers).
  size_t conv_forward_workspace_size(DType dtype, const std::vector<int64_t>& input_shape,
                                     const std::vector<int64_t>& weight_shape,
                                     const std::vector<int64_t>& output_shape, const ConvParams& params);

  // The spec's 2-D entry points (seed 000): conv_forward and its workspace
  // size for (N, C, H, W) problems; other ranks are a ValueError.
  void conv2d_forward(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                      const std::vector<int64_t>& weight_shape, const void* weight,
                      const std::vector<int64_t>& output_shape, void* output, const ConvParams& params,
                      void* workspace, size_t workspace_size);
  size_t conv2d_forward_workspace_size(DType dtype, const std::vector<int64_t>& input_shape,
                                       const std::vector<int64_t>& weight_shape,
                                       const std::vector<int64_t>& output_shape, const ConvParams& params);

  // The backward data of conv_forward: grad_input = the adjoint of conv(., weight)
  // applied to grad_output, which is the transposed convolution of grad_output.
  // The shapes are the forward convolution's: grad_output (N, O, spatial...),
  // weight (O, C/groups, kernel...), grad_input (N, C, spatial...), where
  // conv_forward of grad_input's shape gives grad_output's. A grad_input larger
  // than the smallest such shape (a transposed convolution's output_padding)
  // is allowed as long as that still holds. The algorithm is searched and
  // cached apart from the forward one's.
  void conv_backward_data(DType dtype, const std::vector<int64_t>& grad_output_shape, const void* grad_output,
                          const std::vector<int64_t>& weight_shape, const void* weight,
                          const std::vector<int64_t>& grad_input_shape, void* grad_input, const ConvParams& params,
                          void* workspace, size_t workspace_size);

  // The same, with the workspace from the caching allocator. pf.conv_transpose2d runs this.
  void conv_backward_data(DType dtype, const std::vector<int64_t>& grad_output_shape, const void* grad_output,
                          const std::vector<int64_t>& weight_shape, const void* weight,
                          const std::vector<int64_t>& grad_input_shape, void* grad_input,
                          const ConvParams& params);

  size_t conv_backward_data_workspace_size(DType dtype, const std::vector<int64_t>& grad_output_shape,
                                           const std::vector<int64_t>& weight_shape,
                                           const std::vector<int64_t>& grad_input_shape, const ConvParams& params);

  // The backward weights of conv_forward: grad_weight = d(sum(grad_output * conv(input,
  // weight)))/d(weight), in the forward's shapes: input (N, C, spatial...),
  // grad_output (N, O, spatial...), grad_weight (O, C/groups, kernel...); the
  // workspace from the caching allocator. pf.conv_weight_backward runs this.
  void conv_backward_weights(DType dtype, const std::vector<int64_t>& input_shape, const void* input,
                             const std::vector<int64_t>& grad_output_shape, const void* grad_output,
                             const std::vector<int64_t>& grad_weight_shape, void* grad_weight,
                             const ConvParams& params);

  // The entry points below take packed tensors of a floating dtype, each with
  // fewer than 2^31 elements and no empty dimension (the libraries' limits);
  // an invalid argument is a ValueError, what the libraries cannot do a
  // NotSupportedError, and a failed call names the call and the shapes.

  // Max (pool_type max_pool2d) or average (avg_pool2d) pooling of (N, C, H, W)
  // into (N, C, H_out, W_out), as pf.max_pool2d / pf.avg_pool2d with dilation 1.
  // output_shape must be the one PyTorch computes; with ceil_mode, a shape
  // the rounding up makes larger is a NotSupportedError (the libraries round down).
  void pooling2d_forward(ir::OpType pool_type, DType dtype, const std::vector<int64_t>& input_shape,
                         const void* input, const std::vector<int64_t>& output_shape, void* output,
                         const PoolParams& params);

  // Batch normalization of x (N, C, spatial...) over all dims but C into y (x's
  // shape), in the arguments' order of MIOpen's miopenBatchNormalizationForward*.
  // scale, bias and the statistics hold C values of the parameter type:
  // float64 for float64 data, float32 otherwise.
  // Training normalizes by the batch's mean and biased variance, updates the
  // running statistics (when not null) with momentum and the unbiased variance,
  // running = (1 - momentum) * running + momentum * batch (as pf.batch_norm),
  // and saves the batch mean and 1 / sqrt(variance + epsilon) (when not null).
  void batchnorm_forward_training(DType dtype, const std::vector<int64_t>& shape, const void* x, void* y,
                                  const void* scale, const void* bias, double momentum, void* running_mean,
                                  void* running_var, double epsilon, void* saved_mean, void* saved_inv_var);
  // Inference normalizes by the running statistics.
  void batchnorm_forward_inference(DType dtype, const std::vector<int64_t>& shape, const void* x, void* y,
                                   const void* scale, const void* bias, const void* running_mean,
                                   const void* running_var, double epsilon);

  // output = activation(input), elementwise, for the activations both
  // libraries have: relu, sigmoid, tanh and elu (alpha is ELU's alpha: pass 1
  // for PyTorch's default; the others ignore it). Others are a NotSupportedError.
  void activation_forward(ir::OpType activation_type, DType dtype, const std::vector<int64_t>& shape,
                          const void* input, void* output, float alpha = 0.0f);

  // Softmax (or log-softmax) of `input` along `axis` (negative counts from the end).
  void softmax_forward(DType dtype, const std::vector<int64_t>& shape, const void* input, void* output,
                       int axis = -1, bool log_softmax = false);

  // output = reduce_type(input) over reduce_dims (negative count from the end),
  // for sum, mean, max, min and prod; max and min propagate NaN. output_shape is
  // the input's with the reduced dims either 1 (keepdim) or left out. At most 8
  // dims. `workspace` must hold at least reduce_workspace_size(...) bytes.
  void reduce(ir::OpType reduce_type, DType dtype, const std::vector<int64_t>& input_shape, const void* input,
              const std::vector<int64_t>& output_shape, void* output, const std::vector<int>& reduce_dims,
              void* workspace, size_t workspace_size);
  size_t reduce_workspace_size(ir::OpType reduce_type, DType dtype, const std::vector<int64_t>& input_shape,
                               const std::vector<int64_t>& output_shape, const std::vector<int>& reduce_dims);
  // The same, with the workspace from the caching allocator.
  void reduce(ir::OpType reduce_type, DType dtype, const std::vector<int64_t>& input_shape, const void* input,
              const std::vector<int64_t>& output_shape, void* output, const std::vector<int>& reduce_dims);

 private:
  // The problem of these shapes and parameters, made on first use and kept
  // (descriptors included) for later calls; invalid ones raise ValueError or
  // NotSupportedError and are not kept.
  const ConvProblem& problem(ConvDirection direction, DType dtype, const std::vector<int64_t>& x_shape,
                             const std::vector<int64_t>& w_shape, const std::vector<int64_t>& y_shape,
                             const ConvParams& params);
  MIOpenTuningCache::Entry choose(const ConvProblem& p);
  // Runs the problem's direction on its operands: forward (x, w) -> y,
  // backward data (dy, w) -> dx, backward weights (x, dy) -> dw.
  void run(const ConvProblem& p, const MIOpenTuningCache::Entry& choice, const void* first, const void* second,
           void* output, void* workspace, size_t workspace_size);
  // The same, with the workspace from the caching allocator.
  void run(const ConvProblem& p, const MIOpenTuningCache::Entry& choice, const void* first, const void* second,
           void* output);

  struct Problems;  // the problems made so far, by shapes, parameters, dtype and direction

  std::unique_ptr<Problems> problems_;
  miopenHandle_t handle_ = nullptr;
  int device_ = 0;
  hipStream_t stream_ = nullptr;
};

PF_API ROCmDNN& get_dnn();
// Destroys this thread's instances; only for leak checkers and tests (see release_blas).
PF_API void release_dnn();

}  // namespace pyflame::backend::rocm

#define MIOPEN_CHECK(call) ::pyflame::backend::rocm::check_dnn((call), #call, __FILE__, __LINE__)
