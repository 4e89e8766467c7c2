// Graph tracing (include/pyflame/ir/graph.h): a hook on apply() appends each
// top-level call of this thread to the graph under construction. A tensor is
// known by what it shows (storage, offset, shape, strides, dtype); the trace
// keeps every tensor it has seen alive, so no storage is freed and reused
// under a key while it runs. A tensor met for the first time is a constant
// when its storage is older than the trace, else something the traced code
// made without an op: data (read first) or a buffer (written first).
//
// Leaves (tensors that require grad and no op made) are noted as they are
// first seen, so that backward's accumulation into a leaf's .grad, which
// knows the leaf by its autograd state, finds the leaf's value.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/dispatch.h"
#include "core/thread_state.h"
#include "pyflame/autograd.h"
#include "pyflame/error.h"
#include "pyflame/generator.h"
#include "pyflame/ir/graph.h"
#include "pyflame/ir/op_call.h"

namespace pyflame::ir {
namespace {

using TensorKey = std::tuple<const Storage*, int64_t, Shape, Shape, DType>;

TensorKey key_of(const Tensor& t) { return {t.storage().get(), t.offset(), t.shape(), t.strides(), t.dtype()}; }

// How the traced call used one leaf's .grad.
struct LeafGrad {
  Value leaf;
  bool read_first = false;  // read (or updated) before any write: the graph depends on it
  Tensor initial;           // .grad then
  bool written = false;
};

struct Trace {
  Graph graph;
  uint64_t first_serial = 0;
  uint64_t first_sequence_nr = 0;  // autograd nodes recorded before the trace have smaller numbers
  std::map<TensorKey, Value> values;
  std::map<const AutogradMeta*, Value> leaves;
  std::map<const AutogradMeta*, LeafGrad> grads;
  std::vector<Tensor> seen;           // alive until the trace ends
  std::set<const Storage*> computed;  // the storages of the inputs and of the calls' results
  std::string why_not;
};

thread_local std::unique_ptr<Trace> t_trace;

bool made_during_trace(const Trace& tr, const Tensor& t) { return t.storage()->serial() >= tr.first_serial; }

// Notes a tensor seen for the first time as value v: a leaf is found by its autograd state.
Value first_seen(Trace& tr, const Tensor& t, const TensorKey& key, Value v) {
  tr.seen.push_back(t);
  tr.values.emplace(key, v);
  if (t.autograd_meta() && t.is_leaf() && t.requires_grad()) tr.leaves.emplace(t.autograd_meta(), v);
  return v;
}

// The value a tensor read by a call (or returned) stands for.
Value read_value(Trace& tr, const Tensor& t) {
  if (!t.defined()) return {};
  const TensorKey key = key_of(t);
  if (auto it = tr.values.find(key); it != tr.values.end()) return it->second;
  return first_seen(tr, t, key, tr.graph.add_constant(t, made_during_trace(tr, t)));
}

// A value written in place or handed to the caller: data the traced code made must
// be copied each run, or runs would share (and overwrite) one tensor.
void mark_escaping(Trace& tr, const Value& v) {
  if (v.kind == Value::Kind::Constant && tr.graph.constant_data[v.index]) tr.graph.constant_copied[v.index] = true;
}

// The value an in-place call writes into.
Value written_value(Trace& tr, const Tensor& t) {
  const TensorKey key = key_of(t);
  if (auto it = tr.values.find(key); it != tr.values.end()) {
    mark_escaping(tr, it->second);
    return it->second;
  }
  if (!made_during_trace(tr, t)) return first_seen(tr, t, key, tr.graph.add_constant(t, false));
  tr.graph.buffers.push_back(t);
  return first_seen(tr, t, key, Value{Value::Kind::Buffer, static_cast<int64_t>(tr.graph.buffers.size()) - 1, 0});
}

void note_grad_access(Trace& tr, const AutogradMeta* meta, const Tensor& grad_now, GradAccess access) {
  auto leaf = tr.leaves.find(meta);
  if (leaf == tr.leaves.end()) {
    trace_break("a gradient for a tensor that requires grad but that the traced code did not use");
    return;
  }
  auto [it, first] = tr.grads.try_emplace(meta);
  LeafGrad& g = it->second;
  if (first) g = LeafGrad{leaf->second, access != GradAccess::Write, grad_now, false};
  g.written = g.written || access != GradAccess::Read;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.defined() == b.defined() && (!a.defined() || key_of(a) == key_of(b));
}

void on_trace(const OpCall& call, const std::vector<Tensor>& outputs) {
  Trace* tr = t_trace.get();
  if (!tr) return;
  Node node;
  node.op = call.op;
  node.attrs = call.attrs;
  for (const Tensor& t : call.inputs) node.inputs.push_back(read_value(*tr, t));
  for (const Tensor& t : call.outputs) node.written.push_back(written_value(*tr, t));
  node.num_outputs = static_cast<int>(outputs.size());
  node.device = current_device();
  if (!outputs.empty() && outputs[0].defined())
    node.dtype = outputs[0].dtype(), node.shape = outputs[0].shape(), node.on_cpu = outputs[0].device().is_cpu();
  if (const auto* random = std::get_if<RandomAttrs>(&call.attrs)) {
    // The call reserved its draws before apply: from the default generator if it
    // is exactly that many draws ahead of the call's first.
    node.draws = outputs.empty() ? 0 : static_cast<uint64_t>(outputs[0].numel());
    const Generator& g = default_generator();
    if (g.initial_seed() != random->seed || g.offset() != random->offset + node.draws)
      trace_break(std::string(op_name(call.op)) + " drawing from a generator other than the default one");
  }
  const int64_t id = static_cast<int64_t>(tr->graph.nodes.size());
  tr->graph.nodes.push_back(std::move(node));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    tr->seen.push_back(outputs[i]);
    tr->computed.insert(outputs[i].storage().get());
    tr->values[key_of(outputs[i])] = Value{Value::Kind::Node, id, static_cast<int>(i)};
  }
}

// Memory touched outside any op: harmless for data the traced code wrote
// (pf.tensor of a list), but a computed value read or written there (nonzero's
// count read on the host, a mask's positions, a raw copy) is work the graph
// does not hold: replaying it would keep what this run saw.
void on_raw_access(const Storage* storage) {
  Trace* tr = t_trace.get();
  if (tr && tr->computed.count(storage))
    trace_break("a computed tensor's memory used outside any op (a count or a boolean mask's positions read on "
                "the host to size a result, as nonzero and x[mask] do)");
}

const bool registered = [] {
  apply_hooks().trace = &on_trace;
  apply_hooks().raw_access = &on_raw_access;
  return true;
}();

}  // namespace

void begin_trace(const std::vector<Tensor>& inputs) {
  PF_CHECK(!t_trace, NotSupportedError, "pf.compile: a trace is already running in this thread (one at a time)");
  auto tr = std::make_unique<Trace>();
  tr->first_serial = Storage::next_serial();
  tr->first_sequence_nr = autograd::new_sequence_nr();
  tr->graph.num_inputs = static_cast<int64_t>(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    tr->graph.input_dtypes.push_back(inputs[i].dtype());
    tr->graph.input_shapes.push_back(inputs[i].shape());
    tr->computed.insert(inputs[i].storage().get());
    const TensorKey key = key_of(inputs[i]);
    if (!tr->values.count(key)) first_seen(*tr, inputs[i], key, Value{Value::Kind::Input, static_cast<int64_t>(i), 0});
  }
  t_trace = std::move(tr);
  thread_state().tracing = true;
  ++tracing_threads;
}

Graph end_trace(const std::vector<Tensor>& outputs, std::string& why_not) {
  PF_CHECK(t_trace, ValueError, "pf.compile: no trace is running in this thread");
  thread_state().tracing = false;
  --tracing_threads;
  std::unique_ptr<Trace> tr = std::move(t_trace);
  for (const Tensor& t : outputs) {
    const Value v = read_value(*tr, t);
    mark_escaping(*tr, v);
    tr->graph.outputs.push_back(v);
  }
  for (auto& [meta, g] : tr->grads) {
    if (g.written) {
      const Value grad = read_value(*tr, meta->grad);
      mark_escaping(*tr, grad);
      tr->graph.grad_writes.push_back({g.leaf, grad});
    }
    // The traced code decided with whether .grad was None (zero_grad, an optimizer skipping a
    // parameter); where an op used that tensor (backward accumulating into it), with which tensor it was.
    if (g.read_first)
      tr->graph.grad_guards.push_back({g.leaf, g.initial, g.initial.defined() && tr->values.count(key_of(g.initial))});
  }
  why_not = tr->why_not;
  if (why_not.empty()) optimize(tr->graph);
  return std::move(tr->graph);
}

void abort_trace() {
  if (t_trace) --tracing_threads;
  thread_state().tracing = false;
  t_trace.reset();
}

bool is_tracing() { return t_trace != nullptr; }

void trace_break(const std::string& what) {
  if (t_trace && t_trace->why_not.empty()) t_trace->why_not = what;
}

void trace_grad_access(const Tensor& leaf, GradAccess access) {
  Trace* tr = t_trace.get();
  if (!tr || !leaf.autograd_meta() || !leaf.is_leaf()) return;
  const Value v = read_value(*tr, leaf);
  tr->leaves.emplace(leaf.autograd_meta(), v);
  note_grad_access(*tr, leaf.autograd_meta(), leaf.grad(), access);
}

void trace_grad_access(const AutogradMeta* leaf, const Tensor& grad_now, GradAccess access) {
  if (t_trace) note_grad_access(*t_trace, leaf, grad_now, access);
}

void trace_backward() {
  if (t_trace) t_trace->graph.runs_backward = true;
}

bool recorded_before_trace(uint64_t sequence_nr) { return t_trace && sequence_nr < t_trace->first_sequence_nr; }

bool graph_applies(const Graph& g, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < g.constants.size(); ++i)
    if (g.constants[i].defined() && g.constants[i].storage()->rebinds() != g.constant_rebinds[i]) return false;
  for (const GradGuard& guard : g.grad_guards) {
    const Tensor& leaf = guard.leaf.kind == Value::Kind::Input ? inputs.at(guard.leaf.index)
                                                                : g.constants.at(guard.leaf.index);
    const Tensor grad = leaf.grad();
    if (guard.identity ? !same_tensor(grad, guard.grad) : grad.defined() != guard.grad.defined()) return false;
  }
  return true;
}

}  // namespace pyflame::ir
