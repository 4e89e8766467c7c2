"""Activation layers: ReLU, GELU, SiLU, Sigmoid, Tanh, LeakyReLU, Softmax, LogSoftmax.

inplace=True writes the result into the input, as PyTorch does.
"""

import warnings

from . import functional as F
from .module import Module


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.relu_() if self.inplace else F.relu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return input.silu_() if self.inplace else F.silu(input)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        out = F.leaky_relu(input, self.negative_slope)
        return input.copy_(out) if self.inplace else out

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


def _softmax_dim(name, ndim):
    # PyTorch's legacy choice when no dim is given (deprecated there too).
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                  "Change the call to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _softmax_dim("softmax", input.dim())
        return F.softmax(input, dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _softmax_dim("log_softmax", input.dim())
        return F.log_softmax(input, dim)

    def extra_repr(self):
        return f"dim={self.dim}"
