// GPU softmax and log_softmax over any dim. The input is viewed as rows
// along the softmax dim (made contiguous, dim innermost); one block handles a
// row: the row max and the sum of exp(x - max) are each combined with a
// shared-memory tree (no warp shuffles: the same on wave64 and wave32), then
// the block writes the row. A result computed with dim moved innermost is
// copied back into the output's layout.

#include <algorithm>

#include "core/dispatch.h"
#include "kernels/functors.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kSoftmaxThreads = 256;  // a power of two, for the tree

// Combines every thread's `v` with `f`; all threads get the result.
template <class A, class F> __device__ A block_combine(A v, A* scratch, F f) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int s = kSoftmaxThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) scratch[threadIdx.x] = f(scratch[threadIdx.x], scratch[threadIdx.x + s]);
    __syncthreads();
  }
  A r = scratch[0];
  __syncthreads();
  return r;
}

template <class T, bool kLog> static __global__ void softmax_rows(T* out, const T* in, int64_t rows, int64_t len) {
  using A = acc_t<T>;
  __shared__ A scratch[kSoftmaxThreads];
  const kernels::MaxReduce<A> max_of;
  const kernels::SumReduce<A> sum_of;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = in + row * len;
    T* y = out + row * len;
    A m = kernels::MaxReduce<A>::identity();
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) m = max_of(m, static_cast<A>(x[i]));
    m = block_combine(m, scratch, max_of);
    A s = A(0);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) s += math::exp(static_cast<A>(x[i]) - m);
    s = block_combine(s, scratch, sum_of);
    const A scale = kLog ? math::log(s) : A(1) / s;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      A v = static_cast<A>(x[i]) - m;
      y[i] = static_cast<T>(kLog ? v - scale : math::exp(v) * scale);
    }
  }
}

template <bool kLog> void softmax_entry(OpCall& call) {
  int device = call.out.device().index;
  DeviceGuard guard(device);
  const Tensor& x = call.inputs[0];
  const int64_t d = call.attrs.dim, last = x.dim() - 1;
  const bool innermost = d == last;
  Tensor rows = innermost ? x.contiguous() : x.transpose(d, last).contiguous();
  Tensor result = innermost ? call.out : Tensor::empty(rows.shape(), rows.dtype(), rows.device());
  const int64_t len = x.shape()[d];
  const int64_t n_rows = len > 0 ? rows.numel() / len : 0;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      softmax_rows<T, kLog><<<static_cast<unsigned>(std::min<int64_t>(n_rows, int64_t{1} << 16)), kSoftmaxThreads, 0,
                              current_stream(device)>>>(result.data<T>(), rows.data<T>(), n_rows, len);
    }
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(x.shape()) + " over dim " + std::to_string(d) + " (" +
                                     dtype_name(x.dtype()) + ")");
  if (!innermost) call.out.copy_(result.transpose(d, last));
}

PF_REGISTER_KERNEL(softmax, ROCm, &softmax_entry<false>);
PF_REGISTER_KERNEL(log_softmax, ROCm, &softmax_entry<true>);

}  // namespace
}  // namespace pyflame::backend::rocm
