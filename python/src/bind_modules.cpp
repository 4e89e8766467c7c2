// Python binding of the nn-modules area's ops (pyflame.nn's layers call them).

#include <nanobind/stl/optional.h>

#include "bindings.h"
#include "pyflame/modules_ops.h"

namespace pyflame::python {

void bind_modules(nb::module_& m, nb::class_<Tensor>& /*tensor*/) {
  m.def("linear", [](const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
    return pyflame::linear(input, weight, bias);
  }, "input"_a, "weight"_a, "bias"_a = nb::none(), "y = input @ weight.T + bias (torch.nn.functional.linear).");
}

}  // namespace pyflame::python
