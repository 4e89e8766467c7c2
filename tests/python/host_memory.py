"""Host memory checks for the tests of tensors past 2^31 elements."""

import pytest


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
