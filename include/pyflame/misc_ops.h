#pragma once
// PyTorch's functions of python/pyflame/_misc_api.py that are ops of the table
// (addcmul, addcdiv, isclose, index_add, index_copy, index_fill, diff, roll, flip, diag_embed,
// cummax, cummin), with PyTorch's names, arguments and semantics: composite ops (a
// decomposition into the table's ops), so they run on every device and
// autograd differentiates them through those ops. Validation is in
// src/core/misc_ops.cpp.

#include <optional>
#include <utility>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

// input + value * tensor1 * tensor2, broadcast together, in the dtype
// PyTorch's type promotion gives the three tensors; a float value with
// integer tensors is a TypeError.
PF_API Tensor addcmul(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2,
                      Scalar value = Scalar(int64_t{1}));
// input + value * tensor1 / tensor2, as addcmul; integer tensor1 and tensor2
// are a TypeError (integer division), as in PyTorch.
PF_API Tensor addcdiv(const Tensor& input, const Tensor& tensor1, const Tensor& tensor2,
                      Scalar value = Scalar(int64_t{1}));
// The same, written into `input` (its shape and a dtype the result casts to).
PF_API Tensor& addcmul_(Tensor& input, const Tensor& tensor1, const Tensor& tensor2,
                        Scalar value = Scalar(int64_t{1}));
PF_API Tensor& addcdiv_(Tensor& input, const Tensor& tensor1, const Tensor& tensor2,
                        Scalar value = Scalar(int64_t{1}));

// |input - other| <= atol + rtol * |other| elementwise, broadcast together (a
// bool tensor), as torch.isclose: equal values (infinities included) are close,
// NaNs only to each other with equal_nan. input and other must have one dtype
// (TypeError) and the tolerances be non-negative (ValueError).
PF_API Tensor isclose(const Tensor& input, const Tensor& other, double rtol = 1e-05, double atol = 1e-08,
                      bool equal_nan = false);

// input with alpha * source added, source copied, or value written at the
// positions index (0-d or 1-D, int64 or int32) names along dim, as
// torch.index_add, index_copy and index_fill: source has input's dtype
// (TypeError) and its shape with dim's size len(index) (ValueError).
PF_API Tensor index_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source,
                        Scalar alpha = Scalar(int64_t{1}));
PF_API Tensor index_copy(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source);
PF_API Tensor index_fill(const Tensor& input, int64_t dim, const Tensor& index, Scalar value);

// The n-th forward difference along dim after joining prepend and append
// there (either may be undefined), as torch.diff; bool tensors give logical xor.
PF_API Tensor diff(const Tensor& input, int64_t n = 1, int64_t dim = -1, const Tensor& prepend = Tensor(),
                   const Tensor& append = Tensor());
// The elements shifted by shifts[i] along dims[i], wrapping around; with dims
// empty, by one shift over the flattened tensor (shape kept), as torch.roll.
PF_API Tensor roll(const Tensor& input, std::vector<int64_t> shifts, std::vector<int64_t> dims = {});
// input with the order of its elements reversed along each of dims (each at
// most once), a new tensor, as torch.flip.
PF_API Tensor flip(const Tensor& input, std::vector<int64_t> dims);
// Matrices whose diagonal `offset` (above the main one when > 0) holds the
// last dim of input, in dims dim1 and dim2 of the result, zero elsewhere, as
// torch.diag_embed.
PF_API Tensor diag_embed(const Tensor& input, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);

// input + weight * (end - input), as torch.lerp: input and end floating of one
// dtype (TypeError), weight a number or a tensor, all broadcast together.
PF_API Tensor lerp(const Tensor& input, const Tensor& end, const Tensor& weight);
PF_API Tensor lerp(const Tensor& input, const Tensor& end, double weight);

// log(p / (1 - p)), p = input clamped to [eps, 1 - eps] when eps is given, as
// torch.logit; integer inputs give the default float dtype.
PF_API Tensor logit(const Tensor& input, std::optional<double> eps = std::nullopt);

// The p-norm distance between each row of x1 (..., P, M) and each of x2 (..., R,
// M), batch dims broadcast: (..., P, R), as torch.cdist (ValueError unless both
// are at least 2-D with one M).
PF_API Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0);

// (values, int64 indices) of the running maximum (minimum) along dim, as
// torch.cummax (cummin): a tie or a NaN moves the index to the later element,
// a NaN stays the extreme.
PF_API std::pair<Tensor, Tensor> cummax(const Tensor& input, int64_t dim);
PF_API std::pair<Tensor, Tensor> cummin(const Tensor& input, int64_t dim);

}  // namespace pyflame
