"""Pooling layers: MaxPool1d/2d/3d (return_indices too), MaxUnpool1d/2d/3d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d and
AdaptiveMaxPool1d/2d over the functional ops.

The settings are stored as PyTorch stores them (AvgPool1d as 1-tuples, the
others as given), so repr() matches. AvgPool's divisor_override is not supported.
"""

from .. import NotSupportedError
from . import functional as F
from .module import _OpModule
from .utils import _nd_classes, _ntuple, _op_classes, _single


class _MaxPoolNd(_OpModule):
    # the op's order: ceil_mode before return_indices (the constructor takes them the other way round)
    _settings = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
    _unshown = ("return_indices",)

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__(kernel_size, stride if stride is not None else kernel_size, padding, dilation, ceil_mode,
                         return_indices)


MaxPool1d, MaxPool2d, MaxPool3d = _op_classes(_MaxPoolNd, MaxPool1d=F.max_pool1d, MaxPool2d=F.max_pool2d,
                                              MaxPool3d=F.max_pool3d)


class _AvgPoolNd(_OpModule):
    _settings = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad")
    _unshown = ("ceil_mode", "count_include_pad")

    def __init__(self, kernel_size, stride, padding, ceil_mode, count_include_pad):
        super().__init__(kernel_size, stride if stride is not None else kernel_size, padding, ceil_mode,
                         count_include_pad)


class AvgPool1d(_AvgPoolNd):
    _fn = staticmethod(F.avg_pool1d)

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__(_single(kernel_size), _single(stride if stride is not None else kernel_size),
                         _single(padding), ceil_mode, count_include_pad)


class _AvgPoolWithDivisor(_AvgPoolNd):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        if divisor_override is not None:
            raise NotSupportedError(f"nn.{type(self).__name__}: divisor_override is not supported; see docs/nn.md")
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override


AvgPool2d, AvgPool3d = _op_classes(_AvgPoolWithDivisor, AvgPool2d=F.avg_pool2d, AvgPool3d=F.avg_pool3d)


class _AdaptiveAvgPoolNd(_OpModule):
    """Average pooling to a fixed output size (an int, or a tuple whose entries may be None: keep that size)."""

    _settings = ("output_size",)

    def __init__(self, output_size):
        super().__init__(output_size)


AdaptiveAvgPool1d, AdaptiveAvgPool2d = _op_classes(_AdaptiveAvgPoolNd, AdaptiveAvgPool1d=F.adaptive_avg_pool1d,
                                                   AdaptiveAvgPool2d=F.adaptive_avg_pool2d)


class _AdaptiveMaxPoolNd(_OpModule):
    """Max over PyTorch's adaptive windows; output_size an int or a tuple whose entries may be None."""

    _settings = ("output_size", "return_indices")
    _unshown = ("return_indices",)

    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size, return_indices)


AdaptiveMaxPool1d, AdaptiveMaxPool2d = _op_classes(_AdaptiveMaxPoolNd, AdaptiveMaxPool1d=F.adaptive_max_pool1d,
                                                   AdaptiveMaxPool2d=F.adaptive_max_pool2d)


class _MaxUnpoolNd(_OpModule):
    _settings = ("kernel_size", "stride", "padding")

    def __init__(self, kernel_size, stride=None, padding=0):
        t = _ntuple(self._dim)
        super().__init__(t(kernel_size), t(stride if stride is not None else kernel_size), t(padding))

    def forward(self, input, indices, output_size=None):
        return self._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)


MaxUnpool1d, MaxUnpool2d, MaxUnpool3d = _nd_classes("MaxUnpool", _MaxUnpoolNd,
                                                    (F.max_unpool1d, F.max_unpool2d, F.max_unpool3d))
