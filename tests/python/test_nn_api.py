"""pyflame.nn additions of issue 13 against torch.nn: attention and transformer layers, recurrent layers,
containers, interpolation, padding modes, adaptive max pooling, activations, distances, losses and init.

Every module is built in both libraries with the same weights (torch's, randomised, copied through the
state dict); outputs and the gradients of inputs and parameters are compared on fresh random inputs,
on each device ('rocm' skips without a GPU).
"""

import math
import re
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch

import pyflame as pf
import pyflame.nn as nn
import pyflame.nn.functional as F
from module_state import randomize, to_pf_state
from op_registry import PF_DTYPE, TORCH_DTYPE, assert_matches, make_values, pf_to_numpy

tnn = torch.nn
TF = torch.nn.functional

# pyflame prints norm layers as PyTorch 2.13 (with bias=); older releases (the GPU machine's) print them without.
NORM_REPR_HAS_BIAS = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 13)


def values(rng, *shape, low=-3.0, high=3.0, dtype="float32"):
    return make_values(rng, shape, dtype, low=low, high=high)


class Const:
    """An input that does not require grad (targets)."""

    def __init__(self, value):
        self.value = value


def as_input(lib, v, grad=False):
    """v as an input of lib (pf or torch): arrays become tensors, float ones requiring grad where asked."""
    if isinstance(v, Const):
        return lib.tensor(v.value)
    if isinstance(v, np.ndarray):
        return lib.tensor(v, requires_grad=grad and v.dtype.kind == "f")
    return v


def pair(pmod_cls, tmod_cls, *args, rng, **kwargs):
    """The same layer in both libraries, the PyFlame one holding the torch one's (randomised) state."""
    tmod = tmod_cls(*args, **kwargs)
    randomize(tmod, rng)
    pmod = pmod_cls(*args, **kwargs)
    assert list(pmod.state_dict().keys()) == list(tmod.state_dict().keys())
    for (k, p), (_, t) in zip(pmod.state_dict().items(), tmod.state_dict().items()):
        assert tuple(p.shape) == tuple(t.shape), k
    pmod.load_state_dict(to_pf_state(tmod))
    return pmod, tmod


def close(actual, expected, rtol, atol, what):
    assert isinstance(actual, pf.Tensor), f"{what}: got {type(actual).__name__}"
    assert tuple(actual.shape) == tuple(expected.shape), f"{what}: shape {tuple(actual.shape)} vs " \
                                                         f"{tuple(expected.shape)}"
    np.testing.assert_allclose(pf_to_numpy(actual), expected.detach().numpy(), rtol=rtol, atol=atol, err_msg=what)


def grad_atol(g, atol):
    """Gradients sum many terms: the absolute tolerance scales with their size."""
    return atol * max(1.0, float(g.abs().max())) if g.numel() else atol


def flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def compare(pfn, tfn, args, kwargs=None, *, rng, rtol=1e-4, atol=1e-5, pmod=None, tmod=None, what=""):
    """Runs pfn/tfn on the same inputs (np arrays become tensors; float ones require grad), compares the
    outputs, then backpropagates the same random weights of every output and compares the gradients of
    the float inputs and of the modules' parameters."""
    kwargs = kwargs or {}
    targs = [as_input(torch, a, True) for a in args]
    pargs = [as_input(pf, a, True) for a in args]
    tout = flat(tfn(*targs, **{k: as_input(torch, v) for k, v in kwargs.items()}))
    pout = flat(pfn(*pargs, **{k: as_input(pf, v) for k, v in kwargs.items()}))
    assert len(tout) == len(pout), what
    tloss, ploss = 0, 0
    for i, (p, t) in enumerate(zip(pout, tout)):
        if t is None:
            assert p is None, f"{what}: output {i} should be None"
            continue
        close(p, t, rtol, atol, f"{what} output {i}")
        if t.requires_grad:
            g = values(rng, *t.shape, low=-1.0, high=1.0).astype(np.float64 if t.dtype == torch.float64 else
                                                                    np.float32)
            tloss = tloss + (t * torch.from_numpy(g)).sum()
            ploss = ploss + (p * pf.tensor(g)).sum()
    if isinstance(tloss, int):
        return pout, tout
    tloss.backward()
    ploss.backward()
    for i, (p, t) in enumerate(zip(pargs, targs)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            close(p.grad, t.grad, rtol, grad_atol(t.grad, atol), f"{what} grad of input {i}")
    if tmod is not None:
        pgrads = dict(pmod.named_parameters())
        for name, tp in tmod.named_parameters():
            if tp.grad is None:
                assert pgrads[name].grad is None, f"{what}: {name} should have no gradient"
            else:
                close(pgrads[name].grad, tp.grad, rtol, grad_atol(tp.grad, atol), f"{what} grad of {name}")
    return pout, tout


def compare_module(pmod, tmod, args, kwargs=None, **kw):
    return compare(pmod, tmod, args, kwargs, pmod=pmod, tmod=tmod, what=kw.pop("what", repr(tmod)), **kw)


def raises(exc, fn, match=None):
    with pytest.raises(exc) as info:
        fn()
    if match is not None:
        assert re.search(match, str(info.value)), str(info.value)


# ----------------------------------------------------------------- activations

ACTIVATIONS = [
    ("ELU", (), {}), ("ELU", (0.5,), {}), ("CELU", (), {"alpha": 1.5}), ("SELU", (), {}),
    ("PReLU", (), {}), ("PReLU", (4,), {"init": 0.1}), ("ReLU6", (), {}), ("Hardsigmoid", (), {}),
    ("Hardswish", (), {}), ("Mish", (), {}), ("SiLU", (), {}), ("Softplus", (), {"beta": 2.0, "threshold": 3.0}),
    ("Softsign", (), {}), ("Tanhshrink", (), {}), ("LogSigmoid", (), {}), ("Hardtanh", (-2.0, 1.5), {}),
    ("GLU", (), {}), ("GLU", (1,), {}), ("GELU", (), {"approximate": "tanh"}),
]


@pytest.mark.parametrize("name,args,kwargs", ACTIVATIONS, ids=[f"{a[0]}{i}" for i, a in enumerate(ACTIVATIONS)])
def test_activation_modules(name, args, kwargs, device, rng):
    pmod, tmod = pair(getattr(nn, name), getattr(tnn, name), *args, rng=rng, **kwargs)
    assert repr(pmod) == repr(tmod)
    for shape in ((3, 4, 6), (2, 4), (4, 4, 2, 2)):
        compare_module(pmod, tmod, [values(rng, *shape, low=-5, high=5)], rng=rng)


@pytest.mark.parametrize("name", ["ELU", "SELU", "CELU", "ReLU6", "Hardsigmoid", "Hardswish", "Mish", "Hardtanh"])
def test_activation_inplace(name, device, rng):
    v = values(rng, 3, 5, low=-5, high=5)
    x = pf.tensor(v)
    out = getattr(nn, name)(inplace=True)(x)
    expected = getattr(tnn, name)()(torch.from_numpy(v))
    close(x, expected, 1e-5, 1e-6, name)
    assert out is x
    assert repr(getattr(nn, name)(inplace=True)) == repr(getattr(tnn, name)(inplace=True))


def test_prelu_default_init_and_shape_errors(device, rng):
    m = nn.PReLU(3, init=0.3)
    np.testing.assert_allclose(pf_to_numpy(m.weight), [0.3] * 3)
    assert [k for k, _ in m.named_parameters()] == ["weight"]
    raises(ValueError, lambda: m(pf.randn(2, 4, 5)), "channel size")
    x1 = values(rng, 5)  # a 1-D input has one channel (PyTorch's rule): one weight value only
    compare(lambda x: F.prelu(x, pf.tensor([0.2])), lambda x: TF.prelu(x, torch.tensor([0.2])), [x1], rng=rng)


FUNCTIONAL_ACTS = [("relu6", {}), ("hardsigmoid", {}), ("hardswish", {}), ("mish", {}), ("elu", {"alpha": 0.7}),
                   ("selu", {}), ("celu", {"alpha": 2.0}), ("softsign", {}), ("tanhshrink", {}), ("logsigmoid", {}),
                   ("glu", {"dim": 0}), ("hardtanh", {"min_val": -0.5, "max_val": 2.0})]


@pytest.mark.parametrize("name,kwargs", FUNCTIONAL_ACTS, ids=[a[0] for a in FUNCTIONAL_ACTS])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_functional_activations(name, kwargs, dtype, device, rng):
    for shape in ((6, 5), (4,), (2, 3, 4)):
        compare(lambda x: getattr(F, name)(x, **kwargs), lambda x: getattr(TF, name)(x, **kwargs),
                [values(rng, *shape, low=-6, high=6, dtype=dtype)], rng=rng, what=f"{name}{shape}")


def test_glu_errors(device):
    raises(ValueError, lambda: F.glu(pf.randn(3, 5)), "even")
    raises(ValueError, lambda: F.glu(pf.tensor(1.0)), "scalars")


# ----------------------------------------------------------------- distances, normalize, losses


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1), (0.5, 2)])
def test_normalize(p, dim, device, rng):
    x = values(rng, 3, 4, 5)
    compare(lambda t: F.normalize(t, p=p, dim=dim), lambda t: TF.normalize(t, p=p, dim=dim), [x], rng=rng,
            what=f"normalize p={p} dim={dim}")
    # eps takes over for tiny vectors
    tiny = (values(rng, 2, 3) * 1e-14).astype(np.float32)
    compare(lambda t: F.normalize(t, eps=1e-6), lambda t: TF.normalize(t, eps=1e-6), [tiny], rng=rng, atol=1e-7)


@pytest.mark.parametrize("shapes,dim", [(((5, 4), (5, 4)), 1), (((3, 1, 6), (1, 4, 6)), -1), (((7,), (7,)), 0),
                                        (((2, 3, 4), (2, 3, 4)), 0)])
def test_cosine_similarity(shapes, dim, device, rng):
    a, b = (values(rng, *s) for s in shapes)
    compare(lambda x, y: F.cosine_similarity(x, y, dim=dim), lambda x, y: TF.cosine_similarity(x, y, dim=dim),
            [a, b], rng=rng)
    pmod, tmod = nn.CosineSimilarity(dim=dim, eps=1e-6), tnn.CosineSimilarity(dim=dim, eps=1e-6)
    compare(pmod, tmod, [a, b], rng=rng)


@pytest.mark.parametrize("p,keepdim", [(2.0, False), (1.0, True), (3.0, False), (math.inf, False)])
def test_pairwise_distance(p, keepdim, device, rng):
    for sa, sb in (((6, 5), (6, 5)), ((4, 3), (3,)), ((5,), (5,))):
        a, b = values(rng, *sa), values(rng, *sb)
        compare(lambda x, y: F.pairwise_distance(x, y, p=p, keepdim=keepdim),
                lambda x, y: TF.pairwise_distance(x, y, p=p, keepdim=keepdim), [a, b], rng=rng)
    compare(nn.PairwiseDistance(p, 1e-3, keepdim), tnn.PairwiseDistance(p, 1e-3, keepdim),
            [values(rng, 3, 4), values(rng, 3, 4)], rng=rng)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_huber_loss(reduction, device, rng):
    for delta in (1.0, 0.3, 2.5):
        x, y = values(rng, 4, 6), values(rng, 4, 6)
        compare(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=delta),
                lambda a, b: TF.huber_loss(a, b, reduction=reduction, delta=delta), [x, y], rng=rng)
        compare(nn.HuberLoss(reduction, delta), tnn.HuberLoss(reduction, delta), [x, y], rng=rng)
    w = values(rng, 4, 6, low=0.1, high=2)
    compare(lambda a, b: F.huber_loss(a, b, reduction=reduction, weight=pf.tensor(w)),
            lambda a, b: TF.huber_loss(a, b, reduction=reduction, weight=torch.from_numpy(w)),
            [values(rng, 4, 6), values(rng, 4, 6)], rng=rng)
    raises(ValueError, lambda: F.huber_loss(pf.randn(3), pf.randn(3), delta=0.0), "delta")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target, device, rng):
    x = np.log(np.abs(values(rng, 4, 5)) + 0.1).astype(np.float32)
    y = values(rng, 4, 5, low=0.05, high=1.0)
    if log_target:
        y = np.log(y)
    compare(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
            lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target), [x, y], rng=rng)
    compare(nn.KLDivLoss(reduction=reduction, log_target=log_target),
            tnn.KLDivLoss(reduction=reduction, log_target=log_target), [x, y], rng=rng)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_other_loss_modules(reduction, device, rng):
    x, y = values(rng, 5, 3), values(rng, 5, 3)
    compare(nn.SmoothL1Loss(reduction=reduction, beta=0.5), tnn.SmoothL1Loss(reduction=reduction, beta=0.5),
            [x, y], rng=rng)
    sign = np.where(values(rng, 5, 3) > 0, 1.0, -1.0).astype(np.float32)
    compare(nn.SoftMarginLoss(reduction=reduction), tnn.SoftMarginLoss(reduction=reduction), [x, Const(sign)], rng=rng)
    target = np.array([1, -1, 1, -1, -1], dtype=np.float32)
    compare(nn.CosineEmbeddingLoss(0.2, reduction=reduction), tnn.CosineEmbeddingLoss(0.2, reduction=reduction),
            [x, y, Const(target)], rng=rng)
    prob = values(rng, 5, 3, low=0, high=1)
    w, pw = values(rng, 3, low=0.5, high=2), values(rng, 3, low=0.5, high=2)
    pmod = nn.BCEWithLogitsLoss(weight=pf.tensor(w), reduction=reduction, pos_weight=pf.tensor(pw))
    tmod = tnn.BCEWithLogitsLoss(weight=torch.from_numpy(w), reduction=reduction, pos_weight=torch.from_numpy(pw))
    assert list(pmod.state_dict()) == list(tmod.state_dict())
    compare(pmod, tmod, [x, Const(prob)], rng=rng)


# ----------------------------------------------------------------- padding modes


PADS = [((2, 5, 7), (2, 3)), ((5, 7), (1, 0)), ((2, 3, 5, 6), (1, 2, 3, 0)), ((3, 5, 6), (2, 2, 1, 1)),
        ((1, 2, 3, 4, 5), (1, 2, 0, 3, 2, 1)), ((2, 3, 4, 5), (1, 1, 2, 2, 1, 0)), ((2, 3, 6), (-1, 2)),
        ((2, 4, 6, 5), (2, -2, -1, 3))]


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes(mode, device, rng):
    for shape, p in PADS:
        compare(lambda x: F.pad(x, p, mode=mode), lambda x: TF.pad(x, p, mode=mode), [values(rng, *shape)], rng=rng,
                what=f"pad {mode} {shape} {p}")
    compare(lambda x: F.pad(x, (1, 2), mode="constant", value=1.5),
            lambda x: TF.pad(x, (1, 2), mode="constant", value=1.5), [values(rng, 3, 4)], rng=rng)


def test_pad_mode_errors(device):
    x = pf.randn(2, 3, 4)
    raises(ValueError, lambda: F.pad(x, (4, 0), mode="reflect"), "less than the corresponding input dimension")
    raises(ValueError, lambda: F.pad(x, (5, 0), mode="circular"), "wrapping around more than once")
    raises(NotImplementedError, lambda: F.pad(x, (1, 1, 1, 1, 1, 1), mode="reflect"), "Padding size 6")
    raises(NotImplementedError, lambda: F.pad(pf.randn(4), (1, 1), mode="replicate"), "1D input")
    raises(NotImplementedError, lambda: F.pad(x, (1, 1), mode="foo"), "Unrecognised padding mode")
    raises(ValueError, lambda: F.pad(x, (1, 1), mode="reflect", value=2.0), "value")
    raises(ValueError, lambda: F.pad(x, (1,), mode="reflect"), "even")
    raises(ValueError, lambda: F.pad(x, (-2, -2), mode="circular"), "crops all")


@pytest.mark.parametrize("name,arg", [("ReflectionPad1d", 2), ("ReflectionPad2d", (1, 2, 0, 3)),
                                      ("ReplicationPad1d", (3, 1)), ("ReplicationPad2d", 2),
                                      ("ReplicationPad3d", 1), ("CircularPad1d", 2), ("CircularPad2d", (1, 0, 2, 1)),
                                      ("ZeroPad2d", (1, 2, 3, 4)), ("ConstantPad1d", (2, 1)), ("ReflectionPad3d", 1)])
def test_padding_modules(name, arg, device, rng):
    nd = int(name[-2])
    args = (arg, 0.5) if name.startswith("Constant") else (arg,)
    pmod, tmod = getattr(nn, name)(*args), getattr(tnn, name)(*args)
    assert repr(pmod) == repr(tmod)
    compare(pmod, tmod, [values(rng, *((2, 3) + (5,) * nd))], rng=rng)


@pytest.mark.parametrize("padding_mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(padding_mode, device, rng):
    pmod, tmod = pair(nn.Conv2d, tnn.Conv2d, 3, 4, 3, padding=(1, 2), padding_mode=padding_mode, rng=rng)
    compare_module(pmod, tmod, [values(rng, 2, 3, 6, 7)], rng=rng)
    pmod, tmod = pair(nn.Conv1d, tnn.Conv1d, 2, 3, 5, padding="same", padding_mode=padding_mode, rng=rng)
    compare_module(pmod, tmod, [values(rng, 2, 2, 9)], rng=rng)


# ----------------------------------------------------------------- adaptive max pooling


@pytest.mark.parametrize("shape,out", [((2, 3, 8, 6), (4, 3)), ((2, 3, 7, 9), (3, 4)), ((3, 10, 5), 4),
                                       ((1, 2, 9, 7), (None, 3)), ((2, 2, 5, 5), 1), ((2, 2, 4, 3), (6, 5))])
def test_adaptive_max_pool2d(shape, out, device, rng):
    compare(lambda x: F.adaptive_max_pool2d(x, out), lambda x: TF.adaptive_max_pool2d(x, out),
            [values(rng, *shape)], rng=rng, what=f"adaptive_max_pool2d {shape} -> {out}")
    pmod, tmod = nn.AdaptiveMaxPool2d(out), tnn.AdaptiveMaxPool2d(out)
    assert repr(pmod) == repr(tmod)
    compare(pmod, tmod, [values(rng, *shape)], rng=rng)


@pytest.mark.parametrize("shape,out", [((2, 3, 10), 4), ((3, 8), 4), ((2, 2, 5), 7)])
def test_adaptive_pool1d(shape, out, device, rng):
    compare(nn.AdaptiveMaxPool1d(out), tnn.AdaptiveMaxPool1d(out), [values(rng, *shape)], rng=rng)
    compare(nn.AdaptiveAvgPool1d(out), tnn.AdaptiveAvgPool1d(out), [values(rng, *shape)], rng=rng)


def test_adaptive_max_pool_errors(device):
    raises(ValueError, lambda: F.adaptive_max_pool2d(pf.randn(4, 4), 2), "3-D or 4-D")


# ----------------------------------------------------------------- interpolate / Upsample


INTERP = [
    ((2, 3, 5, 4), dict(size=(7, 9), mode="nearest")),
    ((2, 3, 5, 4), dict(scale_factor=2, mode="nearest")),
    ((1, 2, 6, 7), dict(scale_factor=1.5, mode="nearest")),
    ((1, 2, 6, 7), dict(scale_factor=(0.7, 1.3), mode="nearest")),
    ((1, 2, 9, 8), dict(size=(4, 3), mode="nearest")),
    ((1, 2, 6, 7), dict(size=(11, 5), mode="nearest-exact")),
    ((2, 3, 5), dict(size=8, mode="nearest")),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="nearest")),
    ((2, 3, 5, 4), dict(size=(7, 9), mode="bilinear", align_corners=False)),
    ((2, 3, 5, 4), dict(size=(7, 9), mode="bilinear", align_corners=True)),
    ((2, 3, 6, 7), dict(scale_factor=2, mode="bilinear")),
    ((2, 3, 6, 7), dict(scale_factor=1.7, mode="bilinear", align_corners=False)),
    ((2, 3, 6, 7), dict(scale_factor=0.6, mode="bilinear", align_corners=True)),
    ((2, 3, 6, 7), dict(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True)),
    ((2, 3, 9, 10), dict(size=(4, 3), mode="bilinear")),
    ((2, 3, 1, 5), dict(size=(3, 1), mode="bilinear", align_corners=True)),
    ((2, 3, 7), dict(size=12, mode="linear")),
    ((2, 3, 7), dict(scale_factor=2.5, mode="linear", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 7), mode="trilinear")),
    ((2, 3, 8, 6), dict(size=(3, 4), mode="area")),
    ((2, 3, 9), dict(size=4, mode="area")),
]


@pytest.mark.parametrize("shape,kw", INTERP, ids=[f"{i}-{k['mode']}" for i, (_, k) in enumerate(INTERP)])
def test_interpolate(shape, kw, device, rng):
    compare(lambda x: F.interpolate(x, **kw), lambda x: TF.interpolate(x, **kw), [values(rng, *shape)], rng=rng,
            what=f"interpolate {shape} {kw}")


def test_interpolate_float64(device, rng):
    x = values(rng, 2, 2, 5, 6, dtype="float64")
    compare(lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear"),
            lambda t: TF.interpolate(t, scale_factor=1.5, mode="bilinear"), [x], rng=rng, rtol=1e-6, atol=1e-7)


def test_interpolate_errors(device):
    x = pf.randn(1, 2, 4, 4)
    raises(ValueError, lambda: F.interpolate(x, size=3, scale_factor=2), "only one of size or scale_factor")
    raises(ValueError, lambda: F.interpolate(x), "either size or scale_factor")
    raises(ValueError, lambda: F.interpolate(x, size=3, align_corners=True), "align_corners")
    raises(NotImplementedError, lambda: F.interpolate(pf.randn(1, 2, 4), size=3, mode="bilinear"), "needs 4D")
    raises(pf.NotSupportedError, lambda: F.interpolate(x, size=3, mode="bilinear", antialias=True))
    raises(ValueError, lambda: F.interpolate(x, size=(3, 3, 3)), "same number of spatial dimensions")


@pytest.mark.parametrize("cls,args,kwargs", [
    ("Upsample", (), dict(scale_factor=2)), ("Upsample", (), dict(size=(5, 7), mode="bilinear")),
    ("Upsample", (), dict(scale_factor=(1.5, 2.0), mode="bilinear", align_corners=True)),
    ("UpsamplingNearest2d", (), dict(scale_factor=3)), ("UpsamplingBilinear2d", (), dict(size=(4, 9))),
])
def test_upsample_modules(cls, args, kwargs, device, rng):
    pmod = getattr(nn, cls)(*args, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tmod = getattr(tnn, cls)(*args, **kwargs)
        assert repr(pmod) == repr(tmod)
        compare(pmod, tmod, [values(rng, 2, 3, 4, 5)], rng=rng)


# ----------------------------------------------------------------- Unflatten, containers, Parameter


def test_unflatten(device, rng):
    for dim, sizes, shape in ((1, (2, 5), (3, 10)), (-1, (2, -1, 3), (2, 4, 12)), (0, [3, 1], (3, 2))):
        pmod, tmod = nn.Unflatten(dim, sizes), tnn.Unflatten(dim, sizes)
        assert repr(pmod) == repr(tmod)
        compare(pmod, tmod, [values(rng, *shape)], rng=rng)
    raises(ValueError, lambda: nn.Unflatten(1, (3, 4))(pf.randn(2, 10)), "multiply up")
    raises(TypeError, lambda: nn.Unflatten(1, 3))


def test_module_dict(device, rng):
    layers = [("conv", ("Conv2d", (2, 3, 3))), ("act", ("PReLU", ())), ("fc", ("Linear", (4, 2)))]
    pm = nn.ModuleDict(OrderedDict((k, getattr(nn, c)(*a)) for k, (c, a) in layers))
    tm = tnn.ModuleDict(OrderedDict((k, getattr(tnn, c)(*a)) for k, (c, a) in layers))
    assert list(pm.state_dict()) == list(tm.state_dict())
    assert list(pm.keys()) == list(tm.keys()) == ["conv", "act", "fc"]
    assert repr(pm) == repr(tm)
    assert len(pm) == 3 and "act" in pm and "x" not in pm
    pm["extra"] = nn.Linear(2, 2)
    assert list(pm) == ["conv", "act", "fc", "extra"]
    popped = pm.pop("act")
    assert isinstance(popped, nn.PReLU) and list(pm) == ["conv", "fc", "extra"]
    pm.update([("b", nn.ReLU()), ("a", nn.Tanh())])
    assert list(pm) == ["conv", "fc", "extra", "b", "a"]
    pm.update(nn.ModuleDict({"c": nn.ReLU()}))
    assert list(pm)[-1] == "c"
    assert len(list(pm.parameters())) == 6
    del pm["conv"]
    assert "conv" not in pm and len(list(pm.parameters())) == 4
    raises(ValueError, lambda: pm.update([("a", nn.ReLU(), 1)]), "length 3")
    pm.clear()
    assert len(pm) == 0


def test_parameter_list(device, rng):
    a, b = values(rng, 2, 3), values(rng, 4)
    pl = nn.ParameterList([pf.tensor(a), nn.Parameter(pf.tensor(b))])
    tl = tnn.ParameterList([torch.from_numpy(a), tnn.Parameter(torch.from_numpy(b))])
    assert list(pl.state_dict()) == list(tl.state_dict()) == ["0", "1"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in pl)
    pl.append(pf.tensor(values(rng, 5)))
    pl += [pf.randn(1)]
    assert len(pl) == 4 and len(list(pl.parameters())) == 4
    assert tuple(pl[-2].shape) == (5,) and isinstance(pl[1:3], nn.ParameterList) and len(pl[1:3]) == 2
    pl[0] = pf.randn(7)
    assert tuple(pl[0].shape) == (7,) and isinstance(pl[0], nn.Parameter)
    raises(IndexError, lambda: pl[4])
    raises(RuntimeError, lambda: pl(pf.randn(1)), "should not be called")

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = nn.ParameterList([nn.Parameter(pf.tensor(a)), nn.Parameter(pf.tensor(b))])

        def forward(self, x):
            return (x @ self.ps[0]).sum(-1) * self.ps[1][:2].sum()

    h = Holder()
    h(pf.tensor(values(rng, 5, 2))).sum().backward()
    assert [n for n, _ in h.named_parameters()] == ["ps.0", "ps.1"]
    assert h.ps[0].grad is not None and h.ps[1].grad is not None


def test_parameter_dict(device, rng):
    vals = {k: values(rng, i + 1, 2) for i, k in enumerate(["w", "b", "a"])}
    pd = nn.ParameterDict({k: pf.tensor(v) for k, v in vals.items()})
    td = tnn.ParameterDict({k: torch.from_numpy(v) for k, v in vals.items()})
    assert list(pd.keys()) == list(td.keys())  # a plain dict is sorted, as PyTorch
    assert list(pd.state_dict()) == list(td.state_dict())
    pd2 = nn.ParameterDict(OrderedDict((k, pf.tensor(v)) for k, v in vals.items()))
    assert list(pd2) == ["w", "b", "a"]
    assert all(isinstance(p, nn.Parameter) for p in pd.values())
    pd["z"] = pf.randn(3)
    assert list(pd)[-1] == "z" and len(pd) == 4 and "z" in pd
    np.testing.assert_array_equal(pf_to_numpy(pd.pop("w")), vals["w"])
    assert "w" not in pd and len(list(pd.parameters())) == 3
    assert pd.get("nope") is None and pd.setdefault("n", pf.ones(1)) is pd["n"]
    k, _ = pd.popitem()
    assert k == "n"
    merged = pd | {"q": pf.zeros(2)}
    assert list(merged)[-1] == "q" and "q" not in pd
    raises(KeyError, lambda: pd["nope"])


def test_parameter_requires_grad_argument(device):
    t = pf.randn(3)
    p = nn.Parameter(t, requires_grad=False)
    assert isinstance(p, nn.Parameter) and not p.requires_grad
    assert nn.Parameter(t).requires_grad
    assert not nn.Parameter(pf.tensor([1, 2]), requires_grad=False).requires_grad


# ----------------------------------------------------------------- MultiheadAttention


def mha_inputs(rng, L, S, N, E, kdim, vdim, batched, batch_first):
    def shape(n, e):
        if not batched:
            return (n, e)
        return (N, n, e) if batch_first else (n, N, e)

    return values(rng, *shape(L, E)), values(rng, *shape(S, kdim)), values(rng, *shape(S, vdim))


def bool_mask(rng, shape):
    m = rng.random(shape) < 0.3
    m[..., 0] = False  # every query keeps one key (a fully masked row is NaN or zeros depending on the path)
    return m


MHA_CONFIGS = [
    dict(), dict(batch_first=True), dict(bias=False), dict(kdim=5, vdim=3), dict(add_bias_kv=True),
    dict(add_zero_attn=True), dict(add_bias_kv=True, add_zero_attn=True, batch_first=True),
]


@pytest.mark.parametrize("config", MHA_CONFIGS, ids=[str(c) for c in MHA_CONFIGS])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_multihead_attention(config, need_weights, average, device, rng):
    E, heads, L, S, N = 8, 2, 4, 6, 3
    pmod, tmod = pair(nn.MultiheadAttention, tnn.MultiheadAttention, E, heads, rng=rng, **config)
    kdim, vdim = config.get("kdim", E), config.get("vdim", E)
    bf = config.get("batch_first", False)
    extra = int(config.get("add_bias_kv", False)) + int(config.get("add_zero_attn", False))
    for batched in (True, False):
        q, k, v = mha_inputs(rng, L, S, N, E, kdim, vdim, batched, bf)
        kpm = bool_mask(rng, (N, S) if batched else (S,))
        masks = [dict(), dict(key_padding_mask=kpm), dict(attn_mask=bool_mask(rng, (L, S))),
                 dict(attn_mask=values(rng, L, S, low=-2, high=2), key_padding_mask=kpm.astype(np.float32) * -1e9)]
        if batched:
            masks.append(dict(attn_mask=bool_mask(rng, (N * heads, L, S))))
        for m in masks:
            if extra and "attn_mask" in m:
                continue  # torch pads masks for bias_kv/zero_attn the same way; kept to the key padding case
            kw = dict(m, need_weights=need_weights, average_attn_weights=average)
            compare_module(pmod, tmod, [q, k, v], kw, rng=rng, what=f"MHA {config} batched={batched} {list(m)}")
    # self-attention: one packed projection of the same tensor
    for mod in (pmod, tmod):
        mod.zero_grad()
    if kdim == E and vdim == E:
        x = values(rng, *((N, L, E) if bf else (L, N, E)))
        compare(lambda t: pmod(t, t, t, need_weights=need_weights), lambda t: tmod(t, t, t, need_weights=need_weights),
                [x], rng=rng, pmod=pmod, tmod=tmod, what="self-attention")


def test_multihead_attention_masked_extras(device, rng):
    """add_bias_kv / add_zero_attn extend the masks by one key, as PyTorch does."""
    E, heads, L, S, N = 6, 3, 3, 5, 2
    for cfg in (dict(add_bias_kv=True), dict(add_zero_attn=True)):
        pmod, tmod = pair(nn.MultiheadAttention, tnn.MultiheadAttention, E, heads, rng=rng, **cfg)
        q, k, v = mha_inputs(rng, L, S, N, E, E, E, True, False)
        compare_module(pmod, tmod, [q, k, v], dict(attn_mask=bool_mask(rng, (L, S)),
                                                     key_padding_mask=bool_mask(rng, (N, S))), rng=rng)


def test_multihead_attention_init_and_state(device):
    pf.manual_seed(0)
    m = nn.MultiheadAttention(16, 4, kdim=8)
    t = tnn.MultiheadAttention(16, 4, kdim=8)
    assert list(m.state_dict()) == list(t.state_dict())
    assert repr(m) == repr(t)
    # xavier_uniform bound sqrt(6 / (fan_in + fan_out)); biases start at zero
    bound = math.sqrt(6.0 / (16 + 8))
    k = pf_to_numpy(m.k_proj_weight)
    assert np.abs(k).max() <= bound and np.abs(k).max() > 0.8 * bound
    assert not pf_to_numpy(m.in_proj_bias).any() and not pf_to_numpy(m.out_proj.bias).any()
    m2 = nn.MultiheadAttention(16, 4)
    assert m2.q_proj_weight is None and tuple(m2.in_proj_weight.shape) == (48, 16)
    raises(ValueError, lambda: nn.MultiheadAttention(10, 3), "divisible")
    raises(RuntimeError, lambda: m2(pf.randn(2, 1, 16), pf.randn(2, 1, 16), pf.randn(2, 1, 16), is_causal=True),
           "Need attn_mask")


def test_multihead_attention_dropout_in_training(device):
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = pf.randn(5, 2, 8)
    _, w = m(x, x, x, average_attn_weights=False)
    zeros = (pf_to_numpy(w) == 0).mean()
    assert 0.2 < zeros < 0.8
    m.eval()
    _, w = m(x, x, x)
    np.testing.assert_allclose(pf_to_numpy(w).sum(-1), 1.0, rtol=1e-5)


# ----------------------------------------------------------------- Transformer layers


ENC_CONFIGS = [dict(), dict(activation="gelu"), dict(norm_first=True), dict(batch_first=True), dict(bias=False),
               dict(activation=TF.silu, layer_norm_eps=1e-3)]


@pytest.mark.parametrize("config", ENC_CONFIGS, ids=[str(i) for i in range(len(ENC_CONFIGS))])
def test_transformer_encoder_layer(config, device, rng):
    d, heads, ff, L, N = 8, 2, 16, 5, 3
    pconfig = dict(config)
    if config.get("activation") is TF.silu:
        pconfig["activation"] = F.silu
    tmod = tnn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, **config)
    randomize(tmod, rng)
    pmod = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, **pconfig)
    assert list(pmod.state_dict()) == list(tmod.state_dict())
    if NORM_REPR_HAS_BIAS:
        assert repr(pmod) == repr(tmod) or config.get("activation") is TF.silu
    pmod.load_state_dict(to_pf_state(tmod))
    bf = config.get("batch_first", False)
    x = values(rng, *((N, L, d) if bf else (L, N, d)))
    causal = np.triu(np.full((L, L), -np.inf, dtype=np.float32), 1)
    for kw in (dict(), dict(src_mask=causal), dict(src_key_padding_mask=bool_mask(rng, (N, L))),
               dict(src_mask=bool_mask(rng, (L, L)), src_key_padding_mask=bool_mask(rng, (N, L)))):
        compare_module(pmod, tmod, [x], kw, rng=rng, rtol=2e-4, atol=2e-5, what=f"encoder layer {config} {list(kw)}")
        pmod.zero_grad()
        tmod.zero_grad()
    compare_module(pmod, tmod, [values(rng, L, d)], rng=rng, rtol=2e-4, atol=2e-5, what="unbatched")
    # eval mode (PyTorch's fused inference path) gives the same
    pmod.eval(), tmod.eval()
    with torch.no_grad(), pf.no_grad():
        close(pmod(pf.tensor(x)), tmod(torch.from_numpy(x)), 2e-4, 2e-5, "eval")


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_encoder(batch_first, device, rng):
    d, heads, L, N = 8, 2, 6, 3
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        tlayer = tnn.TransformerEncoderLayer(d, heads, 12, dropout=0.0, batch_first=batch_first)
        tmod = tnn.TransformerEncoder(tlayer, 2, norm=tnn.LayerNorm(d))
    with warnings.catch_warnings(record=True) as pw:
        warnings.simplefilter("always")
        player = nn.TransformerEncoderLayer(d, heads, 12, dropout=0.0, batch_first=batch_first)
        pmod = nn.TransformerEncoder(player, 2, norm=nn.LayerNorm(d))
    assert [str(w.message) for w in pw] == [str(w.message) for w in tw]
    assert list(pmod.state_dict()) == list(tmod.state_dict())
    assert pmod.layers[0] is not player and pmod.layers[0] is not pmod.layers[1]
    assert pmod.layers[0].linear1.weight is not pmod.layers[1].linear1.weight
    randomize(tmod, rng)
    pmod.load_state_dict(to_pf_state(tmod))
    x = values(rng, *((N, L, d) if batch_first else (L, N, d)))
    kpm = np.zeros((N, L), dtype=bool)
    kpm[0, 4:] = True
    kpm[2, 5:] = True
    causal = np.triu(np.ones((L, L), dtype=bool), 1)
    for kw in (dict(), dict(src_key_padding_mask=kpm), dict(mask=causal, is_causal=True)):
        compare_module(pmod, tmod, [x], kw, rng=rng, rtol=2e-4, atol=3e-5, what=f"encoder {list(kw)}")
        pmod.zero_grad()
        tmod.zero_grad()
    # inference: PyTorch's nested-tensor path zeroes the padded positions (batch_first only)
    pmod.eval(), tmod.eval()
    with torch.no_grad(), pf.no_grad():
        close(pmod(pf.tensor(x), src_key_padding_mask=pf.tensor(kpm)),
              tmod(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(kpm)), 2e-4, 3e-5, "inference")


def test_transformer_decoder_and_transformer(device, rng):
    d, heads, L, S, N = 8, 2, 4, 5, 2
    for cfg in (dict(), dict(norm_first=True, batch_first=True)):
        pmod, tmod = pair(nn.TransformerDecoderLayer, tnn.TransformerDecoderLayer, d, heads, 16, 0.0, rng=rng, **cfg)
        bf = cfg.get("batch_first", False)
        tgt = values(rng, *((N, L, d) if bf else (L, N, d)))
        mem = values(rng, *((N, S, d) if bf else (S, N, d)))
        causal = np.triu(np.full((L, L), -np.inf, dtype=np.float32), 1)
        compare_module(pmod, tmod, [tgt, mem], dict(tgt_mask=causal, memory_key_padding_mask=bool_mask(rng, (N, S))),
                       rng=rng, rtol=2e-4, atol=3e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pmod, tmod = pair(nn.Transformer, tnn.Transformer, d, heads, 2, 1, 16, 0.0, rng=rng)
    mask = tnn.Transformer.generate_square_subsequent_mask(L)
    np.testing.assert_array_equal(pf_to_numpy(nn.Transformer.generate_square_subsequent_mask(L)), mask.detach().numpy())
    compare_module(pmod, tmod, [values(rng, S, N, d), values(rng, L, N, d)], dict(tgt_mask=mask.detach().numpy()), rng=rng,
                   rtol=3e-4, atol=5e-5)


def test_transformer_init(device):
    pf.manual_seed(1)
    m = nn.Transformer(16, 2, 1, 1, 32)
    t = tnn.Transformer(16, 2, 1, 1, 32)
    assert list(m.state_dict()) == list(t.state_dict())
    w = pf_to_numpy(m.encoder.layers[0].linear1.weight)
    bound = math.sqrt(6.0 / (16 + 32))  # every matrix re-drawn xavier-uniform
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound


# ----------------------------------------------------------------- recurrent layers


RNN_CONFIGS = [
    ("LSTM", dict()), ("LSTM", dict(num_layers=2, bidirectional=True)), ("LSTM", dict(batch_first=True, bias=False)),
    ("LSTM", dict(proj_size=3, num_layers=2)), ("LSTM", dict(proj_size=2, bidirectional=True, batch_first=True)),
    ("GRU", dict()), ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)), ("GRU", dict(bias=False)),
    ("RNN", dict()), ("RNN", dict(nonlinearity="relu", num_layers=2)), ("RNN", dict(bidirectional=True, bias=False)),
]


@pytest.mark.parametrize("name,config", RNN_CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(RNN_CONFIGS)])
def test_recurrent_layers(name, config, device, rng):
    I, H, L, N = 4, 5, 6, 3
    pmod, tmod = pair(getattr(nn, name), getattr(tnn, name), I, H, rng=rng, **config)
    assert repr(pmod) == repr(tmod)
    D = 2 if config.get("bidirectional") else 1
    layers = config.get("num_layers", 1)
    Hout = config.get("proj_size", 0) or H
    bf = config.get("batch_first", False)
    x = values(rng, *((N, L, I) if bf else (L, N, I)))
    compare_module(pmod, tmod, [x], rng=rng, what=f"{name} {config}")
    pmod.zero_grad()
    tmod.zero_grad()
    h0 = values(rng, layers * D, N, Hout)
    hx = [h0, values(rng, layers * D, N, H)] if name == "LSTM" else [h0]
    if name == "LSTM":
        compare(lambda x, h, c: pmod(x, (h, c)), lambda x, h, c: tmod(x, (h, c)), [x] + hx, rng=rng, pmod=pmod,
                tmod=tmod, what="with hx")
    else:
        compare_module(pmod, tmod, [x] + hx, rng=rng, what="with hx")
    # unbatched input (L, I) and hx (layers * D, H)
    pmod.zero_grad()
    tmod.zero_grad()
    xu = values(rng, L, I)
    compare_module(pmod, tmod, [xu], rng=rng, what="unbatched")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_lstm_moved_to_device(device, dtype, rng):
    """nn.LSTM and LSTMCell as PyTorch code writes them: module and data moved with .to(device), the
    current device left at 'cpu'; outputs stay on the device and match torch, with gradients."""
    pf.set_device("cpu")
    pmod, tmod = pair(nn.LSTM, tnn.LSTM, 4, 6, rng=rng, num_layers=2, bidirectional=True)
    pd, td = PF_DTYPE[dtype], TORCH_DTYPE[dtype]
    pmod.to(device).to(pd)
    tmod.to(td)
    x = values(rng, 5, 3, 4, low=-1, high=1, dtype=dtype)
    px = pf.tensor(x).to(pd).to(device).requires_grad_(True)
    tx = torch.from_numpy(np.array(x)).to(td).requires_grad_(True)
    py, (ph, pc) = pmod(px)
    ty, (th, tc) = tmod(tx)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=3e-2, atol=3e-2)
    for name, a, b in (("output", py, ty), ("h_n", ph, th), ("c_n", pc, tc)):
        assert a.device.type == device and a.dtype == pd, name
        assert_matches(a, b, what=f"LSTM {name} [{device} {dtype}]", **tol)
    g = values(rng, *ty.shape, low=-1, high=1, dtype=dtype)
    (py * pf.tensor(g).to(pd).to(device)).sum().add(pc.sum()).backward()
    (ty * torch.from_numpy(np.array(g)).to(td)).sum().add(tc.sum()).backward()
    assert_matches(px.grad, tx.grad, what=f"LSTM input grad [{device} {dtype}]", **tol)
    for (k, p), t in zip(pmod.named_parameters(), tmod.parameters()):
        assert p.grad.device.type == device
        assert_matches(p.grad, t.grad, what=f"LSTM {k}.grad [{device} {dtype}]", **tol)
    pcell, tcell = pair(nn.LSTMCell, tnn.LSTMCell, 4, 6, rng=rng)
    pcell.to(device)
    xc = values(rng, 3, 4, low=-1, high=1)
    (ph1, pc1), (th1, tc1) = pcell(pf.tensor(xc).to(device)), tcell(torch.from_numpy(np.array(xc)))
    assert ph1.device.type == device
    assert_matches(ph1, th1, rtol=1e-5, atol=1e-5, what=f"LSTMCell h [{device}]")
    assert_matches(pc1, tc1, rtol=1e-5, atol=1e-5, what=f"LSTMCell c [{device}]")


def test_recurrent_init_and_errors(device):
    pf.manual_seed(2)
    m = nn.LSTM(3, 16, num_layers=2, bidirectional=True, proj_size=4)
    t = tnn.LSTM(3, 16, num_layers=2, bidirectional=True, proj_size=4)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
    w = np.concatenate([pf_to_numpy(p).ravel() for p in m.parameters()])
    assert np.abs(w).max() <= 0.25 and np.abs(w).max() > 0.24  # U(-1/sqrt(H), 1/sqrt(H))
    assert len(m.all_weights) == 4 and len(m.all_weights[0]) == 5
    raises(ValueError, lambda: nn.GRU(3, 4, proj_size=2), "only supported for LSTM")
    raises(ValueError, lambda: nn.LSTM(3, 4, proj_size=4), "smaller than hidden_size")
    raises(ValueError, lambda: nn.LSTM(3, 4, dropout=1.5), "dropout")
    raises(ValueError, lambda: nn.RNN(3, 4, nonlinearity="sigmoid"), "Unknown nonlinearity")
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.2)
    g = nn.GRU(3, 4)
    raises(ValueError, lambda: g(pf.randn(5, 2, 2)), "input_size")
    raises(ValueError, lambda: g(pf.randn(5, 2, 3), pf.randn(1, 3, 4)), "Expected hidden size")
    raises(ValueError, lambda: g(pf.randn(1, 5, 2, 3)), "2D or 3D")


def test_recurrent_dropout_between_layers(device, rng):
    pf.manual_seed(3)
    m = nn.LSTM(4, 8, num_layers=2, dropout=0.5)
    x = pf.tensor(values(rng, 5, 2, 4))
    a, _ = m(x)
    b, _ = m(x)
    assert not np.allclose(pf_to_numpy(a), pf_to_numpy(b))  # fresh masks in training
    m.eval()
    c, _ = m(x)
    d, _ = m(x)
    np.testing.assert_array_equal(pf_to_numpy(c), pf_to_numpy(d))


@pytest.mark.parametrize("name,kwargs", [("LSTMCell", {}), ("GRUCell", {}), ("RNNCell", {}),
                                         ("RNNCell", {"nonlinearity": "relu", "bias": False}),
                                         ("GRUCell", {"bias": False})])
def test_cells(name, kwargs, device, rng):
    pmod, tmod = pair(getattr(nn, name), getattr(tnn, name), 4, 6, rng=rng, **kwargs)
    assert repr(pmod) == repr(tmod)
    x = values(rng, 3, 4)
    compare_module(pmod, tmod, [x], rng=rng)
    pmod.zero_grad()
    tmod.zero_grad()
    if name == "LSTMCell":
        compare(lambda x, h, c: pmod(x, (h, c)), lambda x, h, c: tmod(x, (h, c)),
                [x, values(rng, 3, 6), values(rng, 3, 6)], rng=rng, pmod=pmod, tmod=tmod)
    else:
        compare_module(pmod, tmod, [x, values(rng, 3, 6)], rng=rng)
    pmod.zero_grad()
    tmod.zero_grad()
    compare_module(pmod, tmod, [values(rng, 4)], rng=rng, what="unbatched")


# ----------------------------------------------------------------- init


def test_trunc_normal(device):
    pf.manual_seed(4)
    for mean, std, a, b in ((0.0, 1.0, -2.0, 2.0), (1.0, 2.0, -1.0, 4.0), (0.0, 0.02, -0.04, 0.04),
                            (0.5, 1.0, 0.0, 10.0)):
        t = nn.init.trunc_normal_(pf.empty(400000), mean, std, a, b)
        v = pf_to_numpy(t).astype(np.float64)
        assert v.min() >= a and v.max() <= b
        # moments of the truncated normal
        alpha, beta = (a - mean) / std, (b - mean) / std
        phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
        cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
        Z = cdf(beta) - cdf(alpha)
        m = mean + std * (phi(alpha) - phi(beta)) / Z
        var = std ** 2 * (1 + (alpha * phi(alpha) - beta * phi(beta)) / Z - ((phi(alpha) - phi(beta)) / Z) ** 2)
        assert abs(v.mean() - m) < 0.01 * std and abs(v.std() - math.sqrt(var)) < 0.01 * std
    pf.manual_seed(5)
    x = nn.init.trunc_normal_(pf.empty(3, 4))
    pf.manual_seed(5)
    y = nn.init.trunc_normal_(pf.empty(3, 4))
    np.testing.assert_array_equal(pf_to_numpy(x), pf_to_numpy(y))


def test_erfinv_helper_matches_torch(device):
    u = np.linspace(-0.999999, 0.999999, 2001)
    got = pf_to_numpy(nn.init._erfinv(pf.tensor(u)))
    np.testing.assert_allclose(got, torch.erfinv(torch.from_numpy(u)).detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,gain", [((6, 4), 1.0), ((3, 8), 2.0), ((4, 2, 3), 0.5), ((5, 5), 1.0)])
def test_orthogonal(shape, gain, device):
    pf.manual_seed(6)
    t = nn.init.orthogonal_(pf.empty(*shape), gain=gain)
    q = pf_to_numpy(t).reshape(shape[0], -1).astype(np.float64)
    small = q.T @ q if q.shape[0] >= q.shape[1] else q @ q.T
    np.testing.assert_allclose(small, gain ** 2 * np.eye(small.shape[0]), atol=1e-5)
    raises(ValueError, lambda: nn.init.orthogonal_(pf.empty(3)), "2 or more dimensions")


def test_deepcopy_and_pickle_keep_compiled_activations(device, rng):
    import copy
    import pickle

    layer = nn.TransformerEncoderLayer(8, 2, 16, activation="gelu").eval()
    x = pf.tensor(values(rng, 4, 2, 8))
    for clone in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        assert clone.activation is F.gelu and clone.activation_relu_or_gelu == 2
        np.testing.assert_allclose(pf_to_numpy(clone(x)), pf_to_numpy(layer(x)), rtol=1e-6, atol=1e-6)
    assert pickle.loads(pickle.dumps(pf.relu)) is pf.relu


def test_multihead_attention_fully_masked_rows(device, rng):
    """A query that may attend to nothing: NaN with need_weights=True, zeros (then out_proj) without, as torch."""
    pmod, tmod = pair(nn.MultiheadAttention, tnn.MultiheadAttention, 4, 2, rng=rng)
    x = values(rng, 3, 2, 4)
    m = np.zeros((3, 3), dtype=bool)
    m[1] = True
    for need_weights in (True, False):
        with torch.no_grad():
            t_out = tmod(*[torch.from_numpy(x)] * 3, attn_mask=torch.from_numpy(m), need_weights=need_weights)[0]
        p_out = pmod(*[pf.tensor(x)] * 3, attn_mask=pf.tensor(m), need_weights=need_weights)[0]
        assert np.isnan(t_out.detach().numpy()[1]).all() == need_weights
        close(p_out, t_out, 1e-5, 1e-6, f"need_weights={need_weights}")
