// The op layer of fused_elementwise (include/pyflame/ir/fusion.h): a chain of
// elementwise calls as one call. pf.compile's fusion pass (src/ir/passes.cpp) makes
// them from chains of a traced graph; the GPU runs one as a kernel it generates and
// compiles at run time (src/rocm/fused_elementwise.cpp); every other device, and
// autograd, runs the steps one by one (the decomposition), as eagerly.
//
// Every step computes as its op would alone: the inputs are tensors of one floating
// dtype and Python numbers, each step's result has that dtype (the families whose
// result keeps a floating input's dtype), so rounding to it after each step gives
// the eager results, but for the GPU compiler's freedom to contract a multiply and
// an add of two steps (one rounding instead of two: float rounding).

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/ir/fusion.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {

constexpr const char* kFunctors[] = {
#define PF_OP(name, family, functor, attrs, grad, autocast) #functor,
#include "pyflame/ops.def"
#undef PF_OP
};

bool unary_step(ir::OpType op) {
  const OpFamily f = op_family(op);
  return f == OpFamily::UNARY || f == OpFamily::UNARY_FLOAT;
}

Inferred infer_fused_elementwise(OpCall& call) {
  const char* op = "fused_elementwise";
  auto& attrs = std::get<FusedElementwiseAttrs>(call.attrs);
  PF_CHECK(!attrs.steps.empty(), ValueError, op, ": needs at least one step");
  std::optional<DType> dtype;
  for (const Tensor& t : call.inputs) {
    PF_CHECK(t.defined(), ValueError, op, ": an input is None");
    if (t.is_wrapped_number()) continue;
    if (!dtype) dtype = t.dtype();
    PF_CHECK(t.dtype() == *dtype, TypeError, op, ": the tensor inputs must have one dtype, got ", *dtype, " and ",
             t.dtype());
  }
  PF_CHECK(dtype, ValueError, op, ": needs a tensor input (Python numbers alone have no dtype to compute in)");
  PF_CHECK(is_floating(*dtype), TypeError, op, ": computes in a floating dtype, got tensors of ", *dtype);
  const int64_t num_inputs = static_cast<int64_t>(call.inputs.size());
  for (size_t k = 0; k < attrs.steps.size(); ++k) {
    FusedStep& s = attrs.steps[k];
    PF_CHECK(ir::fusable_elementwise(s.op), ValueError, op, ": step ", k, " is ", op_name(s.op),
             ", not an elementwise op whose result keeps its input's dtype");
    const size_t arity = unary_step(s.op) ? 1 : 2;
    PF_CHECK(s.args.size() == arity, ValueError, op, ": step ", k, " (", op_name(s.op), ") takes ", arity,
             " argument(s), got ", s.args.size());
    for (int64_t a : s.args)
      PF_CHECK(a < num_inputs && -1 - a < static_cast<int64_t>(k), IndexError, op, ": step ", k, " reads ",
               a >= 0 ? detail::cat("input ", a, " of ", num_inputs) : detail::cat("step ", -1 - a),
               " (an argument is an input i >= 0 or an earlier step j as -1 - j)");
    s.params = canonical_params(s.op, s.params, *dtype);
  }
  Shape shape = call.inputs[0].shape();
  for (const Tensor& t : call.inputs) shape = broadcast_shapes(shape, t.shape(), op);
  Inferred inf{current_device(), {}, {{shape, *dtype}}, {}};
  for (const Tensor& t : call.inputs) {
    InputPlan p{*dtype};
    if (t.is_wrapped_number()) p.host_scalar = true;  // read on the host, passed by value
    else if (t.shape() != shape) p.expand = shape;    // a broadcast view: nothing copied
    inf.inputs.push_back(p);
  }
  return inf;
}

std::vector<Tensor> fused_elementwise_composite(const OpCall& call) {
  std::vector<Tensor> results;
  for (const FusedStep& s : std::get<FusedElementwiseAttrs>(call.attrs).steps) {
    std::vector<Tensor> args;
    for (int64_t a : s.args) args.push_back(a >= 0 ? call.inputs[a] : results[-1 - a]);
    results.push_back(apply_one(s.op, std::move(args), ElementwiseAttrs{s.params}));
  }
  return {results.back()};
}

PF_REGISTER_COMPOSITE(fused_elementwise, &infer_fused_elementwise, &fused_elementwise_composite);

}  // namespace

bool ir::fusable_elementwise(OpType op) {
  const OpFamily f = op_family(op);
  return (f == OpFamily::UNARY || f == OpFamily::UNARY_FLOAT || f == OpFamily::BINARY ||
          f == OpFamily::BINARY_FLOAT) &&
         std::string_view(kFunctors[static_cast<int>(op)]) != "-";
}

Tensor fused_elementwise(const std::vector<Tensor>& inputs, FusedElementwiseAttrs attrs) {
  return apply_one(ir::OpType::fused_elementwise, inputs, std::move(attrs));
}

}  // namespace pyflame
