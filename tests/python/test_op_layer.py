"""The op layer's apply point from Python: generators and one seed on every
device, kernel-side index checks, no hidden waits for the GPU, composites."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import pf_to_numpy

gpu = pytest.mark.skipif(not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")


@pytest.fixture(autouse=True)
def _cpu_after():
    yield
    pf.set_device("cpu")


# ----------------------------------------------------------------- generators


def test_generator_objects_are_independent_streams():
    g1 = pf.Generator().manual_seed(7)
    g2 = pf.Generator().manual_seed(7)
    a = pf.randn(100, generator=g1)
    pf.randn(5)  # the default generator's draws do not move g2
    b = pf.randn(100, generator=g2)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    c = pf.randn(100, generator=g1)  # g1 moved on: new numbers
    assert not np.array_equal(a.detach().numpy(), c.detach().numpy())
    assert g1.initial_seed() == 7


def test_manual_seed_restarts_the_default_stream():
    pf.manual_seed(123)
    a = [pf.rand(4, 4), pf.randint(0, 10, (8,)), pf.dropout(pf.ones(64), 0.5)]
    pf.manual_seed(123)
    b = [pf.rand(4, 4), pf.randint(0, 10, (8,)), pf.dropout(pf.ones(64), 0.5)]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())


def test_generator_state_round_trips():
    g = pf.Generator().manual_seed(99)
    pf.rand(10, generator=g)
    state = g.get_state()
    a = pf.randn(6, generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(pf.randn(6, generator=g).detach().numpy(), a.detach().numpy())
    with pytest.raises(ValueError, match="16"):
        g.set_state(pf.zeros(3, dtype=pf.uint8))


def test_generator_argument_of_the_random_ops():
    g = pf.Generator().manual_seed(5)
    x = pf.ones(1000)
    kept = pf.dropout(x, 0.3, generator=g)
    pf.manual_seed(6)  # the default generator is not involved
    g.manual_seed(5)
    np.testing.assert_array_equal(pf.dropout(x, 0.3, generator=g).detach().numpy(), kept.detach().numpy())
    assert not np.array_equal(pf.dropout(x, 0.3, generator=g).detach().numpy(), kept.detach().numpy())  # g moved on
    with pytest.raises(TypeError):
        pf.rand(3, generator=5)


@gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_one_seed_same_numbers_on_cpu_and_gpu(dtype):
    dt = getattr(pf, dtype)

    def draw(device):
        pf.set_device(device)
        pf.manual_seed(2024)
        out = [pf.rand(257, 3, dtype=dt), pf.randn(1001, dtype=dt), pf.randint(-7, 300, (64, 5)),
               pf.dropout(pf.ones(4099, dtype=dt), 0.25), pf.rand(0, dtype=dt)]
        return [pf_to_numpy(t.to("cpu")) for t in out]

    cpu, gpu_ = draw("cpu"), draw("rocm")
    for name, a, b in zip(("rand", "randn", "randint", "dropout", "empty"), cpu, gpu_):
        if name == "randn" and dtype == "float64":  # double log/cos may differ in the last bit between libraries
            np.testing.assert_allclose(b, a, rtol=1e-14, atol=1e-14, err_msg=name)
        else:
            np.testing.assert_array_equal(b, a, err_msg=f"{name} {dtype}")


# ----------------------------------------------------------------- kernel-side checks


def test_out_of_range_index_raises_and_leaves_the_input():
    x = pf.randn(3, 4)
    before = x.detach().numpy().copy()
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 1 with size 4"):
        x.scatter_(1, pf.tensor([[0, 7]]), pf.ones(1, 2))
    np.testing.assert_array_equal(x.detach().numpy(), before)
    assert pf.sum(x).item() == pytest.approx(float(before.sum()), rel=1e-6)  # the next op works


@gpu
def test_out_of_range_index_on_the_gpu_raises_at_the_next_synchronisation():
    pf.set_device("rocm")
    x = pf.randn(5, 3)
    bad = pf.tensor([0, 9, 1])
    y = pf.index_select(x, 0, bad)  # queued: the host does not wait to check
    with pytest.raises(IndexError, match=r"index_select: index 9 is out of bounds for dimension 0 with size 5"):
        pf.synchronize()
    # The library and the device stay usable.
    z = pf.index_select(x, 0, pf.tensor([4, 0]))
    np.testing.assert_array_equal(z.cpu().detach().numpy(), x.cpu().detach().numpy()[[4, 0]])
    del y
    # Only the first error is reported; the next wait after it is clean again.
    pf.gather(x, 1, pf.tensor([[0], [-1], [3], [0], [1]]))
    pf.scatter_add(x, 0, pf.tensor([[7, 0, 0]]), pf.ones(1, 3))
    with pytest.raises(IndexError, match=r"gather: index -1 is out of bounds for dimension 1 with size 3"):
        pf.ones(1).item()
    pf.synchronize()
    assert pf.add(pf.ones(2), 1).cpu().tolist() == [2.0, 2.0]


@gpu
def test_gpu_ops_whose_shapes_do_not_depend_on_values_never_wait():
    pf.set_device("rocm")
    x = pf.randn(64, 32)
    w = pf.randn(16, 32)
    idx = pf.randint(0, 64, (10,))
    # warm up: libraries choose their algorithms once
    pf.linear(x, w).softmax(-1).sum()
    pf.synchronize()
    before = pf.synchronization_count()
    for _ in range(3):
        y = pf.linear(x, w) * 2.0 + 1
        y = pf.where(y > 0, y, 0.0).softmax(-1)
        y = pf.index_select(y, 0, idx) + pf.randn(10, 16)
        s = y.sum(dim=1).max()
        x[0] = s  # an assignment through a view: a copy on the device
        pf.dropout(x, 0.1)
    assert pf.synchronization_count() == before, "a GPU op waited for the device"
    s.item()
    assert pf.synchronization_count() == before + 1


# ----------------------------------------------------------------- composites and queries


def test_has_kernel_and_is_supported():
    assert pf.has_kernel("linear", "cpu") and pf.is_supported("linear", "cpu")
    assert pf.is_supported("linear", "rocm")  # the composite runs wherever matmul and add do
    with pytest.raises(ValueError, match="unknown op"):
        pf.is_supported("no_such_op", "cpu")


def test_in_place_write_into_overlapping_memory_raises():
    e = pf.zeros(3).expand(2, 3)
    with pytest.raises(ValueError, match="share memory"):
        e.add_(1)
    with pytest.raises(ValueError, match="share memory"):
        e += 1
    t = torch.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError):
        t.add_(1)
