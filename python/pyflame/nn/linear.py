"""Identity, Linear (y = x W^T + b) and Bilinear (y = x1^T A x2 + b), with PyTorch's default initialisation."""

import math

from . import functional as F
from . import init
from .module import Module
from .parameter import _add_parameters


class Identity(Module):
    """Returns its input; the arguments are accepted and ignored, as in PyTorch."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        _add_parameters(self, dtype, device, weight=(out_features, in_features), bias=(out_features,) if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        init._default_weight_and_bias_(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        _add_parameters(self, dtype, device, weight=(out_features, in1_features, in2_features),
                        bias=(out_features,) if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        # PyTorch's: U(-1/sqrt(in1_features), 1/sqrt(in1_features)) for weight and bias
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
