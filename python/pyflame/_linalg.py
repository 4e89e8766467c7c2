"""Reductions, products and norms as PyTorch has them, composed of table ops.

all/any/var_mean/std_mean and the matrix products (mm, bmm, mv, dot, outer)
are compositions of the op table's reductions, elementwise ops, views and
batch_matmul, so they run on every device and their derivatives come from the
table's. einsum, tensordot, logsumexp, nansum, nanmean, count_nonzero, addmm &
co. and pf.linalg's vector and matrix norms are composite ops of the table
(one node each, with a registered decomposition); norm,
linalg.norm and dist choose between the norms. The top-level forms of pf.linalg's
solvers and decompositions (det, inverse, svd with torch.svd's V, pinverse, ...) are
here too.
"""

import builtins
from collections import namedtuple

from . import _C


def _shape_str(t):
    return "x".join(str(s) for s in t.shape)


def _dtype_name(d):
    return str(d).rsplit(".", 1)[-1]


def _torch_dtype_name(d):
    # PyTorch's error messages name scalar types in C++ spelling.
    return {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
            "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}[_dtype_name(d)]


def _wrap(d, ndim, fn):
    n = builtins.max(ndim, 1)
    if not isinstance(d, int) or isinstance(d, bool):
        raise TypeError(f"{fn}(): dim must be an int or a tuple of ints, got {type(d).__name__}")
    if not -n <= d < n:
        raise IndexError(f"{fn}(): dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})")
    return d % n


def _dims(dim, ndim, fn):
    """dim (None, an int or a sequence) as a sorted tuple of non-negative dims (None: every dim)."""
    if dim is None:
        return tuple(range(ndim))
    ds = [dim] if isinstance(dim, int) else list(dim)
    out = sorted(_wrap(d, ndim, fn) for d in ds)
    if len(set(out)) != len(out):
        raise ValueError(f"{fn}(): dim {tuple(ds)} names a dimension more than once")
    return tuple(out) if ndim else ()


def _reduce_arg(dims):
    """The table reductions' dim argument for a tuple of dims (() of a 0-d tensor: None)."""
    return list(dims) if dims else None


# ----------------------------------------------------------------- reductions


def _truth(name, empty_value):
    def reduce(input, dim=None, keepdim=False):
        dims = _dims(dim, input.dim(), name)
        # all(): no zero among the elements; any(): some non-zero (NaN counts as true, as in PyTorch).
        hits = _C.sum(_C.eq(input, 0) if name == "all" else _C.ne(input, 0), _reduce_arg(dims), keepdim)
        r = _C.eq(hits, 0) if name == "all" else _C.ne(hits, 0)
        # PyTorch keeps uint8 for uint8 inputs (the result of the old byte masks).
        return r.to(_C.dtype.uint8) if input.dtype == _C.dtype.uint8 else r

    reduce.__name__ = name
    reduce.__doc__ = (f"{name}(input, dim=None, keepdim=False) -> Tensor: whether {name} elements over `dim` "
                      f"(an int, a tuple or None: every dim) are non-zero; bool (uint8 for uint8), as torch.{name}. "
                      f"Over no elements: {empty_value}.")
    return reduce


all = _truth("all", True)  # noqa: A001
any = _truth("any", False)  # noqa: A001


# Ops of the table (include/pyflame/linalg_ops.h); their Tensor methods are bound with them.
logsumexp = _C.logsumexp
nansum = _C.nansum
nanmean = _C.nanmean
count_nonzero = _C.count_nonzero


def _moments_mean(name, moment):
    def fn(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
        spread = moment(input, dim, unbiased, keepdim, correction=correction)
        mean_dim = None if isinstance(dim, bool) else dim  # var_mean(x, unbiased): PyTorch's second form
        if mean_dim is not None and not isinstance(mean_dim, int):
            mean_dim = list(mean_dim)
        return spread, _C.mean(input, mean_dim, keepdim)

    fn.__name__ = name
    fn.__doc__ = (f"{name}(input, dim=None, unbiased=None, keepdim=False, *, correction=None) -> "
                  f"({name.split('_')[0]}, mean), as torch.{name}.")
    return fn


var_mean = _moments_mean("var_mean", _C.var)
std_mean = _moments_mean("std_mean", _C.std)


# ----------------------------------------------------------------- norms


# torch.linalg's norms are ops of the table (include/pyflame/linalg_ops.h): the functions below choose one.
vector_norm = _C.linalg_vector_norm
matrix_norm = _C.linalg_matrix_norm


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm for one dim (or none and a 1-D input), a matrix norm for two."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise ValueError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.dim() == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.dim() == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise _C.InvalidArgumentError("linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                                  f"{A.dim()}D.")


def dist(input, other, p=2):
    """The p-norm of input - other (broadcast), as torch.dist."""
    return vector_norm(_C.sub(input, other), p)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: 'fro' (or None) is the 2-norm over `dim`, a number p the vector p-norm, 'nuc' the nuclear norm
    over two dims (the sum of the singular values)."""
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            return vector_norm(input, 2, dim, keepdim, dtype=dtype)
        return matrix_norm(input, p, tuple(range(input.dim())) if dim is None else dim, keepdim, dtype=dtype)
    return vector_norm(input, 2.0 if p is None else p, dim, keepdim, dtype=dtype)


# ----------------------------------------------------------------- products


def _same_dtype(a, b, message):
    if a.dtype != b.dtype:
        raise _C.InvalidTypeError(message.format(_torch_dtype_name(a.dtype).lower(), _torch_dtype_name(b.dtype).lower(),
                                        _torch_dtype_name(a.dtype), _torch_dtype_name(b.dtype)))


def _checked_matmul(input, other, size_message, dtype_message):
    """input @ other for operands of the right ranks, with torch's errors: `size_message()` when input's last
    size is not other's first (a callable, so that the message is only built for the error), then
    `dtype_message` (as _same_dtype's) when their dtypes differ."""
    if input.shape[-1] != other.shape[0]:
        raise _C.InvalidArgumentError(size_message())
    _same_dtype(input, other, dtype_message)
    return _C.matmul(input, other)


def mm(input, mat2):
    """The matrix product of two 2-D tensors of one dtype, as torch.mm."""
    if input.dim() != 2:
        raise _C.InvalidArgumentError("self must be a matrix")
    if mat2.dim() != 2:
        raise _C.InvalidArgumentError("mat2 must be a matrix")
    return _checked_matmul(
        input, mat2,
        lambda: f"mat1 and mat2 shapes cannot be multiplied ({_shape_str(input)} and {_shape_str(mat2)})",
        "expected m1 and m2 to have the same dtype, but got: {0} != {1}")


def _check_bmm(input, mat2):
    if input.dim() != 3:
        raise _C.InvalidArgumentError(f"batch1 must be a 3D tensor, got shape {list(input.shape)}")
    if mat2.dim() != 3:
        raise _C.InvalidArgumentError(f"batch2 must be a 3D tensor, got shape {list(mat2.shape)}")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise _C.InvalidArgumentError("Expected size for first two dimensions of batch2 tensor to be: "
                                      f"[{input.shape[0]}, {input.shape[2]}] but got: [{mat2.shape[0]}, "
                                      f"{mat2.shape[1]}].")
    _same_dtype(input, mat2, "expected scalar type {2} but found {3}")


def bmm(input, mat2):
    """Batched matrix products of two 3-D tensors with the same batch size and one dtype, as torch.bmm."""
    _check_bmm(input, mat2)
    return _C.batch_matmul(input, mat2)


def mv(input, vec):
    """The product of a 2-D matrix and a 1-D vector of one dtype, as torch.mv."""
    if input.dim() != 2 or vec.dim() != 1:
        raise _C.InvalidArgumentError(f"vector + matrix @ vector expected, got {input.dim()}D matrix and {vec.dim()}D "
                                      "vector")
    return _checked_matmul(
        input, vec,
        lambda: f"size mismatch, got input ({input.shape[0]}), mat ({_shape_str(input)}), vec ({vec.shape[0]})",
        "expected scalar type {2} but found {3}")


def dot(input, other):
    """The inner product of two 1-D tensors of one dtype and size, as torch.dot."""
    if input.dim() != 1 or other.dim() != 1:
        raise _C.InvalidArgumentError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    return _checked_matmul(
        input, other,
        lambda: (f"inconsistent tensor size, expected tensor [{input.shape[0]}] and src [{other.shape[0]}] to have "
                 f"the same number of elements, but got {input.shape[0]} and {other.shape[0]} elements respectively"),
        "dot : expected both vectors to have same dtype, but found {2} and {3}")


def vdot(input, other):
    """torch.vdot: dot, the first operand conjugated (PyFlame's tensors are real)."""
    return dot(input, other)


def outer(input, vec2):
    """The outer product of two 1-D tensors (dtypes promoted), as torch.outer."""
    for name, t in (("self", input), ("vec2", vec2)):
        if t.dim() != 1:
            raise _C.InvalidArgumentError(f"outer: Expected 1-D argument {name}, but got {t.dim()}-D")
    return _C.mul(input.reshape([-1, 1]), vec2.reshape([1, -1]))


ger = outer


def inner(input, other):
    """torch.inner: sums over the last dims of both (a number times a tensor for 0-d operands)."""
    if input.dim() == 0 or other.dim() == 0:
        return _C.mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise _C.InvalidArgumentError(f"inner() the last dimension must match on both input tensors but got shapes "
                                      f"{list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([input.dim() - 1], [other.dim() - 1]))


# beta * input + alpha * a product: composite ops of the table (bound with their Tensor methods).
addmm, addmv, addr, baddbmm, addbmm = _C.addmm, _C.addmv, _C.addr, _C.baddbmm, _C.addbmm


def tensordot(a, b, dims=2):
    """Sums of products over dims of a and b, as torch.tensordot: dims an int (a's last and b's first dims)
    or a pair of lists ([a's dims], [b's dims])."""
    if isinstance(dims, int):
        if dims < 0:
            raise ValueError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > builtins.min(a.dim(), b.dim()):
            raise _C.InvalidArgumentError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        da, db = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    return _C.tensordot(a, b, da, db)


# ----------------------------------------------------------------- einsum


def einsum(equation, *operands):
    """torch.einsum: sums of products named by subscripts ('ij,jk->ik', 'bij,bjk->bik', 'ii->i',
    '...ij,...jk->...ik'), with implicit outputs and broadcasting. An op of the table (one node), whose
    decomposition contracts the operands left to right, each pair as one batch_matmul, and takes repeated
    subscripts as diagonals."""
    if not isinstance(equation, str):
        raise _C.NotSupportedError("einsum(): the sublist format (einsum(op1, [0, 1], op2, [1, 2])) is not "
                                   "supported; pass an equation string such as 'ij,jk->ik'")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return _C.einsum(equation, list(operands))


# ----------------------------------------------------------------- searching


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value of input among the 1-D sorted `boundaries`, as torch.bucketize."""
    if boundaries.dim() != 1:
        raise _C.InvalidArgumentError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    return _C.searchsorted(boundaries, input, out_int32=out_int32, right=right)


for _name in ("all", "any", "norm", "dist", "mm", "bmm", "mv", "dot", "vdot", "outer", "ger", "inner"):
    setattr(_C.Tensor, _name, globals()[_name])
del _name

from . import linalg  # noqa: E402  (pf.linalg reads this module's functions)
from ._creation import zeros_like  # noqa: E402

# torch's top-level and Tensor forms of pf.linalg's functions.
det, slogdet, cholesky = linalg.det, linalg.slogdet, linalg.cholesky
inverse, matrix_power, matrix_exp, logdet = linalg.inv, linalg.matrix_power, linalg.matrix_exp, linalg.logdet
_SvdResult = namedtuple("svd", ["U", "S", "V"])


def svd(input, some=True, compute_uv=True):
    """(U, S, V) with input = U diag(S) V^T, as torch.svd (V, not linalg.svd's Vh; some=True: the
    reduced factors); compute_uv=False gives zero-filled U and V, as torch's."""
    U, S, Vh = linalg.svd(input, full_matrices=not some)
    if not compute_uv:
        U, Vh = zeros_like(U), zeros_like(Vh)
    return _SvdResult(U, S, Vh.mT)


def qr(input, some=True):
    """(Q, R) with input = Q R, as torch.qr (some=True: the reduced factors)."""
    return linalg.qr(input, "reduced" if some else "complete")


def pinverse(input, rcond=1e-15):
    """The pseudo-inverse with singular values below rcond times the largest as zeros, as torch.pinverse."""
    return linalg.pinv(input, rtol=rcond)

for _name in ("det", "slogdet", "logdet", "svd", "qr", "cholesky", "inverse", "pinverse", "matrix_power",
              "matrix_exp"):
    setattr(_C.Tensor, _name, globals()[_name])
del _name
