"""Device API without a GPU: the CPU build (or a ROCm build on a machine without a
usable GPU) imports, runs on the CPU and says why ROCm is unavailable.

On a machine where ROCm works these tests skip (the GPU suite covers it).
"""

import os

import pytest

import pyflame as pf
from conftest import requires_no_rocm


def _alive():
    assert pf.get_device() == "cpu"
    assert (pf.ones(2) * 3).tolist() == [3.0, 3.0]


def test_exception_hierarchy():
    assert issubclass(pf.ROCmError, RuntimeError)
    assert issubclass(pf.ROCmNotAvailableError, pf.ROCmError)
    assert issubclass(pf.ROCmNotAvailableError, RuntimeError)
    assert issubclass(pf.ROCmMemoryError, pf.ROCmError)
    assert issubclass(pf.ROCmMemoryError, MemoryError)
    assert issubclass(pf.DeviceError, pf.ROCmError)
    assert issubclass(pf.HIPCompilationError, pf.ROCmError)
    assert issubclass(pf.NotSupportedError, RuntimeError)


@requires_no_rocm
def test_rocm_queries():
    assert pf.rocm_is_available() is False
    assert pf.rocm_device_count() == 0
    assert pf.rocm_get_device() == -1
    reason = pf.rocm_unavailable_reason()
    assert isinstance(reason, str) and reason.strip()


@requires_no_rocm
@pytest.mark.parametrize("fn", [lambda: pf.rocm_set_device(0), lambda: pf.rocm_get_device_info(0),
                                lambda: pf.rocm_get_device_info()], ids=["set_device", "info", "info-default"])
def test_rocm_calls_raise_not_available(fn):
    with pytest.raises(pf.ROCmNotAvailableError) as info:
        fn()
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, pf.ROCmError)
    assert str(info.value)
    _alive()


@requires_no_rocm
@pytest.mark.parametrize("device", ["rocm", "rocm:0", "rocm:1"])
def test_set_device_rocm_raises_with_reason(device):
    with pytest.raises(RuntimeError) as info:
        pf.set_device(device)
    assert isinstance(info.value, pf.ROCmNotAvailableError)
    msg = str(info.value)
    assert pf.rocm_unavailable_reason() in msg, f"message does not say why: {msg!r}"
    _alive()


@requires_no_rocm
@pytest.mark.parametrize("make", [lambda: pf.ones(2).to("rocm"), lambda: pf.zeros(2, device="rocm"),
                                  lambda: pf.tensor([1.0], device="rocm:0")], ids=["to", "zeros", "tensor"])
def test_tensors_cannot_go_to_rocm(make):
    with pytest.raises(pf.ROCmNotAvailableError) as info:
        make()
    assert pf.rocm_unavailable_reason() in str(info.value)
    _alive()


@pytest.mark.parametrize("device", ["tpu", "rocm:x", "rocm:-1", "", "cpu:", "rocm:", "gpu"])
def test_set_device_invalid_strings(device):
    with pytest.raises(ValueError):
        pf.set_device(device)
    _alive()


def test_set_device_unknown_backend():
    with pytest.raises(RuntimeError):
        pf.set_device("cerebras")
    _alive()


def test_cpu_device():
    pf.set_device("cpu")
    assert pf.get_device() == "cpu"
    t = pf.ones(3)
    assert t.device == "cpu"
    info = pf.device_info()
    assert info["type"] == "cpu"
    assert isinstance(info["name"], str) and info["name"]
    assert isinstance(info["cores"], int) and info["cores"] >= 1
    assert info["cores"] == os.cpu_count()
    assert pf.synchronize() is None
    pf.set_device("cpu")
    _alive()


def test_cpu_threads_setting():
    n = pf.cpu_threads()
    assert isinstance(n, int) and n >= 1
    try:
        pf.set_cpu_threads(1)
        assert pf.cpu_threads() == 1
        assert pf.sum(pf.ones(10000)).item() == 10000.0
    finally:
        pf.set_cpu_threads(n)
    assert pf.cpu_threads() == n


def test_has_kernel_for_rocm_in_a_cpu_build():
    if pf.rocm_is_available():
        pytest.skip("ROCm available")
    # asking does not fail; with no GPU backend there are no ROCm kernels to dispatch to
    for name, family in pf.op_table():
        r = pf.has_kernel(name, "rocm")
        assert r in (True, False)


def test_build_flavour_is_recorded():
    # cmake/detect_gpu.cmake's choice, installed with the package; a GPU build matches its backend.
    from pyflame import info

    flavour = info.flavour()
    assert flavour.startswith(("the CPU flavour: ", "the nvidia GPU flavour: ", "the amd GPU flavour: ")), flavour
    gpu_built = os.path.exists(os.path.join(info.cmake_prefix_path(), "lib", "libpyflame_rocm.so"))
    assert flavour.startswith("the CPU flavour") != gpu_built, flavour
    assert flavour in info.report()
