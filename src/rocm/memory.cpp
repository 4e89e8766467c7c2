// ROCmMemoryManager: the spec's memory API over the caching allocator
// (pyflame/caching_allocator.h), one per device.
//
// Host->device copies from pageable memory never wait for the device: the
// bytes are copied into pinned staging buffers (8 MiB pieces, so that the DMA
// of one overlaps the CPU's copy of the next) and the DMA is queued on the
// current stream; each buffer goes back to the pinned pool once an event after
// its DMA has completed. A Python number that becomes a device operand thus
// costs no host wait. The runtime's own pageable copy would be simpler, but
// it may wait for the stream (CUDA does for a synchronous copy, and HIP's
// behaviour varies). Only a copy of more than two staging windows (32 MiB
// each) waits, for its own window before last, so that one huge copy does not
// pin unbounded host memory. Another stream that reads the data waits for the
// copy on the device when it is made current (stream.cpp).
//
// Device->host copies wait, for the data; they stage through two pinned buffers
// in turn so that the CPU drains one while the DMA fills the other.

#include "pyflame/backend/rocm/memory.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>

#include "core/backend.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"

namespace pyflame::backend::rocm {

class ROCmMemoryManager::Source final : public DeviceMemorySource {
 public:
  explicit Source(int device) : device_(device) {}
  void* raw_allocate(size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    // A capture in this thread forbids hipMalloc (it may synchronise) unless the
    // thread's mode is relaxed. The memory goes to the capture's private pool and
    // is not freed while its graphs may run, so allowing it is safe (PyTorch does so).
    hipStreamCaptureMode mode = hipStreamCaptureModeRelaxed;
    HIP_CHECK(hipThreadExchangeStreamCaptureMode(&mode));
    hipError_t err = hipMalloc(&p, bytes);
    HIP_CHECK(hipThreadExchangeStreamCaptureMode(&mode));
    if (err == hipErrorOutOfMemory) {
      (void)hipGetLastError();
      return nullptr;
    }
    HIP_CHECK(err);
    return p;
  }
  void raw_free(void* ptr) override {
    DeviceGuard guard(device_);
    count_synchronization();  // hipFree waits for the device
    HIP_CHECK(hipFree(ptr));
  }
  Event record_event(Stream stream) override {
    DeviceGuard guard(device_);
    hipEvent_t e;
    HIP_CHECK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
    HIP_CHECK(hipEventRecord(e, static_cast<hipStream_t>(stream)));
    return e;
  }
  bool event_done(Event event) override {
    hipError_t err = hipEventQuery(static_cast<hipEvent_t>(event));
    if (err == hipErrorNotReady) return false;
    HIP_CHECK(err);
    return true;
  }
  void release_event(Event event) override { HIP_CHECK(hipEventDestroy(static_cast<hipEvent_t>(event))); }
  bool stream_idle(Stream stream) override {
    hipError_t err = hipStreamQuery(static_cast<hipStream_t>(stream));
    if (err == hipErrorNotReady) return false;
    HIP_CHECK(err);
    return true;
  }
  void memory_info(size_t* free_bytes, size_t* total_bytes) override {
    DeviceGuard guard(device_);
    HIP_CHECK(hipMemGetInfo(free_bytes, total_bytes));
  }
  std::string describe() const override { return "rocm:" + std::to_string(device_); }

 private:
  int device_;
};

namespace {
int current_hip_device() {
  int d = 0;
  HIP_CHECK(hipGetDevice(&d));
  return d;
}

constexpr size_t kStagingChunk = size_t{8} << 20;  // per staging buffer
constexpr size_t kStagingWindow = size_t{32} << 20;  // host->device: staged bytes per wait (see the top)
constexpr size_t kStagingThreshold = size_t{1} << 20;  // smaller device->host copies go straight through the runtime
static_assert(kStagingWindow % kStagingChunk == 0);

void copy_and_wait(void* dst, const void* src, size_t bytes, hipMemcpyKind kind, hipStream_t stream) {
  HIP_CHECK(hipMemcpyAsync(dst, src, bytes, kind, stream));
  count_synchronization();
  HIP_CHECK(hipStreamSynchronize(stream));
}

// A graph would read (or write) the host side of such a copy at every replay,
// but the staging buffer holds the data only at capture, and a wait is illegal.
void refuse_during_capture(hipStream_t stream, const char* what) {
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  HIP_CHECK(hipStreamIsCapturing(stream, &status));
  PF_CHECK(status == hipStreamCaptureStatusNone, NotSupportedError, "ROCmMemoryManager::", what,
           ": the current stream is capturing a graph, and a copy between the host and the device cannot be part of "
           "one; make the copy before the capture begins");
}
}  // namespace

ROCmMemoryManager::ROCmMemoryManager() : ROCmMemoryManager(current_hip_device(), Config{}) {}
ROCmMemoryManager::ROCmMemoryManager(Config config) : ROCmMemoryManager(current_hip_device(), config) {}

ROCmMemoryManager::ROCmMemoryManager(int device, Config config)
    : device_(device), config_(config), poison_(false), source_(new Source(device)) {
  const char* poison = std::getenv("PYFLAME_POISON_ALLOCATIONS");
  poison_ = poison && *poison && std::string(poison) != "0";
  CachingAllocator::Config ac;
  ac.enable_pooling = config.enable_pooling;
  ac.max_cached_bytes = config.max_pool_size_mb << 20;
  allocator_ = new CachingAllocator(*source_, ac);
}

ROCmMemoryManager::~ROCmMemoryManager() {
  delete allocator_;
  delete source_;
}

hipStream_t ROCmMemoryManager::or_default(hipStream_t stream) const { return stream ? stream : default_stream(device_); }

void* ROCmMemoryManager::allocate(size_t bytes) { return allocate_async(bytes, current_stream(device_)); }
void* ROCmMemoryManager::allocate_async(size_t bytes, hipStream_t stream) {
  stream = or_default(stream);
  return poisoned(allocator_->allocate(bytes, stream), bytes, stream);
}

void* ROCmMemoryManager::poisoned(void* ptr, size_t bytes, hipStream_t stream) {
  if (poison_ && ptr) memset_async(ptr, 0xFF, bytes, stream);
  return ptr;
}
void ROCmMemoryManager::deallocate(void* ptr) { allocator_->deallocate(ptr); }
void ROCmMemoryManager::deallocate_async(void* ptr, hipStream_t stream) {
  if (!ptr) return;
  allocator_->record_stream(ptr, or_default(stream));
  allocator_->deallocate(ptr);
}

void ROCmMemoryManager::copy_host_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t stream) {
  DeviceGuard guard(device_);
  count_host_transfer();
  HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, or_default(stream)));
}
void ROCmMemoryManager::copy_device_to_host_async(void* dst, const void* src, size_t bytes, hipStream_t stream) {
  DeviceGuard guard(device_);
  count_host_transfer();
  HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, or_default(stream)));
}
void ROCmMemoryManager::copy_device_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t stream) {
  DeviceGuard guard(device_);
  HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, or_default(stream)));
}

void ROCmMemoryManager::copy_host_to_device(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  count_host_transfer();
  hipStream_t stream = current_stream(device_);
  refuse_during_capture(stream, "copy_host_to_device");
  if (!config_.use_pinned_host) return copy_and_wait(dst, src, bytes, hipMemcpyHostToDevice, stream);
  PinnedMemoryPool& pool = get_pinned_pool();
  std::optional<Event> window_done[2];  // only copies of more than two windows record them
  for (size_t off = 0; off < bytes; off += kStagingChunk) {
    size_t len = std::min(kStagingChunk, bytes - off);
    size_t window = off / kStagingWindow;
    if (off % kStagingWindow == 0 && window >= 2) window_done[window % 2]->synchronize();  // window - 2 is done
    void* buf = pool.acquire(len);
    std::memcpy(buf, static_cast<const char*>(src) + off, len);
    hipError_t err = hipMemcpyAsync(static_cast<char*>(dst) + off, buf, len, hipMemcpyHostToDevice, stream);
    if (err != hipSuccess) pool.release(buf);
    HIP_CHECK(err);
    pool.release_after(buf, stream);
    if ((off + len) % kStagingWindow == 0 && bytes > (window + 2) * kStagingWindow) {
      if (!window_done[window % 2]) window_done[window % 2].emplace();
      window_done[window % 2]->record(stream);
    }
  }
  note_pageable_upload(device_, stream);
}

void ROCmMemoryManager::copy_device_to_host(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  count_host_transfer();
  hipStream_t stream = current_stream(device_);
  refuse_during_capture(stream, "copy_device_to_host");
  if (!config_.use_pinned_host || bytes < kStagingThreshold) return copy_and_wait(dst, src, bytes, hipMemcpyDeviceToHost, stream);
  count_synchronization();  // one wait, however many chunks
  PinnedMemoryPool& pool = get_pinned_pool();
  void* buf[2] = {pool.acquire(kStagingChunk), pool.acquire(kStagingChunk)};
  Event done[2];
  size_t chunks = (bytes + kStagingChunk - 1) / kStagingChunk;
  // Chunk k is copied into buf[k % 2] while the CPU drains chunk k - 1.
  for (size_t k = 0; k <= chunks; ++k) {
    if (k < chunks) {
      size_t off = k * kStagingChunk, len = std::min(kStagingChunk, bytes - off);
      HIP_CHECK(hipMemcpyAsync(buf[k % 2], static_cast<const char*>(src) + off, len, hipMemcpyDeviceToHost, stream));
      done[k % 2].record(stream);
    }
    if (k > 0) {
      size_t p = k - 1, off = p * kStagingChunk, len = std::min(kStagingChunk, bytes - off);
      HIP_CHECK(hipEventSynchronize(done[p % 2].handle()));
      std::memcpy(static_cast<char*>(dst) + off, buf[p % 2], len);
    }
  }
  pool.release(buf[0]);
  pool.release(buf[1]);
}

void ROCmMemoryManager::copy_device_to_device(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  copy_and_wait(dst, src, bytes, hipMemcpyDeviceToDevice, current_stream(device_));
}

void ROCmMemoryManager::memset(void* ptr, int value, size_t bytes) {
  hipStream_t stream = current_stream(device_);
  memset_async(ptr, value, bytes, stream);
  count_synchronization();
  HIP_CHECK(hipStreamSynchronize(stream));
}
void ROCmMemoryManager::memset_async(void* ptr, int value, size_t bytes, hipStream_t stream) {
  DeviceGuard guard(device_);
  HIP_CHECK(hipMemsetAsync(ptr, value, bytes, or_default(stream)));
}

void* ROCmMemoryManager::allocate_pinned(size_t bytes) { return get_pinned_pool().acquire(bytes); }
void ROCmMemoryManager::deallocate_pinned(void* ptr) { get_pinned_pool().release(ptr); }

MemoryStats ROCmMemoryManager::get_stats() const { return allocator_->stats(); }
void ROCmMemoryManager::reset_stats() { allocator_->reset_stats(); }
void ROCmMemoryManager::clear_pool() { allocator_->empty_cache(); }
void ROCmMemoryManager::get_memory_info(size_t* free, size_t* total) const { source_->memory_info(free, total); }

void ROCmMemoryManager::warmup(size_t bytes) {
  if (bytes == 0 || !config_.enable_pooling) return;
  allocator_->deallocate(allocator_->allocate(bytes, current_stream(device_)));
}

PoolId ROCmMemoryManager::begin_pool(hipStream_t stream, PoolId share) {
  return allocator_->begin_pool(or_default(stream), share);
}

void ROCmMemoryManager::end_pool(hipStream_t stream) { allocator_->end_pool(or_default(stream)); }

void ROCmMemoryManager::release_pool(PoolId pool, hipStream_t replay_stream) {
  DeviceGuard guard(device_);
  replay_stream = or_default(replay_stream);
  // The pool's blocks belong to the streams that allocated them; making those
  // streams wait for the replays orders every later reuse after them too.
  Event replays_done;
  replays_done.record(replay_stream);
  for (DeviceMemorySource::Stream s : allocator_->pool_streams(pool)) {
    auto stream = static_cast<hipStream_t>(s);
    if (stream != replay_stream) HIP_CHECK(hipStreamWaitEvent(stream, replays_done.handle(), 0));
  }
  allocator_->release_pool(pool);
}

ROCmMemoryManager& get_memory_manager() { return get_memory_manager(current_hip_device()); }

ROCmMemoryManager& get_memory_manager(int device) {
  // Never destroyed: at process exit the GPU runtime may already be gone, and
  // freeing into it then would fail. The driver reclaims the memory.
  static std::mutex mutex;
  static std::vector<ROCmMemoryManager*> managers;
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(managers.size())) managers.resize(device + 1, nullptr);
  if (!managers[device]) {
    // The tensors' allocator keeps what it caches, as PyTorch's: with the spec's
    // default bound (4 GiB), a training step whose activations come and go above it
    // gave segments back and took them again every step, each hipFree a device-wide
    // wait (GPT-2 small in float32: 47 waits a step, 7% of its time).
    ROCmMemoryManager::Config config;
    config.max_pool_size_mb = SIZE_MAX >> 20;
    managers[device] = new ROCmMemoryManager(device, config);
  }
  return *managers[device];
}

void warmup_memory_pool(int batch_size, const std::string& model_size) {
  PF_CHECK(batch_size > 0, ValueError, "warmup_memory_pool: batch_size must be positive, got ", batch_size);
  // Activation memory per sample that a model of each size typically needs.
  size_t per_sample;
  if (model_size == "small") per_sample = size_t{1} << 20;
  else if (model_size == "medium") per_sample = size_t{8} << 20;
  else if (model_size == "large") per_sample = size_t{32} << 20;
  else throw ValueError("warmup_memory_pool: model_size must be 'small', 'medium' or 'large', got '" + model_size + "'");
  ROCmMemoryManager& mm = get_memory_manager();
  size_t free = 0, total = 0;
  mm.get_memory_info(&free, &total);
  mm.warmup(std::min(per_sample * static_cast<size_t>(batch_size), free / 2));
  get_pinned_pool().warmup({kStagingChunk, kStagingChunk});
}

}  // namespace pyflame::backend::rocm
