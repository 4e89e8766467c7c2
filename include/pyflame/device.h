#pragma once
// Devices. A Device names where memory lives and where an op runs; the
// "current device" (set_device) is where new tensors go and ops execute.

#include <cstddef>
#include <cstdint>
#include <string>

#include "pyflame/macros.h"

namespace pyflame {

enum class DeviceType : int8_t { CPU = 0, ROCm = 1 };
constexpr int kNumDeviceTypes = 2;

struct PF_API Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // always 0 for the CPU

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device rocm(int index) { return {DeviceType::ROCm, index}; }
  // 'cpu', 'rocm', 'rocm:N'. ValueError for malformed strings; NotSupportedError
  // (a RuntimeError) for device kinds this library does not implement.
  static Device parse(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

PF_API std::string to_string(const Device& d);  // 'cpu' or 'rocm:N'

// The current device of this process (not per thread, like the spec's set_device).
PF_API Device current_device();
// Checks that the device exists and is usable; raises otherwise.
PF_API void set_current_device(const Device& d);
// Waits for all queued work on the current device (no-op on the CPU).
PF_API void synchronize();

// Implicit copies: an op whose inputs live on another device than the one it
// runs on copies them there. They are counted; in strict mode they raise.
PF_API int64_t implicit_copy_count();
PF_API void reset_implicit_copy_count();
PF_API void set_strict_device_placement(bool strict);
PF_API bool strict_device_placement();

// Number of CPU threads used by the CPU backend (OpenMP and BLAS).
PF_API int cpu_threads();
PF_API void set_cpu_threads(int n);

}  // namespace pyflame
