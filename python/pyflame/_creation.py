"""Tensor creation: pf.tensor and the factories, each with dtype=, device= and requires_grad=.

This module owns the default floating dtype (pf.set_default_dtype): every
factory that makes floats without a dtype= asks _float_dtype(), and the C++
factories always receive an explicit dtype.

device=: a device places the new tensor there (Tensor.is_placed); None makes it, unplaced,
on the current device. Inside the library (the _like factories, Tensor.new_*, compositions)
device= may be a tensor: the new tensor takes its device and its placement, so ops over both
run where that tensor's ops would.
"""

import numbers
import warnings

import numpy as np

from . import _C

# NumPy dtypes with a PyFlame equivalent.
_NUMPY_KINDS = "biuf"

_FLOATING = (_C.dtype.float16, _C.dtype.bfloat16, _C.dtype.float32, _C.dtype.float64)
_default_dtype = _C.dtype.float32


def get_default_dtype():
    """The dtype of floats made without dtype= (pf.tensor of Python floats, rand, zeros, ...): float32 unless
    set_default_dtype changed it."""
    return _default_dtype


def set_default_dtype(d):
    """Sets the dtype of floats made without dtype=, as torch.set_default_dtype (a floating dtype only).

    It applies to the factories (tensor, as_tensor, rand, randn, zeros, ones, empty, full with a float value,
    arange with a float argument, linspace, logspace, eye) and so to nn layers' parameters. Promotion inside ops
    (int tensor / int, sqrt of an int tensor) still gives float32: that rule lives in the C++ core.
    """
    global _default_dtype
    if not isinstance(d, _C.dtype):
        raise TypeError(f"set_default_dtype(): expected a pyflame dtype such as pf.float64, got {type(d).__name__}")
    if d not in _FLOATING:
        raise TypeError(f"set_default_dtype(): only floating-point types are supported as the default type, got {d}")
    _default_dtype = d


def _float_dtype(dtype):
    return _default_dtype if dtype is None else dtype


def _is_float(v):
    return isinstance(v, (float, np.floating))


def _complex_error(where):
    return _C.NotSupportedError(f"{where}: complex numbers are not supported; keep the real and imaginary parts "
                                "as two real tensors (or a trailing dim of size 2)")


def _requires_grad(t, requires_grad):
    """Marks a new leaf as PyTorch's requires_grad= does (floating dtypes only)."""
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, a number, a NumPy array or a Tensor).

    Python floats become the default dtype (float32 unless pf.set_default_dtype changed it),
    Python ints int64 and bools bool; NumPy arrays keep their dtype. The result is placed on `device`,
    else made unplaced on the current device (a tensor's copy stays where, and as placed as, it was).
    """
    if isinstance(data, _C.Tensor):
        t = data.clone()
    else:
        from_python = not isinstance(data, (np.ndarray, np.generic))
        try:
            arr = np.asarray(data)
        except ValueError as e:  # ragged nested lists
            raise ValueError(f"tensor(): data is not a regular nested sequence of numbers: {e}") from None
        if arr.dtype.kind == "c":
            raise _complex_error("tensor()")
        if arr.dtype.kind not in _NUMPY_KINDS or arr.dtype.itemsize > 8 or arr.dtype in (np.uint16, np.uint32, np.uint64):
            raise TypeError(f"tensor(): cannot make a tensor from data of NumPy dtype {arr.dtype}")
        if from_python and arr.dtype == np.float64 and dtype is None:  # rounded once, from float64, below
            dtype = _default_dtype
        arr = np.asarray(arr, order="C")  # (ascontiguousarray would make 0-d 1-d)
        if not arr.flags.writeable:  # from_numpy shares memory, so it takes writable arrays only
            arr = arr.copy()
        t = _C.from_numpy(arr).clone()
    if dtype is not None:
        t = t.to(dtype)
    if device is None and isinstance(data, _C.Tensor):  # a tensor's copy stays where (and as placed as) it was
        device = data
    t = _C._to_device(t, device)
    return _requires_grad(t.detach(), requires_grad)


def from_numpy(array):
    """A CPU tensor sharing memory with a NumPy array, as torch.from_numpy.

    A read-only array (np.broadcast_to's among them) is copied, with a warning:
    sharing it would let writes through the tensor change memory NumPy protects.
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a NumPy array, got {type(array).__name__} "
                        "(pf.tensor makes a tensor from lists and numbers)")
    if not array.dtype.isnative:
        raise ValueError(f"from_numpy: the array's byte order ({array.dtype.str}) is not this machine's; convert it "
                         "first with array.astype(array.dtype.newbyteorder('='))")
    if array.dtype.kind not in _NUMPY_KINDS or array.dtype in (np.uint16, np.uint32, np.uint64):
        raise TypeError(f"from_numpy: NumPy dtype {array.dtype} has no PyFlame dtype")
    if not array.flags.writeable:
        warnings.warn("from_numpy: the array is read-only, so PyFlame copies it instead of sharing its memory",
                      UserWarning, stacklevel=2)
        array = array.copy()
    return _C.from_numpy(array)


def _shape(name, sizes, size):
    """The shape of a factory call: positional sizes (zeros(2, 3), zeros((2, 3))) or size=, as PyTorch."""
    if size is None:
        return sizes
    if sizes:
        raise TypeError(f"{name}(): the shape is given twice (positionally and as size=)")
    return (size,) if isinstance(size, int) else tuple(size)


def empty(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of the given shape."""
    return _requires_grad(_C._empty(*_shape("empty", sizes, size), dtype=_float_dtype(dtype), device=device),
                          requires_grad)


def zeros(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._zeros(*_shape("zeros", sizes, size), dtype=_float_dtype(dtype), device=device),
                          requires_grad)


def ones(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._ones(*_shape("ones", sizes, size), dtype=_float_dtype(dtype), device=device),
                          requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with `fill_value`; dtype defaults to the value's (bool, int64 or the default float dtype)."""
    if isinstance(fill_value, complex):
        raise _complex_error("full()")
    if dtype is None and _is_float(fill_value):
        dtype = _default_dtype
    return _requires_grad(_C._full(size, fill_value, dtype=dtype, device=device), requires_grad)


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._full_like(x, 0, dtype=dtype, device=device), requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._full_like(x, 1, dtype=dtype, device=device), requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._full_like(x, fill_value, dtype=dtype, device=device), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from start (inclusive) to end (exclusive), ceil((end - start) / step) of them; int64 unless an
    argument is a float (then the default dtype)."""
    if end is None:
        start, end = 0, start
    if dtype is None and any(_is_float(v) for v in (start, end, step)):
        dtype = _default_dtype
    return _requires_grad(_C._arange(start, end, step, dtype=dtype, device=device), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._linspace(float(start), float(end), steps, dtype=_float_dtype(dtype), device=device),
                          requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._eye(n, m, dtype=_float_dtype(dtype), device=device), requires_grad)


def rand(*size, dtype=None, generator=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1), drawn on `device` from `generator` (default: the one pf.manual_seed seeds).
    A seed gives the same numbers on every device."""
    return _requires_grad(_C._rand(*size, dtype=_float_dtype(dtype), generator=generator, device=device),
                          requires_grad)


def randn(*size, dtype=None, generator=None, device=None, requires_grad=False):
    """Standard normal samples, drawn as rand's."""
    return _requires_grad(_C._randn(*size, dtype=_float_dtype(dtype), generator=generator, device=device),
                          requires_grad)


def randint(*args, low=None, high=None, size=None, dtype=None, generator=None, device=None, requires_grad=False):
    """Integers in [low, high), drawn as rand's, with PyTorch's forms: randint(high, size),
    randint(low, high, size), and any of low (default 0), high and size as keywords."""
    given = {"low": low, "high": high, "size": size}
    # Positional values fill, in order, what the keywords left open; with fewer of them than
    # that, low is the one left out (it defaults to 0): randint(high, size), randint(5, size=...).
    open_names = [n for n in ("low", "high", "size") if given[n] is None]
    if len(args) > len(open_names):
        raise TypeError(f"randint() takes at most 3 arguments (low, high, size), got {len(args)} positional and "
                        f"{3 - len(open_names)} by keyword")
    if len(args) < len(open_names) and open_names[0] == "low":
        open_names = open_names[1:]
    for name, value in zip(open_names, args):
        given[name] = value
    if given["high"] is None:
        raise TypeError("randint() needs high: randint(high, size), randint(low, high, size) or high=")
    if given["size"] is None:
        raise TypeError("randint() needs a size: randint(low, high, size), randint(high, size) or size=")
    low = 0 if given["low"] is None else given["low"]
    return _requires_grad(_C._randint(low, given["high"], given["size"], dtype=dtype, generator=generator,
                                      device=device), requires_grad)


def as_tensor(data, dtype=None, device=None):
    """`data` as a tensor, without a copy where torch.as_tensor makes none: a Tensor already of that dtype and
    device is returned itself, and a NumPy array bound for the CPU shares its memory (as from_numpy)."""
    if isinstance(data, _C.Tensor):
        if (dtype is None or dtype == data.dtype) and (device is None or _C._parse_device(str(device)) == data.device):
            return data
        t = data if device is None else data.to(device)
        return t if dtype is None else t.to(dtype)
    target = _C._parse_device(str(device if device is not None else _C.get_device()))
    if (isinstance(data, np.ndarray) and target == "cpu" and data.flags.writeable and data.dtype.isnative
            and data.dtype.kind in _NUMPY_KINDS and data.dtype.itemsize <= 8
            and data.dtype not in (np.uint16, np.uint32, np.uint64) and all(s >= 0 for s in data.strides)):
        t = _C.from_numpy(data)
        return t if dtype is None else t.to(dtype)
    return tensor(data, dtype=dtype, device=device)


def empty_like(input, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of input's shape, dtype and device (unless given)."""
    return _requires_grad(_C._empty(*input.shape, dtype=input.dtype if dtype is None else dtype,
                                    device=input if device is None else device), requires_grad)


def rand_like(input, dtype=None, device=None, requires_grad=False, generator=None):
    """rand() of input's shape, dtype and device (unless given)."""
    return rand(*input.shape, dtype=input.dtype if dtype is None else dtype, generator=generator,
                device=input if device is None else device, requires_grad=requires_grad)


def randn_like(input, dtype=None, device=None, requires_grad=False, generator=None):
    """randn() of input's shape, dtype and device (unless given)."""
    return randn(*input.shape, dtype=input.dtype if dtype is None else dtype, generator=generator,
                 device=input if device is None else device, requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, device=None, requires_grad=False, generator=None):
    """randint() of input's shape, dtype and device (unless given): randint_like(x, high) or (x, low, high)."""
    if high is None:
        low, high = 0, low
    t = _C._randint(low, high, input.shape, dtype=_C.dtype.int64, generator=generator,
                    device=input if device is None else device)
    return _requires_grad(t.to(input.dtype if dtype is None else dtype), requires_grad)


def randperm(n, *, generator=None, dtype=_C.dtype.int64, device=None, requires_grad=False):
    """A random permutation of 0..n-1, as torch.randperm.

    The permutation orders n float64 keys drawn from `generator` on the CPU (so a seed gives the same
    permutation on every device), then moves to `device`: there is no device-side sort to order them there.
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"randperm(): n must be a non-negative integer, got {n!r}")
    keys = _C._rand(n, dtype=_C.dtype.float64, generator=generator, device="cpu").numpy()
    order = np.argsort(keys, kind="stable")
    return tensor(order, dtype=dtype, device=device, requires_grad=requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """base ** linspace(start, end, steps), computed in float64 and then converted to dtype (default: the
    default float dtype), as torch.logspace."""
    exponents = _C._linspace(float(start), float(end), steps, dtype=_C.dtype.float64, device=device)
    return _requires_grad((float(base) ** exponents).to(_float_dtype(dtype)), requires_grad)
