"""OpInfos of cumprod (the scans' product) and searchsorted.

cumsum's entry is in opinfo_nn.py; the compositions around these ops
(bucketize, sorter=, side=) are tested in test_linalg_reductions.py."""

import numpy as np
import torch

from op_registry import ALL_DTYPES, NONBOOL_DTYPES, REDUCE_CLASSES, Arg, OpInfo, Sample, _x, is_float, make_values


def _cumprod_samples(rng, dtype, cls):
    # |x| in [0.5, 1.6]: products over a row of 12 stay inside float16's range.
    dom = dict(low=0.5, high=1.6, ilow=-3, ihigh=3)

    def x(shape, layout="contig"):
        a = _x(rng, shape, dtype, dom, layout)
        if is_float(dtype):
            a.values = a.values * np.where(rng.random(a.values.shape) < 0.5, -1, 1).astype(a.values.dtype)
        return a

    if cls == "plain":
        return [Sample((x((3, 4, 5)),), dict(dim=d)) for d in (0, 1, 2, -1)] + [Sample((x((12,)),), dict(dim=0))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"),), dict(dim=d)) for d in (0, 1)] + [Sample((x((3, 4), "strided"),), dict(dim=1))]
    if cls == "empty":
        return [Sample((x((0, 3)),), dict(dim=0)), Sample((x((2, 0)),), dict(dim=1))]
    if cls == "size1":
        return [Sample((x((1, 5)),), dict(dim=0)), Sample((x((4, 1)),), dict(dim=1))]
    if cls == "scalar0d":
        return [Sample((x(()),), dict(dim=0)), Sample((x(()),), dict(dim=-1))]
    return []


def _sorted(rng, shape, dtype, layout="contig"):
    # multiples of 0.5 (floats) or small integers: values often tie with the boundaries
    v = make_values(rng, shape, dtype, low=-4, high=4, discrete=True)
    return Arg(np.sort(v, axis=-1) if v.ndim else v, layout)


def _searchsorted_samples(rng, dtype, cls):
    def v(shape, layout="contig", vdtype=None):
        return Arg(make_values(rng, shape, vdtype or dtype, low=-5, high=5, discrete=True), layout, vdtype)

    kws = (dict(), dict(right=True), dict(side="right"), dict(out_int32=True))
    if cls == "plain":
        out = [Sample((_sorted(rng, (9,), dtype), v((3, 4))), kw) for kw in kws]
        out += [Sample((_sorted(rng, (2, 3, 7), dtype), v((2, 3, 5))), kw) for kw in kws[:2]]
        out.append(Sample((_sorted(rng, (6,), dtype), v((5,), vdtype="float64")), dict(right=True)))
        out.append(Sample((_sorted(rng, (6,), dtype), 1.5)))
        out.append(Sample((_sorted(rng, (300,), dtype), v((1000,))), dict(right=True)))
        return out
    if cls == "noncontig":
        return [Sample((_sorted(rng, (4, 6), dtype, "T"), v((4, 5), "T"))),
                Sample((_sorted(rng, (8,), dtype, "strided"), v((3, 5), "strided")), dict(right=True))]
    if cls == "empty":
        return [Sample((_sorted(rng, (0,), dtype), v((3,)))), Sample((_sorted(rng, (5,), dtype), v((0, 2)))),
                Sample((_sorted(rng, (0, 4), dtype), v((0, 3))))]
    if cls == "size1":
        return [Sample((_sorted(rng, (1,), dtype), v((4,)))), Sample((_sorted(rng, (3, 1), dtype), v((3, 1))))]
    if cls == "scalar0d":
        return [Sample((_sorted(rng, (5,), dtype), v(()))),
                Sample((_sorted(rng, (5,), dtype), v(())), dict(right=True))]
    return []


OP_INFOS = [
    OpInfo("cumprod", "CUSTOM", ALL_DTYPES, _cumprod_samples, torch.cumprod, REDUCE_CLASSES,
           tol={"float16": (2e-3, 2e-3)}),
    OpInfo("searchsorted", "CUSTOM", NONBOOL_DTYPES, _searchsorted_samples, torch.searchsorted, REDUCE_CLASSES,
           method=False),
]
