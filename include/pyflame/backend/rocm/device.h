#pragma once
// The spec's device management API (seed 000), namespace pyflame::backend::rocm.
// Without a usable GPU: is_available() is false, get_device_count() is 0,
// get_current_device() is -1, and set_device / get_device_info / synchronize
// raise ROCmNotAvailableError saying why (unavailable_reason()).

#include <cstddef>
#include <string>

#include "pyflame/device.h"
#include "pyflame/macros.h"

namespace pyflame::backend::rocm {

// The spec names it backend::rocm::DeviceInfo; the type is the core's, backend-neutral one.
using DeviceInfo = pyflame::DeviceInfo;

PF_API bool is_available();
PF_API int get_device_count();
PF_API int get_current_device();
PF_API void set_device(int device_id);
PF_API void synchronize();
PF_API DeviceInfo get_device_info(int device_id);
// Whether device `device_id` reads device `peer_id`'s memory directly (NVLink,
// xGMI, PCIe peer-to-peer): copies between them then skip the host.
PF_API bool can_device_access_peer(int device_id, int peer_id);
// Empty when available, else what is missing and what to do.
PF_API std::string unavailable_reason();

}  // namespace pyflame::backend::rocm
