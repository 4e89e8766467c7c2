#pragma once
// An op's derivative, as its infer and kernels are registered: a vector-Jacobian
// product written with the public ops, registered (PF_REGISTER_DERIVATIVE) in the
// op's area file next to its infer, or compiled from the grad column of its ops.def
// line (src/autograd/derivatives.cpp, which also holds the formulas several families
// share). A derivative gets the recorded call (attributes canonical, as inferred)
// with the inputs it asked to save, the saved outputs and one gradient per output,
// and returns one gradient per input. The engine (src/autograd) then sums each
// result over broadcast dims and converts it to its input's dtype and device, so a
// formula may return a gradient of the broadcast shape in the computing dtype.

#include <cstdint>
#include <string>
#include <vector>

#include "pyflame/error.h"
#include "pyflame/ir/op_call.h"

namespace pyflame::autograd {

// Shape, dtype and device of a recorded input or output.
struct TensorInfo {
  bool defined = false;
  Shape shape;
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool placed = false;  // zeros standing in for its gradient are placed alike, so they run on its device
};

struct GradContext {
  const OpCall& call;                    // inputs: saved ones, else undefined
  const std::vector<TensorInfo>& inputs;  // every input's metadata
  const std::vector<Tensor>& outputs;     // saved outputs, else undefined
  const std::vector<Tensor>& grads;       // one per output; zeros where nothing flowed
  const std::vector<bool>& needs;         // whether input i wants a gradient
  // Per saved input and output: why it may not be read (changed in place
  // since it was saved), or empty. Only what a derivative reads is checked.
  const std::vector<std::string>& stale_inputs;
  const std::vector<std::string>& stale_outputs;

  const Tensor& input(size_t i) const { return checked(call.inputs[i], stale_inputs, i); }
  const Tensor& output(size_t i = 0) const { return checked(outputs[i], stale_outputs, i); }
  const Tensor& grad(size_t i = 0) const { return grads[i]; }
  const Shape& input_shape(size_t i) const { return inputs[i].shape; }
  template <class A> const A& attr() const { return call.attr<A>(); }

 private:
  static const Tensor& checked(const Tensor& t, const std::vector<std::string>& stale, size_t i) {
    if (i < stale.size() && !stale[i].empty()) throw AutogradError(stale[i]);
    return t;
  }
};

using DerivativeFn = std::vector<Tensor> (*)(const GradContext& ctx);

// What a derivative reads besides the gradients.
enum Saves : uint8_t { kSavesNothing = 0, kSavesInputs = 1, kSavesOutputs = 2, kSavesBoth = 3 };

struct Derivative {
  DerivativeFn fn = nullptr;
  uint8_t saves = kSavesNothing;
};

void register_derivative(ir::OpType op, DerivativeFn fn, uint8_t saves);
const Derivative* find_derivative(ir::OpType op);  // nullptr if none

// Helpers the formulas of several areas share.
Tensor zeros_like_shape(const Shape& shape, const Tensor& g);  // g's dtype, on g's device
std::vector<int64_t> all_dims_but(int64_t ndim, int64_t keep);

struct DerivativeRegistrar {
  DerivativeRegistrar(ir::OpType op, DerivativeFn fn, uint8_t saves) { register_derivative(op, fn, saves); }
};
#define PF_REGISTER_DERIVATIVE(op, fn, saves) \
  static ::pyflame::autograd::DerivativeRegistrar pf_derivative_##op(::pyflame::ir::OpType::op, fn, saves)

}  // namespace pyflame::autograd
