"""Sorting and selection as PyTorch has them, over the op table's sort and nonzero.

sort is one op (a kernel on each device, always stable: ties keep index
order); topk, kthvalue and median are ops of the table whose decompositions
pick from its result, so their values get sort's gradient; here they keep
torch's argument handling and exception classes. unique and unique_consecutive
compare neighbours of the (sorted) flattened input; nonzero's count comes from
cumsum. Results of several tensors are named tuples with .values/.indices, as
torch.return_types.
"""

import math
from collections import namedtuple

from . import _C
from ._creation import arange, full, zeros_like

_sort, _nonzero, _where = _C.sort, _C.nonzero, _C.where

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])


class SelectionRangeError(IndexError, RuntimeError):
    """k outside its dim in topk/kthvalue: PyTorch raises RuntimeError, an index error by nature."""


def _no_out(name, out):
    if out is not None:
        raise TypeError(f"{name}(): out= is not supported; use the returned tensors")


def _size(input, dim, name):
    """The wrapped dim and its size (a 0-d tensor counts as one element along dim 0 or -1)."""
    ndim = input.dim()
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{name}: dimension {dim} is out of range for a tensor of {ndim} dimension(s) "
                         f"(expected in [{-n}, {n - 1}])")
    dim %= n
    return dim, (input.shape[dim] if ndim else 1)


def _not_bool(input, name):
    if input.dtype == _C.dtype.bool:
        raise TypeError(f"{name}: bool tensors are not supported (as in PyTorch); convert with .to(pf.uint8)")


def _selection_dim(name, input, dim, k, lowest_k, out, what):
    """The wrapped dim of a selection of the k-th entry (topk, kthvalue), after torch's checks."""
    _no_out(name, out)
    _not_bool(input, name)
    dim, n = _size(input, dim, name)
    if not lowest_k <= k <= n:
        raise SelectionRangeError(f"{what} k={k} out of range for dimension {dim} of size {n}")
    return dim


def sort(input, dim=-1, descending=False, *, stable=False, out=None):
    """(values, indices) of input sorted along dim, as torch.sort. NaN sorts above every
    number; ties keep index order whatever `stable` says (every sort here is stable)."""
    _no_out("sort", out)
    return SortResult(*_sort(input, dim, bool(descending), bool(stable)))


def argsort(input, dim=-1, descending=False, *, stable=False):
    """The indices that sort input along dim, as torch.argsort."""
    return _sort(input, dim, bool(descending), bool(stable))[1]


def msort(input, *, out=None):
    """input sorted along its first dim, as torch.msort."""
    _no_out("msort", out)
    return _sort(input, 0, False, False)[0]


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """The k largest (smallest) entries along dim and their indices, as torch.topk.
    The result is always sorted (torch leaves the order open when sorted=False)."""
    dim = _selection_dim("topk", input, dim, k, 0, out, "topk: selected index")
    return TopkResult(*_C.topk(input, k, dim, bool(largest)))


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The k-th smallest entry along dim (k from 1) and its index, as torch.kthvalue."""
    dim = _selection_dim("kthvalue", input, dim, k, 1, out, "kthvalue(): selected number")
    return KthvalueResult(*_C.kthvalue(input, k, dim, bool(keepdim)))


def median(input, dim=None, keepdim=False, *, out=None):
    """As torch.median: median(input) is the lower median of all entries; median(input, dim)
    gives (values, indices) along dim. A NaN makes the median NaN (the first NaN's index)."""
    _no_out("median", out)
    _not_bool(input, "median")
    if dim is None:
        if keepdim:
            raise TypeError("median(): keepdim needs a dim (median(x, dim, keepdim=True))")
        flat = input.reshape(-1)
        if flat.numel() == 0:
            if not input.dtype.is_floating_point:
                raise IndexError("median(): the median of an empty integer tensor is undefined")
            return full((), float("nan"), dtype=input.dtype, device=input)
        return median(flat, 0).values
    dim, n = _size(input, dim, "median")
    if n == 0:
        raise IndexError(f"median(): Expected reduction dim {dim} to have non-zero size.")
    return MedianResult(*_C.median(input, dim, bool(keepdim)))


def _groups(flat, first):
    """Values, and optionally group ids and counts, of the runs of equal neighbours of a 1-D tensor.
    `first`: bool, True where a run starts. NaNs never equal each other, as in torch.unique."""
    ids = _C.sub(_C.cumsum(first, 0), 1)
    n = flat.shape[0]
    starts = _nonzero(first).reshape(-1)
    ends = _C.cat([starts[1:], full((min(n, 1),), n, dtype=_C.dtype.int64, device=flat)])
    return flat[first], ids, _C.sub(ends, starts)


def _run_starts(flat):
    n = flat.shape[0]
    head = full((min(n, 1),), True, dtype=_C.dtype.bool, device=flat)
    return _C.cat([head, _C.ne(flat[1:], flat[:-1])])


def _result(values, inverse, counts, return_inverse, return_counts):
    out = (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ())
    return out if len(out) > 1 else values


def _unique_slices(input, dim, sort, return_inverse, return_counts):
    """unique/unique_consecutive along `dim`: the distinct slices (the rows of input with dim moved first
    and the rest flattened), sorted lexicographically by stable sorts from the last column to the first."""
    if input.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    if not -input.dim() <= dim < input.dim():
        raise IndexError(f"Dimension out of range (expected to be in range of [{-input.dim()}, {input.dim() - 1}], "
                         f"but got {dim})")
    moved = input.movedim(dim, 0)
    if 0 in tuple(moved.shape[1:]):
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    n = moved.shape[0]
    rows = moved.reshape(n, math.prod(moved.shape[1:]))
    order = arange(n, dtype=_C.dtype.int64, device=input.device)
    if sort:
        for c in reversed(range(rows.shape[1])):
            _, perm = _sort(_C.select(rows.index_select(0, order), 1, c), 0, False, True)
            order = order.index_select(0, perm)
    ordered = rows.index_select(0, order)
    head = full((min(n, 1),), True, dtype=_C.dtype.bool, device=input)
    first = _C.cat([head, _C.ne(ordered[1:], ordered[:-1]).any(1)])
    uniq, ids, counts = _groups(ordered, first)
    out = uniq.reshape((uniq.shape[0],) + tuple(moved.shape[1:])).movedim(0, dim)
    inverse = _C.scatter(zeros_like(order), 0, order, ids) if return_inverse else None
    return _result(out, inverse, counts, return_inverse, return_counts)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct entries of input (flattened), sorted, as torch.unique; with return_inverse
    each entry's position among them (input's shape), with return_counts their multiplicities.
    With dim, the distinct slices along dim, sorted lexicographically (inverse and counts per slice).
    The result is sorted also for sorted=False (torch leaves the order open)."""
    if dim is not None:
        return _unique_slices(input, dim, True, return_inverse, return_counts)
    flat = input.reshape(-1)
    values, order = _sort(flat, 0, False, True)
    first = _run_starts(values)
    uniq, ids, counts = _groups(values, first)
    inverse = None
    if return_inverse:
        inverse = _C.scatter(zeros_like(order), 0, order, ids).reshape(input.shape)
    return _result(uniq, inverse, counts, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """input (flattened) with runs of equal neighbours reduced to one entry, as torch.unique_consecutive;
    with dim, runs of equal neighbouring slices along dim."""
    if dim is not None:
        return _unique_slices(input, dim, False, return_inverse, return_counts)
    flat = input.reshape(-1)
    first = _run_starts(flat)
    uniq, ids, counts = _groups(flat, first)
    return _result(uniq, ids.reshape(input.shape), counts, return_inverse, return_counts)


def nonzero(input, *, out=None, as_tuple=False):
    """The (n, input.dim()) int64 coordinates of the nonzero entries in row-major order, as
    torch.nonzero; as_tuple=True: one 1-D tensor per dim (a 0-d input counts as 1-D).
    Waits for the device: the count of entries is the result's size."""
    _no_out("nonzero", out)
    if not as_tuple:
        return _nonzero(input)
    coords = _nonzero(input if input.dim() else input.reshape(1))
    return tuple(_C.select(coords, 1, d) for d in range(coords.shape[1]))


def argwhere(input):
    """nonzero(input) as torch.argwhere."""
    return _nonzero(input)


def where(condition, input=None, other=None):
    """where(condition, input, other) picks elementwise; where(condition) is
    nonzero(condition, as_tuple=True), as torch.where."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if input is None or other is None:
        raise TypeError("where(): give both input and other, or neither (where(condition) = nonzero(as_tuple=True))")
    return _where(condition, input, other)


for _name, _fn in (("sort", sort), ("argsort", argsort), ("msort", msort), ("topk", topk), ("kthvalue", kthvalue),
                   ("median", median), ("unique", unique), ("unique_consecutive", unique_consecutive),
                   ("nonzero", nonzero), ("argwhere", argwhere)):
    setattr(_C.Tensor, _name, _fn)
del _name, _fn
