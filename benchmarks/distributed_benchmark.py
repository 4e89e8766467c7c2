"""Several GPUs: PyFlame next to PyTorch on the same machine, in the same processes.

    python benchmarks/distributed_benchmark.py [--json out.json] [--steps 50]

Needs two GPUs (and NCCL). Three parts:
  peer copy      a 256 MB tensor from GPU 0 to GPU 1: x.to('rocm:1') against torch's
                 x.to('cuda:1'), in this process;
  all_reduce     float32 all_reduce of 1 MB, 16 MB, 256 MB and 1 GB between two ranks
                 (started by pyflame.distributed.run), each library's NCCL in turn: the time
                 per call and the bus bandwidth 2 (n - 1) / n x bytes / time (nccl-tests' busbw);
  DDP step       zero_grad, forward, MSE loss, backward (the gradient all-reduces), AdamW
                 step, for seed 003's MLP (1024-2048-1024, batch 64 per GPU) and 8 x
                 Linear(4096) + GELU (batch 256 per GPU): on one GPU without DDP (each rank
                 alone, at the same time) and with DDP over two, per library.
Ratios are PyTorch's time / PyFlame's (above 1: PyFlame is faster).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def _timed(fn, sync, iterations, repeats=5):
    """The median over `repeats` of the mean time of `iterations` calls, in seconds."""
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(iterations):
            fn()
        sync()
        times.append((time.perf_counter() - start) / iterations)
    return sorted(times)[len(times) // 2]


def peer_copy():
    import pyflame as pf
    import torch

    n = 256 * 1024 * 1024 // 4
    x = pf.ones(n, device="rocm:0")
    t = torch.ones(n, device="cuda:0")

    def sync():
        pf.cuda.synchronize(0), pf.cuda.synchronize(1), torch.cuda.synchronize(0), torch.cuda.synchronize(1)

    # Alternated, each library's best: the first library timed must not pay for clocks that are still rising.
    ours, theirs = float("inf"), float("inf")
    for _ in range(3):
        ours = min(ours, _timed(lambda: x.to("rocm:1"), sync, 10))
        theirs = min(theirs, _timed(lambda: t.to("cuda:1"), sync, 10))
    assert float(x.to("rocm:1")[n - 1]) == 1.0
    return {"bytes": n * 4, "pyflame_s": ours, "torch_s": theirs, "ratio": theirs / ours,
            "pyflame_gbps": n * 4 / ours / 1e9, "torch_gbps": n * 4 / theirs / 1e9}


def _models(lib, which):
    nn = lib.nn
    if which == "mlp":
        return nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024)), (64, 1024), (64, 1024)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(4096, 4096), nn.GELU()]
    return nn.Sequential(*layers), (256, 4096), (256, 4096)


def worker(out_path, steps):
    """One rank: both libraries' collectives and DDP steps."""
    import numpy as np
    import pyflame as pf
    import pyflame.distributed as dist
    import torch
    import torch.distributed as tdist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    pf.cuda.set_device(local)
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch_port = int(os.environ["MASTER_PORT"]) + 1
    tdist.init_process_group("nccl", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{torch_port}", rank=rank,
                             world_size=world, device_id=torch.device("cuda", local))

    def pf_sync():
        pf.cuda.synchronize()

    def torch_sync():
        torch.cuda.synchronize()

    results = {"all_reduce": [], "ddp": []}
    for mb in (1, 16, 256, 1024):
        n = mb * 1024 * 1024 // 4
        x = pf.ones(n, device=f"rocm:{local}")
        t = torch.ones(n, device=f"cuda:{local}")
        iterations = 100 if mb <= 16 else 10
        for _ in range(3):
            dist.all_reduce(x)
            tdist.all_reduce(t)
        ours = _timed(lambda: dist.all_reduce(x), pf_sync, iterations)
        theirs = _timed(lambda: tdist.all_reduce(t), torch_sync, iterations)
        bus = 2 * (world - 1) / world * n * 4
        results["all_reduce"].append({"mb": mb, "pyflame_us": ours * 1e6, "torch_us": theirs * 1e6,
                                      "pyflame_busbw_gbps": bus / ours / 1e9, "torch_busbw_gbps": bus / theirs / 1e9})

    rng = np.random.default_rng(rank)
    for which in ("mlp", "linear8x4096"):
        row = {"model": which}
        for name, lib in (("pyflame", pf), ("torch", torch)):
            device = f"rocm:{local}" if lib is pf else f"cuda:{local}"
            sync = pf_sync if lib is pf else torch_sync
            model, xs, ys = _models(lib, which)
            model = model.to(device)
            x = lib.from_numpy(rng.standard_normal(xs).astype(np.float32)).to(device)
            y = lib.from_numpy(rng.standard_normal(ys).astype(np.float32)).to(device)
            for mode in ("one_gpu", "ddp"):
                if mode == "ddp":
                    ddp_cls = (pf.nn.parallel.DistributedDataParallel if lib is pf
                               else torch.nn.parallel.DistributedDataParallel)
                    net = ddp_cls(model, device_ids=[local])
                else:
                    net = model
                opt = lib.optim.AdamW(net.parameters(), lr=1e-4)

                def step():
                    opt.zero_grad()
                    lib.nn.functional.mse_loss(net(x), y).backward()
                    opt.step()

                for _ in range(5):
                    step()
                row[f"{name}_{mode}_us"] = _timed(step, sync, steps) * 1e6
        results["ddp"].append(row)
    dist.destroy_process_group()
    tdist.destroy_process_group()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)


def _print_tables(results):
    p = results["peer_copy"]
    print(f"peer copy 256 MB: pyflame {p['pyflame_gbps']:.1f} GB/s, torch {p['torch_gbps']:.1f} GB/s, "
          f"ratio {p['ratio']:.2f}x")
    print(f"{'all_reduce':>12} {'pyflame us':>11} {'torch us':>9} {'pf busbw':>9} {'torch busbw':>12} {'ratio':>6}")
    for r in results["all_reduce"]:
        print(f"{r['mb']:>9} MB {r['pyflame_us']:>11.1f} {r['torch_us']:>9.1f} {r['pyflame_busbw_gbps']:>9.1f} "
              f"{r['torch_busbw_gbps']:>12.1f} {r['torch_us'] / r['pyflame_us']:>5.2f}x")
    print(f"{'DDP step':>14} {'pf 1 GPU':>9} {'pf DDP':>8} {'torch 1 GPU':>12} {'torch DDP':>10} {'ratio DDP':>10}")
    for r in results["ddp"]:
        print(f"{r['model']:>14} {r['pyflame_one_gpu_us']:>9.0f} {r['pyflame_ddp_us']:>8.0f} "
              f"{r['torch_one_gpu_us']:>12.0f} {r['torch_ddp_us']:>10.0f} "
              f"{r['torch_ddp_us'] / r['pyflame_ddp_us']:>9.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.steps)
        return
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    results = {"peer_copy": peer_copy()}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ranks.json")
        subprocess.run([sys.executable, "-m", "pyflame.distributed.run", "--standalone", "--nproc-per-node", "2",
                        os.path.abspath(__file__), "--worker", out, "--steps", str(args.steps)], check=True)
        with open(out) as f:
            results.update(json.load(f))
    _print_tables(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
