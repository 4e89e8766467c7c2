// GPU rotary_embedding and rotary_kv_cache (nn_ops.h has the ops; the arithmetic is
// kernels/rotary.h's): one thread per pair of dimensions (i, i + D/2) of a row, which it
// reads once and writes rotated. rotary_embedding's x may be any view of 2 to 4 dims (the
// transposed (batch, heads, positions, D) view of a projection, read where it lies rather
// than copied first); the output is contiguous. rotary_kv_cache does a decode step's two
// rotary embeddings and two cache writes in one launch (they were four kernels a layer,
// about 7 us a layer of a 1B model's step at batch 1, nearly all launch and wait); its
// position is read on the device, so a captured step replays with the position it finds.

#include <string>

#include "core/dispatch.h"
#include "kernels/rotary.h"
#include "pyflame/backend/rocm/hip_check.h"
#include "pyflame/backend/rocm/stream.h"
#include "rocm/device_guard.h"
#include "rocm/kernel_errors.h"
#include "rocm/kernels/launch.h"

namespace pyflame::backend::rocm {
namespace {

// x as (A, B, T, D); missing leading dims have size 1.
struct RotaryDims {
  int64_t size[4], stride[4];
};

template <class T>
static __global__ void rotary_pairs(const T* x, const T* cos, const T* sin, T* out, RotaryDims d, int64_t pairs) {
  const int64_t dim = d.size[3], half = dim / 2;
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < pairs; p += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = p % half, r = p / half;
    const int64_t t = r % d.size[2], b = r / d.size[2] % d.size[1], a = r / (d.size[2] * d.size[1]);
    const T* xr = x + a * d.stride[0] + b * d.stride[1] + t * d.stride[2];
    kernels::rotate_pair(xr, d.stride[3], cos + t * dim, sin + t * dim, out + r * dim, i, half);
  }
}

template <class T> struct RotaryCachePointers {
  const T* in[3];  // q, k, v
  T* out[3];       // q's output, k_cache, v_cache
  const T *cos, *sin;
  const int64_t* position;
};

// A position that leaves no room for the T new rows records an IndexError and writes nothing
// to the caches (q is still rotated).
template <class T>
static __global__ void rotary_kv_cache_pairs(RotaryCachePointers<T> p, kernels::RotaryCacheRows rows,
                                             KernelErrorSlot slot, int32_t op) {
  const int64_t position = *p.position, dim = rows.dim, half = dim / 2, pairs = rows.rows() * half;
  const bool fits = position >= 0 && position + rows.tokens <= rows.length;
  if (!fits && blockIdx.x == 0 && threadIdx.x == 0)
    record_kernel_error(slot, KernelErrorCode::IndexOutOfRange, op, position, rows.length - rows.tokens + 1, 2);
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < pairs; q += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = q % half;
    const auto row = rows.locate(q / half, position);
    if (row.which != 0 && !fits) continue;
    const T* x = p.in[row.which] + row.in * dim;
    T* o = p.out[row.which] + row.out * dim;
    if (row.which == 2) {
      o[i] = x[i];
      o[i + half] = x[i + half];
    } else {
      kernels::rotate_pair(x, 1, p.cos + row.table * dim, p.sin + row.table * dim, o, i, half);
    }
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

template <class T> void rotary_kv_cache_launch(OpCall& call) {
  const Tensor &q = call.inputs[0], &cos = call.inputs[3], &k_cache = call.inputs[6];
  const int device = q.device().index;
  DeviceGuard guard(device);
  const hipStream_t stream = current_stream(device);
  // Fresh outputs (not the caches themselves) start as the caches.
  for (int c = 1; c <= 2; ++c) {
    const Tensor& cache = call.inputs[5 + c];
    if (call.outputs[c].data_ptr() != cache.data_ptr())
      HIP_CHECK(hipMemcpyAsync(call.outputs[c].data_ptr(), cache.data_ptr(), cache.numel() * sizeof(T),
                               hipMemcpyDeviceToDevice, stream));
  }
  const kernels::RotaryCacheRows rows{q.size(0), q.size(1),       call.inputs[1].size(1), q.size(2),
                                      q.size(3), k_cache.size(2), cos.dim() == 4 ? q.size(2) : 0};
  const int64_t pairs = rows.rows() * (rows.dim / 2);
  if (pairs == 0) return;
  RotaryCachePointers<T> p{{q.data<T>(), call.inputs[1].data<T>(), call.inputs[2].data<T>()},
                           {call.outputs[0].data<T>(), call.outputs[1].data<T>(), call.outputs[2].data<T>()},
                           cos.data<T>(),
                           call.inputs[4].data<T>(),
                           call.inputs[5].data<int64_t>()};
  rotary_kv_cache_pairs<T><<<grid_for(pairs), kThreads, 0, stream>>>(p, rows, kernel_error_slot(device),
                                                                     static_cast<int32_t>(call.op));
  check_launch(op_name(call.op), [&] {
    return "rotary_kv_cache_pairs on q " + detail::to_piece(q.shape()) + ", caches " +
           detail::to_piece(k_cache.shape());
  });
}

void rotary_entry(OpCall& call) {
  switch (call.out().dtype()) {
    case DType::BFloat16: rotary_launch<BFloat16>(call); break;
    case DType::Float16: rotary_launch<Half>(call); break;
    case DType::Float64: rotary_launch<double>(call); break;
    default: rotary_launch<float>(call); break;
  }
}

void rotary_kv_cache_entry(OpCall& call) {
  switch (call.out().dtype()) {
    case DType::BFloat16: rotary_kv_cache_launch<BFloat16>(call); break;
    case DType::Float16: rotary_kv_cache_launch<Half>(call); break;
    case DType::Float64: rotary_kv_cache_launch<double>(call); break;
    default: rotary_kv_cache_launch<float>(call); break;
  }
}

PF_REGISTER_KERNEL(rotary_embedding, ROCm, &rotary_entry);
PF_REGISTER_KERNEL(rotary_kv_cache, ROCm, &rotary_kv_cache_entry);

}  // namespace
}  // namespace pyflame::backend::rocm
