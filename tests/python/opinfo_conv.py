"""OpInfos of the conv area: convolution, pooling and pad (references: torch.nn.functional).

OP_INFOS holds the ops of the op table; EXTRA_OP_INFOS the ops that run as
other ops (conv1d, max_pool1d, avg_pool1d lower onto the 2-D ops; pad is a
composition), which test_conv.py runs through the same harness.

float16/bfloat16 are computed in float32 and rounded once, so the references
upcast them too. Values lie in [-1, 1] so that sums of products stay small.
"""

import warnings

import numpy as np
import torch
import torch.nn.functional as F

from op_registry import ALL_DTYPES, FLOAT_DTYPES, Arg, OpInfo, Sample, _x, is_float, make_values

CONV_CLASSES = ("plain", "noncontig", "empty", "size1")
_DOM = dict(low=-1, high=1)
# Sums over up to ~100 products: matmul's tolerances.
_CONV_TOL = {"float16": (1e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2)}


def _in_float32(fn):
    """A reference that computes float16/bfloat16 in float32 and rounds once, as PyFlame does."""

    def ref(*args, **kwargs):
        low = [a.dtype for a in args if isinstance(a, torch.Tensor) and a.dtype in (torch.float16, torch.bfloat16)]
        if low:
            args = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
        with warnings.catch_warnings():  # torch warns that 'same' with an even kernel copies the input (as we do)
            warnings.simplefilter("ignore", UserWarning)
            out = fn(*args, **kwargs)
        return out.to(low[0]) if low else out

    return ref


def _samples(table):
    """A sample generator from {shape class: [(shapes/layouts, kwargs)]}: each
    entry lists the tensor arguments as (shape, layout) pairs (None: pass None)."""

    def gen(rng, dtype, cls):
        out = []
        for tensors, kwargs in table.get(cls, []):
            args = tuple(None if t is None else _x(rng, t[0], dtype, _DOM, t[1]) for t in tensors)
            out.append(Sample(args, dict(kwargs)))
        return out

    return gen


C, T, S = "contig", "T", "strided"

_CONV2D = {
    "plain": [
        ((((2, 3, 7, 7), C), ((4, 3, 3, 3), C), ((4,), C)), {}),
        ((((1, 3, 7, 7), C), ((5, 3, 3, 3), C), None), dict(stride=2, padding=1)),
        ((((3, 6, 9, 8), C), ((6, 2, 3, 2), C), ((6,), C)), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2),
                                                                  groups=3)),
        ((((2, 4, 7, 6), C), ((4, 1, 3, 3), C), None), dict(padding=2, dilation=2, groups=4)),
        ((((6, 6, 5), C), ((2, 3, 1, 1), C), ((2,), C)), dict(groups=2)),  # unbatched
        ((((2, 5, 4, 4), C), ((3, 5, 1, 1), C), ((3,), C)), {}),  # 1x1: no column matrix
        ((((2, 3, 6, 7), C), ((4, 3, 2, 4), C), ((4,), C)), dict(padding="same")),  # even kernel
        ((((2, 3, 6, 7), C), ((4, 3, 3, 2), C), None), dict(padding="same", dilation=(2, 3))),
        ((((2, 3, 6, 7), C), ((4, 3, 3, 2), C), None), dict(padding="valid", stride=(1, 3))),
        ((((2, 3, 5, 5), C), ((2, 3, 2, 2), C), None), dict(stride=3, padding=1)),  # windows cover part of the input
    ],
    "noncontig": [
        ((((2, 3, 6, 7), T), ((4, 3, 3, 3), S), ((4,), S)), dict(padding=1)),
        ((((2, 4, 5, 6), S), ((4, 2, 2, 3), T), None), dict(groups=2, stride=(1, 2))),
    ],
    "empty": [
        ((((0, 3, 5, 5), C), ((2, 3, 3, 3), C), ((2,), C)), {}),
        ((((0, 4, 6, 6), C), ((4, 2, 3, 3), C), None), dict(groups=2, padding="same")),
    ],
    "size1": [
        ((((1, 1, 1, 1), C), ((1, 1, 1, 1), C), ((1,), C)), {}),
        ((((1, 2, 3, 1), C), ((3, 2, 3, 1), C), None), dict(padding=(1, 0))),
        ((((1, 1, 1, 1), C), ((2, 1, 3, 3), C), None), dict(padding=1)),
    ],
}

_CONV3D = {
    "plain": [
        ((((2, 2, 4, 5, 6), C), ((3, 2, 2, 3, 2), C), ((3,), C)), {}),
        ((((1, 4, 5, 5, 5), C), ((4, 2, 3, 3, 3), C), None), dict(stride=2, padding=1, groups=2)),
        ((((2, 2, 4, 5, 6), C), ((3, 2, 2, 2, 3), C), None), dict(stride=(1, 2, 1), padding=(1, 0, 2),
                                                                   dilation=(2, 1, 2))),
        ((((2, 4, 4, 5), C), ((2, 2, 1, 3, 3), C), ((2,), C)), dict(padding="same")),  # unbatched
        ((((3, 2, 3, 4, 5), C), ((2, 2, 2, 2, 2), C), None), dict(padding="same", dilation=(1, 2, 1))),
        ((((2, 4, 5, 6, 5), C), ((4, 1, 3, 2, 3), C), ((4,), C)), dict(stride=(2, 1, 2), padding=1, groups=4)),
        # output rows of 8: the GPU's im2col stores 4 elements at once (2 of float64)
        ((((2, 2, 3, 4, 8), C), ((3, 2, 2, 3, 3), C), ((3,), C)), dict(stride=(2, 1, 1), padding=(0, 1, 1))),
    ],
    "noncontig": [((((2, 2, 3, 4, 5), T), ((3, 2, 2, 2, 2), S), ((3,), S)), dict(padding=1))],
    "empty": [((((0, 2, 3, 4, 5), C), ((3, 2, 2, 2, 2), C), None), {})],
    "size1": [((((1, 1, 1, 1, 1), C), ((1, 1, 1, 1, 1), C), ((1,), C)), {}),
              ((((1, 1, 1, 3, 1), C), ((2, 1, 1, 3, 1), C), None), dict(padding=(0, 1, 0)))],
}

_CONV_TRANSPOSE2D = {
    "plain": [
        ((((2, 4, 5, 5), C), ((4, 3, 3, 3), C), ((3,), C)), {}),
        ((((1, 4, 4, 5), C), ((4, 2, 3, 3), C), None), dict(stride=2, padding=1, output_padding=1)),
        ((((3, 4, 3, 4), C), ((4, 3, 2, 3), C), ((6,), C)), dict(stride=(2, 3), padding=(0, 1), groups=2,
                                                                  dilation=(1, 2), output_padding=(1, 0))),
        ((((4, 3, 3), C), ((4, 2, 3, 3), C), None), dict(dilation=2, output_padding=1, padding=1)),  # unbatched
        ((((2, 6, 4, 4), C), ((6, 1, 1, 1), C), ((3,), C)), dict(groups=3)),
        # output_padding >= stride (allowed below the dilation)
        ((((2, 4, 3, 4), C), ((4, 2, 3, 2), C), ((2,), C)), dict(stride=2, padding=1, dilation=3, output_padding=2)),
    ],
    "noncontig": [((((2, 3, 5, 4), T), ((3, 2, 3, 2), S), ((2,), S)), dict(stride=2))],
    "empty": [((((0, 3, 4, 4), C), ((3, 2, 3, 3), C), None), {})],
    "size1": [((((1, 1, 1, 1), C), ((1, 1, 1, 1), C), ((1,), C)), {}),
              ((((1, 1, 1, 1), C), ((1, 2, 3, 3), C), None), dict(stride=2))],
}


def _pool_table(nd, is_max):
    """Samples of a 1-, 2- or 3-D pooling op."""

    def shp(*spatial):
        return spatial[-nd:]

    def kw(**k):
        out = {}
        for key, v in k.items():
            if key == "dilation" and not is_max:
                continue
            out[key] = v[-nd:] if isinstance(v, tuple) else v
        return out

    extra = [dict(count_include_pad=False), dict(count_include_pad=False, ceil_mode=True)]
    if nd > 1:
        extra.append(dict(divisor_override=5))
    plain = [
        ((((2, 3) + shp(5, 7, 7), C),), kw(kernel_size=3, stride=2, padding=1)),
        ((((2, 3) + shp(6, 8, 9), C),), kw(kernel_size=(2, 2, 3), stride=(1, 1, 2), padding=(1, 1, 1),
                                          dilation=(1, 2, 1), ceil_mode=True)),
        ((((1, 2) + shp(4, 6, 7), C),), kw(kernel_size=2)),
        ((((3,) + shp(6, 8, 9), C),), kw(kernel_size=3, stride=2, ceil_mode=True)),  # unbatched
        ((((2, 2) + shp(5, 6, 7), C),), kw(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1),
                                          dilation=2 if is_max else 1)),
        # Output planes of 256 outputs or more take the GPU's tiled kernel (smaller ones its direct one):
        # rows not a multiple of 4 or of a 16-byte vector, whole 16-byte rows, several column tiles.
        ((((2, 3) + shp(3, 20, 37), C),), kw(kernel_size=3, stride=1, padding=1)),
        ((((1, 2) + shp(6, 33, 45), C),), kw(kernel_size=(2, 3, 3), stride=2, padding=1, ceil_mode=True)),
        ((((1, 2) + shp(3, 16, 64), C),), kw(kernel_size=2)),
        ((((1, 2) + shp(4, 25, 33), C),), kw(kernel_size=3, padding=1, dilation=(1, 2, 2) if is_max else 1)),
        ((((1, 2) + shp(1, 2, 2100), C),), kw(kernel_size=(1, 1, 3), stride=1, padding=(0, 0, 1))),
    ]
    if not is_max:
        plain += [((((2, 3) + shp(5, 7, 7), C),), dict(kw(kernel_size=3, stride=2, padding=1), **e)) for e in extra]
        plain += [((((1, 2) + shp(4, 31, 41), C),), dict(kw(kernel_size=3, stride=2, padding=1), **e)) for e in extra]
    return {
        "plain": plain,
        "noncontig": [((((2, 3) + shp(5, 6, 7), T),), kw(kernel_size=2, stride=1, padding=1)),
                      ((((2, 3) + shp(5, 6, 7), S),), kw(kernel_size=3, stride=2, padding=1))],
        "empty": [((((0, 3) + shp(4, 5, 6), C),), kw(kernel_size=2))],
        "size1": [((((1, 1) + shp(1, 1, 1), C),), kw(kernel_size=1)),
                  ((((1, 1) + shp(1, 1, 2), C),), kw(kernel_size=(1, 1, 2), padding=(0, 0, 1)))],
    }


_ADAPTIVE = {
    "plain": [
        ((((2, 3, 7, 9), C),), dict(output_size=(3, 4))),
        ((((2, 3, 7, 9), C),), dict(output_size=5)),
        ((((2, 3, 7, 9), C),), dict(output_size=(None, 2))),
        ((((2, 3, 4, 5), C),), dict(output_size=(6, 7))),  # larger than the input: cells overlap
        ((((3, 5, 6), C),), dict(output_size=1)),  # unbatched
        ((((2, 3, 37, 45), C),), dict(output_size=(5, 7))),
    ],
    "noncontig": [((((2, 3, 6, 7), T),), dict(output_size=(4, 3))), ((((2, 3, 6, 7), S),), dict(output_size=2))],
    "empty": [((((0, 3, 4, 4), C),), dict(output_size=2)), ((((2, 3, 4, 4), C),), dict(output_size=(0, 2)))],
    "size1": [((((1, 1, 1, 1), C),), dict(output_size=1)), ((((1, 1, 1, 3), C),), dict(output_size=(2, 2)))],
}


# ---- pooling's backward ops: the forward's samples with a gradient of the
# output's shape; max pooling's inputs are multiples of 0.5 in [-1, 1], so
# that windows hold ties, and some hold NaN or only -inf.


def _pooled_shape(forward, shape, kwargs):
    return tuple(forward(torch.zeros(shape, dtype=torch.float64), **kwargs).shape)


def _pool_backward_samples(table, forward, is_max):
    def gen(rng, dtype, cls):
        out = []
        for (spec,), kwargs in table.get(cls, []):
            shape, layout = spec
            grad = _x(rng, _pooled_shape(forward, shape, kwargs), dtype, _DOM, layout)
            if not is_max:
                out.append(Sample((grad, shape), dict(kwargs)))
                continue
            x = make_values(rng, shape, dtype, discrete=True, **_DOM)
            out.append(Sample((grad, Arg(x, layout)), dict(kwargs)))
            if cls == "plain" and x.size > 8:
                special = x.copy().reshape(-1)
                special[rng.choice(special.size, special.size // 8, replace=False)] = np.nan
                special = special.reshape(shape)
                special[..., : shape[-1] // 2] = -np.inf  # windows of -inf and padding: the first element inside
                out.append(Sample((grad, Arg(special, layout)), dict(kwargs), "NaN and -inf"))
        return out

    return gen


def _upcast(t):
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def _max_pool_backward_ref(forward):
    def ref(grad, input, **kwargs):
        x = _upcast(input).detach().requires_grad_(True)
        forward(x, **kwargs).backward(_upcast(grad))
        return x.grad.to(input.dtype)

    return ref


def _avg_pool_backward_ref(forward):
    def ref(grad, input_size, **kwargs):
        x = torch.zeros(input_size, dtype=_upcast(grad).dtype, requires_grad=True)
        forward(x, **kwargs).backward(_upcast(grad))
        return x.grad.to(grad.dtype)

    return ref


def _adaptive_backward_ref(grad, input_size):
    if grad.numel() == 0:  # torch refuses an empty output size; nothing reaches the input
        return torch.zeros(input_size, dtype=grad.dtype)
    return _avg_pool_backward_ref(F.adaptive_avg_pool2d)(grad, input_size, output_size=tuple(grad.shape[-2:]))


def _adaptive_backward_samples(rng, dtype, cls):
    out = []
    for (spec,), kwargs in _ADAPTIVE.get(cls, []):
        shape, layout = spec
        grad = _x(rng, _pooled_shape(F.adaptive_avg_pool2d, shape, kwargs), dtype, _DOM, layout)
        out.append(Sample((grad, shape)))
    return out


def _pad_samples(rng, dtype, cls):
    value = True if dtype == "bool" else (2.5 if is_float(dtype) else 3)

    def x(shape, layout=C):
        return _x(rng, shape, dtype, dict(low=-5, high=5), layout)

    table = {
        "plain": [
            Sample((x((2, 3, 4)), (1, 2))),
            Sample((x((2, 3, 4)), (1, 0, 2, 1)), dict(value=value)),
            Sample((x((2, 3, 4)), [0, 1, 1, 0, 2, 2]), dict(mode="constant", value=value)),
            Sample((x((3, 5)), (-1, 2, 1, -2))),  # negative padding crops
            Sample((x((3, 5)), (-2, -3))),  # down to nothing
            Sample((x((4,)), (2, -3)), dict(value=value)),
            Sample((x((2, 3)), ())),
        ],
        "noncontig": [Sample((x((4, 5), T), (1, 1, 2, 0))), Sample((x((3, 4), S), (2, -1)), dict(value=value))],
        "empty": [Sample((x((0, 3)), (1, 1))), Sample((x((2, 0)), (1, 2, 0, 1)), dict(value=value))],
        "size1": [Sample((x((1,)), (1, 1))), Sample((x((1, 1)), (0, 0, 1, 0)))],
        "scalar0d": [Sample((x(()), ()))],
    }
    return table.get(cls, [])


def _pad(x, pad, mode="constant", value=None):
    return F.pad(x, list(pad), mode=mode, value=value)


def _weight_grad_samples(rng, dtype, cls):
    """conv_weight_backward's samples: the conv2d and conv3d cases (numeric padding) with a
    grad_output of the convolution's output shape."""
    out = []
    for table, conv in ((_CONV2D, F.conv2d), (_CONV3D, F.conv3d)):
        for tensors, kwargs in table.get(cls, []):
            if isinstance(kwargs.get("padding"), str):
                continue
            (xs, xl), (ws, wl) = tensors[0], tensors[1]
            ys = tuple(conv(torch.zeros(xs), torch.zeros(ws), **kwargs).shape)
            args = (_x(rng, xs, dtype, _DOM, xl), _x(rng, ys, dtype, _DOM, xl), _x(rng, ws, dtype, _DOM, wl))
            out.append(Sample(args, dict(kwargs)))
    return out


def _conv_weight_grad(input, grad_output, weight, stride=1, padding=0, dilation=1, groups=1):
    if input.dim() == weight.dim() - 1:  # unbatched
        input, grad_output = input.unsqueeze(0), grad_output.unsqueeze(0)
    fn = torch.nn.grad.conv2d_weight if weight.dim() == 4 else torch.nn.grad.conv3d_weight
    return fn(input, weight.shape, grad_output, stride, padding, dilation, groups)


def _conv_bn_samples(rng, dtype, cls):
    """conv2d_batch_norm's samples: the conv2d cases (numeric padding), each with batch_norm's running
    statistics (variances in [0.5, 1.5]) and, alternately, its affine parameters and a ReLU."""
    out = []
    for i, (tensors, kwargs) in enumerate(_CONV2D.get(cls, [])):
        if isinstance(kwargs.get("padding"), str):
            continue
        (xs, xl), (ws, wl) = tensors[0], tensors[1]
        c = (ws[0],)
        stats = (_x(rng, c, dtype, _DOM), _x(rng, c, dtype, dict(low=0.5, high=1.5)))
        affine = (_x(rng, c, dtype, _DOM), _x(rng, c, dtype, _DOM)) if i % 2 == 0 else (None, None)
        bias = _x(rng, tensors[2][0], dtype, _DOM, tensors[2][1]) if tensors[2] else None
        args = (_x(rng, xs, dtype, _DOM, xl), _x(rng, ws, dtype, _DOM, wl), bias) + stats + affine
        out.append(Sample(args, dict(kwargs, eps=1e-3 if i % 3 else 1e-5, relu=i % 2 == 1)))
    return out


def _conv_bn(input, weight, bias, running_mean, running_var, bn_weight, bn_bias, eps=1e-5, relu=False, **conv):
    batched = input.dim() == 4  # an unbatched (C, H, W) input's channels are dim 0
    y = F.conv2d(input if batched else input.unsqueeze(0), weight, bias, **conv)
    y = F.batch_norm(y, running_mean, running_var, bn_weight, bn_bias, training=False, eps=eps)
    y = F.relu(y) if relu else y
    return y if batched else y.squeeze(0)


def _op(name, table, ref, **kw):
    return OpInfo(name, "CUSTOM", FLOAT_DTYPES, _samples(table), _in_float32(ref), CONV_CLASSES, **kw)


OP_INFOS = [
    _op("conv2d", _CONV2D, F.conv2d, tol=_CONV_TOL, method=False),
    _op("conv3d", _CONV3D, F.conv3d, tol=_CONV_TOL, method=False),
    # the folded weights are rounded to the dtype before the convolution: a little further from the reference
    OpInfo("conv2d_batch_norm", "CUSTOM", FLOAT_DTYPES, _conv_bn_samples, _in_float32(_conv_bn), CONV_CLASSES,
           tol={"float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2), "float32": (1e-5, 1e-5)}, method=False),
    _op("conv_transpose2d", _CONV_TRANSPOSE2D, F.conv_transpose2d, tol=_CONV_TOL, method=False),
    OpInfo("conv_weight_backward", "CUSTOM", FLOAT_DTYPES, _weight_grad_samples, _in_float32(_conv_weight_grad),
           CONV_CLASSES, tol=_CONV_TOL, method=False),
    _op("max_pool2d", _pool_table(2, True), F.max_pool2d, exact_float=True, method=False),
    _op("max_pool3d", _pool_table(3, True), F.max_pool3d, exact_float=True, method=False),
    _op("avg_pool2d", _pool_table(2, False), F.avg_pool2d, method=False),
    _op("avg_pool3d", _pool_table(3, False), F.avg_pool3d, method=False),
    _op("adaptive_avg_pool2d", _ADAPTIVE, F.adaptive_avg_pool2d, method=False),
    *[OpInfo(f"max_pool{nd}d_backward", "CUSTOM", FLOAT_DTYPES,
             _pool_backward_samples(_pool_table(nd, True), getattr(F, f"max_pool{nd}d"), True),
             _max_pool_backward_ref(getattr(F, f"max_pool{nd}d")), CONV_CLASSES, exact_float=True, method=False)
      for nd in (2, 3)],
    *[OpInfo(f"avg_pool{nd}d_backward", "CUSTOM", FLOAT_DTYPES,
             _pool_backward_samples(_pool_table(nd, False), getattr(F, f"avg_pool{nd}d"), False),
             _avg_pool_backward_ref(getattr(F, f"avg_pool{nd}d")), CONV_CLASSES, method=False)
      for nd in (2, 3)],
    OpInfo("adaptive_avg_pool2d_backward", "CUSTOM", FLOAT_DTYPES, _adaptive_backward_samples,
           _adaptive_backward_ref, CONV_CLASSES, method=False),
]

_CONV1D = {
    "plain": [
        ((((2, 3, 9), C), ((4, 3, 3), C), ((4,), C)), {}),
        ((((3, 4, 10), C), ((6, 2, 4), C), None), dict(stride=2, padding=3, dilation=2, groups=2)),
        ((((3, 8), C), ((2, 3, 2), C), ((2,), C)), dict(padding="same")),  # unbatched, even kernel
        ((((2, 3, 8), C), ((2, 3, 3), C), None), dict(padding="valid", stride=3)),
        ((((2, 3, 8), C), ((2, 3, 3), C), None), dict(padding=(2,), stride=(2,), dilation=(1,))),
    ],
    "noncontig": [((((2, 3, 7), T), ((4, 3, 3), S), ((4,), S)), dict(padding=1))],
    "empty": [((((0, 3, 7), C), ((4, 3, 3), C), None), {})],
    "size1": [((((1, 1, 1), C), ((1, 1, 1), C), ((1,), C)), {})],
}

EXTRA_OP_INFOS = [
    _op("conv1d", _CONV1D, F.conv1d, tol=_CONV_TOL),
    _op("max_pool1d", _pool_table(1, True), F.max_pool1d, exact_float=True),
    _op("avg_pool1d", _pool_table(1, False), F.avg_pool1d),
    OpInfo("pad", "COMPOSITE", ALL_DTYPES, _pad_samples, _pad, CONV_CLASSES + ("scalar0d",), exact_float=True),
]
