"""OpInfos of the misc area: the trigonometric and hyperbolic functions, sgn,
lgamma, digamma, fmax/fmin, scatter_reduce, and the composite ops addcmul and
addcdiv.

The compositions around them (isclose, index_add, diff, the random draws, ...)
have no op-table entry and are tested in test_misc_api.py, as are addcmul's and
addcdiv's in-place forms, mixed dtypes and errors."""

import torch

from op_registry import (
    ALL_DTYPES,
    BINARY_CLASSES,
    FLOAT_DTYPES,
    NONBOOL_DTYPES,
    UNARY_CLASSES,
    Arg,
    OpInfo,
    Sample,
    _binary,
    _binary_samples,
    _float_unary,
    _unary_samples,
    make_values,
)
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


_ADDC_CLASSES = ("plain", "broadcast", "noncontig", "empty", "size1", "scalar0d")

OP_INFOS = [
    OpInfo("addcmul", "CUSTOM", NONBOOL_DTYPES, _addc_samples(False), torch.addcmul, _ADDC_CLASSES),
    # Integer tensor1 and tensor2 are refused (integer division), as torch.
    OpInfo("addcdiv", "CUSTOM", FLOAT_DTYPES, _addc_samples(True), torch.addcdiv, _ADDC_CLASSES),

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
