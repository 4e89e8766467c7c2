#pragma once
// The op layer's one entry point. Every public op, in C++ and Python, builds
// an OpCall (the op of the table, its inputs, its typed attributes) and hands
// it to apply(). apply infers the call (validation, broadcasting, dtype
// promotion, device placement, output shapes: nothing allocated, no wait for
// a device) and then executes it: the device's kernel when it has one, else
// the op's composite. Autograd records calls here and graph capture appends
// them here, so nothing else may launch a kernel on behalf of a public op.
//
// Tensor's own methods (view, copy_, to, contiguous, ...) are the raw
// building blocks kernels use; they record nothing. The public forms of
// those operations are the functions of pyflame/ops.h, which call apply.

#include <string>
#include <variant>
#include <vector>

#include "pyflame/ir/attrs.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame {

struct PF_API OpCall {
  ir::OpType op;
  std::vector<Tensor> inputs;  // an undefined Tensor stands for an absent optional input
  OpAttrs attrs;
  // Empty when the call is built: apply allocates the results. Given before
  // apply (in-place ops), the results are written into these tensors.
  std::vector<Tensor> outputs;

  // The call's attributes as the op table's struct for the op (apply checks the type).
  template <class A> const A& attr() const { return std::get<A>(attrs); }
  Tensor& out() { return outputs[0]; }
  const Tensor& out() const { return outputs[0]; }

  // Equal calls have the same op and attributes and inputs with the same
  // metadata (shape, strides, dtype, device): what a cache of compiled work may reuse.
  bool operator==(const OpCall& o) const;
  size_t hash() const;
  // "conv2d(float32[1, 3, 8, 8], float32[4, 3, 3, 3], -; stride=[1, 1], ...)"
  std::string to_string() const;
};

// Infers and executes `call`; returns its outputs (the given ones when preset).
PF_API std::vector<Tensor> apply(OpCall call);

// A composite runs an op on a device that has no native kernel for it, as a
// composition of other ops (each of which goes through apply). It gets the
// call as inferred (attributes canonical) with the caller's inputs and
// returns the op's outputs.
using CompositeFn = std::vector<Tensor> (*)(const OpCall& call);
PF_API void register_composite(ir::OpType op, CompositeFn fn);

// The parameters of an elementwise op (op_params.def), in order, with their defaults.
struct OpParam {
  const char* name;
  Scalar default_value;
};
PF_API std::vector<OpParam> op_params(ir::OpType op);

// Whether `device` has a native kernel for `op`.
PF_API bool has_kernel(ir::OpType op, Device device);
// Whether `op` runs on `device` at all: a native kernel, a composite, or no
// kernel needed (views).
PF_API bool is_supported(ir::OpType op, Device device);

}  // namespace pyflame
