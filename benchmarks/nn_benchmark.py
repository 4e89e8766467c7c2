"""PyFlame's nn ops (activations, norms, losses, attention) next to PyTorch on
the CPU, in one run on the same machine with the same thread count.

    python benchmarks/nn_benchmark.py [--repeat 20] [--threads N] [--json out.json]

Each case runs on fresh random (non-zero) inputs, is warmed up, and reports
the median of `--repeat` timed runs. The ratio column is PyFlame's time over
PyTorch's: below 1.0 means PyFlame is faster.
"""

import argparse
import json
import platform
import time

import numpy as np
import torch
import torch.nn.functional as F

import pyflame as pf
from bench_util import git_commit, median_seconds


def both(a):
    return pf.tensor(a), torch.from_numpy(a)


def cases():
    rng = np.random.default_rng(0)
    x, tx = both(rng.standard_normal(16 * 2**20, dtype=np.float32))
    yield "leaky_relu 16M fp32", lambda: pf.leaky_relu(x, 0.1), lambda: F.leaky_relu(tx, 0.1)
    yield "softplus 16M fp32", lambda: pf.softplus(x), lambda: F.softplus(tx)
    yield "round 16M fp32", lambda: pf.round(x), lambda: torch.round(tx)
    yield "dropout p=0.5 16M fp32", lambda: pf.dropout(x, 0.5), lambda: F.dropout(tx, 0.5)
    m, tm = both(rng.standard_normal((4096, 1024), dtype=np.float32))
    w, tw = both(rng.standard_normal(1024, dtype=np.float32))
    yield "layer_norm 4096x1024 fp32", lambda: pf.layer_norm(m, (1024,), w, w), \
        lambda: F.layer_norm(tm, (1024,), tw, tw)
    yield "rms_norm 4096x1024 fp32", lambda: pf.rms_norm(m, (1024,), w), lambda: F.rms_norm(tm, (1024,), tw)
    yield "var dim=1 4096x1024 fp32", lambda: pf.var(m, 1), lambda: torch.var(tm, 1)
    yield "cumsum dim=1 4096x1024 fp32", lambda: pf.cumsum(m, 1), lambda: torch.cumsum(tm, 1)
    img, timg = both(rng.standard_normal((32, 64, 32, 32), dtype=np.float32))
    c, tc = both(rng.standard_normal(64, dtype=np.float32))
    yield "batch_norm train 32x64x32x32 fp32", lambda: pf.batch_norm(img, None, None, c, c, training=True), \
        lambda: F.batch_norm(timg, None, None, tc, tc, training=True)
    yield "group_norm 32 groups 32x64x32x32 fp32", lambda: pf.group_norm(img, 32, c, c), \
        lambda: F.group_norm(timg, 32, tc, tc)
    logits, tlogits = both(rng.standard_normal((4096, 1000), dtype=np.float32))
    t = rng.integers(0, 1000, 4096)
    target, ttarget = pf.tensor(t), torch.from_numpy(t)
    yield "cross_entropy 4096x1000 fp32", lambda: pf.cross_entropy(logits, target), \
        lambda: F.cross_entropy(tlogits, ttarget)
    p, tp = both(rng.uniform(0.05, 0.95, 4 * 2**20).astype(np.float32))
    yield "bce_with_logits 4M fp32", lambda: pf.binary_cross_entropy_with_logits(x[: 4 * 2**20], p), \
        lambda: F.binary_cross_entropy_with_logits(tx[: 4 * 2**20], tp)
    yield "mse_loss 16M fp32", lambda: pf.mse_loss(x, x * 0.5), lambda: F.mse_loss(tx, tx * 0.5)
    q, tq = both(rng.standard_normal((8, 8, 256, 64), dtype=np.float32))
    yield "sdpa causal 8x8x256x64 fp32", lambda: pf.scaled_dot_product_attention(q, q, q, is_causal=True), \
        lambda: F.scaled_dot_product_attention(tq, tq, tq, is_causal=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", type=int, help="threads of both libraries (default: PyFlame's default)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.threads:
        pf.set_cpu_threads(args.threads)
    torch.set_num_threads(pf.cpu_threads())
    rows = []
    print(f"threads: {pf.cpu_threads()} (both); torch {torch.__version__}; commit {git_commit()}")
    print(f"{'case':40} {'torch ms':>10} {'pyflame ms':>11} {'ratio':>7}")
    for name, pf_fn, torch_fn in cases():
        # Each library's idle OpenMP threads spin for a while after a parallel
        # region; the pauses keep them from slowing the other on few cores.
        t_torch = median_seconds(torch_fn, args.repeat) * 1e3
        time.sleep(0.5)
        t_pf = median_seconds(pf_fn, args.repeat) * 1e3
        time.sleep(0.5)
        rows.append(dict(case=name, torch_ms=t_torch, pyflame_ms=t_pf, ratio=t_pf / t_torch))
        print(f"{name:40} {t_torch:10.3f} {t_pf:11.3f} {t_pf / t_torch:7.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(commit=git_commit(), machine=platform.processor() or platform.machine(),
                           torch=torch.__version__, threads=pf.cpu_threads(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
