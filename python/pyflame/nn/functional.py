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
import warnings as _warnings

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
    raise _C.InvalidArgumentError(f"{reduction} is not a valid value for reduction")


def _index(values, like):
    """An int64 index tensor on like's device, placed as like (so ops over both run where like's would)."""
    return _pf.tensor(_np.asarray(values, dtype=_np.int64), device=like)


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

class _FloatOnlyError(NotImplementedError, TypeError):
    """PyTorch raises NotImplementedError for these activations on integer tensors; PyFlame's own ops raise
    TypeError for a wrong dtype: this error is both."""


def _float_only(input, name):
    if not input.dtype.is_floating_point:
        raise _FloatOnlyError(f"{name}: not implemented for {input.dtype} (floating-point inputs only, as in "
                              "PyTorch); convert with .to(pf.float32)")


def _check_inplace(input, name):
    # PyTorch's rule: a leaf that requires grad cannot be overwritten while autograd records.
    if input.requires_grad and input.is_leaf and _pf.is_grad_enabled():
        raise _pf.AutogradError(f"{name}: a leaf tensor that requires grad is used in an in-place operation; do it "
                                "under pf.no_grad(), or on a clone()")


def _write_back(input, fn, name):
    """fn(input) written into input. Autograd keeps the input's old values for fn's backward through a clone
    (the composed parts save their inputs), so the gradient is the out-of-place one, as in PyTorch."""
    _check_inplace(input, name)
    src = input.clone() if input.requires_grad and _pf.is_grad_enabled() else input
    return input.copy_(fn(src))


def relu(input, inplace=False):
    return input.relu_() if inplace else _pf.relu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    _float_only(input, "leaky_relu")
    return input.leaky_relu_(negative_slope) if inplace else _pf.leaky_relu(input, negative_slope)


def silu(input, inplace=False):
    _float_only(input, "silu")
    return input.silu_() if inplace else _pf.silu(input)


def gelu(input, approximate="none"):
    _float_only(input, "gelu")
    return _pf.gelu(input, approximate=approximate)


def softplus(input, beta=1.0, threshold=20.0):
    _float_only(input, "softplus")
    return _pf.softplus(input, beta=beta, threshold=threshold)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def _hardsigmoid(x):
    return _pf.hardtanh(x + 3.0, min_val=0.0, max_val=6.0) / 6.0


def hardsigmoid(input, inplace=False):
    _float_only(input, "hardsigmoid")
    return _write_back(input, _hardsigmoid, "hardsigmoid") if inplace else _hardsigmoid(input)


def _hardswish(x):
    return x * _hardsigmoid(x)


def hardswish(input, inplace=False):
    _float_only(input, "hardswish")
    return _write_back(input, _hardswish, "hardswish") if inplace else _hardswish(input)


def _mish(x):
    return x * _pf.tanh(_pf.softplus(x))


def mish(input, inplace=False):
    _float_only(input, "mish")
    return _write_back(input, _mish, "mish") if inplace else _mish(input)


def elu(input, alpha=1.0, inplace=False):
    _float_only(input, "elu")
    return input.elu_(alpha) if inplace else _pf.elu(input, alpha=alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _selu(x):
    return _pf.elu(x, alpha=_SELU_ALPHA) * _SELU_SCALE


def selu(input, inplace=False):
    _float_only(input, "selu")
    return _write_back(input, _selu, "selu") if inplace else _selu(input)


def celu(input, alpha=1.0, inplace=False):
    _float_only(input, "celu")
    if alpha == 0:
        raise _C.InvalidArgumentError("ZeroDivisionError in CELU: alpha cannot be 0")

    def fn(x):
        return _pf.elu(x / alpha, alpha=1.0) * alpha

    return _write_back(input, fn, "celu") if inplace else fn(input)


def threshold(input, threshold, value, inplace=False):
    """value where input <= threshold, else input (NaN stays NaN), as torch.nn.functional.threshold."""
    mask = input <= threshold
    return input.masked_fill_(mask, value) if inplace else input.masked_fill(mask, value)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    _float_only(input, "softmin")
    if dim is None:
        _warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call to include dim=X "
                      "as an argument.", stacklevel=_stacklevel)
        dim = 0 if input.dim() in (0, 1, 3) else 1
    return _pf.softmax(-input, dim, dtype=dtype)


def softsign(input):
    return input / (input.abs() + 1.0)


def tanhshrink(input):
    return input - _pf.tanh(input)


def logsigmoid(input):
    _float_only(input, "logsigmoid")
    return -_pf.softplus(-input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if inplace:
        return input.hardtanh_(min_val, max_val)
    return _pf.hardtanh(input, min_val=min_val, max_val=max_val)


def glu(input, dim=-1):
    if input.dim() == 0:
        raise _C.InvalidArgumentError("glu does not support scalars because halving size must be even")
    size = input.shape[dim]
    if size % 2:
        raise _C.InvalidArgumentError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size "
                                      f"{size}")
    a, b = input.chunk(2, dim)
    return a * _pf.sigmoid(b)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), weight one value or one per channel (dim 1; dim 0 of a 1-D input)."""
    if weight.dim() != 1 and weight.numel() != 1:
        raise _C.InvalidArgumentError("prelu: weight must be 1-D (one value or one per channel), got shape "
                                      f"{tuple(weight.shape)}")
    n = weight.numel()
    channels = input.shape[1] if input.dim() >= 2 else 1
    if n != 1 and n != channels:
        raise _C.InvalidArgumentError("prelu: mismatch of parameter numbers and input channel size: found parameter "
                                      f"numbers = {n} and channel size = {channels}")
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
        raise _C.InvalidArgumentError(f"huber_loss does not support non-positive values for delta, got {delta}")
    if tuple(input.shape) != tuple(target.shape):
        raise _C.InvalidArgumentError(f"huber_loss: the target's shape {tuple(target.shape)} does not match the "
                                      f"input's {tuple(input.shape)}")
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


def _legacy(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return _legacy_reduction(size_average, reduce)
    return reduction


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target (input1 - input2) + margin)."""
    reduction = _legacy(size_average, reduce, reduction)
    if not (input1.dim() == input2.dim() == target.dim()):
        raise _C.InvalidArgumentError("margin_ranking_loss : All input tensors should have same dimension but got "
                                      f"sizes: input1: {tuple(input1.shape)}, input2: {tuple(input2.shape)}, target: "
                                      f"{tuple(target.shape)} ")
    return _reduce((-target * (input1 - input2) + margin).clamp(min=0.0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """PyTorch's formula: max(0, margin - x) where target != 1, plus x where target != -1."""
    reduction = _legacy(size_average, reduce, reduction)
    zeros = _pf.zeros_like(input)
    loss = _pf.where(target != 1, (margin - input).clamp(min=0.0), zeros) + _pf.where(target != -1, input, zeros)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    reduction = _legacy(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise _C.InvalidArgumentError(f"{reduction} is not a valid value for reduction")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        # Stirling's approximation of log(target!), counted where target > 1 only (PyTorch's rule).
        stirling = target * target.log() - target + 0.5 * (target * (2 * _math.pi)).log()
        loss = loss + stirling.masked_fill(target <= 1, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)), var heteroscedastic or homoscedastic
    (PyTorch's shape rules); the clamp passes the gradient through unchanged, as PyTorch's no_grad clamp does."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise _C.InvalidArgumentError("var has negative entry/entries")
        var = _pf.full_like(input, float(var))
    elif bool((var < 0).sum().item()):
        raise _C.InvalidArgumentError("var has negative entry/entries")
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape != ishape:
        if ishape[:-1] == vshape:
            var = var.unsqueeze(-1)
        elif not (len(ishape) == len(vshape) and sum(v for i, v in zip(ishape, vshape) if i != v) == 1):
            raise _C.InvalidArgumentError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise _C.InvalidArgumentError(reduction + " is not valid")
    var = var + (var.clamp(min=eps) - var).detach()
    loss = 0.5 * (var.log() + (input - target) * (input - target) / var)
    if full:
        loss = loss + 0.5 * _math.log(2 * _math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """sum over i != y of max(0, margin - x[y] + x[i])^p (times weight[y]), divided by the class count."""
    reduction = _legacy(size_average, reduce, reduction)
    if p not in (1, 2):
        raise _C.InvalidArgumentError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise _C.InvalidArgumentError("weight must be one-dimensional")
    if input.dim() > 2:
        raise _C.InvalidArgumentError(f"multi_margin_loss: expected a 1-D or 2-D input, got {input.dim()}-D")
    x = input.reshape((1, -1)) if input.dim() < 2 else input
    t = target.reshape((-1, 1))
    if t.shape[0] != x.shape[0]:
        raise _C.InvalidArgumentError(f"inconsistent target size, expected {x.shape[0]} but got {tuple(target.shape)}")
    z = (margin - x.gather(1, t) + x).clamp(min=0.0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * _pf.index_select(weight, 0, t.reshape((-1,))).unsqueeze(1)
    own = _pf.arange(x.shape[1], device=x).unsqueeze(0) == t
    loss = z.masked_fill(own, 0.0).sum(1) / x.shape[1]
    if input.dim() < 2:
        loss = loss.reshape(tuple(target.shape))
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with pairwise_distance d (and d(p, n) when smaller, with swap)."""
    reduction = _legacy(size_average, reduce, reduction)
    if not (anchor.dim() == positive.dim() == negative.dim()):
        raise _C.InvalidArgumentError("The anchor, positive, and negative tensors are expected to have the same number "
                                      f"of dimensions, but got: anchor {anchor.dim()}D, positive {positive.dim()}D, "
                                      f"and negative {negative.dim()}D inputs")
    if margin <= 0:
        raise _C.InvalidArgumentError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _pf.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp(min=0.0), reduction)


# ------------------------------------------------ dropout


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise _C.InvalidArgumentError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    if inplace:
        _check_inplace(input, "dropout")
    return _pf.dropout(input, p, training, inplace)


def _feature_dropout(input, p, training, inplace, batched):
    """Zeroes whole channels (dim 1; dim 0 of an unbatched input) with probability p, the rest scaled by
    1/(1 - p): one Bernoulli draw per (sample, channel), as PyTorch's feature dropout."""
    if p < 0.0 or p > 1.0:
        raise _C.InvalidArgumentError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    lead = 2 if batched else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.dim() - lead)
    if p == 1.0:
        mask = _pf.zeros(shape, dtype=input.dtype, device=input)
    else:
        keep = _pf.rand(shape, device=input) < (1.0 - p)
        mask = keep.to(input.dtype) / (1.0 - p)
    if inplace:
        _check_inplace(input, "dropout")
        return input.mul_(mask)
    return input * mask


def dropout1d(input, p=0.5, training=True, inplace=False):
    if input.dim() not in (2, 3):
        raise _C.InvalidArgumentError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note "
                                      "that dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
                                      "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
                                      "inputs).")
    return _feature_dropout(input, p, training, inplace, input.dim() == 3)


def _warn_feature_dropout_dims(input, spatial):
    """PyTorch's deprecation warning for dropout2d/3d on an input with other than spatial + 1 or + 2 dims."""
    if input.dim() not in (spatial + 1, spatial + 2):
        name = f"dropout{spatial}d"
        _warnings.warn(f"{name}: Received a {input.dim()}-D input to {name}, which is deprecated and will "
                       "result in an error in a future release. To retain the behavior and silence this warning, "
                       f"please use dropout instead. Note that {name} exists to provide channel-wise dropout on "
                       f"inputs with {spatial} spatial dimensions, a channel dimension, and an optional batch "
                       f"dimension (i.e. {spatial + 1}D or {spatial + 2}D inputs).", stacklevel=3)


def dropout2d(input, p=0.5, training=True, inplace=False):
    _warn_feature_dropout_dims(input, 2)
    if input.dim() == 3:
        _warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                       "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                       "This behavior will change in a future release to interpret the input as one without a "
                       "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                       "please switch to using dropout1d instead.", stacklevel=2)
    return _feature_dropout(input, p, training, inplace, True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    _warn_feature_dropout_dims(input, 3)
    return _feature_dropout(input, p, training, inplace, input.dim() != 4)


# ------------------------------------------------ layers composed of views and index ops


def _tuple(v, n, name):
    t = (v,) * n if isinstance(v, _numbers.Integral) else tuple(v)
    if len(t) != n:
        raise _C.InvalidArgumentError(f"{name} must be an int or a tuple of {n} ints, got {v}")
    return t


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = upscale_factor
    if input.dim() < 3:
        raise _C.InvalidArgumentError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                                      f"{input.dim()} dimension(s)")
    if r <= 0:
        raise _C.InvalidArgumentError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise _C.InvalidArgumentError("pixel_shuffle expects its input's 'channel' dimension to be divisible by the "
                                      f"square of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    x = x.permute(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return x.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = downscale_factor
    if input.dim() < 3:
        raise _C.InvalidArgumentError("pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                                      f"{input.dim()} dimension(s)")
    if r <= 0:
        raise _C.InvalidArgumentError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise _C.InvalidArgumentError(f"pixel_unshuffle expects height ({h}) and width ({w}) to be divisible by "
                                      f"downscale_factor ({r})")
    n = len(lead)
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    x = x.permute(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return x.reshape(tuple(lead) + (c * r * r, h // r, w // r))


def _window_table(spatial, kernel, dilation, padding, stride, name):
    """For unfold/fold: the flat position in the padded plane of each (kernel offset, output position), shape
    (prod(kernel), L), and the padded plane's shape."""
    padded = tuple(s + 2 * p for s, p in zip(spatial, padding))
    blocks = tuple((n - d * (k - 1) - 1) // st + 1 for n, k, d, st in zip(padded, kernel, dilation, stride))
    if any(b <= 0 for b in blocks):
        raise _C.InvalidArgumentError(f"{name}: the sliding blocks do not fit: spatial size {tuple(spatial)}, "
                                      f"kernel_size {kernel}, dilation {dilation}, padding {padding}, stride {stride} "
                                      f"give {blocks} blocks")
    rows = (_np.arange(kernel[0])[:, None, None, None] * dilation[0]
            + _np.arange(blocks[0])[None, None, :, None] * stride[0])
    cols = (_np.arange(kernel[1])[None, :, None, None] * dilation[1]
            + _np.arange(blocks[1])[None, None, None, :] * stride[1])
    table = (rows * padded[1] + cols).reshape(kernel[0] * kernel[1], blocks[0] * blocks[1])
    return table, padded, blocks


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C kH kW, L), one index_select of the zero-padded plane."""
    if input.dim() not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.dim()}D)")
    k, d, p, st = (_tuple(v, 2, n) for v, n in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                                  (padding, "padding"), (stride, "stride")))
    x = input if input.dim() == 4 else input.unsqueeze(0)
    n, c, h, w = x.shape
    table, padded, _ = _window_table((h, w), k, d, p, st, "unfold")
    if any(p):
        x = _pf.pad(x, (p[1], p[1], p[0], p[0]))
    cols = _pf.index_select(x.reshape((n, c, padded[0] * padded[1])), 2, _index(table.reshape(-1), x))
    out = cols.reshape((n, c * table.shape[0], table.shape[1]))
    return out if input.dim() == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: every column element is added (scatter_add) at its place in the padded
    plane, overlaps summing, then the padding is cut off."""
    if input.dim() not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                                  f"(got {input.dim()}D)")
    size, k, d, p, st = (_tuple(v, 2, n) for v, n in ((output_size, "output_size"), (kernel_size, "kernel_size"),
                                                        (dilation, "dilation"), (padding, "padding"),
                                                        (stride, "stride")))
    x = input if input.dim() == 3 else input.unsqueeze(0)
    n, ckk, length = x.shape
    kk = k[0] * k[1]
    if ckk % kk:
        raise _C.InvalidArgumentError("Expected size of input's dimension 1 to be divisible by the product of "
                                      f"kernel_size, but got input.size(1)={ckk} and kernel_size={k}")
    table, padded, blocks = _window_table(size, k, d, p, st, "fold")
    if blocks[0] * blocks[1] != length:
        raise _C.InvalidArgumentError(f"Given output_size={size}, kernel_size={k}, dilation={d}, padding={p}, "
                                      f"stride={st}, expected size of input's dimension 2 to match the calculated "
                                      f"number of sliding blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, "
                                      f"but got input.size(2)={length}.")
    c = ckk // kk
    idx = _index(table.reshape(1, 1, -1), x).expand((n, c, kk * length))
    plane = _pf.zeros((n, c, padded[0] * padded[1]), dtype=x.dtype, device=x)
    out = plane.scatter_add(2, idx, x.reshape((n, c, kk * length))).reshape((n, c) + padded)
    out = out[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]
    return out if input.dim() == 3 else out.squeeze(0)


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]: one matmul with W laid out (i, o j), then a
    product with x2 summed over j."""
    if weight.dim() != 3:
        raise _C.InvalidArgumentError(f"bilinear(): weight must be 3-D (out_features, in1_features, in2_features), got "
                                      f"{weight.dim()}-D")
    out_f, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2:
        raise _C.InvalidArgumentError(f"bilinear(): input sizes {tuple(input1.shape)} and {tuple(input2.shape)} do not "
                                      f"match the weight {tuple(weight.shape)}")
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise _C.InvalidArgumentError("bilinear(): input batch dimensions do not match: got "
                                      f"{tuple(input1.shape[:-1])} and {tuple(input2.shape[:-1])}")
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape((-1, in1))
    x2 = input2.reshape((-1, in2))
    t = (x1 @ weight.permute((1, 0, 2)).reshape((in1, out_f * in2))).reshape((-1, out_f, in2))
    y = (t * x2.unsqueeze(1)).sum(2)
    if bias is not None:
        y = y + bias
    return y.reshape(lead + (out_f,))


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Each (sample, channel) normalised over its spatial dims: group_norm with one group per channel. With
    running statistics given, they are updated from the batch average of the instance means and unbiased
    variances (PyTorch's rule); use_input_stats=False normalises with them instead (batch_norm in eval)."""
    if input.dim() < 3:
        raise _C.InvalidArgumentError("instance_norm: expected an input with a batch, a channel and at least one "
                                      f"spatial dim, got {input.dim()}-D")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise _C.InvalidArgumentError("Expected running_mean and running_var to be defined when use_input_stats is "
                                          "false")
        return _pf.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    spatial = 1
    for s in input.shape[2:]:
        spatial *= s
    if spatial <= 1:
        raise _C.InvalidArgumentError("Expected more than 1 spatial element when training, got input size "
                                      f"{list(input.shape)}")
    if running_mean is not None or running_var is not None:
        with _pf.no_grad():
            flat = input.reshape((input.shape[0], input.shape[1], -1))
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(flat.mean(2).mean(0).to(running_mean.dtype) * momentum)
            if running_var is not None:
                var = flat.var(2, correction=1).mean(0)
                running_var.mul_(1 - momentum).add_(var.to(running_var.dtype) * momentum)
    return _pf.group_norm(input, input.shape[1], weight, bias, eps)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """conv_transpose2d over a height of 1, as conv1d is conv2d over a height of 1."""
    if input.dim() not in (2, 3):
        raise _C.InvalidArgumentError(f"conv_transpose1d: expected a 2-D (unbatched) or 3-D input, got {input.dim()}-D")
    s, p, op, d = (_tuple(v, 1, n)[0] for v, n in ((stride, "stride"), (padding, "padding"),
                                                  (output_padding, "output_padding"), (dilation, "dilation")))
    out = _pf.conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, (1, s), (0, p), (0, op), groups,
                               (1, d))
    return out.squeeze(-2)


def _zero_stuff(x, dim, stride):
    """Puts stride - 1 zeros between neighbouring elements of `dim`: an index_select of the input with one zero
    slice appended."""
    n = x.shape[dim]
    if stride == 1 or n <= 1:
        return x
    shape = list(x.shape)
    shape[dim] = 1
    ext = _pf.cat([x, _pf.zeros(tuple(shape), dtype=x.dtype, device=x)], dim)
    src = _np.full((n - 1) * stride + 1, n, dtype=_np.int64)
    src[::stride] = _np.arange(n)
    return _pf.index_select(ext, dim, _index(src, x))


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The adjoint of conv3d, composed: the input with stride - 1 zeros between elements, padded by
    dilation (k - 1) - padding (plus output_padding after), convolved (conv3d) with the kernel flipped and its
    in/out channels swapped per group."""
    if input.dim() not in (4, 5):
        raise _C.InvalidArgumentError(f"conv_transpose3d: expected a 4-D (unbatched) or 5-D input, got {input.dim()}-D")
    s, p, op, d = (_tuple(v, 3, n) for v, n in ((stride, "stride"), (padding, "padding"),
                                               (output_padding, "output_padding"), (dilation, "dilation")))
    if any(o >= max(a, b) for o, a, b in zip(op, s, d)):
        raise _C.InvalidArgumentError("conv_transpose3d: output padding must be smaller than either stride or "
                                      f"dilation, got output_padding={op}, stride={s}, dilation={d}")
    x = input if input.dim() == 5 else input.unsqueeze(0)
    cin, cout_g = weight.shape[0], weight.shape[1]
    if x.shape[1] != cin or cin % groups:
        raise _C.InvalidArgumentError(f"conv_transpose3d: input with {x.shape[1]} channels does not match the weight "
                                      f"{tuple(weight.shape)} with groups={groups}")
    k = tuple(weight.shape[2:])
    for i in range(3):
        x = _zero_stuff(x, 2 + i, s[i])
    pads = []
    for i in reversed(range(3)):
        edge = d[i] * (k[i] - 1) - p[i]
        pads += [edge, edge + op[i]]
    x = pad(x, pads)
    w = weight.reshape((groups, cin // groups, cout_g) + k).transpose(1, 2).reshape((groups * cout_g, cin // groups)
                                                                                  + k).flip((2, 3, 4))
    out = _pf.conv3d(x, w, bias, 1, 0, d, groups)
    return out if input.dim() == 5 else out.squeeze(0)


# ------------------------------------------------ max pooling with indices


def _pool_out(n, k, s, p, d, ceil_mode):
    span = n + 2 * p - d * (k - 1) - 1
    o = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (o - 1) * s >= n + p:
        o -= 1  # PyTorch's rule: the last window must start inside the input or its left padding
    return o


def _window_argmax(x, coords):
    """The flat index (within each input plane) of the maximum of every pooling window, as PyTorch's
    return_indices gives. coords[i] is an (outputs, window) array of input positions along spatial dim i
    (outside the input: padding, -inf). The windows of the -inf-padded input are gathered by index_select, the
    argmax of each (its first maximum) is mapped through a table of plane positions."""
    nd = len(coords)
    spatial = tuple(x.shape[-nd:])
    lead = tuple(x.shape[:-nd])
    n = len(lead)
    outs = tuple(c.shape[0] for c in coords)
    kernel = tuple(c.shape[1] for c in coords)
    with _pf.no_grad():
        before = [max(0, -int(c.min())) for c in coords]
        after = [max(0, int(c.max()) - (size - 1)) for c, size in zip(coords, spatial)]
        pads = [v for i in reversed(range(nd)) for v in (before[i], after[i])]
        w = _pf.pad(x.detach(), pads, value=-_math.inf) if any(pads) else x.detach()
        for i in range(nd):
            dim = n + 2 * i
            w = _pf.index_select(w, dim, _index((coords[i] + before[i]).reshape(-1), x))
            w = w.reshape(tuple(w.shape[:dim]) + (outs[i], kernel[i]) + tuple(w.shape[dim + 1:]))
        w = w.permute(tuple(range(n)) + tuple(n + 2 * i for i in range(nd)) + tuple(n + 2 * i + 1 for i in range(nd)))
        arg = w.reshape(lead + outs + (-1,)).argmax(-1, keepdim=True)
        # plane index of (output position, window offset), row-major over the unpadded input
        table = _np.zeros(outs + kernel, dtype=_np.int64)
        plane_stride = 1
        for i in reversed(range(nd)):
            table = table + (coords[i] * plane_stride).reshape(
                [outs[i] if j == i else 1 for j in range(nd)] + [kernel[i] if j == i else 1 for j in range(nd)])
            plane_stride *= spatial[i]
        table = _index(table.reshape(outs + (-1,)), x)
        table = table.reshape((1,) * n + tuple(table.shape)).expand(lead + tuple(table.shape))
        return table.gather(-1, arg).squeeze(-1)


def _max_pool_indices(x, nd, kernel, stride, padding, dilation, ceil_mode):
    spatial = tuple(x.shape[-nd:])
    coords = []
    for i in range(nd):
        o = _pool_out(spatial[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode)
        coords.append(_np.arange(o)[:, None] * stride[i] + _np.arange(kernel[i])[None, :] * dilation[i] - padding[i])
    return _window_argmax(x, coords)


def _max_pool(op, nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    out = op(input, kernel_size, stride, padding, dilation, ceil_mode)
    if not return_indices:
        return out
    kernel = _tuple(kernel_size, nd, "kernel_size")
    strides = kernel if stride is None or (not isinstance(stride, _numbers.Integral) and len(stride) == 0) else \
        _tuple(stride, nd, "stride")
    indices = _max_pool_indices(input, nd, kernel, strides, _tuple(padding, nd, "padding"),
                                _tuple(dilation, nd, "dilation"), ceil_mode)
    return out, indices


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(_pf.max_pool1d, 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(_pf.max_pool2d, 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _max_pool(_pf.max_pool3d, 3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _max_unpool(nd, input, indices, kernel_size, stride, padding, output_size, name):
    """Each value written at its index in a zero plane (scatter), the inverse of max pooling's selection."""
    kernel = _tuple(kernel_size, nd, "kernel_size")
    strides = kernel if stride is None else _tuple(stride, nd, "stride")
    pads = _tuple(padding, nd, "padding")
    if input.dim() not in (nd + 1, nd + 2):
        raise _C.InvalidArgumentError(f"{name}: expected a {nd + 1}-D or {nd + 2}-D input, got {input.dim()}-D")
    if tuple(indices.shape) != tuple(input.shape):
        raise _C.InvalidArgumentError(f"{name}: expected the shape of indices {tuple(indices.shape)} to match the "
                                      f"input's {tuple(input.shape)}")
    spatial = tuple(input.shape[-nd:])
    default = tuple((n - 1) * s - 2 * p + k for n, s, p, k in zip(spatial, strides, pads, kernel))
    if output_size is None:
        size = default
    else:
        size = tuple(output_size)
        if len(size) == nd + 2:
            size = size[2:]
        if len(size) != nd:
            raise _C.InvalidArgumentError(f"output_size should be a sequence containing {nd} or {nd + 2} elements, but "
                                          f"it has a length of '{len(tuple(output_size))}'")
        lo = tuple(a - b + 1 for a, b in zip(default, strides))
        hi = tuple(a + b - 1 for a, b in zip(default, strides))
        if any(not a <= o <= b for o, a, b in zip(size, lo, hi)):
            raise _C.InvalidArgumentError(f"invalid output_size {tuple(size)} (dim must be between {lo} and {hi})")
    lead = tuple(input.shape[:-nd])
    plane = 1
    for o in size:
        plane *= o
    flat_in = input.reshape(lead + (-1,))
    out = _pf.zeros(lead + (plane,), dtype=input.dtype, device=input)
    out = out.scatter(len(lead), indices.reshape(lead + (-1,)), flat_in)
    return out.reshape(lead + size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size, "max_unpool1d")


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size, "max_unpool2d")


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size, "max_unpool3d")


# ------------------------------------------------ spatial transformers


def _align_corners_default(align_corners, name):
    if align_corners is None:
        _warnings.warn("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
                       "Please specify align_corners=True if the old behavior is desired. See the documentation of "
                       "grid_sample for details.", stacklevel=3)
        return False
    return bool(align_corners)


def _base_coords(n, align_corners, dtype):
    c = _np.linspace(-1.0, 1.0, n) if n > 1 else _np.zeros(1)
    if not align_corners:
        c = c * (n - 1) / n
    return c.astype(dtype)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid of an affine map: (N, H, W, 2) from theta (N, 2, 3) and size (N, C, H, W), or (N, D, H,
    W, 3) from (N, 3, 4) and (N, C, D, H, W); the base coordinates (x, y[, z], 1) times theta transposed."""
    align_corners = _align_corners_default(align_corners, "affine_grid")
    if not theta.dtype.is_floating_point:
        raise _C.InvalidArgumentError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = tuple(size)
    nd = len(size) - 2
    if nd not in (2, 3):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {list(size)}.")
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (nd, nd + 1) or theta.shape[0] != size[0]:
        raise _C.InvalidArgumentError(f"Expected a batch of {nd}D affine matrices of shape Nx{nd}x{nd + 1} for size "
                                      f"{list(size)}. Got {list(theta.shape)}.")
    if min(size) <= 0:
        raise _C.InvalidArgumentError(f"Expected non-zero, positive output size. Got {list(size)}")
    spatial = size[2:]
    ft = _np.float64 if theta.dtype == _C.dtype.float64 else _np.float32
    axes = [_base_coords(n, align_corners, ft) for n in spatial]  # (D,) H, W
    mesh = _np.meshgrid(*axes, indexing="ij")
    base = _np.stack(list(mesh[::-1]) + [_np.ones(spatial, dtype=ft)], axis=-1).reshape(1, -1, nd + 1)
    base = _pf.tensor(base, device=theta).to(theta.dtype)
    grid = base @ theta.transpose(1, 2)
    return grid.reshape((size[0],) + spatial + (nd,))


def _unnormalize(coord, n, align_corners):
    if align_corners:
        return (coord + 1) * ((n - 1) / 2)
    return ((coord + 1) * n - 1) / 2


def _reflect(coord, n, align_corners):
    """PyTorch's reflect_coordinates: the coordinate folded into [0, n - 1] (align_corners) or [-0.5, n - 0.5]
    by reflections at the bounds."""
    low, span = (0.0, n - 1.0) if align_corners else (-0.5, float(n))
    if span <= 0:
        return coord * 0.0
    d = (coord - low).abs()
    flips = (d / span).detach().floor()
    extra = d - flips * span
    odd = (flips - 2.0 * (flips / 2.0).floor()) != 0
    return _pf.where(odd, span - extra, extra) + low


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Samples a 4-D (N, C, H, W) or 5-D (N, C, D, H, W) input at the grid's normalised (x, y[, z]) positions:
    each corner of the cell a gather from the flattened input, weighted by the (bi/tri)linear weights
    (differentiable in the input and the grid), or the nearest element."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise _C.InvalidArgumentError("nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or "
                                      f"'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise _C.InvalidArgumentError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                                      f"'reflection', but got: '{padding_mode}'")
    align_corners = _align_corners_default(align_corners, "grid_sample")
    if mode == "bicubic":
        raise _NotSupportedError("grid_sample: mode='bicubic' is not supported; use mode 'bilinear' or 'nearest' "
                                 "(docs/nn.md)")
    nd = input.dim() - 2
    if nd not in (2, 3) or grid.dim() != nd + 2 or grid.shape[-1] != nd or grid.shape[0] != input.shape[0]:
        raise _C.InvalidArgumentError("grid_sample: expected a 4-D input (N, C, H, W) with a grid (N, H_out, W_out, "
                                      "2), or a 5-D input with a grid (N, D_out, H_out, W_out, 3), of the same N; got "
                                      f"{tuple(input.shape)} and {tuple(grid.shape)}")
    n, c = input.shape[0], input.shape[1]
    spatial = tuple(input.shape[2:])
    out_spatial = tuple(grid.shape[1:-1])
    count = 1
    for o in out_spatial:
        count *= o
    coords = []
    for i, size in enumerate(spatial):  # grid's last entry is x (the last dim), then y, z
        t = _unnormalize(grid[..., nd - 1 - i], size, align_corners)
        if padding_mode == "reflection":
            t = _reflect(t, size, align_corners)
        if padding_mode != "zeros":
            t = t.clamp(0, size - 1)
        coords.append(t)
    plane = input.reshape((n, c, -1))

    def tap(points):
        """input at integer positions, zero outside."""
        inside, flat, stride = None, None, 1
        for p, size in zip(reversed(points), reversed(spatial)):
            ok = _pf.logical_and(p >= 0, p <= size - 1)
            inside = ok if inside is None else _pf.logical_and(inside, ok)
            term = p.clamp(0, size - 1) * stride
            flat = term if flat is None else flat + term
            stride *= size
        flat = flat.to(_C.dtype.int64).reshape((n, 1, count))
        v = plane.gather(2, flat.expand((n, c, count))).reshape((n, c) + out_spatial)
        return v * inside.to(input.dtype).unsqueeze(1)

    if mode == "nearest":
        return tap([t.detach().round() for t in coords])
    lows = [t.detach().floor() for t in coords]
    fracs = [(t - lo).unsqueeze(1) for t, lo in zip(coords, lows)]
    out = None
    for corner in range(2 ** nd):
        bits = [(corner >> i) & 1 for i in range(nd)]
        weight = None
        for b, f in zip(bits, fracs):
            wi = f if b else 1 - f
            weight = wi if weight is None else weight * wi
        term = tap([lo + b for lo, b in zip(lows, bits)]) * weight
        out = term if out is None else out + term
    return out


# ------------------------------------------------ padding

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_source(n, before, after, mode, dim, shape, pad):
    """The input positions that fill each output position of one padded dim (negative pads crop)."""
    if mode == "reflect" and (before >= n or after >= n):
        raise _C.InvalidArgumentError("pad: padding size should be less than the corresponding input dimension, but "
                                      f"got padding {tuple(pad)} at dimension {dim} of input {list(shape)}")
    if n + min(before, 0) + min(after, 0) <= 0:
        raise _C.InvalidArgumentError(f"pad: padding {tuple(pad)} crops all of dimension {dim} of input {list(shape)}")
    if mode == "circular" and (before > n or after > n):
        raise _C.InvalidArgumentError("pad: padding value causes wrapping around more than once")
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
        raise _C.InvalidArgumentError(f'Padding mode "{mode}" doesn\'t take in value argument')
    pad = list(pad)
    if len(pad) % 2:
        raise _C.InvalidArgumentError(f"pad: the padding must have an even length (pairs of before/after), got {pad}")
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
        out = _pf.index_select(out, dim, _index(src, input))
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
    picked = _pf.index_select(x, dim, _index(idx, x))
    shape = list(x.shape)
    shape[dim:dim + 1] = [o, k]
    return picked.reshape(shape).amax(dim + 1)


def _adaptive_output_size(output_size, spatial, fn):
    sizes = (output_size,) * len(spatial) if isinstance(output_size, _numbers.Integral) else tuple(output_size)
    if len(sizes) != len(spatial):
        raise _C.InvalidArgumentError(f"{fn}: output_size must have {len(spatial)} entries, got {output_size}")
    sizes = tuple(s if o is None else o for o, s in zip(sizes, spatial))
    if any(o < 0 for o in sizes):
        raise _C.InvalidArgumentError(f"{fn}: elements of output_size must be greater than or equal to 0, got {sizes}")
    return sizes


def _adaptive_max_pool(input, output_size, return_indices, nd, fn):
    if input.dim() not in (nd + 1, nd + 2):
        raise _C.InvalidArgumentError(f"{fn}: expected a {nd + 1}-D or {nd + 2}-D input, got {input.dim()}-D")
    spatial = tuple(input.shape[-nd:])
    sizes = _adaptive_output_size(output_size, spatial, fn)
    if any(s == 0 for s in input.shape[-nd - 1:]):
        raise _C.InvalidArgumentError(f"{fn}: expected non-empty channel and spatial dims, got input of shape "
                                      f"{tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"{fn}: expected a floating-point input, got {input.dtype}")
    if nd == 2 and all(o > 0 and s % o == 0 for s, o in zip(spatial, sizes)):
        k = tuple(s // o for s, o in zip(spatial, sizes))
        out = _pf.max_pool2d(input, k, k)  # equal windows: one pooling kernel
    else:
        out = input
        for i, o in enumerate(sizes):
            out = _adaptive_max_dim(out, input.dim() - nd + i, o)
    if not return_indices:
        return out
    coords = []
    for n, o in zip(spatial, sizes):
        # short windows repeat their last position, after the real one: argmax keeps the first
        starts, ends = _adaptive_windows(n, o)
        k = max(e - s for s, e in zip(starts, ends))
        coords.append(_np.array([[min(s + j, e - 1) for j in range(k)] for s, e in zip(starts, ends)],
                                dtype=_np.int64).reshape(o, k))
    return out, _window_argmax(input, coords)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, output_size, return_indices, 1, "adaptive_max_pool1d")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max_pool(input, output_size, return_indices, 2, "adaptive_max_pool2d")


def adaptive_avg_pool1d(input, output_size):
    if input.dim() not in (2, 3):
        raise _C.InvalidArgumentError(f"adaptive_avg_pool1d: expected a 2-D or 3-D input, got {input.dim()}-D")
    size = output_size if isinstance(output_size, _numbers.Integral) else tuple(output_size)[0]
    return _pf.adaptive_avg_pool2d(input.unsqueeze(-2), (1, size)).squeeze(-2)


# ------------------------------------------------ interpolation

_INTERP_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _interp_sizes(input, size, scale_factor, recompute_scale_factor):
    """(output sizes, scales for the source-index formula or None per dim), as torch.nn.functional.interpolate."""
    nd = input.dim() - 2
    spatial = tuple(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise _C.InvalidArgumentError("only one of size or scale_factor should be defined")
    if size is not None:
        sizes = (size,) * nd if isinstance(size, _numbers.Integral) else tuple(size)
        if len(sizes) != nd:
            raise _C.InvalidArgumentError("Input and output must have the same number of spatial dimensions, but got "
                                          f"input with spatial dimensions of {list(spatial)} and output size of "
                                          f"{list(sizes)}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                                          "format and output size in (o1, o2, ...,oK) format.")
        return tuple(int(s) for s in sizes), (None,) * nd
    if scale_factor is None:
        raise _C.InvalidArgumentError("either size or scale_factor should be defined")
    scales = (float(scale_factor),) * nd if isinstance(scale_factor, _numbers.Real) else tuple(map(float, scale_factor))
    if len(scales) != nd:
        raise _C.InvalidArgumentError("Input and scale_factor must have the same number of spatial dimensions, but got "
                                      f"input with spatial dimensions of {list(spatial)} and scale_factor of shape "
                                      f"{list(scales)}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                                      "and scale_factor in (s1, s2, ...,sK) format.")
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
    return _pf.index_select(x, dim, _index(_np.minimum(src, n_in - 1), x))


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
    w1 = _pf.tensor(w1.reshape(shape), device=x).to(x.dtype)
    lo = _pf.index_select(x, dim, _index(i0, x))
    hi = _pf.index_select(x, dim, _index(i1, x))
    return lo + (hi - lo) * w1


_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) bicubic kernel parameter


def _interp_cubic(x, dim, n_out, scale, align_corners):
    """PyTorch's bicubic resampling along one dim (the 2-D kernel is separable): four neighbours, clamped to
    the edge, weighted by the cubic convolution kernel with A = -0.75; source positions are not clamped at 0."""
    n_in = x.shape[dim]
    ft = _math_dtype(x)
    s = _scale(n_in, n_out, scale, align_corners, ft)
    dst = _np.arange(n_out, dtype=ft)
    src = dst * s if align_corners else s * (dst + ft(0.5)) - ft(0.5)
    base = _np.floor(src).astype(_np.int64)
    t = (src - base).astype(ft)
    a = ft(_CUBIC_A)

    def near(z):  # |z| <= 1
        return ((a + 2) * z - (a + 3)) * z * z + 1

    def far(z):  # 1 < |z| < 2
        return ((a * z - 5 * a) * z + 8 * a) * z - 4 * a

    weights = (far(t + 1), near(t), near(1 - t), far(2 - t))
    shape = [1] * x.dim()
    shape[dim] = n_out
    out = None
    for k, w in enumerate(weights):
        idx = _np.clip(base - 1 + k, 0, n_in - 1)
        term = _pf.index_select(x, dim, _index(idx, x)) * _pf.tensor(w.astype(ft).reshape(shape),
                                                                              device=x).to(x.dtype)
        out = term if out is None else out + term
    return out


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizes the spatial dims of an (N, C, ...) input: 'nearest', 'nearest-exact', 'linear' (3-D),
    'bilinear' (4-D), 'trilinear' (5-D) and 'area', one spatial dim at a time (index_select of the
    source positions, blended for the linear modes)."""
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise _C.InvalidArgumentError("align_corners option can only be set with the interpolating modes: "
                                          "linear | bilinear | bicubic | trilinear")
    elif mode in _INTERP_DIMS:
        align_corners = bool(align_corners)
    elif mode == "bicubic":
        align_corners = bool(align_corners)
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
        raise _C.InvalidArgumentError("recompute_scale_factor is not meaningful with an explicit size.")
    sizes, scales = _interp_sizes(input, size, scale_factor, recompute_scale_factor)
    if any(s <= 0 for s in sizes):
        raise _C.InvalidArgumentError(f"interpolate: output sizes must be greater than 0, got {list(sizes)}")
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
        if mode == "bicubic":
            out = _interp_cubic(out, dim, sizes[i], scales[i], align_corners)
        elif mode in _INTERP_DIMS:
            out = _interp_linear(out, dim, sizes[i], scales[i], align_corners)
        elif sizes[i] != input.shape[dim] or scales[i] not in (None, 1.0):
            out = _interp_nearest(out, dim, sizes[i], scales[i], mode == "nearest-exact")
    return out


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def rotary_kv_cache_(q, k, v, cos, sin, position, k_cache, v_cache):
    """A decode step's apply_rotary_emb of q and k and its key/value cache writes in one call (one kernel):
    returns q rotated and writes k rotated and v into k_cache and v_cache ([B, KV, L, D]) at positions
    position .. position + T - 1 of their third dim, in place. q [B, H, T, D]; k, v [B, KV, T, D]; cos, sin
    [T, D] or [B, 1, T, D] (rows at positions of their own); one floating dtype. position: an int64 tensor
    of one element, which may live on the device (a captured decode step reads it there); one past the
    cache raises IndexError (on the GPU at the next wait) and leaves the caches as they were. Not
    differentiable. Not in torch.nn.functional (an LLM building block); pf.rotary_kv_cache returns new
    caches instead."""
    return _C.rotary_kv_cache_(q, k, v, cos, sin, position, k_cache, v_cache)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def apply_rotary_emb(x, cos, sin):
    """Rotary position embedding, Hugging Face's rotate_half convention (as Llama's): x * cos +
    rotate_half(x) * sin, where rotate_half(x) = cat(-x[..., d/2:], x[..., :d/2]) pairs dimension i
    with i + d/2. cos and sin ([positions, d], each frequency repeated for both halves) broadcast
    against x ([..., positions, d]). Not in torch.nn.functional (an LLM building block).

    Outside autograd, with cos and sin [positions, d] in x's dtype and x of 2 to 4 dims, one
    rotary_embedding call computes it in one pass (a language model's decode step); otherwise the
    formula's elementwise ops."""
    if x.shape[-1] % 2:
        raise ValueError(f"apply_rotary_emb: the last dim ({x.shape[-1]}) must be even (pairs of dims rotate)")
    table = (x.shape[-2], x.shape[-1]) if x.dim() >= 2 else None
    if (2 <= x.dim() <= 4 and x.is_floating_point() and tuple(cos.shape) == table and tuple(sin.shape) == table
            and cos.dtype == x.dtype and sin.dtype == x.dtype
            and not (_pf.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad))):
        return _C.rotary_embedding(x, cos, sin)
    half = x.shape[-1] // 2
    return x * cos + _pf.cat([-x[..., half:], x[..., :half]], -1) * sin


__all__ += [
    "apply_rotary_emb", "rotary_kv_cache_", "relu6", "hardsigmoid", "hardswish", "mish", "selu", "celu", "softsign", "tanhshrink", "logsigmoid", "glu",
    "prelu", "normalize", "cosine_similarity", "pairwise_distance", "huber_loss", "soft_margin_loss",
    "cosine_embedding_loss", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_avg_pool1d", "interpolate",
    "upsample", "upsample_nearest", "upsample_bilinear",
]
__all__ += [n for n in ("elu", "hardtanh", "pad") if n not in __all__]
__all__ += [
    "softmin", "threshold", "margin_ranking_loss", "hinge_embedding_loss", "poisson_nll_loss", "gaussian_nll_loss",
    "multilabel_soft_margin_loss", "multi_margin_loss", "triplet_margin_loss", "dropout1d", "dropout2d", "dropout3d",
    "pixel_shuffle", "pixel_unshuffle", "unfold", "fold", "bilinear", "instance_norm", "conv_transpose1d",
    "conv_transpose3d", "max_unpool1d", "max_unpool2d", "max_unpool3d", "affine_grid", "grid_sample",
]
