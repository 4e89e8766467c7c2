#pragma once
// A caching allocator for device memory, in the spirit of PyTorch's
// CUDACachingAllocator; the ROCm memory manager puts it in front of
// hipMalloc/hipFree. It knows nothing of HIP: the device is reached only
// through DeviceMemorySource, so the logic is tested on the CPU with a fake.
//
// Why cache: hipMalloc/hipFree are slow (a hipFree synchronises the device) and
// a training step frees and re-allocates the same sizes over and over. Freed
// blocks therefore stay with us and are handed out again.
//
// Why two pools: small requests (<= 1 MiB) are packed into 2 MiB segments so
// that thousands of tiny tensors do not cost thousands of device allocations;
// large requests get 20 MiB segments (or their own, rounded to 2 MiB, from
// 10 MiB up), which keeps big and small lifetimes from fragmenting each other.
// Sizes are rounded to 512 B so that blocks fit again after a split.
//
// Why split and merge: a cached block serves a smaller request by splitting
// (best fit), and a freed block merges with free neighbours of its segment, so
// the cache does not fill up with fragments of the wrong size. Large blocks are
// split only when more than 1 MiB would be left over.
//
// Why pools per stream: the device runs a stream's work in order, so a block
// freed on stream A may be handed out again on A at once, even while A's
// kernels still read it: the new user's work is queued after them. Another
// stream B has no such ordering; it takes A's free blocks only once A is idle.
// A block that was also used on other streams (record_stream) records an event
// on each at deallocate and returns to its pool when those events complete;
// the check is non-blocking, made on allocate and empty_cache.
//
// Why private pools: a HIP graph captured on a stream replays its kernels on
// the very addresses they used during the capture, so the memory allocated
// then must stay the graph's for as long as the graph may run (PyTorch's graph
// memory pools). begin_pool(stream) routes the stream's allocations to a
// private pool: its segments are its own (never split for, or handed to, an
// allocation from the general cache or another pool), a block freed while the
// pool exists goes back to it, and empty_cache() leaves it alone. end_pool
// routes the stream back to the general cache; the pool keeps its memory, and
// a later capture may allocate from it again (begin_pool(stream, id): graphs
// that share a pool must replay in the order they were captured).
// release_pool(id) then gives the pool's segments to the general cache: free
// blocks at once, blocks still held (a graph's outputs) when they are freed.
//
// Why nothing is freed or queried while a pool is active: a pool is active
// for the span of a capture, and during a capture the runtime refuses queries
// of the capturing stream or of events recorded on it, and synchronising calls
// such as hipFree. So while any pool is active the allocator asks the source
// only for memory: other streams count as busy (no stream_idle), events for a
// block freed with record_stream()ed uses are recorded once no pool is active
// (later than needed, never too early), nothing goes back to the source, and
// running out of memory raises at once instead of emptying the cache.
//
// Why empty and retry: when the device says no, the memory we cache may be the
// reason; returning every fully free segment and asking again turns most
// apparent out-of-memory errors into a slow allocation instead of a failure.
// Only then is ROCmMemoryError raised, with what a user needs to act on it.
//
// One mutex guards everything (source calls included); the cached path is a
// set lookup and a hash-map insert whose nodes are recycled, no heap traffic.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pyflame/macros.h"

namespace pyflame {

// What the caching allocator needs from a device. Streams and events are opaque handles.
// Calls are made with the allocator's lock held, never concurrently for one allocator.
class PF_API DeviceMemorySource {
 public:
  using Stream = void*;  // nullptr is a valid stream (the default stream)
  using Event = void*;
  virtual ~DeviceMemorySource() = default;
  virtual void* raw_allocate(size_t bytes) = 0;          // nullptr when out of memory (never throws for OOM)
  // No user holds `ptr` any more, but work queued earlier on its streams may
  // still be running: like hipFree, this must wait for it (or the device).
  virtual void raw_free(void* ptr) = 0;
  virtual Event record_event(Stream stream) = 0;         // completes when work queued on `stream` so far completes
  virtual bool event_done(Event event) = 0;              // non-blocking
  virtual void release_event(Event event) = 0;
  virtual bool stream_idle(Stream stream) = 0;           // non-blocking: no work pending on the stream
  virtual void memory_info(size_t* free_bytes, size_t* total_bytes) = 0;  // for error messages
  virtual std::string describe() const = 0;              // e.g. "rocm:0", used in error messages
};

struct PF_API AllocatorStats {  // the spec's MemoryStats plus what a caching allocator should report
  size_t total_allocated = 0;      // bytes currently handed out (block sizes)
  size_t peak_allocated = 0;
  size_t total_allocations = 0;    // allocate() calls that succeeded (bytes > 0)
  size_t total_deallocations = 0;
  size_t cache_hits = 0;           // served from cached memory
  size_t cache_misses = 0;         // needed a new segment from the source
  size_t reserved_bytes = 0;       // bytes held from the source (segments), used or cached
  size_t peak_reserved_bytes = 0;
  size_t segments = 0;
  size_t oom_retries = 0;          // times the cache was emptied to satisfy a request
  size_t cached_bytes = 0;         // free bytes in the pools (reserved, not handed out)
  size_t pending_bytes = 0;        // deallocated, waiting for events of other streams
  size_t pools = 0;                // private pools not yet released
  size_t pool_reserved_bytes = 0;  // the part of reserved_bytes that belongs to private pools
};

// A view of one segment, for tests and memory debugging (PyTorch's snapshot).
struct PF_API MemoryBlockInfo {
  uintptr_t address = 0;
  size_t size = 0;
  bool allocated = false;  // handed out
  bool pending = false;    // deallocated, waiting for stream events
  void* stream = nullptr;  // the stream whose pool it belongs to
};
struct PF_API MemorySegmentInfo {
  uintptr_t address = 0;
  size_t size = 0;
  bool small_pool = false;
  uint64_t pool = 0;  // the private pool it belongs to; 0: the general cache
  std::vector<MemoryBlockInfo> blocks;  // in address order, covering the segment
};

class PF_API CachingAllocator {
 public:
  struct Config {
    bool enable_pooling = true;          // false: every allocate/deallocate goes straight to the source
    size_t max_cached_bytes = SIZE_MAX;  // cached-but-unused bytes above this are released on deallocate
  };

  static constexpr size_t kMinBlockSize = 512;                // every size is rounded up to this
  static constexpr size_t kSmallSize = size_t(1) << 20;       // largest request served by the small pool
  static constexpr size_t kSmallSegment = size_t(2) << 20;    // segment size of the small pool
  static constexpr size_t kLargeSegment = size_t(20) << 20;   // segment size for large requests ...
  static constexpr size_t kMinLargeAlloc = size_t(10) << 20;  // ... below this; from here on:
  static constexpr size_t kLargeRound = size_t(2) << 20;      // own segment, rounded to 2 MiB

  CachingAllocator(DeviceMemorySource& source, Config config);
  ~CachingAllocator();  // returns every segment to the source (blocks still handed out included)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // nullptr for 0 bytes; ROCmMemoryError when the device is out of memory even
  // after the cache was emptied (the allocator stays usable).
  void* allocate(size_t bytes, DeviceMemorySource::Stream stream = nullptr);
  // nullptr is ignored; a pointer that allocate() did not return (or that was
  // already freed) raises ValueError, a std::invalid_argument.
  void deallocate(void* ptr);
  // The block is also used on `stream` (not its allocation stream): its memory is reused only once
  // the work queued on `stream` up to the block's deallocation has finished.
  void record_stream(void* ptr, DeviceMemorySource::Stream stream);
  void empty_cache();  // returns every fully free segment of the general cache to the source
                       // (none while a private pool is active)

  // Private pools (the design block above). Ids start at 1; 0 means none.
  using PoolId = uint64_t;
  // Routes `stream`'s allocations to pool `pool`, or to a new one when 0; returns its id.
  // ValueError when the stream is routed to a pool already, or `pool` does not exist.
  PoolId begin_pool(DeviceMemorySource::Stream stream, PoolId pool = 0);
  // Routes `stream`'s allocations to the general cache again (ValueError when not routed).
  void end_pool(DeviceMemorySource::Stream stream);
  // The streams that have allocated from `pool`: its blocks belong to them.
  std::vector<DeviceMemorySource::Stream> pool_streams(PoolId pool) const;
  // Gives the pool's memory to the general cache as memory of pool_streams(pool), whose
  // queued work orders its reuse: work on other streams that may still use it (a graph's
  // last replay) must be ordered before the work of those streams by the caller.
  // ValueError when a stream is still routed to it, or it does not exist.
  void release_pool(PoolId pool);
  AllocatorStats stats() const;
  void reset_stats();  // counters to zero, peaks to the current values
  size_t block_size(void* ptr) const;  // size of an allocated block: the rounded request, or more when
                                       // the rest of a cached block was too small to split off
  std::vector<MemorySegmentInfo> snapshot() const;  // segments in address order
  const Config& config() const { return config_; }

  static size_t round_size(size_t bytes);       // to a multiple of kMinBlockSize
  static size_t segment_size(size_t rounded);   // what a miss asks the source for

 private:
  struct Impl;
  Config config_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pyflame
