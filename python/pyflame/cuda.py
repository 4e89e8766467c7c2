"""pf.cuda: the GPU backend under PyTorch's name, as PyTorch on ROCm keeps `torch.cuda`.

Scripts written for PyTorch guard their GPU code with `torch.cuda.is_available()` and read
memory with `torch.cuda.memory_allocated()`; with this namespace they port by the device
name alone (`device = "rocm" if pf.cuda.is_available() else "cpu"`). Everything here is
pyflame.backend.rocm, on AMD and NVIDIA GPUs alike. Differences from torch.cuda:
- the device string stays 'rocm' ('cuda' is a ValueError that says so);
- manual_seed and manual_seed_all seed the one generator that serves every device (its
  numbers do not depend on the device), as pf.manual_seed;
- reset_peak_memory_stats resets all the allocator's counters, the peaks among them.
Without a usable GPU, is_available() is False, device_count() 0 and the memory figures 0
(as torch.cuda); the rest raise pf.ROCmNotAvailableError.
"""

from . import _C
from .backend import rocm as _rocm
from .backend.rocm import Event, Stream, current_stream, default_stream

__all__ = ["is_available", "device_count", "current_device", "set_device", "synchronize", "manual_seed",
           "manual_seed_all", "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "empty_cache", "get_device_name",
           "get_device_properties", "is_bf16_supported", "can_device_access_peer", "Event", "Stream", "current_stream", "default_stream"]


def is_available():
    """Whether a GPU can be used (a build with the backend, a driver and a device)."""
    return _C.rocm_is_available()


def device_count():
    """The number of GPUs (0 without a usable one)."""
    return _C.rocm_device_count()


def can_device_access_peer(device, peer_device):
    """Whether `device` reads `peer_device`'s memory directly: copies between them then skip the host."""
    _rocm._require()
    return _C.rocm_can_device_access_peer(_rocm._device_index(device), _rocm._device_index(peer_device))


def current_device():
    """The index of the current GPU."""
    _rocm._require()
    return _C.rocm_get_device()


def set_device(device):
    """Makes `device` (an index, 'rocm:N' or a pf.device) the current GPU."""
    _rocm._require()
    _C.rocm_set_device(_rocm._device_index(device))


def synchronize(device=None):
    """Waits for all work queued on `device` (default: the current GPU)."""
    _rocm._require()
    if device is None:
        _C.rocm_synchronize()
        return
    previous = _C.rocm_get_device()
    _C.rocm_set_device(_rocm._device_index(device))
    try:
        _C.rocm_synchronize()
    finally:
        _C.rocm_set_device(previous)


def manual_seed(seed):
    """Seeds the random numbers (the one generator of every device: see the module's notes)."""
    _C.manual_seed(seed)


manual_seed_all = manual_seed


def _stat(device, key):
    if not _C.rocm_is_available():
        return 0
    return _rocm.get_memory_manager(device).get_stats()[key]


def memory_allocated(device=None):
    """Bytes of GPU memory held by tensors on `device` (default: the current GPU)."""
    return _stat(device, "total_allocated")


def max_memory_allocated(device=None):
    """The most bytes tensors have held on `device` since the start or reset_peak_memory_stats()."""
    return _stat(device, "peak_allocated")


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the driver on `device`: in use or cached."""
    return _stat(device, "reserved_bytes")


def max_memory_reserved(device=None):
    """The most bytes the caching allocator has held on `device`."""
    return _stat(device, "peak_reserved_bytes")


def reset_peak_memory_stats(device=None):
    """Starts the peaks (and the allocator's other counters) again from the current figures."""
    if _C.rocm_is_available():
        _rocm.get_memory_manager(device).reset_stats()


def empty_cache():
    """Gives every GPU's cached, unused memory back to the driver (tensors stay valid)."""
    for index in range(device_count()):
        _rocm.get_memory_manager(index).clear_pool()


def get_device_properties(device=None):
    """name, total_memory, multi_processor_count, warp_size and the rest of rocm's device info,
    as attributes."""
    _rocm._require()
    info = _C.rocm_get_device_info(_rocm._device_index(device))
    return _DeviceProperties(info)


def get_device_name(device=None):
    """The GPU's name, e.g. 'NVIDIA H200' or 'AMD Instinct MI300X'."""
    return get_device_properties(device).name


def is_bf16_supported():
    """Whether bfloat16 runs on the GPU: every GPU the backend runs on (CDNA, RDNA, sm_80 and newer)."""
    return is_available()


class _DeviceProperties:
    def __init__(self, info):
        self.__dict__.update(info)
        self.multi_processor_count = info["compute_units"]

    def __repr__(self):
        return (f"_DeviceProperties(name='{self.name}', architecture='{self.architecture}', "
                f"total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count})")
