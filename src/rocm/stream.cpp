// Streams and events. The current stream is per thread and per device, as in
// PyTorch, so a Stream context in one thread does not redirect another's work.
//
// Each thread's default stream is a non-blocking stream of its own, not the
// legacy null stream: that one cannot be captured into a HIP graph, and every
// blocking stream waits for it (and it for them), which would serialise
// unrelated work. Every GPU call of the backend names a stream, so nothing is
// queued on the null stream.
//
// HIP streams are never destroyed: a Stream, or a thread that exits, returns
// its handle to a pool (per device and priority) and a later Stream or thread
// reuses it. The caching allocator keeps blocks in per-stream pools and
// queries those streams later, so a handle must stay valid for the life of
// the process (PyTorch pools its streams for the same reason). Reuse is safe:
// work queued by the new owner simply runs after the old owner's.
//
// A copy from pageable host memory returns before its DMA has run (memory.cpp),
// where PyTorch's has completed, so PyTorch code may read the data on any
// stream. The thread's last such copy per device leaves an event, and a stream
// made current waits for it on the device (the host never waits for it).

#include "pyflame/backend/rocm/stream.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "rocm/device_guard.h"

namespace pyflame::backend::rocm {

namespace {

int current_hip_device() {
  int d = 0;
  HIP_CHECK(hipGetDevice(&d));
  return d;
}

// `priority` within the device's range ("greatest" priority is the numerically lowest).
int clamped_priority(int device, int priority) {
  DeviceGuard guard(device);
  int least = 0, greatest = 0;
  HIP_CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
  return std::clamp(priority, greatest, least);
}

// Free handles per (device, priority). Never destroyed: threads hand their
// default streams back when they exit, which may be after static destructors ran.
struct StreamPool {
  std::mutex mutex;
  std::map<std::pair<int, int>, std::vector<hipStream_t>> free;
};
StreamPool& stream_pool() {
  static StreamPool* pool = new StreamPool;
  return *pool;
}

hipStream_t take_stream(int device, int priority) {
  {
    StreamPool& pool = stream_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    auto& free = pool.free[{device, priority}];
    if (!free.empty()) {
      hipStream_t s = free.back();
      free.pop_back();
      return s;
    }
  }
  DeviceGuard guard(device);
  hipStream_t s = nullptr;
  HIP_CHECK(hipStreamCreateWithPriority(&s, hipStreamNonBlocking, priority));
  return s;
}

void give_back_stream(int device, int priority, hipStream_t stream) {
  StreamPool& pool = stream_pool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.free[{device, priority}].push_back(stream);
}

// Events for the uploads below, pooled as the streams are (a thread may exit
// after the runtime's teardown, when destroying one could fail).
struct EventPool {
  std::mutex mutex;
  std::map<int, std::vector<hipEvent_t>> free;
};
EventPool& event_pool() {
  static EventPool* pool = new EventPool;
  return *pool;
}

// This thread's streams, indexed by device: the one made current (nullptr:
// the default), the default streams it took from the pool, and its last
// upload from pageable memory (the stream that queued it and an event after it).
struct ThreadStreams {
  struct Default {
    hipStream_t stream = nullptr;
    int priority = 0;  // the pool's key: the device's normal priority
  };
  struct Upload {
    hipStream_t stream = nullptr;  // nullptr: none pending
    hipEvent_t event = nullptr;    // kept for the thread's later uploads
  };
  std::vector<hipStream_t> current;
  std::vector<Default> defaults;
  std::vector<Upload> uploads;
  ~ThreadStreams() {
    for (size_t d = 0; d < defaults.size(); ++d)
      if (defaults[d].stream) give_back_stream(static_cast<int>(d), defaults[d].priority, defaults[d].stream);
    EventPool& pool = event_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    for (size_t d = 0; d < uploads.size(); ++d)
      if (uploads[d].event) pool.free[static_cast<int>(d)].push_back(uploads[d].event);
  }
};
thread_local ThreadStreams t_streams;

}  // namespace

hipStream_t default_stream(int device) {
  ThreadStreams& ts = t_streams;
  auto d = static_cast<size_t>(device);
  if (d < ts.defaults.size() && ts.defaults[d].stream) return ts.defaults[d].stream;
  int priority = clamped_priority(device, 0);
  hipStream_t s = take_stream(device, priority);
  if (d >= ts.defaults.size()) ts.defaults.resize(d + 1);
  ts.defaults[d] = {s, priority};
  return s;
}

hipStream_t current_stream(int device) {
  const ThreadStreams& ts = t_streams;
  auto d = static_cast<size_t>(device);
  if (d < ts.current.size() && ts.current[d]) return ts.current[d];
  return default_stream(device);
}

void set_current_stream(int device, hipStream_t stream) {
  ThreadStreams& ts = t_streams;
  auto d = static_cast<size_t>(device);
  if (d >= ts.current.size()) ts.current.resize(d + 1, nullptr);
  ts.current[d] = stream;
  if (d >= ts.uploads.size() || !ts.uploads[d].stream) return;
  ThreadStreams::Upload& upload = ts.uploads[d];
  const hipStream_t now = stream ? stream : default_stream(device);
  if (upload.stream == now) return;
  const hipError_t done = hipEventQuery(upload.event);
  if (done == hipSuccess) {
    upload.stream = nullptr;
    return;
  }
  if (done != hipErrorNotReady) HIP_CHECK(done);
  hipStreamCaptureStatus capturing = hipStreamCaptureStatusNone;
  HIP_CHECK(hipStreamIsCapturing(now, &capturing));
  // A capturing stream cannot wait for work outside its graph: the host waits instead.
  if (capturing != hipStreamCaptureStatusNone) {
    count_synchronization();
    HIP_CHECK(hipEventSynchronize(upload.event));
    upload.stream = nullptr;
  } else {
    HIP_CHECK(hipStreamWaitEvent(now, upload.event, 0));
  }
}

void note_pageable_upload(int device, hipStream_t stream) {
  ThreadStreams& ts = t_streams;
  auto d = static_cast<size_t>(device);
  if (d >= ts.uploads.size()) ts.uploads.resize(d + 1);
  ThreadStreams::Upload& upload = ts.uploads[d];
  if (!upload.event) {
    EventPool& pool = event_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    std::vector<hipEvent_t>& free = pool.free[device];
    if (!free.empty()) {
      upload.event = free.back();
      free.pop_back();
    }
  }
  if (!upload.event) {
    DeviceGuard guard(device);
    HIP_CHECK(hipEventCreateWithFlags(&upload.event, hipEventDisableTiming));
  }
  HIP_CHECK(hipEventRecord(upload.event, stream));
  upload.stream = stream;
}

Stream::Stream(int device, int priority)
    : device_(device < 0 ? current_hip_device() : device), priority_(clamped_priority(device_, priority)) {
  stream_ = take_stream(device_, priority_);
}

Stream::~Stream() { give_back_stream(device_, priority_, stream_); }

void Stream::synchronize() const {
  count_synchronization();
  HIP_CHECK(hipStreamSynchronize(stream_));
}

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
  if (!stream) stream = default_stream(current_hip_device());
  HIP_CHECK(hipEventRecord(event_, stream));
  recorded_ = true;
}

void Event::record() { record(current_stream(current_hip_device())); }

void Event::synchronize() const {
  if (!recorded_) return;
  count_synchronization();
  HIP_CHECK(hipEventSynchronize(event_));
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
