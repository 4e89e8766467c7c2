#pragma once
// ir::Graph: the op calls one run of a function made, as pf.compile traced
// them at apply(), in the order they ran, each input named by where it came
// from (a graph input, a tensor that existed before the trace, a tensor the
// traced code made without an op, or an earlier node's output).
//
// Tracing (src/ir/tracer.cpp) is a hook on apply: the function runs eagerly
// once while every top-level call is appended (a composite's inner calls are
// not: the graph keeps one node with its known decomposition). Tensors are
// told apart by what they show (storage, offset, shape, strides, dtype), so a
// view is its own value and an in-place op's result is the tensor it wrote.
// What a graph cannot replay stops the trace from being used, never the run:
// a read of values on the host (.item(), printing, NumPy: Python then decides
// with them), autograd.grad(), a backward pass through ops recorded before the
// trace, a random draw from a generator of the user's.
//
// A backward() inside the trace (a training step) is traced too: the
// engine's calls are nodes like the forward's, and the leaves' .grad as the
// call left them are the graph's grad_writes. Such a graph replays without
// recording autograd (its backward is in it). Where the traced call read a
// leaf's .grad before writing it (zero_grad's check; backward accumulating
// into it when no zero_grad came first), the graph holds only while that
// .grad is as it was (None or not; the same tensor where an op used it):
// graph_applies() tells; pf.compile retraces otherwise.
//
// A finished trace goes through optimize(): equal pure calls merged, unused
// ones removed. run_graph replays the calls through apply() on new inputs, so
// each runs as eagerly (autograd records it; autocast, placement and errors
// are the same), without the Python that made them; random ops draw new
// numbers each run.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "pyflame/ir/attrs.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame::ir {

struct Value {
  enum class Kind : int8_t {
    None,      // an absent optional input
    Input,     // graph input `index`
    Constant,  // Graph::constants[index]: a tensor from outside the trace (parameters, buffers) or data it made
    Buffer,    // Graph::buffers[index]: memory the traced code made without an op and then wrote: new each run
    Node,      // output `output` of node `index`
  };
  Kind kind = Kind::None;
  int64_t index = 0;
  int output = 0;
  bool operator==(const Value&) const = default;
};

struct Node {
  OpType op;
  OpAttrs attrs;
  std::vector<Value> inputs;
  std::vector<Value> written;  // in-place calls: the tensors the results are written into
  int num_outputs = 0;
  DType dtype = DType::Float32;  // output 0's, as traced (the fusion passes read it)
  Shape shape;                   // output 0's, as traced
  bool on_cpu = true;            // output 0 was on the CPU, as traced
  uint64_t draws = 0;  // random ops: how many draws of the default generator each run takes
  bool absorbed = false;  // taken into another call by a fusion: dropped once nothing reads it
  // The current device when traced (a factory's device= sets it for the call): replays run the
  // call there, so unplaced inputs go where they went then (none: wherever the replay is).
  std::optional<Device> device;
};

// A leaf's .grad as the traced call left it: set to `grad` (None: cleared) after each run.
struct GradWrite {
  Value leaf;
  Value grad;
};

// A leaf's .grad that the traced call read before writing it: `grad` then (undefined: None). The
// graph holds while .grad is again None or not as then, and, where `identity` (an op used that
// tensor), the same tensor.
struct GradGuard {
  Value leaf;
  Tensor grad;
  bool identity = false;
};

struct PF_API Graph {
  int64_t num_inputs = 0;
  std::vector<DType> input_dtypes;  // as traced
  std::vector<Shape> input_shapes;  // as traced (a graph serves one signature)
  // By reference, except data the traced code made (pf.tensor of a list) and then
  // wrote or returned: copied each run (constant_copied), so runs do not share it.
  std::vector<Tensor> constants;
  std::vector<bool> constant_copied;
  std::vector<bool> constant_data;  // made by the traced code (fixed data), not a tensor from outside
  std::vector<uint64_t> constant_rebinds;  // each constant's Storage::rebinds() when the trace read it
  std::vector<Tensor> buffers;  // shape, dtype and device of each (the contents are not kept)
  std::vector<Node> nodes;
  std::vector<Value> outputs;
  // Memory plan (plan_memory): the nodes whose results are dropped once node i has run (their last
  // reader), so a run holds only live values and their memory is reused by later calls.
  std::vector<std::vector<int32_t>> release_after;
  bool runs_backward = false;  // a training step: replayed without autograd recording
  std::vector<GradWrite> grad_writes;
  std::vector<GradGuard> grad_guards;
  // One line per node: "%3 = add(in0, %1)", "%5 = copy(%2) -> c0" (written into c0).
  std::string to_string() const;
  // Appends a constant (`data`: made by the traced code); returns its value.
  Value add_constant(const Tensor& t, bool data);
};

// Starts tracing this thread's top-level apply() calls; `inputs` are the graph's inputs.
PF_API void begin_trace(const std::vector<Tensor>& inputs);
// Ends the trace with these results. Returns the graph, or throws nothing and
// sets `why_not` (the first reason the trace cannot be replayed, else empty).
PF_API Graph end_trace(const std::vector<Tensor>& outputs, std::string& why_not);
// Drops the trace (the traced function raised).
PF_API void abort_trace();
PF_API bool is_tracing();
// Marks the trace as not replayable (no-op when not tracing): `what` read
// values on the host or did what a graph cannot repeat.
PF_API void trace_break(const std::string& what);

// How the traced code used a leaf's .grad (called by autograd and the bindings).
enum class GradAccess { Read, Write, Update };
PF_API void trace_grad_access(const Tensor& leaf, GradAccess access);
// The same for a leaf known by its autograd state (backward's accumulation into .grad).
PF_API void trace_grad_access(const AutogradMeta* leaf, const Tensor& grad_now, GradAccess access);
// backward() ran in the trace.
PF_API void trace_backward();
// Whether an autograd node of this sequence number was recorded before the trace began.
PF_API bool recorded_before_trace(uint64_t sequence_nr);

// Whether the graph applies to a call on `inputs`: each leaf's .grad is as the
// traced call found it (g.grad_guards), and no tensor it kept from outside was
// given new data since (`p.data = ...`, as Module.to does: the graph would read the old).
PF_API bool graph_applies(const Graph& g, const std::vector<Tensor>& inputs);

// The passes a finished trace goes through (src/ir/passes.cpp): pure calls of fixed
// data computed once (constant folding), equal pure calls merged, fusions, pure calls
// whose results nothing uses removed, then the memory plan.
PF_API void optimize(Graph& g);
// The memory plan alone (Graph::release_after), for a graph whose outputs were changed after optimize().
PF_API void plan_memory(Graph& g);

// Replays g on `inputs` (as many as g.num_inputs); returns its outputs. `after_node`,
// when given, is called with each node's index once its call has been made.
PF_API std::vector<Tensor> run_graph(const Graph& g, const std::vector<Tensor>& inputs,
                                     const std::function<void(size_t node)>& after_node = {});

// A graph captured once as one device graph (a HIP graph; a CUDA graph on
// NVIDIA) and launched whole: about a microsecond a kernel instead of an op
// call's host work. It holds copies of the inputs of the capture (a launch
// first copies the new inputs into them) and its outputs, in a private memory
// pool; each launch returns copies of the outputs. capture() raises
// NotSupportedError saying why where a graph cannot be captured: not all on
// one GPU, a random op (its draws would repeat), autograd recording (grad
// mode with an input that requires grad), an op writing a graph input in
// place, or work the runtime refuses to capture (a wait for the device).
// A training step's gradients are set on their leaves after each launch: the
// graph's own tensors, which the next launch overwrites.
class PF_API DeviceGraph {
 public:
  DeviceGraph(const Graph& g, const std::vector<Tensor>& inputs);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;
  std::vector<Tensor> launch(const std::vector<Tensor>& inputs);

 private:
  const Tensor& leaf(const Value& v, const std::vector<Tensor>& inputs) const;

  Graph graph_;
  Device device_;
  void* exec_ = nullptr;
  std::vector<Tensor> inputs_, outputs_, grads_;
};

}  // namespace pyflame::ir
