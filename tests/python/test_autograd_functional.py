"""pf.autograd.functional's vjp and jacobian against torch.autograd.functional on fresh random inputs:
one and several inputs and outputs, outputs that do not depend on an input (zeros; strict raises),
and forward mode's NotSupportedError (the second-order tools: test_autograd_higher.py)."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import make_values

AF, TAF = pf.autograd.functional, torch.autograd.functional


def _placed(device):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip("no GPU")


def _pair(rng, shape, device):
    a = make_values(rng, shape, "float64")
    return pf.tensor(a, device=device), torch.tensor(a)


def _close(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w)
        return
    assert tuple(got.shape) == tuple(want.shape)
    assert not got.requires_grad
    np.testing.assert_allclose(got.to("cpu").detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)


def _inputs(rng, shapes, device, single):
    """(ours, torch's): fresh random tensors of `shapes`, a tuple of them, or the one tensor where `single`."""
    pairs = [_pair(rng, s, device) for s in shapes]
    ours, theirs = tuple(p for p, _ in pairs), tuple(t for _, t in pairs)
    return (ours[0], theirs[0]) if single else (ours, theirs)


FUNCS = {  # (a function both libraries run as written, input shapes)
    "one to one": (lambda x: (x.sin() * x).sum(-1), [(3, 4)]),
    "two to one": (lambda x, w: x @ w, [(2, 3), (3, 4)]),
    "two to two": (lambda x, y: (x * y, (x + y).exp().sum()), [(2, 2), (2, 2)]),
    "unused input": (lambda x, y: x.tanh(), [(3,), (2,)]),
}


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("name", list(FUNCS))
@pytest.mark.parametrize("tool", ["jacobian", "vjp"])
def test_matches_torch(device, name, tool, rng):
    _placed(device)
    f, shapes = FUNCS[name]
    ours, theirs = _inputs(rng, shapes, device, len(shapes) == 1)
    if tool == "jacobian":
        _close(AF.jacobian(f, ours), TAF.jacobian(f, theirs))
        return
    outputs = f(*theirs) if isinstance(theirs, tuple) else f(theirs)
    single_output = not isinstance(outputs, tuple)
    v_ours, v_theirs = _inputs(rng, [tuple(o.shape) for o in ((outputs,) if single_output else outputs)], device,
                               single_output)
    _close(AF.vjp(f, ours, v_ours), TAF.vjp(f, theirs, v_theirs))


def test_vjp_of_a_scalar_needs_no_v_and_inputs_are_left_alone(rng):
    x, tx = _pair(rng, (5,), "cpu")
    out, g = AF.vjp(lambda t: (t * t).sum(), x)
    tout, tg = TAF.vjp(lambda t: (t * t).sum(), tx)
    _close((out, g), (tout, tg))
    assert not x.requires_grad and x.grad is None
    with pytest.raises(RuntimeError, match="single value"):
        AF.vjp(lambda t: t * 2, x)
    with pytest.raises(RuntimeError, match="shapes"):
        AF.vjp(lambda t: t * 2, x, pf.ones(4, dtype=pf.float64))


def test_strict_raises_for_an_input_the_outputs_do_not_depend_on(rng):
    x, _ = _pair(rng, (3,), "cpu")
    y, _ = _pair(rng, (2,), "cpu")
    with pytest.raises(RuntimeError, match="does not depend on input 1"):
        AF.jacobian(lambda a, b: a.tanh(), (x, y), strict=True)
    with pytest.raises(RuntimeError, match="does not depend on input 1"):
        AF.vjp(lambda a, b: a.sum(), (x, y), strict=True)


def test_forward_mode_is_refused(rng):
    """(The second-order tools are in test_autograd_higher.py.)"""
    x, _ = _pair(rng, (3,), "cpu")
    with pytest.raises(pf.NotSupportedError, match="forward-mode"):
        AF.jacobian(lambda t: t * 2, x, strategy="forward-mode")
