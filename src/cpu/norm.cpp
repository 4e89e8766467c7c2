// CPU normalization: layer_norm and rms_norm over rows (rows, M), group_norm
// over (N, C, S) with rows of (C / G) * S elements, batch_norm over the
// (N, S) values of each channel. Statistics take two passes (the mean, then
// squared deviations from it): for the row norms and group_norm in the
// compute type (float for the 16-bit floats and float32, double for float64)
// in many lanes, as PyTorch's (double would halve the vector width); for
// batch_norm in double (cpu/moments.h). Normalizing, (x - mean) * scale +
// shift, runs in the compute type. Centring before scaling keeps data far from
// zero accurate, where x * scale + shift' would cancel. Weight, bias and
// running statistics arrive as float32 or float64 (src/core/nn_ops.cpp; a
// 16-bit layer_norm's or rms_norm's of the input's dtype as they are),
// undefined when not given.
// The backward passes recompute the statistics the same way; batch_norm's
// computes in double throughout, as the reference of the GPU kernels.

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "cpu/lanes.h"
#include "cpu/loops.h"
#include "cpu/moments.h"

namespace pyflame::cpu {
namespace {

// y = (x - mean) * scale + shift over n contiguous values.
template <class T> void normalize(const T* x, T* y, int64_t n, acc_t<T> mean, acc_t<T> scale, acc_t<T> shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>((static_cast<acc_t<T>>(x[i]) - mean) * scale + shift);
}

template <class F> void for_float(DType d, const F& f) {
  visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) f(tag);
  });
}

// A per-channel or per-element parameter (float32 or float64; layer_norm's and rms_norm's
// also the 16-bit input's dtype) in the compute type A; `fill` where not given.
template <class A> std::vector<A> param_as(const Tensor& t, int64_t n, A fill) {
  std::vector<A> out(n, fill);
  if (!t.defined()) return out;
  for_float(t.dtype(), [&](auto tag) {
    using P = typename decltype(tag)::type;
    const P* p = t.data<P>();
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<A>(static_cast<acc_t<P>>(p[i]));
  });
  return out;
}

// A row's mean (0 for rms_norm) and 1/std in the compute type, in kRowLanes lanes (as
// PyTorch's CPU kernels: double would halve the vector width of these short rows), two passes.
constexpr int kRowLanes = 16;
template <bool kRms, class T, class A = acc_t<T>> std::pair<A, A> row_stats(const T* x, int64_t m, double eps) {
  const A mean = kRms ? A(0) : lanes_sum<A, kRowLanes>(m, [&](int64_t i) { return static_cast<A>(x[i]); }) / static_cast<A>(m);
  const A var = lanes_sum<A, kRowLanes>(m, [&](int64_t i) {
                  const A d = static_cast<A>(x[i]) - mean;
                  return d * d;
                }) / static_cast<A>(m);
  return {mean, A(1) / std::sqrt(var + static_cast<A>(eps))};
}

// layer_norm (kRms false) and rms_norm (kRms true): x (rows, M), weight (M), bias (M).
template <bool kRms> void row_norm_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t rows = x.shape()[0], m = x.shape()[1];
  const double eps = call.attr<NormAttrs>().eps;
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    // Missing weight and bias are ones and zeros: one loop that vectorises, exact.
    const std::vector<A> w = param_as<A>(call.inputs[1], m, A(1)), b = param_as<A>(call.inputs[2], m, A(0));
    const T* in = x.data<T>();
    T* out = call.out().data<T>();
    parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(m, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T* src = in + r * m;
        T* dst = out + r * m;
        const auto [mean, rstd] = row_stats<kRms>(src, m, eps);
        for (int64_t j = 0; j < m; ++j) dst[j] = static_cast<T>((static_cast<A>(src[j]) - mean) * rstd * w[j] + b[j]);
      }
    });
  });
}

// The gradients of layer_norm (kRms false) and rms_norm: per row, with
// xhat = (x - mean) rstd and gxhat = g w,
//   gx = rstd (gxhat - mean(gxhat) - xhat mean(gxhat xhat))   (rms_norm: no mean(gxhat) term),
// in the compute type with kRowLanes lanes, as the forward; the weight's gradient sum(g xhat)
// and the bias's sum(g) over the rows (outputs 1 and 2, where asked for). The rows go in at
// most kParamChunks fixed chunks, each summing its own columns, the chunks added in order
// in double: the same sums whatever the thread count.
template <bool kRms> void row_norm_backward_kernel(OpCall& call) {
  constexpr int64_t kParamChunks = 64;
  const Tensor &g = call.inputs[0], &x = call.inputs[1];
  const int64_t rows = x.shape()[0], m = x.shape()[1];
  const double eps = call.attr<NormAttrs>().eps;
  const int64_t chunks = std::min(kParamChunks, rows), chunk_rows = chunks ? (rows + chunks - 1) / chunks : 0;
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const std::vector<A> w = param_as<A>(call.inputs[2], m, A(1));
    const T *gp = g.data<T>(), *xp = x.data<T>();
    T* out = call.out().data<T>();
    std::vector<A> sum_gxhat(chunks * m), sum_g(chunks * m);  // per chunk
    parallel_for(chunks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c)
        for (int64_t r = c * chunk_rows; r < std::min(rows, (c + 1) * chunk_rows); ++r) {
          const T *gr = gp + r * m, *xr = xp + r * m;
          A *cw = sum_gxhat.data() + c * m, *cb = sum_g.data() + c * m;
          const auto [mean, rstd] = row_stats<kRms>(xr, m, eps);
          // sum(g w) and sum(g w xhat) in lanes; the parameters' sums per column.
          A lg[kRowLanes] = {}, lgx[kRowLanes] = {};
          auto step = [&](int64_t j, int l) {
            const A gj = static_cast<A>(gr[j]), xhat = (static_cast<A>(xr[j]) - mean) * rstd, gw = gj * w[j];
            lg[l] += gw;
            lgx[l] += gw * xhat;
            cw[j] += gj * xhat;
            cb[j] += gj;
          };
          int64_t j = 0;
          for (; j + kRowLanes <= m; j += kRowLanes)
            for (int l = 0; l < kRowLanes; ++l) step(j + l, l);
          for (; j < m; ++j) step(j, 0);
          A row_g = 0, row_gx = 0;
          for (int l = 0; l < kRowLanes; ++l) row_g += lg[l], row_gx += lgx[l];
          const A mean_g = kRms ? A(0) : row_g / static_cast<A>(m), mean_gx = row_gx / static_cast<A>(m);
          for (j = 0; j < m; ++j) {
            const A xhat = (static_cast<A>(xr[j]) - mean) * rstd;
            out[r * m + j] = static_cast<T>(rstd * (static_cast<A>(gr[j]) * w[j] - mean_g - xhat * mean_gx));
          }
        }
    });
    if (call.outputs.size() == 1) return;  // no parameters' gradients asked for
    A* gw = call.outputs[1].data<A>();
    A* gb = kRms ? nullptr : call.outputs[2].data<A>();
    for (int64_t j = 0; j < m; ++j) {
      double tw = 0, tb = 0;
      for (int64_t c = 0; c < chunks; ++c) tw += sum_gxhat[c * m + j], tb += sum_g[c * m + j];
      gw[j] = static_cast<A>(tw);
      if (gb) gb[j] = static_cast<A>(tb);
    }
  });
}

// sum(g) and sum(g (x - center)) over n values, added to sum_g and sum_gx; in
// A (double for batch_norm, the compute type for group_norm) with kRowLanes lanes so the loop vectorises.
template <class A, class T> void add_grad_sums(const T* g, const T* x, int64_t n, A center, A& sum_g, A& sum_gx) {
  A lg[kRowLanes] = {}, lgx[kRowLanes] = {};
  auto step = [&](int64_t i, int l) {
    const A gv = static_cast<A>(g[i]);
    lg[l] += gv;
    lgx[l] += gv * (static_cast<A>(x[i]) - center);
  };
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes)
    for (int l = 0; l < kRowLanes; ++l) step(i + l, l);
  for (; i < n; ++i) step(i, 0);
  for (int l = 0; l < kRowLanes; ++l) sum_g += lg[l], sum_gx += lgx[l];
}

// The input gradient of a norm over n values sharing one statistic:
// gx = scale g - b (x - mean) - d, centred first as the forward, in A.
template <class A, class T> void write_input_grad(const T* g, const T* x, T* gx, int64_t n, A scale, A b, A mean, A d) {
  for (int64_t i = 0; i < n; ++i)
    gx[i] = static_cast<T>(scale * static_cast<A>(g[i]) - b * (static_cast<A>(x[i]) - mean) - d);
}

// The weight's and bias's gradients (outputs 1 and 2), in the compute type.
template <class T> void write_param_grads(OpCall& call, const std::vector<double>& sum_gxhat,
                                          const std::vector<double>& sum_g) {
  using P = acc_t<T>;
  P *gw = call.outputs[1].data<P>(), *gb = call.outputs[2].data<P>();
  for (size_t ch = 0; ch < sum_g.size(); ++ch)
    gw[ch] = static_cast<P>(sum_gxhat[ch]), gb[ch] = static_cast<P>(sum_g[ch]);
}

// group_norm: x (N, C, S); group g of sample n is the contiguous run of
// channels [g C/G, (g+1) C/G).
void group_norm_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2], groups = call.attr<NormAttrs>().num_groups;
  const int64_t cg = c / groups, len = cg * s;
  const double eps = call.attr<NormAttrs>().eps;
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const std::vector<double> w = param_as<double>(call.inputs[1], c, 1.0), b = param_as<double>(call.inputs[2], c, 0.0);
    const T* in = x.data<T>();
    T* out = call.out().data<T>();
    parallel_for(n * groups, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(len, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t ng = lo; ng < hi; ++ng) {
        const T* src = in + ng * len;
        T* dst = out + ng * len;
        const auto [mean, rstd] = row_stats<false>(src, len, eps);
        for (int64_t k = 0; k < cg; ++k) {
          const int64_t ch = (ng % groups) * cg + k;
          normalize(src + k * s, dst + k * s, s, mean, static_cast<A>(rstd * w[ch]), static_cast<A>(b[ch]));
        }
      }
    });
  });
}

// batch_norm: x (N, C, S); inputs running_mean, running_var, weight, bias.
// Training with running statistics, outputs 1 and 2 receive their updates.
void batch_norm_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2];
  const std::vector<double> running_mean = param_as<double>(call.inputs[1], c, 0.0);
  const std::vector<double> running_var = param_as<double>(call.inputs[2], c, 1.0);
  double* new_mean = call.outputs.size() > 1 ? call.outputs[1].data<double>() : nullptr;
  double* new_var = call.outputs.size() > 1 ? call.outputs[2].data<double>() : nullptr;
  const std::vector<double> w = param_as<double>(call.inputs[3], c, 1.0), b = param_as<double>(call.inputs[4], c, 0.0);
  const NormAttrs& at = call.attr<NormAttrs>();
  std::vector<double> mean(c, 0.0), var(c, 0.0);
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* in = x.data<T>();
    T* out = call.out().data<T>();
    if (at.training) {
      // Threads split the channels; each walks the N runs of S values of its
      // channels in memory order (for S = 1 the inner loop runs across channels).
      const double count = static_cast<double>(n * s);
      parallel_for(c, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * s, 1)), [&](int64_t lo, int64_t hi) {
        for (int64_t i = 0; i < n; ++i) {
          const T* row = in + i * c * s;
          if (s == 1) {
            for (int64_t ch = lo; ch < hi; ++ch) mean[ch] += static_cast<double>(row[ch]);
          } else {
            for (int64_t ch = lo; ch < hi; ++ch) mean[ch] += row_sum(row + ch * s, s);
          }
        }
        for (int64_t ch = lo; ch < hi; ++ch) mean[ch] /= count;
        for (int64_t i = 0; i < n; ++i) {
          const T* row = in + i * c * s;
          if (s == 1) {
            for (int64_t ch = lo; ch < hi; ++ch) {
              const double d = static_cast<double>(row[ch]) - mean[ch];
              var[ch] += d * d;
            }
          } else {
            for (int64_t ch = lo; ch < hi; ++ch) var[ch] += row_squared_deviation(row + ch * s, s, mean[ch]);
          }
        }
        for (int64_t ch = lo; ch < hi; ++ch) {
          var[ch] /= count;
          // The running variance takes the unbiased batch variance, as PyTorch.
          if (new_mean) new_mean[ch] = (1 - at.momentum) * running_mean[ch] + at.momentum * mean[ch];
          if (new_var) new_var[ch] = (1 - at.momentum) * running_var[ch] + at.momentum * var[ch] * count / (count - 1);
        }
      });
    } else {
      mean = running_mean;
      var = running_var;
    }
    std::vector<A> mu(c), scale(c), shift(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      mu[ch] = static_cast<A>(mean[ch]);
      scale[ch] = static_cast<A>(w[ch] / std::sqrt(var[ch] + at.eps));
      shift[ch] = static_cast<A>(b[ch]);
    }
    if (s == 1) {  // (N, C): rows of channels
      parallel_for(n, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(c, 1)), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i)
          for (int64_t ch = 0; ch < c; ++ch)
            out[i * c + ch] = static_cast<T>((static_cast<A>(in[i * c + ch]) - mu[ch]) * scale[ch] + shift[ch]);
      });
      return;
    }
    parallel_for(n * c, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(s, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row)
        normalize(in + row * s, out + row * s, s, mu[row % c], scale[row % c], shift[row % c]);
    });
  });
}

// The gradients of batch_norm: g, x (N, C, S); running_mean, running_var
// (eval), weight. Per channel of n = N S values, with xhat = (x - mean) rstd,
// sum(g) is the bias's gradient and sum(g xhat) the weight's; the input's is
//   training  w rstd (g - sum(g) / n - xhat sum(g xhat) / n)
//   eval      w rstd g (x is not read for it: the running statistics are constants).
void batch_norm_backward_kernel(OpCall& call) {
  const Tensor &g = call.inputs[0], &x = call.inputs[1];
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2];
  const NormAttrs& at = call.attr<NormAttrs>();
  const std::vector<double> w = param_as<double>(call.inputs[4], c, 1.0);
  const std::vector<double> running_mean = param_as<double>(call.inputs[2], c, 0.0);
  const std::vector<double> running_var = param_as<double>(call.inputs[3], c, 1.0);
  std::vector<double> sum_g(c, 0.0), sum_gxhat(c, 0.0), mean(c, 0.0), var(c, 0.0), rstd(c);
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *gp = g.data<T>(), *xp = x.data<T>();
    T* out = call.out().data<T>();
    const double count = static_cast<double>(n * s);
    parallel_for(c, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * s, 1)), [&](int64_t lo, int64_t hi) {
      // Threads split the channels; each walks the N runs of S values of its channels in memory order.
      auto runs = [&](const auto& f) {
        for (int64_t i = 0; i < n; ++i)
          for (int64_t ch = lo; ch < hi; ++ch) f(ch, (i * c + ch) * s);
      };
      if (at.training) {
        runs([&](int64_t ch, int64_t off) { mean[ch] += row_sum(xp + off, s); });
        for (int64_t ch = lo; ch < hi; ++ch) mean[ch] /= count;
        runs([&](int64_t ch, int64_t off) { var[ch] += row_squared_deviation(xp + off, s, mean[ch]); });
        for (int64_t ch = lo; ch < hi; ++ch) rstd[ch] = 1.0 / std::sqrt(var[ch] / count + at.eps);
      } else {
        for (int64_t ch = lo; ch < hi; ++ch) {
          mean[ch] = running_mean[ch];
          rstd[ch] = 1.0 / std::sqrt(running_var[ch] + at.eps);
        }
      }
      runs([&](int64_t ch, int64_t off) { add_grad_sums<double>(gp + off, xp + off, s, mean[ch], sum_g[ch], sum_gxhat[ch]); });
      for (int64_t ch = lo; ch < hi; ++ch) sum_gxhat[ch] *= rstd[ch];
      runs([&](int64_t ch, int64_t off) {
        const double scale = w[ch] * rstd[ch];
        if (!at.training) {
          for (int64_t j = 0; j < s; ++j) out[off + j] = static_cast<T>(scale * static_cast<double>(gp[off + j]));
          return;
        }
        write_input_grad<double>(gp + off, xp + off, out + off, s, scale, scale * rstd[ch] * sum_gxhat[ch] / count, mean[ch],
                         scale * sum_g[ch] / count);
      });
    });
    write_param_grads<T>(call, sum_gxhat, sum_g);
  });
}

// The gradients of group_norm: g, x (N, C, S); weight. Per row of a group of
// a sample (len = (C / G) S values), with gh = g w and xhat = (x - mean) rstd,
// the input's is rstd (gh - mean(gh) - xhat mean(gh xhat)); sum(g) and
// sum(g xhat) per (n, c) plane, summed over n in order, are the bias's and
// the weight's.
void group_norm_backward_kernel(OpCall& call) {
  const Tensor &g = call.inputs[0], &x = call.inputs[1];
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2], groups = call.attr<NormAttrs>().num_groups;
  const int64_t cg = c / groups, len = cg * s;
  const double eps = call.attr<NormAttrs>().eps;
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const std::vector<A> w = param_as<A>(call.inputs[2], c, A(1));
    std::vector<A> plane_g(n * c, A(0)), plane_gxhat(n * c, A(0));
    const T *gp = g.data<T>(), *xp = x.data<T>();
    T* out = call.out().data<T>();
    if (len > 0) {
      parallel_for(n * groups, std::max<int64_t>(1, kParallelGrain / len), [&](int64_t lo, int64_t hi) {
        for (int64_t row = lo; row < hi; ++row) {
          const T *gr = gp + row * len, *xr = xp + row * len;
          const auto [mean, rstd] = row_stats<false>(xr, len, eps);
          A sum_gh = 0, sum_ghxhat = 0;
          // plane (n, c) = row * cg + k: row = n G + c / cg
          for (int64_t k = 0; k < cg; ++k) {
            const int64_t plane = row * cg + k, ch = (row % groups) * cg + k;
            add_grad_sums(gr + k * s, xr + k * s, s, mean, plane_g[plane], plane_gxhat[plane]);
            plane_gxhat[plane] *= rstd;
            sum_gh += w[ch] * plane_g[plane];
            sum_ghxhat += w[ch] * plane_gxhat[plane];
          }
          const A mean_gh = sum_gh / static_cast<A>(len), mean_ghxhat = sum_ghxhat / static_cast<A>(len);
          for (int64_t k = 0; k < cg; ++k) {
            const int64_t ch = (row % groups) * cg + k;
            write_input_grad(gr + k * s, xr + k * s, out + row * len + k * s, s, rstd * w[ch],
                             rstd * rstd * mean_ghxhat, mean, rstd * mean_gh);
          }
        }
      });
    }
    std::vector<double> sum_g(c, 0.0), sum_gxhat(c, 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch) sum_g[ch] += plane_g[i * c + ch], sum_gxhat[ch] += plane_gxhat[i * c + ch];
    write_param_grads<T>(call, sum_gxhat, sum_g);
  });
}

PF_REGISTER_KERNEL(layer_norm, CPU, &row_norm_kernel<false>);
PF_REGISTER_KERNEL(rms_norm, CPU, &row_norm_kernel<true>);
PF_REGISTER_KERNEL(layer_norm_backward, CPU, &row_norm_backward_kernel<false>);
PF_REGISTER_KERNEL(rms_norm_backward, CPU, &row_norm_backward_kernel<true>);
PF_REGISTER_KERNEL(batch_norm_backward, CPU, &batch_norm_backward_kernel);
PF_REGISTER_KERNEL(group_norm_backward, CPU, &group_norm_backward_kernel);
PF_REGISTER_KERNEL(group_norm, CPU, &group_norm_kernel);
PF_REGISTER_KERNEL(batch_norm, CPU, &batch_norm_kernel);

}  // namespace
}  // namespace pyflame::cpu
