"""PyFlame's CPU backend next to NumPy, and next to PyTorch (CPU) for network
layers, in one run on the same machine.

    python benchmarks/cpu_benchmark.py [--repeat 20] [--section all|numpy|torch] [--threads N] [--json out.json]

Each case runs on fresh random (non-zero) inputs, is warmed up, and reports
the median of `--repeat` timed runs. The ratio column is PyFlame's time over
the other library's: below 1.0 means PyFlame is faster.
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


def torch_cases():
    """(name, torch_fn, pyflame_fn): the same computation with the same weights in both libraries."""
    import torch

    import pyflame.nn as nn

    # The seed's MLP (docs 001, "Running Neural Networks"): 784-256-128-10 with ReLU.
    pf.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    tmodel = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                 torch.nn.ReLU(), torch.nn.Linear(128, 10))
    tmodel.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()})
    rng = np.random.default_rng(1)
    for batch in (32, 4096):
        x = rng.standard_normal((batch, 784), dtype=np.float32)
        px, tx = pf.tensor(x), torch.from_numpy(x)

        def run_torch(tx=tx):
            with torch.no_grad():
                return tmodel(tx)

        yield f"MLP forward, batch {batch}", run_torch, (lambda px=px: model(px))


def timed_pairs(pairs, repeat):
    """(t_other, t_pyflame) of each (other_fn, pyflame_fn) pair."""
    for other_fn, pf_fn in pairs:
        # OpenBLAS and OpenMP worker threads spin for a while after a call; let each
        # library's pool go idle before timing the other on the same cores.
        t_other = median_seconds(other_fn, repeat)
        time.sleep(0.5)
        t_pf = median_seconds(pf_fn, repeat)
        time.sleep(0.5)
        yield t_other, t_pf


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--section", choices=("all", "numpy", "torch"), default="all",
                    help="run only the cases against NumPy or only those against PyTorch")
    ap.add_argument("--threads", type=int, help="CPU threads for PyFlame and PyTorch (default: one per core)")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    if args.threads:
        pf.set_cpu_threads(args.threads)

    print(f"machine: {pf.device_info()['name']}, {os.cpu_count()} cores; numpy {np.__version__}; "
          f"commit {git_commit()}; {time.strftime('%Y-%m-%d')}")
    results = []
    if args.section in ("all", "numpy"):
        print(f"{'case':28s} {'numpy ms':>10s} {'pyflame ms':>11s} {'pyflame rate':>14s} {'ratio':>7s}")
        np_cases = list(cases())
        for (name, work, unit, _, _), (t_np, t_pf) in zip(np_cases, timed_pairs([c[3:] for c in np_cases],
                                                                                args.repeat)):
            rate = work / t_pf / 1e9
            rate_s = f"{rate:8.1f} {'GFLOP/s' if unit == 'flop' else 'GB/s'}"
            print(f"{name:28s} {t_np * 1e3:10.3f} {t_pf * 1e3:11.3f} {rate_s:>14s} {t_pf / t_np:7.2f}")
            results.append({"case": name, "numpy_ms": t_np * 1e3, "pyflame_ms": t_pf * 1e3, "ratio": t_pf / t_np})
    if args.section in ("all", "torch"):
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        print(f"\nvs PyTorch {torch.__version__} (CPU, {torch.get_num_threads()} threads)")
        print(f"{'case':28s} {'torch ms':>10s} {'pyflame ms':>11s} {'ratio':>7s}")
        t_cases = list(torch_cases())
        for (name, _, _), (t_th, t_pf) in zip(t_cases, timed_pairs([c[1:] for c in t_cases], args.repeat)):
            print(f"{name:28s} {t_th * 1e3:10.3f} {t_pf * 1e3:11.3f} {t_pf / t_th:7.2f}")
            results.append({"case": name, "torch_ms": t_th * 1e3, "pyflame_ms": t_pf * 1e3, "ratio": t_pf / t_th})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.processor(), "commit": git_commit(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
