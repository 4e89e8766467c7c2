// The op profiler (include/pyflame/profiler.h): apply()'s profile hook times each
// call while a session runs. Calls are kept with their GPU timing events and
// resolved when the session stops: the device time of a call is the time between
// its two events, placed on the host's timeline by the first event the session
// recorded on that device (taken when the host recorded it).

#include "pyflame/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include "core/backend.h"
#include "core/dispatch.h"
#include "pyflame/error.h"

namespace pyflame::profiler {
namespace {

using Clock = std::chrono::steady_clock;

struct Pending {
  OpEvent event;
  DeviceBackend* backend = nullptr;  // the device's, where it has timing events
  void* start = nullptr;
  void* end = nullptr;
};

// A device's reference event: recorded at host time `host_us`.
struct Reference {
  void* event = nullptr;
  double host_us = 0;
};

struct Session {
  std::mutex mutex;
  std::atomic<bool> record_shapes{false};  // read by calls on any thread
  std::atomic<bool> device_time{false};
  Clock::time_point origin;
  std::vector<Pending> calls;
  std::map<std::pair<int, int>, Reference> references;  // (device type, index)
  std::atomic<int> threads{0};
};

Session& session() {
  static Session s;
  return s;
}

double since_origin_us(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t - session().origin).count();
}

// Where the call runs: its first input on a device, else the current device.
Device device_of(const OpCall& call) {
  for (const Tensor& t : call.inputs)
    if (t.defined() && !t.device().is_cpu()) return t.device();
  return current_device();
}

// Gives back a kept call's events (a session's end, or calls that ended after it).
void release(Pending& p) {
  if (p.start) p.backend->destroy_timing_event(p.start);
  if (p.end) p.backend->destroy_timing_event(p.end);
  p.start = p.end = nullptr;
}

thread_local int t_depth = 0;
thread_local int t_thread = -1;

std::vector<Tensor> profile_call(const OpCall& call, ApplyHooks::RunFn run, void* ctx) {
  Session& s = session();
  Pending p;
  p.event.name = op_name(call.op);
  if (s.record_shapes)
    for (const Tensor& t : call.inputs) p.event.input_shapes.push_back(t.defined() ? t.shape() : Shape{});
  if (t_thread < 0) t_thread = s.threads++;
  p.event.thread = t_thread;
  p.event.depth = t_depth;
  p.event.device = device_of(call);
  if (s.device_time && !p.event.device.is_cpu()) {
    DeviceBackend* backend = backend_for(p.event.device.type);
    const std::pair<int, int> key{static_cast<int>(p.event.device.type), p.event.device.index};
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      if (backend && !s.references.count(key)) {
        void* reference = backend->record_timing_event(p.event.device.index);
        if (reference) s.references[key] = {reference, since_origin_us(Clock::now())};
      }
    }
    p.start = backend ? backend->record_timing_event(p.event.device.index) : nullptr;
    if (p.start) p.backend = backend;
  }
  const Clock::time_point begin = Clock::now();
  ++t_depth;
  struct DepthGuard {
    ~DepthGuard() { --t_depth; }
  } guard;
  std::vector<Tensor> outputs;
  try {
    outputs = run(ctx);
  } catch (...) {
    if (p.start) p.backend->destroy_timing_event(p.start);
    throw;
  }
  const Clock::time_point finish = Clock::now();
  if (p.backend) p.end = p.backend->record_timing_event(p.event.device.index);
  p.event.start_us = since_origin_us(begin);
  p.event.duration_us = std::chrono::duration<double, std::micro>(finish - begin).count();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.calls.push_back(std::move(p));
  return outputs;
}

}  // namespace

void start(bool record_shapes, bool device_time) {
  Session& s = session();
  std::lock_guard<std::mutex> lock(s.mutex);
  PF_CHECK(!profiler_active.load(), ValueError,
           "profiler: a session is already running (one at a time; leave it before starting another)");
  apply_hooks().profile = &profile_call;
  s.record_shapes = record_shapes;
  s.device_time = device_time;
  for (Pending& p : s.calls) release(p);  // calls that ended after the last session stopped
  s.calls.clear();
  s.references.clear();
  s.origin = Clock::now();
  profiler_active.store(true);
}

std::vector<OpEvent> stop() {
  Session& s = session();
  PF_CHECK(profiler_active.load(), ValueError, "profiler: no session is running");
  profiler_active.store(false);
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<OpEvent> events;
  events.reserve(s.calls.size());
  for (Pending& p : s.calls) {
    if (p.start && p.end) {
      const Device d = p.event.device;
      const Reference& r = s.references.at({static_cast<int>(d.type), d.index});
      p.event.device_start_us = r.host_us + 1e3 * p.backend->elapsed_ms(r.event, p.start);
      p.event.device_duration_us = 1e3 * p.backend->elapsed_ms(p.start, p.end);
    }
    release(p);
    events.push_back(std::move(p.event));
  }
  for (auto& [key, r] : s.references)
    backend_for(static_cast<DeviceType>(key.first))->destroy_timing_event(r.event);
  s.calls.clear();
  s.references.clear();
  std::stable_sort(events.begin(), events.end(),
                   [](const OpEvent& a, const OpEvent& b) { return a.start_us < b.start_us; });
  return events;
}

bool is_active() { return profiler_active.load(); }

}  // namespace pyflame::profiler
