#pragma once
// The convolutions through im2col + BLAS (conv.hip), for the DNN adapter
// (dnn.cpp) to hand over to when the DNN library is switched off
// (math_mode.h: dnn_enabled), and the bias both paths add.

#include "core/dispatch.h"

namespace pyflame::backend::rocm {

// The op layer's contiguous inputs and output, as the DNN adapter's entries take them.
void conv_gemm_entry(OpCall& call);                  // conv2d, conv3d
void conv_transpose_gemm_entry(OpCall& call);        // conv_transpose2d
void conv_weight_backward_gemm_entry(OpCall& call);  // conv_weight_backward

// out += bias (inputs[2], when given) per output channel, in one pass over out (conv.hip).
void add_conv_bias(OpCall& call);

}  // namespace pyflame::backend::rocm
