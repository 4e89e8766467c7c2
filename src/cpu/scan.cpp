// CPU scans along one dim (cumsum, cumprod: kernels/scan.h's combine
// operators): the input (already in the result dtype) is viewed as
// [outer, n, inner]. Running values are kept in double for floats and int64
// for integers (PyTorch's CPU accumulation types): one per row when the dim is
// the last, else one per inner position, so every loop runs along contiguous
// memory. Work is split over (outer, blocks of inner), which also
// parallelises a scan over the leading dim.

#include <algorithm>
#include <vector>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/scan.h"

namespace pyflame::cpu {
namespace {

using kernels::scan_acc_t;

constexpr int64_t kInnerBlock = 1024;

template <template <class> class Combine> void scan_kernel(OpCall& call) {
  Tensor x = call.inputs[0].contiguous();
  const int64_t d = call.attr<DimAttrs>().dim, n = x.shape()[d];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  const int64_t blocks = (inner + kInnerBlock - 1) / kInnerBlock;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = scan_acc_t<T>;
    const Combine<A> f;
    const T* in = x.data<T>();
    T* out = call.out().data<T>();
    if (inner == 1) {  // along contiguous rows: one running value per row
      parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          A acc = Combine<A>::identity();
          for (int64_t i = 0; i < n; ++i) {
            acc = f(acc, static_cast<A>(in[o * n + i]));
            out[o * n + i] = static_cast<T>(static_cast<acc_t<T>>(acc));
          }
        }
      });
      return;
    }
    parallel_for(outer * blocks, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * kInnerBlock, 1)),
                 [&](int64_t b, int64_t e) {
                   std::vector<A> acc;
                   for (int64_t task = b; task < e; ++task) {
                     const int64_t o = task / blocks, j0 = (task % blocks) * kInnerBlock;
                     const int64_t width = std::min(kInnerBlock, inner - j0);
                     acc.assign(width, Combine<A>::identity());
                     const T* src = in + o * n * inner + j0;
                     T* dst = out + o * n * inner + j0;
                     for (int64_t i = 0; i < n; ++i)
                       for (int64_t j = 0; j < width; ++j) {
                         acc[j] = f(acc[j], static_cast<A>(src[i * inner + j]));
                         dst[i * inner + j] = static_cast<T>(static_cast<acc_t<T>>(acc[j]));
                       }
                   }
                 });
  });
}

PF_REGISTER_KERNEL(cumsum, CPU, &scan_kernel<kernels::ScanSum>);
PF_REGISTER_KERNEL(cumprod, CPU, &scan_kernel<kernels::ScanProd>);

}  // namespace
}  // namespace pyflame::cpu
