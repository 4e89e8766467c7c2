#pragma once
// Sorting and selection, with PyTorch's names, arguments and semantics: sort
// (values and int64 indices along a dim) and nonzero (the coordinates of the
// nonzero entries). Validation is in src/core/sort_ops.cpp; both are ops of
// the table with kernels (CPU: src/cpu/sort.cpp). topk, kthvalue, median,
// unique and argwhere are compositions of these in python/pyflame/_sorting.py.
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

}  // namespace pyflame
