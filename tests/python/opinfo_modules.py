"""OpInfos of the nn-modules area: linear."""

import torch.nn.functional as F

from op_registry import FLOAT_DTYPES, OpInfo, Sample, _x


def _linear_samples(rng, dtype, cls):
    dom = dict(low=-1, high=1)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    def s(inp, w, b=None, *, lay=("contig", "contig", "contig")):
        args = (x(inp, lay[0]), x(w, lay[1]))
        return Sample(args + ((x(b, lay[2]),) if b is not None else ()))

    if cls == "plain":
        return [s((4, 3), (5, 3), (5,)), s((4, 7), (6, 7)), s((2, 3, 9), (4, 9), (4,)), s((7,), (3, 7), (3,))]
    if cls == "broadcast":  # batch dims, a 0-d bias, a 1-D weight
        return [s((2, 3, 4, 5), (6, 5), (6,)), s((3, 5), (4, 5), ()), s((2, 3, 5), (5,)), s((5,), (5,))]
    if cls == "noncontig":
        return [s((4, 5), (3, 5), (3,), lay=("T", "contig", "contig")),
                s((4, 5), (3, 5), (3,), lay=("strided", "T", "strided")),
                s((2, 4, 5), (3, 5), None, lay=("T", "strided", "contig"))]
    if cls == "empty":
        return [s((0, 5), (3, 5), (3,)), s((4, 0), (3, 0), (3,)), s((4, 0), (3, 0)), s((4, 5), (0, 5), (0,)),
                s((2, 0, 5), (3, 5))]
    if cls == "size1":
        return [s((1, 1), (1, 1), (1,)), s((1, 5), (1, 5)), s((3, 1), (4, 1), (4,))]
    return []


OP_INFOS = [
    OpInfo("linear", "CUSTOM", FLOAT_DTYPES, _linear_samples, F.linear,
           ("plain", "broadcast", "noncontig", "empty", "size1"),
           tol={"float16": (1e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2)}, method=False),
]
