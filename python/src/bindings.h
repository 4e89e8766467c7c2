#pragma once
// Shared by the binding files of pyflame._C, one per area, each with a
// bind_<area> function that bindings.cpp's NB_MODULE calls in order:
//   errors.cpp         exception classes and the translation of C++ exceptions
//   bind_tensor.cpp    dtypes; the Tensor class, NumPy interop, indexing, operators
//   bind_ops.cpp       the op table's own families (generated) and table queries
//   bind_shape.cpp, bind_conv.cpp, bind_nn.cpp, bind_modules.cpp   the ops of one area
//   bind_creation.cpp  factories, generators, from_numpy
//   bind_device.cpp    devices, synchronisation, the rocm_* functions
//   bind_autograd.cpp  gradients: Tensor.requires_grad/grad/backward, grad_fn nodes, grad mode
//   bind_graph.cpp     graph tracing and replay (pf.compile)
//   bind_profiler.cpp  the op profiler's sessions (pf.profiler.profile)
//   bind_optim.cpp     fused optimizer updates
//   bind_sort.cpp      sort and nonzero (python/pyflame/_sorting.py builds on them)
//   bind_linalg.cpp    the norms of torch.linalg, logsumexp, nansum and nanmean (python/pyflame/_linalg.py builds on them)
//   bind_misc.cpp      addcmul, addcdiv and isclose (python/pyflame/_misc_api.py exports them)
//   bind_dlpack.cpp    Tensor.__dlpack__/__dlpack_device__ and the import of DLPack capsules
//   convert.cpp        the argument conversions declared here

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace pyflame::python {

using pyflame::DType;
using pyflame::Scalar;
using pyflame::Shape;
using pyflame::Tensor;
using pyflame::ir::OpType;

std::string py_type_name(nb::handle h);
// A Tensor, or a Python/NumPy number as a wrapped scalar tensor (TypeError otherwise).
Tensor as_operand(nb::handle h);
// A number (or a one-element tensor); `what` names it in the TypeError.
Scalar as_scalar(nb::handle h, const char* what);
DType as_dtype(nb::handle h);
std::optional<DType> as_opt_dtype(nb::handle h);  // None -> nullopt
// Shapes as `f(2, 3)`, `f((2, 3))` or `f([2, 3])`.
Shape as_shape(nb::handle args);
// None -> {} (all dims), an int, or a sequence of ints.
std::vector<int64_t> as_dims(nb::handle dim);
bool is_dtype_name(const std::string& name);
Device as_device(nb::handle h);
nb::object scalar_to_python(const Scalar& s);
// A CPU tensor sharing memory with a NumPy array (bind_tensor.cpp).
Tensor tensor_from_numpy(nb::handle array);

void bind_errors(nb::module_& m);
// Last: one-line TypeErrors for calls that match no signature of the module's functions and methods.
void install_argument_errors(nb::module_& m);
void bind_dtypes(nb::module_& m);
void bind_tensor(nb::module_& m, nb::class_<Tensor>& tensor);
void bind_ops(nb::module_& m, nb::class_<Tensor>& tensor);
void bind_creation(nb::module_& m);
void bind_device(nb::module_& m);
void bind_autograd(nb::module_& m, nb::class_<Tensor>& tensor);
void bind_graph(nb::module_& m);
void bind_profiler(nb::module_& m);
void bind_optim(nb::module_& m);
void bind_sort(nb::module_& m);
void bind_dlpack(nb::module_& m, nb::class_<Tensor>& tensor);
// The ops of each area (CUSTOM family and compositions).
void bind_conv(nb::module_& m, nb::class_<Tensor>& tensor);
void bind_modules(nb::module_& m, nb::class_<Tensor>& tensor);
void bind_nn(nb::module_& m, nb::class_<Tensor>& tensor);
void bind_shape(nb::module_& m, nb::class_<Tensor>& tensor);
void bind_linalg(nb::module_& m, nb::class_<Tensor>& tensor);
void bind_misc(nb::module_& m, nb::class_<Tensor>& tensor);

// In-place methods return the very object they were called on, as in PyTorch.
template <class F> nb::object in_place(nb::handle self, const F& f) {
  f(nb::cast<Tensor&>(self));
  return nb::borrow(self);
}


}  // namespace pyflame::python
