"""pyflame.optim (SGD, Adam, AdamW, RMSprop, lr_scheduler) and gradient clipping, against PyTorch on the CPU."""

import math
import warnings

import numpy as np
import pytest

import pyflame as pf
import pyflame.optim  # noqa: F401  (pf.optim)

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-5, 1e-6
# Two parameter groups of different shapes: group 0 holds the first two.
SHAPES = [(4, 3), (3,), (2, 5)]
# Group options PyFlame leaves out (PyTorch's implementation switches; docs/training.md).
TORCH_ONLY_GROUP_KEYS = {"foreach", "fused", "capturable", "differentiable"}


def _weights(rng, shapes=SHAPES):
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _pair_params(ws):
    return ([pf.nn.Parameter(pf.tensor(w)) for w in ws], [torch.nn.Parameter(torch.tensor(w)) for w in ws])


def _groups(params, group1):
    return [{"params": params[:2]}, {"params": params[2:], **group1}]


def _assert_params_close(pparams, tparams, rtol=RTOL, atol=ATOL, msg=""):
    for i, (p, t) in enumerate(zip(pparams, tparams)):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol, err_msg=f"{msg} param {i}")


def _assert_state_dicts_match(psd, tsd, rtol=RTOL, atol=ATOL):
    assert set(psd) == {"state", "param_groups"}
    assert psd["state"].keys() == tsd["state"].keys()
    for idx, tstate in tsd["state"].items():
        pstate = psd["state"][idx]
        assert pstate.keys() == tstate.keys(), idx
        for key, tval in tstate.items():
            pval = pstate[key]
            assert isinstance(pval, pf.Tensor), (idx, key)
            assert tuple(pval.shape) == tuple(tval.shape), (idx, key)
            if key == "step":
                assert pval.dtype == pf.float32 and pval.shape == () and pval.device == "cpu"
                assert pval.item() == tval.item(), idx
            else:
                np.testing.assert_allclose(pval.detach().numpy(), tval.detach().numpy(), rtol=rtol, atol=atol, err_msg=f"{idx} {key}")
    assert len(psd["param_groups"]) == len(tsd["param_groups"])
    for pg, tg in zip(psd["param_groups"], tsd["param_groups"]):
        assert set(pg) <= set(tg) and set(tg) - set(pg) <= TORCH_ONLY_GROUP_KEYS, (set(pg), set(tg))
        for key in pg:
            assert pg[key] == tg[key], key


def _set_grads(rng, pparams, tparams, skip=()):
    """Identical fresh random gradients (None for the indices in `skip`)."""
    for i, (p, t) in enumerate(zip(pparams, tparams)):
        if i in skip:
            p.grad = None
            t.grad = None
            continue
        g = rng.standard_normal(tuple(p.shape)).astype(np.float32)
        p.grad = pf.tensor(g)
        t.grad = torch.tensor(g)


def _step_both_and_compare(rng, pparams, tparams, popt, topt):
    """Three steps of both optimizers on identical fresh gradients; then the same parameters and state."""
    for _ in range(3):
        _set_grads(rng, pparams, tparams)
        popt.step()
        topt.step()
    _assert_params_close(pparams, tparams)
    _assert_state_dicts_match(popt.state_dict(), topt.state_dict())


def _check_against_torch(rng, name, kwargs, group1, steps=5):
    pparams, tparams = _pair_params(_weights(rng))
    popt = getattr(pf.optim, name)(_groups(pparams, group1), **kwargs)
    topt = getattr(torch.optim, name)(_groups(tparams, group1), **kwargs)
    for step in range(steps):
        # Step 2: the second parameter has no gradient and is skipped (its state stays behind).
        _set_grads(rng, pparams, tparams, skip=(1,) if step == 2 else ())
        popt.step()
        topt.step()
        _assert_params_close(pparams, tparams, msg=f"step {step}")
    _assert_state_dicts_match(popt.state_dict(), topt.state_dict())
    for p in pparams:
        assert p.is_leaf and p.grad_fn is None and p.requires_grad


# ---------------------------------------------------------------- the update rules against PyTorch

SGD_OPTIONS = [
    {},
    {"momentum": 0.9},
    {"momentum": 0.9, "dampening": 0.3},
    {"momentum": 0.9, "nesterov": True},
    {"weight_decay": 0.1},
    {"maximize": True},
    {"weight_decay": 0.1, "maximize": True},
    {"momentum": 0.9, "weight_decay": 0.1},
    {"momentum": 0.8, "weight_decay": 0.1, "nesterov": True, "maximize": True},
    {"momentum": 0.5, "dampening": 0.5, "weight_decay": 0.05, "maximize": True},
    {"momentum": 0.9, "nesterov": True, "maximize": True},
]


@pytest.mark.parametrize("options", SGD_OPTIONS, ids=str)
def test_sgd_matches_torch(rng, options):
    _check_against_torch(rng, "SGD", {"lr": 0.1, **options}, {"lr": 0.03})


def test_sgd_groups_with_different_options(rng):
    _check_against_torch(rng, "SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True},
                         {"lr": 0.05, "momentum": 0.5, "dampening": 0.2, "nesterov": False, "weight_decay": 0.1})


ADAM_OPTIONS = [
    {},
    {"amsgrad": True},
    {"weight_decay": 0.1},
    {"maximize": True},
    {"weight_decay": 0.1, "maximize": True},
    {"weight_decay": 0.1, "amsgrad": True, "maximize": True},
    {"betas": (0.8, 0.99), "eps": 1e-6},
    {"betas": (0.0, 0.5), "eps": 1e-3, "amsgrad": True},
]


@pytest.mark.parametrize("options", ADAM_OPTIONS, ids=str)
def test_adam_matches_torch(rng, options):
    _check_against_torch(rng, "Adam", {"lr": 0.01, **options}, {"lr": 0.003, "weight_decay": 0.02})


ADAMW_OPTIONS = [
    {},
    {"amsgrad": True},
    {"weight_decay": 0.1, "maximize": True},
    {"weight_decay": 0, "amsgrad": True, "maximize": True},
    {"betas": (0.5, 0.9), "eps": 1e-4, "weight_decay": 0.3},
]


@pytest.mark.parametrize("options", ADAMW_OPTIONS, ids=str)
def test_adamw_matches_torch(rng, options):
    _check_against_torch(rng, "AdamW", {"lr": 0.01, **options}, {"lr": 0.02, "weight_decay": 0.5})


def test_adam_decoupled_weight_decay_is_adamw(rng):
    _check_against_torch(rng, "Adam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}, {})


RMSPROP_OPTIONS = [
    {},
    {"centered": True},
    {"momentum": 0.9},
    {"centered": True, "momentum": 0.9},
    {"weight_decay": 0.1},
    {"maximize": True},
    {"centered": True, "momentum": 0.5, "weight_decay": 0.1, "maximize": True},
    {"momentum": 0.9, "maximize": True},
    {"alpha": 0.9, "eps": 1e-4, "centered": True},
]


@pytest.mark.parametrize("options", RMSPROP_OPTIONS, ids=str)
def test_rmsprop_matches_torch(rng, options):
    _check_against_torch(rng, "RMSprop", {"lr": 0.01, **options}, {"lr": 0.005, "alpha": 0.95})


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop"])
def test_default_options_match_torch(rng, name):
    pparams, tparams = _pair_params(_weights(rng))
    popt, topt = getattr(pf.optim, name)(pparams), getattr(torch.optim, name)(tparams)
    _step_both_and_compare(rng, pparams, tparams, popt, topt)


@pytest.mark.parametrize("name,kwargs", [("SGD", {"lr": 0.1, "momentum": 0.9}), ("Adam", {"amsgrad": True}),
                                         ("RMSprop", {"centered": True, "momentum": 0.9})])
def test_float64_parameters(rng, name, kwargs):
    ws = [w.astype(np.float64) for w in _weights(rng)]
    pparams = [pf.nn.Parameter(pf.tensor(w)) for w in ws]
    tparams = [torch.nn.Parameter(torch.tensor(w)) for w in ws]
    popt, topt = getattr(pf.optim, name)(pparams, **kwargs), getattr(torch.optim, name)(tparams, **kwargs)
    for _ in range(4):
        for p, t in zip(pparams, tparams):
            g = rng.standard_normal(tuple(p.shape))
            p.grad, t.grad = pf.tensor(g), torch.tensor(g)
        popt.step()
        topt.step()
    _assert_params_close(pparams, tparams, rtol=1e-12, atol=1e-13)
    for state in popt.state.values():
        for key, value in state.items():
            assert value.dtype == (pf.float32 if key == "step" else pf.float64), key


def test_state_is_keyed_by_parameter_and_lives_with_it(rng):
    pparams, _ = _pair_params(_weights(rng))
    opt = pf.optim.Adam(pparams, amsgrad=True)
    for p in pparams:
        p.grad = pf.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
    opt.step()
    assert len(opt.state) == len(pparams)
    for p in pparams:
        state = opt.state[p]
        assert set(state) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
        assert state["step"].shape == () and state["step"].dtype == pf.float32 and state["step"].item() == 1.0
        for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            assert state[key].shape == p.shape and state[key].dtype == p.dtype and state[key].device == p.device
            assert not state[key].requires_grad


# ---------------------------------------------------------------- a model trained with autograd

def _pair_models(rng):
    pmodel = pf.nn.Sequential(pf.nn.Linear(4, 6), pf.nn.Tanh(), pf.nn.Linear(6, 2))
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))
    with torch.no_grad():
        for pp, tp in zip(pmodel.parameters(), tmodel.parameters()):
            w = rng.standard_normal(tuple(tp.shape)).astype(np.float32) * 0.5
            tp.copy_(torch.tensor(w))
            with pf.no_grad():
                pp.copy_(pf.tensor(w))
    return pmodel, tmodel


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5}),
])
def test_training_a_model_with_backward_matches_torch(rng, name, kwargs):
    pmodel, tmodel = _pair_models(rng)
    popt = getattr(pf.optim, name)(pmodel.parameters(), **kwargs)
    topt = getattr(torch.optim, name)(tmodel.parameters(), **kwargs)
    for step in range(5):
        x = rng.standard_normal((8, 4)).astype(np.float32)
        y = rng.standard_normal((8, 2)).astype(np.float32)
        popt.zero_grad()
        topt.zero_grad()
        ploss = pf.mse_loss(pmodel(pf.tensor(x)), pf.tensor(y))
        tloss = torch.nn.functional.mse_loss(tmodel(torch.tensor(x)), torch.tensor(y))
        np.testing.assert_allclose(ploss.item(), tloss.item(), rtol=1e-5)
        ploss.backward()
        tloss.backward()
        popt.step()
        topt.step()
        _assert_params_close(list(pmodel.parameters()), list(tmodel.parameters()), rtol=1e-5, atol=1e-5,
                             msg=f"step {step}")


def test_step_with_closure(rng):
    pmodel, tmodel = _pair_models(rng)
    popt = pf.optim.SGD(pmodel.parameters(), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.1, momentum=0.9)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    y = rng.standard_normal((8, 2)).astype(np.float32)
    grad_mode_in_closure = []

    def pclosure():
        grad_mode_in_closure.append(pf.is_grad_enabled())
        popt.zero_grad()
        loss = pf.mse_loss(pmodel(pf.tensor(x)), pf.tensor(y))
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(tmodel(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        return loss

    for _ in range(3):
        with pf.no_grad():  # the closure still runs with grad mode on
            ploss = popt.step(pclosure)
        tloss = topt.step(tclosure)
        np.testing.assert_allclose(ploss.item(), tloss.item(), rtol=1e-5)
    assert grad_mode_in_closure == [True] * 3
    _assert_params_close(list(pmodel.parameters()), list(tmodel.parameters()), atol=1e-5)
    assert popt.step() is None


# ---------------------------------------------------------------- zero_grad, param groups, errors

@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(rng, set_to_none):
    pparams, _ = _pair_params(_weights(rng))
    opt = pf.optim.SGD(pparams, lr=0.1)
    pparams[1].grad = None
    for p in (pparams[0], pparams[2]):
        p.grad = pf.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
    ptrs = [p.grad.data_ptr() if p.grad is not None else None for p in pparams]
    opt.zero_grad(set_to_none=set_to_none)
    assert pparams[1].grad is None
    for p, ptr in zip((pparams[0], pparams[2]), (ptrs[0], ptrs[2])):
        if set_to_none:
            assert p.grad is None
        else:
            assert p.grad.data_ptr() == ptr  # zeroed in place
            np.testing.assert_array_equal(p.grad.detach().numpy(), np.zeros(tuple(p.shape), np.float32))
    opt.zero_grad()  # the default is set_to_none=True
    assert all(p.grad is None for p in pparams)


def test_param_groups_fill_defaults_and_add_param_group(rng):
    pparams, tparams = _pair_params(_weights(rng))
    popt = pf.optim.SGD([{"params": pparams[:1], "lr": 0.5}], lr=0.1, momentum=0.9)
    topt = torch.optim.SGD([{"params": tparams[:1], "lr": 0.5}], lr=0.1, momentum=0.9)
    popt.add_param_group({"params": pparams[1], "momentum": 0.1})  # a single tensor is a group of one
    topt.add_param_group({"params": tparams[1], "momentum": 0.1})
    popt.add_param_group({"params": iter(pparams[2:])})
    topt.add_param_group({"params": iter(tparams[2:])})
    assert len(popt.param_groups) == 3
    assert popt.param_groups[0]["params"][0] is pparams[0]
    for pg, tg in zip(popt.param_groups, topt.param_groups):
        for key, value in pg.items():
            if key != "params":
                assert value == tg[key], key
    _step_both_and_compare(rng, pparams, tparams, popt, topt)


def test_named_parameters_as_params(rng):
    pmodel, tmodel = _pair_models(rng)
    popt = pf.optim.Adam(pmodel.named_parameters())
    topt = torch.optim.Adam(tmodel.named_parameters())
    assert popt.param_groups[0]["param_names"] == topt.param_groups[0]["param_names"]
    assert popt.state_dict()["param_groups"][0]["param_names"] == ["0.weight", "0.bias", "2.weight", "2.bias"]


def _exception(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return e
    return None


INVALID = [
    ("SGD", {"lr": -0.1}),
    ("SGD", {"lr": 0.1, "momentum": -0.5}),
    ("SGD", {"lr": 0.1, "weight_decay": -1e-3}),
    ("SGD", {"lr": 0.1, "nesterov": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "nesterov": True}),
    ("Adam", {"lr": -1e-3}),
    ("Adam", {"eps": -1e-8}),
    ("Adam", {"betas": (1.0, 0.999)}),
    ("Adam", {"betas": (-0.1, 0.999)}),
    ("Adam", {"betas": (0.9, 1.0)}),
    ("Adam", {"weight_decay": -0.1}),
    ("AdamW", {"betas": (0.9, 1.5)}),
    ("AdamW", {"lr": -1.0}),
    ("RMSprop", {"lr": -0.01}),
    ("RMSprop", {"alpha": -0.5}),
    ("RMSprop", {"eps": -1.0}),
    ("RMSprop", {"momentum": -0.9}),
    ("RMSprop", {"weight_decay": -0.9}),
]


@pytest.mark.parametrize("name,kwargs", INVALID, ids=str)
def test_invalid_arguments_raise_as_torch(rng, name, kwargs):
    w = _weights(rng, [(3,)])[0]
    pe = _exception(lambda: getattr(pf.optim, name)([pf.nn.Parameter(pf.tensor(w))], **kwargs))
    te = _exception(lambda: getattr(torch.optim, name)([torch.nn.Parameter(torch.tensor(w))], **kwargs))
    assert type(te) is ValueError and type(pe) is ValueError
    assert str(pe) == str(te)


def test_invalid_params_raise_as_torch(rng):
    w = _weights(rng, [(3,)])[0]
    p, t = pf.nn.Parameter(pf.tensor(w)), torch.nn.Parameter(torch.tensor(w))
    p2, t2 = pf.nn.Parameter(pf.tensor(w)), torch.nn.Parameter(torch.tensor(w))
    cases = [
        (lambda: pf.optim.SGD(p, lr=0.1), lambda: torch.optim.SGD(t, lr=0.1)),  # a tensor, not an iterable of them
        (lambda: pf.optim.SGD(5, lr=0.1), lambda: torch.optim.SGD(5, lr=0.1)),
        (lambda: pf.optim.SGD([1.0], lr=0.1), lambda: torch.optim.SGD([1.0], lr=0.1)),
        (lambda: pf.optim.SGD([], lr=0.1), lambda: torch.optim.SGD([], lr=0.1)),
        (lambda: pf.optim.Adam([{"params": {p}}]), lambda: torch.optim.Adam([{"params": {t}}])),  # no stable order
        (lambda: pf.optim.Adam([{"params": [p]}, {"params": [p2, p]}]),
         lambda: torch.optim.Adam([{"params": [t]}, {"params": [t2, t]}])),
        (lambda: pf.optim.Adam([p * 2]), lambda: torch.optim.Adam([t * 2])),  # a non-leaf
    ]
    for pf_fn, torch_fn in cases:
        pe, te = _exception(pf_fn), _exception(torch_fn)
        assert te is not None and pe is not None
        assert type(pe) is type(te), (pe, te)
        assert type(te) in (TypeError, ValueError)


def test_unsupported_switches_raise(rng):
    p = pf.nn.Parameter(pf.tensor(_weights(rng, [(3,)])[0]))
    pf.optim.Adam([p], foreach=False)  # accepted and ignored
    pf.optim.SGD([p], foreach=True)
    for make in (lambda: pf.optim.Adam([p], fused=True), lambda: pf.optim.AdamW([p], differentiable=True),
                 lambda: pf.optim.SGD([p], differentiable=True), lambda: pf.optim.RMSprop([p], capturable=True)):
        with pytest.raises(pf.NotSupportedError):
            make()


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_capturable_adam_reads_each_step_count_itself(name, rng):
    """capturable=True: each parameter's step count is a tensor on its device that the update reads (the
    bias corrections computed there, per parameter: the one skipped at step 2 lags), with PyTorch's results."""
    pparams, tparams = _pair_params(_weights(rng))
    popt = getattr(pf.optim, name)(_groups(pparams, {"lr": 0.05}), amsgrad=True, capturable=True)
    topt = getattr(torch.optim, name)(_groups(tparams, {"lr": 0.05}), amsgrad=True)
    for step in range(5):
        _set_grads(rng, pparams, tparams, skip=(1,) if step == 2 else ())
        popt.step()
        topt.step()
        _assert_params_close(pparams, tparams, msg=f"step {step}")
    steps = [popt.state[p]["step"] for p in pparams]
    assert [s.item() for s in steps] == [topt.state[t]["step"].item() for t in tparams] == [5, 4, 5]
    assert all(s.device == p.device and s.dtype == pf.float32 for s, p in zip(steps, pparams))
    assert popt.param_groups[0]["capturable"] is True


def test_repr(rng):
    p = pf.nn.Parameter(pf.tensor(_weights(rng, [(3,)])[0]))
    text = repr(pf.optim.SGD([p], lr=0.5, momentum=0.9))
    assert text.startswith("SGD (\nParameter Group 0\n") and "    lr: 0.5\n" in text and "    momentum: 0.9\n" in text


# ---------------------------------------------------------------- optimizer state dicts

@pytest.mark.parametrize("name,kwargs,group1", [
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True}, {"lr": 0.02}),
    ("Adam", {"lr": 0.01, "amsgrad": True}, {"lr": 0.002, "betas": (0.8, 0.9)}),
    ("AdamW", {"lr": 0.01}, {"weight_decay": 0.3}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.9}, {"alpha": 0.9}),
])
def test_state_dict_round_trip_resumes_training(tmp_path, rng, name, kwargs, group1):
    ws = _weights(rng)
    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(6)]
    cls = getattr(pf.optim, name)

    def run(params, opt, steps):
        for gs in steps:
            for p, g in zip(params, gs):
                p.grad = pf.tensor(g)
            opt.step()

    # Uninterrupted.
    full = [pf.nn.Parameter(pf.tensor(w)) for w in ws]
    opt = cls(_groups(full, group1), **kwargs)
    run(full, opt, grads)

    # Three steps, then a checkpoint into a fresh optimizer (made with other options:
    # the loaded groups replace them), three more.
    first = [pf.nn.Parameter(pf.tensor(w)) for w in ws]
    opt1 = cls(_groups(first, group1), **kwargs)
    run(first, opt1, grads[:3])
    pf.save(opt1.state_dict(), tmp_path / "opt.safetensors")
    saved = pf.load(tmp_path / "opt.safetensors")
    resumed = [pf.nn.Parameter(p.detach().clone()) for p in first]
    opt2 = cls(_groups(resumed, {}), lr=0.5)
    opt2.load_state_dict(saved)
    assert opt2.param_groups[0]["params"][0] is resumed[0]
    for g1, g2 in zip(opt1.param_groups, opt2.param_groups):
        assert {k: v for k, v in g1.items() if k != "params"} == {k: v for k, v in g2.items() if k != "params"}
    run(resumed, opt2, grads[3:])
    for a, b in zip(full, resumed):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())

    # The state dict of PyTorch's optimizer after the same steps matches, and loads the other way too.
    tparams = [torch.nn.Parameter(torch.tensor(w)) for w in ws]
    topt = getattr(torch.optim, name)(_groups(tparams, group1), **kwargs)
    for gs in grads:
        for t, g in zip(tparams, gs):
            t.grad = torch.tensor(g)
        topt.step()
    _assert_state_dicts_match(opt2.state_dict(), topt.state_dict())


def test_load_state_dict_casts_state_to_the_parameters(rng):
    ws = _weights(rng)
    p32 = [pf.nn.Parameter(pf.tensor(w)) for w in ws]
    opt = pf.optim.Adam(p32)
    for p in p32:
        p.grad = pf.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
    opt.step()
    p64 = [pf.nn.Parameter(pf.tensor(w, dtype=pf.float64)) for w in ws]
    opt64 = pf.optim.Adam(p64)
    opt64.load_state_dict(opt.state_dict())
    for p in p64:
        assert opt64.state[p]["exp_avg"].dtype == pf.float64
        assert opt64.state[p]["step"].dtype == pf.float32  # 'step' is kept as is, as in PyTorch


def test_load_state_dict_errors(rng):
    pparams, _ = _pair_params(_weights(rng))
    opt = pf.optim.SGD(_groups(pparams, {}), lr=0.1)
    other = pf.optim.SGD(pparams, lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        other.load_state_dict(opt.state_dict())
    swapped = pf.optim.SGD([{"params": pparams[:1]}, {"params": pparams[1:]}], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size"):
        swapped.load_state_dict(opt.state_dict())


def test_load_state_dict_of_a_step_as_a_number(rng):
    p = pf.nn.Parameter(pf.tensor(_weights(rng, [(3,)])[0]))
    opt = pf.optim.Adam([p])
    sd = {"state": {0: {"step": 4, "exp_avg": pf.zeros(3), "exp_avg_sq": pf.ones(3)}},
          "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0, "amsgrad": False,
                            "params": [0]}]}  # an older layout: no maximize/decoupled_weight_decay
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["maximize"] is False and opt.param_groups[0]["decoupled_weight_decay"] is False
    step = opt.state[p]["step"]
    assert isinstance(step, pf.Tensor) and step.item() == 4.0 and step.dtype == pf.float32


# ---------------------------------------------------------------- learning rate schedulers

SCHEDULERS = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}),
    ("MultiStepLR", {"milestones": [2, 5, 5, 11], "gamma": 0.3}),
    ("ExponentialLR", {"gamma": 0.9}),
    ("CosineAnnealingLR", {"T_max": 7}),
    ("CosineAnnealingLR", {"T_max": 6, "eta_min": 0.01}),
    ("LinearLR", {}),
    ("LinearLR", {"start_factor": 0.1, "end_factor": 0.5, "total_iters": 8}),
    ("LambdaLR", {"lr_lambda": lambda epoch: 0.95 ** epoch + 0.01 * epoch}),
    ("LambdaLR", {"lr_lambda": [lambda epoch: 1 / (epoch + 1), lambda epoch: 0.5 ** (epoch // 4)]}),
]


def _scheduler_pair(rng, name, kwargs, pf_opt=None, torch_opt=None):
    if pf_opt is None:
        pparams, tparams = _pair_params(_weights(rng))
        pf_opt = pf.optim.SGD(_groups(pparams, {"lr": 0.05}), lr=0.1, momentum=0.9)
        torch_opt = torch.optim.SGD(_groups(tparams, {"lr": 0.05}), lr=0.1, momentum=0.9)
    return (pf_opt, getattr(pf.optim.lr_scheduler, name)(pf_opt, **kwargs),
            torch_opt, getattr(torch.optim.lr_scheduler, name)(torch_opt, **kwargs))


def _lr_sequence(opt, schedulers, epochs):
    lrs = [[s.get_last_lr() for s in schedulers]]
    for _ in range(epochs):
        opt.step()
        for s in schedulers:
            s.step()
        lrs.append([s.get_last_lr() for s in schedulers] + [[g["lr"] for g in opt.param_groups]])
    return lrs


@pytest.mark.parametrize("name,kwargs", SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULERS)])
def test_scheduler_matches_torch(rng, name, kwargs):
    popt, psched, topt, tsched = _scheduler_pair(rng, name, kwargs)
    assert [g["initial_lr"] for g in popt.param_groups] == [0.1, 0.05]
    assert _lr_sequence(popt, [psched], 20) == _lr_sequence(topt, [tsched], 20)  # exactly: the same float math
    assert psched.last_epoch == tsched.last_epoch == 20


@pytest.mark.parametrize("first,second", [
    (("LinearLR", {"start_factor": 0.2, "total_iters": 4}), ("ExponentialLR", {"gamma": 0.9})),
    (("StepLR", {"step_size": 4, "gamma": 0.5}), ("CosineAnnealingLR", {"T_max": 10})),
    (("MultiStepLR", {"milestones": [3, 9]}), ("LinearLR", {"start_factor": 0.5})),
])
def test_chained_schedulers_match_torch(rng, first, second):
    popt, p1, topt, t1 = _scheduler_pair(rng, *first)
    _, p2, _, t2 = _scheduler_pair(rng, *second, pf_opt=popt, torch_opt=topt)
    assert _lr_sequence(popt, [p1, p2], 20) == _lr_sequence(topt, [t1, t2], 20)

    popt, p1, topt, t1 = _scheduler_pair(rng, *first)
    _, p2, _, t2 = _scheduler_pair(rng, *second, pf_opt=popt, torch_opt=topt)
    pchain = pf.optim.lr_scheduler.ChainedScheduler([p1, p2])
    tchain = torch.optim.lr_scheduler.ChainedScheduler([t1, t2])
    assert _lr_sequence(popt, [pchain], 20) == _lr_sequence(topt, [tchain], 20)


def _resumed_lrs(path, name, kwargs, lib, split, epochs):
    """The lrs of `epochs` epochs, with the optimizer and scheduler saved after `split` (PyFlame's
    through a pf.save file at `path`) and loaded into fresh ones."""
    opt_cls, mod = (pf.optim.SGD, pf.optim) if lib == "pf" else (torch.optim.SGD, torch.optim)

    def make():
        ps = [pf.nn.Parameter(pf.zeros(2)), pf.nn.Parameter(pf.zeros(3))] if lib == "pf" else \
            [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))]
        opt = opt_cls([{"params": ps[:1]}, {"params": ps[1:], "lr": 0.05}], lr=0.1)
        return opt, getattr(mod.lr_scheduler, name)(opt, **kwargs)

    opt, sched = make()
    lrs = []
    for _ in range(split):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    opt_sd, sched_sd = opt.state_dict(), sched.state_dict()
    if lib == "pf":
        pf.save({"optimizer": opt_sd, "scheduler": sched_sd}, path)
        opt_sd, sched_sd = pf.load(path).values()
    opt, sched = make()
    opt.load_state_dict(opt_sd)
    sched.load_state_dict(sched_sd)
    for _ in range(epochs - split):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    return lrs, sched_sd


@pytest.mark.parametrize("name,kwargs", SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SCHEDULERS)])
def test_scheduler_state_dict_round_trip(tmp_path, rng, name, kwargs):
    plrs, psd = _resumed_lrs(tmp_path / "sched.safetensors", name, kwargs, "pf", 7, 20)
    tlrs, tsd = _resumed_lrs(None, name, kwargs, "torch", 7, 20)
    assert plrs == tlrs
    popt, psched, topt, tsched = _scheduler_pair(rng, name, kwargs)
    assert plrs == [lrs[0] for lrs in _lr_sequence(popt, [psched], 20)[1:]]  # same as uninterrupted
    assert set(psd) == set(tsd)
    for key, value in psd.items():
        if key != "lr_lambdas":
            assert value == tsd[key], key


def test_scheduler_state_dict_of_a_callable_lambda(rng):
    class Warmup:
        def __init__(self, n):
            self.n = n

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.n)

    opt = pf.optim.SGD([pf.nn.Parameter(pf.zeros(2))], lr=1.0)
    sched = pf.optim.lr_scheduler.LambdaLR(opt, Warmup(4))
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"n": 4}]
    other = pf.optim.lr_scheduler.LambdaLR(pf.optim.SGD([pf.nn.Parameter(pf.zeros(2))], lr=1.0), Warmup(10))
    other.load_state_dict(sd)
    assert other.lr_lambdas[0].n == 4


def test_scheduler_step_with_epoch_uses_the_closed_form(rng):
    popt, psched, topt, tsched = _scheduler_pair(rng, "StepLR", {"step_size": 3, "gamma": 0.5})
    popt.step()
    topt.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        psched.step(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tsched.step(7)
    assert psched.get_last_lr() == tsched.get_last_lr() == [0.1 * 0.25, 0.05 * 0.25]


def test_scheduler_warnings_and_errors(rng):
    opt = pf.optim.SGD([pf.nn.Parameter(pf.zeros(2))], lr=1.0)
    sched = pf.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()
    with pytest.raises(TypeError, match="is not an Optimizer"):
        pf.optim.lr_scheduler.StepLR(object(), step_size=2)
    fresh = pf.optim.SGD([pf.nn.Parameter(pf.zeros(2))], lr=1.0)
    with pytest.raises(KeyError, match="initial_lr"):
        pf.optim.lr_scheduler.StepLR(fresh, step_size=2, last_epoch=3)
    with pytest.raises(ValueError):
        pf.optim.lr_scheduler.LinearLR(fresh, start_factor=0)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        pf.optim.lr_scheduler.LambdaLR(fresh, [lambda e: 1.0, lambda e: 1.0])


# ---------------------------------------------------------------- gradient clipping

def _pair_params_with_grads(rng, scale=1.0, shapes=SHAPES):
    pparams, tparams = _pair_params(_weights(rng, shapes))
    for p, t in zip(pparams, tparams):
        g = (rng.standard_normal(tuple(p.shape)) * scale).astype(np.float32)
        p.grad, t.grad = pf.tensor(g), torch.tensor(g)
    return pparams, tparams


def _assert_grads_close(pparams, tparams, rtol=RTOL, atol=ATOL):
    for p, t in zip(pparams, tparams):
        if t.grad is None:
            assert p.grad is None
        else:
            np.testing.assert_allclose(p.grad.detach().numpy(), t.grad.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, -math.inf, 0, 3.0, 0.5, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])  # clips / leaves the gradients alone
def test_clip_grad_norm_matches_torch(rng, norm_type, max_norm):
    pparams, tparams = _pair_params_with_grads(rng, scale=2.0)
    pparams[1].grad = None
    tparams[1].grad = None
    ptotal = pf.nn.utils.clip_grad_norm_(pparams, max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type=norm_type)
    assert isinstance(ptotal, pf.Tensor) and ptotal.shape == () and ptotal.dtype == pf.float32
    np.testing.assert_allclose(ptotal.item(), ttotal.item(), rtol=RTOL)
    _assert_grads_close(pparams, tparams)


def test_clip_grad_norm_of_one_tensor_and_of_a_generator(rng):
    pparams, tparams = _pair_params_with_grads(rng, scale=3.0)
    ptotal = pf.nn.utils.clip_grad_norm_(pparams[0], 1.0)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams[0], 1.0)
    np.testing.assert_allclose(ptotal.item(), ttotal.item(), rtol=RTOL)
    ptotal = pf.nn.utils.clip_grad_norm_((p for p in pparams), 0.7, norm_type=1.0)
    ttotal = torch.nn.utils.clip_grad_norm_((t for t in tparams), 0.7, norm_type=1.0)
    np.testing.assert_allclose(ptotal.item(), ttotal.item(), rtol=RTOL)
    _assert_grads_close(pparams, tparams)
    with pytest.warns(UserWarning, match="empty generator"):
        total = pf.nn.utils.clip_grad_norm_((p for p in []), 1.0)
    assert total.item() == 0.0


def test_clip_grad_norm_of_a_model_after_backward(rng):
    pmodel, tmodel = _pair_models(rng)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    y = (rng.standard_normal((8, 2)) * 10).astype(np.float32)
    pf.mse_loss(pmodel(pf.tensor(x)), pf.tensor(y)).backward()
    torch.nn.functional.mse_loss(tmodel(torch.tensor(x)), torch.tensor(y)).backward()
    ptotal = pf.nn.utils.clip_grad_norm_(pmodel.parameters(), 1.0)
    ttotal = torch.nn.utils.clip_grad_norm_(tmodel.parameters(), 1.0)
    np.testing.assert_allclose(ptotal.item(), ttotal.item(), rtol=1e-5)
    _assert_grads_close(list(pmodel.parameters()), list(tmodel.parameters()), atol=1e-5)


def test_clip_grad_norm_nonfinite(rng):
    pparams, tparams = _pair_params_with_grads(rng)
    with pf.no_grad():
        pparams[0].grad.fill_(math.inf)
    tparams[0].grad.fill_(math.inf)
    with pytest.raises(RuntimeError, match="non-finite"):
        pf.nn.utils.clip_grad_norm_(pparams, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(tparams, 1.0, error_if_nonfinite=True)
    assert math.isinf(pf.nn.utils.clip_grad_norm_(pparams, 1.0).item())


def test_clip_grad_norm_float16(rng):
    ws = _weights(rng)
    pparams = [pf.nn.Parameter(pf.tensor(w, dtype=pf.float16)) for w in ws]
    tparams = [torch.nn.Parameter(torch.tensor(w, dtype=torch.float16)) for w in ws]
    for p, t in zip(pparams, tparams):
        g = (rng.standard_normal(tuple(p.shape)) * 200).astype(np.float16)  # squares overflow float16
        p.grad, t.grad = pf.tensor(g), torch.tensor(g)
    ptotal = pf.nn.utils.clip_grad_norm_(pparams, 1.0)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams, 1.0)
    assert ptotal.dtype == pf.float16 and math.isfinite(ptotal.item())
    np.testing.assert_allclose(ptotal.item(), ttotal.item(), rtol=1e-3)
    for p, t in zip(pparams, tparams):
        assert p.grad.dtype == pf.float16
        np.testing.assert_allclose(p.grad.float().detach().numpy(), t.grad.float().detach().numpy(), rtol=2e-3, atol=1e-4)


@pytest.mark.parametrize("clip_value", [0.5, 1.2, 0.0, -0.3])
def test_clip_grad_value_matches_torch(rng, clip_value):
    pparams, tparams = _pair_params_with_grads(rng)
    pparams[2].grad = None
    tparams[2].grad = None
    with pf.no_grad():
        pparams[0].grad[0, 0] = math.nan
    tparams[0].grad[0, 0] = math.nan
    assert pf.nn.utils.clip_grad_value_(pparams, clip_value) is None
    torch.nn.utils.clip_grad_value_(tparams, clip_value)
    for p, t in zip(pparams, tparams):
        if t.grad is None:
            assert p.grad is None
        else:
            np.testing.assert_array_equal(p.grad.detach().numpy(), t.grad.detach().numpy())
    pf.nn.utils.clip_grad_value_(pparams[1], 0.1)  # one tensor
    assert np.abs(pparams[1].grad.detach().numpy()).max() <= 0.1
