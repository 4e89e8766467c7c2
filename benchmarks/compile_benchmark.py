"""Graph mode: pf.compile next to PyTorch eager and torch.compile, in one run.

    python benchmarks/compile_benchmark.py [--device cpu|rocm] [--repeat 200] [--no-torch-compile] [--json out.json]

Inference of the seed MLP (784-256-128-10, batch 32), of seed 003's model
(Linear 1024->2048, GELU, Linear 2048->1024, batch 64) and of four conv3x3 + BatchNorm +
ReLU layers (64 channels, 32x32 images, batch 32; eval: graph mode folds each triple into
one convolution) under no_grad: wall
time per call, 20 calls between waits for the device (so launch costs, not the
waits, are what is measured), the median of `repeat` such runs. PyFlame eager,
pf.compile (graph replayed op by op) and pf.compile(mode="reduce-overhead")
(captured as one device graph on a GPU) against PyTorch eager and, unless
--no-torch-compile, torch.compile(mode="reduce-overhead") (its first calls
compile with Triton: tens of seconds). Ratios: PyTorch eager's time over each.
Also each compiled form's first compile: the wall time of its first two calls (the
eager run that traces, then the first replay with the passes and, in reduce-overhead,
the capture), in ms. Then an 8-op elementwise chain over two 64M-float tensors (eager:
8 passes over memory; compiled: one fused kernel), with the bandwidth each reaches as a
share of a device copy's (x.clone(): 64M floats read and written), and the first compile in a
new process (--first-compile: that child) of the chain, its kernel in the disk cache, and of the
seed MLP in reduce-overhead mode.
Last, reductions of chains written from primitives (softmax, layer_norm, a mean of squared
differences): graph mode's fused_reduction against eager and PyFlame's own kernels.
"""

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

import pyflame as pf
from bench_util import git_commit

CALLS = 20


def per_call_us(fn, sync, repeat):
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / CALLS)
    return statistics.median(times) * 1e6


def _models(lib):
    mlp = lib.nn.Sequential(lib.nn.Linear(784, 256), lib.nn.ReLU(), lib.nn.Linear(256, 128), lib.nn.ReLU(),
                            lib.nn.Linear(128, 10))
    seed003 = lib.nn.Sequential(lib.nn.Linear(1024, 2048), lib.nn.GELU(), lib.nn.Linear(2048, 1024))
    convs = []
    for cin in (3, 64, 64, 64):  # a ResNet stem's shape of layers, eval: conv + batch_norm + relu folded
        convs += [lib.nn.Conv2d(cin, 64, 3, padding=1, bias=False), lib.nn.BatchNorm2d(64), lib.nn.ReLU()]
    return {"seed MLP 784-256-128-10 b32": (mlp, (32, 784)), "seed 003 MLP 1024-2048-1024 b64": (seed003, (64, 1024)),
            "4 x (conv3x3 64 + BN + ReLU) 32x32 b32": (lib.nn.Sequential(*convs), (32, 3, 32, 32))}


def _chain(lib, x, y):
    """Eight elementwise ops: mul, add, relu, mul, sub, sigmoid, mul, tanh."""
    h = lib.relu(x * y + 0.5) * 2.0 - y
    return lib.tanh(lib.sigmoid(h) * x)


def elementwise_chain(dev, tdev, pf_sync, t_sync, repeat, torch_compile, rows):
    n = 64 * 1024 * 1024
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    px, py = pf.tensor(x, device=dev), pf.tensor(y, device=dev)
    tx, ty = torch.from_numpy(x).to(tdev), torch.from_numpy(y).to(tdev)
    name = "8-op elementwise chain, 2 x 64M float32"
    runs = {"copy (x.clone())": per_call_us(lambda: px.clone(), pf_sync, repeat)}
    copy_gbs = 2 * 4 * n / runs["copy (x.clone())"] / 1e3
    runs["torch eager"] = per_call_us(lambda: _chain(torch, tx, ty), t_sync, repeat)
    if torch_compile:
        try:
            tc = torch.compile(lambda a, b: _chain(torch, a, b))
            for _ in range(3):
                tc(tx, ty)
            runs["torch.compile"] = per_call_us(lambda: tc(tx, ty), t_sync, repeat)
        except Exception as e:  # noqa: BLE001 - reported, the others still run
            print(f"  torch.compile failed: {type(e).__name__}: {str(e)[:200]}")
    runs["pyflame eager"] = per_call_us(lambda: _chain(pf, px, py), pf_sync, repeat)
    compiled = pf.compile(lambda a, b: _chain(pf, a, b))
    t0 = time.perf_counter()
    compiled(px, py)
    got = compiled(px, py)
    pf_sync()
    print(f"  pf.compile: first compile {(time.perf_counter() - t0) * 1e3:.1f} ms, graph {compiled.graphs()[0].ops}")
    want = _chain(torch, tx, ty).cpu().numpy()
    np.testing.assert_allclose(got.to("cpu").numpy(), want, rtol=1e-5, atol=1e-5)
    runs["pf.compile"] = per_call_us(lambda: compiled(px, py), pf_sync, repeat)
    child = subprocess.run([sys.executable, __file__, "--first-compile", "--device", dev], capture_output=True,
                           text=True, check=True)
    first = dict(line.rsplit(" ", 1) for line in child.stdout.strip().splitlines())
    warm_ms, mlp_ms = float(first["chain"]), float(first["seed MLP"])
    print(f"  pf.compile in a new process, its kernel in the disk cache: first compile {warm_ms:.1f} ms")
    print(f"  seed MLP, pf.compile reduce-overhead in a new process: first compile {mlp_ms:.1f} ms")
    rows.append({"case": name, "run": "pf.compile first compile, new process, warm disk cache", "ms": warm_ms})
    rows.append({"case": "seed MLP 784-256-128-10 b32", "run": "pf.compile reduce-overhead first compile, new process",
                 "ms": mlp_ms})
    print(name)
    base = runs["torch eager"]
    for label, us in runs.items():
        gbs = (2 if label.startswith("copy") else 3) * 4 * n / us / 1e3  # the chain reads x, y; writes one
        print(f"  {label:34s} {us:9.1f} us   {base / us:6.2f}x   {gbs:7.0f} GB/s  {100 * gbs / copy_gbs:5.1f}% of copy")
        rows.append({"case": name, "run": label, "us": us, "ratio_vs_torch_eager": base / us, "GB/s": gbs,
                     "percent_of_copy": 100 * gbs / copy_gbs})


def _train_step(lib, model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def training_step(dev, tdev, pf_sync, t_sync, repeat, torch_compile, rows):
    """The seed MLP + Adam training step, batch 32: the same weights and data on both sides; the
    losses of the first steps must agree."""
    name = "seed MLP 784-256-128-10 b32 training step (Adam)"
    torch.manual_seed(1)
    tmodels = [_models(torch)["seed MLP 784-256-128-10 b32"][0].to(tdev) for _ in range(2)]
    for t in tmodels[1:]:
        t.load_state_dict(tmodels[0].state_dict())

    def pf_model():
        m = _models(pf)["seed MLP 784-256-128-10 b32"][0]
        with pf.no_grad():
            for p, t in zip(m.parameters(), tmodels[0].parameters()):
                p.copy_(pf.tensor(t.detach().cpu().numpy()))
        return m.to(dev)

    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 784)).astype(np.float32)
    y = rng.integers(0, 10, 32)
    tx, ty = torch.from_numpy(x).to(tdev), torch.from_numpy(y).to(tdev)
    px, py = pf.tensor(x, device=dev), pf.tensor(y, device=dev)
    steps, runs = {}, {}
    steps["torch eager"] = (_train_step(torch, tmodels[0], torch.optim.Adam(tmodels[0].parameters(), lr=1e-3)),
                            tx, ty, t_sync)
    if torch_compile:
        tstep = _train_step(torch, tmodels[1], torch.optim.Adam(tmodels[1].parameters(), lr=1e-3, capturable=True))
        steps["torch.compile reduce-overhead"] = (torch.compile(tstep, mode="reduce-overhead"), tx, ty, t_sync)
    for label, mode in (("pyflame eager", "eager"), ("pf.compile", None), ("pf.compile reduce-overhead",
                                                                           "reduce-overhead")):
        m = pf_model()
        step = _train_step(pf, m, pf.optim.Adam(m.parameters(), lr=1e-3, capturable=mode != "eager"))
        steps[label] = (step if mode == "eager" else pf.compile(step, mode=mode), px, py, pf_sync)
    losses = {}
    for label, (step, a, b, sync) in steps.items():
        try:
            t0 = time.perf_counter()
            losses[label] = [step(a, b).item() for _ in range(3)]  # the first steps (trace, capture)
            sync()
            first_ms = (time.perf_counter() - t0) * 1e3
            runs[label] = per_call_us(lambda: step(a, b), sync, repeat)
        except Exception as e:  # noqa: BLE001 - reported, the others still run
            print(f"  {label} failed: {type(e).__name__}: {str(e)[:200]}")
            continue
        if label.startswith("pf.compile"):
            graphs = step._device_graphs() if "reduce" in label else 0
            print(f"  {label}: first three steps {first_ms:.1f} ms, {graphs} captured device graph(s)")
            rows.append({"case": name, "run": label + " first three steps", "ms": first_ms})
    for label, got in losses.items():
        np.testing.assert_allclose(got, losses["torch eager"], rtol=2e-4, atol=2e-5, err_msg=label)
    print(name)
    base = runs["torch eager"]
    for label, us in runs.items():
        print(f"  {label:34s} {us:9.1f} us   {base / us:6.2f}x")
        rows.append({"case": name, "run": label, "us": us, "ratio_vs_torch_eager": base / us})


def first_compile(dev):
    """In this new process, the first two compiled calls (trace, then the first replay with its kernels
    and, in reduce-overhead, the capture), in ms: the chain on 1M floats (the same kernel as 64M, flat
    in packs, from the disk cache; without a fresh process's first allocations of the eager trace's
    64M-float intermediates), then the seed MLP in reduce-overhead mode (the issue's "same graph")."""
    sync = pf.synchronize if dev == "rocm" else (lambda: None)
    x = pf.tensor(np.ones(1024 * 1024, dtype=np.float32), device=dev)
    compiled = pf.compile(lambda a, b: _chain(pf, a, b))
    with pf.no_grad():
        t0 = time.perf_counter()
        compiled(x, x)
        compiled(x, x)
        sync()
    print(f"chain {(time.perf_counter() - t0) * 1e3:.2f}")
    mlp, shape = _models(pf)["seed MLP 784-256-128-10 b32"]
    mlp = mlp.to(dev).eval()
    x = pf.tensor(np.ones(shape, dtype=np.float32), device=dev)
    compiled = pf.compile(mlp, mode="reduce-overhead")
    with pf.no_grad():
        t0 = time.perf_counter()
        compiled(x)
        compiled(x)
        sync()
    print(f"seed MLP {(time.perf_counter() - t0) * 1e3:.2f}")


def _softmax(lib, x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def _layer_norm(lib, x):
    d = x - x.mean(-1, keepdim=True)
    return d / ((d * d).mean(-1, keepdim=True) + 1e-5).sqrt()


def _mse(lib, x, y):
    return ((x - y) ** 2).mean()


def reductions(dev, tdev, pf_sync, t_sync, repeat, rows):
    """Reductions of elementwise chains written from primitives (graph mode: fused_reduction), next
    to torch eager and PyFlame's own kernel for the op where it has one (softmax, layer_norm)."""
    rng = np.random.default_rng(0)
    rows_x = rng.standard_normal((16384, 1024), dtype=np.float32)
    big = [rng.standard_normal(64 * 1024 * 1024, dtype=np.float32) for _ in range(2)]
    cases = [("softmax from primitives, 16384 x 1024 float32", _softmax, (rows_x,),
              lambda x: pf.softmax(x, -1)),
             ("layer_norm from primitives (no affine), 16384 x 1024 float32", _layer_norm, (rows_x,),
              lambda x: pf.nn.functional.layer_norm(x, (1024,))),
             ("mean of squared differences, 2 x 64M float32", _mse, tuple(big), None)]
    for name, fn, arrays, own in cases:
        px = [pf.tensor(a, device=dev) for a in arrays]
        tx = [torch.from_numpy(a).to(tdev) for a in arrays]
        runs = {"torch eager": per_call_us(lambda: fn(torch, *tx), t_sync, repeat),
                "pyflame eager": per_call_us(lambda: fn(pf, *px), pf_sync, repeat)}
        if own:
            runs["pyflame's own kernel"] = per_call_us(lambda: own(*px), pf_sync, repeat)
        compiled = pf.compile(lambda *a: fn(pf, *a))
        got = compiled(*px)
        got = compiled(*px)
        np.testing.assert_allclose(got.to("cpu").numpy(), fn(torch, *tx).cpu().numpy(), rtol=1e-4, atol=1e-5)
        runs["pf.compile"] = per_call_us(lambda: compiled(*px), pf_sync, repeat)
        print(f"{name}\n  graph {compiled.graphs()[0].ops}")
        base = runs["torch eager"]
        for label, us in runs.items():
            print(f"  {label:34s} {us:9.1f} us   {base / us:6.2f}x")
            rows.append({"case": name, "run": label, "us": us, "ratio_vs_torch_eager": base / us})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="rocm" if pf.rocm_is_available() else "cpu")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--no-torch-compile", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--first-compile", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.first_compile:
        return first_compile(args.device)
    dev = args.device
    tdev = "cuda" if dev == "rocm" else "cpu"
    pf_sync = (lambda: pf.synchronize()) if dev == "rocm" else (lambda: None)
    t_sync = (lambda: torch.cuda.synchronize()) if tdev == "cuda" else (lambda: None)
    print(f"device {dev}; torch {torch.__version__} on {tdev}; commit {git_commit()}; {platform.node()}")
    rows = []
    torch.manual_seed(0)
    for (name, (tmodel, shape)), (pmodel, _) in zip(_models(torch).items(), _models(pf).values()):
        tmodel = tmodel.to(tdev).eval()
        # Convolutions run in TF32 on both sides (cuDNN's default, PyTorch's too), by other algorithms.
        tol = dict(rtol=1e-2, atol=1e-3) if "conv" in name and dev == "rocm" else dict(rtol=2e-4, atol=2e-5)
        with pf.no_grad():
            for p, t in zip(pmodel.parameters(), tmodel.parameters()):
                p.copy_(pf.tensor(t.detach().cpu().numpy()))
        pmodel = pmodel.to(dev).eval()
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        tx, px = torch.from_numpy(x).to(tdev), pf.tensor(x, device=dev)
        runs = {}
        with torch.no_grad():
            runs["torch eager"] = per_call_us(lambda: tmodel(tx), t_sync, args.repeat)
            want = tmodel(tx).cpu().numpy()
            if not args.no_torch_compile:
                try:
                    tc = torch.compile(tmodel, mode="reduce-overhead")
                    for _ in range(3):
                        tc(tx)
                    runs["torch.compile reduce-overhead"] = per_call_us(lambda: tc(tx), t_sync, args.repeat)
                except Exception as e:  # noqa: BLE001 - reported, the others still run
                    print(f"  torch.compile failed: {type(e).__name__}: {str(e)[:200]}")
        with pf.no_grad():
            runs["pyflame eager"] = per_call_us(lambda: pmodel(px), pf_sync, args.repeat)
            for label, mode in (("pf.compile", None), ("pf.compile reduce-overhead", "reduce-overhead")):
                compiled = pf.compile(pmodel, mode=mode)
                t0 = time.perf_counter()
                got = compiled(px)
                got = compiled(px)  # the first replay (and capture)
                pf_sync()
                first_ms = (time.perf_counter() - t0) * 1e3
                np.testing.assert_allclose(got.to("cpu").numpy(), want, **tol)
                runs[label] = per_call_us(lambda: compiled(px), pf_sync, args.repeat)
                print(f"  {label}: first compile {first_ms:.1f} ms"
                      + (f", {compiled._device_graphs()} captured device graph(s)" if mode else ""))
                rows.append({"case": name, "run": label + " first compile", "ms": first_ms})
        base = runs["torch eager"]
        print(f"{name}")
        for label, us in runs.items():
            print(f"  {label:34s} {us:9.1f} us   {base / us:6.2f}x")
            rows.append({"case": name, "run": label, "us": us, "ratio_vs_torch_eager": base / us})
    training_step(dev, tdev, pf_sync, t_sync, args.repeat, not args.no_torch_compile, rows)
    with pf.no_grad(), torch.no_grad():
        elementwise_chain(dev, tdev, pf_sync, t_sync, max(args.repeat // 10, 5), not args.no_torch_compile, rows)
        reductions(dev, tdev, pf_sync, t_sync, max(args.repeat // 10, 5), rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "commit": git_commit(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
