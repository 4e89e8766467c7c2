#pragma once
// Fused optimizer updates (the op table's adam_step): what pf.optim's
// optimizers run, one pass over each parameter's elements instead of a
// dozen elementwise ops.

#include "pyflame/ir/attrs.h"
#include "pyflame/tensor.h"

namespace pyflame {

// One Adam/AdamW step in place: param, exp_avg, exp_avg_sq (and
// max_exp_avg_sq with amsgrad; else undefined) are updated from grad.
PF_API void adam_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor& max_exp_avg_sq,
                       const AdamAttrs& attrs);
// The same step out of place: the updated param (the state tensors are left as they were).
PF_API Tensor adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamAttrs& attrs);

}  // namespace pyflame
