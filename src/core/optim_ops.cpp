// The op layer of include/pyflame/optim_ops.h: adam_step's call and infer.

#include "pyflame/optim_ops.h"

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {
namespace {

// Every tensor of the step has the parameter's shape; state in its dtype;
// all handed over contiguous. Outputs: param, exp_avg, exp_avg_sq (and max_exp_avg_sq).
Inferred infer_adam_step(OpCall& call) {
  const Tensor& param = call.inputs[0];
  const AdamAttrs& a = call.attr<AdamAttrs>();
  PF_CHECK(is_floating(param.dtype()), TypeError, "adam_step: needs a floating-point parameter, got ", param.dtype());
  PF_CHECK(a.amsgrad == call.inputs[4].defined(), ValueError,
           "adam_step: max_exp_avg_sq must be given exactly when amsgrad is on");
  const char* names[] = {"param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  Inferred inf{current_device(), {}, {}, {}};
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const Tensor& t = call.inputs[i];
    InputPlan p;
    if (t.defined()) {
      PF_CHECK(t.shape() == param.shape(), ValueError, "adam_step: ", names[i], " has shape ", t.shape(),
               " but the parameter has shape ", param.shape());
      PF_CHECK(is_floating(t.dtype()), TypeError, "adam_step: ", names[i], " must be floating point, got ", t.dtype());
      p.dtype = param.dtype();
      p.contiguous = true;
    }
    inf.inputs.push_back(p);
  }
  for (int i = 0; i < (a.amsgrad ? 4 : 3); ++i) inf.outputs.push_back({param.shape(), param.dtype()});
  return inf;
}

PF_REGISTER_INFER(adam_step, &infer_adam_step);

}  // namespace

void adam_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                const AdamAttrs& attrs) {
  std::vector<Tensor> outputs{param, exp_avg, exp_avg_sq};
  if (attrs.amsgrad) outputs.push_back(max_exp_avg_sq);
  apply({ir::OpType::adam_step, {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq}, attrs, std::move(outputs)});
}

Tensor adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const AdamAttrs& attrs) {
  return apply({ir::OpType::adam_step, {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq}, attrs, {}})[0];
}

}  // namespace pyflame
