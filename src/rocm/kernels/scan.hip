// GPU scans along one dim (cumsum, cumprod: kernels/scan.h's combine
// operators), with the CPU's semantics (src/cpu/scan.cpp): the input, already
// in the result dtype, is viewed as [outer, n, inner] and running values are
// kept in double for floats and int64 for integers.
//
// Along contiguous rows (inner == 1) the rows are cut into tiles of 4096
// elements, a block each. A row of one tile is scanned in one pass: read
// once, written once. Longer rows take three steps (reduce, then scan): the
// tiles' totals, the inclusive scan of those totals along each row (the same
// scan, recursively, for rows of more than 4096 tiles), and a pass that scans
// each tile from the total of the tiles before it (the scan of the previous
// tile, so no inverse of the combine is needed). In a tile, thread t owns the
// four consecutive elements at 4t of each 1024-element chunk (one coalesced
// access per warp); chunks are scanned across the block as they are loaded.
// (A single-pass decoupled look-back was slower here on an H100: every tile
// waited on a chain of predecessors; docs/perf.md.)
//
// Across rows (inner > 1) one thread per (outer, inner) column walks the dim,
// threads side by side along `inner`, so every step reads and writes
// coalesced.

#include <algorithm>

#include "core/dispatch.h"
#include "kernels/scan.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

using kernels::scan_acc_t;

constexpr int kTileThreads = 256;
constexpr int kChunks = 4;  // per tile
constexpr int64_t kChunk = int64_t{kTileThreads} * 4;
constexpr int64_t kTile = kChunks * kChunk;

// The four elements of `row` from `first` (`pad` past the row's end).
// kVector: rows and pointers aligned for a 4-element access.
template <class T, bool kVector> __device__ Vec<T, 4> load4(const T* row, int64_t first, int64_t len, T pad) {
  Vec<T, 4> x;
  if (kVector && first + 4 <= len) {
    x = *reinterpret_cast<const Vec<T, 4>*>(row + first);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) x.v[j] = first + j < len ? row[first + j] : pad;
  }
  return x;
}

// totals[tile] = the combination of the tile's elements.
template <class T, template <class> class Op, bool kVector>
static __global__ void tile_totals(scan_acc_t<T>* totals, const T* in, int64_t len, int64_t tiles_per_row) {
  using A = scan_acc_t<T>;
  const Op<A> f;
  const int64_t tile = blockIdx.x, row = tile / tiles_per_row, k = tile % tiles_per_row;
  const T* src = in + row * len;
  const T pad = static_cast<T>(static_cast<acc_t<T>>(Op<A>::identity()));
  A s = Op<A>::identity();
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const Vec<T, 4> x = load4<T, kVector>(src, k * kTile + c * kChunk + threadIdx.x * 4, len, pad);
#pragma unroll
    for (int j = 0; j < 4; ++j) s = f(s, static_cast<A>(x.v[j]));
  }
  s = block_all_reduce<kTileThreads>(s, f);
  if (threadIdx.x == 0) totals[tile] = s;
}

// Scans each tile, starting from the combination of the row's tiles before
// it: inclusive[tile - 1] (null for rows of one tile).
template <class T, template <class> class Op, bool kVector>
static __global__ void scan_tiles(T* out, const T* in, int64_t len, int64_t tiles_per_row,
                                  const scan_acc_t<T>* inclusive) {
  using A = scan_acc_t<T>;
  const Op<A> f;
  const int64_t tile = blockIdx.x, row = tile / tiles_per_row, k = tile % tiles_per_row;
  const T* src = in + row * len;
  T* dst = out + row * len;
  const int64_t first = k * kTile + static_cast<int64_t>(threadIdx.x) * 4;
  const T pad = static_cast<T>(static_cast<acc_t<T>>(Op<A>::identity()));
  Vec<T, 4> x[kChunks];
  A before[kChunks];  // the row's combination before this thread's elements of chunk c
  A carry = k > 0 ? inclusive[tile - 1] : Op<A>::identity();
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    x[c] = load4<T, kVector>(src, first + c * kChunk, len, pad);
    A local = Op<A>::identity();
#pragma unroll
    for (int j = 0; j < 4; ++j) local = f(local, static_cast<A>(x[c].v[j]));
    A exclusive, chunk_total;
    block_scan<kTileThreads>(local, f, Op<A>::identity(), exclusive, chunk_total);
    before[c] = f(carry, exclusive);
    carry = f(carry, chunk_total);
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t at = first + c * kChunk;
    A running = before[c];
    Vec<T, 4> y;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      running = f(running, static_cast<A>(x[c].v[j]));
      y.v[j] = static_cast<T>(static_cast<acc_t<T>>(running));
    }
    if (kVector && at + 4 <= len) {
      *reinterpret_cast<Vec<T, 4>*>(dst + at) = y;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (at + j < len) dst[at + j] = y.v[j];
    }
  }
}

// One thread per column (o, j) of [outer, n, inner].
template <class T, template <class> class Op>
static __global__ void scan_columns(T* out, const T* in, int64_t outer, int64_t n, int64_t inner) {
  using A = scan_acc_t<T>;
  const Op<A> f;
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < outer * inner;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = col / inner, j = col % inner;
    const T* src = in + o * n * inner + j;
    T* dst = out + o * n * inner + j;
    A acc = Op<A>::identity();
    for (int64_t i = 0; i < n; ++i) {
      acc = f(acc, static_cast<A>(src[i * inner]));
      dst[i * inner] = static_cast<T>(static_cast<acc_t<T>>(acc));
    }
  }
}

// out = the inclusive scan of each of `rows` contiguous rows of `len` elements.
template <class T, template <class> class Op>
void launch_scan_rows(T* out, const T* in, int64_t rows, int64_t len, Device dev, const char* op) {
  using A = scan_acc_t<T>;
  const hipStream_t stream = current_stream(dev.index);
  const int64_t tiles_per_row = (len + kTile - 1) / kTile, tiles = rows * tiles_per_row;
  PF_CHECK(tiles < (int64_t{1} << 31), NotSupportedError, op, ": ", rows, " rows of ", len,
           " elements make more tiles than a GPU grid holds");
  const bool vector = len % 4 == 0 && aligned(in, sizeof(T) * 4) && aligned(out, sizeof(T) * 4);
  const unsigned grid = static_cast<unsigned>(tiles);
  Tensor scratch;  // per tile: the totals, then their inclusive scan
  A* inclusive = nullptr;
  if (tiles_per_row > 1) {
    scratch = Tensor::empty({2 * tiles}, dtype_of<A>(), dev);
    A* totals = scratch.data<A>();
    inclusive = totals + tiles;
    if (vector) tile_totals<T, Op, true><<<grid, kTileThreads, 0, stream>>>(totals, in, len, tiles_per_row);
    else tile_totals<T, Op, false><<<grid, kTileThreads, 0, stream>>>(totals, in, len, tiles_per_row);
    HIP_CHECK(hipGetLastError());
    launch_scan_rows<A, Op>(inclusive, totals, rows, tiles_per_row, dev, op);
  }
  if (vector) scan_tiles<T, Op, true><<<grid, kTileThreads, 0, stream>>>(out, in, len, tiles_per_row, inclusive);
  else scan_tiles<T, Op, false><<<grid, kTileThreads, 0, stream>>>(out, in, len, tiles_per_row, inclusive);
  HIP_CHECK(hipGetLastError());
}

template <template <class> class Op> void scan_entry(OpCall& call) {
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  const Tensor x = call.inputs[0].contiguous();
  const char* op = op_name(call.op);
  const int64_t d = call.attr<DimAttrs>().dim, n = x.shape()[d];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  if (x.numel() == 0) return;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      if (inner == 1)
        launch_scan_rows<T, Op>(out.data<T>(), x.data<T>(), outer, n, out.device(), op);
      else
        scan_columns<T, Op><<<grid_for(outer * inner), kThreads, 0, current_stream(out.device().index)>>>(
            out.data<T>(), x.data<T>(), outer, n, inner);
    }
  });
  check_launch(op, "shape " + detail::to_piece(x.shape()) + " along dim " + std::to_string(d) + " (" +
                       dtype_name(x.dtype()) + ")");
}

PF_REGISTER_KERNEL(cumsum, ROCm, &scan_entry<kernels::ScanSum>);
PF_REGISTER_KERNEL(cumprod, ROCm, &scan_entry<kernels::ScanProd>);

}  // namespace
}  // namespace pyflame::backend::rocm
