// The op layer: every public op validates here (shapes, broadcasting, dtype
// promotion, device placement) and then calls the kernel registered for the
// current device, which therefore never sees a malformed call. A failed check
// raises before anything is allocated or written, so no tensor is touched.

#include "pyflame/ops.h"

#include <algorithm>

#include "core/backend.h"
#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"

namespace pyflame {

namespace {

// Moves, converts and broadcasts one operand for an elementwise kernel.
Tensor prepare(const Tensor& t, DType dtype, const Shape& shape, Device dev, ir::OpType op) {
  return on_device(t, dev, op).to(dtype).expand(shape);
}

// What each operand's dtype counts as in PyTorch's promotion: a Python number
// only contributes its category (its stored width is not meaningful).
DType promotion_dtype(const Tensor& t) {
  if (t.is_wrapped_number() && is_floating(t.dtype())) return default_float();
  return t.dtype();
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

// Whether writing `out` while reading `in` elementwise is safe: no shared
// storage, or exactly the same elements in the same order.
bool safe_alias(const Tensor& out, const Tensor& in) {
  if (!out.same_storage(in)) return true;
  return in.offset() == out.offset() && in.shape() == out.shape() && in.strides() == out.strides() &&
         in.dtype() == out.dtype();
}

DType elementwise_out_dtype(ir::OpType op, DType compute) {
  switch (op_family(op)) {
    case OpFamily::UNARY_FLOAT:
    case OpFamily::BINARY_FLOAT: return is_floating(compute) ? compute : default_float();
    case OpFamily::COMPARE: return DType::Bool;
    default: return compute;
  }
}

void check_elementwise_dtype(ir::OpType op, DType compute) {
  if (compute != DType::Bool) return;
  PF_CHECK(op != ir::OpType::sub, TypeError,
           "sub: subtracting bool tensors is not supported; use logical operations or convert with .to(int32)");
  PF_CHECK(op_family(op) != OpFamily::UNARY, TypeError, op_name(op),
           ": not supported for bool tensors; convert with .to(int32) first");
}

// Runs an elementwise op into `out` (allocated when undefined).
Tensor elementwise(ir::OpType op, const std::vector<Tensor>& operands, Tensor out, const OpAttrs& attrs = {}) {
  Device dev = current_device();
  DType compute = result_type(operands);
  check_elementwise_dtype(op, compute);
  DType out_dtype = elementwise_out_dtype(op, compute);
  // Float-only ops compute in the float type they return.
  if (op_family(op) == OpFamily::UNARY_FLOAT || op_family(op) == OpFamily::BINARY_FLOAT) compute = out_dtype;
  Shape shape = operands[0].shape();
  for (size_t i = 1; i < operands.size(); ++i) shape = broadcast_shapes(shape, operands[i].shape(), op_name(op));

  OpCall call{op, {}, {}, attrs};
  for (const Tensor& t : operands) call.inputs.push_back(prepare(t, compute, shape, dev, op));
  if (out.defined()) {
    PF_CHECK(out.shape() == shape, ValueError, op_name(op), "_: the result's broadcast shape ", shape,
             " does not match the in-place tensor's shape ", out.shape());
    PF_CHECK(can_cast(out_dtype, out.dtype()), TypeError, op_name(op), "_: the result type ", out_dtype,
             " cannot be stored in a tensor of type ", out.dtype());
    bool direct = out.dtype() == out_dtype && out.device() == dev;
    for (const Tensor& in : call.inputs) direct = direct && safe_alias(out, in);
    if (!direct) {
      out.copy_(elementwise(op, operands, Tensor(), attrs));
      return out;
    }
    call.out = out;
  } else {
    call.out = Tensor::empty(shape, out_dtype, dev);
  }
  run_kernel(call, dev);
  return call.out;
}

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

}  // namespace

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

Tensor unary_op(ir::OpType op, const Tensor& x) { return elementwise(op, {x}, Tensor()); }
Tensor binary_op(ir::OpType op, const Tensor& a, const Tensor& b) {
  if (op == ir::OpType::pow && b.is_wrapped_number() && !is_floating(b.dtype()) && b.item().i < 0)
    PF_CHECK(is_floating(result_type({a, b})), ValueError,
             "pow: integers to negative integer powers are not allowed (use a float exponent or tensor)");
  return elementwise(op, {a, b}, Tensor());
}

Tensor& binary_op_(ir::OpType op, Tensor& a, const Tensor& b) {
  elementwise(op, {a, b}, a);
  return a;
}

Tensor& unary_op_(ir::OpType op, Tensor& x) {
  elementwise(op, {x}, x);
  return x;
}

#define PF_DEF_UNARY(name) \
  Tensor name(const Tensor& x) { return unary_op(ir::OpType::name, x); }
#define PF_DEF_BINARY(name)                                                                              \
  Tensor name(const Tensor& a, const Tensor& b) { return binary_op(ir::OpType::name, a, b); }             \
  Tensor name(const Tensor& a, Scalar b) { return binary_op(ir::OpType::name, a, Tensor::scalar(b)); }    \
  Tensor name(Scalar a, const Tensor& b) { return binary_op(ir::OpType::name, Tensor::scalar(a), b); }
#define PF_FAMILY_UNARY(name, functor) PF_DEF_UNARY(name)
#define PF_FAMILY_UNARY_FLOAT(name, functor) PF_DEF_UNARY(name)
#define PF_FAMILY_BINARY(name, functor) PF_DEF_BINARY(name)
#define PF_FAMILY_BINARY_FLOAT(name, functor) PF_DEF_BINARY(name)
#define PF_FAMILY_COMPARE(name, functor) PF_DEF_BINARY(name)
#define PF_FAMILY_REDUCE(name, functor)                                          \
  Tensor name(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) { \
    return reduce_op(ir::OpType::name, x, dims, keepdim);                        \
  }
#include "pyflame/for_each_op.inc"
#undef PF_DEF_UNARY
#undef PF_DEF_BINARY

Tensor gelu(const Tensor& x, const std::string& approximate) {
  PF_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  OpAttrs attrs;
  attrs.approximate_tanh = approximate == "tanh";
  return elementwise(ir::OpType::gelu, {x}, Tensor(), attrs);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  PF_CHECK(cond.dtype() == DType::Bool, TypeError, "where: the condition must be a bool tensor, got ",
           cond.dtype(), " (compare it first, e.g. x > 0)");
  Device dev = current_device();
  DType dtype = result_type({a, b});
  Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  OpCall call{ir::OpType::where,
              {prepare(cond, DType::Bool, shape, dev, ir::OpType::where),
               prepare(a, dtype, shape, dev, ir::OpType::where), prepare(b, dtype, shape, dev, ir::OpType::where)},
              Tensor::empty(shape, dtype, dev),
              {}};
  run_kernel(call, dev);
  return call.out;
}

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  PF_CHECK(min || max, ValueError, "clamp: at least one of min and max must be given");
  PF_CHECK(x.dtype() != DType::Bool, TypeError, "clamp: not supported for bool tensors");
  std::vector<Tensor> operands = {x};
  if (min) operands.push_back(Tensor::scalar(*min));
  if (max) operands.push_back(Tensor::scalar(*max));
  DType dtype = result_type(operands);
  OpAttrs attrs;
  attrs.lo = min;
  attrs.hi = max;
  Device dev = current_device();
  OpCall call{ir::OpType::clamp, {on_device(x, dev, ir::OpType::clamp).to(dtype)},
              Tensor::empty(x.shape(), dtype, dev), attrs};
  run_kernel(call, dev);
  return call.out;
}

Tensor reduce_op(ir::OpType op, const Tensor& x, const std::vector<int64_t>& dims_in, bool keepdim) {
  std::vector<int64_t> dims = normalize_dims(dims_in, x.dim(), op);
  DType out_dtype = x.dtype();
  if (op == ir::OpType::sum || op == ir::OpType::prod) {
    if (!is_floating(x.dtype())) out_dtype = DType::Int64;  // as PyTorch: no silent overflow of small ints
  } else if (op == ir::OpType::mean) {
    PF_CHECK(is_floating(x.dtype()), TypeError, "mean: needs a floating-point input, got ", x.dtype(),
             " (convert with .to(float32))");
  }
  if (op == ir::OpType::max || op == ir::OpType::min) {
    bool empty_reduction = x.numel() == 0 && std::any_of(dims.begin(), dims.end(), [&](int64_t d) {
      return x.shape()[d] == 0;
    });
    PF_CHECK(!empty_reduction && !(x.dim() > 0 && x.numel() == 0 && dims.empty()), ValueError, op_name(op),
             ": cannot reduce over an empty dimension (input shape ", x.shape(), "); there is no identity");
  }
  Device dev = current_device();
  OpCall call{op, {on_device(x, dev, op).to(out_dtype)}, Tensor::empty(reduced_shape(x.shape(), dims, keepdim), out_dtype, dev), {}};
  call.attrs.dims = dims;
  call.attrs.keepdim = keepdim;
  if (call.out.numel() > 0 && x.numel() == 0) {  // identities of empty reductions
    call.out.fill_(op == ir::OpType::prod ? Scalar(int64_t{1}) : op == ir::OpType::mean ? Scalar(NAN) : Scalar(int64_t{0}));
    return call.out;
  }
  run_kernel(call, dev);
  return call.out;
}

namespace {
Tensor arg_reduce(ir::OpType op, const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  PF_CHECK(x.dtype() != DType::Bool, TypeError, op_name(op), ": not supported for bool tensors");
  Device dev = current_device();
  Tensor in = on_device(x, dev, op);
  Shape out_shape;
  int64_t d;
  if (dim) {
    d = wrap_dim(*dim, x.dim(), op_name(op));
    if (x.dim() == 0) in = in.reshape({1}), d = 0;
    out_shape = x.dim() == 0 ? Shape{} : reduced_shape(x.shape(), {d}, keepdim);
  } else {
    out_shape = keepdim ? Shape(x.dim(), 1) : Shape{};
    in = in.reshape({-1});
    d = 0;
  }
  PF_CHECK(in.shape()[d] > 0, ValueError, op_name(op), ": cannot reduce over an empty dimension (input shape ",
           x.shape(), ")");
  OpCall call{op, {in}, Tensor::empty(out_shape, DType::Int64, dev), {}};
  call.attrs.dim = d;
  call.attrs.dims = {d};
  // The kernel sees the reduced dim kept (size 1), whatever keepdim says.
  Shape kept = in.shape();
  kept[d] = 1;
  call.out = call.out.view(kept);
  run_kernel(call, dev);
  return call.out.view(out_shape);
}
}  // namespace

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce(ir::OpType::argmax, x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce(ir::OpType::argmin, x, dim, keepdim);
}

namespace {
Tensor matmul_impl(ir::OpType op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  PF_CHECK(a.dim() >= 1 && b.dim() >= 1, ValueError, name, ": both operands need at least 1 dimension, got shapes ",
           a.shape(), " and ", b.shape());
  PF_CHECK(a.dtype() == b.dtype(), TypeError, name, ": operands must have the same dtype, got ", a.dtype(), " and ",
           b.dtype(), " (convert one with .to())");
  PF_CHECK(a.dtype() != DType::Bool, TypeError, name, ": not supported for bool tensors");
  Tensor a2 = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
  int64_t m = a2.size(-2), k = a2.size(-1), k2 = b2.size(-2), n = b2.size(-1);
  PF_CHECK(k == k2, ValueError, name, ": shapes ", a.shape(), " and ", b.shape(), " are not aligned (", k,
           " columns in the first vs ", k2, " rows in the second)");
  Shape batch;
  try {
    batch = broadcast_shapes(Shape(a2.shape().begin(), a2.shape().end() - 2),
                             Shape(b2.shape().begin(), b2.shape().end() - 2), name);
  } catch (const ValueError&) {
    throw ValueError(detail::cat(name, ": the batch dimensions of shapes ", a.shape(), " and ", b.shape(),
                                 " cannot be broadcast together"));
  }
  Device dev = current_device();
  Shape sa = batch, sb = batch, so = batch;
  sa.insert(sa.end(), {m, k});
  sb.insert(sb.end(), {k, n});
  so.insert(so.end(), {m, n});
  OpCall call{op, {on_device(a2, dev, op).expand(sa), on_device(b2, dev, op).expand(sb)},
              Tensor::empty(so, a.dtype(), dev), {}};
  if (k == 0) call.out.fill_(Scalar(int64_t{0}));
  else run_kernel(call, dev);
  Shape final_shape = batch;
  if (a.dim() > 1) final_shape.push_back(m);
  if (b.dim() > 1) final_shape.push_back(n);
  return call.out.view(final_shape);
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul_impl(ir::OpType::matmul, a, b); }

Tensor batch_matmul(const Tensor& a, const Tensor& b) {
  PF_CHECK(a.dim() >= 3 && b.dim() >= 3, ValueError,
           "batch_matmul: both operands need batch dimensions (at least 3-D), got shapes ", a.shape(), " and ",
           b.shape(), "; use matmul for 1-D and 2-D operands");
  return matmul_impl(ir::OpType::batch_matmul, a, b);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) { return x.transpose(dim0, dim1); }

namespace {
Tensor softmax_impl(ir::OpType op, const Tensor& x, int64_t dim) {
  PF_CHECK(is_floating(x.dtype()), TypeError, op_name(op), ": needs a floating-point input, got ", x.dtype(),
           " (convert with .to(float32))");
  int64_t d = wrap_dim(dim, x.dim(), op_name(op));
  Device dev = current_device();
  Tensor in = on_device(x, dev, op);
  if (x.dim() == 0) in = in.reshape({1});
  OpCall call{op, {in}, Tensor::empty(in.shape(), x.dtype(), dev), {}};
  call.attrs.dim = d;
  run_kernel(call, dev);
  return call.out.view(x.shape());
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(ir::OpType::softmax, x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(ir::OpType::log_softmax, x, dim); }

}  // namespace pyflame
