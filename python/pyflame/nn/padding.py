"""Padding layers: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and CircularPad (1d/2d/3d) over F.pad."""

from . import functional as F
from .module import Module
from .utils import _layer_class, _ntuple


class _PadNd(Module):
    _mode = "constant"
    _dim = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(2 * self._dim)(padding)

    def forward(self, input):
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


def _pad_classes(prefix, base, mode):
    """prefix1d, prefix2d and prefix3d: `base` padding the last 1, 2 or 3 dims in `mode`."""
    return tuple(_layer_class(f"{prefix}{dim}d", base, _mode=mode, _dim=dim) for dim in (1, 2, 3))


ConstantPad1d, ConstantPad2d, ConstantPad3d = _pad_classes("ConstantPad", _ConstantPadNd, "constant")
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = _pad_classes("ReflectionPad", _PadNd, "reflect")
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = _pad_classes("ReplicationPad", _PadNd, "replicate")
CircularPad1d, CircularPad2d, CircularPad3d = _pad_classes("CircularPad", _PadNd, "circular")


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


ZeroPad1d, ZeroPad2d, ZeroPad3d = _pad_classes("ZeroPad", _ZeroPadNd, "constant")
