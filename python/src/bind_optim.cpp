// Fused optimizer updates (pyflame/optim_ops.h): pf.adam_step (out of place,
// the updated parameter) and pf.adam_step_ (in place: what pf.optim.Adam runs).

#include <nanobind/stl/optional.h>

#include "bindings.h"
#include "pyflame/optim_ops.h"

namespace pyflame::python {

namespace {

// Both forms take the same arguments; `step` runs one with the attributes assembled.
template <class Step> void def_adam(nb::module_& m, const char* name, Step step, const char* doc) {
  m.def(
      name,
      [step](Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
             std::optional<Tensor> max_exp_avg_sq, double lr, double beta1, double beta2, double eps,
             double weight_decay, double bias_correction1, double bias_correction2, bool decoupled_weight_decay,
             bool amsgrad, bool maximize) -> nb::object {
        Tensor v_max = max_exp_avg_sq.value_or(Tensor());
        return step(param, grad, exp_avg, exp_avg_sq, v_max,
                    pyflame::AdamAttrs{lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2,
                                       decoupled_weight_decay, amsgrad, maximize});
      },
      "param"_a, "grad"_a, "exp_avg"_a, "exp_avg_sq"_a, "max_exp_avg_sq"_a = nb::none(), nb::kw_only(), "lr"_a,
      "beta1"_a, "beta2"_a, "eps"_a, "weight_decay"_a = 0.0, "bias_correction1"_a = 1.0, "bias_correction2"_a = 1.0,
      "decoupled_weight_decay"_a = false, "amsgrad"_a = false, "maximize"_a = false, doc);
}

}  // namespace

void bind_optim(nb::module_& m) {
  def_adam(
      m, "adam_step",
      [](Tensor& p, const Tensor& g, Tensor& m1, Tensor& m2, Tensor& v_max, const pyflame::AdamAttrs& a) {
        return nb::cast(pyflame::adam_step(p, g, m1, m2, v_max, a));
      },
      "One Adam/AdamW step out of place: the updated parameter (bias corrections: 1 - beta^t).");
  def_adam(
      m, "adam_step_",
      [](Tensor& p, const Tensor& g, Tensor& m1, Tensor& m2, Tensor& v_max, const pyflame::AdamAttrs& a) {
        pyflame::adam_step_(p, g, m1, m2, v_max, a);
        return nb::none();
      },
      "One Adam/AdamW step in place on the parameter and its state.");
}

}  // namespace pyflame::python
