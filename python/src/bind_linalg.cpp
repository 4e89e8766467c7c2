// Python bindings of include/pyflame/linalg_ops.h with torch's argument names,
// order and defaults: pf.linalg.vector_norm, pf.linalg.matrix_norm and
// pf.logsumexp, pf.nansum, pf.nanmean, pf.addmm, addmv, addr, baddbmm and addbmm
// (and their Tensor methods), pf.count_nonzero, pf.aminmax, pf.kron and pf.linalg.cross are these
// functions; python/pyflame/_linalg.py builds linalg.norm, norm and dist on them, and
// tensordot's (and inner's) argument forms on _C.tensordot and einsum's on _C.einsum.

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "pyflame/error.h"
#include "pyflame/linalg_ops.h"

namespace pyflame::python {

namespace {

bool is_int(nb::handle h) { return PyIndex_Check(h.ptr()) && !PyBool_Check(h.ptr()); }

// A norm's ord as a number (a bool is not one); `expected` says what else the norm takes.
double number_ord(nb::handle ord, const char* op, const char* expected) {
  PF_CHECK((PyFloat_Check(ord.ptr()) || PyLong_Check(ord.ptr())) && !PyBool_Check(ord.ptr()), TypeError, op,
           ": ord must be ", expected, ", got ", py_type_name(ord));
  return PyFloat_AsDouble(ord.ptr());
}

// dim: an int, or a sequence of ints; None and () mean every dim.
std::vector<int64_t> reduction_dims(nb::handle dim, const char* op) {
  std::vector<int64_t> dims;
  if (dim.is_none()) return dims;
  auto one = [&](nb::handle d) {
    PF_CHECK(is_int(d), TypeError, op, ": dim must be an int or a tuple of ints, got ", py_type_name(d));
    return nb::cast<int64_t>(nb::int_(d));
  };
  if (is_int(dim)) return {one(dim)};
  PF_CHECK(PySequence_Check(dim.ptr()) && !PyUnicode_Check(dim.ptr()), TypeError, op,
           ": dim must be an int or a tuple of ints, got ", py_type_name(dim));
  for (nb::handle d : nb::borrow<nb::sequence>(dim)) dims.push_back(one(d));
  return dims;
}

using NanReduce = Tensor (*)(const Tensor&, const std::vector<int64_t>&, bool, std::optional<DType>);

// pf.<name>(input, dim=None, keepdim=False, *, dtype=None) and its Tensor method.
void bind_nan_reduce(nb::module_& m, nb::class_<Tensor>& tensor, const char* name, NanReduce op, const char* doc) {
  m.def(
      name,
      [name, op](const Tensor& input, nb::handle dim, bool keepdim, nb::handle dtype) {
        return op(input, reduction_dims(dim, name), keepdim, as_opt_dtype(dtype));
      },
      "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none(), doc);
  tensor.def(
      name,
      [name, op](const Tensor& self, nb::handle dim, bool keepdim, nb::handle dtype) {
        return op(self, reduction_dims(dim, name), keepdim, as_opt_dtype(dtype));
      },
      "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none(), doc);
}

using AddProduct = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, Scalar, Scalar);

// pf.<name>(input, first, second, *, beta=1, alpha=1) and its Tensor method.
void bind_add_product(nb::module_& m, nb::class_<Tensor>& tensor, const char* name, AddProduct op, const char* first,
                      const char* second, const char* doc) {
  m.def(
      name,
      [op](const Tensor& input, const Tensor& a, const Tensor& b, nb::handle beta, nb::handle alpha) {
        return op(input, a, b, as_scalar(beta, "beta"), as_scalar(alpha, "alpha"));
      },
      "input"_a, nb::arg(first), nb::arg(second), nb::kw_only(), "beta"_a = 1, "alpha"_a = 1, doc);
  tensor.def(
      name,
      [op](const Tensor& self, const Tensor& a, const Tensor& b, nb::handle beta, nb::handle alpha) {
        return op(self, a, b, as_scalar(beta, "beta"), as_scalar(alpha, "alpha"));
      },
      nb::arg(first), nb::arg(second), nb::kw_only(), "beta"_a = 1, "alpha"_a = 1, doc);
}

}  // namespace

void bind_linalg(nb::module_& m, nb::class_<Tensor>& tensor) {
  // The solvers' table ops: pyflame/linalg.py gives them torch's signatures and LinAlgError.
  m.def("linalg_inv_ex", &pyflame::linalg_inv_ex, "A"_a, "(inverse, info) of square matrices (float32/float64).");
  m.def("linalg_solve_ex", &pyflame::linalg_solve_ex, "A"_a, "B"_a,
        "(X, info) with A X = B for A (..., n, n) and B (..., n, k) of A's batch dims.");
  m.def("linalg_cholesky_ex", &pyflame::linalg_cholesky_ex, "A"_a,
        "(L, info): the lower Cholesky factor of symmetric positive-definite matrices.");
  m.def("linalg_slogdet", &pyflame::linalg_slogdet, "A"_a, "(sign, logabsdet) of the determinants.");
  m.def("linalg_eigh", &pyflame::linalg_eigh, "A"_a,
        "(eigenvalues ascending, eigenvectors as columns, info) of symmetric matrices (the lower triangle read).");
  m.def("linalg_svd", &pyflame::linalg_svd, "A"_a, "full_matrices"_a = false,
        "(U, S descending, Vh, info) of matrices (..., m, n).");
  m.def("linalg_lu_factor_ex", &pyflame::linalg_lu_factor_ex, "A"_a,
        "(LU, pivots (1-based, int32), rows (L U = A[rows], int64), info) of matrices (..., m, n) (LAPACK's getrf).");
  m.def("linalg_qr", &pyflame::linalg_qr, "A"_a, "complete"_a = false,
        "(Q, R) with A = Q R: Q with orthonormal columns, R upper-triangular (reduced, or complete).");
  m.def("linalg_solve_triangular", &pyflame::linalg_solve_triangular, "A"_a, "B"_a, "upper"_a,
        "unitriangular"_a = false, "X with A X = B for triangular A (..., n, n) and B (..., n, k) of its batch dims.");
  m.def(
      "count_nonzero",
      [](const Tensor& input, nb::handle dim) {
        return pyflame::count_nonzero(input, reduction_dims(dim, "count_nonzero"));
      },
      "input"_a, "dim"_a = nb::none(),
      "The number of non-zero elements over dim (an int, a tuple or None: all), int64, as torch.count_nonzero.");
  tensor.def(
      "count_nonzero",
      [](const Tensor& self, nb::handle dim) { return pyflame::count_nonzero(self, reduction_dims(dim, "count_nonzero")); },
      "dim"_a = nb::none(), "The number of non-zero elements over dim, as torch.Tensor.count_nonzero.");
  m.def("aminmax", &pyflame::aminmax, "input"_a, nb::kw_only(), "dim"_a = nb::none(), "keepdim"_a = false,
        "(min, max) over dim (None: every element), as torch.aminmax (pf.aminmax names the pair).");
  m.def("kron", &pyflame::kron, "input"_a, "other"_a, "The Kronecker product, as torch.kron.");
  m.def("tensordot", &pyflame::tensordot, "a"_a, "b"_a, "dims_a"_a, "dims_b"_a,
        "Sums of products over dims_a of a and dims_b of b (pyflame.tensordot takes torch's dims forms).");
  m.def("einsum", &pyflame::einsum, "equation"_a, "operands"_a,
        "Sums of products named by the equation's subscripts (pyflame.einsum takes torch's operand forms).");
  tensor.def("kron", &pyflame::kron, "other"_a, "The Kronecker product, as torch.Tensor.kron.");
  m.def("linalg_cross", &pyflame::linalg_cross, "input"_a, "other"_a, nb::kw_only(), "dim"_a = -1,
        "The cross product of 3-vectors along dim (input and other broadcast), as torch.linalg.cross.");
  bind_add_product(m, tensor, "addmm", &pyflame::addmm, "mat1", "mat2",
                   "beta * input + alpha * (mat1 @ mat2), input broadcast to the product's shape, as torch.addmm.");
  bind_add_product(m, tensor, "addmv", &pyflame::addmv, "mat", "vec",
                   "beta * input + alpha * (mat @ vec), as torch.addmv.");
  bind_add_product(m, tensor, "addr", &pyflame::addr, "vec1", "vec2",
                   "beta * input + alpha * outer(vec1, vec2), as torch.addr.");
  bind_add_product(m, tensor, "baddbmm", &pyflame::baddbmm, "batch1", "batch2",
                   "beta * input + alpha * bmm(batch1, batch2), as torch.baddbmm.");
  bind_add_product(m, tensor, "addbmm", &pyflame::addbmm, "batch1", "batch2",
                   "beta * input + alpha * (the sum over the batch of batch1[i] @ batch2[i]), as torch.addbmm.");
  m.def(
      "linalg_vector_norm",
      [](const Tensor& x, nb::handle ord, nb::handle dim, bool keepdim, nb::handle dtype) {
        const char* op = "linalg.vector_norm";
        return pyflame::linalg_vector_norm(x, number_ord(ord, op, "a number"), reduction_dims(dim, op), keepdim,
                                           as_opt_dtype(dtype));
      },
      "x"_a, "ord"_a.none() = 2, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none(),
      "The vector ord-norm over `dim` (an int, a tuple or None: every element), as torch.linalg.vector_norm: "
      "ord inf, -inf, 0 (the count of nonzero elements) or any other number.");
  m.def(
      "linalg_matrix_norm",
      [](const Tensor& A, nb::handle ord, nb::handle dim, bool keepdim, nb::handle dtype) {
        const char* op = "linalg.matrix_norm";
        const std::vector<int64_t> dims = reduction_dims(dim, op);
        if (nb::isinstance<nb::str>(ord))
          return pyflame::linalg_matrix_norm(A, nb::cast<std::string>(ord), dims, keepdim, as_opt_dtype(dtype));
        return pyflame::linalg_matrix_norm(A, number_ord(ord, op, "a number, 'fro' or 'nuc'"), dims, keepdim,
                                           as_opt_dtype(dtype));
      },
      "A"_a, "ord"_a.none() = "fro", "dim"_a = nb::make_tuple(-2, -1), "keepdim"_a = false, nb::kw_only(),
      "dtype"_a = nb::none(),
      "The matrix norm over the two dims `dim`, as torch.linalg.matrix_norm: 'fro', inf, -inf, 1, -1 ('nuc', 2 and "
      "-2 need singular values: NotSupportedError).");
  const char* logsumexp_doc =
      "log(sum(exp(input))) over `dim` (an int or a tuple), as torch.logsumexp: computed stably, the maximum taken "
      "out first. Integer inputs give float32.";
  m.def(
      "logsumexp",
      [](const Tensor& input, nb::handle dim, bool keepdim) {
        return pyflame::logsumexp(input, reduction_dims(dim, "logsumexp"), keepdim);
      },
      "input"_a, "dim"_a.none(), "keepdim"_a = false, logsumexp_doc);
  tensor.def(
      "logsumexp",
      [](const Tensor& self, nb::handle dim, bool keepdim) {
        return pyflame::logsumexp(self, reduction_dims(dim, "logsumexp"), keepdim);
      },
      "dim"_a.none(), "keepdim"_a = false, logsumexp_doc);
  bind_nan_reduce(m, tensor, "nansum", &pyflame::nansum, "The sum with NaNs counted as zero, as torch.nansum.");
  bind_nan_reduce(m, tensor, "nanmean", &pyflame::nanmean,
                  "The mean of the non-NaN elements (NaN where there are none), as torch.nanmean (floats only).");
}

}  // namespace pyflame::python
