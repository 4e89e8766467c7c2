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
// per thread, as does adaptive_avg_pool2d, whose cells vary in size.
//
// Loops stride by blockDim and gridDim and blocks meet at __syncthreads, so
// nothing depends on the warp size (wave64 and wave32 alike). Offsets into
// the tensors are 64-bit; offsets inside a tile are int.

#include <algorithm>
#include <limits>
#include <string>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

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

// Per (depth, height, width): input and output sizes, kernel size, stride, padding, dilation.
struct PoolGeometry {
  int64_t in[3], out[3], k[3], s[3], p[3], d[3];
  bool count_include_pad;
  int64_t divisor_override;  // 0: none
};

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
  int kd_n;          // depth taps inside the input: slots [0, kd_n) are staged
};

// A thread's walk over a grid of items `width` wide: its first item, then
// n (the block's threads) on each step, with no division per step.
struct Walk {
  int row, col, row_jump, col_jump, width;

  __device__ __forceinline__ Walk(int t, int n, int w) : row(t / w), col(t % w), row_jump(n / w), col_jump(n % w),
                                                         width(w) {}
  __device__ __forceinline__ void step() {
    row += row_jump;
    col += col_jump;
    if (col >= width) col -= width, ++row;
  }
};

template <class T> using Vector = Vec<T, kVec<T>>;

// ceil(a / b) for a >= 0, b >= 1; the common b == 1 skips the division.
__device__ __forceinline__ int64_t div_up(int64_t a, int64_t b) { return b == 1 ? a : (a + b - 1) / b; }

// The taps t in [0, k) whose position start + t * d lies in [0, in): [lo, hi).
__device__ __forceinline__ void tap_range(int64_t start, int64_t k, int64_t d, int64_t in, int64_t& lo, int64_t& hi) {
  lo = start >= 0 ? 0 : div_up(-start, d);
  hi = start >= in ? 0 : std::min(k, div_up(in - start, d));
  hi = std::max(lo, hi);
}

// The divisor's part from one dim of an average window at output position o (the CPU's avg_extent).
__device__ __forceinline__ int64_t avg_extent(int64_t o, int64_t k, int64_t s, int64_t p, int64_t in,
                                              bool count_include_pad) {
  const int64_t start = o * s - p, end = std::min(start + k, in + p);
  if (count_include_pad) return end - start;
  return std::min(end, in) - std::max<int64_t>(start, 0);
}

template <class A, bool kMax> __device__ __forceinline__ A pool_identity() {
  if constexpr (kMax) return -std::numeric_limits<A>::infinity();
  else return A(0);
}

template <class A, bool kMax> __device__ __forceinline__ A pool_combine(A acc, A v) {
  if constexpr (kMax) return (v > acc || v != v) ? v : acc;  // NaN wins, as in torch
  else return acc + v;
}

// ---- tiled kernel

// avg_extent along dim i in int arithmetic, for the tiled kernel (plan_tiles keeps its sizes in int range).
__device__ __forceinline__ int tile_extent(int o, const PoolGeometry& g, int i) {
  const int k = static_cast<int>(g.k[i]), p = static_cast<int>(g.p[i]), in = static_cast<int>(g.in[i]);
  const int start = o * static_cast<int>(g.s[i]) - p, end = min(start + k, in + p);
  if (g.count_include_pad) return end - start;
  return min(end, in) - max(start, 0);
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
    t.kd_n = 1;
    t.src = band.src + slice * in_slice;
    return t;
  }
  const int64_t plane = slice / g.out[0];
  t.od = slice - plane * g.out[0];
  const int64_t id0 = t.od * g.s[0] - g.p[0];
  int64_t kd_lo, kd_hi;
  tap_range(id0, g.k[0], g.d[0], g.in[0], kd_lo, kd_hi);
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
template <class T, bool kMax>
__device__ __forceinline__ void load_part(Vector<T> (&v)[kStageBatch], const StagePart& part, const T* in,
                                          const TilePlan& tp, const Band& band, const Tile& tile) {
  constexpr int V = kVec<T>;
  const T fill = static_cast<T>(pool_identity<acc_t<T>, kMax>());
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
template <class T, bool kMax>
__device__ void pool_tile(T* out, const T* smem, const PoolGeometry& g, const TilePlan& tp, const Band& band,
                          const Tile& tile, const Walk& first) {
  using A = acc_t<T>;
  const int k1 = static_cast<int>(g.k[1]), k2 = static_cast<int>(g.k[2]), slot_size = tp.rows * tp.pitch;
  const int groups = tp.tile_w / kStrip, strip_step = groups * tp.col_step;
  T* dst = out + tile.dst;
  for (Walk w = first; w.row < tp.tile_h; w.step()) {
    if (w.row >= band.rows_valid || w.col >= band.cols_valid) continue;  // the last band or column tile is partial
    const T* x = smem + w.row * tp.row_step + w.col * tp.col_step + band.shift;
    A acc[kStrip];
#pragma unroll
    for (int u = 0; u < kStrip; ++u) acc[u] = pool_identity<A, kMax>();
    for (int j = 0; j < tile.kd_n; ++j, x += slot_size) {
      const T* xh = x;
      for (int kh = 0; kh < k1; ++kh, xh += tp.kh_step)
        for (int kw = 0; kw < k2; ++kw) {
          const T* xt = xh + kw * tp.kw_step;
#pragma unroll
          for (int u = 0; u < kStrip; ++u) acc[u] = pool_combine<A, kMax>(acc[u], static_cast<A>(xt[u * strip_step]));
        }
    }
    // The divisor's depth and height part (plan_tiles keeps the sizes in int).
    A outer = 1;
    if (!kMax && !g.divisor_override)
      outer = static_cast<A>(tile_extent(static_cast<int>(tile.od), g, 0) *
                             tile_extent(static_cast<int>(band.oh0) + w.row, g, 1));
#pragma unroll
    for (int u = 0; u < kStrip; ++u) {
      const int c = w.col + u * groups;
      if (c >= band.cols_valid) break;
      A v = acc[u];
      if constexpr (!kMax) {
        if (g.divisor_override) v = v / static_cast<A>(g.divisor_override);
        else v = v / (outer * static_cast<A>(tile_extent(static_cast<int>(band.ow0) + c, g, 2)));
      }
      dst[w.row * g.out[2] + c] = static_cast<T>(v);
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
template <class T, bool kMax>
static __global__ void __launch_bounds__(kPoolThreads, kPoolMinBlocks)
    tiled_pool_kernel(T* out, const T* in, PoolGeometry g, TilePlan tp) {
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
    load_part<T, kMax>(pending, part, in, tp, band, tile);
    for (;;) {
      __syncthreads();  // the last tile's outputs are done reading the staged input
      store_part<T>(smem, pending, part, tile);
      __syncthreads();
      const int64_t next = slice + gridDim.x;
      Tile next_tile = tile;
      if (next < tp.slices) {
        next_tile = locate_tile(g, band, next);
        load_part<T, kMax>(pending, part, in, tp, band, next_tile);
      }
      pool_tile<T, kMax>(out, smem, g, tp, band, tile, items);
      if (next >= tp.slices) break;
      slice = next;
      tile = next_tile;
    }
  }
}

// ---- direct kernels: one output per thread

// The average of `sum` over the window at (od, oh, ow), divided as the CPU does.
template <class A>
__device__ __forceinline__ A pool_average(A sum, const PoolGeometry& g, int64_t od, int64_t oh, int64_t ow) {
  if (g.divisor_override) return sum / static_cast<A>(g.divisor_override);
  const bool pad = g.count_include_pad;
  const A outer = static_cast<A>(avg_extent(od, g.k[0], g.s[0], g.p[0], g.in[0], pad) *
                                 avg_extent(oh, g.k[1], g.s[1], g.p[1], g.in[1], pad));
  return sum / (outer * static_cast<A>(avg_extent(ow, g.k[2], g.s[2], g.p[2], g.in[2], pad)));
}

// Windows too large to stage: each output reads its window, clipped to the input once.
template <class T, bool kMax>
static __global__ void direct_pool_kernel(T* out, const T* in, PoolGeometry g, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ow = i % g.out[2], oh = i / g.out[2] % g.out[1], od = i / (g.out[2] * g.out[1]) % g.out[0];
    const int64_t plane = i / (g.out[2] * g.out[1] * g.out[0]);
    const int64_t ds = od * g.s[0] - g.p[0], hs = oh * g.s[1] - g.p[1], ws = ow * g.s[2] - g.p[2];
    int64_t kd_lo, kd_hi, kh_lo, kh_hi, kw_lo, kw_hi;
    tap_range(ds, g.k[0], g.d[0], g.in[0], kd_lo, kd_hi);
    tap_range(hs, g.k[1], g.d[1], g.in[1], kh_lo, kh_hi);
    tap_range(ws, g.k[2], g.d[2], g.in[2], kw_lo, kw_hi);
    const T* src = in + plane * g.in[0] * g.in[1] * g.in[2];
    A acc = pool_identity<A, kMax>();
    for (int64_t kd = kd_lo; kd < kd_hi; ++kd)
      for (int64_t kh = kh_lo; kh < kh_hi; ++kh) {
        const T* row = src + ((ds + kd * g.d[0]) * g.in[1] + hs + kh * g.d[1]) * g.in[2] + ws;
        for (int64_t kw = kw_lo; kw < kw_hi; ++kw) acc = pool_combine<A, kMax>(acc, static_cast<A>(row[kw * g.d[2]]));
      }
    if constexpr (!kMax) acc = pool_average(acc, g, od, oh, ow);
    out[i] = static_cast<T>(acc);
  }
}

// Output cell o of n over an input of `in`: [floor(o * in / n), ceil((o + 1) * in / n)).
__device__ __forceinline__ int64_t adaptive_start(int64_t o, int64_t in, int64_t n) { return o * in / n; }
__device__ __forceinline__ int64_t adaptive_end(int64_t o, int64_t in, int64_t n) { return ((o + 1) * in + n - 1) / n; }

// Sums each cell column by column, each column down its rows: the CPU's order.
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

// Output-sized spatial dims padded to three, as on the CPU (cpu/window.h).
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

template <class T, bool kMax>
void launch_pool(T* out, const T* in, const PoolGeometry& g, int64_t planes, int device, hipStream_t stream) {
  TilePlan tp;
  // Output planes smaller than a block's threads leave a tile mostly idle: one output per thread serves them better.
  if (g.out[1] * g.out[2] >= kPoolThreads && plan_tiles(g, planes, sizeof(T), tp)) {
    tp.vec_ok = tp.vec_ok && aligned(in, sizeof(Vector<T>));
    // kPoolThreads threads: with fewer, one batch each would not stage a whole tile.
    const int64_t resident = int64_t{compute_units(device)} * kPoolMinBlocks;
    const int64_t y = std::min<int64_t>(tp.bands * tp.col_tiles, 65535);
    const int64_t x = std::clamp<int64_t>(resident / y, 1, std::min<int64_t>(tp.slices, int64_t{1} << 20));
    const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(y));
    tiled_pool_kernel<T, kMax><<<grid, kPoolThreads, 0, stream>>>(out, in, g, tp);
  } else {
    const int64_t n = planes * g.out[0] * g.out[1] * g.out[2];
    direct_pool_kernel<T, kMax><<<grid_for(n), kThreads, 0, stream>>>(out, in, g, n);
  }
}

std::string describe(const OpCall& call) {
  const PoolAttrs& a = call.attr<PoolAttrs>();
  std::string s = "input " + detail::to_piece(call.inputs[0].shape()) + ", output " +
                  detail::to_piece(call.out().shape());
  if (!a.kernel_size.empty())
    s += ", kernel_size " + detail::to_piece(Shape(a.kernel_size)) + ", stride " + detail::to_piece(Shape(a.stride)) +
         ", padding " + detail::to_piece(Shape(a.padding)) + ", dilation " + detail::to_piece(Shape(a.dilation));
  return s + " (" + dtype_name(call.out().dtype()) + ")";
}

template <bool kMax> void sliding_pool_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor& x = call.inputs[0];
  Tensor& out = call.out();
  if (out.numel() == 0) return;
  const PoolGeometry g = make_geometry(x.shape(), out.shape(), call.attr<PoolAttrs>());
  const int64_t planes = x.shape()[0] * x.shape()[1];
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>)
      launch_pool<T, kMax>(out.data<T>(), x.data<T>(), g, planes, device, current_stream(device));
  });
  check_launch(op_name(call.op), describe(call));
}

void adaptive_avg_pool2d_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor& x = call.inputs[0];
  Tensor& out = call.out();
  const int64_t n = out.numel();
  if (n == 0) return;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      adaptive_avg_pool_kernel<T><<<grid_for(n), kThreads, 0, current_stream(device)>>>(
          out.data<T>(), x.data<T>(), x.shape()[2], x.shape()[3], out.shape()[2], out.shape()[3], n);
    }
  });
  check_launch(op_name(call.op), describe(call));
}

PF_REGISTER_KERNEL(max_pool2d, ROCm, &sliding_pool_entry<true>);
PF_REGISTER_KERNEL(max_pool3d, ROCm, &sliding_pool_entry<true>);
PF_REGISTER_KERNEL(avg_pool2d, ROCm, &sliding_pool_entry<false>);
PF_REGISTER_KERNEL(avg_pool3d, ROCm, &sliding_pool_entry<false>);
PF_REGISTER_KERNEL(adaptive_avg_pool2d, ROCm, &adaptive_avg_pool2d_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
