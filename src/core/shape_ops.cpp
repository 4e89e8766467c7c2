// The shape area's op layer: joining and splitting, indexing by tensors,
// masking. index_select, gather, scatter, scatter_add and searchsorted are ops
// of the table (infer functions here, kernels in src/cpu/{index,search}.cpp and
// the GPU backend).
// The rest are compositions: cat copies its inputs into views of the output,
// stack/split/chunk are views, embedding and x[key] are an index_select,
// x[key] = v a scatter, one_hot a scatter into zeros, masked_fill/tril/triu
// comparisons and where; so they run on every device that has those parts.
//
// Index values are checked by the kernels (see kernels/kernel_error.h): an
// out-of-range index raises IndexError on the CPU at once and on a GPU at the
// next synchronisation, and nothing here waits for a device. Only masks
// synchronise, by nature: the result's size is the number of true entries.

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/dispatch.h"
#include "core/op_utils.h"
#include "pyflame/error.h"
#include "pyflame/ops.h"

namespace pyflame {

namespace {

void check_index_dtype(const Tensor& index, const char* op) {
  PF_CHECK(index.dtype() == DType::Int32 || index.dtype() == DType::Int64, TypeError, op,
           ": index must be an int32 or int64 tensor, got ", index.dtype());
}

// PyTorch lets 0-d and 1-D tensors stand for each other in gather/scatter.
int64_t nonzero_dim(const Tensor& t) { return std::max<int64_t>(t.dim(), 1); }
Shape at_least_1d(const Shape& s) { return s.empty() ? Shape{1} : s; }

// A plan that shows a 0-d input to the kernel as 1-D.
InputPlan as_1d(const Tensor& t) {
  InputPlan p;
  if (t.dim() == 0) p.reshape = Shape{1};
  return p;
}

Shape replace_dim(Shape shape, int64_t dim, const Shape& with) {
  shape.erase(shape.begin() + dim);
  shape.insert(shape.begin() + dim, with.begin(), with.end());
  return shape;
}

// index_select: x (at least 1-D) and a 1-D index.
Inferred infer_index_select(OpCall& call) {
  const Tensor &x = call.inputs[0], &index = call.inputs[1];
  auto& a = std::get<IndexAttrs>(call.attrs);
  const char* op = "index_select";
  check_index_dtype(index, op);
  PF_CHECK(index.dim() <= 1, ValueError, op, ": index must be 0-d or 1-D, got shape ", index.shape());
  a.dim = wrap_dim(a.dim, x.dim(), op);
  PF_CHECK(x.dim() > 0 || index.numel() == 1, ValueError, op, ": a 0-d input takes exactly one index, got ",
           index.numel());
  Shape shape = at_least_1d(x.shape());
  shape[a.dim] = index.numel();
  InputPlan idx;
  idx.reshape = Shape{index.numel()};
  Inferred inf{current_device(), {as_1d(x), idx}, {{shape, x.dtype()}}, {}};
  if (x.dim() == 0) inf.outputs[0].result = Shape{};
  return inf;
}

Inferred infer_gather(OpCall& call) {
  const Tensor &x = call.inputs[0], &index = call.inputs[1];
  auto& a = std::get<IndexAttrs>(call.attrs);
  check_index_dtype(index, "gather");
  a.dim = wrap_dim(a.dim, x.dim(), "gather");
  PF_CHECK(nonzero_dim(index) == nonzero_dim(x), ValueError,
           "gather: index must have as many dimensions as the input (", x.dim(), "), got shape ", index.shape());
  const Shape in = at_least_1d(x.shape()), idx = at_least_1d(index.shape());
  for (int64_t k = 0; k < static_cast<int64_t>(in.size()); ++k)
    PF_CHECK(k == a.dim || idx[k] <= in[k], ValueError, "gather: index shape ", index.shape(),
             " is larger than the input's shape ", x.shape(), " in dimension ", k, " (only dimension ", a.dim,
             " may be larger)");
  Inferred inf{current_device(), {as_1d(x), as_1d(index)}, {{idx, x.dtype()}}, {}};
  if (index.dim() == 0) inf.outputs[0].result = Shape{};
  return inf;
}

// scatter / scatter_add: inputs x, index, src; the result is x with src
// written (added) at the indexed places.
Inferred infer_scatter(OpCall& call) {
  const char* name = op_name(call.op);
  const Tensor &x = call.inputs[0], &index = call.inputs[1], &src = call.inputs[2];
  auto& a = std::get<IndexAttrs>(call.attrs);
  check_index_dtype(index, name);
  PF_CHECK(src.dtype() == x.dtype(), TypeError, name, ": src has dtype ", src.dtype(), " but the input has ", x.dtype(),
           " (convert src with .to())");
  a.dim = wrap_dim(a.dim, x.dim(), name);
  if (index.numel() > 0) {  // as PyTorch: an empty index has no shape to check
    PF_CHECK(nonzero_dim(index) == nonzero_dim(x) && nonzero_dim(src) == nonzero_dim(x), ValueError, name,
             ": index and src must have as many dimensions as the input (", x.dim(), "), got index shape ",
             index.shape(), " and src shape ", src.shape());
    const Shape t = at_least_1d(x.shape()), idx = at_least_1d(index.shape()), s = at_least_1d(src.shape());
    for (int64_t k = 0; k < static_cast<int64_t>(t.size()); ++k) {
      PF_CHECK(idx[k] <= s[k], ValueError, name, ": index shape ", index.shape(), " is larger than src shape ",
               src.shape(), " in dimension ", k);
      PF_CHECK(k == a.dim || idx[k] <= t[k], ValueError, name, ": index shape ", index.shape(),
               " is larger than the input's shape ", x.shape(), " in dimension ", k, " (only dimension ", a.dim,
               " may be larger)");
    }
  }
  Inferred inf{current_device(), {as_1d(x), as_1d(index), as_1d(src)}, {{at_least_1d(x.shape()), x.dtype()}}, {}};
  if (x.dim() == 0) inf.outputs[0].result = Shape{};
  return inf;
}

// searchsorted: the kernel sees sorted_sequence as (rows, n) and values as
// (rows, m), both contiguous in their promoted dtype.
Inferred infer_searchsorted(OpCall& call) {
  const Tensor &seq = call.inputs[0], &values = call.inputs[1];
  const char* op = "searchsorted";
  PF_CHECK(seq.dim() >= 1, ValueError, op, ": boundaries tensor should have positive dimension, but got 0 dimension");
  PF_CHECK(seq.dtype() != DType::Bool && values.dtype() != DType::Bool, TypeError, op,
           ": bool tensors are not supported (as in PyTorch); convert with .to(int64)");
  const int64_t n = seq.shape().back();
  int64_t rows = 1, m = values.numel();
  if (seq.dim() > 1) {
    PF_CHECK(values.dim() == seq.dim() &&
                 std::equal(seq.shape().begin(), seq.shape().end() - 1, values.shape().begin()),
             ValueError, op, ": boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
             "tensor and input value tensor must match, but we got boundaries tensor ", seq.shape(),
             " and input value tensor ", values.shape());
    rows = shape_numel(Shape(seq.shape().begin(), seq.shape().end() - 1));
    m = values.shape().back();
  }
  const DType common = promote_types(seq.dtype(), values.dtype());
  InputPlan s = reshaped({rows, n}), v = reshaped({rows, m});
  s.dtype = v.dtype = common;
  const DType out = call.attr<SearchAttrs>().out_int32 ? DType::Int32 : DType::Int64;
  return {current_device(), {s, v}, {{{rows, m}, out, values.shape()}}, {}};
}

PF_REGISTER_INFER(index_select, &infer_index_select);
PF_REGISTER_INFER(searchsorted, &infer_searchsorted);
PF_REGISTER_INFER(gather, &infer_gather);
PF_REGISTER_INFER(scatter, &infer_scatter);
PF_REGISTER_INFER(scatter_add, &infer_scatter);
PF_REGISTER_INFER(scatter_reduce, &infer_scatter);

Tensor index_select_op(const Tensor& x, int64_t dim, const Tensor& index, bool wrap_negative) {
  return apply_one(ir::OpType::index_select, {x, index}, IndexAttrs{dim, wrap_negative});
}

Tensor scatter_op(ir::OpType op, const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                  bool wrap_negative) {
  return apply_one(op, {x, index, src}, IndexAttrs{dim, wrap_negative});
}

Tensor& scatter_op_(ir::OpType op, Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                    bool wrap_negative) {
  return apply_into(x, op, {x, index, src}, IndexAttrs{dim, wrap_negative});
}

Tensor scalar_src(const Tensor& x, const Tensor& index, Scalar value) {
  const PlacementScope scope("scatter", {x});
  return expand(full({}, value, x.dtype()), index.shape());
}

// IndexError unless a bool mask matches dims [dim, dim + mask.dim()) of x.
void check_mask_shape(const Tensor& x, int64_t dim, const Tensor& mask) {
  PF_CHECK(dim + mask.dim() <= x.dim(), IndexError, "too many indices: a mask of shape ", mask.shape(),
           " at dimension ", dim, " of a tensor of shape ", x.shape());
  Shape covered(x.shape().begin() + dim, x.shape().begin() + dim + mask.dim());
  PF_CHECK(covered == mask.shape(), IndexError, "the shape of the mask ", mask.shape(),
           " does not match the shape of the indexed tensor ", covered, " at dimension ", dim);
}

// x with the dims a mask covers made one (a 0-d mask adds a dim: x[True]
// has one of size 1, x[False] one of size 0).
Tensor flatten_masked_dims(const Tensor& x, int64_t dim, const Tensor& mask) {
  return mask.dim() == 0 ? unsqueeze(x, dim) : flatten(x, dim, dim + mask.dim() - 1);
}

// The row-major positions of a mask's true entries, counted on the host: the
// result's size depends on them (this waits for the device, by nature).
Tensor mask_positions(const Tensor& mask) {
  Tensor host = to(mask, Device::cpu()).contiguous();
  const bool* p = host.data<bool>();
  int64_t n = host.numel();
  Tensor pos = Tensor::empty({std::count(p, p + n, true)}, DType::Int64, Device::cpu());
  int64_t* q = pos.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (p[i]) *q++ = i;
  return to(pos, current_device());
}

// The coordinates of a mask's true entries, one int64 tensor per mask dim
// (NumPy's nonzero), counted on the host as mask_positions.
std::vector<Tensor> mask_coordinates(const Tensor& mask) {
  Tensor pos = to(mask_positions(mask), Device::cpu());
  const int64_t n = pos.numel();
  std::vector<Tensor> coords;
  for (int64_t d = 0; d < mask.dim(); ++d) coords.push_back(Tensor::empty({n}, DType::Int64, Device::cpu()));
  const int64_t* p = pos.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = mask.dim() - 1, rest = p[i]; d >= 0; --d) {
      coords[d].data<int64_t>()[i] = rest % mask.shape()[d];
      rest /= mask.shape()[d];
    }
  for (Tensor& c : coords) c = to(c, current_device());
  return coords;
}

void check_key(const Tensor& x, int64_t dim, const Tensor& key) {
  PF_CHECK(key.dtype() == DType::Bool || key.dtype() == DType::Int32 || key.dtype() == DType::Int64, IndexError,
           "tensors used as indices must be int64, int32 or bool tensors, got ", key.dtype());
  if (key.dtype() == DType::Bool) check_mask_shape(x, dim, key);
  else PF_CHECK(dim < x.dim(), IndexError, "too many indices for a tensor of dimension ", x.dim());
}

Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  PF_CHECK(x.dim() >= 2, ValueError, op, ": the input must have at least 2 dimensions, got shape ", x.shape());
  const PlacementScope scope(op, {x});
  // keep[r, c] = c <= r + diagonal (tril) or c >= r + diagonal (triu): a
  // rows x cols mask, then one pass of where over x.
  Tensor cols = arange(0, x.size(-1));
  Tensor rows = unsqueeze(add(arange(0, x.size(-2)), diagonal), 1);
  Tensor keep = lower ? le(cols, rows) : ge(cols, rows);
  return where(keep, x, full({}, 0, x.dtype()));
}

}  // namespace

// ---------------------------------------------------------------- joining

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  PF_CHECK(!tensors.empty(), ValueError, "cat: expected a non-empty list of tensors");
  // As in PyTorch, 1-D empty tensors are skipped whatever the others' shapes.
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.numel() == 0; };
  const Tensor* ref = nullptr;
  DType dtype = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    PF_CHECK(tensors[i].dim() > 0, ValueError, "cat: a 0-d tensor (at position ", i,
             ") cannot be concatenated; unsqueeze it, or use stack");
    dtype = promote_types(dtype, tensors[i].dtype());
    if (!ref && !skipped(tensors[i])) ref = &tensors[i];
  }
  const PlacementScope scope("cat", tensors);
  const Device dev = scope.device();
  if (!ref) return scope.result(Tensor::empty({0}, dtype, dev));
  int64_t d = wrap_dim(dim, ref->dim(), "cat");
  Shape shape = ref->shape();
  shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped(t)) continue;
    PF_CHECK(t.dim() == ref->dim(), ValueError, "cat: tensors must have the same number of dimensions, got ",
             ref->dim(), " and ", t.dim(), " (tensor ", i, ")");
    for (int64_t k = 0; k < t.dim(); ++k)
      PF_CHECK(k == d || t.shape()[k] == ref->shape()[k], ValueError, "cat: sizes must match except in dimension ",
               d, ", got shapes ", ref->shape(), " and ", t.shape(), " (tensor ", i, ")");
    shape[d] += t.shape()[d];
  }
  Tensor out = empty_output(shape, dtype, dev);
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    if (skipped(t) || t.shape()[d] == 0) continue;
    Tensor part = slice(out, d, at, at + t.shape()[d], 1);
    if (t.device() != dev) note_implicit_copy(t, dev, "cat");  // as for an op's input
    copy_(part, t);
    at += t.shape()[d];
  }
  return scope.result(out);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  PF_CHECK(!tensors.empty(), ValueError, "stack: expected a non-empty list of tensors");
  int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    PF_CHECK(tensors[i].shape() == tensors[0].shape(), ValueError, "stack: every tensor must have the same shape, got ",
             tensors[0].shape(), " at entry 0 and ", tensors[i].shape(), " at entry ", i);
    parts.push_back(unsqueeze(tensors[i], d));
  }
  return cat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim) {
  PF_CHECK(x.dim() > 0, ValueError, "split: needs a tensor with at least 1 dimension");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    PF_CHECK(s >= 0, ValueError, "split: split sizes must be non-negative, got ", Shape(split_sizes));
    total += s;
  }
  PF_CHECK(total == x.shape()[d], ValueError, "split: split sizes ", Shape(split_sizes), " must sum to ",
           x.shape()[d], ", the size of dimension ", d);
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t s : split_sizes) {
    parts.push_back(slice(x, d, at, at + s, 1));
    at += s;
  }
  return parts;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  PF_CHECK(x.dim() > 0, ValueError, "split: needs a tensor with at least 1 dimension");
  int64_t d = wrap_dim(dim, x.dim(), "split");
  int64_t n = x.shape()[d];
  PF_CHECK(split_size >= 0, ValueError, "split: split_size must be non-negative, got ", split_size);
  PF_CHECK(split_size > 0 || n == 0, ValueError, "split: split_size can only be 0 if dimension ", d,
           " is empty, but its size is ", n);
  if (n == 0) return {x};  // one empty part, as in PyTorch
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += split_size) sizes.push_back(std::min(split_size, n - at));
  return split(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  PF_CHECK(chunks > 0, ValueError, "chunk: chunks must be positive, got ", chunks);
  PF_CHECK(x.dim() > 0, ValueError, "chunk: needs a tensor with at least 1 dimension");
  int64_t d = wrap_dim(dim, x.dim(), "chunk");
  int64_t size = (x.shape()[d] + chunks - 1) / chunks;
  // Like PyTorch: fewer chunks when the size does not divide; `chunks` empty parts of an empty dim.
  if (size == 0) return split(x, std::vector<int64_t>(chunks, 0), d);
  return split(x, size, d);
}

// ---------------------------------------------------------------- indexing

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) { return index_select_op(x, dim, index, false); }

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32, bool right,
                    const Tensor& sorter) {
  if (!sorter.defined())
    return apply_one(ir::OpType::searchsorted, {sorted_sequence, values}, SearchAttrs{right, out_int32});
  PF_CHECK(sorter.dtype() == DType::Int64, TypeError, "searchsorted: sorter must be a tensor of long dtype, got ",
           sorter.dtype());
  PF_CHECK(sorter.shape() == sorted_sequence.shape(), ValueError,
           "searchsorted: boundary and sorter must have the same size, but got boundary tensor ",
           sorted_sequence.shape(), " and sorter tensor ", sorter.shape());
  return searchsorted(gather(sorted_sequence, -1, sorter), values, out_int32, right);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return apply_one(ir::OpType::gather, {x, index}, IndexAttrs{dim, false});
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_op(ir::OpType::scatter, x, dim, index, src, false);
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  return scatter_op(ir::OpType::scatter, x, dim, index, scalar_src(x, index, value), false);
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_op(ir::OpType::scatter_add, x, dim, index, src, false);
}
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_op_(ir::OpType::scatter, x, dim, index, src, false);
}
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  return scatter_op_(ir::OpType::scatter, x, dim, index, scalar_src(x, index, value), false);
}
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_op_(ir::OpType::scatter_add, x, dim, index, src, false);
}

namespace {

// The value that leaves any other unchanged under `reduce` (what the written
// positions start from with include_self=false).
Scalar reduce_identity(ScatterReduce reduce, DType dtype) {
  const bool high = reduce == kScatterAmin;
  if (reduce == kScatterSum) return Scalar(int64_t{0});
  if (reduce == kScatterProd) return Scalar(int64_t{1});
  if (dtype == DType::Bool) return Scalar(high);
  const double inf = std::numeric_limits<double>::infinity();
  if (is_floating(dtype)) return Scalar(high ? inf : -inf);
  int64_t lo = 0, hi = 0;
  switch (dtype) {
    case DType::UInt8: lo = 0, hi = 255; break;
    case DType::Int8: lo = -128, hi = 127; break;
    case DType::Int16: lo = -32768, hi = 32767; break;
    case DType::Int32: lo = INT32_MIN, hi = INT32_MAX; break;
    default: lo = INT64_MIN, hi = INT64_MAX; break;
  }
  return Scalar(high ? hi : lo);
}

}  // namespace

Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self) {
  ScatterReduce kind;
  if (reduce == "sum" || reduce == "mean") kind = kScatterSum;
  else if (reduce == "prod") kind = kScatterProd;
  else if (reduce == "amax") kind = kScatterAmax;
  else if (reduce == "amin") kind = kScatterAmin;
  else throw ValueError("scatter_reduce: reduce argument must be either sum, prod, mean, amax or amin, got " + reduce);
  PF_CHECK(reduce != "mean" || x.dtype() != DType::Bool, TypeError,
           "scatter_reduce: reduce='mean' is not supported for bool tensors (as in PyTorch)");
  const PlacementScope scope("scatter_reduce", {x, index, src});
  Tensor base = include_self ? x : scatter(x, dim, index, reduce_identity(kind, x.dtype()));
  Tensor out = apply_one(ir::OpType::scatter_reduce, {base, index, src}, IndexAttrs{dim, false, kind});
  if (reduce != "mean") return out;
  // PyTorch's count: 1 for x's own value (include_self) plus the values scattered; 1 where none came.
  Tensor count = include_self ? ones_like(x) : zeros_like(x);
  count = scatter_add(count, dim, index, scalar_src(x, index, Scalar(int64_t{1})));
  count = where(eq(count, Scalar(int64_t{0})), full({}, Scalar(int64_t{1}), x.dtype()), count);
  if (is_floating(x.dtype())) return div(out, count);
  return to(floor(div(to(out, DType::Float64), to(count, DType::Float64))), x.dtype());
}

Tensor& scatter_reduce_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                        bool include_self) {
  return copy_(x, scatter_reduce(x, dim, index, src, reduce, include_self));
}

Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  check_index_dtype(input, "embedding");
  PF_CHECK(weight.dim() == 2, ValueError, "embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape ",
           weight.shape());
  int64_t n = weight.shape()[0];
  if (padding_idx)
    PF_CHECK(*padding_idx >= -n && *padding_idx < n, ValueError, "embedding: padding_idx ", *padding_idx,
             " is out of range for ", n, " embeddings");
  Shape shape = input.shape();
  shape.push_back(weight.shape()[1]);
  Tensor index = reshape(input, {-1});
  Tensor rows = index_select(weight, 0, index);
  if (padding_idx && rows.requires_grad()) {  // the padding row's entries take no gradient, as in PyTorch
    Tensor frozen = index_select(weight.detach(), 0, index);
    Tensor keep = unsqueeze(ne(index, Scalar(*padding_idx < 0 ? *padding_idx + n : *padding_idx)), 1);
    rows = where(keep, rows, frozen);
  }
  return view(rows, shape);
}

Tensor one_hot(const Tensor& x, int64_t num_classes) {
  PF_CHECK(x.dtype() == DType::Int64 || x.dtype() == DType::Int32, TypeError,
           "one_hot: needs an int64 (or int32) tensor of class indices, got ", x.dtype());
  PF_CHECK(num_classes >= -1, ValueError, "one_hot: num_classes must be -1 (inferred) or non-negative, got ",
           num_classes);
  if (x.numel() == 0) {
    PF_CHECK(num_classes >= 0, ValueError,
             "one_hot: cannot infer the number of classes from an empty tensor; pass num_classes");
  } else if (num_classes == -1 || x.device().is_cpu()) {
    // The class count is read from the values (the result's shape depends on
    // them). On the CPU reading costs no wait, so values are checked here with
    // one_hot's own message; on a GPU the scatter below checks them.
    const int64_t lo = pyflame::min(x).item().i, hi = pyflame::max(x).item().i;
    if (num_classes == -1) num_classes = hi + 1;
    PF_CHECK(lo >= 0, IndexError, "one_hot: class value ", lo, " is negative");
    PF_CHECK(hi < num_classes, IndexError, "one_hot: class value ", hi, " is out of range for num_classes ",
             num_classes);
  }
  Shape shape = x.shape();
  shape.push_back(num_classes);
  const PlacementScope scope("one_hot", {x});
  Tensor out = zeros(shape, DType::Int64);
  return scope.result(scatter_(out, -1, unsqueeze(x, -1), Scalar(int64_t{1})));
}

// Index tensors may live on the CPU whatever x's device, as in PyTorch: they are moved to x's.
Tensor advanced_index(const Tensor& x, int64_t dim, const Tensor& key) {
  check_key(x, dim, key);
  const PlacementScope scope("index", {x});
  if (key.dtype() == DType::Bool) return index_select(flatten_masked_dims(x, dim, key), dim, mask_positions(key));
  const Tensor k = to(reshape(key, {-1}), scope.device());
  return view(index_select_op(x, dim, k, true), replace_dim(x.shape(), dim, key.shape()));
}

void advanced_index_put_(Tensor& x, int64_t dim, const Tensor& key, const Tensor& values) {
  check_key(x, dim, key);
  const PlacementScope scope("index_put_", &values, 1, x.device());
  // A scatter along one dim of `target`: x, or for a mask x with the masked
  // dims flattened (into a copy, written back, where that is not a view).
  Tensor target = x, pos;
  Shape result_shape;  // the shape of x[..., key], which values broadcast to
  if (key.dtype() == DType::Bool) {
    target = flatten_masked_dims(x, dim, key);
    if (!target.same_storage(x)) target = flatten_masked_dims(clone(x), dim, key);
    pos = mask_positions(key);
    result_shape = replace_dim(target.shape(), dim, {pos.numel()});
  } else {
    pos = to(reshape(key, {-1}), x.device());
    result_shape = replace_dim(x.shape(), dim, key.shape());
  }
  Shape shape = replace_dim(target.shape(), dim, {pos.numel()});
  Tensor v;
  try {
    v = reshape(expand(to(values, x.dtype()), result_shape), shape);
  } catch (const ValueError&) {
    throw ValueError(detail::cat("index_put_: values of shape ", values.shape(),
                                 " cannot be broadcast to the indexed shape ", result_shape));
  }
  Shape pos_shape(shape.size(), 1);
  pos_shape[dim] = pos.numel();
  scatter_op_(ir::OpType::scatter, target, dim, expand(view(pos, pos_shape), shape), v, true);
  if (!target.same_storage(x)) copy_(x, view(target, x.shape()));
}

namespace {

// Several keys (PyTorch's rules, as NumPy's): each mask becomes its
// coordinates, one integer key per dim it covers; the integer keys broadcast
// to one shape B. The indexed dims are moved to the front (`order`) and
// merged into one of `total` rows, and `row` is each element of B's row
// there, so x[keys] is one index_select and x[keys] = v one scatter. B's dims
// go where the indexed dims were when those are adjacent (`front`), else first.
struct MultiKey {
  std::vector<int64_t> order;
  Shape rest;  // the sizes of the dims not indexed, in order
  Shape broadcast;
  Tensor row;  // int64, shape `broadcast`; `total` (out of range) where a key is
  int64_t total = 1, front = 0;

  Shape rows_shape() const {
    Shape s = rest;
    s.insert(s.begin(), total);
    return s;
  }
  // The result's dims as B + rest; the permutation that puts B at `front`.
  Shape picked_shape() const {
    Shape s = broadcast;
    s.insert(s.end(), rest.begin(), rest.end());
    return s;
  }
  std::vector<int64_t> to_result() const {
    const int64_t nb = static_cast<int64_t>(broadcast.size()), nr = static_cast<int64_t>(rest.size());
    std::vector<int64_t> p;
    for (int64_t i = 0; i < front; ++i) p.push_back(nb + i);
    for (int64_t i = 0; i < nb; ++i) p.push_back(i);
    for (int64_t i = front; i < nr; ++i) p.push_back(nb + i);
    return p;
  }
};

MultiKey plan_keys(const Tensor& x, const std::vector<int64_t>& dims, const std::vector<Tensor>& keys) {
  PF_CHECK(dims.size() == keys.size(), ValueError, "advanced_index: ", dims.size(), " dims for ", keys.size(), " keys");
  std::vector<int64_t> at;
  std::vector<Tensor> ints;
  for (size_t i = 0; i < keys.size(); ++i) {
    check_key(x, dims[i], keys[i]);
    PF_CHECK(keys[i].dtype() != DType::Bool || keys[i].dim() > 0, NotSupportedError,
             "indexing: a 0-d bool index (True/False) together with other tensor indices is not supported");
    if (keys[i].dtype() != DType::Bool) {
      at.push_back(dims[i]);
      ints.push_back(to(to(keys[i], DType::Int64), x.device()));
      continue;
    }
    const std::vector<Tensor> coords = mask_coordinates(keys[i]);
    for (size_t j = 0; j < coords.size(); ++j) {
      at.push_back(dims[i] + static_cast<int64_t>(j));
      ints.push_back(to(coords[j], x.device()));
    }
  }
  MultiKey k;
  bool adjacent = true;
  for (size_t i = 0; i < at.size(); ++i) {
    PF_CHECK(i == 0 || at[i] > at[i - 1], ValueError, "advanced_index: dims must increase, got ", Shape(dims));
    adjacent = adjacent && (i == 0 || at[i] == at[i - 1] + 1);
    try {
      k.broadcast = i == 0 ? ints[i].shape() : broadcast_shapes(k.broadcast, ints[i].shape(), "indexing");
    } catch (const ValueError&) {
      std::string shapes;
      for (const Tensor& t : ints) shapes += (shapes.empty() ? "" : ", ") + detail::to_piece(t.shape());
      throw IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes " + shapes);
    }
  }
  k.front = adjacent && !at.empty() ? at[0] : 0;
  k.order = at;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(at.begin(), at.end(), d) == at.end()) {
      k.order.push_back(d);
      k.rest.push_back(x.shape()[d]);
    }
  Tensor row = to(zeros(k.broadcast, DType::Int64), x.device());
  Tensor valid = to(full(k.broadcast, Scalar(true), DType::Bool), x.device());
  for (size_t i = 0; i < at.size(); ++i) {
    const int64_t size = x.shape()[at[i]];
    if (x.device().is_cpu()) {  // reading costs no wait here: PyTorch's message, naming the dim
      const Tensor host = ints[i].contiguous();
      const int64_t* v = host.data<int64_t>();
      for (int64_t j = 0; j < host.numel(); ++j)
        PF_CHECK(v[j] >= -size && v[j] < size, IndexError, "index ", v[j], " is out of bounds for dimension ", at[i],
                 " with size ", size);
    }
    Tensor idx = where(lt(ints[i], Scalar(int64_t{0})), add(ints[i], Scalar(size)), ints[i]);
    valid = logical_and(valid, logical_and(ge(idx, Scalar(int64_t{0})), lt(idx, Scalar(size))));
    row = add(mul(row, Scalar(size)), idx);
    k.total *= size;
  }
  // An index out of its dim's range makes the row out of range, which the
  // index_select/scatter kernels report (the CPU at once, a GPU at the next wait).
  k.row = where(valid, row, to(full({}, Scalar(k.total), DType::Int64), x.device()));
  return k;
}

}  // namespace

Tensor advanced_index(const Tensor& x, const std::vector<int64_t>& dims, const std::vector<Tensor>& keys) {
  const PlacementScope scope("index", {x});
  const MultiKey k = plan_keys(x, dims, keys);
  Tensor rows = reshape(permute(x, k.order), k.rows_shape());
  Tensor picked = view(index_select_op(rows, 0, reshape(k.row, {-1}), false), k.picked_shape());
  return permute(picked, k.to_result());
}

void advanced_index_put_(Tensor& x, const std::vector<int64_t>& dims, const std::vector<Tensor>& keys,
                         const Tensor& values) {
  const PlacementScope scope("index_put_", &values, 1, x.device());
  const MultiKey k = plan_keys(x, dims, keys);
  const std::vector<int64_t> to_result = k.to_result();
  Shape result_shape;
  for (int64_t d : to_result) result_shape.push_back(k.picked_shape()[d]);
  Tensor v;
  try {
    v = expand(to(values, x.dtype()), result_shape);
  } catch (const ValueError&) {
    throw ValueError(detail::cat("index_put_: values of shape ", values.shape(),
                                 " cannot be broadcast to the indexed shape ", result_shape));
  }
  std::vector<int64_t> back(to_result.size());
  for (size_t i = 0; i < to_result.size(); ++i) back[to_result[i]] = static_cast<int64_t>(i);
  Shape v_rows = k.rest;
  v_rows.insert(v_rows.begin(), k.row.numel());
  v = reshape(permute(v, back), v_rows);
  Shape index_shape(v_rows.size(), 1);
  index_shape[0] = k.row.numel();
  Tensor permuted = permute(x, k.order);
  Tensor target = contiguous(permuted);  // x's own memory when the permuted view is contiguous
  Tensor rows = view(target, k.rows_shape());
  scatter_op_(ir::OpType::scatter, rows, 0, expand(view(k.row, index_shape), v_rows), v, false);
  if (!target.same_storage(x)) copy_(permuted, target);
}

void advanced_index_put_(Tensor& x, int64_t dim, const Tensor& key, Scalar value) {
  const PlacementScope scope("index_put_", nullptr, 0, x.device());
  if (key.dtype() != DType::Bool) {
    advanced_index_put_(x, dim, key, full({}, value, x.dtype()));
    return;
  }
  // One value through a mask is a masked_fill_: no positions to count.
  check_key(x, dim, key);
  Shape mask_shape = key.shape();
  mask_shape.resize(x.dim() - dim, 1);
  masked_fill_(x, view(key, mask_shape), value);
}

// ---------------------------------------------------------------- masking

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  PF_CHECK(mask.dtype() == DType::Bool, TypeError, "masked_fill: mask must be a bool tensor, got ", mask.dtype(),
           " (compare first, e.g. x > 0)");
  broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  const PlacementScope scope("masked_fill", {x, mask});
  return where(mask, full({}, value, x.dtype()), x);
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, Scalar value) {
  PF_CHECK(mask.dtype() == DType::Bool, TypeError, "masked_fill_: mask must be a bool tensor, got ", mask.dtype(),
           " (compare first, e.g. x > 0)");
  PF_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill_") == x.shape(), ValueError,
           "masked_fill_: a mask of shape ", mask.shape(), " does not broadcast to the tensor's shape ", x.shape());
  return copy_(x, masked_fill(x, mask, value));
}

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false, "triu"); }

}  // namespace pyflame
