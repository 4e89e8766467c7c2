"""pf.compile: traced graphs replayed against eager runs and PyTorch, on both devices.

Models are moved with .to(device) and data made with device=, as PyTorch users write them
(the current device stays 'cpu'). The first call of a signature traces (its results are the
eager ones); the calls after replay the graph, so each test compares a replayed call."""

import warnings

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import assert_matches, make_values


def _placed(device):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    return device


def _mlp(seed):
    pf.manual_seed(seed)
    return pf.nn.Sequential(pf.nn.Linear(20, 32), pf.nn.ReLU(), pf.nn.Linear(32, 10))


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_mlp_replays_as_eager_and_as_torch(device, rng):
    _placed(device)
    model = _mlp(0).to(device)
    compiled = pf.compile(model)
    tmodel = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    with torch.no_grad():
        for tp, p in zip(tmodel.parameters(), model.parameters()):
            tp.copy_(torch.from_numpy(p.to("cpu").detach().numpy()))
    for _ in range(3):  # trace, then two replays on fresh data
        x = make_values(rng, (8, 20), "float32")
        px = pf.tensor(x, device=device)
        got, eager = compiled(px), model(px)
        assert got.device == eager.device and got.is_placed
        # The replay fuses linear -> relu (on the GPU the GEMM's epilogue, whose algorithm may round differently).
        np.testing.assert_allclose(got.to("cpu").detach().numpy(), eager.to("cpu").detach().numpy(), rtol=1e-5, atol=1e-6)
        assert_matches(got.to("cpu"), tmodel(torch.from_numpy(x)).detach(), 1e-5, 1e-5, what="compiled MLP")
    (graph,) = compiled.graphs()
    assert graph.ops == ["linear_relu", "linear"], str(graph)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_new_signature_retraces(device, rng):
    _placed(device)

    @pf.compile
    def f(x, y):
        return (x * y).sum(-1) + 1

    for shape, dtype in (((3, 4), "float32"), ((5, 4), "float32"), ((3, 4), "float64"), ((3, 4), "float32")):
        x, y = make_values(rng, shape, dtype), make_values(rng, shape, dtype)
        got = f(pf.tensor(x, device=device), pf.tensor(y, device=device))
        assert got.dtype == pf.tensor(x).dtype
        np.testing.assert_allclose(got.to("cpu").detach().numpy(), (x * y).sum(-1) + 1, rtol=1e-6)
    assert len(f.graphs()) == 3  # the last call replayed the first graph


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_structured_outputs_and_integer_ops(device, rng):
    _placed(device)

    @pf.compile
    def f(a, b, scale):
        s = a + b * scale
        return {"sum": s, "parts": (s.argmax(-1), [s > 0, (a.to(pf.int64) % 3)])}

    for _ in range(3):
        a, b = make_values(rng, (4, 6), "float32"), make_values(rng, (4, 6), "float32")
        out = f(pf.tensor(a, device=device), pf.tensor(b, device=device), 2.0)
        s = a + b * 2.0
        np.testing.assert_allclose(out["sum"].to("cpu").detach().numpy(), s, rtol=1e-6)
        idx, (pos, mod) = out["parts"][0], out["parts"][1]
        assert isinstance(out["parts"], tuple) and isinstance(out["parts"][1], list)
        np.testing.assert_array_equal(idx.to("cpu").detach().numpy(), s.argmax(-1))
        np.testing.assert_array_equal(pos.to("cpu").detach().numpy(), s > 0)
        np.testing.assert_array_equal(mod.to("cpu").detach().numpy(), np.fmod(np.trunc(a), 3) % 3)


def test_python_numbers_are_part_of_the_signature(rng):
    f = pf.compile(lambda x, k: x * k)
    x = pf.tensor(make_values(rng, (3,), "float32"))
    np.testing.assert_allclose(f(x, 2.0).detach().numpy(), x.detach().numpy() * 2.0)
    np.testing.assert_allclose(f(x, 3.0).detach().numpy(), x.detach().numpy() * 3.0)
    np.testing.assert_allclose(f(x, 2.0).detach().numpy(), x.detach().numpy() * 2.0)
    assert len(f.graphs()) == 2


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_softmax_and_layer_norm_from_primitives(device, rng):
    _placed(device)

    @pf.compile
    def norm_softmax(x, w, b):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        y = (x - mu) / pf.sqrt(var + 1e-5) * w + b
        e = pf.exp(y - y.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)

    for _ in range(3):
        x, w, b = (make_values(rng, shape, "float32") for shape in ((6, 16), (16,), (16,)))
        got = norm_softmax(*(pf.tensor(v, device=device) for v in (x, w, b)))
        t = torch.nn.functional.layer_norm(torch.from_numpy(x), (16,), torch.from_numpy(w), torch.from_numpy(b))
        assert_matches(got.to("cpu"), torch.softmax(t, -1), 1e-5, 1e-6, what="softmax(layer_norm) from primitives")


def test_buffers_made_inside_are_new_each_call(rng):
    @pf.compile
    def f(x):
        out = pf.zeros(3)
        out += x
        return out, pf.tensor([1.0, 2.0, 3.0]) * 2

    x1, x2 = pf.tensor(make_values(rng, (3,), "float32")), pf.tensor(make_values(rng, (3,), "float32"))
    f(x1)
    r1, lit1 = f(x1)  # replayed
    r2, lit2 = f(x2)
    np.testing.assert_array_equal(r1.detach().numpy(), x1.detach().numpy())  # not overwritten by the next run
    np.testing.assert_array_equal(r2.detach().numpy(), x2.detach().numpy())
    assert r1.data_ptr() != r2.data_ptr()
    np.testing.assert_array_equal(lit2.detach().numpy(), [2.0, 4.0, 6.0])


def test_in_place_state_updates_repeat(rng):
    """batch_norm in training updates its running statistics in place on every call, as eagerly."""
    pf.manual_seed(1)
    eager = pf.nn.BatchNorm1d(5)
    pf.manual_seed(1)
    model = pf.nn.BatchNorm1d(5)
    compiled = pf.compile(model)
    for _ in range(4):
        x = pf.tensor(make_values(rng, (8, 5), "float32"))
        np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(model.running_mean.detach().numpy(), eager.running_mean.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(model.running_var.detach().numpy(), eager.running_var.detach().numpy(), rtol=1e-6)
    model.eval()
    eager.eval()
    x = pf.tensor(make_values(rng, (8, 5), "float32"))
    np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy(), rtol=1e-6, atol=1e-7)
    assert len(compiled.graphs()) == 2  # the training flag is part of the signature


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_random_ops_draw_new_numbers_each_run(device, rng):
    _placed(device)
    f = pf.compile(lambda x: pf.nn.functional.dropout(x, 0.5, training=True) + pf.rand(4, device=device))
    x = pf.ones(64, 4, device=device)
    pf.manual_seed(5)
    eager = [(pf.nn.functional.dropout(x, 0.5, training=True) + pf.rand(4, device=device)).to("cpu").detach().numpy()
             for _ in range(3)]
    pf.manual_seed(5)
    compiled = [f(x).to("cpu").detach().numpy() for _ in range(3)]
    for e, c in zip(eager, compiled):
        np.testing.assert_array_equal(c, e)
    assert not np.array_equal(compiled[1], compiled[2])


def test_host_reads_leave_the_signature_eager(rng):
    calls = []

    def f(x):
        calls.append(1)
        return x * 2 if x.sum().item() > 0 else x * -1

    compiled = pf.compile(f)
    pos, neg = pf.tensor([1.0, 2.0]), pf.tensor([-1.0, -2.0])
    with pytest.warns(UserWarning, match="item"):
        np.testing.assert_array_equal(compiled(pos).detach().numpy(), [2.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning per cause
        np.testing.assert_array_equal(compiled(neg).detach().numpy(), [1.0, 2.0])  # eager: the branch is taken anew
    assert len(calls) == 2 and compiled.graphs() == []
    with pytest.raises(pf.NotSupportedError, match="item"):
        pf.compile(f, fullgraph=True)(pos)


def test_autograd_through_a_replayed_graph(rng):
    model = _mlp(3)
    twin = _mlp(3)
    compiled = pf.compile(model)
    for _ in range(3):
        x = pf.tensor(make_values(rng, (4, 20), "float32"))
        for m, run in ((model, compiled), (twin, twin)):
            m.zero_grad()
            run(x).pow(2).sum().backward()
        for p, q in zip(model.parameters(), twin.parameters()):
            np.testing.assert_allclose(p.grad.detach().numpy(), q.grad.detach().numpy(), rtol=1e-6, atol=1e-7)


def _train_step(model, opt, loss_fn=None, zero_grad=True):
    def step(x, y):
        if zero_grad:
            opt.zero_grad()
        out = model(x)
        loss = loss_fn(out, y) if loss_fn else pf.nn.functional.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss
    return step


def _assert_same_training(model, twin, atol=1e-6):
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.to("cpu").detach().numpy(), q.to("cpu").detach().numpy(), rtol=1e-5, atol=atol)
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            np.testing.assert_allclose(p.grad.to("cpu").detach().numpy(), q.grad.to("cpu").detach().numpy(), rtol=1e-5, atol=atol)


def _train_side_by_side(compiled, eager, model, twin, device, rng, steps):
    """Compiled and eager training steps on the same fresh batches: the same losses and training state."""
    for _ in range(steps):
        x = pf.tensor(make_values(rng, (8, 20), "float32"), device=device)
        y = pf.tensor(rng.integers(0, 10, 8), device=device)
        got, want = compiled(x, y), eager(x, y)
        np.testing.assert_allclose(got.to("cpu").detach().numpy(), want.to("cpu").detach().numpy(), rtol=1e-5, atol=1e-6)
        _assert_same_training(model, twin)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("optimizer", ["adam", "adamw_capturable", "sgd_momentum"])
def test_training_step_is_one_graph(device, optimizer, rng):
    """Forward, loss.backward() and optimizer.step() in one compiled function: the backward's ops and the
    update are nodes of the graph; a replayed step trains exactly as the eager one (parameters, .grad,
    the optimizer's state), the first step (which makes the optimizer's state) included."""
    _placed(device)
    make = {"adam": lambda ps: pf.optim.Adam(ps, lr=1e-2),
            "adamw_capturable": lambda ps: pf.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, capturable=True),
            "sgd_momentum": lambda ps: pf.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)}[optimizer]
    model, twin = _mlp(11).to(device), _mlp(11).to(device)
    opt, twin_opt = make(model.parameters()), make(twin.parameters())
    compiled = pf.compile(_train_step(model, opt))
    eager = _train_step(twin, twin_opt)
    _train_side_by_side(compiled, eager, model, twin, device, rng, steps=5)
    (graph,) = compiled.graphs()
    assert graph.runs_backward and "cross_entropy_backward" in graph.ops, str(graph)
    assert graph.ops[-1] == ("sgd_step" if optimizer == "sgd_momentum" else "adam_step"), str(graph)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_training_step_captured_as_a_device_graph(device, rng):
    """reduce-overhead with a capturable optimizer: on a GPU the whole step (forward, backward, Adam with its
    step counts on the device) is one captured graph; the .grad it leaves are the graph's tensors. The eager
    twin counts its steps on the host (the bias corrections computed there, not by the update)."""
    _placed(device)
    model, twin = _mlp(12).to(device), _mlp(12).to(device)
    opt = pf.optim.Adam(model.parameters(), lr=1e-2, capturable=True)
    twin_opt = pf.optim.Adam(twin.parameters(), lr=1e-2)
    compiled = pf.compile(_train_step(model, opt), mode="reduce-overhead")
    eager = _train_step(twin, twin_opt)
    _train_side_by_side(compiled, eager, model, twin, device, rng, steps=6)
    for p, q in zip(opt.state.values(), twin_opt.state.values()):
        assert p["step"].device == model[0].weight.device and q["step"].device == "cpu"
        assert p["step"].to("cpu").item() == q["step"].item() == 6
    assert compiled._device_graphs() == (1 if device == "rocm" else 0)


def test_intermediates_are_freed_after_their_last_use(rng):
    """The memory plan: a replay drops each intermediate once its last reader has run, so a chain of six
    16 MiB matmul results holds about two at a time, not six."""
    device = _placed("rocm")
    n = 2048
    x = pf.tensor(make_values(rng, (n, n), "float32"), device=device)
    ws = [pf.tensor(make_values(rng, (n, n), "float32") / n, device=device) for _ in range(6)]

    @pf.compile
    def chain(x):
        for w in ws:
            x = x @ w
        return x

    with pf.no_grad():
        for _ in range(2):  # the trace, a first replay (the allocator's cache warm)
            chain(x)
        pf.cuda.synchronize()
        pf.cuda.reset_peak_memory_stats()
        before = pf.cuda.memory_allocated()
        got = chain(x)
        pf.cuda.synchronize()
        peak = pf.cuda.max_memory_allocated() - before
    want = x
    for w in ws:
        want = want @ w
    np.testing.assert_allclose(got.to("cpu").detach().numpy(), want.to("cpu").detach().numpy(), rtol=1e-5, atol=1e-6)
    result = n * n * 4
    assert peak <= 3 * result, f"peak {peak / result:.1f} results live"


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_calls_on_fixed_data_are_computed_once(device, rng):
    """Constant folding: what depends only on data the function makes (pf.tensor of a list, pf.ones,
    Python numbers) is computed when the trace ends; data written in place is not fixed."""
    _placed(device)

    @pf.compile
    def f(x):
        scale = (pf.tensor([1.0, 2.0, 3.0], device=device) * 0.5).exp()
        acc = pf.zeros(3, device=device)
        acc.add_(x.sum(0))  # written: made anew on each run
        return x * scale + pf.ones(3, device=device), acc * 2

    for _ in range(3):
        x = pf.tensor(make_values(rng, (4, 3), "float32"), device=device)
        (got, acc), want = f(x), torch.from_numpy(x.to("cpu").detach().numpy())
        np.testing.assert_allclose(got.to("cpu").detach().numpy(), (want * (torch.tensor([1.0, 2.0, 3.0]) * 0.5).exp() + 1),
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(acc.to("cpu").detach().numpy(), want.sum(0) * 2, rtol=1e-5, atol=1e-6)
    (graph,) = f.graphs()
    assert "exp" not in str(graph) and "full" not in graph.ops, str(graph)


def test_accumulated_gradients_and_changed_options_retrace(rng):
    """A step that accumulates into .grad (no zero_grad) depends on the .grad tensors it found, and one
    whose learning rate a scheduler changes on its options: both are guarded, so the replays stay eager's."""
    model, twin = _mlp(13), _mlp(13)
    opt, twin_opt = pf.optim.SGD(model.parameters(), lr=0.05), pf.optim.SGD(twin.parameters(), lr=0.05)
    sched = pf.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    twin_sched = pf.optim.lr_scheduler.StepLR(twin_opt, step_size=3, gamma=0.5)
    compiled = pf.compile(_train_step(model, opt, zero_grad=False))
    eager = _train_step(twin, twin_opt, zero_grad=False)
    for i in range(8):
        if i == 5:  # .grad replaced from outside: the graph must not add into the old tensors
            for m in (model, twin):
                m.zero_grad()
        x = pf.tensor(make_values(rng, (8, 20), "float32"))
        y = pf.tensor(rng.integers(0, 10, 8))
        np.testing.assert_allclose(compiled(x, y).detach().numpy(), eager(x, y).detach().numpy(), rtol=1e-5, atol=1e-6)
        _assert_same_training(model, twin)
        sched.step()
        twin_sched.step()
    assert opt.param_groups[0]["lr"] == twin_opt.param_groups[0]["lr"] == 0.05 * 0.25


def test_backward_through_ops_before_the_call_runs_eagerly(rng):
    """A backward pass into ops recorded before the compiled function ran cannot be replayed (their saved
    tensors are that run's): the signature runs eagerly, with a warning."""
    model = _mlp(4)

    @pf.compile
    def backward(loss):
        loss.backward()
        return loss

    x = pf.tensor(make_values(rng, (4, 20), "float32"))
    with pytest.warns(UserWarning, match="recorded before"):
        backward(model(x).sum())
    assert backward.graphs() == []
    model.zero_grad()
    backward(model(x).sum())
    assert model[0].weight.grad is not None


def test_replaced_parameters_retrace(rng):
    model = _mlp(5)
    compiled = pf.compile(model)
    x = pf.tensor(make_values(rng, (2, 20), "float32"))
    compiled(x)
    model[0].weight = pf.nn.Parameter(pf.zeros(32, 20))
    np.testing.assert_array_equal(compiled(x).detach().numpy(), model(x).detach().numpy())
    assert len(compiled.graphs()) == 2


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_parameters_given_new_data_retrace(device, mode, rng):
    """Module.to, .double() and `p.data = ...` keep a parameter's identity and give it other memory: a
    graph kept from before (a compiled module, or a function calling the model; on a GPU a captured
    device graph) must read the new data, never the old."""
    _placed(device)
    model = pf.nn.Sequential(pf.nn.Linear(20, 32), pf.nn.GELU(), pf.nn.Linear(32, 10)).to(device)
    compiled_model = pf.compile(model, mode=mode)
    compiled_fn = pf.compile(lambda x: model(x) * 2 + 1, mode=mode)
    x = pf.tensor(make_values(rng, (4, 20), "float32"), device=device)
    with pf.no_grad():
        for _ in range(2):
            compiled_model(x), compiled_fn(x)
        for p in model.parameters():
            p.data = pf.tensor(make_values(rng, p.shape, "float32"), device=device)
        np.testing.assert_array_equal(compiled_model(x).to("cpu").detach().numpy(), model(x).to("cpu").detach().numpy())
        np.testing.assert_array_equal(compiled_fn(x).to("cpu").detach().numpy(), (model(x) * 2 + 1).to("cpu").detach().numpy())
        model.double()
        xd = x.double()
        for got, want in ((compiled_model(xd), model(xd)), (compiled_fn(xd), model(xd) * 2 + 1)):
            assert got.dtype == pf.float64
            np.testing.assert_allclose(got.to("cpu").detach().numpy(), want.to("cpu").detach().numpy(), rtol=1e-12)


def test_modules_a_function_calls_are_guarded(rng):
    """A compiled function holds the training flags of the modules it called: eval() after a training
    trace retraces (dropout off, batch_norm on its running statistics), and train() again finds the
    first graph."""
    model = pf.nn.Sequential(pf.nn.Linear(20, 32), pf.nn.BatchNorm1d(32), pf.nn.Dropout(0.5))
    compiled = pf.compile(lambda x: model(x).sum(dim=1))
    x = pf.tensor(make_values(rng, (8, 20), "float32"))
    with pf.no_grad():
        compiled(x), compiled(x)
        model.eval()
        for _ in range(2):
            np.testing.assert_array_equal(compiled(x).detach().numpy(), model(x).sum(dim=1).detach().numpy())
        model.train()
        compiled(x)
    assert len(compiled.graphs()) == 2


def test_assigning_data_or_buffers_inside_runs_eagerly(rng):
    """A graph repeats calls, not Python assignments: a traced function that rebinds a tensor's data or
    a module's buffer runs eagerly, with a warning saying so."""
    model = pf.nn.Linear(4, 4)
    model.register_buffer("calls", pf.zeros(()))
    x = pf.tensor(make_values(rng, (2, 4), "float32"))

    def shrink(x):
        model.weight.data = model.weight * 0.5
        return model(x)

    def count(x):
        model.calls = model.calls + 1
        return model(x)

    for fn, why in ((shrink, "new data"), (count, "Linear.calls")):
        compiled = pf.compile(fn)
        with pf.no_grad(), pytest.warns(UserWarning, match=why):
            compiled(x)
        before = model.weight.detach().clone()
        with pf.no_grad():
            compiled(x)
        if fn is shrink:  # the second call ran it again
            np.testing.assert_array_equal(model.weight.detach().numpy(), before.detach().numpy() * 0.5)
    assert model.calls.item() == 2


def test_compile_arguments():
    f = lambda x: x + 1  # noqa: E731
    assert pf.compile(f, disable=True) is f
    with pytest.raises(pf.NotSupportedError, match="dynamic"):
        pf.compile(f, dynamic=True)
    with pytest.raises(ValueError, match="mode"):
        pf.compile(f, mode="fastest")
    g = pf.compile(mode="reduce-overhead")(f)
    assert g(pf.tensor([1.0])).tolist() == [2.0]


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_reduce_overhead_launches_a_captured_graph(device, rng):
    """On a GPU, inference graphs are captured once and launched whole; their results are copies,
    so one call's results survive the next. Elsewhere (the CPU, autograd recording) op by op."""
    _placed(device)
    model = _mlp(7).to(device).eval()
    compiled = pf.compile(model, mode="reduce-overhead")
    with pf.no_grad():
        kept = []
        for _ in range(4):
            x = pf.tensor(make_values(rng, (8, 20), "float32"), device=device)
            got, want = compiled(x), model(x)
            np.testing.assert_array_equal(got.to("cpu").detach().numpy(), want.to("cpu").detach().numpy())
            kept.append((got, want))
        for got, want in kept:
            np.testing.assert_array_equal(got.to("cpu").detach().numpy(), want.to("cpu").detach().numpy())
    assert compiled._device_graphs() == (1 if device == "rocm" else 0)
    x = pf.tensor(make_values(rng, (8, 20), "float32"), device=device)
    for _ in range(3):  # grad mode with parameters that require grad: recorded op by op
        model.zero_grad()
        compiled(x).sum().backward()
        assert model[0].weight.grad is not None
    assert compiled._device_graphs() == (1 if device == "rocm" else 0)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("rows", [1, 16])
def test_linears_of_one_input_become_one_call(device, rows, rng):
    """A layer's query, key and value projections (and a gated MLP's gate and up) read one input: the graph
    runs them as one grouped_linear (on the GPU one GEMV launch for a decode step's row), with results as
    eager; a linear of another input, or one across an in-place write, stays alone."""
    _placed(device)
    pf.manual_seed(4)
    q, k, v = pf.nn.Linear(64, 64).to(device), pf.nn.Linear(64, 32, bias=False).to(device), pf.nn.Linear(64, 32).to(device)
    gate, up = pf.nn.Linear(32, 48, bias=False).to(device), pf.nn.Linear(32, 48, bias=False).to(device)
    for m in (q, k, v, gate, up):
        m.to(pf.bfloat16)

    def block(x):
        h = q(x) + pf.cat([k(x), v(x)], -1)
        a = h[..., :32]
        return pf.nn.functional.silu(gate(a)) * up(a)

    compiled = pf.compile(block, mode="reduce-overhead")
    with pf.no_grad():
        for _ in range(3):
            x = pf.tensor(make_values(rng, (rows, 1, 64), "float32"), device=device).to(pf.bfloat16)
            got, want = compiled(x), block(x)
            np.testing.assert_allclose(got.float().to("cpu").detach().numpy(), want.float().to("cpu").detach().numpy(), rtol=2e-2, atol=2e-2)
    ops = compiled.graphs()[0].ops
    assert ops.count("grouped_linear") == 2 and "linear" not in ops, ops


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("rows", [1, 16])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_norms_and_swiglu_fold_into_the_linears(device, rows, dtype, rng):
    """A decoder layer's rms_norm before its projections and its gated MLP's silu(gate(h)) * up(h): the
    graph runs each norm inside the grouped_linear that reads it and the SwiGLU as one grouped_linear
    (on the GPU: the GEMV normalises the row as it reads it and writes silu(gate) * up), with results as
    eager; a norm whose result is read twice, and a norm over two dims, stay calls of their own."""
    _placed(device)
    pf.manual_seed(6)
    dt = getattr(pf, dtype)
    q, k, gate, up, down = (pf.nn.Linear(i, o, bias=b).to(device).to(dt)
                            for i, o, b in ((64, 64, False), (64, 32, True), (64, 96, False), (64, 96, True),
                                            (96, 64, False)))
    norm1, norm2 = pf.nn.RMSNorm(64, eps=1e-5).to(device).to(dt), pf.nn.RMSNorm(64).to(device).to(dt)
    with pf.no_grad():
        for norm in (norm1, norm2):
            norm.weight.copy_(pf.tensor(make_values(rng, (64,), "float32"), device=device).to(dt))

    def layer(x):
        h = norm1(x)
        a = q(h) + pf.cat([k(h), k(h)], -1)
        m = norm2(x + a)
        return down(pf.nn.functional.silu(gate(m)) * up(m))

    def shared(x):  # the norm's result also read by the add: not folded
        h = norm1(x)
        return q(h) + h

    def two_dims(x):
        return q(pf.nn.functional.rms_norm(x, (1, 64), eps=1e-5))

    tol = 2e-2 if dtype == "bfloat16" else 1e-5
    for fn, folded in ((layer, True), (shared, False), (two_dims, False)):
        compiled = pf.compile(fn, mode="reduce-overhead")
        with pf.no_grad():
            for _ in range(3):
                x = pf.tensor(make_values(rng, (rows, 1, 64), "float32"), device=device).to(dt)
                got, want = compiled(x), fn(x)
                np.testing.assert_allclose(got.float().to("cpu").detach().numpy(), want.float().to("cpu").detach().numpy(),
                                           rtol=tol, atol=tol)
        ops = compiled.graphs()[0].ops
        if folded:
            assert "rms_norm" not in ops and "silu" not in ops and ops.count("fused_elementwise") == 1, ops  # the adds
            assert ops.count("grouped_linear") == 2 and ops.count("linear") == 1, ops
        else:
            assert "rms_norm" in ops, ops


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("rows", [1, 16])
def test_a_residual_added_to_a_linear_becomes_its_bias(device, rows, rng):
    """x + proj(h) (a transformer's residual): the graph gives x to the linear as its bias, so the GEMV (one
    row) or the GEMM adds it; results and gradients as eager. A residual made after the linear, or a linear
    with a bias of its own, keeps its add."""
    _placed(device)
    pf.manual_seed(5)
    proj, biased = pf.nn.Linear(64, 64, bias=False).to(device), pf.nn.Linear(64, 64).to(device)
    blocks = {"folded": lambda x, h: x * 2 + proj(h), "made after": lambda x, h: proj(h) + x * 2,
              "biased": lambda x, h: x * 2 + biased(h)}
    for name, block in blocks.items():
        compiled = pf.compile(block)
        for _ in range(2):
            x, h = (pf.tensor(make_values(rng, (rows, 1, 64), "float32"), device=device) for _ in range(2))
            h.requires_grad_()
            got, want = compiled(x, h), block(x, h)
            (got_grad,), (want_grad,) = pf.autograd.grad(got.sum(), [h]), pf.autograd.grad(want.sum(), [h])
            for a, b in ((got, want), (got_grad, want_grad)):
                np.testing.assert_allclose(a.detach().to("cpu").detach().numpy(), b.detach().to("cpu").detach().numpy(), rtol=1e-5,
                                           atol=1e-5)
        ops = compiled.graphs()[0].ops
        assert (ops == ["mul", "linear"]) == (name == "folded"), (name, ops)


def test_repeated_and_unused_calls_are_dropped(rng):
    """Equal pure calls run once, unused ones not at all; calls with effects stay (the running
    statistics batch_norm updates, an in-place write, a random draw)."""
    bn = pf.nn.BatchNorm1d(3)

    @pf.compile
    def f(x, state):
        a = (x * 2).sum(0)
        b = (x * 2).sum(0)  # the same calls again
        unused = pf.exp(x) @ x.T  # noqa: F841 - never used
        bn(x)  # result unused, statistics updated
        state.add_(1)
        return a + b

    x = pf.tensor(make_values(rng, (4, 3), "float32"))
    state = pf.zeros(3)
    for _ in range(3):
        np.testing.assert_allclose(f(x, state).detach().numpy(), 4 * x.detach().numpy().sum(0), rtol=1e-6)
    (graph,) = f.graphs()
    assert graph.ops.count("mul") == 1 and graph.ops.count("sum") == 1, str(graph)
    assert "exp" not in graph.ops and "matmul" not in graph.ops, str(graph)
    assert "batch_norm" in graph.ops
    np.testing.assert_array_equal(state.detach().numpy(), [3.0, 3.0, 3.0])
    assert int(bn.num_batches_tracked.item()) == 3


def test_signatures_are_bounded():
    """Arguments that differ on every call (a new object each time) stop being traced after a while."""
    f = pf.compile(lambda x, tag: x + 1)
    x = pf.tensor([1.0])
    with pytest.warns(UserWarning, match="signatures"):
        for _ in range(70):
            assert f(x, object()).tolist() == [2.0]
    assert len(f.graphs()) == 64


class _Residual(pf.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1, self.bn1 = pf.nn.Conv2d(c, c, 3, padding=1, bias=False), pf.nn.BatchNorm2d(c)
        self.conv2, self.bn2 = pf.nn.Conv2d(c, c, 3, padding=1, bias=False), pf.nn.BatchNorm2d(c)

    def forward(self, x):
        y = pf.nn.functional.relu(self.bn1(self.conv1(x)))
        return pf.nn.functional.relu(x + self.bn2(self.conv2(y)))


def _conv_net(seed):
    pf.manual_seed(seed)
    return pf.nn.Sequential(pf.nn.Conv2d(3, 8, 3, padding=1), pf.nn.BatchNorm2d(8), pf.nn.ReLU(), _Residual(8),
                            pf.nn.AdaptiveAvgPool2d(1), pf.nn.Flatten(), pf.nn.Linear(8, 5))


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_conv_net_with_batch_norm_and_a_residual_block(device, rng):
    """Training steps (running statistics, gradients, an optimizer) and eval, compiled against eager."""
    _placed(device)
    model, twin = _conv_net(11).to(device), _conv_net(11).to(device)
    compiled = pf.compile(model)
    opts = [pf.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, twin)]
    for _ in range(3):
        x = pf.tensor(make_values(rng, (4, 3, 8, 8), "float32"), device=device)
        target = pf.tensor(rng.integers(0, 5, size=4), device=device)
        for run, opt in ((compiled, opts[0]), (twin, opts[1])):
            opt.zero_grad()
            pf.nn.functional.cross_entropy(run(x), target).backward()
            opt.step()
    for p, q in zip(model.state_dict().values(), twin.state_dict().values()):
        np.testing.assert_allclose(p.to("cpu").detach().numpy(), q.to("cpu").detach().numpy(), rtol=1e-5, atol=1e-6)
    model.eval()
    twin.eval()
    x = pf.tensor(make_values(rng, (2, 3, 8, 8), "float32"), device=device)
    with pf.no_grad():
        for _ in range(2):
            np.testing.assert_allclose(compiled(x).to("cpu").detach().numpy(), twin(x).to("cpu").detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    assert len(compiled.graphs()) == 2  # training and eval


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_conv_batch_norm_relu_fold_in_eval(device, rng):
    """In eval, conv2d -> batch_norm -> relu is one conv2d_batch_norm (can_fuse's CONV_BN_RELU; without the
    relu, the fold alone): the normalisation scaled into the weights on each call, so statistics changed
    between calls are seen. Training keeps the calls. Compared with eager and with PyTorch."""
    _placed(device)
    model = _conv_net(21)
    tmodel = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    with pf.no_grad():
        for m in model.modules():
            if isinstance(m, pf.nn.BatchNorm2d):  # statistics and affine parameters far from 0 and 1
                for t, low, high in ((m.running_mean, -1, 1), (m.running_var, 0.5, 2), (m.weight, 0.5, 1.5),
                                     (m.bias, -1, 1)):
                    t.copy_(pf.tensor(make_values(rng, tuple(t.shape), "float32", low=low, high=high)))
    tmodel.load_state_dict({k: torch.from_numpy(v.detach().numpy()) for k, v in list(model.state_dict().items())[:7]})
    model.to(device).eval()
    tmodel.eval()
    compiled = pf.compile(model)
    with pf.no_grad():
        for call in range(3):
            if call == 2:  # the statistics are read on each call
                model[1].running_var.mul_(2.0)
                tmodel[1].running_var.mul_(2.0)
            x = make_values(rng, (2, 3, 8, 8), "float32")
            px = pf.tensor(x, device=device)
            np.testing.assert_allclose(compiled(px).to("cpu").detach().numpy(), model(px).to("cpu").detach().numpy(), rtol=1e-5,
                                       atol=1e-5)
            first = model[2](model[1](model[0](px)))
            assert_matches(first.to("cpu"), tmodel(torch.from_numpy(x)).detach(), 1e-5, 1e-5, what="conv-bn-relu")
    (graph,) = compiled.graphs()
    assert "batch_norm" not in graph.ops and graph.ops.count("conv2d_batch_norm") == 3, str(graph)
    assert graph.ops[:2] == ["conv2d_batch_norm", "conv2d_batch_norm"], str(graph)  # the relus folded in
    model.train()
    compiled(pf.tensor(make_values(rng, (2, 3, 8, 8), "float32"), device=device))
    assert "batch_norm" in compiled.graphs()[1].ops


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_broadcasting_reductions_and_keyword_tensors(device, rng):
    _placed(device)

    @pf.compile
    def f(x, *, bias, mask):
        y = (x - x.mean(0)) * bias  # (4, 5) with (5,) and (1, 5)
        return pf.where(mask, y, 0.0).sum(1), (y > 0).sum(), y.max(-1).values

    for _ in range(3):
        x, b = make_values(rng, (4, 5), "float32"), make_values(rng, (1, 5), "float32")
        m = rng.random((4, 5)) < 0.5
        out = f(pf.tensor(x, device=device), bias=pf.tensor(b, device=device), mask=pf.tensor(m, device=device))
        y = (x - x.mean(0)) * b
        np.testing.assert_allclose(out[0].to("cpu").detach().numpy(), np.where(m, y, 0).sum(1), rtol=1e-5, atol=1e-6)
        assert out[1].item() == int((y > 0).sum()) and out[1].dtype == pf.int64
        np.testing.assert_allclose(out[2].to("cpu").detach().numpy(), y.max(-1), rtol=1e-6)
    assert len(f.graphs()) == 1


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_data_dependent_sizes_run_eagerly(device, rng):
    """nonzero sizes its result by the data it reads on the host: a replay would keep the traced size."""
    _placed(device)
    f = pf.compile(lambda x: pf.nonzero(x > 0).squeeze(1) * 2)
    with pytest.warns(UserWarning, match="nonzero"):
        f(pf.tensor(make_values(rng, (9,), "float32"), device=device))
    for _ in range(4):
        x = make_values(rng, (9,), "float32")
        np.testing.assert_array_equal(f(pf.tensor(x, device=device)).to("cpu").detach().numpy(), np.nonzero(x > 0)[0] * 2)
    assert f.graphs() == []
    g = pf.compile(lambda x, m: x[m] + 1)  # a boolean mask's selection: nonzero inside
    with pytest.warns(UserWarning, match="mask"):
        x, m = make_values(rng, (6,), "float32"), rng.random(6) < 0.5
        np.testing.assert_array_equal(g(pf.tensor(x, device=device), pf.tensor(m, device=device)).to("cpu").detach().numpy(),
                                      x[m] + 1)


def test_can_fuse_names_seed_000_patterns():
    from pyflame.backend import rocm

    F = rocm.FusedOpType
    cases = {("matmul", "add"): F.MATMUL_BIAS, ("linear",): F.MATMUL_BIAS,
             ("matmul", "add", "relu"): F.MATMUL_BIAS_RELU, ("linear", "relu"): F.MATMUL_BIAS_RELU,
             ("matmul", "add", "gelu"): F.MATMUL_BIAS_GELU, ("linear", "gelu"): F.MATMUL_BIAS_GELU,
             ("conv2d", "add"): F.CONV_BIAS, ("conv2d", "add", "relu"): F.CONV_BIAS_RELU,
             ("conv2d", "relu"): F.CONV_BIAS_RELU, ("conv2d", "batch_norm", "relu"): F.CONV_BN_RELU,
             ("add", "relu"): F.ADD_RELU, ("mul", "add"): F.MUL_ADD}
    for ops, want in cases.items():
        assert rocm.can_fuse(list(ops)) is want, ops
    assert {t for t in cases.values()} == set(F)
    for ops in ([], ["relu", "add"], ["matmul"], ["add", "mul"], ["linear", "relu", "relu"]):
        assert rocm.can_fuse(ops) is None, ops
    with pytest.raises(ValueError, match="unknown op 'matmull'"):
        rocm.can_fuse(["matmull", "add"])
    with pytest.raises(TypeError):
        rocm.can_fuse("matmul")


_FLOAT_TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12), "float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2)}


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_elementwise_chain_runs_as_one_fused_call(device, dtype, rng):
    """x * w + b, a ReLU, a Python number, a sigmoid and a product: one fused_elementwise call, with
    the eager results (the steps' roundings to the dtype kept) and torch's; a bias broadcast over rows."""
    _placed(device)

    @pf.compile
    def f(x, w, b):
        h = pf.relu(x * w + b)
        return pf.sigmoid(h * 0.5 - 1.0) * h

    for shape in ((64, 33), (64, 33), (7, 33)):  # trace, replay, retrace
        x, w, b = (make_values(rng, s, dtype) for s in (shape, shape, shape[-1:]))
        args = [pf.tensor(v, device=device).to(getattr(pf, dtype)) for v in (x, w, b)]
        got, eager = f(*args), f._fn(*args)
        assert got.dtype == eager.dtype and got.device == eager.device
        rtol, atol = _FLOAT_TOL[dtype]
        np.testing.assert_allclose(got.to(pf.float64).to("cpu").detach().numpy(), eager.to(pf.float64).to("cpu").detach().numpy(),
                                   rtol=rtol, atol=atol)
        tx, tw, tb = (torch.from_numpy(np.asarray(v)).to(getattr(torch, dtype)) for v in (x, w, b))
        th = torch.relu(tx * tw + tb)
        assert_matches(got.to("cpu"), torch.sigmoid(th * 0.5 - 1.0) * th, rtol, atol, what="fused chain")
    graph = f.graphs()[0]
    assert graph.ops == ["fused_elementwise"], str(graph)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_fusion_keeps_shared_values_and_transposed_inputs(device, rng):
    """A value read twice outside its chain stays a call of its own; non-contiguous inputs
    (a transpose) take the strided kernel; both results equal eager."""
    _placed(device)

    @pf.compile
    def f(x, y):
        a = pf.exp(x * 0.1)  # read by both results below
        return (a + y.T).tanh(), a * 3.0 - 1.0

    for _ in range(3):
        x, y = make_values(rng, (16, 24), "float32"), make_values(rng, (24, 16), "float32")
        px, py = pf.tensor(x, device=device), pf.tensor(y, device=device)
        for got, want in zip(f(px, py), f._fn(px, py)):
            np.testing.assert_allclose(got.to("cpu").detach().numpy(), want.to("cpu").detach().numpy(), rtol=1e-6, atol=1e-6)
        a = np.exp(x * np.float32(0.1))
        np.testing.assert_allclose(f(px, py)[1].to("cpu").detach().numpy(), a * 3 - 1, rtol=1e-5, atol=1e-5)
    ops = f.graphs()[0].ops
    assert ops == ["fused_elementwise", "permute", "fused_elementwise", "fused_elementwise"], ops


def test_fused_chain_in_a_device_graph(rng):
    """mode="reduce-overhead": the fused kernel, compiled during the capture, replays in the device graph."""
    _placed("rocm")
    f = pf.compile(lambda x, y: pf.relu(x * y + 1.0) * 2.0, mode="reduce-overhead")
    for _ in range(4):
        x, y = make_values(rng, (128, 64), "float32"), make_values(rng, (128, 64), "float32")
        got = f(pf.tensor(x, device="rocm"), pf.tensor(y, device="rocm"))
        np.testing.assert_allclose(got.to("cpu").detach().numpy(), np.maximum(x * y + 1, 0) * 2, rtol=1e-6, atol=1e-6)
    assert f.graphs()[0].ops == ["fused_elementwise"] and f._device_graphs() == 1


def test_factory_device_replayed(rng):
    """A factory's device= holds for its call at every replay: the GPU arange (a cumulative sum on the
    GPU) stays there, so the graph is captured whole, with the current device 'cpu'."""
    _placed("rocm")
    limit = pf.tensor([3], device="rocm")
    f = pf.compile(lambda x: x * (pf.arange(8, device="rocm") <= limit), mode="reduce-overhead")
    for step in range(3):
        x = make_values(rng, (8,), "float32")
        got = f(pf.tensor(x, device="rocm"))
        assert got.device.type == "rocm"
        np.testing.assert_array_equal(got.to("cpu").detach().numpy(), x * (np.arange(8) <= 3 + step))
        limit.add_(1)
    assert f._device_graphs() == 1


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_reductions_of_fused_chains(device, dtype, rng):
    """A mean of squared differences is one fused_reduction; softmax and layer_norm written from
    primitives equal torch's. On the GPU the reductions take the chains that other calls also read
    (computing them again), and what reads them fuses with the rest: softmax is max, one
    fused_reduction and one fused_elementwise; on the CPU nothing is computed twice."""
    _placed(device)
    tdtype = getattr(torch, dtype)
    rtol, atol = _FLOAT_TOL[dtype]

    def place(v):
        return pf.tensor(v, device=device).to(getattr(pf, dtype))

    def ref(v):
        return torch.from_numpy(np.asarray(v)).to(tdtype)

    mse = pf.compile(lambda p, t: ((p - t) ** 2).mean())

    @pf.compile
    def softmax(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)

    @pf.compile
    def layer_norm(x, w, b):
        d = x - x.mean(-1, keepdim=True)
        return d / ((d * d).mean(-1, keepdim=True) + 1e-5).sqrt() * w + b

    for rows in (64, 64, 9):  # trace, replay, retrace
        p, t = make_values(rng, (rows, 10), dtype), make_values(rng, (rows, 10), dtype)
        assert_matches(mse(place(p), place(t)).to("cpu"), ((ref(p) - ref(t)) ** 2).mean(), rtol, atol, what="mse")
        x = make_values(rng, (rows, 384), dtype)
        assert_matches(softmax(place(x)).to("cpu"), torch.softmax(ref(x).float(), -1).to(tdtype), rtol, atol,
                       what="softmax")
        w, b = make_values(rng, (384,), dtype), make_values(rng, (384,), dtype)
        tx = ref(x)  # the same primitives in the dtype (bfloat16 rounds each step)
        d = tx - tx.mean(-1, keepdim=True)
        want = d / ((d * d).mean(-1, keepdim=True) + 1e-5).sqrt() * ref(w) + ref(b)
        assert_matches(layer_norm(place(x), place(w), place(b)).to("cpu"), want, rtol, atol, what="layer_norm")
    assert mse.graphs()[0].ops == ["fused_reduction"], str(mse.graphs()[0])
    if device == "rocm":
        assert softmax.graphs()[0].ops == ["max", "fused_reduction", "fused_elementwise"], str(softmax.graphs()[0])
        assert layer_norm.graphs()[0].ops == ["mean", "fused_reduction", "fused_elementwise"], str(layer_norm.graphs()[0])
    else:
        assert softmax.graphs()[0].ops == ["max", "fused_elementwise", "sum", "div"], str(softmax.graphs()[0])


def test_reduction_fusion_on_the_gpu_in_a_device_graph(rng):
    """A training step's loss and its reductions in a captured device graph: the fused reduction's
    two kernels (parts, then their sum: few outputs of many elements) replay with new inputs."""
    _placed("rocm")
    f = pf.compile(lambda x, y: ((x - y).abs() * 0.5).sum(), mode="reduce-overhead")
    for _ in range(3):
        x, y = make_values(rng, (512, 1024), "float32"), make_values(rng, (512, 1024), "float32")
        got = f(pf.tensor(x, device="rocm"), pf.tensor(y, device="rocm"))
        np.testing.assert_allclose(got.item(), (np.abs(x.astype(np.float64) - y) * 0.5).sum(), rtol=1e-5)
    assert f.graphs()[0].ops == ["fused_reduction"] and f._device_graphs() == 1


def test_fused_elementwise_errors():
    x = pf.ones(3)
    with pytest.raises(ValueError, match="not an elementwise op"):
        pf.fused_elementwise([("sum", [0])], x)
    with pytest.raises(ValueError, match="takes 2 argument"):
        pf.fused_elementwise([("mul", [0])], x)
    with pytest.raises(IndexError, match="reads step 0"):
        pf.fused_elementwise([("exp", [-1])], x)
    with pytest.raises(TypeError, match="one dtype"):
        pf.fused_elementwise([("add", [0, 1])], x, pf.ones(3, dtype=pf.float64))
    with pytest.raises(TypeError, match="floating"):
        pf.fused_elementwise([("add", [0, 1])], pf.ones(3, dtype=pf.int32), pf.ones(3, dtype=pf.int32))
    with pytest.raises(ValueError, match="tensor input"):
        pf.fused_elementwise([("add", [0, 1])], 1.0, 2.0)
    with pytest.raises(ValueError, match="no step reads input 1"):
        pf.fused_elementwise([("exp", [0])], x, pf.ones(4, 3))
    with pytest.raises(ValueError, match="sum, mean, max or min"):
        pf.fused_reduction([("exp", [0])], x, reduce="prod")
    with pytest.raises(ValueError, match="no identity"):
        pf.fused_reduction([("exp", [0])], pf.ones(0), reduce="max")
