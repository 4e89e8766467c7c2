#pragma once
// Helpers of the op layer shared by its files (ops.cpp, apply.cpp and the
// <area>_ops.cpp files); internal to the library.

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/dispatch.h"
#include "pyflame/autograd.h"
#include "pyflame/error.h"
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

// Dims of a reduction, wrapped, checked for repeats and sorted; {} means all.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, ir::OpType op);
// `shape` with `dims` removed, or kept as size 1.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);
// The plan of an input the kernel sees as `shape`, contiguous.
InputPlan reshaped(Shape shape);

}  // namespace pyflame
