// The op layer of include/pyflame/linalg_ops.h: the norms of torch.linalg,
// logsumexp, nansum and nanmean as composite ops. Each infer holds every check
// of its op, with torch's messages (which name the norms as linalg.vector_norm); each
// decomposition is the table's elementwise ops and reductions (the vector
// norm's in float32 for a half-precision input, as PyTorch's).

#include "pyflame/linalg_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

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

PF_REGISTER_INFER(linalg_vector_norm, &infer_linalg_vector_norm);
PF_REGISTER_COMPOSITE(linalg_vector_norm, &linalg_vector_norm_composite);

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
  PF_CHECK(!(a.ord_name == kOrdNuc || (numeric && std::abs(a.ord) == 2)), NotSupportedError, name, ": ord=",
           numeric ? ord_text(a.ord) : "'nuc'",
           " needs the singular values, which PyFlame does not compute; convert with .numpy() and use "
           "numpy.linalg.norm");
  PF_CHECK(!numeric || std::abs(a.ord) == 1 || std::isinf(a.ord), ValueError, name, ": Order ", ord_text(a.ord),
           " not supported.");
  if (numeric) {
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
  // 1/-1: the largest/smallest column sum of |A| (summed over the rows); inf/-inf: the same over rows.
  const bool by_columns = std::abs(a.ord) == 1;
  const Tensor sums = sum(abs(A), {by_columns ? rows : cols}, true);
  const std::vector<int64_t> across = {by_columns ? cols : rows};
  const Tensor out = a.ord > 0 ? max(sums, across, true) : min(sums, across, true);
  return {a.keepdim ? out : squeeze(out, a.dims)};
}

PF_REGISTER_INFER(linalg_matrix_norm, &infer_linalg_matrix_norm);
PF_REGISTER_COMPOSITE(linalg_matrix_norm, &linalg_matrix_norm_composite);

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

PF_REGISTER_INFER(logsumexp, &infer_logsumexp);
PF_REGISTER_COMPOSITE(logsumexp, &logsumexp_composite);

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

PF_REGISTER_INFER(nansum, &infer_nan_reduce);
PF_REGISTER_INFER(nanmean, &infer_nan_reduce);
PF_REGISTER_COMPOSITE(nansum, &nansum_composite);
PF_REGISTER_COMPOSITE(nanmean, &nanmean_composite);

}  // namespace

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

}  // namespace pyflame
