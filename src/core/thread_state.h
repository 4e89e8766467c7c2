#pragma once
// The per-thread modes every op reads (grad mode, autocast), in one
// thread-local object: apply() looks it up once per op (a thread-local
// lookup in a shared library is a function call).

#include <optional>

#include "pyflame/device.h"
#include "pyflame/dtype.h"

namespace pyflame {

struct ThreadState {
  // The device that is current in this thread only: a factory's device= (DeviceScope) and,
  // while an op runs, the op's device, so its infer, kernels and a composite's inner calls
  // and factories see it. Wins over the process's current device.
  std::optional<Device> device;
  bool grad_enabled = true;
  bool tracing = false;  // a graph trace (src/ir/tracer.cpp) takes this thread's top-level calls
  // A device graph is being captured (ir::DeviceGraph): every result must be computed by the
  // work queued now, none taken from a cache (the graph would keep this call's tensors).
  bool capturing = false;
  int apply_depth = 0;   // apply() calls under way in this thread beneath a traced one
  // A backward pass with create_graph runs in this thread: derivatives record their ops, and an
  // op without a derivative of its own may not take a gradient-carrying input (apply.cpp).
  bool create_graph = false;
  bool autocast_active = false;                    // any entry of autocast set
  std::optional<DType> autocast[kNumDeviceTypes];  // per device type: the low-precision dtype
};

ThreadState& thread_state();

}  // namespace pyflame
