"""The GPU's linear (one cuBLASLt matmul with the bias epilogue on NVIDIA, else the
bias written into the output and the GEMM accumulating onto it; the GEMV kernel for one row
of input) and the
convolutions at the small model shapes whose per-call cost was cut (cached DNN
descriptors, a per-channel bias kernel), against the CPU backend on the same
values. The op registry (test_ops.py) runs every dtype and shape class against
PyTorch; these take the paths a shape, a layout or a setting selects."""

import numpy as np
import pytest
import torch

import pyflame as pf
from pyflame.backend import rocm

pytestmark = pytest.mark.skipif(not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")

# (rtol, atol as a fraction of the largest expected magnitude) per dtype: GPU and
# CPU sum in different orders; the 16-bit types round their results once.
TOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1.6e-2}


@pytest.fixture
def on_gpu():
    pf.set_device("rocm")
    yield
    pf.set_device("cpu")


def _host(t):
    return np.array(t.to(pf.float64).to("cpu").detach().numpy(), copy=True)


def _close(got, want, tol, what):
    """got: a GPU tensor, want: the CPU's; both compared in float64."""
    assert got.device.type == "rocm" and want.device.type == "cpu", what
    assert got.shape == want.shape and got.dtype == want.dtype, \
        f"{what}: {got.shape} {got.dtype}, {want.shape} {want.dtype}"
    w = _host(want)
    scale = max(float(np.max(np.abs(w))), 1.0) if w.size else 1.0
    np.testing.assert_allclose(_host(got), w, rtol=tol, atol=tol * scale, err_msg=what)


class Pair:
    """The same values on the CPU (placed there) and on the GPU, in one dtype."""

    def __init__(self, values, dtype):
        self.cpu = pf.tensor(values, device="cpu").to(getattr(pf, dtype))
        self.gpu = self.cpu.to("rocm")


def _values(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


# ----------------------------------------------------------------- linear


LINEAR_CASES = {
    # input shape, weight shape, bias shape (None: no bias)
    "2d odd": ((33, 67), (129, 67), (129,)),      # the fused epilogue (every dim > 1)
    "2d no bias": ((33, 67), (129, 67), None),    # the plain GEMM
    "3d": ((4, 17, 40), (24, 40), (24,)),         # batch dims flattened into the GEMM's rows
    "1d input": ((40,), (24, 40), (24,)),         # one row: bias written, GEMM with beta = 1
    "one output": ((9, 40), (1, 40), (1,)),       # one column: the same fallback
    "0-d bias": ((9, 40), (24, 40), ()),          # an expanded bias, made packed for the epilogue
    "k = 1": ((9, 1), (24, 1), (24,)),
    "k = 0": ((9, 0), (24, 0), (24,)),
    # The GEMV kernel (one row): rows of k past a multiple of the warp's loads, several loads in
    # flight; a decode step's (1, 1, k) input; a short row; then a few rows (the library's GEMM).
    "gemv one row": ((1, 4104), (300, 4104), (300,)),
    "gemv decode step": ((1, 1, 2048), (2056, 2048), None),
    "gemv short row": ((1, 1, 40), (24, 40), (24,)),
    "3 rows (the library)": ((3, 1024), (5, 1024), (5,)),
    "8 rows 3d (the library)": ((8, 1, 264), (77, 264), (77,)),
}


@pytest.mark.parametrize("case", list(LINEAR_CASES))
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_linear_matches_cpu(on_gpu, rng, case, dtype):
    xs, ws, bs = LINEAR_CASES[case]
    x, w = Pair(_values(rng, xs), dtype), Pair(_values(rng, ws), dtype)
    b = Pair(_values(rng, bs), dtype) if bs is not None else None
    got = pf.linear(x.gpu, w.gpu, b.gpu if b else None)
    want = pf.linear(x.cpu, w.cpu, b.cpu if b else None)
    _close(got, want, TOL[dtype], f"linear {case} {dtype}")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["weight transposed view", "weight strided", "input transposed view",
                                    "input offset by one element"])
@pytest.mark.parametrize("m", [37, 1])
def test_linear_layouts_match_cpu(on_gpu, rng, dtype, layout, m):
    """Non-contiguous operands map onto transpose flags (or a copy); an operand one
    element past an aligned address has a plan of its own (the key holds alignments). With one row
    the GEMV kernel takes what it can read 16 bytes at a time and leaves the rest to the library."""
    k, n = 56, 45
    xv, wv, bv = _values(rng, (m, k)), _values(rng, (n, k)), _values(rng, (n,))
    b = Pair(bv, dtype)

    def views(values_x, values_w):
        x, w = Pair(values_x, dtype), Pair(values_w, dtype)
        return (x.cpu, w.cpu), (x.gpu, w.gpu)

    if layout == "weight transposed view":
        (xc, wc), (xg, wg) = views(xv, np.ascontiguousarray(wv.T))
        wc, wg = wc.t(), wg.t()
    elif layout == "weight strided":
        wide = np.zeros((n, 2 * k), np.float32)
        wide[:, ::2] = wv
        (xc, wc), (xg, wg) = views(xv, wide)
        wc, wg = wc[:, ::2], wg[:, ::2]
    elif layout == "input transposed view":
        (xc, wc), (xg, wg) = views(np.ascontiguousarray(xv.T), wv)
        xc, xg = xc.t(), xg.t()
    else:
        (xc, wc), (xg, wg) = views(np.concatenate([[0], xv.reshape(-1)]).astype(np.float32), wv)
        xc, xg = xc[1:].reshape(m, k), xg[1:].reshape(m, k)
    # (One row transposed from a (k, 1) tensor is a contiguous row.)
    contiguous = layout == "input offset by one element" or (m == 1 and layout == "input transposed view")
    assert (wg.is_contiguous() and xg.is_contiguous()) == contiguous
    want = pf.linear(xc, wc, b.cpu)
    for _ in range(2):  # the second call runs the kept plan
        _close(pf.linear(xg, wg, b.gpu), want, TOL[dtype], f"linear, {layout}, {dtype}")


def test_linear_tf32_follows_the_matmul_setting(on_gpu, rng):
    """float32 linear is full float32 by default (as PyTorch's matmul); allowing TF32
    makes a plan of its own, and turning it off again goes back to the first."""
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    w = rng.standard_normal((256, 1024)).astype(np.float32)
    b = rng.standard_normal(256).astype(np.float32)
    want = x.astype(np.float64) @ w.astype(np.float64).T + b

    def rel_err():
        got = pf.linear(pf.tensor(x), pf.tensor(w), pf.tensor(b)).detach().numpy()
        return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))

    assert not rocm.allow_tf32()
    full = rel_err()
    assert full < 1e-5
    rocm.set_allow_tf32(True)
    try:
        tf32 = rel_err()
    finally:
        rocm.set_allow_tf32(False)
    assert tf32 < 1e-2
    info = pf.rocm_get_device_info(0)
    if info["platform"] == "nvidia" and int(info["architecture"].split("_")[1]) >= 80:
        assert tf32 > 10 * full, "TF32 was allowed but linear kept float32 accuracy"
    assert rel_err() < 1e-5


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_linear_gradients_match_cpu(on_gpu, rng, dtype):
    xs, ws = (3, 11, 40), (24, 40)
    xv, wv, bv, gv = _values(rng, xs), _values(rng, ws), _values(rng, (24,)), _values(rng, (3, 11, 24))
    grads = {}
    for device in ("cpu", "rocm"):
        x, w, b = (pf.tensor(v, device=device).to(getattr(pf, dtype)).requires_grad_(True) for v in (xv, wv, bv))
        y = pf.linear(x, w, b)
        y.backward(pf.tensor(gv, device=device).to(getattr(pf, dtype)))
        grads[device] = (y, x.grad, w.grad, b.grad)
    for name, got, want in zip(("y", "x.grad", "w.grad", "b.grad"), grads["rocm"], grads["cpu"]):
        _close(got, want, 2 * TOL[dtype], f"linear {name} {dtype}")


# ----------------------------------------------------------------- convolutions


# The shapes of the slow cases (batch cut for the CPU reference): input, weight, padding.
CONV_CASES = {
    "3x3 256ch 8x8": ((4, 256, 8, 8), (256, 256, 3, 3), 1),
    "3x3 512ch 7x7": ((2, 512, 7, 7), (512, 512, 3, 3), 1),    # planes of 49: scalar bias accesses
    "3x3 32ch 24x24": ((8, 32, 24, 24), (64, 32, 3, 3), 1),
    "5x5 1ch 28x28": ((8, 1, 28, 28), (32, 1, 5, 5), 2),
    "5x5 32ch 28x28": ((8, 32, 28, 28), (64, 32, 5, 5), 2),
}


@pytest.mark.parametrize("dnn", [True, False], ids=["dnn", "im2col"])
@pytest.mark.parametrize("case", list(CONV_CASES))
def test_small_convolutions_match_cpu(on_gpu, rng, case, dnn):
    """Forward with bias and the three gradients; each call twice (the second runs
    the kept problem and algorithm), which agree to rounding (some cuDNN algorithms
    sum with atomics, in no fixed order)."""
    xs, ws, pad = CONV_CASES[case]
    xv, wv, bv = _values(rng, xs), _values(rng, ws), _values(rng, ws[:1])
    results = {}
    rocm.set_dnn_enabled(dnn)
    try:
        for device in ("cpu", "rocm", "rocm"):
            x, w, b = (pf.tensor(v, device=device).requires_grad_(True) for v in (xv, wv, bv))
            y = pf.conv2d(x, w, b, padding=pad)
            y.backward(pf.tensor(np.cos(np.arange(y.numel())).reshape(y.shape).astype(np.float32), device=device))
            now = (y, x.grad, w.grad, b.grad)
            if device in results:
                for name, first, again in zip(("y", "x.grad", "w.grad", "b.grad"), results[device], now):
                    _close(again, first.to("cpu"), 1e-5, f"conv2d {case} {name}, the second call")
            results[device] = now
    finally:
        rocm.set_dnn_enabled(True)
    for name, got, want in zip(("y", "x.grad", "w.grad", "b.grad"), results["rocm"], results["cpu"]):
        _close(got, want, 1e-4, f"conv2d {case} {name}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_convolution_bias_dtypes_match_cpu(on_gpu, rng, dtype):
    """The per-channel bias kernel in each dtype, over planes that take vector
    accesses (8x8) and planes that do not (7x7), for conv2d, conv3d and conv_transpose2d."""
    tol = {"float16": 4e-3, "bfloat16": 3e-2, "float64": 1e-12}[dtype]
    for xs, ws in (((2, 8, 8, 8), (6, 8, 3, 3)), ((2, 8, 7, 7), (6, 8, 3, 3))):
        x, w, b = Pair(_values(rng, xs), dtype), Pair(_values(rng, ws), dtype), Pair(_values(rng, ws[:1]), dtype)
        _close(pf.conv2d(x.gpu, w.gpu, b.gpu, padding=1), pf.conv2d(x.cpu, w.cpu, b.cpu, padding=1), tol,
               f"conv2d bias {xs} {dtype}")
        wt = Pair(_values(rng, (xs[1], 5, 3, 3)), dtype)
        bt = Pair(_values(rng, (5,)), dtype)
        _close(pf.conv_transpose2d(x.gpu, wt.gpu, bt.gpu, stride=2),
               pf.conv_transpose2d(x.cpu, wt.cpu, bt.cpu, stride=2), tol, f"conv_transpose2d bias {xs} {dtype}")
    x, w, b = Pair(_values(rng, (2, 4, 5, 6, 7)), dtype), Pair(_values(rng, (3, 4, 3, 3, 3)), dtype), \
        Pair(_values(rng, (3,)), dtype)
    _close(pf.conv3d(x.gpu, w.gpu, b.gpu, padding=1), pf.conv3d(x.cpu, w.cpu, b.cpu, padding=1), tol,
           f"conv3d bias {dtype}")


def test_convolution_tf32_switch_reaches_kept_problems(on_gpu, rng):
    """A problem kept from a call without TF32 is not reused once TF32 is allowed,
    and the other way round (the setting is part of the key)."""
    x = rng.standard_normal((2, 256, 12, 12)).astype(np.float32)
    w = rng.standard_normal((64, 256, 3, 3)).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), padding=1).detach().numpy()

    def rel_err():
        got = pf.conv2d(pf.tensor(x), pf.tensor(w), padding=1).detach().numpy()
        return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))

    assert not rocm.conv_allow_tf32()  # the suite's setting (conftest.py)
    full = rel_err()
    rocm.set_conv_allow_tf32(True)
    try:
        tf32 = rel_err()
    finally:
        rocm.set_conv_allow_tf32(False)
    assert full < 1e-4 and tf32 < 1e-2 and rel_err() < 1e-4


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_convolutions_of_views_off_the_plan_alignment_match_cpu(on_gpu, rng, dtype):
    """Input and weight one element into their buffers: contiguous views whose pointers
    miss the 16 bytes cuDNN's graph plans are made for (NVIDIA then runs a legacy
    algorithm), forward and both gradients, against the CPU on the same views."""
    xs, ws = (3, 5, 17, 13), (7, 5, 3, 3)
    xv, wv = _values(rng, (1 + 3 * 5 * 17 * 13,)), _values(rng, (1 + 7 * 5 * 3 * 3,))
    gv = _values(rng, (3, 7, 17, 13))
    tol = {"float32": 1e-4, "float16": 4e-3}[dtype]
    results = {}
    for device in ("cpu", "rocm"):
        bx, bw = (getattr(Pair(v, dtype), "gpu" if device == "rocm" else "cpu").requires_grad_(True) for v in (xv, wv))
        x, w = bx[1:].reshape(list(xs)), bw[1:].reshape(list(ws))
        y = pf.conv2d(x, w, padding=1)
        y.backward(pf.tensor(gv, device=device).to(getattr(pf, dtype)))
        t = pf.conv_transpose2d(y.detach(), w.detach(), padding=1)
        results[device] = (y, t, bx.grad, bw.grad)
    for name, got, want in zip(("y", "conv_transpose2d", "x.grad", "w.grad"), results["rocm"], results["cpu"]):
        _close(got, want, tol, f"{name} of views at an offset, {dtype}")
