"""Profiling regions (seed 003's profile_region and get_profiling_summary).

    with pf.profiler.profile_region("forward"):
        y = model(x)

    @pf.profiler.profile_region("step")
    def step(batch): ...

    pf.profiler.get_profiling_summary()
    # {"regions": {"forward": {"count", "avg_ms", "min_ms", "max_ms", "total_ms"}, ...}}

A region's time is the longer of its host time (entry to exit) and, where a GPU is
usable, the GPU time between two timing events recorded on the current GPU's current
stream at entry and exit: GPU work is queued asynchronously, so a region that only
queues kernels takes little host time but the GPU's time to run them. Events are read
when the summary is asked for (waiting for them then), so regions add no waits of their
own. Regions nest: each is timed on its own, and its name's entry counts every time it
ran, at any depth. Timings are per thread's queued work as the stream sees it: a region
entered while the GPU is still busy with earlier work counts the wait for that work too
(synchronize first to time a region alone).
"""

import functools
import threading
import time

from . import _C

_lock = threading.Lock()
_pending = []  # (name, host_ms, start_event, end_event); events None on the CPU
_done = {}  # name -> [count, total_ms, min_ms, max_ms]


def _gpu_events():
    if not _C.rocm_is_available():
        return None
    from .backend import rocm

    start, end = rocm.Event(enable_timing=True), rocm.Event(enable_timing=True)
    return start, end


class profile_region:  # noqa: N801 - a context manager and decorator named as in seed 003
    """Times the code inside `with profile_region(name):` (or a function decorated with it)."""

    def __init__(self, name):
        if not isinstance(name, str) or not name:
            raise ValueError(f"profile_region: the name must be a non-empty string, got {name!r}")
        self.name = name
        self._local = threading.local()

    def __enter__(self):
        events = _gpu_events()
        if events:
            events[0].record()
        stack = self._local.__dict__.setdefault("stack", [])
        stack.append((time.perf_counter(), events))
        return self

    def __exit__(self, *exc):
        t0, events = self._local.stack.pop()
        host_ms = (time.perf_counter() - t0) * 1e3
        if events:
            events[1].record()
        with _lock:
            _pending.append((self.name, host_ms) + (events or (None, None)))
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with profile_region(self.name):
                return fn(*args, **kwargs)

        return timed


def _settle():
    """Reads the pending regions' events into the totals."""
    with _lock:
        pending = list(_pending)
        _pending.clear()
    for name, host_ms, start, end in pending:
        ms = host_ms
        if end is not None:
            end.synchronize()
            ms = max(ms, start.elapsed_time(end))
        with _lock:
            entry = _done.setdefault(name, [0, 0.0, float("inf"), 0.0])
            entry[0] += 1
            entry[1] += ms
            entry[2] = min(entry[2], ms)
            entry[3] = max(entry[3], ms)


def get_profiling_summary():
    """{"regions": {name: {"count", "avg_ms", "min_ms", "max_ms", "total_ms"}}} over the regions run so far."""
    _settle()
    with _lock:
        return {"regions": {name: {"count": c, "avg_ms": total / c, "min_ms": lo, "max_ms": hi, "total_ms": total}
                            for name, (c, total, lo, hi) in _done.items()}}


def reset_profiling_summary():
    """Forgets every region timed so far."""
    with _lock:
        _pending.clear()
        _done.clear()


__all__ = ["profile_region", "get_profiling_summary", "reset_profiling_summary"]
