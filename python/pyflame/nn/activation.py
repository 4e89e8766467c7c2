"""Activation layers: ReLU, ReLU6, GELU, SiLU, Mish, ELU, CELU, SELU, PReLU, GLU, Sigmoid, Hardsigmoid,
Hardswish, Hardtanh, Tanh, Softplus, Softsign, Tanhshrink, LogSigmoid, LeakyReLU, Softmax, Softmin, LogSoftmax,
Threshold.

inplace=True writes the result into the input, as PyTorch does.
"""

import warnings

from . import functional as F
from . import init as _init
from .module import Module, _OpModule
from .parameter import _add_parameters
from .utils import _layer_class, _op_classes


class _Stateless(_OpModule):
    """An activation without settings."""

    def __init__(self):
        super().__init__()


Sigmoid, Tanh, Softsign, Tanhshrink, LogSigmoid = _op_classes(
    _Stateless, Sigmoid=F.sigmoid, Tanh=F.tanh, Softsign=F.softsign, Tanhshrink=F.tanhshrink, LogSigmoid=F.logsigmoid)


class _Activation(_OpModule):
    """An activation with an `inplace` setting, which PyTorch shows only when it is set, after the others."""

    _unshown = ("inplace",)

    def extra_repr(self):
        settings = super().extra_repr()
        if not self.inplace:
            return settings
        return f"{settings}, inplace=True" if settings else "inplace=True"


class _Inplace(_Activation):
    """An activation whose only setting is inplace."""

    _settings = ("inplace",)

    def __init__(self, inplace=False):
        super().__init__(inplace)


ReLU, SiLU, Mish, SELU = _op_classes(_Inplace, ReLU=F.relu, SiLU=F.silu, Mish=F.mish, SELU=F.selu)


class _UnshownInplace(_Inplace):
    # PyTorch's Hardsigmoid and Hardswish show no settings, inplace or not.
    def extra_repr(self):
        return ""


Hardsigmoid, Hardswish = _op_classes(_UnshownInplace, Hardsigmoid=F.hardsigmoid, Hardswish=F.hardswish)


class LeakyReLU(_Activation):
    _fn = staticmethod(F.leaky_relu)
    _settings = ("negative_slope", "inplace")

    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__(negative_slope, inplace)


class Hardtanh(_Activation):
    _fn = staticmethod(F.hardtanh)
    _settings = ("min_val", "max_val", "inplace")

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        if max_val <= min_val:
            raise ValueError(f"max_val ({max_val}) must be greater than min_val ({min_val})")
        super().__init__(min_val, max_val, inplace)


class ReLU6(Hardtanh):
    _unshown = ("min_val", "max_val", "inplace")

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)


class ELU(_Activation):
    _fn = staticmethod(F.elu)
    _settings = ("alpha", "inplace")

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(alpha, inplace)


class CELU(ELU):
    _fn = staticmethod(F.celu)


class Threshold(_Activation):
    _fn = staticmethod(F.threshold)
    _settings = ("threshold", "value", "inplace")

    def __init__(self, threshold, value, inplace=False):
        super().__init__(threshold, value, inplace)


class GLU(_OpModule):
    _fn = staticmethod(F.glu)
    _settings = ("dim",)

    def __init__(self, dim=-1):
        super().__init__(dim)


class Softplus(_OpModule):
    _fn = staticmethod(F.softplus)
    _settings = ("beta", "threshold")

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__(beta, threshold)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class _Softmax(_OpModule):
    """Softmax, LogSoftmax and Softmin: `_fn` over `dim`. Without a dim, PyTorch's legacy choice, deprecated
    there too with a warning that names the op (`_name`) and points at the caller's line."""

    _settings = ("dim",)

    def __init__(self, dim=None):
        super().__init__(dim)

    def forward(self, input):
        dim = self.dim
        if dim is None:
            warnings.warn(f"Implicit dimension choice for {self._name} has been deprecated. "
                          "Change the call to include dim=X as an argument.", stacklevel=4)
            dim = 0 if input.dim() in (0, 1, 3) else 1
        return self._fn(input, dim)


Softmax = _layer_class("Softmax", _Softmax, _fn=staticmethod(F.softmax), _name="softmax")
LogSoftmax = _layer_class("LogSoftmax", _Softmax, _fn=staticmethod(F.log_softmax), _name="log_softmax")
Softmin = _layer_class("Softmin", _Softmax, _fn=staticmethod(F.softmin), _name="softmin")


class PReLU(Module):
    """max(0, x) + a * min(0, x) with a learnt `weight` a: one value, or one per channel (dim 1)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        _add_parameters(self, dtype, device, weight=(num_parameters,))
        self.reset_parameters()

    def reset_parameters(self):
        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
