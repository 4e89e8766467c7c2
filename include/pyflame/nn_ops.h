#pragma once
// Ops of neural networks beyond the elementwise ones: statistics (var, std,
// cumsum, cumprod), normalization, dropout, losses and attention, with PyTorch's
// functional names, argument order and defaults. An undefined Tensor (Tensor())
// stands for None. Validation is in src/core/nn_ops.cpp; var, std, the scans, the
// norms, dropout and nll_loss have kernels (CPU: src/cpu/{variance,scan,norm,
// dropout,loss}.cpp), the other losses and attention are compositions of ops.

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "pyflame/generator.h"
#include "pyflame/tensor.h"

namespace pyflame {

// ---- statistics
// Over `dims` ({} = all); the divisor is max(0, n - correction) (1: unbiased).
PF_API Tensor var(const Tensor& input, const std::vector<int64_t>& dims = {}, double correction = 1,
                  bool keepdim = false);
PF_API Tensor std(const Tensor& input, const std::vector<int64_t>& dims = {}, double correction = 1,
                  bool keepdim = false);
// cumsum, cumprod: integer and bool inputs give int64 unless `dtype` says otherwise.
PF_API Tensor cumsum(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt);
PF_API Tensor cumprod(const Tensor& input, int64_t dim, std::optional<DType> dtype = std::nullopt);

// ---- normalization (statistics in float64)
// training: batch statistics, and running_mean/running_var (when given) are
// updated in place with the unbiased batch variance; otherwise the running
// statistics normalize.
PF_API Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                         const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                         double momentum = 0.1, double eps = 1e-5);
PF_API Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = {},
                         const Tensor& bias = {}, double eps = 1e-5);
PF_API Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight = {}, const Tensor& bias = {},
                         double eps = 1e-5);
// eps defaults to the machine epsilon of the computation (float or double).
PF_API Tensor rms_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = {},
                       std::optional<double> eps = std::nullopt);

// ---- dropout: zeroes elements with probability p (element i is dropped when
// the float32 uniform draw i of `generator`, default the one manual_seed
// seeds, is below p: the mask is the same on every device) and scales the
// others by 1 / (1 - p). Returns `input` itself when not training or p == 0.
PF_API Tensor dropout(const Tensor& input, double p = 0.5, bool training = true, Generator* generator = nullptr);

// ---- losses; reduction is "mean", "sum" or "none"
PF_API Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                       const Tensor& weight = {});
PF_API Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                      const Tensor& weight = {});
PF_API Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                             double beta = 1.0);
// input (N, C, d1, ...) or (C); target: class indices (N, d1, ...) or (), or
// class probabilities shaped like input.
PF_API Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            int64_t ignore_index = -100, const std::string& reduction = "mean",
                            double label_smoothing = 0.0);
PF_API Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                       int64_t ignore_index = -100, const std::string& reduction = "mean");
// log terms clamped at -100, as PyTorch; bce_loss is the same function.
PF_API Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                   const std::string& reduction = "mean");
PF_API Tensor bce_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                       const std::string& reduction = "mean");
PF_API Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                                               const std::string& reduction = "mean", const Tensor& pos_weight = {});
// reduction may also be "batchmean" (the sum divided by the batch size).
PF_API Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
                     bool log_target = false);

// ---- fused backward passes (what autograd runs for softmax, log_softmax,
// the norms and cross_entropy): the gradient of the input. `weight` may be undefined.
PF_API Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim);
PF_API Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim);
// layer_norm and rms_norm: the input's gradient, then the weight's (sum of
// g * xhat over the rows) and, for layer_norm, the bias's (sum of g), in the
// compute dtype: the statistics each row needs once, and the parameters'
// sums from the same reads where composing them took four passes more.
// With param_grads false, only the input's gradient is made (the others undefined).
PF_API std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(const Tensor& grad, const Tensor& input,
                                                              const Shape& normalized_shape, const Tensor& weight,
                                                              double eps, bool param_grads = true);
PF_API std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad, const Tensor& input,
                                                    const Shape& normalized_shape, const Tensor& weight, double eps,
                                                    bool param_grads = true);
// batch_norm and group_norm: the gradients of the input, the weight and the
// bias, from one pass over grad and input. batch_norm's input gradient needs
// the per-channel sums of g and g * xhat, which are the bias's and the
// weight's gradients; group_norm's pass meets every per-channel sum too,
// where computing them on their own would read grad and input again. So
// the three come together, the last two as if weight and bias were given,
// in the compute dtype (float32 for float16/bfloat16 inputs).
// batch_norm: training recomputes the batch statistics (running_mean and
// running_var are not read); otherwise they normalize and must be given.
PF_API std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad, const Tensor& input,
                                                              const Tensor& running_mean, const Tensor& running_var,
                                                              const Tensor& weight, bool training, double eps);
PF_API std::tuple<Tensor, Tensor, Tensor> group_norm_backward(const Tensor& grad, const Tensor& input,
                                                              int64_t num_groups, const Tensor& weight, double eps);
// cross_entropy with class-index targets: d(loss)/d(input) for a loss whose
// gradient per element is `scale` (a 0-d tensor applies to every element);
// lse: each element's logsumexp over the classes (the forward's second output).
PF_API Tensor cross_entropy_backward(const Tensor& scale, const Tensor& input, const Tensor& target,
                                     const Tensor& lse, const Tensor& weight, int64_t ignore_index,
                                     double label_smoothing);

// ---- attention: softmax(q k^T * scale + mask) v over any leading batch dims.
// attn_mask: bool (true = attend) or float (added), broadcastable to (..., L, S).
PF_API Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                           const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                           bool is_causal = false, std::optional<double> scale = std::nullopt,
                                           bool enable_gqa = false);

// ---- fused attention (the table op scaled_dot_product_attention runs where it can): query
// (N, H, L, E), key and value (N, Hk, S, E), H a multiple of Hk; float16/bfloat16, E a multiple
// of 8 up to 256. Returns the output and each query's logsumexp of its scaled scores (float32,
// (N, H, L)), what the backward reads instead of the (L, S) probabilities.
PF_API std::tuple<Tensor, Tensor> flash_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                                  bool is_causal = false, std::optional<double> scale = std::nullopt);
// Rotary position embedding, rotate_half convention: x * cos + cat(-x2, x1) * sin, x1 and x2 the
// halves of x's last dim; x (..., T, D) of 2 to 4 dims, cos and sin (T, D) in x's dtype. Not
// differentiable (F.apply_rotary_emb composes it from elementwise ops under autograd).
PF_API Tensor rotary_embedding(const Tensor& x, const Tensor& cos, const Tensor& sin);
// A decode step's rotary embeddings and key/value cache writes in one pass: returns q rotated
// (as rotary_embedding) and writes k rotated and v into k_cache and v_cache (B, KV, L, D) at
// positions p .. p + T - 1 of their third dim, p the value of `position` (an int64 tensor of one
// element, which may live on the device: a captured decode step reads it there). q (B, H, T, D),
// k and v (B, KV, T, D); cos and sin (T, D), or (B, 1, T, D) for rows at positions of their own
// (left padding); one floating dtype. A position past the cache raises IndexError (on the GPU at
// the next wait for it, as indexing does) and leaves the caches as they were. Not differentiable.
PF_API Tensor rotary_kv_cache_(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos, const Tensor& sin,
                               const Tensor& position, Tensor& k_cache, Tensor& v_cache);
// One query row per head (query (N, H, 1, E)) against keys and values (N, Hk, S, E), keys where
// key_mask (N, S; bool; undefined: all) is false left out; a row with no key gets zeros. Not
// differentiable: a language model's decode step, what scaled_dot_product_attention runs there.
PF_API Tensor decode_attention(const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& key_mask,
                               std::optional<double> scale = std::nullopt);
PF_API std::tuple<Tensor, Tensor, Tensor> flash_attention_backward(const Tensor& grad_output, const Tensor& query,
                                                                   const Tensor& key, const Tensor& value,
                                                                   const Tensor& output, const Tensor& logsumexp,
                                                                   bool is_causal = false,
                                                                   std::optional<double> scale = std::nullopt);

}  // namespace pyflame
