"""OpInfos of the composite ops that index along one dim (index_add, index_copy, index_fill), diff, roll, flip,
diag_embed and the running extremes cummax and cummin, against torch's, values and gradients. test_misc_api.py has
their in-place forms, number arguments (diff's prepend, index_fill's 0-d value) and errors."""

import torch

from op_registry import ALL_DTYPES, Arg, OpInfo, Sample, make_values
from opinfo_shape import SHAPE_CLASSES, _index, _long_index, _unique_index, _x

_INDEX_CLASSES = ("plain", "noncontig", "empty", "scalar0d")


def _index_along_samples(kind):
    """(input, dim, index, source or value [, alpha]): index_add repeats positions (their sums), index_copy
    writes each position once (torch leaves repeated writes unspecified)."""

    def gen(rng, dtype, cls):
        x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731

        def index(n, size, dt="int64"):
            if kind == "copy":
                return Arg(_unique_index(rng, (n,), 0, size).values, dtype=dt)
            return _index(rng, (n,), size, dtype=dt)

        def sample(xs, dim, n, layout="contig", dt="int64", **kw):
            shape = list(xs.values.shape) or [1]
            size = shape[dim]
            shape[dim] = n
            if kind == "fill":
                last = 1.5 if dtype.startswith("float") else 2
            else:  # a 0-d input takes a 0-d source
                last = Arg(make_values(rng, tuple(shape) if xs.values.ndim else (), dtype), layout)
            return Sample((xs, dim, index(n, size, dt=dt), last), kw)

        alpha = {} if kind != "add" or dtype == "bool" else {"alpha": 2}
        if cls == "plain":
            return [sample(x((5, 4)), 0, 3 if kind == "copy" else 7, **alpha), sample(x((5, 4)), 1, 3, dt="int32"),
                    sample(x((2, 3, 4)), -1, 2), sample(x((6,)), 0, 4)]
        if cls == "noncontig":
            return [sample(x((4, 5), "T"), 1, 3, layout="T"), sample(x((3, 6), "strided"), 0, 2, **alpha)]
        if cls == "empty":
            return [sample(x((0, 4)), 1, 2), sample(x((3, 4)), 0, 0)]
        if cls == "scalar0d":
            return [sample(x(()), 0, 1)]
        return []

    return gen


def _index_add(x, dim, index, source, alpha=1):
    """float16/bfloat16 sums accumulate in float32 and are rounded once, as PyFlame's scatter_add."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return torch.index_add(x.float(), dim, index, source.float(), alpha=alpha).to(x.dtype)
    return torch.index_add(x, dim, index, source, alpha=alpha)


def _diff_samples(rng, dtype, cls):
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    if cls == "plain":
        return [Sample((x((4, 6)),)), Sample((x((4, 6)),), dict(n=2, dim=0)), Sample((x((7,)),), dict(n=3)),
                Sample((x((3, 5)), 1, 1, x((3, 2)), x((3, 1)))),  # prepend, append (the harness converts args)
                Sample((x((3, 5)),), dict(n=7, dim=1))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"),), dict(dim=0)), Sample((x((3, 6), "strided"),), dict(n=2))]
    if cls == "empty":
        return [Sample((x((0, 3)),), dict(dim=0)), Sample((x((2, 0)),))]
    if cls == "size1":
        return [Sample((x((1, 4)),), dict(dim=0)), Sample((x((3, 1)), 1, -1, None, x((3, 2))))]
    return []


def _roll_samples(rng, dtype, cls):
    """(input, shifts[, dims]): negative and overlong shifts, a dim rolled twice, dims=None (flattened)."""
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    if cls == "plain":
        return [Sample((x((4, 6)), 2, 1)), Sample((x((3, 4, 5)), (1, -7), (0, 2))), Sample((x((3, 4)), 5)),
                Sample((x((5,)), (2, 1), (0, -1))), Sample((x((2, 3)), 0, 0))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), -1, 0)), Sample((x((3, 6), "strided"), 4))]
    if cls == "empty":
        return [Sample((x((0, 3)), 1, 0)), Sample((x((2, 0)), 3))]
    if cls == "size1":
        return [Sample((x((1, 4)), 3, 0)), Sample((x((3, 1)), (1, 2), (1, 0)))]
    if cls == "scalar0d":
        return [Sample((x(()), 2))]
    return []


def _flip_samples(rng, dtype, cls):
    """(input, dims): one dim, several in any order, negative dims, none (a copy), size-1 dims."""
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    if cls == "plain":
        return [Sample((x((4, 6)), (1,))), Sample((x((3, 4, 5)), (2, 0))), Sample((x((3, 4, 5)), (-1, 1, 0))),
                Sample((x((5,)), (0,))), Sample((x((2, 3)), ()))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), (0,))), Sample((x((3, 6), "strided"), (0, 1)))]
    if cls == "empty":
        return [Sample((x((0, 3)), (0, 1))), Sample((x((2, 0)), (1,)))]
    if cls == "size1":
        return [Sample((x((1, 4)), (0,))), Sample((x((3, 1)), (1, 0)))]
    if cls == "scalar0d":
        return [Sample((x(()), (0,)))]
    return []


def _diag_embed_samples(rng, dtype, cls):
    """(input, offset, dim1, dim2): the main diagonal, offsets above and below, the matrix dims anywhere."""
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    if cls == "plain":
        return [Sample((x((2, 3)),)), Sample((x((2, 3)), 1, 0, 2)), Sample((x((2, 3)), -2)), Sample((x((4,)),)),
                Sample((x((2, 3, 2)), 2, 2, 0)), Sample((x((3,)), -1, 1, 0))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"),)), Sample((x((3, 6), "strided"), 1))]
    if cls == "empty":
        return [Sample((x((0, 3)),)), Sample((x((2, 0)), 1))]
    if cls == "size1":
        return [Sample((x((1,)),)), Sample((x((3, 1)), -1))]
    return []


def _cumulative_samples(rng, dtype, cls):
    def x(shape, layout="contig"):  # beyond "plain" (finite differences), repeats: ties move the index later
        return Arg(make_values(rng, shape, dtype, low=-2, high=2, discrete=cls != "plain"), layout)

    if cls == "plain":
        return [Sample((x((9,)), 0)), Sample((x((3, 40)), 1)), Sample((x((5, 4, 3)), -3))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), 0)), Sample((x((3, 6), "strided"), 1))]
    if cls == "empty":
        return [Sample((x((2, 0, 3)), 1)), Sample((x((0, 3)), 1))]
    if cls == "size1":
        return [Sample((x((3, 1)), 1))]
    if cls == "scalar0d":
        return [Sample((x(()), 0))]
    return []


OP_INFOS = [
    OpInfo("index_add", "CUSTOM", ALL_DTYPES, _index_along_samples("add"), _index_add, _INDEX_CLASSES),
    OpInfo("index_copy", "CUSTOM", ALL_DTYPES, _index_along_samples("copy"), _long_index(torch.index_copy), _INDEX_CLASSES,
           exact_float=True),
    OpInfo("index_fill", "CUSTOM", ALL_DTYPES, _index_along_samples("fill"), _long_index(torch.index_fill), _INDEX_CLASSES,
           exact_float=True),
    OpInfo("diff", "CUSTOM", ALL_DTYPES, _diff_samples, torch.diff, ("plain", "noncontig", "empty", "size1")),
    OpInfo("roll", "CUSTOM", ALL_DTYPES, _roll_samples, torch.roll, SHAPE_CLASSES, exact_float=True),
    OpInfo("flip", "CUSTOM", ALL_DTYPES, _flip_samples, torch.flip, SHAPE_CLASSES, exact_float=True),
    OpInfo("diag_embed", "CUSTOM", ALL_DTYPES, _diag_embed_samples, torch.diag_embed,
           ("plain", "noncontig", "empty", "size1"), exact_float=True),
    *[OpInfo(n, "CUSTOM", ALL_DTYPES, _cumulative_samples, getattr(torch, n), SHAPE_CLASSES, exact_float=True)
      for n in ("cummax", "cummin")],
]
