// CPU optimizer updates: one pass over the elements with the functor the GPU
// kernel uses (kernels/optim.h), in the compute type, split across threads.

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/optim.h"

namespace pyflame::cpu {
namespace {

// inputs: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (or undefined), contiguous, one dtype.
void adam_step_kernel(OpCall& call) {
  const AdamAttrs& a = call.attr<AdamAttrs>();
  const int64_t n = call.inputs[0].numel();
  visit_dtype(call.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const kernels::AdamUpdate<A> update(a);
      const T *p = call.inputs[0].data<T>(), *g = call.inputs[1].data<T>(), *m = call.inputs[2].data<T>(),
              *v = call.inputs[3].data<T>(), *vmax = a.amsgrad ? call.inputs[4].data<T>() : nullptr;
      T *po = call.outputs[0].data<T>(), *mo = call.outputs[1].data<T>(), *vo = call.outputs[2].data<T>(),
        *vmax_o = a.amsgrad ? call.outputs[3].data<T>() : nullptr;
      parallel_for(n, kParallelGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          A pv = static_cast<A>(p[i]), mv = static_cast<A>(m[i]), vv = static_cast<A>(v[i]);
          A xv = vmax ? static_cast<A>(vmax[i]) : A(0);
          update(pv, static_cast<A>(g[i]), mv, vv, xv);
          po[i] = static_cast<T>(pv), mo[i] = static_cast<T>(mv), vo[i] = static_cast<T>(vv);
          if (vmax_o) vmax_o[i] = static_cast<T>(xv);
        }
      });
    }
  });
}

PF_REGISTER_KERNEL(adam_step, CPU, &adam_step_kernel);

}  // namespace
}  // namespace pyflame::cpu
