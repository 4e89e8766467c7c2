"""OpInfos of the shape area's op-table ops: index_select, gather, scatter, scatter_add.

Their signatures are (input, dim, index[, src]); index samples alternate int64
and int32 and hold random valid positions. The compositions of the area (cat,
split, masked_fill, ...) have no op-table entry and are tested in test_shape.py.
"""

import numpy as np
import torch

from op_registry import ALL_DTYPES, Arg, OpInfo, Sample, is_float, make_values

SHAPE_CLASSES = ("plain", "noncontig", "empty", "size1", "scalar0d")
_DOM = dict(low=-5, high=5, ilow=-9, ihigh=9)


def _x(rng, shape, dtype, layout="contig"):
    return Arg(make_values(rng, shape, dtype, **_DOM), layout)


def _index(rng, shape, size, layout="contig", dtype="int64"):
    """Random positions in [0, size) (not all zero when size > 1)."""
    shape = tuple(shape)
    if size == 0:
        assert int(np.prod(shape)) == 0, "an index into an empty dim must be empty"
        return Arg(np.zeros(shape, np.int64), layout, dtype=dtype)
    return Arg(make_values(rng, shape, "int64", ilow=0, ihigh=size - 1), layout, dtype=dtype)


def _unique_index(rng, shape, dim, size, layout="contig", dtype="int64"):
    """Positions in [0, size), distinct along `dim` (PyTorch leaves the order of
    duplicate scatter writes unspecified)."""
    shape = tuple(shape)
    full = list(shape)
    full[dim] = size
    perm = np.argsort(rng.random(full), axis=dim, kind="stable")
    v = np.take(perm, np.arange(shape[dim]), axis=dim).astype(np.int64)
    return Arg(v.reshape(shape), layout, dtype=dtype)


def _index_select_samples(rng, dtype, cls):
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    i = lambda n, size, dt="int64": _index(rng, (n,), size, dtype=dt)  # noqa: E731
    if cls == "plain":
        return [Sample((x((5, 4)), 0, i(7, 5))), Sample((x((5, 4)), 1, i(3, 4, "int32"))),
                Sample((x((2, 3, 4)), -1, i(6, 4))), Sample((x((2, 3, 4)), 1, i(2, 3, "int32"))),
                Sample((x((6,)), 0, i(9, 6)))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), 0, i(6, 4))), Sample((x((4, 5), "T"), 1, i(3, 5, "int32"))),
                Sample((x((3, 6), "strided"), -1, i(4, 6))), Sample((x((2, 3, 4), "T"), 2, i(5, 4))),
                Sample((x((4, 5)), 0, _index(rng, (3,), 4, "strided")))]
    if cls == "empty":
        return [Sample((x((0, 4)), 1, i(3, 4))), Sample((x((3, 4)), 0, i(0, 3))),
                Sample((x((2, 0, 3)), 2, i(2, 3, "int32")))]
    if cls == "size1":
        return [Sample((x((1, 5)), 0, i(3, 1))), Sample((x((4, 1)), 1, i(1, 1))),
                Sample((x((3, 4)), 1, _index(rng, (), 4)))]  # a 0-d index keeps the dim (size 1)
    if cls == "scalar0d":
        return [Sample((x(()), 0, _index(rng, (), 1))), Sample((x(()), -1, _index(rng, (1,), 1, dtype="int32")))]
    return []


def _gather_samples(rng, dtype, cls):
    x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731
    i = lambda shape, size, layout="contig", dt="int64": _index(rng, shape, size, layout, dt)  # noqa: E731
    if cls == "plain":
        return [Sample((x((3, 5)), 1, i((3, 7), 5))), Sample((x((3, 5)), 0, i((4, 5), 3, dt="int32"))),
                Sample((x((2, 3, 4)), -1, i((2, 3, 2), 4))), Sample((x((2, 3, 4)), 1, i((1, 5, 3), 3))),
                Sample((x((6,)), 0, i((8,), 6, dt="int32")))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), 1, i((4, 3), 5))), Sample((x((4, 5)), 0, i((6, 5), 4, "T"))),
                Sample((x((3, 6), "strided"), 0, i((2, 6), 3, "strided", "int32"))),
                Sample((x((2, 3, 4), "T"), 2, i((2, 3, 6), 4, "T")))]
    if cls == "empty":
        return [Sample((x((0, 4)), 1, i((0, 3), 4))), Sample((x((3, 4)), 0, i((0, 4), 3))),
                Sample((x((3, 4)), 1, i((3, 0), 4, dt="int32")))]
    if cls == "size1":
        return [Sample((x((1, 5)), 1, i((1, 8), 5))), Sample((x((4, 1)), 0, i((6, 1), 4))),
                Sample((x((3, 4)), 1, i((3, 1), 4)))]
    if cls == "scalar0d":
        return [Sample((x(()), 0, i((), 1))), Sample((x((5,)), 0, i((), 5, dt="int32")))]
    return []


def _scatter_samples(add):
    def gen(rng, dtype, cls):
        x = lambda shape, layout="contig": _x(rng, shape, dtype, layout)  # noqa: E731

        def i(shape, dim, size, layout="contig", dt="int64"):
            # scatter_add sums duplicates (allowed and tested); scatter gets distinct positions.
            return _index(rng, shape, size, layout, dt) if add else _unique_index(rng, shape, dim, size, layout, dt)

        if cls == "plain":
            return [Sample((x((3, 5)), 0, i((2, 5), 0, 3), x((2, 5)))),
                    Sample((x((3, 5)), 1, i((3, 4), 1, 5, dt="int32"), x((3, 6)))),
                    Sample((x((2, 3, 4)), -1, i((2, 2, 3), 2, 4), x((2, 3, 3)))),
                    Sample((x((2, 3, 4)), 1, i((1, 3, 4), 1, 3), x((2, 3, 5)))),
                    Sample((x((6,)), 0, i((4,), 0, 6), x((5,))))]
        if cls == "noncontig":
            return [Sample((x((4, 5), "T"), 1, i((4, 3), 1, 5), x((4, 5), "T"))),
                    Sample((x((4, 5)), 0, i((3, 5), 0, 4, "T"), x((3, 5), "strided"))),
                    Sample((x((3, 6), "strided"), 0, i((2, 6), 0, 3, "strided", "int32"), x((3, 6)))),
                    Sample((x((2, 3, 4), "T"), 2, i((2, 3, 4), 2, 4, "T"), x((2, 3, 4), "T")))]
        if cls == "empty":
            return [Sample((x((0, 4)), 1, i((0, 3), 1, 4), x((0, 4)))),
                    Sample((x((3, 4)), 0, i((0, 4), 0, 3), x((2, 4)))),
                    Sample((x((3, 4)), 1, i((3, 0), 1, 4, dt="int32"), x((3, 2))))]
        if cls == "size1":
            return [Sample((x((1, 5)), 1, i((1, 5), 1, 5), x((1, 5)))),
                    Sample((x((4, 1)), 0, i((3, 1), 0, 4), x((4, 1)))),
                    Sample((x((3, 4)), 1, i((3, 1), 1, 4), x((3, 1))))]
        if cls == "scalar0d":
            return [Sample((x(()), 0, _index(rng, (), 1), x(()))),
                    Sample((x((5,)), 0, _index(rng, (), 5), x(())))]
        if cls == "pyscalar":  # scatter's value form
            v = 2.5 if is_float(dtype) else (True if dtype == "bool" else 3)
            return [Sample((x((3, 5)), 1, i((3, 2), 1, 5), v)), Sample((x((4, 3)), 0, i((2, 3), 0, 4, "T"), v))]
        return []

    return gen


def _long_index(fn):
    """torch reference taking the index as int64 (older torch wants it for gather/scatter)."""
    return lambda x, dim, index, *rest: fn(x, dim, index.long(), *rest)


def _scatter_add(x, dim, index, src):
    """float16/bfloat16 sums accumulate in float32 and are rounded once (torch rounds at every add on some paths)."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return torch.scatter_add(x.float(), dim, index.long(), src.float()).to(x.dtype)
    return torch.scatter_add(x, dim, index.long(), src)


OP_INFOS = [
    OpInfo("index_select", "CUSTOM", ALL_DTYPES, _index_select_samples, torch.index_select, SHAPE_CLASSES,
           exact_float=True),
    OpInfo("gather", "CUSTOM", ALL_DTYPES, _gather_samples, _long_index(torch.gather), SHAPE_CLASSES,
           exact_float=True),
    OpInfo("scatter", "CUSTOM", ALL_DTYPES, _scatter_samples(add=False), _long_index(torch.scatter),
           SHAPE_CLASSES + ("pyscalar",), exact_float=True),
    OpInfo("scatter_add", "CUSTOM", ALL_DTYPES, _scatter_samples(add=True), _scatter_add,
           SHAPE_CLASSES),
]
