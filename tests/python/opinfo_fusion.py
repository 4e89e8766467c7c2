"""OpInfos of the fusion area: fused_elementwise, a chain of elementwise ops as one call
(what pf.compile's fusion pass makes of chains in a graph; one kernel compiled at run
time on the GPU), against the same chain of torch's functions."""

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


OP_INFOS = [
    OpInfo("fused_elementwise", "CUSTOM", FLOAT_DTYPES, _fused_samples, _fused_ref,
           ("plain", "broadcast", "noncontig", "empty", "size1"), method=False),
]
