"""PyFlame's ROCm backend next to PyTorch, in one run on the same GPU.

    python benchmarks/rocm_benchmark.py --all [--iterations 50] [--warmup 5] [--out DIR]
    python benchmarks/rocm_benchmark.py --matmul --conv

Sections: --runtime (allocator, pinned host-to-device, device-to-device),
--elementwise (add and gelu on 256M fp32, Python overhead per small op),
--matmul (GEMM fp32, tf32, bf16 at 4096 and 8192), --linear (nn.Linear with
bias at model shapes, fp32 and bf16, and one forward + backward), --conv (conv2d
3x3 on 32x64x56x56, conv3d 3x3x3 on 8x32x32x64x64, conv_transpose2d 4x4 stride 2
on 32x64x56x56), --smallconv (nn.Conv2d with bias at small model shapes, forward
and forward + backward, PyTorch with its cuDNN heuristics), --pool (max_pool2d
3x3 stride 2 padding 1 and avg_pool2d 2x2 on 64x64x112x112 fp32), --softmax (softmax, log_softmax on 16384x4096 fp32),
--reduce (row sum, row max, column sum, full sum, row variance on 16384x4096
fp32), --scan (cumsum of rows and of one 256M vector), --norm (layer_norm,
rms_norm, group_norm, batch_norm), --loss (cross_entropy, nll_loss), --index
(embedding, gather), --dropout (256M fp32), --dnn (the project's kernels
against the DNN library, cuDNN or MIOpen, on the same inputs: max_pool2d
3x3/2 and avg_pool2d 2x2 on 64x64x112x112, batch_norm training and eval on
it, relu on 256M, softmax and log_softmax 16384x4096, row sum 16384x4096,
all fp32; there the "pytorch" columns hold the library's figures), --modelshapes
(the worst cases of benchmarks/shapes.py: activations' and norms' forward +
backward, short-row softmax, global pooling, small-map batch_norm, causal SDPA
at the shapes GPT-2, nanoGPT, ViT-Tiny and ResNet-18 run).

Each case runs PyFlame and PyTorch on fresh non-zero inputs, after warm-up
runs, timed with device events over `iterations` calls (the median of
`--repeats` such timings, the two libraries' timings alternating). The table gives both times, the throughput (TB/s
of bytes read and written, or TFLOP/s) and PyFlame's speed relative to
PyTorch (PyTorch's time / PyFlame's: above 1.0 PyFlame is faster). With
--out DIR it writes DIR/rocm_benchmark.json and DIR/rocm_benchmark.png.
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import pyflame as pf
from bench_util import git_commit
from pyflame.backend import rocm

try:
    import torch
    HAVE_TORCH = torch.cuda.is_available()
except ImportError:
    torch, HAVE_TORCH = None, False


@dataclass
class Result:
    section: str
    case: str
    pyflame_ms: float
    pytorch_ms: float = None
    work: float = None   # bytes moved, or floating-point operations
    unit: str = None     # 'TB/s', 'GB/s', 'TFLOP/s', or None for time only
    reference: str = "PyTorch"  # what pytorch_ms measures: PyTorch, or the DNN library (--dnn)

    def rate(self, ms):
        if ms is None or self.work is None:
            return None
        scale = {"TB/s": 1e12, "GB/s": 1e9, "TFLOP/s": 1e12}[self.unit]
        return self.work / (ms * 1e-3) / scale

    @property
    def speed(self):
        return self.pytorch_ms / self.pyflame_ms if self.pytorch_ms else None


def _event_time_ms(fn, make_event, sync_event, iterations, warmup, repeats, stream=None):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = make_event(), make_event()
        start.record(stream) if stream is not None else start.record()
        for _ in range(iterations):
            fn()
        end.record(stream) if stream is not None else end.record()
        sync_event(end)
        times.append(start.elapsed_time(end) / iterations)
    return statistics.median(times)


def pf_ms(fn, args, stream=None):
    return _event_time_ms(fn, lambda: rocm.Event(enable_timing=True), lambda e: e.synchronize(), args.iterations,
                          args.warmup, args.repeats, stream)


def torch_ms(fn, args):
    if not HAVE_TORCH:
        return None
    return _event_time_ms(fn, lambda: torch.cuda.Event(enable_timing=True), lambda e: e.synchronize(),
                          args.iterations, args.warmup, args.repeats)


def _pf_event():
    return rocm.Event(enable_timing=True)


def _torch_event():
    return torch.cuda.Event(enable_timing=True)


def _alternating(ours_fn, ours_event, theirs_fn, theirs_event, args):
    """(ms of ours_fn, ms of theirs_fn), each the median over --repeats timings; the timings
    of the two alternate, so that clock and temperature drift during the run (power-limited
    GEMMs) reach both alike."""
    for fn in (ours_fn, theirs_fn):
        for _ in range(args.warmup):
            fn()
    ours, theirs = [], []
    for _ in range(args.repeats):
        ours.append(_event_time_ms(ours_fn, ours_event, lambda e: e.synchronize(), args.iterations, 0, 1))
        theirs.append(_event_time_ms(theirs_fn, theirs_event, lambda e: e.synchronize(), args.iterations, 0, 1))
    return statistics.median(ours), statistics.median(theirs)


def side_by_side(pf_fn, torch_fn, args):
    """(PyFlame ms, PyTorch ms), alternating (see _alternating)."""
    if not HAVE_TORCH:
        return pf_ms(pf_fn, args), None
    return _alternating(pf_fn, _pf_event, torch_fn, _torch_event, args)


def _randn(shape, dtype="float32"):
    """The same standard-normal values for both libraries (drawn by PyFlame, copied to torch)."""
    base = pf.randn(*shape)
    th = None
    if HAVE_TORCH:
        th = torch.from_numpy(base.numpy()).to(device="cuda", dtype=getattr(torch, dtype))
    return base.to(getattr(pf, dtype)), th


def _backward_pair(pf_fn, torch_fn, inputs, grad):
    """Forward and backward of fn over `inputs` ((PyFlame, PyTorch) pairs, their gradients cleared
    each call) with the output's gradient `grad` (a pair), for both libraries."""
    ours_in, theirs_in = [p for p, _ in inputs], [t for _, t in inputs]
    for t in ours_in + (theirs_in if HAVE_TORCH else []):
        t.requires_grad_(True)

    def ours():
        for t in ours_in:
            t.grad = None
        pf_fn(*ours_in).backward(grad[0])

    def theirs():
        for t in theirs_in:
            t.grad = None
        torch_fn(*theirs_in).backward(grad[1])

    return ours, theirs


# ---------------------------------------------------------------- sections

def runtime_cases(args):
    mm = rocm.get_memory_manager()
    stream = rocm.Stream()

    # Cached allocation + free of 2 MiB: PyFlame's timed inside C++ (the allocator's
    # own cost); PyTorch's through torch.empty (includes Python's call overhead).
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
        t_ns = statistics.median(times)
    yield Result("runtime", "cached alloc+free 2 MiB", ns / 1e6, t_ns / 1e6 if t_ns else None)

    n = 256 << 20
    pool = rocm.get_pinned_pool()
    host = pool.acquire(n)
    ctypes.memset(host, 0x3C, n)
    dev = mm.allocate(n)
    ms = pf_ms(lambda: mm.copy_host_to_device_async(dev, host, n, stream.handle), args, stream)
    t = None
    if HAVE_TORCH:
        th = torch.full((n,), 0x3C, dtype=torch.uint8).pin_memory()
        td = torch.empty(n, dtype=torch.uint8, device="cuda")
        t = torch_ms(lambda: td.copy_(th, non_blocking=True), args)
        del th, td
    yield Result("runtime", "pinned host->device 256 MiB", ms, t, n, "GB/s")
    mm.deallocate(dev)
    pool.release(host)

    n = 1 << 30
    a, b = mm.allocate(n), mm.allocate(n)
    mm.memset(a, 0x3C, n)
    ms = pf_ms(lambda: mm.copy_device_to_device_async(b, a, n, stream.handle), args, stream)
    t = None
    if HAVE_TORCH:
        ta = torch.full((n,), 0x3C, dtype=torch.uint8, device="cuda")
        tb = torch.empty_like(ta)
        t = torch_ms(lambda: tb.copy_(ta), args)
        del ta, tb
        torch.cuda.empty_cache()
    yield Result("runtime", "device->device 1 GiB", ms, t, 2 * n, "TB/s")
    stream.synchronize()
    mm.deallocate(a)
    mm.deallocate(b)
    if pf.cuda.device_count() >= 2:
        yield peer_copy_case(args)


def _wall_ms(fn, sync, args):
    """The median over --repeats of (--iterations calls of fn, then sync) in wall time, per call:
    for work on two devices, which events of one device do not time."""
    for _ in range(args.warmup):
        fn()
    sync()
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for _ in range(args.iterations):
            fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3 / args.iterations)
    return statistics.median(times)


def peer_copy_case(args):
    """x.to('rocm:1') of 256 MiB on 'rocm:0' (issue 24: through the host at 3.3 GB/s before peer copies)."""
    n = 64 << 20
    x = pf.ones(n, device="rocm:0")
    ms = _wall_ms(lambda: x.to("rocm:1"), lambda: (pf.cuda.synchronize(0), pf.cuda.synchronize(1)), args)
    t = None
    if HAVE_TORCH:
        tx = torch.ones(n, device="cuda:0")
        t = _wall_ms(lambda: tx.to("cuda:1"), lambda: (torch.cuda.synchronize(0), torch.cuda.synchronize(1)), args)
    return Result("runtime", "rocm:0 -> rocm:1 256 MiB", ms, t, 4 * n, "GB/s")


def elementwise_cases(args):
    n = 256 * 2**20
    (a, ta), (b, tb) = _randn((n,)), _randn((n,))
    yield Result("elementwise", "add 256M fp32", *side_by_side(lambda: pf.add(a, b),
                 lambda: torch.add(ta, tb), args), 3 * 4 * n, "TB/s")
    yield Result("elementwise", "gelu 256M fp32", *side_by_side(lambda: pf.gelu(a),
                 lambda: torch.nn.functional.gelu(ta), args), 2 * 4 * n, "TB/s")
    del a, b, ta, tb

    # Python overhead: 10,000 adds of 1000 elements, synchronised at the end.
    (x, tx), (y, ty) = _randn((1000,)), _randn((1000,))
    ops = 10_000

    def per_op_ms(add, sync):
        def run():
            for _ in range(ops):
                add()
            sync()
        run()
        t0 = time.perf_counter()
        run()
        return (time.perf_counter() - t0) / ops * 1e3

    t = per_op_ms(lambda: torch.add(tx, ty), torch.cuda.synchronize) if HAVE_TORCH else None
    yield Result("elementwise", "small add, per op", per_op_ms(lambda: pf.add(x, y), pf.synchronize), t)


def matmul_cases(args):
    for dtype, tf32 in (("float32", False), ("float32", True), ("bfloat16", False)):
        rocm.set_allow_tf32(tf32)
        if HAVE_TORCH:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        label = "tf32" if tf32 else {"float32": "fp32", "bfloat16": "bf16"}[dtype]
        for n in (4096, 8192):
            (a, ta), (b, tb) = _randn((n, n), dtype), _randn((n, n), dtype)
            yield Result("matmul", f"GEMM {n} {label}", *side_by_side(lambda: pf.matmul(a, b),
                         lambda: torch.matmul(ta, tb), args), 2.0 * n**3, "TFLOP/s")
            del a, b, ta, tb
    rocm.set_allow_tf32(False)
    if HAVE_TORCH:
        torch.backends.cuda.matmul.allow_tf32 = False


def conv_cases(args):
    # Both libraries at their defaults: TF32 convolutions allowed (torch.backends.cudnn.allow_tf32).
    # FLOPs: 2 per multiply-add, one multiply-add per output (or, transposed, input) element,
    # kernel tap and channel of the group.
    if HAVE_TORCH:
        torch.backends.cudnn.benchmark = True  # PyTorch's algorithm search, as PyFlame's tuning cache does
        F = torch.nn.functional
    (x, tx), (w, tw) = _randn((32, 64, 56, 56)), _randn((64, 64, 3, 3))
    yield Result("conv", "conv2d 3x3 32x64x56x56 fp32", *side_by_side(lambda: pf.conv2d(x, w, padding=1),
                 lambda: F.conv2d(tx, tw, padding=1), args), 2.0 * 32 * 64 * 56 * 56 * 64 * 9, "TFLOP/s")
    # The path of an AMD GPU without MIOpen (im2col + BLAS), against PyTorch with cuDNN.
    rocm.set_dnn_enabled(False)
    yield Result("conv", "conv2d 3x3 32x64x56x56 fp32, im2col+BLAS", *side_by_side(lambda: pf.conv2d(x, w, padding=1),
                 lambda: F.conv2d(tx, tw, padding=1), args), 2.0 * 32 * 64 * 56 * 56 * 64 * 9, "TFLOP/s")
    rocm.set_dnn_enabled(True)
    del x, tx, w, tw

    (x, tx), (w, tw) = _randn((8, 32, 32, 64, 64)), _randn((32, 32, 3, 3, 3))
    yield Result("conv", "conv3d 3x3x3 8x32x32x64x64 fp32", *side_by_side(lambda: pf.conv3d(x, w, padding=1),
                 lambda: F.conv3d(tx, tw, padding=1), args), 2.0 * 8 * 32 * 32 * 64 * 64 * 32 * 27, "TFLOP/s")
    del x, tx, w, tw

    # Output 32x64x112x112.
    (x, tx), (w, tw) = _randn((32, 64, 56, 56)), _randn((64, 64, 4, 4))
    yield Result("conv", "conv_transpose2d 4x4/2 32x64x56x56 fp32",
                 *side_by_side(lambda: pf.conv_transpose2d(x, w, stride=2, padding=1),
                               lambda: F.conv_transpose2d(tx, tw, stride=2, padding=1), args),
                 2.0 * 32 * 64 * 56 * 56 * 64 * 16, "TFLOP/s")


# nn.Linear's shapes: (rows, in_features, out_features), with bias.
LINEAR_SHAPES = [(64 * 256, 384, 1152), (64 * 256, 384, 1536), (8 * 1024, 768, 2304), (8 * 1024, 768, 3072),
                 (8 * 1024, 3072, 768), (8 * 1024, 768, 768), (32, 784, 256), (32, 256, 128), (32, 128, 10)]


def linear_cases(args):
    # Both libraries at their defaults: float32 matmuls without TF32; bf16 accumulates in float32.
    F = torch.nn.functional if HAVE_TORCH else None
    for dtype, label in (("float32", "fp32"), ("bfloat16", "bf16")):
        for m, k, n in LINEAR_SHAPES:
            (x, tx), (w, tw), (b, tb) = _randn((m, k), dtype), _randn((n, k), dtype), _randn((n,), dtype)
            yield Result("linear", f"linear {m}x{k}->{n} {label}", *side_by_side(lambda: pf.linear(x, w, b),
                         lambda: F.linear(tx, tw, tb), args), 2.0 * m * n * k, "TFLOP/s")
    # Forward and backward (input, weight and bias gradients) of one GPT-2 projection.
    m, k, n = 8 * 1024, 768, 3072
    ours, theirs = _backward_pair(pf.linear, lambda *a: F.linear(*a), [_randn((m, k)), _randn((n, k)), _randn((n,))],
                                  _randn((m, n)))
    yield Result("linear", f"linear fwd+bwd {m}x{k}->{n} fp32", *side_by_side(ours, theirs, args), 6.0 * m * n * k,
                 "TFLOP/s")


# Small convolutions (nn.Conv2d, with bias): input, weight, padding.
SMALL_CONVS = [((128, 256, 8, 8), (256, 256, 3, 3), 1), ((32, 512, 7, 7), (512, 512, 3, 3), 1),
               ((128, 32, 24, 24), (64, 32, 3, 3), 1), ((64, 1, 28, 28), (32, 1, 5, 5), 2),
               ((64, 32, 28, 28), (64, 32, 5, 5), 2)]


def small_conv_cases(args):
    # Both libraries at their defaults: TF32 convolutions allowed; PyTorch's cuDNN heuristics
    # (benchmark=False), PyFlame's tuning cache searching once per problem.
    if HAVE_TORCH:
        torch.backends.cudnn.benchmark = False
        F = torch.nn.functional
    for xs, ws, pad in SMALL_CONVS:
        (x, tx), (w, tw), (b, tb) = _randn(xs), _randn(ws), _randn(ws[:1])
        flops = 2.0 * xs[0] * ws[0] * xs[2] * xs[3] * ws[1] * ws[2] * ws[3]  # same-size outputs
        name = f"conv2d {ws[2]}x{ws[3]} {'x'.join(map(str, xs))}->{ws[0]}"
        yield Result("smallconv", name, *side_by_side(lambda: pf.conv2d(x, w, b, padding=pad),
                     lambda: F.conv2d(tx, tw, tb, padding=pad), args), flops, "TFLOP/s")
        ours, theirs = _backward_pair(lambda *a: pf.conv2d(*a, padding=pad), lambda *a: F.conv2d(*a, padding=pad),
                                      [(x, tx), (w, tw), (b, tb)], _randn((xs[0], ws[0], xs[2], xs[3])))
        yield Result("smallconv", name + " fwd+bwd", *side_by_side(ours, theirs, args), 3 * flops, "TFLOP/s")


def pool_cases(args):
    # Bytes read and written (PyTorch's max_pool2d also writes int64 indices, not counted).
    x, tx = _randn((64, 64, 112, 112))
    nbytes = 4 * 64 * 64 * (112 * 112 + 56 * 56)
    yield Result("pool", "max_pool2d 3x3/2 64x64x112x112 fp32", *side_by_side(lambda: pf.max_pool2d(x, 3, 2, 1),
                 lambda: torch.nn.functional.max_pool2d(tx, 3, 2, 1), args), nbytes, "TB/s")
    yield Result("pool", "avg_pool2d 2x2 64x64x112x112 fp32", *side_by_side(lambda: pf.avg_pool2d(x, 2),
                 lambda: torch.nn.functional.avg_pool2d(tx, 2), args), nbytes, "TB/s")


def _matrix_cases(section, bytes_per_element, ops, args):
    """A Result for each (case, PyFlame op, PyTorch op) of `ops`, all on one 16384x4096 fp32 input;
    bytes_per_element: bytes read and written per input element."""
    rows, cols = 16384, 4096
    x, tx = _randn((rows, cols))
    for case, pf_op, torch_op in ops:
        yield Result(section, case, *side_by_side(lambda: pf_op(x), lambda: torch_op(tx), args),
                     bytes_per_element * rows * cols, "TB/s")


def softmax_cases(args):
    yield from _matrix_cases("softmax", 2 * 4, [
        ("softmax 16384x4096 fp32", lambda x: pf.softmax(x, -1), lambda t: torch.softmax(t, -1)),
        ("log_softmax 16384x4096 fp32", lambda x: pf.log_softmax(x, -1), lambda t: torch.log_softmax(t, -1)),
    ], args)


def reduce_cases(args):
    yield from _matrix_cases("reduce", 4, [
        ("row sum 16384x4096 fp32", lambda x: pf.sum(x, -1), lambda t: torch.sum(t, -1)),
        ("row max 16384x4096 fp32", lambda x: pf.amax(x, -1), lambda t: torch.amax(t, -1)),
        ("column sum 16384x4096 fp32", lambda x: pf.sum(x, 0), lambda t: torch.sum(t, 0)),
        ("full sum 16384x4096 fp32", lambda x: pf.sum(x), lambda t: torch.sum(t)),
        ("var rows 16384x4096 fp32", lambda x: pf.var(x, -1), lambda t: torch.var(t, -1)),
    ], args)


def scan_cases(args):
    yield from _matrix_cases("scan", 2 * 4, [
        ("cumsum rows 16384x4096 fp32", lambda x: pf.cumsum(x, -1), lambda t: torch.cumsum(t, -1)),
    ], args)
    n = 1 << 28
    y, ty = _randn((n,))
    yield Result("scan", "cumsum 256M fp32", *side_by_side(lambda: pf.cumsum(y, 0),
                 lambda: torch.cumsum(ty, 0), args), 2 * 4 * n, "TB/s")


def norm_cases(args):
    F = torch.nn.functional if HAVE_TORCH else None
    rows, cols = 16384, 4096
    for dtype in ("float32", "bfloat16"):
        x, tx = _randn((rows, cols), dtype)
        nbytes = 2 * x.element_size() * rows * cols
        label = {"float32": "fp32", "bfloat16": "bf16"}[dtype]
        if dtype == "float32":
            yield Result("norm", f"layer_norm 16384x4096 {label}", *side_by_side(lambda: pf.layer_norm(x, (cols,)),
                         lambda: F.layer_norm(tx, (cols,)), args), nbytes, "TB/s")
        yield Result("norm", f"rms_norm 16384x4096 {label}", *side_by_side(lambda: pf.rms_norm(x, (cols,)),
                     lambda: F.rms_norm(tx, (cols,)), args), nbytes, "TB/s")
        del x, tx
    g, tg = _randn((64, 256, 32, 32))
    yield Result("norm", "group_norm 64x256x32x32 G=32 fp32", *side_by_side(lambda: pf.group_norm(g, 32),
                 lambda: F.group_norm(tg, 32), args), 2 * 4 * g.numel(), "TB/s")
    del g, tg
    b, tb = _randn((64, 64, 112, 112))
    rm, rv = pf.zeros(64), pf.ones(64)
    trm, trv = (torch.zeros(64, device="cuda"), torch.ones(64, device="cuda")) if HAVE_TORCH else (None, None)
    yield Result("norm", "batch_norm training 64x64x112x112 fp32", *side_by_side(
                 lambda: pf.batch_norm(b, rm, rv, training=True),
                 lambda: F.batch_norm(tb, trm, trv, training=True), args), 2 * 4 * b.numel(), "TB/s")
    yield Result("norm", "batch_norm eval 64x64x112x112 fp32", *side_by_side(
                 lambda: pf.batch_norm(b, rm, rv, training=False),
                 lambda: F.batch_norm(tb, trm, trv, training=False), args), 2 * 4 * b.numel(), "TB/s")


def _targets(n, classes):
    t = pf.randint(0, classes, (n,))
    return t, (torch.from_numpy(t.numpy()).cuda() if HAVE_TORCH else None)


def loss_cases(args):
    F = torch.nn.functional if HAVE_TORCH else None
    n, classes = 8192, 32000
    x, tx = _randn((n, classes))
    t, tt = _targets(n, classes)
    yield Result("loss", "cross_entropy 8192x32000 fp32", *side_by_side(lambda: pf.cross_entropy(x, t),
                 lambda: F.cross_entropy(tx, tt), args), 4 * n * classes, "TB/s")
    logp, tlogp = pf.log_softmax(x, 1), torch.log_softmax(tx, 1) if HAVE_TORCH else None
    yield Result("loss", "nll_loss 8192x32000 fp32", *side_by_side(lambda: pf.nll_loss(logp, t),
                 lambda: F.nll_loss(tlogp, tt), args), None, None)


def index_cases(args):
    F = torch.nn.functional if HAVE_TORCH else None
    vocab, dim, tokens = 32000, 4096, 8192
    w, tw = _randn((vocab, dim), "bfloat16")
    ids, tids = _targets(tokens, vocab)
    yield Result("index", "embedding 8192 of 32000x4096 bf16", *side_by_side(lambda: pf.embedding(ids, w),
                 lambda: F.embedding(tids, tw), args), 2 * 2 * tokens * dim, "TB/s")
    del w, tw
    rows, cols = 16384, 4096
    x, tx = _randn((rows, cols))
    idx = pf.randint(0, cols, (rows, cols))
    tidx = torch.from_numpy(idx.numpy()).cuda() if HAVE_TORCH else None
    yield Result("index", "gather dim 1 16384x4096 fp32", *side_by_side(lambda: pf.gather(x, 1, idx),
                 lambda: torch.gather(tx, 1, tidx), args), (4 + 8 + 4) * rows * cols, "TB/s")


def dropout_cases(args):
    F = torch.nn.functional if HAVE_TORCH else None
    n = 1 << 28
    x, tx = _randn((n,))
    yield Result("dropout", "dropout p=0.5 256M fp32", *side_by_side(lambda: pf.dropout(x, 0.5),
                 lambda: F.dropout(tx, 0.5), args), 2 * 4 * n, "TB/s")


def _without_dnn(fn):
    """fn with the DNN library switched off: the project's own kernel where an op would take the library."""
    def run():
        rocm.set_dnn_enabled(False)
        try:
            return fn()
        finally:
            rocm.set_dnn_enabled(True)
    return run


def dnn_cases(args):
    # The pf ops run the project's kernels; rocm.dnn_* call the DNN library (the spec's
    # ROCmDNN functions) on the same tensors, both on the current stream, timed with
    # PyFlame's events. Bytes as in the pool, norm, softmax and reduce sections.
    try:
        lib = rocm.dnn_library()
    except pf.NotSupportedError as e:
        print(f"dnn: skipped: {e}")
        return
    print(f"-- dnn: 'pyflame' is the project's kernel, 'pytorch' is {lib}; the speed is {lib}'s time / "
          f"the kernel's (above 1.0 the kernel is faster)", flush=True)

    def result(case, kernel_fn, library_fn, work, unit):
        return Result("dnn", f"{case} [vs {lib}]", *_alternating(kernel_fn, _pf_event, library_fn, _pf_event, args),
                      work, unit, reference=lib)

    x = pf.randn(64, 64, 112, 112)
    nbytes = 4 * 64 * 64 * (112 * 112 + 56 * 56)
    yield result("max_pool2d 3x3/2 64x64x112x112 fp32", lambda: pf.max_pool2d(x, 3, 2, 1),
                 lambda: rocm.dnn_pooling2d_forward("max_pool2d", x, 3, 2, 1), nbytes, "TB/s")
    # pf.avg_pool2d takes the library for float32 (src/rocm/dnn.cpp): the kernel is timed with it off.
    yield result("avg_pool2d 2x2 64x64x112x112 fp32", _without_dnn(lambda: pf.avg_pool2d(x, 2)),
                 lambda: rocm.dnn_pooling2d_forward("avg_pool2d", x, 2), nbytes, "TB/s")
    weight, bias = pf.rand(64) + 0.5, pf.randn(64)
    # Each updates its own running statistics.
    mean_k, var_k, mean_l, var_l = pf.zeros(64), pf.ones(64), pf.zeros(64), pf.ones(64)
    yield result("batch_norm training 64x64x112x112 fp32",
                 lambda: pf.batch_norm(x, mean_k, var_k, weight, bias, training=True),
                 lambda: rocm.dnn_batchnorm_forward_training(x, weight, bias, mean_l, var_l), 2 * 4 * x.numel(),
                 "TB/s")
    yield result("batch_norm eval 64x64x112x112 fp32",
                 lambda: pf.batch_norm(x, mean_k, var_k, weight, bias, training=False),
                 lambda: rocm.dnn_batchnorm_forward_inference(x, weight, bias, mean_k, var_k), 2 * 4 * x.numel(),
                 "TB/s")
    del x
    a = pf.randn(16384, 16384)  # 256M
    yield result("relu 256M fp32", lambda: pf.relu(a), lambda: rocm.dnn_activation_forward("relu", a),
                 2 * 4 * a.numel(), "TB/s")
    del a
    rows, cols = 16384, 4096
    y = pf.randn(rows, cols)
    yield result("softmax 16384x4096 fp32", lambda: pf.softmax(y, -1), lambda: rocm.dnn_softmax_forward(y, -1),
                 2 * 4 * rows * cols, "TB/s")
    yield result("log_softmax 16384x4096 fp32", lambda: pf.log_softmax(y, -1),
                 lambda: rocm.dnn_softmax_forward(y, -1, log_softmax=True), 2 * 4 * rows * cols, "TB/s")
    yield result("row sum 16384x4096 fp32", lambda: pf.sum(y, -1), lambda: rocm.dnn_reduce("sum", y, -1),
                 4 * rows * cols, "TB/s")


def model_shape_cases(args):
    # The worst cases of benchmarks/shapes.py (docs/perf.md, issue 21), kept measured here.
    F = torch.nn.functional if HAVE_TORCH else None
    fwd_bwd = [
        ("gelu tanh fwd+bwd 8x1024x3072 (GPT-2 mlp)", (8, 1024, 3072),
         lambda a: pf.nn.functional.gelu(a, approximate="tanh"), lambda a: F.gelu(a, approximate="tanh")),
        ("silu fwd+bwd 64x256x1536 (nanoGPT mlp)", (64, 256, 1536), pf.nn.functional.silu, lambda a: F.silu(a)),
        ("relu fwd+bwd 64x64x112x112 (ResNet stem)", (64, 64, 112, 112), pf.relu, lambda a: F.relu(a)),
        ("layer_norm fwd+bwd 8x1024x768 (GPT-2)", (8, 1024, 768),
         lambda a: pf.layer_norm(a, (768,)), lambda a: F.layer_norm(a, (768,))),
        ("log_softmax fwd+bwd 8192x50257 (GPT-2 head)", (8192, 50257),
         lambda a: pf.log_softmax(a, -1), lambda a: F.log_softmax(a, -1)),
    ]
    for name, shape, ours, theirs in fwd_bwd:
        yield Result("modelshapes", name, *side_by_side(*_backward_pair(ours, theirs, [_randn(shape)], _randn(shape)),
                                                        args))
    forward = [
        ("softmax 64x3x197x197 (ViT-Tiny attention)", [(64, 3, 197, 197)], lambda a: pf.softmax(a, -1),
         lambda a: torch.softmax(a, -1)),
        ("softmax 8x12x1024x1024 (GPT-2 attention)", [(8, 12, 1024, 1024)], lambda a: pf.softmax(a, -1),
         lambda a: torch.softmax(a, -1)),
        ("softmax 8192x768", [(8192, 768)], lambda a: pf.softmax(a, -1), lambda a: torch.softmax(a, -1)),
        ("conv2d 3x3 128x256x8x8 -> 256 (cuDNN's graph API)", [(128, 256, 8, 8), (256, 256, 3, 3)],
         lambda x, w: pf.conv2d(x, w, padding=1), lambda x, w: F.conv2d(x, w, padding=1)),
        ("adaptive_avg_pool2d 64x512x7x7 -> 1", [(64, 512, 7, 7)], lambda a: pf.adaptive_avg_pool2d(a, 1),
         lambda a: F.adaptive_avg_pool2d(a, 1)),
        ("batch_norm train 64x128x28x28 (ResNet-18)", [(64, 128, 28, 28)],
         lambda a: pf.batch_norm(a, None, None, training=True), lambda a: F.batch_norm(a, None, None, training=True)),
        ("sdpa causal 8x12x1024x64 (GPT-2)", [(8, 12, 1024, 64)] * 3,
         lambda q, k, v: pf.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
    ]
    for name, shapes, ours, theirs in forward:
        pairs = [_randn(s) for s in shapes]
        xs, txs = [p[0] for p in pairs], [p[1] for p in pairs]
        yield Result("modelshapes", name, *side_by_side(lambda: ours(*xs), lambda: theirs(*txs), args))


SECTIONS = {"runtime": runtime_cases, "elementwise": elementwise_cases, "matmul": matmul_cases,
            "linear": linear_cases, "conv": conv_cases, "smallconv": small_conv_cases, "pool": pool_cases,
            "softmax": softmax_cases, "reduce": reduce_cases, "scan": scan_cases, "norm": norm_cases,
            "loss": loss_cases, "index": index_cases, "dropout": dropout_cases, "dnn": dnn_cases,
            "modelshapes": model_shape_cases}


def _fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def write_chart(results, path, title):
    """A bar chart of PyFlame's speed relative to PyTorch per case (needs matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart written")
        return False
    rows = [r for r in results if r.speed]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    colors = ["#2a9d4b" if r.speed >= 1 else "#d08c2a" if r.speed >= 0.95 else "#c0392b" for r in rows]
    ax.barh([r.case for r in rows][::-1], [r.speed for r in rows][::-1], color=colors[::-1])
    ax.axvline(1.0, color="black", linewidth=0.8)
    # Ratios near 1 are what matters: clip the axis, print each value.
    ax.set_xlim(0, 2)
    for y, r in enumerate(rows[::-1]):
        ax.text(min(r.speed, 1.9), y, f" {r.speed:.2f}x", va="center", fontsize=8)
    ax.set_xlabel("speed relative to PyTorch (PyTorch time / PyFlame time)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="every section")
    for name in SECTIONS:
        ap.add_argument(f"--{name}", action="store_true", help=f"the {name} section")
    ap.add_argument("--iterations", type=int, default=50, help="calls per timing")
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls first")
    ap.add_argument("--repeats", type=int, default=5, help="timings per case; the median is reported")
    ap.add_argument("--out", help="write rocm_benchmark.json and rocm_benchmark.png into this directory")
    args = ap.parse_args()
    chosen = [n for n in SECTIONS if args.all or getattr(args, n)]
    if not chosen:
        ap.error("choose sections (" + ", ".join("--" + n for n in SECTIONS) + ") or --all")
    if not pf.rocm_is_available():
        print(f"ROCm is not available: {pf.rocm_unavailable_reason()}")
        return 1
    info = pf.rocm_get_device_info(0)
    header = (f"device: {info['name']} ({info['architecture']}), {info['runtime_version']}; "
              f"torch {torch.__version__ if HAVE_TORCH else 'not available'}; commit {git_commit()}; "
              f"{time.strftime('%Y-%m-%d')}; {args.iterations} iterations x {args.repeats} repeats "
              f"after {args.warmup} warm-ups")
    print(header)
    print(f"{'case':40s} {'pyflame ms':>11s} {'pytorch ms':>11s} {'pyflame':>9s} {'pytorch':>9s} {'unit':>8s} "
          f"{'speed vs torch':>15s}")
    pf.set_device("rocm")
    pf.manual_seed(0)
    results = []
    for name in chosen:
        for r in SECTIONS[name](args):
            results.append(r)
            print(f"{r.case:40s} {r.pyflame_ms:11.4f} {_fmt(r.pytorch_ms, '11.4f')} {_fmt(r.rate(r.pyflame_ms), '9.2f')} "
                  f"{_fmt(r.rate(r.pytorch_ms), '9.2f')} {r.unit or 'time':>8s} {_fmt(r.speed, '14.2f')}x", flush=True)
    pf.set_device("cpu")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "rocm_benchmark.json"), "w") as f:
            json.dump({"header": header, "device": info, "commit": git_commit(),
                       "results": [dict(asdict(r), pyflame_rate=r.rate(r.pyflame_ms), pytorch_rate=r.rate(r.pytorch_ms),
                                        speed=r.speed) for r in results]}, f, indent=2)
        title = f"PyFlame vs PyTorch on {info['name']} (commit {git_commit()})"
        if write_chart(results, os.path.join(args.out, "rocm_benchmark.png"), title):
            print(f"wrote {args.out}/rocm_benchmark.json and rocm_benchmark.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
