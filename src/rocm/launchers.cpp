// The seed's launch_* functions over raw float32 device pointers. Each wraps
// the pointers in non-owning tensors of the current device and runs the op's
// registered GPU kernel with `stream` made current for the call, so there is
// one kernel per op whichever way it is reached.

#include "pyflame/backend/rocm/kernels.h"

#include "core/dispatch.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"

namespace pyflame::backend::rocm {
namespace {

int current_device_index() {
  int device;
  HIP_CHECK(hipGetDevice(&device));
  return device;
}

// A 1-D tensor over memory the caller owns.
Tensor wrap(const void* p, int64_t numel, DType dtype = DType::Float32) {
  PF_CHECK(numel >= 0, ValueError, "launch: numel must be >= 0, got ", numel);
  PF_CHECK(p != nullptr || numel == 0, ValueError, "launch: a null device pointer");
  auto storage = std::make_shared<Storage>(const_cast<void*>(p), static_cast<size_t>(numel) * itemsize(dtype),
                                           Device::rocm(current_device_index()), [](void*) {});
  return Tensor(storage, {numel}, {1}, 0, dtype);
}

// Makes `stream` current on the current device for a scope: kernels and any
// scratch tensor allocated inside the scope belong to it.
class CurrentStream {
 public:
  explicit CurrentStream(hipStream_t stream) : device_(current_device_index()), previous_(current_stream(device_)) {
    set_current_stream(device_, stream);
  }
  ~CurrentStream() { set_current_stream(device_, previous_); }
  CurrentStream(const CurrentStream&) = delete;
  CurrentStream& operator=(const CurrentStream&) = delete;
  Device device() const { return Device::rocm(device_); }

 private:
  int device_;
  hipStream_t previous_;
};

void check_family(ir::OpType op, std::initializer_list<OpFamily> families, const char* launcher) {
  for (OpFamily f : families)
    if (op_family(op) == f) return;
  throw ValueError(std::string(launcher) + ": '" + op_name(op) + "' is a " + family_name(op_family(op)) +
                   " op, not one this launcher runs");
}

// The op's parameters at their defaults: kernels get canonical attributes.
ElementwiseAttrs default_params(ir::OpType op) {
  ElementwiseAttrs attrs;
  for (const OpParam& p : op_params(op)) attrs.params.push_back(p.default_value);
  return attrs;
}

void unary(ir::OpType op, float* output, const float* input, int64_t numel, hipStream_t stream, OpAttrs attrs) {
  CurrentStream scope(stream);
  OpCall call{op, {wrap(input, numel)}, std::move(attrs), {wrap(output, numel)}};
  run_kernel(call, scope.device());
}

// A kernel run into a new float32 tensor of `numel` elements (0: a scalar).
Tensor run_into_new(ir::OpType op, std::vector<Tensor> inputs, OpAttrs attrs, int64_t numel, Device device) {
  Tensor out = Tensor::empty(numel ? Shape{numel} : Shape{}, DType::Float32, device);
  OpCall call{op, std::move(inputs), std::move(attrs), {out}};
  run_kernel(call, device);
  return out;
}

// output[0] = the mean of `loss` (numel elements).
void mean_into(float* output, const Tensor& loss, Device device) {
  OpCall call{ir::OpType::mean, {loss}, ReduceAttrs{{0}, false, 0}, {wrap(output, 1).view({})}};
  run_kernel(call, device);
}

}  // namespace

void launch_gelu_forward(float* output, const float* input, int64_t numel, hipStream_t stream) {
  unary(ir::OpType::gelu, output, input, numel, stream, default_params(ir::OpType::gelu));
}

void launch_silu_forward(float* output, const float* input, int64_t numel, hipStream_t stream) {
  unary(ir::OpType::silu, output, input, numel, stream, default_params(ir::OpType::silu));
}

void launch_elementwise_unary(ir::OpType op, float* output, const float* input, int64_t numel, hipStream_t stream) {
  check_family(op, {OpFamily::UNARY, OpFamily::UNARY_FLOAT}, "launch_elementwise_unary");
  unary(op, output, input, numel, stream, default_params(op));
}

void launch_elementwise_binary(ir::OpType op, float* output, const float* a, const float* b, int64_t numel,
                               hipStream_t stream) {
  check_family(op, {OpFamily::BINARY, OpFamily::BINARY_FLOAT}, "launch_elementwise_binary");
  CurrentStream scope(stream);
  OpCall call{op, {wrap(a, numel), wrap(b, numel)}, ElementwiseAttrs{}, {wrap(output, numel)}};
  run_kernel(call, scope.device());
}

void launch_comparison(ir::OpType op, float* output, const float* a, const float* b, int64_t numel,
                       hipStream_t stream) {
  check_family(op, {OpFamily::COMPARE}, "launch_comparison");
  CurrentStream scope(stream);
  OpCall compare{op, {wrap(a, numel), wrap(b, numel)}, ElementwiseAttrs{},
                 {Tensor::empty({numel}, DType::Bool, scope.device())}};
  run_kernel(compare, scope.device());
  OpCall to_float{ir::OpType::copy, {compare.out()}, CopyAttrs{}, {wrap(output, numel)}};
  run_kernel(to_float, scope.device());
}

void launch_where(float* output, const float* condition, const float* x, const float* y, int64_t numel,
                  hipStream_t stream) {
  CurrentStream scope(stream);
  OpCall to_bool{ir::OpType::copy, {wrap(condition, numel)}, CopyAttrs{},
                 {Tensor::empty({numel}, DType::Bool, scope.device())}};
  run_kernel(to_bool, scope.device());
  OpCall call{ir::OpType::where, {to_bool.out(), wrap(x, numel), wrap(y, numel)}, NoAttrs{}, {wrap(output, numel)}};
  run_kernel(call, scope.device());
}

void launch_clamp(float* output, const float* input, float min_val, float max_val, int64_t numel, hipStream_t stream) {
  unary(ir::OpType::clamp, output, input, numel, stream,
        ClampAttrs{Scalar(static_cast<double>(min_val)), Scalar(static_cast<double>(max_val))});
}

// The losses are the ops' compositions (src/core/nn_ops.cpp), run kernel by
// kernel: output[0] is the mean over the elements (PyTorch's default reduction).
void launch_mse_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                     hipStream_t stream) {
  CurrentStream scope(stream);
  const Device dev = scope.device();
  Tensor d =
      run_into_new(ir::OpType::sub, {wrap(predictions, numel), wrap(targets, numel)}, ElementwiseAttrs{}, numel, dev);
  mean_into(output, run_into_new(ir::OpType::mul, {d, d}, ElementwiseAttrs{}, numel, dev), dev);
}

// -(t log p + (1 - t) log(1 - p)), both logs clamped at -100 as PyTorch; p is not range-checked.
void launch_bce_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                     hipStream_t stream) {
  CurrentStream scope(stream);
  const Device dev = scope.device();
  const Tensor p = wrap(predictions, numel), t = wrap(targets, numel);
  auto clamped_log = [&](const Tensor& x) {
    Tensor log_x = run_into_new(ir::OpType::log, {x}, default_params(ir::OpType::log), numel, dev);
    return run_into_new(ir::OpType::clamp, {log_x}, ClampAttrs{Scalar(-100.0), std::nullopt}, numel, dev);
  };
  const Tensor log_p = clamped_log(p);
  const Tensor log_1mp = clamped_log(
      run_into_new(ir::OpType::sub, {run_into_new(ir::OpType::fill, {}, FillAttrs{Scalar(1.0)}, numel, dev), p},
                   ElementwiseAttrs{}, numel, dev));
  const Tensor t_minus_1 =
      run_into_new(ir::OpType::sub, {t, run_into_new(ir::OpType::fill, {}, FillAttrs{Scalar(1.0)}, numel, dev)},
                   ElementwiseAttrs{}, numel, dev);
  const Tensor loss = run_into_new(
      ir::OpType::sub,
      {run_into_new(ir::OpType::mul, {t_minus_1, log_1mp}, ElementwiseAttrs{}, numel, dev),
       run_into_new(ir::OpType::mul, {t, log_p}, ElementwiseAttrs{}, numel, dev)},
      ElementwiseAttrs{}, numel, dev);
  mean_into(output, loss, dev);
}

// The mean cross entropy of N rows of C logits against int32 class targets (the fused kernel).
void launch_cross_entropy_loss(float* output, const float* logits, const int32_t* targets, int64_t N, int64_t C,
                               hipStream_t stream) {
  CurrentStream scope(stream);
  const Device dev = scope.device();
  PF_CHECK(N >= 0 && C > 0, ValueError, "launch_cross_entropy_loss: need N >= 0 and C > 0, got N ", N, ", C ", C);
  const Tensor target = Tensor::empty({N, 1}, DType::Int64, dev);
  OpCall widen{ir::OpType::copy, {wrap(targets, N, DType::Int32).view({N, 1})}, CopyAttrs{}, {target}};
  run_kernel(widen, dev);
  OpCall call{ir::OpType::cross_entropy,
              {wrap(logits, N * C).view({N, C, 1}), target, Tensor()},
              LossAttrs{-100, Reduction::Mean, 0.0},
              {wrap(output, 1).view({}), Tensor::empty({N}, DType::Float32, dev)}};  // (the kernel's logsumexp output)
  run_kernel(call, dev);
}

}  // namespace pyflame::backend::rocm
