"""pyflame.nn additions of issue 13, second part, against torch.nn: softmin/threshold, in-place activations and
their autograd, integer-input errors, feature dropout, the margin/NLL losses, Bilinear, InstanceNorm, pixel
shuffle, fold/unfold, ConvTranspose1d/3d, max pooling indices and unpooling, affine_grid/grid_sample, nn.init
and nn.utils additions.

Modules are built in both libraries with the same weights; outputs and gradients are compared on fresh random
inputs, on each device ('rocm' skips without a GPU).
"""

import math
import warnings

import numpy as np
import pytest
import torch

import pyflame as pf
import pyflame.nn as nn
import pyflame.nn.functional as F
from op_registry import pf_to_numpy
from test_nn_api import NORM_REPR_HAS_BIAS, Const, close, compare, compare_module, pair, raises, values  # noqa: F401

tnn = torch.nn
TF = torch.nn.functional


# ----------------------------------------------------------------- activations


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmin(dim, device, rng):
    x = values(rng, 3, 4, 5)
    compare(lambda t: F.softmin(t, dim), lambda t: TF.softmin(t, dim), [x], rng=rng)
    compare(nn.Softmin(dim), tnn.Softmin(dim), [x], rng=rng)
    assert repr(nn.Softmin(dim)) == repr(tnn.Softmin(dim))
    with pytest.warns(UserWarning, match="Implicit dimension"):
        out = F.softmin(pf.tensor(x))
    close(out, TF.softmin(torch.from_numpy(x), 0), 1e-5, 1e-6, "softmin legacy dim")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_threshold(dtype, device, rng):
    x = values(rng, 4, 6, low=-3, high=3, dtype=dtype)
    for thr, val in ((0.5, -2.0), (-1.0, 7.0)):
        if dtype == "int64":
            thr, val = int(thr), int(val)
        compare(lambda t: F.threshold(t, thr, val), lambda t: TF.threshold(t, thr, val), [x], rng=rng)
        compare(nn.Threshold(thr, val), tnn.Threshold(thr, val), [x], rng=rng)
        assert repr(nn.Threshold(thr, val, True)) == repr(tnn.Threshold(thr, val, True))
        p, t = pf.tensor(x), torch.from_numpy(x.copy())
        assert F.threshold(p, thr, val, inplace=True) is p
        TF.threshold(t, thr, val, inplace=True)
        close(p, t, 0, 0, "threshold inplace")
        assert p.dtype == pf.tensor(x).dtype


FLOAT_ONLY = ["gelu", "silu", "elu", "selu", "celu", "leaky_relu", "softplus", "mish", "hardswish", "hardsigmoid",
              "logsigmoid"]
INT_OK = ["relu", "relu6", "hardtanh"]


@pytest.mark.parametrize("name", FLOAT_ONLY + INT_OK)
def test_integer_inputs(name, device):
    """torch raises NotImplementedError for these activations on integer tensors, except relu, relu6 and
    hardtanh (and threshold), which keep the integer dtype."""
    v = np.array([[-3, 0, 2], [5, -1, 7]], dtype=np.int64)
    try:
        expected = getattr(TF, name)(torch.from_numpy(v))
    except NotImplementedError:
        expected = None
    assert (expected is None) == (name in FLOAT_ONLY)
    if expected is None:
        raises(NotImplementedError, lambda: getattr(F, name)(pf.tensor(v)), "not implemented")
        raises(TypeError, lambda: getattr(F, name)(pf.tensor(v)))  # PyFlame's dtype errors are TypeErrors
    else:
        out = getattr(F, name)(pf.tensor(v))
        assert out.dtype == pf.int64
        np.testing.assert_array_equal(pf_to_numpy(out), expected.detach().numpy())
    raises(NotImplementedError, lambda: F.softmin(pf.tensor(v), 1))
    raises(NotImplementedError, lambda: nn.GELU()(pf.tensor(v)))


INPLACE = [("relu", {}), ("relu6", {}), ("leaky_relu", {"negative_slope": 0.2}), ("elu", {"alpha": 0.7}),
           ("selu", {}), ("celu", {"alpha": 1.3}), ("hardtanh", {"min_val": -0.5, "max_val": 1.5}), ("silu", {}),
           ("mish", {}), ("hardswish", {}), ("hardsigmoid", {}), ("threshold", {"threshold": 0.3, "value": -1.0})]


@pytest.mark.parametrize("name,kwargs", INPLACE, ids=[n for n, _ in INPLACE])
def test_functional_inplace(name, kwargs, device, rng):
    """inplace=True writes the result into the input and returns it; gradients through it are the out-of-place
    ones (as torch's); on a leaf that requires grad it raises, as in torch."""
    v = values(rng, 4, 5, low=-4, high=4)
    x = pf.tensor(v, requires_grad=True)
    xt = torch.tensor(v, requires_grad=True)
    y, yt = x * 1.5, xt * 1.5
    out = getattr(F, name)(y, inplace=True, **kwargs)
    outt = getattr(TF, name)(yt, inplace=True, **kwargs)
    assert out is y
    close(y, outt, 1e-5, 1e-6, name)
    g = values(rng, 4, 5)
    (out * out * pf.tensor(g)).sum().backward()
    (outt * outt * torch.from_numpy(g)).sum().backward()
    close(x.grad, xt.grad, 1e-4, 1e-5, f"{name} grad")
    leaf = pf.tensor(v, requires_grad=True)
    raises(RuntimeError, lambda: getattr(F, name)(leaf, inplace=True, **kwargs), "leaf")
    np.testing.assert_array_equal(pf_to_numpy(leaf.detach()), v)  # nothing written
    with pf.no_grad():
        assert getattr(F, name)(leaf, inplace=True, **kwargs) is leaf
    close(leaf.detach(), getattr(TF, name)(torch.from_numpy(v), **kwargs), 1e-5, 1e-6, f"{name} no_grad")


@pytest.mark.parametrize("name,args", [("ReLU", ()), ("LeakyReLU", (0.3,)), ("SiLU", ()), ("Threshold", (0.1, 2.0)),
                                       ("ReLU6", ()), ("ELU", (0.5,)), ("Hardswish", ()), ("SELU", ())])
def test_module_inplace(name, args, device, rng):
    v = values(rng, 3, 4, low=-3, high=3)
    pmod, tmod = getattr(nn, name)(*args, inplace=True), getattr(tnn, name)(*args, inplace=True)
    assert repr(pmod) == repr(tmod)
    x = pf.tensor(v, requires_grad=True)
    xt = torch.tensor(v, requires_grad=True)
    y, yt = x + 0.0, xt + 0.0
    assert pmod(y) is y
    tmod(yt)
    close(y, yt, 1e-5, 1e-6, name)
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    close(x.grad, xt.grad, 1e-4, 1e-5, f"{name} grad")
    raises(RuntimeError, lambda: pmod(pf.tensor(v, requires_grad=True)), "leaf")


# ----------------------------------------------------------------- dropout


@pytest.mark.parametrize("name,shape", [("dropout1d", (4, 6, 50)), ("dropout1d", (16, 50)), ("dropout2d", (3, 5, 6, 7)),
                                        ("dropout3d", (2, 8, 3, 4, 5)), ("dropout3d", (16, 3, 4, 5))])
def test_feature_dropout(name, shape, device, rng):
    v = values(rng, *shape, low=0.5, high=2.0)
    p = 0.4
    x = pf.tensor(v, requires_grad=True)
    out = getattr(F, name)(x, p, True)
    got = pf_to_numpy(out)
    # every channel of every sample is either all zero or all scaled by 1/(1-p)
    lead = 2 if len(shape) == {"dropout1d": 3, "dropout2d": 4, "dropout3d": 5}[name] else 1
    ratio = (got / v).reshape(int(np.prod(shape[:lead])), -1)
    kept = np.all(np.isclose(ratio, 1 / (1 - p), rtol=1e-5), axis=1)
    dropped = np.all(ratio == 0, axis=1)
    assert np.all(kept | dropped)
    assert kept.any() and dropped.any()
    out.sum().backward()
    np.testing.assert_allclose(pf_to_numpy(x.grad), got / v, rtol=1e-5)
    # eval, p=0 and p=1, as torch
    x2 = pf.tensor(v)
    assert getattr(F, name)(x2, p, False) is x2
    np.testing.assert_array_equal(pf_to_numpy(getattr(F, name)(x2, 1.0, True)), np.zeros(shape, np.float32))
    np.testing.assert_array_equal(pf_to_numpy(getattr(F, name)(x2, 0.0, True)), v)
    raises(ValueError, lambda: getattr(F, name)(x2, 1.5), "between 0 and 1")
    # in place: into the input
    y = pf.tensor(v)
    assert getattr(F, name)(y, p, True, inplace=True) is y
    r = (pf_to_numpy(y) / v).reshape(int(np.prod(shape[:lead])), -1)
    assert np.all(np.all(np.isclose(r, 1 / (1 - p), rtol=1e-5), axis=1) | np.all(r == 0, axis=1))
    raises(RuntimeError, lambda: getattr(F, name)(pf.tensor(v, requires_grad=True), p, True, True), "leaf")
    cls = name.replace("dropout", "Dropout")
    pmod, tmod = getattr(nn, cls)(0.3, inplace=True), getattr(tnn, cls)(0.3, inplace=True)
    assert repr(pmod) == repr(tmod)
    pmod.eval()
    assert pmod(x2) is x2


def test_dropout_errors_and_warnings(device):
    raises(ValueError, lambda: F.dropout1d(pf.randn(2, 3, 4, 5)), "2D or 3D")
    with pytest.warns(UserWarning, match="3D input to dropout2d"):
        F.dropout2d(pf.randn(2, 3, 4))
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        F.dropout2d(pf.randn(2, 3))
    raises(RuntimeError, lambda: F.dropout(pf.randn(3, requires_grad=True), 0.5, True, True), "leaf")
    x = pf.randn(100, 10) + 5.0
    assert nn.Dropout(0.5, inplace=True)(x) is x
    zeros = float((x == 0).to(pf.float32).mean())
    assert 0.35 < zeros < 0.65


# ----------------------------------------------------------------- losses


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_and_hinge(reduction, device, rng):
    a, b = values(rng, 7), values(rng, 7)
    sign = np.where(values(rng, 7) > 0, 1.0, -1.0).astype(np.float32)
    for margin in (0.0, 0.5):
        compare(lambda x, y: F.margin_ranking_loss(x, y, pf.tensor(sign), margin, reduction=reduction),
                lambda x, y: TF.margin_ranking_loss(x, y, torch.from_numpy(sign), margin, reduction=reduction),
                [a, b], rng=rng)
        compare(nn.MarginRankingLoss(margin, reduction=reduction), tnn.MarginRankingLoss(margin, reduction=reduction),
                [a, b, Const(sign)], rng=rng)
        x = values(rng, 4, 5)
        t = np.where(values(rng, 4, 5) > 0, 1.0, -1.0).astype(np.float32)
        compare(nn.HingeEmbeddingLoss(margin + 0.5, reduction=reduction),
                tnn.HingeEmbeddingLoss(margin + 0.5, reduction=reduction), [x, Const(t)], rng=rng)
    assert repr(nn.MarginRankingLoss()) == repr(tnn.MarginRankingLoss())


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p,swap", [(2.0, False), (1.0, True), (3.0, False)])
def test_triplet_margin_loss(reduction, p, swap, device, rng):
    for shape in ((6, 5), (5,)):
        args = [values(rng, *shape) for _ in range(3)]
        compare(nn.TripletMarginLoss(0.7, p, swap=swap, reduction=reduction),
                tnn.TripletMarginLoss(0.7, p, swap=swap, reduction=reduction), args, rng=rng)
    raises(ValueError, lambda: F.triplet_margin_loss(pf.randn(3, 4), pf.randn(3, 4), pf.randn(4)), "dimensions")
    raises(ValueError, lambda: nn.TripletMarginLoss(margin=0.0), "margin")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll_loss(reduction, full, device, rng):
    x, y = values(rng, 5, 4), values(rng, 5, 4)
    for var_shape in ((5, 4), (5, 1), (5,)):
        var = values(rng, *var_shape, low=0.0, high=2.0)
        var.flat[0] = 1e-9  # clamped to eps; the gradient still flows (torch's no_grad clamp)
        compare(nn.GaussianNLLLoss(full=full, eps=1e-3, reduction=reduction),
                tnn.GaussianNLLLoss(full=full, eps=1e-3, reduction=reduction), [x, y, var], rng=rng)
    compare(lambda a, b: F.gaussian_nll_loss(a, b, 0.5, full=full, reduction=reduction),
            lambda a, b: TF.gaussian_nll_loss(a, b, 0.5, full=full, reduction=reduction), [x, y], rng=rng)
    raises(ValueError, lambda: F.gaussian_nll_loss(pf.randn(5, 4), pf.randn(5, 4), pf.ones(3)), "incorrect size")
    raises(ValueError, lambda: F.gaussian_nll_loss(pf.randn(5, 4), pf.randn(5, 4), -pf.ones(5, 4)), "negative")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (True, True), (False, False), (False, True)])
def test_poisson_nll_loss(reduction, log_input, full, device, rng):
    x = values(rng, 4, 6, low=-2, high=2) if log_input else values(rng, 4, 6, low=0.1, high=4)
    target = np.floor(values(rng, 4, 6, low=0, high=5))
    compare(nn.PoissonNLLLoss(log_input, full, reduction=reduction),
            tnn.PoissonNLLLoss(log_input, full, reduction=reduction), [x, Const(target)], rng=rng)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_soft_margin_and_multi_margin(reduction, device, rng):
    x = values(rng, 5, 4)
    t = (values(rng, 5, 4) > 0).astype(np.float32)
    w = values(rng, 4, low=0.2, high=2.0)
    compare(nn.MultiLabelSoftMarginLoss(reduction=reduction), tnn.MultiLabelSoftMarginLoss(reduction=reduction),
            [x, Const(t)], rng=rng)
    pmod = nn.MultiLabelSoftMarginLoss(pf.tensor(w), reduction=reduction)
    tmod = tnn.MultiLabelSoftMarginLoss(torch.from_numpy(w), reduction=reduction)
    assert list(pmod.state_dict()) == list(tmod.state_dict())
    compare(pmod, tmod, [x, Const(t)], rng=rng)
    cls = np.array([0, 3, 2, 1, 3])
    for p, margin, weight in ((1, 1.0, None), (2, 0.5, w), (1, 2.0, w)):
        pmod = nn.MultiMarginLoss(p, margin, None if weight is None else pf.tensor(weight), reduction=reduction)
        tmod = tnn.MultiMarginLoss(p, margin, None if weight is None else torch.from_numpy(weight),
                                   reduction=reduction)
        compare(pmod, tmod, [x, Const(cls)], rng=rng)
    compare(lambda a: F.multi_margin_loss(a, pf.tensor(2), reduction=reduction),
            lambda a: TF.multi_margin_loss(a, torch.tensor(2), reduction=reduction), [values(rng, 4)], rng=rng)
    raises(ValueError, lambda: nn.MultiMarginLoss(p=3), "p == 1 and p == 2")


def test_loss_legacy_arguments(device, rng):
    x, y = values(rng, 6), values(rng, 6)
    sign = np.where(values(rng, 6) > 0, 1.0, -1.0).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pmod, tmod = nn.MarginRankingLoss(size_average=False), tnn.MarginRankingLoss(size_average=False)
    assert pmod.reduction == tmod.reduction == "sum"
    compare(pmod, tmod, [x, y, Const(sign)], rng=rng)


# ----------------------------------------------------------------- layers


@pytest.mark.parametrize("bias", [True, False])
def test_bilinear(bias, device, rng):
    pmod, tmod = pair(nn.Bilinear, tnn.Bilinear, 3, 5, 4, bias=bias, rng=rng)
    assert repr(pmod) == repr(tmod)
    for lead in ((6,), (2, 3), ()):
        compare_module(pmod, tmod, [values(rng, *lead, 3), values(rng, *lead, 5)], rng=rng)
    fresh = nn.Bilinear(3, 5, 4)
    bound = 1 / math.sqrt(3)
    w = pf_to_numpy(fresh.weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2


@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (3, 4, 7)), ("InstanceNorm2d", (2, 4, 5, 6)),
                                       ("InstanceNorm3d", (2, 4, 3, 4, 5)), ("InstanceNorm2d", (4, 5, 6))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, False), (True, True), (False, True)])
def test_instance_norm(cls, shape, affine, track, device, rng):
    pmod, tmod = pair(getattr(nn, cls), getattr(tnn, cls), 4, affine=affine, track_running_stats=track,
                      momentum=0.2, rng=rng)
    if NORM_REPR_HAS_BIAS:
        assert repr(pmod) == repr(tmod)
    assert list(pmod.state_dict()) == list(tmod.state_dict())
    for _ in range(2):
        compare_module(pmod, tmod, [values(rng, *shape)], rng=rng)
    for (k, p), (_, t) in zip(pmod.state_dict().items(), tmod.state_dict().items()):
        close(p, t, 1e-5, 1e-6, f"{cls} {k} after training steps")
    pmod.eval()
    tmod.eval()
    compare_module(pmod, tmod, [values(rng, *shape)], rng=rng)


def test_instance_norm_functional(device, rng):
    x = values(rng, 2, 3, 6)
    w, b = values(rng, 3), values(rng, 3)
    compare(lambda t, ww, bb: F.instance_norm(t, weight=ww, bias=bb, eps=1e-3),
            lambda t, ww, bb: TF.instance_norm(t, weight=ww, bias=bb, eps=1e-3), [x, w, b], rng=rng)
    raises(ValueError, lambda: F.instance_norm(pf.randn(2, 3, 1)), "more than 1 spatial element")
    raises(ValueError, lambda: nn.InstanceNorm1d(5, affine=True)(pf.randn(2, 3, 6)), "num_features")


@pytest.mark.parametrize("shape,r", [((2, 8, 3, 5), 2), ((9, 2, 4), 3), ((2, 3, 18, 2, 2), 3)])
def test_pixel_shuffle(shape, r, device, rng):
    x = values(rng, *shape)
    compare(nn.PixelShuffle(r), tnn.PixelShuffle(r), [x], rng=rng)
    up = TF.pixel_shuffle(torch.from_numpy(x), r).detach().numpy()
    compare(nn.PixelUnshuffle(r), tnn.PixelUnshuffle(r), [up], rng=rng)
    assert repr(nn.PixelShuffle(r)) == repr(tnn.PixelShuffle(r))
    assert repr(nn.PixelUnshuffle(r)) == repr(tnn.PixelUnshuffle(r))
    raises(ValueError, lambda: F.pixel_shuffle(pf.randn(2, 5, 3, 3), 2), "divisible")
    raises(ValueError, lambda: F.pixel_unshuffle(pf.randn(2, 5, 3, 4), 2), "divisible")


FOLDS = [dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
         dict(kernel_size=3, padding=(0, 2), stride=2), dict(kernel_size=(3, 1), dilation=2, stride=(1, 3))]


@pytest.mark.parametrize("kw", FOLDS, ids=[str(i) for i in range(len(FOLDS))])
def test_unfold_fold(kw, device, rng):
    for shape in ((2, 3, 7, 8), (3, 6, 9)):
        x = values(rng, *shape)
        compare(nn.Unfold(**kw), tnn.Unfold(**kw), [x], rng=rng)
        cols = TF.unfold(torch.from_numpy(x), **kw)
        compare(nn.Fold(shape[-2:], **kw), tnn.Fold(shape[-2:], **kw), [values(rng, *cols.shape)], rng=rng)
    assert repr(nn.Unfold(**kw)) == repr(tnn.Unfold(**kw))
    assert repr(nn.Fold((7, 8), **kw)) == repr(tnn.Fold((7, 8), **kw))


def test_fold_errors(device):
    raises(ValueError, lambda: F.fold(pf.randn(1, 12, 5), (4, 4), 2), "sliding blocks")
    raises(ValueError, lambda: F.fold(pf.randn(1, 10, 9), (4, 4), 2), "divisible")
    raises(NotImplementedError, lambda: F.unfold(pf.randn(2, 3), 2), "3D or 4D")


@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=1, output_padding=1), dict(groups=2, dilation=2),
                                dict(stride=3, padding=2, groups=2, bias=False)])
def test_conv_transpose1d(kw, device, rng):
    pmod, tmod = pair(nn.ConvTranspose1d, tnn.ConvTranspose1d, 4, 6, 3, rng=rng, **kw)
    assert repr(pmod) == repr(tmod)
    compare_module(pmod, tmod, [values(rng, 2, 4, 7)], rng=rng)
    compare_module(pmod, tmod, [values(rng, 4, 5)], rng=rng)


def test_conv_transpose1d_output_size(device, rng):
    pmod, tmod = pair(nn.ConvTranspose1d, tnn.ConvTranspose1d, 2, 3, 3, stride=3, rng=rng)
    x = values(rng, 1, 2, 5)
    for size in ([15], [17]):
        compare(lambda t: pmod(t, output_size=size), lambda t: tmod(t, output_size=size), [x], rng=rng)
    raises(ValueError, lambda: pmod(pf.tensor(x), output_size=[20]), "output size")


@pytest.mark.parametrize("kw", [dict(), dict(stride=(2, 1, 3), padding=(1, 0, 2), output_padding=(1, 0, 1)),
                                dict(groups=2, dilation=(1, 2, 1)), dict(stride=2, padding=1, bias=False),
                                dict(stride=2, padding=(2, 1, 2))])
def test_conv_transpose3d(kw, device, rng):
    pmod, tmod = pair(nn.ConvTranspose3d, tnn.ConvTranspose3d, 4, 6, (2, 3, 3), rng=rng, **kw)
    assert repr(pmod) == repr(tmod)
    compare_module(pmod, tmod, [values(rng, 2, 4, 3, 4, 5)], rng=rng, rtol=1e-4, atol=1e-4)
    compare_module(pmod, tmod, [values(rng, 4, 3, 3, 4)], rng=rng, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------- max pooling with indices, unpooling


POOLS = [(1, (2, 3, 11), dict(kernel_size=3, stride=2, padding=1)),
         (1, (3, 10), dict(kernel_size=2, dilation=3, ceil_mode=True)),
         (2, (2, 3, 7, 8), dict(kernel_size=3, stride=2, padding=1)),
         (2, (2, 3, 7, 8), dict(kernel_size=(2, 3), stride=2, padding=(1, 0), dilation=(1, 2), ceil_mode=True)),
         (2, (3, 6, 6), dict(kernel_size=2)),
         (3, (2, 2, 5, 6, 7), dict(kernel_size=2, stride=(1, 2, 2), padding=1)),
         (3, (2, 4, 5, 6), dict(kernel_size=(3, 2, 2), ceil_mode=True))]


@pytest.mark.parametrize("nd,shape,kw", POOLS, ids=[str(i) for i in range(len(POOLS))])
def test_max_pool_return_indices(nd, shape, kw, device, rng):
    x = values(rng, *shape)
    fn = f"max_pool{nd}d"
    pout, tout = compare(lambda t: getattr(F, fn)(t, return_indices=True, **kw),
                         lambda t: getattr(TF, fn)(t, return_indices=True, **kw), [x], rng=rng)
    assert pout[1].dtype == pf.int64
    pmod = getattr(nn, f"MaxPool{nd}d")(return_indices=True, **kw)
    tmod = getattr(tnn, f"MaxPool{nd}d")(return_indices=True, **kw)
    assert repr(pmod) == repr(tmod)
    compare(pmod, tmod, [x], rng=rng)
    # unpooling puts each maximum back where it came from
    if "dilation" not in kw and not kw.get("ceil_mode"):
        un = f"max_unpool{nd}d"
        ukw = {k: kw[k] for k in ("kernel_size", "stride", "padding") if k in kw}
        idx = tout[1]
        compare(lambda t: getattr(F, un)(t, pf.tensor(idx.detach().numpy()), output_size=shape[-nd:], **ukw),
                lambda t: getattr(TF, un)(t, idx, output_size=shape[-nd:], **ukw), [tout[0].detach().numpy()],
                rng=rng)


@pytest.mark.parametrize("nd,shape,out", [(2, (2, 3, 8, 6), (4, 3)), (2, (2, 3, 7, 9), (3, 4)), (2, (3, 10, 5), 4),
                                          (2, (2, 2, 5, 7), (None, 3)), (1, (2, 3, 10), 4), (1, (3, 7), 5)])
def test_adaptive_max_pool_return_indices(nd, shape, out, device, rng):
    x = values(rng, *shape)
    pout, _ = compare(lambda t: getattr(F, f"adaptive_max_pool{nd}d")(t, out, return_indices=True),
                      lambda t: getattr(TF, f"adaptive_max_pool{nd}d")(t, out, return_indices=True), [x], rng=rng)
    assert pout[1].dtype == pf.int64
    pmod = getattr(nn, f"AdaptiveMaxPool{nd}d")(out, return_indices=True)
    tmod = getattr(tnn, f"AdaptiveMaxPool{nd}d")(out, return_indices=True)
    assert repr(pmod) == repr(tmod)
    compare(pmod, tmod, [x], rng=rng)


@pytest.mark.parametrize("shape,output_size", [((2, 3, 8, 10), None), ((2, 3, 9, 11), (9, 11)),
                                               ((3, 9, 11), (9, 11)), ((1, 3, 9, 11), (1, 3, 9, 11))])
def test_max_unpool2d(shape, output_size, device, rng):
    x = values(rng, *shape)
    t_vals, t_idx = TF.max_pool2d(torch.from_numpy(x), 2, return_indices=True)
    pmod, tmod = nn.MaxUnpool2d(2), tnn.MaxUnpool2d(2)
    assert repr(pmod) == repr(tmod)
    compare(lambda v: pmod(v, pf.tensor(t_idx.detach().numpy()), output_size),
            lambda v: tmod(v, t_idx, output_size), [t_vals.detach().numpy()], rng=rng)
    raises(ValueError, lambda: F.max_unpool2d(pf.tensor(t_vals.detach().numpy()), pf.tensor(t_idx.detach().numpy()), 2,
                                              output_size=(12, 12)), "output_size")


# ----------------------------------------------------------------- spatial transformers


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid(align_corners, device, rng):
    compare(lambda th: F.affine_grid(th, (2, 3, 5, 4), align_corners=align_corners),
            lambda th: TF.affine_grid(th, (2, 3, 5, 4), align_corners=align_corners), [values(rng, 2, 2, 3)], rng=rng)
    compare(lambda th: F.affine_grid(th, (2, 1, 3, 5, 4), align_corners=align_corners),
            lambda th: TF.affine_grid(th, (2, 1, 3, 5, 4), align_corners=align_corners), [values(rng, 2, 3, 4)],
            rng=rng)
    raises(NotImplementedError, lambda: F.affine_grid(pf.randn(2, 2, 3), (2, 3, 4), align_corners), "4D and 5D")
    raises(ValueError, lambda: F.affine_grid(pf.randn(2, 3, 3), (2, 3, 4, 5), align_corners), "affine matrices")


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample(mode, padding_mode, align_corners, device, rng):
    x = values(rng, 2, 3, 5, 6)
    # some positions outside the input (reflected more than once with 'reflection')
    bound = 3.5 if padding_mode == "reflection" else 1.3
    grid = values(rng, 2, 4, 7, 2, low=-bound, high=bound)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    if mode == "bilinear":
        compare(lambda a, g: F.grid_sample(a, g, **kw), lambda a, g: TF.grid_sample(a, g, **kw), [x, grid], rng=rng)
    else:  # no gradient for the grid (torch's is zero)
        g_pf, g_t = pf.tensor(grid), torch.from_numpy(grid)
        compare(lambda a: F.grid_sample(a, g_pf, **kw), lambda a: TF.grid_sample(a, g_t, **kw), [x], rng=rng)
    # affine_grid + grid_sample, a spatial transformer
    theta = values(rng, 2, 2, 3, low=-1, high=1)
    compare(lambda a, th: F.grid_sample(a, F.affine_grid(th, (2, 3, 4, 5), align_corners), **kw),
            lambda a, th: TF.grid_sample(a, TF.affine_grid(th, (2, 3, 4, 5), align_corners), **kw),
            [x, theta] if mode == "bilinear" else [x, Const(theta)], rng=rng)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_3d(mode, padding_mode, align_corners, device, rng):
    x = values(rng, 2, 3, 4, 5, 3)
    bound = 3.5 if padding_mode == "reflection" else 1.3
    grid = values(rng, 2, 3, 2, 4, 3, low=-bound, high=bound)
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    args = [x, grid] if mode == "bilinear" else [x, Const(grid)]
    compare(lambda a, g: F.grid_sample(a, g, **kw), lambda a, g: TF.grid_sample(a, g, **kw), args, rng=rng)
    theta = values(rng, 2, 3, 4, low=-1, high=1)
    compare(lambda a, th: F.grid_sample(a, F.affine_grid(th, (2, 3, 3, 4, 2), align_corners), **kw),
            lambda a, th: TF.grid_sample(a, TF.affine_grid(th, (2, 3, 3, 4, 2), align_corners), **kw),
            [x, theta] if mode == "bilinear" else [x, Const(theta)], rng=rng)


def test_grid_sample_unsupported(device):
    x, g = pf.randn(1, 2, 4, 4), pf.randn(1, 3, 3, 2)
    raises(pf.NotSupportedError, lambda: F.grid_sample(x, g, mode="bicubic", align_corners=False), "bilinear")
    raises(ValueError, lambda: F.grid_sample(pf.randn(1, 2, 3, 4, 4), pf.randn(1, 3, 3, 2), align_corners=False),
           "5-D")
    raises(ValueError, lambda: F.grid_sample(x, g, mode="cubic", align_corners=False), "mode")
    with pytest.warns(UserWarning, match="align_corners=False"):
        F.grid_sample(x, g)


# ----------------------------------------------------------------- nn.init, nn.utils


def test_init_eye_dirac(device):
    w = pf.empty(3, 5)
    assert nn.init.eye_(w) is w
    np.testing.assert_array_equal(pf_to_numpy(w), torch.nn.init.eye_(torch.empty(3, 5)).detach().numpy())
    for shape, groups in (((4, 2, 3), 1), ((6, 4, 3, 3), 2), ((4, 6, 3, 2, 5), 2), ((2, 5, 3), 1)):
        w = pf.randn(*shape)
        assert nn.init.dirac_(w, groups) is w
        np.testing.assert_array_equal(pf_to_numpy(w), torch.nn.init.dirac_(torch.empty(*shape), groups).detach().numpy())
    raises(ValueError, lambda: nn.init.eye_(pf.empty(2, 2, 2)), "2 dimensions")
    raises(ValueError, lambda: nn.init.dirac_(pf.empty(2, 2)), "3, 4, or 5")
    raises(ValueError, lambda: nn.init.dirac_(pf.empty(3, 2, 3), 2), "divisible")
    p = nn.Parameter(pf.randn(3, 3))
    nn.init.eye_(p)  # under no_grad: a parameter can be initialised
    assert p.requires_grad


def test_parameters_vector(device, rng):
    tmod = tnn.Sequential(tnn.Linear(3, 4), tnn.Linear(4, 2))
    pmod = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    pmod.load_state_dict({k: pf.tensor(v.detach().numpy()) for k, v in tmod.state_dict().items()})
    pv = nn.utils.parameters_to_vector(pmod.parameters())
    tv = torch.nn.utils.parameters_to_vector(tmod.parameters())
    close(pv, tv, 0, 0, "parameters_to_vector")
    g = values(rng, *tv.shape)
    (pv * pf.tensor(g)).sum().backward()
    np.testing.assert_array_equal(pf_to_numpy(pmod[0].weight.grad), g[:12].reshape(4, 3))
    new = values(rng, *tv.shape)
    nn.utils.vector_to_parameters(pf.tensor(new), pmod.parameters())
    torch.nn.utils.vector_to_parameters(torch.from_numpy(new), tmod.parameters())
    for (k, p), (_, t) in zip(pmod.state_dict().items(), tmod.state_dict().items()):
        close(p, t, 0, 0, k)
    raises(TypeError, lambda: nn.utils.vector_to_parameters(new, pmod.parameters()), "expected")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence(batch_first, padding_side, device, rng):
    seqs = [values(rng, n, 3) for n in (2, 5, 1)]
    compare(lambda *s: nn.utils.rnn.pad_sequence(list(s), batch_first, -1.5, padding_side),
            lambda *s: torch.nn.utils.rnn.pad_sequence(list(s), batch_first, -1.5, padding_side), seqs, rng=rng)
    one_d = [values(rng, n) for n in (3, 1)]
    compare(lambda *s: nn.utils.rnn.pad_sequence(list(s), batch_first),
            lambda *s: torch.nn.utils.rnn.pad_sequence(list(s), batch_first), one_d, rng=rng)


BICUBIC = [((2, 3, 5, 6), dict(size=(9, 4))), ((1, 2, 4, 4), dict(scale_factor=2.5)),
           ((2, 1, 7, 5), dict(scale_factor=(0.6, 1.7))), ((1, 2, 3, 8), dict(size=(3, 8)))]


@pytest.mark.parametrize("shape,kw", BICUBIC, ids=[str(i) for i in range(len(BICUBIC))])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_interpolate_bicubic(shape, kw, align_corners, dtype, device, rng):
    x = values(rng, *shape, dtype=dtype)
    compare(lambda t: F.interpolate(t, mode="bicubic", align_corners=align_corners, **kw),
            lambda t: TF.interpolate(t, mode="bicubic", align_corners=align_corners, **kw), [x], rng=rng)
    compare(nn.Upsample(mode="bicubic", align_corners=align_corners, **kw),
            tnn.Upsample(mode="bicubic", align_corners=align_corners, **kw), [x], rng=rng)
    raises(NotImplementedError, lambda: F.interpolate(pf.randn(1, 2, 5), size=4, mode="bicubic"), "4D")
