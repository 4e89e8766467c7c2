"""PyFlame's CPU backend next to NumPy (and PyTorch CPU for the ops NumPy
lacks: convolution, pooling), in one run on the same machine.

    python benchmarks/cpu_benchmark.py [--repeat 20] [--threads N] [--json out.json] [--only TEXT]

Each case runs on fresh random (non-zero) inputs, is warmed up, and reports
the median of `--repeat` timed runs. The ratio column is PyFlame's time over
the reference library's: below 1.0 means PyFlame is faster.
"""

import argparse
import json
import os
import platform
import time

import numpy as np

import pyflame as pf
from bench_util import git_commit, median_seconds


def cases():
    rng = np.random.default_rng(0)
    n = 1024
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    pa, pb = pf.tensor(a), pf.tensor(b)
    yield "matmul 1024x1024 fp32", 2 * n**3, "flop", "numpy", (lambda: a @ b), (lambda: pa @ pb)

    m = 16 * 2**20
    x = rng.standard_normal(m, dtype=np.float32)
    y = rng.standard_normal(m, dtype=np.float32)
    px, py = pf.tensor(x), pf.tensor(y)
    yield "add 16M fp32", 3 * 4 * m, "byte", "numpy", (lambda: x + y), (lambda: px + py)
    yield "exp 16M fp32", 2 * 4 * m, "byte", "numpy", (lambda: np.exp(x)), (lambda: pf.exp(px))
    yield "sum 16M fp32", 4 * m, "byte", "numpy", (lambda: x.sum()), (lambda: pf.sum(px))
    s = rng.standard_normal((4096, 4096), dtype=np.float32) * 10
    ps = pf.tensor(s)

    def np_softmax():
        e = np.exp(s - s.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    yield "softmax 4096x4096 fp32", 2 * 4 * s.size, "byte", "numpy", np_softmax, (lambda: pf.softmax(ps, dim=1))

    # NumPy has no gelu; the formula below is what a NumPy user would write.
    g = rng.standard_normal(4 * 2**20, dtype=np.float32)
    pg = pf.tensor(g)
    yield "gelu(tanh) 4M fp32", 2 * 4 * g.size, "byte", "numpy", \
        (lambda: 0.5 * g * (1 + np.tanh(0.7978845608 * (g + 0.044715 * g**3)))), \
        (lambda: pf.gelu(pg, approximate="tanh"))

    # Structural ops (include/pyflame/shape_ops.h).
    w = rng.standard_normal((32000, 512), dtype=np.float32)
    ids = rng.integers(0, 32000, 16384)
    pw, pids = pf.tensor(w), pf.tensor(ids)
    yield "embedding 16K rows of 512", 2 * 4 * 16384 * 512, "byte", "numpy", (lambda: w[ids]), (lambda: pf.embedding(pids, pw))
    gi = rng.integers(0, 1024, (4096, 1024))
    pgi = pf.tensor(gi)
    yield "gather 4096x1024 dim 1", (4 + 8 + 4) * gi.size, "byte", "numpy", (lambda: np.take_along_axis(s[:, :1024], gi, 1)), \
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

    yield "scatter_add 16384x256 dim 0", (4 + 8) * si.size, "byte", "numpy", np_scatter_add, \
        (lambda: pf.scatter_add(pacc, 0, psi, psrc))
    parts = [rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(4)]
    pparts = [pf.tensor(t) for t in parts]
    yield "cat 4 x 1024x1024 dim 1", 2 * 4 * 4 * 2**20, "byte", "numpy", (lambda: np.concatenate(parts, 1)), \
        (lambda: pf.cat(pparts, 1))
    mask = x > 0
    pmask = pf.tensor(mask)
    yield "masked_fill 16M fp32", (4 + 1 + 4) * m, "byte", "numpy", (lambda: np.where(mask, np.float32(0), x)), \
        (lambda: pf.masked_fill(px, pmask, 0.0))
    yield "tril 4096x4096 fp32", 2 * 4 * s.size, "byte", "numpy", (lambda: np.tril(s)), (lambda: pf.tril(ps))
    # NumPy has no convolution or pooling: these run next to PyTorch (CPU).
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("(torch not installed: conv2d and max_pool2d cases skipped)")
        return
    x = rng.standard_normal((32, 64, 56, 56), dtype=np.float32)
    w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    px, pw, tx, tw = pf.tensor(x), pf.tensor(w), torch.from_numpy(x), torch.from_numpy(w)
    yield "conv2d 32x64x56x56, 64x3x3, pad 1", 2 * x.size * 64 * 9, "flop", "torch", \
        (lambda: F.conv2d(tx, tw, padding=1)), (lambda: pf.conv2d(px, pw, padding=1))
    yield "max_pool2d 32x64x56x56, k3 s2 p1", 4 * (x.size + x.size // 4), "byte", "torch", \
        (lambda: F.max_pool2d(tx, 3, 2, 1)), (lambda: pf.max_pool2d(px, 3, 2, 1))

    # Per-op overhead (the op layer's cost): a thousand calls on 4-element tensors.
    v4 = rng.standard_normal(4, dtype=np.float32)
    p4, t4 = pf.tensor(v4), torch.from_numpy(v4)

    def thousand(f):
        return lambda: [f() for _ in range(1000)]

    yield "1000 x add of 4 fp32", 1000, "op", "torch", thousand(lambda: t4 + t4), thousand(lambda: p4 + p4)
    yield "1000 x (4 fp32) * 2.0", 1000, "op", "torch", thousand(lambda: t4 * 2.0), thousand(lambda: p4 * 2.0)
    yield "1000 x sum of 4 fp32", 1000, "op", "torch", thousand(lambda: t4.sum()), thousand(lambda: p4.sum())

    # The seed's MLP (docs 001, "Running Neural Networks"): 784-256-128-10 with ReLU,
    # the same weights in both libraries.
    import pyflame.nn as nn

    pf.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    tmodel = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                 torch.nn.ReLU(), torch.nn.Linear(128, 10))
    tmodel.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()})
    for batch in (32, 4096):
        xb = rng.standard_normal((batch, 784), dtype=np.float32)
        pxb, txb = pf.tensor(xb), torch.from_numpy(xb)

        def run_torch(txb=txb):
            with torch.no_grad():
                return tmodel(txb)

        yield f"MLP forward, batch {batch}", 2 * batch * (784 * 256 + 256 * 128 + 128 * 10), "flop", "torch", \
            run_torch, (lambda pxb=pxb: model(pxb))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, help="threads for both libraries (default: all cores)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--only", help="run only the cases whose name contains this text")
    args = ap.parse_args()
    if args.threads:
        pf.set_cpu_threads(args.threads)

    versions = f"numpy {np.__version__}"
    try:
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        versions += f", torch {torch.__version__} ({torch.get_num_threads()} threads)"
    except ImportError:
        pass
    print(f"machine: {pf.device_info()['name']}, {os.cpu_count()} cores; {versions}; "
          f"commit {git_commit()}; {time.strftime('%Y-%m-%d')}")
    print(f"{'case':34s} {'ref':>6s} {'ref ms':>10s} {'pyflame ms':>11s} {'pyflame rate':>14s} {'ratio':>7s}")
    results = []
    for name, work, unit, ref, ref_fn, pf_fn in cases():
        if args.only and args.only not in name:
            continue
        # OpenBLAS worker threads spin for a while after a call; let each
        # library's pool go idle before timing the other on the same cores.
        t_ref = median_seconds(ref_fn, args.repeat)
        time.sleep(0.5)
        t_pf = median_seconds(pf_fn, args.repeat)
        time.sleep(0.5)
        if unit == "op":  # per-op overhead: the time of one call
            rate_s = f"{t_pf / work * 1e6:8.2f} us/op"
        else:
            rate_s = f"{work / t_pf / 1e9:8.1f} {'GFLOP/s' if unit == 'flop' else 'GB/s'}"
        print(f"{name:34s} {ref:>6s} {t_ref * 1e3:10.3f} {t_pf * 1e3:11.3f} {rate_s:>14s} {t_pf / t_ref:7.2f}")
        results.append({"case": name, "reference": ref, "reference_ms": t_ref * 1e3, "pyflame_ms": t_pf * 1e3,
                        "ratio": t_pf / t_ref})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.processor(), "commit": git_commit(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
