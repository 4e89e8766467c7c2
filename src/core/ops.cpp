// The op layer of the table's own families (elementwise, where, clamp,
// reductions, matmul, softmax, transpose, copy and fill): each public function
// builds its call and applies it; each family has one infer function
// (validation, broadcasting, dtype promotion, placement, output meta; see
// core/dispatch.h), registered for every op of the family from the table.

#include "pyflame/ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/dispatch.h"
#include "core/matrix_layout.h"
#include "core/op_utils.h"
#include "kernels/functors.h"
#include "pyflame/error.h"

namespace pyflame {

namespace {

// What each operand's dtype counts as in PyTorch's promotion: a Python number
// only contributes its category (its stored width is not meaningful).
DType promotion_dtype(const Tensor& t) {
  if (t.is_wrapped_number() && is_floating(t.dtype())) return default_float();
  return t.dtype();
}

DType elementwise_out_dtype(ir::OpType op, DType compute) {
  switch (op_family(op)) {
    case OpFamily::UNARY_FLOAT:
    case OpFamily::BINARY_FLOAT: return is_floating(compute) ? compute : default_float();
    case OpFamily::COMPARE:
    case OpFamily::UNARY_BOOL: return DType::Bool;
    default: return compute;
  }
}

// Ops that PyTorch does not define for bool tensors although their family
// takes them: their functors say so (kernels::refuses_bool).
bool refuses_bool(ir::OpType op) {
  static const std::array<bool, kNumOps> table = [] {
    std::array<bool, kNumOps> t{};
#define PF_FAMILY_BINARY(name, F) t[static_cast<int>(ir::OpType::name)] = kernels::refuses_bool<kernels::F<int64_t>>();
#define PF_FAMILY_BINARY_INT(name, F) PF_FAMILY_BINARY(name, F)
#include "pyflame/for_each_op.inc"
    return t;
  }();
  return table[static_cast<int>(op)];
}

void check_elementwise_dtype(ir::OpType op, DType compute) {
  const OpFamily family = op_family(op);
  PF_CHECK(!is_floating(compute) || (family != OpFamily::UNARY_INT && family != OpFamily::BINARY_INT), TypeError,
           op_name(op), ": only integer and bool tensors are supported, got ", compute,
           (family == OpFamily::UNARY_INT ? "" : " (a float operand, Python floats included, makes it float)"));
  if (compute != DType::Bool) return;
  PF_CHECK(op != ir::OpType::sub, TypeError,
           "sub: subtracting bool tensors is not supported; use logical operations or convert with .to(int32)");
  PF_CHECK(family != OpFamily::UNARY && !refuses_bool(op), TypeError, op_name(op),
           ": not supported for bool tensors; convert with .to(int32) first");
}

// Constraints of particular ops between their parameters and the input's dtype.
void check_params(ir::OpType op, const ElementwiseAttrs& a, DType dtype) {
  if (op == ir::OpType::hardtanh) {
    const double lo = a.param<ParamName::hardtanh_min_val>().f, hi = a.param<ParamName::hardtanh_max_val>().f;
    PF_CHECK(lo <= hi, ValueError, "hardtanh: min_val (", lo, ") cannot be greater than max_val (", hi, ")");
    PF_CHECK(dtype != DType::UInt8 || (lo >= 0 && hi >= 0), ValueError, "hardtanh: negative limits (min_val ", lo,
             ", max_val ", hi, ") for a uint8 tensor");
  } else if (op == ir::OpType::round) {
    const int64_t decimals = a.param<ParamName::round_decimals>().i;
    PF_CHECK(decimals == 0 || is_floating(dtype), TypeError, "round: decimals=", decimals,
             " needs a floating-point input, got ", dtype);
  }
}

// The largest finite value of a float dtype.
double finite_max(DType dtype) {
  switch (dtype) {
    case DType::Float16: return 65504.0;
    case DType::BFloat16: return 3.3895313892515355e38;
    case DType::Float32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

}  // namespace

std::vector<Scalar> canonical_params(ir::OpType op, const std::vector<Scalar>& given, DType dtype) {
  std::vector<OpParam> params = op_params(op);
  PF_CHECK(given.size() <= params.size(), TypeError, op_name(op), ": takes ", params.size(),
           " parameter(s), got ", given.size());
  ElementwiseAttrs out;
  for (size_t i = 0; i < params.size(); ++i) {
    Scalar v = i < given.size() ? given[i] : params[i].default_value;
    bool integer = params[i].default_value.kind == Scalar::Kind::Int;
    PF_CHECK(!integer || v.kind != Scalar::Kind::Float, TypeError, op_name(op), ": ", params[i].name,
             " must be an integer, got ", v.f);
    out.params.push_back(v);
  }
  if (op == ir::OpType::nan_to_num && is_floating(dtype)) {  // posinf/neginf None (NaN): the largest finite values
    Scalar& posinf = out.params[param_index(ParamName::nan_to_num_posinf)];
    Scalar& neginf = out.params[param_index(ParamName::nan_to_num_neginf)];
    if (std::isnan(posinf.f)) posinf = Scalar(finite_max(dtype));
    if (std::isnan(neginf.f)) neginf = Scalar(-finite_max(dtype));
  }
  check_params(op, out, dtype);
  return out.params;
}

namespace {

bool is_cpu_scalar(const Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }

// An elementwise operand: converted to `compute`, broadcast to `shape` (when
// it differs); a Python number stays on the host, kernels take it by value,
// unless numbers are all the op has (`numbers_stay`: false).
InputPlan operand_plan(const Tensor& t, DType compute, const Shape& shape, bool numbers_stay) {
  InputPlan p{compute};
  if (t.shape() != shape) p.expand = shape;
  p.host_scalar = numbers_stay && t.is_wrapped_number();
  return p;
}

// Elementwise families: promoted compute dtype, broadcast shape.
Inferred infer_elementwise(OpCall& call) {
  const ir::OpType op = call.op;
  const OpFamily family = op_family(op);
  DType compute = result_type(call.inputs);
  check_elementwise_dtype(op, compute);
  const DType out_dtype = elementwise_out_dtype(op, compute);
  if (family == OpFamily::UNARY_FLOAT || family == OpFamily::BINARY_FLOAT) compute = out_dtype;
  Shape shape = call.inputs[0].shape();
  for (size_t i = 1; i < call.inputs.size(); ++i) shape = broadcast_shapes(shape, call.inputs[i].shape(), op_name(op));
  if (call.inputs.size() == 1) {
    auto& attrs = std::get<ElementwiseAttrs>(call.attrs);
    attrs.params = canonical_params(op, attrs.params, call.inputs[0].dtype());
  } else if (op == ir::OpType::pow) {
    const Tensor& b = call.inputs[1];
    if (b.is_wrapped_number() && !is_floating(b.dtype()) && b.item().i < 0)
      PF_CHECK(is_floating(compute), ValueError,
               "pow: integers to negative integer powers are not allowed (use a float exponent or tensor)");
  }
  bool any_tensor = false;
  for (const Tensor& t : call.inputs) any_tensor = any_tensor || !t.is_wrapped_number();
  Inferred inf{current_device(), {}, {{shape, out_dtype}}, {}};
  for (const Tensor& t : call.inputs) inf.inputs.push_back(operand_plan(t, compute, shape, any_tensor));
  // A 0-d CPU tensor beside a tensor of a GPU op is read on the host and handed over by value
  // as a number is (PyTorch's CPU scalars): no copy to the device, no wait.
  if (call.inputs.size() == 2 && !inf.device.is_cpu())
    for (size_t i = 0; i < 2; ++i) {
      const Tensor &t = call.inputs[i], &other = call.inputs[1 - i];
      inf.inputs[i].host_scalar = inf.inputs[i].host_scalar || (is_cpu_scalar(t) && !other.is_wrapped_number() &&
                                                                 !is_cpu_scalar(other));
    }
  return inf;
}

Inferred infer_where(OpCall& call) {
  const Tensor &cond = call.inputs[0], &a = call.inputs[1], &b = call.inputs[2];
  PF_CHECK(cond.dtype() == DType::Bool, TypeError, "where: the condition must be a bool tensor, got ", cond.dtype(),
           " (compare it first, e.g. x > 0)");
  const DType dtype = result_type({a, b});
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Inferred inf{current_device(), {}, {{shape, dtype}}, {}};
  // The kernels take a branch from the host by value, but always read the condition on the device.
  inf.inputs.push_back(operand_plan(cond, DType::Bool, shape, false));
  for (const Tensor& t : {a, b}) inf.inputs.push_back(operand_plan(t, dtype, shape, true));
  return inf;
}

Inferred infer_clamp(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const auto& a = call.attr<ClampAttrs>();
  PF_CHECK(a.min || a.max, ValueError, "clamp: at least one of min and max must be given");
  PF_CHECK(x.dtype() != DType::Bool, TypeError, "clamp: not supported for bool tensors");
  std::vector<Tensor> operands = {x};
  for (const auto& bound : {a.min, a.max})
    if (bound) operands.push_back(Tensor::scalar(*bound));
  const DType dtype = result_type(operands);
  return {current_device(), {{dtype}}, {{x.shape(), dtype}}, {}};
}

Inferred infer_reduce(OpCall& call) {
  const ir::OpType op = call.op;
  const Tensor& x = call.inputs[0];
  auto& a = std::get<ReduceAttrs>(call.attrs);
  a.dims = normalize_dims(a.dims, x.dim(), op);
  DType out_dtype = x.dtype();
  if (op == ir::OpType::sum || op == ir::OpType::prod) {
    if (!is_floating(x.dtype())) out_dtype = DType::Int64;  // as PyTorch: no silent overflow of small ints
  } else if (op == ir::OpType::mean) {
    PF_CHECK(is_floating(x.dtype()), TypeError, "mean: needs a floating-point input, got ", x.dtype(),
             " (convert with .to(float32))");
  }
  const bool empty_reduction =
      x.numel() == 0 && std::any_of(a.dims.begin(), a.dims.end(), [&](int64_t d) { return x.shape()[d] == 0; });
  if (op == ir::OpType::max || op == ir::OpType::min)
    PF_CHECK(!empty_reduction && !(x.dim() > 0 && x.numel() == 0 && a.dims.empty()), ValueError, op_name(op),
             ": cannot reduce over an empty dimension (input shape ", x.shape(), "); there is no identity");
  Inferred inf{current_device(), {{out_dtype}}, {{reduced_shape(x.shape(), a.dims, a.keepdim), out_dtype}}, {}};
  if (x.numel() == 0)  // identities of empty reductions
    inf.constant = op == ir::OpType::prod ? Scalar(int64_t{1}) : op == ir::OpType::mean ? Scalar(NAN) : Scalar(int64_t{0});
  return inf;
}

// The kernel reduces dims[0] of its input (all of it, flattened, when dims is
// empty) into an int64 output that keeps the reduced dim as size 1.
Inferred infer_arg_reduce(OpCall& call) {
  const ir::OpType op = call.op;
  const Tensor& x = call.inputs[0];
  auto& a = std::get<ReduceAttrs>(call.attrs);
  PF_CHECK(x.dtype() != DType::Bool, TypeError, op_name(op), ": not supported for bool tensors");
  PF_CHECK(a.dims.size() <= 1, ValueError, op_name(op), ": reduces one dim or all, got dims ", Shape(a.dims));
  InputPlan in;
  Shape kernel_in = x.shape(), result;
  if (!a.dims.empty()) {
    a.dims[0] = wrap_dim(a.dims[0], x.dim(), op_name(op));
    if (x.dim() == 0) kernel_in = {1}, in.reshape = kernel_in, a.dims[0] = 0;
    result = x.dim() == 0 ? Shape{} : reduced_shape(x.shape(), a.dims, a.keepdim);
  } else {
    kernel_in = {x.numel()};
    in.reshape = kernel_in;
    result = a.keepdim ? Shape(x.dim(), 1) : Shape{};
  }
  const int64_t d = a.dims.empty() ? 0 : a.dims[0];
  PF_CHECK(kernel_in[d] > 0, ValueError, op_name(op), ": cannot reduce over an empty dimension (input shape ",
           x.shape(), ")");
  Shape kept = kernel_in;
  kept[d] = 1;
  return {current_device(), {in}, {{kept, DType::Int64, result}}, {}};
}

Inferred infer_matmul(OpCall& call) {
  const ir::OpType op = call.op;
  const char* name = op_name(op);
  const Tensor &a = call.inputs[0], &b = call.inputs[1];
  PF_CHECK(a.dim() >= 1 && b.dim() >= 1, ValueError, name, ": both operands need at least 1 dimension, got shapes ",
           a.shape(), " and ", b.shape());
  if (op == ir::OpType::batch_matmul)
    PF_CHECK(a.dim() >= 3 && b.dim() >= 3, ValueError,
             "batch_matmul: both operands need batch dimensions (at least 3-D), got shapes ", a.shape(), " and ",
             b.shape(), "; use matmul for 1-D and 2-D operands");
  PF_CHECK(a.dtype() == b.dtype(), TypeError, name, ": operands must have the same dtype, got ", a.dtype(), " and ",
           b.dtype(), " (convert one with .to())");
  PF_CHECK(a.dtype() != DType::Bool, TypeError, name, ": not supported for bool tensors");
  // 1-D operands take part as a row (a) or a column (b), dropped from the result.
  Shape sa2 = a.shape(), sb2 = b.shape();
  if (a.dim() == 1) sa2.insert(sa2.begin(), 1);
  if (b.dim() == 1) sb2.push_back(1);
  const int64_t m = sa2[sa2.size() - 2], k = sa2.back(), k2 = sb2[sb2.size() - 2], n = sb2.back();
  PF_CHECK(k == k2, ValueError, name, ": shapes ", a.shape(), " and ", b.shape(), " are not aligned (", k,
           " columns in the first vs ", k2, " rows in the second)");
  Shape batch;
  try {
    batch = broadcast_shapes(Shape(sa2.begin(), sa2.end() - 2), Shape(sb2.begin(), sb2.end() - 2), name);
  } catch (const ValueError&) {
    throw ValueError(detail::cat(name, ": the batch dimensions of shapes ", a.shape(), " and ", b.shape(),
                                 " cannot be broadcast together"));
  }
  Shape sa = batch, sb = batch, so = batch, result = batch;
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  so.insert(so.end(), {m, n});
  if (a.dim() > 1) result.push_back(m);
  if (b.dim() > 1) result.push_back(n);
  InputPlan pa, pb;
  const Device device = current_device();
  if (a.dim() == 1) pa.reshape = sa2;
  else pa.contiguous = matmul_operand_needs_copy(a, batch, device.type);
  if (b.dim() == 1) pb.reshape = sb2;
  else pb.contiguous = matmul_operand_needs_copy(b, batch, device.type);
  pa.expand = sa, pb.expand = sb;
  Inferred inf{device, {pa, pb}, {{so, a.dtype()}}, {}};
  if (result != so) inf.outputs[0].result = result;
  if (k == 0) inf.constant = Scalar(int64_t{0});
  return inf;
}

// The kernel sees at least one dim (a 0-d input as [1]).
Inferred infer_softmax(OpCall& call) {
  const ir::OpType op = call.op;
  const Tensor& x = call.inputs[0];
  auto& a = std::get<DimAttrs>(call.attrs);
  const DType dtype = a.dtype.value_or(x.dtype());
  PF_CHECK(is_floating(dtype), TypeError, op_name(op), ": needs a floating-point input, got ", dtype,
           " (convert with .to(float32))");
  a.dim = wrap_dim(a.dim, x.dim(), op_name(op));
  InputPlan in{dtype};
  Shape shape = x.shape();
  Inferred inf{current_device(), {}, {{shape, dtype}}, {}};
  if (x.dim() == 0) {
    in.reshape = Shape{1};
    inf.outputs[0] = {{1}, dtype, Shape{}};
  }
  inf.inputs.push_back(in);
  return inf;
}

// Each view op's result, by Tensor's method of the same name (which
// validates): make_<op>, registered for the op from the table below.
using MakeView = Tensor (*)(const Tensor& x, const ViewAttrs& a);
Tensor make_view(const Tensor& x, const ViewAttrs& a) { return x.view(a.shape); }
Tensor make_reshape(const Tensor& x, const ViewAttrs& a) { return x.reshape(a.shape); }
Tensor make_permute(const Tensor& x, const ViewAttrs& a) { return x.permute(a.dims); }
Tensor make_transpose(const Tensor& x, const ViewAttrs& a) {
  PF_CHECK(a.dims.size() == 2, ValueError, "transpose: takes two dims, got ", Shape(a.dims));
  return x.transpose(a.dims[0], a.dims[1]);
}
Tensor make_expand(const Tensor& x, const ViewAttrs& a) { return x.expand(a.shape); }
Tensor make_squeeze(const Tensor& x, const ViewAttrs& a) {
  if (a.dims.empty()) return x.squeeze();
  std::vector<int64_t> dims;  // each listed dim of size 1 goes, as PyTorch's squeeze(tuple)
  for (int64_t d : a.dims) dims.push_back(wrap_dim(d, x.dim(), "squeeze"));
  std::sort(dims.begin(), dims.end());
  PF_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end(), ValueError, "squeeze: dim ",
           *std::adjacent_find(dims.begin(), dims.end()), " appears more than once in ", Shape(a.dims));
  Tensor r = x;
  for (size_t i = dims.size(); i-- > 0;) r = r.squeeze(dims[i]);
  return r;
}
Tensor make_unsqueeze(const Tensor& x, const ViewAttrs& a) { return x.unsqueeze(a.dims.at(0)); }
Tensor make_select(const Tensor& x, const ViewAttrs& a) { return x.select(a.dims.at(0), a.positions.at(0)); }
Tensor make_slice(const Tensor& x, const ViewAttrs& a) {
  return x.slice(a.dims.at(0), a.positions.at(0), a.positions.at(1), a.positions.at(2));
}
Tensor make_unfold(const Tensor& x, const ViewAttrs& a) { return x.unfold(a.dims.at(0), a.positions.at(0), a.positions.at(1)); }

// Views run on the input's device and allocate nothing (but a reshape that
// must copy). A shape given with -1 entries becomes the shape it resolves to.
template <MakeView make> Inferred infer_view(OpCall& call) {
  auto& a = std::get<ViewAttrs>(call.attrs);
  const Tensor v = make(call.inputs[0], a);
  if (!a.shape.empty()) a.shape = v.shape();
  OutputPlan out{v.shape(), v.dtype()};
  out.view = true;
  return {call.inputs[0].device(), {{}}, {out}, {}};
}

template <MakeView make> void view_kernel(OpCall& call) { call.out() = make(call.inputs[0], call.attr<ViewAttrs>()); }

// copy: the source is broadcast, converted and written into the given
// output by the output's device, from whichever device it lives on.
Inferred infer_copy(OpCall& call) {
  PF_CHECK(call.outputs.size() == 1, ValueError, "copy_: needs the tensor to copy into");
  const Tensor &dst = call.out(), &src = call.inputs[0];
  PF_CHECK(broadcast_shapes(src.shape(), dst.shape(), "copy_") == dst.shape(), ValueError, "copy_: a source of shape ",
           src.shape(), " does not broadcast to the destination's shape ", dst.shape());
  InputPlan in;
  in.expand = dst.shape();
  in.transfer = true;
  return {dst.device(), {in}, {{dst.shape(), dst.dtype()}}, {}};
}

Inferred infer_fill(OpCall& call) {
  PF_CHECK(call.outputs.size() == 1, ValueError, "fill_: needs the tensor to fill");
  const Tensor& dst = call.out();
  return {dst.device(), {}, {{dst.shape(), dst.dtype()}}, {}};
}



#define PF_FAMILY_UNARY(name, functor) PF_REGISTER_INFER(name, &infer_elementwise);
#define PF_FAMILY_UNARY_FLOAT(name, functor) PF_REGISTER_INFER(name, &infer_elementwise);
#define PF_FAMILY_UNARY_BOOL(name, functor) PF_REGISTER_INFER(name, &infer_elementwise);
#define PF_FAMILY_BINARY(name, functor) PF_REGISTER_INFER(name, &infer_elementwise);
#define PF_FAMILY_BINARY_FLOAT(name, functor) PF_REGISTER_INFER(name, &infer_elementwise);
#define PF_FAMILY_UNARY_INT(name, functor) PF_REGISTER_INFER(name, &infer_elementwise);
#define PF_FAMILY_BINARY_INT(name, functor) PF_REGISTER_INFER(name, &infer_elementwise);
#define PF_FAMILY_COMPARE(name, functor) PF_REGISTER_INFER(name, &infer_elementwise);
#define PF_FAMILY_WHERE(name, functor) PF_REGISTER_INFER(name, &infer_where);
#define PF_FAMILY_CLAMP(name, functor) PF_REGISTER_INFER(name, &infer_clamp);
#define PF_FAMILY_REDUCE(name, functor) PF_REGISTER_INFER(name, &infer_reduce);
#define PF_FAMILY_ARG_REDUCE(name, functor) PF_REGISTER_INFER(name, &infer_arg_reduce);
#define PF_FAMILY_MATMUL(name, functor) PF_REGISTER_INFER(name, &infer_matmul);
#define PF_FAMILY_SOFTMAX(name, functor) PF_REGISTER_INFER(name, &infer_softmax);
#include "pyflame/for_each_op.inc"
#define PF_FAMILY_VIEW(name, functor)                  \
  PF_REGISTER_INFER(name, &infer_view<&make_##name>);  \
  PF_REGISTER_KERNEL(name, CPU, &view_kernel<&make_##name>); \
  PF_REGISTER_KERNEL(name, ROCm, &view_kernel<&make_##name>);
#include "pyflame/for_each_op.inc"
PF_REGISTER_INFER(copy, &infer_copy);
PF_REGISTER_INFER(fill, &infer_fill);

}  // namespace

std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim, ir::OpType op) {
  std::vector<int64_t> out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op_name(op));
    PF_CHECK(std::find(out.begin(), out.end(), w) == out.end(), ValueError, op_name(op), ": dimension ", w,
             " appears more than once in dims ", Shape(dims));
    out.push_back(w);
  }
  if (ndim == 0) out.clear();  // dim 0 / -1 of a 0-d tensor reduces nothing
  std::sort(out.begin(), out.end());
  return out;
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) out.push_back(shape[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

InputPlan reshaped(Shape shape) {
  InputPlan p;
  p.reshape = std::move(shape);
  p.contiguous = true;
  return p;
}

DType result_type(const std::vector<Tensor>& operands) {
  // PyTorch's rule: dimensioned tensors outrank 0-d tensors, which outrank
  // Python numbers; a lower rank only matters if it is a higher category.
  enum { kDim, kZeroDim, kNumber };
  DType state[3] = {DType::Bool, DType::Bool, DType::Bool};
  bool has[3] = {false, false, false};
  for (const Tensor& t : operands) {
    int rank = t.is_wrapped_number() ? kNumber : t.dim() > 0 ? kDim : kZeroDim;
    DType d = promotion_dtype(t);
    state[rank] = has[rank] ? promote_types(state[rank], d) : d;
    has[rank] = true;
  }
  auto combine = [](bool has_hi, DType hi, bool has_lo, DType lo) -> std::pair<bool, DType> {
    if (!has_hi) return {has_lo, lo};
    if (!has_lo || is_floating(hi)) return {true, hi};
    if (hi == DType::Bool || is_floating(lo)) return {true, promote_types(hi, lo)};
    return {true, hi};
  };
  auto low = combine(has[kZeroDim], state[kZeroDim], has[kNumber], state[kNumber]);
  auto all = combine(has[kDim], state[kDim], low.first, low.second);
  return all.second;
}

std::vector<OpParam> op_params(ir::OpType op) {
  std::vector<OpParam> out;
#define PF_OP_PARAM(op_, name, default_) \
  if (op == ir::OpType::op_) out.push_back({#name, Scalar(default_)});
#include "pyflame/op_params.def"
#undef PF_OP_PARAM
  return out;
}

Tensor unary_op(ir::OpType op, const Tensor& x, const std::vector<Scalar>& params) {
  return apply_one(op, {x}, ElementwiseAttrs{params});
}
Tensor binary_op(ir::OpType op, const Tensor& a, const Tensor& b) { return apply_one(op, {a, b}, ElementwiseAttrs{}); }
Tensor& binary_op_(ir::OpType op, Tensor& a, const Tensor& b) {
  return apply_into(a, op, {a, b}, ElementwiseAttrs{});
}
Tensor& unary_op_(ir::OpType op, Tensor& x, const std::vector<Scalar>& params) {
  return apply_into(x, op, {x}, ElementwiseAttrs{params});
}

#define PF_DEF_UNARY(name) \
  Tensor name(const Tensor& x, const std::vector<Scalar>& params) { return unary_op(ir::OpType::name, x, params); }
#define PF_DEF_BINARY(name)                                                                              \
  Tensor name(const Tensor& a, const Tensor& b) { return binary_op(ir::OpType::name, a, b); }             \
  Tensor name(const Tensor& a, Scalar b) { return binary_op(ir::OpType::name, a, Tensor::scalar(b)); }    \
  Tensor name(Scalar a, const Tensor& b) { return binary_op(ir::OpType::name, Tensor::scalar(a), b); }
#define PF_FAMILY_UNARY(name, functor) PF_DEF_UNARY(name)
#define PF_FAMILY_UNARY_FLOAT(name, functor) PF_DEF_UNARY(name)
#define PF_FAMILY_UNARY_BOOL(name, functor) PF_DEF_UNARY(name)
#define PF_FAMILY_BINARY(name, functor) PF_DEF_BINARY(name)
#define PF_FAMILY_BINARY_FLOAT(name, functor) PF_DEF_BINARY(name)
#define PF_FAMILY_UNARY_INT(name, functor) PF_DEF_UNARY(name)
#define PF_FAMILY_BINARY_INT(name, functor) PF_DEF_BINARY(name)
#define PF_FAMILY_COMPARE(name, functor) PF_DEF_BINARY(name)
#define PF_FAMILY_REDUCE(name, functor)                                          \
  Tensor name(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { \
    return reduce_op(ir::OpType::name, x, dims, keepdim);                        \
  }
#define PF_FAMILY_ARG_REDUCE(name, functor)                                          \
  Tensor name(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {           \
    return apply_one(ir::OpType::name, {x}, ReduceAttrs{dim ? std::vector<int64_t>{*dim} : std::vector<int64_t>{}, keepdim}); \
  }
#define PF_FAMILY_MATMUL(name, functor) \
  Tensor name(const Tensor& a, const Tensor& b) { return apply_one(ir::OpType::name, {a, b}, NoAttrs{}); }
#define PF_FAMILY_SOFTMAX(name, functor)                                                                 \
  Tensor name(const Tensor& x, int64_t dim, std::optional<DType> dtype) {                               \
    return apply_one(ir::OpType::name, {x}, DimAttrs{dim, dtype});                                      \
  }
#include "pyflame/for_each_op.inc"
#undef PF_DEF_UNARY
#undef PF_DEF_BINARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  PF_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return unary_op(ir::OpType::gelu, x, {Scalar(int64_t{approximate == "tanh"})});
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return apply_one(ir::OpType::where, {cond, a, b}, NoAttrs{});
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return apply_one(ir::OpType::clamp, {x}, ClampAttrs{min, max});
}

// Tensor bounds: numbers among them stay the clamp op's attributes; a tensor
// bound replaces x where x lies beyond it or where it is NaN (which PyTorch's
// clamp propagates), so the gradient reaches the bound there and x elsewhere.
namespace {
std::optional<Scalar> number_of(const std::optional<Tensor>& bound) {
  if (bound && bound->is_wrapped_number()) return bound->item();
  return std::nullopt;
}
bool is_tensor(const std::optional<Tensor>& bound) { return bound && !bound->is_wrapped_number(); }
Tensor beyond(const Tensor& x, const Tensor& bound, bool lower) {
  return logical_or(lower ? lt(x, bound) : gt(x, bound), isnan(bound));
}
void check_clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  PF_CHECK(min || max, ValueError, "clamp: at least one of min and max must be given");
  PF_CHECK(x.dtype() != DType::Bool, TypeError, "clamp: not supported for bool tensors");
}
}  // namespace

Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  check_clamp(x, min, max);
  if (!is_tensor(min) && !is_tensor(max)) return clamp(x, number_of(min), number_of(max));
  Tensor r = x;
  if (min) r = is_tensor(min) ? where(beyond(r, *min, true), *min, r) : clamp(r, number_of(min), std::nullopt);
  if (max) r = is_tensor(max) ? where(beyond(r, *max, false), *max, r) : clamp(r, std::nullopt, number_of(max));
  return r;
}

Tensor& clamp_(Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max) {
  check_clamp(x, min, max);
  if (!is_tensor(min) && !is_tensor(max))
    return apply_into(x, ir::OpType::clamp, {x}, ClampAttrs{number_of(min), number_of(max)});
  for (const auto& [bound, lower] : {std::pair{min, true}, std::pair{max, false}}) {
    if (!bound) continue;
    if (is_tensor(bound))
      apply_into(x, ir::OpType::where, {beyond(x, *bound, lower), *bound, x}, NoAttrs{});
    else
      apply_into(x, ir::OpType::clamp, {x}, ClampAttrs{lower ? number_of(bound) : std::nullopt,
                                                       lower ? std::nullopt : number_of(bound)});
  }
  return x;
}

Tensor reduce_op(ir::OpType op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return apply_one(op, {x}, ReduceAttrs{dims, keepdim});
}

Tensor view(const Tensor& x, const Shape& shape) { return apply_one(ir::OpType::view, {x}, ViewAttrs{{}, shape, {}}); }
Tensor reshape(const Tensor& x, const Shape& shape) {
  return apply_one(ir::OpType::reshape, {x}, ViewAttrs{{}, shape, {}});
}
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  return apply_one(ir::OpType::permute, {x}, ViewAttrs{dims, {}, {}});
}
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  return apply_one(ir::OpType::transpose, {x}, ViewAttrs{{dim0, dim1}, {}, {}});
}
Tensor expand(const Tensor& x, const Shape& shape) {
  return apply_one(ir::OpType::expand, {x}, ViewAttrs{{}, shape, {}});
}
Tensor squeeze(const Tensor& x, const std::vector<int64_t>& dims) {
  return apply_one(ir::OpType::squeeze, {x}, ViewAttrs{dims, {}, {}});
}
Tensor unsqueeze(const Tensor& x, int64_t dim) { return apply_one(ir::OpType::unsqueeze, {x}, ViewAttrs{{dim}, {}, {}}); }
Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  return apply_one(ir::OpType::select, {x}, ViewAttrs{{dim}, {}, {index}});
}
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t stop, int64_t step) {
  return apply_one(ir::OpType::slice, {x}, ViewAttrs{{dim}, {}, {start, stop, step}});
}

Tensor unfold(const Tensor& x, int64_t dim, int64_t size, int64_t step) {
  return apply_one(ir::OpType::unfold, {x}, ViewAttrs{{dim}, {}, {size, step}});
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = wrap_dim(start_dim, x.dim(), "flatten");
  end_dim = wrap_dim(end_dim, x.dim(), "flatten");
  PF_CHECK(start_dim <= end_dim, ValueError, "flatten: start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape s(x.shape().begin(), x.shape().begin() + start_dim);
  s.push_back(shape_numel(Shape(x.shape().begin() + start_dim, x.shape().begin() + end_dim + 1)));
  s.insert(s.end(), x.shape().begin() + end_dim + 1, x.shape().end());
  return reshape(x, s);
}

Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking) {
  return apply_into(dst, ir::OpType::copy, {src}, CopyAttrs{non_blocking});
}
Tensor& fill_(Tensor& dst, Scalar value) { return apply_into(dst, ir::OpType::fill, {}, FillAttrs{value}); }

// Copies keep their source's placement (placing is the caller's act: Tensor.to(device) in Python).
Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device()).set_placed(x.is_placed());
  return copy_(out, x);
}

Tensor to(const Tensor& x, Device device, bool non_blocking) {
  if (x.device() == device) return x;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device).set_placed(x.is_placed());
  return copy_(out, x, non_blocking);
}

Tensor clone(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device()).set_placed(x.is_placed());
  return copy_(out, x);
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

}  // namespace pyflame
