"""max and min as PyTorch has them, over the op table's reductions.

The table's `max`/`min` ops reduce over any dims (PyTorch's amax/amin). In
PyTorch, max(x) is that reduction over everything, max(x, dim) returns the
named tuple (values, indices), and max(x, other_tensor) is maximum(x, other);
returning the values alone for max(x, dim) would make `_, pred = out.max(1)`
quietly wrong, so all three forms are here, for min too.
"""

from collections import namedtuple

from . import _C

_amax, _amin = _C.max, _C.min

# PyTorch's torch.return_types.max / .min: a tuple with .values and .indices.
MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


def _select(name, reduce, arg_reduce, elementwise, result):
    def select(input, dim=None, keepdim=False, *, out=None):
        if out is not None:
            raise TypeError(f"{name}(): out= is not supported")
        if isinstance(dim, _C.Tensor):  # max(a, b): the elementwise form
            if keepdim:
                raise TypeError(f"{name}(input, other): keepdim applies to the reduction over a dim only")
            return elementwise(input, dim)
        if dim is None:
            if keepdim:
                raise TypeError(f"{name}(): keepdim needs a dim (max(x, dim, keepdim=True))")
            return reduce(input)
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise TypeError(f"{name}(): dim must be an int, got {type(dim).__name__} "
                            f"(a{name} reduces over several dims)")
        return result(reduce(input, dim, keepdim), arg_reduce(input, dim, keepdim))

    select.__name__ = name
    select.__doc__ = (f"{name}(input) -> Tensor; {name}(input, dim, keepdim=False) -> (values, indices); "
                      f"{name}(input, other) -> elementwise, as torch.{name}.")
    return select


max = _select("max", _amax, _C.argmax, _C.maximum, MaxResult)  # noqa: A001
min = _select("min", _amin, _C.argmin, _C.minimum, MinResult)  # noqa: A001


def amax(input, dim=(), keepdim=False):
    """The maximum over `dim` (an int or a tuple; () or None: every dim), as torch.amax."""
    return _amax(input, None if dim == () else dim, keepdim)


def amin(input, dim=(), keepdim=False):
    """The minimum over `dim` (an int or a tuple; () or None: every dim), as torch.amin."""
    return _amin(input, None if dim == () else dim, keepdim)


for _name, _fn in (("max", max), ("min", min), ("amax", amax), ("amin", amin)):
    setattr(_C.Tensor, _name, _fn)
del _name, _fn
