// PinnedMemoryPool: page-locked host buffers cached by size class (powers of
// two from 4 KiB, a page: the host->device copy of every Python number passes
// through here), because hipHostMalloc costs milliseconds and transfers from
// pageable memory cannot run at full speed.
//
// Pinned CPU tensors (Tensor::pin_memory) take their memory from here too.
// A copy from one runs straight from its memory without waiting; the copy's
// stream is recorded against the buffer (record_use), and releasing the
// buffer then waits for that stream's work as release_after() does.
//
// A buffer that queued copies still use comes back through release_after():
// an event recorded after the copies marks when it is free again. acquire()
// and clear() reclaim such buffers oldest first and stop at the first whose
// event has not completed, so the check never waits and costs one query when
// nothing has finished (PyTorch's CachingHostAllocator does the same).

#include <deque>
#include <map>
#include <mutex>
#include <vector>

#include "core/backend.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/memory.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"

namespace pyflame::backend::rocm {

struct PinnedMemoryPool::Impl {
  struct InFlight {
    void* ptr;
    size_t size_class;
    hipEvent_t event;  // completes when the copies that use the buffer have
    int device;        // the event's
  };

  struct Use {
    int device;
    hipStream_t stream;
  };
  struct Acquired {
    size_t size_class;
    std::vector<Use> uses;  // streams with queued copies from the buffer (record_use)
  };

  mutable std::mutex mutex;
  std::map<size_t, std::vector<void*>> free_by_class;
  std::map<void*, Acquired> in_use;  // by address, to find the buffer a pointer lies in
  std::deque<InFlight> in_flight;            // released after copies, oldest first
  std::map<int, std::vector<hipEvent_t>> spare_events;  // per device: an event belongs to one
  size_t cached = 0, used = 0;

  // The acquired buffer that holds `ptr`, or in_use.end().
  std::map<void*, Acquired>::iterator holding(const void* ptr) {
    auto it = in_use.upper_bound(const_cast<void*>(ptr));
    if (it == in_use.begin()) return in_use.end();
    --it;
    const char* end = static_cast<const char*>(it->first) + it->second.size_class;
    return static_cast<const char*>(ptr) < end ? it : in_use.end();
  }

  void reclaim_finished() {
    while (!in_flight.empty()) {
      InFlight f = in_flight.front();
      hipError_t err = hipEventQuery(f.event);
      if (err == hipErrorNotReady) return;
      HIP_CHECK(err);
      free_by_class[f.size_class].push_back(f.ptr);
      spare_events[f.device].push_back(f.event);
      in_flight.pop_front();
      used -= f.size_class;
      cached += f.size_class;
    }
  }
};

namespace {
size_t size_class(size_t bytes) {
  size_t c = size_t{4} << 10;
  while (c < bytes) c <<= 1;
  return c;
}
}  // namespace

PinnedMemoryPool::PinnedMemoryPool() : impl_(new Impl) {}

// Buffers still in flight are waited for: freeing them earlier would pull
// memory from under a copy. (The process-wide pool is never destroyed.)
PinnedMemoryPool::~PinnedMemoryPool() {
  if (!impl_->in_flight.empty()) count_synchronization();
  for (Impl::InFlight& f : impl_->in_flight) {
    (void)hipEventSynchronize(f.event);  // a destructor must not throw
    (void)hipEventDestroy(f.event);
    (void)hipHostFree(f.ptr);
  }
  for (auto& [device, events] : impl_->spare_events)
    for (hipEvent_t e : events) (void)hipEventDestroy(e);
  for (auto& [c, ptrs] : impl_->free_by_class)
    for (void* p : ptrs) (void)hipHostFree(p);
  delete impl_;
}

void* PinnedMemoryPool::acquire(size_t bytes) {
  size_t c = size_class(bytes);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->reclaim_finished();
  auto it = impl_->free_by_class.find(c);
  void* p = nullptr;
  if (it != impl_->free_by_class.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    impl_->cached -= c;
  } else {
    HIP_CHECK(hipHostMalloc(&p, c, hipHostMallocDefault));
  }
  impl_->in_use[p] = {c, {}};
  impl_->used += c;
  return p;
}

void PinnedMemoryPool::release(void* ptr) {
  if (!ptr) return;
  std::vector<Impl::Use> uses;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->in_use.find(ptr);
    PF_CHECK(it != impl_->in_use.end(), ValueError,
             "PinnedMemoryPool::release: pointer was not acquired from this pool");
    uses = it->second.uses;
    if (uses.empty()) {
      size_t c = it->second.size_class;
      impl_->in_use.erase(it);
      impl_->used -= c;
      impl_->free_by_class[c].push_back(ptr);
      impl_->cached += c;
      return;
    }
  }
  // Copies from the buffer may still be queued: it comes back once the last
  // stream's have run; other streams (a rare case) are waited for here.
  for (size_t i = 0; i + 1 < uses.size(); ++i) {
    DeviceGuard guard(uses[i].device);
    count_synchronization();
    HIP_CHECK(hipStreamSynchronize(uses[i].stream));
  }
  DeviceGuard guard(uses.back().device);
  release_after(ptr, uses.back().stream);
}

bool PinnedMemoryPool::record_use(const void* ptr, int device, hipStream_t stream) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->holding(ptr);
  if (it == impl_->in_use.end()) return false;
  std::vector<Impl::Use>& uses = it->second.uses;
  for (const Impl::Use& u : uses)
    if (u.device == device && u.stream == stream) return true;
  uses.push_back({device, stream});
  return true;
}

bool PinnedMemoryPool::holds(const void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->holding(ptr) != impl_->in_use.end();
}

void PinnedMemoryPool::release_after(void* ptr, hipStream_t stream) {
  int device = 0;
  HIP_CHECK(hipGetDevice(&device));
  if (!stream) stream = default_stream(device);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->in_use.find(ptr);
  PF_CHECK(it != impl_->in_use.end(), ValueError,
           "PinnedMemoryPool::release_after: pointer was not acquired from this pool");
  std::vector<hipEvent_t>& spare = impl_->spare_events[device];
  hipEvent_t event = nullptr;
  if (spare.empty()) {
    HIP_CHECK(hipEventCreateWithFlags(&event, hipEventDisableTiming));
  } else {
    event = spare.back();
    spare.pop_back();
  }
  hipError_t err = hipEventRecord(event, stream);
  if (err != hipSuccess) spare.push_back(event);
  HIP_CHECK(err);
  impl_->in_flight.push_back({ptr, it->second.size_class, event, device});
  impl_->in_use.erase(it);
}

void PinnedMemoryPool::warmup(const std::vector<size_t>& sizes) {
  std::vector<void*> held;
  for (size_t s : sizes) held.push_back(acquire(s));
  for (void* p : held) release(p);
}

void PinnedMemoryPool::clear() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->reclaim_finished();
  if (impl_->cached) count_synchronization();  // hipHostFree waits for the device
  for (auto& [c, ptrs] : impl_->free_by_class)
    for (void* p : ptrs) HIP_CHECK(hipHostFree(p));
  impl_->free_by_class.clear();
  impl_->cached = 0;
}

size_t PinnedMemoryPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cached;
}

size_t PinnedMemoryPool::in_use_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->used;
}

PinnedMemoryPool& get_pinned_pool() {
  static PinnedMemoryPool* pool = new PinnedMemoryPool();  // never destroyed, like the managers
  return *pool;
}

}  // namespace pyflame::backend::rocm
