"""Host memory checks and the shared input of the tests of tensors past 2^31 elements."""

import pytest

import pyflame as pf

# 16 elements past 2^31, so that a view can start past it.
N = 2**31 + 16


def free_bytes():
    """MemAvailable from /proc/meminfo (0 where it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def needs_free_memory(gib):
    """Skips a test, saying why, when less than `gib` GiB of host memory is free."""
    return pytest.mark.skipif(free_bytes() < gib * 2**30, reason=f"needs about {gib} GiB of free memory")


def marked_past_int32():
    """N uint8 zeros but 7 at N - 1 and 5 at 2^31 + 3: values only 64-bit indexing reaches."""
    t = pf.zeros(N, dtype=pf.uint8)
    t[N - 1] = 7
    t[2**31 + 3] = 5
    return t
