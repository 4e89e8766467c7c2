// Copies between two GPUs. Where the runtime reports peer access between two
// devices, it is enabled both ways once (the first copy pays for it) and the copy
// goes directly between the two memories (NVLink, xGMI or PCIe peer-to-peer); elsewhere hipMemcpyPeerAsync stages through host
// memory itself. The copy runs on the source's current stream after the work
// queued so far on the destination's current stream (an event), and the
// destination's stream waits for the copy before its later work: neither host
// waits, as in PyTorch's device-to-device copy, which also runs on the source.

#include "rocm/peer.h"

#include <mutex>
#include <set>
#include <utility>

#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"

namespace pyflame::backend::rocm {

namespace {

// `device` reads `peer`'s memory directly from now on, where the hardware allows.
void enable_peer_access(int device, int peer) {
  static std::mutex mutex;
  static std::set<std::pair<int, int>> enabled;
  std::lock_guard<std::mutex> lock(mutex);
  if (!enabled.insert({device, peer}).second || !can_access_peer(device, peer)) return;
  DeviceGuard guard(device);
  const hipError_t err = hipDeviceEnablePeerAccess(peer, 0);
  if (err == hipErrorPeerAccessAlreadyEnabled) {
    (void)hipGetLastError();  // enabled elsewhere (another library in the process): as wanted
    return;
  }
  HIP_CHECK(err);
}

// `waiting` (on `waiting_device`) runs its later work after what `stream` has queued so far.
void wait_for(hipStream_t waiting, int waiting_device, hipStream_t stream, int device) {
  hipEvent_t event;
  {
    DeviceGuard guard(device);
    HIP_CHECK(hipEventCreateWithFlags(&event, hipEventDisableTiming));
    HIP_CHECK(hipEventRecord(event, stream));
  }
  DeviceGuard guard(waiting_device);
  HIP_CHECK(hipStreamWaitEvent(waiting, event, 0));
  HIP_CHECK(hipEventDestroy(event));  // released by the runtime once the wait is done
}

}  // namespace

bool can_access_peer(int device, int peer) {
  if (device == peer) return false;
  int can = 0;
  HIP_CHECK(hipDeviceCanAccessPeer(&can, device, peer));
  return can != 0;
}

void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  if (bytes == 0) return;
  enable_peer_access(src_device, dst_device);
  enable_peer_access(dst_device, src_device);
  const hipStream_t src_stream = current_stream(src_device), dst_stream = current_stream(dst_device);
  wait_for(src_stream, src_device, dst_stream, dst_device);
  {
    DeviceGuard guard(src_device);
    // With peer access both ways, a plain device-to-device copy (unified addresses) is the
    // runtime's fastest path, as in PyTorch; hipMemcpyPeerAsync stages where there is none.
    if (can_access_peer(src_device, dst_device) && can_access_peer(dst_device, src_device))
      HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, src_stream));
    else
      HIP_CHECK(hipMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, src_stream));
  }
  wait_for(dst_stream, dst_device, src_stream, src_device);
}

}  // namespace pyflame::backend::rocm
