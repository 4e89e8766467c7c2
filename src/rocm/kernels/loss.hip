// GPU nll_loss and cross_entropy (class-index targets), with the CPU's
// semantics (src/cpu/loss.cpp): log-probabilities (nll_loss) or logits
// (cross_entropy) (N, C, S), class indices (N, S) int64, weight (C) float64 or
// undefined; each element's loss
//   (1 - eps) * -w[t] logp[t]  +  eps / C * -sum_c w[c] logp[c]
// (0 where t == ignore_index) in double. One warp per element: lane 0 takes
// the target's term, the lanes share the sums over the classes (coalesced
// when S == 1). cross_entropy is fused: in one pass over the logits each lane
// keeps a running maximum and sum of exponentials (rescaled when the maximum
// grows) and, for label smoothing, sum w[c] x[c] and sum w[c]; the lanes then
// merge them into logsumexp, and logp[c] = x[c] - logsumexp is never stored,
// so the logits are read once. A target out of range is recorded as a kernel
// error (rocm/kernel_errors.h) and its element counts as ignored.
//
// 'sum' and 'mean' are deterministic: a fixed grid, each block summing its
// elements' losses and weights in a fixed order, then one block summing the
// blocks' pairs; 'mean' divides by the sum of w[t] over the elements kept.

#include <algorithm>
#include <limits>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "kernels/math.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernel_errors.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kLossThreads = 256;
constexpr int kMaxLossBlocks = 1024;  // the second pass sums this many pairs at most

struct NllProblem {
  int64_t n, c, s;
  int64_t ignore_index;
  double label_smoothing;
  const double* weight;  // or null: all ones
  int32_t op;
  KernelErrorSlot errors;
};

// The per-lane sums of cross_entropy's pass over one element's classes.
template <class A> struct LogitSums {
  A max, exp_sum;        // sum exp(x - max)
  double weighted, weights;  // sum w[c] x[c], sum w[c] (label smoothing)

  __device__ void add(A x, double w) {
    if (x > max) {
      exp_sum = exp_sum * math::exp(max - x) + A(1);
      max = x;
    } else if (x != -std::numeric_limits<A>::infinity()) {  // exp(-inf - -inf) would be NaN, not 0
      exp_sum += math::exp(x - max);
    }
    weighted += w * static_cast<double>(x);
    weights += w;
  }
};

template <class A> __device__ LogitSums<A> warp_merge(LogitSums<A> s) {
  for (int mask = PF_WARP_SIZE / 2; mask > 0; mask >>= 1) {
    const A m = shfl_xor(s.max, mask), e = shfl_xor(s.exp_sum, mask);
    const A top = m > s.max ? m : s.max;
    // A lane whose maximum is -inf holds nothing (and exp(-inf - -inf) would be NaN).
    constexpr A kNone = -std::numeric_limits<A>::infinity();
    s.exp_sum = (s.max != kNone ? s.exp_sum * math::exp(s.max - top) : A(0)) +
                (m != kNone ? e * math::exp(m - top) : A(0));
    s.max = top;
    s.weighted += shfl_xor(s.weighted, mask);
    s.weights += shfl_xor(s.weights, mask);
  }
  return s;
}

// Element losses: out (reduction 'none') or, per block, the sums of losses and of
// the weights of the targets kept into block_sums[2 * block + {0, 1}].
template <class T, bool kFromLogits>
static __global__ void nll_elements(T* out, double* block_sums, acc_t<T>* lse_out, const T* logp, const int64_t* target,
                                    NllProblem p) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t warps_per_block = kLossThreads / PF_WARP_SIZE;
  double loss_sum = 0, weight_sum = 0;  // lane 0 of each warp
  for (int64_t k = blockIdx.x * warps_per_block + threadIdx.x / PF_WARP_SIZE; k < p.n * p.s;
       k += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const int64_t t = target[k], i = k / p.s, j = k % p.s;
    const bool kept = t != p.ignore_index && t >= 0 && t < p.c;
    if (lane == 0 && t != p.ignore_index && !kept)
      record_kernel_error(p.errors, KernelErrorCode::TargetOutOfRange, p.op, t, p.c, p.ignore_index);
    if (!kept) {  // the same for the whole warp
      if (lane == 0 && out) out[k] = T(0);
      if (lane == 0 && lse_out) lse_out[k] = A(0);
      continue;
    }
    const T* row = logp + i * p.c * p.s + j;  // class q at row[q * s]
    const bool smoothing = p.label_smoothing > 0;
    double lse = 0, smooth = 0;  // smooth: -sum_c w[c] logp[c]
    if constexpr (kFromLogits) {
      LogitSums<A> sums{-std::numeric_limits<A>::infinity(), A(0), 0.0, 0.0};
      for (int64_t q = lane; q < p.c; q += PF_WARP_SIZE)
        sums.add(static_cast<A>(row[q * p.s]), smoothing ? (p.weight ? p.weight[q] : 1.0) : 0.0);
      sums = warp_merge(sums);
      lse = static_cast<double>(sums.max) + static_cast<double>(math::log(sums.exp_sum));
      smooth = lse * sums.weights - sums.weighted;
    } else if (smoothing) {
      for (int64_t q = lane; q < p.c; q += PF_WARP_SIZE)
        smooth -= (p.weight ? p.weight[q] : 1.0) * static_cast<double>(row[q * p.s]);
      smooth = warp_all_reduce(smooth, kernels::SumReduce<double>());
    }
    if (lane != 0) continue;
    if (lse_out) lse_out[k] = static_cast<A>(lse);
    const double w = p.weight ? p.weight[t] : 1.0;
    double l = -w * (static_cast<double>(row[t * p.s]) - lse);
    if (smoothing) l = (1 - p.label_smoothing) * l + p.label_smoothing / static_cast<double>(p.c) * smooth;
    if (out) out[k] = static_cast<T>(static_cast<acc_t<T>>(l));
    loss_sum += l;
    weight_sum += w;
  }
  if (!block_sums) return;
  const kernels::SumReduce<double> sum_of;
  loss_sum = block_all_reduce<kLossThreads>(loss_sum, sum_of);
  weight_sum = block_all_reduce<kLossThreads>(weight_sum, sum_of);
  if (threadIdx.x == 0) {
    block_sums[2 * blockIdx.x] = loss_sum;
    block_sums[2 * blockIdx.x + 1] = weight_sum;
  }
}

// One block: the total over the blocks' pairs, divided by the total weight for 'mean'.
template <class T> static __global__ void nll_total(T* out, const double* block_sums, int blocks, bool mean) {
  double loss_sum = 0, weight_sum = 0;
  for (int b = threadIdx.x; b < blocks; b += kLossThreads) {
    loss_sum += block_sums[2 * b];
    weight_sum += block_sums[2 * b + 1];
  }
  const kernels::SumReduce<double> sum_of;
  loss_sum = block_all_reduce<kLossThreads>(loss_sum, sum_of);
  weight_sum = block_all_reduce<kLossThreads>(weight_sum, sum_of);
  if (threadIdx.x == 0) out[0] = static_cast<T>(static_cast<acc_t<T>>(mean ? loss_sum / weight_sum : loss_sum));
}

template <bool kFromLogits> void nll_loss_entry(OpCall& call) {
  Tensor& out = call.out();
  const Device dev = out.device();
  DeviceGuard guard(dev.index);
  const Tensor &logp = call.inputs[0], &target = call.inputs[1];
  const LossAttrs& at = call.attr<LossAttrs>();
  const NllProblem p{logp.shape()[0], logp.shape()[1], logp.shape()[2], at.ignore_index, at.label_smoothing,
                     call.inputs[2].defined() ? call.inputs[2].data<double>() : nullptr, static_cast<int32_t>(call.op),
                     kernel_error_slot(dev.index)};
  const hipStream_t stream = current_stream(dev.index);
  const int64_t elements = p.n * p.s, warps_per_block = kLossThreads / warp_size(dev.index);
  const bool reduce = at.reduction != Reduction::None;
  if (!reduce && elements == 0) return;  // (then the logsumexp output is empty too)
  const int blocks =
      static_cast<int>(std::clamp<int64_t>((elements + warps_per_block - 1) / warps_per_block, 1, kMaxLossBlocks));
  Tensor block_sums = reduce ? Tensor::empty({2 * blocks}, DType::Float64, dev) : Tensor();
  visit_dtype(logp.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      double* sums = reduce ? block_sums.data<double>() : nullptr;
      acc_t<T>* lse = kFromLogits ? call.outputs[1].data<acc_t<T>>() : nullptr;
      nll_elements<T, kFromLogits><<<blocks, kLossThreads, 0, stream>>>(
          reduce ? nullptr : out.data<T>(), sums, lse, logp.data<T>(), target.data<int64_t>(), p);
      if (reduce) {
        HIP_CHECK(hipGetLastError());
        nll_total<T><<<1, kLossThreads, 0, stream>>>(out.data<T>(), sums, blocks, at.reduction == Reduction::Mean);
      }
    }
  });
  check_launch(op_name(call.op), "input (N, C, S) = (" + std::to_string(p.n) + ", " + std::to_string(p.c) + ", " +
                               std::to_string(p.s) + ") (" + dtype_name(logp.dtype()) + ")");
}

// cross_entropy's logits gradient (cpu/loss.cpp has the formula) from the
// forward's logsumexp, one warp per element as the forward, in one pass over
// the logits writing scale * (exp(x - lse) A - coef); with label smoothing
// and a weight, the lanes first sum the weights. Ignored elements get zeros.
template <class T>
static __global__ void cross_entropy_backward_elements(T* gx, const T* logits, const int64_t* target,
                                                       const acc_t<T>* scale, const acc_t<T>* lse_of,
                                                       bool per_element, NllProblem p) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t warps_per_block = kLossThreads / PF_WARP_SIZE;
  const double smooth = p.label_smoothing / static_cast<double>(p.c);
  for (int64_t k = blockIdx.x * warps_per_block + threadIdx.x / PF_WARP_SIZE; k < p.n * p.s;
       k += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const int64_t t = target[k], i = k / p.s, j = k % p.s;
    const T* row = logits + i * p.c * p.s + j;
    T* out = gx + i * p.c * p.s + j;
    if (t == p.ignore_index || t < 0 || t >= p.c) {  // the forward reported a target out of range
      for (int64_t q = lane; q < p.c; q += PF_WARP_SIZE) out[q * p.s] = T(0);
      continue;
    }
    double weights = static_cast<double>(p.c);
    if (smooth > 0 && p.weight) {
      weights = 0;
      for (int64_t q = lane; q < p.c; q += PF_WARP_SIZE) weights += p.weight[q];
      weights = warp_all_reduce(weights, kernels::SumReduce<double>());
    }
    const double wt = p.weight ? p.weight[t] : 1.0;
    const A total = static_cast<A>((1 - p.label_smoothing) * wt + smooth * weights);
    const A sc = scale[per_element ? k : 0], lse = lse_of[k];
    for (int64_t q = lane; q < p.c; q += PF_WARP_SIZE) {
      const double coef = smooth * (p.weight ? p.weight[q] : 1.0) + (q == t ? (1 - p.label_smoothing) * wt : 0.0);
      const A prob = math::exp(static_cast<A>(row[q * p.s]) - lse);
      out[q * p.s] = static_cast<T>(sc * (prob * total - static_cast<A>(coef)));
    }
  }
}

void cross_entropy_backward_entry(OpCall& call) {
  Tensor& out = call.out();
  const Device dev = out.device();
  DeviceGuard guard(dev.index);
  const Tensor &logits = call.inputs[1], &target = call.inputs[2];
  const LossAttrs& at = call.attr<LossAttrs>();
  const NllProblem p{logits.shape()[0], logits.shape()[1], logits.shape()[2], at.ignore_index, at.label_smoothing,
                     call.inputs[3].defined() ? call.inputs[3].data<double>() : nullptr, static_cast<int32_t>(call.op),
                     kernel_error_slot(dev.index)};
  const int64_t elements = p.n * p.s, warps_per_block = kLossThreads / warp_size(dev.index);
  if (elements == 0 || p.c == 0) return;
  const unsigned blocks = static_cast<unsigned>(
      std::clamp<int64_t>((elements + warps_per_block - 1) / warps_per_block, 1, int64_t{1} << 16));
  visit_dtype(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      cross_entropy_backward_elements<T><<<blocks, kLossThreads, 0, current_stream(dev.index)>>>(
          out.data<T>(), logits.data<T>(), target.data<int64_t>(), call.inputs[0].data<acc_t<T>>(),
          call.inputs[4].data<acc_t<T>>(), call.inputs[0].numel() > 1, p);
    }
  });
  check_launch("cross_entropy_backward", "input (N, C, S) = (" + std::to_string(p.n) + ", " + std::to_string(p.c) +
                                             ", " + std::to_string(p.s) + ") (" + dtype_name(logits.dtype()) + ")");
}

PF_REGISTER_KERNEL(nll_loss, ROCm, &nll_loss_entry<false>);
PF_REGISTER_KERNEL(cross_entropy_backward, ROCm, &cross_entropy_backward_entry);
PF_REGISTER_KERNEL(cross_entropy, ROCm, &nll_loss_entry<true>);

}  // namespace
}  // namespace pyflame::backend::rocm
