#pragma once
// Sorting and selection, with PyTorch's names, arguments and semantics: sort
// (values and int64 indices along a dim) and nonzero (the coordinates of the
// nonzero entries). Validation is in src/core/sort_ops.cpp; both are ops of
// the table with kernels (CPU: src/cpu/sort.cpp). topk, kthvalue and median
// are table ops whose decompositions pick from sort's result (a backend may
// give them kernels of their own); unique and argwhere are compositions in
// python/pyflame/_sorting.py.
//
// Order: NaN sorts above every number (ascending: last; descending: first);
// equal keys (NaNs among themselves, -0 and +0) keep the order of their
// indices whether or not `stable` is asked for.

#include <utility>

#include "pyflame/tensor.h"

namespace pyflame {

// (values, indices) of `input` sorted along `dim`. Values are differentiable.
PF_API std::pair<Tensor, Tensor> sort(const Tensor& input, int64_t dim = -1, bool descending = false,
                                      bool stable = false);
// The (n, input.dim()) int64 coordinates of the n nonzero entries, in row-major
// order. Waits for the device: n is the result's size.
PF_API Tensor nonzero(const Tensor& input);
// The k largest (largest=false: smallest) entries along dim, sorted, and their
// indices (ties: the lower index first).
PF_API std::pair<Tensor, Tensor> topk(const Tensor& input, int64_t k, int64_t dim = -1, bool largest = true);
// The k-th smallest entry along dim (k from 1) and its index.
PF_API std::pair<Tensor, Tensor> kthvalue(const Tensor& input, int64_t k, int64_t dim = -1, bool keepdim = false);
// The lower median along dim and its index; a row with a NaN gives NaN and the
// index of its first NaN (as PyTorch).
PF_API std::pair<Tensor, Tensor> median(const Tensor& input, int64_t dim, bool keepdim = false);

}  // namespace pyflame
