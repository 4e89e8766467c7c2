// Exceptions: the Python classes of PyFlame's errors, and the translation of
// C++ exceptions into the Python exceptions a user expects (ValueError,
// TypeError, IndexError, pf.NotSupportedError, the ROCmError family); and
// one-line messages for calls that match no signature of a bound function.

#include <array>
#include <cstring>
#include <utility>

#include <nanobind/stl/string.h>

#include "bindings.h"
#include "pyflame/error.h"

namespace {

PyObject* g_invalid_argument_error;
PyObject* g_invalid_type_error;
PyObject* g_not_supported_error;
PyObject* g_autograd_error;
PyObject* g_zero_division_error;
PyObject* g_rocm_error;
PyObject* g_rocm_not_available_error;
PyObject* g_device_error;
PyObject* g_rocm_memory_error;
PyObject* g_hip_compilation_error;
PyObject* g_dist_backend_error;

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const pyflame::TypeError& e) {
    PyErr_SetString(g_invalid_type_error, e.what());
  } catch (const pyflame::ValueError& e) {
    PyErr_SetString(g_invalid_argument_error, e.what());
  } catch (const pyflame::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const pyflame::NotSupportedError& e) {
    PyErr_SetString(g_not_supported_error, e.what());
  } catch (const pyflame::ZeroDivisionError& e) {
    PyErr_SetString(g_zero_division_error, e.what());
  } catch (const pyflame::AutogradError& e) {
    PyErr_SetString(g_autograd_error, e.what());
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
  } catch (const pyflame::DistBackendError& e) {
    PyErr_SetString(g_dist_backend_error, e.what());
  }
}

PyObject* new_exception(nb::module_& m, const char* name, PyObject* base, const char* doc) {
  std::string qual = std::string("pyflame.") + name;
  PyObject* e = PyErr_NewExceptionWithDoc(qual.c_str(), doc, base, nullptr);
  m.attr(name) = nb::handle(e);
  return e;
}

// One-line argument errors. When a call matches none of a bound function's
// signatures, nanobind raises a TypeError that lists every overload over many
// lines. Each nanobind function object calls through its vectorcall slot; the
// slot is swapped for a trampoline that calls the original and, on that error
// only, asks pyflame._arguments for one line naming the function and the bad
// argument. A trampoline per original (nanobind has a handful: by arity and
// complexity) keeps the call path free of lookups.
using Vectorcall = PyObject* (*)(PyObject*, PyObject* const*, size_t, PyObject*);
constexpr int kMaxVectorcalls = 16;
Vectorcall g_original[kMaxVectorcalls];
int g_num_originals = 0;

PyObject* explain_bad_call(PyObject* func, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  try {
    std::string msg = nb::cast<std::string>(nb::str(value));
    if (msg.find("(): incompatible function arguments") == std::string::npos) {
      PyErr_Restore(type, value, trace);
      return nullptr;
    }
    // Without the flag bits: Python's ARGUMENTS_OFFSET and, below it, nanobind's "trusted self" of constructors.
    constexpr size_t kFlags = PY_VECTORCALL_ARGUMENTS_OFFSET | (PY_VECTORCALL_ARGUMENTS_OFFSET >> 1);
    auto nargs = static_cast<Py_ssize_t>(nargsf & ~kFlags);
    nb::tuple positional = nb::steal<nb::tuple>(PyTuple_New(nargs));
    for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SET_ITEM(positional.ptr(), i, nb::borrow(args[i]).release().ptr());
    nb::dict keywords;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; ++i)
      if (PyDict_SetItem(keywords.ptr(), PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) != 0) throw nb::python_error();
    nb::object explain = nb::module_::import_("pyflame._arguments").attr("explain");
    nb::object line = explain(nb::handle(func), positional, keywords);
    PyErr_SetObject(PyExc_TypeError, line.ptr());
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
  } catch (...) {  // no explanation: nanobind's own message stands
    PyErr_Restore(type, value, trace);
  }
  return nullptr;
}

template <int I> PyObject* checked_call(PyObject* func, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyObject* r = g_original[I](func, args, nargsf, kwnames);
  if (!r && PyErr_ExceptionMatches(PyExc_TypeError)) return explain_bad_call(func, args, nargsf, kwnames);
  return r;
}

template <int... I> constexpr std::array<Vectorcall, sizeof...(I)> make_trampolines(std::integer_sequence<int, I...>) {
  return {&checked_call<I>...};
}
constexpr auto kTrampolines = make_trampolines(std::make_integer_sequence<int, kMaxVectorcalls>());

bool is_nanobind_function(nb::handle h) {
  const char* name = Py_TYPE(h.ptr())->tp_name;
  return std::strcmp(name, "nanobind.nb_func") == 0 || std::strcmp(name, "nanobind.nb_method") == 0;
}

void install_trampoline(nb::handle f) {
  Py_ssize_t offset = Py_TYPE(f.ptr())->tp_vectorcall_offset;
  if (offset <= 0) return;
  auto* slot = reinterpret_cast<Vectorcall*>(reinterpret_cast<char*>(f.ptr()) + offset);
  for (Vectorcall t : kTrampolines)
    if (*slot == t) return;
  int i = 0;
  while (i < g_num_originals && g_original[i] != *slot) ++i;
  if (i == g_num_originals) {
    if (g_num_originals == kMaxVectorcalls) return;  // keeps nanobind's message
    g_original[g_num_originals++] = *slot;
  }
  *slot = kTrampolines[i];
}

}  // namespace

namespace pyflame::python {

void install_argument_errors(nb::module_& m) {
  // Operators are unaffected: they answer NotImplemented instead of raising.
  for (auto [name, value] : nb::borrow<nb::dict>(m.attr("__dict__"))) {
    if (is_nanobind_function(value)) {
      install_trampoline(value);
    } else if (PyType_Check(value.ptr())) {  // its own dict (a type's __dict__ is a read-only proxy)
      for (auto [attr, member] : nb::borrow<nb::dict>(reinterpret_cast<PyTypeObject*>(value.ptr())->tp_dict))
        if (is_nanobind_function(member)) install_trampoline(member);
    }
  }
}

// The library's warnings (pyflame::warn) as Python's UserWarning; under `-W error`
// the warning's exception propagates out of the call that warned.
void python_warning(const std::string& message) {
  nb::gil_scoped_acquire gil;
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) throw nb::python_error();
}

void bind_errors(nb::module_& m) {
  // PyTorch raises RuntimeError where PyFlame raises ValueError (shapes,
  // arguments) or TypeError (dtypes): both bases, so that `except ValueError`
  // and a ported `except RuntimeError` both catch them.
  nb::object value_bases = nb::make_tuple(nb::handle(PyExc_ValueError), nb::handle(PyExc_RuntimeError));
  g_invalid_argument_error = new_exception(m, "InvalidArgumentError", value_bases.ptr(),
                                           "A bad argument value or shape: a ValueError and a RuntimeError.");
  nb::object type_bases = nb::make_tuple(nb::handle(PyExc_TypeError), nb::handle(PyExc_RuntimeError));
  g_invalid_type_error = new_exception(m, "InvalidTypeError", type_bases.ptr(),
                                       "A bad dtype or argument type: a TypeError and a RuntimeError.");
  g_not_supported_error = new_exception(m, "NotSupportedError", PyExc_RuntimeError,
                                        "A feature this build or device does not provide (see docs/ops.md).");
  g_autograd_error = new_exception(m, "AutogradError", PyExc_RuntimeError,
                                   "A misuse of autograd (PyTorch raises RuntimeError for these).");
  nb::object zero_bases = nb::make_tuple(nb::handle(PyExc_ZeroDivisionError), nb::handle(PyExc_RuntimeError));
  g_zero_division_error = new_exception(m, "ZeroDivisionError", zero_bases.ptr(),
                                        "Integer division by zero (PyTorch raises RuntimeError for it).");
  g_rocm_error = new_exception(m, "ROCmError", PyExc_RuntimeError, "Base class of the ROCm backend's errors.");
  g_rocm_not_available_error =
      new_exception(m, "ROCmNotAvailableError", g_rocm_error, "No usable ROCm device (see rocm_unavailable_reason()).");
  g_device_error = new_exception(m, "DeviceError", g_rocm_error, "A device that does not exist or cannot be used.");
  nb::object mem_bases = nb::make_tuple(nb::handle(g_rocm_error), nb::handle(PyExc_MemoryError));
  g_rocm_memory_error = new_exception(m, "ROCmMemoryError", mem_bases.ptr(), "GPU out of memory.");
  g_hip_compilation_error =
      new_exception(m, "HIPCompilationError", g_rocm_error, "Runtime compilation of a GPU kernel failed.");
  // torch.distributed's family (the rendezvous store's errors derive from DistError in Python).
  PyObject* dist_error = new_exception(m, "DistError", PyExc_RuntimeError, "Base class of pyflame.distributed's errors.");
  g_dist_backend_error =
      new_exception(m, "DistBackendError", dist_error, "A collective failed or timed out in its backend (NCCL, gloo).");
  nb::register_exception_translator(&translate);
  pyflame::set_warning_handler(&python_warning);
}

}  // namespace pyflame::python
