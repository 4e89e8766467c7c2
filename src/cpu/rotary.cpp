// CPU kernel of rotary_embedding (nn_ops.h has the op): each row of x's last
// dim rotated by its position's cos and sin, in float32 for 16-bit dtypes.
// x may be any view of 2 to 4 dims (a head-split projection is a transposed
// one); the output is contiguous.

#include <algorithm>
#include <type_traits>

#include "core/dispatch.h"
#include "cpu/loops.h"

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
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, dim)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r % size[2], b = r / size[2] % size[1], a = r / (size[2] * size[1]);
      const T* xr = px + a * stride[0] + b * stride[1] + t * stride[2];
      const T *c = pc + t * dim, *s = ps + t * dim;
      T* o = out + r * dim;
      for (int64_t i = 0; i < half; ++i) {
        const A x1 = static_cast<A>(xr[i * stride[3]]), x2 = static_cast<A>(xr[(i + half) * stride[3]]);
        o[i] = static_cast<T>(x1 * static_cast<A>(c[i]) - x2 * static_cast<A>(s[i]));
        o[i + half] = static_cast<T>(x2 * static_cast<A>(c[i + half]) + x1 * static_cast<A>(s[i + half]));
      }
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

PF_REGISTER_KERNEL(rotary_embedding, CPU, &rotary_entry);

}  // namespace
}  // namespace pyflame::cpu
