"""pf.autograd.Function: an op whose forward and backward are written in
Python, as torch.autograd.Function.

    class Exp(pf.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    y = Exp.apply(x)

forward runs under no_grad; when grad mode is on and a tensor argument
requires grad, its floating outputs get a backward node that calls backward
with one gradient per output (zeros where none flowed) and expects one
gradient (or None) per forward argument.
"""

from .. import _C
from .grad_mode import no_grad


class FunctionCtx:
    """What forward leaves for backward: saved tensors and which inputs need a gradient."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()

    def save_for_backward(self, *tensors):
        # Without history: a saved output would otherwise own the node that owns it (a cycle).
        self._saved = tuple(t.detach() if isinstance(t, _C.Tensor) else t for t in tensors)

    @property
    def saved_tensors(self):
        return self._saved


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grads); call with Function.apply(*args)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must implement forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass must implement backward(ctx, *grads)")

    @classmethod
    def apply(cls, *args, **kwargs):
        needs = tuple(isinstance(a, _C.Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            result = cls.forward(ctx, *args, **kwargs)
        if not (_C.is_grad_enabled() and any(needs)):
            return result
        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        # An argument returned as is becomes a new tensor on its memory (it gets this node as history).
        outputs = tuple(o.detach() if isinstance(o, _C.Tensor) and any(o is a for a in args) else o for o in outputs)
        tensors = [o for o in outputs if isinstance(o, _C.Tensor)]
        _C._record_function(cls.__name__ + "Backward", lambda *grads: cls.backward(ctx, *grads), list(args),
                            tensors)
        return outputs[0] if single else outputs
