// GPU pooling: max_pool2d/3d, avg_pool2d/3d and adaptive_avg_pool2d, with
// the CPU kernels' semantics (src/cpu/pool.cpp). 2-D runs as 3-D with a
// depth of 1, as on the CPU, so one kernel serves both.
//
// Pooling does little arithmetic per element, so it should run at the speed
// of memory. What held simpler kernels back, measured on an H100, was
// latency and instruction count rather than bytes: a thread per output that
// reads its window from global memory waits on one load per tap and spends
// most of its instructions on index arithmetic (0.35 ms for max_pool2d 3x3/2
// on 64x64x112x112 fp32, PyTorch 0.22 ms). So:
// - a block stages a tile of input in shared memory with 16-byte loads,
//   kStageBatch per thread issued before any is stored. A tile is a band of
//   whole output rows where they fit (kTileBytes): a contiguous stretch of
//   each input plane, read once, coalesced;
// - the grid is persistent: a block keeps one band and walks the planes,
//   loading the next plane's tile while it pools the current one; index
//   arithmetic beyond two offsets per tile is done once per band;
// - staged positions outside the input hold the identity (-inf for max, 0
//   for sums), so every output reduces its whole window with no bounds
//   checks. Neither changes a result: max(-inf, x) = x and NaN still wins;
//   x + 0 = x, and a sum started at +0 is never -0;
// - a thread pools kStrip outputs of a row at once (independent chains of
//   taps), tile_w / kStrip apart so that neighbouring threads read
//   neighbouring staged columns.
// Sums run in the CPU's order (depth, row, column) and divide by the same
// divisor, so results are the CPU's bit for bit. Output planes smaller than
// a block and windows too large for a tile take a direct kernel, one output
// per thread, as do adaptive_avg_pool2d's small cells; its larger cells
// (global pooling) are summed by a warp or a block each, in another order
// than the CPU's (equal to rounding).
//
// Backward passes. Each input element's gradient is gathered, not scattered:
// a thread finds the outputs whose windows hold its elements and sums their
// shares in ascending output order (the CPU's order, bit for bit), so there
// are no atomics and results do not depend on the launch. Max pooling runs
// twice: first the forward's kernels with a third reduction, argmax, which
// writes the tap of each window's maximum (the forward's comparison, so ties
// keep the first and the last NaN wins, as in PyTorch), one byte per output
// for windows of up to 255 taps, four above; then the gather, in which an element
// takes an output's gradient when it sits at that tap. A window whose valid
// elements are all -inf has no tap (the tiled kernel stages padding as -inf
// too): its gradient goes to its first element inside the input, as PyTorch's.
// Gathers are memory-bound: a thread keeps one strip of 16 bytes of a row and
// walks rows (plane, depth, row) with no division per step, so the work on
// columns (which outputs cover the strip) is done once per thread, and the
// outputs covering a row take one division by the stride per dim. Global
// pooling's gradient is a fill of each plane, by a warp or a block per plane.
//
// Loops stride by blockDim and gridDim and blocks meet at __syncthreads, so
// nothing depends on the warp size (wave64 and wave32 alike). Offsets into
// the tensors are 64-bit; offsets inside a tile are int.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"
#include "rocm/kernels/pool.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kPoolThreads = 256;
constexpr int kStageBatch = 4;  // 16-byte loads each thread has in flight while staging
// Shared memory per block: one batch per thread fills it, so a tile is staged in one round of loads.
constexpr int kTileBytes = kPoolThreads * kStageBatch * 16;
constexpr int kTileOutputs = 1024;  // outputs per tile aimed at: 4 per thread
constexpr int kStrip = 4;           // outputs per thread at a time (independent chains of taps)
// Blocks resident per multiprocessor (registers capped to fit, __launch_bounds__): the persistent grid.
constexpr int kPoolMinBlocks = 3;
constexpr int kGatherThreads = 256;
constexpr int kGatherRowSteps = 4;  // rows per gather thread (at least), over which its column work is spread

// What a kernel makes of each window: its maximum, its average, or the tap
// ((kd * kh_n + kh) * kw_n + kw) of its maximum, for max pooling's backward.
enum class Pool { max, avg, argmax };

// argmax: no tap (a window with nothing above -inf). A tap index type holds
// the taps of a window below its maximum, which stays free for this.
template <class I> constexpr I kNoTap = std::numeric_limits<I>::max();

// Per (depth, height, width): input and output sizes, kernel size, stride, padding, dilation.
// Int: int64_t for the host's plan and the tiled kernel; the direct kernel takes
// its int32_t copy where the tensors allow (64-bit divisions per output cost more
// than a small window's loads).
template <class Int> struct BasicPoolGeometry {
  Int in[3], out[3], k[3], s[3], p[3], d[3];
  bool count_include_pad;
  Int divisor_override;  // 0: none

  BasicPoolGeometry() = default;
  template <class From> explicit BasicPoolGeometry(const BasicPoolGeometry<From>& g)
      : count_include_pad(g.count_include_pad), divisor_override(static_cast<Int>(g.divisor_override)) {
    for (int i = 0; i < 3; ++i) {
      in[i] = static_cast<Int>(g.in[i]), out[i] = static_cast<Int>(g.out[i]), k[i] = static_cast<Int>(g.k[i]);
      s[i] = static_cast<Int>(g.s[i]), p[i] = static_cast<Int>(g.p[i]), d[i] = static_cast<Int>(g.d[i]);
    }
  }
};
using PoolGeometry = BasicPoolGeometry<int64_t>;

// How the output is cut into tiles of tile_h x tile_w outputs (tile_w a
// multiple of kStrip), and a tile's input staged in shared memory: per depth
// tap (at most `slots`), `rows` rows of `pitch` elements (whole 16-byte
// vectors), the first column 16-byte aligned in the input.
struct TilePlan {
  int tile_h, tile_w;
  int slots, rows, pitch;
  int row_step, col_step;  // staged offset between neighbouring outputs along H, W
  int kh_step, kw_step;    // staged offset between neighbouring taps along H, W
  int64_t slices, bands, col_tiles;  // tiles along N * C * out depth, out height, out width
  bool vec_ok;             // every input row starts 16-byte aligned
};

// What the tiles of one band and column tile share, as every thread of the
// block sees it. Staged positions are (slot, row, column), column in
// elements, vector = column / V.
struct Band {
  int64_t src;            // input offset of staged (0, 0, 0) in plane 0, depth 0, whether or not inside the input
  int64_t dst;            // output offset of the first output in slice 0
  int64_t oh0, ow0;       // output position of the first output
  int row_lo, row_hi;     // staged rows inside the input
  int col_lo, col_hi;     // staged columns inside the input
  int vec_lo, vec_hi;     // staged vectors wholly inside the input
  int shift;              // staged column of the first output's first tap
  int rows_valid, cols_valid;  // outputs of the tile inside the output
};

// One tile: a band at one slice (an (n, c) plane at one output depth).
struct Tile {
  int64_t src, dst;  // the band's, moved to this slice (and its first valid depth tap)
  int64_t od;
  int kd_lo, kd_n;   // depth taps [kd_lo, kd_lo + kd_n) lie inside the input: slots [0, kd_n) are staged
};

template <class T> using Vector = Vec<T, kVec<T>>;

// ceil(a / b) for a >= 0, b >= 1; the common b == 1 skips the division.
template <class Int> __device__ __forceinline__ Int div_up(Int a, Int b) { return b == 1 ? a : (a + b - 1) / b; }

// The taps t in [0, k) whose position start + t * d lies in [0, in): [lo, hi).
template <class Int> __device__ __forceinline__ void tap_range(Int start, Int k, Int d, Int in, Int& lo, Int& hi) {
  lo = start >= 0 ? 0 : div_up(-start, d);
  hi = start >= in ? 0 : std::min(k, div_up(in - start, d));
  hi = std::max(lo, hi);
}

// The divisor's part from one dim of an average window at output position o (the CPU's avg_extent).
template <class Int>
__device__ __forceinline__ Int avg_extent(Int o, Int k, Int s, Int p, Int in, bool count_include_pad) {
  const Int start = o * s - p, end = std::min(start + k, in + p);
  if (count_include_pad) return end - start;
  return std::min(end, in) - std::max<Int>(start, 0);
}

template <class A, Pool kPool> __device__ __forceinline__ A pool_identity() {
  if constexpr (kPool == Pool::avg) return A(0);
  else return -std::numeric_limits<A>::infinity();
}

// max: NaN wins, as in torch (and a later NaN over an earlier one: argmax keeps the last).
template <class A> __device__ __forceinline__ bool takes_over(A v, A acc) { return v > acc || v != v; }

template <class A, Pool kPool> __device__ __forceinline__ A pool_combine(A acc, A v) {
  if constexpr (kPool == Pool::avg) return acc + v;
  else return takes_over(v, acc) ? v : acc;
}

// ---- tiled kernel

// avg_extent along dim i in int arithmetic, for the tiled kernel (plan_tiles keeps its sizes in int range).
__device__ __forceinline__ int tile_extent(int o, const PoolGeometry& g, int i) {
  return avg_extent<int>(o, static_cast<int>(g.k[i]), static_cast<int>(g.s[i]), static_cast<int>(g.p[i]),
                         static_cast<int>(g.in[i]), g.count_include_pad);
}

__device__ __forceinline__ Band locate_band(const PoolGeometry& g, const TilePlan& tp, int64_t band, int64_t col_tile,
                                            int vec) {
  Band t;
  t.oh0 = band * tp.tile_h;
  t.ow0 = col_tile * tp.tile_w;
  const int64_t h_first = t.oh0 * g.s[1] - g.p[1], w_first = t.ow0 * g.s[2] - g.p[2];
  const int64_t g0 = w_first - ((w_first % vec) + vec) % vec;  // rounded down to a whole vector
  t.src = h_first * g.in[2] + g0;
  t.dst = t.oh0 * g.out[2] + t.ow0;
  t.row_lo = static_cast<int>(std::clamp<int64_t>(-h_first, 0, tp.rows));
  t.row_hi = static_cast<int>(std::clamp<int64_t>(g.in[1] - h_first, 0, tp.rows));
  t.col_lo = static_cast<int>(std::clamp<int64_t>(-g0, 0, tp.pitch));
  t.col_hi = static_cast<int>(std::clamp<int64_t>(g.in[2] - g0, 0, tp.pitch));
  t.vec_lo = (t.col_lo + vec - 1) / vec;
  t.vec_hi = t.col_hi / vec;
  t.shift = static_cast<int>(w_first - g0);
  t.rows_valid = static_cast<int>(std::min<int64_t>(tp.tile_h, g.out[1] - t.oh0));
  t.cols_valid = static_cast<int>(std::min<int64_t>(tp.tile_w, g.out[2] - t.ow0));
  return t;
}

// The band's tile at `slice`; 2-D (no depth to speak of) needs no division.
__device__ __forceinline__ Tile locate_tile(const PoolGeometry& g, const Band& band, int64_t slice) {
  const int64_t in_slice = g.in[1] * g.in[2];
  Tile t;
  t.dst = band.dst + slice * (g.out[1] * g.out[2]);
  if (g.k[0] == 1 && g.in[0] == 1) {  // then out[0] == 1, no depth padding
    t.od = 0;
    t.kd_lo = 0;
    t.kd_n = 1;
    t.src = band.src + slice * in_slice;
    return t;
  }
  const int64_t plane = slice / g.out[0];
  t.od = slice - plane * g.out[0];
  const int64_t id0 = t.od * g.s[0] - g.p[0];
  int64_t kd_lo, kd_hi;
  tap_range(id0, g.k[0], g.d[0], g.in[0], kd_lo, kd_hi);
  t.kd_lo = static_cast<int>(kd_lo);
  t.kd_n = static_cast<int>(kd_hi - kd_lo);
  t.src = band.src + (plane * g.in[0] + id0 + kd_lo * g.d[0]) * in_slice;
  return t;
}

// The staged vectors one thread moves: the b-th is vector t + b * n of the
// (slot, row, vector) layout, the same for every tile, so where it comes from
// (`from`, relative to a tile's src) and goes to (`to`) are worked out once.
struct StagePart {
  int64_t from[kStageBatch];
  int to[kStageBatch];    // -1: none
  int slot[kStageBatch], row[kStageBatch], vec[kStageBatch];

  __device__ __forceinline__ StagePart(int t, int n, const PoolGeometry& g, const TilePlan& tp, int v) {
    const int row_vectors = tp.pitch / v, slot_vectors = tp.rows * row_vectors;
    for (int b = 0; b < kStageBatch; ++b) {
      const int e = t + b * n;
      to[b] = e < tp.slots * slot_vectors ? e : -1;
      slot[b] = e / slot_vectors;
      row[b] = e % slot_vectors / row_vectors;
      vec[b] = e % row_vectors;
      from[b] = (slot[b] * g.d[0] * g.in[1] + row[b]) * g.in[2] + int64_t{vec[b]} * v;
    }
  }
};

// Loads this thread's part of the tile's input, the identity outside the input.
template <class T, Pool kPool>
__device__ __forceinline__ void load_part(Vector<T> (&v)[kStageBatch], const StagePart& part, const T* in,
                                          const TilePlan& tp, const Band& band, const Tile& tile) {
  constexpr int V = kVec<T>;
  const T fill = static_cast<T>(pool_identity<acc_t<T>, kPool>());
#pragma unroll
  for (int b = 0; b < kStageBatch; ++b) {
    if (part.to[b] < 0 || part.slot[b] >= tile.kd_n) continue;
    const int64_t at = tile.src + part.from[b];  // in[at + m] lies inside the input for staged columns inside it
    if (part.row[b] < band.row_lo || part.row[b] >= band.row_hi) {
      for (int m = 0; m < V; ++m) v[b].v[m] = fill;
    } else if (tp.vec_ok && part.vec[b] >= band.vec_lo && part.vec[b] < band.vec_hi) {
      v[b] = *reinterpret_cast<const Vector<T>*>(in + at);
    } else {
      const int col = part.vec[b] * V;
      for (int m = 0; m < V; ++m) v[b].v[m] = col + m >= band.col_lo && col + m < band.col_hi ? in[at + m] : fill;
    }
  }
}

template <class T>
__device__ __forceinline__ void store_part(T* smem, const Vector<T> (&v)[kStageBatch], const StagePart& part,
                                           const Tile& tile) {
#pragma unroll
  for (int b = 0; b < kStageBatch; ++b)
    if (part.to[b] >= 0 && part.slot[b] < tile.kd_n) reinterpret_cast<Vector<T>*>(smem)[part.to[b]] = v[b];
}

// Pools the staged tile. An item is kStrip outputs of one row, tile_w / kStrip
// apart, so that neighbouring threads read neighbouring staged columns; each
// output reduces its whole window (the staged identity stands in for padding).
// O: T, or the tap index type for argmax.
template <class T, Pool kPool, class O>
__device__ void pool_tile(O* out, const T* smem, const PoolGeometry& g, const TilePlan& tp, const Band& band,
                          const Tile& tile, const Walk& first) {
  using A = acc_t<T>;
  const int k1 = static_cast<int>(g.k[1]), k2 = static_cast<int>(g.k[2]), slot_size = tp.rows * tp.pitch;
  const int groups = tp.tile_w / kStrip, strip_step = groups * tp.col_step;
  O* dst = out + tile.dst;
  for (Walk w = first; w.row < tp.tile_h; w.step()) {
    if (w.row >= band.rows_valid || w.col >= band.cols_valid) continue;  // the last band or column tile is partial
    const T* x = smem + w.row * tp.row_step + w.col * tp.col_step + band.shift;
    A acc[kStrip];
    uint32_t at[kStrip];  // argmax: the tap acc[u] came from
#pragma unroll
    for (int u = 0; u < kStrip; ++u) acc[u] = pool_identity<A, kPool>(), at[u] = kNoTap<uint32_t>;
    // Taps run in order, staged slot j being depth tap kd_lo + j (max_pool_backward_entry keeps them in 32 bits).
    uint32_t tap = static_cast<uint32_t>(tile.kd_lo) * k1 * k2;
    for (int j = 0; j < tile.kd_n; ++j, x += slot_size) {
      const T* xh = x;
      for (int kh = 0; kh < k1; ++kh, xh += tp.kh_step)
        for (int kw = 0; kw < k2; ++kw, ++tap) {
          const T* xt = xh + kw * tp.kw_step;
#pragma unroll
          for (int u = 0; u < kStrip; ++u) {
            const A v = static_cast<A>(xt[u * strip_step]);
            if constexpr (kPool == Pool::argmax) {
              if (takes_over(v, acc[u])) acc[u] = v, at[u] = tap;
            } else {
              acc[u] = pool_combine<A, kPool>(acc[u], v);
            }
          }
        }
    }
    // The divisor's depth and height part (plan_tiles keeps the sizes in int).
    A outer = 1;
    if (kPool == Pool::avg && !g.divisor_override)
      outer = static_cast<A>(tile_extent(static_cast<int>(tile.od), g, 0) *
                             tile_extent(static_cast<int>(band.oh0) + w.row, g, 1));
#pragma unroll
    for (int u = 0; u < kStrip; ++u) {
      const int c = w.col + u * groups;
      if (c >= band.cols_valid) break;
      O& o = dst[w.row * g.out[2] + c];
      if constexpr (kPool == Pool::argmax) {
        o = static_cast<O>(at[u]);  // kNoTap<uint32_t> narrows to kNoTap<O>
      } else if constexpr (kPool == Pool::avg) {
        if (g.divisor_override) o = static_cast<T>(acc[u] / static_cast<A>(g.divisor_override));
        else o = static_cast<T>(acc[u] / (outer * static_cast<A>(tile_extent(static_cast<int>(band.ow0) + c, g, 2))));
      } else {
        o = static_cast<T>(acc[u]);
      }
    }
  }
}

// 16 bytes of shared memory with no constructor (float16's Vec has one).
struct alignas(16) SharedWords {
  unsigned char bytes[16];
};

// A persistent grid: each block takes a band and column tile (blockIdx.y)
// and pools it plane after plane (gridDim.x apart), loading each next tile's
// input while it pools the current one, so that its loads are in flight
// while it computes.
template <class T, Pool kPool, class O>
static __global__ void __launch_bounds__(kPoolThreads, kPoolMinBlocks)
    tiled_pool_kernel(O* out, const T* in, PoolGeometry g, TilePlan tp) {
  __shared__ SharedWords staged[kTileBytes / sizeof(SharedWords)];
  T* smem = reinterpret_cast<T*>(staged);
  const StagePart part(threadIdx.x, blockDim.x, g, tp, kVec<T>);
  const Walk items(threadIdx.x, blockDim.x, tp.tile_w / kStrip);
  for (int64_t bc = blockIdx.y; bc < tp.bands * tp.col_tiles; bc += gridDim.y) {
    const int64_t col_tile = bc / tp.bands;
    const Band band = locate_band(g, tp, bc - col_tile * tp.bands, col_tile, kVec<T>);
    int64_t slice = blockIdx.x;  // gridDim.x <= tp.slices
    Tile tile = locate_tile(g, band, slice);
    Vector<T> pending[kStageBatch];
    load_part<T, kPool>(pending, part, in, tp, band, tile);
    for (;;) {
      __syncthreads();  // the last tile's outputs are done reading the staged input
      store_part<T>(smem, pending, part, tile);
      __syncthreads();
      const int64_t next = slice + gridDim.x;
      Tile next_tile = tile;
      if (next < tp.slices) {
        next_tile = locate_tile(g, band, next);
        load_part<T, kPool>(pending, part, in, tp, band, next_tile);
      }
      pool_tile<T, kPool, O>(out, smem, g, tp, band, tile, items);
      if (next >= tp.slices) break;
      slice = next;
      tile = next_tile;
    }
  }
}

// ---- direct kernels: one output per thread

// The average of `sum` over the window at (od, oh, ow), divided as the CPU does.
template <class A, class Int>
__device__ __forceinline__ A pool_average(A sum, const BasicPoolGeometry<Int>& g, Int od, Int oh, Int ow) {
  if (g.divisor_override) return sum / static_cast<A>(g.divisor_override);
  const bool pad = g.count_include_pad;
  const A outer = static_cast<A>(avg_extent(od, g.k[0], g.s[0], g.p[0], g.in[0], pad) *
                                 avg_extent(oh, g.k[1], g.s[1], g.p[1], g.in[1], pad));
  return sum / (outer * static_cast<A>(avg_extent(ow, g.k[2], g.s[2], g.p[2], g.in[2], pad)));
}

// Windows too large to stage, and small planes: each output reads its window, clipped to the input once.
template <class T, Pool kPool, class O, class Int>
static __global__ void direct_pool_kernel(O* out, const T* in, BasicPoolGeometry<Int> g, Int n) {
  using A = acc_t<T>;
  for (Int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    Int rest = i / g.out[2];
    const Int ow = i - rest * g.out[2];
    const Int oh = rest % g.out[1];
    rest /= g.out[1];
    const Int od = rest % g.out[0], plane = rest / g.out[0];
    const Int ds = od * g.s[0] - g.p[0], hs = oh * g.s[1] - g.p[1], ws = ow * g.s[2] - g.p[2];
    Int kd_lo, kd_hi, kh_lo, kh_hi, kw_lo, kw_hi;
    tap_range(ds, g.k[0], g.d[0], g.in[0], kd_lo, kd_hi);
    tap_range(hs, g.k[1], g.d[1], g.in[1], kh_lo, kh_hi);
    tap_range(ws, g.k[2], g.d[2], g.in[2], kw_lo, kw_hi);
    const T* src = in + plane * g.in[0] * g.in[1] * g.in[2];
    A acc = pool_identity<A, kPool>();
    uint32_t at = kNoTap<uint32_t>;  // argmax: the tap acc came from
    for (Int kd = kd_lo; kd < kd_hi; ++kd)
      for (Int kh = kh_lo; kh < kh_hi; ++kh) {
        const T* row = src + ((ds + kd * g.d[0]) * g.in[1] + hs + kh * g.d[1]) * g.in[2] + ws;
        for (Int kw = kw_lo; kw < kw_hi; ++kw) {
          const A v = static_cast<A>(row[kw * g.d[2]]);
          if constexpr (kPool == Pool::argmax) {
            if (takes_over(v, acc)) acc = v, at = static_cast<uint32_t>((kd * g.k[1] + kh) * g.k[2] + kw);
          } else {
            acc = pool_combine<A, kPool>(acc, v);
          }
        }
      }
    if constexpr (kPool == Pool::argmax) out[i] = static_cast<O>(at);
    else if constexpr (kPool == Pool::avg) out[i] = static_cast<T>(pool_average(acc, g, od, oh, ow));
    else out[i] = static_cast<T>(acc);
  }
}

// Output cell o of n over an input of `in`: [floor(o * in / n), ceil((o + 1) * in / n)).
__device__ __forceinline__ int64_t adaptive_start(int64_t o, int64_t in, int64_t n) { return o * in / n; }
__device__ __forceinline__ int64_t adaptive_end(int64_t o, int64_t in, int64_t n) { return ((o + 1) * in + n - 1) / n; }

// Small cells, one per thread: each cell column by column, each column down its rows (the CPU's order).
template <class T>
static __global__ void adaptive_avg_pool_kernel(T* out, const T* in, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                                                int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = i % ow, r = i / ow % oh, plane = i / (ow * oh);
    const int64_t h0 = adaptive_start(r, ih, oh), h1 = adaptive_end(r, ih, oh);
    const int64_t w0 = adaptive_start(q, iw, ow), w1 = adaptive_end(q, iw, ow);
    const T* src = in + (plane * ih + h0) * iw;
    A sum = 0;
    for (int64_t c = w0; c < w1; ++c) {
      A column = 0;
      for (int64_t h = 0; h < h1 - h0; ++h) column += static_cast<A>(src[h * iw + c]);
      sum += column;
    }
    out[i] = static_cast<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
  }
}

// Larger cells (global pooling above all: one cell per plane) are summed by a
// team, a warp or a block (as reduce.hip's rows): one thread per cell would
// read a whole plane serially, and neighbouring threads' loads would lie a
// cell apart. A cell of whole rows (ow == 1) is one contiguous run, read in
// 16-byte vectors where aligned with kCellLoads in flight per thread; other
// cells are walked row by row, the team's threads on consecutive columns.
constexpr int kCellThreads = 256;
constexpr int kCellLoads = 4;
// Cells up to this many elements take a thread each; up to kWarpCell (or when there are
// enough cells to give every warp of the GPU a few), a warp each; larger ones a block.
constexpr int64_t kThreadCell = 16;
constexpr int64_t kWarpCell = 4096;
constexpr int64_t kManyCells = 16384;

// The sum of the elements [0, len) of a contiguous run that thread `rank` of
// `n` reads (elements rank, rank + n, ... counted in V-element vectors; V > 1:
// `src` is 16-byte aligned and len % V == 0).
template <class T, int V> __device__ __forceinline__ acc_t<T> run_part(const T* src, int64_t len, int rank, int n) {
  using A = acc_t<T>;
  const Vec<T, V>* v = reinterpret_cast<const Vec<T, V>*>(src);
  const int64_t nvec = len / V;
  A acc[kCellLoads];
#pragma unroll
  for (int u = 0; u < kCellLoads; ++u) acc[u] = A(0);
  int64_t i = rank;
  for (; i + (kCellLoads - 1) * int64_t{n} < nvec; i += kCellLoads * int64_t{n}) {
    Vec<T, V> x[kCellLoads];
#pragma unroll
    for (int u = 0; u < kCellLoads; ++u) x[u] = v[i + u * n];
#pragma unroll
    for (int u = 0; u < kCellLoads; ++u)
#pragma unroll
      for (int j = 0; j < V; ++j) acc[u] += static_cast<A>(x[u].v[j]);
  }
  for (; i < nvec; i += n) {
    const Vec<T, V> x = v[i];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[0] += static_cast<A>(x.v[j]);
  }
  for (int u = 1; u < kCellLoads; ++u) acc[0] += acc[u];
  return acc[0];
}

// A cell of ih x iw planes pooled to oh x ow, each summed by a team
// (kBlock: a block, else team_width lanes of a warp); V > 1 only for cells of
// whole rows whose runs are V-aligned (ow == 1, launch_adaptive_cells checks).
// Sizes below 2^31 per dim.
template <class T, int V, bool kBlock>
static __global__ void __launch_bounds__(kCellThreads)
    adaptive_avg_pool_cells(T* out, const T* in, int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t cells,
                            int team_width) {
  using A = acc_t<T>;
  for (RowTeam<kBlock> team(team_width); team.first < cells; team.next()) {
    const int64_t i = team.row();  // past the last cell for some teams of the last warp
    A part = A(0), size = A(1);
    if (i < cells) {
      const int64_t q = i % ow, r = i / ow % oh, plane = i / (ow * oh);
      const int64_t h0 = adaptive_start(r, ih, oh), h1 = adaptive_end(r, ih, oh);
      const int64_t w0 = adaptive_start(q, iw, ow), w1 = adaptive_end(q, iw, ow);
      const T* src = in + (plane * ih + h0) * iw + w0;
      size = static_cast<A>((h1 - h0) * (w1 - w0));
      if (w1 - w0 == iw) {
        part = run_part<T, V>(src, (h1 - h0) * iw, team.rank, team.width);
      } else {
        for (Walk w(team.rank, team.width, static_cast<int>(w1 - w0)); w.row < h1 - h0; w.step())
          part += static_cast<A>(src[w.row * iw + w.col]);
      }
    }
    const A sum = team.template all_reduce<kCellThreads>(part, kernels::SumReduce<A>());
    if (team.rank == 0 && i < cells) out[i] = static_cast<T>(sum / size);
  }
}

// The input gradient of global pooling (one cell per plane): every element of
// plane p gets grad_out[p] / (its size), written by a team per plane as
// adaptive_avg_pool_cells reads (V > 1: plane_size % V == 0, grad_in aligned).
template <class T, int V, bool kBlock>
static __global__ void __launch_bounds__(kCellThreads)
    global_avg_pool_backward(T* grad_in, const T* grad_out, int64_t planes, int64_t plane_size) {
  using A = acc_t<T>;
  for (RowTeam<kBlock> team(PF_WARP_SIZE); team.first < planes; team.next()) {
    const int64_t p = team.row();
    // From +0, as the gather kernel and the CPU sum the shares: a -0 gradient gives +0.
    const T share = static_cast<T>(A(0) + static_cast<A>(grad_out[p]) / static_cast<A>(plane_size));
    Vec<T, V> pack;
#pragma unroll
    for (int j = 0; j < V; ++j) pack.v[j] = share;
    Vec<T, V>* dst = reinterpret_cast<Vec<T, V>*>(grad_in + p * plane_size);
    for (int64_t i = team.rank; i < plane_size / V; i += team.width) dst[i] = pack;
  }
}

// ---- backward passes: gather kernels

// One spatial dim of sliding windows: output o's window starts at o * s - p
// and has k taps d apart. Int: int32_t when the plane's sizes allow
// (gather_fits_int32), which keeps the gather's registers down; int64_t else.
template <class Int> struct SlidingDim {
  Int in, out, k, s, p, d;
  Int reach, reach_q, reach_r;  // from a window's first tap to its last: (k - 1) * d = reach_q * s + reach_r
  bool count_include_pad;

  __device__ __forceinline__ Int start(Int o) const { return o * s - p; }
  // The window's span from its start: positions start + [0, last] (all of them taps when d is 1).
  __device__ __forceinline__ Int last(Int) const { return reach; }
  // [lo, hi): the outputs whose window spans input position x (with
  // dilation, x may fall between its taps). The first is found from the
  // latest window starting at or before x with no second division: with
  // q = x + p = latest * s + r, it is ceil((q - (k - 1) * d) / s) =
  // latest - reach_q + (r > reach_r).
  __device__ __forceinline__ void cover(Int x, Int& lo, Int& hi) const {
    const Int q = x + p, latest = s == 1 ? q : q / s, r = q - latest * s;
    lo = std::max<Int>(0, latest - reach_q + (r > reach_r ? 1 : 0));
    hi = std::min<Int>(out, latest + 1);
  }
  // The tap of output o's window at input position x, or -1 when it has none there.
  __device__ __forceinline__ Int tap(Int o, Int x) const {
    const Int off = x - start(o);
    if (off < 0 || off > reach) return -1;
    if (d == 1) return off;
    return off % d ? -1 : off / d;
  }
  // The divisor's part from this dim, for averages.
  __device__ __forceinline__ int64_t extent(Int o) const { return avg_extent(o, k, s, p, in, count_include_pad); }
  // Whether tap t at x is the window's first inside the input: the one before it (if any) lies before 0.
  __device__ __forceinline__ bool first_inside(Int t, Int x) const { return t == 0 || x < d; }
  // The first tap inside the input of a window starting at `begin`.
  __device__ __forceinline__ Int first_inside_tap(Int begin) const {
    return begin >= 0 ? 0 : (d == 1 ? -begin : (-begin + d - 1) / d);
  }
};

// One dim of adaptive pooling: output o's cell is [floor(o * in / out), ceil((o + 1) * in / out)).
template <class Int> struct AdaptiveDim {
  Int in, out;

  __device__ __forceinline__ Int start(Int o) const { return o * in / out; }
  __device__ __forceinline__ Int end(Int o) const { return ((o + 1) * in + out - 1) / out; }
  __device__ __forceinline__ Int last(Int o) const { return end(o) - start(o) - 1; }
  // By the same rule the other way round: the cells holding x are [floor(x * out / in), ceil((x + 1) * out / in)).
  __device__ __forceinline__ void cover(Int x, Int& lo, Int& hi) const {
    lo = x * out / in;
    hi = ((x + 1) * out + in - 1) / in;
  }
  __device__ __forceinline__ Int tap(Int o, Int x) const {
    const Int begin = start(o);
    return x >= begin && x < end(o) ? x - begin : -1;
  }
  __device__ __forceinline__ int64_t extent(Int o) const { return end(o) - start(o); }
};

// The windows of a pooling, per (depth, height, width).
template <class Dim> struct Windows {
  Dim dim[3];
  int64_t divisor_override;  // averages: divide by this instead (0: none)
};

// How the gather's threads cover the input gradient: rows of `strips`
// strips of kVec<T> elements, a block taking rows_per_block rows of
// seg_strips strips (one column segment of the row) and each thread one
// strip, stepping gridDim.x * rows_per_block rows at a time.
struct GatherPlan {
  int64_t planes, strips, segments;
  int seg_strips, rows_per_block;
  int64_t jump_h, jump_d, jump_plane;  // the row step as (plane, depth, row) digits: no division per step
  bool vec_ok;                         // rows start 16-byte aligned: strips are stored as one vector
};

// A thread's row: (plane, depth, row) of the input, stepped by the plan's jump.
template <class Int> struct RowWalk {
  int64_t plane;
  Int id, ih;

  __device__ __forceinline__ RowWalk(int64_t row, Int in_d, Int in_h) {
    ih = static_cast<Int>(row % in_h);
    row /= in_h;
    id = static_cast<Int>(row % in_d);
    plane = row / in_d;
  }
  __device__ __forceinline__ void step(const GatherPlan& gp, Int in_d, Int in_h) {
    ih += static_cast<Int>(gp.jump_h);
    const bool carry_h = ih >= in_h;
    if (carry_h) ih -= in_h;
    id += static_cast<Int>(gp.jump_d) + carry_h;
    const bool carry_d = id >= in_d;
    if (carry_d) id -= in_d;
    plane += gp.jump_plane + carry_d;
  }
};

// The input's gradient from the output's: each element sums, over the outputs
// whose windows hold it, in ascending output order, the output's gradient
// divided by its divisor (averages: the windows are contiguous) or, for max
// pooling (kMax), the output's gradient where `taps` says the element is its
// window's maximum. Along the width an output's part is worked out once for
// the strip: which of its elements the window spans, or which one it chose.
template <class T, class Dim, bool kMax, class I>
static __global__ void __launch_bounds__(kGatherThreads)
    gather_grad_kernel(T* grad_in, const T* grad_out, const I* taps, Windows<Dim> win, GatherPlan gp) {
  using A = acc_t<T>;
  using Int = decltype(Dim::in);
  constexpr int V = kVec<T>;
  const int strip_in_seg = static_cast<int>(threadIdx.x) % gp.seg_strips;
  const int row_in_block = static_cast<int>(threadIdx.x) / gp.seg_strips;
  if (row_in_block >= gp.rows_per_block) return;
  const Dim &wd = win.dim[0], &wh = win.dim[1], &ww = win.dim[2];
  const int64_t in_plane = int64_t{wd.in} * wh.in * ww.in, out_plane = int64_t{wd.out} * wh.out * ww.out;
  for (int64_t seg = blockIdx.y; seg < gp.segments; seg += gridDim.y) {
    const int64_t strip = seg * gp.seg_strips + strip_in_seg;
    if (strip >= gp.strips) break;  // the last segment is partial
    const Int x0 = static_cast<Int>(strip * V);
    const int n = static_cast<int>(std::min<int64_t>(V, ww.in - x0));
    Int ow_lo, ow_hi, unused;
    ww.cover(x0, ow_lo, unused);
    ww.cover(x0 + n - 1, unused, ow_hi);
    for (RowWalk<Int> r(blockIdx.x * static_cast<int64_t>(gp.rows_per_block) + row_in_block, wd.in, wh.in);
         r.plane < gp.planes; r.step(gp, wd.in, wh.in)) {
      Int od_lo, od_hi, oh_lo, oh_hi;
      wd.cover(r.id, od_lo, od_hi);
      wh.cover(r.ih, oh_lo, oh_hi);
      const T* gy = grad_out + r.plane * out_plane;
      const I* ty = kMax ? taps + r.plane * out_plane : nullptr;
      A acc[V];
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = A(0);
      for (Int od = od_lo; od < od_hi; ++od) {
        const Int kd = wd.tap(od, r.id);
        if (kd < 0) continue;
        for (Int oh = oh_lo; oh < oh_hi; ++oh) {
          const Int kh = wh.tap(oh, r.ih);
          if (kh < 0) continue;
          const Int row = (od * wh.out + oh) * ww.out;
          if constexpr (kMax) {
            // Taps count in 32 bits (max_pool_backward_entry): a choice in another row of the window wraps past k.
            const uint32_t tap_base = (static_cast<uint32_t>(kd) * wh.k + kh) * ww.k;
            const bool first_dh = wd.first_inside(kd, r.id) && wh.first_inside(kh, r.ih);
            for (Int ow = ow_lo; ow < ow_hi; ++ow) {
              const A g = static_cast<A>(gy[row + ow]);
              const uint32_t chosen = ty[row + ow];
              const Int begin = ww.start(ow);
              // The chosen tap along the width, if the choice lies in this row of the window at all.
              Int kw = -1;
              if (chosen != kNoTap<I>) {
                if (chosen - tap_base < static_cast<uint32_t>(ww.k)) kw = static_cast<Int>(chosen - tap_base);
              } else if (first_dh) {
                kw = ww.first_inside_tap(begin);
              }
              const Int pick = kw >= 0 && kw < ww.k ? begin + kw * ww.d - x0 : -1;  // its element in the strip
#pragma unroll
              for (int e = 0; e < V; ++e)
                if (e == pick) acc[e] += g;
            }
          } else {
            const int64_t outer = wd.extent(od) * wh.extent(oh);
            for (Int ow = ow_lo; ow < ow_hi; ++ow) {
              const int64_t divisor = win.divisor_override ? win.divisor_override : outer * ww.extent(ow);
              const A share = static_cast<A>(gy[row + ow]) / static_cast<A>(divisor);
              const Int rel = x0 - ww.start(ow);
              const auto last = static_cast<std::make_unsigned_t<Int>>(ww.last(ow));
#pragma unroll
              for (int e = 0; e < V; ++e)
                if (static_cast<std::make_unsigned_t<Int>>(rel + e) <= last) acc[e] += share;
            }
          }
        }
      }
      T* dst = grad_in + r.plane * in_plane + (int64_t{r.id} * wh.in + r.ih) * ww.in + x0;
      if (gp.vec_ok) {
        Vector<T> v;
#pragma unroll
        for (int e = 0; e < V; ++e) v.v[e] = static_cast<T>(acc[e]);
        *reinterpret_cast<Vector<T>*>(dst) = v;
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e)
          if (e < n) dst[e] = static_cast<T>(acc[e]);
      }
    }
  }
}

// ---- launch

// The tiling of `g` for elements of `size` bytes, or false when a tile of
// kStrip outputs does not fit in kTileBytes (huge or widely dilated windows).
// Tiles are about kTileOutputs outputs: whole output rows where they fit.
bool plan_tiles(const PoolGeometry& g, int64_t planes, int64_t size, TilePlan& tp) {
  // Windows this large never fit; ruling them out first keeps the products below from overflowing, and
  // inputs below 2^30 per dim keep a tile's window positions (tile_extent) in int.
  for (int i = 0; i < 3; ++i)
    if (g.k[i] > kTileBytes || g.s[i] > kTileBytes || g.d[i] > kTileBytes || g.in[i] >= (int64_t{1} << 30))
      return false;
  const int64_t vec = std::max<int64_t>(1, 16 / size);
  const int64_t slots = std::min(g.k[0], g.in[0]);  // valid depth taps of an output, at most
  auto rows = [&](int64_t th) { return (th - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1; };
  // Columns of tw outputs, and up to vec - 1 before them to align the first, in whole vectors.
  auto pitch = [&](int64_t tw) { return ((tw - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 2 * vec - 1) / vec * vec; };
  auto bytes = [&](int64_t th, int64_t tw) { return slots * rows(th) * pitch(tw) * size; };
  auto whole_strips = [](int64_t w) { return (w + kStrip - 1) / kStrip * kStrip; };
  int64_t tw = whole_strips(std::min<int64_t>(g.out[2], kTileOutputs));
  while (tw > kStrip && bytes(1, tw) > kTileBytes) tw = whole_strips(tw / 2);
  if (bytes(1, tw) > kTileBytes) return false;
  const int64_t fit_rows = kTileBytes / (slots * pitch(tw) * size);
  const int64_t th = std::clamp<int64_t>(
      std::min<int64_t>(kTileOutputs / tw, (fit_rows - (g.k[1] - 1) * g.d[1] - 1) / g.s[1] + 1), 1, g.out[1]);
  tp.tile_h = static_cast<int>(th);
  tp.tile_w = static_cast<int>(tw);
  tp.slots = static_cast<int>(slots);
  tp.rows = static_cast<int>(rows(th));
  tp.pitch = static_cast<int>(pitch(tw));
  tp.row_step = th > 1 ? static_cast<int>(g.s[1] * tp.pitch) : 0;
  tp.col_step = static_cast<int>(g.s[2]);
  tp.kh_step = g.k[1] > 1 ? static_cast<int>(g.d[1] * tp.pitch) : 0;
  tp.kw_step = g.k[2] > 1 ? static_cast<int>(g.d[2]) : 0;
  tp.slices = planes * g.out[0];
  tp.bands = (g.out[1] + th - 1) / th;
  tp.col_tiles = (g.out[2] + tw - 1) / tw;
  tp.vec_ok = g.in[2] % vec == 0;
  return true;
}

// Output-sized spatial dims padded to three, as on the CPU (kernels/window.h).
PoolGeometry make_geometry(const Shape& in, const Shape& out, const PoolAttrs& a) {
  PoolGeometry g;
  const int64_t nd = static_cast<int64_t>(a.kernel_size.size()), lead = 3 - nd;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t j = i - lead;  // the dim in the op's terms, < 0 for the added ones
    g.in[i] = j < 0 ? 1 : in[2 + j];
    g.out[i] = j < 0 ? 1 : out[2 + j];
    g.k[i] = j < 0 ? 1 : a.kernel_size[j];
    g.s[i] = j < 0 ? 1 : a.stride[j];
    g.p[i] = j < 0 ? 0 : a.padding[j];
    g.d[i] = j < 0 || a.dilation.empty() ? 1 : a.dilation[j];
  }
  g.count_include_pad = a.count_include_pad;
  g.divisor_override = a.divisor_override;
  return g;
}

template <class T, Pool kPool, class O>
void launch_pool(O* out, const T* in, const PoolGeometry& g, int64_t planes, int device, hipStream_t stream) {
  TilePlan tp;
  // Output planes smaller than a block's threads leave a tile mostly idle: one output per thread serves them better.
  if (g.out[1] * g.out[2] >= kPoolThreads && plan_tiles(g, planes, sizeof(T), tp)) {
    tp.vec_ok = tp.vec_ok && aligned(in, sizeof(Vector<T>));
    // kPoolThreads threads: with fewer, one batch each would not stage a whole tile.
    const int64_t resident = int64_t{compute_units(device)} * kPoolMinBlocks;
    const int64_t y = std::min<int64_t>(tp.bands * tp.col_tiles, 65535);
    const int64_t x = std::clamp<int64_t>(resident / y, 1, std::min<int64_t>(tp.slices, int64_t{1} << 20));
    const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(y));
    tiled_pool_kernel<T, kPool, O><<<grid, kPoolThreads, 0, stream>>>(out, in, g, tp);
  } else {
    const int64_t n = planes * g.out[0] * g.out[1] * g.out[2];
    // int32_t: every offset, and the grid-stride walk past n (at most 2^28 threads), stays below 2^31.
    if (n < (int64_t{1} << 30) && planes * g.in[0] * g.in[1] * g.in[2] < (int64_t{1} << 31))
      direct_pool_kernel<T, kPool, O, int32_t><<<grid_for(n), kThreads, 0, stream>>>(
          out, in, BasicPoolGeometry<int32_t>(g), static_cast<int32_t>(n));
    else
      direct_pool_kernel<T, kPool, O, int64_t><<<grid_for(n), kThreads, 0, stream>>>(out, in, g, n);
  }
}

// Who sums a cell of adaptive pooling (adaptive_avg_pool_cells), and writes a plane of global pooling's gradient.
enum class CellTeam { thread, warp, block };

CellTeam cell_team(int64_t cells, int64_t cell_size) {
  if (cell_size <= kThreadCell) return CellTeam::thread;
  return cells >= kManyCells || cell_size <= kWarpCell ? CellTeam::warp : CellTeam::block;
}

// The most elements of a cell along a dim of `in` pooled to `out` (cells overlap where out does not divide in).
int64_t max_extent(int64_t in, int64_t out) { return in % out == 0 ? in / out : in / out + 2; }

// Blocks of kCellThreads for `items` items, one per team of `width` lanes or (kBlock) per block.
template <bool kBlock> unsigned team_blocks(int64_t items, int width) {
  const int64_t per_block = kBlock ? 1 : kCellThreads / width;
  return static_cast<unsigned>(std::min<int64_t>((items + per_block - 1) / per_block, int64_t{1} << 20));
}

// Lanes of a warp team for cells of `cell_size`: about kLaneLoads loads each
// (ResNet's 7x7 global pooling on a whole warp was 0.58x PyTorch, most lanes
// idle after one load), a power of two from 4 to the warp.
constexpr int64_t kLaneLoads = 8;
int cell_team_width(int64_t cell_size, int device) {
  int width = 4;
  while (width < warp_size(device) && width * kLaneLoads < cell_size) width *= 2;
  return width;
}

template <class T, bool kBlock>
void launch_adaptive_cells(T* out, const T* in, int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t cells,
                           int64_t cell_size, int device, hipStream_t stream) {
  constexpr int V = kVec<T>;
  const int width = kBlock ? kCellThreads : cell_team_width(cell_size, device);
  const unsigned blocks = team_blocks<kBlock>(cells, width);
  // Cells of whole rows: runs start on a multiple of the plane (one cell per plane) or of the row.
  if (ow == 1 && (oh == 1 ? ih * iw : iw) % V == 0 && aligned(in, sizeof(Vec<T, V>)))
    adaptive_avg_pool_cells<T, V, kBlock><<<blocks, kCellThreads, 0, stream>>>(out, in, ih, iw, oh, ow, cells, width);
  else
    adaptive_avg_pool_cells<T, 1, kBlock><<<blocks, kCellThreads, 0, stream>>>(out, in, ih, iw, oh, ow, cells, width);
}

template <class T, bool kBlock>
void launch_global_backward(T* grad_in, const T* grad_out, int64_t planes, int64_t plane_size, int device,
                            hipStream_t stream) {
  constexpr int V = kVec<T>;
  const unsigned blocks = team_blocks<kBlock>(planes, warp_size(device));
  if (plane_size % V == 0 && aligned(grad_in, sizeof(Vec<T, V>)))
    global_avg_pool_backward<T, V, kBlock><<<blocks, kCellThreads, 0, stream>>>(grad_in, grad_out, planes, plane_size);
  else
    global_avg_pool_backward<T, 1, kBlock><<<blocks, kCellThreads, 0, stream>>>(grad_in, grad_out, planes, plane_size);
}

// The pooling's input and output shapes (a backward op's output and grad) and its window.
std::string describe(const OpCall& call, const Shape& input, const Shape& output) {
  const PoolAttrs& a = call.attr<PoolAttrs>();
  std::string s = "input " + detail::to_piece(input) + ", output " + detail::to_piece(output);
  if (!a.kernel_size.empty())
    s += ", kernel_size " + detail::to_piece(Shape(a.kernel_size)) + ", stride " + detail::to_piece(Shape(a.stride)) +
         ", padding " + detail::to_piece(Shape(a.padding)) + ", dilation " + detail::to_piece(Shape(a.dilation));
  return s + " (" + dtype_name(call.out().dtype()) + ")";
}

}  // namespace

DnnPoolHook g_dnn_avg_pool2d = nullptr;

namespace {

// Adaptive average pooling of planes ih x iw to oh x ow (n outputs in all): a
// thread, a warp team or a block per output cell, by the cell's size.
template <class T>
void launch_adaptive(T* dst, const T* src, int64_t ih, int64_t iw, int64_t oh, int64_t ow, int64_t n, int device,
                     hipStream_t stream) {
  // The teams walk a cell's rows with int counters.
  constexpr int64_t kIntLimit = int64_t{1} << 31;
  const int64_t cell_size = max_extent(ih, oh) * max_extent(iw, ow);
  const CellTeam team = ih < kIntLimit && iw < kIntLimit ? cell_team(n, cell_size) : CellTeam::thread;
  if (team == CellTeam::thread)
    adaptive_avg_pool_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(dst, src, ih, iw, oh, ow, n);
  else if (team == CellTeam::warp)
    launch_adaptive_cells<T, false>(dst, src, ih, iw, oh, ow, n, cell_size, device, stream);
  else
    launch_adaptive_cells<T, true>(dst, src, ih, iw, oh, ow, n, cell_size, device, stream);
}

template <Pool kPool> void sliding_pool_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor& x = call.inputs[0];
  Tensor& out = call.out();
  if (out.numel() == 0) return;
  const PoolAttrs& a = call.attr<PoolAttrs>();
  // A window over the whole unpadded plane is global pooling, where the cell
  // kernels beat cuDNN (ResNet's 4x4 head, 128x512 planes: 5.8 us, cuDNN 9.9).
  const bool global = call.op == ir::OpType::avg_pool2d && x.dim() == 4 && a.divisor_override == 0 &&
                      a.kernel_size[0] == x.shape()[2] && a.kernel_size[1] == x.shape()[3] && a.padding[0] == 0 &&
                      a.padding[1] == 0;
  if (!global && call.op == ir::OpType::avg_pool2d && g_dnn_avg_pool2d && g_dnn_avg_pool2d(call)) return;
  const PoolGeometry g = make_geometry(x.shape(), out.shape(), a);
  const int64_t planes = x.shape()[0] * x.shape()[1];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!is_float_v<T>) return;
    else if (global)
      launch_adaptive<T>(out.data<T>(), x.data<T>(), x.shape()[2], x.shape()[3], 1, 1, planes, device,
                         current_stream(device));
    else
      launch_pool<T, kPool, T>(out.data<T>(), x.data<T>(), g, planes, device, current_stream(device));
  });
  check_launch(op_name(call.op), describe(call, x.shape(), out.shape()));
}

void adaptive_avg_pool2d_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor& x = call.inputs[0];
  Tensor& out = call.out();
  if (out.numel() == 0) return;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>)
      launch_adaptive<T>(out.data<T>(), x.data<T>(), x.shape()[2], x.shape()[3], out.shape()[2], out.shape()[3],
                         out.numel(), device, current_stream(device));
  });
  check_launch(op_name(call.op), describe(call, x.shape(), out.shape()));
}

// ---- backward entries

template <class Int> SlidingDim<Int> sliding_dim(const PoolGeometry& g, int i) {
  SlidingDim<Int> w;
  const int64_t reach = (g.k[i] - 1) * g.d[i];
  w.in = static_cast<Int>(g.in[i]), w.out = static_cast<Int>(g.out[i]), w.k = static_cast<Int>(g.k[i]);
  w.s = static_cast<Int>(g.s[i]), w.p = static_cast<Int>(g.p[i]), w.d = static_cast<Int>(g.d[i]);
  w.reach = static_cast<Int>(reach);
  w.reach_q = static_cast<Int>(reach / g.s[i]);
  w.reach_r = static_cast<Int>(reach % g.s[i]);
  w.count_include_pad = g.count_include_pad;
  return w;
}

template <class Int> Windows<SlidingDim<Int>> sliding_windows(const PoolGeometry& g) {
  return {{sliding_dim<Int>(g, 0), sliding_dim<Int>(g, 1), sliding_dim<Int>(g, 2)}, g.divisor_override};
}

// Whether a plane's offsets and the window arithmetic stay below 2^31 (sums
// of a few of these values below 2^29 do).
bool gather_fits_int32(const PoolGeometry& g) {
  constexpr int64_t kLimit = int64_t{1} << 29;
  for (int i = 0; i < 3; ++i)
    for (int64_t v : {g.in[i], g.out[i], g.k[i], g.s[i], g.p[i], (g.k[i] - 1) * g.d[i]})
      if (v >= kLimit) return false;
  return g.in[0] * g.in[1] * g.in[2] < kLimit && g.out[0] * g.out[1] * g.out[2] < kLimit;
}

template <class T, class Dim, bool kMax, class I>
void launch_gather(T* grad_in, const T* grad_out, const I* taps, const Windows<Dim>& win, int64_t planes,
                   hipStream_t stream) {
  constexpr int V = kVec<T>;
  const int64_t in_d = win.dim[0].in, in_h = win.dim[1].in, in_w = win.dim[2].in;
  GatherPlan gp;
  gp.planes = planes;
  gp.strips = (in_w + V - 1) / V;
  gp.seg_strips = static_cast<int>(std::min<int64_t>(gp.strips, kGatherThreads));
  gp.segments = (gp.strips + gp.seg_strips - 1) / gp.seg_strips;
  gp.rows_per_block = kGatherThreads / gp.seg_strips;
  const int64_t rows = planes * in_d * in_h, rows_per_step = int64_t{gp.rows_per_block} * kGatherRowSteps;
  const int64_t x = std::clamp<int64_t>((rows + rows_per_step - 1) / rows_per_step, 1, int64_t{1} << 20);
  const int64_t y = std::min<int64_t>(gp.segments, 65535);
  const int64_t step = x * gp.rows_per_block;
  gp.jump_h = step % in_h;
  gp.jump_d = step / in_h % in_d;
  gp.jump_plane = step / in_h / in_d;
  gp.vec_ok = in_w % V == 0 && aligned(grad_in, sizeof(Vector<T>));
  // Whole warps: 64 lanes make whole waves of 32 and of 64.
  const int threads = (gp.rows_per_block * gp.seg_strips + 63) / 64 * 64;
  gather_grad_kernel<T, Dim, kMax, I><<<dim3(static_cast<unsigned>(x), static_cast<unsigned>(y)), threads, 0,
                                        stream>>>(grad_in, grad_out, taps, win, gp);
}

// A sliding-window gather in 32-bit arithmetic where it fits.
template <class T, bool kMax, class I>
void launch_sliding_gather(T* grad_in, const T* grad_out, const I* taps, const PoolGeometry& g, int64_t planes,
                           hipStream_t stream) {
  if (gather_fits_int32(g))
    launch_gather<T, SlidingDim<int32_t>, kMax, I>(grad_in, grad_out, taps, sliding_windows<int32_t>(g), planes,
                                                    stream);
  else
    launch_gather<T, SlidingDim<int64_t>, kMax, I>(grad_in, grad_out, taps, sliding_windows<int64_t>(g), planes,
                                                    stream);
}

// The taps of each window's maximum (`I` per output, scratch), then the gather.
template <class T, class I>
void launch_max_pool_backward(T* grad_in, const T* grad_out, const T* x, const PoolGeometry& g, int64_t planes,
                              Device dev, hipStream_t stream) {
  const int64_t outputs = planes * g.out[0] * g.out[1] * g.out[2];
  Tensor scratch = Tensor::empty({outputs * int64_t{sizeof(I)}}, DType::UInt8, dev);
  I* taps = reinterpret_cast<I*>(scratch.data<uint8_t>());
  launch_pool<T, Pool::argmax, I>(taps, x, g, planes, dev.index, stream);
  launch_sliding_gather<T, true, I>(grad_in, grad_out, taps, g, planes, stream);
}

// (grad, input) -> the input's gradient.
void max_pool_backward_entry(OpCall& call) {
  Tensor& out = call.out();
  const int device = out.device().index;
  DeviceGuard guard(device);
  const Tensor &grad = call.inputs[0], &x = call.inputs[1];
  if (out.numel() == 0) return;
  const PoolGeometry g = make_geometry(x.shape(), grad.shape(), call.attr<PoolAttrs>());
  const int64_t planes = x.shape()[0] * x.shape()[1];
  // In double: exact below 2^53, so the comparisons are right whatever the product.
  const double volume = static_cast<double>(g.k[0]) * static_cast<double>(g.k[1]) * static_cast<double>(g.k[2]);
  PF_CHECK(volume <= kNoTap<uint32_t>, NotSupportedError, op_name(call.op), ": windows of more than 2^32 - 1 taps "
           "are not supported on the GPU (", describe(call, x.shape(), grad.shape()), ")");
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      if (volume <= kNoTap<uint8_t>)
        launch_max_pool_backward<T, uint8_t>(out.data<T>(), grad.data<T>(), x.data<T>(), g, planes, out.device(),
                                             current_stream(device));
      else
        launch_max_pool_backward<T, uint32_t>(out.data<T>(), grad.data<T>(), x.data<T>(), g, planes, out.device(),
                                              current_stream(device));
    }
  });
  check_launch(op_name(call.op), describe(call, out.shape(), grad.shape()));
}

// (grad) -> the input's gradient (of the output's shape).
void avg_pool_backward_entry(OpCall& call) {
  Tensor& out = call.out();
  const int device = out.device().index;
  DeviceGuard guard(device);
  const Tensor& grad = call.inputs[0];
  if (out.numel() == 0) return;
  const PoolGeometry g = make_geometry(out.shape(), grad.shape(), call.attr<PoolAttrs>());
  const int64_t planes = out.shape()[0] * out.shape()[1];
  visit_dtype(grad.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>)
      launch_sliding_gather<T, false, uint8_t>(out.data<T>(), grad.data<T>(), nullptr, g, planes,
                                               current_stream(device));
  });
  check_launch(op_name(call.op), describe(call, out.shape(), grad.shape()));
}

void adaptive_avg_pool2d_backward_entry(OpCall& call) {
  Tensor& out = call.out();
  const int device = out.device().index;
  DeviceGuard guard(device);
  const Tensor& grad = call.inputs[0];
  if (out.numel() == 0) return;  // (an empty grad, output size 0, still gets zeros written)
  const int64_t ih = out.shape()[2], iw = out.shape()[3], oh = grad.shape()[2], ow = grad.shape()[3];
  const int64_t planes = out.shape()[0] * out.shape()[1];
  // 32-bit arithmetic where a plane's offsets and the products of in and out sizes stay below 2^31.
  constexpr int64_t kLimit = int64_t{1} << 31;
  const bool fits = ih * iw < kLimit && oh * ow < kLimit && (ih + 1) * (oh + 1) < kLimit &&
                    (iw + 1) * (ow + 1) < kLimit;
  const hipStream_t stream = current_stream(device);
  const CellTeam team = oh == 1 && ow == 1 ? cell_team(planes, ih * iw) : CellTeam::thread;
  visit_dtype(grad.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      if (team == CellTeam::warp) {
        launch_global_backward<T, false>(out.data<T>(), grad.data<T>(), planes, ih * iw, device, stream);
      } else if (team == CellTeam::block) {
        launch_global_backward<T, true>(out.data<T>(), grad.data<T>(), planes, ih * iw, device, stream);
      } else if (fits) {
        const Windows<AdaptiveDim<int32_t>> win{{{1, 1},
                                                  {static_cast<int32_t>(ih), static_cast<int32_t>(oh)},
                                                  {static_cast<int32_t>(iw), static_cast<int32_t>(ow)}},
                                                 0};
        launch_gather<T, AdaptiveDim<int32_t>, false, uint8_t>(out.data<T>(), grad.data<T>(), nullptr, win, planes,
                                                               stream);
      } else {
        const Windows<AdaptiveDim<int64_t>> win{{{1, 1}, {ih, oh}, {iw, ow}}, 0};
        launch_gather<T, AdaptiveDim<int64_t>, false, uint8_t>(out.data<T>(), grad.data<T>(), nullptr, win, planes,
                                                               stream);
      }
    }
  });
  check_launch(op_name(call.op), describe(call, out.shape(), grad.shape()));
}

PF_REGISTER_KERNEL(max_pool2d, ROCm, &sliding_pool_entry<Pool::max>);
PF_REGISTER_KERNEL(max_pool3d, ROCm, &sliding_pool_entry<Pool::max>);
PF_REGISTER_KERNEL(avg_pool2d, ROCm, &sliding_pool_entry<Pool::avg>);
PF_REGISTER_KERNEL(avg_pool3d, ROCm, &sliding_pool_entry<Pool::avg>);
PF_REGISTER_KERNEL(adaptive_avg_pool2d, ROCm, &adaptive_avg_pool2d_entry);
PF_REGISTER_KERNEL(max_pool2d_backward, ROCm, &max_pool_backward_entry);
PF_REGISTER_KERNEL(max_pool3d_backward, ROCm, &max_pool_backward_entry);
PF_REGISTER_KERNEL(avg_pool2d_backward, ROCm, &avg_pool_backward_entry);
PF_REGISTER_KERNEL(avg_pool3d_backward, ROCm, &avg_pool_backward_entry);
PF_REGISTER_KERNEL(adaptive_avg_pool2d_backward, ROCm, &adaptive_avg_pool2d_backward_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
