"""Automatic mixed precision, as torch.amp: autocast and GradScaler.

    scaler = pf.amp.GradScaler()
    for x, y in loader:
        optimizer.zero_grad()
        with pf.autocast("rocm", dtype=pf.float16):
            loss = pf.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

Inside autocast, matmul, linear and convolutions run in the low-precision
dtype; softmax, norms, losses, sums and exp/log run in float32; the rest in
their inputs' dtype (docs/training.md has the lists). GradScaler multiplies
the loss so float16 gradients do not underflow, unscales them before the
step, skips steps whose gradients hold inf or NaN and adapts the scale.
"""

import functools

from . import _C
from .autograd.grad_mode import no_grad


class autocast:
    """autocast(device_type, dtype=None, enabled=True, cache_enabled=None): a context manager and decorator.

    device_type is 'rocm' (the GPU) or 'cpu'; dtype defaults to float16 on 'rocm' and bfloat16
    on 'cpu', as PyTorch's."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise TypeError(f"autocast: device_type must be a string ('rocm' or 'cpu'), got {type(device_type).__name__}")
        self.device_type = device_type.split(":")[0]
        if dtype is None:
            dtype = _C.dtype.bfloat16 if self.device_type == "cpu" else _C.dtype.float16
        if dtype not in (_C.dtype.float16, _C.dtype.bfloat16):
            raise TypeError(f"autocast: dtype must be pyflame.float16 or pyflame.bfloat16, got {dtype}")
        self.fast_dtype = dtype
        self.enabled = bool(enabled)

    def __enter__(self):
        self._previous = _C._get_autocast(self.device_type)
        _C._set_autocast(self.device_type, self.fast_dtype if self.enabled else None)
        return self

    def __exit__(self, *exc):
        _C._set_autocast(self.device_type, self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapper


def is_autocast_enabled(device_type="rocm"):
    return _C._get_autocast(device_type) is not None


def get_autocast_dtype(device_type="rocm"):
    d = _C._get_autocast(device_type)
    return d if d is not None else (_C.dtype.bfloat16 if device_type == "cpu" else _C.dtype.float16)


def _all_finite(tensors):
    """One host read for all of them: the number of non-finite entries is 0."""
    bad = None
    for t in tensors:
        a = t.abs()
        count = _C.logical_or(a != a, a == float("inf")).sum()
        bad = count if bad is None else bad + count.to(bad.device)
    return bad is None or int(bad.item()) == 0


class GradScaler:
    """torch.amp.GradScaler: scale(loss), unscale_(optimizer), step(optimizer), update(new_scale=None)."""

    def __init__(self, device="rocm", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._device = device
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"unscaled": bool, "found_inf": bool}

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """outputs * scale (a tensor, or a list/tuple of them)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, _C.Tensor):
            return outputs * self._scale
        return type(outputs)(self.scale(o) for o in outputs)

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "found_inf": False, "stepped": False})

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale in place and records whether any is inf/NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["unscaled"]:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        inv = 1.0 / self._scale
        with no_grad():
            for g in grads:
                g.mul_(inv)
        state["found_inf"] = not _all_finite(grads)
        state["unscaled"] = True

    def step(self, optimizer, *args, **kwargs):
        """Unscales (if unscale_ was not called) and runs optimizer.step() unless a gradient is inf/NaN."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        state = self._state(optimizer)
        if state["stepped"]:
            raise RuntimeError("step() has already been called since the last update().")
        if not state["unscaled"]:
            self.unscale_(optimizer)
        state["stepped"] = True
        if state["found_inf"]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Backs the scale off after a skipped step, grows it after growth_interval good ones."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, _C.Tensor) else new_scale)
        else:
            found_inf = any(s["found_inf"] for s in self._per_optimizer.values())
            if found_inf:
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
