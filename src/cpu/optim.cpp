// CPU optimizer updates: for each parameter of the call, one pass over its
// elements with the functor the GPU kernel uses (kernels/optim.h), in the
// compute type, split across threads.

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/optim.h"

namespace pyflame::cpu {
namespace {

template <template <class> class Update> void optimizer_step_kernel(OpCall& call) {
  const auto& attrs = call.attr<typename Update<float>::Attrs>();
  visit_dtype(call.inputs[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const Update<acc_t<T>> update(attrs);
      for (size_t j = 0; j < call.inputs.size() / kernels::kInputsPerParam<Update<float>>; ++j) {
        const auto t = kernels::step_tensor<T, Update<float>>(call, j);
        const Update<acc_t<T>> at_step = kernels::update_for(t, update);
        parallel_for(t.n, kParallelGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) kernels::step_element(t, i, at_step);
        });
      }
    }
  });
}

PF_REGISTER_KERNEL(adam_step, CPU, &optimizer_step_kernel<kernels::AdamUpdate>);
PF_REGISTER_KERNEL(sgd_step, CPU, &optimizer_step_kernel<kernels::SgdUpdate>);
PF_REGISTER_KERNEL(rmsprop_step, CPU, &optimizer_step_kernel<kernels::RmspropUpdate>);

}  // namespace
}  // namespace pyflame::cpu
