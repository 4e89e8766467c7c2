"""Grad mode: no_grad, enable_grad, set_grad_enabled and inference_mode, as
context managers and decorators (PyTorch's; no_grad and enable_grad also
decorate bare, @pf.no_grad). The mode is per thread."""

import functools
import threading

from .. import _C


class _GradMode:
    """Sets grad mode to `self._mode` inside a `with` block or a decorated function, then restores it."""

    _mode = True

    def __enter__(self):
        self._previous = _C.is_grad_enabled()
        _C._set_grad_enabled(self._mode)

    def __exit__(self, *exc):
        _C._set_grad_enabled(self._previous)
        return False

    def _arguments(self):
        """What a new instance of the mode, one per decorated call, is made with."""
        return ()

    def __call__(self, fn):
        mode, arguments = self.__class__, self._arguments()

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with mode(*arguments):
                return fn(*args, **kwargs)

        return wrapper


class _ArgumentlessMode(_GradMode):
    """A mode that takes no argument, so it also decorates without parentheses (@pf.no_grad), as PyTorch's."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_ArgumentlessMode):
    """Ops inside record no backward graph (inference, optimizer updates)."""

    _mode = False


class enable_grad(_ArgumentlessMode):
    """Turns recording back on inside a no_grad block."""

    _mode = True


_inference = threading.local()


def is_inference_mode_enabled():
    """Whether the innermost inference_mode region (of this thread) is on."""
    return getattr(_inference, "enabled", False)


class inference_mode(_GradMode):
    """inference_mode(mode=True): no backward graph inside, as torch.inference_mode. PyFlame has no inference
    tensors: results made inside may later be used with autograd like any tensor made under no_grad."""

    def __init__(self, mode=True):
        self._inference = bool(mode)
        self._mode = _C.is_grad_enabled() and not self._inference

    def __new__(cls, mode=True):
        if callable(mode):  # bare @pf.inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __enter__(self):
        self._previous_inference = is_inference_mode_enabled()
        _inference.enabled = self._inference
        if self._inference:
            super().__enter__()
        else:
            self._previous = _C.is_grad_enabled()

    def __exit__(self, *exc):
        _inference.enabled = self._previous_inference
        return super().__exit__(*exc)

    def _arguments(self):
        return (self._inference,)


class set_grad_enabled(_GradMode):
    """set_grad_enabled(mode): sets grad mode at once; as a context manager, restores the previous mode on exit."""

    def __init__(self, mode):
        self._previous = _C.is_grad_enabled()
        self._mode = bool(mode)
        _C._set_grad_enabled(self._mode)

    def __enter__(self):
        pass

    def _arguments(self):
        return (self._mode,)

    def __call__(self, fn):
        _C._set_grad_enabled(self._previous)  # as a decorator it applies per call, not now
        return super().__call__(fn)
