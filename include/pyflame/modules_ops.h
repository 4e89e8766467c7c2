#pragma once
// Ops of the nn-modules area (pyflame.nn's layers call them).

#include <optional>
#include <tuple>

#include "pyflame/tensor.h"

namespace pyflame {

// torch.nn.functional.linear: y = input @ weight^T + bias.
//   input (*, in_features); weight (out_features, in_features) or (in_features);
//   bias (out_features) or 0-d, optional. Floating-point tensors of one dtype.
// A device with a `linear` kernel fuses the bias into the matrix product (the
// CPU: OpenBLAS with beta = 1); elsewhere it runs as matmul + add.
PF_API Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);

// linear(input, W, bias) with W weight-only quantized (pyflame.quant's layout):
//   qweight uint8 (out_features, in_features) for 8 bits, or (out_features, in_features / 2)
//   for 4 (two codes a byte, the even column in the low nibble); scales (out_features,
//   in_features / group_size) of a floating dtype and zeros uint8 of that shape: W[o, i] =
//   (code[o, i] - zeros[o, g]) * scales[o, g], g = i / group_size. The result has the input's
//   dtype (the scales and bias are read in it). bits 8 or 4; group_size divides in_features.
PF_API Tensor quantized_linear(const Tensor& input, const Tensor& qweight, const Tensor& scales, const Tensor& zeros,
                               const std::optional<Tensor>& bias, int64_t bits, int64_t group_size);

// One LSTM layer's recurrence over a whole sequence, as nn.LSTM computes it
// (gates stacked i, f, g, o; PyTorch's order). The input's projection is one
// GEMM before the recurrence (linear), so this op runs only what is sequential:
// per step one GEMM and one fused cell kernel, with no allocation.
//   input_gates (T, N, 4H): x_t W_ih^T + b_ih for every time step
//   h0, c0 (N, H); weight_hh (4H, H); bias_hh (4H) or undefined (no bias)
//   per step, t = 0 .. T-1 (T-1 .. 0 with reverse):
//     z = input_gates[t] + h W_hh^T + b_hh
//     c = sigmoid(z_f) c + sigmoid(z_i) tanh(z_g),  h = sigmoid(z_o) tanh(c)
// Returns output (T, N, H), the h of every step, and cell_states (T, N, H),
// the c of every step. The op has a third output that autograd keeps for the
// backward and this function does not return (so no gradient can reach it):
// the activated gates (T, N, 4H), (sigmoid(z_i), sigmoid(z_f), tanh(z_g),
// sigmoid(z_o)). One float dtype throughout; the cell computes in float32
// (float64 for float64).
PF_API std::tuple<Tensor, Tensor> lstm_sequence(const Tensor& input_gates, const Tensor& h0, const Tensor& c0,
                                                const Tensor& weight_hh, const Tensor& bias_hh = {},
                                                bool reverse = false);
// Its backward's sequential part (autograd's derivative adds weight_hh's and
// bias_hh's gradients as GEMMs over the whole sequence): from the gradients of
// output and cell_states, the forward's gates and cell_states and what it read,
// the gradients of input_gates (T, N, 4H), h0 and c0.
PF_API std::tuple<Tensor, Tensor, Tensor> lstm_sequence_backward(const Tensor& grad_output,
                                                                 const Tensor& grad_cell_states, const Tensor& gates,
                                                                 const Tensor& cell_states, const Tensor& c0,
                                                                 const Tensor& weight_hh, bool reverse = false);

}  // namespace pyflame
