"""Tensor creation: pf.tensor and the factories, each with dtype=, device= and requires_grad=."""

import warnings

import numpy as np

from . import _C

# NumPy dtypes with a PyFlame equivalent.
_NUMPY_KINDS = "biuf"


def _requires_grad(t, requires_grad):
    """Marks a new leaf as PyTorch's requires_grad= does (floating dtypes only)."""
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, a number, a NumPy array or a Tensor).

    Python floats become float32 (the default float type), Python ints int64 and
    bools bool; NumPy arrays keep their dtype. The result is on `device`, else on
    the current device.
    """
    if isinstance(data, _C.Tensor):
        t = data.clone()
    else:
        from_python = not isinstance(data, (np.ndarray, np.generic))
        try:
            arr = np.asarray(data)
        except ValueError as e:  # ragged nested lists
            raise ValueError(f"tensor(): data is not a regular nested sequence of numbers: {e}") from None
        if arr.dtype.kind not in _NUMPY_KINDS or arr.dtype.itemsize > 8 or arr.dtype in (np.uint16, np.uint32, np.uint64):
            raise TypeError(f"tensor(): cannot make a tensor from data of NumPy dtype {arr.dtype}")
        if from_python and arr.dtype == np.float64 and dtype is None:  # with a dtype, round once, into it
            arr = arr.astype(np.float32)
        arr = np.asarray(arr, order="C")  # (ascontiguousarray would make 0-d 1-d)
        if not arr.flags.writeable:  # from_numpy shares memory, so it takes writable arrays only
            arr = arr.copy()
        t = _C.from_numpy(arr).clone()
    if dtype is not None:
        t = t.to(dtype)
    t = t.to(device if device is not None else _C.get_device())
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
    return _requires_grad(_C._empty(*_shape("empty", sizes, size), dtype=dtype, device=device), requires_grad)


def zeros(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._zeros(*_shape("zeros", sizes, size), dtype=dtype, device=device), requires_grad)


def ones(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._ones(*_shape("ones", sizes, size), dtype=dtype, device=device), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with `fill_value`; dtype defaults to the value's (bool, int64 or float32)."""
    return _requires_grad(_C._full(size, fill_value, dtype=dtype, device=device), requires_grad)


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._full_like(x, 0, dtype=dtype, device=device), requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._full_like(x, 1, dtype=dtype, device=device), requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._full_like(x, fill_value, dtype=dtype, device=device), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from start (inclusive) to end (exclusive); int64 unless an argument is a float."""
    if end is None:
        start, end = 0, start
    return _requires_grad(_C._arange(start, end, step, dtype=dtype, device=device), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._linspace(float(start), float(end), steps, dtype=dtype, device=device), requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    return _requires_grad(_C._eye(n, m, dtype=dtype, device=device), requires_grad)


def rand(*size, dtype=None, generator=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1), drawn on `device` from `generator` (default: the one pf.manual_seed seeds).
    A seed gives the same numbers on every device."""
    return _requires_grad(_C._rand(*size, dtype=dtype, generator=generator, device=device), requires_grad)


def randn(*size, dtype=None, generator=None, device=None, requires_grad=False):
    """Standard normal samples, drawn as rand's."""
    return _requires_grad(_C._randn(*size, dtype=dtype, generator=generator, device=device), requires_grad)


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
