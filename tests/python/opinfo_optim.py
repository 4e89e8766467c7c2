"""OpInfo entries for the fused optimizer updates (op_registry.py has the
harness). The reference is PyTorch's Adam/AdamW formula written out in torch
ops; test_optim.py checks pf.optim.Adam/AdamW against torch.optim step by step."""

import torch

from op_registry import FLOAT_DTYPES, OpInfo, Sample, _x


def _adam_samples(rng, dtype, cls):
    def t(shape, low=-2, high=2, layout="contig"):
        return _x(rng, shape, dtype, dict(low=low, high=high), layout)

    def state(shape, layout="contig", amsgrad=False):
        args = (t(shape, layout=layout), t(shape, layout=layout), t(shape, layout=layout),
                t(shape, low=0.01, high=2, layout=layout))
        return args + ((t(shape, low=0.01, high=3, layout=layout),) if amsgrad else ())

    opts = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, bias_correction1=1 - 0.9**3, bias_correction2=1 - 0.999**3)
    if cls == "plain":
        return [Sample(state((5, 7)), opts),
                Sample(state((33,)), dict(opts, weight_decay=0.1)),
                Sample(state((4, 6)), dict(opts, weight_decay=0.05, decoupled_weight_decay=True)),
                Sample(state((3, 5), amsgrad=True), dict(opts, amsgrad=True)),
                Sample(state((2, 3, 4)), dict(opts, maximize=True, weight_decay=0.01))]
    if cls == "noncontig":
        return [Sample(state((4, 5), layout="T"), opts), Sample(state((3, 8), layout="strided"), opts)]
    if cls == "empty":
        return [Sample(state((0, 3)), opts)]
    if cls == "size1":
        return [Sample(state((1,)), opts), Sample(state((1, 1), amsgrad=True), dict(opts, amsgrad=True))]
    return []


def _adam_ref(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, *, lr, beta1, beta2, eps, weight_decay=0.0,
              bias_correction1=1.0, bias_correction2=1.0, decoupled_weight_decay=False, amsgrad=False,
              maximize=False):
    p, g, m, v = (x.double() for x in (param, grad, exp_avg, exp_avg_sq))
    g = -g if maximize else g
    if weight_decay:
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    second = torch.maximum(max_exp_avg_sq.double(), v) if amsgrad else v
    p = p - lr / bias_correction1 * m / (second.sqrt() / bias_correction2**0.5 + eps)
    return p.to(param.dtype)


OP_INFOS = [
    OpInfo("adam_step", "CUSTOM", FLOAT_DTYPES, _adam_samples, _adam_ref, ("plain", "noncontig", "empty", "size1"),
           tol={"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2), "float32": (1e-5, 1e-5)}, method=False),
]
