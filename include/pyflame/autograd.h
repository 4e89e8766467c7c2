#pragma once
// Reverse-mode automatic differentiation.
//
// Recording: apply() (src/core/apply.cpp), through the hooks the engine registers
// (ApplyHooks in src/core/dispatch.h), records a call when grad mode is on
// and one of its inputs requires grad. The record is a Node: the op, its
// attributes, the inputs and outputs its derivative reads, each saved
// detached (the graph never owns the tensors that own it, so there are no
// reference cycles) with its storage's version, and one edge per input to the
// node that made that input (its grad_fn, or the accumulator of a leaf).
// Floating outputs get the node as grad_fn; integer and bool outputs never
// require grad.
//
// Derivatives are written once, in terms of the public ops (a one-input
// op's in its ops.def line, the others in src/autograd/derivatives.cpp), so every device runs
// the same formulas. The engine (src/autograd/engine.cpp) reduces each
// input's gradient back to the input's shape, dtype and device, so formulas
// ignore broadcasting and type promotion.
//
// backward() counts, for every node reachable from the roots, how many
// gradients will arrive, then runs a node once all have arrived, from an
// explicit ready list (no recursion, so graph depth is unbounded), with grad
// mode off. In-place ops bump their storage's version; a saved tensor whose
// version changed before backward raises AutogradError, as does a second
// backward through a graph freed by the first (retain_graph=false).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pyflame/grad_mode.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame {

namespace autograd {

class Node;

// Where a gradient goes: slot `input_nr` of `node`'s incoming gradients.
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// A gradient hook of a tensor (Tensor::register_hook): on the gradients into
// slot `slot` of the node that made the tensor, or into a leaf's accumulator.
struct TensorHook {
  uint64_t id;
  uint32_t slot;
  std::function<Tensor(const Tensor&)> fn;
};

class PF_API Node {
 public:
  virtual ~Node() = default;
  virtual std::string name() const = 0;
  // `grads`: one per slot (an output of the recorded op); undefined where
  // nothing flowed. Returns one gradient per next edge (undefined: none).
  virtual std::vector<Tensor> apply(std::vector<Tensor> grads) = 0;
  // Frees the saved tensors (a backward without retain_graph).
  virtual void release() {}
  virtual size_t num_slots() const { return 1; }

  std::vector<Edge> next_edges;
  uint64_t sequence_nr = 0;
  // Non-leaf tensors whose .grad is kept (retain_grad()), by slot.
  std::vector<std::pair<uint32_t, std::weak_ptr<AutogradMeta>>> retained;
  // The hooks on the gradients arriving here, run before anything reads them (a
  // leaf's accumulator keeps the leaf's, which outlive it).
  virtual std::vector<TensorHook>& hooks() { return tensor_hooks_; }

 private:
  std::vector<TensorHook> tensor_hooks_;
};

// Accumulates d(roots)/d(leaf) into every leaf's .grad. `grad_roots[i]` may be
// undefined for a one-element root (then 1).
// create_graph: the backward pass records its own ops (grad mode on), so the gradients it
// makes have histories and can be differentiated again (higher-order gradients); it keeps the
// graph (retain_graph). A derivative through an op without a derivative of its own raises
// NotSupportedError rather than leave the second derivative's part out.
PF_API void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph,
                     bool create_graph = false);
// From a hook during backward(): `fn` runs once that backward pass has ended (PyTorch's
// queue_callback; DistributedDataParallel ends its gradient reduction there).
PF_API void queue_callback(std::function<void()> fn);
// d(outputs)/d(inputs), returned rather than accumulated. An input the outputs
// do not depend on raises unless allow_unused (then undefined).
PF_API std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused,
                                bool create_graph = false);
// Whether a backward pass with create_graph runs in this thread.
PF_API bool creates_graph();

// For nodes made outside the op table (pyflame.autograd.Function): the edge
// that a gradient for `t` flows into (invalid if t does not require grad), and
// making `t` output `slot` of `node`.
PF_API Edge gradient_edge(const Tensor& t);
PF_API void set_history(Tensor& t, const std::shared_ptr<Node>& node, uint32_t slot);
// Reserves a sequence number: nodes recorded before have smaller ones, nodes recorded after at least it.
PF_API uint64_t new_sequence_nr();

// False for ops whose results carry no gradient (comparisons, arg reductions,
// random creation, fill): the engine never records them.
PF_API bool is_differentiable(ir::OpType op);
// Whether autograd can differentiate the op: a derivative (ops.def's formula
// or src/autograd/derivatives.cpp), or a composite op's decomposition.
PF_API bool has_derivative(ir::OpType op);

}  // namespace autograd

// The autograd state of a tensor, shared by its copies (a Python object and
// the C++ values it hands around); views and op results get their own.
struct PF_API AutogradMeta {
  bool requires_grad = false;  // set on leaves by the user
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;                   // which output of grad_fn this is
  bool retains_grad = false;
  std::weak_ptr<autograd::Node> accumulator;  // a leaf's AccumulateGrad, shared by its uses
  std::vector<autograd::TensorHook> hooks;      // a leaf's gradient hooks
  // A leaf's hooks on its .grad once a backward has accumulated into it (the slot is unused).
  std::vector<autograd::TensorHook> accumulated_hooks;
  // Set on a view made by a view op in grad mode: the tensor it views (the
  // first non-view of a chain of views), so that an in-place op on the view
  // can rebase that tensor's history (PyTorch's CopySlices).
  std::shared_ptr<AutogradMeta> base;
  Tensor base_layout;  // the base, detached: its memory layout
};

}  // namespace pyflame
