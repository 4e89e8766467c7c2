// GPU softmax and log_softmax over any dim. The input is viewed as rows
// along the softmax dim (made contiguous, dim innermost); one block handles a
// row: the row max and the sum of exp(x - max) are each combined across the
// block (block_reduce.h: warp shuffles over PF_WARP_SIZE lanes, so wave64 and
// wave32 alike), then the block writes the row. Rows of up to 8192 elements
// are held in registers, so the input is read once; longer rows are read three
// times. A result computed with dim moved innermost is copied back into the
// output's layout. The backward passes (softmax_backward, log_softmax_backward)
// run the same way: one block per row, a block-wide sum, then the row.

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

constexpr int kSoftmaxThreads = 256;
constexpr int kMaxCached = 32;  // elements per thread held in registers: rows up to 8192

// Rows of at most kSoftmaxThreads * kPer elements, each thread holding its kPer
// in registers, loaded V at a time (V > 1: rows V-aligned, len % V == 0).
// softmax keeps exp(x - max) from the sum for the output: one exp per element.
template <class T, bool kLog, int kPer, int V>
static __global__ void softmax_rows_cached(T* out, const T* in, int64_t rows, int64_t len) {
  using A = acc_t<T>;
  constexpr int kVecs = kPer / V;
  const kernels::MaxReduce<A> max_of;
  const kernels::SumReduce<A> sum_of;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Vec<T, V>* x = reinterpret_cast<const Vec<T, V>*>(in + row * len);
    Vec<T, V>* y = reinterpret_cast<Vec<T, V>*>(out + row * len);
    const int64_t nvec = len / V;
    A v[kVecs][V];
    A m = kernels::MaxReduce<A>::identity();
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kSoftmaxThreads;
      Vec<T, V> xv;
      if (i < nvec) xv = x[i];
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[k][j] = i < nvec ? static_cast<A>(xv.v[j]) : kernels::MaxReduce<A>::identity();
        m = max_of(m, v[k][j]);
      }
    }
    m = block_all_reduce<kSoftmaxThreads>(m, max_of);
    A s = A(0);
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const bool live = threadIdx.x + static_cast<int64_t>(k) * kSoftmaxThreads < nvec;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        v[k][j] -= m;
        if (!kLog) v[k][j] = math::exp(v[k][j]);
        if (live) s += kLog ? math::exp(v[k][j]) : v[k][j];
      }
    }
    s = block_all_reduce<kSoftmaxThreads>(s, sum_of);
    const A scale = kLog ? math::log(s) : A(1) / s;
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kSoftmaxThreads;
      if (i >= nvec) break;
      Vec<T, V> yv;
#pragma unroll
      for (int j = 0; j < V; ++j) yv.v[j] = static_cast<T>(kLog ? v[k][j] - scale : v[k][j] * scale);
      y[i] = yv;
    }
  }
}

// Any row length: the row is read for the max, for the sum, and to write.
template <class T, bool kLog> static __global__ void softmax_rows(T* out, const T* in, int64_t rows, int64_t len) {
  using A = acc_t<T>;
  const kernels::MaxReduce<A> max_of;
  const kernels::SumReduce<A> sum_of;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x = in + row * len;
    T* y = out + row * len;
    A m = kernels::MaxReduce<A>::identity();
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) m = max_of(m, static_cast<A>(x[i]));
    m = block_all_reduce<kSoftmaxThreads>(m, max_of);
    A s = A(0);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) s += math::exp(static_cast<A>(x[i]) - m);
    s = block_all_reduce<kSoftmaxThreads>(s, sum_of);
    const A scale = kLog ? math::log(s) : A(1) / s;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
      A v = static_cast<A>(x[i]) - m;
      y[i] = static_cast<T>(kLog ? v - scale : math::exp(v) * scale);
    }
  }
}

template <class T, bool kLog, int V>
void launch_cached(T* out, const T* in, int64_t rows, int64_t len, unsigned grid, hipStream_t stream) {
  const int64_t per = (len + kSoftmaxThreads - 1) / kSoftmaxThreads;  // elements per thread
  auto run = [&](auto per_tag) {
    constexpr int kPer = std::max<int>(decltype(per_tag)::value, V);
    softmax_rows_cached<T, kLog, kPer, V><<<grid, kSoftmaxThreads, 0, stream>>>(out, in, rows, len);
  };
  if (per <= 1) run(std::integral_constant<int, 1>());
  else if (per <= 2) run(std::integral_constant<int, 2>());
  else if (per <= 4) run(std::integral_constant<int, 4>());
  else if (per <= 8) run(std::integral_constant<int, 8>());
  else if (per <= 16) run(std::integral_constant<int, 16>());
  else run(std::integral_constant<int, kMaxCached>());
}

template <class T, bool kLog>
void launch_softmax(T* out, const T* in, int64_t rows, int64_t len, hipStream_t stream) {
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 16));
  constexpr int V = kVec<T> < 4 ? kVec<T> : 4;  // 4 floats (or 4 halves) per access keeps registers in check
  if (len > int64_t{kSoftmaxThreads} * kMaxCached) {
    softmax_rows<T, kLog><<<grid, kSoftmaxThreads, 0, stream>>>(out, in, rows, len);
  } else if (V > 1 && len % V == 0 && aligned(in, sizeof(T) * V) && aligned(out, sizeof(T) * V) &&
             len >= int64_t{kSoftmaxThreads} * V) {
    launch_cached<T, kLog, V>(out, in, rows, len, grid, stream);
  } else {
    launch_cached<T, kLog, 1>(out, in, rows, len, grid, stream);
  }
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
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      launch_softmax<T, kLog>(result.data<T>(), rows.data<T>(), n_rows, len, current_stream(device));
    }
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(x.shape()) + " over dim " + std::to_string(d) + " (" +
                                     dtype_name(x.dtype()) + ")");
  if (!innermost) call.out().copy_(result.transpose(d, last));
}

// Backward, one block per row: the row's sum (of g y for softmax, of g for
// log_softmax) combined across the block, then the row written; the second
// read of g and y mostly hits the cache (a row is at most a few tens of KiB).
template <class T, bool kLog, int V>
static __global__ void softmax_backward_rows(T* gx, const T* g, const T* y, int64_t rows, int64_t len) {
  using A = acc_t<T>;
  const kernels::SumReduce<A> sum_of;
  const int64_t nvec = len / V;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const Vec<T, V>* gr = reinterpret_cast<const Vec<T, V>*>(g + row * len);
    const Vec<T, V>* yr = reinterpret_cast<const Vec<T, V>*>(y + row * len);
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(gx + row * len);
    A s = A(0);
    for (int64_t i = threadIdx.x; i < nvec; i += kSoftmaxThreads) {
      const Vec<T, V> a = gr[i], b = yr[i];
#pragma unroll
      for (int j = 0; j < V; ++j) s += kLog ? static_cast<A>(a.v[j]) : static_cast<A>(a.v[j]) * static_cast<A>(b.v[j]);
    }
    s = block_all_reduce<kSoftmaxThreads>(s, sum_of);
    for (int64_t i = threadIdx.x; i < nvec; i += kSoftmaxThreads) {
      const Vec<T, V> a = gr[i], b = yr[i];
      Vec<T, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const A gv = static_cast<A>(a.v[j]), yv = static_cast<A>(b.v[j]);
        r.v[j] = static_cast<T>(kLog ? gv - math::exp(yv) * s : yv * (gv - s));
      }
      out[i] = r;
    }
  }
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
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(n_rows, int64_t{1} << 16));
  visit_dtype(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      constexpr int V = kVec<T> < 4 ? kVec<T> : 4;
      T* out = result.data<T>();
      const T *gp = g_rows.data<T>(), *yp = y_rows.data<T>();
      const hipStream_t stream = current_stream(device);
      if (n_rows == 0) return;
      if (len % V == 0 && aligned(out, sizeof(T) * V) && aligned(gp, sizeof(T) * V) && aligned(yp, sizeof(T) * V))
        softmax_backward_rows<T, kLog, V><<<grid, kSoftmaxThreads, 0, stream>>>(out, gp, yp, n_rows, len);
      else
        softmax_backward_rows<T, kLog, 1><<<grid, kSoftmaxThreads, 0, stream>>>(out, gp, yp, n_rows, len);
    }
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(y.shape()) + " over dim " + std::to_string(d) + " (" +
                                     dtype_name(y.dtype()) + ")");
  if (!innermost) call.out().copy_(result.transpose(d, last));
}

PF_REGISTER_KERNEL(softmax, ROCm, &softmax_entry<false>);
PF_REGISTER_KERNEL(softmax_backward, ROCm, &softmax_backward_entry<false>);
PF_REGISTER_KERNEL(log_softmax_backward, ROCm, &softmax_backward_entry<true>);
PF_REGISTER_KERNEL(log_softmax, ROCm, &softmax_entry<true>);

}  // namespace
}  // namespace pyflame::backend::rocm
