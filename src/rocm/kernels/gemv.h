#pragma once
// The GPU GEMV (gemv.hip): linear of one row of input, several weights sharing
// it in one launch. linear's GPU entry (src/rocm/blas.cpp) calls it
// where it serves the call, and the BLAS library for the rest.

#include <vector>

#include "core/dispatch.h"

namespace pyflame::backend::rocm {

constexpr int kMaxGemvParts = 4;  // weights per launch

// y (1, n) = x (1, k) w (n, k)^T + bias (n; null: none).
struct GemvProblem {
  const Tensor* w;
  const Tensor* bias;
  Tensor* y;  // null under swiglu
};

// What grouped_linear fuses around its products (GroupedLinearAttrs): x RMS-normalised as
// it is read (rms_norm's rounding to x's dtype kept), and two parts' results met as
// silu(y0) * y1 in `swiglu_out` (1, n) instead of written.
struct GemvFusion {
  bool rms_norm = false;
  const Tensor* norm_weight = nullptr;  // (k) of x's dtype, or null: ones
  double eps = 0;
  Tensor* swiglu_out = nullptr;  // null: no SwiGLU
};

// Whether gemv() computes these: x (1, k), every operand bfloat16, float16 or float32
// alike, x and the rows of w contiguous and 16-byte aligned, k a multiple of 16 bytes'
// elements, y contiguous (1, n), the bias contiguous; the fusion's norm weight contiguous,
// its SwiGLU of two parts of as many rows.
bool gemv_serves(const Tensor& x, const std::vector<GemvProblem>& parts, const GemvFusion& fusion = {});
// Launches it on x's device (gemv_serves first); `op` names the caller in errors.
void gemv(const Tensor& x, const std::vector<GemvProblem>& parts, const char* op, const GemvFusion& fusion = {});

}  // namespace pyflame::backend::rocm
