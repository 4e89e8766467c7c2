// The seed's launch_* functions over raw float32 device pointers. Each wraps
// the pointers in non-owning tensors placed on the current device and runs the
// op through apply (the one way every op is reached) with `stream` made
// current for the call, writing into the caller's output.

#include "pyflame/backend/rocm/kernels.h"

#include "core/dispatch.h"
#include "pyflame/nn_ops.h"
#include "pyflame/ops.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"

namespace pyflame::backend::rocm {
namespace {

int current_device_index() {
  int device;
  HIP_CHECK(hipGetDevice(&device));
  return device;
}

// A 1-D tensor over memory the caller owns, placed on the current device
// (the ops over it run there whatever pf.set_device says).
Tensor wrap(const void* p, int64_t numel, DType dtype = DType::Float32) {
  PF_CHECK(numel >= 0, ValueError, "launch: numel must be >= 0, got ", numel);
  PF_CHECK(p != nullptr || numel == 0, ValueError, "launch: a null device pointer");
  auto storage = std::make_shared<Storage>(const_cast<void*>(p), static_cast<size_t>(numel) * itemsize(dtype),
                                           Device::rocm(current_device_index()), [](void*) {});
  Tensor t(storage, {numel}, {1}, 0, dtype);
  t.set_placed(true);
  return t;
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

// Runs the op on `stream` through apply (as every op), writing its result into
// `output`, the caller's memory: directly where dtype and layout allow.
void run_into(hipStream_t stream, ir::OpType op, std::vector<Tensor> inputs, OpAttrs attrs, Tensor output) {
  CurrentStream scope(stream);
  apply({op, std::move(inputs), std::move(attrs), {std::move(output)}});
}

}  // namespace

void launch_gelu_forward(float* output, const float* input, int64_t numel, hipStream_t stream) {
  run_into(stream, ir::OpType::gelu, {wrap(input, numel)}, default_params(ir::OpType::gelu), wrap(output, numel));
}

void launch_silu_forward(float* output, const float* input, int64_t numel, hipStream_t stream) {
  run_into(stream, ir::OpType::silu, {wrap(input, numel)}, default_params(ir::OpType::silu), wrap(output, numel));
}

void launch_elementwise_unary(ir::OpType op, float* output, const float* input, int64_t numel, hipStream_t stream) {
  check_family(op, {OpFamily::UNARY, OpFamily::UNARY_FLOAT}, "launch_elementwise_unary");
  run_into(stream, op, {wrap(input, numel)}, default_params(op), wrap(output, numel));
}

void launch_elementwise_binary(ir::OpType op, float* output, const float* a, const float* b, int64_t numel,
                               hipStream_t stream) {
  check_family(op, {OpFamily::BINARY, OpFamily::BINARY_FLOAT}, "launch_elementwise_binary");
  run_into(stream, op, {wrap(a, numel), wrap(b, numel)}, ElementwiseAttrs{}, wrap(output, numel));
}

// The bool result is stored as 0.0/1.0 (apply converts it into the float output).
void launch_comparison(ir::OpType op, float* output, const float* a, const float* b, int64_t numel,
                       hipStream_t stream) {
  check_family(op, {OpFamily::COMPARE}, "launch_comparison");
  run_into(stream, op, {wrap(a, numel), wrap(b, numel)}, ElementwiseAttrs{}, wrap(output, numel));
}

void launch_where(float* output, const float* condition, const float* x, const float* y, int64_t numel,
                  hipStream_t stream) {
  CurrentStream scope(stream);
  const Tensor nonzero = ne(wrap(condition, numel), Scalar(0.0));
  run_into(stream, ir::OpType::where, {nonzero, wrap(x, numel), wrap(y, numel)}, NoAttrs{}, wrap(output, numel));
}

void launch_clamp(float* output, const float* input, float min_val, float max_val, int64_t numel, hipStream_t stream) {
  run_into(stream, ir::OpType::clamp, {wrap(input, numel)},
           ClampAttrs{Scalar(static_cast<double>(min_val)), Scalar(static_cast<double>(max_val))}, wrap(output, numel));
}

// The losses: output[0] is the mean over the elements (PyTorch's default reduction).
void launch_mse_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                     hipStream_t stream) {
  run_into(stream, ir::OpType::mse_loss, {wrap(predictions, numel), wrap(targets, numel), Tensor()},
           PointwiseLossAttrs{}, wrap(output, 1).view({}));
}

// -(t log p + (1 - t) log(1 - p)), both logs clamped at -100 as PyTorch; p is
// not range-checked (pf.binary_cross_entropy's check waits for the device).
void launch_bce_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                     hipStream_t stream) {
  run_into(stream, ir::OpType::binary_cross_entropy, {wrap(predictions, numel), wrap(targets, numel), Tensor()},
           PointwiseLossAttrs{}, wrap(output, 1).view({}));
}

// The mean cross entropy of N rows of C logits against int32 class targets (the fused kernel).
void launch_cross_entropy_loss(float* output, const float* logits, const int32_t* targets, int64_t N, int64_t C,
                               hipStream_t stream) {
  PF_CHECK(N >= 0 && C > 0, ValueError, "launch_cross_entropy_loss: need N >= 0 and C > 0, got N ", N, ", C ", C);
  CurrentStream scope(stream);
  const Tensor loss = cross_entropy(wrap(logits, N * C).view({N, C}), wrap(targets, N, DType::Int32));
  run_into(stream, ir::OpType::copy, {loss}, CopyAttrs{}, wrap(output, 1).view({}));
}

}  // namespace pyflame::backend::rocm
