"""Small helpers shared by the layers: PyTorch's _single/_pair/_triple and the legacy loss arguments."""

import collections.abc
import warnings


def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return (x,) * n

    return parse


_single = _ntuple(1)
_pair = _ntuple(2)
_triple = _ntuple(3)


def _reverse_repeat_tuple(t, n):
    """(1, 2) -> (2, 2, 1, 1) for n=2: pad's order (last dim first) from per-dim values."""
    return tuple(x for x in reversed(t) for _ in range(n))


def legacy_reduction(size_average, reduce):
    """The reduction string for the deprecated size_average/reduce arguments of the losses."""
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='mean'|'sum'|'none' "
                  "instead.", stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"
