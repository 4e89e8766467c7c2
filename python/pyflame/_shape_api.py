"""PyTorch's function forms of the shape methods, the shape compositions (flip, roll, tile,
diagonal, meshgrid, ...), and the Tensor methods and type queries a PyTorch user types
(t(), mT, narrow, new_zeros, type(), uniform_, .data, ...); also pf.Size, pf.finfo and pf.iinfo.

Everything here composes the op table's views, index_select, gather, cat and where, so it runs
on every device and autograd differentiates it through those ops.
"""

import builtins
import math
import numbers
import warnings

import numpy as np

from . import _C
from ._creation import _float_dtype, empty, full, ones, rand, randn, tensor, zeros

__all__ = [
    "Size", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors", "broadcast_to",
    "cartesian_prod", "clone", "column_stack", "concat", "concatenate", "diag", "diag_embed", "diagonal", "dstack",
    "finfo", "flatten", "flip", "fliplr", "flipud", "hstack", "iinfo", "is_complex", "is_floating_point", "is_nonzero",
    "is_tensor", "meshgrid", "moveaxis", "movedim", "narrow", "numel", "ravel", "repeat_interleave", "roll", "rot90",
    "row_stack", "squeeze", "swapaxes", "swapdims", "t", "take_along_dim", "tensor_split", "tile", "trace", "unbind",
    "unflatten", "vstack",
]

# Names also bound in this module.
_builtin_type = builtins.type
_slice = builtins.slice


class Size(tuple):
    """A tensor's shape, as torch.Size: a tuple of ints (slices and sums stay Size) with numel()."""

    def __new__(cls, sizes=()):
        return tuple.__new__(cls, (int(s) for s in sizes))

    def numel(self):
        return math.prod(self)

    def __getitem__(self, key):
        r = tuple.__getitem__(self, key)
        return Size(r) if isinstance(key, _slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))

    def __repr__(self):
        return f"pyflame.Size({list(self)})"

    __str__ = __repr__

    def __reduce__(self):
        return Size, (tuple(self),)


# ---------------------------------------------------------------- argument helpers

def _wrap(dim, ndim, name="dim"):
    """dim in [-ndim, ndim) as a non-negative index (a 0-d tensor has the dims -1 and 0), IndexError otherwise."""
    n = builtins.max(ndim, 1)
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {_builtin_type(dim).__name__}")
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return int(dim) % n


def _int_args(args, what):
    """f(1, 2), f((1, 2)) and f([1, 2]) as a tuple of ints."""
    if len(args) == 1 and not isinstance(args[0], numbers.Integral) and not (
            isinstance(args[0], _C.Tensor) and args[0].dim() == 0):
        args = tuple(args[0])
    out = []
    for a in args:
        if isinstance(a, bool) or not isinstance(a, (numbers.Integral, _C.Tensor)):
            raise TypeError(f"{what} must be integers, got {_builtin_type(a).__name__}")
        out.append(int(a))
    return tuple(out)


def _dims(dims, ndim, what="dims"):
    """An int or a sequence of ints as wrapped dims, each at most once."""
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    wrapped = [_wrap(d, ndim, what) for d in dims]
    if len(set(wrapped)) != len(wrapped):
        raise _C.InvalidArgumentError(f"{what}: dim {dims} appears more than once")
    return wrapped


def _arange(n, like, start=0, step=1):
    return _C._arange(start, start + n * step, step, dtype=_C.dtype.int64, device=like)


# ---------------------------------------------------------------- views

def t(input):
    """The transpose of a matrix; tensors of fewer than 2 dims unchanged, as torch.t."""
    if input.dim() > 2:
        raise _C.InvalidArgumentError(f"t() expects a tensor with <= 2 dimensions, but self is {input.dim()}D (use "
                                      "transpose or mT)")
    return input.transpose(0, 1) if input.dim() == 2 else input.view(input.shape)


def _mT(self):
    if self.dim() < 2:
        raise _C.InvalidArgumentError("tensor.mT is only supported on matrices or batches of matrices. Got "
                                      f"{self.dim()}-D tensor.")
    return self.transpose(-2, -1)


def _H(self):
    if self.dim() not in (0, 2):
        raise _C.InvalidArgumentError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.dim()}-D "
                                      "tensor.")
    return t(self)


def narrow(input, dim, start, length):
    """input's elements start .. start+length-1 along dim, a view, as torch.narrow (start may be negative or a
    0-d integer tensor)."""
    d = _wrap(dim, input.dim())
    size = input.shape[d] if input.dim() else 1
    start, length = int(start), int(length)
    if length < 0:
        raise _C.InvalidArgumentError(f"narrow(): length must be non-negative, got {length}")
    if not -size <= start <= size:
        raise IndexError(f"narrow(): start ({start}) out of range for dimension {d} of size {size}")
    if start < 0:
        start += size
    if start + length > size:
        raise _C.InvalidArgumentError(f"narrow(): start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _C.slice(input, d, start, start + length)


def unbind(input, dim=0):
    """The slices of input along dim, as a tuple of views."""
    d = _wrap(dim, input.dim())
    return tuple(_C.select(input, d, i) for i in range(input.shape[d]))


def ravel(input):
    """The elements in row-major order, 1-D: a view where the layout allows, else a copy (torch.ravel)."""
    return input.reshape(-1)


def tensor_split(input, indices_or_sections, dim=0):
    """Views of input along dim, as torch.tensor_split: n sections (an int, or a 0-d integer tensor) whose sizes
    differ by at most one, the first ones longer; or the pieces between indices (a sequence, or a 1-D integer
    tensor), each cut as input[i:j] would be."""
    d = _wrap(dim, input.dim())
    size = input.shape[d]
    if isinstance(indices_or_sections, _C.Tensor):
        if indices_or_sections.dtype.is_floating_point or indices_or_sections.dim() > 1:
            raise _C.InvalidArgumentError("tensor_split(): indices_or_sections must be an integer tensor with 0 or 1 "
                                          f"dims, got {indices_or_sections.dtype} of {indices_or_sections.dim()} dims")
        indices_or_sections = (indices_or_sections.item() if indices_or_sections.dim() == 0
                               else indices_or_sections.tolist())
    if isinstance(indices_or_sections, numbers.Integral):
        n = int(indices_or_sections)
        if n <= 0:
            raise _C.InvalidArgumentError(f"number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        bounds = [0]
        for i in range(n):
            bounds.append(bounds[-1] + q + (i < r))
    else:
        bounds = [0, *(int(i) for i in indices_or_sections), None]
    lead = (_slice(None),) * d
    return tuple(input[lead + (_slice(a, b),)] for a, b in zip(bounds, bounds[1:]))


def unflatten(input, dim, sizes):
    """Splits dim into `sizes` (one entry may be -1): a view, as torch.unflatten."""
    d = _wrap(dim, input.dim())
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise _C.InvalidArgumentError("unflatten(): sizes must be non-empty")
    known = math.prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1 or (-1 not in sizes and known != input.shape[d]) or (
            -1 in sizes and (known == 0 or input.shape[d] % known)):
        raise _C.InvalidArgumentError(f"unflatten(): sizes {sizes} don't multiply up to the size of dim {dim} "
                                      f"({input.shape[d]})")
    sizes = tuple(input.shape[d] // known if s == -1 else s for s in sizes)
    return input.view(tuple(input.shape[:d]) + sizes + tuple(input.shape[d + 1:]))


def movedim(input, source, destination):
    """Moves the dims `source` to the positions `destination` (ints or sequences), the others keeping their order."""
    n = input.dim()
    src, dst = _dims(source, n, "movedim source"), _dims(destination, n, "movedim destination")
    if len(src) != len(dst):
        raise _C.InvalidArgumentError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should "
                                      f"contain the same number of dims as destination ({list(dst)} dims)")
    perm = [-1] * n
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(n) if i not in src)
    return input.permute([p if p != -1 else next(rest) for p in perm])


def swapaxes(input, axis0, axis1):
    return input.transpose(axis0, axis1)


def squeeze(input, dim=None):
    """Removes the dims of size 1 among `dim` (None: all; an int or a tuple), as torch.squeeze."""
    if dim is not None and not isinstance(dim, numbers.Integral) and len(dim) == 0:
        return input.view(input.shape)
    return _squeeze(input, dim)


_squeeze = _C.Tensor.squeeze


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to, as torch.broadcast_shapes."""
    shapes = [(s,) if isinstance(s, numbers.Integral) else tuple(s) for s in shapes]
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n != 1 and out[i] not in (1, n):
                raise _C.InvalidArgumentError("shape mismatch: objects cannot be broadcast to a single shape: "
                                              f"{shapes}")
            if n != 1:
                out[i] = n
    return Size(out)


def broadcast_to(input, size):
    return input.expand(tuple(size))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views), as torch.broadcast_tensors."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = broadcast_shapes(*(x.shape for x in tensors))
    return tuple(x.expand(shape) for x in tensors)


def _atleast(n, expand, tensors):
    one = len(tensors) == 1 and isinstance(tensors[0], _C.Tensor)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    out = tuple(x if x.dim() >= n else expand(x) for x in tensors)
    return out[0] if one else out


def atleast_1d(*tensors):
    return _atleast(1, lambda x: x.reshape(1), tensors)


def atleast_2d(*tensors):
    return _atleast(2, lambda x: x.reshape(1, x.numel()), tensors)


def atleast_3d(*tensors):
    return _atleast(3, lambda x: x.reshape((1, x.numel(), 1) if x.dim() < 2 else tuple(x.shape) + (1,)), tensors)


def hstack(tensors):
    tensors = atleast_1d(list(tensors))
    return _C.cat(list(tensors), 0 if all(x.dim() == 1 for x in tensors) else 1)


def vstack(tensors):
    return _C.cat(list(atleast_2d(list(tensors))), 0)


def dstack(tensors):
    return _C.cat(list(atleast_3d(list(tensors))), 2)


def column_stack(tensors):
    return _C.cat([x.reshape(x.numel(), 1) if x.dim() < 2 else x for x in tensors], 1)


def meshgrid(*tensors, indexing=None):
    """Grids of 0-d or 1-d tensors (views made by expand), as torch.meshgrid; indexing 'ij' (the default) or 'xy'."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("pyflame.meshgrid: in an upcoming release, it will be required to pass the indexing argument "
                      "(as torch.meshgrid warns); 'ij' is used", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise _C.InvalidArgumentError("torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: "
                                      f"{indexing}")
    for x in tensors:
        if x.dim() > 1:
            raise _C.InvalidArgumentError("meshgrid expects all tensors to be 0- or 1-dimensional, got one of "
                                          f"{x.dim()} dims")
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        tensors = (tensors[1], tensors[0]) + tuple(tensors[2:])
    shape = tuple(x.numel() for x in tensors)
    n = len(tensors)
    grids = [x.reshape(tuple(-1 if j == i else 1 for j in range(n))).expand(shape) for i, x in enumerate(tensors)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cartesian_prod(*tensors):
    """The cartesian product of 1-d tensors: (prod of sizes, len(tensors)); one tensor is returned as is."""
    if len(tensors) == 1:
        return tensors[0]
    return _C.stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


# ---------------------------------------------------------------- copies along dims

def flip(input, *dims):
    """input with the order of elements along `dims` reversed (a copy, as torch.flip; the table op flip)."""
    return _C.flip(input, _int_args(dims, "flip dims"))


def fliplr(input):
    if input.dim() < 2:
        raise _C.InvalidArgumentError("fliplr(): input must be at least 2-dimensional")
    return flip(input, 1)


def flipud(input):
    if input.dim() < 1:
        raise _C.InvalidArgumentError("flipud(): input must be at least 1-dimensional")
    return flip(input, 0)


def roll(input, shifts, dims=None):
    """Shifts the elements along `dims` by `shifts`, wrapping around; with dims=None over the flattened tensor
    (shape kept), as torch.roll."""
    shifts = (shifts,) if isinstance(shifts, numbers.Integral) else tuple(int(s) for s in shifts)
    dims = () if dims is None else (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    return _C.roll(input, shifts, dims)


def repeat(self, *sizes):
    """self tiled sizes[i] times along each dim (leading sizes add dims), as Tensor.repeat."""
    sizes = _int_args(sizes, "repeat sizes")
    if len(sizes) < self.dim():
        raise _C.InvalidArgumentError("Number of dimensions of repeat dims can not be smaller than number of "
                                      "dimensions of tensor")
    if builtins.any(s < 0 for s in sizes):
        raise _C.InvalidArgumentError(f"repeat(): sizes must be non-negative, got {sizes}")
    x = self.reshape((1,) * (len(sizes) - self.dim()) + tuple(self.shape))
    for i in range(len(sizes)):  # (1, s0, 1, s1, ...), then expanded to (r0, s0, r1, s1, ...)
        x = x.unsqueeze(2 * i)
    interleaved = tuple(v for r, s in zip(sizes, x.shape[1::2]) for v in (r, s))
    return x.expand(interleaved).reshape(tuple(r * s for r, s in zip(sizes, x.shape[1::2])))


def tile(input, dims):
    """repeat with dims padded by leading ones to input's number of dims, as torch.tile."""
    dims = _int_args((dims,), "tile dims") if not isinstance(dims, numbers.Integral) else (int(dims),)
    return repeat(input, (1,) * (input.dim() - len(dims)) + dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeats each element (each slice along dim) `repeats` times, as torch.repeat_interleave: repeats an int
    or a tensor of one count per element; dim=None flattens first; repeat_interleave(counts) repeats
    arange(len(counts)). Tensor counts are read on the host to size the result, as PyTorch does."""
    if repeats is None:
        if input.dim() != 1 or input.dtype not in (_C.dtype.int32, _C.dtype.int64):
            raise _C.InvalidArgumentError("repeat_interleave(repeats): repeats must be a 1-d integer tensor")
        return repeat_interleave(_arange(input.shape[0], input), input, 0, output_size=output_size)
    if dim is None:
        input, dim = input.reshape(-1), 0
    d = _wrap(dim, input.dim())
    n = input.shape[d] if input.dim() else 1
    if isinstance(repeats, _C.Tensor) and repeats.numel() == 1 and repeats.dim() <= 1:
        repeats = int(repeats.item())
    if isinstance(repeats, numbers.Integral):
        if repeats < 0:
            raise _C.InvalidArgumentError(f"repeat_interleave(): repeats can not be negative, got {repeats}")
        if input.dim() == 0:
            input = input.reshape(1)
        x = input.unsqueeze(d + 1)
        shape = list(x.shape)
        shape[d + 1] = repeats
        out = x.expand(shape).flatten(d, d + 1)
    else:
        counts = np.asarray(repeats.tolist() if isinstance(repeats, _C.Tensor) else repeats, dtype=np.int64)
        if counts.ndim != 1 or counts.shape[0] != n:
            raise _C.InvalidArgumentError(f"repeat_interleave(): repeats must have the same size as input along dim, "
                                          f"got {counts.shape} for size {n}")
        if (counts < 0).any():
            raise _C.InvalidArgumentError("repeat_interleave(): repeats can not be negative")
        index = tensor(np.repeat(np.arange(n), counts), dtype=_C.dtype.int64, device=input)
        out = input.index_select(d, index)
    if output_size is not None and out.shape[d] != output_size:
        raise _C.InvalidArgumentError(f"repeat_interleave(): output_size {output_size} differs from the result's size "
                                      f"{out.shape[d]}")
    return out


def rot90(input, k=1, dims=(0, 1)):
    """Rotates by 90 degrees k times in the plane of dims, from the first dim towards the second, as torch.rot90."""
    dims = tuple(dims)
    if len(dims) != 2:
        raise _C.InvalidArgumentError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise _C.InvalidArgumentError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = _dims(dims, input.dim(), "rot90 dims")
    k %= 4
    if k == 1:
        return flip(input, d1).transpose(d0, d1)
    if k == 2:
        return flip(input, d0, d1)
    if k == 3:
        return flip(input, d0).transpose(d0, d1)
    return input.clone()


def take_along_dim(input, indices, dim=None):
    """input's elements at `indices` along dim (input and indices broadcast over the other dims), or at flat
    positions with dim=None, as torch.take_along_dim."""
    if dim is None:  # (torch views them, so raises for non-contiguous input; reshape reads any layout)
        return input.reshape(-1).gather(0, indices.reshape(-1))
    if input.dim() != indices.dim():
        raise _C.InvalidArgumentError("take_along_dim(): input and indices should have the same number of dimensions, "
                                      f"but got {input.dim()} dimensions for input, and {indices.dim()} dimensions for "
                                      "indices")
    d = _wrap(dim, input.dim())
    shape = list(broadcast_shapes(*(tuple(1 if i == d else s for i, s in enumerate(x.shape))
                                    for x in (input, indices))))
    shape[d] = input.shape[d]
    x = input.expand(shape)
    shape[d] = indices.shape[d]
    return x.gather(d, indices.expand(shape))


# ---------------------------------------------------------------- diagonals

def _merged_diagonal(x, offset, dim1, dim2):
    """The diagonal as a view of x (dims dim1, dim2 merged into one, then sliced with step m+1), or None when
    those two dims can't be merged without a copy."""
    y = movedim(x, (dim1, dim2), (-2, -1))
    n, m = y.shape[-2], y.shape[-1]
    if not (n == 1 or m == 1 or y.stride(-2) == m * y.stride(-1)):
        return None
    length = builtins.max(0, builtins.min(n, m - offset) if offset >= 0 else builtins.min(n + offset, m))
    start = offset if offset >= 0 else -offset * m
    flat = y.view(tuple(y.shape[:-2]) + (n * m,))
    if length == 0:
        return _C.slice(flat, -1, 0, 0)
    return _C.slice(flat, -1, start, start + (length - 1) * (m + 1) + 1, m + 1)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of the matrices in dims dim1, dim2 (offset above it when > 0), as the last dim; a view of
    input, as torch.diagonal, except for inputs whose two dims can't be merged (then a copy)."""
    n = input.dim()
    if n < 2:
        raise _C.InvalidArgumentError(f"diagonal(): input must have at least 2 dims, got {n}")
    d1, d2 = _wrap(dim1, n, "dim1"), _wrap(dim2, n, "dim2")
    if d1 == d2:
        raise _C.InvalidArgumentError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    view = _merged_diagonal(input, offset, d1, d2)
    if view is None:  # the same diagonal, read with the dims swapped (a transposed matrix)
        view = _merged_diagonal(input, -offset, d2, d1)
    if view is not None:
        return view
    return _merged_diagonal(movedim(input, (d1, d2), (-2, -1)).contiguous(), offset, n - 2, n - 1)


_diagonal = diagonal  # for diag, whose argument of that name hides it


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices whose diagonal `offset` holds the last dim of input, in the dims dim1, dim2 of the result, as
    torch.diag_embed (the table op diag_embed)."""
    return _C.diag_embed(input, int(offset), int(dim1), int(dim2))


def diag(input, diagonal=0):
    """A 1-d input as the diagonal `diagonal` of a square matrix; a matrix's diagonal as a 1-d tensor (a copy),
    as torch.diag."""
    if input.dim() == 1:
        return diag_embed(input, diagonal)
    if input.dim() == 2:
        return _diagonal(input, diagonal).clone()
    raise _C.InvalidArgumentError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")


def trace(input):
    """The sum of a matrix's diagonal (integers summed as int64), as torch.trace."""
    if input.dim() != 2:
        raise _C.InvalidArgumentError(f"trace: expected a matrix, but got tensor with dim {input.dim()}")
    return diagonal(input).sum()


# ---------------------------------------------------------------- queries

def numel(input):
    return input.numel()


def is_tensor(obj):
    return isinstance(obj, _C.Tensor)


def is_floating_point(input):
    return input.dtype.is_floating_point


def is_complex(input):
    """Always False: PyFlame has no complex dtypes."""
    return False


def is_nonzero(input):
    """Whether a one-element tensor is not zero (an error for other sizes), as torch.is_nonzero."""
    if input.numel() != 1:
        raise _C.InvalidArgumentError("Boolean value of Tensor with " + ("no values" if input.numel() == 0 else
                                      "more than one value") + " is ambiguous")
    return builtins.bool(input.item())


def clone(input, *, memory_format=None):
    return input.clone()


# ---------------------------------------------------------------- types

# PyTorch's legacy type names: x.type() is 'pyflame.FloatTensor' on the CPU and 'pyflame.rocm.FloatTensor'
# on a GPU (torch: 'torch.FloatTensor', 'torch.cuda.FloatTensor').
_TYPE_NAMES = {
    _C.dtype.bool: "BoolTensor", _C.dtype.uint8: "ByteTensor", _C.dtype.int8: "CharTensor",
    _C.dtype.int16: "ShortTensor", _C.dtype.int32: "IntTensor", _C.dtype.int64: "LongTensor",
    _C.dtype.float16: "HalfTensor", _C.dtype.bfloat16: "BFloat16Tensor", _C.dtype.float32: "FloatTensor",
    _C.dtype.float64: "DoubleTensor",
}
_TYPE_DTYPES = {name: d for d, name in _TYPE_NAMES.items()}


def _type_name(x):
    return ("pyflame." if x.device == "cpu" else "pyflame.rocm.") + _TYPE_NAMES[x.dtype]


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """x.type(): the type name ('pyflame.FloatTensor', 'pyflame.rocm.FloatTensor' on a GPU); x.type(dtype) or
    x.type('pyflame.LongTensor') (also 'torch.LongTensor', 'torch.cuda.LongTensor'): the converted tensor."""
    if dtype is None:
        return _type_name(self)
    if not isinstance(dtype, str):
        r = self.to(dtype, non_blocking=non_blocking)
        return self if r.dtype == self.dtype else r  # as torch: self itself when nothing changes
    parts = dtype.split(".")
    if len(parts) not in (2, 3) or parts[0] not in ("pyflame", "torch") or parts[-1] not in _TYPE_DTYPES or (
            len(parts) == 3 and parts[1] not in ("rocm", "cuda")):
        raise _C.InvalidArgumentError(f"invalid type: '{dtype}' (expected a name such as 'pyflame.FloatTensor' or "
                                      "'pyflame.rocm.FloatTensor')")
    on_gpu = len(parts) == 3
    if on_gpu == (self.device != "cpu") and _TYPE_DTYPES[parts[-1]] == self.dtype:
        return self
    r = self.to(_TYPE_DTYPES[parts[-1]])
    if on_gpu != (self.device != "cpu"):
        r = r.to("rocm" if on_gpu else "cpu", non_blocking=non_blocking)
    return r


def _type_as(self, other):
    """self with other's dtype and device, as torch's type_as (self.type(other.type()))."""
    return self.to(other.device).to(other.dtype)


# ---------------------------------------------------------------- factories from a tensor

def _new_sizes(sizes, size=None):
    if size is not None:
        return tuple(size) if not isinstance(size, numbers.Integral) else (size,)
    return _int_args(sizes, "sizes")


def _new_factory(make):
    def method(self, *sizes, size=None, dtype=None, device=None, requires_grad=False):
        return make(_new_sizes(sizes, size), dtype=self.dtype if dtype is None else dtype,
                    device=self if device is None else device, requires_grad=requires_grad)
    return method


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(tuple(size) if not isinstance(size, numbers.Integral) else (size,), fill_value,
                dtype=self.dtype if dtype is None else dtype, device=self if device is None else device,
                requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=self.dtype if dtype is None else dtype,
                  device=self if device is None else device, requires_grad=requires_grad)


# ---------------------------------------------------------------- in-place random fills

def _random_fill(name, float_only, draw):
    def method(self, *args, generator=None, **kwargs):
        if float_only and not self.dtype.is_floating_point:
            raise TypeError(f"{name}: not implemented for {self.dtype} (a floating dtype is needed)")
        return self.copy_(draw(self, generator, *args, **kwargs))
    method.__name__ = name
    return method


def _uniform(self, generator, a=0.0, b=1.0, **kwargs):
    a = kwargs.pop("from", a)
    b = kwargs.pop("to", b)
    if kwargs:
        raise TypeError(f"uniform_() got unexpected keyword arguments {sorted(kwargs)}")
    if a > b:
        raise _C.InvalidArgumentError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    return rand(*self.shape, dtype=self.dtype, generator=generator, device=self) * (b - a) + a


def _normal(self, generator, mean=0.0, std=1.0):
    if std < 0:
        raise _C.InvalidArgumentError(f"normal_ expects std >= 0.0, but found std {std}")
    return randn(*self.shape, dtype=self.dtype, generator=generator, device=self) * std + mean


def _fill_diagonal_(self, fill_value, wrap=False):
    """Fills the main diagonal in place (all dims equal for more than 2 dims); wrap=True continues it below
    the first square block of a tall matrix, as torch's fill_diagonal_."""
    n = self.dim()
    if n < 2:
        raise _C.InvalidArgumentError("fill_diagonal_: dimensions must larger than 1")
    if n > 2 and len(set(self.shape)) != 1:
        raise _C.InvalidArgumentError("fill_diagonal_: all dimensions of input must be of equal length")
    rows, cols = self.shape[0], self.shape[1]
    if n == 2 and wrap and rows > cols + 1:
        flat = np.arange(0, rows * cols, cols + 1)
        self[tensor(flat // cols, device=self), tensor(flat % cols, device=self)] = fill_value
    else:
        idx = _arange(builtins.min(self.shape), self)
        self[(idx,) * n] = fill_value
    return self


# ---------------------------------------------------------------- finfo / iinfo

class finfo:
    """Machine limits of a floating dtype (default: the default dtype), as torch.finfo: bits, eps, max, min,
    tiny, smallest_normal, resolution, and dtype (its name)."""

    _cache = {}

    def __new__(cls, type=None):
        d = _float_dtype(type)
        if not isinstance(d, _C.dtype) or not d.is_floating_point:
            raise TypeError(f"finfo(): expected a floating dtype, got {d}")
        if d not in cls._cache:
            self = object.__new__(cls)
            if d == _C.dtype.bfloat16:  # 8 exponent bits as float32, 7 mantissa bits
                self.bits, self.eps, self.tiny, self.resolution = 16, 2.0 ** -7, 2.0 ** -126, 0.01
                self.max = (2 - 2.0 ** -7) * 2.0 ** 127
            else:
                f = np.finfo({_C.dtype.float16: np.float16, _C.dtype.float32: np.float32,
                              _C.dtype.float64: np.float64}[d])
                self.bits, self.eps, self.tiny = int(f.bits), float(f.eps), float(f.tiny)
                self.max, self.resolution = float(f.max), 10.0 ** -int(f.precision)
            self.min, self.smallest_normal = -self.max, self.tiny
            self.dtype = str(d).split(".")[1]
            cls._cache[d] = self
        return cls._cache[d]

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Machine limits of an integer dtype, as torch.iinfo: bits, max, min, and dtype (its name)."""

    _cache = {}

    def __new__(cls, type):
        if not isinstance(type, _C.dtype) or type.is_floating_point or type == _C.dtype.bool:
            raise TypeError(f"{type} is not supported by pyflame.iinfo")
        if type not in cls._cache:
            self = object.__new__(cls)
            i = np.iinfo(str(type).split(".")[1])
            self.bits, self.max, self.min, self.dtype = int(i.bits), int(i.max), int(i.min), str(type).split(".")[1]
            cls._cache[type] = self
        return cls._cache[type]

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


# ---------------------------------------------------------------- Tensor methods

_cpp_shape = _C.Tensor.__dict__["shape"].__get__
_cpp_size = _C.Tensor.size


def _size(self, dim=None):
    return Size(_cpp_shape(self, _C.Tensor)) if dim is None else _cpp_size(self, dim)


_C.Tensor.shape = property(lambda self: Size(_cpp_shape(self, _C.Tensor)), doc="The tensor's shape, a pf.Size.")

for _name, _fn in {
    "size": _size,
    "t": t, "narrow": narrow, "unbind": unbind, "ravel": ravel, "tensor_split": tensor_split,
    "unflatten": unflatten, "movedim": movedim, "moveaxis": movedim,
    "swapaxes": swapaxes, "swapdims": swapaxes, "squeeze": squeeze, "flip": flip, "fliplr": fliplr,
    "flipud": flipud, "roll": roll, "repeat": repeat, "tile": lambda self, *dims: tile(self, _int_args(dims, "dims")),
    "repeat_interleave": repeat_interleave, "rot90": rot90, "take_along_dim": take_along_dim,
    "diagonal": diagonal, "diag": diag, "diag_embed": diag_embed, "trace": trace, "broadcast_to": broadcast_to,
    "expand_as": lambda self, other: self.expand(other.shape),
    "view_as": lambda self, other: self.view(other.shape),
    "reshape_as": lambda self, other: self.reshape(other.shape),
    "type": _type, "type_as": _type_as,
    "is_floating_point": is_floating_point, "is_complex": is_complex, "is_nonzero": is_nonzero,
    "new_zeros": _new_factory(zeros), "new_ones": _new_factory(ones), "new_empty": _new_factory(empty),
    "new_full": _new_full, "new_tensor": _new_tensor,
    "uniform_": _random_fill("uniform_", True, _uniform), "normal_": _random_fill("normal_", True, _normal),
    "fill_diagonal_": _fill_diagonal_,
    "ndimension": _C.Tensor.dim, "nelement": _C.Tensor.numel,
    "unfold": lambda self, dimension, size, step: _C.unfold(self, dimension, size, step),
}.items():
    setattr(_C.Tensor, _name, _fn)

def _shape_in_place(op):
    """unsqueeze_ and the like: the tensor itself takes the view `op` makes of it. With grad mode on, a
    tensor with history takes the view's (a leaf that requires grad cannot, as in torch); otherwise it
    keeps its autograd state, as x.data = view."""

    def method(self, *args, **kwargs):
        view = op(self, *args, **kwargs)
        if self.requires_grad and _C.is_grad_enabled():
            if self.is_leaf:
                raise _C.AutogradError("a leaf Variable that requires grad is being used in an in-place operation.")
            return self._become(view)
        self.data = view
        return self

    method.__name__ = op.__name__ + "_"
    method.__doc__ = f"In place: the tensor becomes {op.__name__}(...) of itself (the same memory), as torch's."
    return method


for _name, _op in {"unsqueeze": _C.Tensor.unsqueeze, "squeeze": squeeze, "transpose": _C.Tensor.transpose,
                   "t": t, "swapdims": swapaxes, "swapaxes": swapaxes}.items():
    setattr(_C.Tensor, _name + "_", _shape_in_place(_op))

for _name, _fn in {
    "mT": _mT, "mH": _mT, "H": _H,
    # The GPU device is 'rocm', so is_cuda is always False (code that would then move to 'cuda' is not taken).
    "is_cuda": lambda self: False,
    "is_rocm": lambda self: self.device != "cpu",
    "is_cpu": lambda self: self.device == "cpu",
    "itemsize": _C.Tensor.element_size,
    "nbytes": lambda self: self.numel() * self.element_size(),
}.items():
    setattr(_C.Tensor, _name, property(_fn))
del _name, _fn, _op

flatten = _C.flatten
concat = concatenate = _C.cat
moveaxis = movedim
swapdims = swapaxes
row_stack = vstack
