"""pf.compile: graph mode, as torch.compile.

The first call with a new signature runs the function eagerly while the op
layer records every call it makes into an ir::Graph (include/pyflame/ir/graph.h);
later calls with that signature replay the graph's calls in C++ without the
Python that made them. The signature holds what torch.compile's guards check:
each tensor argument's shape, dtype, device, placement and requires_grad (and
which arguments are the same tensor), every other argument's value, the grad
mode, the autocast state, the current device and, for a module, the training
flag and the identity of each parameter and buffer, and the same for every
module the function called when traced (a function using a model: model.eval()
after a training trace retraces). Python control flow and Python numbers are
fixed at trace time, as torch's guards specialise them.

What a graph cannot repeat (a read of tensor values on the host: .item(),
bool(), printing, NumPy; autograd.grad; a random draw from a generator of the
user's) leaves that signature eager, with one warning naming the cause; the
traced call's results are the eager ones either way. A training step
(forward, loss.backward(), optimizer.step()) is one graph: its backward's ops
are traced like the forward's, and the Python objects it depends on beyond
the arguments guard it (guard(): an optimizer's options, so an lr scheduler's
change retraces; the leaves' .grad where the step accumulates into them).
Tensors the function reads from outside (parameters, closures) are used by
reference: in-place updates (optimizer steps, load_state_dict) are seen, and a
tensor given new data (`p.data = ...`, as Module.to and .half() do) makes the
graph retrace; rebinding a closure's name to a new tensor is not seen (the
parameters of the modules it calls are guarded).

Replay runs the same ops through the op layer, so results equal eager ones and
autograd records them. With mode="reduce-overhead" (or "max-autotune"), a graph
of one GPU's work (no random op, no autograd recording: inference, or a
training step with its backward in the graph) is captured once
as a HIP/CUDA graph and then launched whole (ir::DeviceGraph); other graphs
replay op by op (docs/compile.md).
"""

import functools
import threading
import warnings

from . import _C
from .nn.module import Module, structure_version, trace_modules

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_EAGER = object()  # a signature whose trace cannot be replayed
_MAX_TRACES = 64  # signatures kept per compiled function (torch's cache_size_limit is 8); later ones run eagerly
_MAX_RETRACES = 8  # a signature whose guards fail more often than this runs eagerly (torch's recompile limit)
_active = threading.local()  # .trace: the _TraceState of the pf.compile trace running in this thread


class _TraceState:
    __slots__ = ("guards", "retrace")

    def __init__(self):
        self.guards = []  # (fn, its value at trace time)
        self.retrace = None  # why this trace is not to be kept (the next call traces again)


def guard(fn):
    """Within a pf.compile trace: the graph holds only while fn() equals what it returns now (state outside
    the arguments that the traced code read: an optimizer's options, say); otherwise the call retraces."""
    state = getattr(_active, "trace", None)
    if state is not None:
        state.guards.append((fn, fn()))


def retrace_later(why):
    """Within a pf.compile trace: this call's graph is not kept (it did once-only work, such as making an
    optimizer's state); the next call with the signature traces again."""
    state = getattr(_active, "trace", None)
    if state is not None:
        state.retrace = why


class _Entry:
    __slots__ = ("graph", "out_spec", "device_graph", "guards")

    def __init__(self, graph, out_spec, guards):
        self.graph, self.out_spec, self.guards = graph, out_spec, guards
        self.device_graph = None  # mode="reduce-overhead": the captured graph, False where it cannot be

    def holds(self, tensors):
        """Whether the state the trace read beyond the arguments is still as it was."""
        return _C._graph_applies(self.graph, tensors) and all(fn() == value for fn, value in self.guards)


def _flatten(obj, tensors):
    """obj's structure with each tensor replaced by its index in `tensors` (appended)."""
    if isinstance(obj, _C.Tensor):
        tensors.append(obj)
        return ("T", len(tensors) - 1)
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(_flatten(x, tensors) for x in obj))
    if isinstance(obj, dict):
        return (dict, tuple((k, _flatten(v, tensors)) for k, v in obj.items()))
    return ("C", obj)


def _unflatten(spec, tensors):
    kind, payload = spec
    if kind == "T":
        return tensors[payload]
    if kind == "C":
        return payload
    if kind is dict:
        return {k: _unflatten(v, tensors) for k, v in payload}
    items = [_unflatten(x, tensors) for x in payload]
    return kind(items) if kind in (list, tuple) else kind(*items)  # named tuples take their fields


def _value_key(spec):
    """A hashable stand-in for the non-tensor parts of an argument structure."""
    kind, payload = spec
    if kind == "T":
        return spec
    if kind == "C":
        try:
            hash(payload)
            return (type(payload), payload)
        except TypeError:
            return ("id", id(payload))
    if kind is dict:
        return (dict, tuple((k, _value_key(v)) for k, v in payload))
    return (kind, tuple(_value_key(x) for x in payload))


class _Compiled:
    """A function or module compiled by pf.compile; calls replay a graph per argument signature."""

    def __init__(self, fn, module, fullgraph, capture):
        self._fn, self._module, self._fullgraph, self._capture = fn, module, fullgraph, capture
        self._modules = {} if module is None else {id(module): module}  # the module and those its traces called
        self._module_state = (None, None)  # (nn's structure version, the modules' key then)
        self._traces = {}
        self._retraces = {}  # signature -> how many times its guards failed
        self._warned = set()
        functools.update_wrapper(self, fn, updated=())

    def _signature(self, values, tensors):
        first = {}
        aliases = tuple(first.setdefault(id(t), i) for i, t in enumerate(tensors))
        keys = (_C._tensor_signature(tensors), aliases)
        state = (_C.is_grad_enabled(), _C.get_device(), _C._get_autocast("cpu"), _C._get_autocast("rocm"))
        if self._modules:
            state += (self._module_key(),)
        return (values, keys, state)

    def _module_key(self):
        """The modules' training flags and their parameters' and buffers' identities, read again only after a
        module changed."""
        version, key = self._module_state
        if version != structure_version():
            modules = {id(s): s for m in self._modules.values() for s in m.modules()}
            key = tuple((s.training, tuple(map(id, s._parameters.values())), tuple(map(id, s._buffers.values())))
                        for s in modules.values())
            self._module_state = (structure_version(), key)
        return key

    def __call__(self, *args, **kwargs):
        if _C._is_tracing():  # inside another compiled function's trace: its graph takes these calls
            return self._fn(*args, **kwargs)
        if not kwargs and all(isinstance(a, _C.Tensor) for a in args):  # the common call: tensors alone
            tensors, values = args, len(args)
        else:
            tensors = []
            values = _value_key(_flatten((args, kwargs), tensors))
        key = self._signature(values, tensors)
        entry = self._traces.get(key)
        if entry is None:
            if len(self._traces) >= _MAX_TRACES:  # arguments that differ on every call (a new object each time)
                self._warn_once(f"more than {_MAX_TRACES} signatures; new ones run eagerly")
                return self._fn(*args, **kwargs)
            return self._trace(key, values, tensors, args, kwargs)
        if entry is _EAGER:
            return self._fn(*args, **kwargs)
        if not entry.holds(tensors):
            retraces = self._retraces[key] = self._retraces.get(key, 0) + 1
            if retraces > _MAX_RETRACES:
                self._warn_once("state it reads outside its arguments (an optimizer's options, the .grad it "
                                "accumulates into, a tensor given new data) changed on more than "
                                f"{_MAX_RETRACES} calls; it runs eagerly")
                self._traces[key] = _EAGER
                return self._fn(*args, **kwargs)
            return self._trace(key, values, tensors, args, kwargs)
        if self._capture and entry.device_graph is None:
            try:
                entry.device_graph = _C._DeviceGraph(entry.graph, tensors)
            except _C.NotSupportedError:  # not one GPU's inference, say: replayed op by op
                entry.device_graph = False
        if entry.device_graph:
            return _unflatten(entry.out_spec, entry.device_graph.launch(tensors))
        return _unflatten(entry.out_spec, _C._run_graph(entry.graph, tensors))

    def _trace(self, key, values, tensors, args, kwargs):
        self._traces.pop(key, None)
        state = _active.trace = _TraceState()
        _C._begin_trace(tensors)
        called = {}
        trace_modules(called)
        try:
            result = self._fn(*args, **kwargs)
        except BaseException:
            _C._abort_trace()
            raise
        finally:
            _active.trace = None
            trace_modules(None)
        if called.keys() - self._modules.keys():  # modules the signature did not hold yet
            self._modules.update(called)
            self._module_state = (None, None)
            key = self._signature(values, tensors)
        outputs = []
        out_spec = _flatten(result, outputs)
        graph, why_not = _C._end_trace(outputs)
        if state.retrace and not why_not:
            return result
        if why_not:
            if self._fullgraph:
                raise _C.NotSupportedError(f"pf.compile(fullgraph=True): the function cannot be one graph: {why_not}")
            self._warn_once(f"runs eagerly for these arguments: {why_not}")
            self._traces[key] = _EAGER
        else:
            self._traces[key] = _Entry(graph, out_spec, state.guards)
        return result

    def _warn_once(self, what):
        if what not in self._warned:
            self._warned.add(what)
            warnings.warn(f"pf.compile: {getattr(self._fn, '__qualname__', self._fn)} {what}", stacklevel=4)

    def graphs(self):
        """The graphs traced so far (one per signature; eager signatures left out)."""
        return [e.graph for e in self._traces.values() if e is not _EAGER]

    def _device_graphs(self):
        """How many of the graphs run as captured device graphs."""
        return sum(1 for e in self._traces.values() if e is not _EAGER and e.device_graph)

    def __getattr__(self, name):  # a compiled module still has its parameters, train(), to(), ...
        return getattr(self._module if self._module is not None else self._fn, name)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="pyflame", mode=None, options=None,  # noqa: A001
            disable=False):
    """Graph mode, as torch.compile: pf.compile(fn) or pf.compile(module), or @pf.compile / @pf.compile(...).
    Returns a callable that traces each new argument signature once and replays its graph after
    (docs/compile.md). fullgraph=True raises where the function cannot be one graph; dynamic=True
    (shapes symbolic) is not supported; mode is accepted for torch's values; disable=True returns
    the function itself."""
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if dynamic:
        raise _C.NotSupportedError("pf.compile(dynamic=True): shapes are specialised per call signature; "
                                   "each new shape is traced once (docs/compile.md)")
    if mode not in _MODES:
        raise ValueError(f"pf.compile: unknown mode {mode!r}; expected one of {', '.join(map(repr, _MODES))}")
    if backend not in ("pyflame", "inductor", "eager"):
        raise ValueError(f"pf.compile: unknown backend {backend!r}; PyFlame compiles with its own ('pyflame')")
    if disable:
        return model
    if not callable(model):
        raise TypeError(f"pf.compile expects a function or a module, got {type(model).__name__}")
    capture = mode in ("reduce-overhead", "max-autotune")
    if isinstance(model, Module):
        return _Compiled(model.__call__, model, fullgraph, capture)
    return _Compiled(model, None, fullgraph, capture)
