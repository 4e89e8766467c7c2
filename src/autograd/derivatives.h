#pragma once
// The derivative table's interface (pyflame/autograd.h has the design).
// A derivative is a vector-Jacobian product written with the public ops: it
// gets the recorded call (attributes canonical, as inferred) with the inputs
// it asked to save, the saved outputs and one gradient per output, and
// returns one gradient per input. The engine then sums each result over
// broadcast dims and converts it to its input's dtype and device, so a
// formula may return a gradient of the broadcast shape in the computing dtype.

#include <cstdint>
#include <string>
#include <vector>

#include "pyflame/autograd.h"
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

// The region of `base` that a recorded select or slice `call` viewed: where
// its gradient goes in the gradient of its input.
Tensor view_region(const OpCall& call, const Tensor& base);

// What a derivative reads besides the gradients.
enum Saves : uint8_t { kSavesNothing = 0, kSavesInputs = 1, kSavesOutputs = 2, kSavesBoth = 3 };

struct Derivative {
  DerivativeFn fn = nullptr;
  uint8_t saves = kSavesNothing;
};

void register_derivative(ir::OpType op, DerivativeFn fn, uint8_t saves);
const Derivative* find_derivative(ir::OpType op);  // nullptr if none

struct DerivativeRegistrar {
  DerivativeRegistrar(ir::OpType op, DerivativeFn fn, uint8_t saves) { register_derivative(op, fn, saves); }
};
#define PF_REGISTER_DERIVATIVE(op, fn, saves) \
  static ::pyflame::autograd::DerivativeRegistrar pf_derivative_##op(::pyflame::ir::OpType::op, fn, saves)

// apply()'s hooks in grad mode (ApplyHooks, registered by engine.cpp).
// should_record is the per-op cost of autograd when nothing requires grad: a
// look at each input. A Recording is made before the call executes (edges,
// saved inputs, in-place checks) and finished with its outputs (saved
// outputs, the results' grad_fn); the call runs in between with grad mode off.
bool should_record(const OpCall& call);
// Links a view to the tensor it views when that tensor has autograd state
// (it requires grad, or an in-place op or a composition gave it some), so that
// an in-place op writing a gradient-carrying value into the view can give the
// base a history. apply calls it for views it does not record, in grad mode.
void link_view(const Tensor& input, Tensor& view);

class OpNode;
class Recording {
 public:
  explicit Recording(OpCall& call);
  void finish(std::vector<Tensor>& outputs);

 private:
  OpCall& call_;
  std::shared_ptr<OpNode> node_;  // null when the call makes no gradient (only resets in-place history)
};

}  // namespace pyflame::autograd
