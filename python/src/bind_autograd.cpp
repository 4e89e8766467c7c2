// Autograd: the Tensor's gradient state (requires_grad, grad, grad_fn,
// backward, ...), graph nodes as grad_fn objects, grad mode, and the engine's
// entry points that pyflame.autograd wraps.

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/autograd.h"
#include "pyflame/error.h"

namespace pyflame::python {

namespace {

namespace ag = pyflame::autograd;

nb::object node_or_none(const std::shared_ptr<ag::Node>& n) { return n ? nb::cast(n) : nb::none(); }

// Tensor.backward's and autograd.grad's gradient arguments: None, a tensor, or a sequence of either.
std::vector<Tensor> optional_tensors(nb::handle h, size_t n, const char* what) {
  std::vector<Tensor> out(n);
  if (h.is_none()) return out;
  if (nb::isinstance<Tensor>(h)) {
    out[0] = nb::cast<Tensor>(h);
    return out;
  }
  size_t i = 0;
  for (nb::handle item : h) {
    if (i == n) throw pyflame::ValueError(std::string(what) + ": more gradients than outputs");
    if (!item.is_none()) out[i] = nb::cast<Tensor>(item);
    ++i;
  }
  if (i != n) throw pyflame::ValueError(std::string(what) + ": expected " + std::to_string(n) + " gradients, got " +
                                        std::to_string(i));
  return out;
}

std::vector<Tensor> tensors(nb::handle h) {
  if (nb::isinstance<Tensor>(h)) return {nb::cast<Tensor>(h)};
  std::vector<Tensor> out;
  for (nb::handle item : h) out.push_back(nb::cast<Tensor>(item));
  return out;
}

}  // namespace

void bind_autograd(nb::module_& m, nb::class_<Tensor>& tensor) {
  nb::class_<ag::Node>(m, "Node", "A step of the backward graph (a tensor's grad_fn).")
      .def("name", &ag::Node::name)
      .def_prop_ro("next_functions",
                   [](const ag::Node& n) {
                     nb::list out;
                     for (const ag::Edge& e : n.next_edges) out.append(nb::make_tuple(node_or_none(e.node), e.input_nr));
                     return nb::tuple(out);
                   })
      .def("__repr__", [](const ag::Node& n) { return "<" + n.name() + " object>"; });

  tensor
      .def_prop_rw(
          "requires_grad", [](const Tensor& t) { return t.requires_grad(); },
          [](Tensor& t, bool b) { t.set_requires_grad(b); }, "Whether gradients are computed for this tensor.")
      .def(
          "requires_grad_",
          [](nb::handle self, bool b) { return in_place(self, [&](Tensor& t) { t.set_requires_grad(b); }); },
          "requires_grad"_a = true)
      .def_prop_rw(
          "grad", [](const Tensor& t) -> nb::object { return t.grad().defined() ? nb::cast(t.grad()) : nb::none(); },
          [](Tensor& t, nb::handle g) { t.set_grad(g.is_none() ? Tensor() : nb::cast<Tensor>(g)); },
          nb::for_setter(nb::arg("value").none()), "The gradient accumulated by backward(), or None.")
      .def_prop_ro("grad_fn", [](const Tensor& t) { return node_or_none(t.grad_fn()); })
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_ro("retains_grad", &Tensor::retains_grad)
      .def("retain_grad", &Tensor::retain_grad)
      .def("detach", &Tensor::detach, "The same memory without history; it does not require grad.")
      .def_prop_ro("data", &Tensor::detach, "The same memory without history (as detach()).")
      .def(
          "backward",
          [](const Tensor& t, nb::handle gradient, std::optional<bool> retain_graph, bool create_graph,
             nb::handle inputs) {
            if (create_graph)
              throw pyflame::NotSupportedError(
                  "backward(create_graph=True): higher-order gradients are not supported yet (docs/autograd.md)");
            if (!inputs.is_none())
              throw pyflame::NotSupportedError(
                  "backward(inputs=...) is not supported yet; use pf.autograd.grad(outputs, inputs) (docs/autograd.md)");
            ag::backward({t}, optional_tensors(gradient, 1, "backward"), retain_graph.value_or(false));
          },
          "gradient"_a.none() = nb::none(), "retain_graph"_a.none() = nb::none(), "create_graph"_a = false,
          "inputs"_a.none() = nb::none(),
          "Accumulates the gradient of this tensor into the .grad of the leaves it depends on.");

  m.def("is_grad_enabled", &ag::is_grad_enabled, "Whether ops record a backward graph in this thread.");
  m.def("_set_grad_enabled", &ag::set_grad_enabled, "enabled"_a);
  m.def(
      "_backward",
      [](nb::handle outputs, nb::handle grad_outputs, bool retain_graph) {
        std::vector<Tensor> outs = tensors(outputs);
        ag::backward(outs, optional_tensors(grad_outputs, outs.size(), "backward"), retain_graph);
      },
      "tensors"_a, "grad_tensors"_a.none(), "retain_graph"_a);
  m.def(
      "_grad",
      [](nb::handle outputs, nb::handle inputs, nb::handle grad_outputs, bool retain_graph, bool allow_unused) {
        std::vector<Tensor> outs = tensors(outputs);
        std::vector<Tensor> result = ag::grad(outs, tensors(inputs), optional_tensors(grad_outputs, outs.size(), "grad"),
                                              retain_graph, allow_unused);
        nb::list py;
        for (const Tensor& r : result) py.append(r.defined() ? nb::cast(r) : nb::none());
        return nb::tuple(py);
      },
      "outputs"_a, "inputs"_a, "grad_outputs"_a.none(), "retain_graph"_a, "allow_unused"_a);
  m.def("has_derivative", [](const std::string& op) { return ag::has_derivative(pyflame::op_from_name(op)); },
        "op"_a, "Whether the op of the table has a derivative.");
  m.def("is_differentiable", [](const std::string& op) { return ag::is_differentiable(pyflame::op_from_name(op)); },
        "op"_a, "Whether the op's results can carry gradients (comparisons, arg reductions and random ops cannot).");
}

}  // namespace pyflame::python
