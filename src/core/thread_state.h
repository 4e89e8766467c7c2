#pragma once
// The per-thread modes every op reads (grad mode, autocast), in one
// thread-local object: apply() looks it up once per op (a thread-local
// lookup in a shared library is a function call).

#include <optional>

#include "pyflame/device.h"
#include "pyflame/dtype.h"

namespace pyflame {

struct ThreadState {
  bool grad_enabled = true;
  bool autocast_active = false;                    // any entry of autocast set
  std::optional<DType> autocast[kNumDeviceTypes];  // per device type: the low-precision dtype
};

ThreadState& thread_state();

}  // namespace pyflame
