#pragma once
// Helpers of the op layer shared by its files (ops.cpp, apply.cpp and the
// <area>_ops.cpp files); internal to the library.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"
#include "pyflame/error.h"
#include "pyflame/grad_mode.h"
#include "pyflame/ir/op_call.h"
#include "pyflame/tensor.h"

namespace pyflame {

// An input of `op` lives on another device than the one the op runs on: count
// the implicit copy, or raise DeviceError under strict placement. Python
// numbers move freely, as in PyTorch.
inline void note_implicit_copy(const Tensor& t, Device dev, const char* op) {
  if (t.is_wrapped_number()) return;
  PF_CHECK(!strict_device_placement(), DeviceError, op, ": an input is on '", to_string(t.device()),
           "' but the op runs on '", to_string(dev), "' and strict device placement is on; move it with .to('",
           to_string(dev), "')");
  count_implicit_copy();
}

// Where an op over `inputs` runs (DESIGN.md, execution model; JAX's committed/uncommitted
// rule): where `written` lives (the tensor an in-place op writes), else where its placed
// inputs live, as in PyTorch, else on the current device. Placed inputs on two devices
// raise DeviceError naming `op`, except a 0-d CPU tensor, which goes anywhere as in PyTorch
// (and decides only when nothing else does). For the scope's life that device is current
// in this thread, so infer, kernels, a composite's inner calls and factories see it. apply
// uses it for every op; a composition without a table line (cat, pad, indexing, tril)
// opens one over its tensors and returns result(r).
class PlacementScope {
 public:
  PlacementScope(const char* op, const Tensor* inputs, size_t count, std::optional<Device> written);
  PlacementScope(const char* op, const std::vector<Tensor>& inputs)
      : PlacementScope(op, inputs.data(), inputs.size(), std::nullopt) {}
  ~PlacementScope();
  PlacementScope(const PlacementScope&) = delete;
  PlacementScope& operator=(const PlacementScope&) = delete;

  Device device() const;
  // `r` placed when an input was: the result of an op with a placed input is placed.
  Tensor result(Tensor r) const;
  // The same for an op's outputs; a view, or an input handed back, is placed as that input.
  void place(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) const;

 private:
  std::optional<Device> device_;
  bool placed_ = false;
  std::optional<Device> previous_;
};

// An elementwise op's parameters made canonical for an input of `dtype`: the missing ones
// take their defaults; integer parameters refuse floats (src/core/ops.cpp).
std::vector<Scalar> canonical_params(ir::OpType op, const std::vector<Scalar>& given, DType dtype);

// Applies a call of an op with one output and returns it.
inline Tensor apply_one(ir::OpType op, std::vector<Tensor> inputs, OpAttrs attrs) {
  return std::move(apply({op, std::move(inputs), std::move(attrs), {}})[0]);
}
// Applies an in-place call: `out` receives the op's result.
inline Tensor& apply_into(Tensor& out, ir::OpType op, std::vector<Tensor> inputs, OpAttrs attrs) {
  // The call holds copies of `out`: when the call will be recorded, out's
  // autograd state must exist before, to be shared with them.
  if (autograd::is_grad_enabled())
    for (const Tensor& t : inputs)
      if (t.requires_grad()) {
        out.ensure_autograd_meta();
        break;
      }
  apply({op, std::move(inputs), std::move(attrs), {out}});
  return out;
}

// A fresh tensor that a composition fills through views of it (cat, pad):
// with autograd state, so that writing gradient-carrying values into its
// views gives it a history (autograd's CopySlices). Views of it must be made
// with the public view ops, which link them to it.
inline Tensor empty_output(const Shape& shape, DType dtype, Device device) {
  Tensor out = Tensor::empty(shape, dtype, device);
  if (autograd::is_grad_enabled()) out.ensure_autograd_meta();
  return out;
}

// Where float16/bfloat16 values are computed in float32 and rounded once at the
// end, as PyTorch's kernels do (composite ops, the norms' parameter gradients):
// float32 for them, any other dtype itself.
inline DType compute_dtype(DType d) { return d == DType::Float16 || d == DType::BFloat16 ? DType::Float32 : d; }

// Dims of a reduction, wrapped, checked for repeats and sorted; {} means all.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, ir::OpType op);
// `shape` with `dims` removed, or kept as size 1.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);
// The plan of an input the kernel sees as `shape`, contiguous.
InputPlan reshaped(Shape shape);

}  // namespace pyflame
