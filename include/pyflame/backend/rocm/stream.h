#pragma once
// Streams and events of the ROCm backend. Each thread has a current stream
// per device; ops on that device enqueue their kernels on it. Until a Stream
// is made current it is the thread's default stream of the device: a
// non-blocking stream of its own (never the legacy null stream, which cannot
// be captured into a HIP graph and waits for every other blocking stream).
// Work of different threads is therefore not ordered: a tensor computed in one
// thread and used in another needs a synchronize() or an Event in between.
// An Event owns its HIP event; a Stream, like a thread's default stream,
// borrows a HIP stream from a pool and gives it back (handles live as long as
// the process).

#include "pyflame/backend/rocm/hip_compat.h"
#include "pyflame/macros.h"

namespace pyflame::backend::rocm {

class PF_API Stream {
 public:
  // priority: 0 is normal; lower numbers are higher priority, clamped to the device's range.
  explicit Stream(int device = -1, int priority = 0);  // device -1: the current device
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  hipStream_t handle() const { return stream_; }
  int device() const { return device_; }
  int priority() const { return priority_; }
  void synchronize() const;  // waits (counted by pyflame::synchronization_count())
  bool query() const;  // true when all work queued on it has finished

 private:
  hipStream_t stream_ = nullptr;
  int device_ = 0;
  int priority_ = 0;
};

class PF_API Event {
 public:
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(hipStream_t stream);  // nullptr: this thread's default stream of the current device
  void record();  // on the current stream of the current device
  void synchronize() const;  // waits (counted) once recorded
  bool query() const;
  // Milliseconds between this event and `end` (both recorded, timing enabled).
  float elapsed_time(const Event& end) const;
  hipEvent_t handle() const { return event_; }

 private:
  hipEvent_t event_ = nullptr;
  bool timing_ = false;
  bool recorded_ = false;
};

// The stream ops use on `device` in this thread: the one set, else default_stream(device).
PF_API hipStream_t current_stream(int device);
// nullptr makes this thread's default stream current again.
PF_API void set_current_stream(int device, hipStream_t stream);
// This thread's default stream on `device`, created (non-blocking, normal
// priority) on first use and handed back to the pool when the thread exits.
PF_API hipStream_t default_stream(int device);
// After a host->device copy from pageable memory queued on `stream` (it returns
// before the DMA has run): a stream made current later in this thread waits for it.
PF_API void note_pageable_upload(int device, hipStream_t stream);

// Makes `stream` current on its device for a scope.
class PF_API StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();

 private:
  int device_;
  hipStream_t previous_;
};

}  // namespace pyflame::backend::rocm
