"""device_info() for the current device."""

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
