#pragma once
// The GPU GEMV (gemv.hip): linear for a few rows of input, several weights
// sharing them in one launch. linear's GPU entry (src/rocm/blas.cpp) calls it
// where it serves the call, and the BLAS library for the rest.

#include <vector>

#include "core/dispatch.h"

namespace pyflame::backend::rocm {

constexpr int kMaxGemvRows = 8;   // rows of x
constexpr int kMaxGemvParts = 4;  // weights per launch

// y (m, n) = x (m, k) w (n, k)^T + bias (n; null: none).
struct GemvProblem {
  const Tensor* w;
  const Tensor* bias;
  Tensor* y;
};

// Whether gemv() computes these: x (m, k) with 1 <= m <= kMaxGemvRows, every operand
// bfloat16, float16 or float32 alike, rows of x and w contiguous and 16-byte aligned, k a
// multiple of 16 bytes' elements, y contiguous (m, n), the bias contiguous.
bool gemv_serves(const Tensor& x, const std::vector<GemvProblem>& parts);
// Launches it on x's device (gemv_serves first); `op` names the caller in errors.
void gemv(const Tensor& x, const std::vector<GemvProblem>& parts, const char* op);

}  // namespace pyflame::backend::rocm
