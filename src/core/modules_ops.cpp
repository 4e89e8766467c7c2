// The op layer of the nn-modules area: linear, the op behind nn.Linear (and
// grouped_linear, graph mode's several linears of one input as one call, with the
// norm before them and the SwiGLU after them where graph mode folds those in). A
// device with a `linear` kernel gets the fused form (the CPU: bias written
// into the output, then the matrix product accumulated onto it: one pass over
// the output less than matmul + add; the GPU: the BLAS library adds the bias
// in the GEMM's epilogue where it can, src/rocm/blas.cpp); on any other device
// the composite matmul + add runs, so nn.Linear runs wherever those two do.
// lstm_sequence, the recurrence of nn.LSTM: one op for the whole sequence, so
// a step costs a GEMM and a cell kernel, not a dozen ops and their autograd
// nodes (a Python loop of them was host-bound at 0.12x PyTorch's cuDNN RNN).

#include "pyflame/modules_ops.h"

#include "core/derivative.h"
#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/nn_ops.h"
#include "pyflame/ops.h"
#include "pyflame/shape_ops.h"

namespace pyflame {

namespace {

// The kernel's call: x (M, K) and weight (N, K) in any strides (a 1-D weight
// is one row), bias (N) (a 0-d bias expanded) or, broadcast, of the result's
// shape (infer_linear), out (M, N) contiguous.
Inferred infer_linear(OpCall& call) {
  const Tensor &input = call.inputs[0], &weight = call.inputs[1], &bias = call.inputs[2];
  const char* name = op_name(call.op);
  PF_CHECK(input.dim() >= 1, ValueError, name, ": the input needs at least 1 dimension, got a 0-d tensor");
  PF_CHECK(weight.dim() == 1 || weight.dim() == 2, ValueError,
           name, ": the weight must be (out_features, in_features) or (in_features), got shape ", weight.shape());
  PF_CHECK(is_floating(input.dtype()), TypeError, name, ": needs floating-point tensors, got an input of ",
           input.dtype(), " (convert with .to(float32))");
  PF_CHECK(weight.dtype() == input.dtype() && (!bias.defined() || bias.dtype() == input.dtype()), TypeError,
           name, ": input, weight and bias must have one dtype, got ", input.dtype(), ", ", weight.dtype(),
           bias.defined() ? detail::cat(" and ", bias.dtype()) : std::string(" (no bias)"));
  const int64_t k = input.size(-1);
  PF_CHECK(weight.size(-1) == k, ValueError, name, ": the input's last dimension is ", k, " (input shape ",
           input.shape(), ") but the weight has in_features ", weight.size(-1), " (weight shape ", weight.shape(),
           ")");
  const int64_t n = weight.dim() == 2 ? weight.size(0) : 1;
  Shape result = input.shape();
  result.pop_back();
  if (weight.dim() == 2) result.push_back(n);
  const int64_t m = shape_numel(Shape(input.shape().begin(), input.shape().end() - 1));
  InputPlan x, w, b;
  x.reshape = Shape{m, k};
  if (weight.dim() == 1) w.reshape = Shape{1, k};
  b.expand = Shape{n};
  // A bias of one value per output feature (or 0-d) is a vector to the kernels; any other that
  // broadcasts to the result (as torch's addmm takes: (1, n), (m, 1), (m, n); graph mode folds a
  // residual added to a linear's result in this way) comes with the result's shape.
  if (bias.defined() && bias.dim() != 0 && !(weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == n)) {
    bool broadcasts = weight.dim() == 2 && bias.dim() <= static_cast<int64_t>(result.size());
    for (int64_t i = 1; broadcasts && i <= bias.dim(); ++i) {
      const int64_t have = bias.size(-i), want = result[result.size() - i];
      broadcasts = have == want || have == 1;
    }
    PF_CHECK(broadcasts, ValueError, name, ": the bias must have shape ",
             weight.dim() == 2 ? detail::cat("(", n, "), ") : std::string(), "() (0-d) or one that broadcasts to the "
             "result's ", result, ", got shape ", bias.shape());
    Shape padded(result.size() - bias.dim(), 1);
    padded.insert(padded.end(), bias.shape().begin(), bias.shape().end());
    b.reshape = padded;
    b.expand = result;
  }
  return {current_device(), {x, w, b}, {{{m, n}, input.dtype(), result}}, {}};
}

std::vector<Tensor> linear_composite(const OpCall& call) {
  const Tensor &input = call.inputs[0], &weight = call.inputs[1], &bias = call.inputs[2];
  Tensor y = matmul(input, weight.dim() == 2 ? transpose(weight, 0, 1) : weight);
  return {bias.defined() ? add(y, bias) : y};
}

// grouped_linear: (input, norm_weight, weight0, bias0, ...): linear's checks and plans for each
// (weight, bias) pair, one result each, or one under SwiGLU (two pairs with results of one shape);
// the norm weight as rms_norm's over the input's last dimension.
Inferred infer_grouped_linear(OpCall& call) {
  const char* name = op_name(call.op);
  const auto& a = call.attr<GroupedLinearAttrs>();
  PF_CHECK(is_floating(call.inputs[0].dtype()), TypeError, name, ": needs floating-point tensors, got an input of ",
           call.inputs[0].dtype());
  PF_CHECK(call.inputs.size() >= 4 && call.inputs.size() % 2 == 0, ValueError, name,
           ": takes an input, a norm weight (or none) and (weight, bias) pairs, got ", call.inputs.size(), " tensors");
  PF_CHECK(a.rms_norm || !call.inputs[1].defined(), ValueError, name, ": a norm weight without rms_norm");
  PF_CHECK(!a.swiglu || call.inputs.size() == 6, ValueError, name, ": swiglu takes two (weight, bias) pairs, got ",
           (call.inputs.size() - 2) / 2);
  Inferred all{current_device(), {}, {}, {}};
  for (size_t i = 2; i < call.inputs.size(); i += 2) {
    OpCall pair{call.op, {call.inputs[0], call.inputs[i], call.inputs[i + 1]}, NoAttrs{}, {}};
    Inferred one = infer_linear(pair);
    if (i == 2) {
      all.inputs.push_back(one.inputs[0]);
      InputPlan norm_weight;  // as rms_norm's: its kernels read the input's 16-bit dtype or float32
      if (a.rms_norm) {
        OpCall norm{ir::OpType::rms_norm, {call.inputs[0], call.inputs[1], Tensor()}, NormAttrs{}, {}};
        std::get<NormAttrs>(norm.attrs).normalized_shape = {call.inputs[0].size(-1)};
        norm_weight = find_infer(ir::OpType::rms_norm)(norm).inputs[1];
      }
      all.inputs.push_back(norm_weight);
    }
    all.inputs.push_back(one.inputs[1]);
    all.inputs.push_back(one.inputs[2]);
    if (!a.swiglu || i == 2) all.outputs.push_back(one.outputs[0]);
    else
      PF_CHECK(one.outputs[0].shape == all.outputs[0].shape, ValueError, name,
               ": swiglu's two products must have one shape, got ", all.outputs[0].shape, " and ", one.outputs[0].shape);
  }
  return all;
}

std::vector<Tensor> grouped_linear_composite(const OpCall& call) {
  const auto& a = call.attr<GroupedLinearAttrs>();
  const Tensor& x = call.inputs[0];
  const Tensor input = a.rms_norm ? rms_norm(x, {x.size(-1)}, call.inputs[1], a.eps) : x;
  std::vector<Tensor> results;
  for (size_t i = 2; i < call.inputs.size(); i += 2) {
    const Tensor& bias = call.inputs[i + 1];
    results.push_back(linear(input, call.inputs[i], bias.defined() ? std::optional<Tensor>(bias) : std::nullopt));
  }
  if (a.swiglu) return {mul(silu(results[0]), results[1])};
  return results;
}

// quantized_linear: (input, qweight, scales, zeros, bias), checked against the layout of
// modules_ops.h; the kernels read x as (M, K), the codes, scales and zero points packed, the
// scales and the bias in x's dtype.
Inferred infer_quantized_linear(OpCall& call) {
  const char* name = op_name(call.op);
  const auto& a = call.attr<QuantAttrs>();
  const Tensor &input = call.inputs[0], &qweight = call.inputs[1], &scales = call.inputs[2], &zeros = call.inputs[3],
               &bias = call.inputs[4];
  PF_CHECK(a.bits == 8 || a.bits == 4, ValueError, name, ": bits must be 8 or 4, got ", a.bits);
  PF_CHECK(input.dim() >= 1 && is_floating(input.dtype()), TypeError, name,
           ": needs a floating-point input of at least 1 dimension, got ", input.dtype(), " of shape ", input.shape());
  PF_CHECK(qweight.dtype() == DType::UInt8 && zeros.dtype() == DType::UInt8 && is_floating(scales.dtype()), TypeError,
           name, ": takes uint8 codes and zero points and floating-point scales, got ", qweight.dtype(), ", ",
           zeros.dtype(), " and ", scales.dtype());
  const int64_t k = input.size(-1);
  PF_CHECK(qweight.dim() == 2 && qweight.size(1) * 8 == k * a.bits, ValueError, name, ": the input's last dimension ",
           k, " needs codes of shape (out_features, ", k * a.bits / 8, ") for ", a.bits, " bits, got ", qweight.shape());
  const int64_t n = qweight.size(0);
  PF_CHECK(a.group_size > 0 && k % a.group_size == 0, ValueError, name, ": group_size ", a.group_size,
           " must divide the input's last dimension ", k);
  const Shape groups{n, k / a.group_size};
  PF_CHECK(scales.shape() == groups && zeros.shape() == groups, ValueError, name, ": scales and zeros must have shape ",
           groups, ", got ", scales.shape(), " and ", zeros.shape());
  PF_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == n), ValueError, name, ": the bias must have shape (",
           n, "), got ", bias.shape());
  Shape result = input.shape();
  result.back() = n;
  InputPlan x, packed, in_dtype;
  const int64_t m = shape_numel(Shape(input.shape().begin(), input.shape().end() - 1));
  x.reshape = Shape{m, k};
  x.contiguous = packed.contiguous = in_dtype.contiguous = true;
  in_dtype.dtype = input.dtype();
  return {current_device(), {x, packed, in_dtype, packed, in_dtype}, {{{m, n}, input.dtype(), result}}, {}};
}

// The weight (out_features, in_features) in the scales' dtype, from codes and zero points
// checked by infer_quantized_linear.
Tensor dequantize_weight(const Tensor& qweight, const Tensor& scales, const Tensor& zeros, const QuantAttrs& a) {
  Tensor codes = qweight;
  if (a.bits == 4)
    codes = reshape(stack({bitwise_and(qweight, Scalar(int64_t{15})), bitwise_right_shift(qweight, Scalar(int64_t{4}))}, -1),
                    {qweight.size(0), qweight.size(1) * 2});
  const int64_t n = codes.size(0), k = codes.size(1);
  const Tensor centred = sub(reshape(to(codes, scales.dtype()), {n, k / a.group_size, a.group_size}),
                             unsqueeze(to(zeros, scales.dtype()), -1));
  return reshape(mul(centred, unsqueeze(scales, -1)), {n, k});
}

std::vector<Tensor> quantized_linear_composite(const OpCall& call) {
  const auto& a = call.attr<QuantAttrs>();
  const Tensor& x = call.inputs[0];
  const Tensor w = to(dequantize_weight(call.inputs[1], call.inputs[2], call.inputs[3], a), x.dtype());
  const Tensor& bias = call.inputs[4];
  return {linear(x, w, bias.defined() ? std::optional<Tensor>(to(bias, x.dtype())) : std::nullopt)};
}

std::vector<Tensor> linear_relu_composite(const OpCall& call) {
  const Tensor& bias = call.inputs[2];
  return {relu(linear(call.inputs[0], call.inputs[1], bias.defined() ? std::optional<Tensor>(bias) : std::nullopt))};
}

// An lstm_sequence argument of shape `expected` in the input gates' dtype.
void check_lstm_arg(const Tensor& t, const Shape& expected, const char* what, const Tensor& input_gates,
                    ir::OpType op) {
  PF_CHECK(t.dtype() == input_gates.dtype(), TypeError, op_name(op), ": ", what, " has dtype ", t.dtype(),
           " but the input gates have ", input_gates.dtype(), " (all tensors must have one dtype)");
  PF_CHECK(t.shape() == expected, ValueError, op_name(op), ": ", what, " must have shape ", expected, ", got ",
           t.shape(), " (input gates of shape ", input_gates.shape(), ")");
}

// (T, N, 4H) -> H, after checking the input gates.
int64_t lstm_hidden_size(const Tensor& gates, ir::OpType op, const char* what) {
  PF_CHECK(is_floating(gates.dtype()), TypeError, op_name(op), ": needs floating-point tensors, got ", what, " of ",
           gates.dtype(), " (convert with .to(float32))");
  PF_CHECK(gates.dim() == 3 && gates.size(2) % 4 == 0, ValueError, op_name(op), ": ", what,
           " must be (T, N, 4 * hidden_size), got shape ", gates.shape());
  return gates.size(2) / 4;
}

Inferred infer_lstm_sequence(OpCall& call) {
  const ir::OpType op = ir::OpType::lstm_sequence;
  const Tensor& gates = call.inputs[0];
  const int64_t h = lstm_hidden_size(gates, op, "input_gates");
  const int64_t t = gates.size(0), n = gates.size(1);
  check_lstm_arg(call.inputs[1], {n, h}, "h0", gates, op);
  check_lstm_arg(call.inputs[2], {n, h}, "c0", gates, op);
  check_lstm_arg(call.inputs[3], {4 * h, h}, "weight_hh", gates, op);
  if (call.inputs[4].defined()) check_lstm_arg(call.inputs[4], {4 * h}, "bias_hh", gates, op);
  InputPlan packed;
  packed.contiguous = true;
  return {current_device(),
          {packed, packed, packed, packed, packed},
          {{{t, n, h}, gates.dtype()}, {{t, n, h}, gates.dtype()}, {gates.shape(), gates.dtype()}},
          {}};
}

Inferred infer_lstm_sequence_backward(OpCall& call) {
  const ir::OpType op = ir::OpType::lstm_sequence_backward;
  const Tensor& gates = call.inputs[2];
  const int64_t h = lstm_hidden_size(gates, op, "gates");
  const int64_t t = gates.size(0), n = gates.size(1);
  check_lstm_arg(call.inputs[0], {t, n, h}, "grad_output", gates, op);
  check_lstm_arg(call.inputs[1], {t, n, h}, "grad_cell_states", gates, op);
  check_lstm_arg(call.inputs[3], {t, n, h}, "cell_states", gates, op);
  check_lstm_arg(call.inputs[4], {n, h}, "c0", gates, op);
  check_lstm_arg(call.inputs[5], {4 * h, h}, "weight_hh", gates, op);
  InputPlan packed;
  packed.contiguous = true;
  return {current_device(),
          {packed, packed, packed, packed, packed, packed},
          {{gates.shape(), gates.dtype()}, {{n, h}, gates.dtype()}, {{n, h}, gates.dtype()}},
          {}};
}

// The recurrence's backward (lstm_sequence_backward) runs step by step; what
// is not sequential is two GEMMs over the whole sequence, as cuDNN's RNN does:
// weight_hh's gradient pairs each step's gate gradients with the h that step
// read (h0, then the previous step's output).
std::vector<Tensor> d_lstm_sequence(const autograd::GradContext& c) {
  const bool reverse = c.attr<RnnAttrs>().reverse;
  auto [g_gates, g_h0, g_c0] =
      lstm_sequence_backward(c.grad(0), c.grad(1), c.output(2), c.output(1), c.input(2), c.input(3), reverse);
  std::vector<Tensor> r{g_gates, g_h0, g_c0, {}, {}};
  if (c.needs[3]) {
    const Tensor &output = c.output(0), &h0 = c.input(1);
    const int64_t t = output.size(0), h = h0.size(1);
    Tensor read = t == 0 ? output
                  : reverse ? cat({slice(output, 0, 1, t), unsqueeze(h0, 0)})
                            : cat({unsqueeze(h0, 0), slice(output, 0, 0, t - 1)});
    r[3] = matmul(transpose(reshape(g_gates, {-1, 4 * h}), 0, 1), reshape(read, {-1, h}));
  }
  if (c.needs[4]) r[4] = g_gates;  // summed over the steps and the batch by the engine
  return r;
}

PF_REGISTER_COMPOSITE(linear, &infer_linear, &linear_composite);
PF_REGISTER_COMPOSITE(linear_relu, &infer_linear, &linear_relu_composite);
PF_REGISTER_COMPOSITE(grouped_linear, &infer_grouped_linear, &grouped_linear_composite);
PF_REGISTER_COMPOSITE(quantized_linear, &infer_quantized_linear, &quantized_linear_composite);
PF_REGISTER_INFER(lstm_sequence, &infer_lstm_sequence);
PF_REGISTER_INFER(lstm_sequence_backward, &infer_lstm_sequence_backward);
PF_REGISTER_DERIVATIVE(lstm_sequence, &d_lstm_sequence, autograd::kSavesBoth);

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  return apply_one(ir::OpType::linear, {input, weight, bias.value_or(Tensor())}, NoAttrs{});
}

Tensor quantized_linear(const Tensor& input, const Tensor& qweight, const Tensor& scales, const Tensor& zeros,
                        const std::optional<Tensor>& bias, int64_t bits, int64_t group_size) {
  return apply_one(ir::OpType::quantized_linear, {input, qweight, scales, zeros, bias.value_or(Tensor())},
                   QuantAttrs{bits, group_size});
}

std::tuple<Tensor, Tensor> lstm_sequence(const Tensor& input_gates, const Tensor& h0, const Tensor& c0,
                                         const Tensor& weight_hh, const Tensor& bias_hh, bool reverse) {
  std::vector<Tensor> r =
      apply({ir::OpType::lstm_sequence, {input_gates, h0, c0, weight_hh, bias_hh}, RnnAttrs{reverse}, {}});
  return {r[0], r[1]};
}

std::tuple<Tensor, Tensor, Tensor> lstm_sequence_backward(const Tensor& grad_output, const Tensor& grad_cell_states,
                                                          const Tensor& gates, const Tensor& cell_states,
                                                          const Tensor& c0, const Tensor& weight_hh, bool reverse) {
  std::vector<Tensor> r = apply({ir::OpType::lstm_sequence_backward,
                                 {grad_output, grad_cell_states, gates, cell_states, c0, weight_hh},
                                 RnnAttrs{reverse},
                                 {}});
  return {r[0], r[1], r[2]};
}

}  // namespace pyflame
