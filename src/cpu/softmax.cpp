// CPU softmax and log_softmax over any dim, stable for large logits, and
// their backward passes: the input is viewed as [outer, n, inner]; each
// (outer, inner) line subtracts its max before exponentiating.

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/lanes.h"
#include "cpu/loops.h"
#include "kernels/math.h"

namespace pyflame::cpu {
namespace {

// Lines along a dim with unit stride (inner == 1): the common last-dim case.
// Max and sum run in lanes (cpu/lanes.h) so the loops vectorise.
template <class T, bool kLog> void softmax_row(const T* in, T* out, int64_t n) {
  using A = acc_t<T>;
  const A mx = lanes_max<A>(n, -std::numeric_limits<A>::infinity(), [&](int64_t i) { return static_cast<A>(in[i]); });
  // float: the exponentials are kept in `out` and then scaled, one exp an element; a 16-bit `out`
  // would round them before the scaling, so those compute them again.
  constexpr bool kKeep = !kLog && std::is_same_v<T, A>;
  const A sum = lanes_sum<A>(n, [&](int64_t i) {
    const A e = math::exp(static_cast<A>(in[i]) - mx);
    if constexpr (kKeep) out[i] = e;
    return e;
  });
  if constexpr (kLog) {
    // (x - max) - log(sum): subtracting max first keeps large logits exact.
    const A log_sum = math::log(sum);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>((static_cast<A>(in[i]) - mx) - log_sum);
  } else if constexpr (kKeep) {
    const A scale = A(1) / sum;
    for (int64_t i = 0; i < n; ++i) out[i] *= scale;
  } else {
    const A scale = A(1) / sum;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(math::exp(static_cast<A>(in[i]) - mx) * scale);
  }
}

// Lines with stride `inner` > 1: process a whole inner row at a time so every
// loop runs along contiguous memory.
template <class T, bool kLog> void softmax_lines(const T* in, T* out, int64_t n, int64_t inner) {
  using A = acc_t<T>;
  std::vector<A> mx(inner, -std::numeric_limits<A>::infinity()), sum(inner, A(0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inner; ++j) mx[j] = std::max(mx[j], static_cast<A>(in[i * inner + j]));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inner; ++j) sum[j] += math::exp(static_cast<A>(in[i * inner + j]) - mx[j]);
  for (int64_t j = 0; j < inner; ++j) sum[j] = kLog ? math::log(sum[j]) : A(1) / sum[j];
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < inner; ++j) {
      A v = static_cast<A>(in[i * inner + j]) - mx[j];
      out[i * inner + j] = static_cast<T>(kLog ? v - sum[j] : math::exp(v) * sum[j]);
    }
}

// A contiguous tensor as [outer, n, inner] around dim d.
struct Lines {
  int64_t outer = 1, n, inner = 1;
  Lines(const Shape& s, int64_t d) : n(s[d]) {
    for (int64_t i = 0; i < d; ++i) outer *= s[i];
    for (int64_t i = d + 1; i < static_cast<int64_t>(s.size()); ++i) inner *= s[i];
  }
};

template <bool kLog> void softmax_kernel(OpCall& call) {
  Tensor x = call.inputs[0].contiguous();
  const auto [outer, n, inner] = Lines(x.shape(), call.attr<DimAttrs>().dim);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const T* in = x.data<T>();
      T* out = call.out().data<T>();
      parallel_for(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * inner, 1)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          if (inner == 1) softmax_row<T, kLog>(in + o * n, out + o * n, n);
          else softmax_lines<T, kLog>(in + o * n * inner, out + o * n * inner, n, inner);
        }
      });
    }
  });
}

// Backward along lines of n elements, `inner` apart: softmax's
// gx = y (g - sum(g y)), log_softmax's gx = g - exp(y) sum(g); the sums in
// double, in fixed order.
template <class T, bool kLog>
void softmax_backward_line(const T* g, const T* y, T* gx, int64_t n, int64_t inner, int64_t j) {
  using A = acc_t<T>;
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i * inner + j;
    s += kLog ? static_cast<double>(g[k]) : static_cast<double>(g[k]) * static_cast<double>(y[k]);
  }
  const A sum = static_cast<A>(s);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i * inner + j;
    const A gv = static_cast<A>(g[k]), yv = static_cast<A>(y[k]);
    gx[k] = static_cast<T>(kLog ? gv - math::exp(yv) * sum : yv * (gv - sum));
  }
}

// The same along memory (inner == 1): the sum in lanes of the compute type (cpu/lanes.h), so
// that both loops vectorise.
template <class T, bool kLog> void softmax_backward_row(const T* g, const T* y, T* gx, int64_t n) {
  using A = acc_t<T>;
  const A sum = lanes_sum<A>(
      n, [&](int64_t i) { return kLog ? static_cast<A>(g[i]) : static_cast<A>(g[i]) * static_cast<A>(y[i]); });
  for (int64_t i = 0; i < n; ++i) {
    const A gv = static_cast<A>(g[i]), yv = static_cast<A>(y[i]);
    gx[i] = static_cast<T>(kLog ? gv - math::exp(yv) * sum : yv * (gv - sum));
  }
}

template <bool kLog> void softmax_backward_kernel(OpCall& call) {
  const Tensor &g = call.inputs[0], &y = call.inputs[1];
  const auto [outer, n, inner] = Lines(y.shape(), call.attr<DimAttrs>().dim);
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const T *gp = g.data<T>(), *yp = y.data<T>();
      T* out = call.out().data<T>();
      parallel_for(outer * inner, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t line = b; line < e; ++line) {
                       const int64_t o = line / inner, off = o * n * inner;
                       if (inner == 1) softmax_backward_row<T, kLog>(gp + off, yp + off, out + off, n);
                       else softmax_backward_line<T, kLog>(gp + off, yp + off, out + off, n, inner, line % inner);
                     }
                   });
    }
  });
}

PF_REGISTER_KERNEL(softmax, CPU, &softmax_kernel<false>);
PF_REGISTER_KERNEL(softmax_backward, CPU, &softmax_backward_kernel<false>);
PF_REGISTER_KERNEL(log_softmax_backward, CPU, &softmax_backward_kernel<true>);
PF_REGISTER_KERNEL(log_softmax, CPU, &softmax_kernel<true>);

}  // namespace
}  // namespace pyflame::cpu
