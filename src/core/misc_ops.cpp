// The op layer of include/pyflame/misc_ops.h: addcmul, addcdiv, isclose,
// index_add/copy/fill, diff, roll, flip, diag_embed, cummax and cummin as composite ops. Each infer
// holds every check, with the messages PyFlame has always given (PyTorch's rules). addcmul's and addcdiv's decomposition converts
// the operands to the promoted dtype (float32 for float16/bfloat16, rounded
// once, as PyTorch's kernels) and runs mul or div, mul by value and add;
// isclose's compares as PyTorch's formula.

#include "pyflame/misc_ops.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/conv_ops.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"
#include "pyflame/shape_ops.h"

namespace pyflame {

namespace {

// (input, tensor1, tensor2): broadcast together, in PyTorch's promoted dtype of the three.
Inferred infer_addc(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &input = call.inputs[0], &tensor1 = call.inputs[1], &tensor2 = call.inputs[2];
  PF_CHECK(call.op != ir::OpType::addcdiv || is_floating(tensor1.dtype()) || is_floating(tensor2.dtype()), TypeError,
           "addcdiv: integer division of tensor1 by tensor2 is not supported (as in PyTorch); "
           "use (tensor1 / tensor2) or convert them to a float dtype");
  const DType dtype = result_type(call.inputs);
  PF_CHECK(is_floating(dtype) || call.attr<AddcAttrs>().value.kind != Scalar::Kind::Float, TypeError, name,
           ": for integral input tensors, argument value must not be a floating point number");
  const Shape shape = broadcast_shapes(broadcast_shapes(input.shape(), tensor1.shape(), name), tensor2.shape(), name);
  return {current_device(), {InputPlan{}, InputPlan{}, InputPlan{}}, {{shape, dtype}}, {}};
}

std::vector<Tensor> addc_composite(const OpCall& call) {
  const DType dtype = result_type(call.inputs), compute = compute_dtype(dtype);
  const Tensor input = to(call.inputs[0], compute), tensor1 = to(call.inputs[1], compute),
               tensor2 = to(call.inputs[2], compute);
  Tensor term = call.op == ir::OpType::addcmul ? mul(tensor1, tensor2) : div(tensor1, tensor2);
  const Scalar value = call.attr<AddcAttrs>().value;
  const bool unit = value.kind == Scalar::Kind::Float ? value.f == 1 : value.i == 1;
  if (!unit) term = mul(term, value);
  return {to(add(input, term), dtype)};
}

PF_REGISTER_COMPOSITE(addcmul, &infer_addc, &addc_composite);
PF_REGISTER_COMPOSITE(addcdiv, &infer_addc, &addc_composite);

// A number as Python's repr prints it (1e-05, -1.0), as the messages always gave it.
std::string python_float_text(double v) {
  char text[32];
  const std::string shortest(text, std::to_chars(text, text + sizeof text, v).ptr);
  const bool looks_integral = shortest.find_first_not_of("-0123456789") == std::string::npos;
  return looks_integral ? shortest + ".0" : shortest;
}

// (input, other) of one dtype, broadcast together; a bool result.
Inferred infer_isclose(OpCall& call) {
  const Tensor &input = call.inputs[0], &other = call.inputs[1];
  const IscloseAttrs& attrs = call.attr<IscloseAttrs>();
  PF_CHECK(input.dtype() == other.dtype(), TypeError, "isclose: input (pyflame.", dtype_name(input.dtype()),
           ") and other (pyflame.", dtype_name(other.dtype()), ") must have the same dtype");
  PF_CHECK(attrs.rtol >= 0 && attrs.atol >= 0, ValueError, "isclose: rtol (", python_float_text(attrs.rtol),
           ") and atol (", python_float_text(attrs.atol), ") must be non-negative");
  const Shape shape = broadcast_shapes(input.shape(), other.shape(), "isclose");
  return {current_device(), {InputPlan{}, InputPlan{}}, {{shape, DType::Bool}}, {}};
}

// PyTorch's formula: equal, or (with equal_nan) both NaN, or a finite |input - other|
// within atol + rtol * |other|. As PyTorch's, integers and bools take that difference in
// the default float dtype (an unsigned or overflowing difference does not wrap); with
// zero tolerances they are compared exactly.
std::vector<Tensor> isclose_composite(const OpCall& call) {
  const Tensor &input = call.inputs[0], &other = call.inputs[1];
  const IscloseAttrs& attrs = call.attr<IscloseAttrs>();
  Tensor close = eq(input, other);
  if (attrs.equal_nan && is_floating(input.dtype()))
    close = logical_or(close, logical_and(isnan(input), isnan(other)));
  if (attrs.rtol == 0 && attrs.atol == 0) return {close};
  const DType difference_dtype = is_floating(input.dtype()) ? input.dtype() : default_float();
  const Tensor x = to(input, difference_dtype), y = to(other, difference_dtype);
  const Tensor allowed = add(abs(mul(y, Scalar(attrs.rtol))), Scalar(attrs.atol));
  const Tensor actual = abs(sub(x, y));
  return {logical_or(close, logical_and(isfinite(actual), le(actual, allowed)))};
}

PF_REGISTER_COMPOSITE(isclose, &infer_isclose, &isclose_composite);

// ---- index_add, index_copy, index_fill: a scatter with the index spread over the other dims

// input (a 0-d one as 1-D), index and (index_add, index_copy) source of input's
// dtype and of its shape with dim's size len(index).
Inferred infer_index_along(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &input = call.inputs[0], &index = call.inputs[1], &source = call.inputs[2];
  auto& a = std::get<IndexAlongAttrs>(call.attrs);
  a.dim = wrap_dim(a.dim, input.dim(), name);
  PF_CHECK(index.dim() <= 1, ValueError, name, ": index must be 0-d or 1-D, got shape ", index.shape());
  PF_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, TypeError, name,
           ": index must be an int64 or int32 tensor, got pyflame.", dtype_name(index.dtype()));
  if (source.defined()) {
    PF_CHECK(source.dtype() == input.dtype(), TypeError, name, ": self (pyflame.", dtype_name(input.dtype()),
             ") and source (pyflame.", dtype_name(source.dtype()), ") must have the same dtype");
    Shape indexed = input.dim() ? input.shape() : Shape{1};
    indexed[a.dim] = index.numel();
    PF_CHECK((source.dim() ? source.shape() : Shape{1}) == indexed, ValueError, name, ": source of shape ",
             source.shape(), " does not match the indexed shape ", indexed);
  }
  return {current_device(), {InputPlan{}, InputPlan{}, InputPlan{}}, {{input.shape(), input.dtype()}}, {}};
}

// x (at least 1-D), and index as a view of x's shape with dim's size len(index): scatter's index.
std::pair<Tensor, Tensor> spread_index(const OpCall& call) {
  const Tensor &input = call.inputs[0], &index = call.inputs[1];
  const int64_t dim = call.attr<IndexAlongAttrs>().dim, n = index.numel();
  const Tensor x = input.dim() ? input : reshape(input, {1});
  Shape shape = x.shape(), along(x.dim(), 1);
  shape[dim] = along[dim] = n;
  return {x, expand(reshape(index, along), shape)};
}

// source (a 0-d one as 1-D).
Tensor source_rows(const OpCall& call) {
  const Tensor& source = call.inputs[2];
  return source.dim() ? source : reshape(source, {1});
}

std::vector<Tensor> index_add_composite(const OpCall& call) {
  const auto [x, index] = spread_index(call);
  const Scalar alpha = call.attr<IndexAlongAttrs>().value;
  const bool unit = alpha.kind == Scalar::Kind::Float ? alpha.f == 1 : alpha.i == 1;
  const Tensor source = unit ? source_rows(call) : to(mul(source_rows(call), alpha), x.dtype());
  return {reshape(scatter_add(x, call.attr<IndexAlongAttrs>().dim, index, source), call.inputs[0].shape())};
}

std::vector<Tensor> index_copy_composite(const OpCall& call) {
  const auto [x, index] = spread_index(call);
  return {reshape(scatter(x, call.attr<IndexAlongAttrs>().dim, index, source_rows(call)), call.inputs[0].shape())};
}

std::vector<Tensor> index_fill_composite(const OpCall& call) {
  const auto [x, index] = spread_index(call);
  const auto& a = call.attr<IndexAlongAttrs>();
  return {reshape(scatter(x, a.dim, index, a.value), call.inputs[0].shape())};
}

PF_REGISTER_COMPOSITE(index_add, &infer_index_along, &index_add_composite);
PF_REGISTER_COMPOSITE(index_copy, &infer_index_along, &index_copy_composite);
PF_REGISTER_COMPOSITE(index_fill, &infer_index_along, &index_fill_composite);

// ---- diff

// (input, prepend, append) joined in the order prepend, input, append (either may be undefined).
std::vector<Tensor> joined_parts(const OpCall& call) {
  std::vector<Tensor> parts;
  for (int i : {1, 0, 2})
    if (call.inputs[i].defined()) parts.push_back(call.inputs[i]);
  return parts;
}

// The joined length less n along dim, at least 0.
Inferred infer_diff(OpCall& call) {
  const Tensor& input = call.inputs[0];
  auto& a = std::get<DiffAttrs>(call.attrs);
  PF_CHECK(input.dim() > 0, ValueError, "diff expects input to be at least one-dimensional");
  PF_CHECK(a.n >= 0, ValueError, "order must be non-negative but got ", a.n);
  a.dim = wrap_dim(a.dim, input.dim(), "diff");
  const std::vector<Tensor> parts = joined_parts(call);
  Shape shape = input.shape();
  shape[a.dim] = 0;
  for (const Tensor& t : parts) {
    PF_CHECK(t.dim() == input.dim(), ValueError, "diff: prepend and append must have the input's ", input.dim(),
             " dimension(s), got shape ", t.shape());
    shape[a.dim] += t.shape()[a.dim];
  }
  shape[a.dim] = std::max<int64_t>(shape[a.dim] - a.n, 0);
  return {current_device(), {InputPlan{}, InputPlan{}, InputPlan{}}, {{shape, result_type(parts)}}, {}};
}

std::vector<Tensor> diff_composite(const OpCall& call) {
  const auto& a = call.attr<DiffAttrs>();
  const std::vector<Tensor> parts = joined_parts(call);
  Tensor x = parts.size() > 1 ? cat(parts, a.dim) : parts[0];
  for (int64_t k = 0; k < a.n && x.shape()[a.dim] > 0; ++k) {
    const int64_t length = x.shape()[a.dim];
    const Tensor hi = slice(x, a.dim, 1, length), lo = slice(x, a.dim, 0, length - 1);
    x = x.dtype() == DType::Bool ? ne(hi, lo) : sub(hi, lo);
  }
  return {x};
}

PF_REGISTER_COMPOSITE(diff, &infer_diff, &diff_composite);

// ---- roll

Inferred infer_roll(OpCall& call) {
  const Tensor& input = call.inputs[0];
  auto& a = std::get<RollAttrs>(call.attrs);
  if (a.dims.empty())
    PF_CHECK(a.shifts.size() == 1, ValueError, "roll(): with dims=None, shifts must be a single int, got ",
             Shape(a.shifts));
  else
    PF_CHECK(a.shifts.size() == a.dims.size(), ValueError, "roll(): shifts and dims must align. shifts: ",
             a.shifts.size(), ", dims:", a.dims.size());
  PF_CHECK(a.dims.empty() || input.dim() > 0, IndexError, "roll(): dimension specified as ", a.dims[0],
           " but tensor has no dimensions");
  for (int64_t& d : a.dims) d = wrap_dim(d, input.dim(), "roll");
  return {current_device(), {InputPlan{}}, {{input.shape(), input.dtype()}}, {}};
}

std::vector<Tensor> roll_composite(const OpCall& call) {
  const auto& a = call.attr<RollAttrs>();
  const Tensor& input = call.inputs[0];
  if (a.dims.empty()) return {reshape(roll(reshape(input, {-1}), a.shifts, {0}), input.shape())};
  Tensor out = input;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    const int64_t d = a.dims[i], n = out.shape()[d];
    const int64_t s = n == 0 ? 0 : (a.shifts[i] % n + n) % n;  // in [0, n)
    if (s) out = cat({slice(out, d, n - s, n), slice(out, d, 0, n - s)}, d);
  }
  return {out.same_storage(input) ? clone(input) : out};  // a new tensor, as a shift of 0 gives in PyTorch
}

PF_REGISTER_COMPOSITE(roll, &infer_roll, &roll_composite);

// ---- flip

Inferred infer_flip(OpCall& call) {
  const Tensor& input = call.inputs[0];
  auto& a = std::get<FlipAttrs>(call.attrs);
  for (size_t i = 0; i < a.dims.size(); ++i) {
    a.dims[i] = wrap_dim(a.dims[i], input.dim(), "flip");
    for (size_t j = 0; j < i; ++j)
      PF_CHECK(a.dims[j] != a.dims[i], ValueError, "flip dims: dim ", a.dims[i], " appears more than once");
  }
  return {current_device(), {InputPlan{}}, {{input.shape(), input.dtype()}}, {}};
}

std::vector<Tensor> flip_composite(const OpCall& call) {
  const Tensor& input = call.inputs[0];
  Tensor out = input;
  for (int64_t d : call.attr<FlipAttrs>().dims) {
    const int64_t n = input.dim() ? input.shape()[d] : 1;
    if (n > 1) out = index_select(out, d, arange(Scalar(n - 1), Scalar(int64_t{-1}), Scalar(int64_t{-1})));
  }
  return {out.same_storage(input) ? clone(input) : out};  // a new tensor whatever the sizes, as torch
}

PF_REGISTER_COMPOSITE(flip, &infer_flip, &flip_composite);

// ---- diag_embed

Inferred infer_diag_embed(OpCall& call) {
  const Tensor& input = call.inputs[0];
  auto& a = std::get<DiagonalAttrs>(call.attrs);
  const int64_t rank = input.dim() + 1;
  const int64_t d1 = wrap_dim(a.dim1, rank, "diag_embed"), d2 = wrap_dim(a.dim2, rank, "diag_embed");
  PF_CHECK(d1 != d2, ValueError, "diagonal dimensions cannot be identical ", a.dim1, ", ", a.dim2);
  a.dim1 = d1, a.dim2 = d2;  // two distinct dims: the input has a last dim (a 0-d input failed above)
  const int64_t m = input.shape().back() + std::abs(a.offset);
  Shape shape(input.shape().begin(), input.shape().end() - 1);
  shape.insert(shape.begin() + std::min(d1, d2), m);
  shape.insert(shape.begin() + std::max(d1, d2), m);
  return {current_device(), {InputPlan{}}, {{shape, input.dtype()}}, {}};
}

// The (n, n) square with the input on its diagonal (a where: NaN elsewhere in
// the input's row does not leak), padded to the offset's diagonal, its two
// dims then moved to dim1 and dim2.
std::vector<Tensor> diag_embed_composite(const OpCall& call) {
  const Tensor& input = call.inputs[0];
  const auto& a = call.attr<DiagonalAttrs>();
  const int64_t n = input.shape().back(), rank = input.dim() + 1, k = std::abs(a.offset);
  const Tensor position = arange(Scalar(int64_t{0}), Scalar(n));
  const Tensor diagonal = eq(unsqueeze(position, 1), position);
  Shape column(input.shape().begin(), input.shape().end() - 1);
  column.push_back(n), column.push_back(1);
  Tensor square = where(diagonal, reshape(input, column), full({}, Scalar(int64_t{0}), input.dtype()));
  if (k) square = pad(square, a.offset > 0 ? std::vector<int64_t>{k, 0, 0, k} : std::vector<int64_t>{0, k, k, 0});
  std::vector<int64_t> order;  // result dim -> square's dim: the batch dims in order around dim1 and dim2
  for (int64_t d = 0, batch = 0; d < rank; ++d)
    order.push_back(d == a.dim1 ? rank - 2 : d == a.dim2 ? rank - 1 : batch++);
  return {permute(square, order)};
}

PF_REGISTER_COMPOSITE(diag_embed, &infer_diag_embed, &diag_embed_composite);

// ---- cummax, cummin

Inferred infer_cumulative_extreme(OpCall& call) {
  const Tensor& input = call.inputs[0];
  auto& a = std::get<DimAttrs>(call.attrs);
  a.dim = wrap_dim(a.dim, input.dim(), op_name(call.op));
  return {current_device(), {InputPlan{}}, {{input.shape(), input.dtype()}, {input.shape(), DType::Int64}}, {}};
}

// The indices from a scan of log2(n) steps over (value, index) pairs, each a
// where over shifted halves (a tie or a NaN takes the later element, a NaN
// stays); the values are the input gathered at them, so autograd sends each
// gradient to the element that was the extreme, as PyTorch does.
std::vector<Tensor> cumulative_extreme_composite(const OpCall& call) {
  const Tensor& input = call.inputs[0];
  const bool larger = call.op == ir::OpType::cummax;
  if (input.dim() == 0) return {clone(input), full({}, Scalar(int64_t{0}), DType::Int64)};
  const int64_t d = call.attr<DimAttrs>().dim, n = input.shape()[d];
  Tensor values = input.detach();
  Shape along(input.dim(), 1);
  along[d] = n;
  Tensor indices = expand(reshape(arange(Scalar(int64_t{0}), Scalar(n)), along), input.shape());
  for (int64_t step = 1; step < n; step *= 2) {
    const Tensor early_v = slice(values, d, 0, n - step), late_v = slice(values, d, step, n);
    const Tensor early_i = slice(indices, d, 0, n - step), late_i = slice(indices, d, step, n);
    Tensor better = larger ? gt(early_v, late_v) : lt(early_v, late_v);
    if (is_floating(values.dtype())) better = logical_or(better, logical_and(isnan(early_v), logical_not(isnan(late_v))));
    values = cat({slice(values, d, 0, step), where(better, early_v, late_v)}, d);
    indices = cat({slice(indices, d, 0, step), where(better, early_i, late_i)}, d);
  }
  return {gather(input, d, indices), indices};
}

// ---- lerp, logit, cdist

// (input, end, weight or undefined): input and end floating of one dtype; all broadcast.
Inferred infer_lerp(OpCall& call) {
  const Tensor &input = call.inputs[0], &end = call.inputs[1], &weight = call.inputs[2];
  PF_CHECK(is_floating(input.dtype()), TypeError, "lerp(): needs floating-point tensors, got pyflame.",
           dtype_name(input.dtype()));
  PF_CHECK(end.dtype() == input.dtype(), TypeError, "lerp(): expected dtype pyflame.", dtype_name(input.dtype()),
           " for `end` but got dtype pyflame.", dtype_name(end.dtype()));
  Shape shape = broadcast_shapes(input.shape(), end.shape(), "lerp");
  if (weight.defined()) shape = broadcast_shapes(shape, weight.shape(), "lerp");
  return {current_device(), {InputPlan{}, InputPlan{}, InputPlan{}}, {{shape, input.dtype()}}, {}};
}

// PyTorch's two-sided form, exact at weight 0 and 1: input + w (end - input) where |w| < 1/2,
// else end - (1 - w)(end - input); float16/bfloat16 computed in float32 and rounded once.
std::vector<Tensor> lerp_composite(const OpCall& call) {
  const DType dtype = call.inputs[0].dtype(), compute = compute_dtype(dtype);
  const Tensor input = to(call.inputs[0], compute), end = to(call.inputs[1], compute);
  const Tensor diff = sub(end, input);
  Tensor out;
  if (call.inputs[2].defined()) {
    const Tensor w = to(call.inputs[2], compute);
    out = where(lt(abs(w), Scalar(0.5)), add(input, mul(w, diff)), sub(end, mul(diff, neg(sub(w, Scalar(1.0))))));
  } else {
    const double w = call.attr<LerpAttrs>().weight;
    out = std::abs(w) < 0.5 ? add(input, mul(diff, Scalar(w))) : sub(end, mul(diff, Scalar(1.0 - w)));
  }
  return {to(out, dtype)};
}

// Integer inputs give the default float dtype.
Inferred infer_logit(OpCall& call) {
  const Tensor& input = call.inputs[0];
  return {current_device(), {InputPlan{}}, {{input.shape(), is_floating(input.dtype()) ? input.dtype() : default_float()}},
          {}};
}

std::vector<Tensor> logit_composite(const OpCall& call) {
  const Tensor& input = call.inputs[0];
  const std::optional<double> eps = call.attr<LogitAttrs>().eps;
  Tensor p = is_floating(input.dtype()) ? input : to(input, default_float());
  if (eps) p = clamp(p, std::optional<Scalar>(*eps), std::optional<Scalar>(1.0 - *eps));
  return {sub(log(p), log1p(neg(p)))};
}

// x1 (..., P, M) and x2 (..., R, M), batch dims broadcast: (..., P, R) in their promoted dtype.
Inferred infer_cdist(OpCall& call) {
  const Tensor &x1 = call.inputs[0], &x2 = call.inputs[1];
  PF_CHECK(x1.dim() >= 2 && x2.dim() >= 2 && x1.shape().back() == x2.shape().back(), ValueError,
           "cdist: X1 and X2 must have the same number of columns, got shapes ", x1.shape(), " and ", x2.shape());
  PF_CHECK(call.attr<CdistAttrs>().p >= 0, ValueError, "cdist only supports non-negative p values");
  Shape batch = broadcast_shapes(Shape(x1.shape().begin(), x1.shape().end() - 2),
                                 Shape(x2.shape().begin(), x2.shape().end() - 2), "cdist");
  batch.push_back(x1.shape()[x1.dim() - 2]);
  batch.push_back(x2.shape()[x2.dim() - 2]);
  return {current_device(), {InputPlan{}, InputPlan{}}, {{batch, result_type(call.inputs)}}, {}};
}

// |x1 rows - x2 rows| over M: summed (p = 1), the largest (inf), counted nonzero (0), else the p-norm.
std::vector<Tensor> cdist_composite(const OpCall& call) {
  const Tensor &x1 = call.inputs[0], &x2 = call.inputs[1];
  const double p = call.attr<CdistAttrs>().p;
  const Tensor d = abs(sub(unsqueeze(x1, -2), unsqueeze(x2, -3)));
  if (std::isinf(p)) return {max(d, {-1}, false)};
  if (p == 0) return {sum(to(ne(d, Scalar(int64_t{0})), d.dtype()), {-1}, false)};
  if (p == 1) return {sum(d, {-1}, false)};
  return {pow(sum(pow(d, Scalar(p)), {-1}, false), Scalar(1.0 / p))};
}

PF_REGISTER_COMPOSITE(lerp, &infer_lerp, &lerp_composite);
PF_REGISTER_COMPOSITE(logit, &infer_logit, &logit_composite);
PF_REGISTER_COMPOSITE(cdist, &infer_cdist, &cdist_composite);

PF_REGISTER_COMPOSITE(cummax, &infer_cumulative_extreme, &cumulative_extreme_composite);
PF_REGISTER_COMPOSITE(cummin, &infer_cumulative_extreme, &cumulative_extreme_composite);

}  // namespace

Tensor addcmul(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  return apply_one(ir::OpType::addcmul, {input, tensor1, tensor2}, AddcAttrs{value});
}

Tensor addcdiv(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  return apply_one(ir::OpType::addcdiv, {input, tensor1, tensor2}, AddcAttrs{value});
}

Tensor& addcmul_(Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  return apply_into(input, ir::OpType::addcmul, {input, tensor1, tensor2}, AddcAttrs{value});
}

Tensor& addcdiv_(Tensor& input, const Tensor& tensor1, const Tensor& tensor2, Scalar value) {
  return apply_into(input, ir::OpType::addcdiv, {input, tensor1, tensor2}, AddcAttrs{value});
}

Tensor isclose(const Tensor& input, const Tensor& other, double rtol, double atol, bool equal_nan) {
  return apply_one(ir::OpType::isclose, {input, other}, IscloseAttrs{rtol, atol, equal_nan});
}

Tensor index_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) {
  return apply_one(ir::OpType::index_add, {input, index, source}, IndexAlongAttrs{dim, alpha});
}

Tensor index_copy(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source) {
  return apply_one(ir::OpType::index_copy, {input, index, source}, IndexAlongAttrs{dim});
}

Tensor index_fill(const Tensor& input, int64_t dim, const Tensor& index, Scalar value) {
  return apply_one(ir::OpType::index_fill, {input, index, Tensor()}, IndexAlongAttrs{dim, value});
}

Tensor diff(const Tensor& input, int64_t n, int64_t dim, const Tensor& prepend, const Tensor& append) {
  return apply_one(ir::OpType::diff, {input, prepend, append}, DiffAttrs{n, dim});
}

Tensor diag_embed(const Tensor& input, int64_t offset, int64_t dim1, int64_t dim2) {
  return apply_one(ir::OpType::diag_embed, {input}, DiagonalAttrs{offset, dim1, dim2});
}

Tensor flip(const Tensor& input, std::vector<int64_t> dims) {
  return apply_one(ir::OpType::flip, {input}, FlipAttrs{std::move(dims)});
}

Tensor roll(const Tensor& input, std::vector<int64_t> shifts, std::vector<int64_t> dims) {
  return apply_one(ir::OpType::roll, {input}, RollAttrs{std::move(shifts), std::move(dims)});
}

Tensor lerp(const Tensor& input, const Tensor& end, const Tensor& weight) {
  return apply_one(ir::OpType::lerp, {input, end, weight}, LerpAttrs{});
}

Tensor lerp(const Tensor& input, const Tensor& end, double weight) {
  return apply_one(ir::OpType::lerp, {input, end, Tensor()}, LerpAttrs{weight});
}

Tensor logit(const Tensor& input, std::optional<double> eps) {
  return apply_one(ir::OpType::logit, {input}, LogitAttrs{eps});
}

Tensor cdist(const Tensor& x1, const Tensor& x2, double p) {
  return apply_one(ir::OpType::cdist, {x1, x2}, CdistAttrs{p});
}

std::pair<Tensor, Tensor> cummax(const Tensor& input, int64_t dim) {
  std::vector<Tensor> out = apply({ir::OpType::cummax, {input}, DimAttrs{dim, std::nullopt}, {}});
  return {std::move(out[0]), std::move(out[1])};
}

std::pair<Tensor, Tensor> cummin(const Tensor& input, int64_t dim) {
  std::vector<Tensor> out = apply({ir::OpType::cummin, {input}, DimAttrs{dim, std::nullopt}, {}});
  return {std::move(out[0]), std::move(out[1])};
}

}  // namespace pyflame
