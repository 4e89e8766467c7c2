"""Convolution layers: Conv1d, Conv2d, Conv3d and ConvTranspose1d/2d/3d over F.conv*d (torch.nn's arguments and
init)."""


from . import functional as F
from . import init
from .module import Module, _changed_settings
from .parameter import _add_parameters
from .utils import _nd_classes, _ntuple, _reverse_repeat_tuple

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


class _ConvNd(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed, output_padding,
                 groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # pad()'s argument for the non-'zeros' padding modes (last spatial dim first).
        if isinstance(padding, str):
            self._reversed_padding_repeated_twice = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    self._reversed_padding_repeated_twice[2 * i] = total // 2
                    self._reversed_padding_repeated_twice[2 * i + 1] = total - total // 2
        else:
            self._reversed_padding_repeated_twice = _reverse_repeat_tuple(padding, 2)
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        _add_parameters(self, dtype, device, weight=(*shape, *kernel_size), bias=(out_channels,) if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        init._default_weight_and_bias_(self.weight, self.bias)

    def extra_repr(self):
        n = len(self.kernel_size)
        return ", ".join([f"{self.in_channels}, {self.out_channels}",
                          f"kernel_size={self.kernel_size}, stride={self.stride}",
                          *_changed_settings(self, padding=(0,) * n, dilation=(1,) * n, output_padding=(0,) * n,
                                             groups=1),
                          *(["bias=False"] if self.bias is None else []),
                          *_changed_settings(self, padding_mode="zeros")])

    def _conv_forward(self, conv, input, zero_padding):
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, self.weight, self.bias, self.stride, zero_padding, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class _Conv(_ConvNd):
    """Conv1d/2d/3d: `_dim` spatial dims, `_fn` the functional op."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        t = _ntuple(self._dim)
        super().__init__(in_channels, out_channels, t(kernel_size), t(stride),
                         padding if isinstance(padding, str) else t(padding), t(dilation), False, t(0), groups,
                         bias, padding_mode, device, dtype)

    def forward(self, input):
        return self._conv_forward(self._fn, input, _ntuple(self._dim)(0))


Conv1d, Conv2d, Conv3d = _nd_classes("Conv", _Conv, (F.conv1d, F.conv2d, F.conv3d))


class _ConvTransposeNd(_ConvNd):
    """ConvTranspose1d/2d/3d: `_dim` spatial dims, `_fn` the functional op."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        t = _ntuple(self._dim)
        super().__init__(in_channels, out_channels, t(kernel_size), t(stride), t(padding), t(dilation), True,
                         t(output_padding), groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        """output_padding that makes the output `output_size` (PyTorch's rule), else the module's."""
        if output_size is None:
            return self.output_padding
        output_size = list(output_size)
        spatial = len(self.kernel_size)
        non_spatial = 2 if input.dim() == spatial + 2 else 1
        if len(output_size) == non_spatial + spatial:
            output_size = output_size[non_spatial:]
        if len(output_size) != spatial:
            raise ValueError(f"ConvTranspose{spatial}D: for {input.dim()}D input, output_size must have {spatial} "
                             f"or {non_spatial + spatial} elements (got {len(output_size)})")
        min_sizes = [(input.shape[d + non_spatial] - 1) * self.stride[d] - 2 * self.padding[d]
                     + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(spatial)]
        max_sizes = [m + s - 1 for m, s in zip(min_sizes, self.stride)]
        for size, lo, hi in zip(output_size, min_sizes, max_sizes):
            if size < lo or size > hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {min_sizes} "
                                 f"to {max_sizes} (for an input of {tuple(input.shape[non_spatial:])})")
        return tuple(o - m for o, m in zip(output_size, min_sizes))

    def forward(self, input, output_size=None):
        return self._fn(input, self.weight, self.bias, self.stride, self.padding,
                        self._output_padding(input, output_size), self.groups, self.dilation)


ConvTranspose1d, ConvTranspose2d, ConvTranspose3d = _nd_classes(
    "ConvTranspose", _ConvTransposeNd, (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d))
