"""Whole models, PyFlame next to PyTorch eager in one process: training steps and inference.

    python benchmarks/models.py [--device cpu|rocm] [--models nanogpt-char,resnet18-32,...]
                                [--dtypes fp32,bf16] [--modes train,infer] [--steps 30]
                                [--block 3] [--warmup 3] [--check-steps 3] [--pause 0.5]
                                [--small] [--json out.json] [--profile 3]

Each model is written once, as a PyTorch user writes it, as a function of the library
module (`gpt(lib, ...)` builds `lib.nn.Module`s and calls `lib.nn.functional`), and built
twice: with torch and with pyflame. The torch model is initialised under
torch.manual_seed(0); its state_dict is copied into the PyFlame model before either moves to
the device, so both start from the same weights. The data is one NumPy batch (seed 0),
given to both.

Models (batch; the optimizer of the training step):
  mlp                 the seed MLP 784-256-128-10, ReLU, batch 32; Adam lr 1e-3
  nanogpt-char        nanoGPT, 6 layers x 384, 6 heads, block 256, vocab 65, batch 64,
                      hand-written causal attention (q@k^T, masked_fill, softmax, dropout, @v)
  nanogpt-char-sdpa   the same with F.scaled_dot_product_attention(is_causal=True)
  gpt2                GPT-2 small shapes: 12 layers x 768, 12 heads, block 1024, vocab 50257
                      (lm_head tied to wte), batch 8, hand-written attention
  gpt2-sdpa           the same with scaled_dot_product_attention
  resnet18-32         ResNet-18 (BasicBlock) with the CIFAR stem (3x3/1 conv, no max pool),
                      32x32 images, 10 classes, batch 128
  resnet18-224        ResNet-18 with the ImageNet stem (7x7/2 conv, 3x3/2 max pool),
                      224x224 images, 1000 classes, batch 64
  vit-tiny            ViT-Tiny: patch 16 (conv), 224x224, 192 wide, 12 layers, 3 heads,
                      MLP 768, cls token, position embedding, pre-norm, SDPA; batch 64
  lstm-lm             LSTM language model: embedding 10000 x 512, 2-layer nn.LSTM hidden 512
                      (batch_first), Linear decoder; sequence 64, batch 32
The transformers, ResNets, ViT and LSTM train with AdamW lr 1e-4 (weight decay 0.01).
Dropout is p=0 everywhere, so no random numbers differ between the two libraries.
--small replaces every model by a tiny one of the same code (a smoke run on a CPU: 2-layer
transformers 64 wide, GPT-2's vocabulary cut to 4096, ResNets 8 channels wide on 32x32 and
64x64 images, ViT 2x32 on 32x32, LSTM 2x64 over 1000 words; a few steps, so its timings are
noisy).

A training step is zero_grad, forward, cross_entropy, backward, optimizer step. Inference is
the forward pass under no_grad in eval mode. bf16 wraps forward and loss in
`lib.autocast(device_type, dtype=lib.bfloat16)` (PyTorch's device_type 'cuda' or 'cpu',
PyFlame's 'rocm' or 'cpu'); the weights stay float32.

Timing: after --warmup steps of each, the --steps timed steps of each library run in blocks
of --block steps, PyTorch's and PyFlame's blocks alternating so that machine noise hits both;
each block ends by waiting for the device (torch.cuda.synchronize / pf.rocm_synchronize). The
step time is the median over blocks of (block time / block steps). Throughput is
images/s (image models, MLP) or tokens/s (language models: batch * sequence / step time);
ratio = PyFlame's throughput / PyTorch's: above 1.0 means PyFlame is faster.

Correctness: before timing, --check-steps training steps from the same weights and data on
both; the losses must agree step by step (fp32 rtol 1e-3, bf16 rtol 3e-2); in infer mode
the eval-mode loss of the forward pass is compared. 'agree' or 'DISAGREE' is printed with
the losses. A case where PyFlame (or PyTorch) raises prints the error and goes on; the JSON
records it. On 'rocm' PyTorch runs on its CUDA device (the same GPU); both keep their
default TF32 settings (matmuls full float32, convolutions TF32).

--profile N (GPU): after timing, N steps of each library under torch.profiler (GPU: CUPTI sees both
libraries' kernels, one process), printing per library the wall time per step, the GPU's busy
time per step (the sum of its kernels' and copies' times), kernels per step, and the top kernels
by time: a wall time well above the busy time is host overhead (launches, Python), a busy time
above PyTorch's is slower or more kernels.

Output: one line per case (model, dtype, mode) as it finishes, then the summary table and
the geometric mean of the ratios. --json writes every row (throughputs, step times, losses,
agreement, errors, wall time) with the machine, date, commit, versions and command line.
"""

import argparse
import datetime
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

import numpy as np
import torch

import pyflame as pf
from bench_util import git_commit


# --------------------------------------------------------------------------------------
# The models, each written once against `lib` (torch or pyflame).
# --------------------------------------------------------------------------------------

def mlp(lib, sizes=(784, 256, 128, 10)):
    """The seed MLP: Linear, ReLU, ..., Linear."""
    nn = lib.nn
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def gpt(lib, n_layer, n_head, n_embd, block_size, vocab_size, sdpa=False, dropout=0.0):
    """nanoGPT's model.py (Karpathy): GPT-2 blocks, LayerNorm, GELU MLP 4x, causal
    self-attention, wte tied to lm_head. Returns logits (B, T, vocab)."""
    nn, F = lib.nn, lib.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            self.attn_dropout = nn.Dropout(dropout)
            self.resid_dropout = nn.Dropout(dropout)
            if not sdpa:
                self.register_buffer("bias", lib.tril(lib.ones(block_size, block_size))
                                     .view(1, 1, block_size, block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                                   dropout_p=dropout if self.training else 0, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v  # (B, nh, T, hs)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(n_embd, 4 * n_embd)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * n_embd, n_embd)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(n_embd)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(vocab_size, n_embd),
                wpe=nn.Embedding(block_size, n_embd),
                drop=nn.Dropout(dropout),
                h=nn.ModuleList([Block() for _ in range(n_layer)]),
                ln_f=nn.LayerNorm(n_embd),
            ))
            self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying, as GPT-2
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx):
            b, t = idx.size()
            pos = lib.arange(0, t, dtype=lib.long, device=idx.device)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            return self.lm_head(self.transformer.ln_f(x))

    return GPT()


def resnet18(lib, num_classes, cifar_stem, width=64):
    """torchvision's ResNet-18 (BasicBlock, [2, 2, 2, 2]); cifar_stem: 3x3/1 conv, no max pool."""
    nn, F = lib.nn, lib.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = None
            if stride != 1 or inplanes != planes:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(planes))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            if cifar_stem:
                self.conv1 = nn.Conv2d(3, width, 3, stride=1, padding=1, bias=False)
                self.maxpool = nn.Identity()
            else:
                self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
                self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            planes = [width, 2 * width, 4 * width, 8 * width]
            layers, inplanes = [], width
            for i, p in enumerate(planes):
                stride = 1 if i == 0 else 2
                layers.append(nn.Sequential(BasicBlock(inplanes, p, stride), BasicBlock(p, p, 1)))
                inplanes = p
            self.layer1, self.layer2, self.layer3, self.layer4 = layers
            self.fc = nn.Linear(8 * width, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            x = F.adaptive_avg_pool2d(x, 1)
            return self.fc(lib.flatten(x, 1))

    return ResNet()


def vit(lib, image_size, patch_size, dim, depth, heads, mlp_dim, num_classes):
    """A ViT (timm's VisionTransformer layout): conv patch embedding, cls token, position
    embedding, pre-norm blocks with qkv Linear + scaled_dot_product_attention, GELU MLP."""
    nn, F = lib.nn, lib.nn.functional
    num_patches = (image_size // patch_size) ** 2

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, heads, C // heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            x = F.scaled_dot_product_attention(q, k, v)
            return self.proj(x.transpose(1, 2).reshape(B, N, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim, eps=1e-6)
            self.attn = Attention()
            self.norm2 = nn.LayerNorm(dim, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size)
            self.cls_token = nn.Parameter(lib.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(lib.randn(1, num_patches + 1, dim) * 0.02)
            self.blocks = nn.Sequential(*[Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, num_classes)
            nn.init.normal_(self.cls_token, std=1e-6)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, N, dim)
            x = lib.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            x = self.norm(self.blocks(x))
            return self.head(x[:, 0])

    return ViT()


def lstm_lm(lib, vocab_size, emb, hidden, num_layers):
    """PyTorch's word_language_model (LSTM): Embedding, nn.LSTM, Linear decoder."""
    nn = lib.nn

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(vocab_size, emb)
            self.rnn = nn.LSTM(emb, hidden, num_layers, batch_first=True)
            self.decoder = nn.Linear(hidden, vocab_size)

        def forward(self, idx):
            output, _ = self.rnn(self.encoder(idx))
            return self.decoder(output)

    return RNNModel()


# --------------------------------------------------------------------------------------
# The cases: name -> how to build the model, its data, its optimizer, full and --small.
# --------------------------------------------------------------------------------------

def _adamw(lib, params):
    return lib.optim.AdamW(params, lr=1e-4)


def _adam(lib, params):
    return lib.optim.Adam(params, lr=1e-3)


def _gpt_spec(n_layer, n_head, n_embd, block, vocab, batch, sdpa):
    return dict(build=lambda lib: gpt(lib, n_layer, n_head, n_embd, block, vocab, sdpa=sdpa),
                data=("tokens", batch, block, vocab), optimizer=_adamw,
                config=f"{n_layer}x{n_embd} h{n_head} block {block} vocab {vocab} b{batch}"
                       f"{' sdpa' if sdpa else ''}")


def _resnet_spec(size, classes, cifar, batch, width=64):
    return dict(build=lambda lib: resnet18(lib, classes, cifar, width),
                data=("images", batch, size, classes), optimizer=_adamw,
                config=f"{size}x{size} {classes} classes b{batch}{'' if width == 64 else f' width {width}'}")


def _vit_spec(size, patch, dim, depth, heads, mlp_dim, classes, batch):
    return dict(build=lambda lib: vit(lib, size, patch, dim, depth, heads, mlp_dim, classes),
                data=("images", batch, size, classes), optimizer=_adamw,
                config=f"{size}x{size}/{patch} {depth}x{dim} h{heads} mlp {mlp_dim} b{batch}")


def _lstm_spec(vocab, emb, hidden, layers, seq, batch):
    return dict(build=lambda lib: lstm_lm(lib, vocab, emb, hidden, layers),
                data=("tokens", batch, seq, vocab), optimizer=_adamw,
                config=f"vocab {vocab} emb {emb} {layers}x{hidden} seq {seq} b{batch}")


MODELS = {
    "mlp": dict(build=lambda lib: mlp(lib), data=("vectors", 32, 784, 10), optimizer=_adam,
                config="784-256-128-10 b32"),
    "nanogpt-char": _gpt_spec(6, 6, 384, 256, 65, 64, sdpa=False),
    "nanogpt-char-sdpa": _gpt_spec(6, 6, 384, 256, 65, 64, sdpa=True),
    "gpt2": _gpt_spec(12, 12, 768, 1024, 50257, 8, sdpa=False),
    "gpt2-sdpa": _gpt_spec(12, 12, 768, 1024, 50257, 8, sdpa=True),
    "resnet18-32": _resnet_spec(32, 10, True, 128),
    "resnet18-224": _resnet_spec(224, 1000, False, 64),
    "vit-tiny": _vit_spec(224, 16, 192, 12, 3, 768, 1000, 64),
    "lstm-lm": _lstm_spec(10000, 512, 512, 2, 64, 32),
}

SMALL_MODELS = {
    "mlp": MODELS["mlp"],
    "nanogpt-char": _gpt_spec(2, 4, 64, 32, 65, 4, sdpa=False),
    "nanogpt-char-sdpa": _gpt_spec(2, 4, 64, 32, 65, 4, sdpa=True),
    "gpt2": _gpt_spec(2, 4, 64, 64, 4096, 2, sdpa=False),
    "gpt2-sdpa": _gpt_spec(2, 4, 64, 64, 4096, 2, sdpa=True),
    "resnet18-32": _resnet_spec(32, 10, True, 8, width=8),
    "resnet18-224": _resnet_spec(64, 100, False, 4, width=8),
    "vit-tiny": _vit_spec(32, 16, 32, 2, 2, 64, 10, 4),
    "lstm-lm": _lstm_spec(1000, 64, 64, 2, 16, 4),
}


def make_data(kind, batch, size, classes):
    """One batch from NumPy (seed 0): (inputs, targets, items per step, unit)."""
    rng = np.random.default_rng(0)
    if kind == "tokens":  # size = sequence length, classes = vocabulary
        d = rng.integers(0, classes, (batch, size + 1), dtype=np.int64)
        return d[:, :-1].copy(), d[:, 1:].copy(), batch * size, "tok/s"
    if kind == "images":
        x = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
        return x, rng.integers(0, classes, batch, dtype=np.int64), batch, "img/s"
    x = rng.standard_normal((batch, size), dtype=np.float32)
    return x, rng.integers(0, classes, batch, dtype=np.int64), batch, "img/s"


# --------------------------------------------------------------------------------------
# One library's side of a case: its device, autocast, model, data and steps.
# --------------------------------------------------------------------------------------

class Side:
    """One library's model, data and optimizer on its device, and its steps."""

    def __init__(self, lib, device, amp, model, x, y, optimizer):
        self.lib, self.device, self.amp = lib, device, amp
        self.model, self.x, self.y = model, x, y
        self.opt = optimizer(lib, model.parameters())

    def sync(self):
        """Waits for the device: torch.cuda.synchronize(), pf.rocm_synchronize() (pf.synchronize()
        waits for the current device, which stays the CPU when only the model was moved)."""
        if self.device == "cuda":
            torch.cuda.synchronize()
        elif self.device == "rocm":
            pf.rocm_synchronize()

    def autocast(self):
        # device_type: PyTorch's 'cuda' or 'cpu', PyFlame's 'rocm' or 'cpu'
        return self.lib.autocast(device_type=self.device, dtype=self.lib.bfloat16, enabled=self.amp)

    def loss(self):
        F = self.lib.nn.functional
        with self.autocast():
            out = self.model(self.x)
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), self.y.reshape(-1))

    def train_step(self):
        self.opt.zero_grad()
        loss = self.loss()
        loss.backward()
        self.opt.step()
        return loss

    def infer_step(self):
        with self.lib.no_grad(), self.autocast():
            return self.model(self.x)

    def check_losses(self, mode, steps):
        """The losses of `steps` training steps (train) or the eval-mode loss (infer)."""
        if mode == "train":
            self.model.train()
            return [float(self.train_step().item()) for _ in range(steps)]
        self.model.eval()
        with self.lib.no_grad():
            return [float(self.loss().item())]


def build_sides(spec, device, tdev, amp, errors):
    """The torch model under manual_seed(0), its state_dict copied into PyFlame's, then both
    moved to their devices: {'torch': Side, 'pyflame': Side}, less a side that raised."""
    x, y, items, unit = make_data(*spec["data"])
    sides = {}
    try:
        torch.manual_seed(0)
        tm = spec["build"](torch)
        state = {k: v.detach().cpu().numpy() for k, v in tm.state_dict().items()}
        tm.to(tdev)
        sides["torch"] = Side(torch, tdev, amp, tm, torch.from_numpy(x).to(tdev), torch.from_numpy(y).to(tdev),
                              spec["optimizer"])
    except Exception as e:
        return sides, items, unit, _record(errors, "torch", "build", e)
    try:
        pf.manual_seed(0)
        pm = spec["build"](pf)
        pm.load_state_dict({k: pf.tensor(v) for k, v in state.items()})
        pm.to(device)
        sides["pyflame"] = Side(pf, device, amp, pm, pf.tensor(x).to(device), pf.tensor(y).to(device),
                                spec["optimizer"])
    except Exception as e:
        _record(errors, "pyflame", "build", e)
    return sides, items, unit, None


def time_steps(sides, mode, steps, warmup, block, pause, errors):
    """Median seconds per step of each side, their blocks alternating; a side that raises
    is recorded in `errors` and dropped."""
    medians, times = {}, {name: [] for name in sides}
    live = dict(sides)

    def run(name, n):
        s = live[name]
        fn = s.train_step if mode == "train" else s.infer_step
        try:
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            s.sync()
            return time.perf_counter() - t0
        except Exception as e:
            _record(errors, name, "timing", e)
            del live[name]
            return None
        finally:
            # On the CPU each library's idle OpenMP threads spin for a while after a parallel
            # region; the pause keeps them from slowing the other library's block.
            time.sleep(pause)

    for name in list(live):
        live[name].model.train(mode == "train")
        run(name, warmup)
    for _ in range(max(1, steps // block)):
        for name in list(live):
            dt = run(name, block)
            if dt is not None:
                times[name].append(dt / block)
    for name in live:
        medians[name] = statistics.median(times[name])
    return medians


def profile_steps(sides, mode, steps, top=12):
    """Prints where each side's step time goes (see --profile)."""
    from torch.profiler import ProfilerActivity, profile

    for name, s in sides.items():
        fn = s.train_step if mode == "train" else s.infer_step
        s.model.train(mode == "train")
        fn()
        s.sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            s.sync()
            wall = (time.perf_counter() - t0) / steps
        kernels = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                total, count = kernels.get(e.name, (0.0, 0))
                kernels[e.name] = (total + e.device_time, count + 1)
        busy = sum(t for t, _ in kernels.values()) / steps
        n = sum(c for _, c in kernels.values()) / steps
        print(f"    profile {name}: {wall * 1e3:.2f} ms/step wall, {busy / 1e3:.2f} ms GPU busy, {n:.0f} kernels/step")
        for k, (t, c) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"      {t / steps / 1e3:8.3f} ms {c / steps:6.1f}x  {k[:110]}")
    sys.stdout.flush()


def free_memory():
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    if pf.rocm_is_available():
        pf.backend.rocm.get_memory_manager().clear_pool()


def _record(errors, lib, stage, e):
    print(f"    {lib} raised in {stage}:", flush=True)
    traceback.print_exc(limit=-4, file=sys.stdout)
    errors[lib] = f"{stage}: {type(e).__name__}: {e}".strip()
    return errors[lib]


def run_case(name, spec, dtype, mode, args, device, tdev):
    """Build both, compare their losses, time them: one row of the results."""
    amp = dtype == "bf16"
    rtol = 3e-2 if amp else 1e-3
    row = dict(model=name, config=spec["config"], dtype=dtype, mode=mode)
    errors = {}
    start = time.perf_counter()
    sides, items, unit, fatal = build_sides(spec, device, tdev, amp, errors)
    row["unit"] = unit
    if not fatal:
        for lib in list(sides):
            try:
                row[f"{lib}_losses"] = sides[lib].check_losses(mode, args.check_steps)
            except Exception as e:
                _record(errors, lib, "check", e)
                del sides[lib]
        if "torch_losses" in row and "pyflame_losses" in row:
            a, b = row["torch_losses"], row["pyflame_losses"]
            row["max_rel_diff"] = max(abs(u - v) / max(abs(u), 1e-12) for u, v in zip(a, b))
            row["agree"] = all(math.isfinite(v) for v in b) and row["max_rel_diff"] <= rtol
        secs = time_steps(sides, mode, args.steps, args.warmup, args.block, args.pause, errors)
        for lib, s in secs.items():
            row[f"{lib}_step_s"] = s
            row[f"{lib}_throughput"] = items / s
        if len(secs) == 2:
            row["ratio"] = secs["torch"] / secs["pyflame"]
        if args.profile and device != "cpu":
            profile_steps(sides, mode, args.profile)
    if errors:
        row["errors"] = errors
    row["wall_s"] = time.perf_counter() - start
    del sides
    return row


HEADER = (f"{'model':18} {'dtype':5} {'mode':5} {'torch':>11} {'pyflame':>11} {'unit':5} {'ratio':>6}  "
          f"{'losses torch | pyflame':48} check")


def _fmt_thr(v):
    return f"{v:11.1f}" if v is not None else f"{'-':>11}"


def print_row(row):
    ratio = row.get("ratio")
    losses = " ".join(f"{v:.4f}" for v in row.get("torch_losses", []))
    losses += " | " + " ".join(f"{v:.4f}" for v in row.get("pyflame_losses", []))
    check = ("agree" if row["agree"] else "DISAGREE") if "agree" in row else "-"
    if "max_rel_diff" in row:
        check += f" ({row['max_rel_diff']:.1e})"
    print(f"{row['model']:18} {row['dtype']:5} {row['mode']:5} {_fmt_thr(row.get('torch_throughput'))} "
          f"{_fmt_thr(row.get('pyflame_throughput'))} {row.get('unit', ''):5} "
          f"{f'{ratio:5.2f}x' if ratio else '     -'}  {losses:48} {check}", flush=True)
    for lib, err in row.get("errors", {}).items():
        print(f"    {lib} ERROR {err}", flush=True)


def machine_info(device, tdev):
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = dict(cpu=cpu, cores=os.cpu_count(), pyflame_threads=pf.cpu_threads(), torch_threads=torch.get_num_threads(),
                host=platform.node(), os=platform.platform())
    if tdev == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["torch_matmul_tf32"] = torch.backends.cuda.matmul.allow_tf32
        info["torch_cudnn_tf32"] = torch.backends.cudnn.allow_tf32
        info["pyflame_matmul_tf32"] = pf.backend.rocm.allow_tf32()
        info["pyflame_conv_tf32"] = pf.backend.rocm.conv_allow_tf32()
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="rocm" if pf.rocm_is_available() else "cpu", choices=["cpu", "rocm"])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + ", ".join(MODELS))
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--modes", default="train,infer")
    ap.add_argument("--steps", type=int, help="timed steps of each library (default 30; --small 6)")
    ap.add_argument("--block", type=int, help="steps per timed block between waits (default 3; --small 2)")
    ap.add_argument("--warmup", type=int, help="untimed steps first (default 3; --small 1)")
    ap.add_argument("--check-steps", type=int, default=3, help="training steps whose losses are compared")
    ap.add_argument("--pause", type=float, help="seconds of rest between the libraries' blocks "
                    "(default 0.5 on the CPU, --small 0.02; 0 on the GPU)")
    ap.add_argument("--small", action="store_true", help="tiny configs of every model (a smoke run)")
    ap.add_argument("--json")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="GPU: after timing, profile N steps of each library and print where the time goes")
    args = ap.parse_args()
    small = args.small
    args.steps = args.steps or (6 if small else 30)
    args.block = max(1, min(args.block or (2 if small else 3), args.steps))
    args.warmup = args.warmup if args.warmup is not None else (1 if small else 3)
    if args.pause is None:
        args.pause = 0.0 if args.device != "cpu" else (0.02 if small else 0.5)
    specs = SMALL_MODELS if small else MODELS
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in specs]
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {', '.join(specs)}")
    dtypes = [d.strip() for d in args.dtypes.split(",")]
    modes = [m.strip() for m in args.modes.split(",")]
    if set(dtypes) - {"fp32", "bf16"} or set(modes) - {"train", "infer"}:
        ap.error("--dtypes takes fp32,bf16 and --modes train,infer")

    device = args.device
    tdev = "cuda" if device == "rocm" else "cpu"
    if device == "cpu":
        torch.set_num_threads(pf.cpu_threads())
    commit = git_commit()
    print(f"device {device}; pyflame {pf.__version__}; torch {torch.__version__} on {tdev}; commit {commit}; "
          f"{'small configs; ' if small else ''}{args.steps} timed steps in blocks of {args.block}, "
          f"{args.warmup} warm-up, {args.check_steps} check steps")
    print("throughput in img/s or tok/s; ratio = pyflame / torch (above 1.0: PyFlame faster)")
    print(HEADER, flush=True)
    rows = []
    for name in names:
        for dtype in dtypes:
            for mode in modes:
                row = run_case(name, specs[name], dtype, mode, args, device, tdev)
                print_row(row)
                rows.append(row)
                free_memory()

    print("\nsummary")
    print(HEADER)
    for row in rows:
        print_row(row)
    ratios = [r["ratio"] for r in rows if r.get("ratio")]
    failed = [r for r in rows if "errors" in r]
    disagree = [r for r in rows if r.get("agree") is False]
    below = [r for r in rows if r.get("ratio") and r["ratio"] < 1.0]
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"{len(rows)} cases: geometric mean ratio {geo:.2f}x, min {min(ratios):.2f}x, max {max(ratios):.2f}x; "
              f"{len(below)} below 1.0x; {len(disagree)} DISAGREE; {len(failed)} with errors")
    else:
        print(f"{len(rows)} cases; {len(failed)} with errors")
    for r in below:
        print(f"  below 1.0x: {r['model']} {r['dtype']} {r['mode']} {r['ratio']:.2f}x")
    if args.json:
        date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        with open(args.json, "w") as f:
            json.dump(dict(commit=commit, date=date, device=device, torch_device=tdev,
                           machine=machine_info(device, tdev),
                           versions=dict(pyflame=pf.__version__, torch=torch.__version__, numpy=np.__version__,
                                         python=platform.python_version()),
                           command=" ".join([sys.executable] + sys.argv), small=small,
                           settings=dict(steps=args.steps, block=args.block, warmup=args.warmup,
                                         check_steps=args.check_steps, pause=args.pause),
                           rows=rows), f, indent=1)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
