"""OpInfos of the view ops (VIEW family, beside transpose in op_registry.py):
view, reshape, permute, expand, squeeze, unsqueeze, select, slice and unfold,
each against the PyTorch op or Tensor method of the same meaning."""

import torch

from op_registry import ALL_DTYPES, REDUCE_CLASSES, OpInfo, Sample, _x


def _samples(plain, noncontig, empty, size1, scalar0d):
    """Samples from (shape, layout, args...) tuples per shape class."""
    table = dict(plain=plain, noncontig=noncontig, empty=empty, size1=size1, scalar0d=scalar0d)

    def gen(rng, dtype, cls):
        return [Sample((_x(rng, shape, dtype, dict(low=-5, high=5), layout), *args))
                for shape, layout, *args in table[cls]]

    return gen


_view = _samples(plain=[((3, 4), "contig", (4, 3)), ((2, 3, 4), "contig", (-1, 4)), ((2, 3, 4), "contig", (24,))],
                 noncontig=[((3, 4), "strided", (3, 2, 2)), ((2, 3, 4), "T", (2, 3, 2, 2))],
                 empty=[((0, 3), "contig", (3, 0)), ((2, 0), "contig", (-1, 2))],
                 size1=[((1, 5), "contig", (5, 1, 1))], scalar0d=[((), "contig", (1,)), ((), "contig", ())])
_reshape = _samples(plain=[((3, 4), "contig", (2, 6)), ((2, 3, 4), "contig", (4, -1))],
                    noncontig=[((4, 5), "T", (20,)), ((3, 4), "strided", (2, 6)), ((2, 3, 4), "T", (6, 4))],
                    empty=[((0, 3), "contig", (3, 0, 5))], size1=[((1, 1), "contig", (1,))],
                    scalar0d=[((), "contig", (1, 1))])
_permute = _samples(plain=[((2, 3, 4), "contig", (2, 0, 1)), ((3, 4), "contig", (-1, 0))],
                    noncontig=[((4, 5), "T", (1, 0)), ((2, 3, 4), "strided", (1, 2, 0))],
                    empty=[((0, 3, 2), "contig", (2, 1, 0))], size1=[((1, 5, 1), "contig", (2, 0, 1))],
                    scalar0d=[((), "contig", ())])
_expand = _samples(plain=[((3, 1), "contig", (3, 4)), ((4,), "contig", (2, 3, 4)), ((3, 1), "contig", (-1, 5))],
                   noncontig=[((1, 4), "strided", (3, 4)), ((3, 1, 4), "strided", (3, 5, 4))],
                   empty=[((0, 1), "contig", (0, 4)), ((1, 3), "contig", (0, 3))],
                   size1=[((1, 1), "contig", (2, 3))], scalar0d=[((), "contig", (2, 2)), ((), "contig", ())])
_squeeze = _samples(plain=[((3, 1, 4), "contig"), ((3, 1, 4, 1), "contig", 1), ((3, 1, 4, 1), "contig", (1, 3)),
                           ((3, 4), "contig", 0)],
                    noncontig=[((3, 1, 4), "strided"), ((2, 1, 6), "strided", -2)],
                    empty=[((0, 1), "contig"), ((0, 1), "contig", 0)],
                    size1=[((1, 1), "contig"), ((1,), "contig", 0)], scalar0d=[((), "contig"), ((), "contig", 0)])
_unsqueeze = _samples(plain=[((3, 4), "contig", 0), ((3, 4), "contig", 2), ((3, 4), "contig", -1)],
                      noncontig=[((4, 5), "T", 1), ((3, 4), "strided", -2)],
                      empty=[((0, 3), "contig", 1)], size1=[((1,), "contig", 0)], scalar0d=[((), "contig", 0)])
_select = _samples(plain=[((3, 4), "contig", 0, 2), ((3, 4, 5), "contig", 2, -1), ((3, 4), "contig", -1, 0)],
                   noncontig=[((4, 5), "T", 1, 3), ((3, 4), "strided", 1, 1)],
                   empty=[((2, 0), "contig", 0, 1)], size1=[((1, 5), "contig", 0, 0)],
                   scalar0d=[((1,), "contig", 0, -1)])
_slice = _samples(plain=[((6, 4), "contig", 0, 1, 5, 2), ((3, 8), "contig", 1, -5, 100, 3),
                         ((3, 4), "contig", 1, 3, 1, 1)],
                  noncontig=[((4, 6), "T", 0, 0, 5, 2), ((3, 6), "strided", 1, 1, 3, 1)],
                  empty=[((0, 4), "contig", 1, 1, 3, 1), ((3, 4), "contig", 0, 2, 2, 1)],
                  size1=[((1, 5), "contig", 0, 0, 1, 1)], scalar0d=[((1,), "contig", 0, -1, 1, 1)])

# (dim, size, step): overlapping windows (step < size), gaps (step > size), a whole dim, none left over.
_unfold = _samples(plain=[((10,), "contig", 0, 3, 2), ((4, 7), "contig", 1, 2, 3), ((3, 5, 2), "contig", 1, 5, 1),
                          ((6, 3), "contig", -2, 1, 1)],
                   noncontig=[((4, 6), "T", 0, 2, 1), ((3, 8), "strided", 1, 3, 2)],
                   empty=[((0, 4), "contig", 1, 2, 2), ((3, 4), "contig", 1, 0, 1)],
                   size1=[((1, 5), "contig", 0, 1, 1)], scalar0d=[((), "contig", 0, 1, 1)])


def _slice_ref(x, dim, start, stop, step):
    return x[(slice(None),) * (dim % x.dim()) + (slice(start, stop, step),)]


def _squeeze_ref(x, dim=None):
    return x.squeeze() if dim is None else x.squeeze(dim)


OP_INFOS = [
    OpInfo("view", "VIEW", ALL_DTYPES, _view, lambda x, shape: x.view(shape), REDUCE_CLASSES, exact_float=True),
    OpInfo("reshape", "VIEW", ALL_DTYPES, _reshape, torch.reshape, REDUCE_CLASSES, exact_float=True),
    OpInfo("permute", "VIEW", ALL_DTYPES, _permute, torch.permute, REDUCE_CLASSES, exact_float=True),
    OpInfo("expand", "VIEW", ALL_DTYPES, _expand, lambda x, shape: x.expand(shape), REDUCE_CLASSES, exact_float=True),
    OpInfo("squeeze", "VIEW", ALL_DTYPES, _squeeze, _squeeze_ref, REDUCE_CLASSES, exact_float=True),
    OpInfo("unsqueeze", "VIEW", ALL_DTYPES, _unsqueeze, torch.unsqueeze, REDUCE_CLASSES, exact_float=True),
    OpInfo("select", "VIEW", ALL_DTYPES, _select, torch.select, REDUCE_CLASSES, exact_float=True, method=False),
    OpInfo("slice", "VIEW", ALL_DTYPES, _slice, _slice_ref, REDUCE_CLASSES, exact_float=True, method=False),
    OpInfo("unfold", "VIEW", ALL_DTYPES, _unfold, lambda x, dim, size, step: x.unfold(dim, size, step), REDUCE_CLASSES,
           exact_float=True),
]
