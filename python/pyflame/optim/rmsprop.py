"""RMSprop, as torch.optim.RMSprop."""

from .. import _C
from .optimizer import Optimizer, _check_nonnegative, _check_unsupported, _no_grad_step, _zero_step

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
        for group in self.param_groups:
            lr = group["lr"]
            alpha = group["alpha"]
            eps = group["eps"]
            weight_decay = group["weight_decay"]
            momentum = group["momentum"]
            centered = group["centered"]
            # maximize flips the gradient; the sign rides on the scalars (g*g does not see it).
            sign = -1.0 if group["maximize"] else 1.0
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = _zero_step()
                    state["square_avg"] = _C._full_like(p, 0)
                    if momentum > 0:
                        state["momentum_buffer"] = _C._full_like(p, 0)
                    if centered:
                        state["grad_avg"] = _C._full_like(p, 0)
                state["step"].add_(1)
                square_avg = state["square_avg"]

                if weight_decay != 0:
                    grad = grad.add(p, alpha=sign * weight_decay)  # sign * grad is the decayed gradient

                square_avg.mul_(alpha).add_(grad * grad, alpha=1 - alpha)
                if centered:
                    grad_avg = state["grad_avg"]
                    grad_avg.mul_(alpha).add_(grad, alpha=sign * (1 - alpha))
                    avg = square_avg.sub(grad_avg * grad_avg).sqrt_().add_(eps)
                else:
                    avg = square_avg.sqrt().add_(eps)

                if momentum > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(momentum).add_(grad / avg, alpha=sign)
                    p.add_(buf, alpha=-lr)
                else:
                    p.add_(grad / avg, alpha=-lr * sign)
