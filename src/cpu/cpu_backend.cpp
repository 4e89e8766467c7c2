// The CPU device: 64-byte aligned host memory (large blocks ask the kernel
// for transparent huge pages, which cuts first-touch page faults the way
// NumPy's allocator does) and the thread count shared by OpenMP and OpenBLAS.

#include <cblas.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/backend.h"

namespace pyflame {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kHugePageThreshold = size_t{4} << 20;

class CpuBackend final : public DeviceBackend {
 public:
  int device_count() const override { return 1; }
  void* allocate(size_t nbytes, int) override {
    bool huge = nbytes >= kHugePageThreshold;
    size_t align = huge ? (size_t{2} << 20) : kAlignment;
    size_t rounded = (std::max<size_t>(nbytes, 1) + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (huge) madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
  }
  void deallocate(void* ptr, int) override { std::free(ptr); }
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
