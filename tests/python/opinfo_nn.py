"""OpInfos of the nn area: activations and rounding (elementwise, with
parameters), logical ops, var/std/cumsum, the norms, dropout, nll_loss,
cross_entropy and the pointwise losses (composite ops).

The compositions outside the op table (attention) are tested in test_nn.py."""

import warnings

import numpy as np
import torch
import torch.nn.functional as F

from op_registry import (ALL_DTYPES, BINARY_CLASSES, FLOAT_DTYPES, NONBOOL_DTYPES, REDUCE_CLASSES, UNARY_CLASSES, _STD,
                         Arg, OpInfo, Sample, _binary, _binary_samples, _float_unary, _reduce_samples, _exact,
                         _softmax_samples, _unary_samples, _x, is_float, make_values)

_TIES = dict(low=-5, high=5, ilow=-9, ihigh=9, discrete=True)  # multiples of 0.5: round's ties
_TRUTH = dict(low=-1, high=1, ilow=-1, ihigh=1, discrete=True)  # zeros are frequent


def _by_dtype(dom, float_kwargs, int_kwargs=({},)):
    """Unary samples whose keyword variants depend on the dtype."""

    def gen(rng, dtype, cls):
        return _unary_samples(dom, float_kwargs if is_float(dtype) else int_kwargs)(rng, dtype, cls)

    return gen


def _hardtanh_samples(rng, dtype, cls):
    if dtype == "uint8":  # PyTorch refuses negative limits for unsigned types
        variants = (dict(min_val=0, max_val=4), dict(min_val=2.5, max_val=6.5))
    elif is_float(dtype):
        variants = ({}, dict(min_val=-2.0, max_val=3.5), dict(min_val=0.5, max_val=0.5), dict(max_val=2.0))
    else:
        variants = ({}, dict(min_val=-1.5, max_val=2.7), dict(min_val=-3, max_val=4))
    return _unary_samples(_STD, variants)(rng, dtype, cls)


# ----------------------------------------------------------------- var, std, cumsum


def _moment_samples(rng, dtype, cls):
    out = _reduce_samples(dict(low=-3, high=3))(rng, dtype, cls)
    extra = []
    for s in out[:4]:
        extra.append(Sample(s.args, dict(s.kwargs, correction=0)))
        extra.append(Sample(s.args, dict(s.kwargs, unbiased=False)))
        extra.append(Sample(s.args, dict(s.kwargs, correction=2.5)))
    if cls == "plain":
        # far from zero: the two-pass variance must not cancel
        extra.append(Sample((_x(rng, (4, 33), dtype, dict(low=1000, high=1001)),), dict(dim=1)))
    return out + extra


def _cumsum_samples(rng, dtype, cls):
    dom = dict(low=-2, high=2, ilow=-5, ihigh=5)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    if cls == "plain":
        return [Sample((x((3, 4, 5)),), dict(dim=d)) for d in (0, 1, 2, -1)] + [Sample((x((37,)),), dict(dim=0))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"),), dict(dim=d)) for d in (0, 1)] + [Sample((x((3, 4), "strided"),), dict(dim=1))]
    if cls == "empty":
        return [Sample((x((0, 3)),), dict(dim=0)), Sample((x((2, 0)),), dict(dim=0)), Sample((x((2, 0)),), dict(dim=1))]
    if cls == "size1":
        return [Sample((x((1, 5)),), dict(dim=0)), Sample((x((4, 1)),), dict(dim=1))]
    if cls == "scalar0d":
        return [Sample((x(()),), dict(dim=0)), Sample((x(()),), dict(dim=-1))]
    return []


def _moment_ref(fn):
    def ref(x, dim=None, keepdim=False, **kw):
        with warnings.catch_warnings():  # "degrees of freedom <= 0": NaN or inf is the expected result
            warnings.simplefilter("ignore")
            return fn(x, dim=dim, keepdim=keepdim, **kw)

    return ref


# ----------------------------------------------------------------- norms


def _param(rng, shape, dtype, low=-2.0, high=2.0):
    return Arg(make_values(rng, shape, dtype, low=low, high=high))


def _batch_norm_samples(rng, dtype, cls):
    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dict(low=-3, high=3), layout)

    def eval_sample(inp, c, affine=True, **kw):
        stats = (_param(rng, (c,), dtype), _param(rng, (c,), dtype, low=0.5, high=2.0))
        aff = (_param(rng, (c,), dtype), _param(rng, (c,), dtype)) if affine else (None, None)
        return Sample((inp, *stats, *aff), kw)

    def train_sample(inp, c, **kw):  # running statistics None: nothing is updated in place
        return Sample((inp, None, None, _param(rng, (c,), dtype), _param(rng, (c,), dtype)), dict(training=True, **kw))

    if cls == "plain":
        return [eval_sample(x((4, 3)), 3), eval_sample(x((2, 3, 5)), 3, affine=False, eps=1e-3),
                eval_sample(x((2, 3, 2, 3)), 3), train_sample(x((4, 3)), 3), train_sample(x((2, 3, 5)), 3),
                train_sample(x((2, 3, 2, 3)), 3, eps=0.1, momentum=0.5)]
    if cls == "noncontig":
        return [eval_sample(x((2, 3, 5), "T"), 3), train_sample(x((4, 3), "T"), 3),
                train_sample(x((2, 4, 6), "strided"), 4)]
    if cls == "empty":
        return [eval_sample(x((0, 3)), 3), eval_sample(x((2, 3, 0)), 3)]
    if cls == "size1":
        return [eval_sample(x((1, 1)), 1), train_sample(x((1, 2, 3)), 2), train_sample(x((2, 1)), 1)]
    return []


def _row_norm_samples(rms):
    def gen(rng, dtype, cls):
        def x(shape, layout="contig"):
            return _x(rng, shape, dtype, dict(low=-3, high=3), layout)

        def s(inp, shape, affine=True, **kw):
            w = _param(rng, shape, dtype) if affine else None
            if rms:
                return Sample((inp, shape, w), kw)
            b = _param(rng, shape, dtype) if affine else None
            return Sample((inp, shape, w, b), kw)

        eps = dict(eps=1e-3)
        if cls == "plain":
            return [s(x((3, 5)), (5,)), s(x((2, 3, 4)), (3, 4)), s(x((2, 3, 4)), (4,), affine=False),
                    s(x((2, 3, 4)), (2, 3, 4), **eps), s(x((6, 40)), (40,)), s(x((3, 2048)), (2048,)),
                    s(_x(rng, (4, 33), dtype, dict(low=10, high=11)), (33,))]  # off zero (test_nn.py goes further)
        if cls == "noncontig":
            return [s(x((4, 5), "T"), (5,)), s(x((2, 3, 4), "strided"), (4,)), s(x((2, 3, 4), "T"), (3, 4), **eps)]
        if cls == "empty":
            return [s(x((0, 5)), (5,)), s(x((2, 0, 3)), (3,))]
        if cls == "size1":
            return [s(x((1, 1)), (1,)), s(x((4, 1)), (1,)), s(x((1, 5)), (5,))]
        return []

    return gen


def _group_norm_samples(rng, dtype, cls):
    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dict(low=-3, high=3), layout)

    def s(inp, groups, c, affine=True, **kw):
        aff = (_param(rng, (c,), dtype), _param(rng, (c,), dtype)) if affine else ()
        return Sample((inp, groups, *aff), kw)

    if cls == "plain":
        return [s(x((2, 6, 5)), 3, 6), s(x((2, 6, 5)), 1, 6), s(x((2, 6, 5)), 6, 6, affine=False),
                s(x((3, 4, 2, 3)), 2, 4, eps=1e-3), s(x((4, 6)), 2, 6)]
    if cls == "noncontig":
        return [s(x((2, 4, 5), "T"), 2, 4), s(x((2, 4, 6), "strided"), 4, 4)]
    if cls == "empty":
        return [s(x((0, 4, 3)), 2, 4), s(x((2, 4, 0)), 2, 4)]
    if cls == "size1":
        return [s(x((1, 2, 1)), 1, 2), s(x((1, 1, 5)), 1, 1)]
    return []


# ----------------------------------------------------------------- dropout, nll_loss, cross_entropy


def _dropout_samples(rng, dtype, cls):
    # Only the deterministic cases compare with torch; random masks are tested in test_nn.py.
    variants = (dict(training=False), dict(p=0.0), dict(p=0.7, training=False), dict(p=1.0))
    return _unary_samples(_STD, variants)(rng, dtype, cls)


def _nll_samples(rng, dtype, cls, from_logits=False):
    """nll_loss's samples (log-probabilities), or cross_entropy's (logits, label smoothing)."""
    def logits(shape, layout="contig"):
        return _x(rng, shape, dtype, dict(low=-8, high=8) if from_logits else dict(low=-4, high=0), layout)

    def target(shape, c, ignore=None, tdtype="int64"):
        v = np.asarray(rng.integers(0, c, size=shape))
        if ignore is not None and v.size:
            v.reshape(-1)[:: 3] = ignore
        return Arg(v.astype("int64"), dtype=tdtype)

    def w(c):
        return _param(rng, (c,), dtype, low=0.1, high=2.0)

    out = []
    reductions = ("mean", "sum", "none")
    if cls == "plain":
        for r in reductions:
            out.append(Sample((logits((5, 4)), target((5,), 4)), dict(reduction=r)))
            out.append(Sample((logits((3, 4, 2, 3)), target((3, 2, 3), 4), w(4)), dict(reduction=r)))
            out.append(Sample((logits((6, 3)), target((6,), 3, ignore=-100)), dict(reduction=r)))
            out.append(Sample((logits((6, 3)), target((6,), 3, ignore=1), w(3)), dict(ignore_index=1, reduction=r)))
        out.append(Sample((logits((7,)), target((), 7))))  # unbatched: input (C), target ()
        out.append(Sample((logits((5, 4)), target((5,), 4, tdtype="int32"))))
        if from_logits:
            for r in reductions:
                out.append(Sample((logits((6, 5)), target((6,), 5, ignore=-100), w(5)),
                                  dict(reduction=r, label_smoothing=0.2)))
                out.append(Sample((logits((2, 5, 3)), target((2, 3), 5)), dict(reduction=r, label_smoothing=0.1)))
            out.append(Sample((logits((4, 1000)), target((4,), 1000))))  # long rows
    elif cls == "noncontig":
        out.append(Sample((logits((5, 4), "T"), target((5,), 4))))
        out.append(Sample((logits((2, 4, 3), "T"), target((2, 3), 4), w(4)), dict(reduction="none")))
        out.append(Sample((logits((3, 4), "strided"), target((3,), 4)), dict(reduction="sum")))
    elif cls == "empty":
        for r in reductions:
            out.append(Sample((logits((0, 4)), target((0,), 4)), dict(reduction=r)))
    elif cls == "size1":
        out.append(Sample((logits((1, 1)), target((1,), 1))))
        out.append(Sample((logits((1, 3, 1)), target((1, 1), 3)), dict(reduction="none")))
    return out


def _nll_ref(input, target, *args, **kwargs):
    return F.nll_loss(input, target.long(), *args, **kwargs)


def _cross_entropy_samples(rng, dtype, cls):
    return _nll_samples(rng, dtype, cls, from_logits=True)


def _cross_entropy_ref(input, target, *args, **kwargs):
    return F.cross_entropy(input, target.long(), *args, **kwargs)


def _in_float32(fn):
    """torch's loss computed in float32 and rounded once to a 16-bit input's dtype, as PyFlame computes
    (torch composes some of them from ops that each round to the 16-bit dtype)."""

    def ref(input, *args, **kwargs):
        if input.dtype not in (torch.float16, torch.bfloat16):
            return fn(input, *args, **kwargs)
        wide = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
        return fn(input.float(), *wide, **kwargs).to(input.dtype)

    return ref


def _pointwise_loss_samples(name):
    """(input, target[, weight]) of one shape; probabilities for binary_cross_entropy, log-probabilities
    for kl_div; every reduction and the loss's own options."""
    dom = {"binary_cross_entropy": dict(low=0.02, high=0.98), "kl_div": dict(low=-3, high=0)}.get(name, _STD)
    target_dom = dict(low=0.0, high=1.0) if name.startswith("binary") or name == "kl_div" else _STD
    weights = {"mse_loss": "same", "l1_loss": "same", "binary_cross_entropy": "broadcast",
               "binary_cross_entropy_with_logits": "broadcast"}.get(name)
    options = {"smooth_l1_loss": [dict(beta=0.5), dict(beta=0.0)], "kl_div": [dict(log_target=True)],
               "binary_cross_entropy_with_logits": ["pos_weight"]}.get(name, [])
    reductions = ("mean", "sum", "none") + (("batchmean",) if name == "kl_div" else ())

    def gen(rng, dtype, cls):
        def x(shape, layout="contig"):
            return _x(rng, shape, dtype, dom, layout)

        def t(shape):
            return _x(rng, shape, dtype, target_dom)

        out = []
        if cls == "plain":
            for r in reductions:
                out.append(Sample((x((4, 5)), t((4, 5))), dict(reduction=r)))
            out.append(Sample((x((2, 3, 4), "T"), t((2, 3, 4))), dict(reduction="none")))
            out.append(Sample((x(()), t(())), dict(reduction="sum")))
            # Tensor options go by position (torch's order: size_average and reduce before reduction).
            for opt in options:
                if opt == "pos_weight":
                    out.append(Sample((x((3, 4)), t((3, 4)), None, None, None, "mean", _param(rng, (4,), dtype, 0.5, 3.0))))
                else:
                    out.append(Sample((x((3, 4)), t((3, 4))), dict(opt)))
            if weights == "same":
                out.append(Sample((x((3, 4)), t((3, 4)), None, None, "sum", _param(rng, (3, 4), dtype, 0.1, 2.0))))
            elif weights == "broadcast":
                out.append(Sample((x((3, 4)), t((3, 4)), _param(rng, (4,), dtype, 0.1, 2.0)), dict(reduction="sum")))
        elif cls == "noncontig":
            out.append(Sample((x((3, 3), "strided"), t((3, 3))), dict(reduction="mean")))
        elif cls == "empty":
            for r in ("mean", "sum", "none"):
                out.append(Sample((x((0, 3)), t((0, 3))), dict(reduction=r)))
        elif cls == "size1":
            out.append(Sample((x((1, 1)), t((1, 1)))))
        return out

    return gen


NORM_CLASSES = ("plain", "noncontig", "empty", "size1")


# ----------------------------------------------------------------- fused backward passes
# Samples from the forward op's: a random output gradient of the forward's
# result shape, and (softmaxes) the forward's output, computed in float64 and
# rounded to the dtype. References: torch.autograd through the forward op.


def _softmax_backward_samples(log):
    def gen(rng, dtype, cls):
        out = []
        for s in _softmax_samples(rng, dtype, cls):
            (x,), dim = s.args, s.kwargs.get("dim", -1)
            t = torch.from_numpy(np.asarray(x.values, dtype=np.float64))
            y = (torch.log_softmax if log else torch.softmax)(t, dim=dim) if t.dim() else t * 0 + (0.0 if log else 1.0)
            g = make_values(rng, x.values.shape, dtype, low=-2, high=2)
            out.append(Sample((Arg(g, x.layout), Arg(_exact(y.detach().numpy(), dtype), x.layout)), dict(dim=dim)))
        return out

    return gen


def _softmax_backward_ref(log):
    def ref(grad, output, dim):
        return torch._softmax_backward_data(grad.double(), output.double(), dim, torch.float64).to(output.dtype) \
            if not log else torch._log_softmax_backward_data(grad.double(), output.double(), dim,
                                                             torch.float64).to(output.dtype)

    return ref


def _cross_entropy_backward_samples(rng, dtype, cls):
    out = []
    for s in _cross_entropy_samples(rng, dtype, cls):
        x, target = s.args[0], s.args[1]
        weight = s.args[2] if len(s.args) > 2 else None
        per_element = s.kwargs.get("reduction") == "none"
        scale = Arg(make_values(rng, target.values.shape if per_element else (), dtype, low=-2, high=2))
        kw = {k: v for k, v in s.kwargs.items() if k in ("ignore_index", "label_smoothing")}
        # the forward's logsumexp over the class dim, per element, in the compute dtype
        logits = torch.from_numpy(np.asarray(x.values, dtype=np.float64))
        lse = torch.logsumexp(logits, dim=0 if logits.dim() == 1 else 1).reshape(-1).detach().numpy()
        out.append(Sample((scale, x, target, Arg(_exact(lse, "float64" if dtype == "float64" else "float32"),
                                                  dtype="float64" if dtype == "float64" else "float32"),
                           weight), kw))
    return out


def _cross_entropy_backward_ref(scale, input, target, lse, weight=None, ignore_index=-100, label_smoothing=0.0):
    x = input.detach().double().requires_grad_(True)
    loss = F.cross_entropy(x, target.long(), None if weight is None else weight.double(), ignore_index=ignore_index,
                           reduction="none", label_smoothing=label_smoothing)
    (loss * scale.double()).sum().backward()
    return x.grad.to(input.dtype)


def _row_norm_backward_samples(rms):
    forward = _row_norm_samples(rms)

    def gen(rng, dtype, cls):
        out = []
        for s in forward(rng, dtype, cls):
            x, shape, w = s.args[0], s.args[1], s.args[2]
            g = Arg(make_values(rng, x.values.shape, dtype, low=-2, high=2), x.layout)
            out.append(Sample((g, x, shape, w), {"eps": s.kwargs.get("eps", 1e-5)}))
        return out

    return gen


def _row_norm_backward_ref(rms):
    """(grad_input, grad_weight[, grad_bias]), the parameters' in the compute dtype."""
    def ref(grad, x, normalized_shape, weight=None, eps=1e-5):
        shape = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
        x2 = x.detach().double().requires_grad_(True)
        w = (torch.ones(shape, dtype=torch.float64) if weight is None else weight.double()).requires_grad_(True)
        if rms:
            F.rms_norm(x2, shape, w, eps).backward(grad.double())
            return _norm_grads(x, x2, w)
        b = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
        F.layer_norm(x2, shape, w, b, eps).backward(grad.double())
        return _norm_grads(x, x2, w, b)

    return ref


def _frac(x):
    """torch.frac, and 0 for integers (which torch refuses)."""
    return torch.frac(x) if x.is_floating_point() else torch.zeros_like(x)


def _hypot(a, b):
    """torch.hypot, with integer and bool operands in float32 (torch takes floats only)."""
    if not a.is_floating_point() and not b.is_floating_point():
        a, b = a.float(), b.float()
    return torch.hypot(a, b)


def _special_samples(rng, dtype, cls):
    """Unary samples whose float values include NaN, inf and -inf (isnan & co.)."""
    samples = _unary_samples(_STD)(rng, dtype, cls)
    if dtype in FLOAT_DTYPES:
        for s in samples:
            flat = s.args[0].values.reshape(-1)
            flat[::4], flat[1::5], flat[2::7] = np.nan, np.inf, -np.inf
    return samples



def _grad_like(rng, x, dtype):
    return Arg(make_values(rng, x.values.shape, dtype, low=-2, high=2), x.layout)


def _batch_norm_backward_samples(rng, dtype, cls):
    out = []
    for s in _batch_norm_samples(rng, dtype, cls):
        x, running_mean, running_var, weight = s.args[:4]
        kw = {k: v for k, v in s.kwargs.items() if k != "momentum"}
        out.append(Sample((_grad_like(rng, x, dtype), x, running_mean, running_var, weight), kw))
    if cls == "plain":
        c = 4
        stats = (_param(rng, (c,), dtype), _param(rng, (c,), dtype, low=0.5, high=2.0))
        far = _x(rng, (3, c, 7), dtype, dict(low=10, high=11))  # off zero
        out.append(Sample((_grad_like(rng, far, dtype), far, None, None, _param(rng, (c,), dtype)),
                          dict(training=True)))
        x = _x(rng, (5, c, 2, 3), dtype, dict(low=-3, high=3))  # training ignores running statistics
        out.append(Sample((_grad_like(rng, x, dtype), x, *stats, None), dict(training=True)))
    return out


def _batch_norm_backward_ref(grad, x, running_mean=None, running_var=None, weight=None, training=False, eps=1e-5):
    """(grad_input, grad_weight, grad_bias) through torch.autograd in float64; the last two in the compute dtype."""
    c = x.shape[1]
    x2 = x.detach().double().requires_grad_(True)
    w = (torch.ones(c, dtype=torch.float64) if weight is None else weight.double()).requires_grad_(True)
    b = torch.zeros(c, dtype=torch.float64, requires_grad=True)
    stats = (None, None) if training else (running_mean.double(), running_var.double())
    F.batch_norm(x2, *stats, w, b, training=training, eps=eps).backward(grad.double())
    return _norm_grads(x, x2, w, b)


def _norm_grads(x, x2, *params):
    """The input's gradient in its dtype, the parameters' in the compute dtype."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    if x.numel() == 0:  # empty sums (torch's group_norm gives NaN: 0 times the NaN rstd of an empty group)
        return (torch.zeros_like(x),) + tuple(torch.zeros(p.shape, dtype=compute) for p in params)
    return (x2.grad.to(x.dtype),) + tuple(p.grad.to(compute) for p in params)


def _group_norm_backward_samples(rng, dtype, cls):
    out = []
    for s in _group_norm_samples(rng, dtype, cls):
        x, groups = s.args[:2]
        weight = s.args[2] if len(s.args) > 2 else None
        out.append(Sample((_grad_like(rng, x, dtype), x, groups, weight), s.kwargs))
    if cls == "plain":
        far = _x(rng, (2, 4, 9), dtype, dict(low=10, high=11))  # off zero
        out.append(Sample((_grad_like(rng, far, dtype), far, 2, _param(rng, (4,), dtype))))
    return out


def _group_norm_backward_ref(grad, x, num_groups, weight=None, eps=1e-5):
    c = x.shape[1]
    x2 = x.detach().double().requires_grad_(True)
    w = (torch.ones(c, dtype=torch.float64) if weight is None else weight.double()).requires_grad_(True)
    b = torch.zeros(c, dtype=torch.float64, requires_grad=True)
    F.group_norm(x2, num_groups, w, b, eps).backward(grad.double())
    return _norm_grads(x, x2, w, b)


_NORM_BACKWARD_TOL = {"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2), "float32": (1e-4, 1e-4)}

def _rotary_samples(rng, dtype, cls):
    """(x, cos, sin): x of 2 to 4 dims, as laid out by a head split (a transposed view) or strided;
    cos and sin (T, D) of any values (the kernel does not assume a rotation table)."""
    dom = dict(low=-2, high=2)

    def rot(x_shape, layout="contig"):
        table = x_shape[-2:]
        return Sample((_x(rng, x_shape, dtype, dom, layout), _x(rng, table, dtype, dom), _x(rng, table, dtype, dom)))

    if cls == "plain":
        return [rot((5, 8)), rot((2, 3, 4)), rot((2, 4, 3, 16))]
    if cls == "noncontig":
        return [rot((2, 4, 6, 8), "T"), rot((3, 4, 6), "strided")]
    if cls == "empty":
        return [rot((0, 3, 4)), rot((2, 0, 4))]
    if cls == "size1":
        return [rot((1, 1, 1, 2))]
    return []


def _rotary_ref(x, cos, sin):
    half = x.shape[-1] // 2
    x64 = x.double()
    rotated = torch.cat([-x64[..., half:], x64[..., :half]], -1)
    return (x64 * cos.double() + rotated * sin.double()).to(x.dtype)


def _rotary_kv_cache_samples(rng, dtype, cls):
    """(q, k, v, cos, sin, position, k_cache, v_cache): one token (a decode step) and several, one table or
    one per row (left padding), GQA (fewer key/value heads), the position at the cache's start, middle and
    end; q, k, v as laid out by a head split (transposed views) or strided."""
    dom = dict(low=-2, high=2)

    def s(b, h, kv, t, d, length, position, per_row=False, layout="contig", pos_shape=(1,)):
        table = (b, 1, t, d) if per_row else (t, d)
        pos = Arg(np.full(pos_shape, position, dtype=np.int64), dtype="int64")
        return Sample((_x(rng, (b, h, t, d), dtype, dom, layout), _x(rng, (b, kv, t, d), dtype, dom, layout),
                       _x(rng, (b, kv, t, d), dtype, dom, layout), _x(rng, table, dtype, dom), _x(rng, table, dtype, dom),
                       pos, _x(rng, (b, kv, length, d), dtype, dom), _x(rng, (b, kv, length, d), dtype, dom)))

    if cls == "plain":
        return [s(1, 4, 2, 1, 8, 6, 3), s(2, 4, 4, 1, 16, 5, 4, per_row=True, pos_shape=()), s(2, 6, 2, 3, 8, 7, 0),
                s(1, 2, 1, 2, 4, 4, 2, per_row=True)]
    if cls == "noncontig":
        return [s(2, 4, 2, 2, 8, 5, 1, layout="T"), s(1, 2, 2, 1, 4, 3, 2, layout="strided")]
    if cls == "empty":
        return [s(0, 2, 1, 1, 4, 3, 1), s(1, 2, 1, 0, 4, 3, 3)]
    if cls == "size1":
        return [s(1, 1, 1, 1, 2, 1, 0)]
    return []


def _rotary_kv_cache_ref(q, k, v, cos, sin, position, k_cache, v_cache):
    p, t = int(position.reshape(-1)[0]), q.shape[2]
    k_new, v_new = k_cache.clone(), v_cache.clone()
    k_new[:, :, p:p + t] = _rotary_ref(k, cos, sin)
    v_new[:, :, p:p + t] = v
    return _rotary_ref(q, cos, sin), k_new, v_new


OP_INFOS = [
    OpInfo("rotary_kv_cache", "CUSTOM", FLOAT_DTYPES, _rotary_kv_cache_samples, _rotary_kv_cache_ref,
           UNARY_CLASSES[:4], method=False),
    OpInfo("rotary_embedding", "CUSTOM", FLOAT_DTYPES, _rotary_samples, _rotary_ref, UNARY_CLASSES[:4],
           method=False),
    # UNARY: rounding and sign (exact), hardtanh (parameters min_val, max_val)
    OpInfo("floor", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), torch.floor, UNARY_CLASSES, exact_float=True),
    OpInfo("ceil", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), torch.ceil, UNARY_CLASSES, exact_float=True),
    OpInfo("round", "UNARY", NONBOOL_DTYPES,
           _by_dtype(_TIES, ({}, dict(decimals=0), dict(decimals=1), dict(decimals=-1), dict(decimals=3))),
           torch.round, UNARY_CLASSES, exact_float=True),
    OpInfo("sign", "UNARY", NONBOOL_DTYPES, _unary_samples(_TIES), torch.sign, UNARY_CLASSES, exact_float=True),
    OpInfo("hardtanh", "UNARY", NONBOOL_DTYPES, _hardtanh_samples, F.hardtanh, UNARY_CLASSES, exact_float=True),
    OpInfo("trunc", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), torch.trunc, UNARY_CLASSES, exact_float=True),
    OpInfo("frac", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), _frac, UNARY_CLASSES, exact_float=True),
    OpInfo("square", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), torch.square, UNARY_CLASSES),
    # UNARY_FLOAT: integer and bool inputs are computed in float32
    OpInfo("reciprocal", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(_STD, nonzero=True)),
           _float_unary(torch.reciprocal), UNARY_CLASSES),
    OpInfo("log1p", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-0.9, high=5, ilow=0, ihigh=20)),
           _float_unary(torch.log1p), UNARY_CLASSES),
    OpInfo("erf", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(_STD), _float_unary(torch.erf), UNARY_CLASSES),
    OpInfo("expm1", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-4, high=4, ilow=-5, ihigh=5)),
           _float_unary(torch.expm1), UNARY_CLASSES),
    OpInfo("log2", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=0.1, high=10, ilow=1, ihigh=20)),
           _float_unary(torch.log2), UNARY_CLASSES),
    OpInfo("log10", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=0.1, high=10, ilow=1, ihigh=20)),
           _float_unary(torch.log10), UNARY_CLASSES),
    OpInfo("exp2", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-4, high=4, ilow=-5, ihigh=5)),
           _float_unary(torch.exp2), UNARY_CLASSES),
    OpInfo("leaky_relu", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(_STD, ({}, dict(negative_slope=0.2),
                                                                         dict(negative_slope=-1.5))),
           _float_unary(F.leaky_relu), UNARY_CLASSES),
    OpInfo("elu", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(_STD, ({}, dict(alpha=0.5))), _float_unary(F.elu),
           UNARY_CLASSES),
    OpInfo("softplus", "UNARY_FLOAT", ALL_DTYPES,
           _unary_samples(dict(low=-8, high=8, ilow=-9, ihigh=9), ({}, dict(beta=2.0), dict(beta=0.5, threshold=2.0))),
           _float_unary(F.softplus), UNARY_CLASSES),
    # logical: any dtype in, bool out
    OpInfo("logical_not", "UNARY_BOOL", ALL_DTYPES, _unary_samples(_TRUTH), torch.logical_not, UNARY_CLASSES),
    *[OpInfo(n, "UNARY_BOOL", ALL_DTYPES, _special_samples, getattr(torch, n), UNARY_CLASSES)
      for n in ("isnan", "isinf", "isfinite")],
    # two-argument math: integer and bool inputs are computed in float32
    *[OpInfo(n, "BINARY_FLOAT", ALL_DTYPES, _binary_samples(_STD, scalars=(3, 2.5, True), scalar_first=(2, 1.5, True)),
             _binary(fn), BINARY_CLASSES)
      for n, fn in (("atan2", torch.atan2), ("hypot", _hypot))],
    *[OpInfo(n, "COMPARE", ALL_DTYPES, _binary_samples(_TRUTH, scalars=(0, 1.5, True), scalar_first=(0.0, 2, False)),
             _binary(getattr(torch, n)), BINARY_CLASSES)
      for n in ("logical_and", "logical_or", "logical_xor")],
    # statistics
    OpInfo("var", "CUSTOM", FLOAT_DTYPES, _moment_samples, _moment_ref(torch.var), REDUCE_CLASSES),
    OpInfo("std", "CUSTOM", FLOAT_DTYPES, _moment_samples, _moment_ref(torch.std), REDUCE_CLASSES),
    OpInfo("cumsum", "CUSTOM", ALL_DTYPES, _cumsum_samples, torch.cumsum, REDUCE_CLASSES,
           tol={"float16": (1e-3, 2e-3)}),
    # normalization
    OpInfo("batch_norm", "CUSTOM", FLOAT_DTYPES, _batch_norm_samples, F.batch_norm, NORM_CLASSES,
           tol={"float16": (2e-3, 2e-3), "float32": (1e-5, 2e-5)}),
    OpInfo("layer_norm", "CUSTOM", FLOAT_DTYPES, _row_norm_samples(False), F.layer_norm, NORM_CLASSES,
           tol={"float16": (2e-3, 2e-3), "float32": (1e-5, 2e-5)}),
    OpInfo("rms_norm", "CUSTOM", FLOAT_DTYPES, _row_norm_samples(True), F.rms_norm, NORM_CLASSES,
           tol={"float16": (2e-3, 2e-3), "float32": (1e-5, 2e-5)}),
    OpInfo("layer_norm_backward", "CUSTOM", FLOAT_DTYPES, _row_norm_backward_samples(False),
           _row_norm_backward_ref(False), NORM_CLASSES,
           tol={"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2), "float32": (1e-4, 1e-4)}, method=False),
    OpInfo("rms_norm_backward", "CUSTOM", FLOAT_DTYPES, _row_norm_backward_samples(True),
           _row_norm_backward_ref(True), NORM_CLASSES,
           tol={"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2), "float32": (1e-4, 1e-4)}, method=False),
    OpInfo("batch_norm_backward", "CUSTOM", FLOAT_DTYPES, _batch_norm_backward_samples, _batch_norm_backward_ref,
           NORM_CLASSES, tol=_NORM_BACKWARD_TOL, method=False),
    OpInfo("group_norm_backward", "CUSTOM", FLOAT_DTYPES, _group_norm_backward_samples, _group_norm_backward_ref,
           NORM_CLASSES, tol=_NORM_BACKWARD_TOL, method=False),
    OpInfo("cross_entropy_backward", "CUSTOM", FLOAT_DTYPES, _cross_entropy_backward_samples,
           _cross_entropy_backward_ref, NORM_CLASSES, tol={"float32": (1e-5, 1e-5)}, method=False),
    OpInfo("softmax_backward", "CUSTOM", FLOAT_DTYPES, _softmax_backward_samples(False), _softmax_backward_ref(False),
           REDUCE_CLASSES, tol={"float32": (1e-5, 1e-5)}, method=False),
    OpInfo("log_softmax_backward", "CUSTOM", FLOAT_DTYPES, _softmax_backward_samples(True),
           _softmax_backward_ref(True), REDUCE_CLASSES, tol={"float32": (1e-5, 1e-5)}, method=False),
    OpInfo("group_norm", "CUSTOM", FLOAT_DTYPES, _group_norm_samples, F.group_norm, NORM_CLASSES,
           tol={"float16": (2e-3, 2e-3), "float32": (1e-5, 2e-5)}),
    # dropout (deterministic cases), nll_loss, cross_entropy (class-index targets)
    OpInfo("dropout", "CUSTOM", FLOAT_DTYPES, _dropout_samples, F.dropout, UNARY_CLASSES, exact_float=True),
    OpInfo("nll_loss", "CUSTOM", FLOAT_DTYPES, _nll_samples, _nll_ref, NORM_CLASSES),
    # torch's float16 reference rounds every log-probability to float16 before summing (a few ulps
    # of a sum); PyFlame keeps them in double and rounds once.
    OpInfo("cross_entropy", "CUSTOM", FLOAT_DTYPES, _cross_entropy_samples, _cross_entropy_ref, NORM_CLASSES,
           method=False, tol={"float16": (4e-3, 1e-3)}),
    *[OpInfo(n, "CUSTOM", FLOAT_DTYPES, _pointwise_loss_samples(n), _in_float32(getattr(F, n)), NORM_CLASSES,
             method=False)
      for n in ("mse_loss", "l1_loss", "smooth_l1_loss", "kl_div", "binary_cross_entropy",
                "binary_cross_entropy_with_logits")],
]
