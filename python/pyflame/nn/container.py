"""Containers: Sequential (runs its modules in order), ModuleList and ModuleDict (hold modules, like a
list or a dict), ParameterList and ParameterDict (hold parameters).

The indexed ones keep their entries under the keys "0", "1", ..., so state
dict keys read "0.weight" as in PyTorch; removing or inserting renumbers them.
"""

import collections.abc
import operator
from collections import OrderedDict

from .. import _C
from .activation import ReLU as _ReLU
from .conv import Conv2d as _Conv2d
from .linear import Linear as _Linear
from .normalization import BatchNorm2d as _BatchNorm2d
from .module import Module, _addindent, structure_changed
from .parameter import Parameter


class _IndexedModules(Module):
    """Integer indexing (negative too), len, iteration and renumbering shared by the containers."""

    def _key(self, idx):
        size = len(self)
        idx = operator.index(idx)
        if not -size <= idx < size:
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules.keys())[idx % size]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            delattr(self, key)
        self._renumber()

    def _renumber(self):
        object.__setattr__(self, "_modules", OrderedDict((str(i), m) for i, m in enumerate(self._modules.values())))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise TypeError(f"insert: expected a Module, got {type(module).__name__}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        structure_changed()
        object.__setattr__(self, "_modules", OrderedDict((str(i), m) for i, m in enumerate(items)))
        return self

    def pop(self, idx=-1):
        module = self[idx]
        del self[idx]
        return module

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class Sequential(_IndexedModules):
    """Sequential(m0, m1, ...) or Sequential(OrderedDict(name=module)): forward runs each module on the
    previous one's output. s[i] is a module, s[a:b] a new Sequential sharing the modules."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return Sequential(*self, *other)

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")
        return self.extend(list(other))

    def forward(self, input):
        modules = list(self._modules.values())
        i = 0
        while i < len(modules):
            module = modules[i]
            # Seed 001's automatic fusion: a Linear then a ReLU run as one linear_relu (the ReLU in the
            # GEMM's epilogue on the GPU), where nothing could tell: both plain (no subclass, no hooks),
            # and no gradient to record (with one, linear_relu would run as linear and relu anyway).
            if (i + 1 < len(modules) and _fusable(module, _Linear) and _fusable(modules[i + 1], _ReLU)
                    and not (_C.is_grad_enabled() and _needs_grad(input, module))):
                input = _C.linear_relu(input, module.weight, module.bias)
                i += 2
                continue
            # A Conv2d then a BatchNorm2d in eval (then a ReLU): one convolution by weights scaled per
            # channel (conv2d_batch_norm, which keeps the scaled weights until a parameter or statistic
            # changes), under the same conditions; the same results to float rounding.
            if (i + 1 < len(modules) and _fusable(module, _Conv2d) and _fusable(modules[i + 1], _BatchNorm2d)
                    and _folds(input, module, modules[i + 1])):
                conv, bn = module, modules[i + 1]
                relu = i + 2 < len(modules) and _fusable(modules[i + 2], _ReLU)
                input = _C.conv2d_batch_norm(input, conv.weight, conv.bias, bn.running_mean, bn.running_var, bn.weight,
                                             bn.bias, conv.stride, conv.padding, conv.dilation, conv.groups, bn.eps,
                                             relu)
                i += 3 if relu else 2
                continue
            input = module(input)
            i += 1
        return input


def _needs_grad(input, *modules):
    return input.requires_grad or any(p is not None and p.requires_grad
                                       for m in modules for p in (m.weight, m.bias))


def _folds(input, conv, bn):
    """Whether conv then bn can run as one conv2d_batch_norm: bn normalises by its running statistics
    (eval), the convolution pads with zeros by numbers, the input is batched, and no gradient is recorded."""
    return (not bn.training and bn.running_mean is not None and bn.running_var is not None and input.dim() == 4
            and conv.padding_mode == "zeros" and not isinstance(conv.padding, str)
            and not (_C.is_grad_enabled() and _needs_grad(input, conv, bn)))


def _fusable(module, cls):
    if type(module) is not cls:  # the common case, decided before any dict lookup
        return False
    state = module.__dict__
    return not (state.get("_forward_pre_hooks") or state.get("_forward_hooks")
                or state.get("_backward_pre_hooks") or state.get("_backward_hooks"))


class ModuleList(_IndexedModules):
    """A list of modules whose parameters belong to the owner; it has no forward of its own."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList([*self, *other])

    def __repr__(self):
        # Runs of identical modules print once, as "(i-j): n x Module(...)" (PyTorch's form).
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if blocks and blocks[-1][2] == r:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = []
        for start, end, r in blocks:
            line = f"({start}): {r}" if start == end else f"({start}-{end}): {end - start + 1} x {r}"
            lines.append(_addindent(line, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules (insertion order) whose parameters belong to the owner."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        structure_changed()
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        structure_changed()
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Adds the modules of a mapping (in its order) or of an iterable of (key, module) pairs."""
        if not isinstance(modules, collections.abc.Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            + type(modules).__name__)
        if isinstance(modules, (ModuleDict, collections.abc.Mapping)):
            for key, module in modules.items():
                self[key] = module
            return
        for j, m in enumerate(modules):
            if not isinstance(m, collections.abc.Iterable):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; is "
                                + type(m).__name__)
            if len(m) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length {len(m)}; 2 is required")
            self[m[0]] = m[1]


def _entry_repr(key, p):
    if isinstance(p, _C.Tensor):
        size = "x".join(str(s) for s in p.shape)
        device = f" ({p.device})" if str(p.device) != "cpu" else ""
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        return f"  ({key}): {kind} containing: [{p.dtype} of size {size}{device}]"
    return f"  ({key}): Object of type: {type(p).__name__}"


def _as_parameter(value):
    # As PyTorch: a plain tensor put into a ParameterList/Dict becomes a Parameter.
    if isinstance(value, _C.Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters registered under "0", "1", ... (tensors are made Parameters; other objects are
    kept as plain attributes, as in PyTorch)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _key(self, idx):
        idx = operator.index(idx)
        if not -len(self) <= idx < len(self):
            raise IndexError(f"index {idx} is out of range")
        return str(idx % len(self))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(*idx.indices(len(self)))])
        return getattr(self, self._key(idx))

    def __setitem__(self, idx, param):
        setattr(self, self._key(idx), _as_parameter(param))

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, collections.abc.Iterable) or isinstance(values, _C.Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p) for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """An ordered dict of parameters under their keys (tensors are made Parameters)."""

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k, _ = self._keys.popitem()
        self._keys[k] = None  # __delitem__ removes it
        return k, self.pop(k)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        if not isinstance(parameters, collections.abc.Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            + type(parameters).__name__)
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = list(parameters.items())
        elif isinstance(parameters, collections.abc.Mapping):
            pairs = sorted(parameters.items())  # PyTorch sorts a plain mapping's keys
        else:
            pairs = []
            for j, p in enumerate(parameters):
                if not isinstance(p, collections.abc.Iterable):
                    raise TypeError(f"ParameterDict update sequence element #{j} should be Iterable; is "
                                    + type(p).__name__)
                if len(p) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length {len(p)}; 2 is "
                                     "required")
                pairs.append(tuple(p))
        for k, v in pairs:
            self[k] = v

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = ParameterDict(other)
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self

    def extra_repr(self):
        return "\n".join(_entry_repr(k, p) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")
