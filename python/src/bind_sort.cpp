// Python bindings of include/pyflame/sort_ops.h. The PyTorch forms (named
// tuples, Tensor methods, topk, median, unique, ...) are in
// python/pyflame/_sorting.py, over these.

#include <nanobind/stl/pair.h>

#include "bindings.h"
#include "pyflame/sort_ops.h"

namespace pyflame::python {

void bind_sort(nb::module_& m) {
  m.def("sort", &pyflame::sort, "input"_a, "dim"_a = -1, "descending"_a = false, "stable"_a = false);
  m.def("nonzero", &pyflame::nonzero, "input"_a);
}

}  // namespace pyflame::python
