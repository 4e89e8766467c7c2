// Streams and events. The current stream is per thread and per device, as in
// PyTorch, so a Stream context in one thread does not redirect another's work.

#include "pyflame/backend/rocm/stream.h"

#include <algorithm>
#include <unordered_map>

#include "pyflame/backend/rocm/hip_check.h"

namespace pyflame::backend::rocm {

namespace {
thread_local std::unordered_map<int, hipStream_t> t_current;

int current_hip_device() {
  int d = 0;
  HIP_CHECK(hipGetDevice(&d));
  return d;
}
}  // namespace

hipStream_t current_stream(int device) {
  auto it = t_current.find(device);
  return it == t_current.end() ? nullptr : it->second;
}

void set_current_stream(int device, hipStream_t stream) { t_current[device] = stream; }

Stream::Stream(int device, int priority) : device_(device < 0 ? current_hip_device() : device) {
  int previous = current_hip_device();
  HIP_CHECK(hipSetDevice(device_));
  int least = 0, greatest = 0;  // "greatest" priority is the numerically lowest
  HIP_CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
  priority_ = std::clamp(priority, greatest, least);
  HIP_CHECK(hipStreamCreateWithPriority(&stream_, hipStreamNonBlocking, priority_));
  HIP_CHECK(hipSetDevice(previous));
}

Stream::~Stream() {
  if (stream_) (void)hipStreamDestroy(stream_);  // no throw from a destructor; a failure here leaks nothing we own
}

void Stream::synchronize() const { HIP_CHECK(hipStreamSynchronize(stream_)); }

bool Stream::query() const {
  hipError_t e = hipStreamQuery(stream_);
  if (e == hipErrorNotReady) return false;
  HIP_CHECK(e);
  return true;
}

Event::Event(bool enable_timing) : timing_(enable_timing) {
  HIP_CHECK(hipEventCreateWithFlags(&event_, enable_timing ? hipEventDefault : hipEventDisableTiming));
}

Event::~Event() {
  if (event_) (void)hipEventDestroy(event_);
}

void Event::record(hipStream_t stream) {
  HIP_CHECK(hipEventRecord(event_, stream));
  recorded_ = true;
}

void Event::record() { record(current_stream(current_hip_device())); }

void Event::synchronize() const {
  if (recorded_) HIP_CHECK(hipEventSynchronize(event_));
}

bool Event::query() const {
  if (!recorded_) return true;
  hipError_t e = hipEventQuery(event_);
  if (e == hipErrorNotReady) return false;
  HIP_CHECK(e);
  return true;
}

float Event::elapsed_time(const Event& end) const {
  PF_CHECK(timing_ && end.timing_, ValueError, "elapsed_time: both events need enable_timing=True");
  PF_CHECK(recorded_ && end.recorded_, ValueError, "elapsed_time: both events must be recorded first");
  float ms = 0;
  HIP_CHECK(hipEventElapsedTime(&ms, event_, end.event_));
  return ms;
}

StreamGuard::StreamGuard(const Stream& stream) : device_(stream.device()), previous_(current_stream(stream.device())) {
  set_current_stream(device_, stream.handle());
}

StreamGuard::~StreamGuard() { set_current_stream(device_, previous_); }

}  // namespace pyflame::backend::rocm
