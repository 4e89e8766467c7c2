"""OpInfos of attention: scaled_dot_product_attention (a composite op) against torch's in float64, and
flash_attention, its backward and decode_attention, against attention written out in float64."""

import math

import numpy as np
import torch

import torch.nn.functional as F

from op_registry import FLOAT_DTYPES, Arg, OpInfo, Sample, _x

ATTENTION_DTYPES = ("float16", "bfloat16", "float32")
ATTENTION_CLASSES = ("plain", "noncontig", "empty", "size1")
# The GPU rounds 16-bit probabilities to the input dtype before multiplying by the values (as
# FlashAttention does); the result is rounded once more. float32 multiplies as three tf32 products.
ATTENTION_TOL = {"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2), "float32": (2e-5, 2e-5)}


def _attention64(q, k, v, is_causal=False, scale=None):
    """(output, logsumexp) in float64; key/value heads repeated for grouped-query attention."""
    rep = q.shape[1] // k.shape[1] if k.shape[1] else 1
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if is_causal:
        s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def _attention_ref(q, k, v, is_causal=False, scale=None):
    out, lse = _attention64(q.double(), k.double(), v.double(), is_causal, scale)
    return out.to(q.dtype), lse.float()


def _shapes(cls):
    """((N, H, L, E), (N, Hk, S, E), kwargs, layouts) per sample."""
    c = ("contig",) * 3
    if cls == "plain":
        return [((2, 2, 5, 8), (2, 2, 7, 8), {}, c), ((1, 4, 9, 16), (1, 2, 9, 16), dict(is_causal=True), c),
                ((2, 1, 3, 8), (2, 1, 6, 8), dict(scale=0.3), c),
                ((1, 2, 70, 16), (1, 1, 70, 16), dict(is_causal=True), c),  # past one 64-row GPU block
                ((1, 1, 150, 72), (1, 1, 150, 72), dict(is_causal=True), c),  # past 128 rows; E > 64
                # Past the CPU's 256-key chunks: the online softmax carried across them, causal inside one.
                ((2, 2, 20, 8), (2, 1, 600, 8), {}, c), ((1, 2, 300, 16), (1, 2, 300, 16), dict(is_causal=True), c)]
    if cls == "noncontig":
        return [((1, 2, 6, 8), (1, 2, 5, 8), {}, ("T", "strided", "contig")),
                ((2, 2, 4, 16), (2, 1, 4, 16), dict(is_causal=True), ("strided", "T", "T"))]
    if cls == "empty":
        return [((0, 2, 3, 8), (0, 2, 4, 8), {}, c), ((1, 2, 0, 8), (1, 2, 4, 8), dict(is_causal=True), c)]
    if cls == "size1":
        return [((1, 1, 1, 8), (1, 1, 1, 8), dict(is_causal=True), c), ((1, 1, 1, 8), (1, 1, 3, 8), {}, c)]
    return []


def _attention_samples(rng, dtype, cls):
    dom = dict(low=-1, high=1)
    return [Sample((_x(rng, qs, dtype, dom, lay[0]), _x(rng, ks, dtype, dom, lay[1]), _x(rng, ks, dtype, dom, lay[2])),
                   kw) for qs, ks, kw, lay in _shapes(cls)]


def _attention_backward_samples(rng, dtype, cls):
    """(grad_output, query, key, value, output, logsumexp): output and logsumexp as the forward makes them."""
    dom = dict(low=-1, high=1)
    samples = []
    for qs, ks, kw, lay in _shapes(cls):
        q, k, v = (_x(rng, s, dtype, dom, layout) for s, layout in zip((qs, ks, ks), lay))
        out, lse = _attention_ref(*(torch.from_numpy(a.values).to(getattr(torch, dtype)) for a in (q, k, v)), **kw)
        samples.append(Sample((_x(rng, qs, dtype, dom, lay[0]), q, k, v, Arg(out.float().detach().numpy()),
                               Arg(lse.detach().numpy().astype(np.float32), dtype="float32")), kw))
    return samples


def _attention_backward_ref(grad, q, k, v, out, lse, is_causal=False, scale=None):
    q64, k64, v64 = (t.double().requires_grad_(True) for t in (q, k, v))
    o, _ = _attention64(q64, k64, v64, is_causal, scale)
    grads = torch.autograd.grad(o, (q64, k64, v64), grad.double(), allow_unused=True)
    return tuple((torch.zeros_like(t) if g is None else g).to(q.dtype) for g, t in zip(grads, (q64, k64, v64)))


def _decode_samples(rng, dtype, cls):
    """(query (N, H, 1, E), key, value (N, Hk, S, E)[, key_mask (N, S)]): grouped heads (groups of 2, 5, 8
    and 16, past the GPU's 8 query heads per block), caches long enough to split into chunks, a row with
    every key masked (zeros), a mask shared over the batch, head dims of 8 to 256."""
    dom = dict(low=-1, high=1)

    def t(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    def key_mask(n, s, empty_row=None):
        m = rng.random((n, s)) < 0.6
        m[:, 0] = True
        if empty_row is not None:
            m[empty_row] = False
        return Arg(m, dtype="bool")

    if cls == "plain":
        return [Sample((t((2, 4, 1, 8)), t((2, 2, 37, 8)), t((2, 2, 37, 8)), key_mask(2, 37))),
                Sample((t((1, 8, 1, 64)), t((1, 1, 700, 64)), t((1, 1, 700, 64))), dict(scale=0.3)),
                Sample((t((1, 16, 1, 16)), t((1, 1, 70, 16)), t((1, 1, 70, 16)), key_mask(1, 70))),
                Sample((t((3, 2, 1, 72)), t((3, 2, 300, 72)), t((3, 2, 300, 72)), key_mask(3, 300, empty_row=1))),
                Sample((t((2, 3, 1, 8)), t((2, 3, 5, 8)), t((2, 3, 5, 8)))),
                # TinyLlama's step (8 query heads a key/value head, d 128), rows of 256 (two vectors a
                # lane in float32), of 96 (lanes left idle in a team), a long masked cache.
                Sample((t((1, 32, 1, 128)), t((1, 4, 216, 128)), t((1, 4, 216, 128)), key_mask(1, 216))),
                Sample((t((1, 4, 1, 256)), t((1, 2, 130, 256)), t((1, 2, 130, 256)))),
                Sample((t((2, 2, 1, 96)), t((2, 1, 77, 96)), t((2, 1, 77, 96)))),
                Sample((t((1, 2, 1, 64)), t((1, 2, 2100, 64)), t((1, 2, 2100, 64)), key_mask(1, 2100))),
                # Groups of 5 spread over blocks of 3, 2 and 1 heads; more chunks than a merge tile.
                Sample((t((1, 10, 1, 64)), t((1, 2, 20, 64)), t((1, 2, 20, 64)))),
                Sample((t((1, 1, 1, 64)), t((1, 1, 5000, 64)), t((1, 1, 5000, 64))))]
    if cls == "noncontig":
        return [Sample((t((1, 2, 1, 8), "strided"), t((1, 2, 9, 8), "strided"), t((1, 2, 9, 8))))]
    if cls == "empty":
        return [Sample((t((0, 2, 1, 8)), t((0, 2, 4, 8)), t((0, 2, 4, 8))))]
    if cls == "size1":
        return [Sample((t((1, 1, 1, 8)), t((1, 1, 1, 8)), t((1, 1, 1, 8)), key_mask(1, 1)))]
    return []


def _decode_ref(q, k, v, key_mask=None, scale=None):
    """Attention in float64 with keys repeated for the grouped heads; a row that sees no key gives zeros."""
    rep = q.shape[1] // k.shape[1]
    k64, v64 = k.double().repeat_interleave(rep, 1), v.double().repeat_interleave(rep, 1)
    s = q.double() @ k64.transpose(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if key_mask is not None:
        s = s.masked_fill(~key_mask[:, None, None, :], -math.inf)
    return (torch.softmax(s, -1).nan_to_num(0.0) @ v64).to(q.dtype)


def _sdpa_samples(rng, dtype, cls):
    """(query, key, value[, attn_mask]) of scaled_dot_product_attention: heads or not, masks of both
    kinds broadcast over the batch, grouped-query heads, a value dim unlike the query's."""
    dom = dict(low=-1, high=1)

    def t(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    def bool_mask(shape):
        m = rng.random(shape) < 0.7
        m[..., 0] = True  # every query sees a key (the all-masked case has its own sample)
        return Arg(m, dtype="bool")

    if cls == "plain":
        return [Sample((t((2, 2, 5, 8)), t((2, 2, 7, 8)), t((2, 2, 7, 8)))),
                Sample((t((1, 2, 6, 8)), t((1, 2, 6, 8)), t((1, 2, 6, 8))), dict(is_causal=True)),
                Sample((t((2, 2, 5, 8)), t((2, 2, 7, 8)), t((2, 2, 7, 4))), dict(scale=0.3)),
                Sample((t((2, 2, 5, 8)), t((2, 2, 7, 8)), t((2, 2, 7, 8)), bool_mask((5, 7)))),
                Sample((t((2, 2, 5, 8)), t((2, 2, 7, 8)), t((2, 2, 7, 8)), t((2, 1, 5, 7)))),
                Sample((t((1, 4, 5, 8)), t((1, 2, 5, 8)), t((1, 2, 5, 8))), dict(enable_gqa=True)),
                Sample((t((3, 5, 16)), t((3, 7, 16)), t((3, 7, 16))), dict(is_causal=True)),
                # One query row (decode_attention serves these outside autograd): grouped heads and a key
                # mask over the batch, a mask shared by the batch, a float mask and is_causal (the composite).
                Sample((t((2, 8, 1, 16)), t((2, 2, 40, 16)), t((2, 2, 40, 16)), bool_mask((2, 1, 1, 40))),
                       dict(enable_gqa=True)),
                Sample((t((2, 2, 1, 8)), t((2, 2, 9, 8)), t((2, 2, 9, 8)), bool_mask((1, 9)))),
                Sample((t((2, 2, 1, 8)), t((2, 2, 9, 8)), t((2, 2, 9, 8)), t((2, 1, 1, 9)))),
                Sample((t((1, 2, 1, 8)), t((1, 2, 4, 8)), t((1, 2, 4, 8))), dict(is_causal=True))]
    if cls == "noncontig":
        return [Sample((t((1, 2, 6, 8), "T"), t((1, 2, 5, 8), "strided"), t((1, 2, 5, 8))))]
    if cls == "empty":
        return [Sample((t((0, 2, 3, 8)), t((0, 2, 4, 8)), t((0, 2, 4, 8)))),
                Sample((t((1, 2, 0, 8)), t((1, 2, 4, 8)), t((1, 2, 4, 8))), dict(is_causal=True))]
    if cls == "size1":
        return [Sample((t((1, 1, 1, 8)), t((1, 1, 1, 8)), t((1, 1, 1, 8))), dict(is_causal=True))]
    return []


def _sdpa_ref(q, k, v, attn_mask=None, **kwargs):
    wide = [a.double() if a is not None and a.is_floating_point() else a for a in (q, k, v, attn_mask)]
    return F.scaled_dot_product_attention(*wide[:3], attn_mask=wide[3], **kwargs).to(q.dtype)


OP_INFOS = [
    OpInfo("scaled_dot_product_attention", "CUSTOM", FLOAT_DTYPES, _sdpa_samples, _sdpa_ref, ATTENTION_CLASSES,
           tol={**ATTENTION_TOL, "float64": (1e-10, 1e-10)}, method=False),
    OpInfo("flash_attention", "CUSTOM", ATTENTION_DTYPES, _attention_samples, _attention_ref, ATTENTION_CLASSES,
           tol=ATTENTION_TOL, method=False),
    OpInfo("decode_attention", "CUSTOM", ATTENTION_DTYPES, _decode_samples, _decode_ref, ATTENTION_CLASSES,
           tol=ATTENTION_TOL, method=False),
    OpInfo("flash_attention_backward", "CUSTOM", ATTENTION_DTYPES, _attention_backward_samples,
           _attention_backward_ref, ATTENTION_CLASSES, tol={"float16": (8e-3, 8e-3), "bfloat16": (6e-2, 6e-2), "float32": (5e-5, 5e-5)},
           method=False),
]
