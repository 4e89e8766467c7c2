// The Tensor class: properties, copies and conversions, NumPy interop,
// indexing (x[key], x[key] = value) and the Python operators; also the dtype
// enum. Methods that copy or convert (to, clone, copy_, fill_, ...) are the
// public ops of pyflame/ops.h, so they go through the op layer.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/autograd.h"
#include "pyflame/error.h"
#include "pyflame/ir/graph.h"
#include "pyflame/ops.h"

using namespace pyflame::python;

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
  pyflame::ir::trace_break("a read of a tensor's values on the host (numpy, tolist, printing)");
  Tensor h = t.device().is_cpu() ? t : t.to(pyflame::Device::cpu());
  auto dt = dlpack_dtype(h.dtype());
  auto* owner_tensor = new Tensor(h);
  nb::capsule owner(owner_tensor, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(h.shape().begin(), h.shape().end());
  std::vector<int64_t> strides(h.strides().begin(), h.strides().end());
  return NumpyArray(h.data_ptr(), shape.size(), shape.data(), owner, strides.data(), dt);
}

// A tensor's one value on the host (item, bool, float, int, index): Python then
// decides with it, which a graph trace cannot replay.
Scalar host_item(const Tensor& t, const char* what) {
  pyflame::ir::trace_break(std::string("Tensor.") + what + " (a read of a value on the host)");
  return t.item();
}

// to_numpy as a Python object. nanobind describes 64-bit integers as C's long long,
// which NumPy types as longlong, not its int64 (`arr.dtype.type is np.int64` failed):
// such arrays are viewed as int64, the same memory.
nb::object numpy_array(const Tensor& t) {
  // As PyTorch: NumPy would keep the values without the graph, so a tensor in one must be detached first.
  if (t.requires_grad())
    throw std::runtime_error("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.");
  nb::object arr = nb::cast(to_numpy(t));
  if (t.dtype() != DType::Int64) return arr;
  static nb::handle int64 = nb::object(nb::module_::import_("numpy").attr("int64")).release();
  return arr.attr("view")(int64);
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
}// ------------------------------------------------------------ indexing

// Whether an index item is an advanced key: a list or range, a bool (a 0-d mask), a NumPy array (not
// 0-d) or any tensor but a 0-d integer one, which PyTorch treats as an int.
bool is_tensor_key(nb::handle it) {
  if (PyList_Check(it.ptr()) || PyRange_Check(it.ptr()) || PyBool_Check(it.ptr())) return true;
  if (!nb::isinstance<Tensor>(it)) return nb::hasattr(it, "__array_interface__") && nb::cast<int>(it.attr("ndim")) > 0;
  const Tensor& t = nb::cast<const Tensor&>(it);
  return !(t.dim() == 0 && pyflame::is_integral(t.dtype()));
}

// A list, range or NumPy array key as a tensor on `device` (an empty list indexes nothing: int64).
Tensor as_key(nb::handle it, pyflame::Device device) {
  if (nb::isinstance<Tensor>(it)) return nb::cast<Tensor>(it);
  Tensor t = nb::cast<Tensor>(nb::module_::import_("pyflame").attr("tensor")(it, nb::none(), nb::str(
      pyflame::to_string(device).c_str())));
  return t.numel() == 0 && pyflame::is_floating(t.dtype()) ? pyflame::to(t, DType::Int64) : t;
}

// x[key] as PyTorch: ints, slices, None and '...' make a view; the advanced
// keys (tensors, lists, arrays) are applied to that view at the dims where they stood.
struct ParsedKey {
  Tensor view;
  std::vector<Tensor> keys;
  std::vector<int64_t> dims;
};

ParsedKey parse_key(const Tensor& self, nb::handle key) {
  nb::tuple items = nb::isinstance<nb::tuple>(key) ? nb::borrow<nb::tuple>(key) : nb::make_tuple(key);
  int64_t consumed = 0;
  bool ellipsis = false;
  std::vector<Tensor> keys;  // the advanced keys as tensors, in order
  for (nb::handle it : items) {
    if (it.is(Py_Ellipsis)) {
      if (ellipsis) throw pyflame::IndexError("an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (is_tensor_key(it)) {
      keys.push_back(as_key(it, self.device()));
      consumed += keys.back().dtype() == DType::Bool ? keys.back().dim() : 1;  // a mask covers as many dims as it has
    } else if (!it.is_none()) {
      ++consumed;
    }
  }
  if (consumed > self.dim())
    throw pyflame::IndexError("too many indices for a tensor of dimension " + std::to_string(self.dim()));
  ParsedKey k{self, {}, {}};
  Tensor& r = k.view;
  int64_t d = 0;
  for (nb::handle it : items) {
    if (it.is(Py_Ellipsis)) {
      d += self.dim() - consumed;
    } else if (it.is_none()) {
      r = pyflame::unsqueeze(r, d++);
    } else if (PySlice_Check(it.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(it.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      if (step < 0) throw pyflame::ValueError("negative slice steps are not supported (as in PyTorch); use flip");
      r = pyflame::slice(r, d++, start, stop, step);
    } else if (is_tensor_key(it)) {
      k.keys.push_back(keys[k.keys.size()]);
      k.dims.push_back(d);
      d += k.keys.back().dtype() == DType::Bool ? k.keys.back().dim() : 1;
    } else if (PyIndex_Check(it.ptr()) && !PyBool_Check(it.ptr())) {
      r = pyflame::select(r, d, nb::cast<int64_t>(nb::int_(it)));
    } else {
      throw pyflame::IndexError("indexing with " + py_type_name(it) +
                                " is not supported: use integers, slices, None, '...', tensors, lists or "
                                "NumPy arrays of integers or bools");
    }
  }
  return k;
}

Tensor get_item(const Tensor& self, nb::handle key) {
  ParsedKey k = parse_key(self, key);
  if (k.keys.empty()) return k.view;
  if (k.keys.size() == 1) return pyflame::advanced_index(k.view, k.dims[0], k.keys[0]);
  return pyflame::advanced_index(k.view, k.dims, k.keys);
}

void assign(Tensor& self, nb::handle key, nb::handle value) {
  // Autograd state first, so that the view below links to it and writing a
  // gradient-carrying value gives `self` a history.
  if (pyflame::autograd::is_grad_enabled()) self.ensure_autograd_meta();
  ParsedKey k = parse_key(self, key);
  if (k.keys.size() > 1) {
    Tensor v = nb::isinstance<Tensor>(value)
                   ? nb::cast<Tensor>(value)
                   : pyflame::to(pyflame::full({}, as_scalar(value, "the assigned value"), self.dtype()), self.device());
    pyflame::advanced_index_put_(k.view, k.dims, k.keys, v);
  } else if (k.keys.size() == 1) {
    if (nb::isinstance<Tensor>(value))
      pyflame::advanced_index_put_(k.view, k.dims[0], k.keys[0], nb::cast<Tensor>(value));
    else
      pyflame::advanced_index_put_(k.view, k.dims[0], k.keys[0], as_scalar(value, "the assigned value"));
  } else if (nb::isinstance<Tensor>(value)) {
    pyflame::copy_(k.view, nb::cast<Tensor>(value));
  } else {
    pyflame::fill_(k.view, as_scalar(value, "the assigned value"));
  }
}

bool is_ndarray(nb::handle h) {
  static nb::handle ndarray = nb::object(nb::module_::import_("numpy").attr("ndarray")).release();
  return PyObject_IsInstance(h.ptr(), ndarray.ptr()) == 1;
}

}  // namespace

namespace pyflame::python {

Tensor tensor_from_numpy(nb::handle array) {
  return from_numpy(nb::cast<nb::ndarray<nb::numpy, nb::device::cpu>>(array), array);
}

void bind_dtypes(nb::module_& m) {
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

}

void bind_tensor(nb::module_& m, nb::class_<Tensor>& tensor) {
  tensor
      .def(nb::init<const Tensor&>(), "data"_a,
           "Tensor(data): a second tensor object for data's elements (same storage and view, no copy); "
           "nn.Parameter wraps tensors this way.")
      .def_prop_ro("shape", [](const Tensor& t) { return nb::tuple(nb::cast(t.shape())); })
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("device", [](const Tensor& t) { return pyflame::to_string(t.device()); })
      .def_prop_ro("is_placed", &Tensor::is_placed,
                   "True when the tensor was put on its device (device=, .to(device), Module.to) or is the result "
                   "of an op with such an input: ops on it run on its device, as in PyTorch. False for tensors "
                   "that factories made on the current device without device=: ops on those alone run on the "
                   "current device (pf.set_device), as the seeds' examples assume.")
      .def_prop_ro("ndim", &Tensor::dim)
      .def_prop_ro("T", [](const Tensor& t) {
        std::vector<int64_t> dims;
        for (int64_t d = t.dim() - 1; d >= 0; --d) dims.push_back(d);
        return pyflame::permute(t, dims);
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
      .def("contiguous", [](const Tensor& t) { return pyflame::contiguous(t); })
      .def("clone", [](const Tensor& t) { return pyflame::clone(t); })
      .def("reshape", [](const Tensor& t, nb::args shape) { return pyflame::reshape(t, as_shape(shape)); })
      .def("view",
           [](const Tensor& t, nb::args shape) {
             if (shape.size() == 1 && nb::isinstance<DType>(shape[0])) return t.view_dtype(nb::cast<DType>(shape[0]));
             return pyflame::view(t, as_shape(shape));
           })
      .def("flatten", &pyflame::flatten, "start_dim"_a = 0, "end_dim"_a = -1)
      .def("permute", [](const Tensor& t, nb::args dims) { return pyflame::permute(t, as_shape(dims)); })
      .def("transpose", [](const Tensor& t, int64_t dim0, int64_t dim1) { return pyflame::transpose(t, dim0, dim1); },
           "dim0"_a, "dim1"_a)
      .def("squeeze", [](const Tensor& t, nb::handle dim) { return pyflame::squeeze(t, as_dims(dim)); },
           "dim"_a = nb::none())
      .def("unsqueeze", &pyflame::unsqueeze, "dim"_a)
      .def("expand", [](const Tensor& t, nb::args shape) { return pyflame::expand(t, as_shape(shape)); })
      // non_blocking, as in PyTorch: a copy from pinned host memory to a GPU returns before it
      // has run; other copies behave as without it.
      .def("to", [](const Tensor& t, nb::handle target, nb::handle dtype, bool non_blocking, bool copy,
                    nb::handle device) {
        Tensor r = t;
        bool placing = !device.is_none();  // a device named: the result is placed there (pf.Tensor.is_placed)
        if (!dtype.is_none()) r = pyflame::to(r, as_dtype(dtype));
        if (!device.is_none()) r = pyflame::to(r, as_device(device), non_blocking);
        if (nb::isinstance<Tensor>(target)) {  // to(other): other's dtype and device
          const Tensor& other = nb::cast<const Tensor&>(target);
          r = pyflame::to(pyflame::to(r, other.dtype()), other.device(), non_blocking);
          placing = true;
        } else if (!target.is_none()) {
          if (nb::isinstance<nb::str>(target) && !is_dtype_name(nb::cast<std::string>(target))) {
            r = pyflame::to(r, as_device(target), non_blocking);
            placing = true;
          } else {
            r = pyflame::to(r, as_dtype(target));
          }
        }
        if (placing) r.set_placed(true);
        return copy && r.same_storage(t) ? pyflame::clone(r) : r;
      }, "target"_a = nb::none(), "dtype"_a = nb::none(), "non_blocking"_a = false, "copy"_a = false,
         "device"_a = nb::none(),
         "to(device) moves the tensor ('cpu', 'rocm', 'rocm:N'); to(dtype) converts it; to(other) takes other's "
         "dtype and device; all return self when nothing changes (a new tensor with copy=True).")
      .def("cpu", [](const Tensor& t) { return pyflame::to(t, pyflame::Device::cpu()).set_placed(true); })
      .def("float", [](const Tensor& t) { return pyflame::to(t, DType::Float32); })
      .def("double", [](const Tensor& t) { return pyflame::to(t, DType::Float64); })
      .def("half", [](const Tensor& t) { return pyflame::to(t, DType::Float16); })
      .def("bfloat16", [](const Tensor& t) { return pyflame::to(t, DType::BFloat16); })
      .def("int", [](const Tensor& t) { return pyflame::to(t, DType::Int32); })
      .def("long", [](const Tensor& t) { return pyflame::to(t, DType::Int64); })
      .def("bool", [](const Tensor& t) { return pyflame::to(t, DType::Bool); })
      .def("copy_", [](nb::handle self, const Tensor& src, bool non_blocking) {
        return in_place(self, [&](Tensor& t) { pyflame::copy_(t, src, non_blocking); }); }, "src"_a, "non_blocking"_a = false)
      .def("pin_memory", [](const Tensor& t) { return t.pin_memory(); },
           "A copy in page-locked host memory (self when pinned already): to(device, non_blocking=True) from it "
           "returns without waiting. Needs a usable GPU (pf.NotSupportedError otherwise).")
      .def("is_pinned", &Tensor::is_pinned)
      .def("fill_", [](nb::handle self, nb::handle v) {
        return in_place(self, [&](Tensor& t) { pyflame::fill_(t, as_scalar(v, "fill_ value")); }); }, "value"_a)
      .def("zero_", [](nb::handle self) { return in_place(self, [](Tensor& t) { pyflame::fill_(t, Scalar(int64_t{0})); }); })
      .def("numpy", [](const Tensor& t, bool force) { return numpy_array(force ? t.detach().clone() : t); },
           nb::kw_only(), "force"_a = false,
           "A NumPy array sharing memory with a CPU tensor (a copy for device tensors). A tensor that requires "
           "grad raises (detach() it first), unless force=True, which detaches and copies, as torch's.")
      // NumPy 2's protocol: copy=True always copies, copy=False raises where a copy is needed
      // (a GPU tensor, another dtype), None copies only then.
      .def("__array__", [](const Tensor& t, nb::handle dtype, nb::handle copy) {
        bool never = !copy.is_none() && !nb::cast<bool>(copy);
        if (never && !t.device().is_cpu())
          throw nb::value_error("__array__(copy=False): the tensor lives on the GPU; NumPy needs a copy");
        nb::object arr = numpy_array(t);
        if (!dtype.is_none()) {
          nb::object converted = arr.attr("astype")(dtype, "copy"_a = false);
          if (never && !converted.is(arr))
            throw nb::value_error("__array__(copy=False): converting to another dtype needs a copy");
          arr = converted;
        }
        return !copy.is_none() && nb::cast<bool>(copy) ? arr.attr("copy")() : arr;
      }, "dtype"_a = nb::none(), "copy"_a = nb::none())
      .def("item", [](const Tensor& t) { return scalar_to_python(host_item(t, "item()")); })
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
        for (int64_t i = 0; i < t.shape()[0]; ++i) rows.append(pyflame::select(t, 0, i));
        return nb::iter(rows);
      })
      .def("__getitem__", &get_item, nb::arg("key").none())
      .def("__setitem__", &assign, nb::arg("key").none(), nb::arg("value"))
      .def("__bool__", [](const Tensor& t) {
        if (t.numel() != 1)
          throw pyflame::ValueError("the truth value of a tensor with " + std::to_string(t.numel()) +
                                    " elements is ambiguous; use pf.max/pf.min or compare elementwise");
        return host_item(t, "__bool__").f != 0;
      })
      .def("__float__", [](const Tensor& t) { return host_item(t, "__float__").f; })
      .def("__int__", [](const Tensor& t) { return host_item(t, "__int__").i; })
      .def("__index__", [](const Tensor& t) {
        if (!pyflame::is_integral(t.dtype()) || t.numel() != 1)
          throw pyflame::TypeError("only integer tensors of a single element can be converted to an index");
        return host_item(t, "__index__").i;
      })
      .def("__hash__", [](nb::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); });
  // As torch.Tensor: NumPy's `ndarray + tensor` defers to us (and fails, as in PyTorch), while
  // `tensor + ndarray` is given to NumPy, which computes through __array__ and hands the
  // result to __array_wrap__ (python/pyflame/_interop.py): a tensor with NumPy's dtype.
  tensor.attr("__array_priority__") = 1000;

  // Python operators -> op table entries.
  const std::pair<const char*, OpType> binary_dunders[] = {
      {"add", OpType::add}, {"sub", OpType::sub}, {"mul", OpType::mul}, {"truediv", OpType::div},
      {"pow", OpType::pow}, {"floordiv", OpType::floor_divide}, {"mod", OpType::remainder},
      {"and", OpType::bitwise_and}, {"or", OpType::bitwise_or}, {"xor", OpType::bitwise_xor},
      {"lshift", OpType::bitwise_left_shift}, {"rshift", OpType::bitwise_right_shift},
  };
  for (auto [dunder, op] : binary_dunders) {
    std::string name(dunder);
    tensor.def(("__" + name + "__").c_str(), [op](const Tensor& a, nb::handle b) -> nb::object {
      if (is_ndarray(b)) return nb::borrow(Py_NotImplemented);
      return nb::cast(pyflame::binary_op(op, a, as_operand(b)));
    });
    tensor.def(("__r" + name + "__").c_str(), [op](const Tensor& a, nb::handle b) -> nb::object {
      if (is_ndarray(b)) return nb::borrow(Py_NotImplemented);
      return nb::cast(pyflame::binary_op(op, as_operand(b), a));
    });
    tensor.def(("__i" + name + "__").c_str(), [op](nb::handle self, nb::handle b) {
      if (is_ndarray(b)) return nb::borrow(Py_NotImplemented);  // Python then computes self op b
      return in_place(self, [&](Tensor& a) { pyflame::binary_op_(op, a, as_operand(b)); });
    });
  }
  const std::pair<const char*, OpType> compare_dunders[] = {
      {"__eq__", OpType::eq}, {"__ne__", OpType::ne}, {"__lt__", OpType::lt},
      {"__le__", OpType::le}, {"__gt__", OpType::gt}, {"__ge__", OpType::ge},
  };
  for (auto [dunder, op] : compare_dunders)
    tensor.def(dunder, [op](const Tensor& a, nb::handle b) {
      // == and != take arrays elementwise, as torch.Tensor does (< and the others do not there).
      if ((op == OpType::eq || op == OpType::ne) && is_ndarray(b))
        return pyflame::binary_op(op, a, pyflame::to(tensor_from_numpy(b), a.device()));
      return pyflame::binary_op(op, a, as_operand(b));
    });
  tensor.def("__neg__", [](const Tensor& a) { return pyflame::unary_op(OpType::neg, a); });
  tensor.def("__abs__", [](const Tensor& a) { return pyflame::unary_op(OpType::abs, a); });
  tensor.def("__invert__", [](const Tensor& a) { return pyflame::unary_op(OpType::bitwise_not, a); });
  // Not a tensor (an ndarray: NumPy computes it, as for torch.Tensor): Python's TypeError.
  tensor.def("__matmul__", [](const Tensor& a, nb::handle b) -> nb::object {
    if (!nb::isinstance<Tensor>(b)) return nb::borrow(Py_NotImplemented);
    return nb::cast(pyflame::matmul(a, nb::cast<const Tensor&>(b)));
  });
  tensor.def("__rmatmul__", [](const Tensor& a, nb::handle b) -> nb::object {
    if (!nb::isinstance<Tensor>(b)) return nb::borrow(Py_NotImplemented);
    return nb::cast(pyflame::matmul(nb::cast<const Tensor&>(b), a));
  });

}

}  // namespace pyflame::python
