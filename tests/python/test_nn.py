"""The nn area beyond the OpInfo registry (opinfo_nn.py): the losses and
attention (compositions of ops), dropout's random masks, batch_norm's running
statistics, numerical stability, PyTorch's argument forms, and the errors."""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pyflame as pf
from op_registry import FLOAT_DTYPES, PF_DTYPE, TORCH_DTYPE, assert_matches, make_values, pf_to_numpy, pf_to_torch
from opinfo_random import generator_state, philox4x32

TOL = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2), "float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12)}


def pair(rng, shape, dtype, low=-3.0, high=3.0, layout="contig"):
    """(pyflame, torch) tensors holding the same values; 'T' makes the pyflame one a transposed view."""
    v = make_values(rng, shape, dtype, low=low, high=high)
    t = torch.from_numpy(np.array(v, copy=True)).to(TORCH_DTYPE[dtype])
    if layout == "T":
        p = pf.tensor(np.ascontiguousarray(np.swapaxes(v, -1, -2))).to(PF_DTYPE[dtype]).transpose(-1, -2)
        assert not p.is_contiguous()
    else:
        p = pf.tensor(v).to(PF_DTYPE[dtype])
    return p, t


def index_pair(rng, shape, classes, dtype="int64", ignore=None):
    v = np.asarray(rng.integers(0, classes, size=shape)).astype(dtype)
    if ignore is not None and v.size:
        v.reshape(-1)[::3] = ignore
    return pf.tensor(v), torch.from_numpy(v.copy()).long()


def close(actual, expected, dtype, what, scale=1.0):
    rtol, atol = TOL[dtype]
    assert_matches(actual, expected, rtol * scale, atol * scale, what=what)


def expect(exc, fn, *inputs, match=()):
    """fn() raises exc with a message matching every pattern; the inputs are unchanged."""
    before = [pf_to_numpy(t) for t in inputs]
    with pytest.raises(exc) as info:
        fn()
    for pattern in [match] if isinstance(match, str) else match:
        assert re.search(pattern, str(info.value)), f"message {str(info.value)!r} does not match {pattern!r}"
    for t, b in zip(inputs, before):
        np.testing.assert_array_equal(pf_to_numpy(t), b, err_msg="an input changed after the error")


# ----------------------------------------------------------------- pointwise losses


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss"])
def test_regression_losses(name, reduction, dtype, rng):
    for shape, layout in (((4, 5), "contig"), ((2, 3, 4), "T"), ((7,), "contig"), ((), "contig")):
        x, tx = pair(rng, shape, dtype, layout=layout)
        y, ty = pair(rng, shape, dtype)
        kwargs = [{}] if name != "smooth_l1_loss" else [{}, dict(beta=0.5), dict(beta=0.0), dict(beta=3.0)]
        for kw in kwargs:
            close(getattr(pf, name)(x, y, reduction=reduction, **kw),
                  getattr(F, name)(tx, ty, reduction=reduction, **kw), dtype, f"{name}{shape} {kw}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss"])
def test_regression_losses_weighted(name, dtype, rng):
    x, tx = pair(rng, (4, 6), dtype)
    y, ty = pair(rng, (4, 6), dtype)
    w, tw = pair(rng, (4, 6), dtype, low=0.1, high=2.0)
    for reduction in ("mean", "sum", "none"):
        close(getattr(pf, name)(x, y, reduction=reduction, weight=w),
              getattr(F, name)(tx, ty, reduction=reduction, weight=tw), dtype, f"{name} weighted {reduction}")


@pytest.mark.filterwarnings("ignore:size_average and reduce")
def test_loss_positional_and_legacy_arguments(rng):
    x, tx = pair(rng, (3, 4), "float32")
    y, ty = pair(rng, (3, 4), "float32")
    for args in ((None, None, "sum"), (False, None), (None, False), (True, True)):
        close(pf.mse_loss(x, y, *args), F.mse_loss(tx, ty, *args), "float32", f"mse_loss{args}")
    logits, tl = pair(rng, (5, 3), "float32")
    target, tt = index_pair(rng, (5,), 3)
    close(pf.cross_entropy(logits, target, None, None, -100, None, "sum"),
          F.cross_entropy(tl, tt, None, None, -100, None, "sum"), "float32", "cross_entropy positional")


def test_empty_losses():
    e = pf.zeros(0, 3)
    assert np.isnan(pf.mse_loss(e, e).item()) and pf.mse_loss(e, e, reduction="sum").item() == 0.0
    assert pf.l1_loss(e, e, reduction="none").shape == (0, 3)
    assert np.isnan(pf.cross_entropy(e, pf.zeros(0, dtype=pf.int64)).item())


# ----------------------------------------------------------------- cross entropy


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cross_entropy_class_indices(dtype, rng):
    cases = [((6, 5), (6,)), ((3, 4, 2, 3), (3, 2, 3)), ((7,), ()), ((2, 3, 5), (2, 5))]
    for (ishape, tshape) in cases:
        c = ishape[0] if len(ishape) == 1 else ishape[1]
        x, tx = pair(rng, ishape, dtype, low=-4, high=4)
        for tdtype in ("int64", "int32"):
            target, tt = index_pair(rng, tshape, c, tdtype, ignore=-100 if tshape else None)
            w, tw = pair(rng, (c,), dtype, low=0.2, high=2.0)
            for kw, tkw in (({}, {}), (dict(weight=w), dict(weight=tw)), (dict(label_smoothing=0.2), None),
                            (dict(weight=w, label_smoothing=0.1, reduction="sum"), None),
                            (dict(reduction="none", label_smoothing=0.3), None)):
                tkw = tkw if tkw is not None else {k: (tw if k == "weight" else v) for k, v in kw.items()}
                close(pf.cross_entropy(x, target, **kw), F.cross_entropy(tx, tt, **tkw), dtype,
                      f"cross_entropy{ishape} {tdtype} {sorted(kw)}", scale=2)


def test_cross_entropy_ignore_index_custom(rng):
    x, tx = pair(rng, (8, 4), "float64")
    target, tt = index_pair(rng, (8,), 4, ignore=2)
    for r in ("mean", "sum", "none"):
        close(pf.cross_entropy(x, target, ignore_index=2, reduction=r, label_smoothing=0.25),
              F.cross_entropy(tx, tt, ignore_index=2, reduction=r, label_smoothing=0.25), "float64", r)
    everything_ignored = pf.full((3,), -100, dtype=pf.int64)
    assert np.isnan(pf.cross_entropy(x[:3], everything_ignored).item())  # 0 / 0, as torch


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cross_entropy_probabilities(dtype, rng):
    for shape in ((5, 4), (2, 3, 4), (6,)):
        cdim = 0 if len(shape) == 1 else 1
        x, tx = pair(rng, shape, dtype)
        p = torch.softmax(torch.from_numpy(make_values(rng, shape, "float64")), dim=cdim).to(TORCH_DTYPE[dtype])
        pp = pf.tensor(p.to(torch.float64).detach().numpy()).to(PF_DTYPE[dtype])
        w, tw = pair(rng, (shape[cdim],), dtype, low=0.2, high=2)
        for kw, tkw in (({}, {}), (dict(label_smoothing=0.2), dict(label_smoothing=0.2)),
                        (dict(weight=w, reduction="sum"), dict(weight=tw, reduction="sum")),
                        (dict(reduction="none"), dict(reduction="none"))):
            close(pf.cross_entropy(x, pp, **kw), F.cross_entropy(tx, p, **tkw), dtype, f"soft targets {shape}", 2)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_cross_entropy_large_logits_are_stable(dtype):
    big = 1e4  # losses up to 2e4: finite in float16 too
    v = np.array([[big, big - 1, 0.0], [-big, 0.0, -big], [big, -big, big]], dtype=np.float32)
    target = np.array([0, 2, 1])
    x = pf.tensor(v).to(PF_DTYPE[dtype])
    tx = torch.from_numpy(v).to(TORCH_DTYPE[dtype])
    for r in ("mean", "none"):
        got = pf.cross_entropy(x, pf.tensor(target), reduction=r, label_smoothing=0.1)
        assert np.all(np.isfinite(pf_to_numpy(got))), f"non-finite loss for large logits: {got}"
        close(got, F.cross_entropy(tx, torch.from_numpy(target), reduction=r, label_smoothing=0.1), dtype, r)


# The GPU's passes over contiguous rows (rocm/kernels/loss.hip): a team of a
# warp's lanes per row under 16 KiB of logits (short rows share a warp, the
# last warp part-filled), a block per row from there (4096 float32 classes);
# C not a multiple of the 16-byte vector, rows that start off 16 bytes
# (offset: the logits are a view that many elements into a buffer), C under a
# warp's lanes. Without label smoothing the first and last classes are -inf
# (never the target); the gradient checks the logsumexp the forward keeps.
_CE_ROWS = [((70, 3), 0), ((64, 37), 1), ((37, 65), 2), ((33, 1000), 1), ((6, 4096), 0), ((5, 8192), 3),
            ((4, 5003), 0), ((3, 8200), 5), ((2, 16384), 1)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_cross_entropy_row_paths(device, dtype, rng):
    _device_or_skip(device)
    for (n, c), offset in _CE_ROWS:
        t = np.asarray(rng.integers(1, c - 1, size=n))
        t[::4] = -100
        target, tt = pf.tensor(t), torch.from_numpy(t)
        w = pf.tensor(make_values(rng, (c,), "float64", low=0.2, high=2.0)).to(PF_DTYPE[dtype])
        tw = torch.from_numpy(np.asarray(pf_to_numpy(w), dtype=np.float64))
        for smoothing in (False, True):
            v = make_values(rng, (offset + n * c,), "float64", low=-8, high=8)
            if not smoothing:
                v[offset::c] = v[offset + c - 1::c] = -np.inf
            logits = pf.tensor(v).to(PF_DTYPE[dtype])[offset:].reshape(n, c)
            tx = torch.from_numpy(np.asarray(pf_to_numpy(logits), dtype=np.float64))
            cases = ((dict(label_smoothing=0.1), dict(weight=w, label_smoothing=0.2, reduction="sum")) if smoothing
                     else ({}, dict(reduction="none"), dict(weight=w, reduction="none"), dict(weight=w)))
            for kw in cases:
                what = f"cross_entropy ({n}, {c}) offset {offset} {sorted(kw)} [{device}]"
                x = logits.detach().requires_grad_(True)
                x64 = tx.clone().requires_grad_(True)
                loss = pf.cross_entropy(x, target, **kw)
                want = F.cross_entropy(x64, tt, **{k: (tw if k == "weight" else a) for k, a in kw.items()})
                close(loss, want.detach().to(TORCH_DTYPE[dtype]), dtype, what, scale=2)
                loss.sum().backward()
                want.sum().backward()
                close(x.grad, x64.grad.to(TORCH_DTYPE[dtype]), dtype, what + " grad", scale=2)


def test_seed_example_cross_entropy():
    """The seed's example: logits from a model, int64 targets from pf.randint."""
    pf.manual_seed(0)
    logits = pf.randn(32, 10)
    targets = pf.randint(0, 10, (32,))
    assert targets.dtype == pf.int64
    loss = pf.cross_entropy(logits, targets)
    expected = F.cross_entropy(torch.from_numpy(logits.detach().numpy().copy()), torch.from_numpy(targets.detach().numpy().copy()))
    assert loss.shape == () and loss.item() == pytest.approx(expected.item(), rel=1e-5)


# ----------------------------------------------------------------- binary cross entropy, kl_div


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["binary_cross_entropy", "bce_loss"])
def test_binary_cross_entropy(name, dtype, rng):
    for shape, layout in (((4, 5), "contig"), ((3, 4), "T"), ((6,), "contig")):
        x, tx = pair(rng, shape, dtype, low=0.02, high=0.98, layout=layout)
        y, ty = pair(rng, shape, dtype, low=0.0, high=1.0)
        w, tw = pair(rng, shape[-1:], dtype, low=0.1, high=2)
        for r in ("mean", "sum", "none"):
            close(getattr(pf, name)(x, y, reduction=r), F.binary_cross_entropy(tx, ty, reduction=r), dtype, r)
            close(getattr(pf, name)(x, y, weight=w, reduction=r),
                  F.binary_cross_entropy(tx, ty, weight=tw, reduction=r), dtype, f"{r} weighted")


def test_binary_cross_entropy_clamps_log_at_minus_100():
    x = pf.tensor([0.0, 1.0, 0.0, 1.0, 1e-30], dtype=pf.float64)
    y = pf.tensor([1.0, 0.0, 0.0, 1.0, 1.0], dtype=pf.float64)
    tx, ty = torch.tensor([0.0, 1.0, 0.0, 1.0, 1e-30], dtype=torch.float64), torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0],
                                                                                          dtype=torch.float64)
    got = pf.binary_cross_entropy(x, y, reduction="none")
    assert got.tolist()[:2] == [100.0, 100.0]
    close(got, F.binary_cross_entropy(tx, ty, reduction="none"), "float64", "clamped")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", ["binary_cross_entropy_with_logits", "bce_with_logits"])
def test_bce_with_logits(name, dtype, rng):
    for shape, layout in (((4, 5), "contig"), ((2, 3, 4), "T")):
        x, tx = pair(rng, shape, dtype, low=-6, high=6, layout=layout)
        y, ty = pair(rng, shape, dtype, low=0.0, high=1.0)
        w, tw = pair(rng, shape, dtype, low=0.1, high=2)
        pw, tpw = pair(rng, shape[-1:], dtype, low=0.5, high=3)
        for kw, tkw in (({}, {}), (dict(weight=w), dict(weight=tw)), (dict(pos_weight=pw), dict(pos_weight=tpw)),
                        (dict(weight=w, pos_weight=pw, reduction="none"), dict(weight=tw, pos_weight=tpw,
                                                                               reduction="none"))):
            for r in ("mean", "sum"):
                kw2, tkw2 = dict(kw, reduction=kw.get("reduction", r)), dict(tkw, reduction=tkw.get("reduction", r))
                close(getattr(pf, name)(x, y, **kw2), F.binary_cross_entropy_with_logits(tx, ty, **tkw2), dtype,
                      f"{name} {sorted(kw2)}", scale=2)


def test_bce_with_logits_large_logits_are_stable():
    v = np.array([-1e4, -100.0, -30.0, 0.0, 30.0, 100.0, 1e4], dtype=np.float32)
    y = np.array([1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.0], dtype=np.float32)
    got = pf.binary_cross_entropy_with_logits(pf.tensor(v), pf.tensor(y), reduction="none")
    expected = F.binary_cross_entropy_with_logits(torch.from_numpy(v), torch.from_numpy(y), reduction="none")
    assert np.all(np.isfinite(pf_to_numpy(got)))
    close(got, expected, "float32", "large logits")


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_kl_div(dtype, rng):
    for shape in ((4, 5), (3, 2, 4), (6,)):
        logq = torch.log_softmax(torch.from_numpy(make_values(rng, shape, "float64")), dim=-1)
        p = torch.softmax(torch.from_numpy(make_values(rng, shape, "float64")), dim=-1)
        p[..., 0] = 0  # 0 log 0 = 0
        tx, tt = logq.to(TORCH_DTYPE[dtype]), p.to(TORCH_DTYPE[dtype])
        x, t = pf.tensor(logq.detach().numpy()).to(PF_DTYPE[dtype]), pf.tensor(p.detach().numpy()).to(PF_DTYPE[dtype])
        for r in ("mean", "sum", "none", "batchmean"):
            close(pf.kl_div(x, t, reduction=r), F.kl_div(tx, tt, reduction=r), dtype, f"kl_div {shape} {r}")
            lt, tlt = pf.log(t + 0.1), torch.log(tt + 0.1)
            close(pf.kl_div(x, lt, reduction=r, log_target=True), F.kl_div(tx, tlt, reduction=r, log_target=True),
                  dtype, f"kl_div log_target {shape} {r}", scale=2)


# ----------------------------------------------------------------- attention


def sdpa_inputs(rng, dtype, qshape, kshape, vshape, layout="contig"):
    q, tq = pair(rng, qshape, dtype, layout=layout)
    k, tk = pair(rng, kshape, dtype)
    v, tv = pair(rng, vshape, dtype)
    return (q, k, v), (tq, tk, tv)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_sdpa(dtype, rng):
    shapes = [((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6)), ((4, 6), (3, 6), (3, 2)), ((2, 5, 4), (1, 5, 4), (1, 5, 3)),
              ((2, 1, 3, 4), (2, 3, 3, 4), (2, 3, 3, 4))]
    for qs, ks, vs in shapes:
        (q, k, v), (tq, tk, tv) = sdpa_inputs(rng, dtype, qs, ks, vs)
        close(pf.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(tq, tk, tv), dtype, f"{qs}",
              scale=2)
        close(pf.scaled_dot_product_attention(q, k, v, scale=0.3),
              F.scaled_dot_product_attention(tq, tk, tv, scale=0.3), dtype, f"{qs} scale", scale=2)
        close(pf.scaled_dot_product_attention(q, k, v, is_causal=True),
              F.scaled_dot_product_attention(tq, tk, tv, is_causal=True), dtype, f"{qs} causal", scale=2)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_sdpa_masks(dtype, rng):
    (q, k, v), (tq, tk, tv) = sdpa_inputs(rng, dtype, (2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 4), layout="T")
    bool_mask = rng.random((5, 6)) < 0.7
    bool_mask[:, 0] = True
    float_mask = make_values(rng, (3, 1, 6), "float32", low=-2, high=2)
    for pm, tm in ((pf.tensor(bool_mask), torch.from_numpy(bool_mask)),
                   (pf.tensor(float_mask).to(PF_DTYPE[dtype]), torch.from_numpy(float_mask).to(TORCH_DTYPE[dtype]))):
        close(pf.scaled_dot_product_attention(q, k, v, attn_mask=pm),
              F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm), dtype, f"mask {tm.dtype}", scale=2)
    # A query that may attend to nothing gets zeros, as torch.
    none_allowed = bool_mask.copy()
    none_allowed[2] = False
    got = pf.scaled_dot_product_attention(q, k, v, attn_mask=pf.tensor(none_allowed))
    close(got, F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(none_allowed)), dtype,
          "fully masked row", scale=2)
    assert np.all(pf_to_numpy(got)[:, :, 2] == 0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_sdpa_placed_with_gradients(device, dtype, rng):
    """Inputs moved with .to(device), as PyTorch code does: on the GPU float16/bfloat16 attention computes
    its scores in that dtype (PyTorch's math path there); outputs and gradients against torch."""
    _device_or_skip(device)
    pf.set_device("cpu")
    bool_mask = rng.random((6, 7)) < 0.7
    bool_mask[:, 0] = True
    for kwargs, tkwargs in (({}, {}), (dict(is_causal=True), dict(is_causal=True)),
                            (dict(attn_mask=pf.tensor(bool_mask).to(device)),
                             dict(attn_mask=torch.from_numpy(bool_mask)))):
        # Scores of a few units: float16/bfloat16 scores are then rounded by well under a percent.
        (q, tq), (k, tk), (v, tv) = (pair(rng, s, dtype, low=-1, high=1) for s in ((2, 3, 6, 8), (2, 3, 7, 8),
                                                                                 (2, 3, 7, 8)))
        q, k, v = (t.to(device).requires_grad_(True) for t in (q, k, v))
        tq, tk, tv = (t.requires_grad_(True) for t in (tq, tk, tv))
        out = pf.scaled_dot_product_attention(q, k, v, **kwargs)
        want = F.scaled_dot_product_attention(tq, tk, tv, **tkwargs)
        assert out.device.type == device and out.dtype == q.dtype
        close(out, want, dtype, f"sdpa {kwargs} [{device}]", scale=2)
        g = make_values(rng, (2, 3, 6, 8), dtype, low=-1, high=1)
        out.backward(pf.tensor(g).to(PF_DTYPE[dtype]).to(device))
        want.backward(torch.from_numpy(np.array(g)).to(TORCH_DTYPE[dtype]))
        for name, a, b in (("q", q, tq), ("k", k, tk), ("v", v, tv)):
            close(a.grad, b.grad, dtype, f"sdpa d{name} {kwargs} [{device}]", scale=4)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_sdpa_as_models_call_it(device, rng):
    """Heads split from (B, T, C) by views, causal, grouped key/value heads, float32 weights under bfloat16
    autocast (bfloat16 out, as PyTorch's), over several 64-row GPU blocks: what flash_attention serves on the
    GPU. Output and input gradient against float64 torch."""
    _device_or_skip(device)
    pf.set_device("cpu")
    b, t, h, hk, e = 2, 150, 4, 2, 64
    x = rng.uniform(-1, 1, (b, t, (h + 2 * hk) * e)).astype(np.float32)
    grad = rng.uniform(-1, 1, (b, h, t, e)).astype(np.float32)

    def attend(xx, scaled_dot_product_attention):
        q = xx[..., :h * e].view(b, t, h, e).transpose(1, 2)
        k = xx[..., h * e:(h + hk) * e].view(b, t, hk, e).transpose(1, 2)
        v = xx[..., (h + hk) * e:].view(b, t, hk, e).transpose(1, 2)
        return scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    px = pf.tensor(x).to(device).requires_grad_(True)
    with pf.autocast(device, dtype=pf.bfloat16):
        out = attend(px, pf.scaled_dot_product_attention)
    assert out.dtype == pf.bfloat16 and out.device.type == device
    out.backward(pf.tensor(grad).to(device, pf.bfloat16))
    tx = torch.from_numpy(x).double().requires_grad_(True)
    want = attend(tx, F.scaled_dot_product_attention)
    want.backward(torch.from_numpy(grad).double())
    close(out, want.to(torch.bfloat16), "bfloat16", f"sdpa as models call it [{device}]", scale=2)
    close(px.grad, tx.grad.float(), "bfloat16", f"its input gradient [{device}]", scale=4)


def test_sdpa_grouped_query_attention(rng):
    (q, k, v), (tq, tk, tv) = sdpa_inputs(rng, "float32", (2, 6, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8))
    close(pf.scaled_dot_product_attention(q, k, v, enable_gqa=True),
          F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True), "float32", "gqa")


def test_sdpa_dropout_is_seeded(rng):
    (q, k, v), _ = sdpa_inputs(rng, "float32", (2, 4, 8), (2, 6, 8), (2, 6, 8))
    pf.manual_seed(3)
    a = pf_to_numpy(pf.scaled_dot_product_attention(q, k, v, dropout_p=0.5))
    pf.manual_seed(3)
    b = pf_to_numpy(pf.scaled_dot_product_attention(q, k, v, dropout_p=0.5))
    plain = pf_to_numpy(pf.scaled_dot_product_attention(q, k, v))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, plain)


# ----------------------------------------------------------------- dropout


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dropout_mask_statistics_and_scale(dtype, rng):
    v = make_values(rng, (200, 300), dtype, low=0.5, high=2.0)
    x = pf.tensor(v).to(PF_DTYPE[dtype])
    for p in (0.1, 0.5, 0.9):
        y = pf_to_numpy(pf.dropout(x, p=p))
        kept = y != 0
        assert abs(1 - kept.mean() - p) < 0.01, f"p={p}: dropped fraction {1 - kept.mean()}"
        expected = torch.from_numpy(np.array(v, copy=True)).to(TORCH_DTYPE[dtype]) * (1 / (1 - p))
        np.testing.assert_allclose(y[kept], expected.to(torch.float64).detach().numpy()[kept], rtol=TOL[dtype][0])


def test_dropout_follows_manual_seed():
    x = pf.ones(64, 33)
    pf.manual_seed(42)
    a = pf_to_numpy(pf.dropout(x, 0.3))
    b = pf_to_numpy(pf.dropout(x, 0.3))
    pf.manual_seed(42)
    np.testing.assert_array_equal(a, pf_to_numpy(pf.dropout(x, 0.3)))
    assert not np.array_equal(a, b), "two draws in a row gave the same mask"
    # the mask: float32 uniforms from the four words of Philox counter offset + i // 4
    g = pf.Generator().manual_seed(7)
    seed, offset = generator_state(g)
    mask = pf_to_numpy(pf.dropout(x, 0.3, generator=g)) != 0
    words = np.stack(philox4x32(seed, np.arange(offset, offset + (x.numel() + 3) // 4, dtype=np.uint64)), axis=1)
    uniform = (words.reshape(-1)[: x.numel()] >> np.uint64(8)).astype(np.float64) * 2.0**-24
    np.testing.assert_array_equal(mask, (uniform >= 0.3).reshape(64, 33))


def test_dropout_layouts_and_identities():
    pf.manual_seed(1)
    base = pf.randn(40, 30)
    t = base.transpose(0, 1)
    pf.manual_seed(5)
    a = pf.dropout(t, 0.4)
    pf.manual_seed(5)
    b = pf.dropout(t.contiguous(), 0.4)
    np.testing.assert_array_equal(pf_to_numpy(a), pf_to_numpy(b))  # the mask follows logical order
    assert pf.dropout(base, 0.5, training=False).data_ptr() == base.data_ptr()
    assert pf.dropout(base, 0.0).data_ptr() == base.data_ptr()
    assert np.all(pf_to_numpy(pf.dropout(base, 1.0)) == 0)
    assert base.dropout(0.0).data_ptr() == base.data_ptr()
    y = pf.ones(5, 7)
    pf.manual_seed(9)
    expected = pf_to_numpy(pf.dropout(y, 0.5))
    pf.manual_seed(9)
    assert pf.dropout(y, 0.5, inplace=True) is y
    np.testing.assert_array_equal(pf_to_numpy(y), expected)


# ----------------------------------------------------------------- batch_norm running statistics


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_batch_norm_training_updates_running_stats(dtype, rng):
    for shape in ((8, 3), (4, 3, 5), (2, 3, 4, 4)):
        x, tx = pair(rng, shape, dtype)
        sdt = "float64" if dtype == "float64" else "float32"  # torch wants float64 statistics for float64 input
        rm, trm = pair(rng, (3,), sdt, low=-1, high=1)
        rv, trv = pair(rng, (3,), sdt, low=0.5, high=2)
        w, tw = pair(rng, (3,), sdt)
        b, tb = pair(rng, (3,), sdt)
        rm_id, rv_ptr = id(rm), rv.data_ptr()
        out = pf.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3, eps=1e-4)
        expected = F.batch_norm(tx, trm, trv, tw, tb, training=True, momentum=0.3, eps=1e-4)
        close(out, expected, dtype, f"batch_norm train {shape}", scale=2)
        assert id(rm) == rm_id and rv.data_ptr() == rv_ptr
        close(rm, trm, sdt, "running_mean", scale=5)
        close(rv, trv, sdt, "running_var", scale=5)
        # eval mode uses what training left
        close(pf.batch_norm(x, rm, rv, training=False), F.batch_norm(tx, trm.to(tx.dtype), trv.to(tx.dtype)), dtype,
              "eval after train", scale=2)


def test_batch_norm_running_stats_in_other_layouts(rng):
    x, tx = pair(rng, (6, 4), "float64")
    big = pf.zeros(8, dtype=pf.float64)
    rm = big[::2]  # a strided view: updated through a working copy, written back
    rv = pf.ones(4, dtype=pf.float16)
    trm, trv = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
    pf.batch_norm(x, rm, rv, training=True)
    F.batch_norm(tx, trm, trv, training=True)
    close(rm, trm, "float64", "strided running_mean")
    assert big[1::2].tolist() == [0.0] * 4  # the elements between were left alone
    close(rv, trv.to(torch.float16), "float16", "float16 running_var")
    # running statistics may be None in training
    close(pf.batch_norm(x, None, None, training=True), F.batch_norm(tx, None, None, training=True), "float64", "None")


# ----------------------------------------------------------------- the channel norms' backward passes

# Shapes (N, C, S) that take each path of the GPU kernels (src/rocm/kernels/norm.hip): batch_norm's
# fold over many blocks per channel (vector and scalar loads, runs shorter than a warp) or one
# thread per channel; group_norm's groups held in registers by teams of 256 down to 1 thread per
# channel, and its three passes for long groups or more than 256 channels per group.
_BATCH_NORM_PATHS = [((5, 3, 3000), True, 0), ((5, 3, 3001), True, -20), ((5, 3, 3001), False, 0),
                     ((70, 2, 1), True, 0), ((300, 4, 1), False, 0), ((4, 3, 5), True, 0), ((2, 2, 640), True, 100)]
_GROUP_NORM_PATHS = [((2, 8, 64), 2, 0), ((2, 6, 10), 3, 0), ((3, 8, 16), 1, 50), ((2, 256, 2), 4, 0),
                     ((2, 512, 1), 2, 0), ((1, 2, 8192), 2, 0), ((1, 4, 20000), 2, 0), ((1, 300, 2), 1, 0),
                     ((2, 3, 9001), 1, 30)]


def _device_or_skip(device):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    pf.set_device(device)


def _norm_backward_close(got, want, what):
    for i, (a, e) in enumerate(zip(got, want)):
        scale = max(1.0, float(e.abs().max()))  # sums over thousands of values
        assert_matches(a, e, 1e-4, 1e-5 * scale, what=f"{what} output {i}")


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_batch_norm_backward_paths(device, rng):
    from opinfo_nn import _batch_norm_backward_ref

    _device_or_skip(device)
    for shape, training, offset in _BATCH_NORM_PATHS:
        c = shape[1]
        x, tx = pair(rng, shape, "float32", low=offset - 3, high=offset + 3)
        g, tg = pair(rng, shape, "float32")
        w, tw = pair(rng, (c,), "float32")
        rm, trm = pair(rng, (c,), "float32", low=offset - 1, high=offset + 1)
        rv, trv = pair(rng, (c,), "float32", low=0.5, high=2)
        stats, tstats = ((None, None), (None, None)) if training else ((rm, rv), (trm, trv))
        got = pf.batch_norm_backward(g, x, *stats, w, training=training)
        want = _batch_norm_backward_ref(tg, tx, *tstats, tw, training=training)
        _norm_backward_close(got, want, f"batch_norm_backward {shape} training={training} [{device}]")


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_group_norm_backward_paths(device, rng):
    from opinfo_nn import _group_norm_backward_ref

    _device_or_skip(device)
    for shape, groups, offset in _GROUP_NORM_PATHS:
        x, tx = pair(rng, shape, "float32", low=offset - 3, high=offset + 3)
        g, tg = pair(rng, shape, "float32")
        w, tw = pair(rng, (shape[1],), "float32")
        got = pf.group_norm_backward(g, x, groups, w)
        want = _group_norm_backward_ref(tg, tx, groups, tw)
        _norm_backward_close(got, want, f"group_norm_backward {shape} G={groups} [{device}]")


# ----------------------------------------------------------------- GPU kernel paths against the CPU


def _gpu_or_skip():
    if not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")


def _both(rng, shape, dtype, low=-3.0, high=3.0, offset=0):
    """The same random values on the CPU and on the GPU, each `offset` elements into its buffer (off 16 bytes)."""
    n = int(np.prod(shape))
    full = pf.tensor(make_values(rng, (offset + n,), "float64", low=low, high=high)).to("cpu").to(PF_DTYPE[dtype])
    return full[offset:].reshape(shape), full.to("rocm")[offset:].reshape(shape)


def _matches_cpu(got, want, dtype, what, scale=1.0):
    """A GPU result against the CPU backend's."""
    close(got, pf_to_torch(want), dtype, what, scale)


def _grads_match_cpu(got, want, dtype, what):
    """(grad_input, grad_weight, grad_bias) on the GPU against the CPU's; the last two are sums over thousands
    of values."""
    rtol, atol = TOL[dtype]
    for i, (a, e) in enumerate(zip(got, want)):
        e = pf_to_torch(e)
        scale = max(1.0, float(e.double().abs().max()))
        assert_matches(a, e, max(rtol, 1e-4), atol * scale, what=f"{what} output {i}")


# (rows, len, offset): softmax's GPU paths (rocm/kernels/softmax.hip). Rows a warp holds take a team
# of one lane up to a whole warp each (16-byte loads; single ones for lengths not a multiple of the
# vector and for inputs off 16 bytes); rows up to 8192 a block each; longer rows are split into parts
# over blocks when few (a second launch writes), a block each when many, their first and last few
# elements taken one by one when a row starts off 16 bytes (odd lengths, offsets). The large shapes
# are attention rows ((64 * 6 * 256) x 256, (B * T) x 384, 768) and a language model's logits.
_SOFTMAX_PATHS = [(37, 3, 0), (100, 8, 0), (20, 33, 0), (64 * 6 * 256, 256, 0), (4096, 384, 0), (4096, 768, 0),
                  (300, 384, 1), (50, 1000, 0), (40, 1024, 0), (30, 1025, 0), (20, 2048, 0), (9, 8192, 0),
                  (7, 8193, 0), (128, 50257, 0), (3, 100000, 2), (600, 12288, 0), (5, 16384, 3)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_gpu_paths(dtype, rng):
    _gpu_or_skip()
    for rows, n, offset in _SOFTMAX_PATHS:
        if dtype != "float32" and rows * n > 1 << 24:
            continue  # the large shapes once, in float32
        x, xg = _both(rng, (rows, n), dtype, low=-8, high=8, offset=offset)
        g, gg = _both(rng, (rows, n), dtype, offset=offset)
        what = f"({rows}, {n}) offset {offset} ({dtype})"
        for fn, back in ((pf.softmax, pf.softmax_backward), (pf.log_softmax, pf.log_softmax_backward)):
            y = fn(x, -1)
            _matches_cpu(fn(xg, -1), y, dtype, f"{fn.__name__} {what}")
            _matches_cpu(back(gg, y.to("rocm"), -1), back(g, y, -1), dtype, f"{back.__name__} {what}", scale=2)


@pytest.mark.parametrize("n", [384, 50257])
def test_softmax_gpu_special_values(n, rng):
    """-inf entries give 0 (log: -inf); a row of only -inf, a NaN or +inf give NaN rows, as on the CPU."""
    _gpu_or_skip()
    x, _ = _both(rng, (5, n), "float32")
    x[0, ::3] = -math.inf
    x[1] = -math.inf
    x[2, 7] = math.nan
    x[3, n - 2] = math.inf
    x[4, 1:] = -math.inf  # one finite value
    for fn in (pf.softmax, pf.log_softmax):
        _matches_cpu(fn(x.to("rocm"), 1), fn(x, 1), "float32", f"{fn.__name__} (5, {n}) special values")


def test_softmax_gpu_other_dim(rng):
    _gpu_or_skip()
    (x, xg), (g, gg) = _both(rng, (5, 384, 3), "float32"), _both(rng, (5, 384, 3), "float32")
    y = pf.softmax(x, 1)
    _matches_cpu(pf.softmax(xg, 1), y, "float32", "softmax over dim 1")
    _matches_cpu(pf.softmax_backward(gg, y.to("rocm"), 1), pf.softmax_backward(g, y, 1), "float32",
                 "softmax_backward over dim 1")


# layer_norm and rms_norm rows (rocm/kernels/norm.hip): a team of lanes per row where a warp holds the
# row (the transformer widths 192, 384, 768 with many rows), a block per row up to 8192, two reads
# beyond. Weight and bias reach the kernels as the caller's float32 tensors (bias a view off 16 bytes:
# copied for the vector reads), float16 ones widened, or float64.
_ROW_NORM_PATHS = [(70, 3), (64, 8), (33, 100), (4096, 192), (4096, 384), (4096, 768), (257, 385), (40, 1024),
                   (30, 2048), (9, 5000), (3, 9000)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_row_norms_gpu_paths(dtype, rng):
    _gpu_or_skip()
    for (rows, m), pdt in zip(_ROW_NORM_PATHS, ["float32", "float16", "float64"] * len(_ROW_NORM_PATHS)):
        (x, xg), (g, gg) = _both(rng, (rows, m), dtype), _both(rng, (rows, m), dtype)
        w, wg = _both(rng, (m,), pdt, low=0.5, high=2)
        b, bg = _both(rng, (m,), pdt, offset=1)
        what = f"({rows}, {m}) ({dtype}, parameters {pdt})"
        _matches_cpu(pf.layer_norm(xg, (m,), wg, bg), pf.layer_norm(x, (m,), w, b), dtype, f"layer_norm {what}",
                     scale=2)
        _matches_cpu(pf.rms_norm(xg, (m,), wg), pf.rms_norm(x, (m,), w), dtype, f"rms_norm {what}", scale=2)
        for back in (pf.layer_norm_backward, pf.rms_norm_backward):
            _grads_match_cpu(back(gg, xg, (m,), wg), back(g, x, (m,), w), dtype, f"{back.__name__} {what}")
    for shape, groups in (((128, 64, 8, 8), 32), ((4, 6, 5, 5), 3), ((2, 512, 16), 1)):
        x, xg = _both(rng, shape, dtype)
        (w, wg), (b, bg) = _both(rng, (shape[1],), "float32"), _both(rng, (shape[1],), "float32", offset=1)
        _matches_cpu(pf.group_norm(xg, groups, wg, bg), pf.group_norm(x, groups, w, b), dtype,
                     f"group_norm {shape} G={groups} ({dtype})", scale=2)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_row_norm_input_gradient_alone(device, rng):
    """With parameters that require no grad, autograd asks the fused backward for the input's
    gradient alone (param_grads=False): the same gradient, the parameters' left out."""
    if device == "rocm":
        _gpu_or_skip()
    for rows, m in ((64, 384), (5, 33)):
        x, g = make_values(rng, (rows, m), "float32"), make_values(rng, (rows, m), "float32")
        w, b = make_values(rng, (m,), "float32", low=0.5, high=2), make_values(rng, (m,), "float32")
        px, pg, pw, pb = (pf.tensor(v, device=device) for v in (x, g, w, b))
        full = pf.layer_norm_backward(pg, px, (m,), pw)
        alone = pf.layer_norm_backward(pg, px, (m,), pw, param_grads=False)
        assert alone[1] is None and alone[2] is None
        np.testing.assert_array_equal(pf_to_numpy(alone[0]), pf_to_numpy(full[0]))
        gx, gw = pf.rms_norm_backward(pg, px, (m,), pw, param_grads=False)
        assert gw is None
        np.testing.assert_array_equal(pf_to_numpy(gx), pf_to_numpy(pf.rms_norm_backward(pg, px, (m,), pw)[0]))
        px.requires_grad_(True)
        pf.layer_norm(px, (m,), pw, pb).backward(pg)
        tx = torch.from_numpy(x).requires_grad_(True)
        F.layer_norm(tx, (m,), torch.from_numpy(w), torch.from_numpy(b)).backward(torch.from_numpy(g))
        assert pw.grad is None
        assert_matches(px.grad.to("cpu"), tx.grad, 1e-4, 1e-5, what=f"layer_norm input gradient ({rows}, {m})")


# batch_norm's GPU paths: up to 32768 values per channel (small feature maps: 128x64x8x8,
# 128x128x16x16, 64x512x7x7; runs of one value, of odd lengths) one launch with a block per channel,
# forward and backward, training and eval; more (4x3x8200, 2x3x40000) the three launches. Running
# statistics and affine parameters in float32 (the caller's tensors, the bias a view off 16 bytes),
# float64 and float16.
_BATCH_NORM_GPU_PATHS = [(128, 64, 8, 8), (128, 128, 16, 16), (64, 512, 7, 7), (70, 2), (3, 5, 3), (4, 3, 8200),
                         (2, 3, 40000)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_batch_norm_gpu_paths(dtype, rng):
    _gpu_or_skip()
    for shape, pdt in zip(_BATCH_NORM_GPU_PATHS, ["float32", "float64", "float16"] * len(_BATCH_NORM_GPU_PATHS)):
        c = shape[1]
        (x, xg), (g, gg) = _both(rng, shape, dtype, low=-2, high=4), _both(rng, shape, dtype)
        (w, wg), (b, bg) = _both(rng, (c,), pdt, low=0.5, high=2), _both(rng, (c,), pdt, offset=1)
        (rm, rmg), (rv, rvg) = _both(rng, (c,), pdt, low=-1, high=1), _both(rng, (c,), pdt, low=0.5, high=2)
        what = f"batch_norm {shape} ({dtype}, statistics {pdt})"
        stat_dtype = max(dtype, pdt, key=lambda d: TOL[d][0])  # float64 statistics of float32 data: float32's
        for training in (True, False):
            got = pf.batch_norm(xg, rmg, rvg, wg, bg, training=training, momentum=0.3)
            want = pf.batch_norm(x, rm, rv, w, b, training=training, momentum=0.3)
            _matches_cpu(got, want, dtype, f"{what} training={training}", scale=5)
            _matches_cpu(rmg, rm, stat_dtype, f"{what} running_mean", scale=5)
            _matches_cpu(rvg, rv, stat_dtype, f"{what} running_var", scale=5)
            stats, gstats = ((None, None), (None, None)) if training else ((rm, rv), (rmg, rvg))
            got = pf.batch_norm_backward(gg, xg, *gstats, wg, training=training)
            want = pf.batch_norm_backward(g, x, *stats, w, training=training)
            _grads_match_cpu(got, want, dtype, f"{what} backward training={training}")
        _matches_cpu(pf.batch_norm(xg, None, None, training=True), pf.batch_norm(x, None, None, training=True),
                     dtype, f"{what} without running statistics or affine parameters", scale=5)


# ----------------------------------------------------------------- stability of the statistics


def test_statistics_far_from_zero():
    """Two-pass statistics in float64: data at 1e8 with unit spread keeps its digits
    (sum(x^2) - n mean^2 in double would leave none). The truth is computed in long double."""
    rng = np.random.default_rng(0)
    v = 1e8 + rng.standard_normal((6, 50))
    x = pf.tensor(v)
    exact = v.astype(np.longdouble)
    mean = exact.mean(axis=1, keepdims=True)
    var = ((exact - mean) ** 2).mean(axis=1, keepdims=True)
    normalized = ((exact - mean) / np.sqrt(var + np.longdouble(1e-5))).astype(np.float64)

    def rel_err(got, truth):
        return float(np.max(np.abs(pf_to_numpy(got) - truth) / np.maximum(np.abs(truth), 1)))

    assert rel_err(pf.var(x, dim=1, correction=0), var[:, 0].astype(np.float64)) < 1e-8
    assert rel_err(pf.std(x, dim=1, correction=0), np.sqrt(var[:, 0]).astype(np.float64)) < 1e-8
    assert rel_err(pf.layer_norm(x, (50,)), normalized) < 1e-7
    assert rel_err(pf.group_norm(x.view(2, 3, 50), 3).view(6, 50), normalized) < 1e-7
    assert rel_err(pf.batch_norm(x.transpose(0, 1), None, None, training=True).transpose(0, 1), normalized) < 1e-7
    # float32 data far from zero: limited by the input's own rounding, as torch
    v32 = (1e4 + rng.standard_normal((4, 64))).astype(np.float32)
    truth = F.layer_norm(torch.from_numpy(v32).double(), (64,))
    got = pf_to_numpy(pf.layer_norm(pf.tensor(v32), (64,)))
    assert np.max(np.abs(got - truth.detach().numpy())) < 2e-3


def test_large_inputs_take_the_parallel_paths(rng):
    """Sizes past the one-thread grain, with non-contiguous inputs, against torch."""
    x, tx = pair(rng, (300, 700), "float32", layout="T")
    close(pf.var(x, dim=0), torch.var(tx, dim=0), "float32", "var dim 0", scale=5)
    close(pf.std(x, dim=1), torch.std(tx, dim=1), "float32", "std dim 1", scale=5)
    close(pf.layer_norm(x, (700,)), F.layer_norm(tx, (700,)), "float32", "layer_norm", scale=5)
    close(pf.rms_norm(x, (700,)), F.rms_norm(tx, (700,)), "float32", "rms_norm", scale=5)
    close(pf.cumsum(x, 0), torch.cumsum(tx, 0), "float32", "cumsum dim 0", scale=50)
    close(pf.cumsum(x, 1), torch.cumsum(tx, 1), "float32", "cumsum dim 1", scale=50)
    img, timg = pair(rng, (16, 8, 20, 20), "float32")
    close(pf.batch_norm(img, None, None, training=True), F.batch_norm(timg, None, None, training=True), "float32",
          "batch_norm", scale=5)
    close(pf.group_norm(img, 4), F.group_norm(timg, 4), "float32", "group_norm", scale=5)
    logits, tl = pair(rng, (3000, 40), "float32", layout="T")
    target, tt = index_pair(rng, (3000,), 40, ignore=-100)
    close(pf.cross_entropy(logits, target, label_smoothing=0.1), F.cross_entropy(tl, tt, label_smoothing=0.1),
          "float32", "cross_entropy", scale=5)


def test_results_do_not_depend_on_the_thread_count(rng):
    x = pf.tensor(make_values(rng, (400, 300), "float32"))
    target = pf.tensor(np.asarray(rng.integers(0, 300, 400)))
    ops = [lambda: pf.var(x, dim=1), lambda: pf.var(x, dim=0), lambda: pf.layer_norm(x, (300,)),
           lambda: pf.batch_norm(x, None, None, training=True), lambda: pf.cumsum(x, 0),
           lambda: pf.cross_entropy(x, target), lambda: pf.group_norm(x.view(4, 100, 300), 10)]
    n = pf.cpu_threads()
    try:
        pf.set_cpu_threads(1)
        one = [pf_to_numpy(f()) for f in ops]
        pf.set_cpu_threads(max(2, n))
        many = [pf_to_numpy(f()) for f in ops]
    finally:
        pf.set_cpu_threads(n)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------- argument forms


def test_var_std_argument_forms(rng):
    v = make_values(rng, (3, 4, 5), "float64")
    x, t = pf.tensor(v), torch.from_numpy(v)
    for name in ("var", "std"):
        f, tf = getattr(pf, name), getattr(torch, name)
        close(f(x, False), tf(t, False), "float64", f"{name}(x, False)")
        close(f(x, 1, False, True), tf(t, 1, False, True), "float64", f"{name}(x, 1, False, True)")
        close(f(x, (0, 2), correction=0), tf(t, (0, 2), correction=0), "float64", f"{name} correction")
        close(getattr(x, name)(dim=-1, keepdim=True), tf(t, dim=-1, keepdim=True), "float64", f"Tensor.{name}")
        expect(ValueError, lambda: f(x, 0, unbiased=True, correction=0), x, match="both")


def test_cumsum_dtypes():
    x = pf.tensor([2**30, 2**30, 2**30], dtype=pf.int32)
    r = pf.cumsum(x, 0)
    assert r.dtype == pf.int64 and r.tolist() == [2**30, 2**31, 3 * 2**30]
    assert pf.cumsum(pf.tensor([True, True, False]), 0).tolist() == [1, 2, 2]
    f = pf.cumsum(pf.tensor([1, 2, 3], dtype=pf.int32), 0, dtype=pf.float64)
    assert f.dtype == pf.float64 and f.tolist() == [1.0, 3.0, 6.0]
    assert pf.tensor([[1.0, 2.0], [3.0, 4.0]]).cumsum(1).tolist() == [[1.0, 3.0], [3.0, 7.0]]
    long = pf.ones(100000, dtype=pf.float32)
    assert pf.cumsum(long, 0)[-1].item() == 100000.0  # accumulated in double


def test_elementwise_parameters(rng):
    v = make_values(rng, (3, 4), "float32")
    x, t = pf.tensor(v), torch.from_numpy(v)
    close(pf.softplus(x, 2.0, 1.0), F.softplus(t, 2.0, 1.0), "float32", "positional parameters")
    close(pf.hardtanh(x, -2, 2), F.hardtanh(t, -2, 2), "float32", "integer bounds")
    y = pf.tensor(v)
    assert y.leaky_relu_(0.3) is y
    close(y, F.leaky_relu(t, 0.3), "float32", "leaky_relu_")
    z = pf.tensor(v)
    z.hardtanh_(min_val=-0.5, max_val=0.5)
    close(z, F.hardtanh(t, -0.5, 0.5), "float32", "hardtanh_")
    w = pf.tensor([0.0, 2.0, -1.0])
    w.logical_not_()
    assert w.dtype == pf.float32 and w.tolist() == [1.0, 0.0, 0.0]
    assert pf.round(pf.tensor([0.5, 1.5, 2.5, -0.5, -1.5])).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    assert pf.round(pf.tensor([1234.5678]), decimals=2).item() == pytest.approx(1234.57, rel=1e-7)
    assert pf.round(pf.tensor([1250.0, 1350.0], dtype=pf.float64), decimals=-2).tolist() == [1200.0, 1400.0]
    nan = float("nan")
    assert pf.logical_and(pf.tensor([nan, 0.0]), pf.tensor([1, 1])).tolist() == [True, False]
    assert pf.sign(pf.tensor([nan, -0.0, -3.0, 2.0])).tolist() == [0.0, 0.0, -1.0, 1.0]


# ----------------------------------------------------------------- errors


def test_error_messages(rng):
    x = pf.randn(4, 5)
    expect(ValueError, lambda: pf.layer_norm(x, (4,)), x, match=[r"layer_norm", r"\[4\]", r"\[4, 5\]"])
    expect(ValueError, lambda: pf.rms_norm(x, (3, 5)), x, match=[r"rms_norm", r"\[3, 5\]", r"\[4, 5\]"])
    expect(ValueError, lambda: pf.layer_norm(x, (5,), pf.ones(4)), x, match=[r"weight", r"\[4\]", r"\[5\]"])
    for name in ("mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy", "kl_div", "cross_entropy"):
        expect(ValueError, lambda: getattr(pf, name)(pf.rand(4, 5), pf.rand(4, 5), reduction="avg"), x,
               match=[name, "reduction", "avg"])
    expect(ValueError, lambda: pf.mse_loss(x, pf.randn(5, 4)), x, match=[r"\[5, 4\]", r"\[4, 5\]"])
    expect(ValueError, lambda: pf.binary_cross_entropy_with_logits(x, pf.rand(4)), x, match=r"\[4\]")
    target = pf.tensor([0, 4, 5, 1])
    expect(IndexError, lambda: pf.cross_entropy(x, target), x, target,
           match=[r"cross_entropy", r"\b5\b", r"5 classes"])
    expect(IndexError, lambda: pf.nll_loss(x, pf.tensor([0, -1, 2, 3])), x, match=[r"-1", r"5 classes"])
    expect(ValueError, lambda: pf.cross_entropy(x, pf.tensor([0, 1, 2])), x, match=[r"\[3\]", r"\[4\]"])
    expect(TypeError, lambda: pf.nll_loss(x, pf.tensor([0.0, 1.0, 2.0, 3.0])), x, match="integer")
    img = pf.randn(2, 6, 3, 3)
    rm, rv = pf.zeros(4), pf.ones(4)
    expect(ValueError, lambda: pf.batch_norm(img, rm, rv), img, rm, rv, match=[r"running_mean", r"\[4\]", r"\b6\b"])
    expect(ValueError, lambda: pf.batch_norm(img, None, None), img, match="running_mean")
    expect(ValueError, lambda: pf.batch_norm(pf.randn(1, 3), None, None, training=True), match="more than 1 value")
    expect(ValueError, lambda: pf.group_norm(img, 4), img, match=[r"num_groups \(4\)", r"\(6\)"])
    expect(ValueError, lambda: pf.group_norm(img, 3, pf.ones(4)), img, match=[r"weight", r"\[4\]"])
    g = pf.randn(2, 6, 3, 3)
    expect(ValueError, lambda: pf.batch_norm_backward(g, img), g, img, match=[r"batch_norm_backward", "running_mean"])
    expect(ValueError, lambda: pf.batch_norm_backward(g[:1], img, training=True), g, img,
           match=[r"batch_norm_backward", r"\[1, 6, 3, 3\]", r"\[2, 6, 3, 3\]"])
    expect(ValueError, lambda: pf.group_norm_backward(g, img, 4), g, img, match=[r"num_groups \(4\)", r"\(6\)"])
    expect(ValueError, lambda: pf.hardtanh(x, 1.0, -1.0), x, match="min_val")
    expect(ValueError, lambda: pf.hardtanh(pf.ones(3, dtype=pf.uint8)), match="uint8")
    expect(TypeError, lambda: pf.round(pf.ones(3, dtype=pf.int32), decimals=1), match="decimals")
    expect(TypeError, lambda: pf.round(x, decimals=1.5), x, match="integer")
    expect(ValueError, lambda: pf.dropout(x, 1.5), x, match="between 0 and 1")
    expect(ValueError, lambda: pf.cross_entropy(x, target, label_smoothing=1.5), x, match="label_smoothing")
    expect(ValueError, lambda: pf.binary_cross_entropy(x, pf.rand(4, 5)), x, match="between 0 and 1")
    expect(ValueError, lambda: pf.smooth_l1_loss(x, x, beta=-1.0), x, match="beta")
    q = pf.randn(2, 3, 4)
    expect(ValueError, lambda: pf.scaled_dot_product_attention(q, pf.randn(2, 3, 5), q), q, match="last dimension")
    expect(ValueError, lambda: pf.scaled_dot_product_attention(q, q, q, attn_mask=pf.ones(3, 3, dtype=pf.bool),
                                                               is_causal=True), q, match="is_causal")
    expect(ValueError, lambda: pf.scaled_dot_product_attention(q, q, q, attn_mask=pf.ones(4, 3, dtype=pf.bool)), q,
           match="attn_mask")
    expect(TypeError, lambda: pf.scaled_dot_product_attention(q, q.to(pf.float64), q), q, match="same dtype")


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_integer_inputs_are_refused(dtype):
    x = pf.ones(4, 3, dtype=PF_DTYPE[dtype])
    for fn in (lambda: pf.var(x), lambda: pf.std(x, 0), lambda: pf.layer_norm(x, (3,)), lambda: pf.rms_norm(x, (3,)),
               lambda: pf.group_norm(x, 1), lambda: pf.batch_norm(x, None, None, training=True),
               lambda: pf.dropout(x), lambda: pf.mse_loss(x, x), lambda: pf.cross_entropy(x, pf.zeros(4, dtype=pf.int64)),
               lambda: pf.nll_loss(x, pf.zeros(4, dtype=pf.int64)), lambda: pf.kl_div(x, x),
               lambda: pf.scaled_dot_product_attention(x, x, x)):
        with pytest.raises(TypeError):
            fn()


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_sequential_folds_conv_batch_norm_relu_in_eval(device, rng):
    """Sequential runs a plain Conv2d + BatchNorm2d (+ ReLU) in eval as one conv2d_batch_norm where no gradient
    is recorded, with PyTorch's results; in training, with gradients or a string padding, they run apart."""
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    layers = lambda lib: lib.nn.Sequential(  # noqa: E731
        lib.nn.Conv2d(3, 8, 3, padding=1), lib.nn.BatchNorm2d(8), lib.nn.ReLU(),
        lib.nn.Conv2d(8, 8, 3, stride=2, bias=False), lib.nn.BatchNorm2d(8, affine=False),
        lib.nn.Conv2d(8, 4, 1, padding="same"), lib.nn.BatchNorm2d(4))
    ref = layers(torch)
    with torch.no_grad():  # statistics and affine parameters away from their initial values
        for m in ref.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                if m.affine:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
    model = layers(pf)
    model.load_state_dict({k: pf.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    model.eval().to(device)
    ref.eval()
    x = make_values(rng, (2, 3, 10, 10), "float32")
    with torch.no_grad():
        want = ref(torch.from_numpy(x)).detach().numpy()
    px = pf.tensor(x, device=device)
    with pf.no_grad(), pf.profiler.profile(activities=[pf.profiler.ProfilerActivity.CPU]) as prof:
        got = model(px)
    ops = [e.name for e in prof.events()]  # with the calls inside conv2d_batch_norm (its folding)
    assert ops.count("conv2d_batch_norm") == 2 and ops.count("batch_norm") == 1, ops  # padding="same": apart
    tol = 1e-2 if device == "rocm" else 1e-4  # the GPU's convolutions in TF32, as PyTorch's
    np.testing.assert_allclose(got.to("cpu").detach().numpy(), want, rtol=tol, atol=tol)

    with pf.profiler.profile(activities=[pf.profiler.ProfilerActivity.CPU]) as prof:
        model(px).sum().backward()
    assert "conv2d_batch_norm" not in [e.name for e in prof.events()]
    model.train()
    with pf.no_grad(), pf.profiler.profile(activities=[pf.profiler.ProfilerActivity.CPU]) as prof:
        model(px)
    assert "conv2d_batch_norm" not in [e.name for e in prof.events()]


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_sequential_runs_linear_relu_fused_with_unfused_results(device, rng):
    """Seed 001's automatic fusion: Sequential runs a plain Linear + ReLU as one linear_relu where no
    gradient is recorded, with the unfused results; with gradients, or a hook on either module, they
    run apart."""
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    pf.manual_seed(3)
    model = pf.nn.Sequential(pf.nn.Linear(24, 48), pf.nn.ReLU(), pf.nn.Linear(48, 48), pf.nn.ReLU(inplace=True),
                             pf.nn.Linear(48, 8)).to(device)
    x = pf.tensor(make_values(rng, (16, 24), "float32"), device=device)

    def unfused(inp):
        for m in model:
            inp = m(inp)
        return inp

    with pf.no_grad():
        with pf.profiler.profile(activities=[pf.profiler.ProfilerActivity.CPU]) as prof:
            got = model(x)
        assert [e.name for e in prof.events()] == ["linear_relu", "linear_relu", "linear"]
        # The same GEMM and relu's functor (on the GPU: cuBLASLt's BIAS epilogue, then ReLU in it): bit for bit.
        np.testing.assert_array_equal(got.to("cpu").detach().numpy(), unfused(x).to("cpu").detach().numpy())

    with pf.profiler.profile(activities=[pf.profiler.ProfilerActivity.CPU]) as prof:
        model(x).square().sum().backward()
    assert "linear_relu" not in [e.name for e in prof.events()]

    seen = []
    handle = model[1].register_forward_hook(lambda m, i, o: seen.append(o.shape))
    with pf.no_grad(), pf.profiler.profile(activities=[pf.profiler.ProfilerActivity.CPU]) as prof:
        model(x)
    handle.remove()
    assert seen == [(16, 48)]
    assert [e.name for e in prof.events()] == ["linear", "relu", "linear_relu", "linear"]
