"""Helpers shared by the benchmarks."""

import os
import statistics
import subprocess
import time


def git_commit():
    """The commit being measured: $PYFLAME_COMMIT where the tree has no .git (the GPU machine), else git's."""
    if os.environ.get("PYFLAME_COMMIT"):
        return os.environ["PYFLAME_COMMIT"]
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True, stderr=subprocess.DEVNULL,
                                       cwd=os.path.dirname(os.path.abspath(__file__))).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def median_seconds(fn, repeat, warmup=2):
    """The median wall time of `repeat` calls of fn, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
