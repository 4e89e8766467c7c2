"""copy.deepcopy and pickle of tensors, Parameters and Modules, against PyTorch's behaviour."""

import copy
import pickle

import numpy as np
import pytest
import torch

import pyflame as pf
import pyflame.nn as nn
from op_registry import ALL_DTYPES, PF_DTYPE, TORCH_DTYPE, make_values, pf_to_torch

FLOATS = ("float16", "bfloat16", "float32", "float64")


def _pair(rng, shape, dtype, requires_grad=False):
    """A pyflame tensor and a torch tensor of the same random values."""
    values = make_values(rng, shape, dtype, low=-100, high=100)
    t = torch.from_numpy(np.array(values)).to(TORCH_DTYPE[dtype]).requires_grad_(requires_grad)
    p = pf.tensor(values).to(PF_DTYPE[dtype])
    if requires_grad:
        p.requires_grad_(True)
    return p, t


def _assert_same(p, t, what=""):
    assert type(p).__name__ == type(t).__name__, what  # Tensor / Parameter
    assert p.requires_grad == t.requires_grad and p.is_leaf == t.is_leaf, what
    assert tuple(p.shape) == tuple(t.shape) and pf_to_torch(p).dtype == t.dtype, what
    assert torch.equal(pf_to_torch(p), t.detach()), what


def _round_trip(x, protocol=pickle.HIGHEST_PROTOCOL):
    return pickle.loads(pickle.dumps(x, protocol=protocol))


def _layouts(p, t):
    """The tensor, a transposed view and a strided view of it (2-d inputs)."""
    yield "contiguous", p, t
    if p.dim() == 2:
        yield "transposed", p.T, t.T
        yield "strided", p[:, ::2], t[:, ::2]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(3, 5), (), (0, 3)], ids=["matrix", "0d", "empty"])
@pytest.mark.parametrize("how", ["pickle2", "pickle5", "deepcopy"])
def test_tensor_round_trip_matches_torch(rng, dtype, shape, how):
    copy_of = {"pickle2": lambda x: _round_trip(x, 2), "pickle5": lambda x: _round_trip(x, 5),
               "deepcopy": copy.deepcopy}[how]
    for requires_grad in (False, True) if dtype in FLOATS else (False,):
        p, t = _pair(rng, shape, dtype, requires_grad)
        for layout, pv, tv in _layouts(p, t):
            if layout != "contiguous" and requires_grad:
                continue  # a view of a tensor that requires grad is not a leaf (below)
            back, want = copy_of(pv), copy_of(tv)
            _assert_same(back, want, (layout, requires_grad))
            _assert_same(back, tv, (layout, requires_grad))
            assert back.is_contiguous() and back.device == pv.device and back.grad is None


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_copy_is_independent(rng, how):
    p, _ = _pair(rng, (4, 3), "float32")
    back = _round_trip(p) if how == "pickle" else copy.deepcopy(p)
    before = p.detach().numpy().copy()
    back.fill_(7.0)
    np.testing.assert_array_equal(p.detach().numpy(), before)


def test_deepcopy_copies_the_grad_and_pickle_drops_it_like_torch(rng):
    p, t = _pair(rng, (3, 2), "float32", requires_grad=True)
    g = make_values(rng, (3, 2), "float32")
    p.grad, t.grad = pf.tensor(g), torch.tensor(g)
    dp, dt = copy.deepcopy(p), copy.deepcopy(t)
    _assert_same(dp, dt)
    np.testing.assert_array_equal(dp.grad.detach().numpy(), dt.grad.detach().numpy())
    dp.grad.fill_(0.0)
    np.testing.assert_array_equal(p.grad.detach().numpy(), g)  # the copy's grad is its own
    assert _round_trip(p).grad is None and _round_trip(t).grad is None


def test_non_leaf_deepcopy_raises_and_pickle_saves_values_like_torch(rng):
    p, t = _pair(rng, (2, 3), "float32", requires_grad=True)
    py, ty = p * 2, t * 2
    with pytest.raises(RuntimeError, match=r"Only Tensors created explicitly by the user \(graph leaves\)"):
        copy.deepcopy(ty)
    with pytest.raises(RuntimeError, match=r"Only Tensors created explicitly by the user \(graph leaves\)"):
        copy.deepcopy(py)
    back, want = _round_trip(py), _round_trip(ty)
    _assert_same(back, want)  # a new leaf that requires grad
    _assert_same(copy.deepcopy(py.detach()), copy.deepcopy(ty.detach()))


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_one_tensor_reached_twice_stays_one(rng, how):
    copy_of = _round_trip if how == "pickle" else copy.deepcopy
    for lib in ("pf", "torch"):
        x = pf.tensor(make_values(rng, (3,), "float32")) if lib == "pf" else torch.randn(3)
        a, b, c = copy_of([x, x, {"again": x}])
        assert a is b and b is c["again"] and a is not x, lib
        a.fill_(1.0)
        assert c["again"].tolist() == [1.0, 1.0, 1.0], lib


@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_parameter_stays_a_parameter(rng, requires_grad, how):
    copy_of = _round_trip if how == "pickle" else copy.deepcopy
    values = make_values(rng, (4, 2), "float32")
    p = nn.Parameter(pf.tensor(values), requires_grad=requires_grad)
    t = torch.nn.Parameter(torch.tensor(values), requires_grad=requires_grad)
    p.tag = t.tag = {"lr_scale": 0.5}
    back, want = copy_of(p), copy_of(t)
    assert isinstance(back, nn.Parameter) and isinstance(want, torch.nn.Parameter)
    _assert_same(back, want)
    # Attributes travel with it (PyTorch's deepcopy of a Parameter drops them, its pickle keeps them).
    assert back.tag == {"lr_scale": 0.5} and back.tag is not p.tag
    assert how == "deepcopy" or want.tag == back.tag


def _model(rng):
    """Conv2d + BatchNorm2d (running stats and num_batches_tracked updated by one training forward) + Linear."""
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                      nn.Linear(4 * 5 * 5, 6))
    with pf.no_grad():
        for p in m.parameters():  # away from the initial values, so a copy that misses them fails
            p.copy_(pf.tensor(make_values(rng, tuple(p.shape), "float32", low=-0.5, high=0.5)))
        m(pf.tensor(make_values(rng, (8, 3, 5, 5), "float32")))
    return m.eval()


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_module_copy_computes_the_same_and_is_independent(rng, how):
    m = _model(rng)
    c = _round_trip(m) if how == "pickle" else copy.deepcopy(m)
    assert type(c) is nn.Sequential and not c.training
    assert [type(x) for x in c] == [type(x) for x in m]
    x = pf.tensor(make_values(rng, (2, 3, 5, 5), "float32"))
    want = m(x).detach().numpy()
    np.testing.assert_array_equal(c(x).detach().numpy(), want)
    for (name, a), (_, b) in zip(m.state_dict(keep_vars=True).items(), c.state_dict(keep_vars=True).items()):
        assert a is not b and type(a) is type(b) and a.requires_grad == b.requires_grad, name
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)
    assert c[1].num_batches_tracked.item() == 1 and c[1].running_var.detach().numpy().std() > 0

    # the copy trains on its own parameters
    c.train()
    pf.mse_loss(c(x), pf.zeros(2, 6)).backward()
    assert all(p.grad is None for p in m.parameters()) and all(p.grad is not None for p in c.parameters())
    with pf.no_grad():
        c[0].weight.mul_(2.0)
    np.testing.assert_array_equal(m(x).detach().numpy(), want)


def test_deepcopy_of_a_state_dict_keeps_the_best_weights(rng):
    """The usual early-stopping pattern: copy.deepcopy(model.state_dict()), train on, load it back."""
    m = _model(rng)
    x = pf.tensor(make_values(rng, (2, 3, 5, 5), "float32"))
    want = m(x).detach().numpy()
    best = copy.deepcopy(m.state_dict())
    with pf.no_grad():
        for p in m.parameters():
            p.add_(1.0)
    assert not np.array_equal(m(x).detach().numpy(), want)
    m.load_state_dict(best)
    np.testing.assert_array_equal(m(x).detach().numpy(), want)


def test_device_tensor_pickles_onto_its_device(rng):
    if not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    values = make_values(rng, (3, 4), "float32")
    g = pf.tensor(values, device="rocm")
    for back in (_round_trip(g), _round_trip(g.T), copy.deepcopy(g)):
        assert back.device == g.device
    np.testing.assert_array_equal(_round_trip(g.T).cpu().detach().numpy(), values.T)
