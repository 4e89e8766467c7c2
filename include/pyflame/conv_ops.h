#pragma once
// Convolution, pooling and padding: PyTorch's torch.nn.functional API, with
// its argument names and defaults. A per-dim argument (stride, padding, ...)
// holds one value, used for every spatial dim, or one value per spatial dim
// (a Python int is a one-entry vector). Inputs are (N, C, spatial...) or,
// unbatched, (C, spatial...); the result has the input's dtype (float
// inputs only; float16/bfloat16 are computed in float32).

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

PF_API Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                     std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                     std::vector<int64_t> dilation = {1}, int64_t groups = 1);
PF_API Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                     std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                     std::vector<int64_t> dilation = {1}, int64_t groups = 1);
PF_API Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                     std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                     std::vector<int64_t> dilation = {1}, int64_t groups = 1);

namespace detail {
// conv<spatial_dims>d with padding "same" (stride 1; the output keeps the
// input's size) or "valid" (no padding).
PF_API Tensor conv_padding_mode(int64_t spatial_dims, const Tensor& input, const Tensor& weight,
                                const std::optional<Tensor>& bias, std::vector<int64_t> stride,
                                const std::string& padding, std::vector<int64_t> dilation, int64_t groups);
template <class S> using if_string = std::enable_if_t<std::is_convertible_v<const S&, std::string>, int>;
}  // namespace detail

// padding "same" or "valid". Templates only so that a braced padding ({1, 1})
// always means sizes: std::string would accept a braced list of chars too.
template <class S, detail::if_string<S> = 0>
Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              std::vector<int64_t> stride, const S& padding, std::vector<int64_t> dilation = {1}, int64_t groups = 1) {
  return detail::conv_padding_mode(1, input, weight, bias, std::move(stride), padding, std::move(dilation), groups);
}
template <class S, detail::if_string<S> = 0>
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              std::vector<int64_t> stride, const S& padding, std::vector<int64_t> dilation = {1}, int64_t groups = 1) {
  return detail::conv_padding_mode(2, input, weight, bias, std::move(stride), padding, std::move(dilation), groups);
}
template <class S, detail::if_string<S> = 0>
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
              std::vector<int64_t> stride, const S& padding, std::vector<int64_t> dilation = {1}, int64_t groups = 1) {
  return detail::conv_padding_mode(3, input, weight, bias, std::move(stride), padding, std::move(dilation), groups);
}

// weight: (in_channels, out_channels / groups, kH, kW).
PF_API Tensor conv_transpose2d(const Tensor& input, const Tensor& weight,
                               const std::optional<Tensor>& bias = std::nullopt, std::vector<int64_t> stride = {1},
                               std::vector<int64_t> padding = {0}, std::vector<int64_t> output_padding = {0},
                               int64_t groups = 1, std::vector<int64_t> dilation = {1});

// The gradient of conv2d/conv3d(input, weight, stride, padding, dilation, groups)
// with respect to the weight, given grad_output (the output's gradient); the
// result has the weight's shape (the weight's values are not read). As
// torch.nn.grad.conv2d_weight; batched or unbatched input and grad_output.
PF_API Tensor conv_weight_backward(const Tensor& input, const Tensor& grad_output, const Tensor& weight,
                                   std::vector<int64_t> stride = {1}, std::vector<int64_t> padding = {0},
                                   std::vector<int64_t> dilation = {1}, int64_t groups = 1);

// Pooling. An empty stride means stride = kernel_size (PyTorch's stride=None).
PF_API Tensor max_pool1d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                         std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1},
                         bool ceil_mode = false);
PF_API Tensor max_pool2d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                         std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1},
                         bool ceil_mode = false);
PF_API Tensor max_pool3d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                         std::vector<int64_t> padding = {0}, std::vector<int64_t> dilation = {1},
                         bool ceil_mode = false);
PF_API Tensor avg_pool1d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                         std::vector<int64_t> padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
PF_API Tensor avg_pool2d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                         std::vector<int64_t> padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                         std::optional<int64_t> divisor_override = std::nullopt);
PF_API Tensor avg_pool3d(const Tensor& input, std::vector<int64_t> kernel_size, std::vector<int64_t> stride = {},
                         std::vector<int64_t> padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                         std::optional<int64_t> divisor_override = std::nullopt);
// output_size: one entry (used for both dims) or two; nullopt keeps that input size.
PF_API Tensor adaptive_avg_pool2d(const Tensor& input, std::vector<std::optional<int64_t>> output_size);

// Pooling's backward passes (what autograd runs): the gradient of the input
// from the output's gradient `grad`, with the forward's arguments. Max
// pooling gives each output's gradient to the first maximum of its window
// (the last NaN where there are NaNs, as PyTorch; the first element inside
// the input where all are -inf) and reads the input to find it; the averages
// need only the input's shape, (N, C, spatial...) or (C, spatial...).
PF_API Tensor max_pool2d_backward(const Tensor& grad, const Tensor& input, std::vector<int64_t> kernel_size,
                                  std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0},
                                  std::vector<int64_t> dilation = {1}, bool ceil_mode = false);
PF_API Tensor max_pool3d_backward(const Tensor& grad, const Tensor& input, std::vector<int64_t> kernel_size,
                                  std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0},
                                  std::vector<int64_t> dilation = {1}, bool ceil_mode = false);
PF_API Tensor avg_pool2d_backward(const Tensor& grad, const Shape& input_size, std::vector<int64_t> kernel_size,
                                  std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0},
                                  bool ceil_mode = false, bool count_include_pad = true,
                                  std::optional<int64_t> divisor_override = std::nullopt);
PF_API Tensor avg_pool3d_backward(const Tensor& grad, const Shape& input_size, std::vector<int64_t> kernel_size,
                                  std::vector<int64_t> stride = {}, std::vector<int64_t> padding = {0},
                                  bool ceil_mode = false, bool count_include_pad = true,
                                  std::optional<int64_t> divisor_override = std::nullopt);
PF_API Tensor adaptive_avg_pool2d_backward(const Tensor& grad, const Shape& input_size);

// Constant padding of the last pad.size() / 2 dims, last dim first: {left, right, top, bottom, ...};
// negative entries crop. Any dtype. Modes other than "constant" raise NotSupportedError.
PF_API Tensor pad(const Tensor& input, std::vector<int64_t> pad, const std::string& mode = "constant",
                  Scalar value = Scalar(0.0));

}  // namespace pyflame
