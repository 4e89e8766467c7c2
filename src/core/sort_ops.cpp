// The op layer of include/pyflame/sort_ops.h. Kernels get:
//   sort     the input contiguous (a 0-d input as 1 element), viewed as
//            [outer, n, inner] around attrs.dim; outputs values (the input's
//            dtype) and int64 indices of the same shape
//   nonzero  the inclusive count of nonzero entries, int64 and contiguous in
//            the input's shape; output (attrs.count, ndim) int64

#include "pyflame/sort_ops.h"

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/nn_ops.h"
#include "pyflame/ops.h"

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

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& input, int64_t dim, bool descending, bool stable) {
  SortAttrs a;
  a.dim = dim, a.descending = descending, a.stable = stable;
  std::vector<Tensor> out = apply({ir::OpType::sort, {input}, std::move(a), {}});
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
