"""OpInfos of the sorting area's op-table ops: sort, nonzero, topk, kthvalue, median.

sort's samples hold ties (integers, bool, discrete low-precision floats) and
NaNs, and rows long enough for each of the GPU's paths (a small block, a
2048-element tile, several tiles); the reference is torch's stable sort, so
indices must match exactly. float64 values are distinct quarters (no ties) so
that finite differences of sort's values are meaningful. topk, kthvalue and
median pick from sort: their samples are distinct values (torch leaves the
index among ties open), with NaNs for median (the first NaN's index); ties and
the Python-only forms (median of all entries, unique, ...) are tested in
test_sort.py.
"""

import numpy as np
import torch

from op_registry import ALL_DTYPES, NONBOOL_DTYPES, Arg, OpInfo, Sample, is_float, make_values

SORT_CLASSES = ("plain", "noncontig", "empty", "size1", "scalar0d")
PICK_CLASSES = ("plain", "noncontig", "size1", "scalar0d")  # kthvalue and median: no empty dim to pick from


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


def _distinct(rng, shape, dtype, nan=False):
    """Distinct values (quarters for floats, exact in bfloat16 up to 120 elements) in random order."""
    n = int(np.prod(shape)) if shape else 1
    v = rng.permutation(n) - (0 if dtype == "uint8" else n // 2)
    v = (v / 4 if is_float(dtype) else v).reshape(shape)
    if nan and is_float(dtype) and n > 3:
        v.reshape(-1)[rng.choice(n, size=2, replace=False)] = np.nan
    return v


def _select_samples(kind):
    """Samples of topk (k, dim, largest), kthvalue (k, dim, keepdim) and median (dim, keepdim)."""
    def args(shape, dim, k):
        if kind == "topk":
            return [((k, dim), dict(largest=largest)) for largest in (True, False)]
        if kind == "kthvalue":
            return [((max(k, 1), dim), dict(keepdim=keepdim)) for keepdim in (False, True)]
        return [((dim,), dict(keepdim=keepdim)) for keepdim in (False, True)]

    def gen(rng, dtype, cls):
        cases = {"plain": [((3, 4, 5), 0, 2), ((3, 4, 5), 1, 3), ((3, 4, 5), -1, 5), ((37,), 0, 6),
                           ((2, 60), 1, 17)],
                 "noncontig": [((4, 5), 0, 2), ((5, 6), 1, 4)],
                 "size1": [((1, 5), 0, 1), ((4, 1), 1, 1)],
                 "scalar0d": [((), 0, 1), ((), -1, 1)],
                 "empty": [((0, 3), 1, 2)]}.get(cls, [])
        out = []
        for shape, dim, k in cases:
            layout = "T" if cls == "noncontig" else "contig"
            for a, kw in args(shape, dim, k):
                x = _distinct(rng, shape, dtype, nan=kind == "median" and cls == "plain" and dim != 1)
                out.append(Sample((Arg(x, layout),) + a, kw))
        return out

    return gen


def _torch_median(x, dim, keepdim=False):
    return torch.median(x, dim, keepdim)


def _torch_sort(x, dim=-1, descending=False, stable=False):
    # torch.sort takes dim and descending by position only when stable is not given
    return torch.sort(x, dim=dim, descending=descending, stable=stable)


OP_INFOS = [
    # The method returns a named tuple: test_sort.py checks Tensor.sort.
    OpInfo("sort", "CUSTOM", ALL_DTYPES, _sort_samples, _torch_sort, SORT_CLASSES, exact_float=True, method=False),
    OpInfo("nonzero", "CUSTOM", ALL_DTYPES, _nonzero_samples, torch.nonzero, SORT_CLASSES),
    OpInfo("topk", "CUSTOM", NONBOOL_DTYPES, _select_samples("topk"), torch.topk, SORT_CLASSES, exact_float=True),
    OpInfo("kthvalue", "CUSTOM", NONBOOL_DTYPES, _select_samples("kthvalue"), torch.kthvalue, PICK_CLASSES,
           exact_float=True),
    OpInfo("median", "CUSTOM", NONBOOL_DTYPES, _select_samples("median"), _torch_median, PICK_CLASSES,
           exact_float=True),
]
