"""Registry entries of the integer-division, bitwise and remaining math
elementwise ops (floor_divide, remainder, fmod, bitwise_*, shifts,
nan_to_num, erfinv, logaddexp, copysign, xlogy) and the activations' gradients."""

import numpy as np
import torch

from op_registry import (
    ALL_DTYPES,
    BINARY_CLASSES,
    FLOAT_DTYPES,
    INT_DTYPES,
    NONBOOL_DTYPES,
    UNARY_CLASSES,
    OpInfo,
    _binary,
    _binary_samples,
    _float_unary,
    _unary_samples,
)

_STD = dict(low=-5, high=5, ilow=-9, ihigh=9)
# Divisors: never 0 for integers (a ZeroDivisionError, tested in test_elementwise_api.py)
# nor near 0 for floats; multiples of 0.5 on both sides give exact quotients (the rounding edges).
_DIVISOR = dict(low=-4, high=4, ilow=-5, ihigh=5, nonzero=True)
_DIVIDEND = dict(low=-9, high=9, ilow=-40, ihigh=40)
_HALF_STEPS = dict(low=-6, high=6, ilow=-40, ihigh=40, discrete=True)
_BITS = dict(low=-100, high=100, ilow=-120, ihigh=120)
# Shift counts past the width (8 bits and up) and negative ones, where PyTorch defines the result.
_SHIFTS = dict(low=-2, high=12, ilow=-2, ihigh=12)


def _float_binary(fn):
    """BINARY_FLOAT: integer and bool operands computed in float32, numbers included (torch promotes
    them so for copysign and xlogy, and refuses them for logaddexp)."""

    def ref(a, b):
        if all(not (isinstance(v, torch.Tensor) and v.dtype.is_floating_point) and not isinstance(v, float)
               for v in (a, b)):
            a = a.float() if isinstance(a, torch.Tensor) else float(a)
            b = b.float() if isinstance(b, torch.Tensor) else float(b)
        return _binary(fn)(a, b)

    return ref


def _same_tensors(a, b):
    """aten's backward kernels take two tensors of one shape and dtype."""
    dtype = torch.result_type(a, b)
    return [t.contiguous() for t in torch.broadcast_tensors(a.to(dtype), b.to(dtype))]


def _trunc_divide(a, b):
    """float16/bfloat16 quotients are truncated from float32 (torch rounds them to the dtype first,
    which can move a quotient just below a whole number onto it: docs/ops.md)."""
    if a.dtype in (torch.float16, torch.bfloat16):
        return torch.div(a.float(), b.float(), rounding_mode="trunc").to(a.dtype)
    return torch.div(a, b, rounding_mode="trunc")


def _division_samples(dom_a):
    plain = _binary_samples(dom_a, _DIVISOR, scalars=(3, 2.5), scalar_first=(7, -7.5))
    halves = _binary_samples(_HALF_STEPS, dict(_DIVISOR, discrete=True), scalars=(0.5, -2.0), scalar_first=(3.0, -1.5))

    def gen(rng, dtype, cls):
        out = plain(rng, dtype, cls)
        if cls == "plain" and dtype in FLOAT_DTYPES:
            out += halves(rng, dtype, cls)
        return out

    return gen


def _special_samples(kwargs_variants):
    """Unary samples whose float values include NaN, inf and -inf."""
    base = _unary_samples(_STD, kwargs_variants)

    def gen(rng, dtype, cls):
        samples = base(rng, dtype, cls)
        if dtype in FLOAT_DTYPES:
            for s in samples:
                flat = s.args[0].values.reshape(-1)
                flat[::3], flat[1::4], flat[2::5] = np.nan, np.inf, -np.inf
        return samples

    return gen


_INT_OR_BOOL = INT_DTYPES + ("bool",)

OP_INFOS = [
    # rounded division and remainders (integers stay integers)
    *[OpInfo(n, "BINARY", NONBOOL_DTYPES, _division_samples(_DIVIDEND), _binary(fn), BINARY_CLASSES)
      for n, fn in (("floor_divide", torch.floor_divide), ("trunc_divide", _trunc_divide),
                    ("remainder", torch.remainder), ("fmod", torch.fmod))],
    # bitwise: integer and bool operands
    *[OpInfo(n, "BINARY_INT", _INT_OR_BOOL, _binary_samples(_BITS, scalars=(3, 6, True), scalar_first=(5, True)),
             _binary(getattr(torch, n)), BINARY_CLASSES)
      for n in ("bitwise_and", "bitwise_or", "bitwise_xor")],
    *[OpInfo(n, "BINARY_INT", INT_DTYPES, _binary_samples(_BITS, _SHIFTS, scalars=(1, 3, 7, 40, 70),
                                                          scalar_first=(1, 3)),
             _binary(getattr(torch, n)), BINARY_CLASSES)
      for n in ("bitwise_left_shift", "bitwise_right_shift")],
    OpInfo("bitwise_not", "UNARY_INT", _INT_OR_BOOL, _unary_samples(_BITS), torch.bitwise_not, UNARY_CLASSES),
    # math
    OpInfo("nan_to_num", "UNARY", NONBOOL_DTYPES,
           _special_samples(({}, dict(nan=1.5), dict(posinf=100.0, neginf=-7.0), dict(nan=-2, posinf=3))),
           torch.nan_to_num, UNARY_CLASSES, exact_float=True),
    OpInfo("erfinv", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-0.99, high=0.99, ilow=-1, ihigh=1)),
           _float_unary(torch.erfinv), UNARY_CLASSES),
    OpInfo("logaddexp", "BINARY_FLOAT", ALL_DTYPES, _binary_samples(_STD, scalars=(3, 2.5, True),
                                                                    scalar_first=(-2, 1.5, True)),
           _float_binary(torch.logaddexp), BINARY_CLASSES),
    OpInfo("copysign", "BINARY_FLOAT", ALL_DTYPES, _binary_samples(_STD, scalars=(-3, 2.5, True),
                                                                   scalar_first=(2, -1.5, True)),
           _float_binary(torch.copysign), BINARY_CLASSES, exact_float=True),
    OpInfo("xlogy", "BINARY_FLOAT", ALL_DTYPES,
           # x = 0 among the integers (0 there); floats away from it, where xlogy's gradient jumps
           _binary_samples(dict(low=-3, high=3, ilow=-2, ihigh=2), dict(low=0.1, high=6, ilow=1, ihigh=9),
                           scalars=(3, 2.5, True), scalar_first=(0, -1.5, True)),
           _float_binary(torch.xlogy), BINARY_CLASSES),
    # activations' gradients (grad, x): the derivatives of relu (from its output), gelu and silu
    OpInfo("relu_backward", "BINARY", NONBOOL_DTYPES, _binary_samples(_STD, scalars=(2,), scalar_first=(1.5,)),
           _binary(lambda g, y: torch.ops.aten.threshold_backward(*_same_tensors(g, y), 0)), BINARY_CLASSES,
           exact_float=True, method=False),
    OpInfo("gelu_backward", "BINARY_FLOAT", ALL_DTYPES, _binary_samples(_STD, scalars=(2.5,), scalar_first=(1.5,)),
           _float_binary(lambda g, x: torch.ops.aten.gelu_backward(*_same_tensors(g, x))), BINARY_CLASSES,
           method=False),
    OpInfo("gelu_tanh_backward", "BINARY_FLOAT", ALL_DTYPES,
           _binary_samples(_STD, scalars=(2.5,), scalar_first=(1.5,)),
           _float_binary(lambda g, x: torch.ops.aten.gelu_backward(*_same_tensors(g, x), approximate="tanh")),
           BINARY_CLASSES, method=False),
    OpInfo("silu_backward", "BINARY_FLOAT", ALL_DTYPES, _binary_samples(_STD, scalars=(2.5,), scalar_first=(1.5,)),
           _float_binary(lambda g, x: torch.ops.aten.silu_backward(*_same_tensors(g, x))), BINARY_CLASSES,
           method=False),
]
