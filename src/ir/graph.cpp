// The generic executor of an ir::Graph (include/pyflame/ir/graph.h): each
// node's call rebuilt from its values and handed to apply(), as eager code
// would make it, so every device, autograd and autocast behave as they do
// eagerly. Random ops reserve new draws of the default generator. A training
// step's graph (its backward traced in it) runs without autograd recording and
// leaves each leaf's .grad as the traced call did.

#include <optional>
#include <string>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/thread_state.h"
#include "pyflame/autograd.h"
#include "pyflame/error.h"
#include "pyflame/generator.h"
#include "pyflame/grad_mode.h"
#include "pyflame/ir/graph.h"
#include "pyflame/ir/op_call.h"

namespace pyflame::ir {
namespace {

std::string value_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::None: return "-";
    case Value::Kind::Input: return "in" + std::to_string(v.index);
    case Value::Kind::Constant: return "c" + std::to_string(v.index);
    case Value::Kind::Buffer: return "buf" + std::to_string(v.index);
    case Value::Kind::Node: return "%" + std::to_string(v.index) + (v.output ? "." + std::to_string(v.output) : "");
  }
  return "?";
}

struct Run {
  const Graph& g;
  const std::vector<Tensor>& inputs;
  std::vector<Tensor> constants, buffers;
  std::vector<std::vector<Tensor>> results;

  const Tensor& operator[](const Value& v) const {
    static const Tensor none;
    switch (v.kind) {
      case Value::Kind::None: return none;
      case Value::Kind::Input: return inputs[v.index];
      case Value::Kind::Constant: return constants[v.index];
      case Value::Kind::Buffer: return buffers[v.index];
      case Value::Kind::Node: return results[v.index][v.output];
    }
    return none;
  }
};

}  // namespace

std::string Graph::to_string() const {
  std::string s;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    s += "%" + std::to_string(i) + " = " + op_name(n.op) + "(";
    for (size_t j = 0; j < n.inputs.size(); ++j) s += (j ? ", " : "") + value_name(n.inputs[j]);
    s += ")";
    for (size_t j = 0; j < n.written.size(); ++j) s += (j ? ", " : " -> ") + value_name(n.written[j]);
    s += "\n";
  }
  for (const GradWrite& w : grad_writes) s += value_name(w.leaf) + ".grad = " + value_name(w.grad) + "\n";
  s += "return";
  for (size_t j = 0; j < outputs.size(); ++j) s += (j ? ", " : " ") + value_name(outputs[j]);
  return s;
}

Value Graph::add_constant(const Tensor& t, bool data) {
  constants.push_back(t);
  constant_copied.push_back(false);
  constant_data.push_back(data);
  constant_rebinds.push_back(t.defined() ? t.storage()->rebinds() : 0);
  return {Value::Kind::Constant, static_cast<int64_t>(constants.size()) - 1, 0};
}

std::vector<Tensor> run_graph(const Graph& g, const std::vector<Tensor>& inputs,
                              const std::function<void(size_t node)>& after_node) {
  PF_CHECK(static_cast<int64_t>(inputs.size()) == g.num_inputs, ValueError, "run_graph: the graph takes ",
           g.num_inputs, " tensors, got ", inputs.size());
  std::optional<autograd::GradModeGuard> no_grad;
  if (g.runs_backward) no_grad.emplace(false);
  Run run{g, inputs, g.constants, {}, {}};
  for (size_t i = 0; i < g.constants.size(); ++i)
    if (g.constant_copied[i]) run.constants[i] = g.constants[i].clone().set_placed(g.constants[i].is_placed());
  for (const Tensor& like : g.buffers)
    run.buffers.push_back(Tensor::empty(like.shape(), like.dtype(), like.device()).set_placed(like.is_placed()));
  run.results.reserve(g.nodes.size());
  for (const Node& n : g.nodes) {
    OpCall call{n.op, {}, n.attrs, {}};
    for (const Value& v : n.inputs) call.inputs.push_back(run[v]);
    for (const Value& v : n.written) call.outputs.push_back(run[v]);
    if (n.draws) {
      RandomAttrs& a = std::get<RandomAttrs>(call.attrs);
      const PhiloxRange r = default_generator().reserve(n.draws);
      a.seed = r.seed, a.offset = r.offset;
    }
    const DeviceScope on_traced_device(n.device);
    run.results.push_back(apply(std::move(call)));
    const size_t i = run.results.size() - 1;
    if (after_node) after_node(i);
    if (i < g.release_after.size())
      for (int32_t dead : g.release_after[i]) run.results[dead].clear();
  }
  for (const GradWrite& w : g.grad_writes) Tensor(run[w.leaf]).set_grad(run[w.grad]);
  std::vector<Tensor> outputs;
  for (const Value& v : g.outputs) outputs.push_back(run[v]);
  return outputs;
}

namespace {

bool records_autograd(const std::vector<Tensor>& tensors) {
  if (!autograd::is_grad_enabled()) return false;
  for (const Tensor& t : tensors)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

}  // namespace

DeviceGraph::DeviceGraph(const Graph& g, const std::vector<Tensor>& inputs) : graph_(g) {
  PF_CHECK(static_cast<int64_t>(inputs.size()) == g.num_inputs && !inputs.empty(), NotSupportedError,
           "device graph: a graph of GPU tensor inputs only");
  device_ = inputs[0].device();
  DeviceBackend* backend = backend_for(device_.type);
  PF_CHECK(device_.type == DeviceType::ROCm && backend && backend->can_capture(), NotSupportedError,
           "device graph: the inputs are on '", pyflame::to_string(device_), "', not a GPU");
  for (const Tensor& t : inputs)
    PF_CHECK(t.device() == device_, NotSupportedError, "device graph: inputs on two devices");
  for (const Tensor& t : g.constants)
    PF_CHECK(t.device() == device_ || t.is_wrapped_number(), NotSupportedError,
             "device graph: a tensor from outside the graph on '", pyflame::to_string(t.device()), "'");
  for (const Tensor& t : g.buffers)
    PF_CHECK(t.device() == device_, NotSupportedError, "device graph: a buffer on another device");
  for (const Node& n : g.nodes) {
    PF_CHECK(!n.draws, NotSupportedError, "device graph: ", op_name(n.op), " draws random numbers");
    for (const Value& v : n.written)
      PF_CHECK(v.kind != Value::Kind::Input, NotSupportedError, "device graph: ", op_name(n.op),
               " writes a graph input in place");
  }
  PF_CHECK(g.runs_backward || (!records_autograd(inputs) && !records_autograd(g.constants)), NotSupportedError,
           "device graph: autograd records these calls (grad mode, an input that requires grad)");
  for (const Tensor& t : inputs) {
    Tensor copy = Tensor::empty(t.shape(), t.dtype(), device_).set_placed(t.is_placed());
    copy.copy_(t);
    inputs_.push_back(copy);
  }
  backend->begin_capture(device_.index);
  thread_state().capturing = true;
  size_t captured = 0;  // calls run so far: the error names the one that failed
  try {
    outputs_ = run_graph(graph_, inputs_, [&](size_t node) { captured = node + 1; });
  } catch (const std::exception& e) {
    thread_state().capturing = false;
    backend->end_capture(device_.index, false);
    const std::string where = captured < graph_.nodes.size()
                                  ? "%" + std::to_string(captured) + " = " + op_name(graph_.nodes[captured].op)
                                  : std::string("after the last call");
    throw NotSupportedError("device graph: the calls could not be captured (" + where + "): " + e.what());
  }
  thread_state().capturing = false;
  exec_ = backend->end_capture(device_.index, true);
  PF_CHECK(exec_, NotSupportedError, "device graph: the runtime refused to capture the calls");
  for (const GradWrite& w : graph_.grad_writes) grads_.push_back(leaf(w.leaf, inputs_).grad());
}

const Tensor& DeviceGraph::leaf(const Value& v, const std::vector<Tensor>& inputs) const {
  return v.kind == Value::Kind::Input ? inputs[v.index] : graph_.constants[v.index];
}

DeviceGraph::~DeviceGraph() {
  outputs_.clear();  // their memory is the pool's, which destroy_graph gives back
  inputs_.clear();
  if (exec_) backend_for(device_.type)->destroy_graph(exec_);
}

std::vector<Tensor> DeviceGraph::launch(const std::vector<Tensor>& inputs) {
  PF_CHECK(inputs.size() == inputs_.size(), ValueError, "device graph: ", inputs_.size(), " inputs, got ",
           inputs.size());
  // A parameter made to require grad after the capture: autograd must see the calls.
  if (!graph_.runs_backward && records_autograd(graph_.constants)) return run_graph(graph_, inputs);
  for (size_t i = 0; i < inputs.size(); ++i) inputs_[i].copy_(inputs[i]);
  backend_for(device_.type)->launch_graph(exec_);
  // The gradients are the graph's memory, as its other results in PyTorch's device graphs: the next launch
  // overwrites them (a training step reads them before that).
  for (size_t i = 0; i < grads_.size(); ++i) Tensor(leaf(graph_.grad_writes[i].leaf, inputs)).set_grad(grads_[i]);
  std::vector<Tensor> results;
  for (size_t i = 0; i < graph_.outputs.size(); ++i) {
    const Value& v = graph_.outputs[i];
    if (v.kind == Value::Kind::Input) results.push_back(inputs[v.index]);
    else if (v.kind == Value::Kind::None) results.emplace_back();
    else if (v.kind == Value::Kind::Constant && !graph_.constant_copied[v.index])
      results.push_back(graph_.constants[v.index]);
    else results.push_back(outputs_[i].clone().set_placed(outputs_[i].is_placed()));
  }
  return results;
}

}  // namespace pyflame::ir
