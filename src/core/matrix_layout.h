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
