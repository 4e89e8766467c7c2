// ROCmMemoryManager: the spec's memory API over the caching allocator
// (pyflame/caching_allocator.h), one per device. Copies between pageable host
// memory and the device go through two pinned staging buffers in turn, so
// the CPU's memcpy of one chunk overlaps the DMA of the other.

#include "pyflame/backend/rocm/memory.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

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
    hipError_t err = hipMalloc(&p, bytes);
    if (err == hipErrorOutOfMemory) {
      (void)hipGetLastError();
      return nullptr;
    }
    HIP_CHECK(err);
    return p;
  }
  void raw_free(void* ptr) override {
    DeviceGuard guard(device_);
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
constexpr size_t kStagingThreshold = size_t{1} << 20;  // smaller copies go straight through the runtime

void copy_and_wait(void* dst, const void* src, size_t bytes, hipMemcpyKind kind, hipStream_t stream) {
  HIP_CHECK(hipMemcpyAsync(dst, src, bytes, kind, stream));
  HIP_CHECK(hipStreamSynchronize(stream));
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

void* ROCmMemoryManager::allocate(size_t bytes) { return allocate_async(bytes, current_stream(device_)); }
void* ROCmMemoryManager::allocate_async(size_t bytes, hipStream_t stream) {
  return poisoned(allocator_->allocate(bytes, stream), bytes, stream);
}

void* ROCmMemoryManager::poisoned(void* ptr, size_t bytes, hipStream_t stream) {
  if (poison_ && ptr) memset_async(ptr, 0xFF, bytes, stream);
  return ptr;
}
void ROCmMemoryManager::deallocate(void* ptr) { allocator_->deallocate(ptr); }
void ROCmMemoryManager::deallocate_async(void* ptr, hipStream_t stream) {
  if (!ptr) return;
  allocator_->record_stream(ptr, stream);
  allocator_->deallocate(ptr);
}

void ROCmMemoryManager::copy_host_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t stream) {
  DeviceGuard guard(device_);
  HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyHostToDevice, stream));
}
void ROCmMemoryManager::copy_device_to_host_async(void* dst, const void* src, size_t bytes, hipStream_t stream) {
  DeviceGuard guard(device_);
  HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToHost, stream));
}
void ROCmMemoryManager::copy_device_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t stream) {
  DeviceGuard guard(device_);
  HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, stream));
}

void ROCmMemoryManager::copy_host_to_device(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  hipStream_t stream = current_stream(device_);
  if (!config_.use_pinned_host || bytes < kStagingThreshold) return copy_and_wait(dst, src, bytes, hipMemcpyHostToDevice, stream);
  PinnedMemoryPool& pool = get_pinned_pool();
  void* buf[2] = {pool.acquire(kStagingChunk), pool.acquire(kStagingChunk)};
  Event done[2];
  for (size_t off = 0, k = 0; off < bytes; off += kStagingChunk, ++k) {
    size_t len = std::min(kStagingChunk, bytes - off);
    int i = static_cast<int>(k % 2);
    done[i].synchronize();  // the DMA that last read this buffer has finished
    std::memcpy(buf[i], static_cast<const char*>(src) + off, len);
    HIP_CHECK(hipMemcpyAsync(static_cast<char*>(dst) + off, buf[i], len, hipMemcpyHostToDevice, stream));
    done[i].record(stream);
  }
  HIP_CHECK(hipStreamSynchronize(stream));
  pool.release(buf[0]);
  pool.release(buf[1]);
}

void ROCmMemoryManager::copy_device_to_host(void* dst, const void* src, size_t bytes) {
  DeviceGuard guard(device_);
  hipStream_t stream = current_stream(device_);
  if (!config_.use_pinned_host || bytes < kStagingThreshold) return copy_and_wait(dst, src, bytes, hipMemcpyDeviceToHost, stream);
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
      done[p % 2].synchronize();
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
  HIP_CHECK(hipStreamSynchronize(stream));
}
void ROCmMemoryManager::memset_async(void* ptr, int value, size_t bytes, hipStream_t stream) {
  DeviceGuard guard(device_);
  HIP_CHECK(hipMemsetAsync(ptr, value, bytes, stream));
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

ROCmMemoryManager& get_memory_manager() { return get_memory_manager(current_hip_device()); }

ROCmMemoryManager& get_memory_manager(int device) {
  // Never destroyed: at process exit the GPU runtime may already be gone, and
  // freeing into it then would fail. The driver reclaims the memory.
  static std::mutex mutex;
  static std::vector<ROCmMemoryManager*> managers;
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(managers.size())) managers.resize(device + 1, nullptr);
  if (!managers[device]) managers[device] = new ROCmMemoryManager(device, ROCmMemoryManager::Config{});
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
