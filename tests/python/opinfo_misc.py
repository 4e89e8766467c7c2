"""OpInfos of the misc area: the trigonometric and hyperbolic functions, sgn,
lgamma, digamma, fmax/fmin, scatter_reduce, and the composite ops addcmul,
addcdiv and isclose.

The compositions around them (allclose, index_put, the random draws, ...)
have no op-table entry and are tested in test_misc_api.py, as are addcmul's and
addcdiv's in-place forms, mixed dtypes and errors; index_add/copy/fill, diff,
cummax and cummin are in opinfo_index.py."""

import numpy as np
import torch

from op_registry import (ALL_DTYPES, BINARY_CLASSES, FLOAT_DTYPES, NONBOOL_DTYPES, UNARY_CLASSES, Arg, OpInfo, Sample,
                         _binary, _binary_samples, _float_unary, _unary_samples, make_values)
from opinfo_shape import SHAPE_CLASSES, _index, _x

_STD = dict(low=-5, high=5, ilow=-9, ihigh=9)
_UNIT = dict(low=-0.95, high=0.95, ilow=-1, ihigh=1)  # asin, acos, atanh: inside (-1, 1)
_GAMMA = dict(low=0.2, high=8, ilow=1, ihigh=20)  # away from the poles, where finite differences hold

_UNARY_FLOAT = [
    ("tan", dict(low=-1.4, high=1.4, ilow=-1, ihigh=1)),
    ("asin", _UNIT),
    ("acos", _UNIT),
    ("atan", _STD),
    ("sinh", dict(low=-4, high=4, ilow=-5, ihigh=5)),
    ("cosh", dict(low=-4, high=4, ilow=-5, ihigh=5)),
    ("asinh", _STD),
    ("acosh", dict(low=1.1, high=10, ilow=1, ihigh=20)),
    ("atanh", _UNIT),
    ("lgamma", _GAMMA),
    ("digamma", _GAMMA),
]


def _scatter_reduce_samples(rng, dtype, cls):
    """(input, dim, index, src, reduce) with duplicate positions, each reduction with and without include_self."""
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    i = lambda shape, size, layout="contig", dt="int64": _index(rng, shape, size, layout, dt)  # noqa: E731
    reduces = ("sum", "prod", "amax", "amin") + (() if dtype == "bool" else ("mean",))  # no bool mean in torch
    if cls == "plain":
        base = [((x((3, 5)), 0, i((4, 5), 3), x((4, 5)))), ((x((3, 5)), 1, i((3, 6), 5, dt="int32"), x((3, 7)))),
                ((x((2, 3, 4)), -1, i((2, 2, 5), 4), x((2, 3, 5))))]
    elif cls == "noncontig":
        base = [((x((4, 5), "T"), 1, i((4, 3), 5), x((4, 5), "T"))),
                ((x((3, 6), "strided"), 0, i((2, 6), 3, "strided", "int32"), x((3, 6))))]
    elif cls == "empty":
        base = [((x((0, 4)), 1, i((0, 3), 4), x((0, 4)))), ((x((3, 4)), 0, i((0, 4), 3), x((2, 4))))]
    elif cls == "size1":
        base = [((x((1, 5)), 1, i((1, 5), 5), x((1, 5)))), ((x((4, 1)), 0, i((3, 1), 4), x((4, 1))))]
    elif cls == "scalar0d":
        base = [((x(()), 0, _index(rng, (), 1), x(())))]
    else:
        return []
    return [Sample(args + (r,), dict(include_self=inc)) for args in base for r in reduces for inc in (True, False)]


def _scatter_reduce(x, dim, index, src, reduce, include_self=True):
    """torch.scatter_reduce; float16/bfloat16 are combined in float32 and rounded once (as pf)."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return torch.scatter_reduce(x.float(), dim, index.long(), src.float(), reduce,
                                    include_self=include_self).to(x.dtype)
    return torch.scatter_reduce(x, dim, index.long(), src, reduce, include_self=include_self)


def _addc_samples(divides):
    """(input, tensor1, tensor2) with value=: integers take integer values only, as torch; addcdiv's
    divisors stay away from 0."""
    def gen(rng, dtype, cls):
        def t(shape, layout="contig", divisor=False):
            return Arg(make_values(rng, shape, dtype, **_STD, nonzero=divisor), layout)

        def args(a, b, c, layout="contig"):
            return (t(a, layout), t(b, layout), t(c, layout, divisor=divides))

        values = (1, 0.5, -2, 3) if dtype in FLOAT_DTYPES else (1, 2, -3)
        if cls == "plain":
            return [Sample(args((3, 5), (3, 5), (3, 5)), dict(value=v)) for v in values] + \
                   [Sample(args((2, 3, 4), (2, 3, 4), (2, 3, 4)))]
        if cls == "broadcast":
            return [Sample(args((3, 1, 5), (4, 5), (5,)), dict(value=values[1])),
                    Sample(args((5,), (2, 3, 5), (3, 1)), dict(value=values[2])),
                    Sample(args((2, 3), (), ()))]
        if cls == "noncontig":
            return [Sample(args((4, 5), (4, 5), (4, 5), "T"), dict(value=values[1])),
                    Sample(args((3, 5), (3, 5), (3, 5), "strided"))]
        if cls == "empty":
            return [Sample(args((0, 3), (0, 3), (0, 3))), Sample(args((2, 0), (1, 0), (2, 1)), dict(value=values[2]))]
        if cls == "size1":
            return [Sample(args((1, 5, 1), (1, 5, 1), (1, 1, 1)), dict(value=values[1]))]
        if cls == "scalar0d":
            return [Sample(args((), (), ()), dict(value=v)) for v in values[:2]] + [Sample(args((), (3,), ()))]
        return []

    return gen


def _isclose_samples(rng, dtype, cls):
    """(input, other) of few values, moved by one step (1/64, or 1 for integers) here and there, so
    that equal, close and far elements meet the tolerances; a sample of NaNs and infinities."""
    def t(shape, layout="contig"):
        v = make_values(rng, shape, dtype, low=-1, high=1, ilow=-2, ihigh=2, discrete=True)
        if dtype != "bool":
            step = 1 / 64 if dtype in FLOAT_DTYPES else 1
            v = (v + step * rng.integers(-1, 2, size=v.shape)).astype(v.dtype)
        return Arg(v, layout)

    if dtype in FLOAT_DTYPES:
        tolerances = ({}, dict(rtol=0.02), dict(atol=0.02), dict(rtol=0, atol=0), dict(atol=0.6, equal_nan=True))
    else:  # no exact boundary: |input - other| never equals atol + rtol * |other|
        tolerances = ({}, dict(rtol=0.3), dict(atol=1), dict(rtol=0, atol=0))
    if cls == "plain":
        samples = [Sample((t((4, 6)), t((4, 6))), kw) for kw in tolerances] + [Sample((t((2, 3, 4)), t((2, 3, 4))))]
        if dtype in FLOAT_DTYPES:
            inf, nan = float("inf"), float("nan")
            special = (Arg(np.array([1, nan, inf, -inf, inf, nan], dtype=np.float64)),
                       Arg(np.array([1, nan, inf, inf, 1e4, 1], dtype=np.float64)))
            samples += [Sample(special, dict(equal_nan=e)) for e in (False, True)]
        return samples
    if cls == "broadcast":
        return [Sample((t((3, 1, 5)), t((4, 5))), tolerances[1]), Sample((t((5,)), t((2, 3, 5))), tolerances[2]),
                Sample((t((2, 1)), t((1, 3))))]
    if cls == "noncontig":
        return [Sample((t((4, 5), "T"), t((4, 5), "strided")), tolerances[1]),
                Sample((t((3, 4), "strided"), t((3, 4), "T")))]
    if cls == "empty":
        return [Sample((t((0, 3)), t((0, 3)))), Sample((t((2, 0)), t((1, 0))), tolerances[2])]
    if cls == "size1":
        return [Sample((t((1, 5, 1)), t((1, 1, 1))), tolerances[1])]
    if cls == "scalar0d":
        return [Sample((t(()), t(())), kw) for kw in tolerances] + [Sample((t(()), t((3,))))]
    return []


_ADDC_CLASSES = ("plain", "broadcast", "noncontig", "empty", "size1", "scalar0d")

OP_INFOS = [
    OpInfo("addcmul", "CUSTOM", NONBOOL_DTYPES, _addc_samples(False), torch.addcmul, _ADDC_CLASSES),
    # Integer tensor1 and tensor2 are refused (integer division), as torch.
    OpInfo("addcdiv", "CUSTOM", FLOAT_DTYPES, _addc_samples(True), torch.addcdiv, _ADDC_CLASSES),
    OpInfo("isclose", "CUSTOM", ALL_DTYPES, _isclose_samples, torch.isclose, _ADDC_CLASSES),

    *[OpInfo(n, "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dom), _float_unary(getattr(torch, n)), UNARY_CLASSES)
      for n, dom in _UNARY_FLOAT],
    # torch.sign: the same function for real tensors, whose gradient torch gives as zeros
    # (torch.sgn's is a ZeroTensor that cannot be read).
    OpInfo("sgn", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), torch.sign, UNARY_CLASSES, exact_float=True),
    # Continuous values: at ties the gradient goes to the first operand (test_misc_api.py checks
    # it), where finite differences would split it.
    *[OpInfo(n, "BINARY", ALL_DTYPES, _binary_samples(_STD), _binary(getattr(torch, n)), BINARY_CLASSES,
             exact_float=True)
      for n in ("fmax", "fmin")],
    OpInfo("scatter_reduce", "CUSTOM", ALL_DTYPES, _scatter_reduce_samples, _scatter_reduce, SHAPE_CLASSES,
           tol={d: (2e-2, 2e-2) if d in ("float16", "bfloat16") else (1e-5, 1e-5) for d in FLOAT_DTYPES}),
]
