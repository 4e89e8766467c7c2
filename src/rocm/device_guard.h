#pragma once
// Makes `device` the HIP current device for a scope, restoring the previous one.

#include "pyflame/backend/rocm/hip_check.h"

namespace pyflame::backend::rocm {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    HIP_CHECK(hipGetDevice(&previous_));
    if (previous_ != device) HIP_CHECK(hipSetDevice(device));
    device_ = device;
  }
  ~DeviceGuard() {
    if (previous_ != device_) (void)hipSetDevice(previous_);  // a destructor must not throw
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int device_ = 0;
};

}  // namespace pyflame::backend::rocm
