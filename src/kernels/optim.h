#pragma once
// Optimizer updates as PF_HOST_DEVICE functors, shared by the CPU loop
// (src/cpu/optim.cpp) and the GPU kernel (src/rocm/kernels/optim.hip), so
// both devices compute the same update in the same order.

#include "kernels/math.h"
#include "pyflame/ir/attrs.h"
#include "pyflame/macros.h"

namespace pyflame::kernels {

// One element of PyTorch's Adam/AdamW step, in the compute type A:
//   g = grad (+ wd p unless decoupled)  (negated with maximize)
//   p *= 1 - lr wd                        (decoupled)
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  v_max = max(v_max, v) (amsgrad)
//   p -= lr / bc1 * m / (sqrt(v or v_max) / sqrt(bc2) + eps)
template <class A> struct AdamUpdate {
  A lr, beta1, beta2, eps, weight_decay, step_size, sqrt_bc2;
  bool decoupled, amsgrad, maximize;

  explicit AdamUpdate(const AdamAttrs& a)
      : lr(static_cast<A>(a.lr)),
        beta1(static_cast<A>(a.beta1)),
        beta2(static_cast<A>(a.beta2)),
        eps(static_cast<A>(a.eps)),
        weight_decay(static_cast<A>(a.weight_decay)),
        step_size(static_cast<A>(a.lr / a.bias_correction1)),
        sqrt_bc2(static_cast<A>(std::sqrt(a.bias_correction2))),
        decoupled(a.decoupled_weight_decay),
        amsgrad(a.amsgrad),
        maximize(a.maximize) {}

  PF_HOST_DEVICE void operator()(A& p, A grad, A& m, A& v, A& v_max) const {
    A g = maximize ? -grad : grad;
    if (weight_decay != A(0)) {
      if (decoupled) p *= A(1) - lr * weight_decay;
      else g += weight_decay * p;
    }
    m = beta1 * m + (A(1) - beta1) * g;
    v = beta2 * v + (A(1) - beta2) * g * g;
    A second = v;
    if (amsgrad) {
      v_max = v_max > v ? v_max : v;
      second = v_max;
    }
    p -= step_size * m / (math::sqrt(second) / sqrt_bc2 + eps);
  }
};

}  // namespace pyflame::kernels
