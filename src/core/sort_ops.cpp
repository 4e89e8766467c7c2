// The op layer of include/pyflame/sort_ops.h. Kernels get:
//   sort     the input contiguous (a 0-d input as 1 element), viewed as
//            [outer, n, inner] around attrs.dim; outputs values (the input's
//            dtype) and int64 indices of the same shape
//   nonzero  the inclusive count of nonzero entries, int64 and contiguous in
//            the input's shape; output (attrs.count, ndim) int64
// topk, kthvalue and median are composites over sort (the stable ascending or
// descending order), so their indices break ties by the lower index and their
// values' gradient is sort's. python/pyflame/_sorting.py raises PyTorch's
// exception classes for a k out of range before calling them.

#include "pyflame/sort_ops.h"

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/nn_ops.h"
#include "pyflame/ops.h"
#include "pyflame/shape_ops.h"

namespace pyflame {

namespace {

Inferred infer_sort(OpCall& call) {
  const Tensor& input = call.inputs[0];
  auto& a = std::get<SortAttrs>(call.attrs);
  a.dim = wrap_dim(a.dim, input.dim(), "sort");
  InputPlan in;
  in.contiguous = true;
  Inferred inf{current_device(), {}, {{input.shape(), input.dtype()}, {input.shape(), DType::Int64}}, {}};
  if (input.dim() == 0) {
    in.reshape = Shape{1};
    inf.outputs[0] = {{1}, input.dtype(), Shape{}};
    inf.outputs[1] = {{1}, DType::Int64, Shape{}};
  }
  inf.inputs.push_back(in);
  return inf;
}

Inferred infer_nonzero(OpCall& call) {
  const Tensor& counts = call.inputs[0];
  const int64_t n = call.attr<SortAttrs>().count;
  PF_CHECK(counts.dtype() == DType::Int64, TypeError, "nonzero: expected the int64 running count of nonzero "
           "entries (pf.nonzero makes it), got ", counts.dtype());
  PF_CHECK(n >= 0 && n <= counts.numel(), ValueError, "nonzero: a count of ", n, " nonzero entries in ",
           counts.numel(), " elements");
  InputPlan in;
  in.contiguous = true;
  return {current_device(), {in}, {{{n, counts.dim()}, DType::Int64}}, {}};
}

PF_REGISTER_INFER(sort, &infer_sort);
PF_REGISTER_INFER(nonzero, &infer_nonzero);

// topk, kthvalue, median: (values, int64 indices) of the input's shape with
// dim k long (topk) or gone (kthvalue and median without keepdim); a 0-d input
// counts as one element along dim 0.
Inferred infer_select(OpCall& call) {
  const Tensor& input = call.inputs[0];
  const char* name = op_name(call.op);
  auto& a = std::get<SelectAttrs>(call.attrs);
  PF_CHECK(input.dtype() != DType::Bool, TypeError, name, ": bool tensors are not supported (as in PyTorch)");
  a.dim = wrap_dim(a.dim, input.dim(), name);
  const int64_t n = input.dim() ? input.shape()[a.dim] : 1;
  Shape shape = input.shape();
  if (call.op == ir::OpType::topk) {
    PF_CHECK(a.k >= 0 && a.k <= n, IndexError, "topk: selected index k=", a.k, " out of range for dimension ", a.dim,
             " of size ", n);
    if (input.dim()) shape[a.dim] = a.k;
  } else {
    if (call.op == ir::OpType::kthvalue)
      PF_CHECK(a.k >= 1 && a.k <= n, IndexError, "kthvalue(): selected number k=", a.k,
               " out of range for dimension ", a.dim, " of size ", n);
    else
      PF_CHECK(n > 0, IndexError, "median(): Expected reduction dim ", a.dim, " to have non-zero size.");
    if (input.dim() && !a.keepdim) shape.erase(shape.begin() + a.dim);
  }
  return {current_device(), {InputPlan{}}, {{shape, input.dtype()}, {shape, DType::Int64}}, {}};
}

std::vector<Tensor> topk_composite(const OpCall& call) {
  const auto& a = call.attr<SelectAttrs>();
  auto [values, indices] = sort(call.inputs[0], a.dim, a.largest, true);
  if (call.inputs[0].dim() == 0) return {values, indices};
  return {contiguous(slice(values, a.dim, 0, a.k)), contiguous(slice(indices, a.dim, 0, a.k))};
}

std::vector<Tensor> kthvalue_composite(const OpCall& call) {
  const auto& a = call.attr<SelectAttrs>();
  auto [values, indices] = sort(call.inputs[0], a.dim, false, true);
  if (call.inputs[0].dim() == 0) return {values, indices};
  Tensor v = slice(values, a.dim, a.k - 1, a.k), i = slice(indices, a.dim, a.k - 1, a.k);
  if (!a.keepdim) v = squeeze(v, {a.dim}), i = squeeze(i, {a.dim});
  return {contiguous(v), contiguous(i)};
}

std::vector<Tensor> median_composite(const OpCall& call) {
  const auto& a = call.attr<SelectAttrs>();
  const Tensor& input = call.inputs[0];
  auto [values, indices] = sort(input, a.dim, false, true);
  if (input.dim() == 0) return {values, indices};
  const int64_t n = input.shape()[a.dim];
  Tensor position = full_like(slice(indices, a.dim, 0, 1), Scalar((n - 1) / 2));
  if (is_floating(input.dtype())) {
    // NaNs sort last, in index order: the first of them is at n - (their count).
    Tensor nans = sum(isnan(values), {a.dim}, true);
    position = where(gt(nans, Scalar(int64_t{0})), sub(Scalar(n), nans), position);
  }
  Tensor v = gather(values, a.dim, position), i = gather(indices, a.dim, position);
  if (!a.keepdim) v = squeeze(v, {a.dim}), i = squeeze(i, {a.dim});
  return {v, i};
}

PF_REGISTER_COMPOSITE(topk, &infer_select, &topk_composite);
PF_REGISTER_COMPOSITE(kthvalue, &infer_select, &kthvalue_composite);
PF_REGISTER_COMPOSITE(median, &infer_select, &median_composite);

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& input, int64_t dim, bool descending, bool stable) {
  SortAttrs a;
  a.dim = dim, a.descending = descending, a.stable = stable;
  std::vector<Tensor> out = apply({ir::OpType::sort, {input}, std::move(a), {}});
  return {std::move(out[0]), std::move(out[1])};
}

std::pair<Tensor, Tensor> topk(const Tensor& input, int64_t k, int64_t dim, bool largest) {
  std::vector<Tensor> out = apply({ir::OpType::topk, {input}, SelectAttrs{k, dim, largest, false}, {}});
  return {std::move(out[0]), std::move(out[1])};
}

std::pair<Tensor, Tensor> kthvalue(const Tensor& input, int64_t k, int64_t dim, bool keepdim) {
  std::vector<Tensor> out = apply({ir::OpType::kthvalue, {input}, SelectAttrs{k, dim, false, keepdim}, {}});
  return {std::move(out[0]), std::move(out[1])};
}

std::pair<Tensor, Tensor> median(const Tensor& input, int64_t dim, bool keepdim) {
  std::vector<Tensor> out = apply({ir::OpType::median, {input}, SelectAttrs{0, dim, false, keepdim}, {}});
  return {std::move(out[0]), std::move(out[1])};
}

Tensor nonzero(const Tensor& input) {
  // The running count of nonzero entries (cumsum's scan) gives each one its row.
  Tensor counts = cumsum(reshape(ne(input, Scalar(int64_t{0})), {-1}), 0);
  const int64_t n = counts.numel() == 0 ? 0 : select(counts, 0, -1).item().i;
  SortAttrs a;
  a.count = n;
  return apply_one(ir::OpType::nonzero, {reshape(counts, input.shape())}, std::move(a));
}

}  // namespace pyflame
