// GPU softmax and log_softmax over any dim, and their backward passes. The
// input is viewed as rows along the softmax dim (made contiguous, dim
// innermost); a result computed with dim moved innermost is copied back into
// the output's layout. Three ways through a row, by its length:
// - rows that a warp can hold in registers (at most kMaxCached elements per
//   lane) take a team of lanes each, a whole warp or, for short rows, a power
//   of two fewer (block_reduce.h's RowTeam), so that a block holds many rows:
//   one read with 16-byte loads, the max and the sum combined by shuffles
//   alone. A block per row would leave most threads idle on rows of a few
//   hundred elements and meet at __syncthreads four times per row;
// - rows up to kSoftmaxThreads * kMaxCached elements: a block per row, held
//   in registers, read once;
// - longer rows: a running maximum and sum of exponentials (exp_sums.h) over
//   the row in one read, then a second read (mostly from cache) to write.
//   Few long rows (a language model's 128 x 50257 logits) would leave most of
//   the GPU idle with a block per row, so a row is split into parts, as many
//   blocks as fill the GPU: the parts' sums go to a small buffer that a
//   second launch merges (each block in the same order) before writing its
//   part. Rows need not start on 16 bytes (odd lengths): the fewer than a
//   vector's elements before the first aligned vector and after the last are
//   taken one by one.
// The backward passes take the same ways (without the block-per-row cache):
// a team per row holding g and y in registers for short rows, else the sum
// of g y (softmax) or g (log_softmax) per part, then the row written.
// Reductions combine through warp shuffles over PF_WARP_SIZE lanes: the same
// source for wave64 and wave32.

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/exp_sums.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kSoftmaxThreads = 256;
constexpr int kMaxCached = 32;  // elements per thread held in registers: rows up to 8192 for a block
constexpr int kLoads = 4;       // long rows: 16-byte loads in flight per thread
constexpr int kBlocksPerUnit = 4;  // long rows: blocks resident per compute unit, for the parts' grid

template <int N> using Int = std::integral_constant<int, N>;

// Blocks of softmax_rows_cached resident per multiprocessor, for which the
// compiler caps the registers (4: 64 on NVIDIA). Uncapped, a float warp team
// holding 8 vectors a lane kept their 64-bit addresses live across the
// reductions: 83 registers, 22% of the warps resident and 44% of the DRAM
// bandwidth (H200, softmax 8x12x1024x1024: 365 us, PyTorch's 48-register kernel
// 199 us). More than 8 loads a lane (rows not in vectors) or double values
// spill under that cap: those stay uncapped. At most 8 values a lane fit in
// 32 registers (8 blocks: every warp slot filled).
template <class A, int kVecs, int V> constexpr int cached_min_blocks() {
  return sizeof(A) != 4 || kVecs > 8 ? 1 : kVecs * V <= 8 ? 8 : 4;
}

// A row's maximum, NaN ignored: a NaN still reaches every output of its row
// through the sum of exponentials, and NaN-propagating compares in the
// shuffles cost a fifth of a short row's time.
template <class A> struct RowMax {
  __device__ __forceinline__ A operator()(A a, A b) const { return math::fmax(a, b); }
};

// ---- rows held in registers

// Rows of at most kVecs * V elements per team thread, held in registers, one
// row per team (kBlock: the block; else `width` lanes, kWholeWarp: all of
// them, known at compile time so that offsets and shuffles are unrolled);
// thread `rank` holds vectors rank + k * width (V > 1: rows V-aligned, len % V == 0). softmax keeps
// exp(x - max) from the sum for the output: one exp per element.
template <class T, bool kLog, int kVecs, int V, bool kBlock, bool kWholeWarp>
static __global__ void __launch_bounds__(kSoftmaxThreads, (cached_min_blocks<acc_t<T>, kVecs, V>()))
    softmax_rows_cached(T* out, const T* in, int64_t rows, int64_t len, int width) {
  using A = acc_t<T>;
  const RowMax<A> max_of;
  const kernels::SumReduce<A> sum_of;
  const int nvec = static_cast<int>(len / V);  // rows here hold at most kSoftmaxThreads * kMaxCached elements
  for (RowTeam<kBlock> team(kWholeWarp ? PF_WARP_SIZE : width); team.first < rows; team.next()) {
    const int64_t row = team.row();
    const bool live_row = row < rows;
    // This thread's first vector; the k-th is k * width further (32-bit offsets: fewer registers).
    const Vec<T, V>* x = reinterpret_cast<const Vec<T, V>*>(in + (live_row ? row : 0) * len) + team.rank;
    Vec<T, V>* y = reinterpret_cast<Vec<T, V>*>(out + (live_row ? row : 0) * len) + team.rank;
    const int held = live_row ? nvec - team.rank : 0;  // vectors k * width < held are this thread's
    A v[kVecs][V];
    A m = kernels::MaxReduce<A>::identity();
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const bool live = k * team.width < held;
      Vec<T, V> xv{};
      if (live) xv = x[k * team.width];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[k][j] = live ? static_cast<A>(xv.v[j]) : kernels::MaxReduce<A>::identity();
        m = max_of(m, v[k][j]);
      }
    }
    m = team.template all_reduce<kSoftmaxThreads>(m, max_of);
    A s = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const bool live = k * team.width < held;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[k][j] -= m;
        if (!kLog) v[k][j] = math::exp(v[k][j]);
        if (live) s += kLog ? math::exp(v[k][j]) : v[k][j];
      }
    }
    s = team.template all_reduce<kSoftmaxThreads>(s, sum_of);
    const A scale = kLog ? math::log(s) : A(1) / s;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      if (k * team.width >= held) break;
      Vec<T, V> yv;
#pragma unroll
      for (int j = 0; j < V; ++j) yv.v[j] = static_cast<T>(kLog ? v[k][j] - scale : v[k][j] * scale);
      y[k * team.width] = yv;
    }
  }
}

// Rows whose team threads hold at most kVecs vectors of g and of y each, a
// team of `width` lanes per row (V > 1: rows V-aligned, len % V == 0).
template <class T, bool kLog, int kVecs, int V>
static __global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_backward_cached(T* gx, const T* g, const T* y, int64_t rows, int64_t len, int width) {
  using A = acc_t<T>;
  const int64_t nvec = len / V;
  for (RowTeam<false> team(width); team.first < rows; team.next()) {
    const int64_t row = team.row();
    const bool live_row = row < rows;
    const int64_t at = (live_row ? row : 0) * len;
    const Vec<T, V>* gr = reinterpret_cast<const Vec<T, V>*>(g + at);
    const Vec<T, V>* yr = reinterpret_cast<const Vec<T, V>*>(y + at);
    A gv[kVecs][V], yv[kVecs][V];
    A s = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = team.rank + static_cast<int64_t>(k) * team.width;
      const bool live = live_row && i < nvec;
      Vec<T, V> a{}, b{};
      if (live) a = gr[i], b = yr[i];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        gv[k][j] = live ? static_cast<A>(a.v[j]) : A(0);
        yv[k][j] = live ? static_cast<A>(b.v[j]) : A(0);
        s += kLog ? gv[k][j] : gv[k][j] * yv[k][j];
      }
    }
    s = team.template all_reduce<kSoftmaxThreads>(s, kernels::SumReduce<A>());
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(gx + at);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = team.rank + static_cast<int64_t>(k) * team.width;
      if (!live_row || i >= nvec) break;
      Vec<T, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j)
        r.v[j] = static_cast<T>(kLog ? gv[k][j] - math::exp(yv[k][j]) * s : yv[k][j] * (gv[k][j] - s));
      out[i] = r;
    }
  }
}

// ---- long rows, split into parts

// A row of `len` elements starting at `row`: elements [0, head) and [rest,
// len) taken one by one, [head, rest) as V-aligned vectors.
struct RowSplit {
  int64_t len, head, nvec, rest;

  template <class T> __device__ __forceinline__ RowSplit(const T* row, int64_t n, int v) : len(n) {
    const int64_t to_aligned = (v - static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) / sizeof(T) % v)) % v;
    head = to_aligned < n ? to_aligned : n;
    nvec = (n - head) / v;
    rest = head + nvec * v;
  }
};

// This thread's share of part `part` of `parts` of a row: one(e) for the
// single elements (part 0 only), many(i, stride, Int<N>) for N vectors i,
// i + stride, ... of the aligned body, kLoads at a time where there are as many.
template <class One, class Many>
__device__ __forceinline__ void for_part(const RowSplit& sp, int64_t part, int64_t parts, One one, Many many) {
  if (part == 0) {
    if (threadIdx.x < sp.head) one(static_cast<int64_t>(threadIdx.x));
    if (threadIdx.x < sp.len - sp.rest) one(sp.rest + threadIdx.x);
  }
  const int64_t stride = parts * kSoftmaxThreads;
  int64_t i = part * kSoftmaxThreads + threadIdx.x;
  for (; i + (kLoads - 1) * stride < sp.nvec; i += kLoads * stride) many(i, stride, Int<kLoads>());
  for (; i < sp.nvec; i += stride) many(i, stride, Int<1>());
}

// Writes this thread's share of a part of softmax's (log_softmax's) row from the row's sums.
template <class T, bool kLog, int V>
__device__ __forceinline__ void softmax_write_part(T* y, const T* x, const RowSplit& sp, int64_t part, int64_t parts,
                                                   const ExpSums<acc_t<T>>& sums) {
  using A = acc_t<T>;
  const A m = sums.max, scale = kLog ? math::log(sums.sum) : A(1) / sums.sum;
  auto of = [&](T v) {
    const A d = static_cast<A>(v) - m;
    return static_cast<T>(kLog ? d - scale : math::exp(d) * scale);
  };
  const Vec<T, V>* xb = reinterpret_cast<const Vec<T, V>*>(x + sp.head);
  Vec<T, V>* yb = reinterpret_cast<Vec<T, V>*>(y + sp.head);
  for_part(
      sp, part, parts, [&](int64_t e) { y[e] = of(x[e]); },
      [&](int64_t i, int64_t stride, auto n) {
        constexpr int N = decltype(n)::value;
        Vec<T, V> v[N];
#pragma unroll
        for (int u = 0; u < N; ++u) v[u] = xb[i + u * stride];
#pragma unroll
        for (int u = 0; u < N; ++u) {
#pragma unroll
          for (int j = 0; j < V; ++j) v[u].v[j] = of(v[u].v[j]);
          yb[i + u * stride] = v[u];
        }
      });
}

// Pass over the long rows (rows x len, in and out congruent modulo 16 bytes
// when V > 1): block `item` takes part item % parts of row item / parts and
// folds it into ExpSums. One part: the block writes the row at once; else
// partials[item] receives the part's sums for softmax_long_rows_write.
template <class T, bool kLog, int V>
static __global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_long_rows(T* out, ExpSums<acc_t<T>>* partials, const T* in, int64_t rows, int64_t len, int64_t parts) {
  using A = acc_t<T>;
  for (int64_t item = blockIdx.x; item < rows * parts; item += gridDim.x) {
    const int64_t row = item / parts, part = item - row * parts;
    const T* x = in + row * len;
    const RowSplit sp(x, len, V);
    const Vec<T, V>* xb = reinterpret_cast<const Vec<T, V>*>(x + sp.head);
    ExpSums<A> sums = ExpSums<A>::none();
    for_part(
        sp, part, parts,
        [&](int64_t e) {
          const A v[1] = {static_cast<A>(x[e])};
          sums.add(v);
        },
        [&](int64_t i, int64_t stride, auto n) {
          constexpr int N = decltype(n)::value;
          Vec<T, V> v[N];
#pragma unroll
          for (int u = 0; u < N; ++u) v[u] = xb[i + u * stride];
          A e[N * V];
#pragma unroll
          for (int u = 0; u < N; ++u)
#pragma unroll
            for (int j = 0; j < V; ++j) e[u * V + j] = static_cast<A>(v[u].v[j]);
          sums.add(e);
        });
    sums = block_all_merge<kSoftmaxThreads>(sums);
    if (parts == 1) softmax_write_part<T, kLog, V>(out + row * len, x, sp, 0, 1, sums);
    else if (threadIdx.x == 0) partials[item] = sums;
  }
}

// The second launch for rows of several parts: each block merges its row's
// parts' sums in order (every block of a row alike), then writes its part.
template <class T, bool kLog, int V>
static __global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_long_rows_write(T* out, const ExpSums<acc_t<T>>* partials, const T* in, int64_t rows, int64_t len,
                            int64_t parts) {
  using A = acc_t<T>;
  for (int64_t item = blockIdx.x; item < rows * parts; item += gridDim.x) {
    const int64_t row = item / parts, part = item - row * parts;
    ExpSums<A> sums = partials[row * parts];
    for (int64_t k = 1; k < parts; ++k) sums.merge(partials[row * parts + k]);
    const T* x = in + row * len;
    softmax_write_part<T, kLog, V>(out + row * len, x, RowSplit(x, len, V), part, parts, sums);
  }
}

// Writes this thread's share of a part of the input gradient's row from the
// row's sum s of g y (softmax) or g (log_softmax).
template <class T, bool kLog, int V>
__device__ __forceinline__ void backward_write_part(T* gx, const T* g, const T* y, const RowSplit& sp, int64_t part,
                                                    int64_t parts, acc_t<T> s) {
  using A = acc_t<T>;
  auto of = [&](T gt, T yt) {
    const A a = static_cast<A>(gt), b = static_cast<A>(yt);
    return static_cast<T>(kLog ? a - math::exp(b) * s : b * (a - s));
  };
  const Vec<T, V>* gb = reinterpret_cast<const Vec<T, V>*>(g + sp.head);
  const Vec<T, V>* yb = reinterpret_cast<const Vec<T, V>*>(y + sp.head);
  Vec<T, V>* ob = reinterpret_cast<Vec<T, V>*>(gx + sp.head);
  for_part(
      sp, part, parts, [&](int64_t e) { gx[e] = of(g[e], y[e]); },
      [&](int64_t i, int64_t stride, auto n) {
        constexpr int N = decltype(n)::value;
        Vec<T, V> a[N], b[N];
#pragma unroll
        for (int u = 0; u < N; ++u) a[u] = gb[i + u * stride], b[u] = yb[i + u * stride];
#pragma unroll
        for (int u = 0; u < N; ++u) {
#pragma unroll
          for (int j = 0; j < V; ++j) a[u].v[j] = of(a[u].v[j], b[u].v[j]);
          ob[i + u * stride] = a[u];
        }
      });
}

// The backward pass over rows split into parts, as softmax_long_rows (g, y
// and gx congruent modulo 16 bytes when V > 1): each part's sum of g y (g for
// log_softmax); one part: the row written at once, else partials[item].
template <class T, bool kLog, int V>
static __global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_backward_long_rows(T* gx, acc_t<T>* partials, const T* g, const T* y, int64_t rows, int64_t len,
                               int64_t parts) {
  using A = acc_t<T>;
  for (int64_t item = blockIdx.x; item < rows * parts; item += gridDim.x) {
    const int64_t row = item / parts, part = item - row * parts;
    const T *gr = g + row * len, *yr = y + row * len;
    const RowSplit sp(yr, len, V);
    const Vec<T, V>* gb = reinterpret_cast<const Vec<T, V>*>(gr + sp.head);
    const Vec<T, V>* yb = reinterpret_cast<const Vec<T, V>*>(yr + sp.head);
    A s = A(0);
    auto add = [&](T gt, T yt) { s += kLog ? static_cast<A>(gt) : static_cast<A>(gt) * static_cast<A>(yt); };
    for_part(
        sp, part, parts, [&](int64_t e) { add(gr[e], yr[e]); },
        [&](int64_t i, int64_t stride, auto n) {
          constexpr int N = decltype(n)::value;
          Vec<T, V> a[N], b[N];
#pragma unroll
          for (int u = 0; u < N; ++u) a[u] = gb[i + u * stride], b[u] = yb[i + u * stride];
#pragma unroll
          for (int u = 0; u < N; ++u)
#pragma unroll
            for (int j = 0; j < V; ++j) add(a[u].v[j], b[u].v[j]);
        });
    s = block_all_reduce<kSoftmaxThreads>(s, kernels::SumReduce<A>());
    if (parts == 1) backward_write_part<T, kLog, V>(gx + row * len, gr, yr, sp, 0, 1, s);
    else if (threadIdx.x == 0) partials[item] = s;
  }
}

template <class T, bool kLog, int V>
static __global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_backward_long_rows_write(T* gx, const acc_t<T>* partials, const T* g, const T* y, int64_t rows,
                                     int64_t len, int64_t parts) {
  using A = acc_t<T>;
  for (int64_t item = blockIdx.x; item < rows * parts; item += gridDim.x) {
    const int64_t row = item / parts, part = item - row * parts;
    A s = A(0);
    for (int64_t k = 0; k < parts; ++k) s += partials[row * parts + k];
    const T *gr = g + row * len, *yr = y + row * len;
    backward_write_part<T, kLog, V>(gx + row * len, gr, yr, RowSplit(yr, len, V), part, parts, s);
  }
}

// ---- launch

// Whether two buffers sit equally far from a 16-byte boundary, so that their
// rows' vectors align together.
bool congruent(const void* a, const void* b) {
  return (reinterpret_cast<uintptr_t>(a) - reinterpret_cast<uintptr_t>(b)) % 16 == 0;
}

// Parts per row of `len` elements for `rows` rows: enough blocks to fill the GPU
// once, each with at least a round of loads per thread.
int64_t row_parts(int64_t rows, int64_t len, int v, int device) {
  const int64_t resident = int64_t{compute_units(device)} * kBlocksPerUnit;
  const int64_t round = int64_t{kSoftmaxThreads} * kLoads * v;
  return std::clamp<int64_t>(resident / std::max<int64_t>(rows, 1), 1, std::max<int64_t>(len / round, 1));
}

unsigned item_grid(int64_t items) { return static_cast<unsigned>(std::min<int64_t>(items, int64_t{1} << 20)); }

// Rows in registers, kVecs vectors per thread chosen from the elements per
// thread. Teams narrower than a warp hold at most two vectors a lane (team_width).
template <class T, bool kLog, int V, bool kBlock>
void launch_cached(T* out, const T* in, int64_t rows, int64_t len, int width, int warp, hipStream_t stream) {
  const int64_t nvec = len / V, per = (nvec + width - 1) / width * V;  // elements per thread
  const int64_t teams = kSoftmaxThreads / width;
  const unsigned grid = item_grid((rows + teams - 1) / teams);
  auto run = [&](auto elems, auto whole_warp) {
    constexpr int kVecs = std::max<int>(decltype(elems)::value, V) / V;
    softmax_rows_cached<T, kLog, kVecs, V, kBlock, decltype(whole_warp)::value>
        <<<grid, kSoftmaxThreads, 0, stream>>>(out, in, rows, len, width);
  };
  auto by_elements = [&](auto whole_warp) {
    if (per <= 4) run(Int<4>(), whole_warp);
    else if (per <= 8) run(Int<8>(), whole_warp);
    else if (per <= 16) run(Int<16>(), whole_warp);
    else run(Int<kMaxCached>(), whole_warp);
  };
  if constexpr (kBlock) by_elements(std::false_type());
  else if (width < warp) run(Int<2 * V>(), std::false_type());
  else by_elements(std::true_type());
}

template <class T, bool kLog>
void launch_softmax(T* out, const T* in, int64_t rows, int64_t len, const Device& dev, hipStream_t stream) {
  using A = acc_t<T>;
  constexpr int kV = kVec<T>;
  const int warp = warp_size(dev.index);
  if (len > int64_t{kSoftmaxThreads} * kMaxCached) {
    const bool vector = congruent(in, out);
    const int64_t parts = row_parts(rows, len, vector ? kV : 1, dev.index);
    const unsigned grid = item_grid(rows * parts);
    Tensor partials;
    ExpSums<A>* p = nullptr;
    if (parts > 1) {
      partials = Tensor::empty({rows * parts * int64_t{sizeof(ExpSums<A>)}}, DType::UInt8, dev);
      p = static_cast<ExpSums<A>*>(partials.data_ptr());
    }
    auto run = [&](auto v) {
      constexpr int V = decltype(v)::value;
      softmax_long_rows<T, kLog, V><<<grid, kSoftmaxThreads, 0, stream>>>(out, p, in, rows, len, parts);
      if (parts == 1) return;
      HIP_CHECK(hipGetLastError());
      softmax_long_rows_write<T, kLog, V><<<grid, kSoftmaxThreads, 0, stream>>>(out, p, in, rows, len, parts);
    };
    if (vector) run(Int<kV>());
    else run(Int<1>());
    return;
  }
  const bool vector = len % kV == 0 && aligned(in, sizeof(T) * kV) && aligned(out, sizeof(T) * kV);
  const int64_t nvec = vector ? len / kV : len;
  // A warp's lanes hold the row: a team of lanes per row.
  if ((nvec + warp - 1) / warp * (vector ? kV : 1) <= kMaxCached) {
    const int width = team_width(nvec, warp);
    if (vector) launch_cached<T, kLog, kV, false>(out, in, rows, len, width, warp, stream);
    else launch_cached<T, kLog, 1, false>(out, in, rows, len, width, warp, stream);
  } else if (vector) {
    launch_cached<T, kLog, kV, true>(out, in, rows, len, kSoftmaxThreads, warp, stream);
  } else {
    launch_cached<T, kLog, 1, true>(out, in, rows, len, kSoftmaxThreads, warp, stream);
  }
}

std::string describe(const Tensor& x, int64_t d) {
  return "shape " + detail::to_piece(x.shape()) + " over dim " + std::to_string(d) + " (" + dtype_name(x.dtype()) + ")";
}

template <bool kLog> void softmax_entry(OpCall& call) {
  int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor& x = call.inputs[0];
  const int64_t d = call.attr<DimAttrs>().dim, last = x.dim() - 1;
  const bool innermost = d == last;
  Tensor rows = innermost ? x.contiguous() : x.transpose(d, last).contiguous();
  Tensor result = innermost ? call.out() : Tensor::empty(rows.shape(), rows.dtype(), rows.device());
  const int64_t len = x.shape()[d];
  const int64_t n_rows = len > 0 ? rows.numel() / len : 0;
  if (n_rows > 0) {
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (is_float_v<T>)
        launch_softmax<T, kLog>(result.data<T>(), rows.data<T>(), n_rows, len, rows.device(), current_stream(device));
    });
    check_launch(op_name(call.op), describe(x, d));
  }
  if (!innermost) call.out().copy_(result.transpose(d, last));
}

template <class T, bool kLog>
void launch_softmax_backward(T* gx, const T* g, const T* y, int64_t rows, int64_t len, const Device& dev,
                             hipStream_t stream) {
  using A = acc_t<T>;
  constexpr int kV = kVec<T>;
  // g and y both held: half the registers each for double.
  constexpr int kMaxHeld = sizeof(A) > 4 ? kMaxCached / 2 : kMaxCached;
  const int warp = warp_size(dev.index);
  const bool vector = len % kV == 0 && aligned(gx, sizeof(T) * kV) && aligned(g, sizeof(T) * kV) &&
                      aligned(y, sizeof(T) * kV);
  const int64_t nvec = vector ? len / kV : len;
  const int v = vector ? kV : 1;
  if ((nvec + warp - 1) / warp * v <= kMaxHeld) {
    const int width = team_width(nvec, warp);
    const int64_t per = (nvec + width - 1) / width * v, teams = kSoftmaxThreads / width;
    const unsigned grid = item_grid((rows + teams - 1) / teams);
    auto run = [&](auto vt, auto elems) {
      constexpr int V = decltype(vt)::value, kVecs = std::max<int>(decltype(elems)::value, V) / V;
      softmax_backward_cached<T, kLog, kVecs, V><<<grid, kSoftmaxThreads, 0, stream>>>(gx, g, y, rows, len, width);
    };
    auto with_elems = [&](auto vt) {
      if (per <= 4) run(vt, Int<4>());
      else if (per <= 8) run(vt, Int<8>());
      else if (per <= kMaxHeld / 2) run(vt, Int<kMaxHeld / 2>());
      else run(vt, Int<kMaxHeld>());
    };
    if (vector) with_elems(Int<kV>());
    else with_elems(Int<1>());
    return;
  }
  const bool long_vector = congruent(gx, g) && congruent(gx, y);
  const int64_t parts = row_parts(rows, len, long_vector ? kV : 1, dev.index);
  const unsigned grid = item_grid(rows * parts);
  Tensor partials = parts > 1 ? Tensor::empty({rows * parts}, dtype_of<A>(), dev) : Tensor();
  A* p = parts > 1 ? partials.data<A>() : nullptr;
  auto run = [&](auto vt) {
    constexpr int V = decltype(vt)::value;
    softmax_backward_long_rows<T, kLog, V><<<grid, kSoftmaxThreads, 0, stream>>>(gx, p, g, y, rows, len, parts);
    if (parts == 1) return;
    HIP_CHECK(hipGetLastError());
    softmax_backward_long_rows_write<T, kLog, V><<<grid, kSoftmaxThreads, 0, stream>>>(gx, p, g, y, rows, len, parts);
  };
  if (long_vector) run(Int<kV>());
  else run(Int<1>());
}

template <bool kLog> void softmax_backward_entry(OpCall& call) {
  int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor &g = call.inputs[0], &y = call.inputs[1];
  const int64_t d = call.attr<DimAttrs>().dim, last = y.dim() - 1;
  const bool innermost = d == last;
  Tensor g_rows = innermost ? g : g.transpose(d, last).contiguous();
  Tensor y_rows = innermost ? y : y.transpose(d, last).contiguous();
  Tensor result = innermost ? call.out() : Tensor::empty(y_rows.shape(), y_rows.dtype(), y_rows.device());
  const int64_t len = y.shape()[d];
  const int64_t n_rows = len > 0 ? y_rows.numel() / len : 0;
  if (n_rows > 0) {
    visit_dtype(y.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (is_float_v<T>)
        launch_softmax_backward<T, kLog>(result.data<T>(), g_rows.data<T>(), y_rows.data<T>(), n_rows, len,
                                         y_rows.device(), current_stream(device));
    });
    check_launch(op_name(call.op), describe(y, d));
  }
  if (!innermost) call.out().copy_(result.transpose(d, last));
}

PF_REGISTER_KERNEL(softmax, ROCm, &softmax_entry<false>);
PF_REGISTER_KERNEL(softmax_backward, ROCm, &softmax_backward_entry<false>);
PF_REGISTER_KERNEL(log_softmax_backward, ROCm, &softmax_backward_entry<true>);
PF_REGISTER_KERNEL(log_softmax, ROCm, &softmax_entry<true>);

}  // namespace
}  // namespace pyflame::backend::rocm
