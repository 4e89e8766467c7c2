#include "core/backend.h"

namespace pyflame {

namespace {
DeviceBackend* g_backends[kNumDeviceTypes] = {};
}

DeviceBackend* backend_for(DeviceType type) { return g_backends[static_cast<int>(type)]; }
void register_backend(DeviceType type, DeviceBackend* backend) { g_backends[static_cast<int>(type)] = backend; }

std::string rocm_unavailable_reason() {
  if (backend_for(DeviceType::ROCm)) return "";
#ifdef PYFLAME_WITH_ROCM
  return "the ROCm backend is built in but did not start";
#else
  return "this build of PyFlame has no ROCm backend (rebuild with PYFLAME_USE_ROCM=ON; see docs/rocm.md)";
#endif
}

}  // namespace pyflame
