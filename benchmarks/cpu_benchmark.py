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

    # Structural ops (include/pyflame/shape_ops.h).
    w = rng.standard_normal((32000, 512), dtype=np.float32)
    ids = rng.integers(0, 32000, 16384)
    pw, pids = pf.tensor(w), pf.tensor(ids)
    yield "embedding 16K rows of 512", 2 * 4 * 16384 * 512, "byte", (lambda: w[ids]), (lambda: pf.embedding(pids, pw))
    gi = rng.integers(0, 1024, (4096, 1024))
    pgi = pf.tensor(gi)
    yield "gather 4096x1024 dim 1", (4 + 8 + 4) * gi.size, "byte", (lambda: np.take_along_axis(s[:, :1024], gi, 1)), \
        (lambda: pf.gather(ps[:, :1024], 1, pgi))
    si = rng.integers(0, 1024, (16384, 256))
    src = rng.standard_normal((16384, 256), dtype=np.float32)
    psi, psrc = pf.tensor(si), pf.tensor(src)
    acc = np.zeros((1024, 256), dtype=np.float32)
    pacc = pf.zeros(1024, 256)
    cols = np.broadcast_to(np.arange(256), si.shape)

    def np_scatter_add():
        out = acc.copy()
        np.add.at(out, (si, cols), src)
        return out

    yield "scatter_add 16384x256 dim 0", (4 + 8) * si.size, "byte", np_scatter_add, \
        (lambda: pf.scatter_add(pacc, 0, psi, psrc))
    parts = [rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(4)]
    pparts = [pf.tensor(t) for t in parts]
    yield "cat 4 x 1024x1024 dim 1", 2 * 4 * 4 * 2**20, "byte", (lambda: np.concatenate(parts, 1)), \
        (lambda: pf.cat(pparts, 1))
    mask = x > 0
    pmask = pf.tensor(mask)
    yield "masked_fill 16M fp32", (4 + 1 + 4) * m, "byte", (lambda: np.where(mask, np.float32(0), x)), \
        (lambda: pf.masked_fill(px, pmask, 0.0))
    yield "tril 4096x4096 fp32", 2 * 4 * s.size, "byte", (lambda: np.tril(s)), (lambda: pf.tril(ps))


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
