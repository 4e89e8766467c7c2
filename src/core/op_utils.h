#pragma once
// Helpers of the op layer shared by ops.cpp and the area files (src/core/<area>_ops.cpp).

#include "core/backend.h"
#include "pyflame/error.h"
#include "pyflame/ir/op_type.h"
#include "pyflame/tensor.h"

namespace pyflame {

// Brings an input to the device the op runs on (the current device).
inline Tensor on_device(const Tensor& t, Device dev, ir::OpType op) {
  if (t.device() == dev) return t;
  if (!t.is_wrapped_number()) {  // numbers from Python move freely, as in PyTorch
    PF_CHECK(!strict_device_placement(), DeviceError, op_name(op), ": an input is on '", to_string(t.device()),
             "' but the op runs on '", to_string(dev),
             "' and strict device placement is on; move it with .to('", to_string(dev), "')");
    count_implicit_copy();
  }
  return t.to(dev);
}

}  // namespace pyflame
