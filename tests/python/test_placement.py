"""Where ops run (DESIGN.md, execution model): a tensor put on a device (device=, .to(), Module.to)
is placed, and ops over placed tensors run on their device, as in PyTorch; ops whose tensors are
all unplaced run on the current device, as the seeds' examples assume. GPU cases skip without a GPU.
"""

import numpy as np
import pytest

import pyflame as pf
import pyflame.nn as nn
import pyflame.nn.functional as F
from op_registry import OP_INFOS, TORCH_TO_NAME, Arg, assert_matches, make_pf, make_torch, tolerance

needs_gpu = pytest.mark.skipif(not pf.rocm_is_available(),
                               reason=f"no usable GPU: {pf.rocm_unavailable_reason() or 'none visible'}")
OTHER = {"cpu": "rocm", "rocm": "cpu"}

# ----------------------------------------------------------------- the flag


def test_factories_place_only_with_a_device():
    assert not pf.zeros(2).is_placed and not pf.randn(2).is_placed and not pf.tensor([1.0]).is_placed
    for t in (pf.zeros(2, device="cpu"), pf.randn(2, device="cpu"), pf.arange(3, device="cpu"),
              pf.tensor([1.0], device="cpu"), pf.full((2,), 3.0, device="cpu"), pf.eye(2, device="cpu")):
        assert t.is_placed and t.device == "cpu"


def test_to_places_the_result_not_the_source():
    x = pf.randn(3)
    y = x.to("cpu")
    assert y.is_placed and not x.is_placed
    assert y.data_ptr() == x.data_ptr()  # no copy: only the tensor object is placed
    assert x.cpu().is_placed and x.to(device="cpu").is_placed and x.to(y).is_placed
    assert not x.to(pf.float64).is_placed  # a dtype alone does not place
    assert y.to(pf.float64).is_placed and y.clone().is_placed and y.detach().is_placed and y.data.is_placed


def test_results_views_and_likes_follow_their_inputs():
    x, p = pf.randn(2, 3), pf.randn(2, 3, device="cpu")
    assert not (x + x).is_placed and (x + p).is_placed and (p * 2).is_placed
    assert p[0].is_placed and p.T.is_placed and p.reshape(3, 2).is_placed and not x[0].is_placed
    assert pf.zeros_like(p).is_placed and not pf.zeros_like(x).is_placed and pf.zeros_like(x, device="cpu").is_placed
    assert pf.randn_like(p).is_placed and not pf.empty_like(x).is_placed
    assert p.new_zeros(4).is_placed and not x.new_ones(4).is_placed and p.new_tensor([1.0]).is_placed
    assert pf.cat([x, p]).is_placed and not pf.cat([x, x]).is_placed
    assert pf.tensor(p).is_placed and not pf.tensor(x).is_placed


def test_gradients_of_placed_leaves_are_placed():
    w = pf.randn(3, device="cpu", requires_grad=True)
    (w * w).sum().backward()
    assert w.grad.is_placed
    np.testing.assert_allclose(w.grad.detach().numpy(), 2 * w.detach().numpy(), rtol=1e-6)


def test_data_assignment_keeps_identity_and_autograd_state():
    p = nn.Parameter(pf.randn(3))
    ident = id(p)
    p.data = pf.ones(3, dtype=pf.float64, device="cpu")
    assert id(p) == ident and p.requires_grad and p.dtype == pf.float64 and p.is_placed
    np.testing.assert_array_equal(p.detach().numpy(), np.ones(3))
    with pytest.raises(pf.AutogradError):
        p.data = pf.ones(3, dtype=pf.int64)  # a tensor that requires grad cannot hold integers


# ----------------------------------------------------------------- Module.to keeps parameters


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(11, 8)
        self.norm = nn.LayerNorm(8)
        self.bn = nn.BatchNorm1d(8)
        self.lm_head = nn.Linear(8, 11, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2's

    def forward(self, idx):
        return self.lm_head(self.norm(self.wte(idx)))


def _moves(device):
    """The ways a PyTorch user moves a model to `device`."""
    return [lambda m: m.to(device), lambda m: m.to(device=device), lambda m: m.to(device, pf.float32),
            lambda m: m.to(pf.zeros(1, device=device))]


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("how", range(4))
def test_module_to_keeps_parameter_identity(device, how):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    m = TiedLM()
    params = list(m.parameters())
    opt = pf.optim.SGD(m.parameters(), lr=0.5)  # built before the move, as scripts do
    m.wte.weight.grad = pf.ones(11, 8)
    moved = _moves(device)[how](m)
    assert moved is m and list(m.parameters()) == params and all(a is b for a, b in zip(m.parameters(), params))
    assert m.lm_head.weight is m.wte.weight
    for t in list(m.parameters()) + list(m.buffers()):
        assert t.device.startswith(device) and t.is_placed
    assert m.wte.weight.grad.device.startswith(device)
    before = m.wte.weight.detach().to("cpu").detach().numpy().copy()
    opt.step()  # the optimizer still holds the moved parameters
    np.testing.assert_allclose(m.wte.weight.detach().to("cpu").detach().numpy(), before - 0.5, rtol=1e-6)


def test_module_dtype_casts_keep_identity_and_convert_grads():
    m = TiedLM()
    w = m.wte.weight
    w.grad = pf.ones(11, 8)
    m.double()
    assert m.wte.weight is w and m.lm_head.weight is w and w.dtype == pf.float64 and w.grad.dtype == pf.float64
    assert m.bn.num_batches_tracked.dtype == pf.int64  # integers stay integers, as in PyTorch
    m.half()
    assert w.dtype == pf.float16 and w.requires_grad
    m.float()
    assert w.dtype == pf.float32 and not w.is_placed  # no device named: nothing placed


def test_load_state_dict_copies_into_placed_parameters():
    m = TiedLM().to("cpu")
    w = m.wte.weight
    state = {k: v.clone() + 1 for k, v in TiedLM().state_dict().items()}
    m.load_state_dict(state)
    assert m.wte.weight is w and w.is_placed
    np.testing.assert_array_equal(w.detach().numpy(), state["wte.weight"].detach().numpy())


# ----------------------------------------------------------------- every op, placed on a GPU


def _placed_args(sample, dtype, device):
    """The sample's arguments made on the current device, then placed on `device` with .to()."""
    return [make_pf(a, dtype).to(device) if isinstance(a, Arg) else a for a in sample.args]


def _tensors(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _first_dtype(op):
    return "float32" if "float32" in op.dtypes else op.dtypes[0]


# Ops whose result's shape depends on the input's values read them on the host, as in PyTorch;
# so does normal's check that a std tensor holds no negative value (torch's too).
READS_VALUES = {"nonzero", "unique", "masked_select", "bincount", "normal"}


@needs_gpu
@pytest.mark.parametrize("where", ["rocm", "cpu"])
@pytest.mark.parametrize("op", OP_INFOS, ids=lambda op: op.name)
def test_op_runs_where_its_placed_inputs_are(op, where, rng):
    """With the other device current, an op over placed inputs runs on theirs: the result is there,
    placed and right, and no input crossed between host and GPU."""
    if where == "rocm" and not pf.is_supported(op.name, "rocm"):
        pytest.skip(f"{op.name} does not run on the GPU yet (docs/ops.md)")
    dtype = _first_dtype(op)
    samples = op.sample_inputs(rng, dtype, "plain")[:2]
    assert samples
    for s in samples:
        pf.set_device("cpu")
        args = _placed_args(s, dtype, where)
        kwargs = dict(s.kwargs)
        if op.family == "RANDOM":
            kwargs["device"] = where
        pf.set_device(OTHER[where])
        pf.synchronize()
        pf.reset_host_transfer_count()
        pf.reset_implicit_copy_count()
        result = op.fn(*args, **kwargs)
        transfers, copies = pf.host_transfer_count(), pf.implicit_copy_count()
        what = f"pf.{op.name}{s!r} placed on {where}, {OTHER[where]} current"
        for r in _tensors(result):
            assert r.device.startswith(where) and r.is_placed, f"{what}: result on {r.device}, placed={r.is_placed}"
        assert copies == 0, f"{what}: {copies} implicit copies"
        if op.name not in READS_VALUES:
            assert transfers == 0, f"{what}: {transfers} host<->GPU transfers"
        if op.family == "RANDOM":
            continue
        expected = op.ref(*[make_torch(a, dtype) if isinstance(a, Arg) else a for a in s.args], **s.kwargs)
        pf.set_device("cpu")
        for r, e in zip(_tensors(result), _tensors(expected)):
            rtol, atol = tolerance(op, TORCH_TO_NAME[e.dtype])
            assert_matches(r.to("cpu"), e, rtol, atol, what=what)


def _two_tensor_sample(op, rng):
    dtype = _first_dtype(op)
    for s in op.sample_inputs(rng, dtype, "plain"):
        arrays = [a for a in s.args if isinstance(a, Arg) and a.values.ndim > 0]
        if len(arrays) >= 2:
            return s, dtype
    return None, dtype


@needs_gpu
@pytest.mark.parametrize("op", [op for op in OP_INFOS if op.family not in ("COPY", "RANDOM")], ids=lambda op: op.name)
def test_placed_inputs_on_two_devices_raise(op, rng):
    s, dtype = _two_tensor_sample(op, rng)
    if s is None:
        pytest.skip(f"{op.name} takes one tensor")
    if not pf.is_supported(op.name, "rocm"):
        pytest.skip(f"{op.name} does not run on the GPU yet (docs/ops.md)")
    args, moved = [], False
    for a in s.args:
        if isinstance(a, Arg) and a.values.ndim > 0:
            args.append(make_pf(a, dtype).to("rocm" if not moved else "cpu"))
            moved = True
        else:
            args.append(make_pf(a, dtype) if isinstance(a, Arg) else a)
    with pytest.raises(RuntimeError, match=rf"{op.name}.*(rocm:0.*cpu|cpu.*rocm:0)"):
        op.fn(*args, **s.kwargs)


@needs_gpu
def test_zero_dim_cpu_tensors_go_anywhere_and_unplaced_inputs_follow():
    g = pf.randn(3, 4, device="rocm")
    s = pf.tensor(2.0, device="cpu")
    assert (g * s).device == "rocm:0" and (s * g).device == "rocm:0"
    pf.set_device("cpu")
    u = pf.randn(3, 4)  # unplaced, on the CPU
    pf.reset_implicit_copy_count()
    r = g + u
    assert r.device == "rocm:0" and r.is_placed and pf.implicit_copy_count() == 1
    np.testing.assert_allclose(r.to("cpu").detach().numpy(), g.to("cpu").detach().numpy() + u.detach().numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="add.*rocm:0.*cpu"):
        g + pf.randn(3, 4, device="cpu")
    with pytest.raises(RuntimeError, match="add.*'cpu' and 'rocm:0'"):
        pf.zeros(3, 4).add_(g)  # the tensor written decides: PyTorch refuses too


@needs_gpu
def test_unplaced_tensors_follow_the_current_device():
    """The seeds' 'compare with the CPU': the same unplaced tensors, two current devices."""
    pf.set_device("rocm")
    a, b = pf.randn(64, 64), pf.randn(64, 64)
    gpu = pf.matmul(a, b)
    pf.set_device("cpu")
    cpu = pf.matmul(a, b)
    assert gpu.device == "rocm:0" and cpu.device == "cpu" and not gpu.is_placed and not cpu.is_placed
    np.testing.assert_allclose(gpu.to("cpu").detach().numpy(), cpu.detach().numpy(), rtol=1e-4, atol=1e-4)


@needs_gpu
def test_indexing_takes_cpu_indices_of_gpu_tensors():
    g = pf.arange(12, device="rocm").reshape(3, 4)
    idx = pf.tensor([2, 0], device="cpu")
    r = g[idx]
    assert r.device == "rocm:0" and r.is_placed
    np.testing.assert_array_equal(r.to("cpu").detach().numpy(), np.arange(12).reshape(3, 4)[[2, 0]])


# ----------------------------------------------------------------- nn modules, PyTorch-style


def _modules():
    pf.manual_seed(0)
    return {
        "linear": (nn.Linear(16, 8), (4, 16)),
        "conv_bn_relu_pool": (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                            nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten()), (2, 3, 8, 8)),
        "layer_norm_gelu": (nn.Sequential(nn.LayerNorm(16), nn.GELU(), nn.Dropout(0.0)), (4, 5, 16)),
        "lstm": (nn.LSTM(16, 8, num_layers=2, batch_first=True), (2, 5, 16)),
        "attention": (nn.MultiheadAttention(16, 4, batch_first=True), (2, 5, 16)),
        "transformer": (nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True), (2, 5, 16)),
        "group_norm": (nn.GroupNorm(2, 8), (2, 8, 4, 4)),
    }


def _forward(name, module, x):
    if name == "attention":
        return module(x, x, x, need_weights=False)[0]
    out = module(x)
    return out[0] if name == "lstm" else out


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_nn_modules_run_where_they_were_moved(device, rng):
    """model.to(device) / x.to(device) with the other device current, never set_device: forward
    and backward run on `device` (no host<->GPU transfers there) and agree with the CPU."""
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    for name, (module, shape) in _modules().items():
        pf.set_device("cpu")
        xv = rng.standard_normal(shape).astype(np.float32)
        reference = _forward(name, module, pf.tensor(xv))
        reference.sum().backward()
        ref_grads = [p.grad.detach().numpy().copy() for p in module.parameters()]
        module.zero_grad()
        module.to(device)
        x = pf.tensor(xv).to(device)
        if pf.rocm_is_available():
            pf.set_device(OTHER[device])  # the other device current: placement, not set_device, decides
        pf.synchronize()
        pf.reset_host_transfer_count()
        out = _forward(name, module, x)
        out.sum().backward()
        assert pf.host_transfer_count() == 0, f"{name} on {device}: {pf.host_transfer_count()} transfers"
        assert out.device.startswith(device) and out.is_placed, f"{name}: output on {out.device}"
        np.testing.assert_allclose(out.detach().to("cpu").detach().numpy(), reference.detach().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
        for p, g in zip(module.parameters(), ref_grads):
            assert p.grad.device.startswith(device), f"{name}: a gradient on {p.grad.device}"
            np.testing.assert_allclose(p.grad.to("cpu").detach().numpy(), g, rtol=1e-3, atol=1e-4, err_msg=name)


@needs_gpu
def test_training_script_as_pytorch_users_write_it():
    """A small CNN trained with model.to(device) and batches moved with .to(device), the CPU current:
    everything stays on the GPU and the loss falls."""
    pf.set_device("cpu")
    pf.manual_seed(0)
    device = "rocm"
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 2)).to(device)
    opt = pf.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 1, 8, 8)).astype(np.float32)
    ys = (xs.mean(axis=(1, 2, 3)) > 0).astype(np.int64)
    xs[ys == 1] += 0.5
    losses = []
    for _ in range(30):
        x, y = pf.tensor(xs).to(device), pf.tensor(ys).to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(p.device == "rocm:0" for p in model.parameters())
    assert all(s["exp_avg"].device == "rocm:0" for s in opt.state.values())
    assert losses[-1] < 0.5 * losses[0], losses
