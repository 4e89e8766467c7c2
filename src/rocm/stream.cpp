// Streams and events. The current stream is per thread and per device, as in
// PyTorch, so a Stream context in one thread does not redirect another's work.
//
// HIP streams are never destroyed: a Stream returns its handle to a pool (per
// device and priority) and a later Stream reuses it. The caching allocator
// keeps blocks in per-stream pools and queries those streams later, so a
// handle must stay valid for the life of the process (PyTorch pools its
// streams for the same reason). Reuse is safe: work queued by the new owner
// simply runs after the old owner's.

#include "pyflame/backend/rocm/stream.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "pyflame/backend/rocm/hip_check.h"

namespace pyflame::backend::rocm {

namespace {
thread_local std::unordered_map<int, hipStream_t> t_current;

int current_hip_device() {
  int d = 0;
  HIP_CHECK(hipGetDevice(&d));
  return d;
}

std::mutex g_pool_mutex;
std::map<std::pair<int, int>, std::vector<hipStream_t>> g_pool;  // (device, priority) -> free handles
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
  {
    std::lock_guard<std::mutex> lock(g_pool_mutex);
    auto& free = g_pool[{device_, priority_}];
    if (!free.empty()) {
      stream_ = free.back();
      free.pop_back();
    }
  }
  if (!stream_) HIP_CHECK(hipStreamCreateWithPriority(&stream_, hipStreamNonBlocking, priority_));
  HIP_CHECK(hipSetDevice(previous));
}

Stream::~Stream() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  g_pool[{device_, priority_}].push_back(stream_);
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
