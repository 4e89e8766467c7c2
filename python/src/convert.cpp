// Conversions of Python arguments (numbers, dtypes, shapes, dims, devices)
// shared by the binding files: Python numbers become wrapped scalars here, so
// PyTorch's promotion rules apply.

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "pyflame/error.h"

namespace pyflame::python {

std::string py_type_name(nb::handle h) { return nb::cast<std::string>(nb::type_name(h.type())); }

namespace {
// Whether a type comes from NumPy (np.float32, np.dtype('int8').__class__, ...).
bool is_numpy(nb::handle type) {
  nb::object mod = nb::getattr(type, "__module__", nb::none());
  return nb::isinstance<nb::str>(mod) && nb::cast<std::string>(mod).rfind("numpy", 0) == 0;
}
}  // namespace

Tensor as_operand(nb::handle h) {
  if (nb::isinstance<Tensor>(h)) return nb::cast<Tensor>(h);
  if (PyBool_Check(h.ptr())) return Tensor::scalar(Scalar(h.ptr() == Py_True));
  if (PyLong_Check(h.ptr())) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow) throw pyflame::ValueError("integer " + nb::cast<std::string>(nb::str(h)) + " does not fit in int64");
    return Tensor::scalar(Scalar(static_cast<int64_t>(v)));
  }
  if (PyFloat_Check(h.ptr())) return Tensor::scalar(Scalar(PyFloat_AsDouble(h.ptr())));
  // NumPy scalars (np.float32(1), np.int64(2), np.bool_(True)) become Python numbers.
  if (is_numpy(h.type()) && nb::hasattr(h, "item") && nb::cast<int>(h.attr("ndim")) == 0)
    return as_operand(h.attr("item")());  // a NumPy scalar or 0-d array
  throw pyflame::TypeError("expected a pyflame Tensor or a number, got " + py_type_name(h) +
                           " (convert arrays and lists with pf.tensor())");
}

Scalar as_scalar(nb::handle h, const char* what) {
  Tensor t = as_operand(h);
  if (!t.is_wrapped_number() && t.numel() != 1)
    throw pyflame::TypeError(std::string(what) + " must be a number, got a tensor of shape " +
                             pyflame::detail::to_piece(t.shape()));
  Scalar s = t.item();
  return s;
}

DType as_dtype(nb::handle h) {
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  if (nb::isinstance<nb::str>(h)) return pyflame::parse_dtype(nb::cast<std::string>(h));
  if (nb::isinstance<nb::type_object>(h) && is_numpy(h))  // np.float32
    return pyflame::parse_dtype(nb::cast<std::string>(h.attr("__name__")));
  if (is_numpy(h.type()) && nb::hasattr(h, "name"))  // np.dtype('float32')
    return pyflame::parse_dtype(nb::cast<std::string>(h.attr("name")));
  throw pyflame::TypeError("expected a dtype such as pyflame.float32, got " + py_type_name(h));
}

bool is_dtype_name(const std::string& name) {
  try {
    pyflame::parse_dtype(name);
    return true;
  } catch (const pyflame::ValueError&) {
    return false;
  }
}

std::optional<DType> as_opt_dtype(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return as_dtype(h);
}

Shape as_shape(nb::handle args) {
  nb::sequence seq = nb::borrow<nb::sequence>(args);
  if (nb::len(seq) == 1 && !PyIndex_Check(seq[0].ptr())) seq = nb::borrow<nb::sequence>(seq[0]);
  Shape s;
  for (nb::handle v : seq) {
    // A tensor stands for an int only when it is one integer (as in PyTorch).
    bool one_int = !nb::isinstance<Tensor>(v) || (pyflame::is_integral(nb::cast<const Tensor&>(v).dtype()) &&
                                                  nb::cast<const Tensor&>(v).numel() == 1);
    if (!PyIndex_Check(v.ptr()) || !one_int)
      throw pyflame::TypeError("shape entries must be integers, got " + py_type_name(v));
    s.push_back(nb::cast<int64_t>(nb::int_(v)));
  }
  return s;
}

std::vector<int64_t> as_dims(nb::handle dim) {
  if (dim.is_none()) return {};
  if (PyIndex_Check(dim.ptr())) return {nb::cast<int64_t>(nb::int_(dim))};
  std::vector<int64_t> dims;
  for (nb::handle d : nb::borrow<nb::sequence>(dim)) dims.push_back(nb::cast<int64_t>(nb::int_(d)));
  if (dims.empty()) throw pyflame::ValueError("dim must be an int, a non-empty sequence of ints, or None");
  return dims;
}

pyflame::Device as_device(nb::handle h) { return pyflame::Device::parse(nb::cast<std::string>(nb::str(h))); }

nb::object scalar_to_python(const Scalar& s) {
  switch (s.kind) {
    case Scalar::Kind::Bool: return nb::bool_(s.i != 0);
    case Scalar::Kind::Int: return nb::int_(s.i);
    case Scalar::Kind::Float: break;
  }
  return nb::float_(s.f);
}

}  // namespace pyflame::python
