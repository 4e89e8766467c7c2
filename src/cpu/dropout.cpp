// CPU dropout. Element i (row-major) is kept when the uniform float that
// Philox counter offset + i gives is at least p: the draw pf.rand (float32)
// makes for element i, so a mask is reproducible from the seed alone whatever
// the thread split or device.

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/random.h"

namespace pyflame::cpu {
namespace {

void dropout_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const RandomAttrs& at = call.attr<RandomAttrs>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const A scale = static_cast<A>(1.0 / (1.0 - at.p));  // inf for p = 1: nothing is kept then
      const T* in = x.data<T>();
      T* out = call.out().data<T>();
      parallel_for(x.numel(), 4096, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const bool keep = kernels::dropout_keeps(at.seed, at.offset, i, at.p);
          out[i] = static_cast<T>(keep ? static_cast<A>(in[i]) * scale : A(0));
        }
      });
    }
  });
}

PF_REGISTER_KERNEL(dropout, CPU, &dropout_kernel);

}  // namespace
}  // namespace pyflame::cpu
