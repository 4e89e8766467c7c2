"""SGD, optionally with momentum (heavy ball or Nesterov), as torch.optim.SGD."""

from .. import _C
from .optimizer import Optimizer, _check_unsupported, _fused_batches, _no_grad_step

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's algorithm:

        g = grad + weight_decay * p                (-grad with maximize)
        b = g (first step), else momentum * b + (1 - dampening) * g
        g = g + momentum * b (nesterov), else b     (when momentum != 0)
        p = p - lr * g
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        _check_unsupported("SGD", differentiable=differentiable, fused=fused)
        if isinstance(lr, _C.Tensor):
            raise TypeError("SGD: lr must be a number (a tensor lr is not supported, docs/training.md)")
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay,
                    "nesterov": nesterov, "maximize": maximize}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    @_no_grad_step
    def step(self):
        for group, (lr, momentum, dampening, weight_decay, nesterov) in self._groups_with(
                "lr", "momentum", "dampening", "weight_decay", "nesterov"):
            params = self._params_with_grad(group)
            if momentum == 0:
                for _, batch in _fused_batches(params):
                    _C.sgd_step_(batch, [p.grad for p in batch], lr=lr, weight_decay=weight_decay,
                                 maximize=group["maximize"])
                continue
            # a parameter's first step starts its momentum buffer as the gradient
            for (_, _, first), batch in _fused_batches(params, lambda p: "momentum_buffer" not in self.state[p]):
                if first:
                    self._new_state()
                    for p in batch:
                        self.state[p]["momentum_buffer"] = _C._full_like(p, 0)
                _C.sgd_step_(batch, [p.grad for p in batch], [self.state[p]["momentum_buffer"] for p in batch],
                             lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                             nesterov=nesterov, maximize=group["maximize"], first_step=first)
