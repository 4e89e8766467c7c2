// pyflame._C: the Python binding of the C++ core, one file per area (see
// bindings.h). Python numbers become wrapped scalars (PyTorch's promotion
// rules) at this boundary, and C++ exceptions map to the Python classes a
// user expects.

#include "bindings.h"

using namespace pyflame::python;

NB_MODULE(_C, m) {
  m.doc() = "PyFlame's C++ core";
  bind_errors(m);
  bind_dtypes(m);
  nb::class_<Tensor> tensor(m, "Tensor", "An n-dimensional array on a device (see pyflame.tensor).");
  bind_tensor(m, tensor);
  bind_ops(m, tensor);
  bind_shape(m, tensor);
  bind_conv(m, tensor);
  bind_nn(m, tensor);
  bind_modules(m, tensor);
  bind_creation(m);
  bind_device(m);
  bind_autograd(m, tensor);
  bind_graph(m);
  bind_profiler(m);
  bind_optim(m);
  bind_sort(m);
  bind_linalg(m, tensor);
  bind_misc(m, tensor);
  bind_dlpack(m, tensor);
  install_argument_errors(m);
}
