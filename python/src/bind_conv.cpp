// Python bindings of the conv area (include/pyflame/conv_ops.h) with
// torch.nn.functional's signatures: per-dim arguments take an int or a tuple,
// a conv's padding may also be 'same' or 'valid', pooling's stride=None means
// the kernel size.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/conv_ops.h"
#include "pyflame/error.h"
#include "pyflame/ir/op_call.h"

namespace pyflame::python {
namespace {

using Ints = std::vector<int64_t>;

// An int or a sequence of ints; None or () gives {} (the op's default) where allowed.
Ints as_ints(nb::handle h, const char* op, const char* what, bool allow_none = false) {
  if (allow_none && h.is_none()) return {};
  if (PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr())) return {nb::cast<int64_t>(nb::int_(h))};
  if (PySequence_Check(h.ptr()) && !nb::isinstance<nb::str>(h)) {
    Ints v;
    for (nb::handle x : nb::borrow<nb::sequence>(h)) {
      if (!PyIndex_Check(x.ptr()) || PyBool_Check(x.ptr()))
        throw pyflame::TypeError(std::string(op) + ": " + what + " must be an int or a tuple of ints, got an entry of type " +
                                 py_type_name(x));
      v.push_back(nb::cast<int64_t>(nb::int_(x)));
    }
    if (!v.empty() || allow_none) return v;
  }
  throw pyflame::TypeError(std::string(op) + ": " + what + " must be an int or a non-empty tuple of ints, got " +
                           py_type_name(h));
}

using ConvFn = Tensor (*)(const Tensor&, const Tensor&, const std::optional<Tensor>&, Ints, Ints, Ints, int64_t);

auto conv_binding(const char* op, int64_t spatial_dims, ConvFn conv) {
  return [=](const Tensor& input, const Tensor& weight, std::optional<Tensor> bias, nb::handle stride,
             nb::handle padding, nb::handle dilation, int64_t groups) {
    Ints s = as_ints(stride, op, "stride"), d = as_ints(dilation, op, "dilation");
    if (nb::isinstance<nb::str>(padding))
      return pyflame::detail::conv_padding_mode(spatial_dims, input, weight, bias, s, nb::cast<std::string>(padding),
                                                d, groups);
    return conv(input, weight, bias, s, as_ints(padding, op, "padding"), d, groups);
  };
}

template <class Pool> auto max_pool_binding(const char* op, Pool pool) {
  return [=](const Tensor& input, nb::handle kernel_size, nb::handle stride, nb::handle padding,
             nb::handle dilation, bool ceil_mode, bool return_indices) {
    PF_CHECK(!return_indices, NotSupportedError, op,
             ": return_indices=True is not supported yet; the op returns the values only (docs/ops.md)");
    return pool(input, as_ints(kernel_size, op, "kernel_size"), as_ints(stride, op, "stride", true),
                as_ints(padding, op, "padding"), as_ints(dilation, op, "dilation"), ceil_mode);
  };
}

template <class Pool> auto avg_pool_binding(const char* op, Pool pool) {
  return [=](const Tensor& input, nb::handle kernel_size, nb::handle stride, nb::handle padding, bool ceil_mode,
             bool count_include_pad, std::optional<int64_t> divisor_override) {
    return pool(input, as_ints(kernel_size, op, "kernel_size"), as_ints(stride, op, "stride", true),
                as_ints(padding, op, "padding"), ceil_mode, count_include_pad, divisor_override);
  };
}

template <class Backward> auto max_pool_backward_binding(const char* op, Backward backward) {
  return [=](const Tensor& grad, const Tensor& input, nb::handle kernel_size, nb::handle stride, nb::handle padding,
             nb::handle dilation, bool ceil_mode) {
    return backward(grad, input, as_ints(kernel_size, op, "kernel_size"), as_ints(stride, op, "stride", true),
                    as_ints(padding, op, "padding"), as_ints(dilation, op, "dilation"), ceil_mode);
  };
}

template <class Backward> auto avg_pool_backward_binding(const char* op, Backward backward) {
  return [=](const Tensor& grad, nb::handle input_size, nb::handle kernel_size, nb::handle stride, nb::handle padding,
             bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
    return backward(grad, as_ints(input_size, op, "input_size"), as_ints(kernel_size, op, "kernel_size"),
                    as_ints(stride, op, "stride", true), as_ints(padding, op, "padding"), ceil_mode,
                    count_include_pad, divisor_override);
  };
}

}  // namespace

// As in torch.nn.functional, none of these is also a Tensor method.
void bind_conv(nb::module_& m, nb::class_<Tensor>& /*tensor*/) {
  const char* conv_doc = "Convolution over the spatial dims of an (N, C, ...) or (C, ...) input, as in torch.";
  m.def("conv1d", conv_binding("conv1d", 1, &pyflame::conv1d), "input"_a, "weight"_a, "bias"_a = nb::none(),
        "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1, conv_doc);
  m.def("conv2d", conv_binding("conv2d", 2, &pyflame::conv2d), "input"_a, "weight"_a, "bias"_a = nb::none(),
        "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1, conv_doc);
  m.def("conv3d", conv_binding("conv3d", 3, &pyflame::conv3d), "input"_a, "weight"_a, "bias"_a = nb::none(),
        "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1, conv_doc);
  m.def(
      "conv2d_batch_norm",
      [](const Tensor& input, const Tensor& weight, std::optional<Tensor> bias, const Tensor& running_mean,
         const Tensor& running_var, std::optional<Tensor> bn_weight, std::optional<Tensor> bn_bias, nb::handle stride,
         nb::handle padding, nb::handle dilation, int64_t groups, double eps, bool relu) {
        const char* op = "conv2d_batch_norm";
        ConvBatchNormAttrs a{{as_ints(stride, op, "stride"), as_ints(padding, op, "padding"),
                              as_ints(dilation, op, "dilation"), {}, groups},
                             eps,
                             relu};
        return pyflame::apply(OpCall{ir::OpType::conv2d_batch_norm,
                                     {input, weight, bias.value_or(Tensor()), running_mean, running_var,
                                      bn_weight.value_or(Tensor()), bn_bias.value_or(Tensor())},
                                     std::move(a)})[0];
      },
      "input"_a, "weight"_a, "bias"_a.none(), "running_mean"_a, "running_var"_a, "bn_weight"_a.none(),
      "bn_bias"_a.none(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1, "eps"_a = 1e-5,
      "relu"_a = false,
      "batch_norm(conv2d(input, weight, bias, ...), running_mean, running_var, bn_weight, bn_bias, training=False, "
      "eps=eps) (then relu) as one convolution by weights scaled per channel: what pf.compile folds the chain into.");
  m.def("conv_transpose2d",
        [](const Tensor& input, const Tensor& weight, std::optional<Tensor> bias, nb::handle stride,
           nb::handle padding, nb::handle output_padding, int64_t groups, nb::handle dilation) {
          const char* op = "conv_transpose2d";
          return pyflame::conv_transpose2d(input, weight, bias, as_ints(stride, op, "stride"),
                                           as_ints(padding, op, "padding"),
                                           as_ints(output_padding, op, "output_padding"), groups,
                                           as_ints(dilation, op, "dilation"));
        },
        "input"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = 1, "padding"_a = 0, "output_padding"_a = 0,
        "groups"_a = 1, "dilation"_a = 1);
  m.def("conv_weight_backward",
        [](const Tensor& input, const Tensor& grad_output, const Tensor& weight, nb::handle stride, nb::handle padding,
           nb::handle dilation, int64_t groups) {
          const char* op = "conv_weight_backward";
          return pyflame::conv_weight_backward(input, grad_output, weight, as_ints(stride, op, "stride"),
                                               as_ints(padding, op, "padding"), as_ints(dilation, op, "dilation"),
                                               groups);
        },
        "input"_a, "grad_output"_a, "weight"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1, "groups"_a = 1,
        "The gradient of conv2d/conv3d(input, weight, ...) with respect to the weight, given grad_output (the "
        "weight's values are not read), as torch.nn.grad.conv2d_weight(input, weight.shape, grad_output, ...).");

  m.def("max_pool1d", max_pool_binding("max_pool1d", &pyflame::max_pool1d), "input"_a, "kernel_size"_a,
        "stride"_a = nb::none(), "padding"_a = 0, "dilation"_a = 1, "ceil_mode"_a = false, "return_indices"_a = false);
  m.def("max_pool2d", max_pool_binding("max_pool2d", &pyflame::max_pool2d), "input"_a, "kernel_size"_a,
        "stride"_a = nb::none(), "padding"_a = 0, "dilation"_a = 1, "ceil_mode"_a = false, "return_indices"_a = false);
  m.def("max_pool3d", max_pool_binding("max_pool3d", &pyflame::max_pool3d), "input"_a, "kernel_size"_a,
        "stride"_a = nb::none(), "padding"_a = 0, "dilation"_a = 1, "ceil_mode"_a = false, "return_indices"_a = false);
  m.def("avg_pool1d",
        [](const Tensor& input, nb::handle kernel_size, nb::handle stride, nb::handle padding, bool ceil_mode,
           bool count_include_pad) {
          const char* op = "avg_pool1d";
          return pyflame::avg_pool1d(input, as_ints(kernel_size, op, "kernel_size"), as_ints(stride, op, "stride", true),
                                     as_ints(padding, op, "padding"), ceil_mode, count_include_pad);
        },
        "input"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "ceil_mode"_a = false,
        "count_include_pad"_a = true);
  m.def("avg_pool2d", avg_pool_binding("avg_pool2d", &pyflame::avg_pool2d), "input"_a, "kernel_size"_a,
        "stride"_a = nb::none(), "padding"_a = 0, "ceil_mode"_a = false, "count_include_pad"_a = true,
        "divisor_override"_a = nb::none());
  m.def("avg_pool3d", avg_pool_binding("avg_pool3d", &pyflame::avg_pool3d), "input"_a, "kernel_size"_a,
        "stride"_a = nb::none(), "padding"_a = 0, "ceil_mode"_a = false, "count_include_pad"_a = true,
        "divisor_override"_a = nb::none());
  m.def("adaptive_avg_pool2d",
        [](const Tensor& input, nb::handle output_size) {
          const char* op = "adaptive_avg_pool2d";
          std::vector<std::optional<int64_t>> sizes;
          if (PyIndex_Check(output_size.ptr())) {
            sizes.push_back(nb::cast<int64_t>(nb::int_(output_size)));
          } else if (PySequence_Check(output_size.ptr()) && !nb::isinstance<nb::str>(output_size)) {
            for (nb::handle x : nb::borrow<nb::sequence>(output_size)) {
              if (x.is_none()) sizes.push_back(std::nullopt);
              else if (PyIndex_Check(x.ptr())) sizes.push_back(nb::cast<int64_t>(nb::int_(x)));
              else throw pyflame::TypeError(std::string(op) + ": output_size entries must be ints or None, got " +
                                            py_type_name(x));
            }
          } else {
            throw pyflame::TypeError(std::string(op) + ": output_size must be an int or a tuple of ints/None, got " +
                                     py_type_name(output_size));
          }
          return pyflame::adaptive_avg_pool2d(input, sizes);
        },
        "input"_a, "output_size"_a);

  // ---- pooling's backward passes (what autograd runs; PyTorch's aten *_backward ops)
  const char* max_backward_doc =
      "The gradient of max pooling's input from its output's gradient: each output's gradient goes to the first "
      "maximum of its window (the last NaN, as PyTorch), found again from the input.";
  m.def("max_pool2d_backward", max_pool_backward_binding("max_pool2d_backward", &pyflame::max_pool2d_backward),
        "grad"_a, "input"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "dilation"_a = 1,
        "ceil_mode"_a = false, max_backward_doc);
  m.def("max_pool3d_backward", max_pool_backward_binding("max_pool3d_backward", &pyflame::max_pool3d_backward),
        "grad"_a, "input"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "dilation"_a = 1,
        "ceil_mode"_a = false, max_backward_doc);
  const char* avg_backward_doc =
      "The gradient of average pooling's input, of shape input_size, from its output's gradient.";
  m.def("avg_pool2d_backward", avg_pool_backward_binding("avg_pool2d_backward", &pyflame::avg_pool2d_backward),
        "grad"_a, "input_size"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "ceil_mode"_a = false,
        "count_include_pad"_a = true, "divisor_override"_a = nb::none(), avg_backward_doc);
  m.def("avg_pool3d_backward", avg_pool_backward_binding("avg_pool3d_backward", &pyflame::avg_pool3d_backward),
        "grad"_a, "input_size"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "ceil_mode"_a = false,
        "count_include_pad"_a = true, "divisor_override"_a = nb::none(), avg_backward_doc);
  m.def("adaptive_avg_pool2d_backward",
        [](const Tensor& grad, nb::handle input_size) {
          return pyflame::adaptive_avg_pool2d_backward(
              grad, as_ints(input_size, "adaptive_avg_pool2d_backward", "input_size"));
        },
        "grad"_a, "input_size"_a,
        "The gradient of adaptive_avg_pool2d's input, of shape input_size, from its output's gradient.");

  m.def("pad",
        [](const Tensor& input, nb::handle pad, const std::string& mode, nb::handle value) {
          Scalar v = value.is_none() ? Scalar(0.0) : as_scalar(value, "pad value");
          Ints p;
          for (nb::handle x : nb::borrow<nb::sequence>(pad)) {
            if (!PyIndex_Check(x.ptr()))
              throw pyflame::TypeError("pad: the padding must be a sequence of ints, got an entry of type " +
                                       py_type_name(x));
            p.push_back(nb::cast<int64_t>(nb::int_(x)));
          }
          return pyflame::pad(input, p, mode, v);
        },
        "input"_a, "pad"_a, "mode"_a = "constant", "value"_a = nb::none(),
        "Constant padding, last dim first: pad=(left, right, top, bottom, ...); negative values crop.");
}

}  // namespace pyflame::python
