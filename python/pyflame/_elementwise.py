"""lerp (a composite op of the table) with its method forms, and re-exports of
the C++ aliases of table ops (clip, clamp_min, clamp_max, divide, true_divide)."""

from . import _C
from ._C import ZeroDivisionError, clamp_max, clamp_min, clip, divide, true_divide  # noqa: F401,A004


def lerp(input, end, weight):
    """input + weight * (end - input), as torch.lerp: weight is a number or a tensor
    (all broadcast); input and end are float tensors of one dtype (the table's lerp)."""
    if not isinstance(input, _C.Tensor) or not isinstance(end, _C.Tensor):
        raise TypeError("lerp(): input and end must be tensors")
    return _C.lerp(input, end, weight)


def _lerp_(self, end, weight):
    return self.copy_(lerp(self, end, weight))


_C.Tensor.lerp = lerp
_C.Tensor.lerp_ = _lerp_
