// The op layer of include/pyflame/linalg_ops.h: the norms of torch.linalg,
// logsumexp, nansum, nanmean, count_nonzero, aminmax, kron, tensordot, einsum, the add-product family (addmm & co.)
// and linalg_cross as composite ops. Each infer holds every check
// of its op, with torch's messages (which name the norms as linalg.vector_norm); each
// decomposition is the table's elementwise ops and reductions (the vector
// norm's in float32 for a half-precision input, as PyTorch's).

#include "pyflame/linalg_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "core/derivative.h"
#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/misc_ops.h"
#include "pyflame/ops.h"
#include "pyflame/shape_ops.h"

namespace pyflame {

namespace {

// PyTorch's C++ name of a scalar type, which its norms' dtype errors print ("Got Long").
const char* torch_type_name(DType d) {
  switch (d) {
    case DType::Bool: return "Bool";
    case DType::UInt8: return "Byte";
    case DType::Int8: return "Char";
    case DType::Int16: return "Short";
    case DType::Int32: return "Int";
    case DType::Int64: return "Long";
    case DType::Float16: return "Half";
    case DType::BFloat16: return "BFloat16";
    case DType::Float32: return "Float";
    case DType::Float64: break;
  }
  return "Double";
}

// An ord as torch's messages print it: 2, 2.5, inf. Without iostreams, as the rest of the
// library: an ostringstream here crashed the NVIDIA build on the GPU machine.
std::string ord_text(double ord) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", ord);
  return text;
}

void check_norm_dtypes(const Tensor& x, std::optional<DType> dtype, const char* name) {
  if (dtype)
    PF_CHECK(is_floating(*dtype), TypeError, name, ": dtype should be floating point or complex, but got ", *dtype);
  PF_CHECK(is_floating(x.dtype()), TypeError, name, ": Expected a floating point or complex tensor as input. Got ",
           torch_type_name(x.dtype()));
}

// The input of a norm's decomposition: in `dtype` when one was asked for.
Tensor norm_input(const OpCall& call) {
  const std::optional<DType> dtype = call.attr<LinalgNormAttrs>().dtype;
  return dtype ? to(call.inputs[0], *dtype) : call.inputs[0];
}

// ---- linalg_vector_norm

Inferred infer_linalg_vector_norm(OpCall& call) {
  const char* name = "linalg.vector_norm";
  const Tensor& x = call.inputs[0];
  auto& a = std::get<LinalgNormAttrs>(call.attrs);
  check_norm_dtypes(x, a.dtype, name);
  a.dims = normalize_dims(a.dims, x.dim(), call.op);
  // The largest |x| and the negative powers (a sum of 1/|x|^p) have no value over no elements.
  const bool without_identity = a.ord < 0 || std::isinf(a.ord);
  const bool empty_reduction = std::any_of(a.dims.begin(), a.dims.end(), [&](int64_t d) { return x.size(d) == 0; });
  PF_CHECK(!(without_identity && empty_reduction), ValueError, name, ": cannot compute the ", ord_text(a.ord),
           " norm over dims ", Shape(a.dims), " of a tensor of shape ", x.shape(),
           ": a dim is empty and the operation does not have an identity");
  return {current_device(), {InputPlan{}}, {{reduced_shape(x.shape(), a.dims, a.keepdim), a.dtype.value_or(x.dtype())}},
          {}};
}

// s^(1/p) with a zero gradient where s is 0 (PyTorch's subgradient of the norm
// at 0): the inner where keeps pow's infinite derivative at 0 out of the graph.
Tensor root(const Tensor& s, double p) {
  const Tensor zero = eq(s, Scalar(int64_t{0}));
  return where(zero, Tensor::scalar(Scalar(0.0)),
               pow(where(zero, Tensor::scalar(Scalar(1.0)), s), Scalar(1.0 / p)));
}

Tensor vector_norm_of(const Tensor& x, const LinalgNormAttrs& a) {
  if (std::isinf(a.ord)) return a.ord > 0 ? max(abs(x), a.dims, a.keepdim) : min(abs(x), a.dims, a.keepdim);
  if (a.ord == 0) {
    // The count of nonzero elements, as a function of x whose derivative is 0, as PyTorch's: x^0 is 1
    // for every x (NaN and inf too) and pow's derivative is 0 where the exponent is.
    const Tensor nonzero = where(ne(x, Scalar(int64_t{0})), pow(x, Scalar(0.0)), Tensor::scalar(Scalar(0.0)));
    return sum(nonzero, a.dims, a.keepdim);
  }
  if (a.ord == 1) return sum(abs(x), a.dims, a.keepdim);
  if (a.ord == 2) return root(sum(mul(x, x), a.dims, a.keepdim), 2);
  return root(sum(pow(abs(x), Scalar(a.ord)), a.dims, a.keepdim), a.ord);
}

std::vector<Tensor> linalg_vector_norm_composite(const OpCall& call) {
  const Tensor x = norm_input(call);
  // As PyTorch's, a float16 or bfloat16 norm computes in float32 and rounds once.
  if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16)
    return {to(vector_norm_of(to(x, DType::Float32), call.attr<LinalgNormAttrs>()), x.dtype())};
  return {vector_norm_of(x, call.attr<LinalgNormAttrs>())};
}

PF_REGISTER_COMPOSITE(linalg_vector_norm, &infer_linalg_vector_norm, &linalg_vector_norm_composite);

// ---- linalg_matrix_norm

Inferred infer_linalg_matrix_norm(OpCall& call) {
  const char* name = "linalg.matrix_norm";
  const Tensor& A = call.inputs[0];
  auto& a = std::get<LinalgNormAttrs>(call.attrs);
  check_norm_dtypes(A, a.dtype, name);
  PF_CHECK(A.dim() >= 2, ValueError, name, ": The input tensor A must have at least 2 dimensions, got shape ",
           A.shape());
  PF_CHECK(a.dims.size() == 2, ValueError, name, ": dim must be a 2-tuple. Got ", Shape(a.dims));
  const int64_t rows = wrap_dim(a.dims[0], A.dim(), name), cols = wrap_dim(a.dims[1], A.dim(), name);
  PF_CHECK(rows != cols, ValueError, name, ": dims must be different. Got (", a.dims[0], ", ", a.dims[1], ")");
  a.dims = {rows, cols};
  const bool numeric = a.ord_name == kOrdNumber;
  PF_CHECK(!numeric || std::abs(a.ord) == 1 || std::abs(a.ord) == 2 || std::isinf(a.ord), ValueError, name,
           ": Order ", ord_text(a.ord), " not supported.");
  if (numeric && std::abs(a.ord) != 2) {
    // The largest (smallest) column sum of matrices without columns, or row sum without rows.
    const bool by_columns = std::abs(a.ord) == 1;
    PF_CHECK(A.size(by_columns ? cols : rows) > 0, ValueError, name, ": cannot compute the ", ord_text(a.ord),
             " norm of matrices without ", by_columns ? "columns" : "rows", " (input shape ", A.shape(),
             "): the operation does not have an identity");
  }
  return {current_device(), {InputPlan{}}, {{reduced_shape(A.shape(), a.dims, a.keepdim), a.dtype.value_or(A.dtype())}},
          {}};
}

std::vector<Tensor> linalg_matrix_norm_composite(const OpCall& call) {
  const auto& a = call.attr<LinalgNormAttrs>();
  const Tensor A = norm_input(call);
  const int64_t rows = a.dims[0], cols = a.dims[1];
  if (a.ord_name == kOrdFro) return {linalg_vector_norm(A, 2, a.dims, a.keepdim)};
  if (a.ord_name == kOrdNuc || std::abs(a.ord) == 2) {
    // The singular values' sum ('nuc'), largest (2) or smallest (-2): the matrix dims moved last.
    std::vector<int64_t> order;
    for (int64_t d = 0; d < A.dim(); ++d)
      if (d != rows && d != cols) order.push_back(d);
    order.insert(order.end(), {rows, cols});
    const Tensor S = std::get<1>(linalg_svd(permute(A, order), false));
    Tensor out = a.ord_name == kOrdNuc ? sum(S, {-1}) : a.ord > 0 ? max(S, {-1}) : min(S, {-1});
    if (a.keepdim)
      for (int64_t d : {std::min(rows, cols), std::max(rows, cols)}) out = unsqueeze(out, d);
    return {out};
  }
  // 1/-1: the largest/smallest column sum of |A| (summed over the rows); inf/-inf: the same over rows.
  const bool by_columns = std::abs(a.ord) == 1;
  const Tensor sums = sum(abs(A), {by_columns ? rows : cols}, true);
  const std::vector<int64_t> across = {by_columns ? cols : rows};
  const Tensor out = a.ord > 0 ? max(sums, across, true) : min(sums, across, true);
  return {a.keepdim ? out : squeeze(out, a.dims)};
}

PF_REGISTER_COMPOSITE(linalg_matrix_norm, &infer_linalg_matrix_norm, &linalg_matrix_norm_composite);

// ---- logsumexp

// Integer and bool inputs compute in the default float dtype, as PyTorch's.
DType logsumexp_dtype(DType input) { return is_floating(input) ? input : default_float(); }

Inferred infer_logsumexp(OpCall& call) {
  const Tensor& x = call.inputs[0];
  auto& a = std::get<ReduceAttrs>(call.attrs);
  a.dims = normalize_dims(a.dims, x.dim(), call.op);
  return {current_device(), {InputPlan{}},
          {{reduced_shape(x.shape(), a.dims, a.keepdim), logsumexp_dtype(x.dtype())}}, {}};
}

std::vector<Tensor> logsumexp_composite(const OpCall& call) {
  const auto& a = call.attr<ReduceAttrs>();
  const Tensor x = to(call.inputs[0], logsumexp_dtype(call.inputs[0].dtype()));
  // Over an empty dim the sum is 0 and the result -inf, as PyTorch's; there is no maximum to take out.
  if (x.numel() == 0) return {log(sum(exp(x), a.dims, a.keepdim))};
  // The shift is a constant of the formula, outside the graph; an infinite maximum shifts by 0,
  // so that rows of -inf give -inf and a +inf gives +inf rather than NaN (a NaN maximum propagates).
  const Tensor largest = max(x.detach(), a.dims, true);
  const Tensor shift = where(isinf(largest), Tensor::scalar(Scalar(0.0)), largest);
  const Tensor s = log(sum(exp(sub(x, shift)), a.dims, a.keepdim));
  return {add(s, reshape(shift, s.shape()))};
}

PF_REGISTER_COMPOSITE(logsumexp, &infer_logsumexp, &logsumexp_composite);

// ---- nansum, nanmean

// The result's dtype: dtype= where given, else nansum's is sum's (int64 for integer and
// bool inputs) and nanmean's the input's.
DType nan_reduce_dtype(const OpCall& call) {
  const auto& a = call.attr<NanReduceAttrs>();
  if (a.dtype) return *a.dtype;
  const DType input = call.inputs[0].dtype();
  return call.op == ir::OpType::nansum && !is_floating(input) ? DType::Int64 : input;
}

Inferred infer_nan_reduce(OpCall& call) {
  const Tensor& x = call.inputs[0];
  PF_CHECK(call.op != ir::OpType::nanmean || is_floating(x.dtype()), TypeError,
           "nanmean(): expected input to have floating point dtype but got ", torch_type_name(x.dtype()));
  auto& a = std::get<NanReduceAttrs>(call.attrs);
  a.dims = normalize_dims(a.dims, x.dim(), call.op);
  return {current_device(), {InputPlan{}}, {{reduced_shape(x.shape(), a.dims, a.keepdim), nan_reduce_dtype(call)}},
          {}};
}

// NaNs replaced by zeros, before any conversion to dtype= (a NaN has no integer value).
Tensor nan_to_zero(const Tensor& x) {
  return is_floating(x.dtype()) ? where(isnan(x), Tensor::scalar(Scalar(int64_t{0})), x) : x;
}

std::vector<Tensor> nansum_composite(const OpCall& call) {
  const auto& a = call.attr<NanReduceAttrs>();
  const DType dtype = nan_reduce_dtype(call);
  const Tensor x = nan_to_zero(call.inputs[0]);
  return {to(sum(a.dtype ? to(x, dtype) : x, a.dims, a.keepdim), dtype)};
}

// The sum of the non-NaN elements over their count (0 / 0: NaN where every element is NaN).
std::vector<Tensor> nanmean_composite(const OpCall& call) {
  const auto& a = call.attr<NanReduceAttrs>();
  const DType dtype = nan_reduce_dtype(call);
  const Tensor x = to(call.inputs[0], dtype);
  const Tensor count = sum(logical_not(isnan(x)), a.dims, a.keepdim);
  return {to(div(sum(nan_to_zero(x), a.dims, a.keepdim), to(count, dtype)), dtype)};
}

PF_REGISTER_COMPOSITE(nansum, &infer_nan_reduce, &nansum_composite);
PF_REGISTER_COMPOSITE(nanmean, &infer_nan_reduce, &nanmean_composite);

// ---- addmm, addmv, addr, baddbmm, addbmm

// "2x3", as PyTorch's product messages print a shape.
std::string shape_text(const Shape& shape) {
  std::string text;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) text += 'x';
    text += std::to_string(shape[d]);
  }
  return text;
}

// Each add-product op's product: its shape, after the checks of the operands'
// ranks and sizes, and the product itself.
Shape addmm_shape(const Tensor& a, const Tensor& b) {
  PF_CHECK(a.dim() == 2, ValueError, "mat1 must be a matrix, got ", a.dim(), "-D tensor");
  PF_CHECK(b.dim() == 2, ValueError, "mat2 must be a matrix, got ", b.dim(), "-D tensor");
  PF_CHECK(a.shape()[1] == b.shape()[0], ValueError, "mat1 and mat2 shapes cannot be multiplied (",
           shape_text(a.shape()), " and ", shape_text(b.shape()), ")");
  return {a.shape()[0], b.shape()[1]};
}

Shape addmv_shape(const Tensor& a, const Tensor& b) {
  PF_CHECK(a.dim() == 2 && b.dim() == 1, ValueError, "vector + matrix @ vector expected, got ", a.dim(),
           "-D matrix and ", b.dim(), "-D vector");
  PF_CHECK(a.shape()[1] == b.shape()[0], ValueError, "addmv: size mismatch, mat (", shape_text(a.shape()),
           "), vec (", b.shape()[0], ")");
  return {a.shape()[0]};
}

Shape addr_shape(const Tensor& a, const Tensor& b) {
  PF_CHECK(a.dim() == 1, ValueError, "addr: Expected 1-D argument vec1, but got ", a.dim(), "-D");
  PF_CHECK(b.dim() == 1, ValueError, "addr: Expected 1-D argument vec2, but got ", b.dim(), "-D");
  return {a.shape()[0], b.shape()[0]};
}

void check_batches(const Tensor& a, const Tensor& b, const char* name) {
  PF_CHECK(a.dim() == 3, ValueError, name, ": batch1 must be a 3D tensor, got shape ", a.shape());
  PF_CHECK(b.dim() == 3, ValueError, name, ": batch2 must be a 3D tensor, got shape ", b.shape());
  PF_CHECK(a.shape()[0] == b.shape()[0] && a.shape()[2] == b.shape()[1], ValueError,
           "Expected size for first two dimensions of batch2 tensor to be: [", a.shape()[0], ", ", a.shape()[2],
           "] but got: [", b.shape()[0], ", ", b.shape()[1], "].");
}

Shape baddbmm_shape(const Tensor& a, const Tensor& b) {
  check_batches(a, b, "baddbmm");
  return {a.shape()[0], a.shape()[1], b.shape()[2]};
}

Shape addbmm_shape(const Tensor& a, const Tensor& b) {
  check_batches(a, b, "addbmm");
  return {a.shape()[1], b.shape()[2]};
}

Tensor matrix_product(const Tensor& a, const Tensor& b, DType) { return matmul(a, b); }
Tensor batch_product(const Tensor& a, const Tensor& b, DType) { return batch_matmul(a, b); }

Tensor outer_product(const Tensor& a, const Tensor& b, DType dtype) {
  return mul(reshape(to(a, dtype), {-1, 1}), reshape(to(b, dtype), {1, -1}));
}

// One product: the batch joins the contracted dim, (n, batch * m) @ (batch * m, p).
Tensor summed_batch_product(const Tensor& a, const Tensor& b, DType) {
  const int64_t batch = a.shape()[0], n = a.shape()[1], m = a.shape()[2];
  return matmul(reshape(permute(a, {1, 0, 2}), {n, batch * m}), reshape(b, {batch * m, b.shape()[2]}));
}

struct AddProduct {
  ir::OpType op;
  Shape (*shape)(const Tensor&, const Tensor&);
  Tensor (*product)(const Tensor&, const Tensor&, DType);
};

constexpr AddProduct kAddProducts[] = {
    {ir::OpType::addmm, &addmm_shape, &matrix_product},
    {ir::OpType::addmv, &addmv_shape, &matrix_product},
    {ir::OpType::addr, &addr_shape, &outer_product},
    {ir::OpType::baddbmm, &baddbmm_shape, &batch_product},
    {ir::OpType::addbmm, &addbmm_shape, &summed_batch_product},
};

const AddProduct& add_product(ir::OpType op) {
  return *std::find_if(std::begin(kAddProducts), std::end(kAddProducts),
                       [op](const AddProduct& p) { return p.op == op; });
}

// addr promotes its operands, as PyTorch's; the others take one dtype.
DType add_product_dtype(const OpCall& call) {
  return call.op == ir::OpType::addr ? result_type(call.inputs) : call.inputs[1].dtype();
}

Inferred infer_add_product(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &input = call.inputs[0], &a = call.inputs[1], &b = call.inputs[2];
  const Shape shape = add_product(call.op).shape(a, b);
  const DType dtype = add_product_dtype(call);
  if (call.op == ir::OpType::addr) {
    const AddProductAttrs& attrs = call.attr<AddProductAttrs>();
    for (const auto& [arg, value] : {std::pair{"beta", attrs.beta}, std::pair{"alpha", attrs.alpha}})
      PF_CHECK(is_floating(dtype) || value.kind != Scalar::Kind::Float, TypeError,
               "For integral input tensors, argument ", arg, " must not be a floating point number.");
  } else {
    PF_CHECK(input.dtype() == dtype && b.dtype() == dtype, TypeError, name,
             ": input tensors must have the same dtype, but got ", torch_type_name(input.dtype()), ", ",
             torch_type_name(dtype), " and ", torch_type_name(b.dtype()));
    PF_CHECK(dtype != DType::Bool, TypeError, name, ": not supported for bool tensors");
  }
  PF_CHECK(broadcast_shapes(input.shape(), shape, name) == shape, ValueError, "The input of shape ",
           input.shape(), " cannot be broadcast to the product's shape ", shape);
  return {current_device(), {InputPlan{}, InputPlan{}, InputPlan{}}, {{shape, dtype}}, {}};
}

// t * s where s is not 1; integer tensors take s truncated to an integer, as PyTorch's.
Tensor scaled(const Tensor& t, Scalar s) {
  if (!is_floating(t.dtype()) && s.kind == Scalar::Kind::Float) s = Scalar(s.i);
  return s.f == 1 ? t : mul(t, s);
}

std::vector<Tensor> add_product_composite(const OpCall& call) {
  const DType dtype = add_product_dtype(call);
  const AddProductAttrs& attrs = call.attr<AddProductAttrs>();
  const Tensor product = scaled(add_product(call.op).product(call.inputs[1], call.inputs[2], dtype), attrs.alpha);
  const Tensor input = to(call.inputs[0], dtype);
  // beta 0 ignores the input's values, NaN included, as PyTorch's; the input still
  // takes part (a where that never picks it), so its gradient is zeros as there.
  if (attrs.beta.f == 0) return {where(Tensor::scalar(Scalar(false)), input, product)};
  return {add(scaled(input, attrs.beta), product)};
}

PF_REGISTER_COMPOSITE(addmm, &infer_add_product, &add_product_composite);
PF_REGISTER_COMPOSITE(addmv, &infer_add_product, &add_product_composite);
PF_REGISTER_COMPOSITE(addr, &infer_add_product, &add_product_composite);
PF_REGISTER_COMPOSITE(baddbmm, &infer_add_product, &add_product_composite);
PF_REGISTER_COMPOSITE(addbmm, &infer_add_product, &add_product_composite);

// ---- count_nonzero, kron

Inferred infer_count_nonzero(OpCall& call) {
  const Tensor& x = call.inputs[0];
  auto& a = std::get<ReduceAttrs>(call.attrs);
  a.dims = normalize_dims(a.dims, x.dim(), call.op);
  return {current_device(), {InputPlan{}}, {{reduced_shape(x.shape(), a.dims, false), DType::Int64}}, {}};
}

// NaN is nonzero, as PyTorch's.
std::vector<Tensor> count_nonzero_composite(const OpCall& call) {
  return {sum(ne(call.inputs[0], Scalar(int64_t{0})), call.attr<ReduceAttrs>().dims, false)};
}

PF_REGISTER_COMPOSITE(count_nonzero, &infer_count_nonzero, &count_nonzero_composite);

// Over every element (dims {}) there must be one, as PyTorch's; min and max check a given dim.
Inferred infer_aminmax(OpCall& call) {
  const Tensor& x = call.inputs[0];
  auto& a = std::get<ReduceAttrs>(call.attrs);
  PF_CHECK(!a.dims.empty() || x.numel() > 0, ValueError,
           "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity");
  a.dims = normalize_dims(a.dims, x.dim(), call.op);
  const Shape shape = reduced_shape(x.shape(), a.dims, a.keepdim);
  return {current_device(), {InputPlan{}}, {{shape, x.dtype()}, {shape, x.dtype()}}, {}};
}

std::vector<Tensor> aminmax_composite(const OpCall& call) {
  const auto& a = call.attr<ReduceAttrs>();
  return {min(call.inputs[0], a.dims, a.keepdim), max(call.inputs[0], a.dims, a.keepdim)};
}

PF_REGISTER_COMPOSITE(aminmax, &infer_aminmax, &aminmax_composite);

// The operands' shapes with leading 1s to the larger rank.
std::pair<Shape, Shape> kron_shapes(const Tensor& a, const Tensor& b) {
  const size_t rank = std::max(a.shape().size(), b.shape().size());
  Shape sa(rank - a.shape().size(), 1), sb(rank - b.shape().size(), 1);
  sa.insert(sa.end(), a.shape().begin(), a.shape().end());
  sb.insert(sb.end(), b.shape().begin(), b.shape().end());
  return {sa, sb};
}

Inferred infer_kron(OpCall& call) {
  const auto [sa, sb] = kron_shapes(call.inputs[0], call.inputs[1]);
  Shape shape(sa.size());
  for (size_t d = 0; d < sa.size(); ++d) shape[d] = sa[d] * sb[d];
  return {current_device(), {InputPlan{}, InputPlan{}}, {{shape, result_type(call.inputs)}}, {}};
}

// a as (a0, 1, a1, 1, ...) times b as (1, b0, 1, b1, ...), then each pair of dims merged.
std::vector<Tensor> kron_composite(const OpCall& call) {
  const auto [sa, sb] = kron_shapes(call.inputs[0], call.inputs[1]);
  Shape pa, pb, out;
  for (size_t d = 0; d < sa.size(); ++d) {
    pa.insert(pa.end(), {sa[d], 1});
    pb.insert(pb.end(), {1, sb[d]});
    out.push_back(sa[d] * sb[d]);
  }
  return {reshape(mul(reshape(call.inputs[0], pa), reshape(call.inputs[1], pb)), out)};
}

PF_REGISTER_COMPOSITE(kron, &infer_kron, &kron_composite);

// ---- tensordot

// The dims of a rank-`rank` operand not in `summed`, in order.
std::vector<int64_t> kept_dims(int64_t rank, const std::vector<int64_t>& summed) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(summed.begin(), summed.end(), d) == summed.end()) kept.push_back(d);
  return kept;
}

Inferred infer_tensordot(OpCall& call) {
  const Tensor &a = call.inputs[0], &b = call.inputs[1];
  auto& at = std::get<TensordotAttrs>(call.attrs);
  PF_CHECK(at.dims_a.size() == at.dims_b.size(), ValueError, "both dimension lists should have same length, got ",
           at.dims_a.size(), " and ", at.dims_b.size());
  PF_CHECK(a.dtype() == b.dtype(), TypeError, "tensordot: operands must have the same dtype, got ", a.dtype(), " and ",
           b.dtype(), " (convert one with .to())");
  PF_CHECK(at.dims_a.empty() || (a.dim() > 0 && b.dim() > 0), IndexError, "tensordot: dimension specified as ",
           a.dim() > 0 ? at.dims_b[0] : at.dims_a[0], " but tensor has no dimensions");
  for (size_t i = 0; i < at.dims_a.size(); ++i) {
    const int64_t da = wrap_dim(at.dims_a[i], a.dim(), "tensordot"), db = wrap_dim(at.dims_b[i], b.dim(), "tensordot");
    for (size_t j = 0; j < i; ++j)
      PF_CHECK(at.dims_a[j] != da && at.dims_b[j] != db, ValueError, "tensordot: dim ", at.dims_a[j] == da ? da : db,
               " appears multiple times in the list of dims");
    PF_CHECK(a.shape()[da] == b.shape()[db], ValueError, "contracted dimensions need to match, but first has size ",
             a.shape()[da], " in dim ", da, " and second has size ", b.shape()[db], " in dim ", db);
    at.dims_a[i] = da, at.dims_b[i] = db;
  }
  Shape shape;
  for (int64_t d : kept_dims(a.dim(), at.dims_a)) shape.push_back(a.shape()[d]);
  for (int64_t d : kept_dims(b.dim(), at.dims_b)) shape.push_back(b.shape()[d]);
  return {current_device(), {InputPlan{}, InputPlan{}}, {{shape, a.dtype()}}, {}};
}

// input as a matrix (its kept dims x the summed ones) times other as one (the summed x its kept).
std::vector<Tensor> tensordot_composite(const OpCall& call) {
  const Tensor &a = call.inputs[0], &b = call.inputs[1];
  const auto& at = call.attr<TensordotAttrs>();
  std::vector<int64_t> order_a = kept_dims(a.dim(), at.dims_a), order_b = at.dims_b;
  const std::vector<int64_t> kept_b = kept_dims(b.dim(), at.dims_b);
  int64_t rows = 1, cols = 1, inner = 1;
  Shape shape;
  for (int64_t d : order_a) rows *= a.shape()[d], shape.push_back(a.shape()[d]);
  for (int64_t d : kept_b) cols *= b.shape()[d], shape.push_back(b.shape()[d]);
  for (int64_t d : at.dims_a) inner *= a.shape()[d];
  order_a.insert(order_a.end(), at.dims_a.begin(), at.dims_a.end());
  order_b.insert(order_b.end(), kept_b.begin(), kept_b.end());
  const Tensor left = reshape(permute(a, order_a), {rows, inner}), right = reshape(permute(b, order_b), {inner, cols});
  return {reshape(matmul(left, right), shape)};
}

PF_REGISTER_COMPOSITE(tensordot, &infer_tensordot, &tensordot_composite);

// ---- einsum

using Labels = std::vector<int64_t>;

bool is_letter(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'); }
int64_t letter_label(char ch) { return ch >= 'a' && ch <= 'z' ? ch - 'a' : ch - 'A' + 26; }

// A subscript as torch's messages name it: its letter, or "ellipsis dim i".
std::string label_name(int64_t label) {
  if (label >= kEinsumEllipsis) return "ellipsis dim " + std::to_string(label - kEinsumEllipsis);
  return std::string(1, static_cast<char>(label < 26 ? 'a' + label : 'A' + (label - 26)));
}

// The equation as canonical labels (EinsumAttrs), with torch's messages.
EinsumAttrs parse_einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  PF_CHECK(terms.size() == operands.size(), ValueError, "einsum(): ",
           operands.size() > terms.size() ? "more" : "fewer", " operands were provided than specified in the equation");
  auto check_letters = [&](const std::string& letters) {
    for (char ch : letters)
      PF_CHECK(is_letter(ch), ValueError, "einsum(): invalid subscript given at index ", eq.find(ch),
               " in the equation string, subscripts must be in [a-zA-Z]");
  };
  // Each term split at its ellipsis; the ellipsis stands for its operand's dims without a letter.
  std::vector<std::string> before(terms.size()), after(terms.size());
  std::vector<int64_t> ellipsis_dims(terms.size(), -1);  // -1: no ellipsis
  int64_t most = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    const size_t dots = terms[k].find("...");
    before[k] = terms[k].substr(0, dots);
    after[k] = dots == std::string::npos ? "" : terms[k].substr(dots + 3);
    PF_CHECK((before[k] + after[k]).find('.') == std::string::npos, ValueError, "einsum(): found '.' for operand ", k,
             " that is not part of any ellipsis");
    check_letters(before[k] + after[k]);
    const int64_t letters = static_cast<int64_t>(before[k].size() + after[k].size()), rank = operands[k].dim();
    const bool has = dots != std::string::npos;
    PF_CHECK(letters <= rank && (has || letters == rank), ValueError,
             "einsum(): the number of subscripts in the equation (", letters, ") ",
             has ? "is more than" : "does not match", " the number of dimensions (", rank, ") for operand ", k,
             has ? "" : " and no ellipsis was given");
    if (has) ellipsis_dims[k] = rank - letters, most = std::max(most, rank - letters);
  }
  EinsumAttrs a;
  for (size_t k = 0; k < terms.size(); ++k) {
    for (char ch : before[k]) a.labels.push_back(letter_label(ch));
    for (int64_t i = most - std::max<int64_t>(ellipsis_dims[k], 0); i < most && ellipsis_dims[k] >= 0; ++i)
      a.labels.push_back(kEinsumEllipsis + i);
    for (char ch : after[k]) a.labels.push_back(letter_label(ch));
    a.label_counts.push_back(operands[k].dim());
  }
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    const size_t dots = rhs.find("...");
    PF_CHECK(dots == std::string::npos || rhs.find("...", dots + 3) == std::string::npos, ValueError,
             "einsum(): found '.' for output that is not part of any ellipsis");
    const std::string letters = rhs.substr(0, dots) + (dots == std::string::npos ? "" : rhs.substr(dots + 3));
    for (char ch : letters) {
      check_letters(std::string(1, ch));
      PF_CHECK(std::count(letters.begin(), letters.end(), ch) == 1, ValueError, "einsum(): output subscript ", ch,
               " appears more than once in the output");
      PF_CHECK(std::count(a.labels.begin(), a.labels.end(), letter_label(ch)) > 0, ValueError,
               "einsum(): output subscript ", ch, " does not appear in the equation for any input operand");
    }
    for (char ch : rhs.substr(0, dots)) a.output.push_back(letter_label(ch));
    if (dots != std::string::npos) {
      for (int64_t i = 0; i < most; ++i) a.output.push_back(kEinsumEllipsis + i);
      for (char ch : rhs.substr(dots + 3)) a.output.push_back(letter_label(ch));
    }
  } else {  // the ellipsis's dims, then the letters used once, in alphabetical (ASCII) order
    for (int64_t i = 0; i < most; ++i) a.output.push_back(kEinsumEllipsis + i);
    std::string once;
    for (const std::string& letters : terms)
      for (char ch : letters)
        if (is_letter(ch) && std::count(a.labels.begin(), a.labels.end(), letter_label(ch)) == 1) once += ch;
    std::sort(once.begin(), once.end());
    for (char ch : once) a.output.push_back(letter_label(ch));
  }
  return a;
}

// Each operand's labels.
std::vector<Labels> operand_labels(const EinsumAttrs& a) {
  std::vector<Labels> out;
  auto at = a.labels.begin();
  for (int64_t n : a.label_counts) out.emplace_back(at, at + n), at += n;
  return out;
}

// Every label's size: equal within an operand, broadcast (size 1) across them.
std::map<int64_t, int64_t> label_sizes(const std::vector<Tensor>& operands, const std::vector<Labels>& labels) {
  std::map<int64_t, int64_t> sizes;
  for (size_t k = 0; k < operands.size(); ++k) {
    std::map<int64_t, int64_t> own;
    for (size_t j = 0; j < labels[k].size(); ++j) {
      const int64_t l = labels[k][j], n = operands[k].shape()[j];
      auto [it, fresh] = own.emplace(l, n);
      PF_CHECK(fresh || it->second == n, ValueError, "einsum(): subscript ", label_name(l),
               " is repeated for operand but the sizes don't match, ", it->second, " != ", n);
    }
    for (auto [l, n] : own) {
      auto [it, fresh] = sizes.emplace(l, n);
      PF_CHECK(fresh || it->second == 1 || n == 1 || it->second == n, ValueError,
               "einsum(): operands do not broadcast with remapped shapes: subscript ", label_name(l), " has sizes ",
               it->second, " and ", n);
      if (it->second == 1) it->second = n;  // a size-1 dim broadcasts (an empty one does not)
    }
  }
  return sizes;
}

Inferred infer_einsum(OpCall& call) {
  const auto& a = call.attr<EinsumAttrs>();
  const std::vector<Tensor>& operands = call.inputs;
  PF_CHECK(!operands.empty(), ValueError, "einsum(): must provide at least one operand");
  PF_CHECK(a.label_counts.size() == operands.size(), ValueError, "einsum: ", a.label_counts.size(),
           " operands' subscripts for ", operands.size(), " operands");
  int64_t total = 0;
  for (size_t k = 0; k < operands.size(); ++k) {
    PF_CHECK(a.label_counts[k] == operands[k].dim(), ValueError, "einsum: ", a.label_counts[k],
             " subscripts for operand ", k, " of ", operands[k].dim(), " dimensions");
    PF_CHECK(operands[k].dtype() == operands[0].dtype(), TypeError, "einsum(): operands must have the same dtype, got ",
             operands[0].dtype(), " and ", operands[k].dtype(), " (convert one with .to())");
    total += a.label_counts[k];
  }
  PF_CHECK(total == static_cast<int64_t>(a.labels.size()), ValueError, "einsum: ", a.labels.size(),
           " subscripts for operands of ", total, " dimensions");
  const std::vector<Labels> labels = operand_labels(a);
  const std::map<int64_t, int64_t> sizes = label_sizes(operands, labels);
  // The decomposition sums a dim away exactly where a subscript the output lacks is
  // one operand's alone (others meet in a batch_matmul): integers then widen to int64,
  // as torch's einsum ('ij->i' of int32 is int64, 'i,i->' int32).
  bool sums = false;
  for (const auto& [l, n] : sizes) {
    int64_t holders = 0;
    for (const Labels& ls : labels) holders += std::find(ls.begin(), ls.end(), l) != ls.end();
    sums |= holders == 1 && std::find(a.output.begin(), a.output.end(), l) == a.output.end();
  }
  const DType dtype = sums && !is_floating(operands[0].dtype()) ? DType::Int64 : operands[0].dtype();
  Shape shape;
  for (int64_t l : a.output) {
    const auto it = sizes.find(l);
    PF_CHECK(it != sizes.end(), ValueError, "einsum: output subscript ", label_name(l),
             " is no operand's");
    shape.push_back(it->second);
  }
  Inferred inf{current_device(), {}, {{shape, dtype}}, {}};
  for (size_t k = 0; k < operands.size(); ++k) inf.inputs.push_back(InputPlan{});
  return inf;
}

// A label repeated within an operand ("ii") as the diagonal of its two dims:
// both moved last and merged, every (n + 1)-th element, a view where the
// layout allows (no product with an identity: off-diagonal NaN must not leak).
std::pair<Tensor, Labels> diagonals(Tensor t, Labels ls) {
  for (;;) {
    size_t i = 0, j = 0;
    for (size_t p = 0; p < ls.size() && !j; ++p)
      for (size_t q = p + 1; q < ls.size() && !j; ++q)
        if (ls[p] == ls[q]) i = p, j = q;
    if (!j) return {t, ls};
    const int64_t n = t.shape()[i];
    std::vector<int64_t> order;
    Labels kept;
    Shape shape;
    for (size_t d = 0; d < ls.size(); ++d)
      if (d != i && d != j) order.push_back(static_cast<int64_t>(d)), kept.push_back(ls[d]), shape.push_back(t.shape()[d]);
    order.push_back(static_cast<int64_t>(i)), order.push_back(static_cast<int64_t>(j));
    shape.push_back(n * n);
    kept.push_back(ls[i]);
    t = slice(reshape(permute(t, order), shape), static_cast<int64_t>(shape.size()) - 1, 0, n * n, n + 1);
    ls = std::move(kept);
  }
}

// t summed over its labels that `needed` lacks.
std::pair<Tensor, Labels> sum_unneeded(const Tensor& t, const Labels& ls, const std::set<int64_t>& needed) {
  std::vector<int64_t> drop;
  Labels kept;
  for (size_t d = 0; d < ls.size(); ++d)
    if (needed.count(ls[d])) kept.push_back(ls[d]);
    else drop.push_back(static_cast<int64_t>(d));
  if (drop.empty()) return {t, ls};
  return {sum(t, drop, false), kept};
}

// Two operands contracted over the labels both hold and `keep` lacks: one batch_matmul of
// (batch, a's own, contracted) by (batch, contracted, b's own), size-1 dims expanded.
std::pair<Tensor, Labels> contract_pair(const Tensor& a, const Labels& la, const Tensor& b, const Labels& lb,
                                        const std::set<int64_t>& keep) {
  std::map<int64_t, int64_t> sizes;
  for (auto [t, ls] : {std::pair<const Tensor*, const Labels*>{&a, &la}, {&b, &lb}})
    for (size_t d = 0; d < ls->size(); ++d) {
      int64_t& n = sizes.emplace((*ls)[d], 1).first->second;
      if (n == 1) n = t->shape()[d];
    }
  auto has = [](const Labels& ls, int64_t l) { return std::find(ls.begin(), ls.end(), l) != ls.end(); };
  Labels batch, contracted, left, right;
  for (int64_t l : la) {
    if (!has(lb, l)) left.push_back(l);
    else if (keep.count(l)) batch.push_back(l);
    else contracted.push_back(l);
  }
  for (int64_t l : lb)
    if (!has(la, l)) right.push_back(l);
  auto count = [&](const Labels& ls) {
    int64_t n = 1;
    for (int64_t l : ls) n *= sizes[l];
    return n;
  };
  auto arrange = [&](const Tensor& t, const Labels& ls, const std::vector<const Labels*>& groups) {
    std::vector<int64_t> order;
    Shape target;
    for (const Labels* g : groups)
      for (int64_t l : *g) order.push_back(std::find(ls.begin(), ls.end(), l) - ls.begin()), target.push_back(sizes[l]);
    Tensor r = expand(permute(t, order), target);
    return reshape(r, {count(*groups[0]), count(*groups[1]), count(*groups[2])});
  };
  const Tensor product = batch_matmul(arrange(a, la, {&batch, &left, &contracted}),
                                      arrange(b, lb, {&batch, &contracted, &right}));
  Labels out = batch;
  out.insert(out.end(), left.begin(), left.end());
  out.insert(out.end(), right.begin(), right.end());
  Shape shape;
  for (int64_t l : out) shape.push_back(sizes[l]);
  return {reshape(product, shape), out};
}

std::vector<Tensor> einsum_composite(const OpCall& call) {
  const auto& a = call.attr<EinsumAttrs>();
  const std::vector<Labels> labels = operand_labels(a);
  std::vector<std::pair<Tensor, Labels>> items;
  for (size_t k = 0; k < call.inputs.size(); ++k) items.push_back(diagonals(call.inputs[k], labels[k]));
  // The labels that the output or an operand after the k-th holds.
  auto needed_after = [&](size_t k) {
    std::set<int64_t> needed(a.output.begin(), a.output.end());
    for (size_t j = k + 1; j < items.size(); ++j) needed.insert(items[j].second.begin(), items[j].second.end());
    return needed;
  };
  auto [t, ls] = sum_unneeded(items[0].first, items[0].second, needed_after(0));
  for (size_t k = 1; k < items.size(); ++k) {
    std::set<int64_t> needed = needed_after(k);
    needed.insert(ls.begin(), ls.end());
    auto [b, lb] = sum_unneeded(items[k].first, items[k].second, needed);
    std::tie(t, ls) = contract_pair(t, ls, b, lb, needed_after(k));
  }
  std::tie(t, ls) = sum_unneeded(t, ls, needed_after(items.size()));
  std::vector<int64_t> order;
  for (int64_t l : a.output) order.push_back(std::find(ls.begin(), ls.end(), l) - ls.begin());
  return {permute(t, order)};  // a view even in the output's order: '->' and 'ij->ij' give a new tensor, as torch
}

PF_REGISTER_COMPOSITE(einsum, &infer_einsum, &einsum_composite);

// ---- linalg_cross

// (input, other) broadcast together, their dim `attrs.dim` of size 3; the promoted dtype.
Inferred infer_linalg_cross(OpCall& call) {
  const Tensor &input = call.inputs[0], &other = call.inputs[1];
  const Shape shape = broadcast_shapes(input.shape(), other.shape(), "linalg.cross");
  auto& attrs = std::get<DimAttrs>(call.attrs);
  attrs.dim = wrap_dim(attrs.dim, static_cast<int64_t>(shape.size()), "linalg.cross");
  PF_CHECK(shape[attrs.dim] == 3, ValueError, "linalg.cross: dimension ", attrs.dim,
           " does not have size 3 (broadcast shape ", shape, ")");
  const DType dtype = result_type(call.inputs);
  PF_CHECK(dtype != DType::Bool, TypeError, "linalg.cross: not supported for bool tensors");
  return {current_device(), {InputPlan{}, InputPlan{}}, {{shape, dtype}}, {}};
}

// Component i: a[i+1] b[i+2] - a[i+2] b[i+1], indices mod 3.
std::vector<Tensor> linalg_cross_composite(const OpCall& call) {
  const Shape shape = broadcast_shapes(call.inputs[0].shape(), call.inputs[1].shape(), "linalg.cross");
  const DType dtype = result_type(call.inputs);
  const int64_t dim = call.attr<DimAttrs>().dim;
  const Tensor a = expand(to(call.inputs[0], dtype), shape), b = expand(to(call.inputs[1], dtype), shape);
  std::vector<Tensor> components;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t j = (i + 1) % 3, k = (i + 2) % 3;
    components.push_back(sub(mul(select(a, dim, j), select(b, dim, k)), mul(select(a, dim, k), select(b, dim, j))));
  }
  return {stack(components, dim)};
}

PF_REGISTER_COMPOSITE(linalg_cross, &infer_linalg_cross, &linalg_cross_composite);

// ---- solvers and decompositions (kernels: src/cpu/linalg.cpp) ----------------------------

// torch's name of the solver ops in messages ("linalg.inv").
std::string solver_name(ir::OpType op) {
  std::string name = op_name(op);
  name.replace(0, 7, "linalg.");
  if (name.size() > 3 && name.compare(name.size() - 3, 3, "_ex") == 0) name.resize(name.size() - 3);
  return name;
}

// A: (..., m, n) of float32 or float64, as torch's messages say it.
void check_matrices(const Tensor& A, ir::OpType op) {
  const std::string name = solver_name(op);
  PF_CHECK(A.dtype() == DType::Float32 || A.dtype() == DType::Float64, TypeError, name,
           ": Expected a floating point tensor as input (float32 or float64; PyFlame has no complex dtypes). Got ",
           torch_type_name(A.dtype()));
  PF_CHECK(A.dim() >= 2, ValueError, name, ": The input tensor A must have at least 2 dimensions.");
}

// A: (..., n, n).
void check_square(const Tensor& A, ir::OpType op) {
  check_matrices(A, op);
  PF_CHECK(A.size(-1) == A.size(-2), ValueError, solver_name(op), ": A must be batches of square matrices, but they are ",
           A.size(-2), " by ", A.size(-1), " matrices");
}

Shape batch_of(const Tensor& A) { return Shape(A.shape().begin(), A.shape().end() - 2); }

InputPlan packed() {
  InputPlan p;
  p.contiguous = true;
  return p;
}

// (A) -> (a result of A's shape, info): inv_ex, cholesky_ex.
Inferred infer_square_ex(OpCall& call) {
  const Tensor& A = call.inputs[0];
  check_square(A, call.op);
  return {current_device(), {packed()}, {{A.shape(), A.dtype()}, {batch_of(A), DType::Int32}}, {}};
}

Inferred infer_linalg_solve_ex(OpCall& call) {
  const Tensor &A = call.inputs[0], &B = call.inputs[1];
  check_square(A, call.op);
  const std::string name = solver_name(call.op);
  PF_CHECK(B.dtype() == A.dtype(), TypeError, name, ": Expected A and B to have the same dtype, but found A of type ",
           torch_type_name(A.dtype()), " and B of type ", torch_type_name(B.dtype()), " instead");
  PF_CHECK(B.dim() == A.dim() && B.size(-2) == A.size(-1) && batch_of(B) == batch_of(A), ValueError, name,
           ": B must be (..., n, k) with A's batch dims and n = ", A.size(-1), ", got A of shape ", A.shape(),
           " and B of shape ", B.shape());
  return {current_device(), {packed(), packed()}, {{B.shape(), A.dtype()}, {batch_of(A), DType::Int32}}, {}};
}

Inferred infer_linalg_slogdet(OpCall& call) {
  const Tensor& A = call.inputs[0];
  check_square(A, call.op);
  return {current_device(), {packed()}, {{batch_of(A), A.dtype()}, {batch_of(A), A.dtype()}}, {}};
}

Tensor mT(const Tensor& t) { return transpose(t, -2, -1); }

// The n x n identity in `like`'s dtype, on its device.
Tensor identity_like(int64_t n, const Tensor& like) { return to(eye(n, std::nullopt, like.dtype()), like.device()); }

// E_ij = v_j - v_i off the diagonal and 1 on it, for values v (..., n): what eigh's and svd's
// derivatives divide by.
Tensor value_gaps(const Tensor& v) {
  return add(sub(unsqueeze(v, -2), unsqueeze(v, -1)), identity_like(v.size(-1), v));
}

// d inv = -inv^T g inv^T
std::vector<Tensor> d_linalg_inv_ex(const autograd::GradContext& c) {
  const Tensor inv_t = mT(c.output(0));
  return {neg(matmul(matmul(inv_t, c.grad(0)), inv_t))};
}

// X = A^-1 B: gB = A^-T gX, gA = -gB X^T
std::vector<Tensor> d_linalg_solve_ex(const autograd::GradContext& c) {
  const Tensor gB = std::get<0>(linalg_solve_ex(mT(c.input(0)), c.grad(0)));
  return {c.needs[0] ? neg(matmul(gB, mT(c.output(0)))) : Tensor(), gB};
}

// As PyTorch's cholesky_backward: with P = Phi(L^T gL) (the lower triangle, its diagonal
// halved), gA = L^-T P L^-1, symmetrised.
std::vector<Tensor> d_linalg_cholesky_ex(const autograd::GradContext& c) {
  const Tensor& L = c.output(0);
  const Tensor L_inv = std::get<0>(linalg_inv_ex(L));
  const Tensor X = matmul(mT(L), tril(c.grad(0)));
  const Tensor phi = mul(add(tril(X), tril(X, -1)), Scalar(0.5));
  const Tensor gA = matmul(matmul(mT(L_inv), phi), L_inv);
  return {mul(add(gA, mT(gA)), Scalar(0.5))};
}

// d log|det A| = A^-T (sign carries no gradient).
std::vector<Tensor> d_linalg_slogdet(const autograd::GradContext& c) {
  const Tensor inv_t = mT(std::get<0>(linalg_inv_ex(c.input(0))));
  return {mul(unsqueeze(unsqueeze(c.grad(1), -1), -1), inv_t)};
}

Inferred infer_linalg_eigh(OpCall& call) {
  const Tensor& A = call.inputs[0];
  check_square(A, call.op);
  Shape values = batch_of(A);
  values.push_back(A.size(-1));
  return {current_device(), {packed()}, {{values, A.dtype()}, {A.shape(), A.dtype()}, {batch_of(A), DType::Int32}}, {}};
}

Inferred infer_linalg_svd(OpCall& call) {
  const Tensor& A = call.inputs[0];
  check_matrices(A, call.op);
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
  const bool full = call.attr<SvdAttrs>().full_matrices;
  Shape u = batch_of(A), s = batch_of(A), vh = batch_of(A);
  u.insert(u.end(), {m, full ? m : k});
  s.push_back(k);
  vh.insert(vh.end(), {full ? n : k, n});
  return {current_device(),
          {packed()},
          {{u, A.dtype()}, {s, A.dtype()}, {vh, A.dtype()}, {batch_of(A), DType::Int32}},
          {}};
}

// As PyTorch's linalg_eig_backward for a symmetric A: with V^T gV made skew-symmetric, divided by
// E_ij = L_j - L_i off the diagonal and gL on it, gA = V (that) V^T.
std::vector<Tensor> d_linalg_eigh(const autograd::GradContext& c) {
  const Tensor &L = c.output(0), &V = c.output(1);
  const Tensor VtgV = matmul(mT(V), c.grad(1));
  const Tensor skew = mul(sub(VtgV, mT(VtgV)), Scalar(0.5));
  const Tensor inner = add(div(skew, value_gaps(L)), diag_embed(c.grad(0)));
  return {matmul(matmul(V, inner), mT(V))};
}

// As PyTorch's svd_backward (full_matrices: the first min(m, n) singular vectors only).
std::vector<Tensor> d_linalg_svd(const autograd::GradContext& c) {
  const Tensor& S = c.output(1);
  const int64_t k = S.size(-1);
  Tensor U = c.output(0), Vh = c.output(2), gU = c.grad(0), gVh = c.grad(2);
  const Tensor& gS = c.grad(1);
  if (c.attr<SvdAttrs>().full_matrices) {
    const int64_t last = U.dim() - 1;
    U = slice(U, last, 0, k), gU = slice(gU, last, 0, k);
    Vh = slice(Vh, last - 1, 0, k), gVh = slice(gVh, last - 1, 0, k);
  }
  const int64_t m = U.size(-2), n = Vh.size(-1);
  const Tensor V = mT(Vh), gV = mT(gVh);
  auto skew = [](const Tensor& X) { return sub(X, mT(X)); };
  const Tensor UtgU = skew(matmul(mT(U), gU)), VtgV = skew(matmul(mT(V), gV));
  const Tensor S2 = mul(S, S);
  const Tensor E = value_gaps(S2);
  Tensor gA = div(add(mul(UtgU, unsqueeze(S, -2)), mul(unsqueeze(S, -1), VtgV)), E);
  gA = add(gA, diag_embed(gS));
  if (m > n) {  // gA = [U gA + (I - U U^T) gU S^-1] V^T
    const Tensor gUSinv = div(gU, unsqueeze(S, -2));
    gA = add(matmul(U, gA), sub(gUSinv, matmul(U, matmul(mT(U), gUSinv))));
    return {matmul(gA, Vh)};
  }
  if (m < n) {  // gA = U [gA V^T + S^-1 gV^T (I - V V^T)]
    const Tensor gVSinv = div(gV, unsqueeze(S, -2));
    gA = add(matmul(gA, Vh), sub(mT(gVSinv), matmul(matmul(mT(gVSinv), V), Vh)));
    return {matmul(U, gA)};
  }
  return {matmul(U, matmul(gA, Vh))};
}

Inferred infer_linalg_solve_triangular(OpCall& call) {
  const Inferred solve = infer_linalg_solve_ex(call);
  return {solve.device, solve.inputs, {solve.outputs[0]}, {}};  // no info: a zero diagonal gives inf and nan, as torch's
}

// X = A^-1 B: gB = A^-T gX; gA = -gB X^T on A's triangle (without the diagonal when unitriangular).
std::vector<Tensor> d_linalg_solve_triangular(const autograd::GradContext& c) {
  const auto& a = c.attr<TriangularAttrs>();
  const Tensor gB = linalg_solve_triangular(mT(c.input(0)), c.grad(0), !a.upper, a.unitriangular);
  Tensor gA;
  if (c.needs[0]) {
    const Tensor full = neg(matmul(gB, mT(c.output(0))));
    gA = a.upper ? triu(full, a.unitriangular ? 1 : 0) : tril(full, a.unitriangular ? -1 : 0);
  }
  return {gA, gB};
}

Inferred infer_linalg_qr(OpCall& call) {
  const Tensor& A = call.inputs[0];
  check_matrices(A, call.op);
  const int64_t m = A.size(-2), n = A.size(-1), cols = call.attr<SvdAttrs>().full_matrices ? m : std::min(m, n);
  Shape q = batch_of(A), r = batch_of(A);
  q.insert(q.end(), {m, cols});
  r.insert(r.end(), {cols, n});
  return {current_device(), {packed()}, {{q, A.dtype()}, {r, A.dtype()}}, {}};
}

// A = Q R with R square (m >= n, reduced): gA = (gQ + Q N) R^-T, N = M's upper triangle mirrored
// to the lower, M = gR R^T - Q^T gQ (PyTorch's linalg_qr_backward). m < n: A = [X | Y], R = [U | V]:
// X's square case with gQ + Y gV^T, and gY = Q gV.
std::vector<Tensor> d_linalg_qr(const autograd::GradContext& c) {
  const Tensor &Q = c.output(0), &R = c.output(1);
  const int64_t m = Q.size(-2), n = R.size(-1), last = R.dim() - 1;
  PF_CHECK(!(c.attr<SvdAttrs>().full_matrices && m > n), NotSupportedError,
           "linalg.qr: The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
  auto square = [&](const Tensor& gQ, const Tensor& U, const Tensor& gU) {
    const Tensor M = sub(matmul(gU, mT(U)), matmul(mT(Q), gQ));
    const Tensor X = add(gQ, matmul(Q, add(triu(M), mT(triu(M, 1)))));
    return mT(linalg_solve_triangular(U, mT(X), true));
  };
  if (m >= n) return {square(c.grad(0), R, c.grad(1))};
  const Tensor U = slice(R, last, 0, m), V = slice(R, last, m, n);
  const Tensor gU = slice(c.grad(1), last, 0, m), gV = slice(c.grad(1), last, m, n);
  const Tensor gX = square(add(c.grad(0), matmul(matmul(Q, V), mT(gV))), U, gU);
  return {cat({gX, matmul(Q, gV)}, last)};
}

Inferred infer_linalg_lu_factor_ex(OpCall& call) {
  const Tensor& A = call.inputs[0];
  check_matrices(A, call.op);
  Shape pivots = batch_of(A), rows = batch_of(A);
  pivots.push_back(std::min(A.size(-2), A.size(-1)));
  rows.push_back(A.size(-2));
  return {current_device(),
          {packed()},
          {{A.shape(), A.dtype()}, {pivots, DType::Int32}, {rows, DType::Int64}, {batch_of(A), DType::Int32}},
          {}};
}

// As PyTorch's linalg_lu_backward for a square A = P L U: with gL below LU's diagonal and gU on
// and above, gA = P L^-T [tril(L^T gL, -1) + triu(gU U^T)] U^-T.
std::vector<Tensor> d_linalg_lu_factor_ex(const autograd::GradContext& c) {
  const Tensor &LU = c.output(0), &g = c.grad(0);
  const int64_t m = LU.size(-2), n = LU.size(-1);
  PF_CHECK(m == n, NotSupportedError, "linalg.lu_factor: the derivative of the LU factorization of non-square "
           "matrices is not implemented (", m, " x ", n, ")");
  const Tensor L = add(tril(LU, -1), identity_like(n, LU)), U = triu(LU);
  const Tensor inner = add(tril(matmul(mT(L), tril(g, -1)), -1), triu(matmul(triu(g), mT(U))));
  const Tensor left = linalg_solve_triangular(mT(L), inner, true, true);  // L^-T inner
  const Tensor gLU = mT(linalg_solve_triangular(U, mT(left), true));       // (...) U^-T
  // L U = A[rows]: A's row rows[i] gets the gradient of row i.
  const int64_t row_dim = LU.dim() - 2;
  const Tensor index = expand(unsqueeze(c.output(2), -1), gLU.shape());
  return {scatter(zeros_like(gLU), row_dim, index, gLU)};
}

PF_REGISTER_INFER(linalg_lu_factor_ex, &infer_linalg_lu_factor_ex);
PF_REGISTER_DERIVATIVE(linalg_lu_factor_ex, &d_linalg_lu_factor_ex, autograd::kSavesOutputs);
PF_REGISTER_INFER(linalg_qr, &infer_linalg_qr);
PF_REGISTER_DERIVATIVE(linalg_qr, &d_linalg_qr, autograd::kSavesOutputs);
PF_REGISTER_INFER(linalg_solve_triangular, &infer_linalg_solve_triangular);
PF_REGISTER_DERIVATIVE(linalg_solve_triangular, &d_linalg_solve_triangular, autograd::kSavesBoth);
PF_REGISTER_INFER(linalg_eigh, &infer_linalg_eigh);
PF_REGISTER_INFER(linalg_svd, &infer_linalg_svd);
PF_REGISTER_DERIVATIVE(linalg_eigh, &d_linalg_eigh, autograd::kSavesOutputs);
PF_REGISTER_DERIVATIVE(linalg_svd, &d_linalg_svd, autograd::kSavesOutputs);
PF_REGISTER_INFER(linalg_inv_ex, &infer_square_ex);
PF_REGISTER_INFER(linalg_cholesky_ex, &infer_square_ex);
PF_REGISTER_INFER(linalg_solve_ex, &infer_linalg_solve_ex);
PF_REGISTER_INFER(linalg_slogdet, &infer_linalg_slogdet);
PF_REGISTER_DERIVATIVE(linalg_inv_ex, &d_linalg_inv_ex, autograd::kSavesOutputs);
PF_REGISTER_DERIVATIVE(linalg_solve_ex, &d_linalg_solve_ex, autograd::kSavesBoth);
PF_REGISTER_DERIVATIVE(linalg_cholesky_ex, &d_linalg_cholesky_ex, autograd::kSavesOutputs);
PF_REGISTER_DERIVATIVE(linalg_slogdet, &d_linalg_slogdet, autograd::kSavesInputs);

}  // namespace

std::tuple<Tensor, Tensor> linalg_inv_ex(const Tensor& A) {
  std::vector<Tensor> r = apply({ir::OpType::linalg_inv_ex, {A}, NoAttrs{}, {}});
  return {std::move(r[0]), std::move(r[1])};
}

std::tuple<Tensor, Tensor> linalg_solve_ex(const Tensor& A, const Tensor& B) {
  std::vector<Tensor> r = apply({ir::OpType::linalg_solve_ex, {A, B}, NoAttrs{}, {}});
  return {std::move(r[0]), std::move(r[1])};
}

std::tuple<Tensor, Tensor> linalg_cholesky_ex(const Tensor& A) {
  std::vector<Tensor> r = apply({ir::OpType::linalg_cholesky_ex, {A}, NoAttrs{}, {}});
  return {std::move(r[0]), std::move(r[1])};
}

std::tuple<Tensor, Tensor> linalg_slogdet(const Tensor& A) {
  std::vector<Tensor> r = apply({ir::OpType::linalg_slogdet, {A}, NoAttrs{}, {}});
  return {std::move(r[0]), std::move(r[1])};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_lu_factor_ex(const Tensor& A) {
  std::vector<Tensor> r = apply({ir::OpType::linalg_lu_factor_ex, {A}, NoAttrs{}, {}});
  return {std::move(r[0]), std::move(r[1]), std::move(r[2]), std::move(r[3])};
}

std::tuple<Tensor, Tensor> linalg_qr(const Tensor& A, bool complete) {
  std::vector<Tensor> r = apply({ir::OpType::linalg_qr, {A}, SvdAttrs{complete}, {}});
  return {std::move(r[0]), std::move(r[1])};
}

Tensor linalg_solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool unitriangular) {
  return apply_one(ir::OpType::linalg_solve_triangular, {A, B}, TriangularAttrs{upper, unitriangular});
}

std::tuple<Tensor, Tensor, Tensor> linalg_eigh(const Tensor& A) {
  std::vector<Tensor> r = apply({ir::OpType::linalg_eigh, {A}, NoAttrs{}, {}});
  return {std::move(r[0]), std::move(r[1]), std::move(r[2])};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_svd(const Tensor& A, bool full_matrices) {
  std::vector<Tensor> r = apply({ir::OpType::linalg_svd, {A}, SvdAttrs{full_matrices}, {}});
  return {std::move(r[0]), std::move(r[1]), std::move(r[2]), std::move(r[3])};
}

Tensor linalg_vector_norm(const Tensor& x, double ord, const std::vector<int64_t>& dims, bool keepdim,
                          std::optional<DType> dtype) {
  return apply_one(ir::OpType::linalg_vector_norm, {x}, LinalgNormAttrs{ord, kOrdNumber, dims, keepdim, dtype});
}

Tensor linalg_matrix_norm(const Tensor& A, double ord, const std::vector<int64_t>& dims, bool keepdim,
                          std::optional<DType> dtype) {
  return apply_one(ir::OpType::linalg_matrix_norm, {A}, LinalgNormAttrs{ord, kOrdNumber, dims, keepdim, dtype});
}

Tensor linalg_matrix_norm(const Tensor& A, const std::string& ord, const std::vector<int64_t>& dims, bool keepdim,
                          std::optional<DType> dtype) {
  PF_CHECK(ord == "fro" || ord == "nuc", ValueError, "linalg.matrix_norm: Order ", ord, " not supported.");
  LinalgNormAttrs attrs{2, ord == "fro" ? kOrdFro : kOrdNuc, dims, keepdim, dtype};
  return apply_one(ir::OpType::linalg_matrix_norm, {A}, std::move(attrs));
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return apply_one(ir::OpType::logsumexp, {x}, ReduceAttrs{dims, keepdim});
}

Tensor nansum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> dtype) {
  return apply_one(ir::OpType::nansum, {x}, NanReduceAttrs{dims, keepdim, dtype});
}

Tensor nanmean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, std::optional<DType> dtype) {
  return apply_one(ir::OpType::nanmean, {x}, NanReduceAttrs{dims, keepdim, dtype});
}

Tensor count_nonzero(const Tensor& x, const std::vector<int64_t>& dims) {
  return apply_one(ir::OpType::count_nonzero, {x}, ReduceAttrs{dims, false, 0});
}

std::pair<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  std::vector<int64_t> dims;
  if (dim) dims.push_back(*dim);
  std::vector<Tensor> out = apply({ir::OpType::aminmax, {x}, ReduceAttrs{dims, keepdim, 0}, {}});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor kron(const Tensor& input, const Tensor& other) { return apply_one(ir::OpType::kron, {input, other}, NoAttrs{}); }

Tensor tensordot(const Tensor& input, const Tensor& other, std::vector<int64_t> dims_a, std::vector<int64_t> dims_b) {
  return apply_one(ir::OpType::tensordot, {input, other}, TensordotAttrs{std::move(dims_a), std::move(dims_b)});
}

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  PF_CHECK(!operands.empty(), ValueError, "einsum(): must provide at least one operand");
  return apply_one(ir::OpType::einsum, operands, parse_einsum(equation, operands));
}

Tensor linalg_cross(const Tensor& input, const Tensor& other, int64_t dim) {
  return apply_one(ir::OpType::linalg_cross, {input, other}, DimAttrs{dim, std::nullopt});
}

Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, Scalar beta, Scalar alpha) {
  return apply_one(ir::OpType::addmm, {input, mat1, mat2}, AddProductAttrs{beta, alpha});
}

Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, Scalar beta, Scalar alpha) {
  return apply_one(ir::OpType::addmv, {input, mat, vec}, AddProductAttrs{beta, alpha});
}

Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, Scalar beta, Scalar alpha) {
  return apply_one(ir::OpType::addr, {input, vec1, vec2}, AddProductAttrs{beta, alpha});
}

Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta, Scalar alpha) {
  return apply_one(ir::OpType::baddbmm, {input, batch1, batch2}, AddProductAttrs{beta, alpha});
}

Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2, Scalar beta, Scalar alpha) {
  return apply_one(ir::OpType::addbmm, {input, batch1, batch2}, AddProductAttrs{beta, alpha});
}

}  // namespace pyflame
