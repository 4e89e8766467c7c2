// Graph tracing and replay for pf.compile (python/pyflame/_compile.py), over
// include/pyflame/ir/graph.h: the Python side flattens the arguments, keys
// the traces by their signature and rebuilds the results' structure.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "pyflame/error.h"
#include "pyflame/ir/fusion.h"
#include "pyflame/ir/graph.h"

namespace pyflame::python {

namespace {

// Steps given as (op name, args[, params]) tuples.
FusedElementwiseAttrs as_fused_steps(const nb::list& steps) {
  FusedElementwiseAttrs attrs;
  for (nb::handle step : steps) {
    const nb::tuple t = nb::cast<nb::tuple>(step);
    PF_CHECK(t.size() == 2 || t.size() == 3, ValueError,
             "fused_elementwise: a step is (op name, args) or (op name, args, params), got ", t.size(), " items");
    FusedStep s{op_from_name(nb::cast<std::string>(t[0])), nb::cast<std::vector<int64_t>>(t[1]), {}};
    if (t.size() == 3)
      for (nb::handle p : nb::cast<nb::sequence>(t[2])) s.params.push_back(as_scalar(p, "fused_elementwise"));
    attrs.steps.push_back(std::move(s));
  }
  return attrs;
}

}  // namespace

void bind_graph(nb::module_& m) {
  m.def("fused_elementwise", [](const nb::list& steps, const nb::args& operands) {
    std::vector<Tensor> inputs;
    for (nb::handle h : operands) inputs.push_back(as_operand(h));
    return fused_elementwise(inputs, as_fused_steps(steps));
  }, "steps"_a, "inputs"_a,
     "fused_elementwise(steps, *inputs): a chain of elementwise ops as one call (one kernel compiled at run time "
     "on the GPU). Each step is (op name, args[, params]), an arg an input index i >= 0 or an earlier step j as "
     "-1 - j; returns the last step's result. The tensors have one floating dtype; Python numbers may stand among "
     "the inputs.");
  m.def("fused_reduction", [](const nb::list& steps, const nb::args& operands, const std::string& reduce,
                              nb::handle dim, bool keepdim) {
    std::vector<Tensor> inputs;
    for (nb::handle h : operands) inputs.push_back(as_operand(h));
    return fused_reduction(inputs, {as_fused_steps(steps).steps, op_from_name(reduce), as_dims(dim), keepdim});
  }, "steps"_a, "inputs"_a, nb::kw_only(), "reduce"_a = "sum", "dim"_a = nb::none(), "keepdim"_a = false,
     "fused_reduction(steps, *inputs, reduce='sum', dim=None, keepdim=False): fused_elementwise's chain reduced by "
     "sum, mean, max or min over dim (every dim when None), as one call: on the GPU one kernel compiled at run "
     "time that never stores the chain's result.");
  m.def("_fused_reduction_source", [](const nb::list& steps, const std::string& reduce, nb::handle dtype,
                                      const std::vector<bool>& number, int64_t kept, int64_t reduced, bool partial) {
    return fused_reduction_source({as_fused_steps(steps).steps, op_from_name(reduce), {}, false}, as_dtype(dtype),
                                  number, kept, reduced, partial);
  }, "steps"_a, "reduce"_a, "dtype"_a, "number"_a, "kept"_a, "reduced"_a, "partial"_a,
     "The GPU kernel's source for such a reduction (include/pyflame/ir/fusion.h): what the tests compile for AMD "
     "targets.");
  m.def("_fused_reduction_finish_source", [](const std::string& reduce, nb::handle dtype) {
    return fused_reduction_finish_source(op_from_name(reduce), as_dtype(dtype));
  }, "reduce"_a, "dtype"_a, "The source of the kernel combining a fused reduction's parts.");
  m.def("_fused_elementwise_source", [](const nb::list& steps, nb::handle dtype, const std::vector<bool>& number,
                                        int64_t ndim, int64_t vec, bool rows) {
    return fused_elementwise_source(as_fused_steps(steps), as_dtype(dtype), number, ndim, vec, rows);
  }, "steps"_a, "dtype"_a, "number"_a, "ndim"_a, "vec"_a, "rows"_a = false,
     "The GPU kernel's source for such a chain (include/pyflame/ir/fusion.h): what the tests compile for AMD targets.");
  m.def("_can_fuse", [](const std::vector<std::string>& names) -> std::optional<std::string> {
    std::vector<ir::OpType> ops;
    for (const std::string& n : names) ops.push_back(op_from_name(n));
    const std::optional<ir::FusedOpType> type = ir::can_fuse(ops);
    if (!type) return std::nullopt;
    return std::string(ir::fused_op_name(*type));
  }, "ops"_a, "Seed 000's fusion pattern the chain of op names forms (its FusedOpType name), or None.");
  nb::class_<ir::Graph>(m, "_Graph", "The op calls one traced run made (pf.compile).")
      .def_prop_ro("num_nodes", [](const ir::Graph& g) { return g.nodes.size(); })
      .def_prop_ro("ops", [](const ir::Graph& g) {
        std::vector<std::string> ops;
        for (const ir::Node& n : g.nodes) ops.emplace_back(op_name(n.op));
        return ops;
      }, "The op of each node, in order.")
      .def_prop_ro("runs_backward", [](const ir::Graph& g) { return g.runs_backward; },
                   "Whether the traced call ran a backward pass (a training step).")
      .def_prop_ro("grad_guards", [](const ir::Graph& g) { return g.grad_guards.size(); },
                   "How many leaves' .grad the graph needs as the trace found them.")
      .def("__str__", &ir::Graph::to_string);
  nb::class_<ir::DeviceGraph>(m, "_DeviceGraph", "A graph captured as one device graph (pf.compile's reduce-overhead).")
      .def(nb::init<const ir::Graph&, const std::vector<Tensor>&>(), "graph"_a, "inputs"_a)
      .def("launch", &ir::DeviceGraph::launch, "inputs"_a);
  m.def("_begin_trace", &ir::begin_trace, "inputs"_a);
  m.def("_end_trace", [](const std::vector<Tensor>& outputs) {
    std::string why_not;
    ir::Graph g = ir::end_trace(outputs, why_not);
    return nb::make_tuple(nb::cast(std::move(g)), why_not);
  }, "outputs"_a, "(graph, why it cannot be replayed or '').");
  m.def("_abort_trace", &ir::abort_trace);
  m.def("_is_tracing", &ir::is_tracing);
  m.def("_graph_applies", &ir::graph_applies, "graph"_a, "inputs"_a,
        "Whether each leaf's .grad that the graph read is as the trace found it and no tensor it kept from "
        "outside was given new data since.");
  m.def("_trace_break", &ir::trace_break, "what"_a, "Within a trace: the traced call cannot be replayed (why).");
  m.def("_run_graph", [](const ir::Graph& g, const std::vector<Tensor>& inputs) { return ir::run_graph(g, inputs); },
        "graph"_a, "inputs"_a);
  m.def("_tensor_signature", [](const std::vector<Tensor>& tensors) {
    nb::list keys;
    for (const Tensor& t : tensors) {
      nb::list shape;
      for (int64_t s : t.shape()) shape.append(s);
      keys.append(nb::make_tuple(nb::tuple(shape), static_cast<int>(t.dtype()),
                                 static_cast<int>(t.device().type) * 65536 + t.device().index, t.is_placed(),
                                 t.requires_grad()));
    }
    return nb::tuple(keys);
  }, "tensors"_a, "Per tensor: (shape, dtype, device, placed, requires_grad), what a trace is specialised to.");
}

}  // namespace pyflame::python
