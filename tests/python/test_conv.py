"""Convolution, pooling and pad: the ops outside the op table through the OpInfo
harness, larger shapes that take every path of the CPU kernels, and the
documented errors. (The op-table ops run in test_ops.py from opinfo_conv.py.)"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pyflame as pf
from host_memory import needs_free_memory
from op_registry import Arg, assert_matches, make_pf, make_values, pf_to_numpy, pf_to_torch
from opinfo_conv import EXTRA_OP_INFOS, OP_INFOS
from test_errors import expect
from test_ops import _run_sample, _use_device

EXTRA = {op.name: op for op in EXTRA_OP_INFOS}


@pytest.mark.parametrize("name,dtype,cls", [(op.name, dt, cls) for op in EXTRA_OP_INFOS for dt in op.dtypes
                                            for cls in op.shape_classes], ids=str)
def test_extra_op(name, dtype, cls, rng):
    op = EXTRA[name]
    samples = op.sample_inputs(rng, dtype, cls)
    assert samples, f"no samples for {name} {dtype} {cls}"
    if cls == "noncontig":
        for s in samples:
            assert any(not make_pf(a, dtype).is_contiguous() for a in s.args if isinstance(a, Arg)), s
    failures = [m for m in (_run_sample(op, dtype, s) for s in samples) if m]
    if failures:
        pytest.fail(f"{len(failures)}/{len(samples)} samples failed:\n" + "\n".join(failures), pytrace=False)


def _pair(rng, shape, dtype="float32", low=-1, high=1):
    v = make_values(rng, shape, dtype, low=low, high=high)
    return pf.tensor(v), torch.from_numpy(v.copy())


# ----------------------------------------------------------------- every kernel path, bigger shapes


@pytest.mark.parametrize("batch", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_large_images(batch, dtype, rng):
    """Images whose column matrix spans several blocks; batches that split across
    threads (with single-threaded BLAS) and ones that run one image at a time."""
    x, tx = _pair(rng, (batch, 16, 70, 66), dtype)
    w, tw = _pair(rng, (24, 8, 3, 5), dtype)
    b, tb = _pair(rng, (24,), dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for kw in (dict(padding=(1, 2), groups=2), dict(stride=(2, 3), dilation=(3, 1), groups=2)):
        assert_matches(pf.conv2d(x, w, b, **kw), F.conv2d(tx, tw, tb, **kw), tol, tol, what=f"conv2d {kw}")
    wt, twt = _pair(rng, (16, 6, 3, 3), dtype)
    assert_matches(pf.conv_transpose2d(x, wt, stride=2, padding=1, groups=2),
                   F.conv_transpose2d(tx, twt, stride=2, padding=1, groups=2), tol, tol, what="conv_transpose2d")


@pytest.mark.parametrize("batch", [1, 7, 40])
def test_conv2d_small_planes_span_images(batch, rng):
    """Planes too small for a wide product alone put several whole images in one
    block (with a shorter last block): forward, transposed, and both gradients."""
    x, tx = _pair(rng, (batch, 6, 5, 4))
    w, tw = _pair(rng, (8, 3, 3, 3))
    b, tb = _pair(rng, (8,))
    for t in (x, w, b, tx, tw, tb):
        t.requires_grad_(True)
    for kw in (dict(padding=1, groups=2), dict(stride=2, padding=(0, 1), groups=2)):
        out, tout = pf.conv2d(x, w, b, **kw), F.conv2d(tx, tw, tb, **kw)
        assert_matches(out, tout, 1e-5, 1e-5, what=f"conv2d {kw}")
        g, tg = _pair(rng, tuple(tout.shape))
        grads = pf.autograd.grad(out, [x, w, b], g)
        want = torch.autograd.grad(tout, [tx, tw, tb], tg)
        for got, ref, name in zip(grads, want, ("input", "weight", "bias")):
            assert_matches(got, ref, 1e-4, 1e-4, what=f"conv2d {kw} d/d{name}")
    one, tone = _pair(rng, (8, 6, 1, 1))
    assert_matches(pf.conv2d(x, one), F.conv2d(tx, tone), 1e-5, 1e-5, what="conv2d 1x1")
    wt, twt = _pair(rng, (6, 4, 3, 3))
    assert_matches(pf.conv_transpose2d(x, wt, b[:8], stride=2, padding=1, groups=2),
                   F.conv_transpose2d(tx, twt, tb[:8], stride=2, padding=1, groups=2), 1e-5, 1e-5,
                   what="conv_transpose2d")


def test_conv2d_spec_example(rng):
    """The user guide's example (224x224 RGB, 64 filters 7x7, stride 2, padding 3), on 2 images."""
    x, tx = _pair(rng, (2, 3, 224, 224))
    w, tw = _pair(rng, (64, 3, 7, 7))
    out = pf.conv2d(x, w, stride=2, padding=3)
    assert out.shape == (2, 64, 112, 112)
    assert_matches(out, F.conv2d(tx, tw, stride=2, padding=3), 1e-5, 1e-5, what="conv2d 7x7/2")


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_pools_large(device, rng):
    _use_device(device, "max_pool2d")
    x, tx = _pair(rng, (3, 5, 57, 61), low=-5, high=5)
    assert_matches(pf.max_pool2d(x, 3, 2, 1), F.max_pool2d(tx, 3, 2, 1), 0, 0, what="max_pool2d")
    assert_matches(pf.avg_pool2d(x, (4, 3), (3, 2), (2, 1), ceil_mode=True),
                   F.avg_pool2d(tx, (4, 3), (3, 2), (2, 1), ceil_mode=True), 1e-5, 1e-5, what="avg_pool2d")
    assert_matches(pf.adaptive_avg_pool2d(x, (7, 5)), F.adaptive_avg_pool2d(tx, (7, 5)), 1e-5, 1e-5,
                   what="adaptive_avg_pool2d")


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("plane", [(4, 4), (5, 5), (7, 7), (9, 13), (17, 17), (64, 70)])
def test_global_average_pooling(device, plane, rng):
    """Global pooling as ResNet heads write it, adaptive_avg_pool2d(x, 1) and avg_pool2d with the
    plane as window (on a GPU both run the cell kernels: a thread, part of a warp, a warp or a
    block per plane by its size), over a number of planes that leaves the last warp part-filled;
    forward and backward against torch."""
    _use_device(device, "adaptive_avg_pool2d")
    pf.set_device("cpu")  # placed tensors decide
    v = make_values(rng, (3, 7) + plane, "float32", low=-2, high=2)
    g = make_values(rng, (3, 7, 1, 1), "float32", low=-1, high=1)
    for name, call in (("adaptive_avg_pool2d", lambda m, x: m.adaptive_avg_pool2d(x, 1)),
                       ("avg_pool2d", lambda m, x: m.avg_pool2d(x, plane)),
                       ("avg_pool2d ceil_mode", lambda m, x: m.avg_pool2d(x, plane, stride=2, ceil_mode=True))):
        x = pf.tensor(v, device=device, requires_grad=True)
        tx = torch.tensor(v, requires_grad=True)
        out, want = call(pf.nn.functional, x), call(F, tx)
        assert_matches(out.to("cpu"), want, 1e-5, 1e-6, what=f"{name} {plane} on {device}")
        out.backward(pf.tensor(g, device=device))
        want.backward(torch.tensor(g))
        assert_matches(x.grad.to("cpu"), tx.grad, 1e-5, 1e-6, what=f"{name} {plane} d/dx on {device}")


def test_thread_count_does_not_change_results(rng):
    x, _ = _pair(rng, (4, 6, 20, 20))
    w, _ = _pair(rng, (8, 6, 3, 3))
    n = pf.cpu_threads()
    runs = []
    try:
        for threads in (1, max(2, n)):
            pf.set_cpu_threads(threads)
            runs.append([pf_to_numpy(f()) for f in (lambda: pf.conv2d(x, w, padding=1),
                                                    lambda: pf.conv_transpose2d(x, w.transpose(0, 1)),
                                                    lambda: pf.max_pool2d(x, 3), lambda: pf.avg_pool2d(x, 2))])
    finally:
        pf.set_cpu_threads(n)
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_max_pool_propagates_nan(dtype, device):
    _use_device(device, "max_pool2d")
    v = np.arange(2 * 6 * 6, dtype=np.float32).reshape(1, 2, 6, 6)
    v[0, 0, 1, 1] = v[0, 1, 5, 4] = np.nan
    x = pf.tensor(v).to(getattr(pf, dtype))
    t = torch.from_numpy(v).to(getattr(torch, dtype))
    assert_matches(pf.max_pool2d(x, 2), F.max_pool2d(t, 2), 0, 0, what="max_pool2d NaN")
    assert_matches(pf.max_pool2d(x, 3, 1, 1), F.max_pool2d(t, 3, 1, 1), 0, 0, what="max_pool2d NaN, overlapping")
    # Planes large enough for the GPU's tiled kernel, NaN at edges and inside, 2-D and 3-D.
    v = np.random.default_rng(0).uniform(-5, 5, (2, 3, 4, 40, 44)).astype(np.float32)
    v[0, 0, 0, 0, 0] = v[0, 1, 2, 17, 43] = v[1, 2, 3, 39, 20] = v[1, 0, 1, 8, 8] = np.nan
    x = pf.tensor(v).to(getattr(pf, dtype))
    t = torch.from_numpy(v).to(getattr(torch, dtype))
    assert_matches(pf.max_pool2d(x[:, :, 1], 3, 2, 1), F.max_pool2d(t[:, :, 1], 3, 2, 1), 0, 0,
                   what="max_pool2d NaN, large")
    assert_matches(pf.max_pool3d(x, 3, 1, 1), F.max_pool3d(t, 3, 1, 1), 0, 0, what="max_pool3d NaN")


# ----------------------------------------------------------------- backward passes

_BACKWARD_CASES = [  # (forward, input shape, kwargs): the GPU's direct and tiled argmax, 2-D, 3-D, unbatched
    ("max_pool2d", (2, 3, 9, 11), dict(kernel_size=3, stride=2, padding=1)),
    ("max_pool2d", (2, 3, 40, 44), dict(kernel_size=3, stride=1, padding=1)),
    ("max_pool2d", (1, 2, 37, 61), dict(kernel_size=(3, 2), stride=(2, 3), padding=1, dilation=(2, 1),
                                        ceil_mode=True)),
    ("max_pool2d", (1, 2, 30, 300), dict(kernel_size=(16, 17), stride=(3, 5), padding=8)),  # 272 taps
    ("max_pool2d", (3, 6, 20), dict(kernel_size=(1, 3), stride=2, padding=(0, 1), dilation=2)),
    ("max_pool3d", (2, 2, 6, 33, 45), dict(kernel_size=(2, 3, 3), stride=2, padding=1, ceil_mode=True)),
    ("max_pool3d", (1, 7, 20, 24), dict(kernel_size=7, stride=1, padding=3)),  # 343 taps, unbatched
    ("max_pool1d", (2, 3, 50), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    ("avg_pool2d", (2, 3, 33, 45), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    ("avg_pool2d", (2, 3, 64, 64), dict(kernel_size=2)),
    ("avg_pool2d", (3, 7, 9), dict(kernel_size=(3, 2), stride=1, padding=1, divisor_override=5)),
    ("avg_pool3d", (2, 2, 5, 6, 7), dict(kernel_size=(2, 3, 3), stride=2, padding=1, ceil_mode=True)),
    ("avg_pool1d", (2, 3, 50), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
    ("adaptive_avg_pool2d", (2, 3, 37, 45), dict(output_size=(5, 7))),
    ("adaptive_avg_pool2d", (3, 4, 5), dict(output_size=(6, 7))),
]


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name,shape,kwargs", _BACKWARD_CASES, ids=str)
def test_pool_gradients_with_ties_nan_and_inf(name, shape, kwargs, dtype, device, rng):
    """Autograd through the fused backward ops against torch's: inputs full of ties
    (multiples of 0.5), NaN and windows of -inf (whose gradient goes to their first
    element inside the input). float16/bfloat16 against float32 rounded once."""
    _use_device(device, name if "1d" not in name else name.replace("1d", "2d"))
    v = make_values(rng, shape, "float32", low=-1, high=1, discrete=True)
    if name.startswith("max"):
        flat = v.reshape(-1)
        flat[rng.choice(flat.size, flat.size // 11, replace=False)] = np.nan
        v[..., : shape[-1] // 3] = -np.inf
    g = make_values(rng, getattr(F, name)(torch.zeros(shape), **kwargs).shape, "float32", low=-1, high=1)
    x = pf.tensor(v).to(getattr(pf, dtype)).requires_grad_(True)
    tx = torch.from_numpy(v).to(getattr(torch, dtype)).float().requires_grad_(True)
    getattr(pf, name)(x, **kwargs).backward(pf.tensor(g).to(getattr(pf, dtype)))
    getattr(F, name)(tx, **kwargs).backward(torch.from_numpy(g).to(getattr(torch, dtype)).float())
    want = tx.grad.to(getattr(torch, dtype))
    tol = {"float16": 1e-3, "bfloat16": 8e-3}.get(dtype, 1e-6 if name.startswith("max") else 2e-5)
    assert_matches(x.grad, want, tol, tol, what=f"{name}{shape} {kwargs} d/dx")


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_pool_backward_ops_match_autograd(device, rng):
    """The ops themselves, called as autograd calls them."""
    _use_device(device, "max_pool2d_backward")
    x, tx = _pair(rng, (2, 3, 10, 12))
    g, tg = _pair(rng, (2, 3, 5, 6))
    tx.requires_grad_(True)
    F.max_pool2d(tx, 3, 2, 1).backward(tg)
    assert_matches(pf.max_pool2d_backward(g, x, 3, 2, 1), tx.grad, 1e-6, 1e-6, what="max_pool2d_backward")
    tx.grad = None
    F.avg_pool2d(tx, 2).backward(tg)
    assert_matches(pf.avg_pool2d_backward(g, x.shape, 2), tx.grad, 1e-6, 1e-6, what="avg_pool2d_backward")
    assert_matches(pf.avg_pool2d_backward(g[0], (3, 10, 12), kernel_size=2), tx.grad[0], 1e-6, 1e-6,
                   what="avg_pool2d_backward, unbatched")
    tx.grad = None
    F.adaptive_avg_pool2d(tx, (5, 6)).backward(tg)
    assert_matches(pf.adaptive_avg_pool2d_backward(g, list(x.shape)), tx.grad, 1e-6, 1e-6,
                   what="adaptive_avg_pool2d_backward")
    # differentiable themselves (second derivatives through pooling: test_autograd_higher.py)
    assert pf.is_differentiable("max_pool2d_backward") and pf.is_differentiable("avg_pool3d_backward")


@pytest.mark.parametrize("fn,exc,match", [
    (lambda x, g: pf.max_pool2d_backward(g[:, :, :2], x, 2), ValueError,
     [r"max_pool2d_backward: grad has shape \[2, 4, 2, 3\]", r"gives \[2, 4, 3, 3\]"]),
    (lambda x, g: pf.max_pool2d_backward(g, x, 2, padding=2), ValueError,
     r"max_pool2d_backward: padding must be at most half"),
    (lambda x, g: pf.max_pool3d_backward(g, x[0], 2), ValueError,
     r"max_pool3d_backward: expected a 4-D \(unbatched\) or 5-D"),
    (lambda x, g: pf.max_pool2d_backward(g.to(pf.int32), x, 2), TypeError, r"expected a floating-point grad"),
    (lambda x, g: pf.max_pool2d_backward(g, x.to(pf.int32), 2), TypeError,
     r"max_pool2d_backward: expected a floating-point input"),
    (lambda x, g: pf.avg_pool2d_backward(g, (2, 4, 6, 8), 2), ValueError,
     r"grad has shape \[2, 4, 3, 3\] but the pooling of an input of shape \[2, 4, 6, 8\] gives \[2, 4, 3, 4\]"),
    (lambda x, g: pf.avg_pool2d_backward(g, (6, 6), 2), ValueError, r"avg_pool2d_backward: expected a 3-D"),
    (lambda x, g: pf.avg_pool2d_backward(g, (2, 4, 6, 6), 2, divisor_override=0), ValueError,
     r"divisor_override must not be zero"),
    (lambda x, g: pf.avg_pool2d_backward(g, (2, 0, 6, 6), 2), ValueError, r"expected non-empty channel and spatial"),
    (lambda x, g: pf.adaptive_avg_pool2d_backward(g, (2, 5, 6, 6)), ValueError,
     r"adaptive_avg_pool2d_backward: grad has shape \[2, 4, 3, 3\] but the pooling of an input of shape "
     r"\[2, 5, 6, 6\] gives \[2, 5, 3, 3\]"),
    (lambda x, g: pf.adaptive_avg_pool2d_backward(g[0], (2, 4, 6, 6)), ValueError,
     r"grad has shape \[4, 3, 3\] but the input has shape \[2, 4, 6, 6\]"),
])
def test_pool_backward_errors(fn, exc, match):
    x, g = pf.rand(2, 4, 6, 6), pf.rand(2, 4, 3, 3)
    expect(exc, lambda: fn(x, g), x, g, match=match)


def test_defaults_and_argument_forms(rng):
    """torch's defaults (stride=None is the kernel size) and int/tuple/list arguments."""
    x, tx = _pair(rng, (2, 3, 9, 8))
    w, tw = _pair(rng, (4, 3, 3, 3))
    assert_matches(pf.conv2d(x, w, None, [2, 1], (1, 0), 1, 1), F.conv2d(tx, tw, None, [2, 1], (1, 0), 1, 1),
                   1e-5, 1e-5, what="conv2d positional")
    assert_matches(pf.max_pool2d(x, [3, 2]), F.max_pool2d(tx, [3, 2]), 0, 0, what="max_pool2d stride=None")
    assert_matches(pf.avg_pool2d(x, 2, stride=None), F.avg_pool2d(tx, 2), 1e-6, 1e-6, what="avg_pool2d stride=None")
    assert_matches(pf.max_pool2d(x, 2, stride=()), F.max_pool2d(tx, 2, stride=()), 0, 0, what="max_pool2d stride=()")
    assert_matches(pf.pad(x, [1, 1]), F.pad(tx, [1, 1]), 0, 0, what="pad list")
    assert pf.pad(x, (1, 1), value=None).detach().numpy()[0, 0, 0, 0] == 0


def test_pad_value_is_cast_like_torch():
    v = np.arange(6).reshape(2, 3)
    assert_matches(pf.pad(pf.tensor(v), (1, 1), value=1.7), F.pad(torch.from_numpy(v), (1, 1), value=1.7), 0, 0,
                   what="pad int64 with 1.7")
    b = v > 2
    assert_matches(pf.pad(pf.tensor(b), (0, 2), value=1.0), F.pad(torch.from_numpy(b), (0, 2), value=1.0), 0, 0,
                   what="pad bool")


# ----------------------------------------------------------------- errors


def _conv_inputs():
    return pf.rand(2, 4, 6, 6), pf.rand(6, 2, 3, 3)


@pytest.mark.parametrize("fn,match", [
    (lambda x, w: pf.conv2d(x, pf.rand(6, 3, 3, 3)), [r"conv2d", r"expected an input with 3 channels",
                                                      r"got 4 channels"]),
    (lambda x, w: pf.conv2d(x, w), [r"conv2d", r"expected an input with 2 channels", r"got 4 channels"]),
    (lambda x, w: pf.conv2d(x, pf.rand(6, 4, 7, 3)), [r"conv2d", r"larger than the padded input", r"\(6 \+ 2 \* 0"]),
    (lambda x, w: pf.conv2d(x, pf.rand(6, 4, 5, 5), dilation=2, padding=1), [r"spanning 9 with dilation 2"]),
    (lambda x, w: pf.conv2d(x, w, groups=2, stride=0), [r"conv2d: stride must be positive, got \[0, 0\]"]),
    (lambda x, w: pf.conv2d(x, w, groups=2, stride=(1, -1)), [r"stride must be positive"]),
    (lambda x, w: pf.conv2d(x, w, groups=2, padding=-1), [r"conv2d: padding must be non-negative"]),
    (lambda x, w: pf.conv2d(x, w, groups=2, dilation=0), [r"conv2d: dilation must be positive"]),
    (lambda x, w: pf.conv2d(x, w, groups=0), [r"conv2d: groups must be positive, got 0"]),
    (lambda x, w: pf.conv2d(x, pf.rand(6, 1, 3, 3), groups=3), [r"4 channels", r"not divisible by groups=3"]),
    (lambda x, w: pf.conv2d(x, pf.rand(5, 1, 3, 3), groups=4), [r"5 output channels", r"not divisible by groups=4"]),
    (lambda x, w: pf.conv2d(x, w, groups=2, stride=(1, 2, 3)), [r"stride must be an int or 2 ints", r"\[1, 2, 3\]"]),
    (lambda x, w: pf.conv2d(x[0, 0], w, groups=2), [r"conv2d: expected a 3-D \(unbatched\) or 4-D", r"\[6, 6\]"]),
    (lambda x, w: pf.conv2d(x.unsqueeze(0), w, groups=2), [r"got shape \[1, 2, 4, 6, 6\]"]),
    (lambda x, w: pf.conv2d(x, w.reshape(6, 2, 9), groups=2), [r"expected a 4-D weight"]),
    (lambda x, w: pf.conv2d(x, w, pf.rand(5), groups=2), [r"expected a bias of shape \[6\], got \[5\]"]),
    (lambda x, w: pf.conv2d(x, w, groups=2, stride=2, padding="same"),
     [r"padding='same' is not supported for strided convolutions"]),
    (lambda x, w: pf.conv2d(x, w, groups=2, padding="full"), [r"padding must be 'same', 'valid'", r"'full'"]),
    (lambda x, w: pf.conv1d(x[:, :, 0], pf.rand(6, 2, 7), groups=2), [r"conv1d", r"larger than the padded input"]),
    (lambda x, w: pf.conv1d(x, w, groups=2), [r"conv1d: expected a 2-D \(unbatched\) or 3-D"]),
    (lambda x, w: pf.conv3d(x[0], w.unsqueeze(2), groups=2), [r"conv3d: expected a 4-D \(unbatched\) or 5-D",
                                                              r"\[4, 6, 6\]"]),
    (lambda x, w: pf.conv_transpose2d(x, pf.rand(3, 2, 3, 3)), [r"conv_transpose2d: expected an input with 3",
                                                                r"got 4 channels"]),
    (lambda x, w: pf.conv_transpose2d(x, pf.rand(4, 2, 3, 3), output_padding=1),
     [r"output_padding must be smaller than either stride or dilation"]),
    (lambda x, w: pf.conv_transpose2d(x, pf.rand(4, 2, 1, 1), padding=4), [r"output size -2", r"too small"]),
    (lambda x, w: pf.conv_transpose2d(x, pf.rand(4, 2, 1, 1), groups=3), [r"not divisible by groups=3"]),
])
def test_conv_errors(fn, match):
    x, w = _conv_inputs()
    expect(ValueError, lambda: fn(x, w), x, w, match=match)


@pytest.mark.parametrize("fn,match", [
    (lambda x: pf.max_pool2d(x, 3, padding=2), [r"max_pool2d: padding must be at most half of the kernel size",
                                                r"padding \[2, 2\]", r"kernel_size \[3, 3\]"]),
    (lambda x: pf.avg_pool2d(x, (3, 4), padding=(1, 3)), [r"avg_pool2d: padding must be at most half"]),
    (lambda x: pf.max_pool1d(x[0], 2, padding=2), [r"max_pool1d: padding must be at most half"]),
    (lambda x: pf.max_pool2d(x, 7), [r"output size 0", r"too small", r"\[2, 4, 6, 6\]"]),
    (lambda x: pf.max_pool2d(x, 2, stride=0), [r"max_pool2d: stride must be positive"]),
    (lambda x: pf.max_pool2d(x, 0), [r"kernel_size must be positive"]),
    (lambda x: pf.max_pool2d(x, 2, dilation=0), [r"dilation must be positive"]),
    (lambda x: pf.max_pool3d(x[0], 2), [r"max_pool3d: expected a 4-D \(unbatched\) or 5-D", r"\[4, 6, 6\]"]),
    (lambda x: pf.max_pool2d(x[:, :0], 2), [r"expected non-empty channel and spatial dims", r"\[2, 0, 6, 6\]"]),
    (lambda x: pf.avg_pool2d(x, 2, divisor_override=0), [r"divisor_override must not be zero"]),
    (lambda x: pf.avg_pool3d(x.unsqueeze(0), (2, 2)), [r"kernel_size must be an int or 3 ints", r"\[2, 2\]"]),
    (lambda x: pf.adaptive_avg_pool2d(x, (2, -1)), [r"output_size entries must be non-negative, got -1"]),
    (lambda x: pf.adaptive_avg_pool2d(x, (2, 2, 2)), [r"output_size must be an int or 2 values"]),
    (lambda x: pf.adaptive_avg_pool2d(x[0, 0], 2), [r"expected a 3-D \(unbatched\) or 4-D"]),
])
def test_pool_errors(fn, match):
    x = pf.rand(2, 4, 6, 6)
    expect(ValueError, lambda: fn(x), x, match=match)


@pytest.mark.parametrize("fn,exc,match", [
    (lambda x: pf.pad(x, (1, 2, 3)), ValueError, r"pad: the padding must have an even length"),
    (lambda x: pf.pad(x, (1,) * 10), ValueError, r"pad: 5 padded dims .* but the input has only 4"),
    (lambda x: pf.pad(x, (-4, -3)), ValueError, r"pad: padding \(-4, -3\) of dim 3 crops more than its size 6"),
    (lambda x: pf.pad(x, (-7, 2)), ValueError, r"pad: padding \(-7, 2\) of dim 3 crops more than its size 6"),
    (lambda x: pf.pad(x, (1, 1), mode="reflect"), pf.NotSupportedError, r"mode='reflect' is not supported"),
    (lambda x: pf.pad(x, (1, 1), mode="replicate"), pf.NotSupportedError, r"mode='replicate' is not supported"),
    (lambda x: pf.pad(x, (1, 1), mode="circular"), pf.NotSupportedError, r"mode='circular' is not supported"),
    (lambda x: pf.pad(x, (1, 1), mode="wrap"), ValueError, r"pad: mode must be 'constant'"),
    (lambda x: pf.max_pool2d(x, 2, return_indices=True), pf.NotSupportedError, r"return_indices=True"),
    (lambda x: pf.conv2d(x.to(pf.int32), pf.ones(2, 4, 1, 1, dtype=pf.int32)), TypeError,
     r"conv2d: expected a floating-point input, got int32"),
    (lambda x: pf.conv2d(x, pf.ones(2, 4, 1, 1, dtype=pf.float64)), TypeError,
     r"the weight has dtype float64 but the input has float32"),
    (lambda x: pf.conv2d(x, pf.ones(2, 4, 1, 1), pf.ones(2, dtype=pf.float16)), TypeError,
     r"the bias has dtype float16"),
    (lambda x: pf.max_pool2d(x.to(pf.int64), 2), TypeError, r"max_pool2d: expected a floating-point input"),
    (lambda x: pf.adaptive_avg_pool2d(x.to(pf.int64), 2), TypeError, r"adaptive_avg_pool2d: expected a floating"),
    (lambda x: pf.conv2d(x, pf.ones(2, 4, 1, 1), stride="2"), TypeError, r"stride must be an int or"),
    (lambda x: pf.max_pool2d(x, (2, 2.5)), TypeError, r"kernel_size must be an int or a tuple of ints"),
])
def test_other_errors(fn, exc, match):
    x = pf.rand(2, 4, 6, 6)
    expect(exc, lambda: fn(x), x, match=match)


def test_kernels_registered():
    for op in ("conv2d", "conv3d", "conv_transpose2d", "max_pool2d", "max_pool3d", "avg_pool2d", "avg_pool3d",
               "adaptive_avg_pool2d", "max_pool2d_backward", "max_pool3d_backward", "avg_pool2d_backward",
               "avg_pool3d_backward", "adaptive_avg_pool2d_backward"):
        assert pf.has_kernel(op, "cpu"), op
    names = dict(pf.op_table())
    assert "conv1d" not in names and "pad" not in names  # they run as other ops


# ----------------------------------------------------------------- adaptive_avg_pool2d's GPU paths

# (shape, output_size, offset): the paths of the GPU kernels (rocm/kernels/pool.hip) against the CPU.
# Cells of up to 16 elements take a thread each; larger ones a warp each, or a block each when they
# are few and above 4096 elements. Cells of whole rows (ow == 1) are read as runs of 16-byte loads,
# or one by one where a plane (oh == 1) or a row (oh > 1) is not a multiple of the vector or the
# input starts off 16 bytes (offset: a view that many elements into a buffer); other cells are
# walked row by row. The large shapes are a ResNet's global pooling.
_ADAPTIVE_PATHS = [((2, 3, 9, 10), (4, 5), 0), ((128, 32, 24, 24), 1, 0), ((3, 5, 7, 7), 1, 0),
                   ((3, 5, 24, 24), 1, 1), ((2, 3, 64, 60), (3, 5), 0), ((2, 3, 100, 64), (3, 1), 0),
                   ((2, 3, 100, 63), (3, 1), 0), ((2, 3, 112, 112), 1, 0), ((2, 3, 111, 113), 1, 3),
                   ((1, 2, 150, 120), (2, 1), 0), ((32, 64, 112, 112), 1, 0)]
# Global pooling's gradient: a warp or a block per plane, whole vectors or single stores; a plane of
# up to 16 elements and other output sizes take the gather kernel.
_ADAPTIVE_GRAD_PATHS = [((128, 32, 24, 24), 1), ((3, 5, 7, 7), 1), ((2, 3, 112, 112), 1), ((2, 3, 111, 113), 1),
                        ((4, 6, 3, 3), 1), ((2, 3, 20, 18), (4, 5)), ((32, 64, 112, 112), 1)]
_GPU_TOL = {"float16": (1e-3, 1e-4), "bfloat16": (1e-2, 1e-3), "float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12)}


def _both(rng, shape, dtype, offset=0):
    """The same random values on the CPU and on the GPU, each `offset` elements into its buffer."""
    n = int(np.prod(shape))
    full = pf.tensor(make_values(rng, (offset + n,), "float64", low=-1, high=1)).to("cpu").to(getattr(pf, dtype))
    return full[offset:].reshape(shape), full.to("rocm")[offset:].reshape(shape)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_adaptive_avg_pool2d_gpu_paths(dtype, rng):
    _use_device("rocm", "adaptive_avg_pool2d")
    rtol, atol = _GPU_TOL[dtype]
    for shape, size, offset in _ADAPTIVE_PATHS:
        if dtype != "float32" and shape[0] * shape[1] >= 2048:
            continue  # the large shapes once, in float32
        x, xg = _both(rng, shape, dtype, offset)
        assert_matches(pf.adaptive_avg_pool2d(xg, size), pf_to_torch(pf.adaptive_avg_pool2d(x, size)), rtol, atol,
                       what=f"adaptive_avg_pool2d {shape} -> {size} offset {offset} ({dtype})")
    # a non-contiguous input (the op layer makes it contiguous)
    x, xg = _both(rng, (3, 4, 20, 30), dtype)
    want = pf_to_torch(pf.adaptive_avg_pool2d(x.transpose(2, 3), 1))
    assert_matches(pf.adaptive_avg_pool2d(xg.transpose(2, 3), 1), want, rtol, atol,
                   what=f"adaptive_avg_pool2d of a transposed input ({dtype})")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_adaptive_avg_pool2d_backward_gpu_paths(dtype, rng):
    _use_device("rocm", "adaptive_avg_pool2d_backward")
    rtol, atol = _GPU_TOL[dtype]
    for shape, size in _ADAPTIVE_GRAD_PATHS:
        if dtype != "float32" and shape[0] * shape[1] >= 2048:
            continue
        oh, ow = (size, size) if isinstance(size, int) else size
        g, _ = _both(rng, (shape[0], shape[1], oh, ow), dtype)
        g[0, 0].fill_(-0.0)  # a -0 gradient gives +0, as the CPU's sums from zero
        what = f"adaptive_avg_pool2d_backward {shape} <- {(oh, ow)} ({dtype})"
        got = pf.adaptive_avg_pool2d_backward(g.to("rocm"), list(shape))
        want = pf.adaptive_avg_pool2d_backward(g, list(shape))
        assert_matches(got, pf_to_torch(want), rtol, atol, what=what)
        assert not np.signbit(pf_to_numpy(got)[0, 0]).any(), what + ": -0 where the CPU has +0"


# ----------------------------------------------------------------- the GPU without a DNN library

_CONV_OPS = {op.name: op for op in OP_INFOS + EXTRA_OP_INFOS
             if op.name in ("conv1d", "conv2d", "conv3d", "conv_transpose2d", "conv_weight_backward")}


@pytest.fixture
def without_dnn():
    """Convolutions through im2col + BLAS, as on an AMD GPU without MIOpen."""
    _use_device("rocm", "conv2d")
    from pyflame.backend import rocm

    rocm.set_dnn_enabled(False)
    yield
    rocm.set_dnn_enabled(True)


@pytest.mark.parametrize("name,dtype,cls", [(op.name, dt, cls) for op in _CONV_OPS.values() for dt in op.dtypes
                                            for cls in op.shape_classes], ids=str)
def test_conv_without_dnn(name, dtype, cls, rng, without_dnn):
    op = _CONV_OPS[name]
    failures = [m for m in (_run_sample(op, dtype, s) for s in op.sample_inputs(rng, dtype, cls)) if m]
    if failures:
        pytest.fail(f"{len(failures)} samples failed:\n" + "\n".join(failures), pytrace=False)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv_without_dnn_in_chunks(dtype, rng, without_dnn):
    """Batches whose column matrices take several chunks (64 MiB of float32 each), with
    gradients of input, weight and bias against PyTorch."""
    x, tx = _pair(rng, (9, 16, 128, 128), dtype)
    w, tw = _pair(rng, (12, 8, 3, 3), dtype)
    b, tb = _pair(rng, (12,), dtype)
    tol = 1e-4 if dtype == "float32" else 1e-10
    kw = dict(padding=1, groups=2)
    xr, wr, br = (t.to("rocm").requires_grad_() for t in (x, w, b))
    txr, twr, tbr = (t.clone().requires_grad_() for t in (tx, tw, tb))
    y, ty = pf.conv2d(xr, wr, br, **kw), F.conv2d(txr, twr, tbr, **kw)
    assert_matches(y, ty, tol, tol, what="conv2d")
    g, tg = _pair(rng, tuple(ty.shape), dtype)
    y.backward(g.to("rocm"))
    ty.backward(tg)
    for a, e, what in ((xr.grad, txr.grad, "input grad"), (wr.grad, twr.grad, "weight grad"),
                       (br.grad, tbr.grad, "bias grad")):
        assert_matches(a, e, tol, tol * 10, what=what)
    wt, twt = _pair(rng, (16, 6, 3, 3), dtype)
    assert_matches(pf.conv_transpose2d(x.to("rocm"), wt.to("rocm"), stride=2, padding=1, output_padding=1, groups=2),
                   F.conv_transpose2d(tx, twt, stride=2, padding=1, output_padding=1, groups=2), tol, tol,
                   what="conv_transpose2d")


# ----------------------------------------------------------------- past 2^31 elements


@needs_free_memory(8)
def test_pool_and_pad_past_int32_indexing():
    """Planes and offsets past 2^31 elements (64-bit indexing in the kernels and views)."""
    x = pf.zeros(3, 1, 24576, 32768, dtype=pf.float16)  # 2.4e9 elements, 4.5 GiB
    x[2, 0, 24575, 32767] = 5.0
    x[2, 0, 24000, 30001] = 7.0
    x[0, 0, 0, 1] = 3.0
    y = pf.max_pool2d(x, 2)
    assert y.shape == (3, 1, 12288, 16384)
    assert y[2, 0, 12287, 16383].item() == 5.0 and y[2, 0, 12000, 15000].item() == 7.0 and y[0, 0, 0, 0].item() == 3.0
    assert pf.max(y[1]).item() == 0.0
    del x, y
    n = 2**31 + 16
    t = pf.zeros(n, dtype=pf.uint8)
    t[n - 1] = 9
    t[2**31 + 3] = 4
    p = pf.pad(t, (1, 2), value=6)
    del t
    assert p.shape == (n + 3,)
    assert p[0].item() == 6 and p[n + 1].item() == 6 and p[n + 2].item() == 6
    assert p[n].item() == 9 and p[2**31 + 4].item() == 4 and p[2**31 + 3].item() == 0


def test_conv_without_dnn_past_int32_indexing(without_dnn):
    """im2col + BLAS over images and column matrices past 2^31 elements (one image per
    chunk): the unrolling and col2im in 64-bit arithmetic, with vector and scalar stores.
    Zeros with a few planted values, so the expected sums are exact in float16. About
    12 GiB of GPU memory."""
    w = pf.tensor([[[[1.0, 2.0], [4.0, 8.0]]]], dtype=pf.float16)
    x = pf.zeros(1, 1, 49152, 49152, dtype=pf.float16)  # 2.4e9 elements, 4.5 GiB; as many column entries
    x[0, 0, 49151, 49151] = 3.0
    x[0, 0, 49150, 49149] = 5.0
    x[0, 0, 0, 1] = 2.0
    # out[i, j] = sum over taps of w[kh, kw] x[2i + kh, 2j + kw]; rows of 24576, 4-element stores
    y = pf.conv2d(x, w, stride=2)
    assert y.shape == (1, 1, 24576, 24576)
    assert y[0, 0, 24575, 24575].item() == 24.0 and y[0, 0, 24575, 24574].item() == 10.0
    assert y[0, 0, 0, 0].item() == 4.0 and pf.sum(y).item() == 38.0
    del y
    # dw[kh, kw] = sum over i, j of g[i, j] x[2i - 1 + kh, 2j - 1 + kw]; rows of 24577, scalar stores
    g = pf.zeros(1, 1, 24577, 24577, dtype=pf.float16)
    g[0, 0, 24576, 24576] = 1.0  # meets x[49151, 49151] at tap (0, 0)
    g[0, 0, 24575, 24575] = 2.0  # x[49150, 49149] at tap (1, 0)
    g[0, 0, 0, 1] = 4.0  # x[0, 1] at tap (1, 0)
    g[0, 0, 100, 100] = 7.0  # zeros only
    dw = pf.conv_weight_backward(x, g, w, stride=2, padding=1)
    assert dw.detach().numpy().tolist() == [[[[3.0, 0.0], [18.0, 0.0]]]]
    del x, g, dw
    x = pf.zeros(1, 1, 24576, 24576, dtype=pf.float16)
    x[0, 0, 24575, 24575] = 3.0
    x[0, 0, 0, 0] = 1.0
    for extra in (0, 1):  # rows of 49152 (4-element stores) and of 49153 (scalar ones)
        # out[2i + kh, 2j + kw] = x[i, j] w[kh, kw]: 2.4e9 elements; output_padding's last row and column 0
        y = pf.conv_transpose2d(x, w, stride=2, output_padding=extra)
        assert y.shape == (1, 1, 49152 + extra, 49152 + extra)
        assert [y[0, 0, 49150 + a, 49150 + b].item() for a in (0, 1) for b in (0, 1)] == [3.0, 6.0, 12.0, 24.0]
        assert [y[0, 0, a, b].item() for a in (0, 1) for b in (0, 1)] == [1.0, 2.0, 4.0, 8.0]
        assert pf.sum(y).item() == 60.0
        del y


def test_pool_backward_past_int32_indexing_on_the_gpu():
    """The backward ops over planes and offsets past 2^31 elements: the GPU's gathers
    in 64-bit arithmetic (the CPU kernels index in 64 bits throughout; this size takes
    them most of a minute). About 10 GiB of GPU memory."""
    _use_device("rocm", "max_pool2d_backward")
    x = pf.zeros(3, 1, 24576, 32768, dtype=pf.float16)  # 2.4e9 elements, 4.5 GiB
    x[2, 0, 24575, 32766] = 5.0
    x[0, 0, 1, 1] = 3.0
    g = pf.full((3, 1, 12288, 16384), 2.0, dtype=pf.float16)
    gx = pf.max_pool2d_backward(g, x, 2)
    # Windows of zeros give their gradient to their first element.
    assert gx[2, 0, 24575, 32766].item() == 2.0 and gx[2, 0, 24574, 32766].item() == 0.0
    assert gx[0, 0, 1, 1].item() == 2.0 and gx[0, 0, 0, 0].item() == 0.0
    assert gx[2, 0, 24000, 30000].item() == 2.0 and gx[2, 0, 24000, 30001].item() == 0.0
    del gx
    ga = pf.avg_pool2d_backward(g, x.shape, 2)
    assert ga[2, 0, 24575, 32767].item() == 0.5 and ga[1, 0, 7, 9].item() == 0.5
