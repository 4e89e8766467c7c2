#pragma once
// Fused optimizer updates (the op table's adam_step, sgd_step, rmsprop_step):
// what pf.optim's optimizers run. The in-place forms update a list of
// parameters and their state in one call (on the GPU, one launch for up to a
// few dozen parameters), one pass over each parameter's elements instead of
// a dozen elementwise ops.
//
// A state list is empty when the options do not use that state (no
// max_exp_avg_sqs without amsgrad, no momentum_buffers without momentum, no
// grad_avgs unless centered); otherwise it has one tensor per parameter.
// Every parameter of one call has the same floating dtype.

#include <vector>

#include "pyflame/ir/attrs.h"
#include "pyflame/tensor.h"

namespace pyflame {

// Adam/AdamW steps in place: params and exp_avgs, exp_avg_sqs (max_exp_avg_sqs
// with amsgrad) updated from grads. `steps` (empty, or one 0-d tensor per
// parameter on its device): each parameter's step count, from which the update
// computes its bias corrections in place of the attributes' (PyTorch's
// capturable=True; a compiled training step advances them on the device).
PF_API void adam_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                       const std::vector<Tensor>& max_exp_avg_sqs, const AdamAttrs& attrs,
                       const std::vector<Tensor>& steps = {});
// SGD steps in place: params (and momentum_buffers with momentum).
PF_API void sgd_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<Tensor>& momentum_buffers, const SgdAttrs& attrs);
// RMSprop steps in place: params, square_avgs (momentum_buffers with momentum,
// grad_avgs when centered).
PF_API void rmsprop_step_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& square_avgs, const std::vector<Tensor>& momentum_buffers,
                          const std::vector<Tensor>& grad_avgs, const RmspropAttrs& attrs);

// One parameter's step out of place: the updated parameter (the state tensors
// are left as they were; an unused state is an undefined Tensor).
PF_API Tensor adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamAttrs& attrs, const Tensor& step = {});
PF_API Tensor sgd_step(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdAttrs& attrs);
PF_API Tensor rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                           const Tensor& momentum_buffer, const Tensor& grad_avg, const RmspropAttrs& attrs);

}  // namespace pyflame
