// GPU sort and nonzero, with the CPU's semantics (src/cpu/sort.cpp).
//
// sort: the contiguous input is viewed as [outer, n, inner]; row r = (o, j)
// holds the n elements at o * n * inner + j + i * inner. Every row is sorted
// as (key, index) pairs under kernels/sort_order.h's order, which breaks ties
// by index: a total order, so the bitonic network (not stable by itself)
// gives the stable result, the same as the CPU's. A row is padded to P, the
// next power of two; padding elements carry indices >= n and sort after every
// real element, so the first n positions hold the row sorted.
//
//   P <= kTile: one block per row sorts it in shared memory and writes it.
//   P >  kTile: the padded rows live in scratch arrays [rows, P]. Each tile
//     of kTile elements is first sorted in shared memory (the network's
//     stages k <= kTile); each later stage k runs its steps j >= kTile as one
//     launch over all pairs (partners in other tiles) and its steps j < kTile
//     in shared memory, a block per tile; a last pass copies the first n of
//     each row out.
//
// In the network, at stage k and step j, position i (bit j clear) and i + j
// are put in ascending order where bit k of i is clear, descending where it
// is set; after stage k every run of k positions is sorted, alternately up
// and down, and after stage P the row is sorted ascending. Only
// __syncthreads orders the steps, so warp size plays no part.
//
// nonzero: one thread per element; an element whose running count (cumsum's
// scan, made by the op layer) steps up writes its coordinates at that row.

#include <algorithm>

#include "core/dispatch.h"
#include "kernels/sort_order.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int64_t kTile = 2048;       // elements sorted in shared memory (16 KiB of indices)
constexpr int64_t kSmallTile = 256;   // rows this short use a smaller block footprint
constexpr int kSortThreads = 256;
constexpr int64_t kMaxGrid = int64_t{1} << 20;

// Where element i of row r is: rows are (o, j) of [outer, n, inner].
struct RowLayout {
  int64_t n, inner;
  __device__ int64_t at(int64_t r, int64_t i) const { return (r / inner) * n * inner + r % inner + i * inner; }
};

// The sorted-row order with padding: indices >= n sort last, among themselves by index.
template <class T> __device__ bool before(T a, int64_t ia, T b, int64_t ib, int64_t n, bool descending) {
  const bool pad_a = ia >= n, pad_b = ib >= n;
  if (pad_a || pad_b) return pad_a && pad_b ? ia < ib : pad_b;
  return kernels::sorts_before(a, ia, b, ib, descending);
}

// Positions i and i + j (bit j of i clear) in the order of stage k; `row_pos`
// is the row position of keys[0] (bit k of the row position picks the direction).
template <class T>
__device__ void compare_exchange(T* keys, int64_t* idx, int64_t i, int64_t j, int64_t k, int64_t row_pos, int64_t n,
                                 bool descending) {
  const int64_t p = i + j;
  const bool ascending = ((row_pos + i) & k) == 0;
  if (before(keys[p], idx[p], keys[i], idx[i], n, descending) == ascending) {
    const T tk = keys[i];
    keys[i] = keys[p];
    keys[p] = tk;
    const int64_t ti = idx[i];
    idx[i] = idx[p];
    idx[p] = ti;
  }
}

// The i-th of the len/2 pairs of step j: i with a zero bit inserted at j.
__device__ int64_t pair_low(int64_t q, int64_t j) { return ((q & ~(j - 1)) << 1) | (q & (j - 1)); }

// The network's steps on `len` elements (a power of two) in shared memory:
// stages k_first..k_last, stage k_first from step j_first, the others from k/2.
template <class T>
__device__ void bitonic_in_shared(T* keys, int64_t* idx, int64_t len, int64_t row_pos, int64_t k_first,
                                  int64_t k_last, int64_t j_first, int64_t n, bool descending) {
  for (int64_t k = k_first; k <= k_last; k <<= 1)
    for (int64_t j = k == k_first ? j_first : k >> 1; j >= 1; j >>= 1) {
      for (int64_t q = threadIdx.x; q < len / 2; q += blockDim.x)
        compare_exchange(keys, idx, pair_low(q, j), j, k, row_pos, n, descending);
      __syncthreads();
    }
}

// Rows of P <= kCap padded elements: each block sorts whole rows in shared memory.
template <class T, int64_t kCap>
static __global__ void sort_rows_in_shared(const T* x, T* values, int64_t* indices, int64_t rows, RowLayout l,
                                           int64_t len, bool descending) {
  __shared__ int64_t idx[kCap];
  __shared__ int64_t key_words[(kCap * sizeof(T) + 7) / 8];  // raw: Half and BFloat16 have constructors
  T* keys = reinterpret_cast<T*>(key_words);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      idx[i] = i;
      keys[i] = i < l.n ? x[l.at(r, i)] : T();
    }
    __syncthreads();
    bitonic_in_shared(keys, idx, len, 0, 2, len, 1, l.n, descending);
    for (int64_t i = threadIdx.x; i < l.n; i += blockDim.x) {
      values[l.at(r, i)] = keys[i];
      indices[l.at(r, i)] = idx[i];
    }
    __syncthreads();  // before the next row overwrites the arrays
  }
}

// Long rows, the tiles of kTile elements of the padded rows [rows, P]:
// from_input: load the tile from x (indices = positions) and run stages 2..kTile;
// else load it from the scratch arrays and run stage k's steps below kTile.
template <class T>
static __global__ void sort_tiles(const T* x, T* skeys, int64_t* sidx, int64_t rows, RowLayout l, int64_t P,
                                  bool from_input, int64_t k, bool descending) {
  __shared__ int64_t idx[kTile];
  __shared__ int64_t key_words[(kTile * sizeof(T) + 7) / 8];
  T* keys = reinterpret_cast<T*>(key_words);
  const int64_t tiles_per_row = P / kTile, tiles = rows * tiles_per_row;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r = t / tiles_per_row, base = (t % tiles_per_row) * kTile;
    T* row_keys = skeys + r * P + base;
    int64_t* row_idx = sidx + r * P + base;
    for (int64_t i = threadIdx.x; i < kTile; i += blockDim.x) {
      if (from_input) {
        const int64_t pos = base + i;
        idx[i] = pos;
        keys[i] = pos < l.n ? x[l.at(r, pos)] : T();
      } else {
        idx[i] = row_idx[i];
        keys[i] = row_keys[i];
      }
    }
    __syncthreads();
    if (from_input) bitonic_in_shared(keys, idx, kTile, base, 2, kTile, 1, l.n, descending);
    else bitonic_in_shared(keys, idx, kTile, base, k, k, kTile / 2, l.n, descending);
    for (int64_t i = threadIdx.x; i < kTile; i += blockDim.x) {
      row_keys[i] = keys[i];
      row_idx[i] = idx[i];
    }
    __syncthreads();
  }
}

// One step (k, j >= kTile) of the network over every pair of every padded row.
template <class T>
static __global__ void bitonic_step(T* skeys, int64_t* sidx, int64_t rows, int64_t P, int64_t k, int64_t j, int64_t n,
                                    bool descending) {
  const int64_t half = P / 2, pairs = rows * half;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < pairs;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = t / half;
    compare_exchange(skeys + r * P, sidx + r * P, pair_low(t % half, j), j, k, 0, n, descending);
  }
}

// The first n of each padded row (the real elements, sorted) to the outputs.
template <class T>
static __global__ void write_rows(const T* skeys, const int64_t* sidx, T* values, int64_t* indices, int64_t rows,
                                  RowLayout l, int64_t P) {
  const int64_t total = rows * l.n;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / l.n, i = e % l.n;
    values[l.at(r, i)] = skeys[r * P + i];
    indices[l.at(r, i)] = sidx[r * P + i];
  }
}

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

unsigned blocks_for(int64_t work) { return static_cast<unsigned>(std::min(work, kMaxGrid)); }

template <class T>
void launch_sort(const T* x, T* values, int64_t* indices, int64_t rows, RowLayout l, bool descending, Device dev) {
  const hipStream_t stream = current_stream(dev.index);
  const int64_t P = next_pow2(l.n);
  if (P <= kTile) {
    const int threads = static_cast<int>(std::clamp<int64_t>(P / 2, 64, kSortThreads));
    if (P <= kSmallTile)
      sort_rows_in_shared<T, kSmallTile><<<blocks_for(rows), threads, 0, stream>>>(x, values, indices, rows, l, P,
                                                                                     descending);
    else
      sort_rows_in_shared<T, kTile><<<blocks_for(rows), threads, 0, stream>>>(x, values, indices, rows, l, P,
                                                                                descending);
    HIP_CHECK(hipGetLastError());
    return;
  }
  Tensor scratch_keys = Tensor::empty({rows * P}, dtype_of<T>(), dev);
  Tensor scratch_idx = Tensor::empty({rows * P}, DType::Int64, dev);
  T* skeys = scratch_keys.data<T>();
  int64_t* sidx = scratch_idx.data<int64_t>();
  const unsigned tile_blocks = blocks_for(rows * (P / kTile));
  sort_tiles<T><<<tile_blocks, kSortThreads, 0, stream>>>(x, skeys, sidx, rows, l, P, true, 0, descending);
  HIP_CHECK(hipGetLastError());
  for (int64_t k = 2 * kTile; k <= P; k <<= 1) {
    for (int64_t j = k / 2; j >= kTile; j >>= 1) {
      bitonic_step<T><<<grid_for(rows * (P / 2)), kThreads, 0, stream>>>(skeys, sidx, rows, P, k, j, l.n, descending);
      HIP_CHECK(hipGetLastError());
    }
    sort_tiles<T><<<tile_blocks, kSortThreads, 0, stream>>>(x, skeys, sidx, rows, l, P, false, k, descending);
    HIP_CHECK(hipGetLastError());
  }
  write_rows<T><<<grid_for(rows * l.n), kThreads, 0, stream>>>(skeys, sidx, values, indices, rows, l, P);
  HIP_CHECK(hipGetLastError());
}

void sort_entry(OpCall& call) {
  Tensor &values = call.outputs[0], &indices = call.outputs[1];
  DeviceGuard guard(values.device().index);
  const Tensor& x = call.inputs[0];
  const SortAttrs& a = call.attr<SortAttrs>();
  const int64_t d = a.dim, n = x.shape()[d];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.shape()[i];
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  if (x.numel() == 0) return;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_sort<T>(x.data<T>(), values.data<T>(), indices.data<int64_t>(), outer * inner, RowLayout{n, inner},
                   a.descending, values.device());
  });
  check_launch("sort", "shape " + detail::to_piece(x.shape()) + " along dim " + std::to_string(d) + " (" +
                           dtype_name(x.dtype()) + ")");
}

struct Dims {
  int ndim;
  int64_t sizes[kMaxDims];
};

static __global__ void nonzero_kernel(int64_t* out, const int64_t* counts, int64_t numel, Dims dims) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < numel;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = counts[e];
    if (c == (e ? counts[e - 1] : 0)) continue;
    int64_t* row = out + (c - 1) * dims.ndim;
    int64_t rest = e;
    for (int k = dims.ndim - 1; k >= 0; --k) {
      row[k] = rest % dims.sizes[k];
      rest /= dims.sizes[k];
    }
  }
}

void nonzero_entry(OpCall& call) {
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  const Tensor& counts = call.inputs[0];
  PF_CHECK(counts.dim() <= kMaxDims, NotSupportedError, "nonzero: tensors of more than ", kMaxDims,
           " dimensions are not supported on the GPU (shape ", counts.shape(), "); run it on the CPU");
  Dims dims{static_cast<int>(counts.dim()), {}};
  for (int k = 0; k < dims.ndim; ++k) dims.sizes[k] = counts.shape()[k];
  const int64_t numel = counts.numel();
  nonzero_kernel<<<grid_for(numel), kThreads, 0, current_stream(out.device().index)>>>(
      out.data<int64_t>(), counts.data<int64_t>(), numel, dims);
  check_launch("nonzero", "shape " + detail::to_piece(counts.shape()));
}

PF_REGISTER_KERNEL(sort, ROCm, &sort_entry);
PF_REGISTER_KERNEL(nonzero, ROCm, &nonzero_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
