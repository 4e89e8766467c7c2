// GPU reductions (sum, mean, max, min, prod over any dims) and arg
// reductions (argmax, argmin), with the CPU's reduction functors.
//
// Reductions see the (contiguous) input as [outer, len, inner] with the
// reduced dims in the middle; reduced dims that are not adjacent are first
// moved innermost by a copy. Two kernels, chosen by the layout:
//   inner == 1 (rows): one warp per row segment, vectorised 16-byte loads,
//     the lanes combined by shuffles (block_reduce.h: wave64 and wave32 alike);
//   inner > 1 (columns): threads across `inner` read coalesced, slices of
//     `len` per thread row, combined in shared memory.
// Either kernel may split `len` into segments so that the GPU has enough
// independent work (one row of 67M elements, a few long columns); then it
// writes accumulator partials, and a second launch of the same kernels
// reduces those and applies the functor's finish (mean's division).
// Arg reductions keep one block per row: a shared-memory tree of (value, index).

#include <algorithm>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/block_reduce.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

// A power of two, for the arg-reduction tree.
constexpr int kReduceThreads = 256;
// Independent work items to aim for: enough warps to fill every compute unit of a large GPU.
constexpr int64_t kTargetItems = 16384;

// Accumulator on the GPU: float for the 16- and 32-bit floats (as PyTorch),
// int64 for integer sums and products (the op layer widened the dtype), else
// the compute type.
template <template <class> class R, class T> struct GpuAccum { using type = acc_t<T>; };
template <class T> struct GpuAccumWide { using type = std::conditional_t<is_float_v<T>, acc_t<T>, int64_t>; };
template <class T> struct GpuAccum<kernels::SumReduce, T> : GpuAccumWide<T> {};
template <class T> struct GpuAccum<kernels::MeanReduce, T> : GpuAccumWide<T> {};
template <class T> struct GpuAccum<kernels::ProdReduce, T> : GpuAccumWide<T> {};

// out[item] for item = row * segments + segment: the reduction of the
// segment's elements of `in` (rows x len, contiguous). `finish` applies the
// functor's finish over `count` elements (the last pass); else out holds
// accumulator partials. V > 1: every row start is V-aligned (len % V == 0).
template <int V, class O, class I, class A, class R>
static __global__ void reduce_row_segments(O* out, const I* in, int64_t rows, int64_t len, int64_t segments,
                                           int64_t seg_len, bool finish, int64_t count, R r) {
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t warps_per_block = blockDim.x / PF_WARP_SIZE;
  const int64_t items = rows * segments;
  for (int64_t item = blockIdx.x * warps_per_block + threadIdx.x / PF_WARP_SIZE; item < items;
       item += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const int64_t row = item / segments, seg = item % segments;
    const int64_t begin = seg * seg_len, end = std::min(len, begin + seg_len);
    const I* src = in + row * len;
    A acc = R::identity();
    if constexpr (V > 1) {
      const Vec<I, V>* vsrc = reinterpret_cast<const Vec<I, V>*>(src);
      for (int64_t i = begin / V + lane; i < end / V; i += PF_WARP_SIZE) {
        Vec<I, V> x = vsrc[i];
        for (int k = 0; k < V; ++k) acc = r(acc, static_cast<A>(x.v[k]));
      }
    } else {
      for (int64_t i = begin + lane; i < end; i += PF_WARP_SIZE) acc = r(acc, static_cast<A>(src[i]));
    }
    acc = warp_all_reduce(acc, r);
    if (lane == 0) out[item] = finish ? static_cast<O>(r.finish(acc, count)) : static_cast<O>(acc);
  }
}

constexpr int kColumnLanes = 32;   // threads across `inner` (coalesced)
constexpr int kColumnSlices = 8;   // thread rows, each over its slice of `len`

// out[(split * outer + o) * inner + j]: the reduction over split `split` of the
// `len` dim of in[o, :, j] (outer x len x inner, contiguous).
template <class O, class I, class A, class R>
static __global__ void reduce_columns(O* out, const I* in, int64_t outer, int64_t len, int64_t inner,
                                      int64_t split_len, bool finish, int64_t count, R r) {
  __shared__ A partial[kColumnSlices][kColumnLanes];
  const int64_t j = blockIdx.x * static_cast<int64_t>(kColumnLanes) + threadIdx.x;
  const int64_t split = blockIdx.z;
  const int64_t begin = split * split_len, end = std::min(len, begin + split_len);
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    A acc = R::identity();
    if (j < inner) {
      const I* src = in + o * len * inner + j;
      for (int64_t i = begin + threadIdx.y; i < end; i += kColumnSlices) acc = r(acc, static_cast<A>(src[i * inner]));
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < inner) {
      for (int y = 1; y < kColumnSlices; ++y) acc = r(acc, partial[y][threadIdx.x]);
      O* dst = out + (split * outer + o) * inner + j;
      *dst = finish ? static_cast<O>(r.finish(acc, count)) : static_cast<O>(acc);
    }
    __syncthreads();
  }
}

// Reduces the middle dim of [outer, len, inner] (contiguous, element type I)
// into `out` (outer x inner, type O), over `count` original elements per output.
// Partials live in tensors freed when this returns: the allocator hands their
// memory out again only in the stream's order, after the kernels that read them.
template <class O, class I, class A, class R>
void launch_reduce(O* out, const I* in, int64_t outer, int64_t len, int64_t inner, int64_t count, hipStream_t stream,
                   Device device) {
  const R r;
  if (inner == 1) {
    // Segments of at least 4096 elements, enough of them to fill the GPU, and
    // at most 4096 per row, so that one more launch reduces the partials (a
    // full sum of 64M floats: 2.80 TB/s in two launches, 2.67 TB/s in three).
    int64_t segments = std::clamp<int64_t>((kTargetItems + outer - 1) / outer, 1,
                                           std::min<int64_t>((len + 4095) / 4096, 4096));
    constexpr int kV = kVec<I>;
    const bool vec = kV > 1 && len % kV == 0 && aligned(in, 16);
    int64_t seg_len = (len + segments - 1) / segments;
    if (vec) seg_len = (seg_len + kV - 1) / kV * kV;
    segments = (len + seg_len - 1) / std::max<int64_t>(seg_len, 1);
    if (segments < 1) segments = 1;
    const int64_t items = outer * segments;
    const int64_t warps_per_block = 256 / warp_size(device.index);
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>((items + warps_per_block - 1) / warps_per_block, 1 << 20));
    auto run = [&](auto* dst, bool finish) {
      if (vec)
        reduce_row_segments<kV, std::remove_pointer_t<decltype(dst)>, I, A><<<blocks, 256, 0, stream>>>(
            dst, in, outer, len, segments, seg_len, finish, count, r);
      else
        reduce_row_segments<1, std::remove_pointer_t<decltype(dst)>, I, A><<<blocks, 256, 0, stream>>>(
            dst, in, outer, len, segments, seg_len, finish, count, r);
    };
    if (segments == 1) return run(out, true);
    Tensor partials = Tensor::empty({outer * segments}, dtype_of<A>(), device);
    run(partials.data<A>(), false);
    launch_reduce<O, A, A, R>(out, partials.data<A>(), outer, segments, 1, count, stream, device);
    return;
  }
  // Columns: split `len` when outer x inner alone gives too few threads.
  const int64_t threads = outer * inner * kColumnSlices;
  int64_t splits = std::clamp<int64_t>((kTargetItems * 16 + threads - 1) / threads, 1, std::max<int64_t>(len / 64, 1));
  splits = std::min<int64_t>(splits, 65535);
  const int64_t split_len = (len + splits - 1) / splits;
  splits = (len + split_len - 1) / std::max<int64_t>(split_len, 1);
  if (splits < 1) splits = 1;
  dim3 block(kColumnLanes, kColumnSlices);
  dim3 grid(static_cast<unsigned>((inner + kColumnLanes - 1) / kColumnLanes),
            static_cast<unsigned>(std::min<int64_t>(outer, 65535)), static_cast<unsigned>(splits));
  if (splits == 1) {
    reduce_columns<O, I, A><<<grid, block, 0, stream>>>(out, in, outer, len, inner, split_len, true, count, r);
    return;
  }
  Tensor partials = Tensor::empty({splits * outer * inner}, dtype_of<A>(), device);
  reduce_columns<A, I, A><<<grid, block, 0, stream>>>(partials.data<A>(), in, outer, len, inner, split_len, false,
                                                      count, r);
  // The partials are [splits, outer * inner]: reduce their leading dim.
  launch_reduce<O, A, A, R>(out, partials.data<A>(), 1, splits, outer * inner, count, stream, device);
}

template <class T, class R>
static __global__ void arg_reduce_rows(int64_t* out, const T* in, int64_t rows, int64_t len, R r) {
  using A = acc_t<T>;
  __shared__ A best[kReduceThreads];
  __shared__ int64_t index[kReduceThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* src = in + row * len;
    A b = static_cast<A>(src[0]);
    int64_t bi = 0;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      A v = static_cast<A>(src[i]);
      if (i == threadIdx.x || r.better(v, b)) b = v, bi = i;  // a thread's first element seeds it
    }
    best[threadIdx.x] = b;
    index[threadIdx.x] = threadIdx.x < len ? bi : len;  // threads past the row hold nothing
    __syncthreads();
    for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) {
        int other = threadIdx.x + s;
        A va = best[threadIdx.x], vb = best[other];
        int64_t ia = index[threadIdx.x], ib = index[other];
        // The better value wins; equal ones (or both NaN) go to the first index.
        bool take_b = ib < len && (ia >= len || r.better(vb, va) || (!r.better(va, vb) && ib < ia));
        if (take_b) best[threadIdx.x] = vb, index[threadIdx.x] = ib;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = index[0];
    __syncthreads();
  }
}

unsigned row_grid(int64_t rows) { return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 16)); }

// x as rows of the reduced dims: [kept..., reduced...], contiguous on the device.
Tensor as_rows(const Tensor& x, const std::vector<int64_t>& dims, int64_t& len) {
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) order.push_back(d);
  len = 1;
  for (int64_t d : dims) order.push_back(d), len *= x.shape()[d];
  return x.permute(order).contiguous();
}

template <template <class> class R> void reduce_entry(OpCall& call) {
  int device = call.out().device().index;
  DeviceGuard guard(device);
  const std::vector<int64_t>& dims = call.attr<ReduceAttrs>().dims;
  Tensor x = call.inputs[0];
  int64_t outer = 1, len = 1, inner = 1;
  const bool adjacent = dims.empty() || dims.back() - dims.front() + 1 == static_cast<int64_t>(dims.size());
  if (adjacent) {
    x = x.contiguous();
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (!dims.empty() && d < dims.front()) outer *= x.shape()[d];
      else if (!dims.empty() && d <= dims.back()) len *= x.shape()[d];
      else inner *= x.shape()[d];
    }
    if (dims.empty()) outer = inner, inner = 1;  // a 0-d input: nothing reduced
  } else {
    x = as_rows(x, dims, len);
    outer = len > 0 ? x.numel() / len : 0;
  }
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = typename GpuAccum<R, T>::type;
    launch_reduce<T, T, A, R<A>>(call.out().data<T>(), x.data<T>(), outer, len, inner, len, current_stream(device),
                                 call.out().device());
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(call.inputs[0].shape()) + " over dims " +
                                     detail::to_piece(dims) + " (" + dtype_name(x.dtype()) + ")");
}

template <template <class> class R> void arg_reduce_entry(OpCall& call) {
  int device = call.out().device().index;
  DeviceGuard guard(device);
  const std::vector<int64_t>& dims = call.attr<ReduceAttrs>().dims;
  const int64_t d = dims.empty() ? 0 : dims[0];  // empty: the input was flattened
  int64_t len = 0;
  Tensor rows = as_rows(call.inputs[0], {d}, len);
  const int64_t n_rows = call.out().numel();
  visit_dtype(rows.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      arg_reduce_rows<T><<<row_grid(n_rows), kReduceThreads, 0, current_stream(device)>>>(
          call.out().data<int64_t>(), rows.data<T>(), n_rows, len, R<acc_t<T>>());
    }
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(call.inputs[0].shape()) + " over dim " +
                                     std::to_string(d) + " (" + dtype_name(rows.dtype()) + ")");
}

#define PF_FAMILY_REDUCE(name, F) PF_REGISTER_KERNEL(name, ROCm, &reduce_entry<kernels::F>);
#define PF_FAMILY_ARG_REDUCE(name, F) PF_REGISTER_KERNEL(name, ROCm, &arg_reduce_entry<kernels::F>);
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::backend::rocm
