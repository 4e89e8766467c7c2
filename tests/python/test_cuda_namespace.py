"""pf.cuda, the GPU backend under torch.cuda's names: written as PyTorch scripts use torch.cuda."""

import numpy as np
import pytest
import torch

import pyflame as pf
from conftest import requires_no_rocm

requires_rocm = pytest.mark.skipif(not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")


def test_the_torch_guard_ports_by_the_device_name():
    device = "rocm" if pf.cuda.is_available() else "cpu"
    x = pf.ones(3, device=device) * 2
    assert x.device.type == device and pf.cuda.is_available() == pf.rocm_is_available()
    assert pf.cuda.device_count() == pf.rocm_device_count()
    assert pf.cuda.is_bf16_supported() == pf.cuda.is_available()


def test_manual_seed_seeds_the_shared_generator():
    for seed_fn in (pf.cuda.manual_seed, pf.cuda.manual_seed_all):
        seed_fn(1234)
        a = pf.rand(5).detach().numpy()
        pf.manual_seed(1234)
        np.testing.assert_array_equal(a, pf.rand(5).detach().numpy())


@requires_no_rocm
def test_without_a_gpu_as_torch_cuda():
    assert not pf.cuda.is_available() and pf.cuda.device_count() == 0
    for stat in (pf.cuda.memory_allocated, pf.cuda.max_memory_allocated, pf.cuda.memory_reserved,
                 pf.cuda.max_memory_reserved):
        assert stat() == 0
    pf.cuda.empty_cache()
    pf.cuda.reset_peak_memory_stats()
    for call in (pf.cuda.current_device, pf.cuda.synchronize, pf.cuda.get_device_name, pf.cuda.Event):
        with pytest.raises(pf.ROCmNotAvailableError):
            call()


@requires_rocm
def test_memory_figures_follow_the_tensors():
    pf.cuda.synchronize()
    pf.cuda.reset_peak_memory_stats()
    before = pf.cuda.memory_allocated()
    x = pf.empty(1 << 20, device="rocm")  # 4 MiB
    held = pf.cuda.memory_allocated()
    assert held - before >= 4 << 20
    assert pf.cuda.max_memory_allocated() >= held and pf.cuda.memory_reserved() >= held
    assert pf.cuda.max_memory_reserved() >= pf.cuda.memory_reserved()
    del x
    assert pf.cuda.memory_allocated() == before
    pf.cuda.empty_cache()
    assert pf.cuda.memory_reserved() <= pf.cuda.max_memory_reserved()


@requires_rocm
def test_device_queries_streams_and_events():
    index = pf.cuda.current_device()
    assert 0 <= index < pf.cuda.device_count()
    pf.cuda.set_device(index)
    props = pf.cuda.get_device_properties(index)
    assert pf.cuda.get_device_name() == props.name and props.total_memory > 0 and props.multi_processor_count > 0
    x = pf.tensor(np.arange(6, dtype=np.float32), device="rocm")
    start, end = pf.cuda.Event(enable_timing=True), pf.cuda.Event(enable_timing=True)
    with pf.cuda.Stream():
        start.record()
        y = x * 3
        end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    pf.cuda.synchronize(index)
    np.testing.assert_array_equal(y.cpu().detach().numpy(), torch.arange(6, dtype=torch.float32).mul(3).detach().numpy())


@requires_rocm
def test_an_upload_is_complete_for_every_stream(rng):
    """As PyTorch's copy from pageable memory: the data reads the same on a side stream,
    with the upload queued behind a long computation on the default stream."""
    a = pf.tensor(rng.standard_normal((2048, 2048)).astype(np.float32), device="rocm")
    for _ in range(3):
        values = rng.standard_normal(1 << 22).astype(np.float32)
        busy = a
        for _ in range(8):
            busy = busy @ a  # keeps the default stream busy ahead of the upload
        x = pf.tensor(values, device="rocm")
        with pf.cuda.Stream():
            y = x * 3
        pf.cuda.synchronize()
        np.testing.assert_array_equal(y.cpu().detach().numpy(), values * np.float32(3))
        del busy
