#pragma once
// The norms of torch.linalg, logsumexp, nansum, nanmean, count_nonzero, aminmax,
// kron, tensordot, addmm & co. and linalg.cross, with PyTorch's names, arguments and semantics: ops of the table
// with a decomposition (composite ops) into its elementwise ops, reductions and
// products, so they run on every device and autograd
// differentiates them through those ops. Validation is in
// src/core/linalg_ops.cpp. The norms take floating inputs only; `dtype`
// converts the input first. pf.linalg.norm, pf.norm and pf.dist choose between
// them (python/pyflame/_linalg.py).

#include <optional>
#include <string>
#include <utility>
#include <tuple>
#include <vector>

#include "pyflame/tensor.h"

namespace pyflame {

// sum(|x|^ord)^(1/ord) over `dims` ({} = all); ord inf/-inf: the largest/smallest
// |x|; 0: the number of nonzero elements. The gradient is 0 where the norm is 0.
// torch.linalg's solvers and decompositions of square matrices (batched over leading dims,
// float32 and float64): the inverse, X with A X = B (B (..., n, k), batch dims as A's), the
// lower Cholesky factor, each with an int32 info per matrix (0: done; k > 0: singular, or the
// leading minor of order k not positive-definite); and (sign, log |det|).
PF_API std::tuple<Tensor, Tensor> linalg_inv_ex(const Tensor& A);
PF_API std::tuple<Tensor, Tensor> linalg_solve_ex(const Tensor& A, const Tensor& B);
PF_API std::tuple<Tensor, Tensor> linalg_cholesky_ex(const Tensor& A);
PF_API std::tuple<Tensor, Tensor> linalg_slogdet(const Tensor& A);
// Of symmetric matrices (the lower triangle read): (eigenvalues ascending, eigenvectors as columns,
// info: k > 0 where LAPACK did not converge).
PF_API std::tuple<Tensor, Tensor, Tensor> linalg_eigh(const Tensor& A);
// (U, S descending, Vh, info) of A (..., m, n): U (..., m, m or k), Vh (..., n or k, n), k = min(m, n).
PF_API std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_svd(const Tensor& A, bool full_matrices = false);
// (LU, pivots, rows, info) with A = P L U: L (unit diagonal) below LU's diagonal, U on and above;
// pivots int32, 1-based (row i was swapped with row pivots[i]), as LAPACK's getrf; rows int64,
// the permutation the swaps make (L U = A[rows]).
PF_API std::tuple<Tensor, Tensor, Tensor, Tensor> linalg_lu_factor_ex(const Tensor& A);
// (Q, R) with A = Q R: Q (..., m, m or k) with orthonormal columns, R (..., m or k, n) upper-triangular.
PF_API std::tuple<Tensor, Tensor> linalg_qr(const Tensor& A, bool complete = false);
// X with A X = B, A (..., n, n) triangular (the upper or lower triangle read; unitriangular: ones
// taken on its diagonal), B (..., n, k) of A's batch dims.
PF_API Tensor linalg_solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool unitriangular = false);

PF_API Tensor linalg_vector_norm(const Tensor& x, double ord = 2, const std::vector<int64_t>& dims = {},
                                 bool keepdim = false, std::optional<DType> dtype = std::nullopt);
// The norm of the matrices spanning dims (rows, columns): ord 1/-1 is the
// largest/smallest column sum of |A|, inf/-inf the same over rows; 2 and -2
// need singular values (NotSupportedError).
PF_API Tensor linalg_matrix_norm(const Tensor& A, double ord, const std::vector<int64_t>& dims = {-2, -1},
                                 bool keepdim = false, std::optional<DType> dtype = std::nullopt);
// ord "fro" (the 2-norm of the entries) or "nuc" (singular values: NotSupportedError).
PF_API Tensor linalg_matrix_norm(const Tensor& A, const std::string& ord = "fro",
                                 const std::vector<int64_t>& dims = {-2, -1}, bool keepdim = false,
                                 std::optional<DType> dtype = std::nullopt);

// log(sum(exp(x))) over `dims` ({} = all), the maximum taken out first (stable
// for large values): rows of -inf give -inf, a +inf gives +inf, NaN propagates.
// Integer and bool inputs give float32. The gradient is softmax(x).
PF_API Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// The sum over `dims` ({} = all) with NaNs counted as zero, as torch.nansum:
// in `dtype` when given (the input converted first), else sum's dtype (int64
// for integer and bool inputs).
PF_API Tensor nansum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
                     std::optional<DType> dtype = std::nullopt);
// The mean of the non-NaN elements over `dims` (NaN where there are none), as
// torch.nanmean: floating inputs only (TypeError), in `dtype` when given.
PF_API Tensor nanmean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
                      std::optional<DType> dtype = std::nullopt);

// The number of nonzero elements (NaN counts) over `dims` ({} = all), int64, as
// torch.count_nonzero.
PF_API Tensor count_nonzero(const Tensor& x, const std::vector<int64_t>& dims = {});

// (min, max) over `dim` (none: every element, of which there must be one), as
// torch.aminmax.
PF_API std::pair<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt,
                                         bool keepdim = false);

// The Kronecker product, the operands' shapes padded with leading 1s to one rank,
// in their promoted dtype, as torch.kron.
PF_API Tensor kron(const Tensor& input, const Tensor& other);

// Sums of products over dims_a of input and dims_b of other (paired in order,
// same sizes), the result's dims input's others then other's, as torch.tensordot.
PF_API Tensor tensordot(const Tensor& input, const Tensor& other, std::vector<int64_t> dims_a,
                        std::vector<int64_t> dims_b);

// torch.einsum with an equation string ("ij,jk->ik", "bij,bjk->bik", "ii->i",
// "...ij,...jk->...ik", implicit outputs "ij,jk"): sums of products over the
// subscripts the output lacks, size-1 dims broadcasting; operands of one dtype.
PF_API Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// The cross product of 3-vectors along `dim` of input and other broadcast
// together (that dim of size 3), in their promoted dtype, as torch.linalg.cross
// (which takes one dtype and rank). pf.cross chooses torch.cross's default dim.
PF_API Tensor linalg_cross(const Tensor& input, const Tensor& other, int64_t dim = -1);

// beta * input + alpha * a product, input broadcast to the product's shape, as
// PyTorch's: mat1 @ mat2 (addmm), mat @ vec (addmv), the outer product of vec1
// and vec2 (addr), batch1[i] @ batch2[i] (baddbmm) or their sum over i (addbmm).
// beta 0 ignores the input's values (NaN included). addr promotes its operands
// (and rejects floating beta/alpha for integer ones); the others take operands of one
// dtype, integer ones with beta and alpha truncated to integers (PyTorch's behaviour).
PF_API Tensor addmm(const Tensor& input, const Tensor& mat1, const Tensor& mat2, Scalar beta = Scalar(int64_t{1}),
                    Scalar alpha = Scalar(int64_t{1}));
PF_API Tensor addmv(const Tensor& input, const Tensor& mat, const Tensor& vec, Scalar beta = Scalar(int64_t{1}),
                    Scalar alpha = Scalar(int64_t{1}));
PF_API Tensor addr(const Tensor& input, const Tensor& vec1, const Tensor& vec2, Scalar beta = Scalar(int64_t{1}),
                   Scalar alpha = Scalar(int64_t{1}));
PF_API Tensor baddbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2,
                      Scalar beta = Scalar(int64_t{1}), Scalar alpha = Scalar(int64_t{1}));
PF_API Tensor addbmm(const Tensor& input, const Tensor& batch1, const Tensor& batch2,
                     Scalar beta = Scalar(int64_t{1}), Scalar alpha = Scalar(int64_t{1}));

}  // namespace pyflame
