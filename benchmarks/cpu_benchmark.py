"""PyFlame's CPU backend next to NumPy, in one run on the same machine.

    python benchmarks/cpu_benchmark.py [--repeat 20] [--json out.json]

Each case runs on fresh random (non-zero) inputs, is warmed up, and reports
the median of `--repeat` timed runs. The ratio column is PyFlame's time over
NumPy's: below 1.0 means PyFlame is faster.
"""

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

import pyflame as pf
from bench_util import git_commit


def median_seconds(fn, repeat, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cases():
    rng = np.random.default_rng(0)
    n = 1024
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    pa, pb = pf.tensor(a), pf.tensor(b)
    yield "matmul 1024x1024 fp32", 2 * n**3, "flop", (lambda: a @ b), (lambda: pa @ pb)

    m = 16 * 2**20
    x = rng.standard_normal(m, dtype=np.float32)
    y = rng.standard_normal(m, dtype=np.float32)
    px, py = pf.tensor(x), pf.tensor(y)
    yield "add 16M fp32", 3 * 4 * m, "byte", (lambda: x + y), (lambda: px + py)
    yield "exp 16M fp32", 2 * 4 * m, "byte", (lambda: np.exp(x)), (lambda: pf.exp(px))
    yield "sum 16M fp32", 4 * m, "byte", (lambda: x.sum()), (lambda: pf.sum(px))
    s = rng.standard_normal((4096, 4096), dtype=np.float32) * 10
    ps = pf.tensor(s)

    def np_softmax():
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    yield "softmax 4096x4096 fp32", 2 * 4 * s.size, "byte", np_softmax, (lambda: pf.softmax(ps, dim=1))

    # NumPy has no gelu; the formula below is what a NumPy user would write.
    g = rng.standard_normal(4 * 2**20, dtype=np.float32)
    pg = pf.tensor(g)
    yield "gelu(tanh) 4M fp32", 2 * 4 * g.size, "byte", \
        (lambda: 0.5 * g * (1 + np.tanh(0.7978845608 * (g + 0.044715 * g**3)))), \
        (lambda: pf.gelu(pg, approximate="tanh"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()

    print(f"machine: {pf.device_info()['name']}, {os.cpu_count()} cores; numpy {np.__version__}; "
          f"commit {git_commit()}; {time.strftime('%Y-%m-%d')}")
    print(f"{'case':28s} {'numpy ms':>10s} {'pyflame ms':>11s} {'pyflame rate':>14s} {'ratio':>7s}")
    results = []
    for name, work, unit, np_fn, pf_fn in cases():
        # OpenBLAS worker threads spin for a while after a call; let each
        # library's pool go idle before timing the other on the same cores.
        t_np = median_seconds(np_fn, args.repeat)
        time.sleep(0.5)
        t_pf = median_seconds(pf_fn, args.repeat)
        time.sleep(0.5)
        rate = work / t_pf / (1e9 if unit == "flop" else 1e9)
        rate_s = f"{rate:8.1f} {'GFLOP/s' if unit == 'flop' else 'GB/s'}"
        print(f"{name:28s} {t_np * 1e3:10.3f} {t_pf * 1e3:11.3f} {rate_s:>14s} {t_pf / t_np:7.2f}")
        results.append({"case": name, "numpy_ms": t_np * 1e3, "pyflame_ms": t_pf * 1e3, "ratio": t_pf / t_np})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.processor(), "commit": git_commit(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
