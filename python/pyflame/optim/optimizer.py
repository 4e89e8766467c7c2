"""Optimizer: the base class of the optimizers, as torch.optim.Optimizer.

An optimizer holds `param_groups` (a list of dicts: 'params', a list of
tensors, and the group's options, the defaults filled in) and `state` (a dict
keyed by the parameter tensors themselves, by identity, of per-parameter
dicts). `state_dict()` and `load_state_dict()` use PyTorch's layout: parameters
become their index in the order of the groups.
"""

import functools
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain

from .. import _C
from ..autograd import enable_grad, no_grad

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """The default of an option that every parameter group must give (e.g. SGD's lr in old PyTorch)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj):
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _check_unsupported(name, **flags):
    """PyTorch's implementation switches: foreach is accepted and ignored (one implementation);
    fused/differentiable (and capturable, except Adam's) have no PyFlame implementation."""
    for flag, value in flags.items():
        if value:
            raise _C.NotSupportedError(f"{name}({flag}=True) is not supported; PyFlame has one implementation of "
                                       "each optimizer (docs/training.md)")


_INVALID = {"lr": "learning rate", "eps": "epsilon value", "momentum": "momentum value",
            "weight_decay": "weight_decay value", "alpha": "alpha value"}


def _check_nonnegative(**values):
    """PyTorch's ValueError for each option that is negative (or NaN), checked in the order given."""
    for name, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {_INVALID[name]}: {value}")


def _no_grad_step(step):
    """Runs an optimizer's step under pf.no_grad() (its closure, if any, under pf.enable_grad()).

    Inside a pf.compile trace the step's graph holds while the options and parameters are those it
    read (an lr scheduler's change retraces)."""

    @functools.wraps(step)
    def wrapper(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if _C._is_tracing():
            from .._compile import guard
            guard(self._traced_options)
        with no_grad():
            step(self)
        return loss

    return wrapper


def _zero_step(device="cpu"):
    """A new `step` state: a 0-d float32 tensor, as PyTorch's optimizers keep it: on the host (so the bias
    corrections read it without a device synchronisation) or, capturable, on the parameter's device."""
    return _C._full((), 0.0, dtype=_C.dtype.float32, device=device)


def _fused_batches(params, key=None):
    """params in the lists one fused update call takes: one device and dtype each (and one `key(p)`), in order.

    The in-place update ops (adam_step_, sgd_step_, rmsprop_step_) update a whole list in one call,
    one kernel launch on the GPU for up to a few dozen parameters."""
    batches = {}
    for p in params:
        batches.setdefault((str(p.device), p.dtype, key(p) if key else None), []).append(p)
    return batches.items()


class Optimizer:
    """Base class of the optimizers: parameter groups, per-parameter state, zero_grad and (load_)state_dict.

    Subclasses pass their defaults (a dict of the group options) and implement step(closure=None)."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, _C.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        self._state_version = 0  # changes when the state or the groups are replaced (load_state_dict, ...)
        try:
            param_groups = list(params)
        except TypeError:
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            "but got " + _typename(params)) from None
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # ------------------------------------------------------------ groups

    def add_param_group(self, param_group):
        """Adds a group of parameters (a dict with 'params' and any per-group options) to param_groups."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        if "params" not in param_group:
            raise ValueError("param_group must have a 'params' entry")
        params = param_group["params"]
        if isinstance(params, _C.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering of "
                            "tensors in sets will change between runs. Please use a list instead.")
        else:
            try:
                params = list(params)
            except TypeError:
                raise TypeError("optimizer params should be an iterable of Tensors, but got "
                                + _typename(params)) from None

        tensors, names = [], []
        for param in params:
            if isinstance(param, tuple):  # named_parameters(): (name, tensor)
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some param names are missing")
            param_group["param_names"] = names

        for param in tensors:
            if not isinstance(param, _C.Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is " + _typename(param))
            if not (param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)

        ids = [id(p) for p in tensors]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error; see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ------------------------------------------------------------ gradients and steps

    def zero_grad(self, set_to_none=True):
        """Clears the .grad of every parameter: None (the default), or zeros in place."""
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    if set_to_none:
                        p.grad = None
                    else:
                        grad.zero_()

    def step(self, closure=None):
        """Performs one optimization step; `closure` re-evaluates the model and returns the loss."""
        raise NotImplementedError

    def _params_with_grad(self, group, buffers=None):
        """The group's parameters that have a gradient. For the optimizers that count steps, `buffers`
        names the zero-filled tensors of a parameter's state, made on its first step; every step is counted."""
        params = [p for p in group["params"] if p.grad is not None]
        if buffers is not None:
            for p in params:
                state = self.state[p]
                if len(state) == 0:
                    self._new_state()
                    state["step"] = _zero_step(p.device if group.get("capturable") else "cpu")
                    state.update({b: _C._full_like(p, 0) for b in buffers})
                state["step"].add_(1)
        return params

    def _new_state(self):
        """A parameter's state is being made: a pf.compile trace of this step is not kept (its next
        call, with the state there, is the one that repeats)."""
        if _C._is_tracing():
            from .._compile import retrace_later
            retrace_later("the optimizer made its state")

    def _traced_options(self):
        """What a compiled step reads of this optimizer beyond its tensors: the groups' options and
        parameters, and which state it has."""
        return (self._state_version, tuple((tuple(map(id, g["params"])), tuple(
            (k, v) for k, v in g.items() if k not in ("params", "param_names"))) for g in self.param_groups))

    def _groups_with(self, *names):
        """Each parameter group, with the values of its options `names`, in that order."""
        for group in self.param_groups:
            yield group, tuple(group[k] for k in names)

    # ------------------------------------------------------------ state dicts

    def state_dict(self):
        """{'state': {index: {...}}, 'param_groups': [{options..., 'params': [indices]}]}, as PyTorch.

        The state's tensors are the optimizer's own (not copies), as in PyTorch."""
        mapping = {}
        start = 0

        def pack_group(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(mapping[id(k)] if isinstance(k, _C.Tensor) else k): v for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": param_groups}

    def load_state_dict(self, state_dict):
        """Loads a state_dict() (of an optimizer of the same kind over parameters of the same shapes).

        Parameters are matched by position; state tensors are moved to their parameter's
        device and (floating parameters) dtype, except 'step', which is kept as is (moved to the
        parameter's device in a capturable group)."""
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        capturable = {id(id_map[i]) for g in saved_groups if g.get("capturable") for i in g["params"]}

        def cast(param, value, key=None):
            if isinstance(value, _C.Tensor):
                if key == "step":
                    return value.to(param.device, dtype=_C.dtype.float32) if id(param) in capturable else value
                if param.dtype.is_floating_point:
                    return value.to(param.device, dtype=param.dtype)
                return value.to(param.device)
            if isinstance(value, dict):
                return {k: cast(param, v, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._state_version = getattr(self, "_state_version", 0) + 1
        # Options a loaded state dict may lack (older or hand-made ones) take the defaults;
        # a 'step' stored as a number becomes the tensor the optimizers keep.
        for group in self.param_groups:
            for name, default in self.defaults.items():
                if default is not required:
                    group.setdefault(name, default)
        for s in self.state.values():
            if isinstance(s, dict) and "step" in s and not isinstance(s["step"], _C.Tensor):
                s["step"] = _C._full((), float(s["step"]), dtype=_C.dtype.float32, device="cpu")

    def __repr__(self):
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"
