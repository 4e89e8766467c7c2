"""PyFlame's ROCm backend next to PyTorch, in one run on the same GPU.

    python benchmarks/rocm_benchmark.py --all [--iterations 50] [--warmup 5] [--json out.json]
    python benchmarks/rocm_benchmark.py --runtime

Sections: --runtime (allocator, pinned host-to-device, device-to-device),
--elementwise (add and gelu on 256M fp32, Python overhead per small op).
Times come from device events after warm-up; the ratio column is PyFlame's
time over PyTorch's (below 1.0: PyFlame is faster). Inputs are non-zero.
"""

import argparse
import ctypes
import json
import statistics
import sys
import time

import pyflame as pf
from bench_util import git_commit
from pyflame.backend import rocm

try:
    import torch
    HAVE_TORCH = torch.cuda.is_available()
except ImportError:
    torch, HAVE_TORCH = None, False


def _pf_time_ms(fn, stream, iterations, warmup):
    """Milliseconds per call of fn, by events on `stream` (None: the current stream)."""
    for _ in range(warmup):
        fn()
    start, end = rocm.Event(enable_timing=True), rocm.Event(enable_timing=True)
    start.record(stream)
    for _ in range(iterations):
        fn()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) / iterations


def _torch_time_ms(fn, iterations, warmup):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iterations


def runtime_cases(args):
    """Yields (name, pyflame value, torch value or None, unit, higher_is_better)."""
    mm = rocm.get_memory_manager()
    stream = rocm.Stream()

    # Cached allocation + free of 2 MiB, timed inside C++ (the allocator's own cost).
    ns = mm._median_alloc_free_ns(2 << 20, 200)
    t_ns = None
    if HAVE_TORCH:
        torch.empty(2 << 20, dtype=torch.uint8, device="cuda")
        times = []
        for _ in range(200):
            t0 = time.perf_counter_ns()
            for _ in range(100):
                torch.empty(2 << 20, dtype=torch.uint8, device="cuda")
            times.append((time.perf_counter_ns() - t0) / 100)
        t_ns = statistics.median(times)  # includes Python's call overhead
    yield "cached alloc+free 2 MiB (median ns)", ns, t_ns, "ns", False

    # Pinned host -> device, 256 MiB.
    n = 256 << 20
    pool = rocm.get_pinned_pool()
    host = pool.acquire(n)
    ctypes.memset(host, 0x3C, n)
    dev = mm.allocate(n)
    ms = _pf_time_ms(lambda: mm.copy_host_to_device_async(dev, host, n, stream.handle), stream,
                     args.iterations, args.warmup)
    t_ms = None
    if HAVE_TORCH:
        th = torch.full((n,), 0x3C, dtype=torch.uint8).pin_memory()
        td = torch.empty(n, dtype=torch.uint8, device="cuda")
        t_ms = _torch_time_ms(lambda: td.copy_(th, non_blocking=True), args.iterations, args.warmup)
        del th, td
    yield "pinned host->device 256 MiB (GB/s)", n / ms / 1e6, (n / t_ms / 1e6) if t_ms else None, "GB/s", True
    mm.deallocate(dev)
    pool.release(host)

    # Device -> device, 1 GiB, counting bytes read and written.
    n = 1 << 30
    a, b = mm.allocate(n), mm.allocate(n)
    mm.memset(a, 0x3C, n)
    ms = _pf_time_ms(lambda: mm.copy_device_to_device_async(b, a, n, stream.handle), stream,
                     args.iterations, args.warmup)
    t_ms = None
    if HAVE_TORCH:
        ta = torch.full((n,), 0x3C, dtype=torch.uint8, device="cuda")
        tb = torch.empty_like(ta)
        t_ms = _torch_time_ms(lambda: tb.copy_(ta), args.iterations, args.warmup)
        del ta, tb
        torch.cuda.empty_cache()
    yield "device->device 1 GiB (TB/s, read+write)", 2 * n / ms / 1e9, (2 * n / t_ms / 1e9) if t_ms else None, \
        "TB/s", True
    stream.synchronize()
    mm.deallocate(a)
    mm.deallocate(b)


def elementwise_cases(args):
    """add and gelu over 256M fp32 (bytes read + written), and the cost per small op."""
    n = 256 * 2**20
    pf.set_device("rocm")
    pf.manual_seed(0)
    a, b = pf.randn(n), pf.randn(n)
    cases = [("add 256M fp32 (TB/s)", lambda: pf.add(a, b), 3 * 4 * n),
             ("gelu 256M fp32 (TB/s)", lambda: pf.gelu(a), 2 * 4 * n)]
    ta = tb = None
    if HAVE_TORCH:
        ta, tb = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    torch_fns = [lambda: torch.add(ta, tb), lambda: torch.nn.functional.gelu(ta)]
    for (name, fn, nbytes), tfn in zip(cases, torch_fns):
        ms = _pf_time_ms(fn, None, args.iterations, args.warmup)
        t_ms = _torch_time_ms(tfn, args.iterations, args.warmup) if HAVE_TORCH else None
        yield name, nbytes / ms / 1e9, (nbytes / t_ms / 1e9) if t_ms else None, "TB/s", True
    del a, b, ta, tb

    # Python overhead: 10,000 adds of 1000 elements, synchronised at the end.
    x, y = pf.randn(1000), pf.randn(1000)
    ops = 10_000

    def pf_small():
        for _ in range(ops):
            pf.add(x, y)
        pf.synchronize()

    pf_small()
    t0 = time.perf_counter()
    pf_small()
    us = (time.perf_counter() - t0) / ops * 1e6
    t_us = None
    if HAVE_TORCH:
        tx, ty = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")

        def torch_small():
            for _ in range(ops):
                torch.add(tx, ty)
            torch.cuda.synchronize()

        torch_small()
        t0 = time.perf_counter()
        torch_small()
        t_us = (time.perf_counter() - t0) / ops * 1e6
    yield "small add, per op (us)", us, t_us, "us", False
    pf.set_device("cpu")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="every section")
    ap.add_argument("--runtime", action="store_true", help="allocator and transfers")
    ap.add_argument("--elementwise", action="store_true", help="add and gelu, Python overhead per small op")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    if not (args.all or args.runtime or args.elementwise):
        ap.error("choose sections (--runtime, --elementwise) or --all")
    if not pf.rocm_is_available():
        print(f"ROCm is not available: {pf.rocm_unavailable_reason()}")
        return 1
    info = pf.rocm_get_device_info(0)
    print(f"device: {info['name']} ({info['architecture']}), {info['runtime_version']}; "
          f"torch {torch.__version__ if HAVE_TORCH else 'not available'}; commit {git_commit()}; "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"{'case':42s} {'pyflame':>10s} {'pytorch':>10s} {'pyflame/pytorch':>16s}")
    results = []
    sections = []
    if args.all or args.runtime:
        sections.append(runtime_cases(args))
    if args.all or args.elementwise:
        sections.append(elementwise_cases(args))
    for name, ours, theirs, unit, higher_better in (case for section in sections for case in section):
        if theirs:
            ratio = ours / theirs  # of rates (higher is better) or of times (lower is better)
            ratio_s = f"{ratio:.2f}{' (rate)' if higher_better else ' (time)'}"
        else:
            ratio, ratio_s = None, "-"
        print(f"{name:42s} {ours:10.2f} {theirs if theirs else float('nan'):10.2f} {ratio_s:>16s}")
        results.append({"case": name, "unit": unit, "pyflame": ours, "pytorch": theirs, "ratio": ratio})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": info, "commit": git_commit(), "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
