// GPU cumsum along one dim, with the CPU's semantics (src/cpu/cumsum.cpp):
// the input, already in the result dtype, is viewed as [outer, n, inner] and
// running sums are kept in double for floats and int64 for integers.
//
// Along contiguous rows (inner == 1) one single-pass scan covers every row,
// long or short: decoupled look-back (Merrill and Garland). The rows are cut
// into tiles (one for a row of up to 4096 elements); a block takes the next
// tile from a counter (so every tile before it is already running: no block
// waits on one that has not started), scans it, publishes its sum, then its first warp
// walks back over the tiles before it in its row, a warp's width at a time,
// adding their sums until it meets one that has published its inclusive
// prefix, and publishes its own. Each element is read once and written once.
//
// Across rows (inner > 1) one thread per (outer, inner) column walks the dim,
// threads side by side along `inner`, so every step reads and writes
// coalesced.

#include <algorithm>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kTileThreads = 256;
constexpr int64_t kChunk = int64_t{kTileThreads} * 4;
// Chunks per tile: rows up to 4096 elements are one tile (no look-back);
// longer rows take tiles of 16384, so fewer tiles wait on each other.
constexpr int kShortChunks = 4, kLongChunks = 16;

template <class T> using scan_acc_t = std::conditional_t<is_float_v<T>, double, int64_t>;

enum TileState : int { kNothing = 0, kSum = 1, kPrefix = 2 };

// What tiles publish for their successors. A value is written before its
// state, with a fence between, so a reader that sees the state sees the value.
template <class A> struct TileBoard {
  int* counter;     // the next tile to take
  int* state;       // per tile: a TileState
  A* sum;           // per tile: the sum of its elements
  A* prefix;        // per tile: the inclusive prefix of its row up to its end
};

template <class A> __device__ void publish(A* slot, int* state, A value, TileState s) {
  *reinterpret_cast<volatile A*>(slot) = value;
  __threadfence();
  atomicExch(state, static_cast<int>(s));
}

// Warp 0: the sum of the row's elements before tile `tile` (its k-th in the
// row, k > 0). Lane l looks at tile `end - l`; the window moves back until a
// lane meets a published prefix (tiles before the row count as a prefix of 0).
template <class A> __device__ A look_back(const TileBoard<A>& board, int64_t tile, int64_t k) {
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t row_first = tile - k;
  A before = A(0);
  for (int64_t end = tile - 1;; end -= PF_WARP_SIZE) {
    const int64_t t = end - lane;
    int s = kPrefix;
    A value = A(0);
    if (t >= row_first) {
      do {
        s = *reinterpret_cast<volatile int*>(board.state + t);
      } while (s == kNothing);
      __threadfence();
      value = *reinterpret_cast<volatile A*>((s == kPrefix ? board.prefix : board.sum) + t);
    }
    const int nearest_prefix = warp_all_reduce(s == kPrefix ? lane : PF_WARP_SIZE, [](int a, int b) { return a < b ? a : b; });
    before += warp_all_reduce(lane <= nearest_prefix ? value : A(0), [](A a, A b) { return a + b; });
    if (nearest_prefix < PF_WARP_SIZE) return before;
  }
}

// A tile is kChunks chunks of kChunk elements; in a chunk, thread t owns the
// four consecutive elements at 4t (one coalesced access per warp). Each chunk
// is scanned across the block as it is loaded, the thread keeping its values
// and the sum of the tile before them; the tile's sum then goes to the
// look-back, and the outputs are written once its prefix is known.
// kVector: rows and pointers aligned for a 4-element access.
template <class T, int kChunks, bool kVector>
static __global__ void scan_rows(T* out, const T* in, int64_t len, int64_t tiles_per_row, TileBoard<scan_acc_t<T>> board) {
  using A = scan_acc_t<T>;
  __shared__ int64_t shared_tile;
  __shared__ A shared_before;
  if (threadIdx.x == 0) shared_tile = atomicAdd(board.counter, 1);
  __syncthreads();
  const int64_t tile = shared_tile;  // the grid has exactly one block per tile
  const int64_t row = tile / tiles_per_row, k = tile % tiles_per_row;
  const T* src = in + row * len;
  T* dst = out + row * len;
  const int64_t tile_first = k * kChunks * kChunk + static_cast<int64_t>(threadIdx.x) * 4;
  Vec<T, 4> x[kChunks];
  A thread_before[kChunks];  // the tile's sum before this thread's elements of chunk c
  A carry = A(0);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t first = tile_first + c * kChunk;
    if (kVector && first + 4 <= len) {
      x[c] = *reinterpret_cast<const Vec<T, 4>*>(src + first);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) x[c].v[j] = first + j < len ? src[first + j] : T(0);
    }
    A local = A(0);
#pragma unroll
    for (int j = 0; j < 4; ++j) local += static_cast<A>(x[c].v[j]);
    A chunk_sum;
    const A inclusive = block_inclusive_scan<kTileThreads>(local, chunk_sum);
    thread_before[c] = carry + inclusive - local;
    carry += chunk_sum;
  }
  if (threadIdx.x < PF_WARP_SIZE) {
    A before = A(0);
    if (k > 0) {
      if (threadIdx.x == 0) publish(board.sum + tile, board.state + tile, carry, kSum);
      before = look_back(board, tile, k);
    }
    if (threadIdx.x == 0) {
      publish(board.prefix + tile, board.state + tile, before + carry, kPrefix);
      shared_before = before;
    }
  }
  __syncthreads();
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int64_t first = tile_first + c * kChunk;
    A running = shared_before + thread_before[c];
    Vec<T, 4> y;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      running += static_cast<A>(x[c].v[j]);
      y.v[j] = static_cast<T>(static_cast<acc_t<T>>(running));
    }
    if (kVector && first + 4 <= len) {
      *reinterpret_cast<Vec<T, 4>*>(dst + first) = y;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (first + j < len) dst[first + j] = y.v[j];
    }
  }
}

// One thread per column (o, j) of [outer, n, inner].
template <class T>
static __global__ void scan_columns(T* out, const T* in, int64_t outer, int64_t n, int64_t inner) {
  using A = scan_acc_t<T>;
  for (int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; col < outer * inner;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = col / inner, j = col % inner;
    const T* src = in + o * n * inner + j;
    T* dst = out + o * n * inner + j;
    A acc = A(0);
    for (int64_t i = 0; i < n; ++i) {
      acc += static_cast<A>(src[i * inner]);
      dst[i * inner] = static_cast<T>(static_cast<acc_t<T>>(acc));
    }
  }
}

template <class T> void launch_scan_rows(T* out, const T* in, int64_t rows, int64_t len, Device dev) {
  using A = scan_acc_t<T>;
  const hipStream_t stream = current_stream(dev.index);
  const int chunks = len <= kShortChunks * kChunk ? kShortChunks : kLongChunks;
  const int64_t tile_len = chunks * kChunk;
  const int64_t tiles_per_row = (len + tile_len - 1) / tile_len, tiles = rows * tiles_per_row;
  PF_CHECK(tiles < (int64_t{1} << 31), NotSupportedError, "cumsum: ", rows, " rows of ", len,
           " elements make more tiles than the GPU scan counts");
  // One buffer: the counter and states (zeroed together), then the sums and prefixes.
  const int64_t header = (1 + tiles) * int64_t{sizeof(int)};
  const int64_t values_at = (header + 15) / 16 * 16;
  Tensor board_memory = Tensor::empty({values_at + 2 * tiles * int64_t{sizeof(A)}}, DType::UInt8, dev);
  char* base = static_cast<char*>(board_memory.data_ptr());
  HIP_CHECK(hipMemsetAsync(base, 0, header, stream));
  const TileBoard<A> board{reinterpret_cast<int*>(base), reinterpret_cast<int*>(base) + 1,
                           reinterpret_cast<A*>(base + values_at), reinterpret_cast<A*>(base + values_at) + tiles};
  const bool vector = len % 4 == 0 && aligned(in, sizeof(T) * 4) && aligned(out, sizeof(T) * 4);
  auto run = [&](auto chunks_tag, auto vector_tag) {
    scan_rows<T, decltype(chunks_tag)::value, decltype(vector_tag)::value>
        <<<static_cast<unsigned>(tiles), kTileThreads, 0, stream>>>(out, in, len, tiles_per_row, board);
  };
  using Short = std::integral_constant<int, kShortChunks>;
  using Long = std::integral_constant<int, kLongChunks>;
  if (chunks == kShortChunks) {
    if (vector) run(Short(), std::true_type());
    else run(Short(), std::false_type());
  } else {
    if (vector) run(Long(), std::true_type());
    else run(Long(), std::false_type());
  }
}

void cumsum_entry(OpCall& call) {
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  const Tensor x = call.inputs[0].contiguous();
  const int64_t d = call.attr<DimAttrs>().dim, n = x.shape()[d];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  if (x.numel() == 0) return;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      if (inner == 1)
        launch_scan_rows<T>(out.data<T>(), x.data<T>(), outer, n, out.device());
      else
        scan_columns<T><<<grid_for(outer * inner), kThreads, 0, current_stream(out.device().index)>>>(
            out.data<T>(), x.data<T>(), outer, n, inner);
    }
  });
  check_launch("cumsum", "shape " + detail::to_piece(x.shape()) + " along dim " + std::to_string(d) + " (" +
                             dtype_name(x.dtype()) + ")");
}

PF_REGISTER_KERNEL(cumsum, ROCm, &cumsum_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
