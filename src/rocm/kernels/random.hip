// GPU random ops: rand, randn, randint and dropout. Element i draws from
// Philox counter offset + i with the CPU's own draw functions
// (src/kernels/random.h), so a seed gives the same tensors on both devices,
// whatever the grid; dropout's mask takes four elements per counter
// (kernels::dropout_keeps4). Outputs (and dropout's input) are contiguous.

#include "core/dispatch.h"
#include "kernels/random.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

template <class T, class Draw> static __global__ void random_kernel(T* out, int64_t n, Draw draw) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = draw(i);
}

// Thread per group of four elements: one Philox counter each (dropout_keeps4).
// kVector: 4-element aligned, loaded and stored as one access.
template <class T, bool kVector>
static __global__ void dropout_kernel(T* out, const T* in, int64_t n, uint64_t seed, uint64_t offset, double p,
                                      acc_t<T> scale) {
  using A = acc_t<T>;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < (n + 3) / 4;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t keep = kernels::dropout_keeps4(seed, offset, g, p);
    if (kVector && 4 * g + 4 <= n) {
      Vec<T, 4> v = reinterpret_cast<const Vec<T, 4>*>(in)[g];
#pragma unroll
      for (int j = 0; j < 4; ++j) v.v[j] = static_cast<T>(keep >> j & 1 ? static_cast<A>(v.v[j]) * scale : A(0));
      reinterpret_cast<Vec<T, 4>*>(out)[g] = v;
    } else {
      for (int64_t i = 4 * g; i < n && i < 4 * g + 4; ++i)
        out[i] = static_cast<T>(keep >> (i - 4 * g) & 1 ? static_cast<A>(in[i]) * scale : A(0));
    }
  }
}

std::string describe(const OpCall& call) {
  return "shape " + detail::to_piece(call.out().shape()) + " (" + dtype_name(call.out().dtype()) + ")";
}

template <kernels::Distribution kDist> void random_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  const int64_t n = call.out().numel();
  visit_dtype(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    random_kernel<<<grid_for(n), kThreads, 0, current_stream(device)>>>(
        call.out().data<T>(), n, kernels::RandomDraw<T, kDist>(call.attr<RandomAttrs>()));
  });
  check_launch(op_name(call.op), describe(call));
}

void dropout_entry(OpCall& call) {
  const int device = call.out().device().index;
  DeviceGuard guard(device);
  const RandomAttrs& a = call.attr<RandomAttrs>();
  const int64_t n = call.out().numel();
  visit_dtype(call.out().dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_float_v<T>) {
      const auto scale = static_cast<acc_t<T>>(1.0 / (1.0 - a.p));  // inf for p = 1: nothing is kept then
      T* out = call.out().data<T>();
      const T* in = call.inputs[0].data<T>();
      const hipStream_t stream = current_stream(device);
      constexpr bool kCanVector = sizeof(T) * 4 <= 16;
      if (kCanVector && aligned(in, sizeof(T) * 4) && aligned(out, sizeof(T) * 4))
        dropout_kernel<T, kCanVector><<<grid_for((n + 3) / 4), kThreads, 0, stream>>>(out, in, n, a.seed, a.offset,
                                                                                        a.p, scale);
      else
        dropout_kernel<T, false><<<grid_for((n + 3) / 4), kThreads, 0, stream>>>(out, in, n, a.seed, a.offset, a.p,
                                                                                   scale);
    }
  });
  check_launch("dropout", describe(call));
}

PF_REGISTER_KERNEL(rand, ROCm, &random_entry<kernels::Distribution::Uniform>);
PF_REGISTER_KERNEL(randn, ROCm, &random_entry<kernels::Distribution::Normal>);
PF_REGISTER_KERNEL(randint, ROCm, &random_entry<kernels::Distribution::Integer>);
PF_REGISTER_KERNEL(dropout, ROCm, &dropout_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
