// GPU optimizer updates: one grid-stride pass over the elements with the
// functor the CPU loop uses (kernels/optim.h), 64-bit indices.

#include "core/dispatch.h"
#include "kernels/optim.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

template <class T>
static __global__ void adam_step_elements(T* po, T* mo, T* vo, T* vmax_o, const T* p, const T* g, const T* m,
                                          const T* v, const T* vmax, int64_t n, kernels::AdamUpdate<acc_t<T>> update) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A pv = static_cast<A>(p[i]), mv = static_cast<A>(m[i]), vv = static_cast<A>(v[i]);
    A xv = vmax ? static_cast<A>(vmax[i]) : A(0);
    update(pv, static_cast<A>(g[i]), mv, vv, xv);
    po[i] = static_cast<T>(pv), mo[i] = static_cast<T>(mv), vo[i] = static_cast<T>(vv);
    if (vmax_o) vmax_o[i] = static_cast<T>(xv);
  }
}

// inputs: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq (or undefined), contiguous, one dtype.
void adam_step_entry(OpCall& call) {
  const int device = call.outputs[0].device().index;
  DeviceGuard guard(device);
  const AdamAttrs& a = call.attr<AdamAttrs>();
  const int64_t n = call.inputs[0].numel();
  if (n == 0) return;
  visit_dtype(call.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const unsigned grid = grid_for(n);
      adam_step_elements<T><<<grid, kThreads, 0, current_stream(device)>>>(
          call.outputs[0].data<T>(), call.outputs[1].data<T>(), call.outputs[2].data<T>(),
          a.amsgrad ? call.outputs[3].data<T>() : nullptr, call.inputs[0].data<T>(), call.inputs[1].data<T>(),
          call.inputs[2].data<T>(), call.inputs[3].data<T>(), a.amsgrad ? call.inputs[4].data<T>() : nullptr, n,
          kernels::AdamUpdate<acc_t<T>>(a));
    }
  });
  check_launch("adam_step", "parameter of " + std::to_string(n) + " elements (" +
                                dtype_name(call.inputs[0].dtype()) + ")");
}

PF_REGISTER_KERNEL(adam_step, ROCm, &adam_step_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
