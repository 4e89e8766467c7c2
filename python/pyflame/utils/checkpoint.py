"""Gradient checkpointing, as torch.utils.checkpoint: trade compute for memory.

checkpoint(fn, *args) runs fn without keeping its intermediate tensors; the
backward pass runs fn again (with the random state it first ran with, so
dropout draws the same masks) and backpropagates through that second run.
"""

from .. import _C
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, fn, preserve_rng_state, *args):
        ctx.fn = fn
        ctx.rng_state = _C.default_generator().get_state() if preserve_rng_state else None
        ctx.save_for_backward(*args)
        return fn(*args)

    @staticmethod
    def backward(ctx, *grads):
        needs = ctx.needs_input_grad[2:]
        args = [a.detach().requires_grad_(need) if isinstance(a, _C.Tensor) else a
                for a, need in zip(ctx.saved_tensors, needs)]
        generator = _C.default_generator()
        after = generator.get_state()
        if ctx.rng_state is not None:
            generator.set_state(ctx.rng_state)
        try:
            with enable_grad():
                outputs = ctx.fn(*args)
        finally:
            generator.set_state(after)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, _C.Tensor) and o.requires_grad]
        if pairs:  # as PyTorch's reentrant checkpoint: parameters used inside accumulate their .grad here
            _C._backward([o for o, _ in pairs], [g for _, g in pairs], False)
        return (None, None) + tuple(a.grad if need else None for a, need in zip(args, needs))


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """function(*args), keeping only its inputs for backward (which recomputes the rest)."""
    if kwargs:
        return checkpoint(lambda *a: function(*a, **kwargs), *args, use_reentrant=use_reentrant,
                          preserve_rng_state=preserve_rng_state)
    return _Checkpoint.apply(function, preserve_rng_state, *args)
