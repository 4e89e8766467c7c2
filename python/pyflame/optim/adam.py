"""Adam and AdamW (decoupled weight decay), as torch.optim.Adam and torch.optim.AdamW."""

from .. import _C
from .optimizer import Optimizer, _check_nonnegative, _check_unsupported, _fused_batches, _no_grad_step

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam, PyTorch's algorithm (t counts this parameter's steps):

        g = grad (+ weight_decay * p, unless decoupled)   (-grad with maximize)
        p = p * (1 - lr * weight_decay)                   (decoupled, AdamW)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v), used in place of v        (amsgrad)
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    capturable=True keeps each step count on its parameter's device, where the update reads it (as
    PyTorch's): a step that pf.compile captures as a device graph then needs nothing from the host.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        name = type(self).__name__
        _check_unsupported(name, differentiable=differentiable, fused=fused)
        if isinstance(lr, _C.Tensor) or any(isinstance(b, _C.Tensor) for b in betas):
            raise TypeError(f"{name}: lr and betas must be numbers (tensors are not supported, docs/training.md)")
        _check_nonnegative(lr=lr, eps=eps)
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        _check_nonnegative(weight_decay=weight_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "amsgrad": amsgrad,
                    "maximize": maximize, "capturable": capturable,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)

    @_no_grad_step
    def step(self):
        for group, (lr, (beta1, beta2), eps, weight_decay, amsgrad, decoupled, maximize, capturable) in (
                self._groups_with("lr", "betas", "eps", "weight_decay", "amsgrad", "decoupled_weight_decay",
                                  "maximize", "capturable")):
            buffers = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if amsgrad else ("exp_avg", "exp_avg_sq")
            params = self._params_with_grad(group, buffers)
            options = dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                           decoupled_weight_decay=decoupled, amsgrad=amsgrad, maximize=maximize)
            # The bias corrections depend on each parameter's step count: read on the host, or, where it lives
            # on the device (capturable) or the step is being compiled, handed to the update, which computes
            # them from it, so a replayed or captured step advances them.
            counted = capturable or _C._is_tracing()
            for (_, _, step), batch in _fused_batches(
                    params, None if counted else lambda p: self.state[p]["step"].item()):
                states = [self.state[p] for p in batch]
                corrections = {} if counted else dict(bias_correction1=1 - beta1 ** step,
                                                      bias_correction2=1 - beta2 ** step)
                _C.adam_step_(batch, [p.grad for p in batch], [s["exp_avg"] for s in states],
                              [s["exp_avg_sq"] for s in states],
                              [s["max_exp_avg_sq"] for s in states] if amsgrad else None,
                              steps=[s["step"] for s in states] if counted else None, **options, **corrections)

class AdamW(Adam):
    """Adam with decoupled weight decay (p = p * (1 - lr * weight_decay) before the Adam update)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
