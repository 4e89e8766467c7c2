// CPU random ops: rand, randn, randint. Element i (row-major) draws from
// Philox counter offset + i, so the numbers are independent of how the work
// is split and equal to the GPU's (src/kernels/random.h has the draws).

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/random.h"

namespace pyflame::cpu {
namespace {

template <kernels::Distribution kDist> void random_kernel(OpCall& call) {
  const RandomAttrs& a = call.attr<RandomAttrs>();
  visit_dtype(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = call.out().data<T>();
    const kernels::RandomDraw<T, kDist> draw(a);
    parallel_for(call.out().numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) p[i] = draw(i);
    });
  });
}

PF_REGISTER_KERNEL(rand, CPU, &random_kernel<kernels::Distribution::Uniform>);
PF_REGISTER_KERNEL(randn, CPU, &random_kernel<kernels::Distribution::Normal>);
PF_REGISTER_KERNEL(randint, CPU, &random_kernel<kernels::Distribution::Integer>);

}  // namespace
}  // namespace pyflame::cpu
