// The op layer of include/pyflame/optim_ops.h: the update ops' calls and
// their one infer, shared through the functors' description of their state
// (kernels/optim.h).

#include "pyflame/optim_ops.h"

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "kernels/optim.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {
namespace {

// Per parameter (param, grad, states[, step]): each tensor of the parameter's
// shape, the states the options use given and the others absent; every
// parameter of one call has one floating dtype (pf.optim groups them so), which
// the grad and state are read in. All handed over contiguous. A step count, for
// the updates that count steps, is absent (the attributes' bias corrections) or
// a 0-d tensor read as float32 on the parameter's device. Outputs per
// parameter: param and its present states.
template <template <class> class Update> Inferred infer_optimizer_step(OpCall& call) {
  using U = Update<float>;
  constexpr size_t S = U::kStates, per_param = kernels::kInputsPerParam<U>;
  const char* name = op_name(call.op);
  const auto& attrs = call.attr<typename U::Attrs>();
  PF_CHECK(!call.inputs.empty() && call.inputs.size() % per_param == 0, ValueError, name, ": expected ", per_param,
           " tensors per parameter (param, grad and its state), got ", call.inputs.size());
  const DType dtype = call.inputs[0].dtype();
  PF_CHECK(is_floating(dtype), TypeError, name, ": needs floating-point parameters, got ", dtype);
  Inferred inf{current_device(), {}, {}, {}};
  for (size_t j = 0; j < call.inputs.size(); j += per_param) {
    const Tensor& param = call.inputs[j];
    PF_CHECK(param.defined() && call.inputs[j + 1].defined(), ValueError, name, ": parameter ", j / per_param,
             " has no tensor or no gradient");
    PF_CHECK(param.dtype() == dtype, TypeError, name, ": the parameters of one call share a dtype; parameter ",
             j / per_param, " is ", param.dtype(), ", the first ", dtype);
    for (size_t i = 0; i < 2 + S; ++i) {
      const Tensor& t = call.inputs[j + i];
      const char* what = i == 0 ? "param" : i == 1 ? "grad" : U::kNames[i - 2];
      if (i >= 2)
        PF_CHECK(t.defined() == U::uses_state(attrs, static_cast<int>(i - 2)), ValueError, name, ": ", what,
                 t.defined() ? " is given but the options do not use it" : " is needed by the options but missing");
      InputPlan p;
      if (t.defined()) {
        PF_CHECK(t.shape() == param.shape(), ValueError, name, ": ", what, " has shape ", t.shape(),
                 " but its parameter has shape ", param.shape());
        PF_CHECK(is_floating(t.dtype()), TypeError, name, ": ", what, " must be floating point, got ", t.dtype());
        p.dtype = dtype;
        p.contiguous = true;
        if (i != 1) inf.outputs.push_back({param.shape(), dtype});
      }
      inf.inputs.push_back(p);
    }
    if constexpr (U::kCountsSteps) {
      const Tensor& step = call.inputs[j + 2 + S];
      InputPlan p;
      if (step.defined()) {
        PF_CHECK(step.dim() == 0 && (is_floating(step.dtype()) || is_integral(step.dtype())), TypeError, name,
                 ": a step count is a 0-d number tensor, got ", dtype_name(step.dtype()), step.shape());
        p.dtype = DType::Float32;
      }
      inf.inputs.push_back(p);
    }
  }
  return inf;
}

PF_REGISTER_INFER(adam_step, &infer_optimizer_step<kernels::AdamUpdate>);
PF_REGISTER_INFER(sgd_step, &infer_optimizer_step<kernels::SgdUpdate>);
PF_REGISTER_INFER(rmsprop_step, &infer_optimizer_step<kernels::RmspropUpdate>);

// The call's inputs (per parameter: param, grad, each state list's entry or
// an absent tensor for an empty list; with `steps`, the parameter's step
// count, absent where the list is empty) and, in place, its outputs.
OpCall step_call(ir::OpType op, OpAttrs attrs, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 std::initializer_list<const std::vector<Tensor>*> states, bool in_place,
                 const std::vector<Tensor>* steps = nullptr) {
  const char* name = op_name(op);
  auto check_length = [&](const std::vector<Tensor>& list, const char* what) {
    PF_CHECK(list.size() == params.size(), ValueError, name, ": ", params.size(), " parameters but ", list.size(),
             " ", what);
  };
  check_length(grads, "gradients");
  for (const std::vector<Tensor>* s : states)
    if (!s->empty()) check_length(*s, "state tensors in a state list");
  if (steps && !steps->empty()) check_length(*steps, "step counts");
  OpCall call{op, {}, std::move(attrs), {}};
  for (size_t j = 0; j < params.size(); ++j) {
    call.inputs.push_back(params[j]);
    call.inputs.push_back(grads[j]);
    if (in_place) call.outputs.push_back(params[j]);
    for (const std::vector<Tensor>* s : states) {
      call.inputs.push_back(s->empty() ? Tensor() : (*s)[j]);
      if (in_place && !s->empty()) call.outputs.push_back((*s)[j]);
    }
    if (steps) call.inputs.push_back(steps->empty() ? Tensor() : (*steps)[j]);
  }
  return call;
}

}  // namespace

void adam_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                const std::vector<Tensor>& max_exp_avg_sqs, const AdamAttrs& attrs, const std::vector<Tensor>& steps) {
  apply(step_call(ir::OpType::adam_step, attrs, params, grads, {&exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs}, true,
                  &steps));
}

void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& momentum_buffers, const SgdAttrs& attrs) {
  apply(step_call(ir::OpType::sgd_step, attrs, params, grads, {&momentum_buffers}, true));
}

void rmsprop_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                   const std::vector<Tensor>& grad_avgs, const RmspropAttrs& attrs) {
  apply(step_call(ir::OpType::rmsprop_step, attrs, params, grads, {&square_avgs, &momentum_buffers, &grad_avgs},
                  true));
}

Tensor adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const AdamAttrs& attrs, const Tensor& step) {
  return apply({ir::OpType::adam_step, {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step}, attrs, {}})[0];
}

Tensor sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdAttrs& attrs) {
  return apply({ir::OpType::sgd_step, {param, grad, momentum_buffer}, attrs, {}})[0];
}

Tensor rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& momentum_buffer,
                    const Tensor& grad_avg, const RmspropAttrs& attrs) {
  return apply({ir::OpType::rmsprop_step, {param, grad, square_avg, momentum_buffer, grad_avg}, attrs, {}})[0];
}

}  // namespace pyflame
