#pragma once
// Ops of the nn-modules area (pyflame.nn's layers call them).

#include <optional>

#include "pyflame/tensor.h"

namespace pyflame {

// torch.nn.functional.linear: y = input @ weight^T + bias.
//   input (*, in_features); weight (out_features, in_features) or (in_features);
//   bias (out_features) or 0-d, optional. Floating-point tensors of one dtype.
// A device with a `linear` kernel fuses the bias into the matrix product (the
// CPU: OpenBLAS with beta = 1); elsewhere it runs as matmul + add.
PF_API Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);

}  // namespace pyflame
