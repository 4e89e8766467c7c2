#pragma once
// Structural ops, with PyTorch's names, arguments and semantics: joining and
// splitting (cat, stack, split, chunk), indexing by tensors (index_select,
// gather, scatter, scatter_add, embedding, one_hot, x[index] / x[mask]) and
// masking (masked_fill, tril, triu).
//
// Indices are int32 or int64 tensors; a value outside its dimension raises
// IndexError before anything is written.

#include <optional>
#include <string>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

// Joining. Inputs of different dtypes are promoted; split and chunk return views.
PF_API Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
PF_API Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
PF_API std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
PF_API std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
PF_API std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// Indexing. scatter/scatter_add return a copy of x with src written (added)
// at the indexed places; the `_` forms write into x.
PF_API Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
PF_API Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
PF_API Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
PF_API Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, Scalar value);
PF_API Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
PF_API Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
PF_API Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, Scalar value);
PF_API Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// torch.searchsorted: for each value, the index of the first element of its
// row of sorted_sequence that is >= it (right: > it). A 1-D sorted_sequence
// serves values of any shape; otherwise values has its leading dims. Both are
// compared in their promoted dtype; sorter (int64, sorted_sequence's shape)
// sorts an unsorted sequence along its last dim.
PF_API Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false,
                           bool right = false, const Tensor& sorter = {});
// PyTorch's scatter_reduce: reduce is "sum", "prod", "mean", "amax" or "amin";
// with include_self=false the positions written take only src's values.
// Integer means round toward minus infinity, as PyTorch.
PF_API Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                             const std::string& reduce, bool include_self = true);
PF_API Tensor& scatter_reduce_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                               const std::string& reduce, bool include_self = true);
// Rows of weight (num_embeddings, embedding_dim) for indices of any shape.
// padding_idx only affects gradients; here it is validated.
PF_API Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx = std::nullopt);
// int64 result with a trailing dim of num_classes (-1: the largest value + 1).
PF_API Tensor one_hot(const Tensor& x, int64_t num_classes = -1);

// Advanced indexing by one tensor, `key`, at dim `dim` of x (what x[..., key]
// does after the integer and slice parts of the index made x a view):
//   integer key: picks entries along dim (negative values count from the
//     end); key's shape replaces dim;
//   bool key: a mask over dims [dim, dim + key.dim()), which become one dim
//     holding the true entries in row-major order (a 0-d mask adds a dim of
//     size 1 or 0).
PF_API Tensor advanced_index(const Tensor& x, int64_t dim, const Tensor& key);
// x[..., key] = values: values broadcast to the shape advanced_index gives.
PF_API void advanced_index_put_(Tensor& x, int64_t dim, const Tensor& key, const Tensor& values);
PF_API void advanced_index_put_(Tensor& x, int64_t dim, const Tensor& key, Scalar value);
// Advanced indexing by several keys, as PyTorch's x[..., k0, ..., k1, ...]: keys[i]
// indexes x from dim dims[i] (increasing; a bool mask covers mask.dim() dims and
// stands for its true entries' coordinates). The integer keys broadcast to one
// shape B, which replaces the indexed dims where these are adjacent and leads the
// result otherwise. An index out of range raises IndexError (on a GPU at the
// next wait for the device, as the one-key forms).
PF_API Tensor advanced_index(const Tensor& x, const std::vector<int64_t>& dims, const std::vector<Tensor>& keys);
PF_API void advanced_index_put_(Tensor& x, const std::vector<int64_t>& dims, const std::vector<Tensor>& keys,
                                const Tensor& values);

// Masking. mask is bool and broadcasts with x; value is cast to x's dtype.
PF_API Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
PF_API Tensor& masked_fill_(Tensor& x, const Tensor& mask, Scalar value);
// The lower (upper) triangle of the last two dims, from `diagonal` on; the rest is zero.
PF_API Tensor tril(const Tensor& x, int64_t diagonal = 0);
PF_API Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace pyflame
