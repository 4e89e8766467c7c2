#pragma once
// A DeviceBackend owns one kind of device: its memory, its copies to and from
// the host, its synchronisation and its report of why it is (not) usable.
// The CPU backend is always there; the ROCm backend registers itself when its
// library is built in and finds a GPU. Everything outside the backends talks
// to devices through this interface only.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pyflame/device.h"

namespace pyflame {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual int device_count() const = 0;
  virtual void* allocate(size_t nbytes, int index) = 0;
  virtual void deallocate(void* ptr, int index) = 0;
  // Copies contiguous bytes between this backend's device `index` and the host
  // (or within the device); ordered after all work queued on the device.
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes, int index) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes, int index) = 0;
  // Between two of this backend's devices, ordered after the work queued on
  // the source and before its later work. The default goes through the host.
  // (Defined here: a virtual function defined out of line would make the class's typeinfo
  // one the core library keeps hidden, which the ROCm library could not link to.)
  virtual void copy_between_devices(void* dst, int dst_index, const void* src, int src_index, size_t nbytes) {
    std::vector<char> staged(nbytes);
    copy_to_host(staged.data(), src, nbytes, src_index);
    copy_from_host(dst, staged.data(), nbytes, dst_index);
  }
  // Whether device `index` reads device `peer`'s memory directly (peer access).
  virtual bool can_access_peer(int /*index*/, int /*peer*/) const { return false; }
  // Page-locked host memory for pinned CPU tensors (Tensor::pin_memory);
  // nullptr from a backend that has none.
  virtual void* allocate_pinned(size_t nbytes) = 0;
  virtual void deallocate_pinned(void* ptr) = 0;
  virtual bool is_pinned(const void* ptr) const = 0;
  virtual void synchronize(int index) = 0;
  virtual void set_current(int index) = 0;
  virtual DeviceInfo device_info(int index) const = 0;
  // Streams of other libraries (DLPack, the array API's stream= argument), as
  // raw handles: this thread's current stream on device `index`, and making
  // `stream` wait for the work queued so far on it without blocking the host.
  // A backend without streams waits for the device instead.
  virtual uintptr_t current_stream_handle(int /*index*/) { return 0; }
  virtual void make_stream_wait(uintptr_t /*stream*/, int index) { synchronize(index); }
  // Device graphs (pf.compile's replay on a GPU, ir::DeviceGraph): what this
  // thread queues on device `index` between begin_capture and end_capture
  // becomes one graph launched by launch_graph, its memory from a private pool
  // that destroy_graph gives back. end_capture returns nullptr where the work
  // could not be captured (`ok` false: an op failed during the capture).
  virtual bool can_capture() const { return false; }
  // Timing events (the op profiler, pf.profiler.profile): one recorded now on device
  // `index`'s current stream; the milliseconds between two (waiting for `end`); and
  // its release. A backend without them returns nullptr and the profiler times the host only.
  virtual void* record_timing_event(int /*index*/) { return nullptr; }
  virtual double elapsed_ms(void* /*start*/, void* /*end*/) { return 0; }
  virtual void destroy_timing_event(void* /*event*/) {}
  virtual void begin_capture(int /*index*/) {}
  virtual void* end_capture(int /*index*/, bool /*ok*/) { return nullptr; }
  virtual void launch_graph(void* /*graph*/) {}
  virtual void destroy_graph(void* /*graph*/) {}
};

// nullptr when the device type has no backend in this process. The first
// query for ROCm loads the backend library (libpyflame_rocm) if it was built.
PF_API DeviceBackend* backend_for(DeviceType type);
PF_API void register_backend(DeviceType type, DeviceBackend* backend);
// Why the ROCm backend is not usable, or "" when it is.
PF_API std::string rocm_unavailable_reason();
// Called by the op layer for each input it moves to the op's device.
PF_API void count_implicit_copy();
// Called by a backend for each copy between host and device memory (see host_transfer_count()).
PF_API void count_host_transfer();
// Called by a backend each time the host waits for its device (see synchronization_count()).
PF_API void count_synchronization();

}  // namespace pyflame
