#pragma once
// How a strided matrix maps onto a BLAS call, shared by the CPU (OpenBLAS) and
// GPU (rocBLAS/cuBLAS) matmul kernels: a row-major matrix or a transposed view
// of one is addressed in place with a transpose flag and a leading dimension;
// anything else must be copied first.

#include <algorithm>
#include <cstdint>

#include "pyflame/tensor.h"

namespace pyflame {

struct MatrixLayout {
  bool trans = false;  // stored column-major (a transposed view of a row-major matrix)
  int64_t ld = 0;      // leading dimension in elements
};

// (rows x cols) with element strides (rs, cs): addressable by BLAS as is?
inline bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, MatrixLayout& out) {
  if (cols == 1) cs = 1;  // strides of size-1 dims carry no information
  if (rows == 1) rs = std::max<int64_t>(cols, 1);
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) return out = {false, rs}, true;
  if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) return out = {true, cs}, true;
  return false;
}

// The layout of the last two dims of `t`, making `t` contiguous when BLAS cannot address it.
inline MatrixLayout matrix_layout(Tensor& t) {
  const int64_t nd = t.dim(), rows = t.size(-2), cols = t.size(-1);
  MatrixLayout l;
  if (!blas_layout(rows, cols, t.strides()[nd - 2], t.strides()[nd - 1], l)) t = t.contiguous(), l = {false, cols};
  return l;
}

// Whether one strided-batched call reaches every matrix of t, its batch dims
// (all but the last two) broadcast to `batch`: they must step by one stride.
inline bool batch_collapses(const Tensor& t, const Shape& batch) {
  const int64_t nb = static_cast<int64_t>(batch.size()), lead = nb - std::max<int64_t>(t.dim() - 2, 0);
  int64_t inner = 1, stride = 0;
  for (int64_t d = nb - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    const int64_t td = d - lead;  // t's dim, < 0 where t lacks it (broadcast)
    const int64_t s = td < 0 || t.shape()[td] == 1 ? 0 : t.strides()[td];
    if (inner == 1) stride = s;
    else if (s != stride * inner) return false;
    inner *= batch[d];
  }
  return true;
}

// Whether a matmul operand (at least 2-D) must be copied before BLAS takes
// it: its matrices are not BLAS-addressable, or, on a GPU, its batch dims do
// not collapse (cuBLAS and rocBLAS take one batch stride; the CPU kernel loops
// over the matrices). Attention's q, k and v, permuted views of one
// projection, are copied so. The op layer makes the copy (InputPlan), so that
// autograd saves what the kernel read, as PyTorch's matmul saves its reshaped
// copies, and the backward pass does not copy them again.
inline bool matmul_operand_needs_copy(const Tensor& t, const Shape& batch, DeviceType device) {
  MatrixLayout l;
  const int64_t nd = t.dim();
  if (!blas_layout(t.size(-2), t.size(-1), t.strides()[nd - 2], t.strides()[nd - 1], l)) return true;
  return device != DeviceType::CPU && !batch_collapses(t, batch);
}

// Element offset of batch b of t (batch dims = all but the last two).
inline int64_t batch_offset(const Tensor& t, int64_t b) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    off += (b % t.shape()[d]) * t.strides()[d];
    b /= t.shape()[d];
  }
  return off;
}

}  // namespace pyflame
