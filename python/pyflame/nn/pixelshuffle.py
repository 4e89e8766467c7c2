"""PixelShuffle and PixelUnshuffle: channels to spatial blocks and back (F.pixel_shuffle, F.pixel_unshuffle)."""

from . import functional as F
from .module import _OpModule


class PixelShuffle(_OpModule):
    _fn = staticmethod(F.pixel_shuffle)
    _settings = ("upscale_factor",)

    def __init__(self, upscale_factor):
        super().__init__(upscale_factor)


class PixelUnshuffle(_OpModule):
    _fn = staticmethod(F.pixel_unshuffle)
    _settings = ("downscale_factor",)

    def __init__(self, downscale_factor):
        super().__init__(downscale_factor)
