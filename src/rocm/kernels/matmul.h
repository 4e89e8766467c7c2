#pragma once
// Integer matrix products on the GPU (no BLAS library has them); float
// products go through ROCmBLAS (src/rocm/blas.cpp), which calls this for the rest.

#include "core/dispatch.h"

namespace pyflame::backend::rocm {

void integer_matmul(OpCall& call);

}  // namespace pyflame::backend::rocm
