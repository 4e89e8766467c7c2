// GPU rotary_embedding (nn_ops.h has the op): one thread per pair of
// dimensions (i, i + D/2) of a row, which it reads once and writes rotated;
// float32 arithmetic for 16-bit dtypes (float64 in float64). x may be any view of 2 to 4 dims (the
// transposed (batch, heads, positions, D) view of a projection, read where it
// lies rather than copied first); the output is contiguous.

#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

// x as (A, B, T, D); missing leading dims have size 1.
struct RotaryDims {
  int64_t size[4], stride[4];
};

template <class T>
static __global__ void rotary_pairs(const T* x, const T* cos, const T* sin, T* out, RotaryDims d, int64_t pairs) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t dim = d.size[3], half = dim / 2;
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < pairs; p += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = p % half, r = p / half;
    const int64_t t = r % d.size[2], b = r / d.size[2] % d.size[1], a = r / (d.size[2] * d.size[1]);
    const T* xr = x + a * d.stride[0] + b * d.stride[1] + t * d.stride[2];
    const A x1 = static_cast<A>(xr[i * d.stride[3]]), x2 = static_cast<A>(xr[(i + half) * d.stride[3]]);
    const T *c = cos + t * dim, *s = sin + t * dim;
    out[r * dim + i] = static_cast<T>(x1 * static_cast<A>(c[i]) - x2 * static_cast<A>(s[i]));
    out[r * dim + i + half] = static_cast<T>(x2 * static_cast<A>(c[i + half]) + x1 * static_cast<A>(s[i + half]));
  }
}

template <class T> void rotary_launch(OpCall& call) {
  const Tensor &x = call.inputs[0], &cos = call.inputs[1], &sin = call.inputs[2];
  Tensor& out = call.out();
  DeviceGuard guard(out.device().index);
  RotaryDims d{{1, 1, 1, 1}, {0, 0, 0, 1}};
  for (int64_t i = 0; i < x.dim(); ++i) d.size[4 - x.dim() + i] = x.size(i), d.stride[4 - x.dim() + i] = x.strides()[i];
  const int64_t pairs = out.numel() / 2;
  if (pairs == 0) return;
  rotary_pairs<T><<<grid_for(pairs), kThreads, 0, current_stream(out.device().index)>>>(
      x.data<T>(), cos.data<T>(), sin.data<T>(), out.data<T>(), d, pairs);
  check_launch(op_name(call.op), [&] { return "rotary_pairs on x " + detail::to_piece(x.shape()); });
}

void rotary_entry(OpCall& call) {
  switch (call.out().dtype()) {
    case DType::BFloat16: rotary_launch<BFloat16>(call); break;
    case DType::Float16: rotary_launch<Half>(call); break;
    case DType::Float64: rotary_launch<double>(call); break;
    default: rotary_launch<float>(call); break;
  }
}

PF_REGISTER_KERNEL(rotary_embedding, ROCm, &rotary_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
