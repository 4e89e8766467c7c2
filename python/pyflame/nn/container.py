"""Containers: Sequential (runs its modules in order) and ModuleList (holds modules, like a list).

Both keep their modules in _modules under the keys "0", "1", ..., so state
dict keys read "0.weight" as in PyTorch; removing or inserting renumbers them.
"""

import operator
from collections import OrderedDict

from .module import Module, _addindent


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
        for module in self:
            input = module(input)
        return input


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
