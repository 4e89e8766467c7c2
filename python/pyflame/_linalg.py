"""Reductions, products and norms as PyTorch has them, composed of table ops.

all/any/var_mean/std_mean and the matrix
products (mm, bmm, mv, dot, outer, einsum, tensordot) are
compositions of the op table's reductions, elementwise ops, views and
batch_matmul, so they run on every device and their derivatives come from the
table's. logsumexp, nansum, nanmean, count_nonzero, addmm & co. and pf.linalg's
vector and matrix norms are composite ops of the table (logsumexp, nansum, nanmean,
count_nonzero, addmm, addmv, addr, baddbmm, addbmm, linalg_vector_norm, linalg_matrix_norm); norm,
linalg.norm and dist choose between the norms. Decompositions (inv, solve,
svd, ...) have no kernels: pf.linalg raises NotSupportedError for them.
"""

import builtins
import math

from . import _C
from ._creation import eye


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
    """torch.norm: 'fro' (or None) is the 2-norm over `dim`, a number p the vector p-norm; 'nuc' is not supported."""
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


def _einsum_parse(equation, operands):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError("einsum(): more operands were provided than specified in the equation"
                         if len(operands) > len(terms) else
                         "einsum(): fewer operands were provided than specified in the equation")
    ell_dims = 0
    parsed = []
    for k, (term, t) in enumerate(zip(terms, operands)):
        has_ell = "..." in term
        letters = term.replace("...", "")
        if term.count("...") > 1 or "." in letters:
            raise ValueError(f"einsum(): found '.' for operand {k} that is not part of any ellipsis")
        for ch in letters:
            if not ch.isalpha() or not ch.isascii():
                raise ValueError(f"einsum(): invalid subscript given at index {eq.index(ch)} in the equation "
                                 "string, subscripts must be in [a-zA-Z]")
        if (len(letters) > t.dim()) or (not has_ell and len(letters) != t.dim()):
            raise _C.InvalidArgumentError(f"einsum(): the number of subscripts in the equation ({len(letters)}) "
                                          f"{'is more than' if has_ell else 'does not match'} the number of dimensions "
                                          f"({t.dim()}) for operand "
                                          f"{k}{'' if has_ell else ' and no ellipsis was given'}")
        n_ell = t.dim() - len(letters) if has_ell else 0
        ell_dims = builtins.max(ell_dims, n_ell)
        parsed.append((term, n_ell))
    # Ellipsis dims become labels of their own, right-aligned: an operand with
    # fewer of them broadcasts over the others, as a label it lacks.
    ell = [f"...{i}" for i in range(ell_dims)]
    labels = []
    for term, n_ell in parsed:
        before, _, after = term.partition("...")
        labels.append(list(before) + (ell[ell_dims - n_ell:] if "..." in term else []) + list(after))
    if arrow:
        if rhs.count("...") > 1:
            raise ValueError("einsum(): found '.' for output that is not part of any ellipsis")
        before, has_ell, after = rhs.partition("...")
        out = list(before) + (ell if has_ell else []) + list(after)
        for ch in before + after:
            if not ch.isalpha():
                raise ValueError(f"einsum(): invalid subscript given at index {eq.index(ch)} in the equation "
                                 "string, subscripts must be in [a-zA-Z]")
            if (before + after).count(ch) > 1:
                raise ValueError(f"einsum(): output subscript {ch} appears more than once in the output")
            if not builtins.any(ch in ls for ls in labels):
                raise ValueError(f"einsum(): output subscript {ch} does not appear in the equation for any input "
                                 "operand")
    else:
        counts = {}
        for ls in labels:
            for ch in ls:
                if not ch.startswith("..."):
                    counts[ch] = counts.get(ch, 0) + 1
        out = ell + sorted(ch for ch, n in counts.items() if n == 1)
    return labels, out


def _einsum_diagonal(t, labels):
    """Takes the diagonal of every label repeated in one operand ('ii' -> 'i')."""
    while True:
        seen = {}
        for pos, ch in enumerate(labels):
            if ch in seen:
                i = seen[ch]
                if t.shape[i] != t.shape[pos]:
                    raise _C.InvalidArgumentError(f"einsum(): subscript {ch} is repeated for operand but the sizes "
                                                  f"don't match, {t.shape[i]} != {t.shape[pos]}")
                n = t.shape[i]
                mask_shape = [1] * t.dim()
                mask_shape[i], mask_shape[pos] = n, n
                eye_mask = eye(n, dtype=_C.dtype.bool, device=t).reshape(mask_shape)
                # where, not a product with the identity: off-diagonal NaN or inf must not leak in.
                t = _C.sum(_C.where(eye_mask, t, 0), [pos], False, dtype=t.dtype)
                labels = labels[:pos] + labels[pos + 1:]
                break
            seen[ch] = pos
        else:
            return t, labels


def _einsum_pair(a, la, b, lb, keep):
    """Contracts two operands over their shared labels that `keep` does not hold: one batch_matmul."""
    sizes = {}
    for t, ls in ((a, la), (b, lb)):
        for ch, n in zip(ls, t.shape):
            if sizes.get(ch, 1) != 1 and n != 1 and sizes[ch] != n:
                raise _C.InvalidArgumentError(f"einsum(): operands do not broadcast with remapped shapes: subscript "
                                              f"{ch.replace('...', 'ellipsis dim ')} has sizes {sizes[ch]} and {n}")
            if sizes.get(ch, 1) == 1:  # a size-1 dim broadcasts (an empty one does not)
                sizes[ch] = n
    batch = [ch for ch in la if ch in lb and ch in keep]
    contract = [ch for ch in la if ch in lb and ch not in keep]
    left = [ch for ch in la if ch not in lb]
    right = [ch for ch in lb if ch not in la]

    def arrange(t, ls, order):
        t = t.permute(*[ls.index(ch) for ch in order]) if order != ls else t
        target = [sizes[ch] for ch in order]
        return t.expand(*target) if list(t.shape) != target else t

    n = lambda chs: math.prod(sizes[ch] for ch in chs)  # noqa: E731
    A = arrange(a, la, batch + left + contract).reshape([n(batch), n(left), n(contract)])
    B = arrange(b, lb, batch + contract + right).reshape([n(batch), n(contract), n(right)])
    r = _C.batch_matmul(A, B).reshape([sizes[ch] for ch in batch + left + right])
    return r, batch + left + right


def einsum(equation, *operands):
    """torch.einsum: sums of products named by subscripts ('ij,jk->ik', 'bij,bjk->bik', 'ii->i',
    '...ij,...jk->...ik'), with implicit outputs and broadcasting. Operands are contracted left to right,
    each pair as one batch_matmul; repeated subscripts take diagonals."""
    if not isinstance(equation, str):
        raise _C.NotSupportedError("einsum(): the sublist format (einsum(op1, [0, 1], op2, [1, 2])) is not "
                                   "supported; pass an equation string such as 'ij,jk->ik'")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum(): must provide at least one operand")
    labels, out = _einsum_parse(equation, operands)
    items = []
    for t, ls in zip(operands, labels):
        t, ls = _einsum_diagonal(t, ls)
        items.append((t, ls))

    def needed(rest):
        return set(out).union(*[set(ls) for _, ls in rest])

    def sum_unneeded(t, ls, rest):
        drop = [i for i, ch in enumerate(ls) if ch not in needed(rest)]
        if not drop:
            return t, ls
        return _C.sum(t, drop, False), [ch for i, ch in enumerate(ls) if i not in drop]

    t, ls = sum_unneeded(*items[0], items[1:])
    for k in range(1, len(items)):
        b, lb = sum_unneeded(*items[k], items[k + 1:] + [(t, ls)])
        t, ls = _einsum_pair(t, ls, b, lb, needed(items[k + 1:]))
    t, ls = sum_unneeded(t, ls, [])
    if ls != out:
        t = t.permute(*[ls.index(ch) for ch in out])
    return t


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

# torch's top-level and Tensor forms of pf.linalg's functions.
det, slogdet, svd, qr, cholesky = linalg.det, linalg.slogdet, linalg.svd, linalg.qr, linalg.cholesky
inverse, pinverse, matrix_power, matrix_exp = linalg.inv, linalg.pinv, linalg.matrix_power, linalg.matrix_exp
logdet = linalg._make_unsupported("logdet", "numpy.linalg.slogdet")
for _name in ("det", "slogdet", "logdet", "svd", "qr", "cholesky", "inverse", "pinverse", "matrix_power",
              "matrix_exp"):
    setattr(_C.Tensor, _name, globals()[_name])
del _name
