// pyflame._C: the Python binding of the C++ core. Op functions and Tensor
// methods are generated from the op table; Python numbers become wrapped
// scalars (PyTorch's promotion rules) at this boundary, and C++ exceptions
// map to the Python classes a user expects.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "core/dispatch.h"
#include "pyflame/backend/rocm/device.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

using namespace pyflame::python;

namespace {

// ------------------------------------------------------------ conversions

PyObject* g_not_supported_error;
PyObject* g_rocm_error;
PyObject* g_rocm_not_available_error;
PyObject* g_device_error;
PyObject* g_rocm_memory_error;
PyObject* g_hip_compilation_error;

}  // namespace

namespace pyflame::python {

std::string py_type_name(nb::handle h) { return nb::cast<std::string>(nb::type_name(h.type())); }

// Whether a type comes from NumPy (np.float32, np.dtype('int8').__class__, ...).
bool is_numpy(nb::handle type) {
  nb::object mod = nb::getattr(type, "__module__", nb::none());
  return nb::isinstance<nb::str>(mod) && nb::cast<std::string>(mod).rfind("numpy", 0) == 0;
}

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
    if (!PyIndex_Check(v.ptr()))
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

// ------------------------------------------------------------ NumPy interop

}  // namespace pyflame::python

namespace {

nb::dlpack::dtype dlpack_dtype(DType d) {
  switch (d) {
    case DType::Bool: return nb::dtype<bool>();
    case DType::UInt8: return nb::dtype<uint8_t>();
    case DType::Int8: return nb::dtype<int8_t>();
    case DType::Int16: return nb::dtype<int16_t>();
    case DType::Int32: return nb::dtype<int32_t>();
    case DType::Int64: return nb::dtype<int64_t>();
    case DType::Float16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case DType::Float32: return nb::dtype<float>();
    case DType::Float64: return nb::dtype<double>();
    case DType::BFloat16: break;
  }
  throw pyflame::TypeError("bfloat16 tensors have no NumPy equivalent; convert first with .to(pyflame.float32)");
}

DType from_dlpack_dtype(nb::dlpack::dtype d) {
  using Code = nb::dlpack::dtype_code;
  auto code = static_cast<Code>(d.code);
  if (code == Code::Bool) return DType::Bool;
  if (code == Code::UInt && d.bits == 8) return DType::UInt8;
  if (code == Code::Int) {
    switch (d.bits) {
      case 8: return DType::Int8;
      case 16: return DType::Int16;
      case 32: return DType::Int32;
      case 64: return DType::Int64;
    }
  }
  if (code == Code::Float) {
    switch (d.bits) {
      case 16: return DType::Float16;
      case 32: return DType::Float32;
      case 64: return DType::Float64;
    }
  }
  throw pyflame::TypeError("unsupported NumPy dtype (code " + std::to_string(d.code) + ", " + std::to_string(d.bits) +
                           " bits); supported: bool, uint8, int8..int64, float16, float32, float64");
}

using NumpyArray = nb::ndarray<nb::numpy>;

// A NumPy view of a CPU tensor (zero-copy; it keeps the storage alive).
// Tensors elsewhere are copied to the host first.
NumpyArray to_numpy(const Tensor& t) {
  Tensor h = t.device().is_cpu() ? t : t.to(pyflame::Device::cpu());
  auto dt = dlpack_dtype(h.dtype());
  auto* owner_tensor = new Tensor(h);
  nb::capsule owner(owner_tensor, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(h.shape().begin(), h.shape().end());
  std::vector<int64_t> strides(h.strides().begin(), h.strides().end());
  return NumpyArray(h.data_ptr(), shape.size(), shape.data(), owner, strides.data(), dt);
}

Tensor from_numpy(nb::ndarray<nb::numpy, nb::device::cpu> arr, nb::handle owner) {
  DType dtype = from_dlpack_dtype(arr.dtype());
  Shape shape, strides;
  int64_t span = 1;
  for (size_t i = 0; i < arr.ndim(); ++i) {
    shape.push_back(static_cast<int64_t>(arr.shape(i)));
    strides.push_back(arr.stride(i));
    if (arr.stride(i) < 0)
      throw pyflame::ValueError("from_numpy: arrays with negative strides are not supported; pass a copy (arr.copy())");
    span += (shape.back() - 1) * arr.stride(i);
  }
  if (pyflame::shape_numel(shape) == 0) span = 0;
  // The storage holds a reference to the array so the memory outlives every view.
  PyObject* ref = owner.ptr();
  Py_INCREF(ref);
  auto storage = std::make_shared<pyflame::Storage>(
      arr.data(), static_cast<size_t>(span) * pyflame::itemsize(dtype), pyflame::Device::cpu(), [ref](void*) {
        nb::gil_scoped_acquire gil;
        Py_DECREF(ref);
      });
  return Tensor(storage, shape, strides, 0, dtype);
}

// ------------------------------------------------------------ indexing

// Whether an index item is a tensor key (advanced indexing): any tensor but a
// 0-d integer one, which PyTorch treats as an int.
bool is_tensor_key(nb::handle it) {
  if (!nb::isinstance<Tensor>(it)) return false;
  const Tensor& t = nb::cast<const Tensor&>(it);
  return !(t.dim() == 0 && pyflame::is_integral(t.dtype()));
}

// x[key] as PyTorch: ints, slices, None and '...' make a view; one tensor key
// (advanced indexing) is applied to that view at the dim where it stood.
struct ParsedKey {
  Tensor view;
  Tensor tensor_key;  // undefined if none
  int64_t tensor_dim = 0;
};

ParsedKey parse_key(const Tensor& self, nb::handle key) {
  nb::tuple items = nb::isinstance<nb::tuple>(key) ? nb::borrow<nb::tuple>(key) : nb::make_tuple(key);
  int64_t consumed = 0;
  bool ellipsis = false;
  for (nb::handle it : items) {
    if (it.is(Py_Ellipsis)) {
      if (ellipsis) throw pyflame::IndexError("an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (is_tensor_key(it)) {
      const Tensor& t = nb::cast<const Tensor&>(it);
      consumed += t.dtype() == DType::Bool ? t.dim() : 1;  // a mask covers as many dims as it has
    } else if (!it.is_none()) {
      ++consumed;
    }
  }
  if (consumed > self.dim())
    throw pyflame::IndexError("too many indices for a tensor of dimension " + std::to_string(self.dim()));
  ParsedKey k{self, Tensor(), 0};
  Tensor& r = k.view;
  int64_t d = 0;
  for (nb::handle it : items) {
    if (it.is(Py_Ellipsis)) {
      d += self.dim() - consumed;
    } else if (it.is_none()) {
      r = r.unsqueeze(d++);
    } else if (PySlice_Check(it.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(it.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      if (step < 0) throw pyflame::ValueError("negative slice steps are not supported (as in PyTorch); use flip");
      r = r.slice(d++, start, stop, step);
    } else if (is_tensor_key(it)) {
      if (k.tensor_key.defined())
        throw pyflame::NotSupportedError(
            "indexing with more than one tensor is not supported yet (docs/ops.md); index one dim at a time");
      k.tensor_key = nb::cast<Tensor>(it);
      k.tensor_dim = d;
      d += k.tensor_key.dtype() == DType::Bool ? k.tensor_key.dim() : 1;
    } else if (PyIndex_Check(it.ptr()) && !PyBool_Check(it.ptr())) {
      r = r.select(d, nb::cast<int64_t>(nb::int_(it)));
    } else {
      throw pyflame::NotSupportedError(
          "indexing with " + py_type_name(it) +
          " is not supported: use integers, slices, None, '...' and one integer or bool tensor (docs/ops.md)");
    }
  }
  return k;
}

Tensor get_item(const Tensor& self, nb::handle key) {
  ParsedKey k = parse_key(self, key);
  if (!k.tensor_key.defined()) return k.view;
  return pyflame::advanced_index(k.view, k.tensor_dim, k.tensor_key);
}

void assign(Tensor& self, nb::handle key, nb::handle value) {
  ParsedKey k = parse_key(self, key);
  if (k.tensor_key.defined()) {
    if (nb::isinstance<Tensor>(value))
      pyflame::advanced_index_put_(k.view, k.tensor_dim, k.tensor_key, nb::cast<Tensor>(value));
    else
      pyflame::advanced_index_put_(k.view, k.tensor_dim, k.tensor_key, as_scalar(value, "the assigned value"));
  } else if (nb::isinstance<Tensor>(value)) {
    k.view.copy_(nb::cast<Tensor>(value));
  } else {
    k.view.fill_(as_scalar(value, "the assigned value"));
  }
}

// ------------------------------------------------------------ exceptions

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const pyflame::TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const pyflame::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const pyflame::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const pyflame::NotSupportedError& e) {
    PyErr_SetString(g_not_supported_error, e.what());
  } catch (const pyflame::ROCmNotAvailableError& e) {
    PyErr_SetString(g_rocm_not_available_error, e.what());
  } catch (const pyflame::DeviceError& e) {
    PyErr_SetString(g_device_error, e.what());
  } catch (const pyflame::ROCmMemoryError& e) {
    PyErr_SetString(g_rocm_memory_error, e.what());
  } catch (const pyflame::HIPCompilationError& e) {
    PyErr_SetString(g_hip_compilation_error, e.what());
  } catch (const pyflame::ROCmError& e) {
    PyErr_SetString(g_rocm_error, e.what());
  }
}

PyObject* new_exception(nb::module_& m, const char* name, PyObject* base, const char* doc) {
  std::string qual = std::string("pyflame.") + name;
  PyObject* e = PyErr_NewExceptionWithDoc(qual.c_str(), doc, base, nullptr);
  m.attr(name) = nb::handle(e);
  return e;
}

// ------------------------------------------------------------ unary ops

std::vector<Scalar> param_values(OpType op, std::initializer_list<nb::handle> values) {
  std::vector<Scalar> out;
  for (nb::handle v : values) out.push_back(as_scalar(v, pyflame::op_name(op)));
  return out;
}

// A unary elementwise op as pf.<op>(input, ...), Tensor.<op>(...) and the
// in-place Tensor.<op>_(...). Its parameters (op_params.def) become keyword
// arguments with PyTorch's names and defaults.
void bind_unary(nb::module_& m, nb::class_<Tensor>& tensor, OpType op) {
  const char* name = pyflame::op_name(op);
  const std::string inplace = std::string(name) + "_";
  std::vector<pyflame::OpParam> params = pyflame::op_params(op);
  auto arg = [&](size_t i) { return nb::arg(params[i].name) = scalar_to_python(params[i].default_value); };
  switch (params.size()) {
    case 0: {
      auto f = [op](const Tensor& x) { return pyflame::unary_op(op, x); };
      m.def(name, f, "input"_a);
      tensor.def(name, f);
      tensor.def(inplace.c_str(), [op](nb::handle self) {
        return in_place(self, [&](Tensor& x) { pyflame::unary_op_(op, x); });
      });
      break;
    }
    case 1: {
      auto f = [op](const Tensor& x, nb::handle a) { return pyflame::unary_op(op, x, param_values(op, {a})); };
      m.def(name, f, "input"_a, arg(0));
      tensor.def(name, f, arg(0));
      tensor.def(inplace.c_str(), [op](nb::handle self, nb::handle a) {
        return in_place(self, [&](Tensor& x) { pyflame::unary_op_(op, x, param_values(op, {a})); });
      }, arg(0));
      break;
    }
    case 2: {
      auto f = [op](const Tensor& x, nb::handle a, nb::handle b) {
        return pyflame::unary_op(op, x, param_values(op, {a, b}));
      };
      m.def(name, f, "input"_a, arg(0), arg(1));
      tensor.def(name, f, arg(0), arg(1));
      tensor.def(inplace.c_str(), [op](nb::handle self, nb::handle a, nb::handle b) {
        return in_place(self, [&](Tensor& x) { pyflame::unary_op_(op, x, param_values(op, {a, b})); });
      }, arg(0), arg(1));
      break;
    }
    default:
      throw std::logic_error(std::string(name) + ": bind_unary handles up to 2 parameters; add a case");
  }
}

nb::dict device_info_dict(const pyflame::backend::rocm::DeviceInfo& info) {
  nb::dict d;
  d["device_id"] = info.device_id;
  d["name"] = info.name;
  d["architecture"] = info.architecture;
  d["total_memory"] = info.total_memory;
  d["free_memory"] = info.free_memory;
  d["compute_units"] = info.compute_units;
  d["platform"] = info.platform;
  d["warp_size"] = info.warp_size;
  d["runtime_version"] = info.runtime_version;
  return d;
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "PyFlame's C++ core";

  // ---- exceptions
  g_not_supported_error = new_exception(m, "NotSupportedError", PyExc_RuntimeError,
                                        "A feature this build or device does not provide (see docs/ops.md).");
  g_rocm_error = new_exception(m, "ROCmError", PyExc_RuntimeError, "Base class of the ROCm backend's errors.");
  g_rocm_not_available_error =
      new_exception(m, "ROCmNotAvailableError", g_rocm_error, "No usable ROCm device (see rocm_unavailable_reason()).");
  g_device_error = new_exception(m, "DeviceError", g_rocm_error, "A device that does not exist or cannot be used.");
  nb::object mem_bases = nb::make_tuple(nb::handle(g_rocm_error), nb::handle(PyExc_MemoryError));
  g_rocm_memory_error = new_exception(m, "ROCmMemoryError", mem_bases.ptr(), "GPU out of memory.");
  g_hip_compilation_error =
      new_exception(m, "HIPCompilationError", g_rocm_error, "Runtime compilation of a GPU kernel failed.");
  nb::register_exception_translator(&translate);

  // ---- dtypes
  nb::enum_<DType>(m, "dtype", "Element type of a tensor.")
      .value("bool", DType::Bool)
      .value("uint8", DType::UInt8)
      .value("int8", DType::Int8)
      .value("int16", DType::Int16)
      .value("int32", DType::Int32)
      .value("int64", DType::Int64)
      .value("float16", DType::Float16)
      .value("bfloat16", DType::BFloat16)
      .value("float32", DType::Float32)
      .value("float64", DType::Float64)
      .def("__repr__", [](DType d) { return std::string("pyflame.") + pyflame::dtype_name(d); })
      .def("__str__", [](DType d) { return std::string("pyflame.") + pyflame::dtype_name(d); })
      .def_prop_ro("itemsize", [](DType d) { return pyflame::itemsize(d); })
      .def_prop_ro("is_floating_point", [](DType d) { return pyflame::is_floating(d); });
  m.def("promote_types", [](nb::handle a, nb::handle b) { return pyflame::promote_types(as_dtype(a), as_dtype(b)); });
  m.def("result_type", [](nb::args args) {
    std::vector<Tensor> ops;
    for (nb::handle h : args) ops.push_back(as_operand(h));
    return pyflame::result_type(ops);
  });

  // ---- Tensor
  nb::class_<Tensor> tensor(m, "Tensor", "An n-dimensional array on a device (see pyflame.tensor).");
  tensor
      .def(nb::init<const Tensor&>(), "data"_a,
           "Tensor(data): a second tensor object for data's elements (same storage and view, no copy); "
           "nn.Parameter wraps tensors this way.")
      .def_prop_ro("shape", [](const Tensor& t) { return nb::tuple(nb::cast(t.shape())); })
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("device", [](const Tensor& t) { return pyflame::to_string(t.device()); })
      .def_prop_ro("ndim", &Tensor::dim)
      .def_prop_ro("T", [](const Tensor& t) {
        std::vector<int64_t> dims;
        for (int64_t d = t.dim() - 1; d >= 0; --d) dims.push_back(d);
        return t.permute(dims);
      })
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("size", [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
        if (d) return nb::int_(t.size(*d));
        return nb::tuple(nb::cast(t.shape()));
      }, "dim"_a = nb::none())
      .def("stride", [](const Tensor& t, std::optional<int64_t> d) -> nb::object {
        if (d) return nb::int_(t.strides()[pyflame::wrap_dim(*d, t.dim(), "stride")]);
        return nb::tuple(nb::cast(t.strides()));
      }, "dim"_a = nb::none())
      .def("storage_offset", &Tensor::offset)
      .def("element_size", &Tensor::itemsize)
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); })
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("reshape", [](const Tensor& t, nb::args shape) { return t.reshape(as_shape(shape)); })
      .def("view", [](const Tensor& t, nb::args shape) { return t.view(as_shape(shape)); })
      .def("flatten", &Tensor::flatten, "start_dim"_a = 0, "end_dim"_a = -1)
      .def("permute", [](const Tensor& t, nb::args dims) { return t.permute(as_shape(dims)); })
      .def("transpose", &Tensor::transpose, "dim0"_a, "dim1"_a)
      .def("squeeze", [](const Tensor& t, std::optional<int64_t> d) { return d ? t.squeeze(*d) : t.squeeze(); },
           "dim"_a = nb::none())
      .def("unsqueeze", &Tensor::unsqueeze, "dim"_a)
      .def("expand", [](const Tensor& t, nb::args shape) { return t.expand(as_shape(shape)); })
      .def("to", [](const Tensor& t, nb::handle target, nb::handle dtype) {
        Tensor r = t;
        if (!dtype.is_none()) r = r.to(as_dtype(dtype));
        if (target.is_none()) return r;
        if (nb::isinstance<nb::str>(target) && !is_dtype_name(nb::cast<std::string>(target)))
          return r.to(as_device(target));
        return r.to(as_dtype(target));
      }, "target"_a = nb::none(), "dtype"_a = nb::none(),
         "to(device) moves the tensor ('cpu', 'rocm', 'rocm:N'); to(dtype) converts it; both return self when nothing changes.")
      .def("cpu", [](const Tensor& t) { return t.to(pyflame::Device::cpu()); })
      .def("float", [](const Tensor& t) { return t.to(DType::Float32); })
      .def("double", [](const Tensor& t) { return t.to(DType::Float64); })
      .def("half", [](const Tensor& t) { return t.to(DType::Float16); })
      .def("bfloat16", [](const Tensor& t) { return t.to(DType::BFloat16); })
      .def("int", [](const Tensor& t) { return t.to(DType::Int32); })
      .def("long", [](const Tensor& t) { return t.to(DType::Int64); })
      .def("bool", [](const Tensor& t) { return t.to(DType::Bool); })
      .def("copy_", [](nb::handle self, const Tensor& src) { return in_place(self, [&](Tensor& t) { t.copy_(src); }); }, "src"_a)
      .def("fill_", [](nb::handle self, nb::handle v) {
        return in_place(self, [&](Tensor& t) { t.fill_(as_scalar(v, "fill_ value")); }); }, "value"_a)
      .def("zero_", [](nb::handle self) { return in_place(self, [](Tensor& t) { t.fill_(Scalar(int64_t{0})); }); })
      .def("numpy", &to_numpy, "A NumPy array sharing memory with a CPU tensor (a copy for device tensors).")
      .def("__array__", [](const Tensor& t, nb::handle dtype, nb::handle copy) {
        nb::object arr = nb::cast(to_numpy(t));
        if (!dtype.is_none()) arr = arr.attr("astype")(dtype);
        return arr;
      }, "dtype"_a = nb::none(), "copy"_a = nb::none())
      .def("item", [](const Tensor& t) { return scalar_to_python(t.item()); })
      .def("tolist", [](const Tensor& t) {
        if (t.dtype() == DType::BFloat16) return nb::cast(to_numpy(t.to(DType::Float32))).attr("tolist")();
        return nb::cast(to_numpy(t)).attr("tolist")();
      })
      .def("__len__", [](const Tensor& t) {
        if (t.dim() == 0) throw pyflame::TypeError("len() of a 0-d tensor");
        return t.shape()[0];
      })
      .def("__iter__", [](const Tensor& t) {
        if (t.dim() == 0) throw pyflame::TypeError("iteration over a 0-d tensor");
        nb::list rows;
        for (int64_t i = 0; i < t.shape()[0]; ++i) rows.append(t.select(0, i));
        return nb::iter(rows);
      })
      .def("__getitem__", &get_item, nb::arg("key").none())
      .def("__setitem__", &assign, nb::arg("key").none(), nb::arg("value"))
      .def("__bool__", [](const Tensor& t) {
        if (t.numel() != 1)
          throw pyflame::ValueError("the truth value of a tensor with " + std::to_string(t.numel()) +
                                    " elements is ambiguous; use pf.max/pf.min or compare elementwise");
        return t.item().f != 0;
      })
      .def("__float__", [](const Tensor& t) { return t.item().f; })
      .def("__int__", [](const Tensor& t) { return t.item().i; })
      .def("__index__", [](const Tensor& t) {
        if (!pyflame::is_integral(t.dtype()) || t.numel() != 1)
          throw pyflame::TypeError("only integer tensors of a single element can be converted to an index");
        return t.item().i;
      })
      .def("__hash__", [](nb::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); });
  tensor.attr("__array_priority__") = 1000;  // NumPy defers `ndarray + tensor` to us

  // Python operators -> op table entries.
  const std::pair<const char*, OpType> binary_dunders[] = {
      {"add", OpType::add}, {"sub", OpType::sub}, {"mul", OpType::mul}, {"truediv", OpType::div},
      {"pow", OpType::pow},
  };
  for (auto [dunder, op] : binary_dunders) {
    std::string name(dunder);
    tensor.def(("__" + name + "__").c_str(), [op](const Tensor& a, nb::handle b) {
      return pyflame::binary_op(op, a, as_operand(b));
    });
    tensor.def(("__r" + name + "__").c_str(), [op](const Tensor& a, nb::handle b) {
      return pyflame::binary_op(op, as_operand(b), a);
    });
    tensor.def(("__i" + name + "__").c_str(), [op](nb::handle self, nb::handle b) {
      return in_place(self, [&](Tensor& a) { pyflame::binary_op_(op, a, as_operand(b)); });
    });
  }
  const std::pair<const char*, OpType> compare_dunders[] = {
      {"__eq__", OpType::eq}, {"__ne__", OpType::ne}, {"__lt__", OpType::lt},
      {"__le__", OpType::le}, {"__gt__", OpType::gt}, {"__ge__", OpType::ge},
  };
  for (auto [dunder, op] : compare_dunders)
    tensor.def(dunder, [op](const Tensor& a, nb::handle b) { return pyflame::binary_op(op, a, as_operand(b)); });
  tensor.def("__neg__", [](const Tensor& a) { return pyflame::unary_op(OpType::neg, a); });
  tensor.def("__abs__", [](const Tensor& a) { return pyflame::unary_op(OpType::abs, a); });
  tensor.def("__matmul__", [](const Tensor& a, const Tensor& b) { return pyflame::matmul(a, b); });
  tensor.def("__rmatmul__", [](const Tensor& a, const Tensor& b) { return pyflame::matmul(b, a); });

  // ---- ops, generated from the op table: pf.<op>(...) and Tensor.<op>(...),
  // plus in-place Tensor.<op>_ for elementwise ops that keep their input's shape.
#define PF_BIND_UNARY(name) bind_unary(m, tensor, OpType::name);
#define PF_BIND_BINARY(name)                                                                              \
  m.def(#name, [](nb::handle a, nb::handle b) { return pyflame::binary_op(OpType::name, as_operand(a), as_operand(b)); }, \
        "input"_a, "other"_a);                                                                            \
  tensor.def(#name, [](const Tensor& a, nb::handle b) { return pyflame::binary_op(OpType::name, a, as_operand(b)); }, \
             "other"_a);                                                                                  \
  tensor.def(#name "_", [](nb::handle self, nb::handle b) {                                               \
    return in_place(self, [&](Tensor& a) { pyflame::binary_op_(OpType::name, a, as_operand(b)); }); }, "other"_a);
#define PF_FAMILY_UNARY(name, functor) PF_BIND_UNARY(name)
#define PF_FAMILY_UNARY_FLOAT(name, functor) PF_BIND_UNARY(name)
#define PF_FAMILY_UNARY_BOOL(name, functor) PF_BIND_UNARY(name)
#define PF_FAMILY_BINARY(name, functor) PF_BIND_BINARY(name)
#define PF_FAMILY_BINARY_FLOAT(name, functor) PF_BIND_BINARY(name)
#define PF_FAMILY_COMPARE(name, functor) PF_BIND_BINARY(name)
#define PF_FAMILY_REDUCE(name, functor)                                                                    \
  m.def(#name, [](const Tensor& x, nb::handle dim, bool keepdim) {                                         \
    return pyflame::reduce_op(OpType::name, x, as_dims(dim), keepdim); }, "x"_a, "dim"_a = nb::none(),     \
    "keepdim"_a = false);                                                                                  \
  tensor.def(#name, [](const Tensor& x, nb::handle dim, bool keepdim) {                                    \
    return pyflame::reduce_op(OpType::name, x, as_dims(dim), keepdim); }, "dim"_a = nb::none(), "keepdim"_a = false);
#define PF_FAMILY_ARG_REDUCE(name, functor)                                                            \
  m.def(#name, [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) {                         \
    return pyflame::name(x, dim, keepdim); }, "x"_a, "dim"_a = nb::none(), "keepdim"_a = false);       \
  tensor.def(#name, [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) {                    \
    return pyflame::name(x, dim, keepdim); }, "dim"_a = nb::none(), "keepdim"_a = false);
#define PF_FAMILY_MATMUL(name, functor)                                                      \
  m.def(#name, [](const Tensor& a, const Tensor& b) { return pyflame::name(a, b); }, "input"_a, "other"_a); \
  tensor.def(#name, [](const Tensor& a, const Tensor& b) { return pyflame::name(a, b); }, "other"_a);
#define PF_FAMILY_SOFTMAX(name, functor)                                                                 \
  m.def(#name, [](const Tensor& x, int64_t dim) { return pyflame::name(x, dim); }, "x"_a, "dim"_a = -1); \
  tensor.def(#name, [](const Tensor& x, int64_t dim) { return pyflame::name(x, dim); }, "dim"_a = -1);
#include "pyflame/for_each_op.inc"
#undef PF_BIND_UNARY
#undef PF_BIND_BINARY

  // Ops whose signature is their own.
  auto gelu = [](const Tensor& x, const std::string& approximate) { return pyflame::gelu(x, approximate); };
  m.def("gelu", gelu, "input"_a, "approximate"_a = "none");
  tensor.def("gelu", gelu, "approximate"_a = "none");
  auto clamp = [](const Tensor& x, nb::handle lo, nb::handle hi) {
    std::optional<Scalar> l, h;
    if (!lo.is_none()) l = as_scalar(lo, "clamp min");
    if (!hi.is_none()) h = as_scalar(hi, "clamp max");
    return pyflame::clamp(x, l, h);
  };
  m.def("clamp", clamp, "x"_a, "min"_a = nb::none(), "max"_a = nb::none());
  tensor.def("clamp", clamp, "min"_a = nb::none(), "max"_a = nb::none());
  m.def("where", [](const Tensor& c, nb::handle a, nb::handle b) { return pyflame::where(c, as_operand(a), as_operand(b)); },
        "condition"_a, "input"_a, "other"_a);
  m.def("transpose", &pyflame::transpose, "x"_a, "dim0"_a, "dim1"_a);
  bind_shape(m, tensor);
  bind_conv(m, tensor);
  bind_nn(m, tensor);
  bind_modules(m, tensor);

  m.def("op_table", [] {
    std::vector<std::pair<std::string, std::string>> ops;
    for (int i = 0; i < pyflame::kNumOps; ++i) {
      auto op = static_cast<OpType>(i);
      if (pyflame::op_family(op) == pyflame::OpFamily::COPY) continue;
      ops.emplace_back(pyflame::op_name(op), pyflame::family_name(pyflame::op_family(op)));
    }
    return ops;
  }, "(name, family) of every op in the op table.");
  m.def("has_kernel", [](const std::string& op, const std::string& device) {
    return pyflame::find_kernel(pyflame::op_from_name(op), as_device(nb::str(device.c_str())).type) != nullptr;
  }, "op"_a, "device"_a);

  // ---- creation
  m.def("_empty", [](nb::args shape, nb::handle dtype) {
    return Tensor::empty(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32));
  }, "shape"_a, "dtype"_a = nb::none());
  m.def("_zeros", [](nb::args shape, nb::handle dtype) {
    return pyflame::zeros(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32));
  }, "shape"_a, "dtype"_a = nb::none());
  m.def("_ones", [](nb::args shape, nb::handle dtype) {
    return pyflame::ones(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32));
  }, "shape"_a, "dtype"_a = nb::none());
  m.def("_full", [](nb::handle shape, nb::handle value, nb::handle dtype) {
    return pyflame::full(as_shape(nb::make_tuple(shape)), as_scalar(value, "fill value"), as_opt_dtype(dtype));
  }, "shape"_a, "fill_value"_a, "dtype"_a = nb::none());
  m.def("_full_like", [](const Tensor& x, nb::handle value, nb::handle dtype) {
    return pyflame::full_like(x, as_scalar(value, "fill value"), as_opt_dtype(dtype));
  }, "x"_a, "fill_value"_a, "dtype"_a = nb::none());
  m.def("_arange", [](nb::handle start, nb::handle end, nb::handle step, nb::handle dtype) {
    return pyflame::arange(as_scalar(start, "start"), as_scalar(end, "end"), as_scalar(step, "step"), as_opt_dtype(dtype));
  }, "start"_a, "end"_a, "step"_a, "dtype"_a = nb::none());
  m.def("_linspace", [](double start, double end, int64_t steps, nb::handle dtype) {
    return pyflame::linspace(start, end, steps, as_opt_dtype(dtype).value_or(DType::Float32));
  }, "start"_a, "end"_a, "steps"_a, "dtype"_a = nb::none());
  m.def("_eye", [](int64_t n, std::optional<int64_t> mm, nb::handle dtype) {
    return pyflame::eye(n, mm, as_opt_dtype(dtype).value_or(DType::Float32));
  }, "n"_a, "m"_a = nb::none(), "dtype"_a = nb::none());
  m.def("_rand", [](nb::args shape, nb::handle dtype) {
    return pyflame::rand(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32));
  }, "shape"_a, "dtype"_a = nb::none());
  m.def("_randn", [](nb::args shape, nb::handle dtype) {
    return pyflame::randn(as_shape(shape), as_opt_dtype(dtype).value_or(DType::Float32));
  }, "shape"_a, "dtype"_a = nb::none());
  m.def("_randint", [](int64_t low, int64_t high, nb::handle shape, nb::handle dtype) {
    return pyflame::randint(low, high, as_shape(nb::make_tuple(shape)), as_opt_dtype(dtype).value_or(DType::Int64));
  }, "low"_a, "high"_a, "size"_a, "dtype"_a = nb::none());
  m.def("manual_seed", [](int64_t seed) { pyflame::manual_seed(static_cast<uint64_t>(seed)); }, "seed"_a);
  m.def("from_numpy", [](nb::handle arr) {
    return from_numpy(nb::cast<nb::ndarray<nb::numpy, nb::device::cpu>>(arr), arr);
  }, "array"_a, "A CPU tensor sharing memory with a NumPy array.");

  // ---- devices
  m.def("set_device", [](const std::string& d) { pyflame::set_current_device(pyflame::Device::parse(d)); }, "device"_a);
  m.def("get_device", [] { return pyflame::to_string(pyflame::current_device()); });
  m.def("synchronize", &pyflame::synchronize);
  m.def("_parse_device", [](const std::string& d) { return pyflame::to_string(pyflame::Device::parse(d)); });
  m.def("implicit_copy_count", &pyflame::implicit_copy_count,
        "How many inputs ops have copied to the device they run on.");
  m.def("reset_implicit_copy_count", &pyflame::reset_implicit_copy_count);
  m.def("set_strict_device_placement", &pyflame::set_strict_device_placement, "strict"_a,
        "When True, an op whose input lives on another device raises DeviceError instead of copying it.");
  m.def("strict_device_placement", &pyflame::strict_device_placement);
  m.def("cpu_threads", &pyflame::cpu_threads);
  m.def("set_cpu_threads", &pyflame::set_cpu_threads, "n"_a);

  namespace rocm = pyflame::backend::rocm;
  m.def("rocm_is_available", &rocm::is_available);
  m.def("rocm_device_count", &rocm::get_device_count);
  m.def("rocm_get_device", &rocm::get_current_device);
  m.def("rocm_set_device", &rocm::set_device, "device_id"_a);
  m.def("rocm_synchronize", &rocm::synchronize);
  m.def("rocm_get_device_info", [](int id) { return device_info_dict(rocm::get_device_info(id)); }, "device_id"_a = 0);
  m.def("rocm_unavailable_reason", [] {
    std::string r = rocm::unavailable_reason();
    return r.empty() ? nb::none() : nb::object(nb::str(r.c_str()));
  }, "None when ROCm is usable, else why not and what to do.");
}
