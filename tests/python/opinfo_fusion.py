"""OpInfos of the fusion area: fused_elementwise, a chain of elementwise ops as one call
(what pf.compile's fusion pass makes of chains in a graph; one kernel compiled at run
time on the GPU), and fused_reduction, such a chain reduced in the same kernel, against
the same chain of torch's functions (and torch's reduction)."""

import torch
import torch.nn.functional as F

from op_registry import FLOAT_DTYPES, OpInfo, Sample, _x

# relu(x * y + z); (x - y) * sigmoid(x - y) / 2.5 with a Python number; leaky_relu with its
# slope, then a product; hardtanh's two bounds; one step alone.
_MUL_ADD_RELU = [("mul", [0, 1]), ("add", [-1, 2]), ("relu", [-2])]
_WITH_NUMBER = [("sub", [0, 1]), ("sigmoid", [-1]), ("mul", [-1, -2]), ("div", [-3, 2])]
_WITH_PARAMS = [("leaky_relu", [0], [0.2]), ("mul", [-1, 1]), ("hardtanh", [-2], [-0.5, 0.75])]
_ONE_STEP = [("exp", [0])]


def _fused_samples(rng, dtype, cls):
    dom = dict(low=-2, high=2)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    if cls == "plain":
        return [Sample((_MUL_ADD_RELU, x((4, 5)), x((4, 5)), x((4, 5)))),
                Sample((_WITH_NUMBER, x((3, 7)), x((3, 7)), 2.5)),
                Sample((_WITH_PARAMS, x((6,)), x((6,)))), Sample((_ONE_STEP, x((2, 3))))]
    if cls == "broadcast":  # a bias row, a column, a 0-d tensor
        return [Sample((_MUL_ADD_RELU, x((4, 5)), x((5,)), x((4, 1)))),
                Sample((_WITH_NUMBER, x((2, 3, 4)), x(()), 0.5)),
                Sample((_WITH_PARAMS, x((3, 1, 4)), x((2, 1))))]
    if cls == "noncontig":
        return [Sample((_MUL_ADD_RELU, x((4, 5), "T"), x((4, 5), "strided"), x((4, 5)))),
                Sample((_WITH_PARAMS, x((3, 4), "strided"), x((3, 4), "T")))]
    if cls == "empty":
        return [Sample((_MUL_ADD_RELU, x((0, 5)), x((0, 5)), x((5,)))), Sample((_ONE_STEP, x((3, 0))))]
    if cls == "size1":
        return [Sample((_MUL_ADD_RELU, x((1, 1)), x((1,)), x((1, 1)))), Sample((_WITH_NUMBER, x((1,)), x((1,)), 3.0))]
    return []


def _fused_ref(steps, *inputs):
    results = []
    for name, args, *params in steps:
        values = [inputs[a] if a >= 0 else results[-1 - a] for a in args]
        fn = getattr(torch, name, None) or getattr(F, name)
        results.append(fn(*values, *(params[0] if params else ())))
    return results[-1]


def _reduction_samples(rng, dtype, cls):
    dom = dict(low=-2, high=2)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    if cls == "plain":  # rows, a full reduction, columns (dim 0), two dims; enough elements for parts
        return [Sample((_MUL_ADD_RELU, x((4, 5)), x((4, 5)), x((4, 5))), dict(reduce="sum", dim=-1)),
                Sample((_WITH_NUMBER, x((3, 5000)), x((3, 5000)), 2.5), dict(reduce="mean", dim=1, keepdim=True)),
                Sample((_ONE_STEP, x((64, 300))), dict(reduce="mean")),
                Sample((_WITH_PARAMS, x((600, 40)), x((600, 40))), dict(reduce="max", dim=0)),
                Sample((_MUL_ADD_RELU, x((6, 7, 9)), x((6, 7, 9)), x((6, 7, 9))), dict(reduce="min", dim=(0, 2))),
                Sample((_ONE_STEP, x((5, 4, 3))), dict(reduce="sum", dim=(1, 2), keepdim=True))]
    if cls == "broadcast":  # exp(x - row max)'s sum, as softmax written out; a bias column; a 0-d tensor
        return [Sample(([("sub", [0, 1]), ("exp", [-1])], x((8, 33)), x((8, 1))), dict(reduce="sum", dim=-1)),
                Sample((_MUL_ADD_RELU, x((4, 5)), x((5,)), x((4, 1))), dict(reduce="max", dim=0, keepdim=True)),
                Sample((_WITH_NUMBER, x((2, 3, 4)), x(()), 0.5), dict(reduce="mean", dim=(0, 2)))]
    if cls == "noncontig":
        return [Sample((_MUL_ADD_RELU, x((40, 50), "T"), x((40, 50), "strided"), x((40, 50))), dict(reduce="sum", dim=1)),
                Sample((_WITH_PARAMS, x((30, 40), "strided"), x((30, 40), "T")), dict(reduce="min", dim=0))]
    if cls == "empty":
        return [Sample((_MUL_ADD_RELU, x((0, 5)), x((0, 5)), x((5,))), dict(reduce="sum", dim=0)),
                Sample((_ONE_STEP, x((3, 0))), dict(reduce="mean", dim=1)),
                Sample((_ONE_STEP, x((0, 4))), dict(reduce="max", dim=1))]
    if cls == "size1":
        return [Sample((_MUL_ADD_RELU, x((1, 1)), x((1,)), x((1, 1))), dict(reduce="sum")),
                Sample((_WITH_NUMBER, x((1,)), x((1,)), 3.0), dict(reduce="max", dim=0, keepdim=True))]
    return []


def _reduction_ref(steps, *inputs, reduce="sum", dim=None, keepdim=False):
    chain = _fused_ref(steps, *inputs)
    fn = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin}[reduce]
    if dim is None:
        return fn(chain, dim=tuple(range(chain.dim())), keepdim=keepdim) if keepdim else fn(chain)
    return fn(chain, dim=dim, keepdim=keepdim)


OP_INFOS = [
    OpInfo("fused_elementwise", "CUSTOM", FLOAT_DTYPES, _fused_samples, _fused_ref,
           ("plain", "broadcast", "noncontig", "empty", "size1"), method=False),
    OpInfo("fused_reduction", "CUSTOM", FLOAT_DTYPES, _reduction_samples, _reduction_ref,
           ("plain", "broadcast", "noncontig", "empty", "size1"), method=False),
]
