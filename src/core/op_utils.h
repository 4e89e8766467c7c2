#pragma once
// Helpers of the op layer shared by its files (ops.cpp and the <area>_ops.cpp
// files); internal to the library.

#include <cstdint>
#include <vector>

#include "pyflame/device.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame {

// Brings an input to the device the op runs on (the current device), counting
// the copy, or raising DeviceError under strict placement.
Tensor on_device(const Tensor& t, Device dev, ir::OpType op);
// Dims of a reduction, wrapped, checked for repeats and sorted; {} means all.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, ir::OpType op);
// `shape` with `dims` removed, or kept as size 1.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);

}  // namespace pyflame
