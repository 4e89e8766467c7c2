#pragma once
// Devices. A Device names where memory lives and where an op runs; the
// "current device" (set_device) is where new tensors go and ops execute.

#include <cstddef>
#include <cstdint>
#include <optional>
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

// What a backend reports about one of its devices. Backend-neutral: the CPU
// fills name and compute_units; GPU backends fill the rest.
struct DeviceInfo {
  int device_id = 0;
  std::string name;
  std::string architecture;  // 'gfx90a' on AMD, 'sm_90' on NVIDIA
  size_t total_memory = 0;
  size_t free_memory = 0;
  int compute_units = 0;
  std::string platform;         // 'amd' or 'nvidia'
  int warp_size = 0;            // 64 on CDNA (gfx9), 32 on RDNA and NVIDIA
  std::string runtime_version;  // e.g. 'HIP 6.2.41133' or 'CUDA runtime 13.0, driver 13.0'
};

// The current device of this process (not per thread, like the spec's set_device).
PF_API Device current_device();
// Checks that the device exists and is usable; raises otherwise.
PF_API void set_current_device(const Device& d);

// Makes `device` the current device of this thread for the scope (when given):
// what a factory's device= argument means, so that a tensor is made, and its
// random numbers drawn, where it will live.
class PF_API DeviceScope {
 public:
  explicit DeviceScope(std::optional<Device> device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  std::optional<Device> previous_;
  bool active_ = false;
};
// Waits for all queued work on the current device; with the CPU current, on the GPU that
// rocm_set_device chose (placed tensors work there whatever the current device), if any.
PF_API void synchronize();

// Implicit copies: an op whose inputs live on another device than the one it
// runs on copies them there. They are counted; in strict mode they raise.
PF_API int64_t implicit_copy_count();
PF_API void reset_implicit_copy_count();
PF_API void set_strict_device_placement(bool strict);
PF_API bool strict_device_placement();

// Copies between host and device memory, either way, counted by the GPU backend: an op over
// placed GPU tensors makes none (tests hold every op to that).
PF_API int64_t host_transfer_count();
PF_API void reset_host_transfer_count();

// How many times the host has waited for a device: synchronize(), reads of
// device memory on the host (item(), numpy(), to('cpu')) and copies that must
// wait for queued work. Ops whose output shapes do not depend on values never
// add to it; tests use it to prove that.
PF_API int64_t synchronization_count();

// Number of CPU threads used by the CPU backend (OpenMP and BLAS).
PF_API int cpu_threads();
PF_API void set_cpu_threads(int n);

}  // namespace pyflame
