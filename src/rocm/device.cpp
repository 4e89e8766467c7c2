// The ROCm backend's DeviceBackend. libpyflame_rocm is loaded by the core on
// first use (core/backend.cpp); pyflame_rocm_init() then asks the runtime for
// devices and registers the backend, or returns why it cannot. Kernels
// register themselves when the library loads.

#include "core/backend.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/graph_capture.h"
#include "rocm/kernel_errors.h"
#include "rocm/peer.h"

namespace pyflame::backend::rocm {
namespace {

class ROCmBackend final : public DeviceBackend {
 public:
  explicit ROCmBackend(int count) : count_(count) {}
  int device_count() const override { return count_; }
  void* allocate(size_t nbytes, int index) override { return get_memory_manager(index).allocate(nbytes); }
  // Freed on this thread's current stream: when another thread (or a Stream
  // context) used the tensor there last, its memory is reused only after that work.
  void deallocate(void* ptr, int index) override {
    get_memory_manager(index).deallocate_async(ptr, current_stream(index));
  }
  // After each wait for the device, an error a kernel recorded meanwhile
  // (an index out of range) is raised as the CPU would have raised it.
  void copy_to_host(void* dst, const void* src, size_t nbytes, int index) override {
    get_memory_manager(index).copy_device_to_host(dst, src, nbytes);
    raise_pending_kernel_error(index);
  }
  void copy_from_host(void* dst, const void* src, size_t nbytes, int index) override {
    get_memory_manager(index).copy_host_to_device(dst, src, nbytes);
  }
  void copy_between_devices(void* dst, int dst_index, const void* src, int src_index, size_t nbytes) override {
    rocm::copy_between_devices(dst, dst_index, src, src_index, nbytes);
  }
  bool can_access_peer(int index, int peer) const override { return rocm::can_access_peer(index, peer); }
  void* allocate_pinned(size_t nbytes) override { return get_pinned_pool().acquire(nbytes); }
  void deallocate_pinned(void* ptr) override { get_pinned_pool().release(ptr); }
  bool is_pinned(const void* ptr) const override { return get_pinned_pool().holds(ptr); }
  void synchronize(int index) override {
    DeviceGuard guard(index);
    count_synchronization();
    HIP_CHECK(hipDeviceSynchronize());
    raise_pending_kernel_error(index);
  }
  void set_current(int index) override { HIP_CHECK(hipSetDevice(index)); }
  uintptr_t current_stream_handle(int index) override { return reinterpret_cast<uintptr_t>(current_stream(index)); }
  // An event on our stream that the other stream waits for (the array API's
  // DLPack exchange): the host goes on at once.
  void make_stream_wait(uintptr_t stream, int index) override {
    DeviceGuard guard(index);
    hipStream_t ours = current_stream(index);
    auto theirs = reinterpret_cast<hipStream_t>(stream);
    if (theirs == ours) return;
    hipEvent_t event;
    HIP_CHECK(hipEventCreateWithFlags(&event, hipEventDisableTiming));
    HIP_CHECK(hipEventRecord(event, ours));
    HIP_CHECK(hipStreamWaitEvent(theirs, event, 0));
    HIP_CHECK(hipEventDestroy(event));  // released by the runtime once the wait is done
  }
  void* record_timing_event(int index) override {
    DeviceGuard guard(index);
    hipEvent_t event;
    HIP_CHECK(hipEventCreateWithFlags(&event, hipEventDefault));
    HIP_CHECK(hipEventRecord(event, current_stream(index)));
    return event;
  }
  double elapsed_ms(void* start, void* end) override {
    float ms = 0;
    HIP_CHECK(hipEventSynchronize(static_cast<hipEvent_t>(end)));
    HIP_CHECK(hipEventElapsedTime(&ms, static_cast<hipEvent_t>(start), static_cast<hipEvent_t>(end)));
    return ms;
  }
  void destroy_timing_event(void* event) override { HIP_CHECK(hipEventDestroy(static_cast<hipEvent_t>(event))); }
  bool can_capture() const override { return true; }
  void begin_capture(int index) override { rocm::begin_capture(index); }
  void* end_capture(int index, bool ok) override { return rocm::end_capture(index, ok); }
  void launch_graph(void* graph) override { rocm::launch_graph(graph); }
  void destroy_graph(void* graph) override { rocm::destroy_graph(graph); }
  DeviceInfo device_info(int index) const override {
    DeviceGuard guard(index);
    hipDeviceProp_t prop;
    HIP_CHECK(hipGetDeviceProperties(&prop, index));
    DeviceInfo info;
    info.device_id = index;
    info.name = prop.name;
    info.architecture = arch_name(prop);
    HIP_CHECK(hipMemGetInfo(&info.free_memory, &info.total_memory));
    info.compute_units = prop.multiProcessorCount;
    info.platform = PF_GPU_PLATFORM;
    info.warp_size = prop.warpSize;
    info.runtime_version = runtime_version();
    return info;
  }

 private:
  int count_;
};

}  // namespace
}  // namespace pyflame::backend::rocm

// Returns nullptr when the backend is registered, else why it is not usable.
extern "C" PF_API const char* pyflame_rocm_init() {
  using namespace pyflame::backend::rocm;
  static std::string error;
  try {
    platform_init();
    int count = 0;
    hipError_t err = hipGetDeviceCount(&count);
    if (err != hipSuccess) {
      (void)hipGetLastError();
      error = std::string("the GPU runtime reports ") + hipGetErrorName(err) + " (" + hipGetErrorString(err) +
              "): check that the GPU driver is installed and a device is visible";
      return error.c_str();
    }
    if (count == 0) {
      error = "the GPU runtime found no device (check HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES)";
      return error.c_str();
    }
    static ROCmBackend backend(count);
    pyflame::register_backend(pyflame::DeviceType::ROCm, &backend);
    return nullptr;
  } catch (const std::exception& e) {
    error = e.what();
    return error.c_str();
  }
}
