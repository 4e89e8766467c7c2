"""Training steps and backward passes, PyFlame next to PyTorch eager in one run.

    python benchmarks/training_benchmark.py [--device cpu|rocm] [--repeat 50] [--json out.json]

Training steps (zero_grad, forward, loss, backward, optimizer step), wall
clock per step, waiting for the device at the end of each step:
  * the seed's MLP 784-256-128-10, batch 32, cross_entropy, Adam;
  * seed 003's model (Linear 1024->2048, GELU, Linear 2048->1024), batch 64,
    mse_loss, AdamW.
Backward passes (forward + backward of one op, the gradient of its input):
norms (layer_norm, rms_norm, batch_norm in training, group_norm), softmax, pooling and
cross_entropy at the sizes of issue 11's forward benchmarks.
The ratio is PyTorch's time over PyFlame's: above 1.0 means PyFlame is faster.
On 'rocm' PyTorch runs on its CUDA device (the same GPU).
"""

import argparse
import json
import platform
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

import pyflame as pf
from bench_util import git_commit


def per_call_seconds(fn, sync, repeat, warmup=5):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _mlp(lib, sizes, act):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(lib.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(act(lib))
    return lib.nn.Sequential(*layers)


def _copy_weights(pf_model, torch_model):
    with pf.no_grad():
        for p, t in zip(pf_model.parameters(), torch_model.parameters()):
            p.copy_(pf.tensor(t.detach().cpu().numpy()))


def training_cases(device, tdev):
    rng = np.random.default_rng(0)
    specs = [
        ("seed MLP 784-256-128-10 b32 Adam", (784, 256, 128, 10), lambda lib: lib.nn.ReLU(), 32, "ce",
         lambda lib, ps: lib.optim.Adam(ps, lr=1e-3)),
        ("seed 003 MLP 1024-2048-1024 b64 AdamW", (1024, 2048, 1024), lambda lib: lib.nn.GELU(), 64, "mse",
         lambda lib, ps: lib.optim.AdamW(ps, lr=1e-3)),
    ]
    for name, sizes, act, batch, loss, make_opt in specs:
        torch.manual_seed(0)
        tm = _mlp(torch, sizes, act).to(tdev)
        pm = _mlp(pf, sizes, act)
        _copy_weights(pm, tm)
        pm.to(device)
        x = rng.standard_normal((batch, sizes[0]), dtype=np.float32)
        if loss == "ce":
            y = rng.integers(0, sizes[-1], batch)
            px, py = pf.tensor(x, device=device), pf.tensor(y, device=device)
            tx, ty = torch.from_numpy(x).to(tdev), torch.from_numpy(y).to(tdev)
            pf_loss, t_loss = pf.cross_entropy, F.cross_entropy
        else:
            y = rng.standard_normal((batch, sizes[-1]), dtype=np.float32)
            px, py = pf.tensor(x, device=device), pf.tensor(y, device=device)
            tx, ty = torch.from_numpy(x).to(tdev), torch.from_numpy(y).to(tdev)
            pf_loss, t_loss = pf.mse_loss, F.mse_loss
        p_opt, t_opt = make_opt(pf, pm.parameters()), make_opt(torch, tm.parameters())

        def pf_step(m=pm, opt=p_opt, x=px, y=py, loss=pf_loss):
            opt.zero_grad()
            loss(m(x), y).backward()
            opt.step()

        def torch_step(m=tm, opt=t_opt, x=tx, y=ty, loss=t_loss):
            opt.zero_grad()
            loss(m(x), y).backward()
            opt.step()

        yield name, pf_step, torch_step


def backward_cases(device, tdev):
    rng = np.random.default_rng(1)

    def pair(shape, grad=True):
        v = rng.standard_normal(shape, dtype=np.float32)
        return (pf.tensor(v, device=device, requires_grad=grad),
                torch.from_numpy(v).to(tdev).requires_grad_(grad))

    big = device != "cpu"
    rows, cols = (16384, 4096) if big else (2048, 1024)
    x, tx = pair((rows, cols))
    w, tw = pair((cols,), grad=False)
    gy, tgy = pair((rows, cols), grad=False)

    def fwd_bwd(pf_fn, torch_fn, x=x, tx=tx, gy=gy, tgy=tgy):
        def p():
            x.grad = None
            pf_fn(x).backward(gy)

        def t():
            tx.grad = None
            torch_fn(tx).backward(tgy)

        return p, t

    yield (f"layer_norm fwd+bwd {rows}x{cols}",
           *fwd_bwd(lambda a: pf.layer_norm(a, (cols,), w, w), lambda a: F.layer_norm(a, (cols,), tw, tw)))
    yield (f"rms_norm fwd+bwd {rows}x{cols}",
           *fwd_bwd(lambda a: pf.rms_norm(a, (cols,), w), lambda a: F.rms_norm(a, (cols,), tw)))
    yield (f"softmax fwd+bwd {rows}x{cols}",
           *fwd_bwd(lambda a: pf.softmax(a, -1), lambda a: torch.softmax(a, -1)))
    # The channel norms at issue 11's forward sizes: input, output gradient, weight and bias.
    bn_shape = (64, 64, 112, 112) if big else (8, 64, 28, 28)
    (bn_x, bn_tx), (bn_g, bn_tg) = pair(bn_shape), pair(bn_shape, grad=False)
    (bn_w, bn_tw), (bn_b, bn_tb) = pair(bn_shape[1:2], grad=False), pair(bn_shape[1:2], grad=False)
    yield (f"batch_norm training fwd+bwd {'x'.join(map(str, bn_shape))}",
           *fwd_bwd(lambda a: pf.batch_norm(a, None, None, bn_w, bn_b, training=True),
                    lambda a: F.batch_norm(a, None, None, bn_tw, bn_tb, training=True), bn_x, bn_tx, bn_g, bn_tg))
    gn_shape = (64, 256, 32, 32) if big else (8, 256, 16, 16)
    (gn_x, gn_tx), (gn_g, gn_tg) = pair(gn_shape), pair(gn_shape, grad=False)
    (gn_w, gn_tw), (gn_b, gn_tb) = pair(gn_shape[1:2], grad=False), pair(gn_shape[1:2], grad=False)
    yield (f"group_norm G=32 fwd+bwd {'x'.join(map(str, gn_shape))}",
           *fwd_bwd(lambda a: pf.group_norm(a, 32, gn_w, gn_b), lambda a: F.group_norm(a, 32, gn_tw, gn_tb),
                    gn_x, gn_tx, gn_g, gn_tg))
    # Pooling at the size of issue 11's forward benchmark (a ResNet stem's max pool).
    shape = (64, 64, 112, 112) if big else (8, 64, 56, 56)
    img, timg = pair(shape)
    size = "x".join(map(str, shape))
    for name, pf_fn, torch_fn in (
            (f"max_pool2d 3x3/2 fwd+bwd {size}", lambda a: pf.max_pool2d(a, 3, 2, 1),
             lambda a: F.max_pool2d(a, 3, 2, 1)),
            (f"avg_pool2d 2x2 fwd+bwd {size}", lambda a: pf.avg_pool2d(a, 2), lambda a: F.avg_pool2d(a, 2))):
        g, tg = pair(tuple(torch_fn(timg.detach()).shape), grad=False)
        yield (name, *fwd_bwd(pf_fn, torch_fn, img, timg, g, tg))
    n, c = (8192, 32000) if big else (1024, 4000)
    logits, tlogits = pair((n, c))
    t = rng.integers(0, c, n)
    target, ttarget = pf.tensor(t, device=device), torch.from_numpy(t).to(tdev)

    def ce():
        logits.grad = None
        pf.cross_entropy(logits, target).backward()

    def tce():
        tlogits.grad = None
        F.cross_entropy(tlogits, ttarget).backward()

    yield f"cross_entropy fwd+bwd {n}x{c}", ce, tce

    # conv2d 3x3, input and weight gradients (the DNN library's backward data and weights on the GPU)
    shape = (32, 64, 56, 56) if big else (8, 16, 28, 28)
    image, timage = pair(shape)
    kernel, tkernel = pair((shape[1], shape[1], 3, 3))
    gout, tgout = pair(shape, grad=False)

    def conv():
        image.grad = kernel.grad = None
        pf.conv2d(image, kernel, padding=1).backward(gout)

    def tconv():
        timage.grad = tkernel.grad = None
        F.conv2d(timage, tkernel, padding=1).backward(tgout)

    yield f"conv2d 3x3 fwd+bwd {'x'.join(map(str, shape))}", conv, tconv


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="rocm" if pf.rocm_is_available() else "cpu")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    device = args.device
    pf.set_device(device)
    tdev = "cuda" if device == "rocm" else "cpu"
    if device == "cpu":
        torch.set_num_threads(pf.cpu_threads())

    def sync_pf():
        pf.synchronize()

    def sync_torch():
        if tdev == "cuda":
            torch.cuda.synchronize()

    print(f"device {device}; torch {torch.__version__} on {tdev}; commit {git_commit()}")
    print(f"{'case':44} {'torch us':>10} {'pyflame us':>11} {'speedup':>8}")
    rows = []
    for section in (training_cases, backward_cases):
        for name, pf_fn, torch_fn in section(device, tdev):
            t_torch = per_call_seconds(torch_fn, sync_torch, args.repeat) * 1e6
            # On the CPU each library's idle OpenMP threads spin for a while after a
            # parallel region; the pause keeps them from slowing the other on few cores.
            if device == "cpu":
                time.sleep(0.5)
            t_pf = per_call_seconds(pf_fn, sync_pf, args.repeat) * 1e6
            if device == "cpu":
                time.sleep(0.5)
            rows.append(dict(case=name, torch_us=t_torch, pyflame_us=t_pf, speedup=t_torch / t_pf))
            print(f"{name:44} {t_torch:10.1f} {t_pf:11.1f} {t_torch / t_pf:7.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(commit=git_commit(), device=device, machine=platform.processor() or platform.machine(),
                           torch=torch.__version__, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
