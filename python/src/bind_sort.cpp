// Python bindings of include/pyflame/sort_ops.h. The PyTorch forms (named
// tuples, Tensor methods, torch's exception classes, median of all entries,
// unique, ...) are in python/pyflame/_sorting.py, over these.

#include <nanobind/stl/pair.h>

#include "bindings.h"
#include "pyflame/sort_ops.h"

namespace pyflame::python {

void bind_sort(nb::module_& m) {
  m.def("sort", &pyflame::sort, "input"_a, "dim"_a = -1, "descending"_a = false, "stable"_a = false);
  m.def("nonzero", &pyflame::nonzero, "input"_a);
  m.def("topk", &pyflame::topk, "input"_a, "k"_a, "dim"_a = -1, "largest"_a = true);
  m.def("kthvalue", &pyflame::kthvalue, "input"_a, "k"_a, "dim"_a = -1, "keepdim"_a = false);
  m.def("median", &pyflame::median, "input"_a, "dim"_a, "keepdim"_a = false);
}

}  // namespace pyflame::python
