// The op layer of include/pyflame/misc_ops.h: addcmul, addcdiv and isclose as
// composite ops. Each infer holds every check, with the messages PyFlame has
// always given (PyTorch's rules). addcmul's and addcdiv's decomposition converts
// the operands to the promoted dtype (float32 for float16/bfloat16, rounded
// once, as PyTorch's kernels) and runs mul or div, mul by value and add;
// isclose's compares as PyTorch's formula.

#include "pyflame/misc_ops.h"

#include <charconv>
#include <string>

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {

// (input, tensor1, tensor2): broadcast together, in PyTorch's promoted dtype of the three.
Inferred infer_addc(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &input = call.inputs[0], &tensor1 = call.inputs[1], &tensor2 = call.inputs[2];
  PF_CHECK(call.op != ir::OpType::addcdiv || is_floating(tensor1.dtype()) || is_floating(tensor2.dtype()), TypeError,
           "addcdiv: integer division of tensor1 by tensor2 is not supported (as in PyTorch); "
           "use (tensor1 / tensor2) or convert them to a float dtype");
  const DType dtype = result_type(call.inputs);
  PF_CHECK(is_floating(dtype) || call.attr<AddcAttrs>().value.kind != Scalar::Kind::Float, TypeError, name,
           ": for integral input tensors, argument value must not be a floating point number");
  const Shape shape = broadcast_shapes(broadcast_shapes(input.shape(), tensor1.shape(), name), tensor2.shape(), name);
  return {current_device(), {InputPlan{}, InputPlan{}, InputPlan{}}, {{shape, dtype}}, {}};
}

std::vector<Tensor> addc_composite(const OpCall& call) {
  const DType dtype = result_type(call.inputs), compute = compute_dtype(dtype);
  const Tensor input = to(call.inputs[0], compute), tensor1 = to(call.inputs[1], compute),
               tensor2 = to(call.inputs[2], compute);
  Tensor term = call.op == ir::OpType::addcmul ? mul(tensor1, tensor2) : div(tensor1, tensor2);
  const Scalar value = call.attr<AddcAttrs>().value;
  const bool unit = value.kind == Scalar::Kind::Float ? value.f == 1 : value.i == 1;
  if (!unit) term = mul(term, value);
  return {to(add(input, term), dtype)};
}

PF_REGISTER_INFER(addcmul, &infer_addc);
PF_REGISTER_INFER(addcdiv, &infer_addc);
PF_REGISTER_COMPOSITE(addcmul, &addc_composite);
PF_REGISTER_COMPOSITE(addcdiv, &addc_composite);

// A number as Python's repr prints it (1e-05, -1.0), as the messages always gave it.
std::string python_float_text(double v) {
  char text[32];
  const std::string shortest(text, std::to_chars(text, text + sizeof text, v).ptr);
  const bool looks_integral = shortest.find_first_not_of("-0123456789") == std::string::npos;
  return looks_integral ? shortest + ".0" : shortest;
}

// (input, other) of one dtype, broadcast together; a bool result.
Inferred infer_isclose(OpCall& call) {
  const Tensor &input = call.inputs[0], &other = call.inputs[1];
  const IscloseAttrs& attrs = call.attr<IscloseAttrs>();
  PF_CHECK(input.dtype() == other.dtype(), TypeError, "isclose: input (pyflame.", dtype_name(input.dtype()),
           ") and other (pyflame.", dtype_name(other.dtype()), ") must have the same dtype");
  PF_CHECK(attrs.rtol >= 0 && attrs.atol >= 0, ValueError, "isclose: rtol (", python_float_text(attrs.rtol),
           ") and atol (", python_float_text(attrs.atol), ") must be non-negative");
  const Shape shape = broadcast_shapes(input.shape(), other.shape(), "isclose");
  return {current_device(), {InputPlan{}, InputPlan{}}, {{shape, DType::Bool}}, {}};
}

// PyTorch's formula: equal, or (with equal_nan) both NaN, or a finite |input - other|
// within atol + rtol * |other|. As PyTorch's, integers and bools take that difference in
// the default float dtype (an unsigned or overflowing difference does not wrap); with
// zero tolerances they are compared exactly.
std::vector<Tensor> isclose_composite(const OpCall& call) {
  const Tensor &input = call.inputs[0], &other = call.inputs[1];
  const IscloseAttrs& attrs = call.attr<IscloseAttrs>();
  Tensor close = eq(input, other);
  if (attrs.equal_nan && is_floating(input.dtype()))
    close = logical_or(close, logical_and(isnan(input), isnan(other)));
  if (attrs.rtol == 0 && attrs.atol == 0) return {close};
  const DType difference_dtype = is_floating(input.dtype()) ? input.dtype() : default_float();
  const Tensor x = to(input, difference_dtype), y = to(other, difference_dtype);
  const Tensor allowed = add(abs(mul(y, Scalar(attrs.rtol))), Scalar(attrs.atol));
  const Tensor actual = abs(sub(x, y));
  return {logical_or(close, logical_and(isfinite(actual), le(actual, allowed)))};
}

PF_REGISTER_INFER(isclose, &infer_isclose);
PF_REGISTER_COMPOSITE(isclose, &isclose_composite);

}  // namespace

Tensor addcmul(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  return apply_one(ir::OpType::addcmul, {input, tensor1, tensor2}, AddcAttrs{value});
}

Tensor addcdiv(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  return apply_one(ir::OpType::addcdiv, {input, tensor1, tensor2}, AddcAttrs{value});
}

Tensor& addcmul_(Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  return apply_into(input, ir::OpType::addcmul, {input, tensor1, tensor2}, AddcAttrs{value});
}

Tensor& addcdiv_(Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  return apply_into(input, ir::OpType::addcdiv, {input, tensor1, tensor2}, AddcAttrs{value});
}

Tensor isclose(const Tensor& input, const Tensor& other, double rtol, double atol, bool equal_nan) {
  return apply_one(ir::OpType::isclose, {input, other}, IscloseAttrs{rtol, atol, equal_nan});
}

}  // namespace pyflame
