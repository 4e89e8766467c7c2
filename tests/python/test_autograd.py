"""Autograd: every differentiable op's derivative against PyTorch's autograd
and against finite differences, on every device; the engine's semantics
(accumulation, views, in-place ops, errors) as PyTorch's."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import OP_INFOS, OPS, Arg, assert_matches, is_float, make_pf, make_torch, pf_to_numpy

# The classes whose samples keep inputs small enough for finite differences.
GRAD_CLASSES = ("plain", "broadcast", "noncontig", "size1", "scalar0d", "pyscalar")
# Inputs that are state, not values to differentiate (batch_norm's running statistics).
# Inputs torch gives no gradient (class weights, binary cross entropy's weights).
NOT_DIFFERENTIATED = {"batch_norm": {1, 2}, "batch_norm_backward": {2, 3}, "conv2d_batch_norm": {3, 4},
                      "nll_loss": {2}, "cross_entropy": {2}, "cross_entropy_backward": {4},
                      # the input only picks each window's maximum (derivative 0; the samples hold ties)
                      "max_pool2d_backward": {1}, "max_pool3d_backward": {1},
                      "binary_cross_entropy": {2}, "binary_cross_entropy_with_logits": {2, 6}}
# Piecewise constant: derivative 0, and samples sit on the jumps where finite differences are meaningless
# (remainder and fmod, piecewise linear, jump there too).
PIECEWISE_CONSTANT = {"floor", "ceil", "round", "sign", "floor_divide", "trunc_divide", "remainder", "fmod"}
# An input computed from another by the forward: perturbing the other alone leaves the op's domain
# (finite differences meaningless; test_derivative_matches_torch checks the derivative).
DERIVED_INPUT = {"cross_entropy_backward": "lse is the forward's logsumexp of the logits, which the derivative "
                                           "recomputes from them"}
# Random ops draw other numbers than PyTorch: their derivative has its own test below.
OWN_TEST = {"dropout", "normal"}  # normal: test_misc_api.py
# Defined on symmetric matrices (reading one triangle), their gradient symmetric as torch's: finite
# differences go along symmetric directions.
SYMMETRIC_INPUT = {"linalg_cholesky_ex", "linalg_eigh"}


def _grad_params():
    out = []
    for op in OP_INFOS:
        if not pf.is_differentiable(op.name) or op.name in OWN_TEST:
            continue
        for cls in op.shape_classes:
            if cls in GRAD_CLASSES:
                out.append((op.name, cls))
    return out


def _use_device(device, name):
    if device == "rocm":
        if not pf.rocm_is_available():
            pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
        if not pf.is_supported(name, "rocm"):
            pytest.skip(f"{name} does not run on the GPU yet (docs/ops.md)")
    pf.set_device(device)


def _first_tensor(out):
    return out[0] if isinstance(out, tuple) else out


def test_every_differentiable_op_has_a_derivative():
    missing = [name for name, _ in pf.op_table() if pf.is_differentiable(name) and not pf.has_derivative(name)]
    assert not missing, f"differentiable ops without a derivative (ops.def's grad column or src/autograd/derivatives.cpp): {missing}"


def test_non_differentiable_families():
    for name, family in pf.op_table():
        if family in ("COMPARE", "ARG_REDUCE", "UNARY_BOOL", "UNARY_INT", "BINARY_INT", "RANDOM"):
            assert not pf.is_differentiable(name), name


def _differentiable_args(name, sample, dtype):
    """Indices of the sample's tensor args that get requires_grad."""
    skip = NOT_DIFFERENTIATED.get(name, set())
    return [i for i, a in enumerate(sample.args)
            if isinstance(a, Arg) and is_float(a.dtype or dtype) and i not in skip and a.values.size > 0]


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("name,cls", _grad_params(), ids=lambda v: str(v))
def test_derivative_matches_torch(name, cls, device, rng):
    """pf's gradients of every input equal torch.autograd's on the same values (float64)."""
    _use_device(device, name)
    op = OPS[name]
    # The widest float dtype the op takes; 16-bit-only ops (flash_attention) at their own tolerance.
    dtype = next(d for d in ("float64", "float32", "float16", "bfloat16") if d in op.dtypes)
    tol = {"float64": dict(rtol=1e-7, atol=1e-9), "float32": dict(rtol=2e-4, atol=1e-5)}.get(dtype)
    if tol is None:
        rtol, atol = op.tol[dtype]
        tol = dict(rtol=2 * rtol, atol=2 * atol)
    checked = 0
    for s in op.sample_inputs(rng, dtype, cls):
        wants = _differentiable_args(name, s, dtype)
        if not wants:
            continue
        pf_args = [make_pf(a, dtype) if isinstance(a, Arg) else a for a in s.args]
        th_args = [make_torch(a, dtype) if isinstance(a, Arg) else a for a in s.args]
        for i in wants:
            pf_args[i].requires_grad_(True)
            th_args[i].requires_grad_(True)
        expected = _first_tensor(op.ref(*th_args, **s.kwargs))
        actual = _first_tensor(op.fn(*pf_args, **s.kwargs))
        if not expected.requires_grad:
            continue
        if not actual.requires_grad:  # none where the derivative is zero everywhere (relu_backward's output)
            zero = torch.autograd.grad(expected.sum(), [th_args[i] for i in wants], allow_unused=True)
            assert all(z is None or not z.any() for z in zero), f"{name}{s!r}: no graph recorded"
            continue
        assert actual.grad_fn is not None, f"{name}{s!r}: no graph recorded"
        upstream = rng.uniform(-1, 1, size=tuple(expected.shape))
        try:
            expected.backward(torch.from_numpy(upstream).to(expected.dtype))
        except RuntimeError:  # torch has no derivative here (scatter's src larger than index): finite differences check it
            continue
        actual.backward(pf.tensor(upstream, dtype=actual.dtype, device=actual.device))
        for i in wants:
            want = th_args[i].grad
            got = pf_args[i].grad
            what = f"{name}{s!r} d/d(arg {i})"
            if want is None:
                assert got is None or np.all(pf_to_numpy(got) == 0), what
                continue
            if got is None:  # none where torch's is zeros (relu_backward's output: zero almost everywhere)
                assert np.all(want.detach().numpy() == 0), f"{what}: no gradient"
                continue
            assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
            assert got.dtype == pf_args[i].dtype, what
            np.testing.assert_allclose(pf_to_numpy(got), want.detach().numpy(), err_msg=what, **tol)
        checked += 1
    if checked == 0:
        pytest.skip(f"{name} {cls}: no sample with a differentiable input")


# Finite differences, independent of PyTorch: <grad, v> against
# (f(x + eps v) - f(x - eps v)) / (2 eps) . upstream, for a random direction v.
@pytest.mark.parametrize("name,cls", [p for p in _grad_params() if p[1] == "plain" and p[0] not in PIECEWISE_CONSTANT],
                         ids=lambda v: str(v))
def test_derivative_matches_finite_differences(name, cls, rng):
    op = OPS[name]
    if "float64" not in op.dtypes:
        pytest.skip(f"{name} has no float64")
    if name in DERIVED_INPUT:
        pytest.skip(f"{name}: {DERIVED_INPUT[name]}")
    checked = 0
    for s in op.sample_inputs(rng, "float64", cls):
        wants = _differentiable_args(name, s, "float64")
        if not wants:
            continue
        values = [a.values.astype(np.float64) if isinstance(a, Arg) else a for a in s.args]

        def f(vals, grad_args=()):
            args = [make_pf(Arg(v, a.layout, a.dtype), "float64") if isinstance(a, Arg) else a
                    for v, a in zip(vals, s.args)]
            for i in grad_args:
                args[i].requires_grad_(True)
            return args, _first_tensor(op.fn(*args, **s.kwargs))

        args, out = f(values, wants)
        upstream = rng.uniform(-1, 1, size=tuple(out.shape))
        out.backward(pf.tensor(upstream, dtype=out.dtype))
        eps = 1e-6
        for i in wants:
            v = rng.uniform(-1, 1, size=values[i].shape)
            if name in SYMMETRIC_INPUT:
                v = (v + np.swapaxes(v, -1, -2)) / 2
            plus = [x.copy() if isinstance(x, np.ndarray) else x for x in values]
            minus = [x.copy() if isinstance(x, np.ndarray) else x for x in values]
            plus[i] = values[i] + eps * v
            minus[i] = values[i] - eps * v
            with pf.no_grad():
                fp = pf_to_numpy(f(plus)[1])
                fm = pf_to_numpy(f(minus)[1])
            with np.errstate(invalid="ignore"):  # inf - inf where var has no degrees of freedom
                numeric = float(np.sum((fp - fm) / (2 * eps) * upstream))
            if not np.isfinite(numeric):  # not differentiable there (var with no degrees of freedom)
                continue
            grad = args[i].grad  # None: the first output does not depend on it (grouped_linear's other weights)
            analytic = float(np.sum(pf_to_numpy(grad) * v)) if grad is not None else 0.0
            assert abs(numeric - analytic) <= 1e-5 * max(1.0, abs(numeric)), \
                f"{name}{s!r} d/d(arg {i}): finite differences {numeric}, autograd {analytic}"
        checked += 1
    if checked == 0:
        pytest.skip(f"{name}: no sample with a differentiable input")


def test_backward_converts_the_gradient_to_the_tensors_dtype(rng):
    """As torch: a gradient of another dtype is converted (a bfloat16 result, a float64 gradient; an int one)."""
    v = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    g = rng.uniform(-1, 1, (3, 4))
    x = pf.tensor(v, requires_grad=True)
    (x * 3).to(pf.bfloat16).backward(pf.tensor(g))
    tx = torch.tensor(v, requires_grad=True)
    (tx * 3).to(torch.bfloat16).backward(torch.tensor(g))
    np.testing.assert_array_equal(pf_to_numpy(x.grad), tx.grad.detach().numpy())
    x = pf.tensor(v, requires_grad=True)
    x.sum().backward(pf.tensor(2))
    np.testing.assert_array_equal(pf_to_numpy(x.grad), np.full((3, 4), 2, np.float32))


# ----------------------------------------------------------------- the engine, as PyTorch


def _pair(rng, *shape):
    v = rng.uniform(-2, 2, size=shape)
    return pf.tensor(v, dtype=pf.float64, requires_grad=True), torch.tensor(v, requires_grad=True)


def _close(p, t):
    np.testing.assert_allclose(pf_to_numpy(p), t.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_gradients_accumulate_and_reduce_broadcasts(device, rng):
    _use_device(device, "add")
    x, tx = _pair(rng, 3, 1)
    y, ty = _pair(rng, 4)
    for _ in range(2):  # a second backward adds to .grad
        ((x + y) * x).sum().backward()
        ((tx + ty) * tx).sum().backward()
    _close(x.grad, tx.grad)
    _close(y.grad, ty.grad)
    assert x.grad.shape == (3, 1) and y.grad.shape == (4,)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_gradients_of_many_views_of_one_tensor(device, rng):
    """The engine sums the gradients of selects and slices into one buffer of their input, and
    later gradients into a buffer in place: the result must match PyTorch wherever else the
    tensor and its gradients are used (a direct use, a retained gradient, a captured one)."""
    _use_device(device, "add")
    x, tx = _pair(rng, 6, 5)
    w, tw = _pair(rng, 5)

    def f(lib, x, w):
        h = x * 1.5  # an intermediate with three kinds of consumers
        steps = [h[t] * w for t in range(h.shape[0])]  # selects: one per row, as an RNN's time steps
        parts = h.chunk(2, -1)
        loss = sum(s.sum() for s in steps) + (parts[0] ** 2).sum() + (parts[1] * 3).sum()
        loss = loss + h[1:5:2, 1:4].sum() + (h * h).sum()  # strided slices and a direct use
        return h, loss

    h, loss = f(pf, x, w)
    th, tloss = f(torch, tx, tw)
    h.retain_grad()
    th.retain_grad()
    loss.backward()
    tloss.backward()
    _close(x.grad, tx.grad)
    _close(w.grad, tw.grad)
    _close(h.grad, th.grad)
    gx, = pf.autograd.grad(f(pf, x, w)[1], [x])
    tgx, = torch.autograd.grad(f(torch, tx, tw)[1], [tx])
    _close(gx, tgx)


def test_leaf_and_graph_attributes(rng):
    x, _ = _pair(rng, 3)
    y = x.exp()
    assert x.is_leaf and x.grad_fn is None and x.requires_grad
    assert not y.is_leaf and y.grad_fn.name() == "ExpBackward0" and y.requires_grad
    assert repr(y.grad_fn) == "<ExpBackward0 object>"
    assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
    d = y.detach()
    assert not d.requires_grad and d.is_leaf and d.data_ptr() == y.data_ptr()
    z = y * 2
    y.retain_grad()
    z.sum().backward()
    assert y.retains_grad and y.grad is not None and np.all(pf_to_numpy(y.grad) == 2)
    c = pf.tensor([1, 2, 3])
    assert not c.requires_grad and c.grad is None


def test_grad_mode_context_and_decorator(rng):
    x, _ = _pair(rng, 3)
    with pf.no_grad():
        assert not pf.is_grad_enabled()
        assert not (x * 2).requires_grad
        with pf.enable_grad():
            assert (x * 2).requires_grad
    assert pf.is_grad_enabled()

    @pf.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    with pf.set_grad_enabled(False):
        assert not (x + 1).requires_grad
    assert pf.is_grad_enabled()
    pf.set_grad_enabled(False)
    assert not pf.is_grad_enabled()
    pf.set_grad_enabled(True)


def test_bare_decorators_and_inference_mode(rng):
    """@pf.no_grad and @pf.enable_grad without parentheses, and inference_mode, as torch's (which PyFlame runs as
    no_grad: it has no inference tensors)."""
    x, tx = _pair(rng, 3)

    def twice(t):
        return t * 2

    for lib, t in ((pf, x), (torch, tx)):
        assert not lib.no_grad(twice)(t).requires_grad
        assert not lib.inference_mode(twice)(t).requires_grad
        with lib.no_grad():
            assert lib.enable_grad(twice)(t).requires_grad
        with lib.inference_mode():
            assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
            with lib.inference_mode(False):
                assert not lib.is_inference_mode_enabled()
            assert lib.is_inference_mode_enabled()
        assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
        with lib.inference_mode(mode=False):
            assert (t * 2).requires_grad


def test_errors_as_pytorch(rng):
    x, _ = _pair(rng, 3)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    with pytest.raises(RuntimeError, match="floating point"):
        pf.tensor([1, 2]).requires_grad_(True)
    with pytest.raises(RuntimeError, match="leaf"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 1.0
    e = x.exp()
    s = e.sum()
    e.add_(1)  # exp saved its output
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        s.backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        pf.ones(2).sum().backward()
    with pytest.raises(RuntimeError):
        (x * 2).requires_grad_(False)  # only leaves
    assert issubclass(pf.AutogradError, RuntimeError)


def test_retain_graph_allows_a_second_backward(rng):
    x, tx = _pair(rng, 4)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    ty = (tx.exp() * tx).sum()
    ty.backward(retain_graph=True)
    ty.backward()
    _close(x.grad, tx.grad)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_in_place_ops_and_views(device, rng):
    _use_device(device, "mul")
    x, tx = _pair(rng, 4, 3)
    w, tw = _pair(rng, 3)

    def run(m, x, w):
        h = x * 1.5
        h[1] = w * 2  # setitem: copy_ into a view
        v = h[2:4]
        v.mul_(w)  # in place through a view
        h[0, 1] = 0.0  # fill_ through a view
        h.relu_()
        return (h * h).sum()

    run(pf, x, w).backward()
    run(torch, tx, tw).backward()
    _close(x.grad, tx.grad)
    _close(w.grad, tw.grad)


def test_in_place_on_a_tensor_that_did_not_require_grad(rng):
    x, tx = _pair(rng, 3)
    z = pf.zeros(2, 3, dtype=pf.float64)
    tz = torch.zeros(2, 3, dtype=torch.float64)
    z[1] = x.sin()
    tz[1] = tx.sin()
    z.add_(x)
    tz.add_(tx)
    assert z.requires_grad and z.grad_fn is not None
    (z * z).sum().backward()
    (tz * tz).sum().backward()
    _close(x.grad, tx.grad)


def test_autograd_grad(rng):
    x, tx = _pair(rng, 3)
    y, ty = _pair(rng, 3)
    out = (x * y).sum()
    gx, gy = pf.autograd.grad(out, [x, y])
    tgx, tgy = torch.autograd.grad((tx * ty).sum(), [tx, ty])
    _close(gx, tgx)
    _close(gy, tgy)
    assert x.grad is None and y.grad is None  # grad() does not accumulate
    unused, _ = _pair(rng, 2)
    with pytest.raises(RuntimeError, match="allow_unused"):
        pf.autograd.grad((x * 2).sum(), [x, unused])
    g = pf.autograd.grad((x * 2).sum(), [x, unused], allow_unused=True)
    assert g[1] is None
    h = x * 3  # a non-leaf input
    (gh,) = pf.autograd.grad((h * h).sum(), [h])
    _close(gh, tx.detach() * 6)


def test_deep_graph_needs_no_recursion():
    x = pf.ones(1, dtype=pf.float64, requires_grad=True)
    y = x
    for _ in range(20000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(pf_to_numpy(x.grad), [1.0001 ** 20000], rtol=1e-9)


def test_no_graph_without_requires_grad():
    a = pf.randn(3)
    assert (a * 2).grad_fn is None and (a * 2).is_leaf


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_dropout_gradient_uses_the_same_mask(device, rng):
    _use_device(device, "dropout")
    x = pf.tensor(rng.uniform(0.5, 2, size=(64, 33)), dtype=pf.float32, requires_grad=True)
    y = pf.dropout(x, p=0.3, training=True)
    g = rng.uniform(-1, 1, size=(64, 33))
    y.backward(pf.tensor(g, dtype=pf.float32))
    kept = pf_to_numpy(y) != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(pf_to_numpy(x.grad), np.where(kept, g / 0.7, 0), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_gradients(dtype, rng):
    v = rng.uniform(-1, 1, size=(4, 8)).astype(np.float32)
    x = pf.tensor(v, dtype=getattr(pf, dtype), requires_grad=True)
    tx = torch.tensor(v, dtype=getattr(torch, dtype), requires_grad=True)
    pf.softmax(x * x, dim=-1).sum(dim=0).pow(2).sum().backward()
    torch.softmax(tx * tx, dim=-1).sum(dim=0).pow(2).sum().backward()
    assert x.grad.dtype == x.dtype
    np.testing.assert_allclose(pf_to_numpy(x.grad), tx.grad.float().detach().numpy(), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_small_network_matches_torch(device, rng):
    """A conv -> batch_norm -> relu -> max_pool -> linear -> cross_entropy step, all gradients (float32)."""
    _use_device(device, "conv2d")
    data = {k: rng.uniform(-1, 1, size=s).astype(np.float32) for k, s in
            dict(x=(4, 1, 8, 8), cw=(6, 1, 3, 3), cb=(6,), g=(6,), b=(6,), lw=(10, 96), lb=(10,)).items()}
    target = rng.integers(0, 10, size=4)
    pfp = {k: pf.tensor(v, requires_grad=k != "x") for k, v in data.items()}
    thp = {k: torch.tensor(v, requires_grad=k != "x") for k, v in data.items()}

    def net(m, F, p, tgt):
        h = F.conv2d(p["x"], p["cw"], p["cb"], padding=1)
        h = F.batch_norm(h, None, None, p["g"], p["b"], training=True)
        h = F.max_pool2d(F.relu(h), 2)
        return F.cross_entropy(F.linear(h.reshape(4, -1), p["lw"], p["lb"]), tgt, label_smoothing=0.1)

    import torch.nn.functional as TF
    net(pf, pf.nn.functional, pfp, pf.tensor(target)).backward()
    net(torch, TF, thp, torch.tensor(target)).backward()
    for k in data:
        if k != "x":
            np.testing.assert_allclose(pf_to_numpy(pfp[k].grad), thp[k].grad.detach().numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=k)


def test_custom_function(rng):
    class ScaledExp(pf.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            y = x.exp() * scale
            ctx.save_for_backward(y)
            ctx.scale = scale
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y, None

    x, tx = _pair(rng, 5)
    y = ScaledExp.apply(x, 3.0)
    assert y.grad_fn.name() == "ScaledExpBackward"
    (y * y).sum().backward()
    ((tx.exp() * 3.0) ** 2).sum().backward()
    _close(x.grad, tx.grad)
    with pf.no_grad():
        assert not ScaledExp.apply(x, 2.0).requires_grad

    class WrongShape(pf.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad.sum()

    with pytest.raises(RuntimeError, match="shape"):
        WrongShape.apply(x).sum().backward()


def test_a_view_that_changes_nothing_is_a_new_tensor(rng):
    x, tx = _pair(rng, 3, 4)
    y = x.squeeze()  # nothing to squeeze
    assert x.is_leaf and x.grad_fn is None and y.grad_fn is not None
    (y * y).sum().backward()
    _close(x.grad, 2 * tx.detach())


def test_checkpoint_recomputes_with_the_same_dropout_mask(rng):
    w = pf.tensor(rng.uniform(-1, 1, (8, 8)), dtype=pf.float64, requires_grad=True)
    x = pf.tensor(rng.uniform(-1, 1, (4, 8)), dtype=pf.float64, requires_grad=True)

    def block(a):
        return pf.dropout(pf.tanh(a @ w), p=0.5) * 2

    pf.manual_seed(5)
    ref = block(x)
    (ref * ref).sum().backward()
    want_w, want_x = pf_to_numpy(w.grad), pf_to_numpy(x.grad)
    w.grad = x.grad = None
    pf.manual_seed(5)
    out = pf.utils.checkpoint.checkpoint(block, x)
    np.testing.assert_array_equal(pf_to_numpy(out), pf_to_numpy(ref))
    (out * out).sum().backward()
    np.testing.assert_allclose(pf_to_numpy(w.grad), want_w, rtol=1e-12)
    np.testing.assert_allclose(pf_to_numpy(x.grad), want_x, rtol=1e-12)


def _hooked_graph(lib, x, log):
    """x -> a = 3x -> b = a * a -> sum, with hooks on the leaf and on a, as a PyTorch script writes them."""
    handles = [x.register_hook(lambda g: log.append(("x", g.tolist())) or g * 2)]
    a = x * 3
    handles.append(a.register_hook(lambda g: log.append(("a", g.tolist())) or None))
    handles.append(a.register_hook(lambda g: g + 1))  # hooks run in registration order
    a.retain_grad()  # sees the gradient after the hooks, as torch's
    return a, handles


@pytest.mark.parametrize("through", ["backward", "grad"])
def test_tensor_hooks_as_torch(through, rng):
    values = rng.standard_normal(4).astype(np.float32)
    results = {}
    for lib in (pf, torch):
        x = lib.tensor(values, requires_grad=True)
        log = []
        a, handles = _hooked_graph(lib, x, log)
        loss = (a * a).sum()
        if through == "backward":
            loss.backward()
            got = [x.grad, a.grad]
        else:
            got = list(lib.autograd.grad(loss, [x, a]))
        for h in handles:
            h.remove()
        results[lib.__name__] = ([np.asarray(g.detach().numpy() if lib is torch else g.detach().numpy()) for g in got], log)
    (mine, my_log), (theirs, their_log) = results["pyflame"], results["torch"]
    for m, t in zip(mine, theirs):
        np.testing.assert_allclose(m, t, rtol=1e-6)
    assert [k for k, _ in my_log] == [k for k, _ in their_log]
    for (_, m), (_, t) in zip(my_log, their_log):
        np.testing.assert_allclose(m, t, rtol=1e-6)


def test_tensor_hook_removal_and_errors():
    x = pf.tensor([1.0, 2.0], requires_grad=True)
    with x.register_hook(lambda g: g * 10):
        (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.detach().numpy(), [20.0, 40.0])
    x.grad = None
    (x * x).sum().backward()  # removed on leaving the block
    np.testing.assert_allclose(x.grad.detach().numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        pf.tensor([1.0]).register_hook(lambda g: g)
    handle = x.register_hook(lambda g: g[:1])
    with pytest.raises(RuntimeError, match="must keep the gradient's shape"):
        (x * x).sum().backward()
    handle.remove()
    handle = x.register_hook(lambda g: "no")
    with pytest.raises(TypeError, match="must return a Tensor or None"):
        (x * x).sum().backward()
    handle.remove()


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_matmul_records_the_copies_blas_needs(device, rng):
    """Attention's q, k and v are permuted views of one projection: on a GPU their batch dims have
    no single stride, and an operand strided in both matrix dims suits no BLAS anywhere. Such an
    operand is copied before autograd records the product (PyTorch's matmul saves its reshaped
    copies the same way), so the backward pass reuses the copy; gradients as torch's."""
    _use_device(device, "matmul")
    pf.set_device("cpu")  # the tensors are placed: they, not the current device, decide
    B, T, nh, hs = 3, 5, 2, 4
    C = nh * hs
    values = dict(x=(B, T, 3 * C), gy=(B, nh, T, hs), m=(4, 6, 8), w=(4, 4, 5), gmw=(4, 3, 5))
    v = {k: rng.uniform(-1, 1, size=s).astype(np.float32) for k, s in values.items()}

    def attention(x):
        q, k, v = (t.view(B, T, nh, hs).transpose(1, 2) for t in x.split(C, dim=2))
        att = q @ k.transpose(-2, -1)
        return att, att.softmax(-1) @ v

    x = pf.tensor(v["x"], device=device, requires_grad=True)
    tx = torch.tensor(v["x"], requires_grad=True)
    att, y = attention(x)
    copied = [f.name() == "CopyBackward0" for f, _ in att.grad_fn.next_functions]
    assert copied == [device == "rocm"] * 2, f"{device}: {att.grad_fn.next_functions}"
    y.backward(pf.tensor(v["gy"], device=device))
    attention(tx)[1].backward(torch.tensor(v["gy"]))
    assert_matches(x.grad.to("cpu"), tx.grad, 1e-5, 1e-5, what=f"attention d/dx on {device}")

    m, w = (pf.tensor(v[k], device=device, requires_grad=True) for k in ("m", "w"))
    tm, tw = (torch.tensor(v[k], requires_grad=True) for k in ("m", "w"))
    out = m[:, ::2, ::2] @ w
    assert out.grad_fn.next_functions[0][0].name() == "CopyBackward0"
    out.backward(pf.tensor(v["gmw"], device=device))
    (tm[:, ::2, ::2] @ tw).backward(torch.tensor(v["gmw"]))
    assert_matches(m.grad.to("cpu"), tm.grad, 1e-5, 1e-5, what=f"strided matmul d/dm on {device}")
    assert_matches(w.grad.to("cpu"), tw.grad, 1e-5, 1e-5, what=f"strided matmul d/dw on {device}")
