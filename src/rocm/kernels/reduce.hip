// GPU reductions (sum, mean, max, min, prod over any dims) and arg
// reductions (argmax, argmin), with the CPU's reduction functors. The input
// is viewed as rows: [kept dims..., reduced dims...] made contiguous (a copy
// kernel when the reduced dims are not already innermost), then one block
// reduces each row: threads stride over it, then a shared-memory tree
// combines the threads' partials. The tree uses no warp shuffles, so it is
// the same on wave64 and wave32 hardware.

#include <algorithm>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

// A power of two, for the tree.
constexpr int kReduceThreads = 256;

// Accumulator on the GPU: float for the 16- and 32-bit floats (as PyTorch),
// int64 for integer sums and products (the op layer widened the dtype), else
// the compute type.
template <template <class> class R, class T> struct GpuAccum { using type = acc_t<T>; };
template <class T> struct GpuAccumWide { using type = std::conditional_t<is_float_v<T>, acc_t<T>, int64_t>; };
template <class T> struct GpuAccum<kernels::SumReduce, T> : GpuAccumWide<T> {};
template <class T> struct GpuAccum<kernels::MeanReduce, T> : GpuAccumWide<T> {};
template <class T> struct GpuAccum<kernels::ProdReduce, T> : GpuAccumWide<T> {};

template <class T, class A, class R>
static __global__ void reduce_rows(T* out, const T* in, int64_t rows, int64_t len, R r) {
  __shared__ A partial[kReduceThreads];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* src = in + row * len;
    A acc = R::identity();
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) acc = r(acc, static_cast<A>(src[i]));
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kReduceThreads / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) partial[threadIdx.x] = r(partial[threadIdx.x], partial[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) out[row] = static_cast<T>(r.finish(partial[0], len));
    __syncthreads();
  }
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
  int device = call.out.device().index;
  DeviceGuard guard(device);
  int64_t len = 0;
  Tensor rows = as_rows(call.inputs[0], call.attrs.dims, len);
  const int64_t n_rows = call.out.numel();
  visit_dtype(rows.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = typename GpuAccum<R, T>::type;
    reduce_rows<T, A><<<row_grid(n_rows), kReduceThreads, 0, current_stream(device)>>>(
        call.out.data<T>(), rows.data<T>(), n_rows, len, R<A>());
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(call.inputs[0].shape()) + " over dims " +
                                     detail::to_piece(call.attrs.dims) + " (" + dtype_name(rows.dtype()) + ")");
}

template <template <class> class R> void arg_reduce_entry(OpCall& call) {
  int device = call.out.device().index;
  DeviceGuard guard(device);
  int64_t len = 0;
  Tensor rows = as_rows(call.inputs[0], {call.attrs.dim}, len);
  const int64_t n_rows = call.out.numel();
  visit_dtype(rows.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, bool>) {
      arg_reduce_rows<T><<<row_grid(n_rows), kReduceThreads, 0, current_stream(device)>>>(
          call.out.data<int64_t>(), rows.data<T>(), n_rows, len, R<acc_t<T>>());
    }
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(call.inputs[0].shape()) + " over dim " +
                                     std::to_string(call.attrs.dim) + " (" + dtype_name(rows.dtype()) + ")");
}

#define PF_FAMILY_REDUCE(name, F) PF_REGISTER_KERNEL(name, ROCm, &reduce_entry<kernels::F>);
#define PF_FAMILY_ARG_REDUCE(name, F) PF_REGISTER_KERNEL(name, ROCm, &arg_reduce_entry<kernels::F>);
#include "pyflame/for_each_op.inc"

}  // namespace
}  // namespace pyflame::backend::rocm
