"""Interop with other array libraries: pf.from_dlpack and NumPy's ufunc protocol.

The DLPack capsules themselves are made and read in C++ (python/src/bind_dlpack.cpp);
Tensor.__dlpack__ and __dlpack_device__ are bound there.
"""

import enum

import numpy as np

from . import _C

_GPU_DLPACK_TYPES = (2, 10)  # kDLCUDA, kDLROCM


class DLDeviceType(enum.IntEnum):
    """DLPack's device types (dlpack.h), what __dlpack_device__ returns first, as torch's enum."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


_cpp_dlpack_device = _C.Tensor.__dlpack_device__


def _dlpack_device(self):
    """(device type, id) as DLPack numbers them: (kDLCPU, 0) for the CPU; (kDLCUDA, N) for GPUs on
    NVIDIA, (kDLROCM, N) on AMD."""
    kind, index = _cpp_dlpack_device(self)
    return DLDeviceType(kind), index


_C.Tensor.__dlpack_device__ = _dlpack_device


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor sharing memory with `ext_tensor`, as torch.from_dlpack.

    ext_tensor: any object with __dlpack__ (a PyTorch, NumPy, CuPy or JAX array, a
    pyflame tensor) or a DLPack capsule. The result shares the producer's memory
    and keeps the producer alive. On a GPU the producer is given this thread's
    current stream, so work it queued is ordered before ours.
    device: where the result goes ('cpu', 'rocm:N'); another device than the
    producer's makes a copy (copy=False then raises ValueError).
    copy: True always copies; False never does; None copies only when needed.
    """
    if not hasattr(ext_tensor, "__dlpack__"):
        if device is not None or copy is not None:
            raise ValueError("from_dlpack: device and copy are not supported for a DLPack capsule")
        return _C._from_dlpack_capsule(ext_tensor, None)
    source = tuple(ext_tensor.__dlpack_device__())
    kwargs = {"max_version": (1, 0)}
    if copy is not None:
        kwargs["copy"] = copy
    move_to = None
    if device is not None:
        target = tuple(_C._dlpack_device(device))
        if target != source:
            if copy is False:
                raise ValueError(f"from_dlpack: cannot move a DLPack tensor from device {source} to {target} "
                                 "without copying; pass copy=None or copy=True")
            move_to = device
        else:
            kwargs["dl_device"] = target
    if source[0] in _GPU_DLPACK_TYPES:
        kwargs["stream"] = _C._dlpack_stream(source[1])
    # Producers older than DLPack 1.0 take fewer keywords: drop them in turn, as torch does.
    attempts = [(), ("max_version",), ("max_version", "copy"), ("max_version", "copy", "dl_device")]
    for i, dropped in enumerate(attempts):
        try:
            capsule = ext_tensor.__dlpack__(**{k: v for k, v in kwargs.items() if k not in dropped})
            copied_by_producer = "copy" not in dropped
            break
        except TypeError:
            if i == len(attempts) - 1:
                raise
    t = _C._from_dlpack_capsule(capsule, ext_tensor)
    if move_to is not None:
        return t.to(move_to)
    if copy is True and not copied_by_producer:
        return t.clone()
    return t


def _array_wrap(self, array, context=None, return_scalar=False):
    # NumPy's ufuncs on a tensor (np.exp(t), `t * ndarray`) give a tensor back, as in PyTorch,
    # which also turns bool results into uint8; on the tensor's device.
    if array.dtype == np.bool_:
        array = array.astype(np.uint8)
    t = _C.from_numpy(np.asarray(array, order="C"))  # keeps 0-d results 0-d
    return t if str(self.device) == "cpu" else t.to(self.device)


_C.Tensor.__array_wrap__ = _array_wrap
