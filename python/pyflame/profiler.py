"""Profiling: regions (seed 003's profile_region and get_profiling_summary) and the op
profiler (`profile`, as torch.profiler.profile).

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

    with pf.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                             record_shapes=True) as prof:
        y = model(x)
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")  # opens in Perfetto or chrome://tracing

The op profiler times every op call (the op layer's apply(): the table's ops, including
the calls a composite op or autograd's backward makes, nested under their caller) on the
host, and with ProfilerActivity.CUDA (the GPU, as PyTorch names it on ROCm too) the device
time between two timing events around each GPU call, read when the session ends.
`record_function(name)` adds a labelled range of the program's own.
"""

import enum
import functools
import json
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


class ProfilerActivity(enum.Enum):
    """What a profile times: CPU (every op call's host time) and CUDA (GPU calls' device time)."""

    CPU = "cpu"
    CUDA = "cuda"


class FunctionEvent:
    """One timed call: name, input_shapes, thread, depth (0: called by the program), times in
    microseconds from the session's start (device_* are None where the call has no device time)."""

    __slots__ = ("name", "input_shapes", "thread", "depth", "start_us", "cpu_time_total", "device",
                 "device_start_us", "device_time_total", "self_cpu_time_total", "self_device_time_total",
                 "is_user_annotation")

    def __init__(self, name, input_shapes, thread, depth, start_us, duration_us, device, device_start_us,
                 device_duration_us, is_user_annotation=False):
        self.name, self.input_shapes, self.thread, self.depth = name, input_shapes, thread, depth
        self.start_us, self.cpu_time_total, self.device = start_us, duration_us, device
        has_device = device_start_us >= 0
        self.device_start_us = device_start_us if has_device else None
        self.device_time_total = device_duration_us if has_device else 0.0
        self.self_cpu_time_total = duration_us
        self.self_device_time_total = self.device_time_total
        self.is_user_annotation = is_user_annotation

    def __repr__(self):
        return (f"<FunctionEvent {self.name} depth={self.depth} cpu={self.cpu_time_total:.1f}us "
                f"device={self.device_time_total:.1f}us>")


class FunctionEventAvg:
    """The calls of one op (and, grouped by input shape, one shape): totals and averages in us."""

    def __init__(self, key, input_shapes=None):
        self.key, self.input_shapes, self.count = key, input_shapes, 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.device_time_total = self.self_device_time_total = 0.0

    def add(self, e):
        self.count += 1
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.device_time_total += e.device_time_total
        self.self_device_time_total += e.self_device_time_total

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count

    @property
    def device_time(self):
        return self.device_time_total / self.count

    # PyTorch's names for the GPU's columns.
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)
    cuda_time = property(lambda self: self.device_time)

    def __repr__(self):
        return (f"<FunctionEventAvg {self.key} count={self.count} cpu_total={self.cpu_time_total:.1f}us "
                f"device_total={self.device_time_total:.1f}us>")


_SORT_KEYS = {
    "cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total", "cpu_time": "cpu_time",
    "device_time_total": "device_time_total", "self_device_time_total": "self_device_time_total",
    "device_time": "device_time", "cuda_time_total": "device_time_total",
    "self_cuda_time_total": "self_device_time_total", "cuda_time": "device_time", "count": "count",
}


def _format_us(us):
    return f"{us / 1e3:.3f}ms" if us >= 1e3 else f"{us:.3f}us"


class EventList(list):
    """key_averages()'s rows (FunctionEventAvg), with table()."""

    def table(self, sort_by=None, row_limit=100):
        """The rows as text, as torch's table: sorted by `sort_by` (descending), at most `row_limit`."""
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table: sort_by must be one of {sorted(_SORT_KEYS)}, got {sort_by!r}")
            rows.sort(key=lambda r: getattr(r, _SORT_KEYS[sort_by]), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        self_cpu_all = sum(r.self_cpu_time_total for r in self) or 1.0
        device = any(r.device_time_total for r in self)
        shapes = any(r.input_shapes is not None for r in self)
        header = ["Name", "Self CPU %", "Self CPU", "CPU total", "CPU time avg"]
        if device:
            header += ["Self GPU", "GPU total", "GPU time avg"]
        header.append("# of Calls")
        if shapes:
            header.append("Input Shapes")
        lines = []
        for r in rows:
            cells = [r.key, f"{100 * r.self_cpu_time_total / self_cpu_all:.2f}%", _format_us(r.self_cpu_time_total),
                     _format_us(r.cpu_time_total), _format_us(r.cpu_time)]
            if device:
                cells += [_format_us(r.self_device_time_total), _format_us(r.device_time_total),
                          _format_us(r.device_time)]
            cells.append(str(r.count))
            if shapes:
                cells.append(str(r.input_shapes))
            lines.append(cells)
        widths = [max(len(h), *(len(c[i]) for c in lines)) if lines else len(h) for i, h in enumerate(header)]
        rule = "  ".join("-" * w for w in widths)
        fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                      for i, (c, w) in enumerate(zip(cells, widths)))
        out = [rule, fmt(header), rule] + [fmt(c) for c in lines] + [rule]
        out.append(f"Self CPU time total: {_format_us(sum(r.self_cpu_time_total for r in self))}")
        if device:
            out.append(f"Self GPU time total: {_format_us(sum(r.self_device_time_total for r in self))}")
        return "\n".join(out)


class _UserRanges(threading.local):
    def __init__(self):
        self.stack = []


_session = None  # the profile running now
_user_ranges = _UserRanges()


class record_function:  # noqa: N801 - as torch.profiler.record_function
    """A labelled range of the program's own in the running profile (a context manager)."""

    def __init__(self, name):
        if not isinstance(name, str) or not name:
            raise ValueError(f"record_function: the name must be a non-empty string, got {name!r}")
        self.name = name

    def __enter__(self):
        session = _session
        if session is not None:
            _user_ranges.stack.append((session, time.perf_counter()))
        return self

    def __exit__(self, *exc):
        if _user_ranges.stack:
            session, t0 = _user_ranges.stack.pop()
            session._add_range(self.name, t0, time.perf_counter(), len(_user_ranges.stack))
        return False


class profile:  # noqa: N801 - as torch.profiler.profile
    """Times every op call inside `with profile(...) as prof:` (see the module's doc)."""

    def __init__(self, activities=None, record_shapes=False, **unsupported):
        if unsupported:
            from ._C import NotSupportedError

            raise NotSupportedError(f"profile: {sorted(unsupported)} are not supported (record_shapes and "
                                    "activities are)")
        activities = set(activities) if activities is not None else {ProfilerActivity.CPU, ProfilerActivity.CUDA}
        for a in activities:
            if not isinstance(a, ProfilerActivity):
                raise TypeError(f"profile: activities must be ProfilerActivity values, got {a!r}")
        self.activities, self.record_shapes = activities, bool(record_shapes)
        self._events = None
        self._ranges = []

    def __enter__(self):
        global _session
        _C._profiler_start(self.record_shapes, ProfilerActivity.CUDA in self.activities)
        self._origin = time.perf_counter()
        self._ranges = []
        _session = self
        return self

    def __exit__(self, *exc):
        global _session
        _session = None
        calls = _C._profiler_stop()
        events = [FunctionEvent(*c) for c in calls]
        for name, start_us, dur_us, depth in self._ranges:
            events.append(FunctionEvent(name, [], -1, depth, start_us, dur_us, "cpu", -1, 0.0, True))
        events.sort(key=lambda e: e.start_us)
        _self_times(events)
        self._events = events
        return False

    def _add_range(self, name, t0, t1, depth):
        self._ranges.append((name, (t0 - self._origin) * 1e6, (t1 - t0) * 1e6, depth))

    def _finished(self):
        if self._events is None:
            raise RuntimeError("profile: the results are read after the `with` block ends")
        return self._events

    def events(self):
        """Every timed call (FunctionEvent), in the order the calls began."""
        return list(self._finished())

    def key_averages(self, group_by_input_shape=False):
        """One row per op name (and input shapes, with group_by_input_shape): EventList of FunctionEventAvg."""
        rows = {}
        for e in self._finished():
            key = (e.name, str(e.input_shapes)) if group_by_input_shape else e.name
            if key not in rows:
                rows[key] = FunctionEventAvg(e.name, e.input_shapes if group_by_input_shape else None)
            rows[key].add(e)
        return EventList(rows.values())

    def export_chrome_trace(self, path):
        """Writes the Chrome trace JSON (`traceEvents`, complete events in microseconds): host calls
        per thread, GPU calls per device; Perfetto (ui.perfetto.dev) and chrome://tracing open it."""
        trace = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "host"}}]
        devices = {}
        for e in self._finished():
            args = {"depth": e.depth, "device": e.device}
            if e.input_shapes:
                args["Input Dims"] = e.input_shapes
            trace.append({"name": e.name, "ph": "X", "cat": "user_annotation" if e.is_user_annotation else "cpu_op",
                          "ts": e.start_us, "dur": e.cpu_time_total, "pid": 0, "tid": max(e.thread, 0),
                          "args": args})
            if e.device_start_us is not None:
                pid = devices.setdefault(e.device, len(devices) + 1)
                trace.append({"name": e.name, "ph": "X", "cat": "kernel", "ts": e.device_start_us,
                              "dur": e.device_time_total, "pid": pid, "tid": e.depth, "args": args})
        for device, pid in devices.items():
            trace.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": device}})
        with open(path, "w") as f:
            json.dump({"traceEvents": trace, "displayTimeUnit": "ms"}, f)


def _self_times(events):
    """Each call's self times: its own less its direct children's. An op's children are the calls
    it made (one depth below, same thread); a record_function range's, the ranges and top-level
    calls that ran inside it (by time: the program's thread)."""
    stacks = {}
    ranges = []  # the record_function ranges open at the event being looked at
    for e in events:
        if e.is_user_annotation or e.depth == 0:
            while ranges and ranges[-1].start_us + ranges[-1].cpu_time_total < e.start_us:
                ranges.pop()
            if ranges:
                ranges[-1].self_cpu_time_total -= e.cpu_time_total
                ranges[-1].self_device_time_total -= e.device_time_total
            if e.is_user_annotation:
                ranges.append(e)
                continue
        stack = stacks.setdefault(e.thread, [])
        del stack[e.depth:]
        if e.depth and len(stack) == e.depth:
            parent = stack[-1]
            parent.self_cpu_time_total -= e.cpu_time_total
            parent.self_device_time_total -= e.device_time_total
        stack.append(e)


__all__ = ["profile_region", "get_profiling_summary", "reset_profiling_summary", "profile", "ProfilerActivity",
           "record_function", "FunctionEvent", "FunctionEventAvg", "EventList"]
