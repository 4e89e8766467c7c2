// The op layer of include/pyflame/misc_ops.h: addcmul and addcdiv as composite
// ops. The infer holds every check, with the messages PyFlame has always given
// (PyTorch's rules); the decomposition converts the operands to the promoted
// dtype (float32 for float16/bfloat16, rounded once, as PyTorch's kernels) and
// runs mul or div, mul by value and add.

#include "pyflame/misc_ops.h"

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

}  // namespace pyflame
