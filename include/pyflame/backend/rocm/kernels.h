#pragma once
// The spec's C++ kernel launchers (seed 000, "Custom HIP Kernels") for float32
// device buffers. They run the very kernels the ops use (through the kernel
// registry), enqueued on `stream` of the current device; they return at once.
// Errors (an op of the wrong family, a failed launch) raise as the ops do.

#include <cstdint>

#include "pyflame/backend/rocm/hip_compat.h"
#include "pyflame/ir/op_type.h"

namespace pyflame::backend::rocm {

PF_API void launch_gelu_forward(float* output, const float* input, int64_t numel, hipStream_t stream);
PF_API void launch_silu_forward(float* output, const float* input, int64_t numel, hipStream_t stream);
// op: a binary op of the table (add, sub, mul, div, pow, maximum, minimum).
PF_API void launch_elementwise_binary(ir::OpType op, float* output, const float* a, const float* b, int64_t numel,
                                      hipStream_t stream);
// op: a unary op of the table (neg, abs, sqrt, exp, ...).
PF_API void launch_elementwise_unary(ir::OpType op, float* output, const float* input, int64_t numel,
                                     hipStream_t stream);
// op: eq, ne, lt, le, gt, ge; output is 1.0 where true, 0.0 where false.
PF_API void launch_comparison(ir::OpType op, float* output, const float* a, const float* b, int64_t numel,
                              hipStream_t stream);
// output = condition != 0 ? x : y
PF_API void launch_where(float* output, const float* condition, const float* x, const float* y, int64_t numel,
                         hipStream_t stream);
PF_API void launch_clamp(float* output, const float* input, float min_val, float max_val, int64_t numel,
                         hipStream_t stream);
// Losses: output[0] = the mean over the elements (rows for cross entropy), as
// PyTorch's default reduction. bce: predictions in [0, 1] (not checked here).
PF_API void launch_mse_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                            hipStream_t stream);
PF_API void launch_bce_loss(float* output, const float* predictions, const float* targets, int64_t numel,
                            hipStream_t stream);
// logits (N, C) row-major, targets N class indices in [0, C) (checked by the kernel, raised at the next wait).
PF_API void launch_cross_entropy_loss(float* output, const float* logits, const int32_t* targets, int64_t N,
                                      int64_t C, hipStream_t stream);

}  // namespace pyflame::backend::rocm
