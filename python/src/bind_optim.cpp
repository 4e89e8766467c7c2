// Fused optimizer updates (pyflame/optim_ops.h): pf.adam_step (out of place,
// the updated parameter) and pf.adam_step_ (in place: what pf.optim.Adam runs).

#include <nanobind/stl/optional.h>

#include "bindings.h"
#include "pyflame/optim_ops.h"

namespace pyflame::python {

void bind_optim(nb::module_& m) {
  auto attrs = [](double lr, double beta1, double beta2, double eps, double weight_decay, double bias_correction1,
                  double bias_correction2, bool decoupled_weight_decay, bool amsgrad, bool maximize) {
    return pyflame::AdamAttrs{lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2,
                              decoupled_weight_decay, amsgrad, maximize};
  };
  m.def(
      "adam_step",
      [attrs](const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
              std::optional<Tensor> max_exp_avg_sq, double lr, double beta1, double beta2, double eps,
              double weight_decay, double bias_correction1, double bias_correction2, bool decoupled_weight_decay,
              bool amsgrad, bool maximize) {
        return pyflame::adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq.value_or(Tensor()),
                                  attrs(lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2,
                                        decoupled_weight_decay, amsgrad, maximize));
      },
      "param"_a, "grad"_a, "exp_avg"_a, "exp_avg_sq"_a, "max_exp_avg_sq"_a = nb::none(), nb::kw_only(), "lr"_a,
      "beta1"_a, "beta2"_a, "eps"_a, "weight_decay"_a = 0.0, "bias_correction1"_a = 1.0, "bias_correction2"_a = 1.0,
      "decoupled_weight_decay"_a = false, "amsgrad"_a = false, "maximize"_a = false,
      "One Adam/AdamW step out of place: the updated parameter (bias corrections: 1 - beta^t).");
  m.def(
      "adam_step_",
      [attrs](Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
              std::optional<Tensor> max_exp_avg_sq, double lr, double beta1, double beta2, double eps,
              double weight_decay, double bias_correction1, double bias_correction2, bool decoupled_weight_decay,
              bool amsgrad, bool maximize) {
        Tensor v_max = max_exp_avg_sq.value_or(Tensor());
        pyflame::adam_step_(param, grad, exp_avg, exp_avg_sq, v_max,
                            attrs(lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2,
                                  decoupled_weight_decay, amsgrad, maximize));
      },
      "param"_a, "grad"_a, "exp_avg"_a, "exp_avg_sq"_a, "max_exp_avg_sq"_a = nb::none(), nb::kw_only(), "lr"_a,
      "beta1"_a, "beta2"_a, "eps"_a, "weight_decay"_a = 0.0, "bias_correction1"_a = 1.0, "bias_correction2"_a = 1.0,
      "decoupled_weight_decay"_a = false, "amsgrad"_a = false, "maximize"_a = false,
      "One Adam/AdamW step in place on the parameter and its state.");
}

}  // namespace pyflame::python
