// Graph tracing (include/pyflame/ir/graph.h): a hook on apply() appends each
// top-level call of this thread to the graph under construction. A tensor is
// known by what it shows (storage, offset, shape, strides, dtype); the trace
// keeps every tensor it has seen alive, so no storage is freed and reused
// under a key while it runs. A tensor met for the first time is a constant
// when its storage is older than the trace, else something the traced code
// made without an op: data (read first) or a buffer (written first).

#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/dispatch.h"
#include "core/thread_state.h"
#include "pyflame/error.h"
#include "pyflame/generator.h"
#include "pyflame/ir/graph.h"
#include "pyflame/ir/op_call.h"

namespace pyflame::ir {
namespace {

using TensorKey = std::tuple<const Storage*, int64_t, Shape, Shape, DType>;

TensorKey key_of(const Tensor& t) { return {t.storage().get(), t.offset(), t.shape(), t.strides(), t.dtype()}; }

struct Trace {
  Graph graph;
  uint64_t first_serial = 0;
  std::map<TensorKey, Value> values;
  std::vector<Tensor> seen;           // alive until the trace ends
  std::vector<bool> literal;          // per constant: made by the traced code (data), not from outside
  std::set<const Storage*> computed;  // the storages of the inputs and of the calls' results
  std::string why_not;
};

thread_local std::unique_ptr<Trace> t_trace;

bool made_during_trace(const Trace& tr, const Tensor& t) { return t.storage()->serial() >= tr.first_serial; }

Value add_constant(Trace& tr, const Tensor& t, bool literal) {
  tr.graph.constants.push_back(t);
  tr.graph.constant_copied.push_back(false);
  tr.literal.push_back(literal);
  return {Value::Kind::Constant, static_cast<int64_t>(tr.graph.constants.size()) - 1, 0};
}

// The value a tensor read by a call (or returned) stands for.
Value read_value(Trace& tr, const Tensor& t) {
  if (!t.defined()) return {};
  const TensorKey key = key_of(t);
  if (auto it = tr.values.find(key); it != tr.values.end()) return it->second;
  tr.seen.push_back(t);
  const Value v = add_constant(tr, t, made_during_trace(tr, t));
  tr.values.emplace(key, v);
  return v;
}

// A value written in place or handed to the caller: data the traced code made must
// be copied each run, or runs would share (and overwrite) one tensor.
void mark_escaping(Trace& tr, const Value& v) {
  if (v.kind == Value::Kind::Constant && tr.literal[v.index]) tr.graph.constant_copied[v.index] = true;
}

// The value an in-place call writes into.
Value written_value(Trace& tr, const Tensor& t) {
  const TensorKey key = key_of(t);
  if (auto it = tr.values.find(key); it != tr.values.end()) {
    mark_escaping(tr, it->second);
    return it->second;
  }
  tr.seen.push_back(t);
  if (!made_during_trace(tr, t)) return tr.values.emplace(key, add_constant(tr, t, false)).first->second;
  tr.graph.buffers.push_back(t);
  const Value v{Value::Kind::Buffer, static_cast<int64_t>(tr.graph.buffers.size()) - 1, 0};
  tr.values.emplace(key, v);
  return v;
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
  if (!outputs.empty() && outputs[0].defined()) node.dtype = outputs[0].dtype();
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
  tr->graph.num_inputs = static_cast<int64_t>(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    tr->graph.input_dtypes.push_back(inputs[i].dtype());
    tr->seen.push_back(inputs[i]);
    tr->computed.insert(inputs[i].storage().get());
    tr->values[key_of(inputs[i])] = Value{Value::Kind::Input, static_cast<int64_t>(i), 0};
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

}  // namespace pyflame::ir
