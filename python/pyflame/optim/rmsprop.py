"""RMSprop, as torch.optim.RMSprop."""

from .. import _C
from .optimizer import Optimizer, _check_nonnegative, _check_unsupported, _fused_batches, _no_grad_step

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop, PyTorch's algorithm:

        g = grad + weight_decay * p                (-grad with maximize)
        v = alpha * v + (1 - alpha) * g * g
        a = alpha * a + (1 - alpha) * g; d = sqrt(v - a * a) + eps   (centered)
        d = sqrt(v) + eps                                             (otherwise)
        b = momentum * b + g / d; p = p - lr * b    (momentum > 0)
        p = p - lr * g / d                          (otherwise)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_unsupported("RMSprop", capturable=capturable, differentiable=differentiable)
        if isinstance(lr, _C.Tensor):
            raise TypeError("RMSprop: lr must be a number (a tensor lr is not supported, docs/training.md)")
        _check_nonnegative(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
                    "weight_decay": weight_decay, "maximize": maximize}
        super().__init__(params, defaults)

    @_no_grad_step
    def step(self):
        for group, (lr, alpha, eps, weight_decay, momentum, centered) in self._groups_with(
                "lr", "alpha", "eps", "weight_decay", "momentum", "centered"):
            buffers = ("square_avg",) + ("momentum_buffer",) * (momentum > 0) + ("grad_avg",) * centered
            params = self._params_with_grad(group, buffers)
            for _, batch in _fused_batches(params):
                states = [self.state[p] for p in batch]
                _C.rmsprop_step_(batch, [p.grad for p in batch], [s["square_avg"] for s in states],
                                 [s["momentum_buffer"] for s in states] if momentum > 0 else None,
                                 [s["grad_avg"] for s in states] if centered else None, lr=lr, alpha=alpha,
                                 eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered,
                                 maximize=group["maximize"])
