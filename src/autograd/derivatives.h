#pragma once
// Autograd's interface to apply() and to the derivatives (pyflame/autograd.h has
// the design; core/derivative.h what a derivative gets and returns).

#include <memory>
#include <vector>

#include "core/derivative.h"
#include "pyflame/autograd.h"
#include "pyflame/ir/op_call.h"

namespace pyflame::autograd {

// The region of `base` that a recorded select or slice `call` viewed: where
// its gradient goes in the gradient of its input.
Tensor view_region(const OpCall& call, const Tensor& base);

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
