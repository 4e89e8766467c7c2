"""OpInfo entries for the fused optimizer updates (op_registry.py has the
harness), one parameter out of place. The references are PyTorch's update
formulas written out in torch ops; test_optim.py checks pf.optim against
torch.optim step by step, test_training.py the multi-tensor in-place forms."""

import torch

import numpy as np

from op_registry import FLOAT_DTYPES, Arg, OpInfo, Sample, _x


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
                Sample(state((2, 3, 4)), dict(opts, maximize=True, weight_decay=0.01)),
                # the step count as a tensor (capturable): the bias corrections come from it
                Sample(state((6, 5)) + (None, Arg(np.array(7.0, np.float32), dtype="float32")),
                       dict(lr=1e-2, beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.02)),
                Sample(state((4, 3), amsgrad=True) + (Arg(np.array(2.0, np.float32), dtype="float32"),),
                       dict(lr=1e-2, beta1=0.8, beta2=0.999, eps=1e-8, amsgrad=True))]
    if cls == "noncontig":
        return [Sample(state((4, 5), layout="T"), opts), Sample(state((3, 8), layout="strided"), opts)]
    if cls == "empty":
        return [Sample(state((0, 3)), opts)]
    if cls == "size1":
        return [Sample(state((1,)), opts), Sample(state((1, 1), amsgrad=True), dict(opts, amsgrad=True))]
    return []


def _adam_ref(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq=None, step=None, *, lr, beta1, beta2, eps,
              weight_decay=0.0, bias_correction1=1.0, bias_correction2=1.0, decoupled_weight_decay=False,
              amsgrad=False, maximize=False):
    if step is not None:
        bias_correction1, bias_correction2 = 1 - beta1 ** step.item(), 1 - beta2 ** step.item()
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


def _state_samples(make_state, option_sets):
    """Samples for an update op: make_state(t, shape, layout, options) gives the positional tensors."""
    def samples(rng, dtype, cls):
        def t(shape, low=-2, high=2, layout="contig"):
            return _x(rng, shape, dtype, dict(low=low, high=high), layout)

        if cls == "plain":
            return [Sample(make_state(t, (5, 7), "contig", o), o) for o in option_sets]
        if cls == "noncontig":
            return [Sample(make_state(t, (4, 5), "T", option_sets[-1]), option_sets[-1]),
                    Sample(make_state(t, (3, 8), "strided", option_sets[0]), option_sets[0])]
        if cls == "empty":
            return [Sample(make_state(t, (0, 3), "contig", option_sets[-1]), option_sets[-1])]
        if cls == "size1":
            return [Sample(make_state(t, (1,), "contig", o), o) for o in option_sets[:2]]
        return []
    return samples


_SGD_OPTIONS = [dict(lr=0.1), dict(lr=0.1, weight_decay=0.1, maximize=True),
                dict(lr=0.1, momentum=0.9, dampening=0.2, first_step=True),
                dict(lr=0.05, momentum=0.9, weight_decay=0.01),
                dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True, weight_decay=0.1)]


def _sgd_state(t, shape, layout, o):
    return (t(shape, layout=layout), t(shape, layout=layout)) + ((t(shape, layout=layout),) if o.get("momentum") else ())


def _sgd_ref(param, grad, momentum_buffer=None, *, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
             nesterov=False, maximize=False, first_step=False):
    p, g = param.double(), grad.double()
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        b = g if first_step else momentum * momentum_buffer.double() + (1 - dampening) * g
        g = g + momentum * b if nesterov else b
    return (p - lr * g).to(param.dtype)


_RMSPROP_OPTIONS = [dict(lr=0.01), dict(lr=0.01, alpha=0.9, weight_decay=0.1, maximize=True),
                    dict(lr=0.01, momentum=0.9), dict(lr=0.01, centered=True, eps=1e-6),
                    dict(lr=0.02, momentum=0.5, centered=True, weight_decay=0.05)]


def _rmsprop_state(t, shape, layout, o):
    args = (t(shape, layout=layout), t(shape, layout=layout), t(shape, low=0.5, high=2, layout=layout))
    if o.get("momentum"):
        args += (t(shape, layout=layout),)
    if o.get("centered"):  # |grad_avg| small enough that the centred variance stays positive
        args += ((None,) if not o.get("momentum") else ()) + (t(shape, low=-0.3, high=0.3, layout=layout),)
    return args


def _rmsprop_ref(param, grad, square_avg, momentum_buffer=None, grad_avg=None, *, lr, alpha=0.99, eps=1e-8,
                 weight_decay=0.0, momentum=0.0, centered=False, maximize=False):
    p, g, v = param.double(), grad.double(), square_avg.double()
    g = -g if maximize else g
    if weight_decay:
        g = g + weight_decay * p
    v = alpha * v + (1 - alpha) * g * g
    if centered:
        a = alpha * grad_avg.double() + (1 - alpha) * g
        d = (v - a * a).sqrt() + eps
    else:
        d = v.sqrt() + eps
    if momentum:
        return (p - lr * (momentum * momentum_buffer.double() + g / d)).to(param.dtype)
    return (p - lr * g / d).to(param.dtype)


OP_INFOS = [
    OpInfo("adam_step", "CUSTOM", FLOAT_DTYPES, _adam_samples, _adam_ref, ("plain", "noncontig", "empty", "size1"),
           tol={"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2), "float32": (1e-5, 1e-5)}, method=False),
    OpInfo("sgd_step", "CUSTOM", FLOAT_DTYPES, _state_samples(_sgd_state, _SGD_OPTIONS), _sgd_ref,
           ("plain", "noncontig", "empty", "size1"),
           tol={"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2), "float32": (1e-5, 1e-5)}, method=False),
    OpInfo("rmsprop_step", "CUSTOM", FLOAT_DTYPES, _state_samples(_rmsprop_state, _RMSPROP_OPTIONS), _rmsprop_ref,
           ("plain", "noncontig", "empty", "size1"),
           tol={"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2), "float32": (1e-5, 1e-5)}, method=False),
]
