// GPU normalization with the CPU kernels' semantics (src/cpu/norm.cpp): the
// op layer hands x as (rows, M) for layer_norm/rms_norm and as (N, C, S) for
// group_norm/batch_norm, weight/bias/running statistics as float32 or float64
// (C) or undefined (ChannelParam reads either, so a model's float32
// parameters cost no conversion per call). Statistics are in the compute
// type: two passes over a row held in registers, else Welford states
// (welford.h); normalizing is (x - mean) * scale + shift, centred first as on the CPU.
//
// layer_norm, rms_norm, and group_norm whose groups hold at most 8192
// elements: the row held in registers, so x is read once and written once, by
// a team of lanes per row where a warp can hold it (RowTeam: rows of a few
// hundred elements fill a warp, several per block, and meet in shuffles
// alone), else by a block per row (a group of a sample is a contiguous row of
// (C / G) * S elements); weight and bias, converted to the compute type, are
// read per element (they stay in cache). Longer rows are read twice. Their
// backward passes: a team per row holding x and g where a warp can, else one
// block per row.
//
// Longer groups and batch_norm: three launches. Statistics: blocks fold runs
// of a statistic's elements (group_norm: the contiguous (C/G) * S values of
// one group of one sample; batch_norm: the N runs of S values of one channel, split
// over blocks so that a few channels still fill the GPU) into Welford states;
// finish: one thread per statistic merges its blocks' states into mean and
// 1/std in double and, for batch_norm training, updates the running
// statistics (unbiased variance, as PyTorch); normalize: one block per
// (n, c) plane of S values (S small: one thread per element), each plane's
// mean, scale and shift read once. batch_norm with at most kFusedChannel
// values per channel (small feature maps), or with channels for most
// multiprocessors (forward), runs in one launch instead, a block per channel
// (batch_norm_channels), forward and backward.
//
// batch_norm_backward and group_norm_backward: see their section below.

#include <algorithm>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"
#include "rocm/kernels/welford.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kNormThreads = 256;
constexpr int kMaxCached = 32;  // row elements per thread held in registers: rows up to 8192
// Planes shorter than this are normalized one thread per element (a block per plane would idle).
constexpr int64_t kMinBlockPlane = 64;

// ---- rows: layer_norm, rms_norm, group_norm -----------------------------------

// The weight and bias of element `col` of row `row`: per column (layer_norm,
// rms_norm), or per channel (group_norm, rows of (C / G) * S: the channel is
// (row % G) * (C / G) + col / S).
// They arrive as float32 or float64 and are converted to the compute type A
// once per call (read for every element, float64 would move twice the bytes);
// a 16-bit layer_norm's or rms_norm's parameters of the input's dtype are read
// as they are (P), converted per element.
template <class A, class P = A> struct RowAffine {
  const P* weight;  // or null: ones
  const P* bias;    // or null: zeros
  int64_t groups;   // group_norm's G; 0 for per-column parameters
  int64_t group_channels, plane;  // group_norm: C / G and S

  __device__ void at(int64_t row, int64_t col, A& w, A& b) const {
    const int64_t i = groups ? row % groups * group_channels + col / plane : col;
    w = weight ? static_cast<A>(weight[i]) : A(1);
    b = bias ? static_cast<A>(bias[i]) : A(0);
  }

  // Columns col .. col + V - 1 (col V-aligned) of a row of at most 2^31
  // elements: per-column parameters in one access each, per-channel ones
  // with 32-bit division (a 64-bit one costs several times as much).
  template <int V> __device__ void at(int64_t row, int64_t col, Vec<A, V>& w, Vec<A, V>& b) const {
    if (!groups) {
      if (weight) {
        const Vec<P, V> pw = *reinterpret_cast<const Vec<P, V>*>(weight + col);
#pragma unroll
        for (int j = 0; j < V; ++j) w.v[j] = static_cast<A>(pw.v[j]);
      }
      if (bias) {
        const Vec<P, V> pb = *reinterpret_cast<const Vec<P, V>*>(bias + col);
#pragma unroll
        for (int j = 0; j < V; ++j) b.v[j] = static_cast<A>(pb.v[j]);
      }
    }
    const int64_t first_channel = groups ? row % groups * group_channels : 0;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (groups) {
        const int64_t i = first_channel + static_cast<uint32_t>(col + j) / static_cast<uint32_t>(plane);
        w.v[j] = weight ? static_cast<A>(weight[i]) : A(1);
        b.v[j] = bias ? static_cast<A>(bias[i]) : A(0);
      } else {
        if (!weight) w.v[j] = A(1);
        if (!bias) b.v[j] = A(0);
      }
    }
  }
};

// Rows of at most kVecs * V elements per team thread held in registers, so x
// is read once, one row per team (kBlock: the block; else `width` lanes of a
// warp, several rows per warp for short rows): thread `rank` holds vectors
// rank + k * width (V > 1: rows V-aligned, m % V == 0).
template <class T, bool kRms, int kVecs, int V, bool kBlock, class Affine>
static __global__ void __launch_bounds__(kNormThreads)
    row_norm_cached(T* out, const T* in, Affine affine, int64_t rows, int64_t m, double eps, int width) {
  using A = acc_t<T>;
  const int64_t nvec = m / V;
  const kernels::SumReduce<A> sum_of;
  for (RowTeam<kBlock> team(width); team.first < rows; team.next()) {
    const int64_t row = team.row();
    const bool live_row = row < rows;
    const Vec<T, V>* x = reinterpret_cast<const Vec<T, V>*>(in + (live_row ? row : 0) * m);
    Vec<T, V>* y = reinterpret_cast<Vec<T, V>*>(out + (live_row ? row : 0) * m);
    A v[kVecs][V];
    A s = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = team.rank + static_cast<int64_t>(k) * team.width;
      const bool live = live_row && i < nvec;
      Vec<T, V> xv{};
      if (live) xv = x[i];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[k][j] = live ? static_cast<A>(xv.v[j]) : A(0);
        s += v[k][j];
      }
    }
    // rms_norm: the mean square about 0; the others: the variance about the mean.
    const A mean = kRms ? A(0) : team.template all_reduce<kNormThreads>(s, sum_of) / static_cast<A>(m);
    A q = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const bool live = live_row && team.rank + static_cast<int64_t>(k) * team.width < nvec;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[k][j] -= mean;
        if (live) q += v[k][j] * v[k][j];
      }
    }
    q = team.template all_reduce<kNormThreads>(q, sum_of);
    const A rstd = A(1) / math::sqrt(q / static_cast<A>(m) + static_cast<A>(eps));
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = team.rank + static_cast<int64_t>(k) * team.width;
      if (!live_row || i >= nvec) break;
      Vec<A, V> w, b;
      affine.at(row, i * V, w, b);
      Vec<T, V> yv;
#pragma unroll
      for (int j = 0; j < V; ++j) yv.v[j] = static_cast<T>(v[k][j] * rstd * w.v[j] + b.v[j]);
      y[i] = yv;
    }
  }
}

// Any row length: x is read for the statistics and again to write.
template <class T, bool kRms, class Affine>
static __global__ void row_norm(T* out, const T* in, Affine affine, int64_t rows, int64_t m, double eps) {
  using A = acc_t<T>;
  const kernels::SumReduce<A> sum_of;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = in + row * m;
    T* y = out + row * m;
    A mean = A(0), rstd;
    if constexpr (kRms) {
      A q = A(0);
      for (int64_t i = threadIdx.x; i < m; i += kNormThreads) q += static_cast<A>(x[i]) * static_cast<A>(x[i]);
      q = block_all_reduce<kNormThreads>(q, sum_of);
      rstd = A(1) / math::sqrt(q / static_cast<A>(m) + static_cast<A>(eps));
    } else {
      Welford<A> s{};
      for (int64_t i = threadIdx.x; i < m; i += kNormThreads) s.push(static_cast<A>(x[i]));
      s = block_all_merge<kNormThreads>(s);
      mean = s.mean;
      rstd = A(1) / math::sqrt(s.m2 / static_cast<A>(m) + static_cast<A>(eps));
    }
    for (int64_t i = threadIdx.x; i < m; i += kNormThreads) {
      A w, b;
      affine.at(row, i, w, b);
      y[i] = static_cast<T>((static_cast<A>(x[i]) - mean) * rstd * w + b);
    }
  }
}

template <class T, bool kRms, int V, bool kBlock, class Affine>
void launch_row_norm_cached(T* out, const T* in, const Affine& affine, int64_t rows, int64_t m, double eps,
                            int width, hipStream_t stream) {
  const int64_t per = (m / V + width - 1) / width * V;  // elements per thread
  const int64_t teams = kNormThreads / width;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((rows + teams - 1) / teams, int64_t{1} << 20));
  auto run = [&](auto per_tag) {
    constexpr int kVecs = std::max<int>(decltype(per_tag)::value, V) / V;
    row_norm_cached<T, kRms, kVecs, V, kBlock><<<grid, kNormThreads, 0, stream>>>(out, in, affine, rows, m, eps, width);
  };
  if (per <= 4) run(std::integral_constant<int, 4>());
  else if (per <= 16) run(std::integral_constant<int, 16>());
  else run(std::integral_constant<int, kMaxCached>());
}

// x (rows, m) normalized per row into `out`; weight and bias (float32, float64, x's
// 16-bit dtype, or undefined) per column, or per channel where groups > 0 (RowAffine).
template <bool kRms>
void launch_row_norm(const OpCall& call, const Tensor& x, int64_t rows, int64_t m, const Tensor& weight,
                     const Tensor& bias, int64_t groups, int64_t group_channels, int64_t plane) {
  const int device = x.device().index;
  const double eps = call.attr<NormAttrs>().eps;
  const hipStream_t stream = current_stream(device);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 16));
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const T* in = x.data<T>();
      T* out = call.out().data<T>();
      constexpr int V = kVec<T>;  // 16-byte accesses
      const bool vector = m % V == 0 && aligned(in, sizeof(T) * V) && aligned(out, sizeof(T) * V);
      const int64_t nvec = vector ? m / V : m;
      const int warp = warp_size(device);
      auto launch = [&](const auto& affine) {
        if (m > int64_t{kNormThreads} * kMaxCached) {
          row_norm<T, kRms><<<grid, kNormThreads, 0, stream>>>(out, in, affine, rows, m, eps);
        } else if ((nvec + warp - 1) / warp * (vector ? V : 1) <= kMaxCached) {  // a warp's lanes hold the row
          const int width = team_width(nvec, warp);
          if (vector) launch_row_norm_cached<T, kRms, V, false>(out, in, affine, rows, m, eps, width, stream);
          else launch_row_norm_cached<T, kRms, 1, false>(out, in, affine, rows, m, eps, width, stream);
        } else if (vector) {
          launch_row_norm_cached<T, kRms, V, true>(out, in, affine, rows, m, eps, kNormThreads, stream);
        } else {
          launch_row_norm_cached<T, kRms, 1, true>(out, in, affine, rows, m, eps, kNormThreads, stream);
        }
      };
      // Read a vector at a time: a view of the caller's (off 16 bytes, say) is copied.
      auto for_vectors = [](const Tensor& t, DType dtype) {
        if (!t.defined()) return Tensor();
        Tensor c = t.to(dtype);
        return aligned(c.data_ptr(), c.itemsize() * kVec<T>) ? c : c.clone();
      };
      const bool as_input = !std::is_same_v<T, A> && (weight.defined() || bias.defined()) &&
                            (!weight.defined() || weight.dtype() == x.dtype()) &&
                            (!bias.defined() || bias.dtype() == x.dtype());
      if (as_input) {
        const Tensor w = for_vectors(weight, x.dtype()), b = for_vectors(bias, x.dtype());
        launch(RowAffine<A, T>{w.defined() ? w.data<T>() : nullptr, b.defined() ? b.data<T>() : nullptr, groups,
                               group_channels, plane});
      } else {
        const Tensor w = for_vectors(weight, dtype_of<A>()), b = for_vectors(bias, dtype_of<A>());
        launch(RowAffine<A>{w.defined() ? w.data<A>() : nullptr, b.defined() ? b.data<A>() : nullptr, groups,
                            group_channels, plane});
      }
    }
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(call.out().shape()) + " as rows (" +
                                     std::to_string(rows) + ", " + std::to_string(m) + ") (" + dtype_name(x.dtype()) +
                                     ")");
}

// inputs: x (rows, M), weight (M), bias (M).
template <bool kRms> void row_norm_entry(OpCall& call) {
  DeviceGuard guard(call.out().device().index);
  const Tensor& x = call.inputs[0];
  const int64_t rows = x.shape()[0], m = x.shape()[1];
  if (rows == 0 || m == 0) return;
  launch_row_norm<kRms>(call, x, rows, m, call.inputs[1], call.inputs[2], 0, 0, 0);
}

// The input gradient of layer_norm / rms_norm (cpu/norm.cpp has the
// formula), one block per row: the statistics of x (Welford, or the mean
// square), then the block sums of g w and g w xhat, then the row written.
// x and g are read two or three times; a row is small enough that the later
// reads mostly hit the cache. Each row's (mean, rstd) go to `stats` for the
// parameters' gradients.
template <class T, bool kRms, int V>
static __global__ void row_norm_backward(T* gx, acc_t<T>* stats, const T* g, const T* x, const acc_t<T>* weight,
                                         int64_t rows, int64_t m, double eps) {
  using A = acc_t<T>;
  const kernels::SumReduce<A> sum_of;
  const int64_t nvec = m / V;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Vec<T, V>* xr = reinterpret_cast<const Vec<T, V>*>(x + row * m);
    const Vec<T, V>* gr = reinterpret_cast<const Vec<T, V>*>(g + row * m);
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(gx + row * m);
    A mean = A(0), rstd;
    if constexpr (kRms) {
      A q = A(0);
      for (int64_t i = threadIdx.x; i < nvec; i += kNormThreads) {
        const Vec<T, V> xv = xr[i];
#pragma unroll
        for (int j = 0; j < V; ++j) q += static_cast<A>(xv.v[j]) * static_cast<A>(xv.v[j]);
      }
      q = block_all_reduce<kNormThreads>(q, sum_of);
      rstd = A(1) / math::sqrt(q / static_cast<A>(m) + static_cast<A>(eps));
    } else {
      Welford<A> st{};
      for (int64_t i = threadIdx.x; i < nvec; i += kNormThreads) {
        const Vec<T, V> xv = xr[i];
#pragma unroll
        for (int j = 0; j < V; ++j) st.push(static_cast<A>(xv.v[j]));
      }
      st = block_all_merge<kNormThreads>(st);
      mean = st.mean;
      rstd = A(1) / math::sqrt(st.m2 / static_cast<A>(m) + static_cast<A>(eps));
    }
    if (threadIdx.x == 0) stats[2 * row] = mean, stats[2 * row + 1] = rstd;
    A sum_g = A(0), sum_gx = A(0);
    for (int64_t i = threadIdx.x; i < nvec; i += kNormThreads) {
      const Vec<T, V> xv = xr[i], gv = gr[i];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A gh = static_cast<A>(gv.v[j]) * (weight ? weight[i * V + j] : A(1));
        sum_g += gh;
        sum_gx += gh * (static_cast<A>(xv.v[j]) - mean) * rstd;
      }
    }
    if (!kRms) sum_g = block_all_reduce<kNormThreads>(sum_g, sum_of);
    sum_gx = block_all_reduce<kNormThreads>(sum_gx, sum_of);
    const A mean_g = kRms ? A(0) : sum_g / static_cast<A>(m), mean_gx = sum_gx / static_cast<A>(m);
    for (int64_t i = threadIdx.x; i < nvec; i += kNormThreads) {
      const Vec<T, V> xv = xr[i], gv = gr[i];
      Vec<T, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A xhat = (static_cast<A>(xv.v[j]) - mean) * rstd;
        const A gh = static_cast<A>(gv.v[j]) * (weight ? weight[i * V + j] : A(1));
        r.v[j] = static_cast<T>(rstd * (gh - mean_g - xhat * mean_gx));
      }
      out[i] = r;
    }
  }
}

// The same for rows that a warp can hold: a team of `width` lanes per row
// holds x and g in registers (thread `rank`: vectors rank + k * width; V > 1:
// rows V-aligned, m % V == 0), so both are read once and the statistics take
// two passes over registers.
template <class T, bool kRms, int kVecs, int V>
static __global__ void __launch_bounds__(kNormThreads)
    row_norm_backward_cached(T* gx, acc_t<T>* stats, const T* g, const T* x, const acc_t<T>* weight, int64_t rows,
                             int64_t m, double eps, int width) {
  using A = acc_t<T>;
  const kernels::SumReduce<A> sum_of;
  const int64_t nvec = m / V;
  for (RowTeam<false> team(width); team.first < rows; team.next()) {
    const int64_t row = team.row();
    const bool live_row = row < rows;
    const int64_t at = (live_row ? row : 0) * m;
    const Vec<T, V>* xr = reinterpret_cast<const Vec<T, V>*>(x + at);
    const Vec<T, V>* gr = reinterpret_cast<const Vec<T, V>*>(g + at);
    A xv[kVecs][V], gh[kVecs][V];  // x, then x - mean; g w
    A s = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = team.rank + static_cast<int64_t>(k) * team.width;
      const bool live = live_row && i < nvec;
      Vec<T, V> a{}, b{};
      if (live) a = xr[i], b = gr[i];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xv[k][j] = live ? static_cast<A>(a.v[j]) : A(0);
        gh[k][j] = live ? static_cast<A>(b.v[j]) * (weight ? weight[i * V + j] : A(1)) : A(0);
        s += xv[k][j];
      }
    }
    const A mean = kRms ? A(0) : team.template all_reduce<kNormThreads>(s, sum_of) / static_cast<A>(m);
    A q = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const bool live = live_row && team.rank + static_cast<int64_t>(k) * team.width < nvec;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xv[k][j] -= mean;
        if (live) q += xv[k][j] * xv[k][j];
      }
    }
    q = team.template all_reduce<kNormThreads>(q, sum_of);
    const A rstd = A(1) / math::sqrt(q / static_cast<A>(m) + static_cast<A>(eps));
    if (live_row && team.rank == 0) stats[2 * row] = mean, stats[2 * row + 1] = rstd;
    A sum_g = A(0), sum_gx = A(0);  // dead slots hold zeros
#pragma unroll
    for (int k = 0; k < kVecs; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) {
        sum_g += gh[k][j];
        sum_gx += gh[k][j] * xv[k][j];
      }
    if (!kRms) sum_g = team.template all_reduce<kNormThreads>(sum_g, sum_of);
    sum_gx = team.template all_reduce<kNormThreads>(sum_gx, sum_of) * rstd;
    const A mean_g = kRms ? A(0) : sum_g / static_cast<A>(m), mean_gx = sum_gx / static_cast<A>(m);
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(gx + at);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = team.rank + static_cast<int64_t>(k) * team.width;
      if (!live_row || i >= nvec) break;
      Vec<T, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = static_cast<T>(rstd * (gh[k][j] - mean_g - xv[k][j] * rstd * mean_gx));
      out[i] = r;
    }
  }
}

// The weight's and bias's gradients of layer_norm / rms_norm: the column sums
// of g xhat and g, from the rows' (mean, rstd) that the input gradient's kernel
// wrote. Block (tile, chunk) sums kColLanes * V columns over its chunk of rows,
// kRowGroups rows at a time (coalesced along the row; a lane's column set
// does not depend on the warp size), the row groups' sums added in a fixed
// order so results repeat; finish_row_norm_params adds the chunks, also in
// order. Partials: (2, chunks, m), g xhat then g.
constexpr int kColLanes = 32, kRowGroups = kNormThreads / kColLanes;

template <class T, bool kRms, int V>
static __global__ void __launch_bounds__(kNormThreads)
    row_norm_param_partials(acc_t<T>* partials, const T* g, const T* x, const acc_t<T>* stats, int64_t rows,
                            int64_t m, int64_t chunk_rows) {
  using A = acc_t<T>;
  __shared__ A sums[2][kRowGroups][kColLanes * V];
  const int lane = threadIdx.x % kColLanes, group = threadIdx.x / kColLanes;
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * kColLanes + lane) * V;
  const int64_t first = blockIdx.y * chunk_rows, end = first + chunk_rows < rows ? first + chunk_rows : rows;
  A sum_gxhat[V] = {}, sum_g[V] = {};
  if (col < m) {
#pragma unroll 4
    for (int64_t r = first + group; r < end; r += kRowGroups) {
      const A mean = stats[2 * r], rstd = stats[2 * r + 1];
      const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + r * m + col);
      const Vec<T, V> gv = *reinterpret_cast<const Vec<T, V>*>(g + r * m + col);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A gj = static_cast<A>(gv.v[j]);
        sum_gxhat[j] += gj * (static_cast<A>(xv.v[j]) - mean) * rstd;
        if (!kRms) sum_g[j] += gj;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) sums[0][group][lane * V + j] = sum_gxhat[j], sums[1][group][lane * V + j] = sum_g[j];
  __syncthreads();
  // Thread t of the block adds column t of the tile (at most kNormThreads wide: 32 lanes of 8 halves).
  for (int c = threadIdx.x; c < kColLanes * V; c += kNormThreads) {
    const int64_t at = static_cast<int64_t>(blockIdx.x) * kColLanes * V + c;
    if (at >= m) break;
    A w = A(0), b = A(0);
    for (int k = 0; k < kRowGroups; ++k) w += sums[0][k][c], b += sums[1][k][c];
    partials[blockIdx.y * m + at] = w;
    if (!kRms) partials[(gridDim.y + blockIdx.y) * m + at] = b;
  }
}

// Block b adds the chunks of columns [b kColLanes, (b + 1) kColLanes), each
// row group every kRowGroups-th chunk (a lane alone would wait on one load
// after another), the groups then in order.
template <class A>
static __global__ void __launch_bounds__(kNormThreads)
    finish_row_norm_params(A* grad_weight, A* grad_bias, const A* partials, int64_t chunks, int64_t m) {
  __shared__ A sums[2][kRowGroups][kColLanes];
  const int lane = threadIdx.x % kColLanes, group = threadIdx.x / kColLanes;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kColLanes + lane;
  A w = A(0), b = A(0);
  if (col < m)
    for (int64_t k = group; k < chunks; k += kRowGroups) {
      w += partials[k * m + col];
      b += grad_bias ? partials[(chunks + k) * m + col] : A(0);
    }
  sums[0][group][lane] = w, sums[1][group][lane] = b;
  __syncthreads();
  if (group != 0 || col >= m) return;
  for (int k = 1; k < kRowGroups; ++k) w += sums[0][k][lane], b += sums[1][k][lane];
  grad_weight[col] = w;
  if (grad_bias) grad_bias[col] = b;
}

// The parameters' gradients (outputs 1 and, for layer_norm, 2) from the rows' statistics.
template <class T, bool kRms>
void launch_row_norm_params(OpCall& call, const T* g, const T* x, const acc_t<T>* stats, int64_t rows, int64_t m,
                            int device, hipStream_t stream) {
  using A = acc_t<T>;
  constexpr int kV = kVec<T>;
  const bool vector = m % kV == 0 && aligned(g, sizeof(T) * kV) && aligned(x, sizeof(T) * kV);
  const int64_t tile = kColLanes * (vector ? kV : 1), tiles = (m + tile - 1) / tile;
  // About two blocks a compute unit, each over at least kRowGroups rows.
  int64_t chunks = std::max<int64_t>(1, 2 * compute_units(device) / tiles);
  const int64_t chunk_rows = ((rows + chunks - 1) / chunks + kRowGroups - 1) / kRowGroups * kRowGroups;
  chunks = (rows + chunk_rows - 1) / chunk_rows;
  PF_CHECK((m + kColLanes - 1) / kColLanes < (int64_t{1} << 31), NotSupportedError, op_name(call.op), ": rows of ", m,
           " elements are too long");
  Tensor partials = Tensor::empty({(kRms ? 1 : 2) * chunks, m}, dtype_of<A>(), call.out().device());
  A* pp = partials.data<A>();
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
  if (vector) row_norm_param_partials<T, kRms, kV><<<grid, kNormThreads, 0, stream>>>(pp, g, x, stats, rows, m, chunk_rows);
  else row_norm_param_partials<T, kRms, 1><<<grid, kNormThreads, 0, stream>>>(pp, g, x, stats, rows, m, chunk_rows);
  HIP_CHECK(hipGetLastError());
  finish_row_norm_params<A><<<static_cast<unsigned>((m + kColLanes - 1) / kColLanes), kNormThreads, 0, stream>>>(
      call.outputs[1].data<A>(), kRms ? nullptr : call.outputs[2].data<A>(), pp, chunks, m);
}

// inputs: g (rows, M), x (rows, M), weight (M, float64) or undefined;
// outputs: the input's gradient, then (attrs.param_grads) the weight's and (layer_norm) the bias's.
template <bool kRms> void row_norm_backward_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor &g = call.inputs[0], &x = call.inputs[1];
  const int64_t rows = x.shape()[0], m = x.shape()[1];
  if (m == 0) return;
  if (rows == 0) {  // empty sums
    for (size_t i = 1; i < call.outputs.size(); ++i) call.outputs[i].fill_(Scalar(0.0));
    return;
  }
  const double eps = call.attr<NormAttrs>().eps;
  const hipStream_t stream = current_stream(device);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 16));
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const Tensor w = call.inputs[2].defined() ? call.inputs[2].to(dtype_of<A>()) : Tensor();
      const A* wp = w.defined() ? w.data<A>() : nullptr;
      T* out = call.out().data<T>();
      const T *gp = g.data<T>(), *xp = x.data<T>();
      Tensor stats_tensor = Tensor::empty({rows, 2}, dtype_of<A>(), call.out().device());
      A* stats = stats_tensor.data<A>();
      // A warp's lanes hold the row's x and g (at most kMaxHeld values of each per lane): a team per row.
      constexpr int kV = kVec<T>, kMaxHeld = sizeof(A) > 4 ? kMaxCached / 2 : kMaxCached;
      const bool held_vector =
          m % kV == 0 && aligned(out, sizeof(T) * kV) && aligned(gp, sizeof(T) * kV) && aligned(xp, sizeof(T) * kV);
      const int64_t nvec = held_vector ? m / kV : m;
      const int warp = warp_size(device);
      if ((nvec + warp - 1) / warp * (held_vector ? kV : 1) <= kMaxHeld) {
        const int width = team_width(nvec, warp);
        const int64_t per = (nvec + width - 1) / width * (held_vector ? kV : 1), teams = kNormThreads / width;
        const unsigned team_grid =
            static_cast<unsigned>(std::min<int64_t>((rows + teams - 1) / teams, int64_t{1} << 20));
        auto run = [&](auto v_tag, auto per_tag) {
          constexpr int V = decltype(v_tag)::value, kVecs = std::max<int>(decltype(per_tag)::value, V) / V;
          row_norm_backward_cached<T, kRms, kVecs, V><<<team_grid, kNormThreads, 0, stream>>>(out, stats, gp, xp, wp,
                                                                                             rows, m, eps, width);
        };
        auto with_per = [&](auto v_tag) {
          if (per <= 4) run(v_tag, std::integral_constant<int, 4>());
          else if (per <= kMaxHeld / 2) run(v_tag, std::integral_constant<int, kMaxHeld / 2>());
          else run(v_tag, std::integral_constant<int, kMaxHeld>());
        };
        if (held_vector) with_per(std::integral_constant<int, kV>());
        else with_per(std::integral_constant<int, 1>());
      } else {
        constexpr int V = kVec<T> < 4 ? kVec<T> : 4;
        if (m % V == 0 && aligned(out, sizeof(T) * V) && aligned(gp, sizeof(T) * V) && aligned(xp, sizeof(T) * V))
          row_norm_backward<T, kRms, V><<<grid, kNormThreads, 0, stream>>>(out, stats, gp, xp, wp, rows, m, eps);
        else
          row_norm_backward<T, kRms, 1><<<grid, kNormThreads, 0, stream>>>(out, stats, gp, xp, wp, rows, m, eps);
      }
      HIP_CHECK(hipGetLastError());
      if (call.outputs.size() > 1) launch_row_norm_params<T, kRms>(call, gp, xp, stats, rows, m, device, stream);
    }
  });
  check_launch(op_name(call.op), "rows (" + std::to_string(rows) + ", " + std::to_string(m) + ") (" +
                                     dtype_name(x.dtype()) + ")");
}

// ---- group_norm, batch_norm ------------------------------------------------

// Where the elements of statistic `item` lie in x: `runs` runs of `run_len`
// contiguous elements, the first at item * item_stride, the next run_stride on.
struct StatLayout {
  int64_t items, item_stride, runs, run_len, run_stride;
};

// Block (item, split) folds runs [split * runs_per_split, ...) of the item.
// Long runs: threads walk along each run (coalesced); short ones (< a warp):
// threads walk the split's elements one each.
// V > 1: runs, their strides and `in` are V-aligned; loads take V elements.
template <class T, int V>
static __global__ void fold_stats(Welford<acc_t<T>>* partials, const T* in, StatLayout l, int64_t splits,
                                  int64_t runs_per_split) {
  using A = acc_t<T>;
  for (int64_t block = blockIdx.x; block < l.items * splits; block += gridDim.x) {
    const int64_t item = block / splits, split = block % splits;
    const int64_t r0 = split * runs_per_split, r1 = std::min(l.runs, r0 + runs_per_split);
    const T* base = in + item * l.item_stride;
    Welford<A> s{};
    if (l.run_len >= PF_WARP_SIZE) {
      for (int64_t r = r0; r < r1; ++r) {
        const Vec<T, V>* run = reinterpret_cast<const Vec<T, V>*>(base + r * l.run_stride);
        for (int64_t i = threadIdx.x; i < l.run_len / V; i += kNormThreads) {
          const Vec<T, V> x = run[i];
#pragma unroll
          for (int j = 0; j < V; ++j) s.push(static_cast<A>(x.v[j]));
        }
      }
    } else {
      for (int64_t k = r0 * l.run_len + threadIdx.x; k < r1 * l.run_len; k += kNormThreads)
        s.push(static_cast<A>(base[k / l.run_len * l.run_stride + k % l.run_len]));
    }
    s = block_all_merge<kNormThreads>(s);
    if (threadIdx.x == 0) partials[block] = s;
  }
}

// A per-channel tensor as the op layer hands it (nn_ops.cpp): float32 or
// float64, contiguous; or absent (null).
struct ChannelParam {
  const void* data;
  bool f64;

  __device__ double at(int64_t i, double absent) const {
    if (!data) return absent;
    return f64 ? static_cast<const double*>(data)[i] : static_cast<double>(static_cast<const float*>(data)[i]);
  }
};

ChannelParam channel_param(const Tensor& t) {
  return t.defined() ? ChannelParam{t.data_ptr(), t.dtype() == DType::Float64} : ChannelParam{nullptr, false};
}

// What batch_norm's statistics take besides the batch's values.
struct RunningStats {
  ChannelParam mean;  // running statistics in (eval: used instead of the batch's)
  ChannelParam var;
  double* new_mean;  // training with running statistics: their updates
  double* new_var;
  double momentum;
};

// The mean and 1 / sqrt(var + eps) of statistic `item`, from its merged state
// `s` (training; `update`: also the running statistics' updates, with the
// unbiased variance as PyTorch) or, with s null, from the running statistics.
template <class A>
__device__ void item_stats(const Welford<A>* s, int64_t item, double eps, const RunningStats& running, bool update,
                           double& mean, double& rstd) {
  if (!s) {
    mean = running.mean.at(item, 0.0);
    rstd = 1.0 / sqrt(running.var.at(item, 1.0) + eps);
    return;
  }
  const double count = static_cast<double>(s->count), var = static_cast<double>(s->m2) / count;
  mean = static_cast<double>(s->mean);
  rstd = 1.0 / sqrt(var + eps);
  if (update && running.new_mean) {
    const double mu = running.momentum;
    running.new_mean[item] = (1 - mu) * running.mean.at(item, 0.0) + mu * mean;
    running.new_var[item] = (1 - mu) * running.var.at(item, 1.0) + mu * var * count / (count - 1);
  }
}

// mean[item] and rstd[item] = 1 / sqrt(var + eps), from the item's split
// states (training) or from the running statistics (eval: partials null).
template <class A>
static __global__ void finish_stats(double* mean, double* rstd, const Welford<A>* partials, int64_t items,
                                    int64_t splits, double eps, RunningStats running) {
  for (int64_t item = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; item < items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    Welford<A> s{};
    if (partials)
      for (int64_t k = 0; k < splits; ++k) s.merge(partials[item * splits + k]);
    item_stats<A>(partials ? &s : nullptr, item, eps, running, true, mean[item], rstd[item]);
  }
}

// The statistics and affine parameters of plane p = n * C + c.
struct PlaneParams {
  const double* mean;  // per statistic
  const double* rstd;
  ChannelParam weight;  // per channel
  ChannelParam bias;
  int64_t channels;
  int64_t groups;  // group_norm: statistic n * groups + c / (C / groups); 0: batch_norm, statistic c

  template <class A> __device__ void at(int64_t plane, A& mu, A& scale, A& shift) const {
    const int64_t c = plane % channels;
    const int64_t item = groups ? plane / channels * groups + c / (channels / groups) : c;
    mu = static_cast<A>(mean[item]);
    scale = static_cast<A>(rstd[item] * weight.at(c, 1.0));
    shift = static_cast<A>(bias.at(c, 0.0));
  }
};

// One block per plane of s elements (s >= kMinBlockPlane). V > 1: planes and
// pointers V-aligned; loads and stores take V elements.
template <class T, int V>
static __global__ void normalize_planes(T* out, const T* in, int64_t planes, int64_t s, PlaneParams p) {
  using A = acc_t<T>;
  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    A mu, scale, shift;
    p.at(plane, mu, scale, shift);
    const Vec<T, V>* x = reinterpret_cast<const Vec<T, V>*>(in + plane * s);
    Vec<T, V>* y = reinterpret_cast<Vec<T, V>*>(out + plane * s);
    for (int64_t i = threadIdx.x; i < s / V; i += kNormThreads) {
      Vec<T, V> v = x[i];
#pragma unroll
      for (int j = 0; j < V; ++j) v.v[j] = static_cast<T>((static_cast<A>(v.v[j]) - mu) * scale + shift);
      y[i] = v;
    }
  }
}

// One thread per element (shorter planes).
template <class T> static __global__ void normalize_elements(T* out, const T* in, int64_t n, int64_t s, PlaneParams p) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A mu, scale, shift;
    p.at(i / s, mu, scale, shift);
    out[i] = static_cast<T>((static_cast<A>(in[i]) - mu) * scale + shift);
  }
}

// batch_norm with few values per channel (n * s <= kFusedChannel), where the
// three launches' fixed cost (and their scratch allocations) outweighs the
// work, or with channels enough to fill most multiprocessors: one block per channel folds its values into a Welford state
// (training), then normalizes them, re-reading them from cache. Threads walk
// the channel's n runs of s / V vectors (c * s apart), kChannelLoads loads
// issued at a time. V > 1: s % V == 0 and in, out V-aligned.
constexpr int kChannelThreads = 512;
constexpr int kChannelLoads = 4;
constexpr int64_t kFusedChannel = 32768;

// Offset of the vector at Walk position (run, vector of the run) in a channel.
__device__ __forceinline__ int64_t channel_offset(const Walk& w, int64_t run_stride, int v) {
  return w.row * run_stride + static_cast<int64_t>(w.col) * v;
}

template <class T, int V>
static __global__ void __launch_bounds__(kChannelThreads, (sizeof(acc_t<T>) == 4 ? 2 : 1))
    batch_norm_channels(T* out, const T* in, int64_t n, int64_t c, int64_t s, bool training, double eps,
                        RunningStats running, ChannelParam weight, ChannelParam bias) {
  using A = acc_t<T>;
  const int runs = static_cast<int>(n), run_vecs = static_cast<int>(s / V);
  const int64_t run_stride = c * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const T* x = in + ch * s;
    T* y = out + ch * s;
    double mean, rstd;
    if (training) {
      Welford<A> st{};
      for (Walk w(threadIdx.x, kChannelThreads, run_vecs); w.row < runs;) {
        Vec<T, V> v[kChannelLoads]{};
        bool got[kChannelLoads];
#pragma unroll
        for (int u = 0; u < kChannelLoads; ++u) {
          got[u] = w.row < runs;
          if (got[u]) v[u] = *reinterpret_cast<const Vec<T, V>*>(x + channel_offset(w, run_stride, V)), w.step();
        }
#pragma unroll
        for (int u = 0; u < kChannelLoads; ++u)
          if (got[u])
#pragma unroll
            for (int j = 0; j < V; ++j) st.push(static_cast<A>(v[u].v[j]));
      }
      st = block_all_merge<kChannelThreads>(st);
      item_stats<A>(&st, ch, eps, running, threadIdx.x == 0, mean, rstd);
    } else {
      item_stats<A>(nullptr, ch, eps, running, false, mean, rstd);
    }
    const A mu = static_cast<A>(mean), scale = static_cast<A>(rstd * weight.at(ch, 1.0));
    const A shift = static_cast<A>(bias.at(ch, 0.0));
    for (Walk w(threadIdx.x, kChannelThreads, run_vecs); w.row < runs;) {
      Vec<T, V> v[kChannelLoads]{};
      bool got[kChannelLoads];
      Walk stores = w;  // walked again for the stores: fewer registers than the loads' offsets
#pragma unroll
      for (int u = 0; u < kChannelLoads; ++u) {
        got[u] = w.row < runs;
        if (got[u]) v[u] = *reinterpret_cast<const Vec<T, V>*>(x + channel_offset(w, run_stride, V)), w.step();
      }
#pragma unroll
      for (int u = 0; u < kChannelLoads; ++u)
        if (got[u]) {
#pragma unroll
          for (int j = 0; j < V; ++j) v[u].v[j] = static_cast<T>((static_cast<A>(v[u].v[j]) - mu) * scale + shift);
          *reinterpret_cast<Vec<T, V>*>(y + channel_offset(stores, run_stride, V)) = v[u];
          stores.step();
        }
    }
  }
}

std::string channels_what(const Tensor& x) {
  return "(N, C, S) = (" + std::to_string(x.shape()[0]) + ", " + std::to_string(x.shape()[1]) + ", " +
         std::to_string(x.shape()[2]) + ") (" + dtype_name(x.dtype()) + ")";
}

// Statistics per `layout` item (or from `running`), then the normalization of x (N, C, S).
void channel_norm(OpCall& call, const StatLayout& layout, bool batch_stats, RunningStats running, const Tensor& weight,
                  const Tensor& bias, int64_t groups) {
  const Tensor& x = call.inputs[0];
  const Device dev = x.device();
  const int device = dev.index;
  const hipStream_t stream = current_stream(device);
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2];
  const double eps = call.attr<NormAttrs>().eps;
  Tensor stats = Tensor::empty({2, layout.items}, DType::Float64, dev);
  double *mean = stats.data<double>(), *rstd = mean + layout.items;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const T* in = x.data<T>();
      T* out = call.out().data<T>();
      // 4-element accesses where the type allows one (at most 16 bytes) and the buffers are aligned.
      const bool vector = sizeof(T) * 4 <= 16 && aligned(in, sizeof(T) * 4) && aligned(out, sizeof(T) * 4);
      Tensor partials;
      const Welford<A>* states = nullptr;
      int64_t splits = 1;
      if (batch_stats) {
        // Enough blocks to fill the GPU: split an item's runs when items are few.
        const int64_t target = int64_t{8} * compute_units(device);
        splits = std::clamp<int64_t>(target / layout.items, 1, layout.runs);
        const int64_t runs_per_split = (layout.runs + splits - 1) / splits;
        splits = (layout.runs + runs_per_split - 1) / runs_per_split;
        partials = Tensor::empty({layout.items * splits * int64_t{sizeof(Welford<A>)}}, DType::UInt8, dev);
        auto* p = static_cast<Welford<A>*>(partials.data_ptr());
        const unsigned grid = static_cast<unsigned>(std::min<int64_t>(layout.items * splits, int64_t{1} << 20));
        if (vector && layout.run_len % 4 == 0 && layout.run_stride % 4 == 0 && layout.item_stride % 4 == 0)
          fold_stats<T, 4><<<grid, kNormThreads, 0, stream>>>(p, in, layout, splits, runs_per_split);
        else
          fold_stats<T, 1><<<grid, kNormThreads, 0, stream>>>(p, in, layout, splits, runs_per_split);
        HIP_CHECK(hipGetLastError());
        states = p;
      }
      finish_stats<A><<<grid_for(layout.items), kThreads, 0, stream>>>(mean, rstd, states, layout.items, splits, eps,
                                                                       running);
      HIP_CHECK(hipGetLastError());
      const PlaneParams params{mean, rstd, channel_param(weight), channel_param(bias), c, groups};
      const unsigned plane_grid = static_cast<unsigned>(std::min<int64_t>(n * c, int64_t{1} << 20));
      if (s >= kMinBlockPlane && vector && s % 4 == 0)
        normalize_planes<T, 4><<<plane_grid, kNormThreads, 0, stream>>>(out, in, n * c, s, params);
      else if (s >= kMinBlockPlane)
        normalize_planes<T, 1><<<plane_grid, kNormThreads, 0, stream>>>(out, in, n * c, s, params);
      else
        normalize_elements<T><<<grid_for(n * c * s), kThreads, 0, stream>>>(out, in, n * c * s, s, params);
    }
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(call.out().shape()) + " as " + channels_what(x));
}

// inputs: x (N, C, S), weight, bias; attrs num_groups.
void group_norm_entry(OpCall& call) {
  DeviceGuard guard(call.out().device().index);
  const Tensor& x = call.inputs[0];
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2], groups = call.attr<NormAttrs>().num_groups;
  if (x.numel() == 0) return;
  const int64_t len = c / groups * s;
  // Groups that fit in registers are rows of the row kernel: x read once.
  if (len <= int64_t{kNormThreads} * kMaxCached)
    return launch_row_norm<false>(call, x, n * groups, len, call.inputs[1], call.inputs[2], groups, c / groups, s);
  channel_norm(call, {n * groups, len, 1, len, len}, true, {}, call.inputs[1], call.inputs[2], groups);
}

// inputs: x (N, C, S), running_mean, running_var, weight, bias; outputs 1 and 2
// (training with running statistics): their updates.
void batch_norm_entry(OpCall& call) {
  DeviceGuard guard(call.out().device().index);
  const Tensor& x = call.inputs[0];
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2];
  if (x.numel() == 0) return;
  const NormAttrs& at = call.attr<NormAttrs>();
  const bool updates = call.outputs.size() > 1;
  const RunningStats running{channel_param(call.inputs[1]), channel_param(call.inputs[2]),
                             updates ? call.outputs[1].data<double>() : nullptr,
                             updates ? call.outputs[2].data<double>() : nullptr, at.momentum};
  // Longer channels take the fused kernel too where there are enough of them to give most
  // multiprocessors one: a channel's block reads it from memory once and again from cache, where
  // the three launches read it twice from memory (64 x 128 x 28 x 28 on an H200: 0.66x -> 0.97x PyTorch).
  if (n * s > kFusedChannel && 4 * c < 3 * int64_t{compute_units(x.device().index)})
    return channel_norm(call, {c, s, n, s, c * s}, at.training, running, call.inputs[3], call.inputs[4], 0);
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(c, int64_t{1} << 20));
  const hipStream_t stream = current_stream(x.device().index);
  const ChannelParam weight = channel_param(call.inputs[3]), bias = channel_param(call.inputs[4]);
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      constexpr int V = kVec<T>;
      const T* in = x.data<T>();
      T* out = call.out().data<T>();
      if (s % V == 0 && aligned(in, sizeof(T) * V) && aligned(out, sizeof(T) * V))
        batch_norm_channels<T, V><<<grid, kChannelThreads, 0, stream>>>(out, in, n, c, s, at.training, at.eps, running,
                                                                        weight, bias);
      else
        batch_norm_channels<T, 1><<<grid, kChannelThreads, 0, stream>>>(out, in, n, c, s, at.training, at.eps, running,
                                                                        weight, bias);
    }
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(call.out().shape()) + " as " + channels_what(x));
}

// ---- batch_norm_backward, group_norm_backward ---------------------------------
//
// Both give the input's gradient and the per-channel sums sum(g) (the bias's
// gradient) and sum(g xhat) (the weight's), with the statistics of x
// recomputed (cpu/norm.cpp has the formulas). Written as
//   gx = w[c] rstd g - b (x - mean) - d
// with rstd, mean, b and d per statistic item (GradCoefs).
//
// batch_norm: a channel's N runs of S values do not fit on chip, so x and g
// are read twice. Fold: blocks (channel, split) walk chunks of a channel's
// values, many blocks per channel (about 32 blocks per compute unit in all,
// so that 64 channels still fill the GPU, in waves short enough that the
// last one's tail costs little), folding (x, g) into
// CoMoments (welford.h): the statistics of x and sum(g (x - mean)) in one
// read; channels of at most kThreadItem values take one thread each. Finish:
// one block per channel merges its splits in a fixed order (deterministic)
// into the sums and the coefficients. Apply: the elementwise pass over
// planes, as the forward's normalize. Eval needs no statistics: the fold
// writes gx = w rstd g itself and reads x only for the weight's gradient.
//
// group_norm: a group (C / G channels of S values) is one block's row held in
// registers, x and g read once, when the block's teams fit it: teams of p
// threads, one team per channel of the group (p = 256 / the channel count
// rounded up to a power of two), at most kMaxCached values per thread (so
// groups of up to 8192 values with the usual channel counts). Each channel's
// sums are then a team's shuffles (or its warps' sums in shared memory), not
// a segmented reduction over the row; the per-(n, c) sums go to a small
// buffer that one block per channel sums over n. Other groups (longer, or
// more than 256 channels) run batch_norm's three passes with (n, c) planes
// for items and a finish per group.

// Items of at most this many values are folded by one thread each.
constexpr int64_t kThreadItem = 64;

// The input gradient's coefficients per statistic item (batch_norm: channel
// c; group_norm: group n G + c / (C / G)): gx = w[c] rstd g - b (x - mean) - d.
// The finish kernels write them, the apply kernels read them.
struct GradCoefs {
  double* rstd;
  double* mean;
  double* b;
  double* d;
  ChannelParam weight;  // per channel
  int64_t channels;
  int64_t groups;  // 0: batch_norm

  template <class A> __device__ void at(int64_t plane, A& scale, A& mu, A& bb, A& dd) const {
    const int64_t c = plane % channels;
    const int64_t item = groups ? plane / channels * groups + c / (channels / groups) : c;
    scale = static_cast<A>(rstd[item] * weight.at(c, 1.0));
    mu = static_cast<A>(mean[item]);
    bb = static_cast<A>(b[item]);
    dd = static_cast<A>(d[item]);
  }
};

// batch_norm in eval: the input's gradient w rstd g, rstd from the running variance.
struct EvalScale {
  ChannelParam running_var;  // absent: training
  ChannelParam weight;
  double eps;

  PF_HOST_DEVICE bool eval() const { return running_var.data != nullptr; }
  template <class A> __device__ A at(int64_t c) const {
    return static_cast<A>(weight.at(c, 1.0) / sqrt(running_var.at(c, 1.0) + eps));
  }
};

// A batch_norm channel's backward sums from its merged (x, g) state: sum(g)
// and sum(g xhat), the bias's and the weight's gradients, and the input
// gradient's coefficients in training, gx = scale g - b (x - mean) - d, that is
//   w rstd (g - sum(g) / n - xhat sum(g xhat) / n).
// Eval (running_var given): mean and rstd from the running statistics.
struct ChannelGrad {
  double mean, rstd, sum_g, sum_gxhat, scale, b, d;
};

template <class A>
__device__ ChannelGrad channel_grad(const CoMoments<A>& s, int64_t ch, double eps, ChannelParam running_mean,
                                    ChannelParam running_var, ChannelParam weight) {
  ChannelGrad r;
  const bool eval = running_var.data != nullptr;
  const double n = static_cast<double>(s.count);
  r.mean = eval ? running_mean.at(ch, 0.0) : static_cast<double>(s.mean_x);
  r.rstd = 1.0 / sqrt((eval ? running_var.at(ch, 1.0) : static_cast<double>(s.m2) / n) + eps);
  r.sum_g = n * static_cast<double>(s.mean_g);
  // sum(g (x - mean)) about the batch mean (training) or the running one.
  r.sum_gxhat = r.rstd * (static_cast<double>(s.co) + (static_cast<double>(s.mean_x) - r.mean) * r.sum_g);
  r.scale = r.rstd * weight.at(ch, 1.0);
  r.b = r.scale * r.rstd * r.sum_gxhat / n;
  r.d = r.scale * r.sum_g / n;
  return r;
}

// Block (item, split) folds the pairs (x, g) of values [split * chunk, ...)
// of its item (StatLayout: runs of contiguous values) into CoMoments. Long
// runs: threads walk along each run (coalesced); short ones (< a warp):
// threads walk the values one each. V > 1: runs, strides, chunk and pointers
// V-aligned; loads take V values. kEval: also writes gx = w rstd g (items
// are batch_norm's channels).
template <class T, int V, bool kEval>
static __global__ void fold_grad_moments(CoMoments<acc_t<T>>* partials, T* gx, const T* g, const T* x, StatLayout l,
                                         int64_t splits, int64_t chunk, EvalScale eval) {
  using A = acc_t<T>;
  const int64_t len = l.runs * l.run_len;
  for (int64_t block = blockIdx.x; block < l.items * splits; block += gridDim.x) {
    const int64_t item = block / splits, k0 = block % splits * chunk, k1 = std::min(len, k0 + chunk);
    const int64_t base = item * l.item_stride;
    const A scale = kEval ? eval.at<A>(item) : A(0);
    CoMoments<A> s{};
    if (l.run_len >= PF_WARP_SIZE) {
      for (int64_t k = k0; k < k1;) {
        const int64_t r = k / l.run_len, p0 = k - r * l.run_len, p1 = std::min(l.run_len, p0 + (k1 - k));
        const int64_t off = base + r * l.run_stride;
        for (int64_t i = p0 / V + threadIdx.x; i < p1 / V; i += kNormThreads) {
          const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + off + i * V);
          const Vec<T, V> gv = *reinterpret_cast<const Vec<T, V>*>(g + off + i * V);
          Vec<T, V> out;
#pragma unroll
          for (int j = 0; j < V; ++j) {
            s.push(static_cast<A>(xv.v[j]), static_cast<A>(gv.v[j]));
            if (kEval) out.v[j] = static_cast<T>(scale * static_cast<A>(gv.v[j]));
          }
          if (kEval) *reinterpret_cast<Vec<T, V>*>(gx + off + i * V) = out;
        }
        k += p1 - p0;
      }
    } else {
      for (int64_t k = k0 + threadIdx.x; k < k1; k += kNormThreads) {
        const int64_t off = base + k / l.run_len * l.run_stride + k % l.run_len;
        s.push(static_cast<A>(x[off]), static_cast<A>(g[off]));
        if (kEval) gx[off] = static_cast<T>(scale * static_cast<A>(g[off]));
      }
    }
    s = block_all_merge<kNormThreads>(s);
    if (threadIdx.x == 0) partials[block] = s;
  }
}

// One thread per item of at most kThreadItem values (one split).
template <class T, bool kEval>
static __global__ void fold_grad_moments_per_thread(CoMoments<acc_t<T>>* partials, T* gx, const T* g, const T* x,
                                                    StatLayout l, EvalScale eval) {
  using A = acc_t<T>;
  for (int64_t item = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; item < l.items;
       item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const A scale = kEval ? eval.at<A>(item) : A(0);
    CoMoments<A> s{};
    for (int64_t r = 0; r < l.runs; ++r)
      for (int64_t j = 0; j < l.run_len; ++j) {
        const int64_t off = item * l.item_stride + r * l.run_stride + j;
        s.push(static_cast<A>(x[off]), static_cast<A>(g[off]));
        if (kEval) gx[off] = static_cast<T>(scale * static_cast<A>(g[off]));
      }
    partials[item] = s;
  }
}

// Per channel of batch_norm: its splits' states merged (a fixed order) into
// the channel's sums and coefficients (channel_grad).
template <class A>
static __global__ void finish_batch_norm_backward(A* grad_weight, A* grad_bias, GradCoefs coefs,
                                                  const CoMoments<A>* partials, int64_t splits, double eps,
                                                  ChannelParam running_mean, ChannelParam running_var) {
  for (int64_t ch = blockIdx.x; ch < coefs.channels; ch += gridDim.x) {
    CoMoments<A> s{};
    for (int64_t k = threadIdx.x; k < splits; k += kNormThreads) s.merge(partials[ch * splits + k]);
    s = block_all_merge<kNormThreads>(s);
    if (threadIdx.x != 0) continue;
    const ChannelGrad r = channel_grad(s, ch, eps, running_mean, running_var, coefs.weight);
    grad_weight[ch] = static_cast<A>(r.sum_gxhat);
    grad_bias[ch] = static_cast<A>(r.sum_g);
    if (running_var.data) continue;
    coefs.rstd[ch] = r.rstd;
    coefs.mean[ch] = r.mean;
    coefs.b[ch] = r.b;
    coefs.d[ch] = r.d;
  }
}

// batch_norm_backward with few values per channel (n * s <= kFusedChannel),
// as batch_norm_channels: one block per channel folds (x, g) into CoMoments
// (eval: writing gx = w rstd g on the way), finishes the channel's sums
// (channel_grad) and, in training, writes gx, re-reading x and g from cache.
template <class T, int V>
static __global__ void __launch_bounds__(kChannelThreads)
    batch_norm_backward_channels(T* gx, acc_t<T>* grad_weight, acc_t<T>* grad_bias, const T* g, const T* x, int64_t n,
                                 int64_t c, int64_t s, double eps, ChannelParam running_mean, EvalScale eval) {
  using A = acc_t<T>;
  const int runs = static_cast<int>(n), run_vecs = static_cast<int>(s / V);
  const int64_t run_stride = c * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const int64_t first = ch * s;
    const A eval_scale = eval.eval() ? eval.at<A>(ch) : A(0);
    CoMoments<A> st{};
    for (Walk w(threadIdx.x, kChannelThreads, run_vecs); w.row < runs;) {
      Vec<T, V> xv[kChannelLoads]{}, gv[kChannelLoads]{};
      int64_t at[kChannelLoads];
      bool got[kChannelLoads];
#pragma unroll
      for (int u = 0; u < kChannelLoads; ++u) {
        got[u] = w.row < runs;
        if (got[u]) {
          at[u] = first + channel_offset(w, run_stride, V);
          xv[u] = *reinterpret_cast<const Vec<T, V>*>(x + at[u]);
          gv[u] = *reinterpret_cast<const Vec<T, V>*>(g + at[u]);
          w.step();
        }
      }
#pragma unroll
      for (int u = 0; u < kChannelLoads; ++u) {
        if (!got[u]) continue;
        Vec<T, V> out;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          st.push(static_cast<A>(xv[u].v[j]), static_cast<A>(gv[u].v[j]));
          out.v[j] = static_cast<T>(eval_scale * static_cast<A>(gv[u].v[j]));
        }
        if (eval.eval()) *reinterpret_cast<Vec<T, V>*>(gx + at[u]) = out;
      }
    }
    st = block_all_merge<kChannelThreads>(st);
    const ChannelGrad r = channel_grad(st, ch, eps, running_mean, eval.running_var, eval.weight);
    if (threadIdx.x == 0) {
      grad_weight[ch] = static_cast<A>(r.sum_gxhat);
      grad_bias[ch] = static_cast<A>(r.sum_g);
    }
    if (eval.eval()) continue;
    const A scale = static_cast<A>(r.scale), mu = static_cast<A>(r.mean), b = static_cast<A>(r.b);
    const A d = static_cast<A>(r.d);
    for (Walk w(threadIdx.x, kChannelThreads, run_vecs); w.row < runs;) {
      Vec<T, V> xv[kChannelLoads]{}, gv[kChannelLoads]{};
      int64_t at[kChannelLoads];
      bool got[kChannelLoads];
#pragma unroll
      for (int u = 0; u < kChannelLoads; ++u) {
        got[u] = w.row < runs;
        if (got[u]) {
          at[u] = first + channel_offset(w, run_stride, V);
          xv[u] = *reinterpret_cast<const Vec<T, V>*>(x + at[u]);
          gv[u] = *reinterpret_cast<const Vec<T, V>*>(g + at[u]);
          w.step();
        }
      }
#pragma unroll
      for (int u = 0; u < kChannelLoads; ++u) {
        if (!got[u]) continue;
#pragma unroll
        for (int j = 0; j < V; ++j)
          xv[u].v[j] = static_cast<T>(scale * static_cast<A>(gv[u].v[j]) - b * (static_cast<A>(xv[u].v[j]) - mu) - d);
        *reinterpret_cast<Vec<T, V>*>(gx + at[u]) = xv[u];
      }
    }
  }
}

// Per group of group_norm (item n G + g, its C / G planes consecutive, each
// with `splits` states): the group's statistics, each plane's sum(g) and
// sum(g xhat) into plane_g / plane_gxhat, and the coefficients
//   gx = rstd (w g - mean(w g) - xhat mean(w g xhat)).
template <class A>
static __global__ void finish_group_norm_backward(A* plane_g, A* plane_gxhat, GradCoefs coefs,
                                                  const CoMoments<A>* partials, int64_t items, int64_t splits,
                                                  double eps) {
  const int64_t cg = coefs.channels / coefs.groups;
  const kernels::SumReduce<double> sum_of;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const CoMoments<A>* states = partials + item * cg * splits;
    CoMoments<A> s{};
    for (int64_t k = threadIdx.x; k < cg * splits; k += kNormThreads) s.merge(states[k]);
    s = block_all_merge<kNormThreads>(s);
    const double len = static_cast<double>(s.count), mean = static_cast<double>(s.mean_x);
    const double rstd = 1.0 / sqrt(static_cast<double>(s.m2) / len + eps);
    double sum_wg = 0, sum_wgxhat = 0;
    for (int64_t k = threadIdx.x; k < cg; k += kNormThreads) {
      CoMoments<A> p{};
      for (int64_t j = 0; j < splits; ++j) p.merge(states[k * splits + j]);
      const double sum_g = static_cast<double>(p.count) * static_cast<double>(p.mean_g);
      const double sum_gxhat = rstd * (static_cast<double>(p.co) + (static_cast<double>(p.mean_x) - mean) * sum_g);
      plane_g[item * cg + k] = static_cast<A>(sum_g);
      plane_gxhat[item * cg + k] = static_cast<A>(sum_gxhat);
      const double w = coefs.weight.at(item % coefs.groups * cg + k, 1.0);
      sum_wg += w * sum_g;
      sum_wgxhat += w * sum_gxhat;
    }
    sum_wg = block_all_reduce<kNormThreads>(sum_wg, sum_of);
    sum_wgxhat = block_all_reduce<kNormThreads>(sum_wgxhat, sum_of);
    if (threadIdx.x != 0) continue;
    coefs.rstd[item] = rstd;
    coefs.mean[item] = mean;
    coefs.b[item] = rstd * rstd * sum_wgxhat / len;
    coefs.d[item] = rstd * sum_wg / len;
  }
}

// The input's gradient, one block per (n, c) plane of s values (s >=
// kMinBlockPlane). V > 1: planes and pointers V-aligned.
template <class T, int V>
static __global__ void apply_grad_planes(T* gx, const T* g, const T* x, int64_t planes, int64_t s, GradCoefs coefs) {
  using A = acc_t<T>;
  for (int64_t plane = blockIdx.x; plane < planes; plane += gridDim.x) {
    A scale, mu, b, d;
    coefs.at(plane, scale, mu, b, d);
    const Vec<T, V>* xp = reinterpret_cast<const Vec<T, V>*>(x + plane * s);
    const Vec<T, V>* gp = reinterpret_cast<const Vec<T, V>*>(g + plane * s);
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(gx + plane * s);
    for (int64_t i = threadIdx.x; i < s / V; i += kNormThreads) {
      const Vec<T, V> xv = xp[i], gv = gp[i];
      Vec<T, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j)
        r.v[j] = static_cast<T>(scale * static_cast<A>(gv.v[j]) - b * (static_cast<A>(xv.v[j]) - mu) - d);
      out[i] = r;
    }
  }
}

// One thread per value (shorter planes).
template <class T>
static __global__ void apply_grad_elements(T* gx, const T* g, const T* x, int64_t n, int64_t s, GradCoefs coefs) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    A scale, mu, b, d;
    coefs.at(i / s, scale, mu, b, d);
    gx[i] = static_cast<T>(scale * static_cast<A>(g[i]) - b * (static_cast<A>(x[i]) - mu) - d);
  }
}

// Sums a and b over each team of p consecutive threads (p a power of two, the
// same across the block); the team's first thread gets the sums. Contains
// __syncthreads when p spans warps: all threads must call it.
template <class A> __device__ __forceinline__ void team_sum(A& a, A& b, int p) {
  constexpr int kWarps = kNormThreads / PF_WARP_SIZE;
  __shared__ A warp_sums[2][kWarps];
  for (int mask = (p < PF_WARP_SIZE ? p : PF_WARP_SIZE) / 2; mask > 0; mask >>= 1) {
    a += shfl_xor(a, mask);
    b += shfl_xor(b, mask);
  }
  if (p <= PF_WARP_SIZE) return;
  const int warp = threadIdx.x / PF_WARP_SIZE;
  if (threadIdx.x % PF_WARP_SIZE == 0) warp_sums[0][warp] = a, warp_sums[1][warp] = b;
  __syncthreads();
  if (threadIdx.x % p == 0) {
    a = b = A(0);
    for (int w = warp; w < warp + p / PF_WARP_SIZE; ++w) a += warp_sums[0][w], b += warp_sums[1][w];
  }
  __syncthreads();  // the shared slots may be reused by the next call
}

// group_norm's backward for groups held in registers: one block per row (a
// group of a sample: cg channels of s values), team t = threadIdx.x / p
// holds channel t (t < cg), its lane l the vectors l, l + p, ... (at most
// kVecs). Writes gx and each (n, c) plane's sum(g) and sum(g xhat).
template <class T, int V, int kVecs>
static __global__ void group_norm_backward_cached(T* gx, acc_t<T>* plane_g, acc_t<T>* plane_gxhat, const T* g,
                                                  const T* x, const acc_t<T>* weight, int64_t rows, int64_t groups,
                                                  int64_t cg, int64_t s, int p, double eps) {
  using A = acc_t<T>;
  const kernels::SumReduce<A> sum_of;
  const int64_t len = cg * s;
  // Offsets within a row fit in 32 bits (at most kMaxCached values per thread):
  // the slots share three row pointers instead of holding 64-bit addresses.
  const int sv = static_cast<int>(s / V), team = static_cast<int>(threadIdx.x) / p, lane = threadIdx.x % p;
  const bool live_team = team < cg;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t first = row * len + (live_team ? team * s : 0);
    const Vec<T, V>* xr = reinterpret_cast<const Vec<T, V>*>(x + first);
    const Vec<T, V>* gr = reinterpret_cast<const Vec<T, V>*>(g + first);
    A xv[kVecs][V], gv[kVecs][V];
    A sum = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int i = lane + k * p;
      Vec<T, V> xs{}, gs{};
      const bool live = live_team && i < sv;
      if (live) xs = xr[i], gs = gr[i];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xv[k][j] = live ? static_cast<A>(xs.v[j]) : A(0);
        gv[k][j] = live ? static_cast<A>(gs.v[j]) : A(0);
        sum += xv[k][j];
      }
    }
    const A mean = block_all_reduce<kNormThreads>(sum, sum_of) / static_cast<A>(len);
    A q = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const bool live = live_team && lane + k * p < sv;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xv[k][j] -= mean;
        if (live) q += xv[k][j] * xv[k][j];
      }
    }
    const A rstd = A(1) / math::sqrt(block_all_reduce<kNormThreads>(q, sum_of) / static_cast<A>(len) +
                                     static_cast<A>(eps));
    // The channel's sum(g) and sum(g xhat); dead slots hold zeros.
    A sum_g = A(0), sum_gxhat = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k)
#pragma unroll
      for (int j = 0; j < V; ++j) {
        sum_g += gv[k][j];
        sum_gxhat += gv[k][j] * xv[k][j];
      }
    sum_gxhat *= rstd;
    team_sum(sum_g, sum_gxhat, p);
    const A w = live_team && weight ? weight[row % groups * cg + team] : A(1);
    A wg = A(0), wgxhat = A(0);
    if (lane == 0 && live_team) {
      plane_g[row * cg + team] = sum_g;
      plane_gxhat[row * cg + team] = sum_gxhat;
      wg = w * sum_g;
      wgxhat = w * sum_gxhat;
    }
    const A mean_wg = block_all_reduce<kNormThreads>(wg, sum_of) / static_cast<A>(len);
    const A mean_wgxhat = block_all_reduce<kNormThreads>(wgxhat, sum_of) / static_cast<A>(len);
    const A scale = w * rstd, b = rstd * rstd * mean_wgxhat, d = rstd * mean_wg;
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(gx + first);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int i = lane + k * p;
      if (!live_team || i >= sv) break;
      Vec<T, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = static_cast<T>(scale * gv[k][j] - b * xv[k][j] - d);
      out[i] = r;
    }
  }
}

// The weight's and bias's gradients from the (n, c) planes' sums: one block
// per channel, summing over n in a fixed order.
template <class A>
static __global__ void sum_planes(A* grad_weight, A* grad_bias, const A* plane_gxhat, const A* plane_g, int64_t n,
                                  int64_t channels) {
  const kernels::SumReduce<A> sum_of;
  for (int64_t ch = blockIdx.x; ch < channels; ch += gridDim.x) {
    A gw = A(0), gb = A(0);
    for (int64_t i = threadIdx.x; i < n; i += kNormThreads) {
      gw += plane_gxhat[i * channels + ch];
      gb += plane_g[i * channels + ch];
    }
    gw = block_all_reduce<kNormThreads>(gw, sum_of);
    gb = block_all_reduce<kNormThreads>(gb, sum_of);
    if (threadIdx.x == 0) grad_weight[ch] = gw, grad_bias[ch] = gb;
  }
}

// Folds (x, g) of each `l` item into CoMoments states, `splits` per item
// (returned). In eval (eval.running_var given): batch_norm's eval gradient written into gx on the way.
template <class T>
Tensor fold_grad(const T* g, const T* x, T* gx, const StatLayout& l, const EvalScale& eval, int64_t& splits,
                 const Device& dev, hipStream_t stream) {
  using A = acc_t<T>;
  const int64_t len = l.runs * l.run_len;
  constexpr int V = kVec<T>;
  const bool vector = l.run_len % V == 0 && l.run_stride % V == 0 && l.item_stride % V == 0 &&
                      aligned(g, sizeof(T) * V) && aligned(x, sizeof(T) * V) && (!gx || aligned(gx, sizeof(T) * V));
  splits = 1;
  if (len > kThreadItem) {
    // Many blocks per item when items are few: several waves of blocks keep
    // the last one's tail short; at least a few vectors per thread.
    const int64_t target = int64_t{32} * compute_units(dev.index);
    const int64_t most = std::max<int64_t>(1, len / (int64_t{kNormThreads} * V * 4));
    splits = std::clamp<int64_t>(target / l.items, 1, most);
  }
  int64_t chunk = (len + splits - 1) / splits;
  chunk = (chunk + V - 1) / V * V;
  splits = std::max<int64_t>(1, (len + chunk - 1) / chunk);
  Tensor partials = Tensor::empty({l.items * splits * int64_t{sizeof(CoMoments<A>)}}, DType::UInt8, dev);
  auto* p = static_cast<CoMoments<A>*>(partials.data_ptr());
  const bool eval_grad = eval.eval();
  auto run = [&](auto eval_tag) {
    constexpr bool kEval = decltype(eval_tag)::value;
    if (len <= kThreadItem) {
      fold_grad_moments_per_thread<T, kEval><<<grid_for(l.items), kThreads, 0, stream>>>(p, gx, g, x, l, eval);
      return;
    }
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(l.items * splits, int64_t{1} << 20));
    if (vector)
      fold_grad_moments<T, V, kEval><<<grid, kNormThreads, 0, stream>>>(p, gx, g, x, l, splits, chunk, eval);
    else
      fold_grad_moments<T, 1, kEval><<<grid, kNormThreads, 0, stream>>>(p, gx, g, x, l, splits, chunk, eval);
  };
  if (eval_grad) run(std::true_type());
  else run(std::false_type());
  HIP_CHECK(hipGetLastError());
  return partials;
}

// gx from the coefficients, over n * c planes of s values.
template <class T>
void launch_apply_grad(T* gx, const T* g, const T* x, int64_t n, int64_t c, int64_t s, const GradCoefs& coefs,
                       hipStream_t stream) {
  constexpr int V = kVec<T>;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(n * c, int64_t{1} << 20));
  const bool vector = s % V == 0 && aligned(gx, sizeof(T) * V) && aligned(g, sizeof(T) * V) &&
                      aligned(x, sizeof(T) * V);
  if (s >= kMinBlockPlane && vector)
    apply_grad_planes<T, V><<<grid, kNormThreads, 0, stream>>>(gx, g, x, n * c, s, coefs);
  else if (s >= kMinBlockPlane)
    apply_grad_planes<T, 1><<<grid, kNormThreads, 0, stream>>>(gx, g, x, n * c, s, coefs);
  else
    apply_grad_elements<T><<<grid_for(n * c * s), kThreads, 0, stream>>>(gx, g, x, n * c * s, s, coefs);
}

// inputs: g, x (N, C, S), running_mean, running_var (eval), weight; outputs
// gx, the weight's and the bias's gradients (C, compute type).
void batch_norm_backward_entry(OpCall& call) {
  const Tensor &g = call.inputs[0], &x = call.inputs[1];
  const Device dev = x.device();
  DeviceGuard guard(dev.index);
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2];
  if (c == 0) return;
  if (x.numel() == 0) {  // empty sums
    call.outputs[1].fill_(Scalar(0.0));
    call.outputs[2].fill_(Scalar(0.0));
    return;
  }
  const NormAttrs& at = call.attr<NormAttrs>();
  const hipStream_t stream = current_stream(dev.index);
  const ChannelParam weight = channel_param(call.inputs[4]);
  // Training reads no running statistic, whatever the caller passed.
  const ChannelParam running_mean = channel_param(at.training ? Tensor() : call.inputs[2]);
  const EvalScale eval{channel_param(at.training ? Tensor() : call.inputs[3]), weight, at.eps};
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const T *gp = g.data<T>(), *xp = x.data<T>();
      T* gx = call.out().data<T>();
      A *grad_weight = call.outputs[1].data<A>(), *grad_bias = call.outputs[2].data<A>();
      if (n * s <= kFusedChannel) {
        constexpr int V = kVec<T>;
        const unsigned grid = static_cast<unsigned>(std::min<int64_t>(c, int64_t{1} << 20));
        if (s % V == 0 && aligned(gp, sizeof(T) * V) && aligned(xp, sizeof(T) * V) && aligned(gx, sizeof(T) * V))
          batch_norm_backward_channels<T, V><<<grid, kChannelThreads, 0, stream>>>(
              gx, grad_weight, grad_bias, gp, xp, n, c, s, at.eps, running_mean, eval);
        else
          batch_norm_backward_channels<T, 1><<<grid, kChannelThreads, 0, stream>>>(
              gx, grad_weight, grad_bias, gp, xp, n, c, s, at.eps, running_mean, eval);
        return;
      }
      int64_t splits;
      Tensor partials =
          fold_grad<T>(gp, xp, at.training ? nullptr : gx, {c, s, n, s, c * s}, eval, splits, dev, stream);
      Tensor coefs = Tensor::empty({4, c}, DType::Float64, dev);
      double* cp = coefs.data<double>();
      const GradCoefs gc{cp, cp + c, cp + 2 * c, cp + 3 * c, weight, c, 0};
      const unsigned channel_grid = static_cast<unsigned>(std::min<int64_t>(c, int64_t{1} << 16));
      const auto* states = static_cast<const CoMoments<A>*>(partials.data_ptr());
      finish_batch_norm_backward<A><<<channel_grid, kNormThreads, 0, stream>>>(
          grad_weight, grad_bias, gc, states, splits, at.eps, running_mean, eval.running_var);
      if (at.training) {
        HIP_CHECK(hipGetLastError());
        launch_apply_grad<T>(gx, gp, xp, n, c, s, gc, stream);
      }
    }
  });
  check_launch(op_name(call.op), channels_what(x));
}

// inputs: g, x (N, C, S), weight; attrs num_groups; outputs as batch_norm_backward's.
void group_norm_backward_entry(OpCall& call) {
  const Tensor &g = call.inputs[0], &x = call.inputs[1];
  const Device dev = x.device();
  DeviceGuard guard(dev.index);
  const int64_t n = x.shape()[0], c = x.shape()[1], s = x.shape()[2], groups = call.attr<NormAttrs>().num_groups;
  if (c == 0) return;
  if (x.numel() == 0) {  // empty sums
    call.outputs[1].fill_(Scalar(0.0));
    call.outputs[2].fill_(Scalar(0.0));
    return;
  }
  const int64_t cg = c / groups, rows = n * groups;
  const double eps = call.attr<NormAttrs>().eps;
  const hipStream_t stream = current_stream(dev.index);
  const Tensor& weight = call.inputs[2];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      using A = acc_t<T>;
      const T *gp = g.data<T>(), *xp = x.data<T>();
      T* gx = call.out().data<T>();
      Tensor planes = Tensor::empty({2, n * c}, dtype_of<A>(), dev);
      A *plane_g = planes.data<A>(), *plane_gxhat = plane_g + n * c;
      const unsigned row_grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 16));
      // Teams of p threads, one per channel of a group; the row fits in
      // registers when each lane holds at most kMaxCached values.
      int64_t teams = 1;
      while (teams < cg) teams *= 2;
      const int p = static_cast<int>(kNormThreads / std::min<int64_t>(teams, kNormThreads));
      constexpr int V = kVec<T>;
      const bool vector = s % V == 0 && aligned(gp, sizeof(T) * V) && aligned(xp, sizeof(T) * V) &&
                          aligned(gx, sizeof(T) * V);
      const int64_t per_lane = (s / (vector ? V : 1) + p - 1) / p * (vector ? V : 1);
      if (teams <= kNormThreads && per_lane <= kMaxCached) {
        const Tensor w = weight.defined() ? weight.to(dtype_of<A>()) : Tensor();
        const A* wp = w.defined() ? w.data<A>() : nullptr;
        auto run = [&](auto v_tag, auto per_tag) {
          constexpr int kV = decltype(v_tag)::value, kVecs = decltype(per_tag)::value / kV;
          group_norm_backward_cached<T, kV, kVecs><<<row_grid, kNormThreads, 0, stream>>>(
              gx, plane_g, plane_gxhat, gp, xp, wp, rows, groups, cg, s, p, eps);
        };
        if (vector && per_lane <= 8) run(std::integral_constant<int, V>(), std::integral_constant<int, 8>());
        else if (vector) run(std::integral_constant<int, V>(), std::integral_constant<int, kMaxCached>());
        else if (per_lane <= 8) run(std::integral_constant<int, 1>(), std::integral_constant<int, 8>());
        else run(std::integral_constant<int, 1>(), std::integral_constant<int, kMaxCached>());
      } else {
        int64_t splits;
        Tensor partials = fold_grad<T>(gp, xp, nullptr, {n * c, s, 1, s, s}, EvalScale{}, splits, dev, stream);
        Tensor coefs = Tensor::empty({4, rows}, DType::Float64, dev);
        double* cp = coefs.data<double>();
        const GradCoefs gc{cp, cp + rows, cp + 2 * rows, cp + 3 * rows, channel_param(weight), c, groups};
        finish_group_norm_backward<A><<<row_grid, kNormThreads, 0, stream>>>(
            plane_g, plane_gxhat, gc, static_cast<const CoMoments<A>*>(partials.data_ptr()), rows, splits, eps);
        HIP_CHECK(hipGetLastError());
        launch_apply_grad<T>(gx, gp, xp, n, c, s, gc, stream);
      }
      HIP_CHECK(hipGetLastError());
      sum_planes<A><<<static_cast<unsigned>(std::min<int64_t>(c, int64_t{1} << 16)), kNormThreads, 0, stream>>>(
          call.outputs[1].data<A>(), call.outputs[2].data<A>(), plane_gxhat, plane_g, n, c);
    }
  });
  check_launch(op_name(call.op), channels_what(x) + " in " + std::to_string(groups) + " groups");
}

PF_REGISTER_KERNEL(layer_norm, ROCm, &row_norm_entry<false>);
PF_REGISTER_KERNEL(rms_norm, ROCm, &row_norm_entry<true>);
PF_REGISTER_KERNEL(layer_norm_backward, ROCm, &row_norm_backward_entry<false>);
PF_REGISTER_KERNEL(rms_norm_backward, ROCm, &row_norm_backward_entry<true>);
PF_REGISTER_KERNEL(group_norm, ROCm, &group_norm_entry);
PF_REGISTER_KERNEL(batch_norm, ROCm, &batch_norm_entry);
PF_REGISTER_KERNEL(batch_norm_backward, ROCm, &batch_norm_backward_entry);
PF_REGISTER_KERNEL(group_norm_backward, ROCm, &group_norm_backward_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
