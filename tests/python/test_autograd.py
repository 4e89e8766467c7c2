"""Autograd: every differentiable op's derivative against PyTorch's autograd
and against finite differences, on every device; the engine's semantics
(accumulation, views, in-place ops, errors) as PyTorch's."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import OP_INFOS, OPS, Arg, is_float, make_pf, make_torch, pf_to_numpy

# The classes whose samples keep inputs small enough for finite differences.
GRAD_CLASSES = ("plain", "broadcast", "noncontig", "size1", "scalar0d", "pyscalar")
# Inputs that are state, not values to differentiate (batch_norm's running statistics).
NOT_DIFFERENTIATED = {"batch_norm": {1, 2}, "nll_loss": {2}, "cross_entropy": {2}}
# Piecewise constant: derivative 0, and samples sit on the jumps where finite differences are meaningless.
PIECEWISE_CONSTANT = {"floor", "ceil", "round", "sign"}
# Random ops draw other numbers than PyTorch: their derivative has its own test below.
OWN_TEST = {"dropout"}


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
    assert not missing, f"differentiable ops without a derivative (src/autograd/derivatives.cpp): {missing}"


def test_non_differentiable_families():
    for name, family in pf.op_table():
        if family in ("COMPARE", "ARG_REDUCE", "UNARY_BOOL", "RANDOM"):
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
    dtype = "float64" if "float64" in op.dtypes else "float32"
    tol = dict(rtol=1e-7, atol=1e-9) if dtype == "float64" else dict(rtol=2e-4, atol=1e-5)
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
        assert actual.requires_grad and actual.grad_fn is not None, f"{name}{s!r}: no graph recorded"
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
            assert got is not None, f"{what}: no gradient"
            assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
            assert got.dtype == pf_args[i].dtype, what
            np.testing.assert_allclose(pf_to_numpy(got), want.numpy(), err_msg=what, **tol)
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
            plus = [x.copy() if isinstance(x, np.ndarray) else x for x in values]
            minus = [x.copy() if isinstance(x, np.ndarray) else x for x in values]
            plus[i] = values[i] + eps * v
            minus[i] = values[i] - eps * v
            with pf.no_grad():
                fp = pf_to_numpy(f(plus)[1])
                fm = pf_to_numpy(f(minus)[1])
            numeric = float(np.sum((fp - fm) / (2 * eps) * upstream))
            if not np.isfinite(numeric):  # not differentiable there (var with no degrees of freedom)
                continue
            analytic = float(np.sum(pf_to_numpy(args[i].grad) * v))
            assert abs(numeric - analytic) <= 1e-5 * max(1.0, abs(numeric)), \
                f"{name}{s!r} d/d(arg {i}): finite differences {numeric}, autograd {analytic}"
        checked += 1
    if checked == 0:
        pytest.skip(f"{name}: no sample with a differentiable input")
