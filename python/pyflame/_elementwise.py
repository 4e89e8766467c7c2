"""Elementwise functions outside the op table: lerp (a composition of table
ops, so autograd needs nothing of its own), and re-exports of the C++ aliases
of table ops (clip, clamp_min, clamp_max, divide, true_divide)."""

from . import _C
from ._C import ZeroDivisionError, clamp_max, clamp_min, clip, divide, true_divide  # noqa: F401,A004

_HALF = (_C.dtype.float16, _C.dtype.bfloat16)


def lerp(input, end, weight):
    """input + weight * (end - input), as torch.lerp: weight is a number or a tensor
    (all broadcast); input and end are float tensors of one dtype."""
    if not isinstance(input, _C.Tensor) or not isinstance(end, _C.Tensor):
        raise TypeError("lerp(): input and end must be tensors")
    if not input.dtype.is_floating_point:
        raise TypeError(f"lerp(): needs floating-point tensors, got {input.dtype}")
    if end.dtype != input.dtype:
        raise TypeError(f"lerp(): expected dtype {input.dtype} for `end` but got dtype {end.dtype}")
    dtype = input.dtype
    if dtype in _HALF:  # one rounding at the end, as PyTorch computes these in float32
        input, end = input.to(_C.dtype.float32), end.to(_C.dtype.float32)
        if isinstance(weight, _C.Tensor):
            weight = weight.to(_C.dtype.float32)
    diff = end - input
    # PyTorch's two-sided form: exact at weight 0 and 1.
    if isinstance(weight, _C.Tensor):
        out = _C.where(weight.abs() < 0.5, input + weight * diff, end - diff * (1 - weight))
    elif abs(weight) < 0.5:
        out = input + weight * diff
    else:
        out = end - diff * (1 - weight)
    return out.to(dtype) if dtype in _HALF else out


def _lerp_(self, end, weight):
    return self.copy_(lerp(self, end, weight))


_C.Tensor.lerp = lerp
_C.Tensor.lerp_ = _lerp_
