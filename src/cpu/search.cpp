// CPU searchsorted: sorted_sequence (rows, n) and values (rows, m), both
// contiguous in one dtype; one binary search per value (kernels/search.h).

#include <algorithm>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/search.h"

namespace pyflame::cpu {
namespace {

void searchsorted_kernel(OpCall& call) {
  const Tensor &seq = call.inputs[0], &values = call.inputs[1];
  Tensor& out = call.out();
  const bool right = call.attr<SearchAttrs>().right;
  const int64_t n = seq.shape()[1], m = values.shape()[1], total = values.numel();
  visit_dtype(seq.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* s = seq.data<T>();
    const T* v = values.data<T>();
    auto run = [&](auto* o) {
      using I = std::remove_pointer_t<decltype(o)>;
      // A search costs about log2(n) reads: grain in values accordingly.
      const int64_t grain = std::max<int64_t>(1, kParallelGrain / 16);
      parallel_for(total, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          o[i] = static_cast<I>(kernels::search_sorted_row(s + (i / m) * n, n, v[i], right));
      });
    };
    if (out.dtype() == DType::Int32) run(out.data<int32_t>());
    else run(out.data<int64_t>());
  });
}

PF_REGISTER_KERNEL(searchsorted, CPU, &searchsorted_kernel);

}  // namespace
}  // namespace pyflame::cpu
