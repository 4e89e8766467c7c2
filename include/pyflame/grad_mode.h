#pragma once
// Grad mode, per thread (PyTorch's no_grad, enable_grad, set_grad_enabled). A core
// fact: the op layer reads it on every call; the autograd engine records only while it is on.

#include "pyflame/macros.h"

namespace pyflame::autograd {

PF_API bool is_grad_enabled();
PF_API void set_grad_enabled(bool enabled);

class PF_API GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace pyflame::autograd
