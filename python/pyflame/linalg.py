"""pf.linalg: torch.linalg's norms (vector_norm and matrix_norm are ops of the table), products
(compositions of table ops), and on the CPU through LAPACK the solvers inv, solve,
solve_triangular, cholesky, det and slogdet (and the _ex forms) and the decompositions
lu_factor, qr, eigh and svd (ops linalg_inv_ex, linalg_solve_ex, linalg_solve_triangular,
linalg_cholesky_ex, linalg_slogdet, linalg_lu_factor_ex, linalg_qr, linalg_eigh, linalg_svd;
lu, lu_solve, eigvalsh, svdvals, pinv, matrix_rank, lstsq and cond are built on them),
differentiable. A singular or not positive-definite input raises LinAlgError (a RuntimeError)
as torch.linalg's, or gives its info for the _ex forms.

matrix_exp (matrix products only, so on the GPU too), tensorinv and tensorsolve are compositions.
The other decompositions (eig, whose results are complex, ldl_factor, householder_product) have
no kernels in PyFlame yet: they raise pf.NotSupportedError naming the NumPy or SciPy function to
use on `.numpy()` of the tensor (docs/ops.md), as the LAPACK-backed ones do on the GPU.
"""

from collections import namedtuple

import numpy as np

from . import _C
from ._creation import eye, ones_like, tensor, zeros_like
from ._misc_api import cross as _cross
from ._linalg import linalg_norm as norm, matrix_norm, vector_norm  # noqa: F401
from ._shape_api import broadcast_shapes, finfo
from ._C import dtype as _dtype


class LinAlgError(RuntimeError):
    """A matrix the solver cannot take: singular (inv, solve) or not positive-definite (cholesky),
    as torch.linalg.LinAlgError."""


InvExResult = namedtuple("inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("solve_ex", ["result", "info"])
CholeskyExResult = namedtuple("cholesky_ex", ["L", "info"])
SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])
EighResult = namedtuple("eigh", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("svd", ["U", "S", "Vh"])


def _raise_for(info, name, message):
    """LinAlgError for the first matrix whose info is not 0, in torch's words; message(k) for info k."""
    bad = (info != 0).reshape(-1)
    if not bool(bad.any()):
        return
    flat = info.reshape(-1)
    index = int(bad.int().argmax())
    where = f"(Batch element {index}): " if info.dim() > 0 else ""
    raise LinAlgError(f"{name}: {where}{message(int(flat[index]))}")


def _with_batch(*matrices):
    """The matrices (..., r, c) with their batch dims broadcast to one another's."""
    batch = broadcast_shapes(*(tuple(t.shape[:-2]) for t in matrices))
    return tuple(t.expand(*batch, *t.shape[-2:]) for t in matrices)


def inv_ex(A, *, check_errors=False):
    """(inverse, info) of square matrices (..., n, n), as torch.linalg.inv_ex: info k > 0 where the
    k-th diagonal element of the LU factor is zero (singular)."""
    inverse, info = _C.linalg_inv_ex(A)
    if check_errors:
        _raise_for(info, "linalg.inv_ex", _singular_inverse)
    return InvExResult(inverse, info)


def _singular_inverse(k):
    return (f"The diagonal element {k} is zero, the inversion could not be completed because the input matrix "
            "is singular.")


def inv(A):
    """The inverse of square matrices (..., n, n), as torch.linalg.inv; LinAlgError if one is singular."""
    inverse, info = _C.linalg_inv_ex(A)
    _raise_for(info, "linalg.inv", _singular_inverse)
    return inverse


def _solve_operands(A, B, left):
    """A and B as linalg_solve_ex takes them (B (..., n, k), batch dims broadcast), and how to give X back."""
    if not left:  # X A = B  <=>  A^T X^T = B^T
        A = A.mT
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if not left:
        if vector:
            raise _C.InvalidArgumentError("linalg.solve: Vector broadcasting of the left hand side is not "
                                          "supported for left=False. In this case linalg.solve is equivalent "
                                          "to B / A.squeeze(-1)")
        B = B.mT
    Bm = B.unsqueeze(-1) if vector else B
    if A.dim() < 2 or Bm.dim() < 2:
        raise _C.InvalidArgumentError("linalg.solve: The input tensor A must have at least 2 dimensions.")
    A, Bm = _with_batch(A, Bm)

    def result(X):
        X = X.squeeze(-1) if vector else X
        return X if left else X.mT

    return A, Bm, result


def solve_ex(A, B, *, left=True, check_errors=False):
    """(X, info) with A X = B (or X A = B with left=False), as torch.linalg.solve_ex: B (..., n) or
    (..., n, k), batch dims broadcast."""
    A, B, result = _solve_operands(A, B, left)
    X, info = _C.linalg_solve_ex(A, B)
    if check_errors:
        _raise_for(info, "torch.linalg.solve_ex", lambda k: "The solver failed because the input matrix is singular.")
    return SolveExResult(result(X), info)


def solve(A, B, *, left=True):
    """X with A X = B (or X A = B with left=False), as torch.linalg.solve; LinAlgError if A is singular."""
    A, B, result = _solve_operands(A, B, left)
    X, info = _C.linalg_solve_ex(A, B)
    _raise_for(info, "torch.linalg.solve", lambda k: "The solver failed because the input matrix is singular.")
    return result(X)


def _not_positive_definite(k):
    return (f"The factorization could not be completed because the input is not positive-definite (the leading "
            f"minor of order {k} is not positive-definite).")


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info) with A = L L^T (U with A = U^T U for upper=True), as torch.linalg.cholesky_ex: info k
    > 0 where the leading minor of order k is not positive-definite. Only A's lower triangle is read."""
    L, info = _C.linalg_cholesky_ex(A)
    if check_errors:
        _raise_for(info, "linalg.cholesky_ex", _not_positive_definite)
    return CholeskyExResult(L.mT if upper else L, info)


def cholesky(A, *, upper=False):
    """The Cholesky factor of symmetric positive-definite matrices, as torch.linalg.cholesky;
    LinAlgError if one is not positive-definite."""
    L, info = _C.linalg_cholesky_ex(A)
    _raise_for(info, "linalg.cholesky", _not_positive_definite)
    return L.mT if upper else L


def slogdet(A):
    """(sign, logabsdet) of the determinants of square matrices, as torch.linalg.slogdet: (0, -inf)
    for a singular one. logabsdet is differentiable."""
    return SlogdetResult(*_C.linalg_slogdet(A))


def det(A):
    """The determinants of square matrices (..., n, n), as torch.linalg.det (sign * exp(logabsdet);
    its gradient det * A^-T, so a singular A has none: inv raises, as torch's does at rank n - 2)."""
    sign, logabsdet = _C.linalg_slogdet(A)
    return sign * logabsdet.exp()


def logdet(A):
    """log det(A), as torch.logdet: nan where det < 0, -inf where det = 0."""
    sign, logabsdet = _C.linalg_slogdet(A)
    return logabsdet + sign.log()


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with A X = B (X A = B with left=False) for triangular A, as torch.linalg.solve_triangular:
    only A's upper (else lower) triangle is read, its diagonal taken as ones with unitriangular;
    batch dims broadcast. A zero on the diagonal gives inf and nan, as torch's (no LinAlgError)."""
    if not left:  # X A = B  <=>  A^T X^T = B^T, A^T of the other triangle
        return solve_triangular(A.mT, B.mT, upper=not upper, unitriangular=unitriangular).mT
    if A.dim() < 2 or B.dim() < 2:
        raise _C.InvalidArgumentError("linalg.solve_triangular: The input tensor B must have at least 2 dimensions.")
    return _C.linalg_solve_triangular(*_with_batch(A, B), upper, unitriangular)


QRResult = namedtuple("qr", ["Q", "R"])
LstsqResult = namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])


def qr(A, mode="reduced"):
    """(Q, R) with A = Q R, as torch.linalg.qr: mode 'reduced' (Q (..., m, k), R (..., k, n), k =
    min(m, n)), 'complete' (Q (..., m, m), R (..., m, n)) or 'r' (R alone, Q empty). LAPACK's
    Householder QR (geqrf, orgqr): R's diagonal may be negative, as torch's."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                         "or 'complete'")
    Q, R = _C.linalg_qr(A, mode == "complete")
    return QRResult(Q.new_empty((0,)) if mode == "r" else Q, R)


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares (minimum-norm) solution of A X = B, as torch.linalg.lstsq: A (..., m, n), B
    (..., m, k) or (..., m), batch dims broadcast; singular values at or below rcond (default the
    dtype's eps * max(m, n)) times the largest count as zero. Computed through the SVD for every
    driver (LAPACK's gelsy, gelsd and gelss give this solution; gels assumes full rank); the other
    results follow torch's driver rules: rank for gelsy, gelsd and gelss, singular_values for gelsd
    and gelss, residuals (squared, per column) for all but gelsy where m > n and every A has full rank."""
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise ValueError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
                         f"but got {driver}")
    if A.dim() < 2:
        raise _C.InvalidArgumentError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    vector = B.dim() == 1 or (B.dim() == A.dim() - 1 and tuple(B.shape) == tuple(A.shape[:-1]))  # solve's rule
    Bm = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2], A.shape[-1]
    if Bm.dim() < 2 or Bm.shape[-2] != m:
        raise _C.InvalidArgumentError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2), got A of "
                                      f"shape {tuple(A.shape)} and B of shape {tuple(B.shape)}")
    U, S, Vh = svd(A, full_matrices=False)
    keep = S > _svd_cutoff(S, A.shape, None, rcond)
    X = Vh.mT @ (_kept_reciprocals(S, keep).unsqueeze(-1) * (U.mT @ Bm))
    rank = keep.sum(-1) if driver != "gels" else keep.new_empty((0,), dtype=_dtype.int64)
    values = S if driver in ("gelsd", "gelss") else S.new_empty((0,))
    residuals = S.new_empty((0,))
    if driver != "gelsy" and m > n and bool((keep.sum(-1) == n).all()):
        residuals = ((A @ X - Bm) ** 2).sum(-2)  # a vector's keeps its dim of 1, as torch's
    return LstsqResult(X.squeeze(-1) if vector else X, residuals, rank, values)


def cond(A, p=None):
    """The condition number of square (for p 2 and -2 also rectangular) matrices in the p-norm, as
    torch.linalg.cond: p None or 2 the largest singular value over the smallest, -2 the inverse;
    'fro', 'nuc', 1, -1, inf, -inf matrix_norm(A, p) * matrix_norm(inv(A), p) (inf for a singular A,
    as torch's)."""
    if p is None or p in (2, -2):
        S = svdvals(A)
        largest, smallest = S.amax(-1), S.amin(-1)
        return smallest / largest if p == -2 else largest / smallest
    inverse, info = _C.linalg_inv_ex(A)
    value = matrix_norm(A, p) * matrix_norm(inverse, p)
    return _C.where(info != 0, _C._full_like(value, float("inf")), value)


LUFactorResult = namedtuple("lu_factor", ["LU", "pivots"])
LUFactorExResult = namedtuple("lu_factor_ex", ["LU", "pivots", "info"])
LUResult = namedtuple("lu", ["P", "L", "U"])


def _zero_pivot(k):
    return (f"U[{k},{k}] is zero and using it on lu_solve would result in a division by zero. If you still want to "
            "perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def _check_pivot(pivot, name):
    if not pivot:
        raise _C.NotSupportedError(f"linalg.{name}: LU without pivoting is not implemented on the CPU (as torch's)")


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info) of matrices (..., m, n), as torch.linalg.lu_factor_ex (LAPACK's getrf): A = P L
    U with L (unit diagonal) below LU's diagonal and U on and above; pivots int32, 1-based."""
    _check_pivot(pivot, "lu_factor_ex")
    LU, pivots, _, info = _C.linalg_lu_factor_ex(A)
    if check_errors:
        _raise_for(info, "torch.linalg.lu_factor_ex", _zero_pivot)
    return LUFactorExResult(LU, pivots, info)


def lu_factor(A, *, pivot=True):
    """(LU, pivots) as torch.linalg.lu_factor; LinAlgError (a RuntimeError) where U has a zero on its
    diagonal, with torch's message."""
    _check_pivot(pivot, "lu_factor")
    LU, pivots, _, info = _C.linalg_lu_factor_ex(A)
    _raise_for(info, "torch.linalg.lu_factor", _zero_pivot)
    return LUFactorResult(LU, pivots)


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U, as torch.linalg.lu: P (..., m, m) a permutation matrix, L (..., m, k)
    with a unit diagonal, U (..., k, n), k = min(m, n). Differentiable for square matrices."""
    _check_pivot(pivot, "lu")
    LU, _, rows, _ = _C.linalg_lu_factor_ex(A)
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    L = LU[..., :, :k].tril(-1) + eye(m, k, dtype=A.dtype, device=A.device)
    U = LU[..., :k, :].triu()
    P = eye(m, dtype=A.dtype, device=A.device)[rows].mT  # L U = A[rows]: P's column i is e_rows[i]
    return LUResult(P, L, U)


def _rows_of(pivots, m):
    """The row order LAPACK's swaps make (L U = A[rows]) from pivots (..., k), on the host."""
    piv = pivots.to("cpu").numpy().astype(np.int64) - 1
    rows = np.broadcast_to(np.arange(m), piv.shape[:-1] + (m,)).copy()
    flat, pflat = rows.reshape(-1, m), piv.reshape(-1, piv.shape[-1])
    for i in range(pflat.shape[-1]):
        at = np.arange(flat.shape[0])
        a, b = flat[at, i].copy(), flat[at, pflat[:, i]].copy()
        flat[at, i], flat[at, pflat[:, i]] = b, a
    return tensor(rows, device=pivots.device)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (X A = B with left=False; A^T in A's place with adjoint=True) from lu_factor's
    (LU, pivots), as torch.linalg.lu_solve: two triangular solves (differentiable in LU and B)."""
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    rows = _rows_of(pivots, LU.shape[-2])
    index = rows.unsqueeze(-1).expand(*rows.shape, B.shape[-1])
    LU, B, index = _with_batch(LU, B, index)
    if not adjoint:  # L U X = B[rows]
        Y = solve_triangular(LU, B.gather(-2, index), upper=False, unitriangular=True)
        return solve_triangular(LU, Y, upper=True)
    # U^T L^T (P^T X) = B, and P^T X = X[rows]
    Z = solve_triangular(LU.mT, B, upper=False)
    W = solve_triangular(LU.mT, Z, upper=True, unitriangular=True)
    return zeros_like(W).scatter(-2, index, W)


def _not_converged(what):
    return lambda k: (f"The algorithm failed to converge because the input matrix is ill-conditioned or has too "
                      f"many repeated {what} (error code: {k}).")


def eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric matrices, as torch.linalg.eigh:
    only the UPLO ('L' or 'U') triangle is read. Eigenvectors are unique up to sign (and within
    repeated eigenvalues), as LAPACK's; their gradient is undefined at repeated eigenvalues."""
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg.eigh: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    values, vectors, info = _C.linalg_eigh(A if UPLO == "L" else A.mT)
    _raise_for(info, "linalg.eigh", _not_converged("eigenvalues"))
    return EighResult(values, vectors)


def eigvalsh(A, UPLO="L"):
    """The eigenvalues of symmetric matrices, ascending, as torch.linalg.eigvalsh."""
    return eigh(A, UPLO).eigenvalues


def svd(A, full_matrices=True):
    """(U, S descending, Vh) with A = U diag(S) Vh, as torch.linalg.svd: U (..., m, m) and Vh
    (..., n, n) with full_matrices, else (..., m, k) and (..., k, n), k = min(m, n). Singular vectors
    are unique up to sign, as LAPACK's (gesdd)."""
    U, S, Vh, info = _C.linalg_svd(A, full_matrices)
    _raise_for(info, "linalg.svd", _not_converged("singular values"))
    return SVDResult(U, S, Vh)


def svdvals(A):
    """The singular values of matrices, descending, as torch.linalg.svdvals."""
    return svd(A, full_matrices=False).S


def _svd_cutoff(S, shape, atol, rtol):
    """torch's tolerance for pinv and matrix_rank: max(atol, rtol * the largest singular value), rtol
    eps * max(m, n) when neither is given."""
    if rtol is None:
        rtol = 0.0 if atol is not None else finfo(S.dtype).eps * max(shape[-2], shape[-1])
    largest = S.amax(-1, keepdim=True) if S.shape[-1] else S.sum(-1, keepdim=True)
    cutoff = largest * rtol
    if atol is not None:
        cutoff = cutoff.clamp(min=float(atol))
    return cutoff


def _kept_reciprocals(S, keep):
    """1 / S where kept, 0 elsewhere, with no 1 / 0 for the gradient to meet."""
    return _C.where(keep, 1 / _C.where(keep, S, ones_like(S)), zeros_like(S))


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse through the SVD, as torch.linalg.pinv: singular values at or
    below max(atol, rtol * the largest) count as zero (hermitian is accepted; the SVD serves both)."""
    U, S, Vh = svd(A, full_matrices=False)
    keep = S > _svd_cutoff(S, A.shape, atol, rtol)
    return (Vh.mT * _kept_reciprocals(S, keep).unsqueeze(-2)) @ U.mT


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values above max(atol, rtol * the largest), as torch.linalg.matrix_rank."""
    S = svdvals(A)
    return (S > _svd_cutoff(S, A.shape, atol, rtol)).sum(-1)

matmul = _C.matmul


def cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along dim, as torch.linalg.cross."""
    return _cross(input, other, dim)


def vecdot(x, y, *, dim=-1):
    """The dot product of x and y (broadcast) along `dim`, as torch.linalg.vecdot."""
    return _C.sum(_C.mul(x, y), [dim], False)


def multi_dot(tensors):
    """The product of a chain of matrices (the first and last may be 1-D), as torch.linalg.multi_dot."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ValueError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        allowed = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.dim() not in allowed:
            raise _C.InvalidArgumentError(f"multi_dot(): tensor {i} must be {' or '.join(f'{d}D' for d in allowed)} "
                                          f"but got {t.dim()}D")
    out = tensors[0]
    for t in tensors[1:]:
        out = _C.matmul(out, t)
    return out


def matrix_power(A, n):
    """A (square, or a batch of them) to the integer power n by repeated squaring, as
    torch.linalg.matrix_power; a negative power is the inverse's."""
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise _C.InvalidArgumentError("linalg.matrix_power: A must be batches of square matrices, but they are "
                                      f"{A.shape[-2] if A.dim() >= 2 else A.dim()} by {A.shape[-1] if A.dim() else 0} "
                                      "matrices")
    if n < 0:
        A, n = inv(A), -n
    result = None
    base = A
    while n:
        if n & 1:
            result = base if result is None else _C.matmul(result, base)
        n >>= 1
        if n:
            base = _C.matmul(base, base)
    if result is None:
        return eye(A.shape[-1], dtype=A.dtype, device=A).expand(*A.shape).clone()
    return result.clone() if result is A else result


def _square_floating(A, name):
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise _C.InvalidArgumentError(f"linalg.{name}: A must be batches of square matrices, but they are "
                                      f"{A.shape[-2] if A.dim() >= 2 else A.dim()} by {A.shape[-1] if A.dim() else 0} "
                                      "matrices")
    if not A.is_floating_point():
        raise _C.InvalidArgumentError(f"linalg.{name}: Expected a floating point or complex tensor as input. Got "
                                      f"{str(A.dtype).rsplit('.', 1)[-1]}")


_EXP_TERMS = 18  # Taylor terms of exp(A / 2^s) for ||A / 2^s||_1 <= 1/2: a remainder below 2^-19 / 19!


def matrix_exp(A):
    """The matrix exponential of A (square, or a batch of them), as torch.linalg.matrix_exp: scaling and
    squaring around a Taylor polynomial, matrix products only (so it runs, and is differentiated, wherever
    matmul does). The batch shares one scaling, from its largest 1-norm (read on the host)."""
    _square_floating(A, "matrix_exp")
    if A.numel() == 0:
        return A.clone()
    norm = float(A.detach().abs().sum(-2).amax())  # the largest column sum: the 1-norm, batch-wide
    squarings = max(0, int(np.ceil(np.log2(norm / 0.5)))) if norm > 0.5 else 0
    X = A / float(2 ** squarings) if squarings else A
    result = eye(A.shape[-1], dtype=A.dtype, device=A).expand(*A.shape)
    for k in range(_EXP_TERMS, 0, -1):  # Horner: I + X/1 (I + X/2 (I + ... (I + X/18)))
        result = eye(A.shape[-1], dtype=A.dtype, device=A) + _C.matmul(X, result) / float(k)
    for _ in range(squarings):
        result = _C.matmul(result, result)
    return result


def tensorinv(A, ind=2):
    """The inverse of A seen as a map from its first `ind` dims to the rest, as torch.linalg.tensorinv: shape
    A.shape[ind:] + A.shape[:ind]."""
    if ind <= 0:
        raise _C.InvalidArgumentError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = A.shape[:ind], A.shape[ind:]
    if int(np.prod(rows)) != int(np.prod(cols)):
        raise _C.InvalidArgumentError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                                      f"prod(self.shape[:ind]), but got {int(np.prod(cols))} != {int(np.prod(rows))}")
    return inv(A.reshape(int(np.prod(rows)), int(np.prod(cols)))).reshape(*cols, *rows)


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.dim()) = B, as torch.linalg.tensorsolve: X has shape A.shape[B.dim():] (after
    `dims` of A are moved to the end)."""
    if dims is not None:
        dims = [d % A.dim() for d in dims]
        A = A.permute(*[d for d in range(A.dim()) if d not in dims], *dims)
    rows, cols = A.shape[:B.dim()], A.shape[B.dim():]
    n = int(np.prod(B.shape))
    if int(np.prod(cols)) != n or int(np.prod(rows)) != n:  # (torch's message names B's size as the second)
        raise _C.InvalidArgumentError("Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                                      f"prod(self.shape[:other.ndim]), but got {int(np.prod(cols))} != {n}")
    return solve(A.reshape(n, n), B.reshape(n)).reshape(*cols)


def _unsupported(what, numpy_name):
    raise _C.NotSupportedError(
        f"linalg.{what}: PyFlame has no kernel for it yet (it has inv, solve, solve_triangular, cholesky, det, "
        f"slogdet, lu, qr, eigh, svd, pinv and lstsq, on the CPU); convert with .numpy() and use "
        f"{numpy_name} (then pf.tensor(...) the result), or use torch.linalg through torch.from_dlpack")


# torch.linalg's decompositions and solvers, and what to use instead.
_ALTERNATIVES = {
    "ldl_factor": "scipy.linalg.ldl", "ldl_factor_ex": "scipy.linalg.ldl",
    "ldl_solve": "scipy.linalg.ldl", "householder_product": "scipy.linalg.qr",
}


def _make_unsupported(name, alternative):
    def fn(*args, **kwargs):
        _unsupported(name, alternative)

    fn.__name__ = name
    fn.__doc__ = f"Not supported (no kernel in PyFlame yet): raises NotSupportedError; use {alternative}."
    return fn


for _name, _alt in _ALTERNATIVES.items():
    globals()[_name] = _make_unsupported(_name, _alt)
del _name, _alt


def _complex_results(name):
    def fn(*args, **kwargs):
        raise _C.NotSupportedError(
            f"linalg.{name}: the eigenvalues of a general matrix are complex, and PyFlame has no complex dtypes; for "
            f"symmetric matrices use pf.linalg.eigh (or eigvalsh), else numpy.linalg.{name} on .numpy()")

    fn.__name__ = name
    fn.__doc__ = "Not supported (complex results; PyFlame has no complex dtypes): raises NotSupportedError."
    return fn


eig, eigvals = _complex_results("eig"), _complex_results("eigvals")
