#pragma once
// Automatic mixed precision (PyTorch's autocast), applied at apply(): inside
// an autocast region for the current device's type, ops that gain from low
// precision (matmul, linear, convolutions) get their floating inputs cast to
// the region's dtype, and ops that need the range or precision (softmax, norms,
// losses, sums, exp/log) get float16/bfloat16 inputs cast to float32. The casts
// are ordinary ops, so autograd carries gradients back through them in each
// tensor's own dtype. Other ops run in their inputs' (promoted) dtype.

#include <optional>

#include "pyflame/device.h"
#include "pyflame/dtype.h"
#include "pyflame/macros.h"

namespace pyflame {
struct OpCall;
namespace amp {

// The autocast dtype for a device type in this thread, or none when autocast is off there.
PF_API std::optional<DType> autocast_dtype(DeviceType device);
PF_API void set_autocast(DeviceType device, std::optional<DType> dtype);

}  // namespace amp
}  // namespace pyflame
