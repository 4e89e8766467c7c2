"""Tensors past 2^31 elements index correctly (64-bit indexing everywhere).

Uses 2 GiB of uint8, so it needs about 4.5 GiB of free memory; it skips otherwise."""

import pytest

import pyflame as pf
from host_memory import needs_free_memory

N = 2**31 + 16


@needs_free_memory(5)
def test_past_int32_indexing():
    t = pf.zeros(N, dtype=pf.uint8)
    t[N - 1] = 7
    t[2**31 + 3] = 5
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
