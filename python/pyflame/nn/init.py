"""Parameter initialisation, as torch.nn.init: each function fills a tensor in place and returns it.

Fills run under no_grad, as PyTorch's: initialising a parameter is not part of
any graph. Random draws come from pf.rand/pf.randn, so pf.manual_seed makes them
reproducible; they are drawn in the tensor's dtype (float32 for float16 and
bfloat16, then rounded once) on the current device and copied into the tensor.
"""

import math
import warnings

import numpy as np

from .. import _C
from .._creation import from_numpy as tensor_from_numpy
from .._creation import rand, randn
from ..autograd.grad_mode import no_grad


def _float_tensor(tensor, fn):
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"{fn}: expected a pyflame Tensor, got {type(tensor).__name__}")
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"{fn}: needs a floating-point tensor, got {tensor.dtype}")
    return tensor


def _draw_dtype(tensor):
    return tensor.dtype if tensor.dtype in (_C.dtype.float32, _C.dtype.float64) else _C.dtype.float32


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's values)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                        "conv_transpose3d", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


@no_grad()
def uniform_(tensor, a=0.0, b=1.0):
    """Fills with draws from U(a, b)."""
    _float_tensor(tensor, "uniform_")
    return tensor.copy_(rand(*tensor.shape, dtype=_draw_dtype(tensor)) * (b - a) + a)


@no_grad()
def normal_(tensor, mean=0.0, std=1.0):
    """Fills with draws from N(mean, std^2)."""
    _float_tensor(tensor, "normal_")
    return tensor.copy_(randn(*tensor.shape, dtype=_draw_dtype(tensor)) * std + mean)


@no_grad()
def constant_(tensor, val):
    return tensor.fill_(val)


@no_grad()
def ones_(tensor):
    return tensor.fill_(1)


@no_grad()
def zeros_(tensor):
    return tensor.fill_(0)


def xavier_uniform_(tensor, gain=1.0):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(-bound, bound) with bound = gain * sqrt(3 / fan) (He et al., 2015); a zero-element tensor is left as is."""
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """N(0, std^2) with std = gain / sqrt(fan); a zero-element tensor is left as is."""
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


def _erfinv(y):
    """erfinv of a float64 tensor in (-1, 1): Giles' single-precision approximation, then two Newton steps on
    erf (float64 accuracy); composed of table ops so it runs where the tensor is."""
    w = -((1.0 - y) * (1.0 + y)).log()
    central, tail = w - 2.5, w.sqrt() - 3.0
    p_c = _C._full(tuple(y.shape), 2.81022636e-08, dtype=y.dtype, device=y)
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        p_c = p_c * central + c
    p_t = _C._full(tuple(y.shape), -0.000200214257, dtype=y.dtype, device=y)
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        p_t = p_t * tail + c
    x = _C.where(w < 5.0, p_c, p_t) * y
    for _ in range(2):
        x = x - (x.erf() - y) / ((-(x * x)).exp() * (2.0 / math.sqrt(math.pi)))
    return x


@no_grad()
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fills with draws from N(mean, std^2) truncated to [a, b], by PyTorch's method: uniform draws between
    the bounds' normal CDF values mapped back through the inverse CDF (computed in float64)."""
    _float_tensor(tensor, "trunc_normal_")

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
                      "may be incorrect.", stacklevel=2)
    lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    u = rand(*tensor.shape, dtype=_C.dtype.float64, generator=generator) * (2 * hi - 2 * lo) + (2 * lo - 1)
    # Keep u inside (-1, 1): erfinv(+-1) is infinite (the clamp below brings such draws to the bounds anyway).
    u = u.clamp(min=-1.0 + 1e-16, max=1.0 - 1e-16)
    x = (_erfinv(u) * (std * math.sqrt(2.0)) + mean).clamp(min=a, max=b)
    return tensor.copy_(x.to(tensor.device, tensor.dtype))


@no_grad()
def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix, as PyTorch: QR of an N(0, 1) draw of shape (size(0), numel / size(0)),
    Q's columns signed by R's diagonal, times gain. The QR runs on the host in float64 (NumPy): it is
    initialisation-time only."""
    _float_tensor(tensor, "orthogonal_")
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = randn(rows, cols, dtype=_draw_dtype(tensor), generator=generator).to("cpu").numpy().astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    out = tensor_from_numpy(np.ascontiguousarray(q * gain)).reshape(tuple(tensor.shape))
    return tensor.copy_(out.to(tensor.device, tensor.dtype))


@no_grad()
def eye_(tensor):
    """The identity matrix (ones on the main diagonal of a 2-D tensor, zeros elsewhere)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return tensor.copy_(tensor_from_numpy(np.eye(*tensor.shape)).to(tensor.device, tensor.dtype))


@no_grad()
def dirac_(tensor, groups=1):
    """The Dirac delta of a 3-, 4- or 5-D convolution weight: a convolution with it copies each input channel
    (per group) to the output channel of the same index."""
    if tensor.dim() not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    weight = np.zeros(sizes)
    centre = tuple(k // 2 for k in sizes[2:])
    for g in range(groups):
        for d in range(min(out_per_group, sizes[1])):
            weight[(g * out_per_group + d, d) + centre] = 1
    return tensor.copy_(tensor_from_numpy(weight).to(tensor.device, tensor.dtype))


def _default_weight_and_bias_(weight, bias):
    """Linear and convolution layers' default: kaiming_uniform_(a=sqrt(5)) weights, that is
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias (if any) in the same bound (as torch)."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)
