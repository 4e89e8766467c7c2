"""pyflame.nn.functional: the functional ops under torch.nn.functional's names.

    import pyflame.nn.functional as F
    y = F.relu(F.linear(x, w, b))

Most names are the pf op of the same name (pf.conv2d is F.conv2d); the
others (interpolate, the pad modes, normalize, ...) are defined below as
compositions of pf ops. A name of torch.nn.functional that this build of
PyFlame does not have raises AttributeError saying so.
"""

import math as _math
import numbers as _numbers

import numpy as _np

import pyflame as _pf

from .. import NotSupportedError as _NotSupportedError
from .. import _C
from .utils import legacy_reduction as _legacy_reduction

# torch.nn.functional names that PyFlame provides as pf.<name>.
_OPS = (
    "linear",
    "conv1d", "conv2d", "conv3d", "conv_transpose2d",
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool2d",
    "pad",
    "batch_norm", "layer_norm", "group_norm", "rms_norm",
    "relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "leaky_relu", "elu", "softplus",
    "hardtanh",
    "dropout", "embedding", "one_hot",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div",
    "scaled_dot_product_attention",
)

for _name in _OPS:
    if hasattr(_pf, _name):
        globals()[_name] = getattr(_pf, _name)
del _name

__all__ = [n for n in _OPS if n in globals()]


def __getattr__(name):
    if name in _OPS:
        raise AttributeError(f"pyflame.nn.functional.{name}: pf.{name} is not in this build of PyFlame")
    raise AttributeError(f"module 'pyflame.nn.functional' has no attribute '{name}'")


# ---------------------------------------------------------------- compositions defined here
# torch.nn.functional functions that PyFlame composes from table ops in Python: they run on
# every device that has those ops, and autograd differentiates them through their parts.

def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _index(values, device):
    return _pf.tensor(_np.asarray(values, dtype=_np.int64), device=device)


def _vector_norm(x, p, dim, keepdim):
    """The p-norm over `dim` (p = inf, -inf, 0 or any positive number), as torch.linalg.vector_norm."""
    if p == 2:
        return (x * x).sum(dim, keepdim=keepdim).sqrt()
    a = x.abs()
    if p == 1:
        return a.sum(dim, keepdim=keepdim)
    if p == _math.inf:
        return a.amax(dim, keepdim=keepdim)
    if p == -_math.inf:
        return a.amin(dim, keepdim=keepdim)
    if p == 0:
        return a.ne(0).to(x.dtype).sum(dim, keepdim=keepdim)
    return a.pow(p).sum(dim, keepdim=keepdim).pow(1.0 / p)


# ------------------------------------------------ activations

def relu6(input, inplace=False):
    out = _pf.hardtanh(input, min_val=0.0, max_val=6.0)
    return input.copy_(out) if inplace else out


def hardsigmoid(input, inplace=False):
    out = _pf.hardtanh(input + 3.0, min_val=0.0, max_val=6.0) / 6.0
    return input.copy_(out) if inplace else out


def hardswish(input, inplace=False):
    out = input * (_pf.hardtanh(input + 3.0, min_val=0.0, max_val=6.0) / 6.0)
    return input.copy_(out) if inplace else out


def mish(input, inplace=False):
    out = input * _pf.tanh(_pf.softplus(input))
    return input.copy_(out) if inplace else out


def elu(input, alpha=1.0, inplace=False):
    out = _pf.elu(input, alpha=alpha)
    return input.copy_(out) if inplace else out


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    out = _pf.elu(input, alpha=_SELU_ALPHA) * _SELU_SCALE
    return input.copy_(out) if inplace else out


def celu(input, alpha=1.0, inplace=False):
    if alpha == 0:
        raise ValueError("ZeroDivisionError in CELU: alpha cannot be 0")
    out = _pf.elu(input / alpha, alpha=1.0) * alpha
    return input.copy_(out) if inplace else out


def softsign(input):
    return input / (input.abs() + 1.0)


def tanhshrink(input):
    return input - _pf.tanh(input)


def logsigmoid(input):
    return -_pf.softplus(-input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    out = _pf.hardtanh(input, min_val=min_val, max_val=max_val)
    return input.copy_(out) if inplace else out


def glu(input, dim=-1):
    if input.dim() == 0:
        raise ValueError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise ValueError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size {size}")
    a, b = input.chunk(2, dim)
    return a * _pf.sigmoid(b)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight one value or one per channel (dim 1; dim 0 of a 1-D input)."""
    if weight.dim() != 1 and weight.numel() != 1:
        raise ValueError(f"prelu: weight must be 1-D (one value or one per channel), got shape {tuple(weight.shape)}")
    n = weight.numel()
    channels = input.shape[1] if input.dim() >= 2 else 1
    if n != 1 and n != channels:
        raise ValueError(f"prelu: mismatch of parameter numbers and input channel size: found parameter numbers = "
                         f"{n} and channel size = {channels}")
    if n != 1:
        weight = weight.reshape([1, n] + [1] * (input.dim() - 2))
    elif weight.dim() > input.dim():
        weight = weight.reshape(())
    return _pf.where(input > 0, input, weight * input)


# ------------------------------------------------ norms and distances

def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p over dim, eps)."""
    if out is not None:
        raise _NotSupportedError("normalize(out=...) is not supported; assign the result instead")
    return input / _vector_norm(input, p, dim, keepdim=True).clamp(min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1/max(||x1||, eps) * x2/max(||x2||, eps)) over dim, after broadcasting (PyTorch's formula)."""
    n1 = _vector_norm(x1, 2, dim, keepdim=True).clamp(min=eps)
    n2 = _vector_norm(x2, 2, dim, keepdim=True).clamp(min=eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim."""
    diff = x1 - x2 + eps
    if diff.dim() == 0:
        return _vector_norm(diff.reshape((1,)), p, 0, keepdim=False)
    return _vector_norm(diff, p, -1, keepdim=keepdim)


# ------------------------------------------------ losses

def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - delta/2), d = input - target."""
    if delta <= 0:
        raise ValueError(f"huber_loss does not support non-positive values for delta, got {delta}")
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"huber_loss: the target's shape {tuple(target.shape)} does not match the input's "
                         f"{tuple(input.shape)}")
    d = (input - target).abs()
    loss = _pf.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    return _reduce(_pf.softplus(-input * target), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    dim = input1.dim() - 1
    # PyTorch's formula: eps 1e-12 added to each squared magnitude; targets other than 1 and -1 give 0.
    denom = (((input1 * input1).sum(dim) + 1e-12) * ((input2 * input2).sum(dim) + 1e-12)).sqrt()
    cos = (input1 * input2).sum(dim) / denom
    zeros = _pf.zeros_like(cos)
    loss = _pf.where(target == 1, 1.0 - cos, zeros) + _pf.where(target == -1, (cos - margin).clamp(min=0.0), zeros)
    return _reduce(loss, reduction)


# ------------------------------------------------ padding

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_source(n, before, after, mode, dim, shape, pad):
    """The input positions that fill each output position of one padded dim (negative pads crop)."""
    if mode == "reflect" and (before >= n or after >= n):
        raise ValueError(f"pad: padding size should be less than the corresponding input dimension, but got "
                         f"padding {tuple(pad)} at dimension {dim} of input {list(shape)}")
    if n + min(before, 0) + min(after, 0) <= 0:
        raise ValueError(f"pad: padding {tuple(pad)} crops all of dimension {dim} of input {list(shape)}")
    if mode == "circular" and (before > n or after > n):
        raise ValueError("pad: padding value causes wrapping around more than once")
    if mode == "circular":
        # Cropping comes first: the wrapped values come from what remains of the dim (PyTorch's order).
        lo, hi = max(0, -before), n - max(0, -after)
        return _np.arange(-max(before, 0), hi - lo + max(after, 0)) % (hi - lo) + lo
    j = _np.arange(-before, n + after)
    if mode == "reflect":
        j = _np.abs(j)
        j = _np.where(j >= n, 2 * (n - 1) - j, j)
    else:
        j = _np.clip(j, 0, n - 1)
    return j


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: 'constant' is pf.pad; 'reflect', 'replicate' and 'circular' pick the
    input elements each padded position copies (index_select per padded dim), as PyTorch's kernels do."""
    if mode == "constant":
        return _pf.pad(input, pad, mode, value)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise ValueError(f'Padding mode "{mode}" doesn\'t take in value argument')
    pad = list(pad)
    if len(pad) % 2:
        raise ValueError(f"pad: the padding must have an even length (pairs of before/after), got {pad}")
    k = len(pad) // 2
    if k not in (1, 2, 3) or input.dim() not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    out = input
    shape = tuple(input.shape)
    for i in range(k):
        dim = input.dim() - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if before == 0 and after == 0:
            continue
        src = _pad_source(shape[dim], before, after, mode, dim, shape, pad)
        out = _pf.index_select(out, dim, _index(src, input.device))
    return out


# ------------------------------------------------ adaptive max pooling

def _adaptive_windows(n, o):
    """PyTorch's adaptive windows [floor(i n / o), ceil((i + 1) n / o)) of each output i."""
    starts = [(i * n) // o for i in range(o)]
    ends = [-((-(i + 1) * n) // o) for i in range(o)]
    return starts, ends


def _adaptive_max_dim(x, dim, o):
    """Max over each adaptive window of `dim`: one index_select of the windows (short ones repeat their
    last element, which leaves the max alone) and one amax."""
    n = x.shape[dim]
    if n == o:
        return x
    starts, ends = _adaptive_windows(n, o)
    k = max(e - s for s, e in zip(starts, ends))
    idx = [min(s + j, e - 1) for s, e in zip(starts, ends) for j in range(k)]
    picked = _pf.index_select(x, dim, _index(idx, x.device))
    shape = list(x.shape)
    shape[dim:dim + 1] = [o, k]
    return picked.reshape(shape).amax(dim + 1)


def _adaptive_output_size(output_size, spatial, fn):
    sizes = (output_size,) * len(spatial) if isinstance(output_size, _numbers.Integral) else tuple(output_size)
    if len(sizes) != len(spatial):
        raise ValueError(f"{fn}: output_size must have {len(spatial)} entries, got {output_size}")
    sizes = tuple(s if o is None else o for o, s in zip(sizes, spatial))
    if any(o < 0 for o in sizes):
        raise ValueError(f"{fn}: elements of output_size must be greater than or equal to 0, got {sizes}")
    return sizes


def _adaptive_max_pool(input, output_size, return_indices, nd, fn):
    if return_indices:
        raise _NotSupportedError(f"{fn}: return_indices=True is not supported (values only); see docs/nn.md")
    if input.dim() not in (nd + 1, nd + 2):
        raise ValueError(f"{fn}: expected a {nd + 1}-D or {nd + 2}-D input, got {input.dim()}-D")
    spatial = tuple(input.shape[-nd:])
    sizes = _adaptive_output_size(output_size, spatial, fn)
    if any(s == 0 for s in input.shape[-nd - 1:]):
        raise ValueError(f"{fn}: expected non-empty channel and spatial dims, got input of shape "
                         f"{tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"{fn}: expected a floating-point input, got {input.dtype}")
    if nd == 2 and all(o > 0 and s % o == 0 for s, o in zip(spatial, sizes)):
        k = tuple(s // o for s, o in zip(spatial, sizes))
        return _pf.max_pool2d(input, k, k)  # equal windows: one pooling kernel
    out = input
    for i, o in enumerate(sizes):
        out = _adaptive_max_dim(out, input.dim() - nd + i, o)
    return out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_avg_pool1d(input, output_size):
    if input.dim() not in (2, 3):
        raise ValueError(f"adaptive_avg_pool1d: expected a 2-D or 3-D input, got {input.dim()}-D")
    size = output_size if isinstance(output_size, _numbers.Integral) else tuple(output_size)[0]
    return _pf.adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


# ------------------------------------------------ interpolation

_INTERP_DIMS = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _interp_sizes(input, size, scale_factor, recompute_scale_factor):
    """(output sizes, scales for the source-index formula or None per dim), as torch.nn.functional.interpolate."""
    nd = input.dim() - 2
    spatial = tuple(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = (size,) * nd if isinstance(size, _numbers.Integral) else tuple(size)
        if len(sizes) != nd:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {list(spatial)} and output size of {list(sizes)}. Please "
                             "provide input tensor in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,"
                             "oK) format.")
        return tuple(int(s) for s in sizes), (None,) * nd
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    scales = (float(scale_factor),) * nd if isinstance(scale_factor, _numbers.Real) else tuple(map(float, scale_factor))
    if len(scales) != nd:
        raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                         f"with spatial dimensions of {list(spatial)} and scale_factor of shape {list(scales)}. Please "
                         "provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) "
                         "format.")
    sizes = tuple(int(_math.floor(s * f)) for s, f in zip(spatial, scales))
    return sizes, ((None,) * nd if recompute_scale_factor else scales)


def _math_dtype(x):
    # PyTorch computes source positions in the input's "opmath" type: double for float64, else float.
    return _np.float64 if x.dtype == _C.dtype.float64 else _np.float32


def _scale(n_in, n_out, scale, align_corners, ft):
    """PyTorch's area_pixel_compute_scale, in the float type `ft`."""
    if align_corners:
        return ft((n_in - 1) / (n_out - 1)) if n_out > 1 else ft(0)
    return ft(1.0 / scale) if scale is not None and scale > 0 else ft(n_in / n_out)


def _interp_nearest(x, dim, n_out, scale, exact):
    n_in = x.shape[dim]
    ft = _math_dtype(x)
    s = _scale(n_in, n_out, scale, False, ft)
    dst = _np.arange(n_out, dtype=ft)
    src = _np.floor((dst + ft(0.5)) * s if exact else dst * s).astype(_np.int64)
    return _pf.index_select(x, dim, _index(_np.minimum(src, n_in - 1), x.device))


def _interp_linear(x, dim, n_out, scale, align_corners):
    n_in = x.shape[dim]
    ft = _math_dtype(x)
    s = _scale(n_in, n_out, scale, align_corners, ft)
    dst = _np.arange(n_out, dtype=ft)
    src = dst * s if align_corners else _np.maximum(s * (dst + ft(0.5)) - ft(0.5), ft(0))
    i0 = _np.minimum(_np.floor(src).astype(_np.int64), n_in - 1)
    i1 = _np.minimum(i0 + 1, n_in - 1)
    w1 = (src - i0).astype(ft)
    shape = [1] * x.dim()
    shape[dim] = n_out
    w1 = _pf.tensor(w1.reshape(shape), device=x.device).to(x.dtype)
    lo = _pf.index_select(x, dim, _index(i0, x.device))
    hi = _pf.index_select(x, dim, _index(i1, x.device))
    return lo + (hi - lo) * w1


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizes the spatial dims of an (N, C, ...) input: 'nearest', 'nearest-exact', 'linear' (3-D),
    'bilinear' (4-D), 'trilinear' (5-D) and 'area', one spatial dim at a time (index_select of the
    source positions, blended for the linear modes)."""
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif mode in _INTERP_DIMS:
        align_corners = bool(align_corners)
    elif mode == "bicubic":
        raise _NotSupportedError("interpolate: mode='bicubic' is not supported; use 'bilinear' (docs/nn.md)")
    else:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) "
                                  "for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if antialias:
        raise _NotSupportedError("interpolate: antialias=True is not supported (docs/nn.md)")
    if input.dim() not in (3, 4, 5):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) "
                                  "for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    nd = input.dim() - 2
    if mode in _INTERP_DIMS and _INTERP_DIMS[mode] != nd:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {_INTERP_DIMS[mode] + 2}D input")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    sizes, scales = _interp_sizes(input, size, scale_factor, recompute_scale_factor)
    if any(s <= 0 for s in sizes):
        raise ValueError(f"interpolate: output sizes must be greater than 0, got {list(sizes)}")
    if mode == "area":
        if nd == 1:
            return adaptive_avg_pool1d(input, sizes)
        if nd == 2:
            return _pf.adaptive_avg_pool2d(input, sizes)
        raise _NotSupportedError("interpolate: mode='area' takes 3-D and 4-D inputs only (adaptive_avg_pool3d "
                                 "is not in PyFlame)")
    out = input
    for i in range(nd):
        dim = 2 + i
        if mode in _INTERP_DIMS:
            out = _interp_linear(out, dim, sizes[i], scales[i], align_corners)
        elif sizes[i] != input.shape[dim] or scales[i] not in (None, 1.0):
            out = _interp_nearest(out, dim, sizes[i], scales[i], mode == "nearest-exact")
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


__all__ += [
    "relu6", "hardsigmoid", "hardswish", "mish", "selu", "celu", "softsign", "tanhshrink", "logsigmoid", "glu",
    "prelu", "normalize", "cosine_similarity", "pairwise_distance", "huber_loss", "soft_margin_loss",
    "cosine_embedding_loss", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_avg_pool1d", "interpolate",
    "upsample", "upsample_nearest", "upsample_bilinear",
]
__all__ += [n for n in ("elu", "hardtanh", "pad") if n not in __all__]
