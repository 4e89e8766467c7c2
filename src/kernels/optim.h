#pragma once
// Optimizer updates as PF_HOST_DEVICE functors, shared by the CPU loop
// (src/cpu/optim.cpp) and the GPU kernel (src/rocm/kernels/optim.hip), so
// both devices compute the same update in the same order.
//
// Every update has the same shape, so one CPU loop, one GPU kernel and one
// infer serve them all: an element of the parameter p, its gradient g and
// kStates state values s (moments, buffers) go in, p and s come out, in the
// compute type A. uses_state says which states the options need (a state
// the options do not use is absent from the call and reads as 0).
//
// A call of an update op covers a list of parameters (ops.def has the
// layout): inputs (param, grad, s_0 .. s_{S-1}[, step]) per parameter, outputs
// (param, present states) per parameter. StepTensor is one parameter's
// pointers; step_tensor() reads them from the call. An update that counts
// steps (Adam's bias corrections) takes its step count from the attributes,
// or from a 0-d float32 tensor on the parameter's device: one a captured
// device graph or a compiled training step can advance (PyTorch's
// capturable=True), read by the kernel and turned into the corrections there.

#include <cstdint>

#include "kernels/math.h"
#include "pyflame/ir/attrs.h"
#include "pyflame/ir/op_call.h"
#include "pyflame/macros.h"

namespace pyflame::kernels {

// One element of PyTorch's Adam/AdamW step:
//   g = grad (+ wd p unless decoupled)  (negated with maximize)
//   p *= 1 - lr wd                        (decoupled)
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  v_max = max(v_max, v) (amsgrad)
//   p -= lr / bc1 * m / (sqrt(v or v_max) / sqrt(bc2) + eps)
template <class A> struct AdamUpdate {
  using Acc = A;
  using Attrs = AdamAttrs;
  static constexpr int kStates = 3;
  static constexpr const char* kNames[kStates] = {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  static constexpr bool kCountsSteps = true;
  static bool uses_state(const Attrs& a, int i) { return i < 2 || a.amsgrad; }

  A lr, beta1, beta2, eps, weight_decay, step_size, sqrt_bc2;
  A log_beta1, log_beta2;  // log(beta), rounded once from double: at_step's 1 - beta^t to A's precision
  bool decoupled, amsgrad, maximize;

  explicit AdamUpdate(const Attrs& a)
      : lr(static_cast<A>(a.lr)),
        beta1(static_cast<A>(a.beta1)),
        beta2(static_cast<A>(a.beta2)),
        eps(static_cast<A>(a.eps)),
        weight_decay(static_cast<A>(a.weight_decay)),
        step_size(static_cast<A>(a.lr / a.bias_correction1)),
        sqrt_bc2(static_cast<A>(std::sqrt(a.bias_correction2))),
        log_beta1(static_cast<A>(std::log(a.beta1))),
        log_beta2(static_cast<A>(std::log(a.beta2))),
        decoupled(a.decoupled_weight_decay),
        amsgrad(a.amsgrad),
        maximize(a.maximize) {}

  // The bias corrections of step t (a step count read on the device): 1 - beta^t as -expm1(t log(beta)),
  // which keeps its relative precision where beta^t is near 1 (1 - 0.999f alone is off by 1e-5).
  PF_HOST_DEVICE void at_step(float t) {
    step_size = lr / -math::expm1(static_cast<A>(t) * log_beta1);
    sqrt_bc2 = math::sqrt(-math::expm1(static_cast<A>(t) * log_beta2));
  }

  PF_HOST_DEVICE void operator()(A& p, A grad, A (&s)[kStates]) const {
    A& m = s[0];
    A& v = s[1];
    A g = maximize ? -grad : grad;
    if (weight_decay != A(0)) {
      if (decoupled) p *= A(1) - lr * weight_decay;
      else g += weight_decay * p;
    }
    m = beta1 * m + (A(1) - beta1) * g;
    v = beta2 * v + (A(1) - beta2) * g * g;
    A second = v;
    if (amsgrad) {
      s[2] = s[2] > v ? s[2] : v;
      second = s[2];
    }
    p -= step_size * m / (math::sqrt(second) / sqrt_bc2 + eps);
  }
};

// One element of PyTorch's SGD step:
//   g = grad + wd p                       (grad negated first with maximize)
//   b = g on the first step, else momentum b + (1 - dampening) g   (momentum != 0)
//   g = g + momentum b (nesterov), else b                          (momentum != 0)
//   p -= lr g
template <class A> struct SgdUpdate {
  using Acc = A;
  using Attrs = SgdAttrs;
  static constexpr int kStates = 1;
  static constexpr const char* kNames[kStates] = {"momentum_buffer"};
  static constexpr bool kCountsSteps = false;
  static bool uses_state(const Attrs& a, int) { return a.momentum != 0; }

  A lr, momentum, keep, weight_decay;
  bool nesterov, maximize, first_step;

  explicit SgdUpdate(const Attrs& a)
      : lr(static_cast<A>(a.lr)),
        momentum(static_cast<A>(a.momentum)),
        keep(static_cast<A>(1 - a.dampening)),
        weight_decay(static_cast<A>(a.weight_decay)),
        nesterov(a.nesterov),
        maximize(a.maximize),
        first_step(a.first_step) {}

  PF_HOST_DEVICE void operator()(A& p, A grad, A (&s)[kStates]) const {
    A g = maximize ? -grad : grad;
    if (weight_decay != A(0)) g += weight_decay * p;
    if (momentum != A(0)) {
      s[0] = first_step ? g : momentum * s[0] + keep * g;
      g = nesterov ? g + momentum * s[0] : s[0];
    }
    p -= lr * g;
  }
};

// One element of PyTorch's RMSprop step:
//   g = grad + wd p                       (grad negated first with maximize)
//   v = alpha v + (1 - alpha) g^2
//   a = alpha a + (1 - alpha) g;  d = sqrt(v - a^2) + eps   (centered; else d = sqrt(v) + eps)
//   b = momentum b + g / d;  p -= lr b    (momentum > 0; else p -= lr g / d)
template <class A> struct RmspropUpdate {
  using Acc = A;
  using Attrs = RmspropAttrs;
  static constexpr int kStates = 3;
  static constexpr const char* kNames[kStates] = {"square_avg", "momentum_buffer", "grad_avg"};
  static constexpr bool kCountsSteps = false;
  static bool uses_state(const Attrs& a, int i) { return i == 0 || (i == 1 ? a.momentum > 0 : a.centered); }

  A lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;

  explicit RmspropUpdate(const Attrs& a)
      : lr(static_cast<A>(a.lr)),
        alpha(static_cast<A>(a.alpha)),
        eps(static_cast<A>(a.eps)),
        weight_decay(static_cast<A>(a.weight_decay)),
        momentum(static_cast<A>(a.momentum)),
        centered(a.centered),
        maximize(a.maximize) {}

  PF_HOST_DEVICE void operator()(A& p, A grad, A (&s)[kStates]) const {
    A g = maximize ? -grad : grad;
    if (weight_decay != A(0)) g += weight_decay * p;
    A& v = s[0];
    v = alpha * v + (A(1) - alpha) * g * g;
    A d;
    if (centered) {
      s[2] = alpha * s[2] + (A(1) - alpha) * g;
      d = math::sqrt(v - s[2] * s[2]) + eps;
    } else {
      d = math::sqrt(v) + eps;
    }
    if (momentum > A(0)) {
      s[1] = momentum * s[1] + g / d;
      p -= lr * s[1];
    } else {
      p -= lr * g / d;
    }
  }
};

// Inputs per parameter of a call of update U: param, grad, the states and, where U counts steps, the step.
template <class U> constexpr size_t kInputsPerParam = 2 + U::kStates + (U::kCountsSteps ? 1 : 0);

// One parameter of an update call: its pointers (absent states: nullptr), size
// and step count (nullptr: the attributes' bias corrections).
template <class T, int S> struct StepTensor {
  const T* p;
  const T* g;
  const T* s[S];
  T* p_out;
  T* s_out[S];
  const float* step;
  int64_t n;
};

// Parameter j of a call of update U (inputs and outputs contiguous, of type T).
template <class T, class U> StepTensor<T, U::kStates> step_tensor(const OpCall& call, size_t j) {
  constexpr int S = U::kStates;
  const Tensor* in = &call.inputs[j * kInputsPerParam<U>];
  int present = 0;
  for (int i = 0; i < S; ++i) present += in[2 + i].defined();
  const Tensor* out = &call.outputs[j * (1 + present)];
  const bool stepped = U::kCountsSteps && in[2 + S].defined();
  StepTensor<T, S> t{in[0].data<T>(), in[1].data<T>(), {}, out[0].data<T>(), {},
                     stepped ? in[2 + S].data<float>() : nullptr, in[0].numel()};
  for (int i = 0, o = 1; i < S; ++i) {
    t.s[i] = in[2 + i].defined() ? in[2 + i].data<T>() : nullptr;
    t.s_out[i] = in[2 + i].defined() ? out[o++].data<T>() : nullptr;
  }
  return t;
}

// `update` as it applies to parameter t: at t's step count where it has one.
template <class T, int S, class Update>
PF_HOST_DEVICE Update update_for(const StepTensor<T, S>& t, const Update& update) {
  Update u = update;
  if constexpr (Update::kCountsSteps)
    if (t.step) u.at_step(*t.step);
  return u;
}

// Element i of parameter t through `update`, in its compute type.
template <class T, int S, class Update>
PF_HOST_DEVICE void step_element(const StepTensor<T, S>& t, int64_t i, const Update& update) {
  using A = typename Update::Acc;
  A p = static_cast<A>(t.p[i]);
  A s[S];
  for (int k = 0; k < S; ++k) s[k] = t.s[k] ? static_cast<A>(t.s[k][i]) : A(0);
  update(p, static_cast<A>(t.g[i]), s);
  t.p_out[i] = static_cast<T>(p);
  for (int k = 0; k < S; ++k)
    if (t.s_out[k]) t.s_out[k][i] = static_cast<T>(s[k]);
}

}  // namespace pyflame::kernels
