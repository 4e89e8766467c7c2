// Python bindings of include/pyflame/nn_ops.h with PyTorch's argument names,
// order and defaults (torch.var/std/cumsum/cumprod and torch.nn.functional). None
// becomes an undefined Tensor. The ops of the op table are also Tensor methods.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <tuple>

#include "bindings.h"
#include "pyflame/error.h"
#include "pyflame/ir/op_call.h"
#include "pyflame/nn_ops.h"
#include "pyflame/ops.h"

namespace pyflame::python {

namespace {

Tensor opt(const std::optional<Tensor>& t) { return t.value_or(Tensor()); }

// PyTorch's deprecated size_average/reduce arguments, when given, decide the reduction.
std::string legacy_reduction(std::optional<bool> size_average, std::optional<bool> reduce, const std::string& reduction) {
  if (!size_average && !reduce) return reduction;
  bool mean = size_average.value_or(true), keep = reduce.value_or(true);
  return !keep ? "none" : mean ? "mean" : "sum";
}

// var/std's dim argument, which may also be PyTorch's positional `unbiased` (torch.var(x, False)).
double correction_of(nb::handle& dim, std::optional<bool> unbiased, std::optional<double> correction, const char* op) {
  if (PyBool_Check(dim.ptr())) {
    if (unbiased) throw pyflame::TypeError(std::string(op) + ": unbiased given twice");
    unbiased = dim.ptr() == Py_True;
    dim = nb::none();
  }
  if (unbiased && correction)
    throw pyflame::ValueError(std::string(op) + ": cannot specify both unbiased and correction");
  if (unbiased) return *unbiased ? 1.0 : 0.0;
  return correction.value_or(1.0);
}

// pf.<name>(input, ...) and Tensor.<name>(...) from one function whose first argument is the input.
template <class F, class... Extra>
void def_with_method(nb::module_& m, nb::class_<Tensor>& tensor, const char* name, F f, const Extra&... extra) {
  m.def(name, f, "input"_a, extra...);
  tensor.def(name, f, extra...);
}

// pf.layer_norm_backward and pf.rms_norm_backward: normalized_shape an int or a sequence.
template <class F> void def_row_norm_backward(nb::module_& m, const char* name, F backward, const char* doc) {
  m.def(
      name,
      [backward](const Tensor& grad, const Tensor& x, nb::handle normalized_shape, std::optional<Tensor> weight,
                 double eps, bool param_grads) {
        auto grads = backward(grad, x, as_shape(nb::make_tuple(normalized_shape)), opt(weight), eps, param_grads);
        return std::apply([](const auto&... t) { return nb::make_tuple((t.defined() ? nb::cast(t) : nb::none())...); },
                          grads);
      },
      "grad"_a, "input"_a, "normalized_shape"_a, "weight"_a = nb::none(), "eps"_a = 1e-5, "param_grads"_a = true, doc);
}

}  // namespace

void bind_nn(nb::module_& m, nb::class_<Tensor>& tensor) {
  // ---- statistics
  for (auto [name, fn] : {std::pair{"var", &pyflame::var}, std::pair{"std", &pyflame::std}}) {
    def_with_method(m, tensor, name,
        [fn, name](const Tensor& x, nb::handle dim, std::optional<bool> unbiased, bool keepdim,
                   std::optional<double> correction) {
          double c = correction_of(dim, unbiased, correction, name);
          return fn(x, as_dims(dim), c, keepdim);
        },
        "dim"_a = nb::none(), "unbiased"_a = nb::none(), "keepdim"_a = false, nb::kw_only(),
        "correction"_a = nb::none());
  }
  def_with_method(m, tensor, "cumsum", [](const Tensor& x, int64_t dim, nb::handle dtype) {
    return pyflame::cumsum(x, dim, as_opt_dtype(dtype));
  }, "dim"_a, nb::kw_only(), "dtype"_a = nb::none());
  def_with_method(m, tensor, "cumprod", [](const Tensor& x, int64_t dim, nb::handle dtype) {
    return pyflame::cumprod(x, dim, as_opt_dtype(dtype));
  }, "dim"_a, nb::kw_only(), "dtype"_a = nb::none());

  // ---- normalization
  def_with_method(m, tensor, "batch_norm",
      [](const Tensor& x, std::optional<Tensor> running_mean, std::optional<Tensor> running_var,
         std::optional<Tensor> weight, std::optional<Tensor> bias, bool training, double momentum, double eps) {
        return pyflame::batch_norm(x, opt(running_mean), opt(running_var), opt(weight), opt(bias), training,
                                   momentum, eps);
      },
      "running_mean"_a.none(), "running_var"_a.none(), "weight"_a = nb::none(), "bias"_a = nb::none(),
      "training"_a = false, "momentum"_a = 0.1, "eps"_a = 1e-5);
  def_with_method(m, tensor, "layer_norm",
      [](const Tensor& x, nb::handle normalized_shape, std::optional<Tensor> weight, std::optional<Tensor> bias,
         double eps) {
        return pyflame::layer_norm(x, as_shape(nb::make_tuple(normalized_shape)), opt(weight), opt(bias), eps);
      },
      "normalized_shape"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "eps"_a = 1e-5);
  def_with_method(m, tensor, "group_norm",
      [](const Tensor& x, int64_t num_groups, std::optional<Tensor> weight, std::optional<Tensor> bias, double eps) {
        return pyflame::group_norm(x, num_groups, opt(weight), opt(bias), eps);
      },
      "num_groups"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "eps"_a = 1e-5);
  def_with_method(m, tensor, "rms_norm",
      [](const Tensor& x, nb::handle normalized_shape, std::optional<Tensor> weight, std::optional<double> eps) {
        return pyflame::rms_norm(x, as_shape(nb::make_tuple(normalized_shape)), opt(weight), eps);
      },
      "normalized_shape"_a, "weight"_a = nb::none(), "eps"_a = nb::none());

  // ---- fused backward passes (PyTorch's _softmax_backward_data & co.)
  m.def("softmax_backward", &pyflame::softmax_backward, "grad"_a, "output"_a, "dim"_a,
        "The gradient of softmax's input from its output's gradient and its output.");
  m.def("log_softmax_backward", &pyflame::log_softmax_backward, "grad"_a, "output"_a, "dim"_a,
        "The gradient of log_softmax's input from its output's gradient and its output.");
  def_row_norm_backward(m, "layer_norm_backward", &pyflame::layer_norm_backward,
                        "(grad_input, grad_weight, grad_bias) of layer_norm (the statistics recomputed from the "
                        "input); the last two of normalized_shape in the compute dtype (None with param_grads=False).");
  def_row_norm_backward(m, "rms_norm_backward", &pyflame::rms_norm_backward,
                        "(grad_input, grad_weight) of rms_norm (the statistics recomputed from the input); the "
                        "weight's of normalized_shape in the compute dtype (None with param_grads=False).");
  m.def(
      "batch_norm_backward",
      [](const Tensor& grad, const Tensor& x, std::optional<Tensor> running_mean, std::optional<Tensor> running_var,
         std::optional<Tensor> weight, bool training, double eps) {
        return pyflame::batch_norm_backward(grad, x, opt(running_mean), opt(running_var), opt(weight), training, eps);
      },
      "grad"_a, "input"_a, "running_mean"_a = nb::none(), "running_var"_a = nb::none(), "weight"_a = nb::none(),
      "training"_a = false, "eps"_a = 1e-5,
      "(grad_input, grad_weight, grad_bias) of batch_norm (training: the batch statistics recomputed from the "
      "input; otherwise the running statistics); the last two in the compute dtype.");
  m.def(
      "group_norm_backward",
      [](const Tensor& grad, const Tensor& x, int64_t num_groups, std::optional<Tensor> weight, double eps) {
        return pyflame::group_norm_backward(grad, x, num_groups, opt(weight), eps);
      },
      "grad"_a, "input"_a, "num_groups"_a, "weight"_a = nb::none(), "eps"_a = 1e-5,
      "(grad_input, grad_weight, grad_bias) of group_norm (the statistics recomputed from the input); the last two "
      "in the compute dtype.");

  m.def(
      "cross_entropy_backward",
      [](const Tensor& scale, const Tensor& x, const Tensor& target, const Tensor& lse, std::optional<Tensor> weight,
         int64_t ignore_index, double label_smoothing) {
        return pyflame::cross_entropy_backward(scale, x, target, lse, opt(weight), ignore_index, label_smoothing);
      },
      "scale"_a, "input"_a, "target"_a, "lse"_a, "weight"_a = nb::none(), "ignore_index"_a = -100,
      "label_smoothing"_a = 0.0,
      "d/d(input) of sum(scale * cross_entropy(input, target, reduction='none')) (class-index targets); lse: "
      "each element's logsumexp over the classes.");

  // ---- dropout
  def_with_method(m, tensor, "dropout",
      [](nb::handle self, double p, bool training, bool inplace, std::optional<pyflame::Generator*> generator)
          -> nb::object {
        Tensor& x = nb::cast<Tensor&>(self);
        Tensor r = pyflame::dropout(x, p, training, generator.value_or(nullptr));
        if (!inplace) return nb::cast(r);
        return in_place(self, [&](Tensor& t) { if (!r.same_storage(t)) pyflame::copy_(t, r); });
      },
      "p"_a = 0.5, "training"_a = true, "inplace"_a = false, "generator"_a = nb::none());

  // ---- losses
  def_with_method(m, tensor, "nll_loss",
      [](const Tensor& x, const Tensor& target, std::optional<Tensor> weight, std::optional<bool> size_average,
         int64_t ignore_index, std::optional<bool> reduce, const std::string& reduction) {
        return pyflame::nll_loss(x, target, opt(weight), ignore_index,
                                 legacy_reduction(size_average, reduce, reduction));
      },
      "target"_a, "weight"_a = nb::none(), "size_average"_a = nb::none(), "ignore_index"_a = -100,
      "reduce"_a = nb::none(), "reduction"_a = "mean");
  m.def("cross_entropy",
      [](const Tensor& x, const Tensor& target, std::optional<Tensor> weight, std::optional<bool> size_average,
         int64_t ignore_index, std::optional<bool> reduce, const std::string& reduction, double label_smoothing) {
        return pyflame::cross_entropy(x, target, opt(weight), ignore_index,
                                      legacy_reduction(size_average, reduce, reduction), label_smoothing);
      },
      "input"_a, "target"_a, "weight"_a = nb::none(), "size_average"_a = nb::none(), "ignore_index"_a = -100,
      "reduce"_a = nb::none(), "reduction"_a = "mean", "label_smoothing"_a = 0.0);
  for (auto [name, fn] : {std::pair{"mse_loss", &pyflame::mse_loss}, std::pair{"l1_loss", &pyflame::l1_loss}}) {
    m.def(name,
        [fn](const Tensor& x, const Tensor& target, std::optional<bool> size_average, std::optional<bool> reduce,
             const std::string& reduction, std::optional<Tensor> weight) {
          return fn(x, target, legacy_reduction(size_average, reduce, reduction), opt(weight));
        },
        "input"_a, "target"_a, "size_average"_a = nb::none(), "reduce"_a = nb::none(), "reduction"_a = "mean",
        "weight"_a = nb::none());
  }
  m.def("smooth_l1_loss",
      [](const Tensor& x, const Tensor& target, std::optional<bool> size_average, std::optional<bool> reduce,
         const std::string& reduction, double beta) {
        return pyflame::smooth_l1_loss(x, target, legacy_reduction(size_average, reduce, reduction), beta);
      },
      "input"_a, "target"_a, "size_average"_a = nb::none(), "reduce"_a = nb::none(), "reduction"_a = "mean",
      "beta"_a = 1.0);
  for (const char* name : {"binary_cross_entropy", "bce_loss"}) {
    m.def(name,
        [](const Tensor& x, const Tensor& target, std::optional<Tensor> weight, std::optional<bool> size_average,
           std::optional<bool> reduce, const std::string& reduction) {
          return pyflame::binary_cross_entropy(x, target, opt(weight), legacy_reduction(size_average, reduce, reduction));
        },
        "input"_a, "target"_a, "weight"_a = nb::none(), "size_average"_a = nb::none(), "reduce"_a = nb::none(),
        "reduction"_a = "mean");
  }
  for (const char* name : {"binary_cross_entropy_with_logits", "bce_with_logits"}) {
    m.def(name,
        [](const Tensor& x, const Tensor& target, std::optional<Tensor> weight, std::optional<bool> size_average,
           std::optional<bool> reduce, const std::string& reduction, std::optional<Tensor> pos_weight) {
          return pyflame::binary_cross_entropy_with_logits(
              x, target, opt(weight), legacy_reduction(size_average, reduce, reduction), opt(pos_weight));
        },
        "input"_a, "target"_a, "weight"_a = nb::none(), "size_average"_a = nb::none(), "reduce"_a = nb::none(),
        "reduction"_a = "mean", "pos_weight"_a = nb::none());
  }
  m.def("kl_div",
      [](const Tensor& x, const Tensor& target, std::optional<bool> size_average, std::optional<bool> reduce,
         const std::string& reduction, bool log_target) {
        return pyflame::kl_div(x, target, legacy_reduction(size_average, reduce, reduction), log_target);
      },
      "input"_a, "target"_a, "size_average"_a = nb::none(), "reduce"_a = nb::none(), "reduction"_a = "mean",
      "log_target"_a = false);

  // ---- attention
  m.def("scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> attn_mask, double dropout_p,
         bool is_causal, std::optional<double> scale, bool enable_gqa) {
        return pyflame::scaled_dot_product_attention(q, k, v, opt(attn_mask), dropout_p, is_causal, scale, enable_gqa);
      },
      "query"_a, "key"_a, "value"_a, "attn_mask"_a = nb::none(), "dropout_p"_a = 0.0, "is_causal"_a = false,
      nb::kw_only(), "scale"_a = nb::none(), "enable_gqa"_a = false);
  m.def("flash_attention", &pyflame::flash_attention, "query"_a, "key"_a, "value"_a, "is_causal"_a = false,
        nb::kw_only(), "scale"_a = nb::none(),
        "Fused attention of (N, H, L, E) query and (N, Hk, S, E) key and value (float16/bfloat16): "
        "(output, logsumexp). What scaled_dot_product_attention runs where it can.");
  m.def("rotary_embedding", &pyflame::rotary_embedding, "x"_a, "cos"_a, "sin"_a,
        "x * cos + rotate_half(x) * sin in one pass: x (..., T, D) of 2 to 4 dims, cos and sin (T, D). "
        "What F.apply_rotary_emb runs outside autograd.");
  m.def("rotary_kv_cache",
        [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos, const Tensor& sin,
           const Tensor& position, const Tensor& k_cache, const Tensor& v_cache) {
          return nb::tuple(nb::cast(pyflame::apply(
              {ir::OpType::rotary_kv_cache, {q, k, v, cos, sin, position, k_cache, v_cache}, NoAttrs{}, {}})));
        },
        "q"_a, "k"_a, "v"_a, "cos"_a, "sin"_a, "position"_a, "k_cache"_a, "v_cache"_a,
        "(q rotated, k_cache and v_cache with k rotated and v written at positions position .. position + T - 1 "
        "of their third dim): new caches; F.rotary_kv_cache_ updates the given ones in place.");
  m.def("rotary_kv_cache_", &pyflame::rotary_kv_cache_, "q"_a, "k"_a, "v"_a, "cos"_a, "sin"_a, "position"_a,
        "k_cache"_a, "v_cache"_a,
        "A decode step's rotary embeddings and cache writes in one pass: returns q rotated and writes k rotated "
        "and v into k_cache and v_cache (B, KV, L, D) at positions position .. position + T - 1, in place.");
  m.def("decode_attention",
        [](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> key_mask,
           std::optional<double> scale) { return pyflame::decode_attention(q, k, v, opt(key_mask), scale); },
        "query"_a, "key"_a, "value"_a, "key_mask"_a = nb::none(), nb::kw_only(), "scale"_a = nb::none(),
        "One query row per head, (N, H, 1, E), against (N, Hk, S, E) keys and values, keys where the (N, S) bool "
        "key_mask is False left out: what scaled_dot_product_attention runs for one query row (a decode step).");
  m.def("flash_attention_backward", &pyflame::flash_attention_backward, "grad_output"_a, "query"_a, "key"_a,
        "value"_a, "output"_a, "logsumexp"_a, "is_causal"_a = false, nb::kw_only(), "scale"_a = nb::none(),
        "flash_attention's gradients of query, key and value.");
}

}  // namespace pyflame::python
