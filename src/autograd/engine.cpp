// The autograd engine: recording at apply(), the graph's nodes, and the
// backward pass (design in pyflame/autograd.h).

#include <algorithm>
#include <atomic>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include "autograd/derivatives.h"
#include "core/dispatch.h"
#include "core/thread_state.h"
#include "pyflame/autograd.h"
#include "pyflame/error.h"
#include "pyflame/ir/graph.h"
#include "pyflame/ops.h"

namespace pyflame {
namespace autograd {

namespace {

uint64_t g_next_sequence_nr = 0;

TensorInfo info_of(const Tensor& t) {
  if (!t.defined()) return {};
  return {true, t.shape(), t.dtype(), t.device(), t.is_placed()};
}

Tensor zeros_of(const TensorInfo& info) {
  Tensor z = Tensor::empty(info.shape, info.dtype, info.device);
  z.fill_(0);
  return z.set_placed(info.placed);
}

// "log_softmax" -> "LogSoftmaxBackward0", PyTorch's naming.
std::string backward_name(const char* op) {
  std::string s;
  bool upper = true;
  for (const char* c = op; *c; ++c) {
    if (*c == '_') {
      upper = true;
      continue;
    }
    s += upper ? static_cast<char>(std::toupper(*c)) : *c;
    upper = false;
  }
  return s + "Backward0";
}

// Sums a gradient over the dims its input was broadcast along, then converts
// it to the input's dtype and device.
Tensor reduce_to(Tensor g, const TensorInfo& in) {
  if (!g.defined() || !in.defined) return Tensor();
  if (g.shape() != in.shape) {
    const int64_t lead = g.dim() - static_cast<int64_t>(in.shape.size());
    PF_CHECK(lead >= 0, ValueError, "autograd: a gradient of shape ", g.shape(), " cannot reduce to its input's shape ",
             in.shape, " (a derivative's bug)");
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < g.dim(); ++d)
      if (d < lead || (in.shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
    if (!dims.empty()) g = sum(g, dims, true);
    g = reshape(g, in.shape);
  }
  if (g.dtype() != in.dtype) g = to(g, in.dtype);
  if (g.device() != in.device) g = to(g, in.device);
  return g.set_placed(in.placed);  // a placed tensor's gradient is placed (and ops on it run where it is)
}

// Whether `sum` may take another gradient of that layout in place: dense,
// alike, and its memory held by no one else (a user's tensor, a saved value,
// a gradient delivered to two inputs).
bool summable_in_place(const Tensor& sum, const Shape& shape, DType dtype, const Device& device) {
  return sum.defined() && sum.storage().use_count() == 1 && sum.is_contiguous() && sum.shape() == shape &&
         sum.dtype() == dtype && sum.device() == device;
}

Tensor add_grads(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return add(a, b);
}

// Holds the derivative's view of one saved tensor: its value, detached, and
// the version of its memory when saved; for an input also the tensor itself, whose
// history a derivative that records its own ops (create_graph) must reach. (An output is
// not kept so: its history is the node that saves it, a cycle; OpNode rebuilds it.)
struct SavedTensor {
  Tensor value, source;
  uint64_t version = 0;
  void save(const Tensor& t, bool keep_source) {
    if (!t.defined()) return;
    value = t.detach();
    if (keep_source) source = t;
    version = t.storage()->version();
  }
  // Why the saved value may not be used (its memory changed since), or "".
  std::string staleness(const std::string& node, size_t i, const char* what) const {
    if (!value.defined() || value.storage()->version() == version) return {};
    return detail::cat("one of the tensors needed for gradient computation has been modified by an in-place "
                       "operation: ", what, " ", i, " of ", node, " (", dtype_name(value.dtype()), value.shape(),
                       ") is at version ", value.storage()->version(), "; expected version ", version,
                       ". Clone it before the in-place op, or make the op out of place.");
  }
};

// A leaf's gradient sink: adds what arrives into the leaf's .grad.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<AutogradMeta> meta) : meta_(std::move(meta)) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<TensorHook>& hooks() override { return meta_->hooks; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    Tensor& g = grads[0];
    if (!g.defined()) return {};
    ir::trace_grad_access(meta_.get(), meta_->grad, ir::GradAccess::Update);
    if (thread_state().create_graph) {  // out of place: .grad keeps the gradient's own history
      meta_->grad = meta_->grad.defined() ? add(meta_->grad, g) : clone(g);
    } else if (!meta_->grad.defined()) {
      // A gradient that something else holds (a user's, or one shared between
      // two inputs of an add) is copied so later accumulation cannot alias it.
      meta_->grad = g.storage().use_count() > 1 ? clone(g) : g;
    } else {
      binary_op_(ir::OpType::add, meta_->grad, g);
    }
    const std::vector<TensorHook> hooks = meta_->accumulated_hooks;  // a hook may remove itself
    for (const TensorHook& h : hooks) h.fn(meta_->grad);
    return {};
  }

 private:
  std::shared_ptr<AutogradMeta> meta_;
};

}  // namespace

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = t.autograd_meta();
  if (!m) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<Node> acc = m->accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.autograd_meta_ptr());
    m->accumulator = acc;
  }
  return {acc, 0};
}

uint64_t new_sequence_nr() { return ++g_next_sequence_nr; }

void set_history(Tensor& t, const std::shared_ptr<Node>& node, uint32_t slot) {
  if (node->sequence_nr == 0) node->sequence_nr = ++g_next_sequence_nr;
  AutogradMeta& m = t.ensure_autograd_meta();
  m.grad_fn = node;
  m.output_nr = slot;
}

// ---------------------------------------------------------------- the table

bool has_derivative(ir::OpType op) { return find_derivative(op) != nullptr || op_grad(op) == OpGrad::composite; }
bool is_differentiable(ir::OpType op) { return op_grad(op) != OpGrad::nograd; }

// ---------------------------------------------------------------- recorded calls

// A recorded call: its derivative, what the derivative reads, and the
// metadata the engine needs to reduce each input's gradient.
class OpNode : public Node {
 public:
  OpNode(const OpCall& call, const Derivative* derivative)
      : call_{call.op, {}, call.attrs, {}}, derivative_(derivative) {}
  std::string name() const override { return backward_name(op_name(call_.op)); }
  size_t num_slots() const override { return outputs_.size(); }

  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    PF_CHECK(!released_ || derivative_->saves == kSavesNothing, AutogradError,
             "trying to backward through the graph a second time (", name(),
             "): its saved tensors were freed by the first backward. Pass retain_graph=True to the first "
             "backward() or autograd.grad() to keep them.");
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    if (!any) return std::vector<Tensor>(next_edges.size());
    for (size_t i = 0; i < grads.size(); ++i)
      if (!grads[i].defined()) grads[i] = zeros_of(outputs_[i]);
    OpCall saved{call_.op, std::vector<Tensor>(saved_inputs_.size()), call_.attrs, {}};
    const std::string node = name();
    // With create_graph the derivative reads the saved tensors with their histories, so that
    // its recorded ops lead back through them: the inputs as given, the outputs as this node's.
    const bool create_graph = thread_state().create_graph;
    std::vector<std::string> stale_inputs(saved_inputs_.size()), stale_outputs(saved_outputs_.size());
    for (size_t i = 0; i < saved_inputs_.size(); ++i) {
      const SavedTensor& in = saved_inputs_[i];
      saved.inputs[i] = create_graph && in.source.defined() ? in.source : in.value;
      stale_inputs[i] = in.staleness(node, i, "input");
    }
    std::vector<Tensor> outputs(saved_outputs_.size());
    for (size_t i = 0; i < saved_outputs_.size(); ++i) {
      outputs[i] = saved_outputs_[i].value;
      if (create_graph && outputs[i].defined() && is_floating(outputs[i].dtype())) {
        outputs[i] = outputs[i].detach();
        set_history(outputs[i], self_.lock(), static_cast<uint32_t>(i));
      }
      stale_outputs[i] = saved_outputs_[i].staleness(node, i, "output");
    }
    GradContext ctx{saved, inputs_, outputs, grads, needs_, stale_inputs, stale_outputs};
    // The derivative runs where the forward ran, also over the unplaced zeros and copies of
    // gradients the engine makes there.
    const DeviceScope forward_device(outputs_.empty() ? std::nullopt : std::optional<Device>(outputs_[0].device));
    std::vector<Tensor> result = derivative_->fn(ctx);
    PF_CHECK(result.size() == inputs_.size(), ValueError, name(), ": the derivative returned ", result.size(),
             " gradients for ", inputs_.size(), " inputs (a library bug)");
    for (size_t i = 0; i < result.size(); ++i) result[i] = needs_[i] ? reduce_to(result[i], inputs_[i]) : Tensor();
    return result;
  }

  void release() override {
    saved_inputs_.clear();
    saved_outputs_.clear();
    released_ = true;
  }

  OpCall call_;  // op and attributes (inputs live in saved_inputs_)
  const Derivative* derivative_;
  std::weak_ptr<OpNode> self_;  // the node as its outputs' history (create_graph's saved outputs)
  std::vector<TensorInfo> inputs_, outputs_;
  std::vector<bool> needs_;
  std::vector<SavedTensor> saved_inputs_, saved_outputs_;
  bool released_ = false;
};

namespace {

// The new history of a tensor that an in-place op wrote through one of its
// views (PyTorch's CopySlices): the gradient of the whole tensor goes to the
// op's other inputs for the view's elements, and to the tensor's old history
// with the view's elements replaced by what the op's derivative gives for them.
class CopySlices : public Node {
 public:
  CopySlices(const Tensor& base_layout, const Tensor& view, Edge base_edge, std::shared_ptr<OpNode> fn, int self_input)
      : view_shape_(view.shape()),
        view_strides_(view.strides()),
        view_offset_(view.offset() - base_layout.offset()),
        fn_(std::move(fn)),
        self_input_(self_input) {
    next_edges.push_back(std::move(base_edge));
    if (fn_)
      for (size_t i = 0; i < fn_->next_edges.size(); ++i)
        if (static_cast<int>(i) != self_input_) next_edges.push_back(fn_->next_edges[i]);
  }
  std::string name() const override { return "CopySlices"; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    PF_CHECK(!thread_state().create_graph, NotSupportedError,
             "a gradient of a gradient (create_graph=True) through an in-place write into a view (CopySlices) is not "
             "supported yet; write out of place (torch.cat, torch.where) in the function differentiated twice");
    if (!grads[0].defined()) return std::vector<Tensor>(next_edges.size());
    Tensor result = grads[0].clone();  // contiguous, laid out as the base (which spans its memory)
    Tensor region = result.as_strided(view_shape_, view_strides_, view_offset_);
    std::vector<Tensor> fn_grads = fn_ ? fn_->apply({region.clone()}) : std::vector<Tensor>();
    if (self_input_ >= 0 && fn_grads[self_input_].defined()) region.copy_(fn_grads[self_input_]);
    else region.fill_(0);
    std::vector<Tensor> out{result};
    for (size_t i = 0; i < fn_grads.size(); ++i)
      if (static_cast<int>(i) != self_input_) out.push_back(fn_grads[i]);
    return out;
  }
  void release() override {
    if (fn_) fn_->release();
  }

 private:
  Shape view_shape_, view_strides_;
  int64_t view_offset_;
  std::shared_ptr<OpNode> fn_;
  int self_input_;
};

// The history of a view after an in-place op rebased its base: the view's
// gradient lands in its elements of a zero gradient of the base.
class ViewOfBase : public Node {
 public:
  ViewOfBase(const Tensor& base_layout, const Tensor& view)
      : base_(info_of(base_layout)),
        view_shape_(view.shape()),
        view_strides_(view.strides()),
        view_offset_(view.offset() - base_layout.offset()) {}
  std::string name() const override { return "AsStridedBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    if (!grads[0].defined()) return {Tensor()};
    Tensor g = zeros_of(base_);
    g.as_strided(view_shape_, view_strides_, view_offset_).copy_(grads[0]);
    return {g};
  }

 private:
  TensorInfo base_;
  Shape view_shape_, view_strides_;
  int64_t view_offset_;
};

bool spans_its_storage(const Tensor& t) {
  return t.offset() == 0 && t.is_contiguous() && t.nbytes() == t.storage()->nbytes();
}

bool same_elements(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.same_storage(b) && a.offset() == b.offset() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

// An in-place op wrote `view` (fn: its node, or null when it makes no
// gradient): the view's base gets CopySlices as its history and the view the
// matching slice of it.
void rebase_view(const Tensor& view, AutogradMeta& m, const std::shared_ptr<OpNode>& fn, int self_input) {
  PF_CHECK(spans_its_storage(m.base_layout), NotSupportedError,
           "an in-place op on a view of a tensor whose memory is not contiguous: clone() the tensor first");
  AutogradMeta& base = *m.base;
  Edge base_edge;
  if (base.grad_fn) base_edge = {base.grad_fn, base.output_nr};
  auto copy_slices = std::make_shared<CopySlices>(m.base_layout, view, std::move(base_edge), fn, self_input);
  copy_slices->sequence_nr = g_next_sequence_nr++;
  base.grad_fn = copy_slices;
  base.output_nr = 0;
  auto view_node = std::make_shared<ViewOfBase>(m.base_layout, view);
  view_node->next_edges.push_back({copy_slices, 0});
  view_node->sequence_nr = g_next_sequence_nr++;
  m.grad_fn = view_node;
  m.output_nr = 0;
}

}  // namespace

bool should_record(const OpCall& call) {
  for (const Tensor& t : call.inputs)
    if (t.requires_grad()) return true;
  for (const Tensor& t : call.outputs)
    if (t.requires_grad()) return true;
  return false;
}

void link_view(const Tensor& input, Tensor& view) {
  const AutogradMeta* im = input.autograd_meta();
  if (!im || !view.same_storage(input)) return;  // (reshape may copy)
  AutogradMeta& m = view.ensure_autograd_meta();
  if (im->base) {
    m.base = im->base;
    m.base_layout = im->base_layout;
  } else {
    m.base = input.autograd_meta_ptr();
    m.base_layout = input.detach();
  }
}

Recording::Recording(OpCall& call) : call_(call) {
  const char* name = op_name(call.op);
  for (const Tensor& out : call.outputs) {
    PF_CHECK(!(out.is_leaf() && out.requires_grad()), AutogradError, name,
             "_: a leaf tensor that requires grad is used in an in-place operation; do it under pf.no_grad(), or "
             "on a clone()");
    const AutogradMeta* m = out.autograd_meta();
    PF_CHECK(!(m && m->base && !m->base->grad_fn && m->base->requires_grad), AutogradError, name,
             "_: a view of a leaf tensor that requires grad is used in an in-place operation; do it under "
             "pf.no_grad(), or on a clone()");
  }
  bool any = false;
  for (const Tensor& t : call.inputs) any = any || t.requires_grad();
  if (!any || op_grad(call.op) != OpGrad::grad) return;
  const Derivative* d = find_derivative(call.op);
  PF_CHECK(d, NotSupportedError, name, ": autograd has no derivative for this op yet (docs/autograd.md lists them); "
           "compute it under pf.no_grad() or from detach()ed inputs");
  node_ = std::make_shared<OpNode>(call, d);
  node_->self_ = node_;
  node_->sequence_nr = g_next_sequence_nr++;
  for (const Tensor& t : call.inputs) {
    node_->inputs_.push_back(info_of(t));
    node_->next_edges.push_back(t.requires_grad() ? gradient_edge(t) : Edge{});
    node_->needs_.push_back(t.requires_grad());
  }
  if (d->saves & kSavesInputs) {
    node_->saved_inputs_.resize(call.inputs.size());
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      const Tensor& t = call.inputs[i];
      bool overwritten = false;
      for (const Tensor& out : call.outputs) overwritten = overwritten || (t.defined() && t.same_storage(out));
      // An input the op overwrites is saved as it was (x.mul_(y) needs the old x for y's gradient).
      node_->saved_inputs_[i].save(overwritten ? t.clone() : t, true);
    }
  }
}

void Recording::finish(std::vector<Tensor>& outputs) {
  const bool in_place = !call_.outputs.empty();
  if (!node_) {
    // An in-place op that makes no gradient: what it wrote has no history;
    // through a view, the base's gradient stops at the view's elements.
    if (in_place)
      for (Tensor& out : outputs)
        if (AutogradMeta* m = out.autograd_meta()) {
          if (m->base && m->base->grad_fn) rebase_view(out, *m, nullptr, -1);
          else m->grad_fn.reset();
        }
    return;
  }
  for (const Tensor& o : outputs) node_->outputs_.push_back(info_of(o));
  if (node_->derivative_->saves & kSavesOutputs) {
    node_->saved_outputs_.resize(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) node_->saved_outputs_[i].save(outputs[i], false);
  }
  const bool is_view = op_family(call_.op) == OpFamily::VIEW;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (!is_floating(out.dtype())) continue;
    AutogradMeta& m = out.ensure_autograd_meta();
    if (in_place && m.base) {
      int self_input = -1;
      for (size_t k = 0; k < call_.inputs.size(); ++k)
        if (same_elements(call_.inputs[k], out)) self_input = static_cast<int>(k);
      rebase_view(out, m, node_, self_input);
      continue;
    }
    PF_CHECK(!in_place || spans_its_storage(out), NotSupportedError, op_name(call_.op),
             "_: an in-place op that makes a gradient, on a view whose base autograd does not know (made under "
             "pf.no_grad() or outside pyflame's ops); make the base with pyflame ops in grad mode, or compute out "
             "of place");
    m.grad_fn = node_;
    m.output_nr = static_cast<uint32_t>(i);
    if (is_view) link_view(call_.inputs[0], out);
  }
}

namespace {

// apply()'s autograd hook for a call it records.
std::vector<Tensor> record(OpCall& call, ApplyHooks::RunFn run, void* ctx) {
  Recording recording(call);
  std::vector<Tensor> outputs;
  {
    GradModeGuard off(false);
    outputs = run(ctx);
  }
  recording.finish(outputs);
  return outputs;
}

const bool registered = [] {
  ApplyHooks& hooks = apply_hooks();
  hooks.should_record = &should_record, hooks.record = &record, hooks.link_view = &link_view;
  return true;
}();

}  // namespace

// ---------------------------------------------------------------- the backward pass

namespace {

struct NodeHash {
  size_t operator()(const Node* n) const { return std::hash<const Node*>()(n); }
};

// A node's tensor hooks (Tensor::register_hook) on the gradients that arrived for it.
void run_tensor_hooks(Node& n, std::vector<Tensor>& grads) {
  for (const TensorHook& h : n.hooks()) {
    Tensor& g = grads[h.slot];
    if (!g.defined()) continue;
    Tensor r = h.fn(g);
    if (!r.defined()) continue;
    PF_CHECK(r.shape() == g.shape() && r.dtype() == g.dtype() && r.device() == g.device(), AutogradError,
             "a gradient hook returned a tensor of ", dtype_name(r.dtype()), r.shape(), " on ", to_string(r.device()),
             " for a gradient of ", dtype_name(g.dtype()), g.shape(), " on ", to_string(g.device()),
             ": it must keep the gradient's shape, dtype and device");
    g = r;
  }
}

// Runs the graph from `roots` (with their gradients). Without `targets`, every
// reachable node runs (backward: leaves accumulate). With them, only nodes on
// a path to a target run, and the gradient arriving at each target is returned.
std::vector<Tensor> run_graph(const std::vector<Edge>& roots, const std::vector<Tensor>& root_grads, bool retain_graph,
                              const std::vector<Edge>& targets, bool create_graph) {
  // With create_graph the derivatives' ops record a graph of their own (grad mode on), and
  // gradients are summed out of place, so each sum keeps its history.
  GradModeGuard mode(create_graph);
  struct CreateGraphScope {
    bool previous;
    explicit CreateGraphScope(bool on) : previous(thread_state().create_graph) { thread_state().create_graph = on; }
    ~CreateGraphScope() { thread_state().create_graph = previous; }
  } create_graph_scope(create_graph);
  // Reachable nodes, children before parents in `order` (iterative DFS).
  std::unordered_map<Node*, int, NodeHash> state;  // 1: on the stack, 2: done
  std::vector<Node*> order;
  std::vector<std::pair<Node*, size_t>> stack;
  for (const Edge& r : roots) {
    if (!r.valid() || state.count(r.node.get())) continue;
    stack.push_back({r.node.get(), 0});
    state[r.node.get()] = 1;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->next_edges.size()) {
        Node* c = n->next_edges[next++].node.get();
        if (c && !state.count(c)) {
          state[c] = 1;
          stack.push_back({c, 0});
        }
        continue;
      }
      state[n] = 2;
      order.push_back(n);
      stack.pop_back();
    }
  }
  // Which nodes run: all, or those with a target below them.
  std::unordered_set<Node*, NodeHash> target_nodes, runs;
  for (const Edge& t : targets) target_nodes.insert(t.node.get());
  for (Node* n : order) {  // children first
    bool run = targets.empty();
    for (const Edge& e : n->next_edges)
      run = run || (e.node && (runs.count(e.node.get()) || target_nodes.count(e.node.get())));
    if (run) runs.insert(n);
  }
  std::unordered_map<Node*, int, NodeHash> pending;
  for (Node* n : order)
    if (runs.count(n))
      for (const Edge& e : n->next_edges)
        if (e.node) ++pending[e.node.get()];

  // Gradients arriving for one input are summed in its buffer: in place when
  // no one else holds the buffer's memory (a derivative's fresh result), which
  // saves a tensor and a pass per extra consumer of a forward value.
  std::unordered_map<Node*, std::vector<Tensor>, NodeHash> buffers;
  auto slot_of = [&](const Edge& e) -> Tensor& {
    std::vector<Tensor>& buf = buffers[e.node.get()];
    if (buf.empty()) buf.resize(e.node->num_slots());
    return buf[e.input_nr];
  };
  auto deliver = [&](const Edge& e, const Tensor& g) {
    Tensor& slot = slot_of(e);
    if (!create_graph && g.defined() && summable_in_place(slot, g.shape(), g.dtype(), g.device()))
      binary_op_(ir::OpType::add, slot, g);
    else slot = add_grads(slot, g);
  };
  // A select or slice adds its gradient into its region of the input's buffer,
  // made once: the views of one tensor (an RNN's time steps, the chunks of a
  // projection) then cost one buffer, not one tensor of zeros each, which made
  // a recurrent layer's backward quadratic in the sequence length.
  auto add_view_grad = [&](Node* n, const Tensor& g) {
    auto* view = dynamic_cast<OpNode*>(n);
    if (create_graph || !view || (view->call_.op != ir::OpType::select && view->call_.op != ir::OpType::slice) || !g.defined() ||
        !view->needs_[0] || !n->next_edges[0].node)
      return false;
    const TensorInfo& in = view->inputs_[0];
    if (g.dtype() != in.dtype || g.device() != in.device) return false;
    const DeviceScope forward_device(in.device);
    Tensor& slot = slot_of(n->next_edges[0]);
    if (!slot.defined()) slot = zeros_of(in);
    else if (!summable_in_place(slot, in.shape, in.dtype, in.device)) return false;
    Tensor region = view_region(view->call_, slot);
    binary_op_(ir::OpType::add, region, g);
    return true;
  };
  std::unordered_map<Node*, std::shared_ptr<Node>, NodeHash> owners;  // keeps nodes alive while they wait
  std::vector<Node*> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].valid()) continue;
    deliver(roots[i], root_grads[i]);
    owners[roots[i].node.get()] = roots[i].node;
  }
  for (const Edge& r : roots)
    if (r.valid() && pending[r.node.get()] == 0 &&
        std::find(ready.begin(), ready.end(), r.node.get()) == ready.end())
      ready.push_back(r.node.get());

  std::vector<Tensor> captured(targets.size());
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    if (ir::recorded_before_trace(n->sequence_nr) && !dynamic_cast<AccumulateGrad*>(n))
      ir::trace_break("a backward pass through ops recorded before the compiled function ran (compile the forward "
                      "and the backward together)");
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    if (grads.empty()) grads.resize(n->num_slots());
    // grad() returns a non-leaf input's gradient as it arrives and a leaf's after
    // its hooks, as PyTorch; what flows on, and .grad, are always after them.
    const bool hooked = !n->hooks().empty(), leaf = hooked && dynamic_cast<AccumulateGrad*>(n) != nullptr;
    if (leaf) run_tensor_hooks(*n, grads);
    for (size_t t = 0; t < targets.size(); ++t)
      if (targets[t].node.get() == n) captured[t] = grads[targets[t].input_nr];
    if (hooked && !leaf) run_tensor_hooks(*n, grads);
    if (targets.empty())
      for (auto& [slot, weak] : n->retained)
        if (auto meta = weak.lock(); meta && grads[slot].defined()) {
          ir::trace_break("retain_grad() on a tensor the traced code made (its .grad cannot be replayed)");
          meta->grad = meta->grad.defined() ? add(meta->grad, grads[slot]) : clone(grads[slot]);
        }
    if (!runs.count(n)) continue;
    std::vector<Tensor> out;
    if (grads.size() != 1 || !add_view_grad(n, grads[0])) out = n->apply(std::move(grads));
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      const Edge& e = n->next_edges[i];
      if (!e.node) continue;
      if (i < out.size() && out[i].defined()) deliver(e, out[i]);
      owners[e.node.get()] = e.node;
      if (--pending[e.node.get()] == 0) ready.push_back(e.node.get());
    }
    if (!retain_graph) n->release();
    owners.erase(n);
  }
  return captured;
}

Edge root_edge(const Tensor& t, size_t i) {
  PF_CHECK(t.requires_grad(), AutogradError, "element ", i,
           " of the tensors does not require grad and has no grad_fn: nothing to differentiate "
           "(set requires_grad=True on the leaves, outside pf.no_grad())");
  return gradient_edge(t);
}

Tensor root_grad(const Tensor& t, const Tensor& g) {
  if (g.defined()) {
    PF_CHECK(g.shape() == t.shape(), ValueError, "backward: the gradient has shape ", g.shape(),
             " but the tensor has shape ", t.shape());
    return g.dtype() == t.dtype() ? g : to(g, t.dtype());  // as PyTorch, a gradient of any dtype
  }
  PF_CHECK(t.numel() == 1, AutogradError, "backward: grad can be implicitly created only for scalar outputs; the "
           "tensor has shape ", t.shape(), ", so pass gradient= (a tensor of that shape)");
  Tensor one = Tensor::empty(t.shape(), t.dtype(), t.device());
  one.fill_(1);
  return one.set_placed(t.is_placed());
}

}  // namespace

namespace {
thread_local std::vector<std::function<void()>>* backward_callbacks = nullptr;  // of the backward running
}  // namespace

void queue_callback(std::function<void()> fn) {
  PF_CHECK(backward_callbacks, AutogradError, "queue_callback() outside a backward pass");
  backward_callbacks->push_back(std::move(fn));
}

bool creates_graph() { return thread_state().create_graph; }

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots, bool retain_graph,
              bool create_graph) {
  ir::trace_backward();
  std::vector<Edge> edges;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    edges.push_back(root_edge(roots[i], i));
    grads.push_back(root_grad(roots[i], i < grad_roots.size() ? grad_roots[i] : Tensor()));
  }
  std::vector<std::function<void()>> callbacks, *outer = backward_callbacks;
  backward_callbacks = &callbacks;
  try {
    run_graph(edges, grads, retain_graph || create_graph, {}, create_graph);
  } catch (...) {
    backward_callbacks = outer;
    throw;
  }
  backward_callbacks = outer;
  for (const std::function<void()>& fn : callbacks) fn();
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused,
                         bool create_graph) {
  ir::trace_break("a backward pass (pf.autograd.grad)");
  std::vector<Edge> edges, targets;
  std::vector<Tensor> grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    edges.push_back(root_edge(outputs[i], i));
    grads.push_back(root_grad(outputs[i], i < grad_outputs.size() ? grad_outputs[i] : Tensor()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    PF_CHECK(inputs[i].requires_grad(), AutogradError, "autograd.grad: input ", i, " does not require grad");
    targets.push_back(gradient_edge(inputs[i]));
  }
  std::vector<Tensor> result = run_graph(edges, grads, retain_graph || create_graph, targets, create_graph);
  for (size_t i = 0; i < result.size(); ++i) {
    PF_CHECK(result[i].defined() || allow_unused, AutogradError, "autograd.grad: input ", i,
             " was not used to compute the outputs; pass allow_unused=True to get None for it");
    if (result[i].defined()) result[i] = reduce_to(result[i], info_of(inputs[i]));
  }
  return result;
}

}  // namespace autograd

// ---------------------------------------------------------------- Tensor's autograd state

bool Tensor::requires_grad() const { return autograd_ && (autograd_->requires_grad || autograd_->grad_fn); }

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  if (!is_leaf()) {
    PF_CHECK(requires_grad, AutogradError, "requires_grad can only be changed on leaf tensors; use detach() to get a "
             "tensor without history");
    return *this;
  }
  PF_CHECK(!requires_grad || is_floating(dtype_), AutogradError,
           "only tensors of floating point dtype can require gradients (this one is ", dtype_name(dtype_), ")");
  ensure_autograd_meta().requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const { return !autograd_ || !autograd_->grad_fn; }

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  return autograd_ ? autograd_->grad_fn : none;
}

uint32_t Tensor::output_nr() const { return autograd_ ? autograd_->output_nr : 0; }

Tensor Tensor::grad() const { return autograd_ ? autograd_->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) {
  ir::trace_grad_access(*this, ir::GradAccess::Write);
  if (grad.defined()) {
    PF_CHECK(grad.shape() == shape_, ValueError, "assigned grad has shape ", grad.shape(), " but the tensor has shape ",
             shape_);
    PF_CHECK(grad.dtype() == dtype_, TypeError, "assigned grad has dtype ", dtype_name(grad.dtype()),
             " but the tensor has dtype ", dtype_name(dtype_));
    PF_CHECK(grad.device() == device(), ValueError, "assigned grad is on ", pyflame::to_string(grad.device()),
             " but the tensor is on ", pyflame::to_string(device()));
  }
  ensure_autograd_meta().grad = grad;
}

void Tensor::retain_grad() {
  PF_CHECK(requires_grad(), AutogradError, "retain_grad() on a tensor that does not require grad");
  if (is_leaf() || autograd_->retains_grad) return;
  autograd_->retains_grad = true;
  autograd_->grad_fn->retained.push_back({autograd_->output_nr, autograd_});
}

bool Tensor::retains_grad() const { return autograd_ && autograd_->retains_grad; }

namespace {
uint64_t next_hook_id() {
  static std::atomic<uint64_t> next{1};
  return next++;
}
}  // namespace

uint64_t Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) {
  PF_CHECK(requires_grad(), AutogradError, "cannot register a hook on a tensor that doesn't require gradient");
  const uint64_t id = next_hook_id();
  if (is_leaf()) autograd_->hooks.push_back({id, 0, std::move(hook)});
  else autograd_->grad_fn->hooks().push_back({id, autograd_->output_nr, std::move(hook)});
  return id;
}

uint64_t Tensor::register_grad_accumulated_hook(std::function<Tensor(const Tensor&)> hook) {
  PF_CHECK(is_leaf() && requires_grad(), AutogradError,
           "a hook on accumulated gradients needs a leaf tensor that requires grad");
  const uint64_t id = next_hook_id();
  autograd_->accumulated_hooks.push_back({id, 0, std::move(hook)});
  return id;
}

void Tensor::remove_hook(uint64_t id) {
  if (!autograd_) return;
  std::vector<autograd::TensorHook>& hooks = autograd_->grad_fn ? autograd_->grad_fn->hooks() : autograd_->hooks;
  auto same = [id](const autograd::TensorHook& h) { return h.id == id; };
  std::erase_if(hooks, same);
  std::erase_if(autograd_->accumulated_hooks, same);
}

void Tensor::set_data(const Tensor& other) {
  PF_CHECK(other.defined(), ValueError, "data: the new value must be a tensor");
  PF_CHECK(!requires_grad() || is_floating(other.dtype()), AutogradError, "data: a tensor that requires grad "
           "cannot take ", other.dtype(), " data (only floating point tensors can require gradients)");
  // A graph replays its calls, not the Python that rebinds a tensor's data: such a trace runs eagerly.
  ir::trace_break("a tensor given new data (.data = ...)");
  if (storage_) storage_->note_rebound();
  storage_ = other.storage_;
  shape_ = other.shape_;
  strides_ = other.strides_;
  offset_ = other.offset_;
  dtype_ = other.dtype_;
  placed_ = other.placed_;
}

Tensor Tensor::detach() const {
  Tensor t(storage_, shape_, strides_, offset_, dtype_);
  t.placed_ = placed_;
  return t;
}

AutogradMeta& Tensor::ensure_autograd_meta() {
  if (!autograd_) autograd_ = std::make_shared<AutogradMeta>();
  return *autograd_;
}

}  // namespace pyflame
