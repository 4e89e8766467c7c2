// GPU nll_loss and cross_entropy (class-index targets), with the CPU's
// semantics (src/cpu/loss.cpp): log-probabilities (nll_loss) or logits
// (cross_entropy) (N, C, S), class indices (N, S) int64, weight (C) float64 or
// undefined; each element's loss
//   (1 - eps) * -w[t] logp[t]  +  eps / C * -sum_c w[c] logp[c]
// (0 where t == ignore_index) in double. A target out of range is recorded as
// a kernel error (rocm/kernel_errors.h) and its element counts as ignored.
//
// cross_entropy is fused: in one pass over the logits each thread keeps a
// running maximum and sum of exponentials (exp_sums.h) and, for label
// smoothing only, sum w[c] x[c] and sum w[c]; the threads then merge them
// into logsumexp, and logp[c] = x[c] - logsumexp is never stored, so the
// logits are read once (exp_sums.h: a few values at a time, one rescale;
// NaN and +inf give NaN, as on the CPU; a row of only -inf has logsumexp -inf).
//
// With the classes contiguous (S == 1: cross_entropy_rows) the pass is bound
// by memory: 16-byte loads, kUnroll in flight per thread. Rows need not start
// on 16 bytes (C odd, as GPT-2's 50257, or a view's offset): the fewer than a
// vector's classes before the first aligned vector and after the last are
// read one by one, so every row takes the vector loads. A row of at least one
// round of them for the whole block (16 KiB) gets a block, the threads' sums
// merged through the warps and then shared memory; shorter rows get a warp
// each, so a small C does not leave most of a block idle. Otherwise
// (nll_loss, and cross_entropy with S > 1: nll_elements) one warp takes an
// element: lane 0 the target's term, the lanes the sums over the classes
// (coalesced only when S == 1).
//
// 'sum' and 'mean' are deterministic: a fixed grid, each block summing its
// elements' losses and weights in a fixed order, then one block summing the
// blocks' pairs; 'mean' divides by the sum of w[t] over the elements kept.
// The grid has up to kMaxLossBlocks blocks, many more than are resident at
// once: blocks that take a row each start as others finish, where a smaller
// grid looping over rows would run in waves of blocks, the last partly empty.

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "kernels/math.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernel_errors.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/exp_sums.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kLossThreads = 256;
constexpr int kMaxLossBlocks = 1 << 14;
constexpr int kTotalThreads = 1024;  // the second pass: at most 16 pairs per thread
constexpr int kUnroll = 4;           // 16-byte loads in flight per thread (cross_entropy_rows)

// Blocks of cross_entropy_rows resident per multiprocessor, for which the
// compiler caps the registers: 4 (64 registers on NVIDIA) keep up to 64 KiB of
// loads in flight per multiprocessor; the label-smoothing sums and double's
// exp need more registers, and fewer resident blocks beat spilling in the loop.
template <class T> constexpr int rows_min_blocks(bool smooth) { return sizeof(acc_t<T>) == 8 ? 2 : smooth ? 3 : 4; }

struct NllProblem {
  int64_t n, c, s;
  int64_t ignore_index;
  double label_smoothing;
  const double* weight;  // or null: all ones
  int32_t op;
  KernelErrorSlot errors;
};

// A thread's (then a warp's, a block's) sums of cross_entropy's pass over one
// element's classes. No default member initializers: it lives in shared memory.
template <class A> struct LogitSums {
  ExpSums<A> exps;           // running max and sum of exponentials (exp_sums.h)
  double weighted, weights;  // sum w[c] x[c], sum w[c] (label smoothing)

  static __device__ LogitSums none() { return {ExpSums<A>::none(), 0.0, 0.0}; }

  template <int N> __device__ void add(const A (&x)[N]) { exps.add(x); }

  __device__ void smooth(A x, double w) {
    weighted += w * static_cast<double>(x);
    weights += w;
  }

  __device__ void merge(const LogitSums& o) {
    exps.merge(o.exps);
    weighted += o.weighted;
    weights += o.weights;
  }

  __device__ double logsumexp() const {
    return static_cast<double>(exps.max) + static_cast<double>(math::log(exps.sum));
  }
};

// Every lane gets its team's sums (teams of `width` lanes, a power of two; the
// smoothing sums only when `smoothing`: uniform).
template <class A> __device__ LogitSums<A> warp_merge(LogitSums<A> s, bool smoothing, int width = PF_WARP_SIZE) {
  for (int mask = width / 2; mask > 0; mask >>= 1) {
    LogitSums<A> o{s.exps.shuffled(mask), 0.0, 0.0};
    if (smoothing) {
      o.weighted = shfl_xor(s.weighted, mask);
      o.weights = shfl_xor(s.weights, mask);
    }
    s.merge(o);
  }
  return s;
}

// Thread 0 gets the block's sums (kLossThreads threads). Contains
// __syncthreads: all threads must call it.
template <class A> __device__ LogitSums<A> block_merge(LogitSums<A> s, bool smoothing) {
  constexpr int kWarps = kLossThreads / PF_WARP_SIZE;
  __shared__ LogitSums<A> warp_sums[kWarps];
  s = warp_merge(s, smoothing);
  if (threadIdx.x % PF_WARP_SIZE == 0) warp_sums[threadIdx.x / PF_WARP_SIZE] = s;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kWarps; ++w) s.merge(warp_sums[w]);
  __syncthreads();  // the slots are written again for the next row
  return s;
}

// Whether element k (target t) counts. The leader (the thread that finishes
// the element) records a target out of range and gives an element that does
// not count zeros.
template <class T>
__device__ bool counted(T* out, acc_t<T>* lse_out, int64_t k, int64_t t, const NllProblem& p, bool leader) {
  const bool kept = t != p.ignore_index && t >= 0 && t < p.c;
  if (kept || !leader) return kept;
  if (t != p.ignore_index)
    record_kernel_error(p.errors, KernelErrorCode::TargetOutOfRange, p.op, t, p.c, p.ignore_index);
  if (out) out[k] = T(0);
  if (lse_out) lse_out[k] = acc_t<T>(0);
  return false;
}

// The leader's part of a counted element from the target's logp[t] = xt - lse
// and smooth = -sum_c w[c] logp[c]: the logsumexp kept for the backward pass,
// the loss (out, or the thread's running sums).
template <class T>
__device__ void finish_element(T* out, acc_t<T>* lse_out, int64_t k, int64_t t, double xt, double lse, double smooth,
                               const NllProblem& p, double& loss_sum, double& weight_sum) {
  if (lse_out) lse_out[k] = static_cast<acc_t<T>>(lse);
  const double w = p.weight ? p.weight[t] : 1.0;
  double l = -w * (xt - lse);
  if (p.label_smoothing > 0) l = (1 - p.label_smoothing) * l + p.label_smoothing / static_cast<double>(p.c) * smooth;
  if (out) out[k] = static_cast<T>(static_cast<acc_t<T>>(l));
  loss_sum += l;
  weight_sum += w;
}

// The block's sums of losses and weights into block_sums[2 * block + {0, 1}]
// (kHeld: thread 0 holds them all). Contains __syncthreads unless kHeld.
template <bool kHeld> __device__ void store_block_sums(double* block_sums, double loss_sum, double weight_sum) {
  if constexpr (!kHeld) {
    const kernels::SumReduce<double> sum_of;
    loss_sum = block_all_reduce<kLossThreads>(loss_sum, sum_of);
    weight_sum = block_all_reduce<kLossThreads>(weight_sum, sum_of);
  }
  if (threadIdx.x == 0) {
    block_sums[2 * blockIdx.x] = loss_sum;
    block_sums[2 * blockIdx.x + 1] = weight_sum;
  }
}

// Element losses, one warp per element: out (reduction 'none') or, per block,
// the sums of losses and of the weights of the targets kept (block_sums).
template <class T, bool kFromLogits>
static __global__ void nll_elements(T* out, double* block_sums, acc_t<T>* lse_out, const T* logp, const int64_t* target,
                                    NllProblem p) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t warps_per_block = kLossThreads / PF_WARP_SIZE;
  const bool smoothing = p.label_smoothing > 0;
  double loss_sum = 0, weight_sum = 0;  // lane 0 of each warp
  for (int64_t k = blockIdx.x * warps_per_block + threadIdx.x / PF_WARP_SIZE; k < p.n * p.s;
       k += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const int64_t t = target[k], i = k / p.s, j = k % p.s;
    if (!counted(out, lse_out, k, t, p, lane == 0)) continue;  // the same for the whole warp
    const T* row = logp + i * p.c * p.s + j;  // class q at row[q * s]
    double lse = 0, smooth = 0;  // smooth: -sum_c w[c] logp[c]
    if constexpr (kFromLogits) {
      LogitSums<A> sums = LogitSums<A>::none();
      for (int64_t q = lane; q < p.c; q += PF_WARP_SIZE) {
        const A x[1] = {static_cast<A>(row[q * p.s])};
        sums.add(x);
        if (smoothing) sums.smooth(x[0], p.weight ? p.weight[q] : 1.0);
      }
      sums = warp_merge(sums, smoothing);
      lse = sums.logsumexp();
      smooth = lse * sums.weights - sums.weighted;
    } else if (smoothing) {
      for (int64_t q = lane; q < p.c; q += PF_WARP_SIZE)
        smooth -= (p.weight ? p.weight[q] : 1.0) * static_cast<double>(row[q * p.s]);
      smooth = warp_all_reduce(smooth, kernels::SumReduce<double>());
    }
    if (lane == 0)
      finish_element(out, lse_out, k, t, static_cast<double>(row[t * p.s]), lse, smooth, p, loss_sum, weight_sum);
  }
  if (block_sums) store_block_sums<false>(block_sums, loss_sum, weight_sum);
}

// cross_entropy with the classes contiguous (S == 1): a block (kBlock) or a
// team of `width` lanes per row, so that short rows share a warp (rows of 65
// classes took a warp each, half its lanes idle: 0.84x PyTorch); kSmooth: label
// smoothing is on, so the pass also sums w[c] x[c].
template <class T, bool kBlock, bool kSmooth>
static __global__ void __launch_bounds__(kLossThreads, rows_min_blocks<T>(kSmooth))
    cross_entropy_rows(T* out, double* block_sums, acc_t<T>* lse_out, const T* logits, const int64_t* target,
                       NllProblem p, int width) {
  using A = acc_t<T>;
  constexpr int V = kVec<T>;
  double loss_sum = 0, weight_sum = 0;  // the leader (rank 0) of each team
  for (RowTeam<kBlock> team(width); team.first < p.n; team.next()) {
    const int64_t k = team.row(), round = int64_t{kUnroll} * team.width;
    const int rank = team.rank;
    // Every lane runs the merge below: a team past the last row, or whose target does not count, adds nothing.
    const int64_t t = k < p.n ? target[k] : p.ignore_index;
    const bool kept = k < p.n && counted(out, lse_out, k, t, p, rank == 0);
    LogitSums<A> sums = LogitSums<A>::none();
    double xt = 0.0;
    if (kept) {
      const T* row = logits + k * p.c;
      if (rank == 0) xt = static_cast<double>(row[t]);  // loaded early, used at the end
      // Classes [head, rest) in V-aligned vectors; the fewer than V before and after them one each.
      const int64_t to_aligned = (V - static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) / sizeof(T) % V)) % V;
      const int64_t head = to_aligned < p.c ? to_aligned : p.c, nvec = (p.c - head) / V, rest = head + nvec * V;
      auto add_one = [&](int64_t q) {
        const A x[1] = {static_cast<A>(row[q])};
        sums.add(x);
        if constexpr (kSmooth) sums.smooth(x[0], p.weight ? p.weight[q] : 1.0);
      };
      for (int64_t q = rank; q < head; q += team.width) add_one(q);  // a team may have fewer lanes than V
      for (int64_t q = rest + rank; q < p.c; q += team.width) add_one(q);
      const Vec<T, V>* body = reinterpret_cast<const Vec<T, V>*>(row + head);
      for (int64_t i = rank; i < nvec; i += round) {
        Vec<T, V> v[kUnroll]{};
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (i + u * team.width < nvec) v[u] = body[i + u * team.width];
        A x[kUnroll * V];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
          for (int j = 0; j < V; ++j)
            x[u * V + j] = i + u * team.width < nvec ? static_cast<A>(v[u].v[j]) : ExpSums<A>::kNone;
        sums.add(x);
        if constexpr (kSmooth) {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            if (i + u * team.width >= nvec) break;
            const int64_t q = head + (i + u * team.width) * V;
#pragma unroll
            for (int j = 0; j < V; ++j) sums.smooth(x[u * V + j], p.weight ? p.weight[q + j] : 1.0);
          }
        }
      }
    }
    if constexpr (kBlock) sums = block_merge(sums, kSmooth);
    else sums = warp_merge(sums, kSmooth, team.width);
    if (rank != 0 || !kept) continue;
    const double lse = sums.logsumexp();
    finish_element(out, lse_out, k, t, xt, lse, lse * sums.weights - sums.weighted, p, loss_sum, weight_sum);
  }
  if (block_sums) store_block_sums<kBlock>(block_sums, loss_sum, weight_sum);
}

// One block: the total over the blocks' pairs, divided by the total weight for 'mean'.
template <class T> static __global__ void nll_total(T* out, const double* block_sums, int blocks, bool mean) {
  double loss_sum = 0, weight_sum = 0;
  for (int b = threadIdx.x; b < blocks; b += kTotalThreads) {
    loss_sum += block_sums[2 * b];
    weight_sum += block_sums[2 * b + 1];
  }
  const kernels::SumReduce<double> sum_of;
  loss_sum = block_all_reduce<kTotalThreads>(loss_sum, sum_of);
  weight_sum = block_all_reduce<kTotalThreads>(weight_sum, sum_of);
  if (threadIdx.x == 0) out[0] = static_cast<T>(static_cast<acc_t<T>>(mean ? loss_sum / weight_sum : loss_sum));
}

// Lanes per row of cross_entropy_rows for rows of c classes (vec per load):
// about two loads a lane, a power of two from 4 to the warp.
int row_team_width(int64_t c, int vec, int device) {
  int width = 4;
  while (width < warp_size(device) && 2 * width * vec < c) width *= 2;
  return width;
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
  const int64_t elements = p.n * p.s;
  const bool reduce = at.reduction != Reduction::None;
  if (!reduce && elements == 0) return;  // (then the logsumexp output is empty too)
  const bool smoothing = at.label_smoothing > 0;
  visit_dtype(logp.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const bool rows = kFromLogits && p.s == 1;
      const bool block_per_row = rows && p.c >= int64_t{kLossThreads} * kUnroll * kVec<T>;
      // Threads per element: a block, a team of a warp (rows), or a warp (nll_elements).
      const int width =
          block_per_row ? kLossThreads : rows ? row_team_width(p.c, kVec<T>, dev.index) : warp_size(dev.index);
      const int64_t per_block = kLossThreads / width;  // elements at once
      const int blocks =
          static_cast<int>(std::clamp<int64_t>((elements + per_block - 1) / per_block, 1, kMaxLossBlocks));
      Tensor block_sums = reduce ? Tensor::empty({2 * blocks}, DType::Float64, dev) : Tensor();
      double* sums = reduce ? block_sums.data<double>() : nullptr;
      T* loss = reduce ? nullptr : out.data<T>();
      acc_t<T>* lse = kFromLogits ? call.outputs[1].data<acc_t<T>>() : nullptr;
      auto launch_rows = [&](auto block) {
        constexpr bool kBlock = decltype(block)::value;
        if (smoothing)
          cross_entropy_rows<T, kBlock, true><<<blocks, kLossThreads, 0, stream>>>(
              loss, sums, lse, logp.data<T>(), target.data<int64_t>(), p, width);
        else
          cross_entropy_rows<T, kBlock, false><<<blocks, kLossThreads, 0, stream>>>(
              loss, sums, lse, logp.data<T>(), target.data<int64_t>(), p, width);
      };
      if (!rows)
        nll_elements<T, kFromLogits><<<blocks, kLossThreads, 0, stream>>>(loss, sums, lse, logp.data<T>(),
                                                                           target.data<int64_t>(), p);
      else if (block_per_row)
        launch_rows(std::true_type());
      else
        launch_rows(std::false_type());
      if (reduce) {
        HIP_CHECK(hipGetLastError());
        nll_total<T><<<1, kTotalThreads, 0, stream>>>(out.data<T>(), sums, blocks, at.reduction == Reduction::Mean);
      }
    }
  });
  check_launch(op_name(call.op), "input (N, C, S) = (" + std::to_string(p.n) + ", " + std::to_string(p.c) + ", " +
                               std::to_string(p.s) + ") (" + dtype_name(logp.dtype()) + ")");
}

// cross_entropy's logits gradient (cpu/loss.cpp has the formula) from the
// forward's logsumexp, elementwise over the logits:
//   scale * (exp(x - lse) * total - coef[c]),  total = sum_c coef[c],
// zeros where the element is ignored. Each thread takes V classes of one
// element (16-byte vectors where S == 1 and C divides into them), so every
// element of the gradient is in flight at once: a warp per element left most
// of the GPU idle on few long rows (2048 x 10000: 166 us, PyTorch 94). Index
// is int32_t where the logits allow it (a 64-bit division per vector costs
// more than the loads).
template <class T, int V, class Index>
static __global__ void __launch_bounds__(kLossThreads)
    cross_entropy_backward_elements(T* gx, const T* logits, const int64_t* target, const acc_t<T>* scale,
                                    const acc_t<T>* lse_of, const double* weight_total, bool per_element,
                                    NllProblem p) {
  using A = acc_t<T>;
  const Index s = static_cast<Index>(p.s), plane = static_cast<Index>(p.c) * s;
  const Index units = static_cast<Index>(p.n) * plane / V;
  const double smooth = p.label_smoothing / static_cast<double>(p.c);
  const double weights = smooth > 0 && p.weight ? *weight_total : static_cast<double>(p.c);
  const Index stride = static_cast<Index>(gridDim.x) * kLossThreads;
  for (Index u = static_cast<Index>(blockIdx.x) * kLossThreads + threadIdx.x; u < units; u += stride) {
    const Index e = u * V, i = e / plane, r = e - i * plane, q0 = r / s, k = i * s + (r - q0 * s);
    const int64_t t = target[k];
    Vec<T, V> out;
    if (t == p.ignore_index || t < 0 || t >= p.c) {  // the forward reported a target out of range
#pragma unroll
      for (int j = 0; j < V; ++j) out.v[j] = T(0);
    } else {
      const double wt = p.weight ? p.weight[t] : 1.0;
      const A total = static_cast<A>((1 - p.label_smoothing) * wt + smooth * weights);
      const A on_target = static_cast<A>((1 - p.label_smoothing) * wt);
      const A sc = scale[per_element ? k : 0], lse = lse_of[k];
      const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(logits + e);
#pragma unroll
      for (int j = 0; j < V; ++j) {  // V > 1 only where S == 1: class q0 + j
        const int64_t q = q0 + j;
        A coef = smooth > 0 ? static_cast<A>(smooth * (p.weight ? p.weight[q] : 1.0)) : A(0);
        if (q == t) coef += on_target;
        out.v[j] = static_cast<T>(sc * (math::exp(static_cast<A>(x.v[j]) - lse) * total - coef));
      }
    }
    *reinterpret_cast<Vec<T, V>*>(gx + e) = out;
  }
}

// sum_c w[c] for label smoothing with a weight: the same for every element, so summed once.
static __global__ void __launch_bounds__(kLossThreads) sum_class_weights(double* total, const double* w, int64_t c) {
  double s = 0;
  for (int64_t q = threadIdx.x; q < c; q += kLossThreads) s += w[q];
  s = block_all_reduce<kLossThreads>(s, kernels::SumReduce<double>());
  if (threadIdx.x == 0) *total = s;
}

void cross_entropy_backward_entry(OpCall& call) {
  Tensor& out = call.out();
  const Device dev = out.device();
  DeviceGuard guard(dev.index);
  const Tensor &logits = call.inputs[1], &target = call.inputs[2], &weight = call.inputs[3];
  const LossAttrs& at = call.attr<LossAttrs>();
  const NllProblem p{logits.shape()[0], logits.shape()[1], logits.shape()[2], at.ignore_index, at.label_smoothing,
                     weight.defined() ? weight.data<double>() : nullptr, static_cast<int32_t>(call.op),
                     kernel_error_slot(dev.index)};
  if (logits.numel() == 0) return;
  const hipStream_t stream = current_stream(dev.index);
  Tensor weight_total;
  if (p.weight && at.label_smoothing > 0) {
    weight_total = Tensor::empty({1}, DType::Float64, dev);
    sum_class_weights<<<1, kLossThreads, 0, stream>>>(weight_total.data<double>(), p.weight, p.c);
    HIP_CHECK(hipGetLastError());
  }
  const double* total = weight_total.defined() ? weight_total.data<double>() : nullptr;
  visit_dtype(logits.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      constexpr int kV = kVec<T>;
      const bool vector = p.s == 1 && p.c % kV == 0 && aligned(logits.data_ptr(), sizeof(T) * kV) &&
                          aligned(out.data_ptr(), sizeof(T) * kV);
      // int32_t: the grid-stride walk stays below 2^31 (grid_for's grid: at most 2^28 threads).
      const bool narrow = logits.numel() < (int64_t{1} << 30);
      static_assert(kLossThreads == kThreads, "grid_for sizes grids of kThreads blocks");
      auto run = [&](auto v, auto index) {
        constexpr int V = decltype(v)::value;
        using Index = decltype(index);
        cross_entropy_backward_elements<T, V, Index><<<grid_for(logits.numel() / V), kLossThreads, 0, stream>>>(
            out.data<T>(), logits.data<T>(), target.data<int64_t>(), call.inputs[0].data<acc_t<T>>(),
            call.inputs[4].data<acc_t<T>>(), total, call.inputs[0].numel() > 1, p);
      };
      if (vector && narrow) run(std::integral_constant<int, kV>(), int32_t{});
      else if (vector) run(std::integral_constant<int, kV>(), int64_t{});
      else if (narrow) run(std::integral_constant<int, 1>(), int32_t{});
      else run(std::integral_constant<int, 1>(), int64_t{});
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
