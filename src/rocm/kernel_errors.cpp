#include "rocm/kernel_errors.h"

#include <mutex>

#include "pyflame/backend/rocm/hip_check.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {

namespace {
std::mutex g_mutex;
KernelErrorSlot g_slots[kMaxDevices] = {};  // the addresses kernels use
KernelError* g_records[kMaxDevices] = {};   // the same records' host addresses

// Frees the slots at exit. Made on the first slot, after the GPU runtime has
// started, so it is destroyed before the runtime's own exit handler tears the
// runtime down; a call that fails anyway (the runtime already gone) is ignored.
struct ReleaseSlotsAtExit {
  ~ReleaseSlotsAtExit() {
    for (int d = 0; d < kMaxDevices; ++d) {
      if (!g_records[d]) continue;
      (void)hipHostFree(g_records[d]);
      (void)hipFree(g_slots[d].claimed);
    }
  }
};
}  // namespace

KernelErrorSlot kernel_error_slot(int device) {
  PF_CHECK(device >= 0 && device < kMaxDevices, DeviceError, "device ", device, " is beyond the ", kMaxDevices,
           " devices this build supports");
  std::lock_guard<std::mutex> lock(g_mutex);
  KernelErrorSlot& s = g_slots[device];
  if (!s.record) {
    DeviceGuard guard(device);
    void* host = nullptr;
    HIP_CHECK(hipHostMalloc(&host, sizeof(KernelError), hipHostMallocMapped));
    *static_cast<KernelError*>(host) = KernelError{};
    void* mapped = nullptr;
    HIP_CHECK(hipHostGetDevicePointer(&mapped, host, 0));
    HIP_CHECK(hipMalloc(reinterpret_cast<void**>(&s.claimed), sizeof(int32_t)));
    HIP_CHECK(hipMemset(s.claimed, 0, sizeof(int32_t)));
    s.record = static_cast<KernelError*>(mapped);
    g_records[device] = static_cast<KernelError*>(host);
    static ReleaseSlotsAtExit release_at_exit;  // after the runtime's first calls (see above)
  }
  return s;
}

void raise_pending_kernel_error(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  KernelError e;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    KernelError* record = g_records[device];
    if (!record || record->code == 0) return;
    e = *record;
    *record = KernelError{};
    DeviceGuard guard(device);
    HIP_CHECK(hipMemset(g_slots[device].claimed, 0, sizeof(int32_t)));
  }
  raise_kernel_error(e);
}

}  // namespace pyflame::backend::rocm
