// The conv area's op layer (include/pyflame/conv_ops.h): convolution,
// transposed convolution, pooling and its backward passes, and constant
// padding. The table ops (conv2d, conv3d, conv_transpose2d,
// max/avg_pool2d/3d, adaptive_avg_pool2d and the pools' *_backward) are
// inferred here: arguments checked against PyTorch's limits, per-dim
// values made one per spatial dim, and the kernel handed contiguous
// (N, C, spatial...) inputs of the input's dtype (an unbatched input gets a
// batch dim of 1, dropped from the result). The 1-D ops are checked as 1-D
// and then run as the 2-D ops on views with a spatial dim of 1 in front of
// the length, so every device with a 2-D kernel runs them. pad is a
// composition (fill, then copy into a view), so it runs on every device.

#include <algorithm>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/derivative.h"
#include "core/dispatch.h"
#include "core/op_utils.h"
#include "core/thread_state.h"
#include "pyflame/grad_mode.h"
#include "pyflame/conv_ops.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {
namespace {

using Ints = std::vector<int64_t>;

// A per-dim argument as one value per spatial dim.
Ints per_dim(const char* op, const char* what, const Ints& v, int64_t nd) {
  if (v.size() == 1) return Ints(nd, v[0]);
  PF_CHECK(static_cast<int64_t>(v.size()) == nd, ValueError, op, ": ", what, " must be an int or ", nd,
           " ints (one per spatial dim), got ", Shape(v));
  return v;
}

void check_min(const char* op, const char* what, const Ints& v, int64_t min) {
  for (int64_t x : v)
    PF_CHECK(x >= min, ValueError, op, ": ", what, " must be ", min > 0 ? "positive" : "non-negative", ", got ",
             Shape(v));
}

void check_float(const char* op, const Tensor& x) {
  PF_CHECK(is_floating(x.dtype()), TypeError, op, ": expected a floating-point input, got ", x.dtype(),
           " (convert with .to(float32))");
}

void check_same_dtype(const char* op, const char* what, const Tensor& t, const Tensor& input) {
  PF_CHECK(t.dtype() == input.dtype(), TypeError, op, ": the ", what, " has dtype ", t.dtype(), " but the input has ",
           input.dtype(), "; convert one with .to()");
}

// (C, spatial...) or (N, C, spatial...).
void check_input_rank(const char* op, const Shape& x, int64_t nd) {
  const int64_t rank = static_cast<int64_t>(x.size());
  PF_CHECK(rank == nd + 1 || rank == nd + 2, ValueError, op, ": expected a ", nd + 1, "-D (unbatched) or ", nd + 2,
           "-D (batched) input, got shape ", x);
}
void check_input_rank(const char* op, const Tensor& x, int64_t nd) { check_input_rank(op, x.shape(), nd); }

bool unbatched(const Shape& x, int64_t nd) { return static_cast<int64_t>(x.size()) == nd + 1; }
bool unbatched(const Tensor& x, int64_t nd) { return unbatched(x.shape(), nd); }

// An unbatched (C, spatial...) shape with a batch of 1 in front.
Shape batched_shape(Shape s, int64_t nd) {
  if (unbatched(s, nd)) s.insert(s.begin(), 1);
  return s;
}

// The plan of a (N, C, spatial...) input: batched, contiguous.
InputPlan batched_plan(const Tensor& x, int64_t nd) {
  InputPlan p;
  if (unbatched(x, nd)) p.reshape = batched_shape(x.shape(), nd);
  p.contiguous = true;
  return p;
}

InputPlan contiguous_plan() {
  InputPlan p;
  p.contiguous = true;
  return p;
}

// The output plan: kernel shape `out` (batched); an unbatched input's result drops the batch dim.
OutputPlan batched_output(const Shape& out, DType dtype, bool drop_batch) {
  OutputPlan p{out, dtype};
  if (drop_batch) p.result = Shape(out.begin() + 1, out.end());
  return p;
}

// 1-D arguments as the 2-D op's: a size-1 spatial dim in front of the length.
Ints lift(const Ints& v, int64_t front) { return {front, v[0]}; }

const char* conv_name(int64_t nd) { return nd == 1 ? "conv1d" : nd == 2 ? "conv2d" : "conv3d"; }

void check_conv_weight(const char* op, const Tensor& weight, int64_t nd, const char* layout) {
  PF_CHECK(weight.dim() == nd + 2, ValueError, op, ": expected a ", nd + 2, "-D weight ", layout, ", got shape ",
           weight.shape());
}

// What the convolution and its transpose check alike: a floating input with `nd` spatial dims,
// a weight of its dtype laid out as `weight_layout`, stride, padding, dilation (and the
// transpose's output_padding) one per spatial dim and in range, positive groups.
void check_conv_operands(const char* op, int64_t nd, const Tensor& input, const Tensor& weight,
                         const char* weight_layout, bool transposed, ConvAttrs& a) {
  check_float(op, input);
  check_same_dtype(op, "weight", weight, input);
  check_input_rank(op, input, nd);
  check_conv_weight(op, weight, nd, weight_layout);
  a.stride = per_dim(op, "stride", a.stride, nd);
  a.padding = per_dim(op, "padding", a.padding, nd);
  if (transposed)
    a.output_padding = per_dim(op, "output_padding", a.output_padding, nd);
  else
    a.output_padding.clear();
  a.dilation = per_dim(op, "dilation", a.dilation, nd);
  check_min(op, "stride", a.stride, 1);
  check_min(op, "padding", a.padding, 0);
  check_min(op, "output_padding", a.output_padding, 0);
  check_min(op, "dilation", a.dilation, 1);
  PF_CHECK(a.groups > 0, ValueError, op, ": groups must be positive, got ", a.groups);
}

void check_bias(const char* op, const Tensor& bias, const Tensor& input, int64_t out_channels) {
  if (!bias.defined()) return;
  check_same_dtype(op, "bias", bias, input);
  PF_CHECK(bias.dim() == 1 && bias.shape()[0] == out_channels, ValueError, op, ": expected a bias of shape [",
           out_channels, "], got ", bias.shape());
}

// Checks a convolution with `nd` spatial dims, makes `a` canonical, and
// returns the (batched) output shape.
Shape check_convolution(int64_t nd, const Tensor& input, const Tensor& weight, const Tensor& bias, ConvAttrs& a) {
  const char* op = conv_name(nd);
  check_conv_operands(op, nd, input, weight, "(out_channels, in_channels / groups, kernel...)", false, a);
  const int64_t channels = input.shape()[unbatched(input, nd) ? 0 : 1], out_channels = weight.shape()[0];
  PF_CHECK(channels % a.groups == 0, ValueError, op, ": the input's ", channels, " channels (input shape ",
           input.shape(), ") are not divisible by groups=", a.groups);
  PF_CHECK(out_channels % a.groups == 0, ValueError, op, ": the weight's ", out_channels,
           " output channels (weight shape ", weight.shape(), ") are not divisible by groups=", a.groups);
  PF_CHECK(weight.shape()[1] * a.groups == channels, ValueError, op, ": expected an input with ",
           weight.shape()[1] * a.groups, " channels (weight shape ", weight.shape(), ", groups=", a.groups, "), got ",
           channels, " channels (input shape ", input.shape(), ")");
  check_bias(op, bias, input, out_channels);
  Shape out_shape = {unbatched(input, nd) ? 1 : input.shape()[0], out_channels};
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t size = input.shape()[input.dim() - nd + i], k = weight.shape()[2 + i];
    const int64_t padded = size + 2 * a.padding[i], span = a.dilation[i] * (k - 1) + 1;
    PF_CHECK(span <= padded, ValueError, op, ": the kernel (", k, " wide, spanning ", span, " with dilation ",
             a.dilation[i], ") is larger than the padded input (", size, " + 2 * ", a.padding[i], " = ", padded,
             ") in spatial dim ", i, "; input shape ", input.shape(), ", weight shape ", weight.shape());
    out_shape.push_back((padded - span) / a.stride[i] + 1);
  }
  return out_shape;
}

// conv2d and conv3d: input, weight, bias (undefined: none).
Inferred infer_conv(OpCall& call) {
  const int64_t nd = call.op == ir::OpType::conv3d ? 3 : 2;
  const Tensor &input = call.inputs[0], &weight = call.inputs[1], &bias = call.inputs[2];
  Shape out = check_convolution(nd, input, weight, bias, std::get<ConvAttrs>(call.attrs));
  Inferred inf{current_device(),
               {batched_plan(input, nd), contiguous_plan(), contiguous_plan()},
               {batched_output(out, input.dtype(), unbatched(input, nd))},
               {}};
  if (weight.shape()[1] == 0 && !bias.defined()) inf.constant = Scalar(0.0);  // no input channels: empty sums
  return inf;
}

Inferred infer_conv_transpose(OpCall& call) {
  const char* op = "conv_transpose2d";
  const int64_t nd = 2;
  const Tensor &input = call.inputs[0], &weight = call.inputs[1], &bias = call.inputs[2];
  auto& a = std::get<ConvAttrs>(call.attrs);
  check_conv_operands(op, nd, input, weight, "(in_channels, out_channels / groups, kH, kW)", true, a);
  const int64_t channels = input.shape()[unbatched(input, nd) ? 0 : 1], out_channels = weight.shape()[1] * a.groups;
  PF_CHECK(weight.shape()[0] == channels, ValueError, op, ": expected an input with ", weight.shape()[0],
           " channels (weight shape ", weight.shape(), "), got ", channels, " channels (input shape ", input.shape(),
           ")");
  PF_CHECK(channels % a.groups == 0, ValueError, op, ": the input's ", channels, " channels (input shape ",
           input.shape(), ") are not divisible by groups=", a.groups);
  check_bias(op, bias, input, out_channels);
  Shape out_shape = {unbatched(input, nd) ? 1 : input.shape()[0], out_channels};
  for (int64_t i = 0; i < nd; ++i) {
    PF_CHECK(a.output_padding[i] < a.stride[i] || a.output_padding[i] < a.dilation[i], ValueError, op,
             ": output_padding must be smaller than either stride or dilation, got output_padding ",
             Shape(a.output_padding), ", stride ", Shape(a.stride), ", dilation ", Shape(a.dilation));
    const int64_t size = input.shape()[input.dim() - nd + i];
    PF_CHECK(size > 0, ValueError, op, ": expected non-empty spatial dims, got input shape ", input.shape());
    const int64_t out = (size - 1) * a.stride[i] - 2 * a.padding[i] + a.dilation[i] * (weight.shape()[2 + i] - 1) +
                        a.output_padding[i] + 1;
    PF_CHECK(out > 0, ValueError, op, ": the output size ", out, " in spatial dim ", i, " is too small (input shape ",
             input.shape(), ", weight shape ", weight.shape(), ", stride ", Shape(a.stride), ", padding ",
             Shape(a.padding), ")");
    out_shape.push_back(out);
  }
  return {current_device(),
          {batched_plan(input, nd), contiguous_plan(), contiguous_plan()},
          {batched_output(out_shape, input.dtype(), unbatched(input, nd))},
          {}};
}

// conv_weight_backward: input, grad_output (the forward's output shape), weight (its shape only).
Inferred infer_conv_weight_backward(OpCall& call) {
  const char* op = "conv_weight_backward";
  const Tensor &input = call.inputs[0], &grad = call.inputs[1], &weight = call.inputs[2];
  PF_CHECK(weight.dim() == 4 || weight.dim() == 5, ValueError, op,
           ": expected a 4-D or 5-D weight (a conv2d or conv3d weight), got shape ", weight.shape());
  const int64_t nd = weight.dim() - 2;
  Shape out = check_convolution(nd, input, weight, Tensor(), std::get<ConvAttrs>(call.attrs));
  check_same_dtype(op, "grad_output", grad, input);
  Shape expected = out;
  if (unbatched(input, nd)) expected.erase(expected.begin());
  PF_CHECK(grad.shape() == expected, ValueError, op, ": grad_output has shape ", grad.shape(),
           " but the convolution of input ", input.shape(), " by weight ", weight.shape(), " has shape ", expected);
  Inferred inf{current_device(), {batched_plan(input, nd), batched_plan(grad, nd), {}}, {{weight.shape(), input.dtype()}},
               {}};
  if (input.numel() == 0 || grad.numel() == 0) inf.constant = Scalar(0.0);  // empty sums
  return inf;
}

Tensor conv_call(ir::OpType op, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                 ConvAttrs attrs) {
  return apply_one(op, {input, weight, bias.value_or(Tensor())}, std::move(attrs));
}

// conv<nd>d. The 1-D form is checked as itself, then runs as conv2d on views
// with a spatial dim of 1 in front of the length.
Tensor convolution(int64_t nd, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,
                   Ints stride, Ints padding, Ints dilation, int64_t groups) {
  ConvAttrs a{std::move(stride), std::move(padding), std::move(dilation), {}, groups};
  if (nd == 3) return conv_call(ir::OpType::conv3d, input, weight, bias, std::move(a));
  if (nd == 2) return conv_call(ir::OpType::conv2d, input, weight, bias, std::move(a));
  check_convolution(1, input, weight, bias.value_or(Tensor()), a);
  ConvAttrs lifted{lift(a.stride, 1), lift(a.padding, 0), lift(a.dilation, 1), {}, a.groups};
  return squeeze(conv_call(ir::OpType::conv2d, unsqueeze(input, -2), unsqueeze(weight, 2), bias, std::move(lifted)), {-2});
}

// conv2d_batch_norm: conv2d's checks and plans, then batch_norm's running statistics (needed:
// it is batch_norm in eval) and affine parameters (absent: 1 and 0), one per output channel, in
// the weight's dtype.
Inferred infer_conv2d_batch_norm(OpCall& call) {
  const char* op = "conv2d_batch_norm";
  const auto& a = call.attr<ConvBatchNormAttrs>();
  OpCall conv{ir::OpType::conv2d, {call.inputs[0], call.inputs[1], call.inputs[2]}, a.conv, {}};
  Inferred inf = infer_conv(conv);
  inf.constant.reset();  // no input channels still leaves the shift
  const Tensor& weight = call.inputs[1];
  const char* names[] = {"running_mean", "running_var", "bn weight", "bn bias"};
  for (int i = 0; i < 4; ++i) {
    const Tensor& t = call.inputs[3 + i];
    PF_CHECK(i >= 2 || t.defined(), ValueError, op, ": ", names[i], " is needed (batch_norm in eval)");
    if (t.defined()) {
      PF_CHECK(t.dim() == 1 && t.shape()[0] == weight.shape()[0], ValueError, op, ": ", names[i],
               " must have one value per output channel, shape (", weight.shape()[0], ",), got ", t.shape());
      PF_CHECK(t.dtype() == weight.dtype(), TypeError, op, ": ", names[i], " has dtype ", t.dtype(),
               " but the weight has ", weight.dtype());
    }
    inf.inputs.push_back(InputPlan{});
  }
  return inf;
}

// conv2d_batch_norm's folded weights and biases, by what they were made from: each source's
// storage serial (never reused), version (bumped by every write: an optimizer step,
// load_state_dict, the running statistics' update in training), offset and shape, and eps.
// A hit is what folding again would give, without the fold's half-dozen small calls on each
// run. Kept: the last kFoldCacheSize folds (the convolutions of a few models), least recently
// used out.
class FoldCache {
 public:
  static constexpr size_t kFoldCacheSize = 512;
  using Folded = std::pair<Tensor, Tensor>;  // weight, bias

  std::optional<Folded> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }
  void insert(const std::string& key, Folded folded) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.count(key)) return;
    order_.emplace_front(key, std::move(folded));
    index_[key] = order_.begin();
    if (order_.size() > kFoldCacheSize) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

 private:
  std::mutex mutex_;
  std::list<std::pair<std::string, Folded>> order_;  // most recently used first
  std::unordered_map<std::string, std::list<std::pair<std::string, Folded>>::iterator> index_;
};

FoldCache& fold_cache() {
  // Never destroyed: its GPU tensors must not be freed at exit, after the GPU runtime.
  static FoldCache* cache = new FoldCache;
  return *cache;
}

std::string fold_key(const OpCall& call, double eps) {
  std::string key(reinterpret_cast<const char*>(&eps), sizeof(eps));
  auto add = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  for (size_t i = 1; i < call.inputs.size(); ++i) {
    const Tensor& t = call.inputs[i];
    if (!t.defined()) {
      add(-1);
      continue;
    }
    add(static_cast<int64_t>(t.storage()->serial())), add(static_cast<int64_t>(t.storage()->version()));
    add(t.offset()), add(static_cast<int64_t>(t.dtype()));
    for (int64_t d : t.shape()) add(d);
    for (int64_t d : t.strides()) add(d);
  }
  return key;
}

// batch_norm in eval is y * s + (beta - mean * s) per channel, s = gamma / sqrt(var + eps): a
// convolution by the weights scaled by s, with bias (bias - mean) * s + beta. The scaled weights
// come from the fold cache where its ops need not run: not where autograd records them (the
// parameters' gradients flow through them), not while a device graph is captured (the graph
// must fold on each launch, or it would keep this call's tensors).
std::vector<Tensor> conv2d_batch_norm_composite(const OpCall& call) {
  const auto& a = call.attr<ConvBatchNormAttrs>();
  const Tensor &weight = call.inputs[1], &bias = call.inputs[2], &mean = call.inputs[3], &var = call.inputs[4],
               &gamma = call.inputs[5], &beta = call.inputs[6];
  bool cached = !thread_state().capturing;
  for (size_t i = 1; i < call.inputs.size(); ++i)
    cached = cached && !(autograd::is_grad_enabled() && call.inputs[i].defined() && call.inputs[i].requires_grad());
  const std::string key = cached ? fold_key(call, a.eps) : std::string();
  std::optional<FoldCache::Folded> folded = cached ? fold_cache().find(key) : std::nullopt;
  if (!folded) {
    Tensor scale = rsqrt(add(var, Scalar(a.eps)));
    if (gamma.defined()) scale = mul(scale, gamma);
    Tensor shift = bias.defined() ? mul(sub(bias, mean), scale) : neg(mul(mean, scale));
    if (beta.defined()) shift = add(shift, beta);
    Shape per_channel(weight.dim(), 1);
    per_channel[0] = weight.shape()[0];
    folded = FoldCache::Folded{mul(weight, reshape(scale, per_channel)), shift};
    if (cached) fold_cache().insert(key, *folded);
  }
  Tensor y = conv_call(ir::OpType::conv2d, call.inputs[0], folded->first, folded->second, a.conv);
  return {a.relu ? relu(y) : y};
}

PF_REGISTER_INFER(conv2d, &infer_conv);
PF_REGISTER_COMPOSITE(conv2d_batch_norm, &infer_conv2d_batch_norm, &conv2d_batch_norm_composite);
PF_REGISTER_INFER(conv3d, &infer_conv);
PF_REGISTER_INFER(conv_transpose2d, &infer_conv_transpose);

}  // namespace

Tensor conv1d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, Ints stride,
              Ints padding, Ints dilation, int64_t groups) {
  return convolution(1, input, weight, bias, std::move(stride), std::move(padding), std::move(dilation), groups);
}
Tensor conv2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, Ints stride,
              Ints padding, Ints dilation, int64_t groups) {
  return convolution(2, input, weight, bias, std::move(stride), std::move(padding), std::move(dilation), groups);
}
Tensor conv3d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, Ints stride,
              Ints padding, Ints dilation, int64_t groups) {
  return convolution(3, input, weight, bias, std::move(stride), std::move(padding), std::move(dilation), groups);
}

Tensor detail::conv_padding_mode(int64_t nd, const Tensor& input, const Tensor& weight,
                                 const std::optional<Tensor>& bias, Ints stride, const std::string& padding,
                                 Ints dilation, int64_t groups) {
  const char* op = conv_name(nd);
  if (padding == "valid") return convolution(nd, input, weight, bias, stride, {0}, dilation, groups);
  PF_CHECK(padding == "same", ValueError, op, ": padding must be 'same', 'valid', an int or ", nd,
           " ints, got '", padding, "'");
  check_input_rank(op, input, nd);
  check_conv_weight(op, weight, nd, "(out_channels, in_channels / groups, kernel...)");
  stride = per_dim(op, "stride", stride, nd);
  dilation = per_dim(op, "dilation", dilation, nd);
  check_min(op, "dilation", dilation, 1);
  PF_CHECK(std::all_of(stride.begin(), stride.end(), [](int64_t s) { return s == 1; }), ValueError, op,
           ": padding='same' is not supported for strided convolutions, got stride ", Shape(stride));
  // The total padding dilation * (kernel - 1) splits evenly but for an odd
  // total, whose extra element goes after the input (as in PyTorch): that
  // part is padded explicitly so the kernel sees symmetric padding.
  Ints symmetric(nd), extra(2 * nd, 0);
  bool asymmetric = false;
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t total = dilation[i] * (weight.shape()[2 + i] - 1);
    symmetric[i] = total / 2;
    extra[2 * (nd - 1 - i) + 1] = total % 2;  // pad() lists the last dim first
    asymmetric = asymmetric || total % 2;
  }
  return convolution(nd, asymmetric ? pad(input, extra) : input, weight, bias, stride, symmetric, dilation, groups);
}

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, Ints stride,
                        Ints padding, Ints output_padding, int64_t groups, Ints dilation) {
  return conv_call(ir::OpType::conv_transpose2d, input, weight, bias,
                   ConvAttrs{std::move(stride), std::move(padding), std::move(dilation), std::move(output_padding),
                             groups});
}

Tensor conv_weight_backward(const Tensor& input, const Tensor& grad_output, const Tensor& weight, Ints stride,
                            Ints padding, Ints dilation, int64_t groups) {
  return apply_one(ir::OpType::conv_weight_backward, {input, grad_output, weight},
                   ConvAttrs{std::move(stride), std::move(padding), std::move(dilation), {}, groups});
}

// ------------------------------------------------------------------ pooling

namespace {

const char* pool_name(bool is_max, int64_t nd) {
  static const char* names[2][3] = {{"avg_pool1d", "avg_pool2d", "avg_pool3d"},
                                    {"max_pool1d", "max_pool2d", "max_pool3d"}};
  return names[is_max][nd - 1];
}

// PyTorch's pooling_output_shape: with ceil_mode the last window must still
// start inside the input or its left padding.
int64_t pooled_size(int64_t size, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t span = d * (k - 1) + 1, room = size + 2 * p - span + (ceil_mode ? s - 1 : 0);
  int64_t out = (room >= 0 ? room / s : -((-room + s - 1) / s)) + 1;  // floor division
  if (ceil_mode && (out - 1) * s >= size + p) --out;
  return out;
}

// Batched input rank, non-empty channel and spatial dims (the batch may be empty).
void check_pool_shape(const char* op, const Shape& x, int64_t nd) {
  check_input_rank(op, x, nd);
  const int64_t rank = static_cast<int64_t>(x.size());
  for (int64_t d = rank - nd - 1; d < rank; ++d)
    PF_CHECK(x[d] > 0, ValueError, op, ": expected non-empty channel and spatial dims, got input shape ", x);
}
void check_pool_input(const char* op, const Tensor& x, int64_t nd) {
  check_float(op, x);
  check_pool_shape(op, x.shape(), nd);
}

// Checks a pooling with `nd` spatial dims of an input of shape `input`, makes
// `a` canonical, and returns the (batched) output shape.
Shape check_pool(const char* op, int64_t nd, const Shape& input, PoolAttrs& a) {
  check_pool_shape(op, input, nd);
  a.kernel_size = per_dim(op, "kernel_size", a.kernel_size, nd);
  a.stride = a.stride.empty() ? a.kernel_size : per_dim(op, "stride", a.stride, nd);
  a.padding = per_dim(op, "padding", a.padding, nd);
  a.dilation = per_dim(op, "dilation", a.dilation, nd);
  check_min(op, "kernel_size", a.kernel_size, 1);
  check_min(op, "stride", a.stride, 1);
  check_min(op, "padding", a.padding, 0);
  check_min(op, "dilation", a.dilation, 1);
  const int64_t rank = static_cast<int64_t>(input.size());
  Shape out_shape = {unbatched(input, nd) ? 1 : input[0], input[rank - nd - 1]};
  for (int64_t i = 0; i < nd; ++i) {
    PF_CHECK(a.padding[i] <= a.kernel_size[i] / 2, ValueError, op,
             ": padding must be at most half of the kernel size, got padding ", Shape(a.padding), " for kernel_size ",
             Shape(a.kernel_size));
    const int64_t size = input[rank - nd + i];
    const int64_t out = pooled_size(size, a.kernel_size[i], a.stride[i], a.padding[i], a.dilation[i], a.ceil_mode);
    PF_CHECK(out > 0, ValueError, op, ": the output size ", out, " in spatial dim ", i, " is too small (input shape ",
             input, ", kernel_size ", Shape(a.kernel_size), ", dilation ", Shape(a.dilation), ", padding ",
             Shape(a.padding), ")");
    out_shape.push_back(out);
  }
  return out_shape;
}

// The pooling infers take the op's spatial rank nd as registered (2 or 3).
template <int64_t nd> Inferred infer_pool(OpCall& call) {
  const Tensor& input = call.inputs[0];
  check_float(op_name(call.op), input);
  Shape out = check_pool(op_name(call.op), nd, input.shape(), std::get<PoolAttrs>(call.attrs));
  return {current_device(), {batched_plan(input, nd)}, {batched_output(out, input.dtype(), unbatched(input, nd))}, {}};
}

// Adaptive pooling of an input of shape `input` to a.output_size: the (batched) output shape.
Shape check_adaptive_pool(const char* op, const Shape& input, const PoolAttrs& a) {
  check_pool_shape(op, input, 2);
  PF_CHECK(a.output_size.size() == 2, ValueError, op, ": output_size must have 2 entries, got ", Shape(a.output_size));
  for (int64_t size : a.output_size)
    PF_CHECK(size >= 0, ValueError, op, ": output_size entries must be non-negative, got ", size);
  const int64_t rank = static_cast<int64_t>(input.size());
  return {unbatched(input, 2) ? 1 : input[0], input[rank - 3], a.output_size[0], a.output_size[1]};
}

Inferred infer_adaptive_pool(OpCall& call) {
  const char* op = "adaptive_avg_pool2d";
  const Tensor& input = call.inputs[0];
  check_float(op, input);
  Shape out = check_adaptive_pool(op, input.shape(), std::get<PoolAttrs>(call.attrs));
  return {current_device(), {batched_plan(input, 2)}, {batched_output(out, input.dtype(), unbatched(input, 2))}, {}};
}

// The backward ops' gradient: a float tensor of the forward's output shape
// (`out`, batched; without the batch dim for an unbatched input).
void check_pool_grad(const char* op, const Tensor& grad, const Shape& input, const Shape& out, int64_t nd) {
  PF_CHECK(is_floating(grad.dtype()), TypeError, op, ": expected a floating-point grad, got ", grad.dtype());
  const Shape want = unbatched(input, nd) ? Shape(out.begin() + 1, out.end()) : out;
  PF_CHECK(grad.shape() == want, ValueError, op, ": grad has shape ", grad.shape(), " but the pooling of an input of ",
           "shape ", input, " gives ", want);
}

// max_pool2d/3d_backward (grad, input): the result has the input's shape and
// dtype, grad is converted to it.
template <int64_t nd> Inferred infer_max_pool_backward(OpCall& call) {
  const char* op = op_name(call.op);
  const Tensor &grad = call.inputs[0], &input = call.inputs[1];
  check_float(op, input);
  Shape out = check_pool(op, nd, input.shape(), std::get<PoolAttrs>(call.attrs));
  check_pool_grad(op, grad, input.shape(), out, nd);
  InputPlan g = batched_plan(grad, nd);
  g.dtype = input.dtype();
  return {current_device(),
          {g, batched_plan(input, nd)},
          {batched_output(batched_shape(input.shape(), nd), input.dtype(), unbatched(input, nd))},
          {}};
}

// avg_pool2d/3d_backward, adaptive_avg_pool2d_backward (grad): the result has
// grad's dtype and the shape in output_size.
template <int64_t nd> Inferred infer_avg_pool_backward(OpCall& call) {
  const char* op = op_name(call.op);
  const bool adaptive = call.op == ir::OpType::adaptive_avg_pool2d_backward;
  const Tensor& grad = call.inputs[0];
  auto& a = std::get<PoolAttrs>(call.attrs);
  const Shape input = a.output_size;
  Shape out;
  if (adaptive) {  // any output size: grad's last two dims
    check_pool_shape(op, input, nd);
    PF_CHECK(grad.dim() == static_cast<int64_t>(input.size()), ValueError, op, ": grad has shape ", grad.shape(),
             " but the input has shape ", input);
    PoolAttrs sizes;
    sizes.output_size = Shape(grad.shape().end() - 2, grad.shape().end());
    out = check_adaptive_pool(op, input, sizes);
  } else {
    out = check_pool(op, nd, input, a);
  }
  check_pool_grad(op, grad, input, out, nd);
  return {current_device(),
          {batched_plan(grad, nd)},
          {batched_output(batched_shape(input, nd), grad.dtype(), unbatched(input, nd))},
          {}};
}

PF_REGISTER_INFER(max_pool2d, &infer_pool<2>);
PF_REGISTER_INFER(max_pool3d, &infer_pool<3>);
PF_REGISTER_INFER(avg_pool2d, &infer_pool<2>);
PF_REGISTER_INFER(avg_pool3d, &infer_pool<3>);
PF_REGISTER_INFER(adaptive_avg_pool2d, &infer_adaptive_pool);
PF_REGISTER_INFER(max_pool2d_backward, &infer_max_pool_backward<2>);
PF_REGISTER_INFER(max_pool3d_backward, &infer_max_pool_backward<3>);
PF_REGISTER_INFER(avg_pool2d_backward, &infer_avg_pool_backward<2>);
PF_REGISTER_INFER(avg_pool3d_backward, &infer_avg_pool_backward<3>);
PF_REGISTER_INFER(adaptive_avg_pool2d_backward, &infer_avg_pool_backward<2>);

// pool<nd>d; the 1-D form is checked as itself, then runs as the 2-D op on
// views with a spatial dim of 1 in front of the length.
Tensor pool(bool is_max, int64_t nd, const Tensor& input, PoolAttrs a) {
  const ir::OpType op2 = is_max ? ir::OpType::max_pool2d : ir::OpType::avg_pool2d;
  const ir::OpType op = nd == 3 ? (is_max ? ir::OpType::max_pool3d : ir::OpType::avg_pool3d) : op2;
  if (nd > 1) return apply_one(op, {input}, std::move(a));
  check_float(pool_name(is_max, 1), input);
  check_pool(pool_name(is_max, 1), 1, input.shape(), a);
  PoolAttrs lifted = a;
  lifted.kernel_size = lift(a.kernel_size, 1);
  lifted.stride = lift(a.stride, 1);
  lifted.padding = lift(a.padding, 0);
  lifted.dilation = lift(a.dilation, 1);
  return squeeze(apply_one(op2, {unsqueeze(input, -2)}, std::move(lifted)), {-2});
}

Tensor max_pool(int64_t nd, const Tensor& input, Ints kernel_size, Ints stride, Ints padding, Ints dilation,
                bool ceil_mode) {
  return pool(true, nd, input,
              PoolAttrs{std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation), {},
                        ceil_mode, true, 0});
}

Tensor avg_pool(int64_t nd, const Tensor& input, Ints kernel_size, Ints stride, Ints padding, bool ceil_mode,
                bool count_include_pad, std::optional<int64_t> divisor_override) {
  PF_CHECK(!divisor_override || *divisor_override != 0, ValueError, pool_name(false, nd),
           ": divisor_override must not be zero");
  return pool(false, nd, input,
              PoolAttrs{std::move(kernel_size), std::move(stride), std::move(padding), {1}, {}, ceil_mode,
                        count_include_pad, divisor_override.value_or(0)});
}

}  // namespace

Tensor max_pool1d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, Ints dilation, bool ceil_mode) {
  return max_pool(1, input, std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation),
                  ceil_mode);
}
Tensor max_pool2d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, Ints dilation, bool ceil_mode) {
  return max_pool(2, input, std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation),
                  ceil_mode);
}
Tensor max_pool3d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, Ints dilation, bool ceil_mode) {
  return max_pool(3, input, std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation),
                  ceil_mode);
}
Tensor avg_pool1d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, bool ceil_mode,
                  bool count_include_pad) {
  return avg_pool(1, input, std::move(kernel_size), std::move(stride), std::move(padding), ceil_mode,
                  count_include_pad, std::nullopt);
}
Tensor avg_pool2d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool(2, input, std::move(kernel_size), std::move(stride), std::move(padding), ceil_mode,
                  count_include_pad, divisor_override);
}
Tensor avg_pool3d(const Tensor& input, Ints kernel_size, Ints stride, Ints padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool(3, input, std::move(kernel_size), std::move(stride), std::move(padding), ceil_mode,
                  count_include_pad, divisor_override);
}

Tensor adaptive_avg_pool2d(const Tensor& input, std::vector<std::optional<int64_t>> output_size) {
  const char* op = "adaptive_avg_pool2d";
  check_pool_input(op, input, 2);
  PF_CHECK(output_size.size() == 1 || output_size.size() == 2, ValueError, op,
           ": output_size must be an int or 2 values (ints or None), got ", output_size.size(), " values");
  if (output_size.size() == 1) output_size.push_back(output_size[0]);
  PoolAttrs a;
  for (int64_t i = 0; i < 2; ++i) a.output_size.push_back(output_size[i].value_or(input.shape()[input.dim() - 2 + i]));
  return apply_one(ir::OpType::adaptive_avg_pool2d, {input}, std::move(a));
}

Tensor max_pool2d_backward(const Tensor& grad, const Tensor& input, Ints kernel_size, Ints stride, Ints padding,
                           Ints dilation, bool ceil_mode) {
  return apply_one(ir::OpType::max_pool2d_backward, {grad, input},
                   PoolAttrs{std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation), {},
                             ceil_mode, true, 0});
}
Tensor max_pool3d_backward(const Tensor& grad, const Tensor& input, Ints kernel_size, Ints stride, Ints padding,
                           Ints dilation, bool ceil_mode) {
  return apply_one(ir::OpType::max_pool3d_backward, {grad, input},
                   PoolAttrs{std::move(kernel_size), std::move(stride), std::move(padding), std::move(dilation), {},
                             ceil_mode, true, 0});
}

namespace {
Tensor avg_pool_backward(ir::OpType op, const Tensor& grad, const Shape& input_size, Ints kernel_size, Ints stride,
                         Ints padding, bool ceil_mode, bool count_include_pad,
                         std::optional<int64_t> divisor_override) {
  PF_CHECK(!divisor_override || *divisor_override != 0, ValueError, op_name(op),
           ": divisor_override must not be zero");
  return apply_one(op, {grad},
                   PoolAttrs{std::move(kernel_size), std::move(stride), std::move(padding), {1}, input_size,
                             ceil_mode, count_include_pad, divisor_override.value_or(0)});
}
}  // namespace

Tensor avg_pool2d_backward(const Tensor& grad, const Shape& input_size, Ints kernel_size, Ints stride, Ints padding,
                           bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool_backward(ir::OpType::avg_pool2d_backward, grad, input_size, std::move(kernel_size),
                           std::move(stride), std::move(padding), ceil_mode, count_include_pad, divisor_override);
}
Tensor avg_pool3d_backward(const Tensor& grad, const Shape& input_size, Ints kernel_size, Ints stride, Ints padding,
                           bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  return avg_pool_backward(ir::OpType::avg_pool3d_backward, grad, input_size, std::move(kernel_size),
                           std::move(stride), std::move(padding), ceil_mode, count_include_pad, divisor_override);
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad, const Shape& input_size) {
  PoolAttrs a;
  a.output_size = input_size;
  return apply_one(ir::OpType::adaptive_avg_pool2d_backward, {grad}, std::move(a));
}

// ------------------------------------------------------------------ pad

Tensor pad(const Tensor& input, Ints pad, const std::string& mode, Scalar value) {
  if (mode == "reflect" || mode == "replicate" || mode == "circular")
    throw NotSupportedError(detail::cat("pad: mode='", mode,
                                        "' is not supported yet, only mode='constant' (docs/ops.md)"));
  PF_CHECK(mode == "constant", ValueError, "pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '",
           mode, "'");
  const int64_t n = static_cast<int64_t>(pad.size());
  PF_CHECK(n % 2 == 0, ValueError, "pad: the padding must have an even length (pairs of before/after), got ",
           Shape(pad));
  PF_CHECK(n / 2 <= input.dim(), ValueError, "pad: ", n / 2, " padded dims (padding ", Shape(pad),
           ") but the input has only ", input.dim(), " (shape ", input.shape(), ")");
  // pad lists the last dim first: (before, after) for dim -1, then dim -2, ...
  // Negative entries crop, and may not crop more than the dim holds (as in PyTorch).
  Shape out_shape = input.shape();
  for (int64_t j = 0; j < n / 2; ++j) {
    const int64_t d = input.dim() - 1 - j, before = pad[2 * j], after = pad[2 * j + 1];
    const int64_t kept = input.shape()[d] + std::min<int64_t>(0, before) + std::min<int64_t>(0, after);
    PF_CHECK(kept >= 0, ValueError, "pad: padding (", before, ", ", after, ") of dim ", d, " crops more than its size ",
             input.shape()[d]);
    out_shape[d] = kept + std::max<int64_t>(0, before) + std::max<int64_t>(0, after);
  }
  const PlacementScope scope("pad", {input});
  const Device dev = scope.device();
  Tensor out = empty_output(out_shape, input.dtype(), dev);
  // The input (cropped) goes into a view of the output; positive padding is the border around it.
  Tensor src = input, dst = out;
  bool border = false;
  for (int64_t j = 0; j < n / 2; ++j) {
    const int64_t d = input.dim() - 1 - j, before = pad[2 * j], after = pad[2 * j + 1];
    src = slice(src, d, std::max<int64_t>(0, -before), input.shape()[d] - std::max<int64_t>(0, -after), 1);
    dst = slice(dst, d, std::max<int64_t>(0, before), out_shape[d] - std::max<int64_t>(0, after), 1);
    border = border || before > 0 || after > 0;
  }
  if (border) fill_(out, value);
  if (input.device() != dev) note_implicit_copy(input, dev, "pad");
  if (dst.numel() > 0) copy_(dst, src);
  return scope.result(out);
}


// ------------------------------------------------------------------ derivatives
namespace {

using autograd::GradContext;
using autograd::all_dims_but;
using autograd::zeros_like_shape;
using Grads = std::vector<Tensor>;

//
// Convolution backward passes that are not one library call are written per
// kernel tap: tap k of a window reads the input at positions k * dilation +
// o * stride (o over the output grid) of the padded input, a strided slice. A
// window of K taps costs K slices and K small matrix products, which keeps
// them correct for every stride, padding, dilation and group count in 2-D and 3-D.

struct Window {
  std::vector<int64_t> kernel, stride, padding, dilation;
};

// Every tap of a window, as its offset per spatial dim.
std::vector<std::vector<int64_t>> taps_of(const std::vector<int64_t>& kernel) {
  std::vector<std::vector<int64_t>> taps{{}};
  for (int64_t k : kernel) {
    std::vector<std::vector<int64_t>> next;
    for (const auto& t : taps)
      for (int64_t i = 0; i < k; ++i) {
        next.push_back(t);
        next.back().push_back(i);
      }
    taps = std::move(next);
  }
  return taps;
}

// The view of a padded (N, C, spatial...) tensor that tap `tap` reads for an output grid `out`.
Tensor tap_view(const Tensor& padded, const std::vector<int64_t>& tap, const Window& w, const Shape& out) {
  Tensor v = padded;
  for (size_t d = 0; d < tap.size(); ++d) {
    const int64_t start = tap[d] * w.dilation[d];
    v = slice(v, static_cast<int64_t>(d) + 2, start, start + w.stride[d] * (out[d + 2] - 1) + 1, w.stride[d]);
  }
  return v;
}

// Pads the spatial dims of x with zeros, `padding` before and at least
// `padding` after: enough for every tap of the output grid.
Tensor pad_for_taps(const Tensor& x, const Window& w, const Shape& out) {
  std::vector<int64_t> pads;
  for (size_t d = w.kernel.size(); d-- > 0;) {
    const int64_t need = w.stride[d] * (out[d + 2] - 1) + w.dilation[d] * (w.kernel[d] - 1) + 1;
    const int64_t have = x.shape()[d + 2] + 2 * w.padding[d];
    pads.push_back(w.padding[d]);
    pads.push_back(w.padding[d] + std::max<int64_t>(0, need - have));
  }
  return pad(x, pads, "constant", Scalar(0.0));
}

// The inverse of pad_for_taps: the input's elements of a padded gradient.
Tensor crop_padding(const Tensor& padded, const Window& w, const Shape& in) {
  Tensor v = padded;
  for (size_t d = 0; d < w.kernel.size(); ++d)
    v = slice(v, static_cast<int64_t>(d) + 2, w.padding[d], w.padding[d] + in[d + 2], 1);
  return v;
}

// Unbatched (C, spatial...) calls run batched; these add and remove that dim.
Tensor batched(const Tensor& t, bool add_dim) { return add_dim ? unsqueeze(t, 0) : t; }

// d(conv)/d(weight): per tap, sum over the batch and positions of g (N, G, Og, P) x tap^T (N, G, P, Cg).
Tensor conv_weight_grad(const Tensor& x, const Tensor& g, const Shape& w_shape, const Window& w, int64_t groups) {
  const int64_t n = x.shape()[0], cin = x.shape()[1], cout = g.shape()[1];
  Tensor padded = pad_for_taps(x, w, g.shape());
  Tensor gm = reshape(g, {n, groups, cout / groups, -1});
  std::vector<Tensor> per_tap;
  for (const auto& tap : taps_of(w.kernel)) {
    Tensor xt = reshape(tap_view(padded, tap, w, g.shape()), {n, groups, cin / groups, -1});
    per_tap.push_back(sum(matmul(gm, transpose(xt, 2, 3)), {0}));  // (G, Og, Cg)
  }
  return reshape(stack(per_tap, 3), w_shape);
}

// d(conv)/d(input): per tap, w_tap^T (G, Cg, Og) g (N, G, Og, P) added into the tap's view of a padded zero gradient.
Tensor conv_input_grad(const Tensor& g, const Tensor& weight, const Shape& x_shape, const Window& w, int64_t groups) {
  const int64_t n = x_shape[0], cin = x_shape[1], cout = g.shape()[1];
  Tensor grad_padded = pad_for_taps(zeros_like_shape(x_shape, g), w, g.shape());
  Tensor gm = reshape(g, {n, groups, cout / groups, -1});
  Tensor wm = reshape(weight, {groups, cout / groups, cin / groups, -1});  // (G, Og, Cg, taps)
  const auto taps = taps_of(w.kernel);
  for (size_t k = 0; k < taps.size(); ++k) {
    Tensor wk = transpose(select(wm, 3, static_cast<int64_t>(k)), 1, 2);  // (G, Cg, Og)
    Tensor contribution = matmul(wk, gm);                                 // (N, G, Cg, P)
    Tensor view = tap_view(grad_padded, taps[k], w, g.shape());
    binary_op_(ir::OpType::add, view, reshape(contribution, view.shape()));
  }
  return crop_padding(grad_padded, w, x_shape);
}

Window conv_window(const ConvAttrs& a, const Shape& w_shape) {
  return {Shape(w_shape.begin() + 2, w_shape.end()), a.stride, a.padding, a.dilation};
}

Grads d_conv(const GradContext& c) {
  const ConvAttrs& a = c.attr<ConvAttrs>();
  const Tensor& weight = c.input(1);
  const size_t spatial = weight.dim() - 2;
  const bool add_dim = unbatched(c.input_shape(0), spatial);
  Tensor x = batched(c.input(0), add_dim), g = batched(c.grad(), add_dim);
  const Window w = conv_window(a, weight.shape());
  Grads r(3);
  if (c.needs[0]) {
    Tensor gx;
    if (spatial == 2) {  // the library's backward-data: the transposed convolution
      std::vector<int64_t> output_padding;
      for (size_t d = 0; d < 2; ++d)
        output_padding.push_back(x.shape()[d + 2] - ((g.shape()[d + 2] - 1) * a.stride[d] - 2 * a.padding[d] +
                                                     a.dilation[d] * (w.kernel[d] - 1) + 1));
      gx = conv_transpose2d(g, weight, std::nullopt, a.stride, a.padding, output_padding, a.groups, a.dilation);
    } else {
      gx = conv_input_grad(g, weight, x.shape(), w, a.groups);
    }
    r[0] = add_dim ? squeeze(gx, {0}) : gx;
  }
  if (c.needs[1]) r[1] = conv_weight_backward(x, g, weight, a.stride, a.padding, a.dilation, a.groups);
  if (c.needs[2]) {
    // The sum of g (N, C, spatial...) over all dims but C: over the spatial dims
    // (rows, read in place), then over N (columns of a small (N, C)). One sum over
    // (0, 2, ...) would first copy g to bring those dims together (the GPU's
    // reductions move non-adjacent reduced dims innermost). float16/bfloat16 keep
    // the one sum, whose float32 accumulation an intermediate result would round.
    std::vector<int64_t> spatial_dims;
    for (int64_t d = 2; d < g.dim(); ++d) spatial_dims.push_back(d);
    const bool half = g.dtype() == DType::Float16 || g.dtype() == DType::BFloat16;
    r[2] = half ? sum(g, all_dims_but(g.dim(), 1)) : sum(sum(g, spatial_dims), {0});
  }
  return r;
}

// Devices without a conv_weight_backward kernel (AMD without MIOpen) compose it per tap.
std::vector<Tensor> conv_weight_backward_composite(const OpCall& call) {
  const ConvAttrs& a = call.attr<ConvAttrs>();
  const Tensor& weight = call.inputs[2];
  const bool add_dim = unbatched(call.inputs[0].shape(), weight.dim() - 2);
  Tensor x = batched(call.inputs[0], add_dim), g = batched(call.inputs[1], add_dim);
  return {conv_weight_grad(x, g, weight.shape(), conv_window(a, weight.shape()), a.groups)};
}

// conv_transpose2d(x, w) is the adjoint of conv2d(., w): its input gradient is
// that convolution of g, and its weight gradient the convolution's weight
// gradient with the roles of input and output exchanged.
Grads d_conv_transpose(const GradContext& c) {
  const ConvAttrs& a = c.attr<ConvAttrs>();
  const Tensor& weight = c.input(1);
  const bool add_dim = unbatched(c.input_shape(0), 2);
  Tensor x = batched(c.input(0), add_dim), g = batched(c.grad(), add_dim);
  Grads r(3);
  if (c.needs[0]) {
    Tensor gx = conv2d(g, weight, std::nullopt, a.stride, a.padding, a.dilation, a.groups);
    // An output_padding of a stride or more (allowed below the dilation) gives
    // the convolution more positions than x had: they belong to no element of x.
    for (int64_t d = 2; d < gx.dim(); ++d) gx = slice(gx, d, 0, x.shape()[d], 1);
    r[0] = add_dim ? squeeze(gx, {0}) : gx;
  }
  if (c.needs[1]) {
    // The convolution of g has x's shape, or more positions (output_padding of
    // a stride or more): x padded with zeros there, which add nothing.
    std::vector<int64_t> pads;
    bool padded = false;
    for (int64_t d = x.dim() - 1; d >= 2; --d) {
      const int64_t span = a.dilation[d - 2] * (weight.shape()[d] - 1) + 1;
      const int64_t positions = (g.shape()[d] + 2 * a.padding[d - 2] - span) / a.stride[d - 2] + 1;
      pads.push_back(0);
      pads.push_back(positions - x.shape()[d]);
      padded = padded || positions > x.shape()[d];
    }
    r[1] = conv_weight_backward(g, padded ? pad(x, pads, "constant", Scalar(0.0)) : x, weight, a.stride, a.padding,
                                a.dilation, a.groups);
  }
  if (c.needs[2]) r[2] = sum(g, all_dims_but(g.dim(), 1));
  return r;
}

// Pooling: the fused backward ops (conv_ops.h), which keep PyTorch's choice
// of the element that gets a max window's gradient.
Grads d_max_pool(const GradContext& c) {
  const PoolAttrs& a = c.attr<PoolAttrs>();
  auto backward = a.kernel_size.size() == 3 ? max_pool3d_backward : max_pool2d_backward;
  return {backward(c.grad(), c.input(0), a.kernel_size, a.stride, a.padding, a.dilation, a.ceil_mode)};
}

Grads d_avg_pool(const GradContext& c) {
  const PoolAttrs& a = c.attr<PoolAttrs>();
  auto backward = a.kernel_size.size() == 3 ? avg_pool3d_backward : avg_pool2d_backward;
  return {backward(c.grad(), c.input_shape(0), a.kernel_size, a.stride, a.padding, a.ceil_mode, a.count_include_pad,
                   a.divisor_override ? std::optional<int64_t>(a.divisor_override) : std::nullopt)};
}

Grads d_adaptive_avg_pool(const GradContext& c) { return {adaptive_avg_pool2d_backward(c.grad(), c.input_shape(0))}; }

// The average pools' backward ops are the adjoints of the (linear) pools: their own derivative
// is the pool itself, so gradients through them can be differentiated again (jvp, create_graph).
Grads d_avg_pool_backward(const GradContext& c) {
  const PoolAttrs& a = c.attr<PoolAttrs>();
  auto pool = a.kernel_size.size() == 3 ? avg_pool3d : avg_pool2d;
  return {pool(c.grad(), a.kernel_size, a.stride, a.padding, a.ceil_mode, a.count_include_pad,
               a.divisor_override ? std::optional<int64_t>(a.divisor_override) : std::nullopt)};
}

Grads d_adaptive_avg_pool_backward(const GradContext& c) {
  const Shape& pooled = c.input_shape(0);
  return {adaptive_avg_pool2d(c.grad(), {pooled[pooled.size() - 2], pooled[pooled.size() - 1]})};
}

PF_REGISTER_COMPOSITE(conv_weight_backward, &infer_conv_weight_backward, &conv_weight_backward_composite);
PF_REGISTER_DERIVATIVE(conv2d, &d_conv, autograd::kSavesInputs);
PF_REGISTER_DERIVATIVE(conv3d, &d_conv, autograd::kSavesInputs);
PF_REGISTER_DERIVATIVE(conv_transpose2d, &d_conv_transpose, autograd::kSavesInputs);
PF_REGISTER_DERIVATIVE(max_pool2d, &d_max_pool, autograd::kSavesInputs);
PF_REGISTER_DERIVATIVE(max_pool3d, &d_max_pool, autograd::kSavesInputs);
PF_REGISTER_DERIVATIVE(avg_pool2d, &d_avg_pool, autograd::kSavesNothing);
PF_REGISTER_DERIVATIVE(avg_pool3d, &d_avg_pool, autograd::kSavesNothing);
PF_REGISTER_DERIVATIVE(adaptive_avg_pool2d, &d_adaptive_avg_pool, autograd::kSavesNothing);
PF_REGISTER_DERIVATIVE(avg_pool2d_backward, &d_avg_pool_backward, autograd::kSavesNothing);
PF_REGISTER_DERIVATIVE(avg_pool3d_backward, &d_avg_pool_backward, autograd::kSavesNothing);
PF_REGISTER_DERIVATIVE(adaptive_avg_pool2d_backward, &d_adaptive_avg_pool_backward, autograd::kSavesNothing);

}  // namespace

}  // namespace pyflame
