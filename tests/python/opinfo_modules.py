"""OpInfos of the nn-modules area: linear, linear_relu, grouped_linear, quantized_linear, lstm_sequence and its
backward."""

import numpy as np
import torch
import torch.nn.functional as F

from op_registry import FLOAT_DTYPES, Arg, OpInfo, Sample, _x


def _linear_samples(rng, dtype, cls):
    dom = dict(low=-1, high=1)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    def s(inp, w, b=None, *, lay=("contig", "contig", "contig")):
        args = (x(inp, lay[0]), x(w, lay[1]))
        return Sample(args + ((x(b, lay[2]),) if b is not None else ()))

    if cls == "plain":
        return [s((4, 3), (5, 3), (5,)), s((4, 7), (6, 7)), s((2, 3, 9), (4, 9), (4,)), s((7,), (3, 7), (3,))]
    if cls == "broadcast":  # batch dims, a 0-d bias, a 1-D weight, biases broadcast to the result (addmm's)
        return [s((2, 3, 4, 5), (6, 5), (6,)), s((3, 5), (4, 5), ()), s((2, 3, 5), (5,)), s((5,), (5,)),
                s((3, 5), (4, 5), (1, 4)), s((3, 5), (4, 5), (3, 4)), s((3, 5), (4, 5), (3, 1)),
                s((1, 16), (8, 16), (1, 8))]  # one row: the GPU's GEMV adds it
    if cls == "noncontig":
        return [s((4, 5), (3, 5), (3,), lay=("T", "contig", "contig")),
                s((4, 5), (3, 5), (3,), lay=("strided", "T", "strided")),
                s((2, 4, 5), (3, 5), None, lay=("T", "strided", "contig"))]
    if cls == "empty":
        return [s((0, 5), (3, 5), (3,)), s((4, 0), (3, 0), (3,)), s((4, 0), (3, 0)), s((4, 5), (0, 5), (0,)),
                s((2, 0, 5), (3, 5))]
    if cls == "size1":
        return [s((1, 1), (1, 1), (1,)), s((1, 5), (1, 5)), s((3, 1), (4, 1), (4,))]
    return []


def _grouped_linear_samples(rng, dtype, cls):
    """(input, weight0, bias0, weight1, bias1, ...): 2 to 4 weights of different widths, biases or None; rows
    of input: one (the GPU's GEMV, k a multiple of 16 bytes) and more; the input RMS-normalised first
    (rms_norm_eps: a norm without weight; graph mode's calls with a weight are in test_compile.py) and
    two results met as SwiGLU."""
    dom = dict(low=-1, high=1)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    if cls == "plain":
        return [Sample((x((1, 64)), x((96, 64)), x((96,)), x((32, 64)), None, x((32, 64)), x((32,)))),
                Sample((x((3, 1, 40)), x((7, 40)), None, x((5, 40)), x((5,)))),
                Sample((x((9, 24)), x((4, 24)), x((4,)), x((6, 24)), x((6,)), x((3, 24)), None, x((2, 24)), None)),
                Sample((x((2, 5, 7)), x((3, 7)), x((3,)), x((4, 7)), None)),
                Sample((x((1, 64)), x((96, 64)), x((96,)), x((32, 64)), None), dict(rms_norm_eps=1e-5)),
                Sample((x((1, 64)), x((48, 64)), None, x((48, 64)), x((48,))), dict(swiglu=True)),
                Sample((x((3, 1, 32)), x((40, 32)), None, x((40, 32)), None), dict(rms_norm_eps=1e-6, swiglu=True))]
    if cls == "noncontig":
        return [Sample((x((4, 16), "T"), x((8, 16), "strided"), x((8,)), x((3, 16)), x((3,), "strided")))]
    if cls == "empty":
        return [Sample((x((0, 8)), x((3, 8)), x((3,)), x((2, 8)), None)),
                Sample((x((2, 8)), x((0, 8)), x((0,)), x((2, 8)), None))]
    if cls == "size1":
        return [Sample((x((1, 1)), x((1, 1)), x((1,)), x((1, 1)), None))]
    return []


def _grouped_linear_ref(input, *params, rms_norm_eps=None, swiglu=False):
    if rms_norm_eps is not None:
        input = F.rms_norm(input, (input.shape[-1],), eps=rms_norm_eps)
    results = tuple(F.linear(input, params[i], params[i + 1]) for i in range(0, len(params), 2))
    return (F.silu(results[0]) * results[1],) if swiglu else results


def _quantized_linear_samples(rng, dtype, cls):
    """(input, qweight, scales, zeros, bias), bits, group_size: random codes and zero points of 8 or 4 bits (two
    codes a byte), scales of both signs and about 1 / 2^bits (weights of a few units, as quantizing gives); one
    row of input (the GPU's GEMV: 16 bytes of codes a lane inside a
    group) and more (the weight dequantized, then the GEMM), and groups the GEMV does not take (96 codes
    a row in groups of 8, fewer than a lane's 16 codes)."""
    def s(inp, n, bits=8, group=32, bias=True, lay="contig"):
        k = inp[-1]
        codes = Arg(rng.integers(0, 256, size=(n, k * bits // 8)).astype(np.uint8), dtype="uint8")
        scales = _x(rng, (n, k // group), dtype, dict(low=0.5 / 2 ** bits, high=2 / 2 ** bits), "contig")
        scales.values = scales.values * rng.choice([-1, 1], size=scales.values.shape).astype(scales.values.dtype)
        zeros = Arg(rng.integers(0, 2 ** bits, size=(n, k // group)).astype(np.uint8), dtype="uint8")
        args = (_x(rng, inp, dtype, dict(low=-1, high=1), lay), codes, scales, zeros)
        return Sample(args + ((_x(rng, (n,), dtype, dict(low=-1, high=1), "contig"),) if bias else (None,)),
                      dict(bits=bits, group_size=group))

    if cls == "plain":
        return [s((1, 256), 40), s((1, 256), 24, bits=4, group=64, bias=False), s((1, 128), 8, bits=4, group=128),
                s((3, 1, 64), 12, group=16), s((5, 96), 7, bits=4, group=32, bias=False), s((1, 96), 6, group=8),
                s((20, 64), 6, bits=4)]
    if cls == "noncontig":
        return [s((6, 64), 10, lay="T"), s((1, 64), 9, bits=4, lay="strided")]
    if cls == "empty":
        return [s((0, 64), 5), s((2, 64), 0, bits=4)]
    if cls == "size1":
        return [s((1, 32), 1, group=32)]
    return []


def _quantized_linear_ref(input, qweight, scales, zeros, bias=None, bits=8, group_size=128):
    """The weight dequantized in float64 (pyflame.quant's layout), then linear; the result in the input's dtype."""
    codes = qweight.long()
    if bits == 4:
        codes = torch.stack([codes & 15, codes >> 4], -1).reshape(codes.shape[0], codes.shape[1] * 2)
    n, k = codes.shape
    centred = (codes - zeros.long().repeat_interleave(group_size, 1)).double()
    w = centred * scales.double().repeat_interleave(group_size, 1) if k else centred
    y = F.linear(input.double(), w, None if bias is None else bias.double())
    return y.to(input.dtype)


def _lstm_samples(rng, dtype, cls):
    """(input_gates (T, N, 4H), h0, c0, weight_hh, bias_hh), reverse."""
    def s(t, n, h, bias=True, lay=("contig",) * 5, **kw):
        args = (_x(rng, (t, n, 4 * h), dtype, dict(low=-2, high=2), lay[0]),
                _x(rng, (n, h), dtype, dict(low=-1, high=1), lay[1]), _x(rng, (n, h), dtype, dict(low=-2, high=2), lay[2]),
                _x(rng, (4 * h, h), dtype, dict(low=-0.6, high=0.6), lay[3]))
        return Sample(args + ((_x(rng, (4 * h,), dtype, dict(low=-0.5, high=0.5), lay[4]),) if bias else ()), kw)

    if cls == "plain":
        return [s(3, 2, 4), s(4, 3, 5, reverse=True), s(3, 2, 3, bias=False), s(5, 2, 8, reverse=True)]
    if cls == "noncontig":
        return [s(3, 2, 4, lay=("T", "strided", "T", "T", "strided")), s(2, 3, 3, lay=("strided",) * 5, reverse=True)]
    if cls == "empty":
        return [s(0, 2, 3), s(3, 0, 2)]
    if cls == "size1":
        return [s(1, 1, 1), s(1, 2, 3, reverse=True)]
    return []


def _lstm_ref(input_gates, h0, c0, weight_hh, bias_hh=None, reverse=False, gates=False):
    """The recurrence in float64, step by step as torch's nn.LSTM writes it; results in the inputs' dtype."""
    dtype = input_gates.dtype
    x, h, c, w = (t.double() for t in (input_gates, h0, c0, weight_hh))
    b = 0 if bias_hh is None else bias_hh.double()
    steps = x.shape[0]
    out, cells, acts = [None] * steps, [None] * steps, [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        i, f, g, o = (x[t] + h @ w.T + b).chunk(4, -1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        c = f * c + i * g
        h = o * c.tanh()
        out[t], cells[t], acts[t] = h, c, torch.cat([i, f, g, o], -1)
    empty = x.new_zeros(x.shape[:2] + (x.shape[2] // 4,))
    r = (torch.stack(out) if steps else empty, torch.stack(cells) if steps else empty)
    if gates:
        r += (torch.stack(acts) if steps else x.new_zeros(x.shape),)
    return tuple(v.to(dtype) for v in r)


def _lstm_backward_samples(rng, dtype, cls):
    """Gradients and a consistent forward (gates and cell_states from running the reference)."""
    out = []
    for s in _lstm_samples(rng, dtype, cls):
        t = [torch.from_numpy(np.array(a.values)).double() if isinstance(a, Arg) else a for a in s.args]
        _, cells, gates = _lstm_ref(*t, **s.kwargs, gates=True)
        c0, w = s.args[2], s.args[3]
        grad = [_x(rng, cells.shape, dtype, dict(low=-1, high=1), s.args[1].layout) for _ in range(2)]
        out.append(Sample((*grad, Arg(gates.detach().numpy()), Arg(cells.detach().numpy(), s.args[0].layout), c0, w), s.kwargs))
    return out


def _lstm_backward_ref(grad_output, grad_cell_states, gates, cell_states, c0, weight_hh, reverse=False):
    """autograd through the reference forward, on input gates that reproduce the given gates: the
    pre-activations (the gates' inverse) less each step's recurrent part, from h0 = 0."""
    dtype = gates.dtype
    a, cells, w = gates.double(), cell_states.double(), weight_hh.double()
    steps, n, h4 = a.shape
    if steps == 0 or n == 0:  # nothing flows: zeros
        return torch.zeros_like(gates), torch.zeros_like(c0), torch.zeros_like(c0)
    i, f, g, o = a.chunk(4, -1)
    logit = lambda p: torch.log(p / (1 - p))  # noqa: E731
    pre = torch.cat([logit(i), logit(f), torch.atanh(g), logit(o)], -1)
    hs = o * cells.tanh()  # each step's h
    h_before = torch.zeros(steps, n, h4 // 4, dtype=torch.float64)  # the h each step read
    if steps > 1:
        h_before = torch.cat([hs[1:], h_before[:1]]) if reverse else torch.cat([h_before[:1], hs[:-1]])
    x = (pre - h_before @ w.T).requires_grad_(True)
    h0 = torch.zeros(n, h4 // 4, dtype=torch.float64, requires_grad=True)
    c0 = c0.double().requires_grad_(True)
    out, cs = _lstm_ref(x, h0, c0, w, None, reverse)
    torch.autograd.backward([out, cs], [grad_output.double(), grad_cell_states.double()])
    return tuple(v.grad.to(dtype) for v in (x, h0, c0))


OP_INFOS = [
    OpInfo("linear", "CUSTOM", FLOAT_DTYPES, _linear_samples, F.linear,
           ("plain", "broadcast", "noncontig", "empty", "size1"),
           tol={"float16": (1e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2)}, method=False),
    OpInfo("linear_relu", "CUSTOM", FLOAT_DTYPES, _linear_samples, lambda *a, **k: F.relu(F.linear(*a, **k)),
           ("plain", "broadcast", "noncontig", "empty", "size1"),
           tol={"float16": (1e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2)}, method=False),
    OpInfo("grouped_linear", "CUSTOM", FLOAT_DTYPES, _grouped_linear_samples, _grouped_linear_ref,
           ("plain", "noncontig", "empty", "size1"), tol={"float16": (1e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2)},
           method=False),
    OpInfo("quantized_linear", "CUSTOM", FLOAT_DTYPES, _quantized_linear_samples, _quantized_linear_ref,
           # rows of input past the GEMV's: the weight is dequantized into the input's 16-bit dtype (rounded)
           ("plain", "noncontig", "empty", "size1"), tol={"float16": (2e-3, 8e-3), "bfloat16": (1.6e-2, 6e-2),
                                                          "float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12)},
           method=False),
    OpInfo("lstm_sequence", "CUSTOM", FLOAT_DTYPES, _lstm_samples, _lstm_ref, ("plain", "noncontig", "empty", "size1"),
           tol={"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2), "float32": (1e-5, 1e-5)}, method=False),
    OpInfo("lstm_sequence_backward", "CUSTOM", FLOAT_DTYPES, _lstm_backward_samples, _lstm_backward_ref,
           ("plain", "noncontig", "empty", "size1"),
           tol={"float16": (1e-2, 1e-2), "bfloat16": (6e-2, 6e-2), "float32": (1e-4, 1e-4)}, method=False),
]
