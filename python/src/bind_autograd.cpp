// Autograd: the Tensor's gradient state (requires_grad, grad, grad_fn,
// backward, ...), graph nodes as grad_fn objects, grad mode, and the engine's
// entry points that pyflame.autograd wraps.

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/amp.h"
#include "pyflame/autograd.h"
#include "pyflame/error.h"
#include "pyflame/ir/graph.h"

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

// The backward step of a pyflame.autograd.Function: calls the Python backward
// (the engine holds the GIL: it runs inside a Python call) with one gradient
// per output, zeros where none flowed (PyTorch's materialize_grads default),
// and checks what it returns.
class PythonNode : public ag::Node {
 public:
  PythonNode(std::string name, nb::object backward, std::vector<Shape> output_shapes,
             std::vector<DType> output_dtypes, std::vector<pyflame::Device> output_devices,
             std::vector<Shape> input_shapes)
      : name_(std::move(name)),
        backward_(std::move(backward)),
        output_shapes_(std::move(output_shapes)),
        output_dtypes_(std::move(output_dtypes)),
        output_devices_(std::move(output_devices)),
        input_shapes_(std::move(input_shapes)) {}
  std::string name() const override { return name_; }
  size_t num_slots() const override { return output_shapes_.size(); }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    // Its saved tensors are detached (ctx.save_for_backward): a recorded backward would not reach
    // their histories, and the gradient of the gradient would lack their part.
    if (ag::creates_graph())
      throw pyflame::NotSupportedError("a gradient of a gradient (create_graph=True) through the custom autograd "
                                       "Function " + name_ + " is not supported yet (docs/autograd.md)");
    if (!backward_.is_valid())
      throw pyflame::AutogradError("trying to backward through " + name_ +
                                   " a second time: pass retain_graph=True to the first backward()");
    nb::list args;
    for (size_t i = 0; i < grads.size(); ++i) {
      Tensor g = grads[i];
      if (!g.defined()) {
        g = Tensor::empty(output_shapes_[i], output_dtypes_[i], output_devices_[i]);
        g.fill_(0);
      }
      args.append(nb::cast(g));
    }
    nb::object result = backward_(*nb::tuple(args));
    nb::tuple returned = nb::isinstance<nb::tuple>(result) ? nb::borrow<nb::tuple>(result) : nb::make_tuple(result);
    if (returned.size() != next_edges.size())
      throw pyflame::AutogradError(name_ + ": backward returned " + std::to_string(returned.size()) +
                                   " gradients, but forward had " + std::to_string(next_edges.size()) + " inputs");
    std::vector<Tensor> out(next_edges.size());
    for (size_t i = 0; i < out.size(); ++i) {
      if (returned[i].is_none() || !next_edges[i].valid()) continue;
      out[i] = nb::cast<Tensor>(returned[i]);
      if (out[i].shape() != input_shapes_[i])
        throw pyflame::AutogradError(name_ + ": backward returned a gradient of shape " +
                                     pyflame::detail::to_piece(out[i].shape()) + " for input " + std::to_string(i) +
                                     " of shape " + pyflame::detail::to_piece(input_shapes_[i]));
    }
    return out;
  }
  void release() override { backward_ = nb::object(); }

 private:
  std::string name_;
  nb::object backward_;
  std::vector<Shape> output_shapes_;
  std::vector<DType> output_dtypes_;
  std::vector<pyflame::Device> output_devices_;
  std::vector<Shape> input_shapes_;
};

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
          "grad",
          [](const Tensor& t) -> nb::object {
            ir::trace_grad_access(t, ir::GradAccess::Read);  // the traced code decides with it (zero_grad, optimizers)
            return t.grad().defined() ? nb::cast(t.grad()) : nb::none();
          },
          [](Tensor& t, nb::handle g) { t.set_grad(g.is_none() ? Tensor() : nb::cast<Tensor>(g)); },
          nb::for_setter(nb::arg("value").none()), "The gradient accumulated by backward(), or None.")
      .def_prop_ro("grad_fn", [](const Tensor& t) { return node_or_none(t.grad_fn()); })
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_ro("retains_grad", &Tensor::retains_grad)
      .def("retain_grad", &Tensor::retain_grad)
      .def(
          "_register_hook",
          [](Tensor& t, nb::callable hook) {
            // Backward runs with the GIL held (the engine is called from Python), as the hook needs.
            return t.register_hook([hook](const Tensor& grad) -> Tensor {
              nb::object r = hook(grad);
              if (r.is_none()) return Tensor();
              if (!nb::isinstance<Tensor>(r))
                throw pyflame::TypeError("a gradient hook must return a Tensor or None, got " +
                                         std::string(nb::type_name(r.type()).c_str()));
              return nb::cast<Tensor>(r);
            });
          },
          "hook"_a)
      .def(
          "_register_grad_accumulated_hook",
          [](Tensor& t, nb::callable hook) {
            return t.register_grad_accumulated_hook([hook](const Tensor& grad) -> Tensor {
              hook(grad);
              return Tensor();
            });
          },
          "hook"_a)
      .def("_remove_hook", &Tensor::remove_hook, "id"_a)
      .def(
          "_become", [](nb::handle self, const Tensor& other) { return in_place(self, [&](Tensor& t) { t = other; }); },
          "other"_a, "This Python tensor takes other's view and autograd history (in-place shape ops).")
      .def("detach", &Tensor::detach, "The same memory without history; it does not require grad.")
      .def_prop_rw("data", &Tensor::detach, [](Tensor& t, const Tensor& value) { t.set_data(value); },
                   "Get: the same memory without history (as detach()). Set (x.data = y): x takes y's memory, "
                   "shape, dtype, device and placement and keeps its identity and autograd state, as PyTorch "
                   "(Module.to moves parameters this way).")
      .def(
          "backward",
          [](const Tensor& t, nb::handle gradient, std::optional<bool> retain_graph, bool create_graph,
             nb::handle inputs) {
            if (!inputs.is_none())
              throw pyflame::NotSupportedError(
                  "backward(inputs=...) is not supported yet; use pf.autograd.grad(outputs, inputs) (docs/autograd.md)");
            ag::backward({t}, optional_tensors(gradient, 1, "backward"), retain_graph.value_or(create_graph),
                         create_graph);
          },
          "gradient"_a.none() = nb::none(), "retain_graph"_a.none() = nb::none(), "create_graph"_a = false,
          "inputs"_a.none() = nb::none(),
          "Accumulates the gradient of this tensor into the .grad of the leaves it depends on.");

  m.def("is_grad_enabled", &ag::is_grad_enabled, "Whether ops record a backward graph in this thread.");
  m.def("_set_grad_enabled", &ag::set_grad_enabled, "enabled"_a);
  m.def(
      "_backward",
      [](nb::handle outputs, nb::handle grad_outputs, bool retain_graph, bool create_graph) {
        std::vector<Tensor> outs = tensors(outputs);
        ag::backward(outs, optional_tensors(grad_outputs, outs.size(), "backward"), retain_graph, create_graph);
      },
      "tensors"_a, "grad_tensors"_a.none(), "retain_graph"_a, "create_graph"_a = false);
  m.def(
      "_queue_backward_callback", [](nb::callable fn) { ag::queue_callback([fn] { fn(); }); }, "fn"_a,
      "From a hook during backward: fn() runs once that backward pass has ended.");
  m.def(
      "_grad",
      [](nb::handle outputs, nb::handle inputs, nb::handle grad_outputs, bool retain_graph, bool allow_unused,
         bool create_graph) {
        std::vector<Tensor> outs = tensors(outputs);
        std::vector<Tensor> result = ag::grad(outs, tensors(inputs), optional_tensors(grad_outputs, outs.size(), "grad"),
                                              retain_graph, allow_unused, create_graph);
        nb::list py;
        for (const Tensor& r : result) py.append(r.defined() ? nb::cast(r) : nb::none());
        return nb::tuple(py);
      },
      "outputs"_a, "inputs"_a, "grad_outputs"_a.none(), "retain_graph"_a, "allow_unused"_a, "create_graph"_a = false);
  m.def(
      "_record_function",
      [](const std::string& name, nb::object backward, nb::list inputs, nb::list outputs) {
        std::vector<Shape> out_shapes, in_shapes;
        std::vector<DType> out_dtypes;
        std::vector<pyflame::Device> out_devices;
        for (nb::handle o : outputs) {
          const Tensor& t = nb::cast<const Tensor&>(o);
          out_shapes.push_back(t.shape()), out_dtypes.push_back(t.dtype()), out_devices.push_back(t.device());
        }
        std::vector<ag::Edge> edges;
        for (nb::handle i : inputs) {
          const bool is_tensor = nb::isinstance<Tensor>(i);
          edges.push_back(is_tensor ? ag::gradient_edge(nb::cast<const Tensor&>(i)) : ag::Edge{});
          in_shapes.push_back(is_tensor ? nb::cast<const Tensor&>(i).shape() : Shape{});
        }
        auto node = std::make_shared<PythonNode>(name, std::move(backward), std::move(out_shapes),
                                                 std::move(out_dtypes), std::move(out_devices), std::move(in_shapes));
        node->next_edges = std::move(edges);
        uint32_t slot = 0;
        for (nb::handle o : outputs) {
          Tensor& t = nb::cast<Tensor&>(o);
          if (pyflame::is_floating(t.dtype())) ag::set_history(t, node, slot);
          ++slot;
        }
      },
      "name"_a, "backward"_a, "inputs"_a, "outputs"_a);
  m.def(
      "_set_autocast",
      [](nb::handle device_type, nb::handle dtype) {
        pyflame::amp::set_autocast(as_device(device_type).type, as_opt_dtype(dtype));
      },
      "device_type"_a, "dtype"_a.none());
  m.def(
      "_get_autocast",
      [](nb::handle device_type) -> nb::object {
        std::optional<DType> d = pyflame::amp::autocast_dtype(as_device(device_type).type);
        return d ? nb::cast(*d) : nb::none();
      },
      "device_type"_a);
  m.def("has_derivative", [](const std::string& op) { return ag::has_derivative(pyflame::op_from_name(op)); },
        "op"_a, "Whether autograd can differentiate the op: a derivative of its own, or its decomposition.");
  m.def("is_differentiable", [](const std::string& op) { return ag::is_differentiable(pyflame::op_from_name(op)); },
        "op"_a, "Whether the op's results can carry gradients (comparisons, arg reductions and random ops cannot).");
}

}  // namespace pyflame::python
