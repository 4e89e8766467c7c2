// GPU var and std. As on the CPU (src/cpu/variance.cpp) the input is viewed
// as [kept..., reduced...] (copied into that order when the reduced dims are
// not already innermost), so each output reduces one contiguous row. One warp
// folds a row segment into a Welford state (welford.h: one pass, accurate far
// from zero) with 16-byte loads; the lanes merge by shuffles, so wave64 and
// wave32 alike. Long rows with few of them are split into segments so that
// every compute unit has work; a second kernel merges each row's segment
// states and divides by max(0, n - correction), PyTorch's divisor.

#include <algorithm>

#include "core/dispatch.h"
#include "kernels/math.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"
#include "rocm/kernels/welford.h"

namespace pyflame::backend::rocm {
namespace {

constexpr int kVarianceThreads = 256;
// Independent warps to aim for before splitting rows: enough for a large GPU.
constexpr int64_t kTargetWarps = 16384;

template <class A, bool kStd> __device__ A finish(const Welford<A>& s, double divisor) {
  const A v = s.m2 / static_cast<A>(divisor);
  return kStd ? math::sqrt(v) : v;
}

// Item = row * segments + segment: the state of the segment's elements of `in`
// (rows x len, contiguous); written as the result (segments == 1) or as a
// partial state. V > 1: every row start is V-aligned (len % V == 0).
template <class T, bool kStd, int V>
static __global__ void variance_segments(T* out, Welford<acc_t<T>>* partials, const T* in, int64_t rows, int64_t len,
                                         int64_t segments, int64_t seg_len, double divisor) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t warps_per_block = blockDim.x / PF_WARP_SIZE;
  for (int64_t item = blockIdx.x * warps_per_block + threadIdx.x / PF_WARP_SIZE; item < rows * segments;
       item += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const int64_t row = item / segments, seg = item % segments;
    const int64_t begin = seg * seg_len, end = std::min(len, begin + seg_len);
    const T* src = in + row * len;
    Welford<A> s{};
    if constexpr (V > 1) {
      const Vec<T, V>* vsrc = reinterpret_cast<const Vec<T, V>*>(src);
      for (int64_t i = begin / V + lane; i < end / V; i += PF_WARP_SIZE) {
        const Vec<T, V> v = vsrc[i];
#pragma unroll
        for (int j = 0; j < V; ++j) s.push(static_cast<A>(v.v[j]));
      }
    } else {
      for (int64_t i = begin + lane; i < end; i += PF_WARP_SIZE) s.push(static_cast<A>(src[i]));
    }
    s = warp_all_merge(s);
    if (lane == 0) {
      if (segments == 1) out[row] = static_cast<T>(finish<A, kStd>(s, divisor));
      else partials[item] = s;
    }
  }
}

// One warp per row: merge its segments' states and finish.
template <class T, bool kStd>
static __global__ void variance_merge(T* out, const Welford<acc_t<T>>* partials, int64_t rows, int64_t segments,
                                      double divisor) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % PF_WARP_SIZE;
  const int64_t warps_per_block = blockDim.x / PF_WARP_SIZE;
  for (int64_t row = blockIdx.x * warps_per_block + threadIdx.x / PF_WARP_SIZE; row < rows;
       row += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    Welford<A> s{};
    for (int64_t k = lane; k < segments; k += PF_WARP_SIZE) s.merge(partials[row * segments + k]);
    s = warp_all_merge(s);
    if (lane == 0) out[row] = static_cast<T>(finish<A, kStd>(s, divisor));
  }
}

unsigned warp_grid(int64_t warps, int device) {
  const int64_t per_block = kVarianceThreads / warp_size(device);
  return static_cast<unsigned>(std::clamp<int64_t>((warps + per_block - 1) / per_block, 1, int64_t{1} << 20));
}

template <class T, bool kStd>
void launch_variance(T* out, const T* in, int64_t rows, int64_t len, double divisor, Device device) {
  using A = acc_t<T>;
  const hipStream_t stream = current_stream(device.index);
  // Segments of at least 4096 elements, as many as bring the warps up to the target.
  const int64_t segments =
      std::clamp<int64_t>((kTargetWarps + rows - 1) / rows, 1, std::max<int64_t>(1, (len + 4095) / 4096));
  const int64_t seg_len = (len + segments - 1) / segments;
  constexpr int V = kVec<T> < 4 ? kVec<T> : 4;
  const bool vectorised = V > 1 && len % V == 0 && seg_len % V == 0 && aligned(in, sizeof(T) * V);
  Tensor partials;
  if (segments > 1) partials = Tensor::empty({rows * segments * int64_t{sizeof(Welford<A>)}}, DType::UInt8, device);
  Welford<A>* states = segments > 1 ? static_cast<Welford<A>*>(partials.data_ptr()) : nullptr;
  const unsigned grid = warp_grid(rows * segments, device.index);
  if (vectorised)
    variance_segments<T, kStd, V><<<grid, kVarianceThreads, 0, stream>>>(out, states, in, rows, len, segments, seg_len,
                                                                          divisor);
  else
    variance_segments<T, kStd, 1><<<grid, kVarianceThreads, 0, stream>>>(out, states, in, rows, len, segments, seg_len,
                                                                          divisor);
  if (segments > 1) {
    HIP_CHECK(hipGetLastError());
    variance_merge<T, kStd><<<warp_grid(rows, device.index), kVarianceThreads, 0, stream>>>(out, states, rows, segments,
                                                                                       divisor);
  }
}

template <bool kStd> void variance_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  const Tensor& x = call.inputs[0];
  const std::vector<int64_t>& dims = call.attr<ReduceAttrs>().dims;
  std::vector<int64_t> order;
  int64_t len = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!std::binary_search(dims.begin(), dims.end(), d)) order.push_back(d);
  for (int64_t d : dims) order.push_back(d), len *= x.shape()[d];
  const int64_t rows = call.out().numel();
  if (rows == 0) return;
  const double divisor = std::max(0.0, static_cast<double>(len) - call.attr<ReduceAttrs>().correction);
  const Tensor in = x.permute(order).contiguous();
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>)
      launch_variance<T, kStd>(call.out().data<T>(), in.data<T>(), rows, len, divisor, call.out().device());
  });
  check_launch(op_name(call.op), "shape " + detail::to_piece(x.shape()) + " over dims " + detail::to_piece(dims) +
                                     " (" + dtype_name(x.dtype()) + ")");
}

PF_REGISTER_KERNEL(var, ROCm, &variance_entry<false>);
PF_REGISTER_KERNEL(std, ROCm, &variance_entry<true>);

}  // namespace
}  // namespace pyflame::backend::rocm
