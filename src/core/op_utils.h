#pragma once
// Helpers of the op layer shared by its files (ops.cpp and the <area>_ops.cpp
// files); internal to the library.

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "pyflame/error.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame {

// Brings an input to the device the op runs on (the current device), counting
// the copy, or raising DeviceError under strict placement; `op` names the op in
// the error (ops outside the table pass their own name).
inline Tensor on_device(const Tensor& t, Device dev, const char* op) {
  if (t.device() == dev) return t;
  if (!t.is_wrapped_number()) {  // numbers from Python move freely, as in PyTorch
    PF_CHECK(!strict_device_placement(), DeviceError, op, ": an input is on '", to_string(t.device()),
             "' but the op runs on '", to_string(dev),
             "' and strict device placement is on; move it with .to('", to_string(dev), "')");
    count_implicit_copy();
  }
  return t.to(dev);
}
inline Tensor on_device(const Tensor& t, Device dev, ir::OpType op) { return on_device(t, dev, op_name(op)); }

// Dims of a reduction, wrapped, checked for repeats and sorted; {} means all.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, ir::OpType op);
// `shape` with `dims` removed, or kept as size 1.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace pyflame
