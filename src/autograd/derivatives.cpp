// The derivative table: one vector-Jacobian product per differentiable op of
// ops.def, written with the public ops so the CPU and the GPU run the same
// formulas (see derivatives.h): the formulas of the table's grad column
// (one-input ops, compiled here from ops.def) and a function registered here
// for the rest. Float16/bfloat16 formulas that sum compute in float32; the
// engine converts each result back to its input's dtype.
// tests/python/test_autograd.py walks the op table: a differentiable op
// without a derivative fails it.

#include <cmath>
#include <limits>

#include "autograd/derivatives.h"
#include "core/dispatch.h"
#include "core/matrix_layout.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/misc_ops.h"
#include "pyflame/nn_ops.h"
#include "pyflame/ops.h"

namespace pyflame::autograd {

Tensor view_region(const OpCall& call, const Tensor& base) {
  const ViewAttrs& a = call.attr<ViewAttrs>();
  return call.op == ir::OpType::select ? select(base, a.dims[0], a.positions[0])
                                       : slice(base, a.dims[0], a.positions[0], a.positions[1], a.positions[2]);
}

// Zeros of `shape` with g's dtype, on g's device.
Tensor zeros_like_shape(const Shape& shape, const Tensor& g) {
  Tensor z = Tensor::empty(shape, g.dtype(), g.device());
  return fill_(z, Scalar(0.0));
}

std::vector<int64_t> all_dims_but(int64_t ndim, int64_t keep) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < ndim; ++d)
    if (d != keep) dims.push_back(d);
  return dims;
}

namespace {

using Grads = std::vector<Tensor>;
using ir::OpType;

Tensor zero_scalar() { return Tensor::scalar(Scalar(0.0)); }

// float16/bfloat16 -> float32, so sums and statistics keep their precision.
Tensor widen(const Tensor& t) {
  return t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16 ? to(t, DType::Float32) : t;
}

Tensor as_dtype_of(const Tensor& mask, const Tensor& like) { return to(mask, like.dtype()); }

// A reduction's gradient (or result) reshaped so it broadcasts against the input.
Tensor unreduce(const Tensor& g, const Shape& in_shape, const std::vector<int64_t>& dims) {
  Shape kept = in_shape;
  if (dims.empty()) std::fill(kept.begin(), kept.end(), 1);
  for (int64_t d : dims) kept[d] = 1;
  return reshape(g, kept);
}

int64_t reduced_count(const Shape& in_shape, const std::vector<int64_t>& dims) {
  if (dims.empty()) return shape_numel(in_shape);
  int64_t n = 1;
  for (int64_t d : dims) n *= in_shape[d];
  return n;
}

// ---------------------------------------------------------------- elementwise

Grads d_add(const GradContext& c) { return {c.grad(), c.grad()}; }
// A formula computes only the gradients its inputs want: a Python number's
// (x * 0.125) would be a full pass over the gradient, then a sum, for nothing.
Grads d_sub(const GradContext& c) { return {c.grad(), c.needs[1] ? neg(c.grad()) : Tensor()}; }
Grads d_mul(const GradContext& c) {
  Grads r(2);
  if (c.needs[0]) r[0] = mul(c.grad(), c.input(1));
  if (c.needs[1]) r[1] = mul(c.grad(), c.input(0));
  return r;
}
Grads d_div(const GradContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  Grads r(2);
  if (c.needs[0]) r[0] = div(c.grad(), b);
  if (c.needs[1]) r[1] = neg(div(mul(c.grad(), a), mul(b, b)));
  return r;
}
Grads d_pow(const GradContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1), &g = c.grad();
  Grads r(2);
  if (c.needs[0])  // b * a^(b-1), and 0 where b == 0 (not 0 * inf at a == 0)
    r[0] = where(eq(b, Scalar(0.0)), zero_scalar(), mul(g, mul(b, pow(a, sub(b, Scalar(1.0))))));
  if (c.needs[1])  // a^b log a, and 0 where a == 0 and b >= 0 (the limit)
    r[1] = where(logical_and(eq(a, Scalar(0.0)), ge(b, Scalar(0.0))), zero_scalar(),
                 mul(g, mul(c.output(), log(a))));
  return r;
}
// Ties split the gradient evenly, as PyTorch's maximum/minimum.
Grads d_extremum(const GradContext& c, OpType wins) {
  const Tensor &a = c.input(0), &b = c.input(1), &g = c.grad();
  Tensor tie = mul(as_dtype_of(eq(a, b), g), Scalar(0.5));
  Grads r(2);
  if (c.needs[0]) r[0] = mul(g, add(as_dtype_of(binary_op(wins, a, b), g), tie));
  if (c.needs[1]) r[1] = mul(g, add(as_dtype_of(binary_op(wins, b, a), g), tie));
  return r;
}
Grads d_maximum(const GradContext& c) { return d_extremum(c, OpType::gt); }
Grads d_minimum(const GradContext& c) { return d_extremum(c, OpType::lt); }

Grads d_hardtanh(const GradContext& c) {
  const ElementwiseAttrs& a = c.attr<ElementwiseAttrs>();
  const Tensor& x = c.input(0);
  return {where(logical_and(gt(x, a.param<ParamName::hardtanh_min_val>()), lt(x, a.param<ParamName::hardtanh_max_val>())),
                c.grad(), zero_scalar())};
}
Grads d_gelu(const GradContext& c) {
  const bool tanh_form = c.attr<ElementwiseAttrs>().param<ParamName::gelu_approximate_tanh>().i;
  return {binary_op(tanh_form ? OpType::gelu_tanh_backward : OpType::gelu_backward, c.grad(), c.input(0))};
}
// d atan2(a, b) = (b da - a db) / (a^2 + b^2)
Grads d_atan2(const GradContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  Tensor scale = div(c.grad(), add(mul(a, a), mul(b, b)));
  Grads r(2);
  if (c.needs[0]) r[0] = mul(scale, b);
  if (c.needs[1]) r[1] = neg(mul(scale, a));
  return r;
}
// d hypot(a, b) = (a da + b db) / hypot(a, b)
Grads d_hypot(const GradContext& c) {
  Tensor scale = div(c.grad(), c.output());
  Grads r(2);
  if (c.needs[0]) r[0] = mul(scale, c.input(0));
  if (c.needs[1]) r[1] = mul(scale, c.input(1));
  return r;
}
// trigamma(x), digamma's derivative, from table ops: the recurrence
// psi1(x) = psi1(x + 6) + sum 1/(x + k)^2 and the asymptotic series at x + 6
// (error below 1e-10 for x > 0); below 0.5 the reflection
// psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x).
Tensor trigamma_positive(const Tensor& x) {
  Tensor r = zeros_like(x);
  for (int k = 0; k < 6; ++k) r = add(r, reciprocal(square(add(x, Scalar(double(k))))));
  Tensor z = add(x, Scalar(6.0)), iz = reciprocal(z), iz2 = square(iz);
  // 1/z + 1/(2z^2) + 1/(6z^3) - 1/(30z^5) + 1/(42z^7) - 1/(30z^9)
  Tensor series = mul(iz2, Scalar(-1.0 / 30));
  for (double coef : {1.0 / 42, -1.0 / 30, 1.0 / 6}) series = mul(iz2, add(series, Scalar(coef)));
  return add(r, add(iz, add(mul(iz2, Scalar(0.5)), mul(iz, series))));
}
Tensor trigamma(const Tensor& x) {
  Tensor csc2 = reciprocal(square(sin(mul(x, Scalar(M_PI)))));
  Tensor reflected = sub(mul(csc2, Scalar(M_PI * M_PI)), trigamma_positive(sub(Scalar(1.0), x)));
  return where(lt(x, Scalar(0.5)), reflected, trigamma_positive(x));
}
// fmax/fmin: the gradient goes to the input that was chosen; ties to the first,
// and a NaN operand passes it to the other (PyTorch's formulas).
Grads d_fextremum(const GradContext& c, OpType wins) {
  const Tensor &a = c.input(0), &b = c.input(1), &g = c.grad();
  Tensor a_chosen = logical_or(logical_or(binary_op(wins, a, b), eq(a, b)), isnan(b));
  Grads r(2);
  if (c.needs[0]) r[0] = where(a_chosen, g, zero_scalar());
  if (c.needs[1]) r[1] = where(a_chosen, zero_scalar(), g);
  return r;
}
Grads d_fmax(const GradContext& c) { return d_fextremum(c, OpType::gt); }
Grads d_fmin(const GradContext& c) { return d_fextremum(c, OpType::lt); }
// Zero gradients for both inputs: rounded quotients are piecewise constant (torch.div(rounding_mode=)'s);
// a normal sample gives its mean and std none (torch.normal's: no reparameterisation).
Grads d_zero2(const GradContext& c) { return {zeros_like(c.grad()), zeros_like(c.grad())}; }
// remainder(a, b) = a - floor(a / b) b and fmod(a, b) = a - trunc(a / b) b, the quotient held constant.
Grads d_remainder(const GradContext& c) {
  Grads r(2);
  if (c.needs[0]) r[0] = c.grad();
  if (c.needs[1]) r[1] = neg(mul(c.grad(), floor_divide(c.input(0), c.input(1))));
  return r;
}
Grads d_fmod(const GradContext& c) {
  Grads r(2);
  if (c.needs[0]) r[0] = c.grad();
  if (c.needs[1]) r[1] = neg(mul(c.grad(), trunc_divide(c.input(0), c.input(1))));
  return r;
}
// d logaddexp(a, b) = (e^a da + e^b db) / (e^a + e^b)
Grads d_logaddexp(const GradContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  Grads r(2);
  if (c.needs[0]) r[0] = div(c.grad(), add(exp(sub(b, a)), Scalar(1.0)));
  if (c.needs[1]) r[1] = div(c.grad(), add(exp(sub(a, b)), Scalar(1.0)));
  return r;
}
// copysign(a, b) = a or -a: the gradient's sign is result / a (0 where a is 0); none for b.
Grads d_copysign(const GradContext& c) {
  const Tensor& a = c.input(0);
  Grads r(2);
  if (c.needs[0]) r[0] = mul(c.grad(), where(eq(a, Scalar(0.0)), zero_scalar(), div(c.output(), a)));
  if (c.needs[1]) r[1] = zeros_like(c.grad());
  return r;
}
// d xlogy(x, y) = log(y) dx (0 where x is 0, as the value) + x / y dy
Grads d_xlogy(const GradContext& c) {
  const Tensor &x = c.input(0), &y = c.input(1);
  Grads r(2);
  if (c.needs[0]) r[0] = mul(c.grad(), xlogy(ne(x, Scalar(0.0)), y));
  if (c.needs[1]) r[1] = div(mul(c.grad(), x), y);
  return r;
}
Grads d_leaky_relu(const GradContext& c) {
  const double slope = c.attr<ElementwiseAttrs>().param<ParamName::leaky_relu_negative_slope>().f;
  return {where(gt(c.input(0), Scalar(0.0)), c.grad(), mul(c.grad(), Scalar(slope)))};
}
Grads d_elu(const GradContext& c) {
  const double alpha = c.attr<ElementwiseAttrs>().param<ParamName::elu_alpha>().f;
  return {where(gt(c.input(0), Scalar(0.0)), c.grad(), mul(c.grad(), add(c.output(), Scalar(alpha))))};
}
Grads d_softplus(const GradContext& c) {
  const ElementwiseAttrs& a = c.attr<ElementwiseAttrs>();
  Tensor z = mul(c.input(0), a.param<ParamName::softplus_beta>());
  return {where(gt(z, a.param<ParamName::softplus_threshold>()), c.grad(), mul(c.grad(), sigmoid(z)))};
}

Grads d_where(const GradContext& c) {
  const Tensor &cond = c.input(0), &g = c.grad();
  Grads r(3);
  if (c.needs[1]) r[1] = where(cond, g, zero_scalar());
  if (c.needs[2]) r[2] = where(cond, zero_scalar(), g);
  return r;
}
Grads d_clamp(const GradContext& c) {
  const ClampAttrs& a = c.attr<ClampAttrs>();
  const Tensor& x = c.input(0);
  Tensor keep = ones_like(x, DType::Bool);
  if (a.min) keep = logical_and(keep, ge(x, *a.min));
  if (a.max) keep = logical_and(keep, le(x, *a.max));
  return {where(keep, c.grad(), zero_scalar())};
}

// ---------------------------------------------------------------- reductions

Grads d_sum(const GradContext& c) {
  const ReduceAttrs& a = c.attr<ReduceAttrs>();
  return {expand(unreduce(c.grad(), c.input_shape(0), a.dims), c.input_shape(0))};
}
Grads d_mean(const GradContext& c) {
  const ReduceAttrs& a = c.attr<ReduceAttrs>();
  const Shape& s = c.input_shape(0);
  const double n = static_cast<double>(reduced_count(s, a.dims));
  return {expand(div(unreduce(c.grad(), s, a.dims), Scalar(n)), s)};
}
// amax/amin: the gradient splits evenly between the elements that attain the extremum.
Grads d_extreme_reduce(const GradContext& c) {
  const ReduceAttrs& a = c.attr<ReduceAttrs>();
  const Tensor& x = c.input(0);
  Tensor hit = eq(x, unreduce(c.output(), x.shape(), a.dims));
  Tensor count = sum(as_dtype_of(hit, c.grad()), a.dims, true);
  return {where(hit, div(unreduce(c.grad(), x.shape(), a.dims), count), zero_scalar())};
}
// prod: out / x where no element is 0; with one 0 in a slice, that element
// gets the product of the others and the rest 0; with two or more, all 0.
Grads d_prod(const GradContext& c) {
  const ReduceAttrs& a = c.attr<ReduceAttrs>();
  const Tensor& x = c.input(0);
  Tensor is_zero = eq(x, Scalar(0.0));
  Tensor zeros_in_slice = sum(as_dtype_of(is_zero, x), a.dims, true);
  Tensor others = prod(where(is_zero, Tensor::scalar(Scalar(1.0)), x), a.dims, true);
  Tensor none_zero = div(unreduce(c.output(), x.shape(), a.dims), x);
  Tensor one_zero = where(logical_and(is_zero, eq(zeros_in_slice, Scalar(1.0))), others, zero_scalar());
  Tensor d = where(eq(zeros_in_slice, Scalar(0.0)), none_zero, one_zero);
  return {mul(unreduce(c.grad(), x.shape(), a.dims), d)};
}

// As PyTorch's var_backward: 2 (x - mean) / (N - correction); over all
// elements with no degrees of freedom left, NaN where x is the mean and inf
// elsewhere. std's is var's of g / (2 std), with 0 where std is 0.
Grads d_var_std(const GradContext& c) {
  const ReduceAttrs& a = c.attr<ReduceAttrs>();
  const Tensor x = widen(c.input(0));
  Tensor g = unreduce(widen(c.grad()), x.shape(), a.dims);
  if (c.call.op == OpType::std) {
    Tensor s = unreduce(widen(c.output()), x.shape(), a.dims);
    g = where(eq(s, Scalar(0.0)), zero_scalar(), div(g, mul(s, Scalar(2.0))));
  }
  const double dof = static_cast<double>(reduced_count(x.shape(), a.dims)) - a.correction;
  Tensor centered = sub(x, mean(x, a.dims, true));
  if ((a.dims.empty() || x.dim() == 0) && dof <= 0) {
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    return {mul(g, where(eq(centered, Scalar(0.0)), Tensor::scalar(Scalar(nan)), Tensor::scalar(Scalar(inf))))};
  }
  return {mul(g, mul(centered, Scalar(2.0 / dof)))};
}

// The reverse cumulative sum: total - cumsum + g.
Grads d_cumsum(const GradContext& c) {
  const int64_t dim = c.attr<DimAttrs>().dim;
  const Tensor& g = c.grad();
  if (g.dim() == 0) return {g};
  return {add(sub(sum(g, {dim}, true), cumsum(g, dim)), g)};
}

// PyTorch's cumprod_backward, in table ops. Before a row's first zero the
// gradient is sum_{i>=k} g_i out_i / x_k (a reverse cumulative sum); at the
// first zero it is the reverse cumulative sum of g times the cumprod with that
// zero taken as 1; after it every product holds that zero, so 0.
Grads d_cumprod(const GradContext& c) {
  const int64_t dim = c.attr<DimAttrs>().dim;
  const Tensor& g = c.grad();
  if (g.dim() == 0) return {g};
  const Tensor x = as_dtype_of(c.input(0), g);
  auto reverse_cumsum = [dim](const Tensor& t) { return add(sub(sum(t, {dim}, true), cumsum(t, dim)), t); };
  const Tensor one = Tensor::scalar(Scalar(1.0));
  Tensor is_zero = eq(x, Scalar(0.0));
  Tensor zeros_so_far = cumsum(as_dtype_of(is_zero, g), dim);
  Tensor before = eq(zeros_so_far, Scalar(0.0));
  Tensor first_zero = logical_and(is_zero, eq(zeros_so_far, Scalar(1.0)));
  Tensor none_zero = div(reverse_cumsum(mul(g, c.output())), where(before, x, one));
  Tensor at_zero = reverse_cumsum(mul(g, cumprod(where(first_zero, one, x), dim)));
  return {where(before, none_zero, where(first_zero, at_zero, zero_scalar()))};
}

// ---------------------------------------------------------------- matmul, softmax, linear

Grads d_matmul(const GradContext& c) {
  Tensor a = c.input(0), b = c.input(1), g = c.grad();
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  if (a_vec) a = unsqueeze(a, 0), g = unsqueeze(g, g.dim() - (b_vec ? 0 : 1));
  if (b_vec) b = unsqueeze(b, 1), g = unsqueeze(g, g.dim());
  // g feeds both products: where BLAS cannot take it as it is, one copy serves both.
  if (c.needs[0] && c.needs[1] && matmul_operand_needs_copy(g, Shape(g.shape().begin(), g.shape().end() - 2),
                                                             g.device().type))
    g = contiguous(g);
  Grads r(2);
  if (c.needs[0]) {
    Tensor ga = matmul(g, transpose(b, -1, -2));
    r[0] = a_vec ? reshape(sum(ga, all_dims_but(ga.dim(), ga.dim() - 1)), c.input_shape(0)) : ga;
  }
  if (c.needs[1]) {
    Tensor gb = matmul(transpose(a, -1, -2), g);
    r[1] = b_vec ? reshape(sum(gb, all_dims_but(gb.dim(), gb.dim() - 2)), c.input_shape(1)) : gb;
  }
  return r;
}

// Fused kernels: softmax's y (g - sum(g y)) and log_softmax's g - exp(y) sum(g), one pass each.
Grads d_softmax(const GradContext& c) {
  const int64_t dim = c.attr<DimAttrs>().dim;
  if (c.call.op == OpType::softmax) return {softmax_backward(c.grad(), c.output(), dim)};
  return {log_softmax_backward(c.grad(), c.output(), dim)};
}

Grads d_linear(const GradContext& c) {
  const Tensor& x = c.input(0);
  // A 1-D weight (in,) is a (1, in) one whose output dim is dropped.
  const bool vector_weight = c.input(1).dim() == 1;
  Tensor w = vector_weight ? unsqueeze(c.input(1), 0) : c.input(1);
  Tensor g = vector_weight ? unsqueeze(c.grad(), c.grad().dim()) : c.grad();
  Grads r(3);
  if (c.needs[0]) r[0] = matmul(g, w);
  if (c.needs[1]) r[1] = matmul(transpose(reshape(g, {-1, w.shape()[0]}), 0, 1), reshape(x, {-1, w.shape()[1]}));
  if (c.needs[1] && vector_weight) r[1] = reshape(r[1], {-1});
  if (c.needs[2]) r[2] = vector_weight ? c.grad() : g;  // summed over the batch dims by the engine
  return r;
}

// ---------------------------------------------------------------- views and copies

Grads d_reshape_back(const GradContext& c) { return {reshape(c.grad(), c.input_shape(0))}; }
Grads d_expand(const GradContext& c) { return {c.grad()}; }  // the engine sums the broadcast dims
Grads d_permute(const GradContext& c) {
  const std::vector<int64_t>& dims = c.attr<ViewAttrs>().dims;
  std::vector<int64_t> inverse(dims.size());
  const int64_t n = static_cast<int64_t>(dims.size());
  for (int64_t i = 0; i < n; ++i) inverse[wrap_dim(dims[i], n, "permute")] = i;
  return {permute(c.grad(), inverse)};
}
Grads d_transpose(const GradContext& c) {
  const std::vector<int64_t>& dims = c.attr<ViewAttrs>().dims;
  return {transpose(c.grad(), dims[0], dims[1])};
}
// select and slice: the gradient lands in the viewed elements of zeros.
Grads d_select_slice(const GradContext& c) {
  Tensor z = zeros_like_shape(c.input_shape(0), c.grad());
  Tensor region = view_region(c.call, z);
  copy_(region, c.grad());
  return {z};
}
Grads d_copy(const GradContext& c) { return {c.grad()}; }  // the engine converts and sums broadcast dims
// unfold: windows may overlap, so each window's gradient is added at its positions
// (window w, offset k: w * step + k along dim): the windows' dim and the last
// merged, then index_add into zeros.
Grads d_unfold(const GradContext& c) {
  const ViewAttrs& a = c.attr<ViewAttrs>();
  const Shape& s = c.input_shape(0);
  const Tensor& g = c.grad();
  if (s.empty()) return {sum(g)};  // a 0-d input: one window of at most one element
  const int64_t n = static_cast<int64_t>(s.size()), d = wrap_dim(a.dims[0], n, "unfold");
  const int64_t size = a.positions[0], step = a.positions[1], windows = g.shape()[d];
  const Tensor starts = mul(arange(Scalar(int64_t{0}), Scalar(windows)), Scalar(step));
  const Tensor positions = add(unsqueeze(starts, 1), unsqueeze(arange(Scalar(int64_t{0}), Scalar(size)), 0));
  std::vector<int64_t> order;  // the window's elements (the last dim) next to the windows' dim
  for (int64_t i = 0; i < n; ++i) {
    order.push_back(i);
    if (i == d) order.push_back(n);
  }
  Shape merged = s;
  merged[d] = windows * size;
  const Tensor rows = reshape(permute(g, order), merged);
  return {index_add(zeros_like_shape(s, g), d, reshape(positions, {-1}), rows)};
}

// ---------------------------------------------------------------- indexing

Tensor wrapped_index(const Tensor& index, int64_t size, bool wrap_negative) {
  Tensor i = to(index, DType::Int64);
  return wrap_negative ? where(lt(i, Scalar(int64_t{0})), add(i, Scalar(size)), i) : i;
}

Grads d_index_select(const GradContext& c) {
  const IndexAttrs& a = c.attr<IndexAttrs>();
  const Shape& s = c.input_shape(0);
  if (s.empty()) return {sum(c.grad()), Tensor()};
  Tensor index = reshape(wrapped_index(c.input(1), s[a.dim], a.wrap_negative), {-1});
  Shape g_shape = s;
  g_shape[a.dim] = index.numel();
  Tensor g = reshape(c.grad(), g_shape);
  Shape index_shape(s.size(), 1);
  index_shape[a.dim] = index.numel();
  Tensor spread = expand(reshape(index, index_shape), g_shape);
  Tensor grad = zeros_like_shape(s, g);  // added into in place: a copy of the zeros would cost as much again
  scatter_add_(grad, a.dim, spread, g);
  return {grad, Tensor()};
}
Grads d_gather(const GradContext& c) {
  const IndexAttrs& a = c.attr<IndexAttrs>();
  const Shape& s = c.input_shape(0);
  Tensor index = wrapped_index(c.input(1), s.empty() ? 1 : s[a.dim], a.wrap_negative);
  return {scatter_add(zeros_like_shape(s, c.grad()), a.dim, index, c.grad()), Tensor()};
}
// The scatters: src's gradient is `picked` (index-shaped) at the positions src
// was read from (its leading index-shaped corner), zero elsewhere.
Tensor scattered_source_grad(const GradContext& c, const Tensor& picked) {
  const Shape& src_shape = c.input_shape(2);
  if (picked.shape() == src_shape) return picked;
  Tensor z = zeros_like_shape(src_shape, picked);
  Tensor corner = z;
  for (int64_t d = 0; d < picked.dim(); ++d) corner = slice(corner, d, 0, picked.shape()[d]);
  copy_(corner, picked);
  return z;
}
Grads d_scatter(const GradContext& c) {
  const IndexAttrs& a = c.attr<IndexAttrs>();
  const Shape& s = c.input_shape(0);
  Tensor index = wrapped_index(c.input(1), s.empty() ? 1 : s[a.dim], a.wrap_negative);
  Grads r(3);
  if (c.needs[0]) r[0] = c.call.op == OpType::scatter ? scatter(c.grad(), a.dim, index, Scalar(0.0)) : c.grad();
  if (c.needs[2]) r[2] = scattered_source_grad(c, gather(c.grad(), a.dim, index));
  return r;
}
// scatter_reduce (x's values included; mean and include_self are compositions):
// sum as scatter_add; prod the product of the other values; amax/amin split the
// gradient evenly among the values equal to the result, x's own included, as PyTorch.
Grads d_scatter_reduce(const GradContext& c) {
  const IndexAttrs& a = c.attr<IndexAttrs>();
  const Shape& s = c.input_shape(0);
  Tensor index = wrapped_index(c.input(1), s.empty() ? 1 : s[a.dim], a.wrap_negative);
  const Tensor &x = c.input(0), &g = c.grad();
  Grads r(3);
  if (a.reduce == kScatterSum) {
    if (c.needs[0]) r[0] = g;
    if (c.needs[2]) r[2] = scattered_source_grad(c, gather(g, a.dim, index));
    return r;
  }
  // src's leading index-shaped corner: the values that were combined.
  Tensor src = c.input(2);
  for (int64_t d = 0; d < index.dim(); ++d) src = slice(src, d, 0, index.shape()[d]);
  const Tensor& out = c.output();
  if (a.reduce == kScatterProd) {  // the product of the others, zeros included (PyTorch's formulas)
    if (c.needs[0]) {
      Tensor masked_x = masked_fill(x, eq(x, Scalar(0.0)), Scalar(1.0));
      r[0] = div(mul(g, scatter_reduce(masked_x, a.dim, index, src, "prod")), masked_x);
    }
    if (c.needs[2]) {
      Tensor src_zero = eq(src, Scalar(0.0));
      Tensor zeros_at = gather(scatter_add(zeros_like(x), a.dim, index, as_dtype_of(src_zero, x)), a.dim, index);
      Tensor lone_zero = logical_and(src_zero, eq(zeros_at, Scalar(1.0)));
      Tensor others = scatter_reduce(x, a.dim, index, masked_fill(src, lone_zero, Scalar(1.0)), "prod");
      r[2] = scattered_source_grad(c, where(lone_zero, gather(mul(g, others), a.dim, index),
                                            div(gather(mul(g, out), a.dim, index),
                                                masked_fill(src, src_zero, Scalar(1.0)))));
    }
    return r;
  }
  Tensor x_hit = as_dtype_of(eq(x, out), g);
  Tensor src_hit = as_dtype_of(eq(src, gather(out, a.dim, index)), g);
  Tensor share = div(g, scatter_add(x_hit, a.dim, index, src_hit));
  if (c.needs[0]) r[0] = mul(share, x_hit);
  if (c.needs[2]) r[2] = scattered_source_grad(c, mul(gather(share, a.dim, index), src_hit));
  return r;
}

// ---------------------------------------------------------------- normalization

// The fused kernels give the input's, the weight's and (layer_norm) the
// bias's gradients in one call.
Grads d_row_norm(const GradContext& c) {
  const NormAttrs& a = c.attr<NormAttrs>();
  const bool param_grads = c.needs[1] || c.needs[2];
  if (c.call.op == OpType::rms_norm) {
    auto [gx, gw] = rms_norm_backward(c.grad(), c.input(0), a.normalized_shape, c.input(1), a.eps, param_grads);
    return {gx, gw, {}};  // rms_norm takes (input, weight, bias) as layer_norm
  }
  auto [gx, gw, gb] = layer_norm_backward(c.grad(), c.input(0), a.normalized_shape, c.input(1), a.eps, param_grads);
  return {gx, gw, gb};
}

// The fused kernels give the input's, the weight's and the bias's gradients
// in one pass (nn_ops.h says why all three).
Grads d_batch_norm(const GradContext& c) {
  const NormAttrs& a = c.attr<NormAttrs>();
  // Training reads no running statistic (the op updates them in place after saving them).
  const Tensor none;
  auto [gx, gw, gb] = batch_norm_backward(c.grad(), c.input(0), a.training ? none : c.input(1),
                                          a.training ? none : c.input(2), c.input(3), a.training, a.eps);
  return {gx, {}, {}, gw, gb};
}

Grads d_group_norm(const GradContext& c) {
  const NormAttrs& a = c.attr<NormAttrs>();
  auto [gx, gw, gb] = group_norm_backward(c.grad(), c.input(0), a.num_groups, c.input(1), a.eps);
  return {gx, gw, gb};
}

// dropout's gradient is dropout of g with the same draws: g * mask / (1 - p).
Grads d_dropout(const GradContext& c) {
  return {apply({OpType::dropout, {c.grad()}, c.call.attrs, {}})[0]};
}

// ---------------------------------------------------------------- sorting

// Each value goes back to the place it came from: sort's indices are a
// permutation along the dim (topk, kthvalue and median select from sort's values).
Grads d_sort(const GradContext& c) {
  const Tensor& g = c.grad();
  if (c.input_shape(0).empty()) return {g};
  return {scatter(zeros_like_shape(c.input_shape(0), g), c.attr<SortAttrs>().dim, c.output(1), g)};
}

// ---------------------------------------------------------------- losses
//
// Per element, nll_loss weighs the log-probabilities by
//   coef[c] = (1 - eps) w[t] [c == t] + eps / C w[c]   (0 where t is ignored),
// so d(loss)/d(logp) = -coef; through log_softmax, cross_entropy's is
// p sum(coef) - coef, which its fused kernel computes. 'mean' divides by the
// total weight of the targets kept.

// Each element's target (0 where ignored) and its target's weight (0 where ignored), in like's
// dtype and device; weight may be undefined (every class weighs 1).
std::pair<Tensor, Tensor> kept_targets(const Tensor& target, const Tensor& weight, int64_t ignore_index,
                                       const Tensor& like) {
  Tensor valid = ne(target, Scalar(ignore_index));
  Tensor t = where(valid, to(target, DType::Int64), Tensor::scalar(Scalar(int64_t{0})));
  Tensor kept = as_dtype_of(valid, like);
  if (!weight.defined()) return {t, kept};
  Tensor w = to(to(weight, like.dtype()), like.device());
  return {t, mul(reshape(index_select(w, 0, reshape(t, {-1})), target.shape()), kept)};
}
std::pair<Tensor, Tensor> kept_targets(const GradContext& c, const Tensor& like) {
  return kept_targets(c.input(1), c.inputs[2].defined ? c.input(2) : Tensor(), c.attr<LossAttrs>().ignore_index, like);
}

void check_weight_not_differentiated(const GradContext& c) {
  PF_CHECK(!c.needs[2], AutogradError, op_name(c.call.op),
           ": not differentiable with respect to weight (as in PyTorch); pass weight.detach()");
}

Grads d_cross_entropy(const GradContext& c) {
  check_weight_not_differentiated(c);
  const LossAttrs& a = c.attr<LossAttrs>();
  Tensor scale = widen(c.grad());
  if (a.reduction == Reduction::Mean) scale = div(scale, sum(kept_targets(c, scale).second));
  return {cross_entropy_backward(scale, c.input(0), c.input(1), c.output(1), c.input(2), a.ignore_index,
                                 a.label_smoothing),
          Tensor(), Tensor()};
}

Grads d_nll_loss(const GradContext& c) {
  check_weight_not_differentiated(c);
  const LossAttrs& a = c.attr<LossAttrs>();
  Tensor x = widen(c.input(0)), g = widen(c.grad());
  const int64_t class_dim = x.dim() == 1 ? 0 : 1;
  auto [t, w_t] = kept_targets(c, x);  // (nll_loss has no label smoothing: eps = 0)
  Tensor coef = scatter(zeros_like(x), class_dim, unsqueeze(t, class_dim), unsqueeze(w_t, class_dim));
  Tensor scale = a.reduction == Reduction::None ? unsqueeze(g, class_dim) : g;
  if (a.reduction == Reduction::Mean) scale = div(scale, sum(w_t));
  return {mul(neg(coef), scale), Tensor(), Tensor()};
}

// ---- the fused backward passes as compositions of differentiable ops: what a backward pass
// with create_graph runs (apply decomposes a composite op whose input requires grad), so that
// the gradients it makes can be differentiated again. Each is its kernel's formula.

// (grad, x) in their result's dtype, as the kernel reads them; a Python number among them becomes
// a 0-d tensor of that dtype (ops on a number alone would compute in the default dtype).
std::pair<Tensor, Tensor> promoted(const OpCall& call) {
  DType dt = result_type(call.inputs);
  if (call.op != OpType::relu_backward && !is_floating(dt)) dt = DType::Float32;  // BINARY_FLOAT
  auto as_result = [dt](const Tensor& t) { return t.is_wrapped_number() ? full({}, t.item(), dt) : to(t, dt); };
  return {as_result(call.inputs[0]), as_result(call.inputs[1])};
}

std::vector<Tensor> relu_backward_composite(const OpCall& call) {
  const auto [g, y] = promoted(call);
  return {where(gt(y, Scalar(0.0)), g, zeros_like(g))};
}
std::vector<Tensor> silu_backward_composite(const OpCall& call) {
  const auto [g, x] = promoted(call);
  const Tensor s = sigmoid(x);
  return {mul(mul(g, s), add(mul(x, sub(1.0, s)), 1.0))};
}
std::vector<Tensor> gelu_backward_composite(const OpCall& call) {
  const auto [g, x] = promoted(call);
  const Tensor cdf = mul(add(erf(mul(x, M_SQRT1_2)), 1.0), 0.5);
  const Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);  // 1 / sqrt(2 pi)
  return {mul(g, add(cdf, mul(x, pdf)))};
}
std::vector<Tensor> gelu_tanh_backward_composite(const OpCall& call) {
  const auto [g, x] = promoted(call);
  const double k = 0.7978845608028654, c = 0.044715;  // sqrt(2 / pi)
  const Tensor x2 = mul(x, x);
  const Tensor t = tanh(mul(mul(x, add(mul(x2, c), 1.0)), k));
  const Tensor slope = mul(add(mul(x2, 3.0 * c), 1.0), k);
  return {mul(g, add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, 0.5), sub(1.0, mul(t, t))), slope)))};
}
// softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g), over the dim.
std::vector<Tensor> softmax_backward_composite(const OpCall& call) {
  const Tensor &g = call.inputs[0], &y = call.inputs[1];
  const std::vector<int64_t> dim{call.attr<DimAttrs>().dim};
  if (call.op == OpType::softmax_backward) return {mul(y, sub(g, sum(mul(g, y), dim, true)))};
  return {sub(g, mul(exp(y), sum(g, dim, true)))};
}

// layer_norm and rms_norm over the last dims: with xhat the normalized rows and gw = g * weight,
// the input's gradient rstd (gw - mean(gw) - xhat mean(gw xhat)) (rms_norm: without mean(gw)),
// the weight's sum(g xhat) and the bias's sum(g) over the other dims, in the compute dtype.
std::vector<Tensor> row_norm_backward_composite(const OpCall& call) {
  const NormAttrs& a = call.attr<NormAttrs>();
  const bool layer = call.op == OpType::layer_norm_backward;
  const Tensor &input = call.inputs[1], &weight = call.inputs[2];
  const DType cd = compute_dtype(input.dtype());
  const Tensor x = to(input, cd), g = to(call.inputs[0], cd);
  const int64_t lead = x.dim() - static_cast<int64_t>(a.normalized_shape.size());
  std::vector<int64_t> rows, others;
  for (int64_t d = 0; d < x.dim(); ++d) (d < lead ? others : rows).push_back(d);
  const Tensor centred = layer ? sub(x, mean(x, rows, true)) : x;
  const Tensor rstd = rsqrt(add(mean(mul(centred, centred), rows, true), a.eps));
  const Tensor xhat = mul(centred, rstd);
  const Tensor gw = weight.defined() ? mul(g, to(weight, cd)) : g;
  Tensor inner = sub(gw, mul(xhat, mean(mul(gw, xhat), rows, true)));
  if (layer) inner = sub(inner, mean(gw, rows, true));
  std::vector<Tensor> results{to(mul(rstd, inner), input.dtype())};
  if (!a.param_grads) return results;
  auto over_rows = [&](const Tensor& t) { return others.empty() ? t : sum(t, others); };
  results.push_back(over_rows(mul(g, xhat)));
  if (layer) results.push_back(over_rows(g));
  return results;
}

// batch_norm (statistics over all dims but the channels', or the running ones in eval) and
// group_norm (over each group of channels of a sample): with xhat the normalized input and
// gw = g * weight, the input's gradient rstd (gw - mean(gw) - xhat mean(gw xhat)) over the
// statistics' elements (eval: gw rstd), the weight's sum(g xhat) and the bias's sum(g) per channel.
std::vector<Tensor> channel_norm_backward_composite(const OpCall& call) {
  const NormAttrs& a = call.attr<NormAttrs>();
  const bool batch = call.op == OpType::batch_norm_backward;
  const Tensor &input = call.inputs[1], &weight = batch ? call.inputs[4] : call.inputs[2];
  const DType cd = compute_dtype(input.dtype());
  const Tensor x = to(input, cd), g = to(call.inputs[0], cd);
  Shape channel(x.dim(), 1);
  channel[1] = x.shape()[1];
  std::vector<int64_t> others;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) others.push_back(d);
  auto per_channel = [&](const Tensor& t) { return reshape(to(t, cd), channel); };
  const Tensor gw = weight.defined() ? mul(g, per_channel(weight)) : g;
  // The input's gradient where the statistics are over `dims` of (grouped) x, g and gw.
  auto normalized_grad = [&](const Tensor& xs, const Tensor& gws, const std::vector<int64_t>& dims, Tensor& xhat) {
    const Tensor centred = sub(xs, mean(xs, dims, true));
    const Tensor rstd = rsqrt(add(mean(mul(centred, centred), dims, true), a.eps));
    xhat = mul(centred, rstd);
    return mul(rstd, sub(sub(gws, mean(gws, dims, true)), mul(xhat, mean(mul(gws, xhat), dims, true))));
  };
  Tensor gx, xhat;
  if (batch && a.training) {
    gx = normalized_grad(x, gw, others, xhat);
  } else if (batch) {
    const Tensor rstd = rsqrt(add(per_channel(call.inputs[3]), a.eps));
    xhat = mul(sub(x, per_channel(call.inputs[2])), rstd);
    gx = mul(gw, rstd);
  } else {
    const Shape grouped{x.shape()[0], a.num_groups, -1};
    Tensor xhat_grouped;
    gx = reshape(normalized_grad(reshape(x, grouped), reshape(gw, grouped), {2}, xhat_grouped), x.shape());
    xhat = reshape(xhat_grouped, x.shape());
  }
  return {to(gx, input.dtype()), sum(mul(g, xhat), others), sum(g, others)};
}

// cross_entropy's: scale (p sum(coef) - coef) over the classes, with p = softmax(logits)
// computed again (differentiable in the logits, where the kernel reads the saved logsumexp).
std::vector<Tensor> cross_entropy_backward_composite(const OpCall& call) {
  const LossAttrs& a = call.attr<LossAttrs>();
  const Tensor &logits = call.inputs[1], &target = call.inputs[2], &weight = call.inputs[3];
  const Tensor x = to(logits, compute_dtype(logits.dtype()));
  const int64_t class_dim = x.dim() == 1 ? 0 : 1;
  const double eps = a.label_smoothing;
  auto [t, w_t] = kept_targets(target, weight, a.ignore_index, x);
  Tensor coef = scatter(zeros_like(x), class_dim, unsqueeze(t, class_dim), unsqueeze(mul(w_t, 1.0 - eps), class_dim));
  if (eps > 0) {  // eps / C of every class's weight, where the target is kept
    Shape along(x.dim(), 1);
    along[class_dim] = x.shape()[class_dim];
    const Tensor valid = unsqueeze(as_dtype_of(ne(target, Scalar(a.ignore_index)), x), class_dim);
    const Tensor spread = weight.defined() ? mul(reshape(to(to(weight, x.dtype()), x.device()), along), valid) : valid;
    coef = add(coef, mul(spread, eps / static_cast<double>(x.shape()[class_dim])));
  }
  Tensor scale = to(call.inputs[0], x.dtype());
  if (scale.dim() > 0) scale = unsqueeze(scale, class_dim);
  const Tensor p = softmax(x, class_dim);
  return {to(mul(scale, sub(mul(p, sum(coef, {class_dim}, true)), coef)), logits.dtype())};
}

// Max pooling's: g scattered into the element of each window the kernel (and PyTorch) picks, its
// first maximum or, where the window holds NaNs, its last NaN: linear in g (its derivative gathers
// at the same places), none in the input (the choice is piecewise constant). The windows' plane
// positions come from a host table in which each window lists its positions inside the input
// first, in window order, then its padding (a -inf slot past the plane): argmax's first maximum
// is then the kernel's, an all -inf window's first input position included.
std::vector<Tensor> max_pool_backward_composite(const OpCall& call) {
  const PoolAttrs& a = call.attr<PoolAttrs>();
  const Tensor &g = call.inputs[0], x = call.inputs[1].detach();
  const int64_t nd = static_cast<int64_t>(a.kernel_size.size()), lead = x.dim() - nd;
  int64_t plane = 1, outputs = 1, window = 1;
  for (int64_t i = 0; i < nd; ++i) {
    plane *= x.shape()[lead + i], outputs *= g.shape()[lead + i], window *= a.kernel_size[i];
  }
  Tensor table = Tensor::empty({outputs, window}, DType::Int64, Device::cpu());
  int64_t* t = table.data<int64_t>();
  for (int64_t o = 0; o < outputs; ++o) {
    int64_t* row = t + o * window;
    int64_t inside = 0, padding = window;
    for (int64_t k = 0; k < window; ++k) {
      int64_t position = 0, o_rest = o, k_rest = k;
      bool in_plane = true;
      for (int64_t i = nd - 1, stride = 1; i >= 0; --i) {
        const int64_t out_i = o_rest % g.shape()[lead + i], k_i = k_rest % a.kernel_size[i];
        o_rest /= g.shape()[lead + i], k_rest /= a.kernel_size[i];
        const int64_t c = out_i * a.stride[i] + k_i * a.dilation[i] - a.padding[i], size = x.shape()[lead + i];
        in_plane = in_plane && c >= 0 && c < size;
        position += c * stride;
        stride *= size;
      }
      if (in_plane) row[inside++] = position;
      else row[--padding] = plane;
    }
  }
  table = to(table, x.device());
  Shape lead_shape(x.shape().begin(), x.shape().begin() + lead), flat = lead_shape, windows = lead_shape;
  flat.push_back(plane);
  Shape with_slot = lead_shape;
  with_slot.push_back(1);
  const Tensor values = cat({reshape(x, flat), full_like(zeros_like_shape(with_slot, x), -INFINITY)}, lead);
  windows.push_back(outputs), windows.push_back(window);
  const Tensor picked = reshape(index_select(values, lead, reshape(table, {-1})), windows);
  const Tensor first_max = argmax(picked, -1, true);
  // The last NaN's place + 1 (0: none), as the largest of isnan * (1, 2, ..., window).
  const Tensor places = to(arange(Scalar(int64_t{1}), Scalar(window + 1)), x.device());
  const Tensor last_nan = max(mul(to(isnan(picked), DType::Int64), places), {-1}, true);
  const Tensor arg = where(gt(last_nan, Scalar(int64_t{0})), sub(last_nan, Scalar(int64_t{1})), first_max);
  Shape table_shape(lead, 1);
  table_shape.push_back(outputs), table_shape.push_back(window);
  const Tensor at = gather(expand(reshape(table, table_shape), windows), -1, arg);  // (lead..., outputs, 1)
  Shape per_output = lead_shape;
  per_output.push_back(outputs);
  const Tensor scattered =
      scatter_add(zeros_like_shape(flat, g), lead, reshape(at, per_output), reshape(g, per_output));
  return {reshape(scattered, x.shape())};
}

PF_REGISTER_DECOMPOSITION(relu_backward, &relu_backward_composite);
PF_REGISTER_DECOMPOSITION(max_pool2d_backward, &max_pool_backward_composite);
PF_REGISTER_DECOMPOSITION(max_pool3d_backward, &max_pool_backward_composite);
PF_REGISTER_DECOMPOSITION(cross_entropy_backward, &cross_entropy_backward_composite);
PF_REGISTER_DECOMPOSITION(silu_backward, &silu_backward_composite);
PF_REGISTER_DECOMPOSITION(gelu_backward, &gelu_backward_composite);
PF_REGISTER_DECOMPOSITION(gelu_tanh_backward, &gelu_tanh_backward_composite);
PF_REGISTER_DECOMPOSITION(softmax_backward, &softmax_backward_composite);
PF_REGISTER_DECOMPOSITION(log_softmax_backward, &softmax_backward_composite);
PF_REGISTER_DECOMPOSITION(layer_norm_backward, &row_norm_backward_composite);
PF_REGISTER_DECOMPOSITION(rms_norm_backward, &row_norm_backward_composite);
PF_REGISTER_DECOMPOSITION(batch_norm_backward, &channel_norm_backward_composite);
PF_REGISTER_DECOMPOSITION(group_norm_backward, &channel_norm_backward_composite);

}  // namespace

// ---------------------------------------------------------------- the table

// The formulas of the op table's grad column (ops.def): g is the gradient, x
// the input, y the output; grad, composite and nograd ops have none here.
#define PF_FORMULA_grad {nullptr, kSavesNothing}
#define PF_FORMULA_composite {nullptr, kSavesNothing}
#define PF_FORMULA_nograd {nullptr, kSavesNothing}
#define PF_FORMULA_dg(...) {[](const GradContext& c) -> Grads { const Tensor& g = c.grad(); return {__VA_ARGS__}; }, kSavesNothing}
#define PF_FORMULA_dx(...) \
  {[](const GradContext& c) -> Grads { const Tensor &g = c.grad(), &x = c.input(0); return {__VA_ARGS__}; }, kSavesInputs}
#define PF_FORMULA_dy(...) \
  {[](const GradContext& c) -> Grads { const Tensor &g = c.grad(), &y = c.output(); return {__VA_ARGS__}; }, kSavesOutputs}
#define PF_FORMULA_dxy(...)                                          \
  {[](const GradContext& c) -> Grads {                               \
     const Tensor &g = c.grad(), &x = c.input(0), &y = c.output(); \
     return {__VA_ARGS__};                                           \
   },                                                                \
   kSavesBoth}
#define PF_OP(name, family, functor, attrs, grad, autocast) PF_FORMULA_##grad,
constexpr Derivative kTableFormulas[] = {
#include "pyflame/ops.def"
};
#undef PF_OP
const bool table_formulas_registered = [] {
  for (int i = 0; i < kNumOps; ++i)
    if (kTableFormulas[i].fn) register_derivative(static_cast<OpType>(i), kTableFormulas[i].fn, kTableFormulas[i].saves);
  return true;
}();

PF_REGISTER_DERIVATIVE(add, &d_add, kSavesNothing);
PF_REGISTER_DERIVATIVE(sub, &d_sub, kSavesNothing);
PF_REGISTER_DERIVATIVE(mul, &d_mul, kSavesInputs);
PF_REGISTER_DERIVATIVE(div, &d_div, kSavesInputs);
PF_REGISTER_DERIVATIVE(pow, &d_pow, kSavesBoth);
PF_REGISTER_DERIVATIVE(maximum, &d_maximum, kSavesInputs);
PF_REGISTER_DERIVATIVE(minimum, &d_minimum, kSavesInputs);
PF_REGISTER_DERIVATIVE(atan2, &d_atan2, kSavesInputs);
PF_REGISTER_DERIVATIVE(hypot, &d_hypot, kSavesBoth);
PF_REGISTER_DERIVATIVE(fmax, &d_fmax, kSavesInputs);
PF_REGISTER_DERIVATIVE(fmin, &d_fmin, kSavesInputs);
PF_REGISTER_DERIVATIVE(logaddexp, &d_logaddexp, kSavesInputs);
PF_REGISTER_DERIVATIVE(copysign, &d_copysign, kSavesBoth);
PF_REGISTER_DERIVATIVE(xlogy, &d_xlogy, kSavesInputs);
PF_REGISTER_DERIVATIVE(floor_divide, &d_zero2, kSavesNothing);
PF_REGISTER_DERIVATIVE(trunc_divide, &d_zero2, kSavesNothing);
PF_REGISTER_DERIVATIVE(normal, &d_zero2, kSavesNothing);
PF_REGISTER_DERIVATIVE(remainder, &d_remainder, kSavesInputs);
PF_REGISTER_DERIVATIVE(fmod, &d_fmod, kSavesInputs);

PF_REGISTER_DERIVATIVE(hardtanh, &d_hardtanh, kSavesInputs);
PF_REGISTER_DERIVATIVE(gelu, &d_gelu, kSavesInputs);
PF_REGISTER_DERIVATIVE(leaky_relu, &d_leaky_relu, kSavesInputs);
PF_REGISTER_DERIVATIVE(elu, &d_elu, kSavesBoth);
PF_REGISTER_DERIVATIVE(softplus, &d_softplus, kSavesInputs);

PF_REGISTER_DERIVATIVE(where, &d_where, kSavesInputs);
PF_REGISTER_DERIVATIVE(clamp, &d_clamp, kSavesInputs);

PF_REGISTER_DERIVATIVE(sum, &d_sum, kSavesNothing);
PF_REGISTER_DERIVATIVE(mean, &d_mean, kSavesNothing);
PF_REGISTER_DERIVATIVE(max, &d_extreme_reduce, kSavesBoth);
PF_REGISTER_DERIVATIVE(min, &d_extreme_reduce, kSavesBoth);
PF_REGISTER_DERIVATIVE(prod, &d_prod, kSavesBoth);
PF_REGISTER_DERIVATIVE(var, &d_var_std, kSavesInputs);
PF_REGISTER_DERIVATIVE(std, &d_var_std, kSavesBoth);
PF_REGISTER_DERIVATIVE(cumsum, &d_cumsum, kSavesNothing);
PF_REGISTER_DERIVATIVE(cumprod, &d_cumprod, kSavesBoth);

PF_REGISTER_DERIVATIVE(matmul, &d_matmul, kSavesInputs);
PF_REGISTER_DERIVATIVE(batch_matmul, &d_matmul, kSavesInputs);
PF_REGISTER_DERIVATIVE(softmax, &d_softmax, kSavesOutputs);
PF_REGISTER_DERIVATIVE(log_softmax, &d_softmax, kSavesOutputs);
PF_REGISTER_DERIVATIVE(linear, &d_linear, kSavesInputs);

PF_REGISTER_DERIVATIVE(view, &d_reshape_back, kSavesNothing);
PF_REGISTER_DERIVATIVE(reshape, &d_reshape_back, kSavesNothing);
PF_REGISTER_DERIVATIVE(squeeze, &d_reshape_back, kSavesNothing);
PF_REGISTER_DERIVATIVE(unsqueeze, &d_reshape_back, kSavesNothing);
PF_REGISTER_DERIVATIVE(expand, &d_expand, kSavesNothing);
PF_REGISTER_DERIVATIVE(permute, &d_permute, kSavesNothing);
PF_REGISTER_DERIVATIVE(transpose, &d_transpose, kSavesNothing);
PF_REGISTER_DERIVATIVE(select, &d_select_slice, kSavesNothing);
PF_REGISTER_DERIVATIVE(slice, &d_select_slice, kSavesNothing);
PF_REGISTER_DERIVATIVE(unfold, &d_unfold, kSavesNothing);
PF_REGISTER_DERIVATIVE(copy, &d_copy, kSavesNothing);

PF_REGISTER_DERIVATIVE(index_select, &d_index_select, kSavesInputs);
PF_REGISTER_DERIVATIVE(gather, &d_gather, kSavesInputs);
PF_REGISTER_DERIVATIVE(scatter, &d_scatter, kSavesInputs);
PF_REGISTER_DERIVATIVE(scatter_add, &d_scatter, kSavesInputs);
PF_REGISTER_DERIVATIVE(scatter_reduce, &d_scatter_reduce, kSavesBoth);


PF_REGISTER_DERIVATIVE(layer_norm, &d_row_norm, kSavesInputs);
PF_REGISTER_DERIVATIVE(rms_norm, &d_row_norm, kSavesInputs);
PF_REGISTER_DERIVATIVE(batch_norm, &d_batch_norm, kSavesInputs);
PF_REGISTER_DERIVATIVE(group_norm, &d_group_norm, kSavesInputs);
PF_REGISTER_DERIVATIVE(dropout, &d_dropout, kSavesNothing);
PF_REGISTER_DERIVATIVE(nll_loss, &d_nll_loss, kSavesInputs);
PF_REGISTER_DERIVATIVE(cross_entropy, &d_cross_entropy, kSavesBoth);

PF_REGISTER_DERIVATIVE(sort, &d_sort, kSavesOutputs);

}  // namespace pyflame::autograd
