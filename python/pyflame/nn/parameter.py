"""Parameter: the marker that makes a tensor one of a module's parameters.

pf.Tensor is a nanobind class that Python may subclass, so a Parameter *is* a
Tensor (every op takes it, in-place ops keep it a Parameter) and
`isinstance(x, Parameter)` is what Module.__setattr__ uses to register it.
Parameter(t) shares t's storage, as torch.nn.Parameter does; ops on it return
plain tensors. PyFlame has no autograd, hence no requires_grad.
"""

from .. import _C


class Parameter(_C.Tensor):
    """A tensor that a Module registers as a parameter when assigned to one of its attributes."""

    def __init__(self, data=None):
        if data is None:
            data = _C._empty(0)
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Parameter(data): data must be a pyflame Tensor, got {type(data).__name__}")
        super().__init__(data)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__
