#pragma once
// Copies between two GPUs of this backend (peer.cpp has the design).

#include <cstddef>

namespace pyflame::backend::rocm {

// Whether `device` can read `peer`'s memory directly (false for the same device).
bool can_access_peer(int device, int peer);
// `bytes` contiguous bytes from `src` on `src_device` to `dst` on `dst_device`,
// ordered after the source's current stream and before its later work.
void copy_between_devices(void* dst, int dst_device, const void* src, int src_device, size_t bytes);

}  // namespace pyflame::backend::rocm
