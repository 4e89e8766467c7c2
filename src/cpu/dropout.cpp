// CPU dropout. Element i (row-major) is kept by the draw of
// kernels::dropout_keeps4 (four elements per Philox counter), so a mask is
// reproducible from the seed alone whatever the thread split or device.

#include <algorithm>

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
      const int64_t n = x.numel();
      parallel_for((n + 3) / 4, 1024, [&](int64_t b, int64_t e) {
        for (int64_t g = b; g < e; ++g) {
          const uint32_t keep = kernels::dropout_keeps4(at.seed, at.offset, g, at.p);
          for (int64_t i = 4 * g; i < std::min(n, 4 * g + 4); ++i)
            out[i] = static_cast<T>(keep >> (i - 4 * g) & 1 ? static_cast<A>(in[i]) * scale : A(0));
        }
      });
    }
  });
}

PF_REGISTER_KERNEL(dropout, CPU, &dropout_kernel);

}  // namespace
}  // namespace pyflame::cpu
