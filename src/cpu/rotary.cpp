// CPU kernels of rotary_embedding and rotary_kv_cache (nn_ops.h has the ops; the
// arithmetic is kernels/rotary.h's). rotary_embedding: each row of x's last dim rotated
// by its position's cos and sin; x may be any view of 2 to 4 dims (a head-split
// projection is a transposed one); the output is contiguous. rotary_kv_cache: the rows
// of q, k and v, q's rotated into its output, k's rotated and v's copied into the caches.

#include <algorithm>
#include <cstring>

#include "core/dispatch.h"
#include "cpu/loops.h"
#include "kernels/kernel_error.h"
#include "kernels/rotary.h"

namespace pyflame::cpu {
namespace {

template <class T> void rotary_rows(OpCall& call) {
  const Tensor &x = call.inputs[0], &cos = call.inputs[1], &sin = call.inputs[2];
  // x as (A, B, T, D): missing leading dims of size 1.
  int64_t size[4] = {1, 1, 1, 1}, stride[4] = {0, 0, 0, 1};
  for (int64_t d = 0; d < x.dim(); ++d) size[4 - x.dim() + d] = x.size(d), stride[4 - x.dim() + d] = x.strides()[d];
  const int64_t rows = size[0] * size[1] * size[2], dim = size[3], half = dim / 2;
  const T *px = x.data<T>(), *pc = cos.data<T>(), *ps = sin.data<T>();
  T* out = call.out().data<T>();
  parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, dim)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r % size[2], b = r / size[2] % size[1], a = r / (size[2] * size[1]);
      const T* xr = px + a * stride[0] + b * stride[1] + t * stride[2];
      for (int64_t i = 0; i < half; ++i)
        kernels::rotate_pair(xr, stride[3], pc + t * dim, ps + t * dim, out + r * dim, i, half);
    }
  });
}

template <class T> void rotary_kv_cache_rows(OpCall& call) {
  const Tensor &q = call.inputs[0], &cos = call.inputs[3], &k_cache = call.inputs[6], &v_cache = call.inputs[7];
  const kernels::RotaryCacheRows rows{q.size(0),       q.size(1),       call.inputs[1].size(1), q.size(2),
                                      q.size(3),       k_cache.size(2), cos.dim() == 4 ? q.size(2) : 0};
  const int64_t position = call.inputs[5].data<int64_t>()[0];
  if (position < 0 || position + rows.tokens > rows.length)
    raise_kernel_error({static_cast<int32_t>(KernelErrorCode::IndexOutOfRange), static_cast<int32_t>(call.op),
                        position, rows.length - rows.tokens + 1, 2});
  // Fresh outputs (not the caches themselves) start as the caches.
  for (int c = 1; c <= 2; ++c)
    if (call.outputs[c].data_ptr() != call.inputs[5 + c].data_ptr())
      std::memcpy(call.outputs[c].data_ptr(), call.inputs[5 + c].data_ptr(),
                  call.inputs[5 + c].numel() * itemsize(call.inputs[5 + c].dtype()));
  const T* in[3] = {q.data<T>(), call.inputs[1].data<T>(), call.inputs[2].data<T>()};
  T* out[3] = {call.outputs[0].data<T>(), call.outputs[1].data<T>(), call.outputs[2].data<T>()};
  const T *pc = cos.data<T>(), *ps = call.inputs[4].data<T>();
  const int64_t dim = rows.dim, half = dim / 2;
  parallel_for(rows.rows(), std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, dim)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const auto row = rows.locate(r, position);
                   const T* x = in[row.which] + row.in * dim;
                   T* o = out[row.which] + row.out * dim;
                   if (row.which == 2) std::copy(x, x + dim, o);
                   else
                     for (int64_t i = 0; i < half; ++i)
                       kernels::rotate_pair(x, 1, pc + row.table * dim, ps + row.table * dim, o, i, half);
                 }
               });
}

void rotary_entry(OpCall& call) {
  switch (call.out().dtype()) {
    case DType::BFloat16: rotary_rows<BFloat16>(call); break;
    case DType::Float16: rotary_rows<Half>(call); break;
    case DType::Float64: rotary_rows<double>(call); break;
    default: rotary_rows<float>(call); break;
  }
}

void rotary_kv_cache_entry(OpCall& call) {
  switch (call.out().dtype()) {
    case DType::BFloat16: rotary_kv_cache_rows<BFloat16>(call); break;
    case DType::Float16: rotary_kv_cache_rows<Half>(call); break;
    case DType::Float64: rotary_kv_cache_rows<double>(call); break;
    default: rotary_kv_cache_rows<float>(call); break;
  }
}

PF_REGISTER_KERNEL(rotary_embedding, CPU, &rotary_entry);
PF_REGISTER_KERNEL(rotary_kv_cache, CPU, &rotary_kv_cache_entry);

}  // namespace
}  // namespace pyflame::cpu
