// Exceptions: the Python classes of PyFlame's errors, and the translation of
// C++ exceptions into the Python exceptions a user expects (ValueError,
// TypeError, IndexError, pf.NotSupportedError, the ROCmError family).

#include "bindings.h"
#include "pyflame/error.h"

namespace {

PyObject* g_not_supported_error;
PyObject* g_autograd_error;
PyObject* g_zero_division_error;
PyObject* g_rocm_error;
PyObject* g_rocm_not_available_error;
PyObject* g_device_error;
PyObject* g_rocm_memory_error;
PyObject* g_hip_compilation_error;

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
  }
}

PyObject* new_exception(nb::module_& m, const char* name, PyObject* base, const char* doc) {
  std::string qual = std::string("pyflame.") + name;
  PyObject* e = PyErr_NewExceptionWithDoc(qual.c_str(), doc, base, nullptr);
  m.attr(name) = nb::handle(e);
  return e;
}

}  // namespace

namespace pyflame::python {

void bind_errors(nb::module_& m) {
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
  nb::register_exception_translator(&translate);

}

}  // namespace pyflame::python
