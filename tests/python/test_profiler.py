"""pf.profiler's regions (seed 003): counts and times against independent clocks."""

import json
import threading
import time

import pytest

import pyflame as pf


@pytest.fixture(autouse=True)
def _fresh_summary():
    pf.profiler.reset_profiling_summary()
    yield
    pf.profiler.reset_profiling_summary()


def test_regions_count_and_time_host_work():
    for pause in (0.02, 0.01, 0.03):
        with pf.profiler.profile_region("outer"):
            with pf.profiler.profile_region("inner"):
                time.sleep(pause)
    regions = pf.profiler.get_profiling_summary()["regions"]
    assert set(regions) == {"outer", "inner"}
    for name in ("outer", "inner"):
        r = regions[name]
        assert r["count"] == 3
        assert 10 <= r["min_ms"] <= r["avg_ms"] <= r["max_ms"] and r["max_ms"] >= 30
        assert abs(r["total_ms"] - 3 * r["avg_ms"]) < 1e-9
    assert regions["outer"]["total_ms"] >= regions["inner"]["total_ms"]


def test_decorator_recursion_threads_and_reset():
    region = pf.profiler.profile_region("f")

    @region
    def f(n):
        """doc"""
        time.sleep(0.002)
        return n if n == 0 else f(n - 1)

    assert f(2) == 0 and f.__doc__ == "doc"
    workers = [threading.Thread(target=f, args=(0,)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert pf.profiler.get_profiling_summary()["regions"]["f"]["count"] == 6
    pf.profiler.reset_profiling_summary()
    assert pf.profiler.get_profiling_summary() == {"regions": {}}
    with pytest.raises(ValueError):
        pf.profiler.profile_region("")


def test_gpu_regions_count_the_work_they_queue():
    """Kernels are queued asynchronously: the region's time is the GPU's, not the queueing's."""
    if not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    a = pf.randn(4096, 4096, device="rocm")
    pf.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        a = a @ a / 64.0
    pf.synchronize()
    synced_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(3):
        with pf.profiler.profile_region("matmuls"):
            for _ in range(20):
                a = a @ a / 64.0
        pf.synchronize()
    r = pf.profiler.get_profiling_summary()["regions"]["matmuls"]
    assert r["count"] == 3 and r["min_ms"] >= 0.5 * synced_ms, (r, synced_ms)


# ---------------------------------------------------------------- the op profiler (pf.profiler.profile)

P = pf.profiler


def _mlp_step(device):
    pf.manual_seed(0)
    model = pf.nn.Sequential(pf.nn.Linear(8, 16), pf.nn.ReLU(), pf.nn.Linear(16, 4)).to(device)
    x = pf.randn(5, 8, device=device)
    return model, x


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_op_profile_counts_calls_nests_composites_and_times_the_gpu(device, tmp_path):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    model, x = _mlp_step(device)
    target = pf.randn(5, 4, device=device)
    with P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.CUDA], record_shapes=True) as prof:
        for _ in range(3):
            with P.record_function("step"):
                loss = pf.nn.functional.mse_loss(model(x), target)
                loss.backward()
    events = prof.events()
    top = [e.name for e in events if e.depth == 0 and not e.is_user_annotation]
    assert top.count("linear") == 6 and top.count("relu") == 3 and top.count("mse_loss") == 3, top
    # mse_loss runs its decomposition in grad mode: its parts nest under it and are not its self time.
    loss_call = next(e for e in events if e.name == "mse_loss")
    parts = [e for e in events if e.depth == 1 and e.thread == loss_call.thread
             and loss_call.start_us <= e.start_us <= loss_call.start_us + loss_call.cpu_time_total]
    assert parts and all(e.cpu_time_total <= loss_call.cpu_time_total for e in parts)
    assert 0 <= loss_call.self_cpu_time_total < loss_call.cpu_time_total
    steps = [e for e in events if e.is_user_annotation]
    assert [e.name for e in steps] == ["step"] * 3
    assert all(0 <= e.self_cpu_time_total < e.cpu_time_total for e in steps)  # less the ops inside
    first_linear = next(e for e in events if e.name == "linear")
    assert first_linear.input_shapes == [[5, 8], [16, 8], [16]]
    for e in events:
        assert e.start_us >= 0 and e.cpu_time_total >= 0
        if device == "rocm" and not e.is_user_annotation:
            assert e.device.startswith("rocm") and e.device_start_us is not None and e.device_time_total >= 0
    if device == "rocm":
        assert sum(e.device_time_total for e in events if e.depth == 0) > 0

    rows = {r.key: r for r in prof.key_averages()}
    assert rows["linear"].count == 6 and rows["relu"].count == 3
    assert rows["linear"].cpu_time == pytest.approx(rows["linear"].cpu_time_total / 6)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    assert "Name" in table and "# of Calls" in table and len(table.splitlines()) == 5 + 5 + (device == "rocm")
    assert ("GPU total" in table) == (device == "rocm")
    by_shape = prof.key_averages(group_by_input_shape=True)
    assert {str(r.input_shapes) for r in by_shape if r.key == "linear"} == {"[[5, 8], [16, 8], [16]]",
                                                                          "[[5, 16], [4, 16], [4]]"}

    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    complete = [t for t in trace if t["ph"] == "X"]
    assert {"linear", "relu", "mse_loss", "step"} <= {t["name"] for t in complete}
    assert all(isinstance(t["ts"], float) and t["dur"] >= 0 for t in complete)
    assert any(t["cat"] == "kernel" for t in complete) == (device == "rocm")


def test_op_profile_without_gpu_activity_and_errors():
    a = pf.randn(4, 4)
    with P.profile(activities=[P.ProfilerActivity.CPU]) as prof:
        b = (a + a).sum()
        with pytest.raises(ValueError, match="already running"):
            with P.profile():
                pass
        with pytest.raises(RuntimeError, match="after the `with` block"):
            prof.key_averages()
    assert [e.name for e in prof.events() if e.depth == 0] == ["add", "sum"]
    assert all(e.device_start_us is None and e.input_shapes == [] for e in prof.events())
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="wall")
    with pytest.raises(pf.NotSupportedError, match="with_stack"):
        P.profile(with_stack=True)
    with pytest.raises(TypeError, match="ProfilerActivity"):
        P.profile(activities=["cpu"])
    # An exception inside ends the session; the next one starts clean.
    with pytest.raises(ZeroDivisionError):
        with P.profile():
            a * 2
            1 / 0
    with P.profile() as again:
        b + 1
    assert [e.name for e in again.events()] == ["add"]
    assert not pf._C._profiler_active()
