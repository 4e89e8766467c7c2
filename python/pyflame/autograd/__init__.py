"""Reverse-mode automatic differentiation, as torch.autograd.

Ops record a backward graph while grad mode is on and an input requires grad
(see docs/autograd.md); `Tensor.backward()` accumulates gradients into the
leaves' `.grad`, `grad()` returns them instead.
"""

from .. import _C
from .function import Function, FunctionCtx
from .grad_mode import enable_grad, inference_mode, is_inference_mode_enabled, no_grad, set_grad_enabled

is_grad_enabled = _C.is_grad_enabled
Node = _C.Node

__all__ = ["backward", "grad", "Function", "FunctionCtx", "enable_grad", "no_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode", "is_inference_mode_enabled", "Node", "functional"]


def _as_list(tensors):
    return [tensors] if isinstance(tensors, _C.Tensor) else list(tensors)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of `tensors` (weighted by `grad_tensors`) into the leaves' .grad. With
    create_graph=True the gradients carry their own history (the graph is kept), so they can be
    differentiated again."""
    if inputs is not None:
        raise _C.NotSupportedError("backward(inputs=...) is not supported yet; use pf.autograd.grad(outputs, "
                                   "inputs) (docs/autograd.md)")
    retain_graph = create_graph if retain_graph is None else retain_graph
    _C._backward(_as_list(tensors), grad_tensors, bool(retain_graph), bool(create_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs`, as a tuple (nothing is accumulated into .grad).

    An input the outputs do not depend on raises unless allow_unused=True, which
    gives None for it (zeros with materialize_grads=True). With create_graph=True the gradients carry
    their own history (the graph is kept), so they can be differentiated again (gradient penalties,
    Hessian-vector products); an op on the way without a differentiable derivative raises NotSupportedError."""
    if is_grads_batched:
        raise _C.NotSupportedError("autograd.grad(is_grads_batched=True) is not supported (docs/autograd.md)")
    inputs = _as_list(inputs)
    unused_ok = bool(allow_unused) or materialize_grads
    retain_graph = create_graph if retain_graph is None else retain_graph
    result = _C._grad(_as_list(outputs), inputs, grad_outputs, bool(retain_graph), unused_ok, bool(create_graph))
    if materialize_grads:
        result = tuple(_C._full_like(x, 0, dtype=None, device=None) if g is None else g
                       for g, x in zip(result, inputs))
    return result


def _register_hook(self, hook):
    """Calls hook(grad) with every gradient computed for this tensor, before it flows on (a leaf's: before
    it accumulates into .grad); a returned tensor (same shape, dtype and device) replaces the gradient,
    None keeps it. Returns a handle whose remove() takes the hook away. As torch's Tensor.register_hook."""
    from ..utils.hooks import RemovableHandle  # pyflame.utils imports autograd

    return RemovableHandle(self._remove_hook, self._register_hook(hook))


_C.Tensor.register_hook = _register_hook

from . import functional  # noqa: E402 (it builds on grad above)
