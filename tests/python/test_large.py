"""Tensors past 2^31 elements index correctly (64-bit indexing everywhere).

Uses 2 GiB of uint8, so it needs about 4.5 GiB of free memory; it skips otherwise."""

import pytest

import pyflame as pf
from host_memory import N, marked_past_int32, needs_free_memory


@needs_free_memory(5)
def test_past_int32_indexing():
    t = marked_past_int32()
    t[2**31 - 1] = 3
    assert t[N - 1].item() == 7
    assert pf.max(t).item() == 7
    assert pf.argmax(t).item() == N - 1
    tail = t[2**31:]  # a view whose offset is past 2^31
    assert tail.shape == (16,)
    assert tail.tolist()[3] == 5
    assert pf.sum(tail).item() == 12
    # An elementwise op over the whole tensor writes its last elements too.
    u = t + 1
    assert u[N - 1].item() == 8 and u[2**31 - 1].item() == 4 and u[0].item() == 1
    del u
    # A 2-D view with a row stride past 2^31.
    m = t.view(2, N // 2)
    assert m[1, N // 2 - 1].item() == 7
    m[0, 5] = 9
    assert pf.amax(m, dim=1).tolist() == [9, 7]  # 2^31 - 1 lies in row 1


@pytest.mark.skipif(not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")
def test_strided_gpu_kernels_past_32_bits():
    """The GPU's strided walk takes 32-bit arithmetic only where the elements and each operand's
    byte span fit in 31 bits: past either, it must take the 64-bit one (6 GiB of GPU memory)."""
    # More than 2^31 elements: a broadcast add over a (2, N / 2) view.
    t = pf.zeros(N, dtype=pf.uint8, device="rocm")
    t[N - 1] = 7
    t[2**31 - 1] = 3
    u = t.view(2, N // 2) + pf.tensor([[1], [2]], dtype=pf.uint8, device="rocm")
    assert u[1, N // 2 - 1].item() == 9 and u[1, 2**31 - 1 - N // 2].item() == 5 and u[0, 0].item() == 1
    del t, u
    # Fewer elements, but an operand spanning more than 2 GiB: a transposed copy of float32.
    cols = 2**28 + 8
    f = pf.zeros(2, cols, device="rocm")
    f[1, cols - 1] = 5.0
    f[0, cols - 2] = 4.0
    g = f.t().contiguous()
    assert g[cols - 1, 1].item() == 5.0 and g[cols - 2, 0].item() == 4.0 and g[cols - 1, 0].item() == 0.0
