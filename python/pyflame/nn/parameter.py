"""Parameter: the marker that makes a tensor one of a module's parameters.

pf.Tensor is a nanobind class that Python may subclass, so a Parameter *is* a
Tensor (every op takes it, in-place ops keep it a Parameter) and
`isinstance(x, Parameter)` is what Module.__setattr__ uses to register it.
Parameter(t) shares t's storage, as torch.nn.Parameter does, and is a new leaf
that requires grad unless requires_grad=False; ops on it return plain tensors.
"""

from .. import _C, _creation


class Parameter(_C.Tensor):
    """A tensor that a Module registers as a parameter when assigned to one of its attributes."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _C._empty(0)
        if not isinstance(data, _C.Tensor):
            raise TypeError(f"Parameter(data): data must be a pyflame Tensor, got {type(data).__name__}")
        super().__init__(data.detach())  # its own autograd state, not data's
        if requires_grad and data.dtype.is_floating_point:
            self.requires_grad_(True)
        elif requires_grad:
            raise _C.AutogradError(f"Parameter: only floating point tensors can require gradients, got {data.dtype}"
                                   " (pass requires_grad=False)")

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__


def _add_parameters(module, dtype, device, **shapes):
    """Adds uninitialised parameters (the layer's reset_parameters fills them) of the given shapes to `module`; a
    shape None registers the name as None, PyTorch's form for an absent weight or bias."""
    for name, shape in shapes.items():
        if shape is None:
            module.register_parameter(name, None)
        else:
            setattr(module, name, Parameter(_creation.empty(*shape, dtype=dtype, device=device)))
