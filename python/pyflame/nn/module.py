"""Module: the base class of every layer, following torch.nn.Module.

A module keeps its parameters, buffers and submodules in three ordered dicts
(_parameters, _buffers, _modules); __setattr__ routes a Parameter, a Module or
a tensor assigned to a registered buffer name into them, and __getattr__ finds
them there. Everything else (state_dict keys, repr, to(), train()) walks these
dicts, so the keys and the printed form match PyTorch's for the same model.
"""

import threading
from collections import OrderedDict, namedtuple

from .. import _C
from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..utils.hooks import RemovableHandle
from .parameter import Parameter

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

# Counts changes to any module's parameters, buffers, submodules or training flag, so that
# pf.compile re-reads a module's state only after one (its guard, python/pyflame/_compile.py).
_structure_version = 0


def structure_changed():
    global _structure_version
    _structure_version += 1


def structure_version():
    return _structure_version


# pf.compile's traces running (any thread), and per thread the modules called in the one running there
# (.modules: id -> module): a compiled function's signature then holds their training flags and
# parameters, as torch.compile guards the modules a function uses (python/pyflame/_compile.py).
traces_running = 0
_traced = threading.local()


def trace_modules(modules):
    """Collects the modules called in this thread into `modules` (a dict) until trace_modules(None)."""
    global traces_running
    traces_running += 1 if modules is not None else -1
    _traced.modules = modules


class _HookedIdentity(Function):
    """The identity on several tensors whose backward hands their gradients to `on_grads`, which may return
    replacements: where a module's backward hooks see the gradients of its outputs and inputs."""

    @staticmethod
    def forward(ctx, on_grads, *tensors):
        ctx.on_grads = on_grads
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.on_grads(grads))


class _BackwardHooks:
    """One call of a module with full backward (pre-)hooks, as torch's: identities around the tensor inputs
    that require grad and around the output tensors; the outputs' backward runs the pre-hooks and keeps
    grad_output, the inputs' backward runs the hooks (or the outputs' does, when no input requires grad)."""

    def __init__(self, module):
        self.module, self.grad_output, self.n_inputs, self.inputs_hooked = module, None, 0, False

    def _hooks(self, name):
        return [hook for hook, _ in list(self.module.__dict__.get(name, {}).values())]

    def _run_hooks(self, grad_input):
        for hook in self._hooks("_backward_hooks"):
            result = hook(self.module, grad_input, self.grad_output)
            if result is not None:
                grad_input = tuple(result)
        return grad_input

    def wrap_inputs(self, args):
        where = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]
        self.n_inputs = len(where)
        hooked = [i for i in where if args[i].requires_grad]
        if hooked:
            self.inputs_hooked = True

            def on_input_grads(grads):
                full = [None] * len(where)
                for i, g in zip(hooked, grads):
                    full[where.index(i)] = g
                full = self._run_hooks(tuple(full))
                return tuple(full[where.index(i)] for i in hooked)

            wrapped = _HookedIdentity.apply(on_input_grads, *[args[i] for i in hooked])
            args = list(args)
            for i, t in zip(hooked, wrapped):
                args[i] = t
            args = tuple(args)
        return args, self.wrap_outputs

    def wrap_outputs(self, output):
        single = isinstance(output, _C.Tensor)
        outputs = (output,) if single else output
        if not isinstance(outputs, (tuple, list)):
            return output
        hooked = [i for i, o in enumerate(outputs) if isinstance(o, _C.Tensor) and o.requires_grad]
        if not hooked:
            return output

        def on_output_grads(grads):
            for hook in self._hooks("_backward_pre_hooks"):
                result = hook(self.module, grads)
                if result is not None:
                    grads = tuple(result)
            self.grad_output = tuple(grads)
            if not self.inputs_hooked:
                self._run_hooks((None,) * self.n_inputs)
            return grads

        wrapped = _HookedIdentity.apply(on_output_grads, *[outputs[i] for i in hooked])
        replaced = list(outputs)
        for i, t in zip(hooked, wrapped):
            replaced[i] = t
        return replaced[0] if single else type(outputs)(replaced)


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * num_spaces + line for line in lines)


def _changed_settings(module, **defaults):
    """extra_repr's optional part as PyTorch writes it: 'name=value' for each setting that differs
    from its default (a missing attribute counts as the default), in the order given."""
    return [f"{name}={getattr(module, name, default)}" for name, default in defaults.items()
            if getattr(module, name, default) != default]


def _check_name(kind, name):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got "{name}"')


def _parse_to(args, kwargs):
    """(device, dtype) from Module.to's arguments: to(device), to(dtype), to(device, dtype), to(tensor)."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)  # a hint in PyTorch; accepted so that PyTorch code runs
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, _C.Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, str):
            device = a
        else:
            raise TypeError(f"to() expects a device string, a pyflame dtype or a tensor, got {type(a).__name__}")
    if device is not None:
        device = _C._parse_device(device)
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
    return device, dtype


class Module:
    """Base class of all layers: subclasses assign parameters and submodules in
    __init__ and define forward(); calling the module runs forward."""

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        # Hooks by handle id: (hook, with_kwargs).
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        if traces_running:
            modules = getattr(_traced, "modules", None)
            if modules is not None:
                modules[id(self)] = self
        state = self.__dict__  # (a module unpickled from before hooks existed has no hook dicts)
        backward_hooks = (state.get("_backward_pre_hooks") or state.get("_backward_hooks")) and _C.is_grad_enabled()
        if not (state.get("_forward_pre_hooks") or state.get("_forward_hooks") or backward_hooks):
            return self.forward(*args, **kwargs)
        for hook, with_kwargs in list(state.get("_forward_pre_hooks", {}).values()):
            if with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        if backward_hooks:  # after the pre-hooks, which may replace the inputs (as torch)
            args, finish = _BackwardHooks(self).wrap_inputs(args)
        output = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(state.get("_forward_hooks", {}).values()):
            result = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            if result is not None:
                output = result
        return finish(output) if backward_hooks else output

    # ------------------------------------------------------------ hooks

    def _add_hook(self, name, hook, prepend, with_kwargs):
        hooks = self.__dict__.setdefault(name, OrderedDict())
        handle = RemovableHandle(lambda id: hooks.pop(id, None))
        hooks[handle.id] = (hook, with_kwargs)
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) before forward; it may return new args (a tuple, or one value). With with_kwargs,
        hook(module, args, kwargs) returning None or (args, kwargs). Returns a handle whose remove() drops it."""
        return self._add_hook("_forward_pre_hooks", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) after forward (hook(module, args, kwargs, output) with with_kwargs); it may
        return a new output. Returns a handle whose remove() drops it. always_call (running the hook when forward
        raises) is not supported."""
        if always_call:
            raise _C.NotSupportedError("register_forward_hook(always_call=True) is not supported (docs/nn.md)")
        return self._add_hook("_forward_hooks", hook, prepend, with_kwargs)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) once the gradients of the module's tensor inputs are computed
        (grad_input: one per positional tensor argument, None where none flows; grad_output: one per output
        tensor); it may return a new grad_input. Returns a handle whose remove() drops it."""
        return self._add_hook("_backward_hooks", hook, prepend, False)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) when the gradients of the module's outputs are computed, before they flow
        into the module; it may return a new grad_output. Returns a handle whose remove() drops it."""
        return self._add_hook("_backward_pre_hooks", hook, prepend, False)

    # ------------------------------------------------------------ registration

    def _check_registration(self, kind, store, name):
        if store not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        structure_changed()
        _check_name(kind, name)
        if hasattr(self, name) and name not in self.__dict__[store]:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        self._check_registration("parameter", "_parameters", name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(pyflame.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        self._check_registration("buffer", "_buffers", name)
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(pyflame Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        structure_changed()
        _check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        mod = self
        for item in target.split(".") if target else []:
            if not isinstance(mod._modules.get(item), Module):
                raise AttributeError(f"{mod._get_name()} has no submodule `{item}` (looking up '{target}')")
            mod = mod._modules[item]
        return mod

    def __getattr__(self, name):
        # Only called when normal lookup fails: parameters, buffers, submodules.
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        structure_changed()
        d = self.__dict__
        if traces_running and (isinstance(value, Parameter) or name in d.get("_parameters", ())
                               or name in d.get("_buffers", ())):  # a graph would not repeat the assignment
            _C._trace_break(f"assigning {type(self).__name__}.{name} (a parameter or buffer)")

        def forget(*stores):  # the name leaves the other stores
            d.pop(name, None)
            for store in stores:
                d[store].pop(name, None)
            d["_non_persistent_buffers"].discard(name)

        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            forget("_buffers", "_modules")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(pyflame.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            forget("_parameters", "_buffers")
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(pyflame.nn.Module or None expected)")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, _C.Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(pyflame Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name):
        structure_changed()
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, ()):
                del self.__dict__[store][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # ------------------------------------------------------------ traversal

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            yield from module.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, store).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------ modes

    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        structure_changed()
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    # ------------------------------------------------------------ devices and dtypes

    def to(self, *args, **kwargs):
        """to(device), to(dtype), to(device, dtype) or to(tensor): moves and/or converts the
        parameters and buffers (dtype conversion applies to floating-point ones only, as in PyTorch).
        A device named places them there (Tensor.is_placed): the module's ops then run on it."""
        device, dtype = _parse_to(args, kwargs)

        def convert(t):
            target_dtype = dtype if dtype is not None and t.dtype.is_floating_point else t.dtype
            target_device = device if device is not None else t.device
            if t.dtype == target_dtype and t.device == target_device and (device is None or t.is_placed):
                return t
            return t.to(target_device, target_dtype) if device is not None else t.to(target_dtype)

        return self._apply(convert)

    def _apply(self, fn):
        """Applies fn to every parameter and buffer. A parameter keeps its identity, as in PyTorch
        (p.data = fn(p), its .grad converted alike): tied parameters stay tied and optimizers made
        before still hold them. Buffers are replaced by fn's result, as in PyTorch."""
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                with no_grad():
                    new = fn(p)
                    if new is not p:
                        p.data = new
                        if p.grad is not None:
                            p.grad = fn(p.grad)
            for name, b in m._buffers.items():
                if b is not None:
                    m._buffers[name] = fn(b)
                    structure_changed()
        return self

    def zero_grad(self, set_to_none=True):
        """Clears the .grad of every parameter: None (the default), or zeros in place."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    def requires_grad_(self, requires_grad=True):
        """Sets requires_grad on every parameter (freezing or unfreezing the module); returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(_C.dtype.float32)

    def double(self):
        return self.to(_C.dtype.float64)

    def half(self):
        return self.to(_C.dtype.float16)

    def bfloat16(self):
        return self.to(_C.dtype.bfloat16)

    # ------------------------------------------------------------ state

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of every parameter and persistent buffer, keyed by dotted path as in PyTorch.
        Values share storage with the module's tensors (plain Tensors unless keep_vars=True)."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                destination[prefix + name] = b
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _state_entries(self):
        """(key, module, store, name) of every entry state_dict() would hold."""
        for mod_prefix, mod in self.named_modules(remove_duplicate=False):
            p = mod_prefix + "." if mod_prefix else ""
            for name, t in mod._parameters.items():
                if t is not None:
                    yield p + name, mod, "_parameters", name
            for name, t in mod._buffers.items():
                if t is not None and name not in mod._non_persistent_buffers:
                    yield p + name, mod, "_buffers", name

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copies the tensors of `state_dict` into this module's parameters and buffers.

        Everything is checked before anything is written: with strict=True a missing or
        unexpected key raises RuntimeError listing them all, and a shape mismatch or a
        non-tensor value always does; the module is then unchanged. Values are converted
        to each parameter's dtype and device (assign=True puts the given tensors in place
        instead). Returns (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        entries = list(self._state_entries())
        expected = {key for key, *_ in entries}
        missing = [key for key, *_ in entries if key not in state_dict]
        unexpected = [key for key in state_dict.keys() if key not in expected]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
        for key, mod, store, name in entries:
            if key not in state_dict:
                continue
            value, current = state_dict[key], getattr(mod, store)[name]
            if not isinstance(value, _C.Tensor):
                errors.append(f'While copying the parameter named "{key}", expected a pyflame Tensor from the '
                              f"checkpoint but received {type(value).__name__}")
            elif tuple(value.shape) != tuple(current.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from "
                              f"checkpoint, the shape in current model is {tuple(current.shape)}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(errors))
        with no_grad():
            for key, mod, store, name in entries:
                if key not in state_dict:
                    continue
                value = state_dict[key]
                current = getattr(mod, store)[name]
                if assign:
                    getattr(mod, store)[name] = (Parameter(value, requires_grad=current.requires_grad)
                                                 if store == "_parameters" else value)
                else:
                    current.copy_(value)
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------ printing

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The module's own settings for repr(); one line, or several separated by newlines."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


class _OpModule(Module):
    """A layer that applies a functional op, `_fn`, to its input and its settings.

    `_settings` names the constructor's arguments in the op's order: each is kept as an attribute of that
    name (PyTorch's) and passed to the op after the input. extra_repr shows them, but for those named in
    `_unshown`, in PyTorch's form 'name=value, ...'.
    """

    _settings = ()
    _unshown = ()

    def __init__(self, *values):
        super().__init__()
        for name, value in zip(self._settings, values):
            setattr(self, name, value)

    def forward(self, input):
        return self._fn(input, *(getattr(self, name) for name in self._settings))

    def extra_repr(self):
        return ", ".join(f"{name}={getattr(self, name)}" for name in self._settings if name not in self._unshown)
