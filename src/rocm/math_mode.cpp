#include "pyflame/backend/rocm/math_mode.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace pyflame::backend::rocm {
namespace {

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::string s(v);
  return !(s == "0" || s == "false" || s == "False" || s == "OFF" || s == "off" || s == "no");
}

std::atomic<bool> g_matmul_tf32{env_flag("PYFLAME_ALLOW_TF32", false)};
std::atomic<bool> g_conv_tf32{env_flag("PYFLAME_CONV_ALLOW_TF32", true)};
std::atomic<bool> g_dnn_enabled{env_flag("PYFLAME_DNN_ENABLED", true)};

}  // namespace

void set_allow_tf32(bool allow) { g_matmul_tf32 = allow; }
bool allow_tf32() { return g_matmul_tf32; }
void set_conv_allow_tf32(bool allow) { g_conv_tf32 = allow; }
bool conv_allow_tf32() { return g_conv_tf32; }
void set_dnn_enabled(bool enabled) { g_dnn_enabled = enabled; }
bool dnn_enabled() { return g_dnn_enabled; }

}  // namespace pyflame::backend::rocm
