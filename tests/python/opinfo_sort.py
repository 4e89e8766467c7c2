"""OpInfos of the sorting area's op-table ops: sort and nonzero.

sort's samples hold ties (integers, bool, discrete low-precision floats) and
NaNs, and rows long enough for each of the GPU's paths (a small block, a
2048-element tile, several tiles); the reference is torch's stable sort, so
indices must match exactly. float64 values are distinct quarters (no ties) so
that finite differences of sort's values are meaningful. The compositions (topk,
median, unique, ...) are tested in test_sort.py.
"""

import numpy as np
import torch

from op_registry import ALL_DTYPES, Arg, OpInfo, Sample, is_float, make_values

SORT_CLASSES = ("plain", "noncontig", "empty", "size1", "scalar0d")


def _values(rng, shape, dtype, nan=False):
    if dtype == "float64":  # distinct quarters: perturbations for finite differences never reorder them
        n = int(np.prod(shape)) if shape else 1
        v = ((rng.permutation(n) - n // 2) / 4).reshape(shape)
    else:
        v = make_values(rng, shape, dtype, low=-4, high=4, ilow=-3, ihigh=3, discrete=True)
    if nan and is_float(dtype) and v.size:
        flat = v.reshape(-1)
        flat[rng.integers(0, flat.size, size=max(1, flat.size // 7))] = np.nan
    return v


def _sort_samples(rng, dtype, cls):
    def x(shape, layout="contig", nan=False):
        return Arg(_values(rng, shape, dtype, nan), layout)

    if cls == "plain":
        out = [Sample((x((3, 4, 5)), d), dict(stable=True)) for d in (0, 1, 2, -1)]
        out += [Sample((x((3, 4, 5), nan=True), d), dict(descending=True, stable=True)) for d in (0, -1)]
        out += [Sample((x((37,), nan=True),), dict(stable=True)),
                Sample((x((2, 300), nan=True), 1), dict(descending=True, stable=True)),  # one 512-element tile
                Sample((x((3, 3000), nan=True),), dict(stable=True)),  # two 2048-element tiles per row
                Sample((x((5000, 2)), 0), dict(descending=True, stable=True)),  # long columns
                Sample((x((9000,)),), dict(stable=True))]  # several tiles
        return out
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), d), dict(stable=True)) for d in (0, 1)] + \
               [Sample((x((3, 6), "strided", nan=True), -1), dict(descending=True, stable=True))]
    if cls == "empty":
        return [Sample((x((0, 3)), 0), dict(stable=True)), Sample((x((2, 0, 3)), 1), dict(stable=True)),
                Sample((x((2, 0, 3)), -1), dict(stable=True))]
    if cls == "size1":
        return [Sample((x((1, 5)), 0), dict(stable=True)), Sample((x((4, 1)), 1), dict(stable=True)),
                Sample((x((1, 5)), 1), dict(descending=True, stable=True))]
    if cls == "scalar0d":
        return [Sample((x(()), 0), dict(stable=True)), Sample((x(()), -1), dict(descending=True, stable=True))]
    return []


def _nonzero_values(rng, shape, dtype):
    if dtype == "bool":
        return make_values(rng, shape, dtype)
    v = make_values(rng, shape, dtype, low=-2, high=2, ilow=-1, ihigh=1, discrete=True)
    if is_float(dtype) and v.size > 2:
        v.reshape(-1)[1] = np.nan  # NaN is nonzero
    return v


def _nonzero_samples(rng, dtype, cls):
    def x(shape, layout="contig"):
        return Arg(_nonzero_values(rng, shape, dtype), layout)

    if cls == "plain":
        return [Sample((x((3, 4, 5)),)), Sample((x((37,)),)), Sample((x((2, 3, 1, 4)),))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"),)), Sample((x((3, 6), "strided"),))]
    if cls == "empty":
        return [Sample((x((0, 3)),)), Sample((x((2, 0)),))]
    if cls == "size1":
        return [Sample((x((1, 5)),)), Sample((x((1,)),))]
    if cls == "scalar0d":
        return [Sample((x(()),))]
    return []


def _torch_sort(x, dim=-1, descending=False, stable=False):
    # torch.sort takes dim and descending by position only when stable is not given
    return torch.sort(x, dim=dim, descending=descending, stable=stable)


OP_INFOS = [
    # The method returns a named tuple: test_sort.py checks Tensor.sort.
    OpInfo("sort", "CUSTOM", ALL_DTYPES, _sort_samples, _torch_sort, SORT_CLASSES, exact_float=True, method=False),
    OpInfo("nonzero", "CUSTOM", ALL_DTYPES, _nonzero_samples, torch.nonzero, SORT_CLASSES),
]
