#pragma once
// The op profiler (pf.profiler.profile, as torch.profiler.profile): while a session
// runs, every op call through apply() is timed, including the calls an op makes
// (a composite's parts, autograd's backward ops), with its nesting depth. Host
// times come from a steady clock; on a GPU, two timing events around the call on
// the device's current stream give the device time, read when the session stops
// (so profiling adds no waits while it runs, only the events' cost).

#include <cstdint>
#include <string>
#include <vector>

#include "pyflame/device.h"
#include "pyflame/tensor.h"

namespace pyflame::profiler {

struct OpEvent {
  std::string name;                // the op's name in the op table
  std::vector<Shape> input_shapes;  // when the session records shapes; {} for an absent input
  int thread = 0;                  // a small number per thread, in order of first call
  int depth = 0;                   // 0: a call the program made; 1: a call made inside that one; ...
  double start_us = 0;             // host time from the session's start
  double duration_us = 0;
  Device device = Device::cpu();   // where its inputs (else the current device) put it
  // Device time where the device has timing events: from the session's start, as the
  // host saw the device's first event; -1 where there is none.
  double device_start_us = -1;
  double device_duration_us = 0;
};

// Starts a session (one at a time: ValueError while one runs).
PF_API void start(bool record_shapes, bool device_time);
// Ends it: every call timed, in the order the calls began.
PF_API std::vector<OpEvent> stop();
PF_API bool is_active();

}  // namespace pyflame::profiler
