// CPU var and std. The input is viewed as [kept..., reduced...] (copied into
// that order when needed) so each output reduces one contiguous row, in two
// passes in double (cpu/moments.h).

#include <algorithm>
#include <cmath>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "cpu/moments.h"

namespace pyflame::cpu {
namespace {

template <bool kStd> void variance_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const std::vector<int64_t>& dims = call.attr<ReduceAttrs>().dims;
  std::vector<int64_t> order;
  int64_t rlen = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) order.push_back(d);
  for (int64_t d : dims) order.push_back(d), rlen *= x.shape()[d];
  const int64_t rows = call.out().numel();
  // PyTorch's divisor max(0, n - correction): a non-positive one gives inf or NaN.
  const double divisor = std::max(0.0, static_cast<double>(rlen) - call.attr<ReduceAttrs>().correction);
  Tensor in = x.permute(order).contiguous();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const T* src = in.data<T>();
      T* out = call.out().data<T>();
      parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rlen, 1)), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const T* row = src + r * rlen;
          const double mean = row_sum(row, rlen) / static_cast<double>(rlen);
          const double v = row_squared_deviation(row, rlen, mean) / divisor;
          out[r] = static_cast<T>(static_cast<acc_t<T>>(kStd ? std::sqrt(v) : v));
        }
      });
    }
  });
}

PF_REGISTER_KERNEL(var, CPU, &variance_kernel<false>);
PF_REGISTER_KERNEL(std, CPU, &variance_kernel<true>);

}  // namespace
}  // namespace pyflame::cpu
