"""SGD, optionally with momentum (heavy ball or Nesterov), as torch.optim.SGD."""

from .. import _C
from .optimizer import Optimizer, _check_unsupported, _no_grad_step

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
        for group in self.param_groups:
            lr = group["lr"]
            momentum = group["momentum"]
            dampening = group["dampening"]
            weight_decay = group["weight_decay"]
            nesterov = group["nesterov"]
            # maximize flips the gradient; the sign rides on the scalars instead of a negated copy.
            sign = -1.0 if group["maximize"] else 1.0
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                fresh = False  # grad is a temporary of this step (may become the momentum buffer)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=sign * weight_decay)  # sign * grad is the decayed gradient
                    fresh = True
                if momentum == 0:
                    p.add_(grad, alpha=-lr * sign)
                    continue
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    if sign < 0:
                        buf = grad.neg()
                    else:
                        buf = grad if fresh else grad.clone()
                    state["momentum_buffer"] = buf
                else:
                    buf.mul_(momentum).add_(grad, alpha=sign * (1 - dampening))
                if nesterov:
                    p.add_(grad, alpha=-lr * sign)
                    p.add_(buf, alpha=-lr * momentum)
                else:
                    p.add_(buf, alpha=-lr)
