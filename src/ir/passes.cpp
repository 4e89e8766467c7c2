// Passes over a traced ir::Graph (include/pyflame/ir/graph.h), run once when a
// trace ends; the first computes what depends on fixed data alone, the last plans
// when each value's memory is let go. Only pure calls are merged or removed: a call that writes a
// tensor in place, draws random numbers (the generator's later draws depend on
// it) or has a signature of its own (CUSTOM: batch_norm updates its running
// statistics inside its kernel) stays as traced, in its place. Fusions replace a
// chain of calls by one table op that computes the same (a kernel where the
// device has one, else the op's decomposition, which autograd also takes).

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pyflame/grad_mode.h"
#include "pyflame/ir/fusion.h"
#include "pyflame/ir/graph.h"
#include "pyflame/ir/op_call.h"

namespace pyflame::ir {
namespace {

bool pure(const Node& n) {
  if (!n.written.empty() || n.draws) return false;
  const OpFamily f = op_family(n.op);
  return f != OpFamily::RANDOM && f != OpFamily::CUSTOM;
}

template <class F> void for_each_value(Graph& g, const F& visit) {
  for (Node& n : g.nodes) {
    for (Value& v : n.inputs) visit(v);
    for (Value& v : n.written) visit(v);
  }
  for (Value& v : g.outputs) visit(v);
  for (GradWrite& w : g.grad_writes) visit(w.grad);
}

// How many times each call's results are read (or written, or returned); without_absorbed: not
// counting what the calls a fusion absorbed read (they go once nothing reads them).
std::vector<int> count_uses(Graph& g, bool without_absorbed = false) {
  std::vector<int> uses(g.nodes.size(), 0);
  for_each_value(g, [&](Value& v) {
    if (v.kind == Value::Kind::Node) ++uses[v.index];
  });
  if (without_absorbed)
    for (const Node& n : g.nodes)
      if (n.absorbed)
        for (const Value& v : n.inputs)
          if (v.kind == Value::Kind::Node) --uses[v.index];
  return uses;
}

// A fusion's last step: what read call i reads the call fused_into[i] (>= 0) that took it.
void read_fused_results(Graph& g, const std::vector<int64_t>& fused_into) {
  for_each_value(g, [&](Value& v) {
    if (v.kind == Value::Kind::Node && fused_into[v.index] >= 0) v = Value{Value::Kind::Node, fused_into[v.index], 0};
  });
}

// What makes two inputs the same: the value, or for Python numbers (each call
// wraps its own) the number itself.
void append_input_key(std::string& key, const Graph& g, const Value& v) {
  if (v.kind == Value::Kind::Constant && g.constants[v.index].is_wrapped_number()) {
    const Tensor& t = g.constants[v.index];
    const Scalar s = t.item();
    key += 'w';
    key += static_cast<char>(t.dtype());
    key.append(reinterpret_cast<const char*>(&s.f), sizeof(s.f));
    key.append(reinterpret_cast<const char*>(&s.i), sizeof(s.i));
    return;
  }
  key += static_cast<char>(v.kind);
  key.append(reinterpret_cast<const char*>(&v.index), sizeof(v.index));
  key.append(reinterpret_cast<const char*>(&v.output), sizeof(v.output));
}

// A pure call whose inputs are all fixed data (tensors and Python numbers the traced
// code made, never written, not handed out, not requiring grad) has the same result on
// every run: it is computed once, here, and becomes data itself, so
// `x * (pf.tensor([1., 2.]) * 2).exp()` replays one multiply. Views are left (their
// result shares the data's memory), and so is a result that a call writes (itself or
// through a view of it) or the graph returns or leaves as a gradient.
void fold_constants(Graph& g) {
  std::vector<bool> escapes(g.nodes.size(), false);  // written, through a view or not, or handed out
  for (const Node& n : g.nodes) {
    for (const Value& v : n.written)
      if (v.kind == Value::Kind::Node) escapes[v.index] = true;
    if (op_family(n.op) == OpFamily::VIEW)
      for (const Value& v : n.inputs)
        if (v.kind == Value::Kind::Node) escapes[v.index] = true;
  }
  for (const Value& v : g.outputs)
    if (v.kind == Value::Kind::Node) escapes[v.index] = true;
  for (const GradWrite& w : g.grad_writes)
    if (w.grad.kind == Value::Kind::Node) escapes[w.grad.index] = true;
  auto fixed = [&](const Value& v) {
    return v.kind == Value::Kind::None || (v.kind == Value::Kind::Constant && g.constant_data[v.index] &&
                                           !g.constant_copied[v.index] && !g.constants[v.index].requires_grad());
  };
  // Factories (pf.ones, pf.tensor's copy to its device) write memory the traced code made for
  // them: pure but for that write, where no other call touches the buffer.
  std::vector<int> buffer_uses(g.buffers.size(), 0);
  auto count = [&](const Value& v) {
    if (v.kind == Value::Kind::Buffer) ++buffer_uses[v.index];
  };
  for (const Node& n : g.nodes) {
    std::for_each(n.inputs.begin(), n.inputs.end(), count);
    std::for_each(n.written.begin(), n.written.end(), count);
  }
  auto fills_own_buffer = [&](const Node& n) {
    const OpFamily f = op_family(n.op);
    return n.written.size() == 1 && n.written[0].kind == Value::Kind::Buffer && buffer_uses[n.written[0].index] == 1 &&
           !n.draws && f != OpFamily::RANDOM && f != OpFamily::CUSTOM;
  };
  std::vector<Value> folded(g.nodes.size());
  const autograd::GradModeGuard no_grad(false);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (Value& v : n.inputs)
      if (v.kind == Value::Kind::Node && folded[v.index].kind == Value::Kind::Constant) v = folded[v.index];
    const bool fills = fills_own_buffer(n);
    if (!(pure(n) || fills) || n.num_outputs != 1 || escapes[i] || op_family(n.op) == OpFamily::VIEW ||
        !std::all_of(n.inputs.begin(), n.inputs.end(), fixed))
      continue;
    OpCall call{n.op, {}, n.attrs, {}};
    for (const Value& v : n.inputs) call.inputs.push_back(v.kind == Value::Kind::None ? Tensor() : g.constants[v.index]);
    if (fills) {
      const Tensor& like = g.buffers[n.written[0].index];
      call.outputs.push_back(Tensor::empty(like.shape(), like.dtype(), like.device()).set_placed(like.is_placed()));
      n.absorbed = true;
    }
    const DeviceScope on_traced_device(n.device);
    folded[i] = g.add_constant(apply(std::move(call))[0], true);
  }
  for_each_value(g, [&](Value& v) {
    if (v.kind == Value::Kind::Node && folded[v.index].kind == Value::Kind::Constant) v = folded[v.index];
  });
}

// Each pure call equal to an earlier one (op, attributes, inputs) is replaced by it.
void merge_common_calls(Graph& g) {
  std::vector<int64_t> same(g.nodes.size());
  std::unordered_map<std::string, std::vector<int64_t>> seen;
  auto redirect = [&](Value& v) {
    if (v.kind == Value::Kind::Node) v.index = same[v.index];
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    for (Value& v : n.inputs) redirect(v);
    for (Value& v : n.written) redirect(v);
    same[i] = static_cast<int64_t>(i);
    if (!pure(n)) continue;
    std::string key(reinterpret_cast<const char*>(&n.op), sizeof(n.op));
    for (const Value& v : n.inputs) append_input_key(key, g, v);
    std::vector<int64_t>& earlier = seen[key];
    for (int64_t j : earlier)
      if (g.nodes[j].attrs == n.attrs && g.nodes[j].num_outputs == n.num_outputs) {
        same[i] = j;
        break;
      }
    if (same[i] == static_cast<int64_t>(i)) earlier.push_back(static_cast<int64_t>(i));
  }
  for (Value& v : g.outputs) redirect(v);
  for (GradWrite& w : g.grad_writes) redirect(w.grad);
}

// Pure calls none of whose results is used are dropped, and so are the calls a
// fusion or the folding absorbed; the others are renumbered, and so are the
// buffers the kept calls use.
void remove_dead_calls(Graph& g) {
  std::vector<bool> live(g.nodes.size(), false);
  auto mark = [&](const Value& v) {
    if (v.kind == Value::Kind::Node) live[v.index] = true;
  };
  for (const Value& v : g.outputs) mark(v);
  for (const GradWrite& w : g.grad_writes) mark(w.grad);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (!pure(n) && !n.absorbed) live[i] = true;
    if (!live[i]) continue;
    for (const Value& v : n.inputs) mark(v);
    for (const Value& v : n.written) mark(v);
  }
  std::vector<int64_t> index(g.nodes.size(), -1);
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (live[i]) {
      index[i] = static_cast<int64_t>(kept.size());
      kept.push_back(std::move(g.nodes[i]));
    }
  g.nodes = std::move(kept);
  std::vector<int64_t> buffer_index(g.buffers.size(), -1);  // buffers no kept call uses are not made
  std::vector<Tensor> buffers;
  for_each_value(g, [&](Value& v) {
    if (v.kind == Value::Kind::Node) v.index = index[v.index];
    if (v.kind != Value::Kind::Buffer) return;
    if (buffer_index[v.index] < 0) {
      buffer_index[v.index] = static_cast<int64_t>(buffers.size());
      buffers.push_back(g.buffers[v.index]);
    }
    v.index = buffer_index[v.index];
  });
  g.buffers = std::move(buffers);
}

// A call whose result only a one-input call reads (not in place), the pair one of
// can_fuse's patterns that a table op computes (fused_op: linear -> relu is
// linear_relu, the ReLU in the GEMM's epilogue on the GPU): the first call becomes
// that op; the second is left unused, for remove_dead_calls.
void fuse_pairs(Graph& g) {
  const std::vector<int> uses = count_uses(g);
  std::vector<int64_t> fused_into(g.nodes.size(), -1);  // a second call's index -> the call that took it
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.inputs.size() != 1 || !n.written.empty() || n.inputs[0].kind != Value::Kind::Node) continue;
    const int64_t j = n.inputs[0].index;
    Node& producer = g.nodes[j];
    if (uses[j] != 1 || producer.num_outputs != 1 || !producer.written.empty()) continue;
    const std::optional<FusedOpType> pattern = can_fuse({producer.op, n.op});
    const std::optional<OpType> op = pattern ? fused_op(*pattern) : std::nullopt;
    if (!op) continue;
    producer.op = *op;
    fused_into[i] = j;
  }
  read_fused_results(g, fused_into);
}

// The dtype a value has, as traced (a graph input's, a tensor's from outside, a call's output 0).
std::optional<DType> dtype_of(const Graph& g, const Value& v) {
  switch (v.kind) {
    case Value::Kind::Input: return g.input_dtypes[v.index];
    case Value::Kind::Constant: return g.constants[v.index].dtype();
    case Value::Kind::Buffer: return g.buffers[v.index].dtype();
    case Value::Kind::Node: return v.output == 0 ? std::optional<DType>(g.nodes[v.index].dtype) : std::nullopt;
    case Value::Kind::None: break;
  }
  return std::nullopt;
}

// The shape a value has, as traced (nullopt: not recorded).
std::optional<Shape> shape_of(const Graph& g, const Value& v) {
  switch (v.kind) {
    case Value::Kind::Input:
      return v.index < static_cast<int64_t>(g.input_shapes.size()) ? std::optional<Shape>(g.input_shapes[v.index])
                                                                    : std::nullopt;
    case Value::Kind::Constant: return g.constants[v.index].shape();
    case Value::Kind::Buffer: return g.buffers[v.index].shape();
    case Value::Kind::Node: return v.output == 0 ? std::optional<Shape>(g.nodes[v.index].shape) : std::nullopt;
    default: return std::nullopt;
  }
}

// A linear without bias whose result only an add reads, the add's other operand made before
// the linear, of its dtype and broadcasting to its result (a residual: x + o_proj(h)): the
// operand becomes the linear's bias (infer_linear takes one of the result's shape), so the
// GEMV or the GEMM adds it (a decode step's residual adds: a kernel each, gone). Left as they
// are: writes between the two calls, operands made after the linear.
void fold_residual_adds(Graph& g) {
  const std::vector<int> uses = count_uses(g);
  std::vector<int64_t> fused_into(g.nodes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& add = g.nodes[i];
    if (add.op != OpType::add || add.inputs.size() != 2 || !pure(add)) continue;
    for (int side = 0; side < 2; ++side) {
      const Value& from_linear = add.inputs[side];
      const Value& residual = add.inputs[1 - side];
      if (from_linear.kind != Value::Kind::Node || from_linear.output != 0) continue;
      const int64_t j = from_linear.index;
      Node& linear = g.nodes[j];
      if (linear.op != OpType::linear) continue;
      const std::optional<Shape> weight = shape_of(g, linear.inputs[1]), r = shape_of(g, residual);
      if (uses[j] != 1 || linear.num_outputs != 1 || !linear.written.empty() ||
          linear.absorbed || linear.inputs[2].kind != Value::Kind::None || !weight || weight->size() != 2 || !r ||
          add.shape != linear.shape || add.dtype != linear.dtype || dtype_of(g, residual) != linear.dtype)
        continue;
      if (residual.kind == Value::Kind::Constant && g.constants[residual.index].is_wrapped_number()) continue;
      if (residual.kind == Value::Kind::Node && residual.index >= j) continue;
      bool broadcasts = r->size() <= linear.shape.size();
      for (size_t d = 1; broadcasts && d <= r->size(); ++d) {
        const int64_t have = (*r)[r->size() - d];
        broadcasts = have == 1 || have == linear.shape[linear.shape.size() - d];
      }
      bool written_between = false;
      for (size_t k = j + 1; k < i; ++k) written_between = written_between || !g.nodes[k].written.empty();
      if (!broadcasts || written_between) continue;
      linear.inputs[2] = residual;
      fused_into[i] = j;
      break;
    }
  }
  read_fused_results(g, fused_into);
}

// conv2d whose result only batch_norm in eval reads (and whose result only a relu
// reads: can_fuse's CONV_BN_RELU) becomes one conv2d_batch_norm at the convolution's
// place: the normalisation folded into the weights, its pass over the activations
// gone. Each run scales the weights anew (parameters and statistics are by
// reference, so training or load_state_dict between runs is seen). Left as they are:
// batch_norm in training, a normalisation that is not all of one dtype with the
// convolution (autocast), statistics made between the two calls, a write between them.
void fold_conv_batch_norm(Graph& g) {
  const std::vector<int> uses = count_uses(g);
  std::vector<int64_t> fused_into(g.nodes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& bn = g.nodes[i];
    if (bn.op != OpType::batch_norm || std::get<NormAttrs>(bn.attrs).training || bn.num_outputs != 1 ||
        !bn.written.empty() || bn.inputs[0].kind != Value::Kind::Node || bn.inputs[0].output != 0)
      continue;
    const int64_t j = bn.inputs[0].index;
    Node& conv = g.nodes[j];
    if (conv.op != OpType::conv2d || uses[j] != 1 || conv.num_outputs != 1 || !conv.written.empty()) continue;
    const std::optional<DType> dtype = dtype_of(g, conv.inputs[1]);
    bool foldable = dtype == conv.dtype && bn.dtype == conv.dtype;
    for (size_t k = 1; k < bn.inputs.size(); ++k) {
      const Value& v = bn.inputs[k];
      foldable = foldable && (v.kind == Value::Kind::None ||
                              (dtype_of(g, v) == dtype && (v.kind != Value::Kind::Node || v.index < j)));
    }
    for (size_t k = j + 1; k < i; ++k) foldable = foldable && g.nodes[k].written.empty();
    if (!foldable) continue;
    // batch_norm's inputs: input, running_mean, running_var, weight, bias.
    ConvBatchNormAttrs attrs{std::get<ConvAttrs>(conv.attrs), std::get<NormAttrs>(bn.attrs).eps, false};
    int64_t last = static_cast<int64_t>(i);
    for (size_t r = i + 1; r < g.nodes.size() && uses[i] == 1; ++r) {
      const Node& n = g.nodes[r];
      if (n.inputs.size() == 1 && n.inputs[0] == Value{Value::Kind::Node, static_cast<int64_t>(i), 0}) {
        if (n.written.empty() && can_fuse({OpType::conv2d, OpType::batch_norm, n.op}) == FusedOpType::CONV_BN_RELU) {
          attrs.relu = true;
          last = static_cast<int64_t>(r);
          g.nodes[r].absorbed = true;
        }
        break;
      }
    }
    conv.op = OpType::conv2d_batch_norm;
    conv.attrs = std::move(attrs);
    conv.inputs.insert(conv.inputs.end(), bn.inputs.begin() + 1, bn.inputs.end());
    bn.absorbed = true;
    fused_into[last] = j;
    fused_into[i] = j;
  }
  read_fused_results(g, fused_into);
}

// A call fused_elementwise can take: pure, one output of a floating dtype that its
// tensor inputs share (Python numbers aside). Under autocast the trace holds the calls
// as made and their results as cast, so a call autocast runs in another dtype fails
// the test; the others compute as traced.
bool chain_step(const Graph& g, const Node& n) {
  if (!pure(n) || n.num_outputs != 1 || !fusable_elementwise(n.op) || !is_floating(n.dtype)) return false;
  for (const Value& v : n.inputs) {
    std::optional<DType> d;
    switch (v.kind) {
      case Value::Kind::Input:
        if (v.index < static_cast<int64_t>(g.input_dtypes.size())) d = g.input_dtypes[v.index];
        break;
      case Value::Kind::Constant:
        if (g.constants[v.index].is_wrapped_number()) continue;
        d = g.constants[v.index].dtype();
        break;
      case Value::Kind::Buffer: d = g.buffers[v.index].dtype(); break;
      case Value::Kind::Node:
        if (v.output == 0) d = g.nodes[v.index].dtype;
        break;
      case Value::Kind::None: break;
    }
    if (d != n.dtype) return false;
  }
  return true;
}

// A linear whose weight (2-d) and bias come from outside the graph (parameters), so another call
// may take them at its own place: grouped_linear's parts.
bool linear_of_parameters(const Graph& g, const Node& n) {
  auto from_outside = [&](const Value& v) {
    return v.kind == Value::Kind::None ||
           (v.kind == Value::Kind::Constant && !g.constant_data[v.index] && !g.constants[v.index].is_wrapped_number());
  };
  return n.op == OpType::linear && n.num_outputs == 1 && n.written.empty() && !n.absorbed &&
         n.inputs[1].kind == Value::Kind::Constant && from_outside(n.inputs[1]) && from_outside(n.inputs[2]) &&
         g.constants[n.inputs[1].index].dim() == 2;
}

bool written_between(const Graph& g, size_t first, size_t last) {
  for (size_t k = first + 1; k < last; ++k)
    if (!g.nodes[k].written.empty()) return true;
  return false;
}

// silu(linear(x, gate)) * linear(x, up), each result read only there (a gated MLP's SwiGLU):
// the product becomes one grouped_linear with swiglu, which on the GPU is one GEMV launch
// writing silu(gate) * up (a decode step's three kernels: one). Left as they are: linears of
// two inputs or of weights made in the graph, results read elsewhere, writes in between.
void fold_swiglu(Graph& g) {
  const std::vector<int> uses = count_uses(g);
  auto node_of = [&](const Value& v) -> Node* {
    return v.kind == Value::Kind::Node && v.output == 0 && uses[v.index] == 1 ? &g.nodes[v.index] : nullptr;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& mul = g.nodes[i];
    if (mul.op != OpType::mul || mul.inputs.size() != 2 || !pure(mul)) continue;
    for (int side = 0; side < 2; ++side) {
      Node* silu = node_of(mul.inputs[side]);
      Node* up = node_of(mul.inputs[1 - side]);
      if (!silu || !up || silu->op != OpType::silu || !pure(*silu) || !linear_of_parameters(g, *up)) continue;
      Node* gate = node_of(silu->inputs[0]);
      if (!gate || !linear_of_parameters(g, *gate) || gate->inputs[0] != up->inputs[0] || gate->shape != up->shape ||
          gate->dtype != up->dtype || silu->dtype != gate->dtype || mul.dtype != gate->dtype ||
          mul.shape != gate->shape)
        continue;
      const size_t first = std::min(silu->inputs[0].index, mul.inputs[1 - side].index);
      if (written_between(g, first, i)) continue;
      std::vector<Value> inputs{gate->inputs[0], Value{}, gate->inputs[1], gate->inputs[2], up->inputs[1], up->inputs[2]};
      gate->absorbed = silu->absorbed = up->absorbed = true;
      mul.op = OpType::grouped_linear;
      mul.attrs = GroupedLinearAttrs{false, 0.0, true};
      mul.inputs = std::move(inputs);
      break;
    }
  }
}

// The steps of one fused call computing the calls `chain` (graph order) names; `inputs`
// gets the values they read from outside the chain, each once.
std::vector<FusedStep> chain_steps(const Graph& g, const std::vector<int64_t>& chain, std::vector<Value>& inputs) {
  std::vector<FusedStep> steps;
  for (int64_t m : chain) {
    const Node& node = g.nodes[m];
    FusedStep step{node.op, {}, std::get<ElementwiseAttrs>(node.attrs).params};
    for (const Value& v : node.inputs) {
      auto in_chain = std::find(chain.begin(), chain.end(), v.kind == Value::Kind::Node ? v.index : -1);
      if (in_chain != chain.end()) {
        step.args.push_back(-1 - (in_chain - chain.begin()));
        continue;
      }
      auto known = std::find(inputs.begin(), inputs.end(), v);
      step.args.push_back(known - inputs.begin());
      if (known == inputs.end()) inputs.push_back(v);
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

// A sum, mean, max or min (fusable_reduction) of an elementwise chain's result, on a GPU,
// becomes one fused_reduction reading the chain's inputs: the chain's values are reduced
// where they are computed, never stored (softmax's sum of exp(x - max), a variance's mean
// of squared differences). The chain: the reduction's input's call and the elementwise
// calls of its dtype it reads, up to kMaxSteps. A call of the chain that the graph also reads
// elsewhere stays, and the reduction computes it again (cheaper than storing and reading
// its result; its other readers may then fuse with it: softmax's exp(x - max) / sum), but on
// the CPU, where fused_reduction runs its steps one by one, nothing is computed twice.
// Left as they are: a reduction autocast runs in another dtype than its input's, a write
// between the chain and the reduction.
void fuse_reductions(Graph& g) {
  constexpr size_t kMaxSteps = 16;
  const std::vector<int> uses = count_uses(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& reduce = g.nodes[i];
    if (!fusable_reduction(reduce.op) || !pure(reduce) || reduce.num_outputs != 1) continue;
    const Value& in = reduce.inputs[0];
    auto joins = [&](const Value& v) {
      return v.kind == Value::Kind::Node && chain_step(g, g.nodes[v.index]) && g.nodes[v.index].dtype == reduce.dtype;
    };
    if (!joins(in)) continue;
    std::vector<int64_t> chain{in.index};
    for (size_t m = 0; m < chain.size(); ++m)
      for (const Value& v : g.nodes[chain[m]].inputs)
        if (chain.size() < kMaxSteps && joins(v) && std::find(chain.begin(), chain.end(), v.index) == chain.end())
          chain.push_back(v.index);
    std::sort(chain.begin(), chain.end());
    if (written_between(g, chain.front(), i)) continue;
    if (reduce.on_cpu) {
      auto read_only_here = [&](int64_t m) {
        int readers = m == in.index;
        for (int64_t c : chain)
          for (const Value& u : g.nodes[c].inputs) readers += u.kind == Value::Kind::Node && u.index == m;
        return readers == uses[m];
      };
      if (!std::all_of(chain.begin(), chain.end(), read_only_here)) continue;
    }
    std::vector<Value> inputs;
    const auto& r = std::get<ReduceAttrs>(reduce.attrs);
    reduce.attrs = FusedReductionAttrs{chain_steps(g, chain, inputs), reduce.op, r.dims, r.keepdim};
    reduce.op = OpType::fused_reduction;
    reduce.inputs = std::move(inputs);
  }
}

// Chains of elementwise calls (fusable_elementwise) over one floating dtype, each
// result but the last read only by later calls of its chain, become one
// fused_elementwise call at the last one's place: on the GPU one kernel compiled at
// run time, one pass over memory where the chain made one per call. A chain may
// branch and join (relu(x * w + b) reads two inputs and a product; h read twice); the
// Python numbers its calls read stay inputs of the fused call. A chain across a call
// that writes in place is left as it is (the fused call reads its inputs where the
// last call of the chain ran).
void fuse_elementwise(Graph& g) {
  const size_t n = g.nodes.size();
  const std::vector<int> uses = count_uses(g);
  // A chain's calls, in graph order, kept at its last call. Call i takes in the chain of
  // an input's call when every use of that input is a call of i's chain (so h in
  // sigmoid(h * 0.5) * h joins once both of its readers have).
  std::vector<std::vector<int64_t>> members(n);
  for (size_t i = 0; i < n; ++i) {
    if (!chain_step(g, g.nodes[i])) continue;
    std::vector<int64_t> chain{static_cast<int64_t>(i)};
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t m = 0; m < chain.size(); ++m)
        for (const Value& v : g.nodes[chain[m]].inputs) {
          if (v.kind != Value::Kind::Node || members[v.index].empty()) continue;
          int readers = 0;
          for (int64_t c : chain)
            for (const Value& u : g.nodes[c].inputs) readers += u == v;
          if (readers != uses[v.index]) continue;
          chain.insert(chain.end(), members[v.index].begin(), members[v.index].end());
          members[v.index].clear();
          grew = true;
        }
    }
    std::sort(chain.begin(), chain.end());
    members[i] = std::move(chain);
  }
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int64_t>& chain = members[i];
    if (chain.size() < 2) continue;
    bool writes_between = false;
    for (int64_t j = chain.front() + 1; j < static_cast<int64_t>(i); ++j)
      writes_between = writes_between || !g.nodes[j].written.empty();
    if (writes_between) continue;
    Node& last = g.nodes[i];
    std::vector<Value> inputs;
    last.attrs = FusedElementwiseAttrs{chain_steps(g, chain, inputs)};
    last.op = OpType::fused_elementwise;
    last.inputs = std::move(inputs);
  }
}

// linear calls that read the same input, with weights and biases from outside the graph
// (parameters), become one grouped_linear at the first one's place, up to kMaxGroup a call:
// on the GPU a decode step's query, key and value projections (or its gate and up
// projections) are then one GEMV launch instead of one each. Left as they are: weights made
// inside the graph, calls across a write (the input may have changed between them).
void group_linears(Graph& g) {
  constexpr size_t kMaxGroup = 4;  // the GEMV's parts per launch (rocm/kernels/gemv.h)
  std::vector<Value> moved(g.nodes.size());  // a grouped call -> the output of the group's call it became
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& first = g.nodes[i];
    if (!linear_of_parameters(g, first)) continue;
    std::vector<size_t> group{i};
    for (size_t j = i + 1; j < g.nodes.size() && group.size() < kMaxGroup && g.nodes[j].written.empty(); ++j) {
      const Node& n = g.nodes[j];
      if (linear_of_parameters(g, n) && n.inputs[0] == first.inputs[0] && n.dtype == first.dtype && n.device == first.device)
        group.push_back(j);
    }
    if (group.size() < 2) continue;
    for (size_t k = 1; k < group.size(); ++k) {
      Node& n = g.nodes[group[k]];
      first.inputs.insert(first.inputs.end(), {n.inputs[1], n.inputs[2]});
      n.absorbed = true;
      moved[group[k]] = Value{Value::Kind::Node, static_cast<int64_t>(i), static_cast<int>(k)};
    }
    first.op = OpType::grouped_linear;
    first.attrs = GroupedLinearAttrs{};
    first.inputs.insert(first.inputs.begin() + 1, Value{});  // no norm weight
    first.num_outputs = static_cast<int>(group.size());
  }
  for_each_value(g, [&](Value& v) {
    if (v.kind == Value::Kind::Node && moved[v.index].kind == Value::Kind::Node) v = moved[v.index];
  });
}

// rms_norm over the last dimension whose result only a linear or grouped_linear reads, as its
// input (a decoder layer's norm before its projections, the final norm before the head): the
// linear becomes a grouped_linear that normalises its input first, which the GEMV does as it
// reads the row (a decode step's norms: a kernel each, gone). Left as they are: norms over more
// dims or read elsewhere, writes in between.
void fold_rms_norms(Graph& g) {
  const std::vector<int> uses = count_uses(g, true);  // the linears grouping absorbed read it too
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& lin = g.nodes[i];
    const bool linear = lin.op == OpType::linear && lin.num_outputs == 1;
    const bool grouped = lin.op == OpType::grouped_linear && !std::get<GroupedLinearAttrs>(lin.attrs).rms_norm;
    if ((!linear && !grouped) || lin.absorbed || !lin.written.empty()) continue;
    const Value in = lin.inputs[0];
    if (in.kind != Value::Kind::Node || in.output != 0 || uses[in.index] != 1) continue;
    Node& norm = g.nodes[in.index];
    if (norm.op != OpType::rms_norm || !norm.written.empty() || norm.absorbed || norm.num_outputs != 1 ||
        std::get<NormAttrs>(norm.attrs).normalized_shape.size() != 1 || norm.dtype != lin.dtype ||
        written_between(g, in.index, i))
      continue;
    if (linear) {
      lin.attrs = GroupedLinearAttrs{};
      lin.inputs.insert(lin.inputs.begin() + 1, Value{});
      lin.op = OpType::grouped_linear;
    }
    auto& attrs = std::get<GroupedLinearAttrs>(lin.attrs);
    attrs.rms_norm = true;
    attrs.eps = std::get<NormAttrs>(norm.attrs).eps;
    lin.inputs[0] = norm.inputs[0];
    lin.inputs[1] = norm.inputs[1];
    norm.absorbed = true;
  }
}

}  // namespace

// Each node's results are dropped after their last reader runs (right after the node
// where nothing reads them); the graph's outputs and the gradients it leaves are kept.
// A run then holds what is live, not every intermediate: a training step's
// activations go as its backward consumes them, and the caching allocator (in a
// device graph, the capture's pool) hands their memory to later calls.
void plan_memory(Graph& g) {
  const int64_t n = static_cast<int64_t>(g.nodes.size());
  std::vector<int64_t> last(n);
  for (int64_t i = 0; i < n; ++i) last[i] = i;
  for (int64_t i = 0; i < n; ++i) {
    auto read = [&](const Value& v) {
      if (v.kind == Value::Kind::Node) last[v.index] = i;
    };
    for (const Value& v : g.nodes[i].inputs) read(v);
    for (const Value& v : g.nodes[i].written) read(v);
  }
  auto keep = [&](const Value& v) {
    if (v.kind == Value::Kind::Node) last[v.index] = n;
  };
  for (const Value& v : g.outputs) keep(v);
  for (const GradWrite& w : g.grad_writes) keep(w.grad);
  g.release_after.assign(n, {});
  for (int64_t i = 0; i < n; ++i)
    if (last[i] < n) g.release_after[last[i]].push_back(static_cast<int32_t>(i));
}

void optimize(Graph& g) {
  fold_constants(g);
  merge_common_calls(g);
  fold_conv_batch_norm(g);
  fuse_pairs(g);
  fold_residual_adds(g);
  fold_swiglu(g);
  fuse_reductions(g);
  remove_dead_calls(g);  // what the reductions took alone: their other readers may fuse now
  fuse_elementwise(g);
  group_linears(g);
  fold_rms_norms(g);
  remove_dead_calls(g);
  plan_memory(g);
}

}  // namespace pyflame::ir
