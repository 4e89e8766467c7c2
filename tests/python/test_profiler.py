"""pf.profiler's regions (seed 003): counts and times against independent clocks."""

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
