"""Shared fixtures: a per-test seeded NumPy generator and GPU skip helpers."""

import os
import sys
import zlib

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
# Fresh GPU allocations are filled with 0xFF (NaN for floats) so a kernel that
# skips an element cannot pass by finding the right value left over.
os.environ.setdefault("PYFLAME_POISON_ALLOCATIONS", "1")
# GPU results are compared with the CPU at float32 tolerances: no TF32 convolutions
# (matmul TF32 is off by default); test_rocm_libs.py checks the TF32 switches.
os.environ.setdefault("PYFLAME_CONV_ALLOW_TF32", "0")

import pyflame as pf  # noqa: E402


@pytest.fixture
def rng(request):
    """numpy Generator seeded from the test's id: reproducible per test, different across tests."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(autouse=True)
def _restore_global_state():
    """Tests that change the current device or strict placement put them back."""
    device = pf.get_device()
    strict = pf.strict_device_placement()
    yield
    if pf.get_device() != device:
        pf.set_device(device)
    if pf.strict_device_placement() != strict:
        pf.set_strict_device_placement(strict)


@pytest.fixture(params=["cpu", "rocm"])
def device(request):
    """Each device in turn, made current (ops run on the current device, docs/architecture.md);
    'rocm' skips with the reason when no GPU is usable."""
    if request.param == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    pf.set_device(request.param)
    return request.param


requires_no_rocm = pytest.mark.skipif(
    pf.rocm_is_available(), reason="a ROCm device is available; these tests cover the no-GPU behaviour"
)
