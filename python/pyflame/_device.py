"""device_info() for the current device."""

import builtins
import os
import platform

from . import _C


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_info():
    """Information about the current device.

    CPU: {'type': 'cpu', 'name': ..., 'cores': ...}. ROCm: rocm_get_device_info()
    of the current GPU plus type='rocm'.
    """
    device = _C.get_device()
    if device == "cpu":
        return {"type": "cpu", "name": _cpu_name(), "cores": os.cpu_count(), "threads": _C.cpu_threads()}
    info = _C.rocm_get_device_info(int(device.split(":")[1]))
    info["type"] = "rocm"
    return info


class device(str):
    """A device as torch.device: pf.device('rocm:0'), pf.device('rocm', 0), pf.device('cpu').

    .type is 'cpu' or 'rocm', .index the device number (None when not given, as
    pf.device('rocm')). Unlike torch.device it is a str subclass equal to its string
    form ('rocm:0'): the code that compares t.device with strings, and every
    function taking device=, keeps working with these objects.
    """

    __slots__ = ()

    def __new__(cls, type, index=None):
        if isinstance(type, device) and index is None:
            return type
        if isinstance(type, int) and not isinstance(type, bool):  # torch.device(0): the GPU of that number
            type, index = "rocm", type
        if not isinstance(type, str):
            raise TypeError("device(): expected a string such as 'rocm:0' or 'cpu', got "
                            f"{builtins.type(type).__name__}")
        if index is not None:
            if ":" in type:
                raise ValueError(f"device(): type ({type!r}) must not include an index when index is given")
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise ValueError(f"device(): index must be a non-negative integer, got {index!r}")
            type = f"{type}:{index}"
        _C._parse_device(type)  # raises for anything that is not a device
        return str.__new__(cls, type)

    @property
    def type(self):
        return str(self.partition(":")[0])  # a plain str, as torch.device.type (partition may return self)

    @property
    def index(self):
        _, colon, index = self.partition(":")
        return int(index) if colon else None

    def __repr__(self):
        index = self.index
        return f"device(type='{self.type}')" if index is None else f"device(type='{self.type}', index={index})"

    def __reduce__(self):
        return device, (str(self),)


_DEVICES = {}  # the device objects Tensor.device returns, one per device string


def _tensor_device(t, _get=_C.Tensor.__dict__["device"].__get__):
    name = _get(t, _C.Tensor)
    d = _DEVICES.get(name)
    if d is None:
        d = _DEVICES[name] = device(name)
    return d


_C.Tensor.device = property(_tensor_device, doc="The tensor's device: a pf.device, equal to 'cpu' or 'rocm:N'.")
