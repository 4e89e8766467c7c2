// CPU nll_loss and cross_entropy (class-index targets): log-probabilities
// (nll_loss) or logits (cross_entropy) (N, C, S), class indices (N, S),
// weight (C) as float64 or undefined (all ones). cross_entropy takes
// logp[c] = x[c] - logsumexp(x) per element (the maximum subtracted first, so
// large logits stay finite), fused: the log-probabilities are never stored. Targets are checked against C before
// anything is computed (kernels/kernel_error.h). Each element's loss is
//   (1 - eps) * -w[t] logp[t]  +  eps / C * -sum_c w[c] logp[c]
// (0 where t == ignore_index), computed in double; 'mean' divides the sum by
// the sum of w[t] over the elements not ignored, as PyTorch. Sums run in a
// fixed order, so results do not depend on the thread count. Rows along memory
// take their logsumexp and gradient in the compute type (float for float32 and
// the 16-bit types), vectorised; the loss sums stay in double. cross_entropy's
// backward pass (cross_entropy_backward) is fused the same way.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/lanes.h"
#include "cpu/loops.h"
#include "kernels/kernel_error.h"
#include "kernels/math.h"

namespace pyflame::cpu {
namespace {

// log(sum_q exp(row[q * s])) over the c classes. Classes along memory (s == 1, the common (N, C)
// logits) in the compute type A in lanes (cpu/lanes.h), so that the loops vectorise (in double with
// libm's exp, a row of 1000 classes took 7x PyTorch's time); strided ones in double.
template <class T> double logsumexp(const T* row, int64_t c, int64_t s) {
  using A = acc_t<T>;
  if (s == 1) {
    const A m = lanes_max<A>(c, -std::numeric_limits<A>::infinity(), [&](int64_t q) { return static_cast<A>(row[q]); });
    const A sum = lanes_sum<A>(c, [&](int64_t q) { return math::exp(static_cast<A>(row[q]) - m); });
    return static_cast<double>(m) + std::log(static_cast<double>(sum));
  }
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t q = 0; q < c; ++q) m = std::max(m, static_cast<double>(row[q * s]));
  double sum = 0;
  for (int64_t q = 0; q < c; ++q) sum += std::exp(static_cast<double>(row[q * s]) - m);
  return m + std::log(sum);
}

template <bool kFromLogits> void nll_loss_kernel(OpCall& call) {
  const Tensor& logp = call.inputs[0];
  const int64_t n = logp.shape()[0], c = logp.shape()[1], s = logp.shape()[2];
  const int64_t* target = call.inputs[1].data<int64_t>();
  const LossAttrs& at = call.attr<LossAttrs>();
  for (int64_t k = 0; k < n * s; ++k)
    if (target[k] != at.ignore_index && (target[k] < 0 || target[k] >= c))
      raise_kernel_error({static_cast<int32_t>(KernelErrorCode::TargetOutOfRange), static_cast<int32_t>(call.op),
                          target[k], c, at.ignore_index});
  std::vector<double> weight(c, 1.0);
  if (call.inputs[2].defined()) weight.assign(call.inputs[2].data<double>(), call.inputs[2].data<double>() + c);
  const double eps = at.label_smoothing;
  std::vector<double> loss(n * s), w(n * s), lse_of(kFromLogits ? n * s : 0);
  visit_dtype(logp.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const T* lp = logp.data<T>();
      parallel_for(n * s, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(kFromLogits || eps > 0 ? c : 1, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t k = b; k < e; ++k) {
                       const int64_t t = target[k], i = k / s, j = k % s;
                       if (t == at.ignore_index) {
                         loss[k] = w[k] = 0;
                         if (kFromLogits) lse_of[k] = 0;
                         continue;
                       }
                       const T* row = lp + i * c * s + j;  // class q at row[q * s]
                       const double lse = kFromLogits ? logsumexp(row, c, s) : 0.0;
                       if (kFromLogits) lse_of[k] = lse;
                       w[k] = weight[t];
                       double l = -weight[t] * (static_cast<double>(row[t * s]) - lse);
                       if (eps > 0) {
                         double smooth = 0;
                         for (int64_t q = 0; q < c; ++q) smooth -= weight[q] * (static_cast<double>(row[q * s]) - lse);
                         l = (1 - eps) * l + eps / static_cast<double>(c) * smooth;
                       }
                       loss[k] = l;
                     }
                   });
      if constexpr (kFromLogits) {  // each element's logsumexp, for the backward pass
        acc_t<T>* lse_out = call.outputs[1].data<acc_t<T>>();
        for (int64_t k = 0; k < n * s; ++k) lse_out[k] = static_cast<acc_t<T>>(lse_of[k]);
      }
      T* out = call.out().data<T>();
      if (at.reduction == Reduction::None) {
        for (int64_t k = 0; k < n * s; ++k) out[k] = static_cast<T>(static_cast<acc_t<T>>(loss[k]));
        return;
      }
      double total = 0, total_w = 0;
      for (int64_t k = 0; k < n * s; ++k) total += loss[k], total_w += w[k];
      const double r = at.reduction == Reduction::Mean ? total / total_w : total;
      out[0] = static_cast<T>(static_cast<acc_t<T>>(r));
    }
  });
}

// cross_entropy's gradient of the logits from the forward's logsumexp (one
// read of the logits), per element with target t kept:
//   scale * (softmax(x) * A - coef),  coef[c] = (1 - eps) w[t] [c == t] + eps / C w[c],  A = sum_c coef[c];
// 0 for ignored elements. scale: one value, or one per element.
void cross_entropy_backward_kernel(OpCall& call) {
  const Tensor& logits = call.inputs[1];
  const int64_t n = logits.shape()[0], c = logits.shape()[1], s = logits.shape()[2];
  const int64_t* target = call.inputs[2].data<int64_t>();
  const LossAttrs& at = call.attr<LossAttrs>();
  std::vector<double> weight(c, 1.0);
  if (call.inputs[3].defined()) weight.assign(call.inputs[3].data<double>(), call.inputs[3].data<double>() + c);
  const bool weighted = call.inputs[3].defined();
  double weight_total = 0;
  for (double w : weight) weight_total += w;
  const double eps = at.label_smoothing, smooth = eps / static_cast<double>(c);
  visit_dtype(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const A* scale = call.inputs[0].data<A>();
      const A* lse_of = call.inputs[4].data<A>();
      const bool per_element = call.inputs[0].numel() > 1;
      const T* x = logits.data<T>();
      T* out = call.out().data<T>();
      parallel_for(n * s, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(c, 1)), [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const int64_t t = target[k], i = k / s, j = k % s;
          const T* row = x + i * c * s + j;
          T* dst = out + i * c * s + j;
          if (t == at.ignore_index || t < 0 || t >= c) {
            for (int64_t q = 0; q < c; ++q) dst[q * s] = T(0);
            continue;
          }
          const double lse = static_cast<double>(lse_of[k]);
          const double sc = static_cast<double>(scale[per_element ? k : 0]);
          const double total = (1 - eps) * weight[t] + smooth * weight_total;
          if (s == 1 && !weighted) {  // along memory, in A (vectorised): sc (total p - smooth), and at t less
            const A a = static_cast<A>(sc * total), shift = static_cast<A>(sc * smooth), m = static_cast<A>(lse);
            for (int64_t q = 0; q < c; ++q) dst[q] = static_cast<T>(a * math::exp(static_cast<A>(row[q]) - m) - shift);
            dst[t] = static_cast<T>(static_cast<A>(
                sc * (std::exp(static_cast<double>(row[t]) - lse) * total - smooth - (1 - eps))));
            continue;
          }
          for (int64_t q = 0; q < c; ++q) {
            const double coef = smooth * weight[q] + (q == t ? (1 - eps) * weight[t] : 0.0);
            dst[q * s] = static_cast<T>(static_cast<A>(
                sc * (std::exp(static_cast<double>(row[q * s]) - lse) * total - coef)));
          }
        }
      });
    }
  });
}

PF_REGISTER_KERNEL(nll_loss, CPU, &nll_loss_kernel<false>);
PF_REGISTER_KERNEL(cross_entropy_backward, CPU, &cross_entropy_backward_kernel);
PF_REGISTER_KERNEL(cross_entropy, CPU, &nll_loss_kernel<true>);

}  // namespace
}  // namespace pyflame::cpu
