// Backends register here. The ROCm backend lives in its own library,
// libpyflame_rocm, next to libpyflame: loading it on demand keeps the core
// free of any GPU runtime dependency, so an install built with the GPU
// backend still imports and runs on a machine without a driver, and the
// loader's or runtime's error becomes the reason rocm_is_available() is False.

#include "core/backend.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace pyflame {

namespace {
DeviceBackend* g_backends[kNumDeviceTypes] = {};
std::string g_rocm_reason;

void load_rocm_backend() {
  const char* disabled = std::getenv("PYFLAME_DISABLE_ROCM");
  if (disabled && *disabled && std::string(disabled) != "0") {
    g_rocm_reason = "disabled by the environment variable PYFLAME_DISABLE_ROCM";
    return;
  }
  Dl_info self;
  if (!dladdr(reinterpret_cast<void*>(&load_rocm_backend), &self) || !self.dli_fname) {
    g_rocm_reason = "could not locate libpyflame to find the ROCm backend library next to it";
    return;
  }
  std::string dir = self.dli_fname;
  dir = dir.substr(0, dir.rfind('/') + 1);
  std::string path = dir + "libpyflame_rocm.so";
  if (void* probe = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(probe);  // already loaded (by the Python extension); fall through to init
  } else if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    g_rocm_reason = "this build of PyFlame has no ROCm backend (rebuild with PYFLAME_USE_ROCM=ON; see docs/rocm.md)";
    return;
  }
  // RTLD_LOCAL: the backend's dependencies (CUDA runtime, cuBLAS, cuDNN) must not
  // join the global symbol scope, where they would interpose on libraries loaded
  // later (importing PyTorch after PyFlame's GPU backend crashed that way).
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    g_rocm_reason = std::string("the ROCm backend library could not be loaded: ") + dlerror() +
                    " (is the GPU runtime, HIP or CUDA, installed and on the library path?)";
    return;
  }
  using InitFn = const char* (*)();
  auto init = reinterpret_cast<InitFn>(dlsym(handle, "pyflame_rocm_init"));
  if (!init) {
    g_rocm_reason = "libpyflame_rocm has no pyflame_rocm_init (a mismatched build?)";
    return;
  }
  if (const char* err = init()) g_rocm_reason = err;
}

void ensure_rocm_loaded() {
  static std::once_flag once;
  std::call_once(once, load_rocm_backend);
}
}  // namespace

DeviceBackend* backend_for(DeviceType type) {
  if (type == DeviceType::ROCm) ensure_rocm_loaded();
  return g_backends[static_cast<int>(type)];
}

void register_backend(DeviceType type, DeviceBackend* backend) { g_backends[static_cast<int>(type)] = backend; }

std::string rocm_unavailable_reason() {
  ensure_rocm_loaded();
  return g_backends[static_cast<int>(DeviceType::ROCm)] ? "" : g_rocm_reason;
}

}  // namespace pyflame
