"""Fold and Unfold: sliding blocks to columns (F.unfold, im2col) and back, overlaps summed (F.fold, col2im)."""

from . import functional as F
from .module import _OpModule


class Fold(_OpModule):
    _fn = staticmethod(F.fold)
    _settings = ("output_size", "kernel_size", "dilation", "padding", "stride")

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(output_size, kernel_size, dilation, padding, stride)


class Unfold(_OpModule):
    _fn = staticmethod(F.unfold)
    _settings = ("kernel_size", "dilation", "padding", "stride")

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(kernel_size, dilation, padding, stride)
