"""Higher-order gradients (create_graph=True): every differentiable op's second derivative against finite
differences of its first derivative, on every device; the engine's rules (histories kept, refusals
instead of missing terms) and torch.autograd.functional's second-order tools against PyTorch."""

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import pyflame as pf
from op_registry import OPS, Arg, make_pf, pf_to_numpy
from pyflame.autograd import functional as PF
from test_autograd import PIECEWISE_CONSTANT, SYMMETRIC_INPUT, _differentiable_args, _first_tensor, _grad_params, \
    _use_device


def _first_grads(op, s, values, wants, upstream, create_graph):
    """(args, d<op(args)[0], upstream>/d args[i] for i in wants) at `values`."""
    args = [make_pf(Arg(v, a.layout, a.dtype), "float64") if isinstance(a, Arg) else a for v, a in zip(values, s.args)]
    for i in wants:
        args[i].requires_grad_(True)
    out = _first_tensor(op.fn(*args, **s.kwargs))
    grads = pf.autograd.grad(out, [args[i] for i in wants], pf.tensor(upstream, dtype=out.dtype, device=out.device),
                             allow_unused=True, create_graph=create_graph)
    return args, grads


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("name,cls", [p for p in _grad_params() if p[1] == "plain" and p[0] not in PIECEWISE_CONSTANT],
                         ids=lambda v: str(v))
def test_second_derivative_matches_finite_differences(name, cls, device, rng):
    """For s = <d<f, u>/dx, w> (u, w random): autograd's ds/dx_i along a random direction against
    (s(x + eps v) - s(x - eps v)) / 2 eps, where s is computed from first derivatives only. An op whose
    derivative goes through one without a derivative of its own must refuse (NotSupportedError)."""
    _use_device(device, name)
    op = OPS[name]
    if "float64" not in op.dtypes:
        pytest.skip(f"{name} has no float64")
    checked, refused = 0, None
    for s in op.sample_inputs(rng, "float64", cls):
        wants = _differentiable_args(name, s, "float64")
        if not wants:
            continue
        values = [a.values.astype(np.float64) if isinstance(a, Arg) else a for a in s.args]
        with pf.no_grad():
            shape = tuple(_first_tensor(op.fn(*[make_pf(a, "float64") if isinstance(a, Arg) else a for a in s.args],
                                              **s.kwargs)).shape)
        upstream = rng.uniform(-1, 1, size=shape)
        try:
            args, grads = _first_grads(op, s, values, wants, upstream, create_graph=True)
        except pf.NotSupportedError as e:
            refused = str(e)
            continue
        weights = [rng.uniform(-1, 1, size=values[i].shape) for i in wants]
        terms = [(g * pf.tensor(w, device=g.device)).sum() for g, w in zip(grads, weights)
                 if g is not None and g.requires_grad]
        if not terms:  # a derivative that does not depend on the inputs (a linear op): nothing to differentiate
            checked += 1
            continue
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        try:
            second = pf.autograd.grad(total, [args[i] for i in wants], allow_unused=True)
        except pf.NotSupportedError as e:
            refused = str(e)
            continue

        def s_at(vals):
            _, gs = _first_grads(op, s, vals, wants, upstream, create_graph=False)
            return sum(float(np.sum(pf_to_numpy(g) * w)) for g, w in zip(gs, weights) if g is not None)

        eps = 1e-6
        for k, i in enumerate(wants):
            v = rng.uniform(-1, 1, size=values[i].shape)
            if name in SYMMETRIC_INPUT:
                v = (v + np.swapaxes(v, -1, -2)) / 2
            plus = [x.copy() if isinstance(x, np.ndarray) else x for x in values]
            minus = [x.copy() if isinstance(x, np.ndarray) else x for x in values]
            plus[i], minus[i] = values[i] + eps * v, values[i] - eps * v
            numeric = (s_at(plus) - s_at(minus)) / (2 * eps)
            if not np.isfinite(numeric):
                continue
            analytic = float(np.sum(pf_to_numpy(second[k]) * v)) if second[k] is not None else 0.0
            assert abs(numeric - analytic) <= 1e-4 * max(1.0, abs(numeric)), \
                f"{name}{s!r} d2/d(arg {i}): finite differences {numeric}, autograd {analytic}"
        checked += 1
    if checked == 0:
        pytest.skip(f"{name}: refused ({refused})" if refused else f"{name}: no sample with a differentiable input")


def test_gradient_penalty_matches_torch(rng):
    """A WGAN-GP style penalty: the norm of d(critic)/d(input), differentiated with respect to the weights."""
    w1, w2, x = rng.standard_normal((8, 5)), rng.standard_normal((1, 8)), rng.standard_normal((6, 5))

    def run(lib, F, tensor):
        a, b, inp = (tensor(v).requires_grad_(True) for v in (w1, w2, x))
        critic = F.linear(F.silu(F.linear(inp, a)).tanh(), b).sum()
        (g,) = lib.autograd.grad(critic, inp, create_graph=True)
        penalty = ((g.pow(2).sum(1) + 1e-12).sqrt() - 1).pow(2).mean()
        penalty.backward()
        return a.grad, b.grad

    got = run(pf, pf.nn.functional, lambda v: pf.tensor(v))
    want = run(torch, torch.nn.functional, lambda v: torch.tensor(v))
    for g, t in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_conv_critic_gradient_penalty_matches_torch(rng):
    """The same penalty through a convolutional critic (conv2d, leaky_relu, a strided conv, mean)."""
    w1, w2, x = rng.standard_normal((4, 3, 3, 3)), rng.standard_normal((2, 4, 3, 3)), rng.standard_normal((2, 3, 8, 8))

    def run(lib, F, tensor):
        a, b, inp = (tensor(v).requires_grad_(True) for v in (w1, w2, x))
        critic = F.conv2d(F.leaky_relu(F.conv2d(inp, a, padding=1), 0.2), b, stride=2).mean()
        (g,) = lib.autograd.grad(critic, inp, create_graph=True)
        penalty = ((g.pow(2).sum((1, 2, 3)) + 1e-12).sqrt() - 1).pow(2).mean()
        penalty.backward()
        return a.grad, b.grad

    got = run(pf, pf.nn.functional, lambda v: pf.tensor(v))
    want = run(torch, torch.nn.functional, lambda v: torch.tensor(v))
    for g, t in zip(got, want):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-9, atol=1e-12)


def test_create_graph_keeps_histories_and_accumulates_out_of_place():
    x = pf.tensor([1.5, -0.5, 2.0], dtype=pf.float64, requires_grad=True)
    (x ** 3).sum().backward(create_graph=True)
    first = x.grad
    assert first.requires_grad and not first.is_leaf
    np.testing.assert_allclose(first.detach().numpy(), 3 * np.array([1.5, -0.5, 2.0]) ** 2)
    (second,) = pf.autograd.grad(first.sum(), x)
    np.testing.assert_allclose(second.detach().numpy(), 6 * np.array([1.5, -0.5, 2.0]))
    (x ** 2).sum().backward(create_graph=True)  # accumulates into .grad, out of place
    assert x.grad is not first
    np.testing.assert_allclose(first.detach().numpy(), 3 * np.array([1.5, -0.5, 2.0]) ** 2)  # left as it was
    (x * 2).sum().backward()  # first order afterwards: .grad still accumulates
    np.testing.assert_allclose(x.grad.detach().numpy(), 3 * np.array([1.5, -0.5, 2.0]) ** 2 + 2 * x.detach().numpy() + 2)


@pytest.mark.parametrize("kwargs", [dict(), dict(label_smoothing=0.1, reduction="sum"),
                                    dict(weight=True, ignore_index=2, reduction="mean")], ids=str)
def test_maml_step_through_cross_entropy_matches_torch(kwargs, rng):
    """MAML's meta-gradient: one inner SGD step on a classifier's cross_entropy, kept in the graph
    (create_graph), then the query loss differentiated with respect to the initial weights."""
    w0, x, xq = rng.standard_normal((5, 4)), rng.standard_normal((6, 5)), rng.standard_normal((7, 5))
    y, yq = rng.integers(0, 4, 6), rng.integers(0, 4, 7)
    class_weight = rng.uniform(0.5, 2.0, 4)

    def run(lib, F, tensor, labels):
        kw = dict(kwargs)
        if kw.pop("weight", False):
            kw["weight"] = tensor(class_weight)
        w = tensor(w0).requires_grad_(True)
        (g,) = lib.autograd.grad(F.cross_entropy(tensor(x) @ w, labels(y), **kw), w, create_graph=True)
        adapted = w - 0.5 * g
        (meta,) = lib.autograd.grad(F.cross_entropy(tensor(xq) @ adapted, labels(yq), **kw), w)
        return meta

    got = run(pf, pf.nn.functional, lambda v: pf.tensor(v, dtype=pf.float64), lambda v: pf.tensor(v))
    want = run(torch, torch.nn.functional, lambda v: torch.tensor(v, dtype=torch.float64), lambda v: torch.tensor(v))
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("nd,kwargs", [(2, dict(kernel_size=2)), (2, dict(kernel_size=3, stride=2, padding=1)),
                                       (2, dict(kernel_size=2, dilation=2, ceil_mode=True)),
                                       (3, dict(kernel_size=2, stride=1, padding=1))], ids=str)
def test_gradient_penalty_through_max_pooling_matches_torch(nd, kwargs, rng):
    """d/dweight of |d(sum(max_pool(conv(x)) ** 2))/dx|^2: the penalty's gradient goes through max pooling's
    backward (each window's gradient at its first maximum, as PyTorch)."""
    shape, wshape = ((2, 2) + (7,) * nd), ((3, 2) + (3,) * nd)
    x0, w0 = rng.standard_normal(shape), rng.standard_normal(wshape)

    def run(lib, F, tensor):
        x, w = tensor(x0).requires_grad_(True), tensor(w0).requires_grad_(True)
        conv, pool = (F.conv2d, F.max_pool2d) if nd == 2 else (F.conv3d, F.max_pool3d)
        (g,) = lib.autograd.grad(pool(conv(x, w, padding=1), **kwargs).pow(2).sum(), x, create_graph=True)
        return lib.autograd.grad(g.pow(2).sum(), w)[0]

    got = run(pf, pf.nn.functional, lambda v: pf.tensor(v, dtype=pf.float64))
    want = run(torch, torch.nn.functional, lambda v: torch.tensor(v, dtype=torch.float64))
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("pool", ["avg_pool2d", "max_pool2d", "adaptive_avg_pool2d", "avg_pool3d"])
def test_jvp_through_pooling_matches_torch(pool, rng):
    """jvp (a vjp of a vjp: the incoming gradient itself requires grad) through the pools' backward ops."""
    shape = (2, 3, 6, 6, 6) if pool.endswith("3d") else (2, 3, 6, 6)
    args = {"adaptive_avg_pool2d": (4,)}.get(pool, (3, 2, 1))
    x0, v0 = rng.standard_normal(shape), rng.standard_normal(shape)

    def run(lib, F, functional, tensor):
        return functional.jvp(lambda a: getattr(F, pool)(a, *args).tanh(), tensor(x0), tensor(v0))[1]

    got = run(pf, pf.nn.functional, PF, lambda v: pf.tensor(v, dtype=pf.float64))
    want = run(torch, torch.nn.functional, TF, lambda v: torch.tensor(v, dtype=torch.float64))
    np.testing.assert_allclose(got.detach().numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_refusals_instead_of_missing_terms(rng):
    """Second derivatives through a fused backward pass without a decomposition (the LSTM's), a custom
    Function or an in-place write into a view raise NotSupportedError naming what is missing; first order
    through them still works."""
    pf.manual_seed(0)
    lstm = pf.nn.LSTM(3, 4)
    x = pf.tensor(rng.standard_normal((5, 2, 3)), dtype=pf.float32, requires_grad=True)
    with pytest.raises(pf.NotSupportedError, match="lstm_sequence_backward.*create_graph"):
        (g,) = pf.autograd.grad(lstm(x)[0].pow(2).sum(), x, create_graph=True)
        pf.autograd.grad(g.sum(), x)

    class Square(pf.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    y = pf.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(pf.NotSupportedError, match="custom autograd Function"):
        pf.autograd.grad(Square.apply(y).sum(), y, create_graph=True)
    z = pf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    buf = z * 1.0
    buf[1:] = z[:2].exp()
    with pytest.raises(pf.NotSupportedError, match="CopySlices"):
        pf.autograd.grad(buf.sum(), z, create_graph=True)
    (first,) = pf.autograd.grad(buf.sum(), z)
    assert first.shape == (3,)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_functional_second_order_tools_match_torch(device, rng):
    _use_device(device, "mul")
    a, b = rng.standard_normal(3), rng.standard_normal((2, 3))
    v1, v2 = rng.standard_normal(3), rng.standard_normal((2, 3))

    def f(x, y):
        return (x.sin() * y).sum() ** 2 + (y * y * x).exp().sum()

    def g(x):
        return (x.tanh() * x.flip(0)).cumsum(0)

    put = lambda v: pf.tensor(v, device=device)  # noqa: E731
    close = lambda p, t: np.testing.assert_allclose(p.to("cpu").detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)  # noqa: E731
    got, want = PF.hessian(f, (put(a), put(b))), TF.hessian(f, (torch.tensor(a), torch.tensor(b)))
    for i in range(2):
        for j in range(2):
            close(got[i][j], want[i][j])
    close(PF.hessian(lambda x: (x ** 3).sum(), put(a)), TF.hessian(lambda x: (x ** 3).sum(), torch.tensor(a)))
    for pf_fn, t_fn in ((PF.hvp, TF.hvp), (PF.vhp, TF.vhp)):
        (out, got), (t_out, want) = (pf_fn(f, (put(a), put(b)), (put(v1), put(v2))),
                                     t_fn(f, (torch.tensor(a), torch.tensor(b)), (torch.tensor(v1), torch.tensor(v2))))
        close(out, t_out)
        for p, t in zip(got, want):
            close(p, t)
    (out, got), (t_out, want) = PF.jvp(g, put(a), put(v1)), TF.jvp(g, torch.tensor(a), torch.tensor(v1))
    close(out, t_out)
    close(got, want)
    x = put(a).requires_grad_(True)
    jac = PF.jacobian(g, x, create_graph=True)
    (through,) = pf.autograd.grad(jac.sum(), x)
    tx = torch.tensor(a, requires_grad=True)
    (t_through,) = torch.autograd.grad(TF.jacobian(g, tx, create_graph=True).sum(), tx)
    close(through, t_through)
