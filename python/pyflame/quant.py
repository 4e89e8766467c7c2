"""pyflame.quant: weight-only quantization (int8 and int4) of linear layers (docs/llm.md).

A weight [out, in] is cut into groups of `group_size` consecutive input columns;
each group keeps a scale (in the weight's dtype) and a zero point, and each
weight a code of `bits` bits: code = clamp(round(w / scale) + zero, 0, 2^bits - 1),
w ~ (code - zero) * scale. The group's range is widened to hold 0, so the zero
point is a code and a weight is within scale / 2 of its dequantized value (one
scale where two roundings meet at the top of the range).
int4 codes are packed two to a byte (the even column in the low nibble).

A QuantizedLinear calls the quantized_linear op: for one row of input on the GPU
(a decode step) one GEMV reads the codes, scales and zero points and never
writes the weight, so int8 reads about half of bf16's bytes and int4 about a
quarter; the CPU dequantizes a weight row at a time into a buffer for up to 16
rows of input. More rows (a prompt) dequantize the weight once per call and run
the GEMM. Gradients reach the input (not the codes) through the dequantized weight.
"""

import pyflame as pf

from .nn import Module, Parameter

__all__ = ["QuantizedTensor", "quantize_weight", "QuantizedLinear"]

_EPS = {pf.bfloat16: 2.0 ** -7, pf.float16: 2.0 ** -10}  # the relative spacing of the 16-bit scales


class QuantizedTensor:
    """A quantized 2-D weight: `codes` (uint8 [out, in], or [out, in / 2] packed for 4 bits), `scales` and
    `zeros` ([out, in / group_size]; scales in the weight's dtype, zero points uint8). dequantize() gives
    the weight back in the scales' dtype."""

    def __init__(self, codes, scales, zeros, bits, group_size, shape):
        self.codes, self.scales, self.zeros = codes, scales, zeros
        self.bits, self.group_size, self.shape = bits, group_size, tuple(shape)

    @property
    def dtype(self):
        return self.scales.dtype

    @property
    def device(self):
        return self.codes.device

    def dequantize(self):
        return dequantize(self.codes, self.scales, self.zeros, self.bits, self.group_size)

    def __repr__(self):
        return (f"QuantizedTensor(shape={self.shape}, bits={self.bits}, group_size={self.group_size}, "
                f"dtype={self.dtype}, device={self.device})")


def _check(bits, group_size, shape, what):
    if bits not in (4, 8):
        raise ValueError(f"{what}: bits must be 8 or 4, got {bits}")
    if len(shape) != 2:
        raise ValueError(f"{what}: takes a 2-D weight [out, in], got shape {tuple(shape)}")
    if group_size <= 0 or shape[1] % group_size or (bits == 4 and group_size % 2):
        raise ValueError(f"{what}: the input size {shape[1]} must be a multiple of group_size ({group_size}), "
                         "itself even for 4 bits")


def quantize_weight(w, bits=8, group_size=128):
    """A QuantizedTensor of the floating-point weight w [out, in] (see the module's docstring), made on w's device."""
    _check(bits, group_size, w.shape, "quantize_weight")
    if not w.is_floating_point():
        raise TypeError(f"quantize_weight: needs a floating-point weight, got {w.dtype}")
    out, inp = w.shape
    top = 2 ** bits - 1
    with pf.no_grad():
        groups = w.detach().float().reshape(out, inp // group_size, group_size)
        low, high = groups.amin(-1).clamp(max=0.0), groups.amax(-1).clamp(min=0.0)
        # The codes are made with the scale as stored in w's dtype, rounded up by a margin so that the
        # group's range still fits in 2^bits codes (an all-zero group: any scale, zero codes).
        scale = ((high - low) / top * (1 + _EPS.get(w.dtype, 0.0))).clamp(min=1e-12).to(w.dtype).float()
        zero = (-low / scale).round().clamp(0, top)
        codes = ((groups / scale.unsqueeze(-1)).round() + zero.unsqueeze(-1)).clamp(0, top).to(pf.uint8)
        codes = codes.reshape(out, inp)
        if bits == 4:
            pairs = codes.reshape(out, inp // 2, 2)
            codes = pairs[..., 0] | (pairs[..., 1] << 4)
        return QuantizedTensor(codes.contiguous(), scale.to(w.dtype), zero.to(pf.uint8), bits, group_size, w.shape)


def dequantize(codes, scales, zeros, bits, group_size):
    """The weight [out, in] in scales' dtype from codes, scales and zero points (see quantize_weight)."""
    if bits == 4:
        codes = pf.stack([codes & 15, codes >> 4], -1).reshape(codes.shape[0], -1)
    out, inp = codes.shape
    centred = codes.to(scales.dtype).reshape(out, inp // group_size, group_size) - zeros.to(scales.dtype).unsqueeze(-1)
    return (centred * scales.unsqueeze(-1)).reshape(out, inp)


class QuantizedLinear(Module):
    """nn.Linear with a weight-only quantized weight: the codes, scales and zero points are buffers (they move
    with .to() and are saved in state_dict as qweight, scales, zeros); the bias stays a parameter."""

    def __init__(self, in_features, out_features, bias=True, bits=8, group_size=128, dtype=None, device=None):
        super().__init__()
        _check(bits, group_size, (out_features, in_features), "QuantizedLinear")
        self.in_features, self.out_features, self.bits, self.group_size = in_features, out_features, bits, group_size
        dtype = dtype or pf.get_default_dtype()
        groups = in_features // group_size
        self.register_buffer("qweight", pf.zeros(out_features, in_features * bits // 8, dtype=pf.uint8, device=device))
        self.register_buffer("scales", pf.ones(out_features, groups, dtype=dtype, device=device))
        self.register_buffer("zeros", pf.zeros(out_features, groups, dtype=pf.uint8, device=device))
        self.bias = Parameter(pf.zeros(out_features, dtype=dtype, device=device)) if bias else None

    @classmethod
    def from_linear(cls, linear, bits=8, group_size=128):
        """The layer with linear's weight quantized (on its device, in its dtype) and its bias kept."""
        w = linear.weight
        q = quantize_weight(w, bits, group_size)
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, bits, group_size,
                    dtype=w.dtype, device=w.device)
        layer.qweight, layer.scales, layer.zeros = q.codes, q.scales, q.zeros
        if linear.bias is not None:
            layer.bias = Parameter(linear.bias.detach().clone())
        return layer

    @property
    def weight(self):
        return QuantizedTensor(self.qweight, self.scales, self.zeros, self.bits, self.group_size,
                               (self.out_features, self.in_features))

    def forward(self, x):
        return pf._C.quantized_linear(x, self.qweight, self.scales, self.zeros, self.bias, self.bits, self.group_size)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"bits={self.bits}, group_size={self.group_size}")
