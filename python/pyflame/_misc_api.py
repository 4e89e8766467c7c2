"""PyTorch functions over table ops: equal and allclose, the index_* family,
index_put, masked_select, take, aminmax, diff, unary plus, and the random draws
normal, bernoulli, multinomial, Tensor.bernoulli_ and Tensor.exponential_;
addcmul, addcdiv, isclose, normal and bernoulli are composite ops of the table.

The random draws are pf.rand/pf.randn's, drawn on the tensor's device from one
Philox stream: a seed gives the same numbers on the CPU and the GPU.
"""

import builtins
import math
from collections import namedtuple

from . import _C
from ._creation import _float_dtype, arange, full, rand, tensor

# --------------------------------------------------------------- helpers


def _broadcast_shape(*shapes):
    """The shape the given shapes broadcast to (PyTorch's rules), or ValueError."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            k = i - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if size not in (1, s[k]):
                raise ValueError(f"shapes {', '.join(str(tuple(t)) for t in shapes)} cannot be broadcast together")
            size = s[k]
        out.append(size)
    return tuple(out)


def _wrap_dim(dim, ndim, name):
    n = ndim if ndim > 0 else 1
    if not -n <= dim < n:
        raise IndexError(f"{name}: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


def _scalar(value):
    """A number from a number or a one-element tensor."""
    return value.item() if isinstance(value, _C.Tensor) else value


def _none_or_all_false(mask):
    """True when a bool tensor has no true element (one wait on the device)."""
    return _C.sum(mask).item() == 0


# --------------------------------------------------------------- arithmetic


# Ops of the table (include/pyflame/misc_ops.h); the Tensor methods and their in-place forms are bound with them.
addcmul = _C.addcmul
addcdiv = _C.addcdiv
isclose = _C.isclose


def positive(input):
    """input itself, as torch.positive (unary plus); bool tensors are refused as in PyTorch."""
    if input.dtype == _C.dtype.bool:
        raise TypeError("the + operator on a bool tensor is not supported (as in PyTorch); "
                        "if you are trying to invert a mask, use ~ or logical_not() instead")
    return input


# --------------------------------------------------------------- comparisons


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element is close (isclose), as a Python bool."""
    return _none_or_all_false(_C.logical_not(isclose(input, other, rtol, atol, equal_nan)))


def equal(input, other):
    """True when both have the same shape and the same elements (NaN differs from itself), as torch.equal."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return _none_or_all_false(_C.ne(input, other))


# --------------------------------------------------------------- indexing


def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source added at the positions index names along dim, as torch.index_add."""
    return _C.index_add(input, dim, index, source, alpha)


def index_copy(input, dim, index, source):
    """input with source written at the positions index names along dim, as torch.index_copy."""
    return _C.index_copy(input, dim, index, source)


def index_fill(input, dim, index, value):
    """input with value written at the positions index names along dim, as torch.index_fill."""
    if isinstance(value, _C.Tensor) and value.dim() != 0:
        raise ValueError(f"index_fill: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
    return _C.index_fill(input, dim, index, _scalar(value))


def _in_place(fn):
    def method(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))

    method.__name__ = fn.__name__ + "_"
    method.__doc__ = f"In-place {fn.__name__}."
    return method


def index_put(input, indices, values, accumulate=False):
    """A copy of input with input[indices] = values (or += with accumulate, duplicates summed), as torch.index_put."""
    return index_put_(input.clone(), indices, values, accumulate)


def index_put_(input, indices, values, accumulate=False):
    """input[indices] = values in place (indices: a tuple of integer or bool tensors for the leading dims);
    with accumulate, values are added and duplicate positions sum, as torch.index_put_."""
    indices = tuple(indices)
    if not isinstance(values, _C.Tensor):
        values = full((), values, dtype=input.dtype, device=input)
    if values.dtype != input.dtype:
        raise TypeError(f"index_put_: values ({values.dtype}) must have the dtype of the tensor ({input.dtype}), "
                        "as PyTorch requires; convert them with .to()")
    if not accumulate:
        input[indices] = values
        return input
    # Each key becomes integer coordinates (a mask its true entries'), broadcast, then one
    # linear row index into the indexed leading dims merged: an index_add along that dim.
    coords, d = [], 0
    for key in indices:
        if not isinstance(key, _C.Tensor):
            key = tensor(key, device=input)
        if key.dtype == _C.dtype.bool:
            for k in range(key.dim()):
                grid = arange(key.shape[k], device=input).reshape(
                    *[key.shape[k] if j == k else 1 for j in range(key.dim())]).expand(*key.shape)
                coords.append(grid[key])
            d += key.dim()
        else:
            coords.append(key.to(_C.dtype.int64))
            d += 1
    if d > input.dim():
        raise IndexError(f"too many indices for a tensor of dimension {input.dim()}")
    sizes = list(input.shape[:d])
    b_shape = _broadcast_shape(*[tuple(c.shape) for c in coords])
    row = None
    for c, size in zip(coords, sizes):
        if c.numel() and (_C.sum(_C.logical_or(_C.lt(c, -size), _C.ge(c, size))).item()):
            raise IndexError(f"index_put_: an index is out of bounds for a dimension of size {size}")
        c = _C.where(_C.lt(c, 0), _C.add(c, size), c)
        row = c if row is None else _C.add(_C.mul(row, size), c)
    rest = tuple(input.shape[d:])
    v = values.to(input.dtype).expand(*(b_shape + rest)).reshape(-1, *rest)
    flat = input.contiguous().reshape(math.prod(sizes), *rest)
    flat = index_add(flat, 0, row.expand(*b_shape).reshape(-1), v)
    return input.copy_(flat.reshape(*input.shape))


def masked_select(input, mask):
    """The elements of input where mask (broadcast with it) is true, as a 1-D tensor, as torch.masked_select."""
    if mask.dtype != _C.dtype.bool:
        raise TypeError(f"masked_select: mask must be a bool tensor, got {mask.dtype}")
    shape = _broadcast_shape(tuple(input.shape), tuple(mask.shape))
    return input.expand(*shape)[mask.expand(*shape)].reshape(-1)


def take(input, index):
    """input seen as 1-D, at the positions of index (negative counting from the end); index's shape, as torch.take."""
    if index.dtype != _C.dtype.int64:
        raise TypeError(f"take(): expected an int64 tensor for index, but got {index.dtype}")
    return input.reshape(-1)[index]


# --------------------------------------------------------------- reductions and differences

AminmaxResult = namedtuple("aminmax", ["min", "max"])


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over dim (None: every element), as torch.aminmax's named tuple: the table's aminmax."""
    return AminmaxResult(*_C.aminmax(input, dim=dim, keepdim=keepdim))


CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])


def cummax(input, dim):
    """The running maximum along dim and where it was, as torch.cummax's named tuple (values, indices)."""
    return CummaxResult(*_C.cummax(input, dim))


def cummin(input, dim):
    """The running minimum along dim and where it was, as torch.cummin's named tuple (values, indices)."""
    return CumminResult(*_C.cummin(input, dim))


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim, after joining prepend and append there, as torch.diff
    (bool tensors give logical xor); a number for prepend or append stands for a slice of that value."""
    if input.dim() > 0:
        shape = list(input.shape)
        shape[_wrap_dim(dim, input.dim(), "diff")] = 1
        prepend, append = (full(tuple(shape), p, dtype=input.dtype, device=input)
                           if p is not None and not isinstance(p, _C.Tensor) else p for p in (prepend, append))
    return _C.diff(input, n, dim, prepend, append)


# --------------------------------------------------------------- random draws


def _check_std(std):
    if isinstance(std, _C.Tensor):
        if std.numel() and _C.sum(_C.lt(std, 0.0)).item():
            raise ValueError("normal expects all elements of std >= 0.0")
    elif not std >= 0.0:
        raise ValueError(f"normal expects std >= 0.0, but found std {std}")


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    """Normal samples, in torch.normal's four forms: normal(mean_tensor, std_tensor),
    normal(mean_float, std_tensor), normal(mean_tensor, std_float=1.0) (the tensors'
    shapes broadcast; mean's dtype), and normal(mean_float, std_float, size): the table's normal.
    The result is a constant to autograd (torch gives mean and std zero gradients)."""
    _check_std(std)
    mean_t, std_t = (t if isinstance(t, _C.Tensor) else None for t in (mean, std))
    if mean_t is None and std_t is None:
        if size is None:
            raise TypeError("normal(mean, std, size): with a number mean and std the size is needed")
        out = _C.normal(None, None, float(mean), float(std), size, dtype=_float_dtype(dtype), generator=generator,
                         device=device)
        return out.requires_grad_(True) if requires_grad else out
    if size is not None:
        raise TypeError("normal: size is given only with a number mean and std (normal(0.0, 1.0, size))")
    return _C.normal(mean_t, std_t, 0.0 if mean_t is not None else float(mean),
                      1.0 if std_t is not None else float(std), generator=generator)


def _uniform_like(t, generator):
    """Uniform [0, 1) samples of t's shape on t's device, float64 for float64 tensors, else float32."""
    dt = _C.dtype.float64 if t.dtype == _C.dtype.float64 else _C.dtype.float32
    return rand(*t.shape, dtype=dt, generator=generator, device=t)


def _check_p(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"bernoulli: p must be in [0, 1], got {p}")


def bernoulli(input, p=None, *, generator=None):
    """0 or 1 for each element, 1 with probability input (or p), in input's dtype, as torch.bernoulli."""
    if not input.dtype.is_floating_point:
        raise TypeError(f"bernoulli: input must be a floating-point tensor of probabilities, got {input.dtype}")
    if p is None:
        return _C.bernoulli(input, input, 0.5, generator)
    _check_p(p)
    return _C.bernoulli(input, None, float(p), generator)


def _bernoulli_(self, p=0.5, *, generator=None):
    """Fills self with 0/1 draws, 1 with probability p (a number or a tensor broadcasting to self)."""
    if isinstance(p, _C.Tensor):
        return self.copy_(_C.bernoulli(self, p, 0.5, generator))
    _check_p(p)
    return self.copy_(_C.bernoulli(self, None, float(p), generator))


def _exponential_(self, lambd=1.0, *, generator=None):
    """Fills self with exponential draws of rate lambd: -log(1 - u) / lambd."""
    if not self.dtype.is_floating_point:
        raise TypeError(f"exponential_: the tensor must be floating-point, got {self.dtype}")
    if not lambd > 0:
        raise ValueError(f"exponential_ expects lambd > 0.0, but found lambd={lambd}")
    u = _uniform_like(self, generator)
    return self.copy_(_C.div(_C.neg(_C.log1p(_C.neg(u))), float(lambd)))


def _categories(w, u):
    """For each row of weights w (float64, rows summing above 0) and each column of uniforms u:
    the category whose step of the normalised cumulative sums holds u."""
    cdf = _C.cumsum(w, -1)
    n = w.shape[-1]
    # Dividing by the total makes the last entry exactly 1, above every u in [0, 1): the count of
    # entries <= u is a valid category, and zero-weight categories (no step in cdf) are never drawn.
    cdf = _C.div(cdf, _C.slice(cdf, 1, n - 1, n))
    return _C.sum(_C.le(cdf.unsqueeze(1), u.unsqueeze(2)), -1)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Category indices (int64) drawn with probabilities proportional to input's rows (1-D or 2-D), as
    torch.multinomial. With replacement, each draw finds its uniform number's place in the row's
    cumulative sums; without, the categories are drawn one after the other, each drawn one's weight
    then set to 0 (num_samples rounds of a few ops)."""
    if input.dim() not in (1, 2):
        raise ValueError(f"multinomial: prob_dist must be 1 or 2 dim, got {input.dim()}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"multinomial only supports floating-point dtypes for input, got {input.dtype}")
    if num_samples <= 0:
        raise ValueError(f"multinomial: cannot sample num_samples <= 0 samples, got {num_samples}")
    n = input.shape[-1]
    if not replacement and num_samples > n:
        raise ValueError(f"multinomial: cannot sample num_samples={num_samples} > prob_dist.size(-1)={n} "
                         "samples without replacement")
    w = (input.reshape(1, n) if input.dim() == 1 else input).to(_C.dtype.float64)
    rows = w.shape[0]
    bad = _C.logical_or(_C.lt(w, 0.0), _C.logical_not(_C.isfinite(w)))
    if _C.sum(bad).item():
        raise ValueError("multinomial: probability tensor contains either inf, nan or element < 0")
    positive = _C.sum(_C.gt(w, 0.0), -1)
    if _C.sum(_C.eq(positive, 0)).item():
        raise ValueError("multinomial: invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and _C.sum(_C.lt(positive, num_samples)).item():
        raise ValueError("multinomial: invalid multinomial distribution (with replacement=False, not enough "
                         "non-negative category to sample)")
    if replacement or num_samples == 1:
        u = rand(rows, num_samples, dtype=_C.dtype.float64, generator=generator, device=input)
        picks = _categories(w, u)
    else:
        drawn = []
        for _ in range(num_samples):
            u = rand(rows, 1, dtype=_C.dtype.float64, generator=generator, device=input)
            drawn.append(_categories(w, u))
            w = _C.scatter(w, 1, drawn[-1], value=0.0)
        picks = _C.cat(drawn, 1)
    return picks.reshape(num_samples) if input.dim() == 1 else picks


# --------------------------------------------------------------- counting, products

def _where_method(self, condition, y):
    return _C.where(condition, self, y)


def bincount(input, weights=None, minlength=0):
    """Occurrences of each value 0..max(input) (at least minlength bins) of a 1-D non-negative
    integer tensor, summed weights where given, as torch.bincount. The maximum is read on the
    host to size the result, as PyTorch does."""
    if input.dim() != 1 or input.dtype.is_floating_point or input.dtype == _C.dtype.bool:
        raise _C.InvalidArgumentError("bincount only supports 1-d non-negative integral inputs")
    if input.numel() and _C.min(input).item() < 0:
        raise _C.InvalidArgumentError("bincount only supports 1-d non-negative integral inputs")
    n = builtins.max(int(minlength), int(_C.max(input).item()) + 1 if input.numel() else 0)
    values = full(list(input.shape), 1, dtype=_C.dtype.int64, device=input) if weights is None else weights
    return _C.scatter_add(full([n], 0, dtype=values.dtype, device=input), 0, input.to(_C.dtype.int64), values)


def histc(input, bins=100, min=0, max=0):  # noqa: A002 - torch's names
    """A histogram of bins equal-width bins over [min, max] (the data's range when both are 0);
    values outside are ignored, max falls in the last bin, as torch.histc."""
    lo, hi = float(min), float(max)
    if lo == hi and input.numel():
        lo, hi = _C.min(input).item(), _C.max(input).item()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    x = input.reshape(-1)
    inside = _C.logical_and(_C.ge(x, lo), _C.le(x, hi))
    which = _C.clamp(_C.floor(_C.mul(_C.sub(x, lo), bins / (hi - lo))), 0, bins - 1).to(_C.dtype.int64)
    return _C.scatter_add(full([bins], 0, dtype=input.dtype, device=input), 0, which, inside.to(input.dtype))


kron = _C.kron  # a composite op of the table (include/pyflame/linalg_ops.h)


def cross(input, other, dim=None):
    """The cross product of 3-vectors along dim (torch.cross: the first dim of size 3 when None;
    torch.linalg.cross: -1): the table's linalg_cross."""
    if dim is None:
        shape = _broadcast_shape(input.shape, other.shape)
        dim = next((d for d, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise _C.InvalidArgumentError(f"cross: no dimension of size 3 in input of shape {tuple(shape)}")
    return _C.linalg_cross(input, other, dim=dim)


def cdist(x1, x2, p=2.0):
    """The p-norm distance between each row of x1 (..., P, M) and each of x2 (..., R, M), as torch.cdist
    (the table's cdist)."""
    return _C.cdist(x1, x2, p)


# --------------------------------------------------------------- Tensor methods

index_add_ = _in_place(index_add)
index_copy_ = _in_place(index_copy)
index_fill_ = _in_place(index_fill)


def _index_put_method(self, indices, values, accumulate=False):
    return index_put(self, indices, values, accumulate)


def can_cast(from_, to):
    """Whether PyTorch's type promotion allows casting from_ to `to` (torch.can_cast): not from a float to an
    integer or bool type, nor from an integer type to bool."""
    if from_.is_floating_point:
        return to.is_floating_point
    return not (from_ != _C.dtype.bool and to == _C.dtype.bool)


def get_num_threads():
    """The threads the CPU kernels use (torch.get_num_threads; pf.cpu_threads)."""
    return _C.cpu_threads()


def set_num_threads(n):
    """Sets the threads the CPU kernels use (torch.set_num_threads; pf.set_cpu_threads)."""
    _C.set_cpu_threads(int(n))


for _name, _fn in (
    ("allclose", allclose), ("equal", equal),
    ("index_add", index_add), ("index_add_", index_add_), ("index_copy", index_copy), ("index_copy_", index_copy_),
    ("index_fill", index_fill), ("index_fill_", index_fill_), ("index_put", _index_put_method),
    ("index_put_", index_put_), ("masked_select", masked_select), ("take", take), ("aminmax", aminmax),
    ("diff", diff), ("positive", positive), ("__pos__", positive), ("bernoulli", bernoulli),
    ("bernoulli_", _bernoulli_), ("exponential_", _exponential_), ("multinomial", multinomial),
    ("where", _where_method), ("bincount", bincount), ("histc", histc),
    ("cross", cross), ("cummax", cummax), ("cummin", cummin),
):
    setattr(_C.Tensor, _name, _fn)
del _name, _fn

__all__ = [
    "addcmul", "addcdiv", "positive", "isclose", "allclose", "equal", "index_add", "index_copy", "index_fill",
    "index_put", "index_put_", "masked_select", "take", "aminmax", "diff", "normal", "bernoulli", "multinomial",
    "bincount", "histc", "kron", "cross", "cdist", "can_cast", "get_num_threads", "set_num_threads",
    "cummax", "cummin",
]

