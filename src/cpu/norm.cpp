// CPU normalization: layer_norm and rms_norm over rows (rows, M), group_norm
// over (N, C, S) with rows of (C / G) * S elements, batch_norm over the
// (N, S) values of each channel. Statistics are computed in double, in two
// passes (the mean, then squared deviations from it), so data far from zero
// does not cancel; normalizing, (x - mean) * scale + shift, then runs in the
// compute type (float for the 16-bit floats and float32, double for float64)
// with per-row or per-channel constants. Weight, bias and running statistics arrive as float64
// (src/core/nn_ops.cpp), undefined when not given.

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "cpu/loops.h"

namespace pyflame::cpu {
namespace {

struct Moments {
  double mean, var;  // biased variance
};

// Mean and biased variance of n contiguous values, in two passes.
template <class T> Moments moments(const T* x, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(x[i + l]);
  for (; i < n; ++i) lanes[0] += static_cast<double>(x[i]);
  double sum = 0;
  for (double& l : lanes) sum += l, l = 0;
  const double mean = sum / static_cast<double>(n);
  for (i = 0; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) {
      double d = static_cast<double>(x[i + l]) - mean;
      lanes[l] += d * d;
    }
  for (; i < n; ++i) {
    double d = static_cast<double>(x[i]) - mean;
    lanes[0] += d * d;
  }
  double ss = 0;
  for (double l : lanes) ss += l;
  return {mean, ss / static_cast<double>(n)};
}

// Root mean square statistics: mean of squares, no centring.
template <class T> double mean_square(const T* x, int64_t n) {
  double lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += static_cast<double>(x[i + l]) * static_cast<double>(x[i + l]);
  for (; i < n; ++i) lanes[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  double ss = 0;
  for (double l : lanes) ss += l;
  return ss / static_cast<double>(n);
}

// y = (x - mean) * scale + shift over n contiguous values. Centring first
// keeps data far from zero accurate (x * scale + shift' would cancel).
template <class T> void affine(const T* x, T* y, int64_t n, acc_t<T> mean, acc_t<T> scale, acc_t<T> shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>((static_cast<acc_t<T>>(x[i]) - mean) * scale + shift);
}

template <class F> void for_float(DType d, const F& f) {
  visit_dtype(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) f(tag);
  });
}

// layer_norm (kRms false) and rms_norm (kRms true): x (rows, M), weight (M), bias (M).
template <bool kRms> void row_norm_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t rows = x.shape()[0], m = x.shape()[1];
  const double* w = call.inputs[1].defined() ? call.inputs[1].data<double>() : nullptr;
  const double* b = call.inputs[2].defined() ? call.inputs[2].data<double>() : nullptr;
  const double eps = call.attrs.eps;
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    // The affine parameters once in the compute type, for the vectorised loop.
    std::vector<A> wa(w ? m : 0), ba(b ? m : 0);
    for (int64_t j = 0; j < static_cast<int64_t>(wa.size()); ++j) wa[j] = static_cast<A>(w[j]);
    for (int64_t j = 0; j < static_cast<int64_t>(ba.size()); ++j) ba[j] = static_cast<A>(b[j]);
    const T* in = x.data<T>();
    T* out = call.out.data<T>();
    parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(m, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T* src = in + r * m;
        T* dst = out + r * m;
        double mean = 0, rstd;
        if constexpr (kRms) {
          rstd = 1.0 / std::sqrt(mean_square(src, m) + eps);
        } else {
          Moments mo = moments(src, m);
          mean = mo.mean;
          rstd = 1.0 / std::sqrt(mo.var + eps);
        }
        const A mu = static_cast<A>(mean), scale = static_cast<A>(rstd);
        if (wa.empty() && ba.empty()) {
          affine(src, dst, m, mu, scale, A(0));
          continue;
        }
        for (int64_t j = 0; j < m; ++j) {
          A v = (static_cast<A>(src[j]) - mu) * scale;
          if (!wa.empty()) v *= wa[j];
          if (!ba.empty()) v += ba[j];
          dst[j] = static_cast<T>(v);
        }
      }
    });
  });
}

// group_norm: x (N, C, S); group g of sample n is the contiguous run of
// channels [g C/G, (g+1) C/G).
void group_norm_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2], groups = call.attrs.groups;
  const int64_t cg = c / groups, len = cg * s;
  const double* w = call.inputs[1].defined() ? call.inputs[1].data<double>() : nullptr;
  const double* b = call.inputs[2].defined() ? call.inputs[2].data<double>() : nullptr;
  const double eps = call.attrs.eps;
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* in = x.data<T>();
    T* out = call.out.data<T>();
    parallel_for(n * groups, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(len, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t ng = lo; ng < hi; ++ng) {
        const T* src = in + ng * len;
        T* dst = out + ng * len;
        Moments mo = moments(src, len);
        const double rstd = 1.0 / std::sqrt(mo.var + eps);
        for (int64_t k = 0; k < cg; ++k) {
          const int64_t ch = (ng % groups) * cg + k;
          const double scale = rstd * (w ? w[ch] : 1.0);
          affine(src + k * s, dst + k * s, s, static_cast<A>(mo.mean), static_cast<A>(scale),
                 static_cast<A>(b ? b[ch] : 0.0));
        }
      }
    });
  });
}

// batch_norm: x (N, C, S); inputs running_mean, running_var, weight, bias.
void batch_norm_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2];
  double* running_mean = call.inputs[1].defined() ? call.inputs[1].data<double>() : nullptr;
  double* running_var = call.inputs[2].defined() ? call.inputs[2].data<double>() : nullptr;
  const double* w = call.inputs[3].defined() ? call.inputs[3].data<double>() : nullptr;
  const double* b = call.inputs[4].defined() ? call.inputs[4].data<double>() : nullptr;
  const OpAttrs& at = call.attrs;
  std::vector<double> mean(c), scale(c);
  for_float(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = acc_t<T>;
    const T* in = x.data<T>();
    T* out = call.out.data<T>();
    // Per-channel statistics, then the normalization.
    parallel_for(c, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(n * s, 1)), [&](int64_t lo, int64_t hi) {
      std::vector<Moments> runs;
      for (int64_t ch = lo; ch < hi; ++ch) {
        double mu, var;
        if (at.training) {
          // The channel is N runs of S values: combine the runs' moments
          // (equal sizes, so the variance is the mean of the runs' variances
          // plus the variance of their means; exact, no cancellation).
          runs.resize(n);
          double mean_sum = 0, var_sum = 0;
          for (int64_t i = 0; i < n; ++i) runs[i] = moments(in + (i * c + ch) * s, s), mean_sum += runs[i].mean;
          mu = mean_sum / static_cast<double>(n);
          for (const Moments& r : runs) var_sum += r.var + (r.mean - mu) * (r.mean - mu);
          var = var_sum / static_cast<double>(n);
          const double count = static_cast<double>(n * s);
          if (running_mean) running_mean[ch] = (1 - at.momentum) * running_mean[ch] + at.momentum * mu;
          if (running_var)
            running_var[ch] = (1 - at.momentum) * running_var[ch] + at.momentum * var * count / (count - 1);
        } else {
          mu = running_mean[ch];
          var = running_var[ch];
        }
        mean[ch] = mu;
        scale[ch] = (w ? w[ch] : 1.0) / std::sqrt(var + at.eps);
      }
    });
    parallel_for(n * c, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(s, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row)
        affine(in + row * s, out + row * s, s, static_cast<A>(mean[row % c]), static_cast<A>(scale[row % c]),
               static_cast<A>(b ? b[row % c] : 0.0));
    });
  });
}

PF_REGISTER_KERNEL(layer_norm, CPU, &row_norm_kernel<false>);
PF_REGISTER_KERNEL(rms_norm, CPU, &row_norm_kernel<true>);
PF_REGISTER_KERNEL(group_norm, CPU, &group_norm_kernel);
PF_REGISTER_KERNEL(batch_norm, CPU, &batch_norm_kernel);

}  // namespace
}  // namespace pyflame::cpu
