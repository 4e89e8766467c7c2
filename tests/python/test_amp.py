"""Autocast and GradScaler against torch.autocast / torch.amp.GradScaler (CPU), and on the GPU."""

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
@pytest.mark.parametrize("low", ["bfloat16", "float16"])
def test_autocast_dtypes(device, low, rng):
    _use(device)
    lowp = getattr(pf, low)
    a = pf.tensor(rng.uniform(-1, 1, (4, 8)).astype(np.float32))
    w = pf.tensor(rng.uniform(-1, 1, (3, 8)).astype(np.float32))
    img = pf.tensor(rng.uniform(-1, 1, (2, 3, 6, 6)).astype(np.float32))
    k = pf.tensor(rng.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32))
    with pf.autocast(device, dtype=lowp):
        assert pf.is_autocast_enabled(device)
        h = a @ w.T
        assert h.dtype == lowp
        assert pf.linear(a, w).dtype == lowp
        assert pf.conv2d(img, k).dtype == lowp
        # float32 ops widen low-precision inputs; PyTorch's CPU lists keep these three
        widened = pf.float32 if device == "rocm" else lowp
        assert pf.softmax(h, -1).dtype == widened
        assert pf.layer_norm(h, (3,)).dtype == widened
        assert pf.sum(h).dtype == widened
        assert pf.logsumexp(h, 1).dtype == widened
        assert pf.mse_loss(h, h).dtype == pf.float32  # on both devices' lists
        assert (h + 1).dtype == lowp  # others keep their inputs' dtype
        assert (h + a[:, :3]).dtype == pf.float32  # and promote
        with pf.autocast(device, enabled=False):
            assert (a @ w.T).dtype == pf.float32
    assert (a @ w.T).dtype == pf.float32
    assert not pf.is_autocast_enabled(device)


_CPU_LIST_PROBES = {
    "exp": (pf.exp, torch.exp), "log1p": (pf.log1p, torch.log1p), "pow": (lambda t: pf.pow(t, t), lambda t: torch.pow(t, t)),
    "softmax": (lambda t: pf.softmax(t, -1), lambda t: torch.softmax(t, -1)),
    "log_softmax": (lambda t: pf.log_softmax(t, -1), lambda t: torch.log_softmax(t, -1)),
    "layer_norm": (lambda t: pf.layer_norm(t, (6,)), lambda t: torch.nn.functional.layer_norm(t, (6,))),
    "sum": (pf.sum, torch.sum), "prod": (pf.prod, torch.prod), "cumsum": (lambda t: pf.cumsum(t, 0), lambda t: torch.cumsum(t, 0)),
    "var": (pf.var, torch.var), "matmul": (lambda t: t @ t.T, lambda t: t @ t.T),
    "linear": (lambda t: pf.linear(t, t), lambda t: torch.nn.functional.linear(t, t)),
    "mse_loss": (lambda t: pf.mse_loss(t, t), lambda t: torch.nn.functional.mse_loss(t, t)),
    "kl_div": (lambda t: pf.kl_div(t, t, reduction="batchmean"),
               lambda t: torch.nn.functional.kl_div(t, t, reduction="batchmean")),
    "binary_cross_entropy": (lambda t: pf.binary_cross_entropy(t * 0.5, t * 0.5),
                             lambda t: torch.nn.functional.binary_cross_entropy(t * 0.5, t * 0.5)),
    "add": (lambda t: t + 1, lambda t: t + 1),
    "linalg_vector_norm": (pf.linalg.vector_norm, torch.linalg.vector_norm),
    "linalg_matrix_norm": (pf.linalg.matrix_norm, torch.linalg.matrix_norm),
    "logsumexp": (lambda t: pf.logsumexp(t, 1), lambda t: torch.logsumexp(t, 1)),
    "addcmul": (lambda t: pf.addcmul(t, t, t, value=0.5), lambda t: torch.addcmul(t, t, t, value=0.5)),
    "addcdiv": (lambda t: pf.addcdiv(t, t, t), lambda t: torch.addcdiv(t, t, t)),
    "nansum": (lambda t: pf.nansum(t, 1), lambda t: torch.nansum(t, 1)),
    "nanmean": (lambda t: pf.nanmean(t, 1), lambda t: torch.nanmean(t, 1)),
}


@pytest.mark.parametrize("name", list(_CPU_LIST_PROBES))
def test_cpu_autocast_follows_torch_cpu_lists(name, rng):
    """The result dtype of float32 and of bfloat16 inputs under CPU autocast, as torch's."""
    pf_fn, torch_fn = _CPU_LIST_PROBES[name]
    values = rng.uniform(0.5, 1.5, (4, 6)).astype(np.float32)
    for dtype in ("float32", "bfloat16"):
        with pf.autocast("cpu", dtype=pf.bfloat16):
            got = pf_fn(pf.tensor(values, device="cpu").to(getattr(pf, dtype)))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            want = torch_fn(torch.tensor(values).to(getattr(torch, dtype)))
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], f"{name} from {dtype}"


def test_autocast_matches_torch_for_matmul_and_linear(rng):
    a = rng.uniform(-1, 1, (5, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (3, 8)).astype(np.float32)
    with pf.autocast("cpu"):
        got = pf.linear(pf.tensor(a), pf.tensor(w))
    with torch.autocast("cpu"):
        want = torch.nn.functional.linear(torch.tensor(a), torch.tensor(w))
    assert got.dtype == pf.bfloat16 and want.dtype == torch.bfloat16
    np.testing.assert_allclose(pf_to_numpy(got), want.float().detach().numpy(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_gradients_flow_back_in_each_parameters_dtype(device, rng):
    _use(device)
    w = pf.tensor(rng.uniform(-1, 1, (8, 4)).astype(np.float32), requires_grad=True)
    x = pf.tensor(rng.uniform(-1, 1, (16, 8)).astype(np.float32))
    tw = torch.tensor(pf_to_numpy(w), requires_grad=True)
    with pf.autocast(device, dtype=pf.bfloat16):
        loss = pf.log_softmax(x @ w, -1).mean()
    loss.backward()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        tloss = torch.log_softmax(torch.tensor(pf_to_numpy(x)) @ tw, -1).mean()
    tloss.backward()
    assert w.grad.dtype == pf.float32
    np.testing.assert_allclose(pf_to_numpy(w.grad), tw.grad.detach().numpy(), rtol=2e-2, atol=2e-3)


def test_autocast_rejects_bad_arguments():
    with pytest.raises(TypeError):
        pf.autocast("cpu", dtype=pf.float32)
    with pytest.raises(ValueError):
        with pf.autocast("cuda"):
            pass


class _SGD:
    """A minimal optimizer (param_groups and step) so the scaler is tested on its own."""

    def __init__(self, params, lr):
        self.param_groups = [{"params": list(params), "lr": lr}]

    def step(self):
        with pf.no_grad():
            for p in self.param_groups[0]["params"]:
                p.sub_(p.grad * self.param_groups[0]["lr"])


def test_grad_scaler_matches_torch(rng):
    w0 = rng.uniform(-1, 1, (6,)).astype(np.float32)
    p = pf.tensor(w0, requires_grad=True)
    tp = torch.tensor(w0, requires_grad=True)
    opt, topt = _SGD([p], 0.1), torch.optim.SGD([tp], lr=0.1)
    scaler = pf.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    tscaler = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    for step in range(6):
        x = rng.uniform(-1, 1, (6,)).astype(np.float32)
        if step == 3:
            x[2] = np.inf  # an overflowing step is skipped and the scale backs off
        p.grad = None
        topt.zero_grad()
        scaler.scale((p * pf.tensor(x)).sum()).backward()
        tscaler.scale((tp * torch.tensor(x)).sum()).backward()
        scaler.step(opt)
        tscaler.step(topt)
        scaler.update()
        tscaler.update()
        assert scaler.get_scale() == tscaler.get_scale(), step
        np.testing.assert_allclose(pf_to_numpy(p), tp.detach().numpy(), rtol=1e-6, err_msg=str(step))
    assert scaler.state_dict() == {k: (v if not isinstance(v, torch.Tensor) else v.item())
                                   for k, v in tscaler.state_dict().items()}
    with pytest.raises(RuntimeError):
        scaler.step(opt)
        scaler.step(opt)
