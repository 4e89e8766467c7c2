"""Two GPUs (issue 24): copies between them, as PyTorch scripts write them. Skipped with fewer."""

import numpy as np
import pytest
import torch

import pyflame as pf

requires_two = pytest.mark.skipif(pf.cuda.device_count() < 2,
                                  reason=f"needs 2 GPUs, {pf.cuda.device_count()} visible")


@requires_two
def test_peer_access_is_reported_both_ways():
    assert pf.cuda.can_device_access_peer(0, 1) == pf.cuda.can_device_access_peer("rocm:1", "rocm:0")
    assert not pf.cuda.can_device_access_peer(0, 0)


@requires_two
@pytest.mark.parametrize("shape", [(7,), (1000, 333), (64, 1024, 1024)], ids=["small", "odd", "256MB"])
def test_to_another_gpu_keeps_every_value(rng, shape):
    values = rng.standard_normal(shape).astype(np.float32)
    x = pf.tensor(values, device="rocm:0")
    y = x.to("rocm:1")
    assert y.device == pf.device("rocm:1") and y.is_placed
    np.testing.assert_array_equal(y.cpu().detach().numpy(), values)
    np.testing.assert_array_equal(y.to("rocm:0").cpu().detach().numpy(), values)


@requires_two
def test_the_copy_waits_for_the_source_and_the_source_for_the_copy(rng):
    """The source is the result of work still queued on device 0, and is freed (its memory
    reused by device 0's next op) right after the copy is queued."""
    a = pf.tensor(rng.standard_normal((2048, 2048)).astype(np.float32), device="rocm:0")
    want = (torch.from_numpy(a.cpu().detach().numpy()).double() @ torch.from_numpy(a.cpu().detach().numpy()).double()).float()
    for _ in range(3):
        y = (a @ a).to("rocm:1")  # the product is in flight on device 0
        pf.ones(2048, 2048, device="rocm:0").mul_(-1.0)  # may take the product's memory
        np.testing.assert_allclose(y.cpu().detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-3)


@requires_two
def test_copy_into_another_gpu_converts_and_strides(rng):
    values = rng.standard_normal((32, 48)).astype(np.float32)
    src = pf.tensor(values, device="rocm:0").t()  # a transposed view
    dst = pf.empty(48, 32, dtype=pf.float64, device="rocm:1")
    dst.copy_(src)
    np.testing.assert_array_equal(dst.cpu().detach().numpy(), values.T.astype(np.float64))


@requires_two
def test_module_to_another_gpu_and_back(rng):
    model = pf.nn.Linear(16, 8).to("rocm:0")
    x = pf.tensor(rng.standard_normal((4, 16)).astype(np.float32), device="rocm:0")
    want = model(x).cpu().detach().numpy()
    weight = model.weight
    model.to("rocm:1")
    assert model.weight is weight and model.weight.device == pf.device("rocm:1")
    np.testing.assert_allclose(model(x.to("rocm:1")).cpu().detach().numpy(), want, rtol=1e-6, atol=1e-6)


@requires_two
def test_ops_over_two_gpus_raise_naming_both():
    a, b = pf.ones(3, device="rocm:0"), pf.ones(3, device="rocm:1")
    with pytest.raises(RuntimeError, match=r"rocm:0.*rocm:1|rocm:1.*rocm:0"):
        a + b
