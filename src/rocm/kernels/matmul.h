#pragma once
// Integer matrix products on the GPU (no BLAS library has them); float
// products go through ROCmBLAS (src/rocm/blas.cpp), which calls these for the rest:
// integer products, and linear_relu's ReLU where the library's epilogue has none.

#include "core/dispatch.h"

namespace pyflame::backend::rocm {

void integer_matmul(OpCall& call);
// `out` (contiguous, float) through relu's functor, in place; `op` names the caller in errors.
void relu_in_place(Tensor& out, const char* op);

}  // namespace pyflame::backend::rocm
