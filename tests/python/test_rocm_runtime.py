"""The ROCm runtime from Python on a real GPU: device API, tensors on the
device, transfers, streams, events, host waits, memory manager, pinned pool.
Every test here skips, with the reason, when no GPU is usable (CI);
scripts/gpu_check.sh runs them on the GPU machine."""

import threading

import numpy as np
import pytest

import pyflame as pf
from pyflame.backend import rocm

pytestmark = pytest.mark.skipif(
    not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


@pytest.fixture(autouse=True)
def _on_cpu_after():
    yield
    pf.set_device("cpu")
    pf.set_strict_device_placement(False)


def _values(rng, dtype, shape):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype in ("uint8", "int8", "int16", "int32", "int64"):
        return rng.integers(-100 if dtype != "uint8" else 0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype("float32" if dtype == "bfloat16" else dtype)


def test_device_api():
    assert pf.rocm_device_count() >= 1
    info = pf.rocm_get_device_info(0)
    for key in ("device_id", "name", "architecture", "total_memory", "free_memory", "compute_units",
                "platform", "warp_size", "runtime_version"):
        assert key in info
    assert info["platform"] in ("amd", "nvidia")
    assert info["architecture"].startswith(("sm_", "gfx"))
    assert info["warp_size"] in (32, 64)
    assert 0 < info["free_memory"] < info["total_memory"]
    pf.set_device("rocm")
    assert pf.get_device() == "rocm:0"
    assert pf.rocm_get_device() == 0
    assert pf.device_info()["type"] == "rocm"
    pf.synchronize()
    pf.rocm_synchronize()
    with pytest.raises(pf.DeviceError):
        pf.set_device(f"rocm:{pf.rocm_device_count()}")
    with pytest.raises(RuntimeError):
        pf.rocm_get_device_info(pf.rocm_device_count())
    assert "rocm:0" in rocm.diagnose()


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_and_numpy(dtype):
    rng = np.random.default_rng(1)
    host = _values(rng, dtype, (37, 53))
    t = pf.tensor(host).to(dtype)
    d = t.to("rocm")
    assert d.device == "rocm:0" and d.dtype == t.dtype and d.shape == t.shape
    back = d.to("cpu")
    ref = t.to("float32").detach().numpy() if dtype == "bfloat16" else t.detach().numpy()
    got = back.to("float32").detach().numpy() if dtype == "bfloat16" else back.detach().numpy()
    np.testing.assert_array_equal(got, ref)
    if dtype != "bfloat16":
        np.testing.assert_array_equal(d.numpy(), ref)  # .numpy() of a device tensor copies to the host


@pytest.mark.parametrize("nbytes", [4, 3 << 20, (20 << 20) + 12])
def test_transfers_of_every_size(nbytes):
    rng = np.random.default_rng(nbytes)
    host = rng.integers(0, 255, nbytes, dtype=np.uint8)
    d = pf.tensor(host).to("rocm")
    np.testing.assert_array_equal(d.detach().numpy(), host)


@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
def test_dtype_conversion_on_device_matches_cpu(src, dst):
    rng = np.random.default_rng(7)
    t = pf.tensor(_values(rng, src, (9, 11))).to(src)
    got = t.to("rocm").to(dst).to("cpu")
    ref = t.to(dst)
    as_np = (lambda x: x.to("float32").detach().numpy()) if dst == "bfloat16" else (lambda x: x.detach().numpy())
    np.testing.assert_array_equal(as_np(got), as_np(ref))


def test_strided_copies_on_device():
    rng = np.random.default_rng(3)
    host = rng.standard_normal((6, 7, 8)).astype(np.float32)
    d = pf.tensor(host).to("rocm")
    np.testing.assert_array_equal(d.permute(2, 0, 1).contiguous().detach().numpy(), host.transpose(2, 0, 1))
    np.testing.assert_array_equal(d[1:, ::2, 3].contiguous().detach().numpy(), host[1:, ::2, 3])
    e = pf.tensor(host[0]).to("rocm").expand(4, 7, 8).contiguous()
    np.testing.assert_array_equal(e.detach().numpy(), np.broadcast_to(host[0], (4, 7, 8)))
    # Writing through a strided view on the device.
    d[:, 1, :] = 5.0
    ref = host.copy()
    ref[:, 1, :] = 5.0
    np.testing.assert_array_equal(d.detach().numpy(), ref)
    d[0] = pf.tensor(host[1])
    ref[0] = host[1]
    np.testing.assert_array_equal(d.detach().numpy(), ref)


def test_creation_on_the_current_device():
    pf.set_device("rocm")
    for t, ref in [
        (pf.zeros(3, 4), np.zeros((3, 4), np.float32)),
        (pf.ones(5, dtype=pf.int32), np.ones(5, np.int32)),
        (pf.full((2, 2), 2.5), np.full((2, 2), 2.5, np.float32)),
        (pf.arange(10), np.arange(10)),
        (pf.eye(3), np.eye(3, dtype=np.float32)),
    ]:
        assert t.device == "rocm:0"
        np.testing.assert_array_equal(t.detach().numpy(), ref)
    pf.manual_seed(11)
    g = pf.randn(100)
    pf.set_device("cpu")
    pf.manual_seed(11)
    c = pf.randn(100)
    assert g.device == "rocm:0"
    np.testing.assert_array_equal(g.detach().numpy(), c.detach().numpy())  # same seed, same draws on every device


def test_implicit_copies_are_counted_and_strict_mode_refuses():
    x = pf.randn(4)
    pf.set_device("rocm")
    pf.reset_implicit_copy_count()
    y = pf.zeros(4)
    y.copy_(x)  # explicit: not counted
    assert pf.implicit_copy_count() == 0
    try:
        pf.add(x, x)  # inputs on the CPU, op on the GPU: both inputs move
    except pf.NotSupportedError:
        pass  # the add kernel comes with the ops slice; the copies happened first
    assert pf.implicit_copy_count() == 2
    pf.set_strict_device_placement(True)
    with pytest.raises(pf.DeviceError):
        pf.add(x, x)
    np.testing.assert_array_equal(y.detach().numpy(), x.detach().numpy())


def test_streams_and_events():
    pf.set_device("rocm")
    s = rocm.Stream(priority=-1)
    assert s.device == 0
    start, end = rocm.Event(enable_timing=True), rocm.Event(enable_timing=True)
    host = np.random.default_rng(0).standard_normal(1 << 22).astype(np.float32)
    with s:
        assert rocm.current_stream() == s.handle
        start.record(s)
        d = pf.tensor(host)  # created and copied on the stream
        e = d.to("float64")
        end.record(s)
    assert rocm.current_stream() != s.handle
    end.synchronize()
    assert end.query() and s.query()
    assert start.elapsed_time(end) > 0
    np.testing.assert_array_equal(e.detach().numpy(), host.astype(np.float64))


def test_each_thread_has_its_own_default_stream():
    pf.set_device("rocm")
    mine = rocm.current_stream()
    assert mine != 0  # never the legacy null stream
    assert mine == rocm.default_stream()
    s = rocm.Stream()
    with s:
        assert rocm.current_stream() == s.handle
        seen = []
        t = threading.Thread(target=lambda: seen.append((rocm.current_stream(0), rocm.default_stream(0))))
        t.start()
        t.join()
        current, default = seen[0]
        assert current == default  # a Stream context belongs to the thread that entered it
        assert default not in (0, mine, s.handle)
    assert rocm.current_stream() == mine


def test_ops_with_python_numbers_do_not_wait_and_item_waits_once():
    pf.set_device("rocm")
    for op in ("mul", "add", "sub"):
        if not pf.has_kernel(op, "rocm"):
            pytest.skip(f"no GPU kernel for {op}")
    rng = np.random.default_rng(5)
    xs = rng.standard_normal(1000).astype(np.float32)
    ys = rng.standard_normal(1000).astype(np.float32)
    x, y = pf.tensor(xs), pf.tensor(ys)
    z = (x * 2 + y) * 0.5 - 1  # once first: kernels loaded, memory cached
    before = pf.synchronization_count()
    for _ in range(10):
        z = (x * 2 + y) * 0.5 - 1
    assert pf.synchronization_count() == before
    value = z[3].item()
    assert pf.synchronization_count() == before + 1
    ref = (xs * np.float32(2) + ys) * np.float32(0.5) - np.float32(1)
    assert value == pytest.approx(float(ref[3]), rel=1e-6)
    pf.synchronize()
    assert pf.synchronization_count() == before + 2


def test_small_copies_keep_their_values_while_the_gpu_is_busy():
    pf.set_device("rocm")
    if not pf.has_kernel("mul", "rocm"):
        pytest.skip("no GPU kernel for mul")
    busy = pf.ones(4096, 4096)
    for _ in range(50):  # queue work, so the copies below wait in the stream for a while
        busy = busy * 1.0
    values = [pf.tensor([float(i), -float(i)]) for i in range(300)]  # each staged in pinned memory
    got = [t.detach().numpy().tolist() for t in values]
    assert got == [[float(i), -float(i)] for i in range(300)]
    assert busy[0, 0].item() == 1.0


def test_memory_manager():
    mm = rocm.get_memory_manager()
    free, total = mm.get_memory_info()
    assert 0 < free <= total
    mm.clear_pool()
    # What stays cached: free parts of segments that hold live blocks (a BLAS workspace, earlier
    # tests' tensors in this process), which no clear can give back.
    held = mm.get_stats()["cached_bytes"]
    # Capture pools of graphs that other tests in this worker still hold are not this test's.
    pools, pool_bytes = mm.get_stats()["pools"], mm.get_stats()["pool_reserved_bytes"]
    p = mm.allocate(1 << 20)
    mm.deallocate(p)
    mm.reset_stats()
    p = mm.allocate(1 << 20)
    stats = mm.get_stats()
    assert stats["cache_hits"] == 1 and stats["total_allocated"] >= 1 << 20
    assert stats["pools"] == pools and stats["pool_reserved_bytes"] == pool_bytes  # a plain allocation
    mm.deallocate(p)
    assert mm.get_stats()["total_deallocations"] == 1
    mm.clear_pool()
    assert mm.get_stats()["cached_bytes"] == held


def test_out_of_memory_is_a_clear_error_and_nothing_breaks():
    pf.set_device("rocm")
    keep = pf.arange(1000).to("float32")
    total = rocm.get_memory_manager().get_memory_info()[1]
    with pytest.raises(pf.ROCmMemoryError) as err:
        pf.empty(total // 2)  # float32: twice the device's memory
    assert isinstance(err.value, MemoryError) and isinstance(err.value, RuntimeError)
    assert "out of memory" in str(err.value)
    np.testing.assert_array_equal(keep.detach().numpy(), np.arange(1000, dtype=np.float32))
    assert pf.ones(10).detach().numpy().sum() == 10


def test_pinned_pool_and_warmup():
    pool = rocm.get_pinned_pool()
    p = pool.acquire(1 << 20)
    assert pool.in_use_bytes >= 1 << 20
    pool.release(p)
    pool.warmup([1 << 16, 1 << 22])
    assert pool.cached_bytes >= (1 << 16) + (1 << 22)
    pool.clear()
    assert pool.cached_bytes == 0
    rocm.warmup_memory_pool(batch_size=8, model_size="small")
    with pytest.raises(ValueError):
        rocm.warmup_memory_pool(batch_size=8, model_size="huge")


@pytest.mark.parametrize("visible, expected", [("", 0), ("0", 1)])
def test_hip_visible_devices_is_honoured(visible, expected):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["HIP_VISIBLE_DEVICES"] = visible
    out = subprocess.run(
        [sys.executable, "-c", "import pyflame as pf; print(pf.rocm_device_count()); print(pf.rocm_unavailable_reason())"],
        env=env, capture_output=True, text=True, check=True).stdout.split("\n")
    assert int(out[0]) == expected
    if expected == 0:
        assert out[1] != "None"  # says why


def test_pinned_tensors_and_non_blocking_copies():
    pf.set_device("rocm")
    rng = np.random.default_rng(11)
    pool = rocm.get_pinned_pool()
    values = rng.standard_normal((512, 1024)).astype(np.float32)
    x = pf.tensor(values, device="cpu")
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and p.device == "cpu"
    assert pool.in_use_bytes >= values.nbytes  # (other pinned buffers may have been released meanwhile)
    assert p.pin_memory().data_ptr() == p.data_ptr()
    np.testing.assert_array_equal(p.detach().numpy(), values)
    assert p[1:].is_pinned()  # a view of pinned memory is pinned

    # A blocking copy has read the source when it returns: changing it afterwards is safe.
    busy = pf.ones(4096, 4096)
    for _ in range(30):
        busy = busy * 1.0
    y = p.to("rocm")
    p.fill_(7.0)
    np.testing.assert_array_equal(y.detach().numpy(), values)

    # non_blocking returns before the copy has run (no host wait); freeing the source and
    # pinning new data meanwhile must not hand its memory out before the copy has read it.
    p.copy_(x)
    for _ in range(30):
        busy = busy * 1.0
    before = pf.synchronization_count()
    z = p.to("rocm", non_blocking=True)
    assert pf.synchronization_count() == before
    del p
    others = [pf.full((512, 1024), float(i), device="cpu").pin_memory() for i in range(4)]
    np.testing.assert_array_equal(z.detach().numpy(), values)
    assert [o[0, 0].item() for o in others] == [0.0, 1.0, 2.0, 3.0]
    assert busy[0, 0].item() == 1.0

    with pytest.raises(ValueError, match="only CPU tensors"):
        z.pin_memory()
    assert not z.is_pinned()
