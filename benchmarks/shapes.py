"""Every op the example models use, at the shapes they run, PyFlame next to PyTorch eager in one process.

    python benchmarks/shapes.py [--device cpu|rocm] [--ops conv2d,linear,...] [--dtype float32|bfloat16]
                                [--repeat 10] [--iters N] [--json out.json] [--small]

The models (issue 21): nanoGPT char (6 layers, 384 wide, 6 heads, block 256, batch 64, vocab 65),
GPT-2 small (12 layers, 768 wide, 12 heads, block 1024, batch 8, vocab 50257), ResNet-18 on
32x32 (batch 128, CIFAR stem: 3x3, no max pool) and on 224x224 (batch 64), ViT-Tiny (patch 16,
224, width 192, 3 heads, MLP 768, batch 64), a 2-layer LSTM language model (vocab 10000, hidden
512, seq 64, batch 32), the seed MLP (784-256-128-10, batch 32), a small MNIST-style CNN (5x5
convs 1->32 on 28x28 and 32->64 on 12x12, 2x2 max pools, batch 128), plus the shapes issue 21
measured (3x3 convs on 128x256x8x8, 32x512x7x7, 128x32x24x24; softmax over rows of 384 and 768
and over 128x50257; adaptive_avg_pool2d(x, 1) on 32x64x112x112 and 128x32x24x24). Depthwise
convolutions (no listed model has one) run at MobileNet-like shapes, group_norm at ResNet's
shapes, silu at the transformers' MLP shapes.

Op families (--ops takes these names): conv2d, batch_norm, layer_norm, group_norm, softmax,
log_softmax, linear, matmul, bmm, max_pool2d, avg_pool2d, adaptive_avg_pool2d, embedding,
cross_entropy, dropout, gelu, silu, relu, sdpa, adamw. Each op at each shape runs as
  fwd   the op alone, no input requiring grad;
  bwd   the op with its inputs (and weights) requiring grad, then .backward(grad) with a fixed
        random output gradient (.backward() for a scalar loss), the grads set to None before
        each call (zero_grad's default);
  step  (adamw) one optimizer.step() of pf.optim.AdamW / torch.optim.AdamW over a model's
        parameter shapes, with fixed gradients; each library's default implementation
        (PyTorch: foreach on CUDA, the for-loop on the CPU; PyFlame: its multi-tensor kernel).
Inputs are seeded NumPy arrays (standard normal, weights scaled by 1/sqrt(fan_in)), given to
both libraries: pf.tensor(a, device=...), torch.tensor(a, device=...). Nothing calls
pf.set_device: PyFlame's tensors are on 'rocm', PyTorch's on 'cuda' (the same GPU).

Timing is what a user sees: `iters` calls back to back, then a wait for the device
(pf.synchronize(), torch.cuda.synchronize()), divided by iters; the median of `repeat` such
blocks after a warm-up, PyFlame's and PyTorch's blocks interleaved (alternating which goes
first). --iters 0 (the default) picks per case enough calls for a block of about 5 ms on the GPU
(20 ms on the CPU, 2 ms with --small), at most 200. ratio = PyTorch's time / PyFlame's: above 1.0 PyFlame is faster.

Before timing, each case's output (and, for bwd, every input's gradient) is compared once with
PyTorch's: err = max|pf - torch| / max|torch|, a MISMATCH above 1e-2 (float32; TF32
convolutions on both sides) or 5e-2 (bfloat16). Dropout draws different masks in the two
libraries, so its check is that PyFlame's output is x / (1 - p) or 0, with a dropped fraction near
p, and that its input gradient is grad * mask / (1 - p). AdamW's check compares the parameters
after the first step. A case whose call raises prints the error and is left out of the timing.

The "vendor" column marks the cases where, on the GPU, PyFlame's work is one call of the vendor
library's routine that PyTorch also calls (target: >= 0.95x there; >= 0.9x elsewhere, and a
geometric mean >= 1.1x per family):
  cuBLAS (rocBLAS on AMD): matmul, bmm (src/rocm/blas.cpp: matmul / batch_matmul ->
    ROCmBLAS::gemm_ex, one strided-batched GEMM); linear (src/core/modules_ops.cpp: on the GPU
    the composite matmul + add; PyTorch's addmm also runs a cuBLAS(Lt) GEMM, with the bias in
    its epilogue); their backward passes are GEMMs too (plus the bias gradient's sum).
  cuDNN (MIOpen on AMD): conv2d (src/rocm/dnn.cpp: conv_entry -> ROCmDNN, forward, backward data
    and backward weights), except depthwise: PyFlame sends it to cuDNN, but PyTorch sends float32
    and bfloat16 depthwise convolutions to its own kernel (cuDNN only for float16), so those rows
    are unmarked. float32 avg_pool2d forward (dnn.cpp: dnn_avg_pool2d, the hook in
    kernels/pool.hip; its backward and other dtypes are pool.hip's kernels) is marked as issue
    21 asks, but PyTorch's avg_pool2d is its own kernel, not cuDNN's.
  With cuDNN switched off (pyflame.backend.rocm.set_dnn_enabled(False)) convolutions are im2col
  + cuBLAS and are unmarked. Everything else is PyFlame's own kernels (src/rocm/kernels/*.hip);
  sdpa is a composite (matmul, softmax, matmul) next to PyTorch's fused attention kernels.
On the CPU the column is empty.

Both libraries stay at their defaults; the header prints them. PyTorch: float32 convolutions may
use TF32 (torch.backends.cudnn.allow_tf32), float32 matmuls may not
(torch.backends.cuda.matmul.allow_tf32), cudnn.benchmark off. PyFlame (docs/rocm.md, TF32;
src/rocm/math_mode.cpp): the same two defaults (PYFLAME_ALLOW_TF32, PYFLAME_CONV_ALLOW_TF32),
and its cuDNN adapter chooses each convolution's algorithm by a timed search on first use
(get_tuning_cache().exhaustive_search(), on by default), outside the timed blocks here.
"""

import argparse
import datetime
import json
import math
import platform
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import pyflame as pf
import pyflame.nn.functional as PF
from bench_util import git_commit

TOLERANCE = {"float32": 1e-2, "bfloat16": 5e-2}


class Op:
    """One op at one shape. pf_fn() and torch_fn() compute the same output from identically-valued
    inputs; `leaves` are (pf, torch) pairs of the inputs that require grad in the "bwd" case.
    check(mode, pf_out, pf_grads, torch_out, torch_grads, grad_out) replaces the comparison."""

    def __init__(self, name, shape, pf_fn, torch_fn, leaves=(), vendor="", bwd_vendor=None, modes=("fwd", "bwd"),
                 check=None):
        self.name, self.shape, self.pf_fn, self.torch_fn = name, shape, pf_fn, torch_fn
        self.leaves = list(leaves)
        self.vendor = {"fwd": vendor, "bwd": vendor if bwd_vendor is None else bwd_vendor, "step": vendor}
        self.modes, self.check = modes, check


class Maker:
    """Seeded inputs for both libraries: the same NumPy values on PyFlame's and PyTorch's device."""

    def __init__(self, device, tdev, dtype, seed=0):
        self.device, self.tdev, self.dtype = device, tdev, dtype
        self.pf_dtype, self.torch_dtype = getattr(pf, dtype), getattr(torch, dtype)
        self.rng = np.random.default_rng(seed)
        self.blas = self.dnn = ""
        if device != "cpu":
            self.blas, self.dnn = "cuBLAS", "cuDNN"
            try:
                if pf.backend.rocm.dnn_library() == "MIOpen":
                    self.blas, self.dnn = "rocBLAS", "MIOpen"
                if not pf.backend.rocm.dnn_enabled():
                    self.dnn = ""
            except Exception:  # a build without the DNN adapter: convolutions are im2col + BLAS
                self.dnn = ""

    def both(self, a, dtype=True):
        """a (NumPy) as a PyFlame and a PyTorch tensor; in the benchmark's dtype when `dtype`."""
        if dtype:
            return (pf.tensor(a, device=self.device, dtype=self.pf_dtype),
                    torch.tensor(a, device=self.tdev, dtype=self.torch_dtype))
        return pf.tensor(a, device=self.device), torch.tensor(a, device=self.tdev)

    def normal(self, shape, scale=1.0):
        """Standard normal values as float32, drawn in float64: NumPy's float32 draws hold an exact
        zero about once in 5M values, which would make dropout's mask unreadable from its output."""
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def randn(self, *shape, scale=1.0):
        return self.both(self.normal(shape, scale))

    def uniform(self, *shape, low=0.5, high=1.5):
        return self.both(self.rng.uniform(low, high, shape).astype(np.float32))

    def weight(self, *shape, fan_in=None):
        """A weight scaled like PyTorch's default init: 1 / sqrt(fan_in) (fan_in: shape[1:] by default)."""
        fan_in = fan_in or math.prod(shape[1:]) or 1
        return self.randn(*shape, scale=1.0 / math.sqrt(fan_in))

    def randint(self, high, *shape):
        return self.both(self.rng.integers(0, high, shape), dtype=False)

    def arange(self, n):
        return pf.arange(n, device=self.device), torch.arange(n, device=self.tdev)


def dims(shape):
    return "x".join(map(str, shape))


# ---------------------------------------------------------------- the families

def conv2d_ops(m, small):
    # (name, input N C H W, out channels, kernel, stride, padding, groups, bias)
    if small:
        shapes = [("stem 3x3", (4, 3, 16, 16), 16, 3, 1, 1, 1, False),
                  ("3x3", (4, 16, 16, 16), 16, 3, 1, 1, 1, False),
                  ("3x3/2", (4, 16, 16, 16), 32, 3, 2, 1, 1, False),
                  ("1x1/2 downsample", (4, 16, 16, 16), 32, 1, 2, 0, 1, False),
                  ("depthwise 3x3", (4, 16, 16, 16), 16, 3, 1, 1, 16, False),
                  ("MNIST CNN 5x5", (4, 1, 28, 28), 8, 5, 1, 0, 1, True)]
    else:
        shapes = [("ResNet-18 CIFAR stem 3x3", (128, 3, 32, 32), 64, 3, 1, 1, 1, False),
                  ("ResNet-18 CIFAR layer1 3x3", (128, 64, 32, 32), 64, 3, 1, 1, 1, False),
                  ("ResNet-18 CIFAR layer2 3x3/2", (128, 64, 32, 32), 128, 3, 2, 1, 1, False),
                  ("ResNet-18 CIFAR layer2 1x1/2 down", (128, 64, 32, 32), 128, 1, 2, 0, 1, False),
                  ("ResNet-18 CIFAR layer2 3x3", (128, 128, 16, 16), 128, 3, 1, 1, 1, False),
                  ("ResNet-18 CIFAR layer3 3x3/2", (128, 128, 16, 16), 256, 3, 2, 1, 1, False),
                  ("ResNet-18 CIFAR layer3 1x1/2 down", (128, 128, 16, 16), 256, 1, 2, 0, 1, False),
                  ("ResNet-18 CIFAR layer3 3x3 (issue)", (128, 256, 8, 8), 256, 3, 1, 1, 1, False),
                  ("ResNet-18 CIFAR layer4 3x3/2", (128, 256, 8, 8), 512, 3, 2, 1, 1, False),
                  ("ResNet-18 CIFAR layer4 1x1/2 down", (128, 256, 8, 8), 512, 1, 2, 0, 1, False),
                  ("ResNet-18 CIFAR layer4 3x3", (128, 512, 4, 4), 512, 3, 1, 1, 1, False),
                  ("ResNet-18 224 stem 7x7/2", (64, 3, 224, 224), 64, 7, 2, 3, 1, False),
                  ("ResNet-18 224 layer1 3x3", (64, 64, 56, 56), 64, 3, 1, 1, 1, False),
                  ("ResNet-18 224 layer2 3x3/2", (64, 64, 56, 56), 128, 3, 2, 1, 1, False),
                  ("ResNet-18 224 layer2 1x1/2 down", (64, 64, 56, 56), 128, 1, 2, 0, 1, False),
                  ("ResNet-18 224 layer2 3x3", (64, 128, 28, 28), 128, 3, 1, 1, 1, False),
                  ("ResNet-18 224 layer3 3x3/2", (64, 128, 28, 28), 256, 3, 2, 1, 1, False),
                  ("ResNet-18 224 layer3 1x1/2 down", (64, 128, 28, 28), 256, 1, 2, 0, 1, False),
                  ("ResNet-18 224 layer3 3x3", (64, 256, 14, 14), 256, 3, 1, 1, 1, False),
                  ("ResNet-18 224 layer4 3x3/2", (64, 256, 14, 14), 512, 3, 2, 1, 1, False),
                  ("ResNet-18 224 layer4 1x1/2 down", (64, 256, 14, 14), 512, 1, 2, 0, 1, False),
                  ("ResNet-18 224 layer4 3x3", (64, 512, 7, 7), 512, 3, 1, 1, 1, False),
                  ("3x3 at batch 32 (issue)", (32, 512, 7, 7), 512, 3, 1, 1, 1, False),
                  ("ViT-Tiny patch embed 16x16/16", (64, 3, 224, 224), 192, 16, 16, 0, 1, True),
                  ("MNIST CNN conv1 5x5 (issue)", (128, 1, 28, 28), 32, 5, 1, 0, 1, True),
                  ("MNIST CNN conv2 5x5", (128, 32, 12, 12), 64, 5, 1, 0, 1, True),
                  ("3x3 on 24x24 (issue)", (128, 32, 24, 24), 32, 3, 1, 1, 1, True),
                  ("depthwise 3x3 (MobileNet-like)", (128, 64, 32, 32), 64, 3, 1, 1, 64, False),
                  ("depthwise 3x3 (MobileNet-like)", (64, 128, 56, 56), 128, 3, 1, 1, 128, False),
                  ("depthwise 3x3/2 (MobileNet-like)", (64, 256, 28, 28), 256, 3, 2, 1, 256, False)]
    for name, xs, out, k, stride, padding, groups, bias in shapes:
        yield conv2d_op(m, name, xs, out, k, stride, padding, groups, bias)


def conv2d_op(m, name, xs, out, k, stride, padding, groups, bias):
    x, tx = m.randn(*xs)
    w, tw = m.weight(out, xs[1] // groups, k, k)
    b, tb = m.weight(out, fan_in=xs[1] // groups * k * k) if bias else (None, None)
    leaves = [(x, tx), (w, tw)] + ([(b, tb)] if bias else [])
    desc = (f"{dims(xs)} -> {out}, {k}x{k}" + (f"/{stride}" if stride > 1 else "") + (f" p{padding}" if padding else "")
            + (f" g{groups}" if groups > 1 else "") + (" +bias" if bias else ""))
    return Op(name, desc, lambda: PF.conv2d(x, w, b, stride, padding, 1, groups),
              lambda: F.conv2d(tx, tw, tb, stride, padding, 1, groups), leaves,
              vendor=m.dnn if groups == 1 or groups != xs[1] else "")


RESNET_BN_SHAPES = [("ResNet-18 CIFAR", (128, 64, 32, 32)), ("ResNet-18 CIFAR", (128, 128, 16, 16)),
                    ("ResNet-18 CIFAR", (128, 256, 8, 8)), ("ResNet-18 CIFAR", (128, 512, 4, 4)),
                    ("ResNet-18 224 stem", (64, 64, 112, 112)), ("ResNet-18 224", (64, 64, 56, 56)),
                    ("ResNet-18 224", (64, 128, 28, 28)), ("ResNet-18 224", (64, 256, 14, 14)),
                    ("ResNet-18 224", (64, 512, 7, 7))]


def batch_norm_ops(m, small):
    shapes = ([("small map", (4, 16, 8, 8)), ("small map", (4, 32, 4, 4))] if small else
              RESNET_BN_SHAPES + [("digits demo CNN", (32, 16, 8, 8)), ("digits demo CNN", (32, 32, 4, 4))])
    for name, xs in shapes:
        for training in (True, False):
            yield batch_norm_op(m, name, xs, training)


def batch_norm_op(m, name, xs, training):
    # as nn.BatchNorm2d: affine, with running statistics (updated in training)
    x, tx = m.randn(*xs)
    w, tw = m.uniform(xs[1])
    b, tb = m.randn(xs[1])
    rm, trm = m.randn(xs[1], scale=0.1)
    rv, trv = m.uniform(xs[1])
    mode = "train" if training else "eval"
    return Op(f"{name} {mode}", dims(xs),
              lambda: PF.batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5),
              lambda: F.batch_norm(tx, trm, trv, tw, tb, training, 0.1, 1e-5), [(x, tx), (w, tw), (b, tb)])


def layer_norm_ops(m, small):
    shapes = ([("tiny transformer", (4, 32, 64))] if small else
              [("nanoGPT char", (64, 256, 384)), ("GPT-2 small", (8, 1024, 768)), ("ViT-Tiny", (64, 197, 192))])
    for name, xs in shapes:
        yield layer_norm_op(m, name, xs)


def layer_norm_op(m, name, xs):
    x, tx = m.randn(*xs)
    w, tw = m.uniform(xs[-1])
    b, tb = m.randn(xs[-1])
    return Op(name, dims(xs), lambda: PF.layer_norm(x, (xs[-1],), w, b, 1e-5),
              lambda: F.layer_norm(tx, (xs[-1],), tw, tb, 1e-5), [(x, tx), (w, tw), (b, tb)])


def group_norm_ops(m, small):
    shapes = ([("GN 4 groups", (4, 16, 8, 8), 4)] if small else
              [("ResNet-18 CIFAR, GN 32", (128, 64, 32, 32), 32), ("ResNet-18 224, GN 32", (64, 64, 56, 56), 32),
               ("ResNet-18 224, GN 32", (64, 128, 28, 28), 32), ("ResNet-18 224, GN 32", (64, 256, 14, 14), 32),
               ("ResNet-18 224, GN 32", (64, 512, 7, 7), 32), ("MNIST CNN map, GN 8", (128, 32, 24, 24), 8)])
    for name, xs, groups in shapes:
        yield group_norm_op(m, name, xs, groups)


def group_norm_op(m, name, xs, groups):
    x, tx = m.randn(*xs)
    w, tw = m.uniform(xs[1])
    b, tb = m.randn(xs[1])
    return Op(name, dims(xs), lambda: PF.group_norm(x, groups, w, b, 1e-5),
              lambda: F.group_norm(tx, groups, tw, tb, 1e-5), [(x, tx), (w, tw), (b, tb)])


def softmax_ops(m, small):
    shapes = ([("attention", (2, 2, 32, 32)), ("rows of 384", (64, 384)), ("GPT-2 vocab", (8, 50257))] if small else
              [("nanoGPT attention", (64, 6, 256, 256)), ("GPT-2 attention", (8, 12, 1024, 1024)),
               ("ViT-Tiny attention", (64, 3, 197, 197)), ("rows of 384 (issue)", (16384, 384)),
               ("rows of 768 (issue)", (8192, 768)), ("GPT-2 vocab (issue)", (128, 50257)),
               ("nanoGPT char vocab", (16384, 65)), ("LSTM LM vocab", (2048, 10000))])
    for name, xs in shapes:
        yield dim_op(m, name, xs, PF.softmax, F.softmax)


def log_softmax_ops(m, small):
    shapes = ([("nanoGPT char vocab", (64, 65)), ("classes", (8, 1000))] if small else
              [("nanoGPT char vocab", (16384, 65)), ("GPT-2 vocab", (8192, 50257)),
               ("GPT-2 vocab (issue)", (128, 50257)), ("LSTM LM vocab", (2048, 10000)), ("seed MLP", (32, 10)),
               ("ImageNet classes", (64, 1000))])
    for name, xs in shapes:
        yield dim_op(m, name, xs, PF.log_softmax, F.log_softmax)


def dim_op(m, name, xs, pf_fn, torch_fn):
    x, tx = m.randn(*xs)
    return Op(name, f"{dims(xs)}, dim=-1", lambda: pf_fn(x, dim=-1), lambda: torch_fn(tx, dim=-1), [(x, tx)])


def linear_ops(m, small):
    # (name, input shape, out features, bias)
    if small:
        shapes = [("tiny transformer qkv", (4, 32, 64), 192, True), ("seed MLP fc1", (32, 784), 256, True),
                  ("seed MLP fc3", (32, 128), 10, True)]
    else:
        shapes = [("nanoGPT char attn qkv", (64, 256, 384), 1152, True),
                  ("nanoGPT char attn proj", (64, 256, 384), 384, True),
                  ("nanoGPT char mlp fc", (64, 256, 384), 1536, True),
                  ("nanoGPT char mlp proj", (64, 256, 1536), 384, True),
                  ("nanoGPT char lm_head", (64, 256, 384), 65, True),
                  ("GPT-2 attn qkv", (8, 1024, 768), 2304, True),
                  ("GPT-2 attn proj", (8, 1024, 768), 768, True),
                  ("GPT-2 mlp fc", (8, 1024, 768), 3072, True),
                  ("GPT-2 mlp proj", (8, 1024, 3072), 768, True),
                  ("GPT-2 lm_head (no bias)", (8, 1024, 768), 50257, False),
                  ("ViT-Tiny attn qkv", (64, 197, 192), 576, True),
                  ("ViT-Tiny attn proj", (64, 197, 192), 192, True),
                  ("ViT-Tiny mlp fc1", (64, 197, 192), 768, True),
                  ("ViT-Tiny mlp fc2", (64, 197, 768), 192, True),
                  ("ViT-Tiny head", (64, 192), 1000, True),
                  ("LSTM LM input gates (all steps)", (64, 32, 512), 2048, True),
                  ("LSTM LM hidden gates (one step)", (32, 512), 2048, True),
                  ("LSTM LM decoder", (64, 32, 512), 10000, True),
                  ("seed MLP fc1", (32, 784), 256, True),
                  ("seed MLP fc2", (32, 256), 128, True),
                  ("seed MLP fc3", (32, 128), 10, True),
                  ("ResNet-18 CIFAR fc", (128, 512), 10, True),
                  ("ResNet-18 224 fc", (64, 512), 1000, True),
                  ("MNIST CNN fc1", (128, 1024), 128, True),
                  ("MNIST CNN fc2", (128, 128), 10, True)]
    for name, xs, out, bias in shapes:
        yield linear_op(m, name, xs, out, bias)


def linear_op(m, name, xs, out, bias):
    x, tx = m.randn(*xs)
    w, tw = m.weight(out, xs[-1])
    b, tb = m.weight(out, fan_in=xs[-1]) if bias else (None, None)
    leaves = [(x, tx), (w, tw)] + ([(b, tb)] if bias else [])
    return Op(name, f"{dims(xs)} -> {out}" + (" +bias" if bias else ""), lambda: PF.linear(x, w, b),
              lambda: F.linear(tx, tw, tb), leaves, vendor=m.blas)


ATTENTION_SHAPES = [("nanoGPT char", 64, 6, 256, 64), ("GPT-2", 8, 12, 1024, 64), ("ViT-Tiny", 64, 3, 197, 64)]
SMALL_ATTENTION = [("tiny", 2, 2, 32, 16)]


def matmul_ops(m, small):
    # attention's two products as written in nanoGPT: q @ k.transpose(-2, -1), att @ v
    for name, b, h, t, d in SMALL_ATTENTION if small else ATTENTION_SHAPES:
        yield matmul_op(m, f"{name} q @ k^T", (b, h, t, d), (b, h, t, d), True, pf.matmul, torch.matmul)
        yield matmul_op(m, f"{name} att @ v", (b, h, t, t), (b, h, t, d), False, pf.matmul, torch.matmul)


def bmm_ops(m, small):
    # the same products on (batch * heads, T, head dim): torch.bmm(q, k.transpose(1, 2)), torch.bmm(att, v)
    for name, b, h, t, d in SMALL_ATTENTION if small else ATTENTION_SHAPES:
        yield matmul_op(m, f"{name} q @ k^T", (b * h, t, d), (b * h, t, d), True, pf.bmm, torch.bmm)
        yield matmul_op(m, f"{name} att @ v", (b * h, t, t), (b * h, t, d), False, pf.bmm, torch.bmm)


def matmul_op(m, name, a_shape, b_shape, transpose_b, pf_fn, torch_fn):
    a, ta = m.randn(*a_shape)
    b, tb = m.randn(*b_shape, scale=1.0 / math.sqrt(a_shape[-1]))
    if transpose_b:
        desc = f"{dims(a_shape)} @ ({dims(b_shape)})^T"
        return Op(name, desc, lambda: pf_fn(a, b.transpose(-2, -1)), lambda: torch_fn(ta, tb.transpose(-2, -1)),
                  [(a, ta), (b, tb)], vendor=m.blas)
    return Op(name, f"{dims(a_shape)} @ {dims(b_shape)}", lambda: pf_fn(a, b), lambda: torch_fn(ta, tb),
              [(a, ta), (b, tb)], vendor=m.blas)


def max_pool2d_ops(m, small):
    # (name, input, kernel, stride, padding)
    shapes = ([("stem pool 3x3/2", (4, 16, 32, 32), 3, 2, 1), ("2x2", (4, 8, 24, 24), 2, 2, 0)] if small else
              [("ResNet-18 224 stem pool", (64, 64, 112, 112), 3, 2, 1),
               ("MNIST CNN pool1", (128, 32, 24, 24), 2, 2, 0), ("MNIST CNN pool2", (128, 64, 8, 8), 2, 2, 0),
               ("digits demo CNN pool1", (32, 16, 8, 8), 2, 2, 0), ("digits demo CNN pool2", (32, 32, 4, 4), 2, 2, 0)])
    for name, xs, k, s, p in shapes:
        yield pool_op(m, name, xs, k, s, p, PF.max_pool2d, F.max_pool2d, "")


def avg_pool2d_ops(m, small):
    shapes = ([("2x2", (4, 16, 16, 16), 2, 2, 0), ("3x3/1 p1", (4, 8, 8, 8), 3, 1, 1)] if small else
              [("ResNet-18 CIFAR (kuangliu) head 4x4", (128, 512, 4, 4), 4, 4, 0),
               ("2x2 (issue 11's size)", (64, 64, 112, 112), 2, 2, 0),
               ("DenseNet-style transition 2x2", (64, 128, 56, 56), 2, 2, 0),
               ("Inception-style 3x3/1 p1", (64, 192, 28, 28), 3, 1, 1)])
    # float32 forward: cuDNN (dnn_avg_pool2d); the backward is pool.hip's
    vendor = m.dnn if m.dtype == "float32" else ""
    for name, xs, k, s, p in shapes:
        yield pool_op(m, name, xs, k, s, p, PF.avg_pool2d, F.avg_pool2d, vendor)


def pool_op(m, name, xs, k, s, p, pf_fn, torch_fn, vendor):
    x, tx = m.randn(*xs)
    return Op(name, f"{dims(xs)}, {k}x{k}/{s}" + (f" p{p}" if p else ""), lambda: pf_fn(x, k, s, p),
              lambda: torch_fn(tx, k, s, p), [(x, tx)], vendor=vendor, bwd_vendor="")


def adaptive_avg_pool2d_ops(m, small):
    shapes = ([("global pool", (4, 32, 8, 8)), ("global pool", (4, 8, 24, 24))] if small else
              [("ResNet-18 224 head", (64, 512, 7, 7)), ("ResNet-18 CIFAR head", (128, 512, 4, 4)),
               ("issue", (32, 64, 112, 112)), ("issue (MNIST CNN map)", (128, 32, 24, 24))])
    for name, xs in shapes:
        yield adaptive_op(m, name, xs)


def adaptive_op(m, name, xs):
    x, tx = m.randn(*xs)
    return Op(name, f"{dims(xs)} -> 1x1", lambda: PF.adaptive_avg_pool2d(x, 1),
              lambda: F.adaptive_avg_pool2d(tx, 1), [(x, tx)])


def embedding_ops(m, small):
    # (name, table rows, width, index shape or None for the positions arange(T))
    shapes = ([("nanoGPT char tokens", 65, 64, (4, 32)), ("positions", 32, 64, None)] if small else
              [("nanoGPT char tokens", 65, 384, (64, 256)), ("nanoGPT char positions", 256, 384, None),
               ("GPT-2 tokens", 50257, 768, (8, 1024)), ("GPT-2 positions", 1024, 768, None),
               ("LSTM LM tokens", 10000, 512, (64, 32))])
    for name, rows, width, idx_shape in shapes:
        yield embedding_op(m, name, rows, width, idx_shape)


def embedding_op(m, name, rows, width, idx_shape):
    w, tw = m.randn(rows, width)
    if idx_shape is None:  # wpe(torch.arange(T, device=device))
        idx, tidx = m.arange(rows)
        desc = f"table {rows}x{width}, arange({rows})"
    else:
        idx, tidx = m.randint(rows, *idx_shape)
        desc = f"table {rows}x{width}, idx {dims(idx_shape)}"
    return Op(name, desc, lambda: PF.embedding(idx, w), lambda: F.embedding(tidx, tw), [(w, tw)])


def cross_entropy_ops(m, small):
    shapes = ([("nanoGPT char", 64, 65), ("seed MLP", 32, 10), ("ImageNet classes", 8, 1000)] if small else
              [("nanoGPT char", 16384, 65), ("GPT-2", 8192, 50257), ("LSTM LM", 2048, 10000), ("seed MLP", 32, 10),
               ("ResNet-18 CIFAR / MNIST CNN", 128, 10), ("ResNet-18 224 / ViT-Tiny", 64, 1000)])
    for name, n, c in shapes:
        yield cross_entropy_op(m, name, n, c)


def cross_entropy_op(m, name, n, c):
    x, tx = m.randn(n, c)
    y, ty = m.randint(c, n)
    return Op(name, f"{n}x{c}, mean", lambda: PF.cross_entropy(x, y), lambda: F.cross_entropy(tx, ty), [(x, tx)])


def dropout_ops(m, small):
    shapes = ([("residual", (4, 32, 64), 0.2), ("attention", (2, 2, 32, 32), 0.1)] if small else
              [("nanoGPT char residual", (64, 256, 384), 0.2), ("nanoGPT char attention", (64, 6, 256, 256), 0.2),
               ("GPT-2 residual", (8, 1024, 768), 0.1), ("GPT-2 attention", (8, 12, 1024, 1024), 0.1),
               ("ViT-Tiny residual", (64, 197, 192), 0.1), ("LSTM LM between layers", (64, 32, 512), 0.5),
               ("MNIST CNN fc", (128, 128), 0.5)])
    for name, xs, p in shapes:
        yield dropout_op(m, name, xs, p)


def dropout_op(m, name, xs, p):
    x, tx = m.randn(*xs)
    tol = TOLERANCE[m.dtype]

    def check(mode, pf_out, pf_grads, t_out, t_grads, grad_out):
        # the masks differ between the libraries: check PyFlame's against its own input
        xv = x.detach().float().cpu().numpy()
        out = pf_out.detach().float().cpu().numpy()
        kept = out != 0
        scale = np.max(np.abs(xv)) / (1 - p)
        err = float(np.max(np.abs(out[kept] - xv[kept] / (1 - p)), initial=0.0)) / scale
        dropped = 1.0 - kept.mean()
        spread = 5 * math.sqrt(p * (1 - p) / kept.size) + 1e-3
        if abs(dropped - p) > spread:
            return 1.0, f"dropped fraction {dropped:.4f}, p={p}"
        if err > tol:
            return err, f"output is not x / (1 - p) where kept (err {err:.2g})"
        if mode == "bwd":
            expect = np.where(kept, grad_out / (1 - p), 0.0)
            gerr = float(np.max(np.abs(pf_grads[0] - expect))) / (np.max(np.abs(grad_out)) / (1 - p))
            if gerr > tol:
                return gerr, f"input gradient is not grad * mask / (1 - p) (err {gerr:.2g})"
            err = max(err, gerr)
        return err, ""

    return Op(name, f"{dims(xs)}, p={p}", lambda: PF.dropout(x, p, True), lambda: F.dropout(tx, p, True),
              [(x, tx)], check=check)


TRANSFORMER_MLP = [("nanoGPT char mlp", (64, 256, 1536)), ("GPT-2 mlp", (8, 1024, 3072)),
                   ("ViT-Tiny mlp", (64, 197, 768))]


def gelu_ops(m, small):
    shapes = ([("tiny mlp", (4, 32, 256), "none"), ("tiny mlp, tanh", (4, 32, 256), "tanh")] if small else
              [("nanoGPT char mlp", (64, 256, 1536), "none"), ("GPT-2 mlp (gelu_new)", (8, 1024, 3072), "tanh"),
               ("ViT-Tiny mlp", (64, 197, 768), "none")])
    for name, xs, approximate in shapes:
        yield activation_op(m, name, xs, lambda a, ap=approximate: PF.gelu(a, approximate=ap),
                            lambda a, ap=approximate: F.gelu(a, approximate=ap),
                            "" if approximate == "none" else "approximate='tanh'")


def silu_ops(m, small):
    shapes = [("tiny mlp", (4, 32, 256))] if small else TRANSFORMER_MLP + [("ResNet-18 CIFAR map", (128, 64, 32, 32))]
    for name, xs in shapes:
        yield activation_op(m, name, xs, PF.silu, F.silu)


def relu_ops(m, small):
    shapes = ([("map", (4, 16, 16, 16))] if small else
              [("ResNet-18 CIFAR", (128, 64, 32, 32)), ("ResNet-18 224 stem", (64, 64, 112, 112)),
               ("ResNet-18 224", (64, 256, 14, 14)), ("seed MLP", (32, 256)), ("MNIST CNN", (128, 32, 24, 24))])
    for name, xs in shapes:
        yield activation_op(m, name, xs, PF.relu, F.relu)


def activation_op(m, name, xs, pf_fn, torch_fn, note=""):
    x, tx = m.randn(*xs)
    return Op(name, dims(xs) + (f", {note}" if note else ""), lambda: pf_fn(x), lambda: torch_fn(tx), [(x, tx)])


def sdpa_ops(m, small):
    shapes = ([("tiny, causal", 2, 2, 32, 16, True)] if small else
              [("nanoGPT char, causal", 64, 6, 256, 64, True), ("GPT-2, causal", 8, 12, 1024, 64, True),
               ("ViT-Tiny", 64, 3, 197, 64, False)])
    for name, b, h, t, d, causal in shapes:
        yield sdpa_op(m, name, (b, h, t, d), causal)


def sdpa_op(m, name, qs, causal):
    # dropout_p=0 (the models' attention dropout would draw different masks)
    q, tq = m.randn(*qs)
    k, tk = m.randn(*qs)
    v, tv = m.randn(*qs)
    return Op(name, f"q,k,v {dims(qs)}" + (", causal" if causal else ""),
              lambda: PF.scaled_dot_product_attention(q, k, v, is_causal=causal),
              lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal), [(q, tq), (k, tk), (v, tv)])


# ---------------------------------------------------------------- AdamW over a model's parameters

def gpt_params(n_layer, width, vocab, block):
    """nanoGPT's GPT (bias=True, lm_head tied to the token embedding)."""
    d = width
    layer = [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return [(vocab, d), (block, d)] + layer * n_layer + [(d,), (d,)]


def resnet18_params(num_classes, cifar):
    shapes = [(64, 3, 3, 3) if cifar else (64, 3, 7, 7), (64,), (64,)]
    inp = 64
    for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            shapes += [(out, inp, 3, 3), (out,), (out,), (out, out, 3, 3), (out,), (out,)]
            if s != 1 or inp != out:
                shapes += [(out, inp, 1, 1), (out,), (out,)]
            inp = out
    return shapes + [(num_classes, 512), (num_classes,)]


def vit_tiny_params():
    d, mlp = 192, 768
    layer = [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,), (d,), (d,), (mlp, d), (mlp,), (d, mlp), (d,)]
    return [(d, 3, 16, 16), (d,), (1, 1, d), (1, 197, d)] + layer * 12 + [(d,), (d,), (1000, d), (1000,)]


def lstm_lm_params():
    h, vocab = 512, 10000
    return [(vocab, h)] + [(4 * h, h), (4 * h, h), (4 * h,), (4 * h,)] * 2 + [(vocab, h), (vocab,)]


MLP_PARAMS = [(256, 784), (256,), (128, 256), (128,), (10, 128), (10,)]


def adamw_ops(m, small):
    models = ([("seed MLP", MLP_PARAMS), ("tiny GPT (2x64)", gpt_params(2, 64, 65, 32))] if small else
              [("nanoGPT char", gpt_params(6, 384, 65, 256)), ("GPT-2 small", gpt_params(12, 768, 50257, 1024)),
               ("ResNet-18 224", resnet18_params(1000, False)), ("ResNet-18 CIFAR", resnet18_params(10, True)),
               ("ViT-Tiny", vit_tiny_params()), ("LSTM LM", lstm_lm_params()), ("seed MLP", MLP_PARAMS)])
    for name, shapes in models:
        yield adamw_op(m, name, shapes)


def adamw_op(m, name, shapes):
    params, tparams = [], []
    for s in shapes:
        p, tp = m.randn(*s, scale=0.02)
        g, tg = m.randn(*s, scale=0.01)
        p.requires_grad_(True)
        tp.requires_grad_(True)
        p.grad, tp.grad = g, tg
        params.append(p)
        tparams.append(tp)
    opt, topt = pf.optim.AdamW(params, lr=1e-3), torch.optim.AdamW(tparams, lr=1e-3)
    tol = TOLERANCE[m.dtype]

    def check(mode, pf_out, pf_grads, t_out, t_grads, grad_out):
        # the parameters after the first step (the check runs before any timed step)
        err = max(compare(p.detach().float().cpu().numpy(), tp.detach().float().cpu().numpy())
                  for p, tp in zip(params, tparams))
        return err, "" if err <= tol else "parameters differ after one step"

    count = sum(math.prod(s) for s in shapes)
    return Op(name, f"{len(shapes)} tensors, {count / 1e6:.2f}M parameters", opt.step, topt.step, modes=("step",),
              check=check)


FAMILIES = {
    "conv2d": conv2d_ops, "batch_norm": batch_norm_ops, "layer_norm": layer_norm_ops, "group_norm": group_norm_ops,
    "softmax": softmax_ops, "log_softmax": log_softmax_ops, "linear": linear_ops, "matmul": matmul_ops,
    "bmm": bmm_ops, "max_pool2d": max_pool2d_ops, "avg_pool2d": avg_pool2d_ops,
    "adaptive_avg_pool2d": adaptive_avg_pool2d_ops, "embedding": embedding_ops, "cross_entropy": cross_entropy_ops,
    "dropout": dropout_ops, "gelu": gelu_ops, "silu": silu_ops, "relu": relu_ops, "sdpa": sdpa_ops,
    "adamw": adamw_ops,
}


# ---------------------------------------------------------------- checking and timing

def numpy_of(t):
    return t.detach().float().cpu().numpy()


def compare(a, b):
    """max|a - b| / max|b| (inf where the shapes differ or a has a NaN that b has not)."""
    if a.shape != b.shape:
        return math.inf
    if np.isnan(a).any() and not np.array_equal(np.isnan(a), np.isnan(b)):
        return math.inf
    diff = np.abs(a - b)
    return float(np.nanmax(diff, initial=0.0) / max(float(np.nanmax(np.abs(b), initial=0.0)), 1e-30))


def default_check(tol):
    def check(mode, pf_out, pf_grads, t_out, t_grads, grad_out):
        errs = [("output", compare(numpy_of(pf_out), numpy_of(t_out)))]
        for i, (g, tg) in enumerate(zip(pf_grads, t_grads)):
            if mode != "bwd" or tg is None:
                continue
            errs.append((f"grad of input {i}", math.inf if g is None else compare(g, tg)))
        err = max(e for _, e in errs)
        return err, ", ".join(f"{what} err {e:.2g}" for what, e in errs if e > tol)
    return check


def calls(op, mode, m):
    """The two timed callables of one case, and the output gradient (NumPy) for bwd."""
    if mode != "bwd":
        return op.pf_fn, op.torch_fn, None
    pf_leaves = [p for p, _ in op.leaves]
    torch_leaves = [t for _, t in op.leaves]
    # the output's shape, from one call of each (so that side effects, such as batch_norm's running
    # statistics, stay the same in both libraries)
    try:
        with pf.no_grad():
            op.pf_fn()
    except Exception:  # reported by the check's call
        pass
    with torch.no_grad():
        out_shape = tuple(op.torch_fn().shape)
    if out_shape == ():  # a loss: .backward()
        g = tg = grad_out = None
    else:
        grad_out = m.normal(out_shape)
        g, tg = m.both(grad_out)

    def pf_call():
        for p in pf_leaves:
            p.grad = None
        out = op.pf_fn()
        out.backward(g)
        return out

    def torch_call():
        for t in torch_leaves:
            t.grad = None
        out = op.torch_fn()
        out.backward(tg)
        return out

    return pf_call, torch_call, grad_out


def time_blocks(fns, syncs, iters, repeat):
    """Median seconds per call of each fn: `repeat` blocks of `iters` calls then a wait for the
    device, the fns' blocks interleaved (the first one alternating)."""
    times = [[] for _ in fns]
    for r in range(repeat):
        for i in (range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))):
            syncs[i]()
            t0 = time.perf_counter()
            for _ in range(iters):
                fns[i]()
            syncs[i]()
            times[i].append((time.perf_counter() - t0) / iters)
    return [statistics.median(t) for t in times]


def _guarded(row, who, fn):
    """fn()'s result, or None with the row marked ERROR (who: 'torch: ' when PyTorch failed)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - reported in the row, the run goes on
        row.update(check="ERROR", error=f"{who}{type(e).__name__}: {e}")
        return None


def run_case(family, op, mode, m, args, syncs):
    row = dict(family=family, case=op.name, shape=op.shape, mode=mode, vendor=op.vendor[mode], torch_us=None,
               pyflame_us=None, ratio=None, check="", err=None, error=None)
    for p, t in op.leaves:
        p.requires_grad_(mode == "bwd")
        t.requires_grad_(mode == "bwd")
        p.grad = t.grad = None
    made = _guarded(row, "torch: ", lambda: calls(op, mode, m))  # PyTorch itself may not run a case
    if made is None:
        return row
    pf_call, torch_call, grad_out = made

    # the check: one call of each, outputs and input gradients compared
    def called(call, side):
        out = call()
        return out, [None if leaf[side].grad is None else numpy_of(leaf[side].grad) for leaf in op.leaves]

    theirs = _guarded(row, "torch: ", lambda: called(torch_call, 1))
    ours = theirs and _guarded(row, "", lambda: called(pf_call, 0))
    if ours is None:
        return row
    (t_out, t_grads), (pf_out, pf_grads) = theirs, ours
    tol = TOLERANCE[m.dtype]
    try:
        err, what = (op.check or default_check(tol))(mode, pf_out, pf_grads, t_out, t_grads, grad_out)
    except Exception as e:
        err, what = math.inf, f"check failed: {type(e).__name__}: {e}"
    placed = str(getattr(pf_out, "device", m.device)).split(":")[0]
    if placed != m.device:  # computed somewhere else than asked for
        err, what = math.inf, f"PyFlame's output is on {placed}, not {m.device}" + (f"; {what}" if what else "")
    row.update(err=err, check="ok" if err <= tol else "MISMATCH", error=what or None)
    del pf_out, t_out, pf_grads, t_grads
    # warm-up, then the timed blocks
    fns = [pf_call, torch_call]
    try:
        t0 = time.perf_counter()
        for _ in range(max(args.warmup, 1)):
            for fn, sync in zip(fns, syncs):
                fn()
                sync()
        per_call = (time.perf_counter() - t0) / max(args.warmup, 1) / 2
        iters = args.iters or max(1, min(200, round(args.block_seconds / max(per_call, 1e-7))))
        t_pf, t_torch = time_blocks(fns, syncs, iters, args.repeat)
    except Exception as e:
        row.update(check="ERROR", error=f"while timing: {type(e).__name__}: {e}")
        return row
    row.update(torch_us=t_torch * 1e6, pyflame_us=t_pf * 1e6, ratio=t_torch / t_pf, iters=iters)
    return row


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(rows):
    families = {}
    for fam in dict.fromkeys(r["family"] for r in rows):
        timed = [r for r in rows if r["family"] == fam and r["ratio"]]
        worst = min(timed, key=lambda r: r["ratio"]) if timed else None
        families[fam] = dict(
            cases=len([r for r in rows if r["family"] == fam]), timed=len(timed),
            geomean=geomean([r["ratio"] for r in timed]),
            fwd_geomean=geomean([r["ratio"] for r in timed if r["mode"] == "fwd"]),
            bwd_geomean=geomean([r["ratio"] for r in timed if r["mode"] == "bwd"]),
            worst_case=f"{worst['case']} {worst['shape']} {worst['mode']}" if worst else None,
            worst_ratio=worst["ratio"] if worst else None,
            mismatches=sum(r["check"] == "MISMATCH" for r in rows if r["family"] == fam),
            errors=sum(r["check"] == "ERROR" for r in rows if r["family"] == fam))
    return families


def fmt(x, spec):
    """x formatted, or a '-' as wide."""
    return format(x, spec) if x is not None else "-".rjust(int(spec.split(".")[0] or 0))


def label(r):
    return f"{r['family']}: {r['case']} [{r['shape']}] {r['mode']}"


def settings(device):
    s = {"torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
         "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
         "torch.backends.cudnn.benchmark": torch.backends.cudnn.benchmark,
         "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision()}
    if device != "cpu":
        r = pf.backend.rocm
        for name in ("allow_tf32", "conv_allow_tf32", "dnn_enabled", "dnn_library"):
            try:
                s[f"pyflame.backend.rocm.{name}()"] = getattr(r, name)()
            except Exception as e:
                s[f"pyflame.backend.rocm.{name}()"] = f"unavailable ({type(e).__name__})"
        try:
            s["pyflame.backend.rocm.get_tuning_cache().exhaustive_search()"] = r.get_tuning_cache().exhaustive_search()
        except Exception as e:
            s["pyflame.backend.rocm.get_tuning_cache().exhaustive_search()"] = f"unavailable ({type(e).__name__})"
    else:
        s["threads (both)"] = torch.get_num_threads()
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="rocm" if pf.rocm_is_available() else "cpu", choices=("cpu", "rocm"))
    ap.add_argument("--ops", help="comma-separated families (default: all): " + ",".join(FAMILIES))
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    ap.add_argument("--repeat", type=int, help="timed blocks per case, the median reported (default 10; 3 --small)")
    ap.add_argument("--iters", type=int, default=0,
                    help="calls per timed block (default 0: enough for about 5 ms a block, 20 ms on the CPU, "
                         "2 ms with --small; at most 200)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls of each library before timing (at least 1)")
    ap.add_argument("--json", help="write every case, the per-family summary, machine, versions and command")
    ap.add_argument("--small", action="store_true", help="a smoke run: few small shapes, few iterations")
    args = ap.parse_args()
    families = list(FAMILIES) if not args.ops else [f.strip() for f in args.ops.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown op families {unknown}; known: {','.join(FAMILIES)}")
    if args.repeat is None:
        args.repeat = 3 if args.small else 10
    if args.small:
        args.warmup = min(args.warmup, 1)
    device = args.device
    tdev = "cuda" if device == "rocm" else "cpu"
    if device == "cpu":
        torch.set_num_threads(pf.cpu_threads())
    args.block_seconds = 0.002 if args.small else 0.005 if device != "cpu" else 0.02

    def sync_pf():
        pf.synchronize()

    def sync_torch():
        if tdev == "cuda":
            torch.cuda.synchronize()

    gpu = torch.cuda.get_device_name(0) if tdev == "cuda" else None
    machine = dict(host=platform.node(), cpu=platform.processor() or platform.machine(), gpu=gpu,
                   cpu_threads=pf.cpu_threads())
    versions = dict(pyflame=getattr(pf, "__version__", "?"), torch=torch.__version__, numpy=np.__version__,
                    python=platform.python_version(), cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version() if tdev == "cuda" else None)
    setting = settings(device)
    print(f"shapes.py: device {device}" + (f" ({gpu}; torch on cuda)" if gpu else "") + f", dtype {args.dtype}, "
          f"commit {git_commit()}; pyflame {versions['pyflame']}, torch {versions['torch']}")
    print("settings: " + "; ".join(f"{k} = {v}" for k, v in setting.items()))
    print(f"repeat {args.repeat}, iters {args.iters or 'auto'}, warmup {args.warmup}; "
          f"ratio = torch time / pyflame time (> 1: PyFlame faster)", flush=True)

    m = Maker(device, tdev, args.dtype)
    rows = []
    head = (f"{'case':36} {'shape':44} {'mode':4} {'vendor':6} {'torch us':>10} {'pyflame us':>10} {'ratio':>6} "
            f"{'check':8}")
    started = time.time()
    for fam in families:
        print(f"\n== {fam} ==\n{head}", flush=True)
        try:
            ops = FAMILIES[fam](m, args.small)
            for op in ops:
                for mode in op.modes:
                    r = run_case(fam, op, mode, m, args, [sync_pf, sync_torch])
                    rows.append(r)
                    check = r["check"] + (f" {r['err']:.1g}" if r["err"] is not None and r["check"] == "ok" else "")
                    print(f"{r['case'][:36]:36} {r['shape'][:44]:44} {mode:4} {r['vendor']:6} "
                          f"{fmt(r['torch_us'], '10.1f')} {fmt(r['pyflame_us'], '10.1f')} {fmt(r['ratio'], '6.2f')} "
                          f"{check}", flush=True)
                    if r["error"]:
                        print(f"    {'!!! ' if r['check'] != 'ok' else ''}{r['error']}", flush=True)
                del op
        except Exception as e:  # building the inputs failed
            rows.append(dict(family=fam, case="(building the cases)", shape="", mode="", vendor="", torch_us=None,
                             pyflame_us=None, ratio=None, check="ERROR", err=None,
                             error=f"{type(e).__name__}: {e}"))
            print(f"    !!! building {fam}'s cases: {type(e).__name__}: {e}", flush=True)

    families_summary = summarize(rows)
    print(f"\n== summary ({device}, {args.dtype}; {time.time() - started:.0f} s) ==")
    print(f"{'family':20} {'cases':>5} {'geomean':>8} {'fwd':>6} {'bwd':>6} {'worst':>6}  worst case")
    for fam, s in families_summary.items():
        bad = "".join([f"  {s['mismatches']} MISMATCH" if s["mismatches"] else "",
                       f"  {s['errors']} ERROR" if s["errors"] else ""])
        print(f"{fam:20} {s['cases']:5} {fmt(s['geomean'], '8.2f')} {fmt(s['fwd_geomean'], '6.2f')} "
              f"{fmt(s['bwd_geomean'], '6.2f')} {fmt(s['worst_ratio'], '6.2f')}  {s['worst_case'] or '-'}{bad}")
    below = [r for r in rows if r["ratio"] is not None and r["ratio"] < 0.9]
    vendor_below = [r for r in rows if r["ratio"] is not None and r["vendor"] and r["ratio"] < 0.95]
    mismatches = [r for r in rows if r["check"] == "MISMATCH"]
    errors = [r for r in rows if r["check"] == "ERROR"]
    print(f"\ncases below 0.9x: {len(below)}")
    for r in sorted(below, key=lambda r: r["ratio"]):
        print(f"  {r['ratio']:5.2f}x  {label(r)}")
    print(f"vendor-library cases below 0.95x: {len(vendor_below)}")
    for r in sorted(vendor_below, key=lambda r: r["ratio"]):
        print(f"  {r['ratio']:5.2f}x  {label(r)} ({r['vendor']})")
    print(f"MISMATCHES: {len(mismatches)}")
    for r in mismatches:
        print(f"  {label(r)}: err {r['err']:.3g} {r['error'] or ''}")
    print(f"ERRORS: {len(errors)}")
    for r in errors:
        print(f"  {label(r)}: {r['error']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(commit=git_commit(), date=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                           device=device, dtype=args.dtype, machine=machine, versions=versions, settings=setting,
                           command=" ".join(["python"] + sys.argv), args={k: v for k, v in vars(args).items()},
                           families=families_summary,
                           below_0_9=[label(r) for r in below], vendor_below_0_95=[label(r) for r in vendor_below],
                           mismatches=[label(r) for r in mismatches], errors=[label(r) for r in errors],
                           cases=rows), f, indent=1, default=str)


if __name__ == "__main__":
    main()
