#pragma once
// PyTorch's pointwise functions of python/pyflame/_misc_api.py that are ops of
// the table (addcmul, addcdiv, isclose), with PyTorch's names, arguments and semantics: composite ops (a
// decomposition into the table's elementwise ops), so they run on every device
// and autograd differentiates them through those ops. Validation is in
// src/core/misc_ops.cpp.

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

}  // namespace pyflame
