// PinnedMemoryPool: page-locked host buffers cached by size class (powers of
// two from 64 KiB), because hipHostMalloc costs milliseconds and transfers
// from pageable memory cannot run at full speed.

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/memory.h"

namespace pyflame::backend::rocm {

struct PinnedMemoryPool::Impl {
  mutable std::mutex mutex;
  std::map<size_t, std::vector<void*>> free_by_class;
  std::unordered_map<void*, size_t> in_use;  // ptr -> size class
  size_t cached = 0, used = 0;
};

namespace {
size_t size_class(size_t bytes) {
  size_t c = size_t{64} << 10;
  while (c < bytes) c <<= 1;
  return c;
}
}  // namespace

PinnedMemoryPool::PinnedMemoryPool() : impl_(new Impl) {}

PinnedMemoryPool::~PinnedMemoryPool() {
  clear();
  delete impl_;
}

void* PinnedMemoryPool::acquire(size_t bytes) {
  size_t c = size_class(bytes);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->free_by_class.find(c);
  void* p = nullptr;
  if (it != impl_->free_by_class.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    impl_->cached -= c;
  } else {
    HIP_CHECK(hipHostMalloc(&p, c, hipHostMallocDefault));
  }
  impl_->in_use[p] = c;
  impl_->used += c;
  return p;
}

void PinnedMemoryPool::release(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->in_use.find(ptr);
  PF_CHECK(it != impl_->in_use.end(), ValueError, "PinnedMemoryPool::release: pointer was not acquired from this pool");
  size_t c = it->second;
  impl_->in_use.erase(it);
  impl_->used -= c;
  impl_->free_by_class[c].push_back(ptr);
  impl_->cached += c;
}

void PinnedMemoryPool::warmup(const std::vector<size_t>& sizes) {
  std::vector<void*> held;
  for (size_t s : sizes) held.push_back(acquire(s));
  for (void* p : held) release(p);
}

void PinnedMemoryPool::clear() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
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
