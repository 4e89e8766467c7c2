// ROCmDNN's entry points of the spec besides the convolutions (those are in
// dnn.cpp with the op table's convolution kernels): pooling, batch norm,
// activations, softmax and reductions, one library call each, on descriptors
// made for the call (creating one costs far less than the call). They are the
// spec's library adapter: the op table's kernels reach them where the library
// is the faster (avg_pool2d), and rocm_benchmark.py --dnn times them against
// the project's kernels.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "pyflame/backend/rocm/dnn.h"
#include "rocm/device_guard.h"
#include "rocm/dnn_support.h"

namespace pyflame::backend::rocm {

PoolParams PoolParams::Pool2D(int kernel_h, int kernel_w, int pad_h, int pad_w, int stride_h, int stride_w) {
  return PoolParams{{kernel_h, kernel_w}, {pad_h, pad_w}, {stride_h, stride_w}};
}

namespace {

// The ops the libraries share with the op table, and their names there.
struct LibraryActivation {
  ir::OpType op;
  miopenActivationMode_t mode;
  double alpha, beta;
  bool alpha_from_caller;
};
constexpr LibraryActivation kActivations[] = {
    {ir::OpType::relu, miopenActivationRELU, 0, 0, false},
    {ir::OpType::sigmoid, miopenActivationLOGISTIC, 0, 0, false},
    {ir::OpType::tanh, miopenActivationTANH, 1, 1, false},
    {ir::OpType::elu, miopenActivationELU, 0, 0, true},
};

struct LibraryReduction {
  ir::OpType op;
  miopenReduceTensorOp_t mode;
};
constexpr LibraryReduction kReductions[] = {
    {ir::OpType::sum, MIOPEN_REDUCE_TENSOR_ADD}, {ir::OpType::mean, MIOPEN_REDUCE_TENSOR_AVG},
    {ir::OpType::max, MIOPEN_REDUCE_TENSOR_MAX}, {ir::OpType::min, MIOPEN_REDUCE_TENSOR_MIN},
    {ir::OpType::prod, MIOPEN_REDUCE_TENSOR_MUL},
};

template <class Entry, size_t N> const Entry* find_library_op(const Entry (&table)[N], ir::OpType op) {
  for (const Entry& e : table)
    if (e.op == op) return &e;
  return nullptr;
}

// One call of the entry points below, described for messages: a failed
// library call names the op, its shapes and the call (DNN_CHECK_FOR).
struct DnnCall {
  std::string what;
  void check(miopenStatus_t status, const char* call, const char* file, int line) const {
    if (status != miopenStatusSuccess) throw_dnn_error(status, (what + ": " + call).c_str(), file, line);
  }
};

using DnnTensor = Descriptor<miopenTensorDescriptor_t, miopenDestroyTensorDescriptor>;
using DnnPooling = Descriptor<miopenPoolingDescriptor_t, miopenDestroyPoolingDescriptor>;
using DnnActivation = Descriptor<miopenActivationDescriptor_t, miopenDestroyActivationDescriptor>;
using DnnReduction = Descriptor<miopenReduceTensorDescriptor_t, miopenDestroyReduceTensorDescriptor>;

// y = op(x): alpha 1 and beta 0 as the libraries read them, double for
// float64 data and float otherwise. Not const: MIOpen's batch norm takes void*.
struct UnitScale {
  explicit UnitScale(DType d) : f64(d == DType::Float64) {}
  void* alpha() { return f64 ? static_cast<void*>(&one64) : static_cast<void*>(&one32); }
  void* beta() { return f64 ? static_cast<void*>(&zero64) : static_cast<void*>(&zero32); }
  bool f64;
  float one32 = 1.0f, zero32 = 0.0f;
  double one64 = 1.0, zero64 = 0.0;
};

void check_floating(const DnnCall& c, DType d) {
  PF_CHECK(is_floating(d), NotSupportedError, c.what, ": the DNN library takes floating-point tensors only");
}

// A shape as the libraries take it: int sizes, none empty, fewer than 2^31 elements.
std::vector<int> dnn_dims(const DnnCall& c, const std::vector<int64_t>& shape) {
  std::vector<int> dims;
  int64_t numel = 1;
  for (int64_t d : shape) {
    PF_CHECK(d > 0, NotSupportedError, c.what, ": the DNN library takes no empty dimension");
    PF_CHECK(d <= INT32_MAX / numel, NotSupportedError, c.what,
             ": more than 2^31-1 elements, the DNN library's limit per tensor");
    numel *= d;
    dims.push_back(static_cast<int>(d));
  }
  return dims;
}

// Both libraries take tensors of 4 to 8 dims best (cuDNN refuses 2, MIOpen's
// kernels expect N, C and spatial dims): trailing 1s keep a packed layout.
std::vector<int> at_least_4d(std::vector<int> dims) {
  while (dims.size() < 4) dims.push_back(1);
  return dims;
}

int64_t product(const std::vector<int64_t>& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t d = begin; d < end; ++d) n *= shape[d];
  return n;
}

// A packed tensor descriptor of `dims`.
void describe(const DnnCall& c, DnnTensor& t, DType dtype, const std::vector<int>& dims) {
  std::vector<int> strides(dims.size(), 1);
  for (size_t d = dims.size() - 1; d > 0; --d) strides[d - 1] = strides[d] * dims[d];
  DNN_CHECK_FOR(c, miopenCreateTensorDescriptor(t.out()));
  DNN_CHECK_FOR(c, miopenSetTensorDescriptor(t, dnn_type(dtype), static_cast<int>(dims.size()), dims.data(),
                                             strides.data()));
}

// The descriptors of a batch norm of x (N, C, spatial...): x (and y) as at
// least 4 dims, and the parameters' (1, C, 1, ...) derived from it.
struct BatchNormProblem {
  DnnCall call;
  DnnTensor x, params;

  BatchNormProblem(const char* fn, DType dtype, const std::vector<int64_t>& shape, double epsilon)
      : call{std::string(fn) + " of x [" + join(shape) + "], epsilon " + std::to_string(epsilon) + ", " +
             dtype_name(dtype)} {
    PF_CHECK(shape.size() >= 2 && shape.size() <= 5, ValueError, call.what,
             ": needs x of 2 to 5 dims, (N, C, spatial...)");
    PF_CHECK(epsilon >= 0, ValueError, call.what, ": epsilon must be >= 0");
    check_floating(call, dtype);
    describe(call, x, dtype, at_least_4d(dnn_dims(call, shape)));
    DNN_CHECK_FOR(call, miopenCreateTensorDescriptor(params.out()));
    DNN_CHECK_FOR(call, miopenDeriveBNTensorDescriptor(params, x, miopenBNSpatial));
  }
};

// The descriptors of a reduction: the input, the output with the reduced
// dims kept as 1 (as both libraries take it), and the reduction.
struct ReduceProblem {
  DnnCall call;
  DnnTensor a, c;
  DnnReduction reduction;

  ReduceProblem(ir::OpType type, DType dtype, const std::vector<int64_t>& input_shape,
                const std::vector<int64_t>& output_shape, const std::vector<int>& reduce_dims)
      : call{std::string(op_name(type)) + " over dims [" + join(reduce_dims) + "] of input [" + join(input_shape) +
             "] into output [" + join(output_shape) + "], " + dtype_name(dtype)} {
    const LibraryReduction* op = find_library_op(kReductions, type);
    if (!op) throw NotSupportedError(call.what + ": the DNN adapter reduces by sum, mean, max, min and prod only");
    const int64_t rank = static_cast<int64_t>(input_shape.size());
    PF_CHECK(rank >= 1 && rank <= 8, NotSupportedError, call.what, ": the DNN libraries take 1 to 8 dims");
    check_floating(call, dtype);
    std::vector<bool> reduced(rank, reduce_dims.empty());
    for (int d : reduce_dims) {
      PF_CHECK(d >= -rank && d < rank, ValueError, call.what, ": dim ", d, " is out of range for ", rank, " dims");
      const int64_t w = d < 0 ? d + rank : d;
      PF_CHECK(!reduced[w], ValueError, call.what, ": dim ", w, " appears twice");
      reduced[w] = true;
    }
    std::vector<int64_t> kept, dropped;
    for (int64_t d = 0; d < rank; ++d) {
      kept.push_back(reduced[d] ? 1 : input_shape[d]);
      if (!reduced[d]) dropped.push_back(input_shape[d]);
    }
    PF_CHECK(output_shape == kept || output_shape == dropped, ValueError, call.what, ": the output shape is ",
             Shape(kept), " (keepdim) or ", Shape(dropped));
    describe(call, a, dtype, at_least_4d(dnn_dims(call, input_shape)));
    describe(call, c, dtype, at_least_4d(dnn_dims(call, kept)));
    DNN_CHECK_FOR(call, miopenCreateReduceTensorDescriptor(reduction.out()));
    // Max and min propagate NaN, as PyTorch's; no indices (neither op returns them).
    DNN_CHECK_FOR(call, miopenSetReduceTensorDescriptor(reduction, op->mode,
                                                        dtype == DType::Float64 ? miopenDouble : miopenFloat,
                                                        MIOPEN_PROPAGATE_NAN, MIOPEN_REDUCE_TENSOR_NO_INDICES,
                                                        MIOPEN_32BIT_INDICES));
  }

  size_t workspace_size(miopenHandle_t handle) const {
    size_t bytes = 0;
    DNN_CHECK_FOR(call, miopenGetReductionWorkspaceSize(handle, reduction, a, c, &bytes));
    return bytes;
  }

  void run(miopenHandle_t handle, DType dtype, const void* input, void* output, void* workspace,
           size_t workspace_bytes) const {
    UnitScale s(dtype);
    DNN_CHECK_FOR(call, miopenReduceTensor(handle, reduction, nullptr, 0, workspace, workspace_bytes, s.alpha(), a,
                                           input, s.beta(), c, output));
  }
};

}  // namespace

void ROCmDNN::pooling2d_forward(ir::OpType pool_type, DType dtype, const std::vector<int64_t>& input_shape,
                                const void* input, const std::vector<int64_t>& output_shape, void* output,
                                const PoolParams& p) {
  const bool max = pool_type == ir::OpType::max_pool2d;
  const DnnCall c{std::string(op_name(pool_type)) + " of input [" + join(input_shape) + "] into output [" +
                  join(output_shape) + "], kernel [" + join(p.kernel_size) + "], padding [" + join(p.padding) +
                  "], stride [" + join(p.stride) + "]" + (p.ceil_mode ? ", ceil_mode" : "") +
                  (!max && !p.count_include_pad ? ", count_include_pad=False" : "") + ", " + dtype_name(dtype)};
  PF_CHECK(max || pool_type == ir::OpType::avg_pool2d, NotSupportedError,
           "ROCmDNN::pooling2d_forward: pool_type must be max_pool2d or avg_pool2d; got ", c.what);
  PF_CHECK(input_shape.size() == 4 && output_shape.size() == 4 && p.kernel_size.size() == 2 &&
               p.padding.size() == 2 && p.stride.size() == 2,
           ValueError, c.what,
           ": needs (N, C, H, W) input and output and 2 entries of kernel_size, padding and stride");
  check_floating(c, dtype);
  std::vector<int64_t> expect = {input_shape[0], input_shape[1]};
  bool rounded_up = false;
  for (int d = 0; d < 2; ++d) {
    const int64_t k = p.kernel_size[d], pad = p.padding[d], s = p.stride[d], in = input_shape[2 + d];
    PF_CHECK(k >= 1 && s >= 1 && pad >= 0 && 2 * pad <= k, ValueError, c.what,
             ": kernel_size and stride must be >= 1, padding from 0 to half the kernel");
    const int64_t span = in + 2 * pad - k;
    PF_CHECK(span >= 0, ValueError, c.what, ": the window is larger than the padded input");
    int64_t size = span / s + 1;
    if (p.ceil_mode) {
      int64_t up = (span + s - 1) / s + 1;
      if ((up - 1) * s >= in + pad) --up;  // the last window starts inside the input or its left padding (PyTorch)
      rounded_up = rounded_up || up != size;
      size = up;
    }
    expect.push_back(size);
  }
  PF_CHECK(output_shape == expect, ValueError, c.what, ": the output shape is ", Shape(expect));
  PF_CHECK(!rounded_up, NotSupportedError, c.what,
           ": ceil_mode adds a window here, and the DNN libraries round the output size down; pf.",
           op_name(pool_type), " computes it");
  DeviceGuard guard(device_);
  DnnTensor x, y;
  describe(c, x, dtype, dnn_dims(c, input_shape));
  describe(c, y, dtype, dnn_dims(c, output_shape));
  DnnPooling pool;
  DNN_CHECK_FOR(c, miopenCreatePoolingDescriptor(pool.out()));
  const miopenPoolingMode_t mode = max                   ? miopenPoolingMax
                                   : p.count_include_pad ? miopenPoolingAverageInclusive
                                                         : miopenPoolingAverage;
  DNN_CHECK_FOR(c, miopenSet2dPoolingDescriptor(pool, mode, p.kernel_size[0], p.kernel_size[1], p.padding[0],
                                                p.padding[1], p.stride[0], p.stride[1]));
  UnitScale s(dtype);
  // Nothing is kept for a backward pass, so no workspace.
  DNN_CHECK_FOR(c, miopenPoolingForward(handle_, pool, s.alpha(), x, input, s.beta(), y, output, false, nullptr, 0));
}

void ROCmDNN::batchnorm_forward_training(DType dtype, const std::vector<int64_t>& shape, const void* x, void* y,
                                         const void* scale, const void* bias, double momentum, void* running_mean,
                                         void* running_var, double epsilon, void* saved_mean,
                                         void* saved_inv_var) {
  DeviceGuard guard(device_);
  BatchNormProblem p("batchnorm_forward_training", dtype, shape, epsilon);
  PF_CHECK(product(shape, 0, shape.size()) / shape[1] > 1, ValueError, p.call.what,
           ": training needs more than 1 value per channel");
  PF_CHECK((running_mean == nullptr) == (running_var == nullptr) &&
               (saved_mean == nullptr) == (saved_inv_var == nullptr),
           ValueError, p.call.what, ": running_mean and running_var, and saved_mean and saved_inv_var, are given "
           "(or null) together");
  UnitScale s(dtype);
  // MIOpen's signature takes non-const pointers to what it only reads.
  DNN_CHECK_FOR(p.call, miopenBatchNormalizationForwardTraining(
                            handle_, miopenBNSpatial, s.alpha(), s.beta(), p.x, x, p.x, y, p.params,
                            const_cast<void*>(scale), const_cast<void*>(bias), momentum, running_mean, running_var,
                            epsilon, saved_mean, saved_inv_var));
}

void ROCmDNN::batchnorm_forward_inference(DType dtype, const std::vector<int64_t>& shape, const void* x, void* y,
                                          const void* scale, const void* bias, const void* running_mean,
                                          const void* running_var, double epsilon) {
  DeviceGuard guard(device_);
  BatchNormProblem p("batchnorm_forward_inference", dtype, shape, epsilon);
  UnitScale s(dtype);
  DNN_CHECK_FOR(p.call, miopenBatchNormalizationForwardInference(
                            handle_, miopenBNSpatial, s.alpha(), s.beta(), p.x, x, p.x, y, p.params,
                            const_cast<void*>(scale), const_cast<void*>(bias), const_cast<void*>(running_mean),
                            const_cast<void*>(running_var), epsilon));
}

void ROCmDNN::activation_forward(ir::OpType activation_type, DType dtype, const std::vector<int64_t>& shape,
                                 const void* input, void* output, float alpha) {
  const DnnCall c{std::string(op_name(activation_type)) + " of [" + join(shape) + "], " + dtype_name(dtype)};
  const LibraryActivation* act = find_library_op(kActivations, activation_type);
  if (!act)
    throw NotSupportedError(c.what + ": the DNN libraries share relu, sigmoid, tanh and elu only; pf." +
                            op_name(activation_type) + " runs the project's kernel");
  // MIOpen's coefficients (lib_compat.h): tanh is beta * tanh(alpha * x), elu's alpha is the caller's.
  const double a = act->alpha_from_caller ? alpha : act->alpha, b = act->beta;
  check_floating(c, dtype);
  // Elementwise: the last 3 dims, the others folded into the first (packed, so the same elements).
  std::vector<int64_t> folded(shape.end() - std::min<size_t>(shape.size(), 3), shape.end());
  folded.insert(folded.begin(), product(shape, 0, shape.size() - std::min<size_t>(shape.size(), 3)));
  while (folded.size() < 4) folded.insert(folded.begin() + 1, 1);
  DeviceGuard guard(device_);
  DnnTensor x;
  describe(c, x, dtype, dnn_dims(c, folded));
  DnnActivation descriptor;
  DNN_CHECK_FOR(c, miopenCreateActivationDescriptor(descriptor.out()));
  DNN_CHECK_FOR(c, miopenSetActivationDescriptor(descriptor, act->mode, a, b, 0.0));
  UnitScale s(dtype);
  DNN_CHECK_FOR(c, miopenActivationForward(handle_, descriptor, s.alpha(), x, input, s.beta(), x, output));
}

void ROCmDNN::softmax_forward(DType dtype, const std::vector<int64_t>& shape, const void* input, void* output,
                              int axis, bool log_softmax) {
  const DnnCall c{std::string(log_softmax ? "log_softmax" : "softmax") + " along axis " + std::to_string(axis) +
                  " of [" + join(shape) + "], " + dtype_name(dtype)};
  // A 0-d tensor is one row of one element.
  const std::vector<int64_t> s = shape.empty() ? std::vector<int64_t>{1} : shape;
  const int64_t rank = static_cast<int64_t>(s.size());
  PF_CHECK(axis >= -rank && axis < rank, ValueError, c.what, ": axis out of range for ", rank, " dims");
  const size_t d = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  check_floating(c, dtype);
  (void)dnn_dims(c, s);
  // The libraries' channel mode: along C of (N, C, H, W), for every N and H.
  const std::vector<int64_t> nchw = {product(s, 0, d), s[d], product(s, d + 1, s.size()), 1};
  DeviceGuard guard(device_);
  DnnTensor x;
  describe(c, x, dtype, dnn_dims(c, nchw));
  UnitScale scale(dtype);
  DNN_CHECK_FOR(c, miopenSoftmaxForward_V2(handle_, scale.alpha(), x, input, scale.beta(), x, output,
                                           log_softmax ? MIOPEN_SOFTMAX_LOG : MIOPEN_SOFTMAX_ACCURATE,
                                           MIOPEN_SOFTMAX_MODE_CHANNEL));
}

void ROCmDNN::reduce(ir::OpType reduce_type, DType dtype, const std::vector<int64_t>& input_shape,
                     const void* input, const std::vector<int64_t>& output_shape, void* output,
                     const std::vector<int>& reduce_dims, void* workspace, size_t workspace_size) {
  DeviceGuard guard(device_);
  ReduceProblem p(reduce_type, dtype, input_shape, output_shape, reduce_dims);
  const size_t needed = p.workspace_size(handle_);
  PF_CHECK(workspace_size >= needed, ValueError, p.call.what, ": the reduction needs a workspace of ", needed,
           " bytes, got ", workspace_size, " (ask reduce_workspace_size)");
  p.run(handle_, dtype, input, output, workspace, workspace_size);
}

size_t ROCmDNN::reduce_workspace_size(ir::OpType reduce_type, DType dtype, const std::vector<int64_t>& input_shape,
                                      const std::vector<int64_t>& output_shape,
                                      const std::vector<int>& reduce_dims) {
  DeviceGuard guard(device_);
  return ReduceProblem(reduce_type, dtype, input_shape, output_shape, reduce_dims).workspace_size(handle_);
}

void ROCmDNN::reduce(ir::OpType reduce_type, DType dtype, const std::vector<int64_t>& input_shape,
                     const void* input, const std::vector<int64_t>& output_shape, void* output,
                     const std::vector<int>& reduce_dims) {
  DeviceGuard guard(device_);
  ReduceProblem p(reduce_type, dtype, input_shape, output_shape, reduce_dims);
  const size_t needed = p.workspace_size(handle_);
  Scratch workspace(device_, stream_, needed);
  p.run(handle_, dtype, input, output, workspace.get(), needed);
}

}  // namespace pyflame::backend::rocm
