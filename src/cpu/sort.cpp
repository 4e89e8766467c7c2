// CPU sort and nonzero. sort views the contiguous input as [outer, n, inner]:
// each row (o, j) is sorted as an array of indices, compared by key then index
// (kernels/sort_order.h: a total order, so std::sort gives the stable result),
// and written to values and indices. Rows are split over threads.
// nonzero writes each nonzero entry's coordinates at the row its running count names.

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/sort_order.h"

namespace pyflame::cpu {
namespace {

void sort_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const SortAttrs& a = call.attr<SortAttrs>();
  Tensor &values = call.outputs[0], &indices = call.outputs[1];
  const int64_t d = a.dim, n = x.shape()[d];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  const bool descending = a.descending;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = x.data<T>();
    T* out = values.data<T>();
    int64_t* idx_out = indices.data<int64_t>();
    const int64_t rows = outer * inner;
    parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      std::vector<int64_t> order(n);
      std::vector<T> keys(n);
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = (r / inner) * n * inner + r % inner;
        for (int64_t i = 0; i < n; ++i) keys[i] = in[base + i * inner];
        std::iota(order.begin(), order.end(), int64_t{0});
        std::sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
          return kernels::sorts_before(keys[p], p, keys[q], q, descending);
        });
        for (int64_t i = 0; i < n; ++i) {
          out[base + i * inner] = keys[order[i]];
          idx_out[base + i * inner] = order[i];
        }
      }
    });
  });
}

void nonzero_kernel(OpCall& call) {
  const Tensor& counts = call.inputs[0];
  const int64_t* c = counts.data<int64_t>();
  int64_t* out = call.out().data<int64_t>();
  const Shape& shape = counts.shape();
  const int64_t ndim = counts.dim();
  parallel_for(counts.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (c[i] == (i ? c[i - 1] : 0)) continue;
      int64_t* row = out + (c[i] - 1) * ndim;
      for (int64_t k = ndim - 1, rest = i; k >= 0; --k) {
        row[k] = rest % shape[k];
        rest /= shape[k];
      }
    }
  });
}

PF_REGISTER_KERNEL(sort, CPU, &sort_kernel);
PF_REGISTER_KERNEL(nonzero, CPU, &nonzero_kernel);

}  // namespace
}  // namespace pyflame::cpu
