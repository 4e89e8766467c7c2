#pragma once
// The spec's device management API (seed 000), namespace pyflame::backend::rocm.
// Without a usable GPU: is_available() is false, get_device_count() is 0,
// get_current_device() is -1, and set_device / get_device_info / synchronize
// raise ROCmNotAvailableError saying why (unavailable_reason()).

#include <cstddef>
#include <string>

#include "pyflame/macros.h"

namespace pyflame::backend::rocm {

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

PF_API bool is_available();
PF_API int get_device_count();
PF_API int get_current_device();
PF_API void set_device(int device_id);
PF_API void synchronize();
PF_API DeviceInfo get_device_info(int device_id);
// Empty when available, else what is missing and what to do.
PF_API std::string unavailable_reason();

}  // namespace pyflame::backend::rocm
