// Python bindings of include/pyflame/misc_ops.h with torch's argument names,
// order and defaults: pf.addcmul and pf.addcdiv, and the Tensor methods with
// their in-place forms; pf.isclose and Tensor.isclose (python/pyflame/_misc_api.py
// exports them).

#include <string>

#include "bindings.h"
#include "pyflame/misc_ops.h"

namespace pyflame::python {

namespace {

using Addc = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, Scalar);
using AddcInPlace = Tensor& (*)(Tensor&, const Tensor&, const Tensor&, Scalar);

void bind_addc(nb::module_& m, nb::class_<Tensor>& tensor, const char* name, Addc op, AddcInPlace op_,
               const char* doc) {
  m.def(
      name,
      [op](const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, nb::handle value) {
        return op(input, tensor1, tensor2, as_scalar(value, "value"));
      },
      "input"_a, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1, doc);
  tensor.def(
      name,
      [op](const Tensor& self, const Tensor& tensor1, const Tensor& tensor2, nb::handle value) {
        return op(self, tensor1, tensor2, as_scalar(value, "value"));
      },
      "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1, doc);
  tensor.def(
      (std::string(name) + "_").c_str(),
      [op_](nb::handle self, const Tensor& tensor1, const Tensor& tensor2, nb::handle value) {
        return in_place(self, [&](Tensor& x) { op_(x, tensor1, tensor2, as_scalar(value, "value")); });
      },
      "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1,
      "In place: the tensor receives the result (its shape, and a dtype the result casts to).");
}

}  // namespace

void bind_misc(nb::module_& m, nb::class_<Tensor>& tensor) {
  bind_addc(m, tensor, "addcmul", &pyflame::addcmul, &pyflame::addcmul_,
            "input + value * tensor1 * tensor2, as torch.addcmul.");
  bind_addc(m, tensor, "addcdiv", &pyflame::addcdiv, &pyflame::addcdiv_,
            "input + value * tensor1 / tensor2, as torch.addcdiv (which refuses integer division).");
  const char* isclose_doc =
      "|input - other| <= atol + rtol * |other| elementwise (bool), as torch.isclose; equal values "
      "(infinities included) are close, NaN only with equal_nan.";
  m.def("isclose", &pyflame::isclose, "input"_a, "other"_a, "rtol"_a = 1e-05, "atol"_a = 1e-08,
        "equal_nan"_a = false, isclose_doc);
  tensor.def("isclose", &pyflame::isclose, "other"_a, "rtol"_a = 1e-05, "atol"_a = 1e-08, "equal_nan"_a = false,
             isclose_doc);
}

}  // namespace pyflame::python
