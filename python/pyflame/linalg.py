"""pf.linalg: torch.linalg's norms (vector_norm and matrix_norm are ops of the table) and products
(compositions of table ops).

Decompositions and solvers (inv, solve, eigh, svd, qr, cholesky, det, ...)
have no kernels in PyFlame: they raise pf.NotSupportedError naming the NumPy
or SciPy function to use on `.numpy()` of the tensor (docs/ops.md).
"""

from . import _C
from ._creation import eye
from ._misc_api import cross as _cross
from ._linalg import linalg_norm as norm, matrix_norm, vector_norm  # noqa: F401

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
    """A (square, or a batch of them) to the integer power n >= 0 by repeated squaring, as
    torch.linalg.matrix_power; negative powers need an inverse: NotSupportedError."""
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise _C.InvalidArgumentError("linalg.matrix_power: A must be batches of square matrices, but they are "
                                      f"{A.shape[-2] if A.dim() >= 2 else A.dim()} by {A.shape[-1] if A.dim() else 0} "
                                      "matrices")
    if n < 0:
        _unsupported("matrix_power with a negative exponent", "matrix_power")
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


def _unsupported(what, numpy_name):
    raise _C.NotSupportedError(
        f"linalg.{what}: PyFlame has no matrix decompositions or solvers; convert with .numpy() and use "
        f"{numpy_name} (then pf.tensor(...) the result), or use torch.linalg through torch.from_dlpack")


# torch.linalg's decompositions and solvers, and what to use instead.
_ALTERNATIVES = {
    "inv": "numpy.linalg.inv", "inv_ex": "numpy.linalg.inv", "solve": "numpy.linalg.solve",
    "solve_ex": "numpy.linalg.solve", "solve_triangular": "scipy.linalg.solve_triangular",
    "eigh": "numpy.linalg.eigh", "eigvalsh": "numpy.linalg.eigvalsh", "eig": "numpy.linalg.eig",
    "eigvals": "numpy.linalg.eigvals", "svd": "numpy.linalg.svd", "svdvals": "numpy.linalg.svd(compute_uv=False)",
    "qr": "numpy.linalg.qr", "cholesky": "numpy.linalg.cholesky", "cholesky_ex": "numpy.linalg.cholesky",
    "det": "numpy.linalg.det", "slogdet": "numpy.linalg.slogdet", "lstsq": "numpy.linalg.lstsq",
    "pinv": "numpy.linalg.pinv", "matrix_rank": "numpy.linalg.matrix_rank", "cond": "numpy.linalg.cond",
    "lu": "scipy.linalg.lu", "lu_factor": "scipy.linalg.lu_factor", "lu_factor_ex": "scipy.linalg.lu_factor",
    "lu_solve": "scipy.linalg.lu_solve", "ldl_factor": "scipy.linalg.ldl", "ldl_factor_ex": "scipy.linalg.ldl",
    "ldl_solve": "scipy.linalg.ldl", "matrix_exp": "scipy.linalg.expm",
    "householder_product": "scipy.linalg.qr", "tensorinv": "numpy.linalg.tensorinv",
    "tensorsolve": "numpy.linalg.tensorsolve",
}


def _make_unsupported(name, alternative):
    def fn(*args, **kwargs):
        _unsupported(name, alternative)

    fn.__name__ = name
    fn.__doc__ = f"Not supported (no decompositions in PyFlame): raises NotSupportedError; use {alternative}."
    return fn


for _name, _alt in _ALTERNATIVES.items():
    globals()[_name] = _make_unsupported(_name, _alt)
del _name, _alt
