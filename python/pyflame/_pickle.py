"""copy.deepcopy and pickle of tensors, as PyTorch's (and through them of Parameters and Modules).

pf.Tensor is a nanobind class, so its __reduce_ex__ and __deepcopy__ are set on
it here. A tensor pickles as its elements' bytes in pf.save's encoding
(little-endian, C order, bfloat16 as its bit pattern), its dtype, shape, device
and requires_grad; it loads as a new contiguous leaf on that device. The class
(Parameter or another subclass) and a subclass's __dict__ travel with it.
Pickling a tensor that is not a leaf saves its values, as PyTorch does; its
.grad is not pickled (PyTorch's neither), but deepcopy copies it. pickle's and
deepcopy's memo keep one tensor object that is reached twice one object.
"""

import copy
import copyreg
import importlib

from . import _C
from .autograd import no_grad
from .serialization import _FORMAT, _from_host, _host_array


def _as_class(t, cls):
    """`t` as an instance of `cls` (Tensor or a subclass), sharing its storage, without running cls.__init__."""
    if cls is _C.Tensor:
        return t
    out = cls.__new__(cls)
    _C.Tensor.__init__(out, t)
    return out


def _rebuild_tensor(cls, data, dtype_name, shape, device, requires_grad):
    """The unpickling side of _reduce_ex; a stable module-level name, since pickles refer to it."""
    t = _as_class(_from_host(data, dtype_name, shape, device), cls)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _reduce_ex(self, protocol):
    args = (type(self), _host_array(self).tobytes(), _FORMAT[self.dtype][0], tuple(self.shape), self.device,
            self.requires_grad)
    return _rebuild_tensor, args, getattr(self, "__dict__", None) or None


def _deepcopy(self, memo):
    if not self.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                           "protocol at the moment")
    with no_grad():
        new = _as_class(self.detach().clone(), type(self))
    if self.requires_grad:
        new.requires_grad_(True)
    memo[id(self)] = new  # before the grad and __dict__, which may lead back to this tensor
    if self.grad is not None:
        new.grad = copy.deepcopy(self.grad, memo)
    if getattr(self, "__dict__", None):
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return new


_C.Tensor.__reduce_ex__ = _reduce_ex
_C.Tensor.__deepcopy__ = _deepcopy


def _function_by_name(module, qualname):
    """The unpickling side of _reduce_function."""
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _reduce_function(f):
    return _function_by_name, (f.__module__, f.__qualname__)


# Compiled functions (pf.relu, F.gelu) pickle and deep-copy by name, as Python functions do, so that a
# module holding one (TransformerEncoderLayer's activation) can be copied and pickled.
copyreg.pickle(type(_C.relu), _reduce_function)
