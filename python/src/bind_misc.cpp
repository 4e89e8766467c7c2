// Python bindings of include/pyflame/misc_ops.h with torch's argument names,
// order and defaults: pf.addcmul and pf.addcdiv, and the Tensor methods with
// their in-place forms; pf.isclose and Tensor.isclose (python/pyflame/_misc_api.py
// exports them); index_add/copy/fill, diff, roll, flip, diag_embed, cummax, cummin, lerp, logit
// and cdist, whose argument handling (numbers for tensors, named tuples) is
// _misc_api.py's, _shape_api.py's, _elementwise.py's and special.py's.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/vector.h>

#include <optional>
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
  m.def(
      "index_add",
      [](const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source, nb::handle alpha) {
        return pyflame::index_add(input, dim, index, source, as_scalar(alpha, "alpha"));
      },
      "input"_a, "dim"_a, "index"_a, "source"_a, "alpha"_a = 1);
  m.def("index_copy", &pyflame::index_copy, "input"_a, "dim"_a, "index"_a, "source"_a);
  m.def(
      "index_fill",
      [](const Tensor& input, int64_t dim, const Tensor& index, nb::handle value) {
        return pyflame::index_fill(input, dim, index, as_scalar(value, "value"));
      },
      "input"_a, "dim"_a, "index"_a, "value"_a);
  m.def(
      "diff",
      [](const Tensor& input, int64_t n, int64_t dim, const std::optional<Tensor>& prepend,
         const std::optional<Tensor>& append) {
        return pyflame::diff(input, n, dim, prepend.value_or(Tensor()), append.value_or(Tensor()));
      },
      "input"_a, "n"_a, "dim"_a, "prepend"_a = nb::none(), "append"_a = nb::none());
  m.def("diag_embed", &pyflame::diag_embed, "input"_a, "offset"_a = 0, "dim1"_a = -2, "dim2"_a = -1);
  m.def(
      "flip", [](const Tensor& input, std::vector<int64_t> dims) { return pyflame::flip(input, std::move(dims)); },
      "input"_a, "dims"_a);
  m.def(
      "roll",
      [](const Tensor& input, std::vector<int64_t> shifts, std::vector<int64_t> dims) {
        return pyflame::roll(input, std::move(shifts), std::move(dims));
      },
      "input"_a, "shifts"_a, "dims"_a = std::vector<int64_t>{});
  m.def(
      "lerp",
      [](const Tensor& input, const Tensor& end, nb::handle weight) {
        if (nb::isinstance<Tensor>(weight)) return pyflame::lerp(input, end, nb::cast<const Tensor&>(weight));
        return pyflame::lerp(input, end, nb::cast<double>(weight));
      },
      "input"_a, "end"_a, "weight"_a);
  m.def("logit", &pyflame::logit, "input"_a, "eps"_a = nb::none());
  m.def("cdist", &pyflame::cdist, "x1"_a, "x2"_a, "p"_a = 2.0);
  m.def("cummax", &pyflame::cummax, "input"_a, "dim"_a);
  m.def("cummin", &pyflame::cummin, "input"_a, "dim"_a);
}

}  // namespace pyflame::python
