// The op layer of include/pyflame/nn_ops.h. The table ops (var, std, cumsum, cumprod,
// the norms, dropout, nll_loss) are inferred here; their kernels get
// contiguous inputs in a fixed layout:
//   var/std     input as is; attrs dims (sorted), correction
//   cumsum, cumprod  input converted to the result dtype (at least 1-D); attrs dim
//   batch_norm  x (N, C, S), running_mean, running_var, weight, bias; when
//               training with running statistics, outputs 1 and 2 are their
//               updated values (float64), which batch_norm writes back
//   group_norm  x (N, C, S), weight, bias; attrs num_groups
//   batch_norm_backward, group_norm_backward   g and x (N, C, S) in x's dtype,
//               then the forward's per-channel tensors but bias; outputs the
//               input's gradient (N, C, S) and the weight's and bias's (C),
//               these in the compute dtype
//   layer_norm, rms_norm   x (rows, M), weight (M), bias (M)
//   dropout     x; attrs p and the Philox range of its draws
//   nll_loss    log-probabilities (N, C, S), target (N, S) int64, weight (C);
//               targets are range-checked by the kernel (kernels/kernel_error.h)
//   cross_entropy  (class-index targets) the same with logits for log-probabilities
// The norms' per-channel tensors (weight, bias, running statistics) are
// contiguous, float32 or float64 (as given; float16 and bfloat16 widened to
// float32), undefined when not given; nll_loss's class weight is float64.
// The other losses and attention are compositions of ops, computed in float32
// for float16/bfloat16 inputs and rounded once at the end.

#include "pyflame/nn_ops.h"

#include <cmath>
#include <limits>

#include "core/derivative.h"
#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/generator.h"
#include "pyflame/grad_mode.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_float(const Tensor& t, const char* op, const char* what) {
  PF_CHECK(is_floating(t.dtype()), TypeError, op, ": ", what, " must be a floating-point tensor, got ", t.dtype(),
           " (convert with .to(float32))");
}

Reduction parse_reduction(const std::string& r, const char* op) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  if (r == "none") return Reduction::None;
  throw ValueError(detail::cat(op, ": reduction must be 'mean', 'sum' or 'none', got '", r, "'"));
}

// A per-channel (or per-element) parameter of a norm: checked against its
// expected shape; the kernel gets it float64 and contiguous.
InputPlan param_plan(const Tensor& t, const Shape& expected, const char* what, const char* against, ir::OpType op) {
  if (!t.defined()) return {};
  check_float(t, op_name(op), what);
  PF_CHECK(t.shape() == expected, ValueError, op_name(op), ": ", what, " has shape ", t.shape(), " but ", against,
           " is ", expected);
  InputPlan p{DType::Float64};
  p.contiguous = true;
  return p;
}

// A norm's parameter: as param_plan, but float32 stays float32 (and float16,
// bfloat16 become float32, exactly): the kernels read float32 and float64
// alike, so a model's float32 parameters cost no conversion on every call.
InputPlan norm_param_plan(const Tensor& t, const Shape& expected, const char* what, const char* against,
                          ir::OpType op) {
  InputPlan p = param_plan(t, expected, what, against, op);
  if (t.defined() && t.dtype() != DType::Float64) p.dtype = DType::Float32;
  return p;
}

// The number of elements of dims [begin, end) of a shape.
int64_t numel_of(const Shape& s, size_t begin, size_t end) {
  return shape_numel(Shape(s.begin() + begin, s.begin() + end));
}

Inferred infer_moments(OpCall& call) {
  const Tensor& input = call.inputs[0];
  auto& a = std::get<ReduceAttrs>(call.attrs);
  check_float(input, op_name(call.op), "input");
  a.dims = normalize_dims(a.dims, input.dim(), call.op);
  return {current_device(), {{}}, {{reduced_shape(input.shape(), a.dims, a.keepdim), input.dtype()}}, {}};
}

Inferred infer_scan(OpCall& call) {
  const Tensor& input = call.inputs[0];
  auto& a = std::get<DimAttrs>(call.attrs);
  a.dim = wrap_dim(a.dim, input.dim(), op_name(call.op));
  const DType out = a.dtype.value_or(is_floating(input.dtype()) ? input.dtype() : DType::Int64);
  a.dtype = out;
  InputPlan in{out};
  Inferred inf{current_device(), {}, {{input.shape(), out}}, {}};
  if (input.dim() == 0) in.reshape = Shape{1}, inf.outputs[0] = {{1}, out, Shape{}};
  inf.inputs.push_back(in);
  return inf;
}

// layer_norm and rms_norm: the trailing dims of `input` must be normalized_shape. A 16-bit
// input's weight and bias of its own dtype stay 16-bit for the forward kernels, which read them
// as they are (a half-precision model's norms would otherwise convert them on every call: a
// launch per norm of a decode step); the backward kernels read float32.
Inferred row_norm_plan(OpCall& call, bool params_as_input) {
  const ir::OpType op = call.op;
  const char* name = op_name(op);
  const Tensor &input = call.inputs[0], &weight = call.inputs[1], &bias = call.inputs[2];
  const Shape& normalized_shape = call.attr<NormAttrs>().normalized_shape;
  check_float(input, name, "input");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  PF_CHECK(k >= 1, ValueError, name, ": normalized_shape must have at least one dimension");
  Shape trailing = input.dim() >= k ? Shape(input.shape().end() - k, input.shape().end()) : input.shape();
  PF_CHECK(input.dim() >= k && trailing == normalized_shape, ValueError, name, ": expected an input whose trailing ",
           k, " dimension(s) are normalized_shape ", normalized_shape, ", got input shape ", input.shape());
  const int64_t m = shape_numel(normalized_shape);
  const int64_t rows = numel_of(input.shape(), 0, input.shape().size() - k);
  InputPlan w = norm_param_plan(weight, normalized_shape, "weight", "normalized_shape", op);
  InputPlan b = norm_param_plan(bias, normalized_shape, "bias", "normalized_shape", op);
  if (weight.defined()) w.reshape = Shape{m};
  if (bias.defined()) b.reshape = Shape{m};
  const DType x = input.dtype();
  if (params_as_input && (x == DType::Float16 || x == DType::BFloat16) &&
      (!weight.defined() || weight.dtype() == x) && (!bias.defined() || bias.dtype() == x))
    w.dtype = b.dtype = x;
  return {current_device(), {reshaped({rows, m}), w, b}, {{{rows, m}, input.dtype(), input.shape()}}, {}};
}

Inferred infer_row_norm(OpCall& call) { return row_norm_plan(call, true); }

void check_channels_input(const Tensor& input, ir::OpType op) {
  check_float(input, op_name(op), "input");
  PF_CHECK(input.dim() >= 2, ValueError, op_name(op),
           ": expected an input of shape (N, C, ...) with at least 2 dimensions, got shape ", input.shape());
}

// Input (N, C, ...) as a contiguous (N, C, S) view.
Shape channels_shape(const Tensor& input) {
  const Shape& s = input.shape();
  return {s[0], s[1], numel_of(s, 2, s.size())};
}

Inferred infer_batch_norm(OpCall& call) {
  const ir::OpType op = ir::OpType::batch_norm;
  const Tensor &input = call.inputs[0], &running_mean = call.inputs[1], &running_var = call.inputs[2];
  const NormAttrs& a = call.attr<NormAttrs>();
  check_channels_input(input, op);
  PF_CHECK(running_mean.defined() == running_var.defined(), ValueError,
           "batch_norm: running_mean and running_var must be given together");
  PF_CHECK(a.training || running_mean.defined(), ValueError,
           "batch_norm: running_mean and running_var are needed when training=False");
  const int64_t c = input.shape()[1];
  if (a.training)
    PF_CHECK(input.numel() / std::max<int64_t>(c, 1) > 1, ValueError,
             "batch_norm: expected more than 1 value per channel when training, got input shape ", input.shape());
  const char* against = "the number of channels (input.shape[1])";
  Inferred inf{current_device(),
               {reshaped(channels_shape(input)), norm_param_plan(running_mean, {c}, "running_mean", against, op),
                norm_param_plan(running_var, {c}, "running_var", against, op),
                norm_param_plan(call.inputs[3], {c}, "weight", against, op),
                norm_param_plan(call.inputs[4], {c}, "bias", against, op)},
               {{channels_shape(input), input.dtype(), input.shape()}},
               {}};
  if (a.training && running_mean.defined())
    for (int i = 0; i < 2; ++i) inf.outputs.push_back({{c}, DType::Float64});
  return inf;
}

Inferred infer_group_norm(OpCall& call) {
  const ir::OpType op = ir::OpType::group_norm;
  const Tensor& input = call.inputs[0];
  const int64_t num_groups = call.attr<NormAttrs>().num_groups;
  check_channels_input(input, op);
  const int64_t c = input.shape()[1];
  PF_CHECK(num_groups > 0 && c % num_groups == 0, ValueError, "group_norm: num_groups (", num_groups,
           ") must be positive and divide the number of channels (", c, ") of input shape ", input.shape());
  const char* against = "the number of channels (input.shape[1])";
  return {current_device(),
          {reshaped(channels_shape(input)), norm_param_plan(call.inputs[1], {c}, "weight", against, op),
           norm_param_plan(call.inputs[2], {c}, "bias", against, op)},
          {{channels_shape(input), input.dtype(), input.shape()}},
          {}};
}

Inferred infer_dropout(OpCall& call) {
  const Tensor& input = call.inputs[0];
  const double p = call.attr<RandomAttrs>().p;
  PF_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability has to be between 0 and 1, got ", p);
  check_float(input, "dropout", "input");
  InputPlan in;
  in.contiguous = true;
  return {current_device(), {in}, {{input.shape(), input.dtype()}}, {}};
}

// The dtype cross_entropy keeps its per-element logsumexp in: the compute type.
DType lse_dtype(DType logits) { return logits == DType::Float64 ? DType::Float64 : DType::Float32; }

// nll_loss, and cross_entropy with class-index targets.
Inferred infer_nll_loss(OpCall& call) {
  const ir::OpType op = call.op;
  const char* name = op_name(op);
  const Tensor &logp = call.inputs[0], &target = call.inputs[1], &weight = call.inputs[2];
  check_float(logp, name, "input");
  PF_CHECK(logp.dim() >= 1, ValueError, name, ": input must have a class dimension, got a 0-d tensor");
  PF_CHECK(is_integral(target.dtype()), TypeError, name, ": target must hold class indices (an integer tensor), got ",
           target.dtype());
  const Shape& s = logp.shape();
  const bool batched = logp.dim() >= 2;
  const int64_t c = batched ? s[1] : s[0];
  Shape expected = batched ? s : Shape{};
  if (batched) expected.erase(expected.begin() + 1);
  PF_CHECK(target.shape() == expected, ValueError, name, ": target shape ", target.shape(), " does not match input shape ",
           s, " (expected target shape ", expected, ")");
  const int64_t n = batched ? s[0] : 1;
  const int64_t inner = batched ? numel_of(s, 2, s.size()) : 1;
  InputPlan t = reshaped({n, inner});
  t.dtype = DType::Int64;
  const Shape out = std::get<LossAttrs>(call.attrs).reduction == Reduction::None ? expected : Shape{};
  Inferred inf{current_device(),
               {reshaped({n, c, inner}), t, param_plan(weight, {c}, "weight", "the number of classes", op)},
               {{out, logp.dtype()}},
               {}};
  // cross_entropy also gives each element's logsumexp over the classes (0
  // where ignored), so that its backward pass reads the logits only once.
  if (op == ir::OpType::cross_entropy) inf.outputs.push_back({{n * inner}, lse_dtype(logp.dtype())});
  return inf;
}

// softmax_backward, log_softmax_backward: grad and output of one shape, in the output's float dtype.
Inferred infer_softmax_backward(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &grad = call.inputs[0], &output = call.inputs[1];
  check_float(output, name, "output");
  PF_CHECK(grad.shape() == output.shape(), ValueError, name, ": grad shape ", grad.shape(),
           " does not match output shape ", output.shape());
  auto& a = std::get<DimAttrs>(call.attrs);
  a.dim = wrap_dim(a.dim, output.dim(), name);
  Shape shape = output.dim() == 0 ? Shape{1} : output.shape();
  InputPlan g = reshaped(shape), y = reshaped(shape);
  g.dtype = output.dtype();
  Inferred inf{current_device(), {g, y}, {{shape, output.dtype()}}, {}};
  if (output.dim() == 0) inf.outputs[0].result = Shape{};
  return inf;
}

// layer_norm_backward, rms_norm_backward: as the forward's rows, with grad of
// the input's shape; the weight's and (layer_norm) the bias's gradients of
// normalized_shape in the compute dtype.
Inferred infer_row_norm_backward(OpCall& call) {
  const char* name = op_name(call.op);
  PF_CHECK(call.inputs[0].shape() == call.inputs[1].shape(), ValueError, name, ": grad shape ",
           call.inputs[0].shape(), " does not match input shape ", call.inputs[1].shape());
  OpCall forward{call.op, {call.inputs[1], call.inputs[2], Tensor()}, call.attrs, {}};
  Inferred inf = row_norm_plan(forward, false);
  InputPlan g = inf.inputs[0];
  g.dtype = call.inputs[1].dtype();
  const Shape& normalized_shape = call.attr<NormAttrs>().normalized_shape;
  const OutputPlan param{{shape_numel(normalized_shape)}, compute_dtype(call.inputs[1].dtype()), normalized_shape};
  Inferred r{inf.device, {g, inf.inputs[0], inf.inputs[1]}, {inf.outputs[0]}, {}};
  if (!call.attr<NormAttrs>().param_grads) return r;
  r.outputs.push_back(param);
  if (call.op == ir::OpType::layer_norm_backward) r.outputs.push_back(param);
  return r;
}

// batch_norm_backward, group_norm_backward: g of the input's shape, in its
// dtype, then the forward's plan for (input, per-channel tensors but bias);
// the weight's and bias's gradients (C) in the compute dtype.
Inferred infer_channel_norm_backward(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &grad = call.inputs[0], &input = call.inputs[1];
  PF_CHECK(grad.shape() == input.shape(), ValueError, name, ": grad shape ", grad.shape(),
           " does not match input shape ", input.shape());
  const bool batch = call.op == ir::OpType::batch_norm_backward;
  const NormAttrs& a = call.attr<NormAttrs>();
  const Tensor none;
  Inferred forward;
  if (batch) {
    PF_CHECK(a.training || (call.inputs[2].defined() && call.inputs[3].defined()), ValueError, name,
             ": running_mean and running_var are needed when training=False");
    // Training reads no running statistic.
    const Tensor& running_mean = a.training ? none : call.inputs[2];
    const Tensor& running_var = a.training ? none : call.inputs[3];
    OpCall f{ir::OpType::batch_norm, {input, running_mean, running_var, call.inputs[4], none}, call.attrs, {}};
    forward = infer_batch_norm(f);
  } else {
    OpCall f{ir::OpType::group_norm, {input, call.inputs[2], none}, call.attrs, {}};
    forward = infer_group_norm(f);
  }
  InputPlan g = forward.inputs[0];
  g.dtype = input.dtype();
  const OutputPlan param{{input.shape()[1]}, compute_dtype(input.dtype())};
  Inferred inf{forward.device, {g}, {forward.outputs[0], param, param}, {}};
  for (size_t i = 1; i < call.inputs.size(); ++i) inf.inputs.push_back(forward.inputs[i - 1]);
  return inf;
}

// cross_entropy_backward: the forward's plan for (input, target, weight); the
// gradient has the input's shape, the per-element scale and the forward's
// logsumexp the compute dtype.
Inferred infer_cross_entropy_backward(OpCall& call) {
  const Tensor& scale = call.inputs[0];
  OpCall forward{ir::OpType::cross_entropy, {call.inputs[1], call.inputs[2], call.inputs[3]}, call.attrs, {}};
  std::get<LossAttrs>(forward.attrs).reduction = Reduction::None;
  Inferred inf = infer_nll_loss(forward);
  const Tensor& input = call.inputs[1];
  const Shape& rows = *inf.inputs[1].reshape;  // (N, S)
  PF_CHECK(scale.numel() == 1 || scale.shape() == call.inputs[2].shape(), ValueError,
           "cross_entropy_backward: scale has shape ", scale.shape(), "; expected one element or the target's shape ",
           call.inputs[2].shape());
  InputPlan sp = reshaped({scale.numel() == 1 ? 1 : rows[0] * rows[1]});
  sp.dtype = lse_dtype(input.dtype());
  const Tensor& lse = call.inputs[4];
  PF_CHECK(lse.numel() == rows[0] * rows[1], ValueError, "cross_entropy_backward: lse has ", lse.numel(),
           " elements; expected one per target element (", rows[0] * rows[1], ")");
  InputPlan lp = reshaped({rows[0] * rows[1]});
  lp.dtype = sp.dtype;
  const Shape& kernel_shape = *inf.inputs[0].reshape;  // (N, C, S)
  return {inf.device,
          {sp, inf.inputs[0], inf.inputs[1], inf.inputs[2], lp},
          {{kernel_shape, input.dtype(), input.shape()}},
          {}};
}

// flash_attention's operands: query (N, H, L, E), key and value (N, Hk, S, E)
// of one 16-bit float dtype, H a multiple of Hk (grouped-query attention).
void check_attention_operands(const Tensor& q, const Tensor& k, const Tensor& v, ir::OpType op) {
  const char* name = op_name(op);
  PF_CHECK(q.dtype() == DType::Float16 || q.dtype() == DType::BFloat16 || q.dtype() == DType::Float32, TypeError, name,
           ": needs float16, bfloat16 or float32 tensors, got ", q.dtype(),
           " (scaled_dot_product_attention takes every float dtype)");
  PF_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), TypeError, name,
           ": query, key and value must have one dtype, got ", q.dtype(), ", ", k.dtype(), " and ", v.dtype());
  PF_CHECK(q.dim() == 4 && k.dim() == 4 && k.shape() == v.shape() && k.size(0) == q.size(0) &&
               k.size(3) == q.size(3),
           ValueError, name, ": query must be (N, H, L, E), key and value (N, Hk, S, E), got shapes ", q.shape(), ", ",
           k.shape(), " and ", v.shape());
  const int64_t e = q.size(3);
  PF_CHECK(e > 0 && e <= 256 && e % 8 == 0, ValueError, name, ": the head dim E must be a multiple of 8 up to 256, got ",
           e);
  PF_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, ValueError, name, ": query heads (", q.size(1),
           ") must be a multiple of key/value heads (", k.size(1), ")");
  PF_CHECK(k.size(2) > 0 || q.numel() == 0, ValueError, name, ": needs at least one key (got key of shape ",
           k.shape(), ")");
}

// The GPU kernels read rows with contiguous columns 8 elements (16 bytes) at a
// time: other layouts (a transposed view, strides not a multiple of 8) are copied.
InputPlan attention_plan(const Tensor& t) {
  bool fits = t.strides().back() == 1 && t.offset() % 8 == 0;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) fits = fits && (t.strides()[d] % 8 == 0 || t.size(d) == 1);
  InputPlan p;
  p.contiguous = !fits;
  return p;
}

Inferred infer_flash_attention(OpCall& call) {
  const Tensor &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2];
  check_attention_operands(q, k, v, call.op);
  return {current_device(),
          {attention_plan(q), attention_plan(k), attention_plan(v)},
          {{q.shape(), q.dtype()}, {{q.size(0), q.size(1), q.size(2)}, DType::Float32}},
          {}};
}

Inferred infer_rotary_embedding(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &x = call.inputs[0], &cos = call.inputs[1], &sin = call.inputs[2];
  check_float(x, name, "x");
  PF_CHECK(x.dim() >= 2 && x.dim() <= 4 && x.size(-1) % 2 == 0, ValueError, name,
           ": x must have 2 to 4 dims (..., T, D) with D even, got shape ", x.shape());
  const Shape table{x.size(-2), x.size(-1)};
  PF_CHECK(cos.dtype() == x.dtype() && sin.dtype() == x.dtype() && cos.shape() == table && sin.shape() == table,
           ValueError, name, ": cos and sin must be ", x.dtype(), " of shape (T, D) = ", table, ", got ", cos.dtype(),
           cos.shape(), " and ", sin.dtype(), sin.shape());
  InputPlan packed;
  packed.contiguous = true;
  return {current_device(), {InputPlan{}, packed, packed}, {{x.shape(), x.dtype()}}, {}};
}

Inferred infer_rotary_kv_cache(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2], &cos = call.inputs[3],
               &sin = call.inputs[4], &position = call.inputs[5], &k_cache = call.inputs[6], &v_cache = call.inputs[7];
  check_float(q, name, "q");
  PF_CHECK(q.dim() == 4 && q.size(3) % 2 == 0, ValueError, name, ": q must be (B, H, T, D) with D even, got shape ",
           q.shape());
  const int64_t b = q.size(0), t = q.size(2), d = q.size(3);
  PF_CHECK(k.dim() == 4 && k.size(0) == b && k.size(2) == t && k.size(3) == d && v.shape() == k.shape(), ValueError,
           name, ": k and v must be (B, KV, T, D) with q's (B, T, D) = (", b, ", ", t, ", ", d, "), got ", k.shape(),
           " and ", v.shape());
  PF_CHECK(k_cache.dim() == 4 && k_cache.size(0) == b && k_cache.size(1) == k.size(1) && k_cache.size(2) >= t &&
               k_cache.size(3) == d && v_cache.shape() == k_cache.shape(),
           ValueError, name, ": k_cache and v_cache must be (B, KV, L, D) = (", b, ", ", k.size(1), ", L >= ", t, ", ",
           d, "), got ", k_cache.shape(), " and ", v_cache.shape());
  const Shape table{t, d}, per_row{b, 1, t, d};
  PF_CHECK((cos.shape() == table || cos.shape() == per_row) && sin.shape() == cos.shape(), ValueError, name,
           ": cos and sin must be (T, D) = ", table, " or (B, 1, T, D) = ", per_row, ", got ", cos.shape(), " and ",
           sin.shape());
  for (const Tensor* x : {&k, &v, &cos, &sin, &k_cache, &v_cache})
    PF_CHECK(x->dtype() == q.dtype(), TypeError, name, ": every tensor but position must have q's dtype ", q.dtype(),
             ", got ", x->dtype());
  PF_CHECK(position.dtype() == DType::Int64 && position.numel() == 1, TypeError, name,
           ": position must be an int64 tensor of one element, got ", position.dtype(), position.shape());
  InputPlan packed, pos;
  packed.contiguous = true;
  pos.reshape = Shape{1};
  return {current_device(),
          {packed, packed, packed, packed, packed, pos, packed, packed},
          {{q.shape(), q.dtype()}, {k_cache.shape(), q.dtype()}, {k_cache.shape(), q.dtype()}},
          {}};
}

Inferred infer_decode_attention(OpCall& call) {
  const Tensor &q = call.inputs[0], &k = call.inputs[1], &v = call.inputs[2], &mask = call.inputs[3];
  check_attention_operands(q, k, v, call.op);
  PF_CHECK(q.size(2) == 1, ValueError, op_name(call.op), ": takes one query row per head (N, H, 1, E), got ",
           q.shape());
  if (mask.defined())
    PF_CHECK(mask.dtype() == DType::Bool && mask.shape() == Shape({k.size(0), k.size(2)}), ValueError,
             op_name(call.op), ": key_mask must be bool of shape (N, S) = ", Shape({k.size(0), k.size(2)}), ", got ",
             mask.dtype(), mask.shape());
  return {current_device(), {attention_plan(q), attention_plan(k), attention_plan(v), InputPlan{}},
          {{q.shape(), q.dtype()}}, {}};
}

Inferred infer_flash_attention_backward(OpCall& call) {
  const Tensor &grad = call.inputs[0], &q = call.inputs[1], &k = call.inputs[2], &v = call.inputs[3];
  const Tensor &out = call.inputs[4], &lse = call.inputs[5];
  check_attention_operands(q, k, v, call.op);
  PF_CHECK(grad.shape() == q.shape() && out.shape() == q.shape() && grad.dtype() == q.dtype() &&
               out.dtype() == q.dtype(),
           ValueError, op_name(call.op), ": grad_output and output must have the query's shape ", q.shape(),
           " and dtype ", q.dtype(), ", got ", grad.dtype(), grad.shape(), " and ", out.dtype(), out.shape());
  const Shape rows{q.size(0), q.size(1), q.size(2)};
  PF_CHECK(lse.dtype() == DType::Float32 && lse.shape() == rows, ValueError, op_name(call.op),
           ": logsumexp must be float32 of shape (N, H, L) = ", rows, ", got ", lse.dtype(), lse.shape());
  InputPlan packed;
  packed.contiguous = true;
  return {current_device(),
          {attention_plan(grad), attention_plan(q), attention_plan(k), attention_plan(v), attention_plan(out), packed},
          {{q.shape(), q.dtype()}, {k.shape(), k.dtype()}, {v.shape(), v.dtype()}},
          {}};
}

// flash_attention's backward recomputes the probabilities block by block from
// the saved logsumexp, as the forward made them: no (L, S) matrix in memory.
std::vector<Tensor> d_flash_attention(const autograd::GradContext& c) {
  const AttentionAttrs& a = c.attr<AttentionAttrs>();
  auto [gq, gk, gv] = flash_attention_backward(c.grad(0), c.input(0), c.input(1), c.input(2), c.output(0),
                                               c.output(1), a.is_causal, a.scale);
  return {gq, gk, gv};
}

PF_REGISTER_INFER(flash_attention, &infer_flash_attention);
PF_REGISTER_INFER(flash_attention_backward, &infer_flash_attention_backward);
PF_REGISTER_INFER(decode_attention, &infer_decode_attention);
PF_REGISTER_INFER(rotary_embedding, &infer_rotary_embedding);
PF_REGISTER_INFER(rotary_kv_cache, &infer_rotary_kv_cache);
PF_REGISTER_DERIVATIVE(flash_attention, &d_flash_attention, autograd::kSavesBoth);
PF_REGISTER_INFER(cross_entropy_backward, &infer_cross_entropy_backward);
PF_REGISTER_INFER(softmax_backward, &infer_softmax_backward);
PF_REGISTER_INFER(log_softmax_backward, &infer_softmax_backward);
PF_REGISTER_INFER(layer_norm_backward, &infer_row_norm_backward);
PF_REGISTER_INFER(rms_norm_backward, &infer_row_norm_backward);
PF_REGISTER_INFER(batch_norm_backward, &infer_channel_norm_backward);
PF_REGISTER_INFER(group_norm_backward, &infer_channel_norm_backward);
PF_REGISTER_INFER(var, &infer_moments);
PF_REGISTER_INFER(std, &infer_moments);
PF_REGISTER_INFER(cumsum, &infer_scan);
PF_REGISTER_INFER(cumprod, &infer_scan);
PF_REGISTER_INFER(layer_norm, &infer_row_norm);
PF_REGISTER_INFER(rms_norm, &infer_row_norm);
PF_REGISTER_INFER(batch_norm, &infer_batch_norm);
PF_REGISTER_INFER(group_norm, &infer_group_norm);
PF_REGISTER_INFER(dropout, &infer_dropout);
PF_REGISTER_INFER(nll_loss, &infer_nll_loss);
PF_REGISTER_INFER(cross_entropy, &infer_nll_loss);


Tensor reduce_loss(const Tensor& loss, Reduction r) {
  switch (r) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    case Reduction::Mean: break;
  }
  return mean(loss);
}

// input and target of a pointwise loss: floats of the same shape.
void check_pointwise(const Tensor& input, const Tensor& target, const char* op) {
  check_float(input, op, "input");
  check_float(target, op, "target");
  PF_CHECK(target.shape() == input.shape(), ValueError, op, ": target shape ", target.shape(),
           " does not match input shape ", input.shape());
}

// mse_loss and l1_loss: an optional weight of the input's shape.
void check_elementwise_weight(const Tensor& weight, const Tensor& input, const char* op) {
  if (!weight.defined()) return;
  check_float(weight, op, "weight");
  PF_CHECK(weight.shape() == input.shape(), ValueError, op, ": weight shape ", weight.shape(),
           " does not match input shape ", input.shape());
}

// As PyTorch: with a weight, 'mean' divides the weighted sum by the sum of the weights.
Tensor weighted_reduce(const Tensor& loss, const Tensor& weight, Reduction r) {
  if (!weight.defined()) return reduce_loss(loss, r);
  Tensor w = to(weight, loss.dtype());
  Tensor weighted = mul(loss, w);
  return r == Reduction::Mean ? div(sum(weighted), sum(w)) : reduce_loss(weighted, r);
}

// A weight that must broadcast to the input's shape without enlarging it.
void check_weight_broadcasts(const Tensor& weight, const Tensor& input, const char* op, const char* what) {
  if (!weight.defined()) return;
  check_float(weight, op, what);
  PF_CHECK(broadcast_shapes(weight.shape(), input.shape(), op) == input.shape(), ValueError, op, ": ", what,
           " of shape ", weight.shape(), " does not broadcast to the input shape ", input.shape());
}

// ---- the pointwise losses: table ops with a decomposition (composite), one
// node in a graph; autograd differentiates their parts. Inputs (input, target,
// weight, pos_weight), the optional ones undefined.

Inferred infer_pointwise_loss(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &input = call.inputs[0], &target = call.inputs[1];
  check_pointwise(input, target, name);
  const auto& a = std::get<PointwiseLossAttrs>(call.attrs);
  if (call.op == ir::OpType::smooth_l1_loss)
    PF_CHECK(a.beta >= 0, ValueError, "smooth_l1_loss: beta must be non-negative, got ", a.beta);
  if (call.op == ir::OpType::mse_loss || call.op == ir::OpType::l1_loss) {
    check_elementwise_weight(call.inputs[2], input, name);
  } else if (call.inputs.size() > 2) {
    check_weight_broadcasts(call.inputs[2], input, name, "weight");
    if (call.inputs.size() > 3) check_weight_broadcasts(call.inputs[3], input, name, "pos_weight");
  }
  Inferred inf{current_device(), {}, {{a.reduction == Reduction::None ? input.shape() : Shape{}, input.dtype()}}, {}};
  for (size_t i = 0; i < call.inputs.size(); ++i) inf.inputs.push_back(InputPlan{});
  return inf;
}

// (input, target) in the float dtype the loss computes in, and a result back in the input's dtype.
struct LossOperands {
  DType input_dtype, dt;
  Tensor x, t;
  explicit LossOperands(const OpCall& call)
      : input_dtype(call.inputs[0].dtype()), dt(compute_dtype(input_dtype)), x(to(call.inputs[0], dt)),
        t(to(call.inputs[1], dt)) {}
  std::vector<Tensor> result(const Tensor& reduced) const { return {to(reduced, input_dtype)}; }
};

std::vector<Tensor> mse_loss_composite(const OpCall& call) {
  const LossOperands o(call);
  const Tensor d = sub(o.x, o.t);
  return o.result(weighted_reduce(mul(d, d), call.inputs[2], std::get<PointwiseLossAttrs>(call.attrs).reduction));
}

std::vector<Tensor> l1_loss_composite(const OpCall& call) {
  const LossOperands o(call);
  return o.result(weighted_reduce(abs(sub(o.x, o.t)), call.inputs[2], std::get<PointwiseLossAttrs>(call.attrs).reduction));
}

std::vector<Tensor> smooth_l1_loss_composite(const OpCall& call) {
  const auto& a = std::get<PointwiseLossAttrs>(call.attrs);
  const LossOperands o(call);
  const Tensor z = abs(sub(o.x, o.t));
  if (a.beta == 0) return o.result(reduce_loss(z, a.reduction));  // the l1 loss, as PyTorch
  // 0.5 z^2 / beta below beta, z - 0.5 beta above, in PyTorch's order of operations.
  const Tensor loss =
      where(lt(z, Scalar(a.beta)), div(mul(mul(z, Scalar(0.5)), z), Scalar(a.beta)), sub(z, Scalar(0.5 * a.beta)));
  return o.result(reduce_loss(loss, a.reduction));
}

std::vector<Tensor> kl_div_composite(const OpCall& call) {
  const auto& a = std::get<PointwiseLossAttrs>(call.attrs);
  const LossOperands o(call);
  Tensor loss;
  if (a.log_target) {
    loss = mul(exp(o.t), sub(o.t, o.x));
  } else {
    // t log t - t x, with 0 log 0 = 0 (PyTorch's xlogy).
    loss = sub(where(eq(o.t, Scalar(0.0)), Tensor::scalar(Scalar(0.0)), mul(o.t, log(o.t))), mul(o.t, o.x));
  }
  Tensor out = reduce_loss(loss, a.reduction);
  if (a.batchmean && o.x.dim() > 0) out = div(out, Scalar(o.x.shape()[0]));
  return o.result(out);
}

std::vector<Tensor> binary_cross_entropy_composite(const OpCall& call) {
  const Tensor& weight = call.inputs[2];
  const LossOperands o(call);
  // -(t log x + (1 - t) log(1 - x)) with both logs clamped at -100, as PyTorch.
  const Tensor log_x = clamp(log(o.x), Scalar(-100.0), std::nullopt);
  const Tensor log_1mx = clamp(log1p(neg(o.x)), Scalar(-100.0), std::nullopt);
  Tensor loss = sub(mul(sub(o.t, Scalar(1.0)), log_1mx), mul(o.t, log_x));
  if (weight.defined()) loss = mul(loss, to(weight, o.dt));
  return o.result(reduce_loss(loss, std::get<PointwiseLossAttrs>(call.attrs).reduction));
}

std::vector<Tensor> binary_cross_entropy_with_logits_composite(const OpCall& call) {
  const Tensor &weight = call.inputs[2], &pos_weight = call.inputs[3];
  const LossOperands o(call);
  // log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)): no overflow for any x.
  const Tensor log_sigmoid = sub(minimum(o.x, Scalar(0.0)), log1p(exp(neg(abs(o.x)))));
  // (1 - t) x - (1 + (pos_weight - 1) t) log sigmoid(x), as PyTorch.
  const Tensor log_weight =
      pos_weight.defined() ? add(mul(sub(to(pos_weight, o.dt), Scalar(1.0)), o.t), Scalar(1.0)) : Tensor();
  Tensor loss = sub(mul(sub(Scalar(1.0), o.t), o.x), log_weight.defined() ? mul(log_weight, log_sigmoid) : log_sigmoid);
  if (weight.defined()) loss = mul(loss, to(weight, o.dt));
  return o.result(reduce_loss(loss, std::get<PointwiseLossAttrs>(call.attrs).reduction));
}

PF_REGISTER_COMPOSITE(mse_loss, &infer_pointwise_loss, &mse_loss_composite);
PF_REGISTER_COMPOSITE(l1_loss, &infer_pointwise_loss, &l1_loss_composite);
PF_REGISTER_COMPOSITE(smooth_l1_loss, &infer_pointwise_loss, &smooth_l1_loss_composite);
PF_REGISTER_COMPOSITE(kl_div, &infer_pointwise_loss, &kl_div_composite);
PF_REGISTER_COMPOSITE(binary_cross_entropy, &infer_pointwise_loss, &binary_cross_entropy_composite);
PF_REGISTER_COMPOSITE(binary_cross_entropy_with_logits, &infer_pointwise_loss, &binary_cross_entropy_with_logits_composite);

}  // namespace

// ---------------------------------------------------------------- statistics

Tensor var(const Tensor& input, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  return apply_one(ir::OpType::var, {input}, ReduceAttrs{dims, keepdim, correction});
}

Tensor std(const Tensor& input, const std::vector<int64_t>& dims, double correction, bool keepdim) {
  return apply_one(ir::OpType::std, {input}, ReduceAttrs{dims, keepdim, correction});
}

Tensor cumsum(const Tensor& input, int64_t dim, std::optional<DType> dtype) {
  return apply_one(ir::OpType::cumsum, {input}, DimAttrs{dim, dtype});
}

Tensor cumprod(const Tensor& input, int64_t dim, std::optional<DType> dtype) {
  return apply_one(ir::OpType::cumprod, {input}, DimAttrs{dim, dtype});
}

// ---------------------------------------------------------------- normalization

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  NormAttrs a;
  a.training = training, a.momentum = momentum, a.eps = eps;
  std::vector<Tensor> out =
      apply({ir::OpType::batch_norm, {input, running_mean, running_var, weight, bias}, std::move(a), {}});
  if (out.size() == 3) {  // the updated running statistics, written back into the caller's tensors
    autograd::GradModeGuard no_grad(false);  // buffers, never part of a graph
    Tensor rm = running_mean, rv = running_var;
    copy_(rm, out[1]);
    copy_(rv, out[2]);
  }
  return out[0];
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  NormAttrs a;
  a.normalized_shape = normalized_shape, a.eps = eps;
  return apply_one(ir::OpType::layer_norm, {input, weight, bias}, std::move(a));
}

Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, std::optional<double> eps) {
  // PyTorch's default: the epsilon of the type the statistics are computed in.
  NormAttrs a;
  a.normalized_shape = normalized_shape;
  a.eps = eps.value_or(input.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                       : std::numeric_limits<float>::epsilon());
  return apply_one(ir::OpType::rms_norm, {input, weight, Tensor()}, std::move(a));
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  NormAttrs a;
  a.num_groups = num_groups, a.eps = eps;
  return apply_one(ir::OpType::group_norm, {input, weight, bias}, std::move(a));
}

// ---------------------------------------------------------------- fused backward passes

Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim) {
  return apply_one(ir::OpType::softmax_backward, {grad, output}, DimAttrs{dim, std::nullopt});
}

Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim) {
  return apply_one(ir::OpType::log_softmax_backward, {grad, output}, DimAttrs{dim, std::nullopt});
}

std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad, const Tensor& input,
                                                       const Shape& normalized_shape, const Tensor& weight,
                                                       double eps, bool param_grads) {
  NormAttrs a;
  a.normalized_shape = normalized_shape, a.eps = eps, a.param_grads = param_grads;
  std::vector<Tensor> r = apply({ir::OpType::layer_norm_backward, {grad, input, weight}, std::move(a), {}});
  r.resize(3);
  return {std::move(r[0]), std::move(r[1]), std::move(r[2])};
}

std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad, const Tensor& input, const Shape& normalized_shape,
                                             const Tensor& weight, double eps, bool param_grads) {
  NormAttrs a;
  a.normalized_shape = normalized_shape, a.eps = eps, a.param_grads = param_grads;
  std::vector<Tensor> r = apply({ir::OpType::rms_norm_backward, {grad, input, weight}, std::move(a), {}});
  r.resize(2);
  return {std::move(r[0]), std::move(r[1])};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad, const Tensor& input,
                                                       const Tensor& running_mean, const Tensor& running_var,
                                                       const Tensor& weight, bool training, double eps) {
  NormAttrs a;
  a.training = training, a.eps = eps;
  std::vector<Tensor> r =
      apply({ir::OpType::batch_norm_backward, {grad, input, running_mean, running_var, weight}, std::move(a), {}});
  return {std::move(r[0]), std::move(r[1]), std::move(r[2])};
}

std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad, const Tensor& input, int64_t num_groups,
                                                       const Tensor& weight, double eps) {
  NormAttrs a;
  a.num_groups = num_groups, a.eps = eps;
  std::vector<Tensor> r = apply({ir::OpType::group_norm_backward, {grad, input, weight}, std::move(a), {}});
  return {std::move(r[0]), std::move(r[1]), std::move(r[2])};
}

Tensor cross_entropy_backward(const Tensor& scale, const Tensor& input, const Tensor& target, const Tensor& lse,
                              const Tensor& weight, int64_t ignore_index, double label_smoothing) {
  return apply_one(ir::OpType::cross_entropy_backward, {scale, input, target, weight, lse},
                   LossAttrs{ignore_index, Reduction::None, label_smoothing});
}

// ---------------------------------------------------------------- dropout

Tensor dropout(const Tensor& input, double p, bool training, Generator* generator) {
  PF_CHECK(p >= 0 && p <= 1, ValueError, "dropout: probability has to be between 0 and 1, got ", p);
  check_float(input, "dropout", "input");
  if (!training || p == 0 || input.numel() == 0) return input;
  RandomAttrs a;
  a.p = p;
  PhiloxRange r = generator_or_default(generator).reserve(static_cast<uint64_t>(input.numel()));
  a.seed = r.seed, a.offset = r.offset;
  return apply_one(ir::OpType::dropout, {input}, std::move(a));
}

// ---------------------------------------------------------------- losses

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction, const Tensor& weight) {
  return apply_one(ir::OpType::mse_loss, {input, target, weight},
                   PointwiseLossAttrs{parse_reduction(reduction, "mse_loss"), 1.0, false, false});
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, const Tensor& weight) {
  return apply_one(ir::OpType::l1_loss, {input, target, weight},
                   PointwiseLossAttrs{parse_reduction(reduction, "l1_loss"), 1.0, false, false});
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  return apply_one(ir::OpType::smooth_l1_loss, {input, target},
                   PointwiseLossAttrs{parse_reduction(reduction, "smooth_l1_loss"), beta, false, false});
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                const std::string& reduction) {
  return apply_one(ir::OpType::nll_loss, {input, target, weight},
                   LossAttrs{ignore_index, parse_reduction(reduction, "nll_loss"), 0.0});
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     const std::string& reduction, double label_smoothing) {
  Reduction r = parse_reduction(reduction, "cross_entropy");
  check_float(input, "cross_entropy", "input");
  PF_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError,
           "cross_entropy: label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  PF_CHECK(input.dim() >= 1, ValueError, "cross_entropy: input must have a class dimension, got a 0-d tensor");
  const int64_t class_dim = input.dim() == 1 ? 0 : 1;
  if (!is_floating(target.dtype()))
    return apply_one(ir::OpType::cross_entropy, {input, target, weight}, LossAttrs{ignore_index, r, label_smoothing});
  // Class probabilities: -sum_c weight_c q_c log p_c per sample, q smoothed
  // toward uniform; 'mean' divides by the number of samples, as PyTorch.
  PF_CHECK(target.shape() == input.shape(), ValueError, "cross_entropy: probability target shape ", target.shape(),
           " does not match input shape ", input.shape(), " (class-index targets must be an integer tensor)");
  const int64_t c = input.shape()[class_dim];
  DType dt = compute_dtype(input.dtype());
  Tensor logp = log_softmax(to(input, dt), class_dim);
  Tensor q = to(target, dt);
  if (label_smoothing > 0) q = add(mul(q, Scalar(1 - label_smoothing)), Scalar(label_smoothing / c));
  if (weight.defined()) {
    check_float(weight, "cross_entropy", "weight");
    PF_CHECK(weight.shape() == Shape{c}, ValueError, "cross_entropy: weight has shape ", weight.shape(), " but there are ",
             c, " classes");
    Shape ws(input.dim(), 1);
    ws[class_dim] = c;
    logp = mul(logp, view(to(weight, dt), ws));
  }
  Tensor loss = neg(sum(mul(logp, q), {class_dim}));
  return to(reduce_loss(loss, r), input.dtype());
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            const std::string& reduction) {
  const PointwiseLossAttrs attrs{parse_reduction(reduction, "binary_cross_entropy"), 1.0, false, false};
  if (input.numel() > 0 && is_floating(input.dtype()) && input.device().is_cpu()) {
    // As PyTorch; passing logits here instead of probabilities is a common mistake. On the CPU
    // only: on a GPU the check would copy to the host and wait (out-of-range values give NaN).
    PF_CHECK(min(input).item().f >= 0 && max(input).item().f <= 1, ValueError, "binary_cross_entropy",
             ": all elements of input should be between 0 and 1 (use binary_cross_entropy_with_logits for logits)");
  }
  return apply_one(ir::OpType::binary_cross_entropy, {input, target, weight}, attrs);
}

Tensor bce_loss(const Tensor& input, const Tensor& target, const Tensor& weight, const std::string& reduction) {
  return binary_cross_entropy(input, target, weight, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const std::string& reduction, const Tensor& pos_weight) {
  return apply_one(ir::OpType::binary_cross_entropy_with_logits, {input, target, weight, pos_weight},
                   PointwiseLossAttrs{parse_reduction(reduction, "binary_cross_entropy_with_logits"), 1.0, false, false});
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  const bool batchmean = reduction == "batchmean";  // the sum over the batch size
  PF_CHECK(batchmean || reduction == "mean" || reduction == "sum" || reduction == "none", ValueError,
           "kl_div: reduction must be 'mean', 'batchmean', 'sum' or 'none', got '", reduction, "'");
  const Reduction r = batchmean ? Reduction::Sum : parse_reduction(reduction, "kl_div");
  return apply_one(ir::OpType::kl_div, {input, target}, PointwiseLossAttrs{r, 1.0, log_target, batchmean});
}

// ---------------------------------------------------------------- attention

namespace {

// (A 0-d query gets scale 1: the infer refuses it.)
AttentionAttrs attention_attrs(const Tensor& query, bool is_causal, std::optional<double> scale) {
  return {is_causal, scale.value_or(query.dim() ? 1.0 / std::sqrt(static_cast<double>(query.size(-1))) : 1.0)};
}

// Whether flash_attention computes this call of scaled_dot_product_attention
// on `device` in `dtype`: no mask but the causal one, no dropout, (N, H, L, E)
// or (N, L, E) operands of one batch, one head dim that the kernels take.
bool flash_attention_serves(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                            double dropout_p, bool enable_gqa, Device device, DType dtype) {
  if (!find_kernel(ir::OpType::flash_attention, device.type)) return false;
  if (dtype != DType::Float16 && dtype != DType::BFloat16 && dtype != DType::Float32) return false;
  if (attn_mask.defined() || dropout_p > 0) return false;
  if (q.dim() != k.dim() || q.dim() != v.dim() || (q.dim() != 3 && q.dim() != 4) || k.shape() != v.shape())
    return false;
  if (q.size(0) != k.size(0) || q.size(0) == 0 || q.size(-2) == 0 || k.size(-2) == 0) return false;
  const int64_t e = q.size(-1);
  if (k.size(-1) != e || e % 8 != 0 || e > 256) return false;
  if (q.dim() == 4 && q.size(1) != k.size(1) && !(enable_gqa && k.size(1) > 0 && q.size(1) % k.size(1) == 0))
    return false;
  return true;
}

// Whether decode_attention computes this call of scaled_dot_product_attention, and then its
// (N, S) key mask (undefined: every key): one query row per head of (N, H, 1, E) operands that
// flash_attention's checks accept; no mask, or a bool mask that varies along the keys and the
// batch only (what a decode step's cache length or left padding gives); no dropout; no causal
// mask (with one row it would see key 0 alone); nothing for autograd to record (the op has no
// derivative). nullopt where the composite serves the call.
std::optional<Tensor> decode_attention_key_mask(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const Tensor& attn_mask, const AttentionAttrs& a) {
  if (q.dim() != 4 || k.dim() != 4 || k.shape() != v.shape() || q.size(2) != 1 || a.is_causal || a.dropout_p > 0)
    return std::nullopt;
  if (q.dtype() != DType::Float16 && q.dtype() != DType::BFloat16 && q.dtype() != DType::Float32)
    return std::nullopt;
  const int64_t batch = q.size(0), keys = k.size(2), e = q.size(3);
  if (k.size(0) != batch || batch == 0 || keys == 0 || k.size(3) != e || e % 8 != 0 || e > 256) return std::nullopt;
  if (q.size(1) != k.size(1) && !(a.enable_gqa && k.size(1) > 0 && q.size(1) % k.size(1) == 0)) return std::nullopt;
  if (autograd::is_grad_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad() ||
                                      (attn_mask.defined() && attn_mask.requires_grad())))
    return std::nullopt;
  if (!attn_mask.defined()) return Tensor();
  if (attn_mask.dtype() != DType::Bool || attn_mask.dim() > 4 || attn_mask.dim() == 0) return std::nullopt;
  Shape m(4 - attn_mask.dim(), 1);
  m.insert(m.end(), attn_mask.shape().begin(), attn_mask.shape().end());
  if (m[1] != 1 || m[2] != 1 || (m[0] != 1 && m[0] != batch) || (m[3] != 1 && m[3] != keys)) return std::nullopt;
  return expand(reshape(attn_mask, {m[0], m[3]}), {batch, keys});
}

// (query, key, value, attn_mask): the checks of torch's scaled_dot_product_attention; the output
// has the batch dims of query and key broadcast, L rows and value's last dim.
Inferred infer_scaled_dot_product_attention(OpCall& call) {
  const char* name = "scaled_dot_product_attention";
  const Tensor &query = call.inputs[0], &key = call.inputs[1], &value = call.inputs[2], &attn_mask = call.inputs[3];
  const auto& a = std::get<AttentionAttrs>(call.attrs);
  check_float(query, name, "query");
  PF_CHECK(key.dtype() == query.dtype() && value.dtype() == query.dtype(), TypeError, name,
           ": query, key and value must have the same dtype, got ", query.dtype(), ", ", key.dtype(), " and ",
           value.dtype());
  PF_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2, ValueError, name,
           ": query, key and value need at least 2 dimensions (..., L or S, E), got shapes ", query.shape(), ", ",
           key.shape(), " and ", value.shape());
  PF_CHECK(query.size(-1) == key.size(-1), ValueError, name, ": query and key must have the same last dimension, got shapes ",
           query.shape(), " and ", key.shape());
  PF_CHECK(key.size(-2) == value.size(-2), ValueError, name,
           ": key and value must have the same sequence length (dim -2), got shapes ", key.shape(), " and ",
           value.shape());
  PF_CHECK(!(a.is_causal && attn_mask.defined()), ValueError, name,
           ": pass either attn_mask or is_causal=True, not both");
  PF_CHECK(a.dropout_p >= 0 && a.dropout_p <= 1, ValueError, name, ": dropout_p has to be between 0 and 1, got ",
           a.dropout_p);
  if (attn_mask.defined())
    PF_CHECK(attn_mask.dtype() == DType::Bool || is_floating(attn_mask.dtype()), TypeError, name,
             ": attn_mask must be a bool or floating-point tensor, got ", attn_mask.dtype());
  Shape key_batch(key.shape().begin(), key.shape().end() - 2);
  if (a.enable_gqa) {
    // Grouped-query attention: each key/value head serves Hq / Hk query heads.
    PF_CHECK(query.dim() >= 3 && key.dim() >= 3 && value.dim() >= 3, ValueError, name,
             ": enable_gqa needs a head dimension (dim -3) in query, key and value");
    const int64_t hq = query.size(-3), hk = key.size(-3);
    PF_CHECK(hk > 0 && hq % hk == 0 && value.size(-3) == hk, ValueError, name,
             ": with enable_gqa the query heads (", hq, ") must be a multiple of the key/value heads (", hk, ", ",
             value.size(-3), ")");
    key_batch.back() = hq;
  }
  const int64_t l = query.size(-2), s = key.size(-2);
  Shape out = broadcast_shapes(Shape(query.shape().begin(), query.shape().end() - 2), key_batch, name);
  if (attn_mask.defined()) {
    Shape scores_shape = out;
    scores_shape.insert(scores_shape.end(), {l, s});
    bool fits;
    try {
      fits = broadcast_shapes(attn_mask.shape(), scores_shape, name) == scores_shape;
    } catch (const ValueError&) {
      fits = false;
    }
    PF_CHECK(fits, ValueError, name, ": attn_mask of shape ", attn_mask.shape(),
             " does not broadcast to the attention scores' shape ", scores_shape);
  }
  out.insert(out.end(), {l, value.size(-1)});
  return {current_device(), {InputPlan{}, InputPlan{}, InputPlan{}, InputPlan{}}, {{out, query.dtype()}}, {}};
}

std::vector<Tensor> scaled_dot_product_attention_composite(const OpCall& call) {
  const Tensor &query = call.inputs[0], &key = call.inputs[1], &value = call.inputs[2], &attn_mask = call.inputs[3];
  const auto& a = std::get<AttentionAttrs>(call.attrs);
  const Device device = current_device();  // the op's (apply's placement)
  // Under autocast the inputs arrive in its lower dtype (the op's autocast policy).
  const DType in_dtype = query.dtype();
  if (const std::optional<Tensor> key_mask = decode_attention_key_mask(query, key, value, attn_mask, a))
    return {decode_attention(query, key, value, *key_mask, a.scale)};
  if (flash_attention_serves(query, key, value, attn_mask, a.dropout_p, a.enable_gqa, device, in_dtype)) {
    // As PyTorch's flash and cuDNN attention: no (L, S) scores in memory, forward or backward.
    const bool batched_heads = query.dim() == 4;
    Tensor q = batched_heads ? query : unsqueeze(query, 1), k = batched_heads ? key : unsqueeze(key, 1),
           v = batched_heads ? value : unsqueeze(value, 1);
    Tensor out = std::get<0>(flash_attention(q, k, v, a.is_causal, a.scale));
    return {batched_heads ? out : squeeze(out, {1})};
  }
  // float16/bfloat16 scores and probabilities on the GPU, as PyTorch's math path there (the GEMMs
  // accumulate in float32, softmax computes in float32): half float32's memory traffic over the
  // (L, S) scores. The CPU computes in float32 (its BLAS has no float16/bfloat16 products).
  const DType dt = device.is_cpu() ? compute_dtype(in_dtype) : in_dtype;
  Tensor q = to(query, dt), k = to(key, dt), v = to(value, dt);
  if (a.enable_gqa) {
    const int64_t hq = q.size(-3), hk = k.size(-3);
    auto repeat_heads = [&](const Tensor& t) {
      Shape grouped = t.shape();
      grouped.insert(grouped.end() - 2, hq / hk);
      Shape merged = t.shape();
      merged[merged.size() - 3] = hq;
      return reshape(expand(unsqueeze(t, -3), grouped), merged);
    };
    k = repeat_heads(k);
    v = repeat_heads(v);
  }
  const int64_t l = q.size(-2), s = k.size(-2);
  // Scaling the query costs L x E multiplications instead of L x S on the scores.
  Tensor scores = matmul(mul(q, Scalar(a.scale)), transpose(k, -2, -1));
  // Masks become an additive bias (0 or -inf) of the mask's own shape: adding
  // it over the batch runs the vectorised broadcast loop, where `where` would not.
  const Tensor neg_inf = Tensor::scalar(Scalar(-kInf)), zero = Tensor::scalar(Scalar(0.0));
  Tensor bias;
  if (a.is_causal) {
    // Query i attends to keys 0..i (the top-left aligned lower triangle).
    Tensor rows = unsqueeze(arange(Scalar(int64_t{0}), Scalar(l)), 1), cols = arange(Scalar(int64_t{0}), Scalar(s));
    bias = to(where(ge(rows, unsqueeze(cols, 0)), zero, neg_inf), dt);
  } else if (attn_mask.defined()) {
    bias = attn_mask.dtype() == DType::Bool ? to(where(attn_mask, zero, neg_inf), dt) : to(attn_mask, dt);
  }
  if (bias.defined()) binary_op_(ir::OpType::add, scores, bias);  // scores is ours: in place saves a buffer
  Tensor attn = softmax(scores, -1);
  if (attn_mask.defined() && s > 0) {
    // A query that may attend to nothing gets zeros, as PyTorch (softmax alone would give NaN).
    attn = where(eq(max(scores, {-1}, true), neg_inf), zero, attn);
  }
  if (a.dropout_p > 0) attn = dropout(attn, a.dropout_p, true);
  return {to(matmul(attn, v), in_dtype)};
}

PF_REGISTER_COMPOSITE(scaled_dot_product_attention, &infer_scaled_dot_product_attention, &scaled_dot_product_attention_composite);

}  // namespace

std::tuple<Tensor, Tensor> flash_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                           bool is_causal, std::optional<double> scale) {
  std::vector<Tensor> r =
      apply({ir::OpType::flash_attention, {query, key, value}, attention_attrs(query, is_causal, scale), {}});
  return {r[0], r[1]};
}

Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  return apply_one(ir::OpType::rotary_embedding, {x, cos, sin}, NoAttrs{});
}

Tensor rotary_kv_cache_(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos, const Tensor& sin,
                        const Tensor& position, Tensor& k_cache, Tensor& v_cache) {
  Tensor q_out = Tensor::empty(q.shape(), q.dtype(), q.device());
  apply({ir::OpType::rotary_kv_cache, {q, k, v, cos, sin, position, k_cache, v_cache}, NoAttrs{},
         {q_out, k_cache, v_cache}});
  return q_out;
}

Tensor decode_attention(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_mask,
                        std::optional<double> scale) {
  return apply_one(ir::OpType::decode_attention, {query, key, value, key_mask}, attention_attrs(query, false, scale));
}

std::tuple<Tensor, Tensor, Tensor> flash_attention_backward(const Tensor& grad_output, const Tensor& query,
                                                            const Tensor& key, const Tensor& value,
                                                            const Tensor& output, const Tensor& logsumexp,
                                                            bool is_causal, std::optional<double> scale) {
  std::vector<Tensor> r = apply({ir::OpType::flash_attention_backward,
                                 {grad_output, query, key, value, output, logsumexp},
                                 attention_attrs(query, is_causal, scale),
                                 {}});
  return {r[0], r[1], r[2]};
}

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale, bool enable_gqa) {
  AttentionAttrs attrs = attention_attrs(query, is_causal, scale);
  attrs.dropout_p = dropout_p, attrs.enable_gqa = enable_gqa;
  return apply_one(ir::OpType::scaled_dot_product_attention, {query, key, value, attn_mask}, attrs);
}

}  // namespace pyflame
