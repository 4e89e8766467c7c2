"""Grad mode: no_grad, enable_grad and set_grad_enabled, as context managers
and decorators (PyTorch's). The mode is per thread."""

import functools

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

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Ops inside record no backward graph (inference, optimizer updates)."""

    _mode = False


class enable_grad(_GradMode):
    """Turns recording back on inside a no_grad block."""

    _mode = True


class set_grad_enabled(_GradMode):
    """set_grad_enabled(mode): sets grad mode at once; as a context manager, restores the previous mode on exit."""

    def __init__(self, mode):
        self._previous = _C.is_grad_enabled()
        self._mode = bool(mode)
        _C._set_grad_enabled(self._mode)

    def __enter__(self):
        pass

    def __call__(self, fn):
        _C._set_grad_enabled(self._previous)  # as a decorator it applies per call, not now
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper
