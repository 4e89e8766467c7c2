"""Identity and Linear (y = x W^T + b), with PyTorch's default initialisation."""

import math

from .. import _creation
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


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
        self.weight = Parameter(_creation.empty(out_features, in_features, dtype=dtype, device=device))
        if bias:
            self.bias = Parameter(_creation.empty(out_features, dtype=dtype, device=device))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """kaiming_uniform_(a=sqrt(5)) weights, i.e. U(-1/sqrt(in), 1/sqrt(in)), and bias of the same bound."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
