#pragma once
// Helpers of the op layer shared by src/core/ops.cpp and the area files
// (src/core/<area>_ops.cpp), so that every op places its inputs the same way.

#include "pyflame/device.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame {

// Brings an input to the device the op runs on (the current device): a copy
// counted by implicit_copy_count(), or DeviceError under strict placement.
Tensor on_device(const Tensor& t, Device dev, ir::OpType op);
// The same for ops outside the op table (compositions), named by `op`.
Tensor on_device(const Tensor& t, Device dev, const char* op);

}  // namespace pyflame
