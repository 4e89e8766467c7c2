#include <atomic>

#include "core/backend.h"
#include "pyflame/backend/rocm/device.h"
#include "pyflame/error.h"

namespace pyflame::backend::rocm {

namespace {
std::atomic<int> g_rocm_index{0};

DeviceBackend& require(const char* what) {
  DeviceBackend* be = backend_for(DeviceType::ROCm);
  if (!be || be->device_count() == 0)
    throw ROCmNotAvailableError(std::string(what) + ": ROCm is not available: " + unavailable_reason());
  return *be;
}

void check_index(DeviceBackend& be, int device_id, const char* what) {
  int n = be.device_count();
  PF_CHECK(device_id >= 0 && device_id < n, DeviceError, what, ": invalid device id ", device_id, " (", n,
           " ROCm device(s) visible, valid ids 0..", n - 1, ")");
}
}  // namespace

std::string unavailable_reason() {
  std::string r = rocm_unavailable_reason();
  if (r.empty() && backend_for(DeviceType::ROCm)->device_count() == 0) r = "no GPU device is visible";
  return r;
}

bool is_available() { return unavailable_reason().empty(); }
int get_device_count() { return is_available() ? backend_for(DeviceType::ROCm)->device_count() : 0; }
int get_current_device() {
  if (!is_available()) return -1;
  Device d = current_device();
  return d.type == DeviceType::ROCm ? d.index : g_rocm_index.load();
}

void set_device(int device_id) {
  DeviceBackend& be = require("rocm_set_device");
  check_index(be, device_id, "rocm_set_device");
  be.set_current(device_id);
  g_rocm_index.store(device_id);
  if (current_device().type == DeviceType::ROCm) set_current_device(Device::rocm(device_id));
}

void synchronize() { require("rocm_synchronize").synchronize(get_current_device()); }

bool can_device_access_peer(int device_id, int peer_id) {
  DeviceBackend& be = require("rocm_can_device_access_peer");
  check_index(be, device_id, "rocm_can_device_access_peer");
  check_index(be, peer_id, "rocm_can_device_access_peer");
  return be.can_access_peer(device_id, peer_id);
}

DeviceInfo get_device_info(int device_id) {
  DeviceBackend& be = require("rocm_get_device_info");
  check_index(be, device_id, "rocm_get_device_info");
  return be.device_info(device_id);
}

}  // namespace pyflame::backend::rocm
