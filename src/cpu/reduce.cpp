// CPU reductions. The input is viewed as [kept..., reduced...]; when that is
// contiguous each output reduces one contiguous row (8 independent
// accumulators, so the loop vectorises without reassociating a single sum),
// and when the reduced dims lead (column sums) whole rows are combined into
// a vector of accumulators. Other layouts are copied into the first form.
// Float sums accumulate in double: the CPU backend is the reference.

#include <algorithm>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/functors.h"

namespace pyflame::cpu {
namespace {

// Accumulator type: double for float sums/products, int64 for integer
// sums/products (the op layer already widened the dtype), else the compute type.
template <template <class> class R, class T> struct AccumFor { using type = acc_t<T>; };
template <class T> struct AccumWide { using type = std::conditional_t<is_float_v<T>, double, int64_t>; };
template <class T> struct AccumFor<kernels::SumReduce, T> : AccumWide<T> {};
template <class T> struct AccumFor<kernels::MeanReduce, T> : AccumWide<T> {};
template <class T> struct AccumFor<kernels::ProdReduce, T> : AccumWide<T> {};

template <template <class> class R> void reduce_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const std::vector<int64_t>& dims = call.attr<ReduceAttrs>().dims;
  std::vector<int64_t> order, kept_shape;
  int64_t rlen = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) order.push_back(d), kept_shape.push_back(x.shape()[d]);
  for (int64_t d : dims) order.push_back(d), rlen *= x.shape()[d];
  const int64_t kept = shape_numel(kept_shape);

  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    {
      using A = typename AccumFor<R, T>::type;
      const R<A> r;
      T* out = call.out().data<T>();

      // Reduced dims leading, kept dims trailing and contiguous: combine rows.
      bool leading = x.is_contiguous() && dims.size() > 0 && dims.back() == static_cast<int64_t>(dims.size()) - 1 &&
                     kept > 1;
      if (leading) {
        const T* in = x.data<T>();
        parallel_for(kept, std::max<int64_t>(256, kParallelGrain / std::max<int64_t>(rlen, 1)), [&](int64_t b, int64_t e) {
          std::vector<A> acc(e - b, R<A>::identity());
          for (int64_t row = 0; row < rlen; ++row) {
            const T* src = in + row * kept + b;
            for (int64_t j = 0; j < e - b; ++j) acc[j] = r(acc[j], static_cast<A>(src[j]));
          }
          for (int64_t j = 0; j < e - b; ++j) out[b + j] = static_cast<T>(r.finish(acc[j], rlen));
        });
        return;
      }
      // Reduced dims already trailing in a contiguous input: the rows are the input itself.
      const bool trailing = x.is_contiguous() && (dims.empty() || dims.front() == x.dim() - static_cast<int64_t>(dims.size()));
      Tensor rows = trailing ? x : x.permute(order).contiguous();
      const T* in = rows.data<T>();
      parallel_for(kept, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rlen, 1)), [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const T* src = in + k * rlen;
          A acc[8];
          for (A& a : acc) a = R<A>::identity();
          int64_t i = 0;
          for (; i + 8 <= rlen; i += 8)
            for (int l = 0; l < 8; ++l) acc[l] = r(acc[l], static_cast<A>(src[i + l]));
          for (; i < rlen; ++i) acc[0] = r(acc[0], static_cast<A>(src[i]));
          A total = acc[0];
          for (int l = 1; l < 8; ++l) total = r(total, acc[l]);
          out[k] = static_cast<T>(r.finish(total, rlen));
        }
      });
    }
  });
}

// argmax/argmin over one dim d: x viewed as [outer, n, inner].
template <template <class> class R> void arg_reduce_kernel(OpCall& call) {
  Tensor x = call.inputs[0].contiguous();
  const std::vector<int64_t>& dims = call.attr<ReduceAttrs>().dims;
  const int64_t d = dims.empty() ? 0 : dims[0];
  const int64_t n = x.shape()[d];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  int64_t* out = call.out().data<int64_t>();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      using A = acc_t<T>;
      const R<A> r;
      const T* in = x.data<T>();
      parallel_for(outer * inner, std::max<int64_t>(1, kParallelGrain / n), [&](int64_t b, int64_t e) {
        for (int64_t oi = b; oi < e; ++oi) {
          const T* src = in + (oi / inner) * n * inner + oi % inner;
          A best = static_cast<A>(src[0]);
          int64_t best_i = 0;
          for (int64_t i = 1; i < n; ++i) {
            A v = static_cast<A>(src[i * inner]);
            if (r.better(v, best)) best = v, best_i = i;
          }
          out[oi] = best_i;
        }
      });
    }
  });
}

#define PF_FAMILY_REDUCE(name, F) PF_REGISTER_KERNEL(name, CPU, &reduce_kernel<kernels::F>);
#define PF_FAMILY_ARG_REDUCE(name, F) PF_REGISTER_KERNEL(name, CPU, &arg_reduce_kernel<kernels::F>);
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::cpu
