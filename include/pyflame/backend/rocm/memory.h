#pragma once
// GPU memory of the ROCm backend (seed 000): ROCmMemoryManager, a caching
// allocator per device (pyflame/caching_allocator.h has the design), and
// PinnedMemoryPool, page-locked host buffers for fast transfers.
//
// Streams: a nullptr stream argument means this thread's default stream of the
// manager's device (stream.h), never the legacy null stream.

#include <cstddef>
#include <string>
#include <vector>

#include "pyflame/backend/rocm/hip_compat.h"
#include "pyflame/caching_allocator.h"
#include "pyflame/macros.h"

namespace pyflame::backend::rocm {

using MemoryStats = pyflame::AllocatorStats;
using PoolId = pyflame::CachingAllocator::PoolId;

class PF_API ROCmMemoryManager {
 public:
  struct Config {
    bool enable_pooling = true;     // false: every allocation goes to hipMalloc/hipFree
    size_t pool_size_mb = 256;      // reserved for the large pool by warmup()
    size_t max_pool_size_mb = 4096; // cached-but-unused memory above this is given back
    bool use_pinned_host = true;    // stage host<->device copies through pinned memory
  };

  ROCmMemoryManager();  // for the current device, default Config
  explicit ROCmMemoryManager(Config config);  // for the current device
  ROCmMemoryManager(int device, Config config);
  ~ROCmMemoryManager();
  ROCmMemoryManager(const ROCmMemoryManager&) = delete;
  ROCmMemoryManager& operator=(const ROCmMemoryManager&) = delete;

  // GPU memory. allocate() uses the current stream; memory is reused on that
  // stream at once and on other streams once its last use there has finished.
  void* allocate(size_t bytes);
  void* allocate_async(size_t bytes, hipStream_t stream);
  void deallocate(void* ptr);
  // Frees `ptr`, which was last used on `stream` (possibly not its allocation stream).
  void deallocate_async(void* ptr, hipStream_t stream);

  // Transfers, all ordered after the work already queued on the (current) stream.
  // copy_host_to_device returns once `src` has been read (into pinned staging
  // buffers), without waiting for the device: the copy itself runs later, in
  // stream order. copy_device_to_host and copy_device_to_device return when the
  // copy is done (a host wait, counted by pyflame::synchronization_count()).
  // The host copies refuse to run while the current stream captures a graph.
  void copy_host_to_device(void* dst, const void* src, size_t bytes);
  void copy_device_to_host(void* dst, const void* src, size_t bytes);
  void copy_device_to_device(void* dst, const void* src, size_t bytes);
  void copy_host_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t stream);
  void copy_device_to_host_async(void* dst, const void* src, size_t bytes, hipStream_t stream);
  void copy_device_to_device_async(void* dst, const void* src, size_t bytes, hipStream_t stream);

  void memset(void* ptr, int value, size_t bytes);  // waits, like copy_device_to_device
  void memset_async(void* ptr, int value, size_t bytes, hipStream_t stream);

  // Page-locked host memory, from the pinned pool.
  void* allocate_pinned(size_t bytes);
  void deallocate_pinned(void* ptr);

  MemoryStats get_stats() const;
  void reset_stats();
  void clear_pool();  // gives every unused cached block back to the device
  void get_memory_info(size_t* free, size_t* total) const;
  // Reserves `bytes` in the cache now (allocate and free), so that first use is fast.
  void warmup(size_t bytes);

  // Private memory pools for HIP graphs (CachingAllocator::begin_pool explains
  // them). begin_pool(stream) before hipStreamBeginCapture on `stream` (share:
  // a pool to allocate from again, for graphs replayed in capture order),
  // end_pool(stream) after hipStreamEndCapture. Capture in
  // hipStreamCaptureModeThreadLocal (or Relaxed): other threads keep querying
  // their streams and events, which a global-mode capture forbids.
  PoolId begin_pool(hipStream_t stream, PoolId share = 0);
  void end_pool(hipStream_t stream);
  // Once no graph that uses the pool will be launched again: its memory joins the
  // general cache, reused only after the work queued on `replay_stream` so far
  // (the graphs' last launches) has finished.
  void release_pool(PoolId pool, hipStream_t replay_stream);

  int device() const { return device_; }
  const Config& config() const { return config_; }

 private:
  class Source;
  void* poisoned(void* ptr, size_t bytes, hipStream_t stream);
  hipStream_t or_default(hipStream_t stream) const;  // nullptr: this thread's default stream

  int device_;
  Config config_;
  bool poison_;  // PYFLAME_POISON_ALLOCATIONS=1: fill new blocks with 0xFF (tests)
  Source* source_;
  CachingAllocator* allocator_;
};

// The manager of the current device (created on first use).
PF_API ROCmMemoryManager& get_memory_manager();
PF_API ROCmMemoryManager& get_memory_manager(int device);

class PF_API PinnedMemoryPool {
 public:
  PinnedMemoryPool();
  ~PinnedMemoryPool();
  // A page-locked buffer of at least `bytes`; cached buffers are reused by size class.
  void* acquire(size_t bytes);
  void release(void* ptr);  // the caller has finished with it (copies included)
  // The caller has queued copies from or to `ptr` on `stream` (of the current device):
  // the buffer returns to the cache once they have finished, as later acquire() and
  // clear() calls find without waiting.
  void release_after(void* ptr, hipStream_t stream);
  // Notes a copy from (or to) `ptr`, inside an acquired buffer, queued on `stream` of
  // `device`: the buffer's release waits for it. False when no acquired buffer holds `ptr`.
  bool record_use(const void* ptr, int device, hipStream_t stream);
  bool holds(const void* ptr) const;  // whether an acquired buffer holds `ptr`
  void warmup(const std::vector<size_t>& sizes);  // acquire and release each size now
  void clear();  // frees every cached buffer (not those whose copies are still queued)
  size_t cached_bytes() const;
  size_t in_use_bytes() const;  // acquired, or released after copies still queued

 private:
  struct Impl;
  Impl* impl_;
};

PF_API PinnedMemoryPool& get_pinned_pool();

// Pre-allocates the buffers a model of `model_size` ('small', 'medium', 'large')
// typically needs at `batch_size`, so the first steps do not pay for hipMalloc.
PF_API void warmup_memory_pool(int batch_size, const std::string& model_size);

}  // namespace pyflame::backend::rocm
