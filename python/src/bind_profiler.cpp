// The op profiler's sessions (include/pyflame/profiler.h) for pf.profiler.profile
// (python/pyflame/profiler.py), which aggregates and exports what a session timed.

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/profiler.h"

namespace pyflame::python {

void bind_profiler(nb::module_& m) {
  m.def("_profiler_start", &profiler::start, "record_shapes"_a, "device_time"_a,
        "Starts timing every op call (one session at a time).");
  m.def("_profiler_stop", [] {
    nb::list calls;
    for (const profiler::OpEvent& e : profiler::stop()) {
      nb::list shapes;
      for (const Shape& s : e.input_shapes) shapes.append(nb::cast(s));
      calls.append(nb::make_tuple(e.name, shapes, e.thread, e.depth, e.start_us, e.duration_us,
                                  pyflame::to_string(e.device), e.device_start_us, e.device_duration_us));
    }
    return calls;
  }, "Ends the session: (name, input shapes, thread, depth, start us, duration us, device, device start us "
     "(-1: none), device duration us) per call, in the order the calls began.");
  m.def("_profiler_active", &profiler::is_active);
}

}  // namespace pyflame::python
