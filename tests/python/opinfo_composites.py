"""OpInfos of the pointwise and distance composites lerp, logit and cdist against torch's, values and
gradients. test_elementwise_api.py has lerp's in-place form and errors."""

import torch

from op_registry import ALL_DTYPES, FLOAT_DTYPES, LOOSE_TOL, Arg, OpInfo, Sample, make_values
from opinfo_shape import _x


def _lerp_samples(rng, dtype, cls):
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    w = lambda shape: Arg(make_values(rng, shape, dtype, low=-0.5, high=1.5))  # noqa: E731
    if cls == "plain":  # both sides of the two-sided form, and its ends
        return [Sample((x((3, 4)), x((3, 4)), 0.3)), Sample((x((3, 4)), x((3, 4)), 0.8)),
                Sample((x((5,)), x((5,)), 1.0)), Sample((x((2, 3)), x((2, 3)), w((2, 3))))]
    if cls == "broadcast":
        return [Sample((x((3, 1)), x((1, 4)), w((4,)))), Sample((x((4,)), x((2, 4)), -0.25))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), x((4, 5), "strided"), w((4, 5))))]
    if cls == "empty":
        return [Sample((x((0, 3)), x((0, 3)), 0.5))]
    if cls == "scalar0d":
        return [Sample((x(()), x(()), w(())))]
    return []


def _logit_samples(rng, dtype, cls):
    def p(shape, layout="contig"):  # probabilities away from 0 and 1 (integers: 0 and 1, clamped by eps)
        return Arg(make_values(rng, shape, dtype, low=0.05, high=0.95, ilow=0, ihigh=1), layout)

    if cls == "plain":
        return [Sample((p((3, 4)),)), Sample((p((6,)),), dict(eps=0.1)), Sample((p((2, 3)),), dict(eps=1e-6))]
    if cls == "noncontig":
        return [Sample((p((4, 5), "T"),)), Sample((p((3, 6), "strided"),), dict(eps=0.2))]
    if cls == "empty":
        return [Sample((p((0, 3)),))]
    if cls == "scalar0d":
        return [Sample((p(()),), dict(eps=0.25))]
    return []


def _cdist_samples(rng, dtype, cls):
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    if cls == "plain":
        return [Sample((x((4, 3)), x((5, 3))), dict(p=p)) for p in (2.0, 1.0, 3.0, float("inf"))]
    if cls == "broadcast":  # batch dims broadcast
        return [Sample((x((2, 1, 4, 3)), x((3, 5, 3))))]
    if cls == "noncontig":
        return [Sample((x((3, 4), "T"), x((2, 4))), dict(p=1.5))]
    if cls == "empty":
        return [Sample((x((0, 3)), x((4, 3)))), Sample((x((2, 0)), x((3, 0))))]
    return []


def _logit(input, eps=None):
    """torch.logit of an integer tensor: in the default float dtype, as PyFlame."""
    return torch.logit(input if input.is_floating_point() else input.float(), eps)


OP_INFOS = [
    OpInfo("lerp", "CUSTOM", FLOAT_DTYPES, _lerp_samples, torch.lerp,
           ("plain", "broadcast", "noncontig", "empty", "scalar0d"), tol=LOOSE_TOL),
    OpInfo("logit", "CUSTOM", ALL_DTYPES, _logit_samples, _logit, ("plain", "noncontig", "empty", "scalar0d"),
           tol=LOOSE_TOL, method=False),
    OpInfo("cdist", "CUSTOM", ("float32", "float64"), _cdist_samples, torch.cdist,
           ("plain", "broadcast", "noncontig", "empty"), tol=LOOSE_TOL, method=False),
]
