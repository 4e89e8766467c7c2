"""Training end to end: seed 003's loop in PyFlame terms against the same loop
in PyTorch (same initial weights and data), and the main demo."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import pf_to_numpy


def _use(device):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    pf.set_device(device)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_seed_003_training_loop_matches_torch(device, rng):
    _use(device)
    torch.manual_seed(0)
    tmodel = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))
    model = pf.nn.Sequential(pf.nn.Linear(64, 128), pf.nn.GELU(), pf.nn.Linear(128, 64))
    with pf.no_grad():
        for p, t in zip(model.parameters(), tmodel.parameters()):
            p.copy_(pf.tensor(t.detach().numpy()))
    model.to(device)
    x = rng.standard_normal((48, 64)).astype(np.float32)
    y = rng.standard_normal((48, 64)).astype(np.float32)
    dataloader = pf.utils.data.DataLoader(pf.utils.data.TensorDataset(pf.tensor(x), pf.tensor(y)), batch_size=16)
    tloader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y)),
                                          batch_size=16)
    optimizer = pf.optim.AdamW(model.parameters(), lr=1e-3)
    toptimizer = torch.optim.AdamW(tmodel.parameters(), lr=1e-3)
    for epoch in range(3):
        for (inputs, targets), (tinputs, ttargets) in zip(dataloader, tloader):
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad()
            loss = pf.nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()
            toptimizer.zero_grad()
            tloss = torch.nn.functional.mse_loss(tmodel(tinputs), ttargets)
            tloss.backward()
            toptimizer.step()
        pf.synchronize()
        assert loss.item() == pytest.approx(tloss.item(), rel=1e-4), epoch
    for p, t in zip(model.parameters(), tmodel.parameters()):
        np.testing.assert_allclose(pf_to_numpy(p), t.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name,kwargs,scheduler,sched_kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), "StepLR", dict(step_size=2, gamma=0.5)),
    ("Adam", dict(lr=1e-2, amsgrad=True), "MultiStepLR", dict(milestones=[2, 4, 4], gamma=0.3)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1), "CosineAnnealingLR", dict(T_max=5, eta_min=1e-4)),
], ids=["SGD", "Adam-amsgrad", "AdamW"])
@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_checkpoint_mid_training_continues_identically(tmp_path, rng, name, kwargs, scheduler, sched_kwargs, device):
    """model + optimizer + scheduler saved mid-training with pf.save, loaded into fresh objects: the
    parameters and buffers after more steps are bit for bit those of the run that never stopped."""
    _use(device)
    x = pf.tensor(rng.standard_normal((32, 8)).astype(np.float32), device=device)
    y = pf.tensor(rng.standard_normal((32, 2)).astype(np.float32), device=device)

    def make(seed, lr):
        pf.manual_seed(seed)
        m = pf.nn.Sequential(pf.nn.Linear(8, 16), pf.nn.BatchNorm1d(16), pf.nn.Tanh(), pf.nn.Linear(16, 2)).to(device)
        opt = getattr(pf.optim, name)(m.parameters(), **dict(kwargs, lr=lr))
        return m, opt, getattr(pf.optim.lr_scheduler, scheduler)(opt, **sched_kwargs)

    def train(m, opt, sched, steps):
        for _ in range(steps):
            opt.zero_grad()
            pf.mse_loss(m(x), y).backward()
            opt.step()
            sched.step()

    m, opt, sched = make(3, kwargs["lr"])
    train(m, opt, sched, 7)
    want = {k: pf_to_numpy(v) for k, v in m.state_dict().items()}
    want_lr = sched.get_last_lr()

    m, opt, sched = make(3, kwargs["lr"])
    train(m, opt, sched, 3)
    pf.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "epoch": 3},
            tmp_path / "checkpoint.safetensors")
    del m, opt, sched
    m2, opt2, sched2 = make(4, 0.5)  # other weights and options: the checkpoint replaces them
    ckpt = pf.load(tmp_path / "checkpoint.safetensors")
    m2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optimizer"])
    sched2.load_state_dict(ckpt["scheduler"])
    assert ckpt["epoch"] == 3
    train(m2, opt2, sched2, 4)
    got = m2.state_dict()
    assert list(got) == list(want) and got["1.num_batches_tracked"].item() == 7
    for k, w in want.items():
        np.testing.assert_array_equal(pf_to_numpy(got[k]), w, err_msg=k)
    assert sched2.get_last_lr() == want_lr and opt2.param_groups[0]["lr"] == want_lr[0]


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_demo_trains_the_digits_cnn(device, tmp_path):
    """The README's demo, on each device: its data stays on the CPU and each batch is moved with
    .to(device), as PyTorch scripts do (the test batches too, or the model's device raises)."""
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    from pyflame import demo

    accuracy = demo.main(["--epochs", "4", "--device", device, "--plot", str(tmp_path / "curves.png")])
    assert accuracy >= 0.95
    assert (tmp_path / "curves.png").stat().st_size > 10_000


def test_demo_runs_without_its_extras(tmp_path, monkeypatch, capsys):
    """After a plain `pip install .` (no tqdm, no matplotlib) the demo trains, printing each epoch,
    and says what the demo extra adds instead of stopping with ModuleNotFoundError."""
    from pyflame import demo

    for name in ("tqdm", "matplotlib"):
        monkeypatch.setitem(__import__("sys").modules, name, None)  # import raises ImportError
    demo.main(["--epochs", "1", "--device", "cpu", "--plot", str(tmp_path / "curves.png")])
    out = capsys.readouterr().out
    assert "epoch  1: loss" in out and "pip install .[demo]" in out
    assert not (tmp_path / "curves.png").exists()


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_optimizers_match_torch_on_each_device(name, kwargs, device, rng):
    """Five steps with the same gradients under a learning-rate schedule: parameters equal
    torch.optim's (CPU) on either device.

    One group of 70 parameters: more than one fused launch holds, sizes across the GPU's chunks
    (empty, one element, several chunks), and a float64 parameter among float32 ones (its own call)."""
    _use(device)
    shapes = [(7, 5), (5,), (0,), (1,), (3000,), (2, 2100)] + [(3,)] * 63 + [(4, 2)]
    w0 = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    w0[-1] = w0[-1].astype(np.float64)
    params = [pf.tensor(w, device=device, requires_grad=True) for w in w0]
    tparams = [torch.tensor(w, requires_grad=True) for w in w0]
    opt = getattr(pf.optim, name)(params, **kwargs)
    topt = getattr(torch.optim, name)(tparams, **kwargs)
    sched = pf.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    tsched = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=4)
    for step in range(5):
        for i, (p, t) in enumerate(zip(params, tparams)):
            if step == 2 and i % 7 == 1:  # no gradient: skipped, its step count falls behind
                p.grad, t.grad = None, None
                continue
            g = rng.uniform(-1, 1, t.shape).astype(w0[i].dtype)
            p.grad = pf.tensor(g, device=device)
            t.grad = torch.tensor(g)
        opt.step()
        topt.step()
        sched.step()
        tsched.step()
    for i, (p, t) in enumerate(zip(params, tparams)):
        assert p.dtype == (pf.float64 if i == len(params) - 1 else pf.float32)
        np.testing.assert_allclose(pf_to_numpy(p), t.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"param {i}")


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_fused_step_in_place_on_views(device, rng):
    """The in-place update writes through a parameter that is a transposed or strided view."""
    _use(device)
    base = pf.tensor(rng.standard_normal((6, 8)).astype(np.float32), device=device)
    views = [base[:, :4].T, base[:, 4:][::2]]
    grads = [pf.tensor(rng.standard_normal(tuple(v.shape)).astype(np.float32), device=device) for v in views]
    bufs = [pf.tensor(rng.standard_normal(tuple(v.shape)).astype(np.float32), device=device) for v in views]
    expected = [pf_to_numpy(pf.sgd_step(v, g, b, lr=0.1, momentum=0.9)) for v, g, b in zip(views, grads, bufs)]
    untouched = pf_to_numpy(base[1::2, 4:])
    pf._C.sgd_step_(views, grads, bufs, lr=0.1, momentum=0.9)
    for v, e in zip(views, expected):
        np.testing.assert_allclose(pf_to_numpy(v), e, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(pf_to_numpy(base[1::2, 4:]), untouched)


def test_fused_step_argument_errors(rng):
    p = [pf.randn(3), pf.randn(2, dtype=pf.float64)]
    g = [pf.randn(3), pf.randn(2, dtype=pf.float64)]
    with pytest.raises(TypeError, match="share a dtype"):
        pf._C.sgd_step_(p, g, lr=0.1)
    with pytest.raises(ValueError, match="2 parameters but 1 gradients"):
        pf._C.sgd_step_(p, g[:1], lr=0.1)
    with pytest.raises(ValueError, match="momentum_buffer is needed"):
        pf._C.sgd_step_(p[:1], g[:1], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="has shape"):
        pf._C.rmsprop_step_(p[:1], g[:1], [pf.randn(4)], lr=0.1)
