// The op layer of the nn-modules area: linear, the op behind nn.Linear. A
// device with a `linear` kernel gets the fused form (the CPU: bias written
// into the output, then the matrix product accumulated onto it: one pass over
// the output less than matmul + add; the GPU: the BLAS library adds the bias
// in the GEMM's epilogue where it can, src/rocm/blas.cpp); on any other device
// the composite matmul + add runs, so nn.Linear runs wherever those two do.

#include "pyflame/modules_ops.h"

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {

// The kernel's call: x (M, K) and weight (N, K) in any strides (a 1-D weight
// is one row), bias (N) (a 0-d bias expanded), out (M, N) contiguous.
Inferred infer_linear(OpCall& call) {
  const Tensor &input = call.inputs[0], &weight = call.inputs[1], &bias = call.inputs[2];
  PF_CHECK(input.dim() >= 1, ValueError, "linear: the input needs at least 1 dimension, got a 0-d tensor");
  PF_CHECK(weight.dim() == 1 || weight.dim() == 2, ValueError,
           "linear: the weight must be (out_features, in_features) or (in_features), got shape ", weight.shape());
  PF_CHECK(is_floating(input.dtype()), TypeError, "linear: needs floating-point tensors, got an input of ",
           input.dtype(), " (convert with .to(float32))");
  PF_CHECK(weight.dtype() == input.dtype() && (!bias.defined() || bias.dtype() == input.dtype()), TypeError,
           "linear: input, weight and bias must have one dtype, got ", input.dtype(), ", ", weight.dtype(),
           bias.defined() ? detail::cat(" and ", bias.dtype()) : std::string(" (no bias)"));
  const int64_t k = input.size(-1);
  PF_CHECK(weight.size(-1) == k, ValueError, "linear: the input's last dimension is ", k, " (input shape ",
           input.shape(), ") but the weight has in_features ", weight.size(-1), " (weight shape ", weight.shape(),
           ")");
  const int64_t n = weight.dim() == 2 ? weight.size(0) : 1;
  if (bias.defined()) {
    bool ok = bias.dim() == 0 || (weight.dim() == 2 && bias.dim() == 1 && bias.size(0) == n);
    PF_CHECK(ok, ValueError, "linear: the bias must have shape ",
             weight.dim() == 2 ? detail::cat("(", n, ") or ") : std::string(), "() (0-d), got shape ", bias.shape());
  }
  Shape result = input.shape();
  result.pop_back();
  if (weight.dim() == 2) result.push_back(n);
  const int64_t m = shape_numel(Shape(input.shape().begin(), input.shape().end() - 1));
  InputPlan x, w, b;
  x.reshape = Shape{m, k};
  if (weight.dim() == 1) w.reshape = Shape{1, k};
  b.expand = Shape{n};
  return {current_device(), {x, w, b}, {{{m, n}, input.dtype(), result}}, {}};
}

std::vector<Tensor> linear_composite(const OpCall& call) {
  const Tensor &input = call.inputs[0], &weight = call.inputs[1], &bias = call.inputs[2];
  Tensor y = matmul(input, weight.dim() == 2 ? transpose(weight, 0, 1) : weight);
  return {bias.defined() ? add(y, bias) : y};
}

PF_REGISTER_INFER(linear, &infer_linear);
PF_REGISTER_COMPOSITE(linear, &linear_composite);

}  // namespace

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  return apply_one(ir::OpType::linear, {input, weight, bias.value_or(Tensor())}, NoAttrs{});
}

}  // namespace pyflame
