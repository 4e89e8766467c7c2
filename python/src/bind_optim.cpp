// Fused optimizer updates (pyflame/optim_ops.h): pf.adam_step, pf.sgd_step,
// pf.rmsprop_step (one parameter, out of place: the updated parameter) and
// _C.adam_step_, _C.sgd_step_, _C.rmsprop_step_ (lists of parameters, in
// place: what pf.optim runs, one call per group).

#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/optim_ops.h"

namespace pyflame::python {

namespace {

using TensorList = std::vector<Tensor>;

Tensor or_absent(const std::optional<Tensor>& t) { return t.value_or(Tensor()); }
TensorList or_empty(const std::optional<TensorList>& l) { return l.value_or(TensorList()); }

}  // namespace

void bind_optim(nb::module_& m) {
  m.def(
      "adam_step",
      [](const Tensor& p, const Tensor& g, const Tensor& m1, const Tensor& m2, std::optional<Tensor> v_max,
         std::optional<Tensor> step, double lr, double beta1, double beta2, double eps, double weight_decay,
         double bias_correction1, double bias_correction2, bool decoupled_weight_decay, bool amsgrad, bool maximize) {
        return pyflame::adam_step(p, g, m1, m2, or_absent(v_max),
                                  {lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2,
                                   decoupled_weight_decay, amsgrad, maximize},
                                  or_absent(step));
      },
      "param"_a, "grad"_a, "exp_avg"_a, "exp_avg_sq"_a, "max_exp_avg_sq"_a = nb::none(), "step"_a = nb::none(),
      nb::kw_only(), "lr"_a,
      "beta1"_a, "beta2"_a, "eps"_a, "weight_decay"_a = 0.0, "bias_correction1"_a = 1.0, "bias_correction2"_a = 1.0,
      "decoupled_weight_decay"_a = false, "amsgrad"_a = false, "maximize"_a = false,
      "One Adam/AdamW step out of place: the updated parameter (bias corrections: 1 - beta^t, from `step`, a 0-d\n"
      "tensor holding t, where it is given).");
  m.def(
      "adam_step_",
      [](const TensorList& p, const TensorList& g, const TensorList& m1, const TensorList& m2,
         std::optional<TensorList> v_max, double lr, double beta1, double beta2, double eps, double weight_decay,
         double bias_correction1, double bias_correction2, bool decoupled_weight_decay, bool amsgrad,
         bool maximize, std::optional<TensorList> steps) {
        pyflame::adam_step_(p, g, m1, m2, or_empty(v_max),
                            {lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2,
                             decoupled_weight_decay, amsgrad, maximize},
                            or_empty(steps));
      },
      "params"_a, "grads"_a, "exp_avgs"_a, "exp_avg_sqs"_a, "max_exp_avg_sqs"_a = nb::none(), nb::kw_only(), "lr"_a,
      "beta1"_a, "beta2"_a, "eps"_a, "weight_decay"_a = 0.0, "bias_correction1"_a = 1.0, "bias_correction2"_a = 1.0,
      "decoupled_weight_decay"_a = false, "amsgrad"_a = false, "maximize"_a = false, "steps"_a = nb::none(),
      "Adam/AdamW steps in place on lists of parameters (one dtype) and their state; `steps`, one 0-d tensor per\n"
      "parameter on its device, gives the step counts the bias corrections come from (capturable).");

  m.def(
      "sgd_step",
      [](const Tensor& p, const Tensor& g, std::optional<Tensor> buf, double lr, double momentum, double dampening,
         double weight_decay, bool nesterov, bool maximize, bool first_step) {
        return pyflame::sgd_step(p, g, or_absent(buf),
                                 {lr, momentum, dampening, weight_decay, nesterov, maximize, first_step});
      },
      "param"_a, "grad"_a, "momentum_buffer"_a = nb::none(), nb::kw_only(), "lr"_a, "momentum"_a = 0.0,
      "dampening"_a = 0.0, "weight_decay"_a = 0.0, "nesterov"_a = false, "maximize"_a = false,
      "first_step"_a = false,
      "One SGD step out of place: the updated parameter (first_step: the momentum buffer starts as the gradient).");
  m.def(
      "sgd_step_",
      [](const TensorList& p, const TensorList& g, std::optional<TensorList> bufs, double lr, double momentum,
         double dampening, double weight_decay, bool nesterov, bool maximize, bool first_step) {
        pyflame::sgd_step_(p, g, or_empty(bufs),
                           {lr, momentum, dampening, weight_decay, nesterov, maximize, first_step});
      },
      "params"_a, "grads"_a, "momentum_buffers"_a = nb::none(), nb::kw_only(), "lr"_a, "momentum"_a = 0.0,
      "dampening"_a = 0.0, "weight_decay"_a = 0.0, "nesterov"_a = false, "maximize"_a = false,
      "first_step"_a = false, "SGD steps in place on lists of parameters (one dtype) and their momentum buffers.");

  m.def(
      "rmsprop_step",
      [](const Tensor& p, const Tensor& g, const Tensor& v, std::optional<Tensor> buf, std::optional<Tensor> avg,
         double lr, double alpha, double eps, double weight_decay, double momentum, bool centered, bool maximize) {
        return pyflame::rmsprop_step(p, g, v, or_absent(buf), or_absent(avg),
                                     {lr, alpha, eps, weight_decay, momentum, centered, maximize});
      },
      "param"_a, "grad"_a, "square_avg"_a, "momentum_buffer"_a = nb::none(), "grad_avg"_a = nb::none(),
      nb::kw_only(), "lr"_a, "alpha"_a = 0.99, "eps"_a = 1e-8, "weight_decay"_a = 0.0, "momentum"_a = 0.0,
      "centered"_a = false, "maximize"_a = false, "One RMSprop step out of place: the updated parameter.");
  m.def(
      "rmsprop_step_",
      [](const TensorList& p, const TensorList& g, const TensorList& v, std::optional<TensorList> bufs,
         std::optional<TensorList> avgs, double lr, double alpha, double eps, double weight_decay, double momentum,
         bool centered, bool maximize) {
        pyflame::rmsprop_step_(p, g, v, or_empty(bufs), or_empty(avgs),
                               {lr, alpha, eps, weight_decay, momentum, centered, maximize});
      },
      "params"_a, "grads"_a, "square_avgs"_a, "momentum_buffers"_a = nb::none(), "grad_avgs"_a = nb::none(),
      nb::kw_only(), "lr"_a, "alpha"_a = 0.99, "eps"_a = 1e-8, "weight_decay"_a = 0.0, "momentum"_a = 0.0,
      "centered"_a = false, "maximize"_a = false,
      "RMSprop steps in place on lists of parameters (one dtype) and their state.");
}

}  // namespace pyflame::python
