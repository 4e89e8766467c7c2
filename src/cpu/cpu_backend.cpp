// The CPU device: 64-byte aligned host memory (large blocks ask the kernel
// for transparent huge pages, which cuts first-touch page faults the way
// NumPy's allocator does) and the thread count shared by OpenMP and OpenBLAS.
//
// Large blocks (4 MiB and more, 2 MiB-aligned) are kept when freed and handed
// out again for the same rounded size: glibc returns such blocks to the kernel
// at once, so a training step's activations were mapped, faulted and zeroed
// anew every step (a third of a nanoGPT step on the 2-core machine). The cache
// holds at most kCacheLimit bytes and is emptied before an allocation fails.

#include <cblas.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

#include "core/backend.h"

namespace pyflame {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePageThreshold = size_t{4} << 20;
constexpr size_t kHugeAlignment = size_t{2} << 20;
constexpr size_t kCacheLimit = size_t{2} << 30;

// The large blocks: those handed out (with their sizes) and those kept for reuse.
class LargeBlocks {
 public:
  void* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end()) return nullptr;
    void* p = it->second;
    free_.erase(it);
    cached_ -= bytes;
    used_[p] = bytes;
    return p;
  }
  void add(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    used_[p] = bytes;
  }
  // False when `p` is not a large block.
  bool give_back(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = used_.find(p);
    if (it == used_.end()) return false;
    const size_t bytes = it->second;
    used_.erase(it);
    if (cached_ + bytes <= kCacheLimit) {
      free_.emplace(bytes, p);
      cached_ += bytes;
    } else {
      std::free(p);
    }
    return true;
  }
  void release_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [bytes, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
  std::unordered_map<void*, size_t> used_;
  size_t cached_ = 0;
};

class CpuBackend final : public DeviceBackend {
 public:
  int device_count() const override { return 1; }
  void* allocate(size_t nbytes, int) override {
    const bool huge = nbytes >= kHugePageThreshold;
    const size_t align = huge ? kHugeAlignment : kAlignment;
    const size_t rounded = (std::max<size_t>(nbytes, 1) + align - 1) / align * align;
    if (!huge) return checked(std::aligned_alloc(align, rounded));
    if (void* p = large_.take(rounded)) return p;
    void* p = std::aligned_alloc(align, rounded);
    if (!p) {
      large_.release_cache();
      p = checked(std::aligned_alloc(align, rounded));
    }
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE);
#endif
    large_.add(p, rounded);
    return p;
  }
  void deallocate(void* ptr, int) override {
    // Only 2 MiB-aligned addresses can be large blocks: the others skip the lock.
    if (reinterpret_cast<uintptr_t>(ptr) % kHugeAlignment == 0 && large_.give_back(ptr)) return;
    std::free(ptr);
  }
  void copy_to_host(void* dst, const void* src, size_t n, int) override { std::memcpy(dst, src, n); }
  void copy_from_host(void* dst, const void* src, size_t n, int) override { std::memcpy(dst, src, n); }
  void* allocate_pinned(size_t) override { return nullptr; }
  void deallocate_pinned(void*) override {}
  bool is_pinned(const void*) const override { return false; }
  void synchronize(int) override {}
  void set_current(int) override {}
  DeviceInfo device_info(int) const override {
    DeviceInfo info;
    info.name = "cpu";
    info.compute_units = omp_get_num_procs();
    return info;
  }

 private:
  static void* checked(void* p) {
    if (!p) throw std::bad_alloc();
    return p;
  }
  // Never destroyed: tensors that static objects hold may be freed after this backend would be.
  LargeBlocks& large_ = *new LargeBlocks;
};

CpuBackend g_cpu;
// OpenBLAS single-threaded from the start: cpu/blas.h splits products across OpenMP threads.
const bool g_registered = (scipy_openblas_set_num_threads(1), register_backend(DeviceType::CPU, &g_cpu), true);

}  // namespace

int cpu_threads() { return omp_get_max_threads(); }

void set_cpu_threads(int n) {
  n = std::max(n, 1);
  omp_set_num_threads(n);  // OpenBLAS stays single-threaded (cpu/blas.h)
}

}  // namespace pyflame
