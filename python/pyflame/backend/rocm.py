"""The ROCm backend's Python API (seed 000): devices, streams, events, memory.

One HIP source drives AMD GPUs through ROCm and NVIDIA GPUs through CUDA.
Everything here needs a build with the backend (PYFLAME_USE_ROCM=ON) and a
usable GPU; `diagnose()` says what was found and what is missing.
"""

import ctypes.util
import enum
import os
import struct

from .. import _C
from .rocm_config import (  # noqa: F401  seed 003's configuration
    Architecture, Config, ConfigurationError, architecture_from_gfx, get_architecture, get_optimization_summary,
    optimize)

try:
    from .. import _rocm
except ImportError as _e:  # built without the backend, or its GPU runtime is missing
    _rocm = None
    _import_error = str(_e)
else:
    _import_error = None

# The spec's device functions, under their C++ names.
is_available = _C.rocm_is_available
get_device_count = _C.rocm_device_count
get_current_device = _C.rocm_get_device
set_device = _C.rocm_set_device
synchronize = _C.rocm_synchronize
get_device_info = _C.rocm_get_device_info
can_device_access_peer = _C.rocm_can_device_access_peer


class FusedOpType(enum.Enum):
    """Seed 000's fusion patterns (include/pyflame/ir/fusion.h)."""

    MATMUL_BIAS = "MATMUL_BIAS"
    MATMUL_BIAS_RELU = "MATMUL_BIAS_RELU"
    MATMUL_BIAS_GELU = "MATMUL_BIAS_GELU"
    CONV_BIAS = "CONV_BIAS"
    CONV_BIAS_RELU = "CONV_BIAS_RELU"
    CONV_BN_RELU = "CONV_BN_RELU"
    ADD_RELU = "ADD_RELU"
    MUL_ADD = "MUL_ADD"


def can_fuse(ops):
    """The FusedOpType a chain of op names forms, in the order they run (["matmul", "add", "relu"] ->
    MATMUL_BIAS_RELU), or None. pf.compile's fusion pass asks the same of the chains in a graph and
    runs those a fused op computes (today MATMUL_BIAS_RELU: linear_relu); docs/compile.md."""
    if isinstance(ops, str):
        raise TypeError("can_fuse: ops must be a sequence of op names, got a str")
    name = _C._can_fuse(list(ops))
    return None if name is None else FusedOpType(name)


class CompiledKernel:
    """A kernel compiled at run time for one device (ROCmCompiler.compile_kernel).

    Calling it launches it on its device's current stream: kernel(grid, block, args, shared_mem=0),
    grid and block an int or up to 3 ints. Each argument becomes the kernel parameter of its type:
    a tensor its data pointer (it must be on the kernel's device), a bool `bool`, an int `long long`
    (int64), a float `double`; a NumPy scalar (np.int32(n), np.float32(x), ...) its own type. As with
    CuPy's RawKernel, pass NumPy scalars for 32-bit parameters: the kernel reads what its signature says.
    """

    def __init__(self, handle):
        self._handle = handle

    name = property(lambda self: self._handle.name, doc="The kernel's name, as asked for.")
    architecture = property(lambda self: self._handle.architecture, doc="'gfx90a', 'sm_90', ...")
    device = property(lambda self: self._handle.device, doc="The device index it was loaded on.")

    def __call__(self, grid, block, args=(), shared_mem=0):
        self._handle.launch(_dims(grid, "grid"), _dims(block, "block"), int(shared_mem),
                            [self._argument(a, i) for i, a in enumerate(args)])

    def _argument(self, a, i):
        if isinstance(a, _C.Tensor):
            if a.device == "cpu" or _device_index(a.device) != self.device:
                raise ValueError(f"{self.name}: argument {i} is on '{a.device}' but the kernel runs on "
                                 f"'rocm:{self.device}'")
            return struct.pack("=Q", a.data_ptr())
        if isinstance(a, bool):
            return struct.pack("=?", a)
        if isinstance(a, int):
            return struct.pack("=q", a)
        if isinstance(a, float):
            return struct.pack("=d", a)
        if type(a).__module__ == "numpy" and hasattr(a, "tobytes") and getattr(a, "ndim", None) == 0:
            return a.tobytes()
        raise TypeError(f"{self.name}: argument {i} has type {type(a).__name__}; expected a tensor, bool, int, "
                        "float or NumPy scalar")

    def __repr__(self):
        return f"CompiledKernel(name={self.name!r}, architecture={self.architecture!r}, device={self.device})"


def _dims(v, what):
    dims = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and d >= 1 for d in dims):
        raise ValueError(f"{what} must be a positive int or 1 to 3 positive ints, got {v!r}")
    return list(dims) + [1] * (3 - len(dims))


class ROCmCompiler:
    """Seed 003's run-time compiler: HIP/CUDA C++ source to a kernel of the current device, through
    hiprtc on AMD and NVRTC on NVIDIA (docs/compile.md, "Run-time compilation").

    Kernels are cached in memory (`config.kernel_cache_size` of them, least recently used out) and on
    disk (`config.kernel_cache_dir`, by default $PYFLAME_KERNEL_CACHE or ~/.cache/pyflame/kernels;
    off with `kernel_cache_enabled=False`), keyed by the source, name, options, architecture and
    compiler; a corrupt entry on disk is recompiled with a warning, never loaded. A failed
    compilation raises pf.HIPCompilationError with the compiler's log and the numbered source.
    """

    def __init__(self, config=None):
        if config is None:
            config = Config()
        _preload_nvrtc()
        cache_dir = config.kernel_cache_dir if config.kernel_cache_enabled else ""
        self._compiler = _require().KernelCompiler(cache_dir, config.kernel_cache_size)

    @property
    def cache_dir(self):
        return self._compiler.cache_dir or None

    def compile_kernel(self, source, name, options=()):
        """The kernel `name` of `source` (its C++ name: `extern "C"` is not needed; a template
        instance as "scale<float>"), compiled for the current device. `options` go to the compiler
        after the target and -std=c++20 ("-DN=4", "-I/path", ...). The source may
        #include "kernels/functors.h": the library's elementwise functors (pyflame::kernels),
        which a kernel takes by value."""
        if not isinstance(source, str) or not isinstance(name, str):
            raise TypeError("compile_kernel(source, name): both must be str")
        return CompiledKernel(self._compiler.compile(source, name, [str(o) for o in options]))

    def get_compilation_stats(self):
        """compilations, cache_hits (memory_hits + disk_hits), cache_misses, cache_hit_rate_percent,
        total_compile_time_ms, avg_compile_time_ms."""
        return self._compiler.stats()

    def clear_cache(self):
        """Empties the in-memory cache and removes this compiler's disk entries; kernels already
        returned stay usable."""
        self._compiler.clear()


def compiler_version():
    """The run-time compiler in use, e.g. 'NVRTC 13.0' or 'hiprtc 6.2'."""
    _preload_nvrtc()
    return _require().compiler_version()


def _preload_nvrtc():
    """On NVIDIA, loads NVRTC from NVIDIA's pip wheel (nvidia-cuda-nvrtc) when the system's loader
    path has none."""
    if _rocm is not None and _rocm.platform() == "nvidia" and not ctypes.util.find_library("nvrtc"):
        _preload_wheel_library("nvidia/*/lib/libnvrtc.so.*")


def _preload_wheel_library(pattern):
    """Loads the newest library matching `pattern` under a sys.path entry (NVIDIA's wheels put
    theirs under nvidia/) into the process, so that the backend's dlopen by name finds it
    loaded. Returns whether one loaded."""
    import glob
    import sys
    for base in sys.path:
        for lib in sorted(glob.glob(os.path.join(base, pattern)), reverse=True):
            try:
                ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                return True
            except OSError:
                continue
    return False


def _require():
    if not _C.rocm_is_available():
        raise _C.ROCmNotAvailableError("ROCm is not available: " + str(_C.rocm_unavailable_reason()))
    if _rocm is None:
        raise _C.ROCmNotAvailableError(f"the ROCm backend's Python module could not load: {_import_error}")
    return _rocm


def _device_index(device):
    if device is None:
        return _C.rocm_get_device()
    if isinstance(device, int):
        return device
    return int(_C._parse_device(str(device)).split(":")[1])


class Stream:
    """A GPU stream. As a context manager it is the current stream of its
    device in this thread, so the ops in the block run on it. Work on other
    streams is not ordered with it: a tensor made on one stream and used on
    another needs an Event recorded after it (or a synchronize) in between. Copies
    from pageable host memory are ordered for it, as PyTorch's (they have completed
    there when they return): entering the block waits on the device for this
    thread's last one.

    priority: 0 is normal, negative is higher priority (clamped to the device's range).
    """

    def __init__(self, device=None, priority=0):
        self._stream = _require().Stream(_device_index(device), priority)
        self._previous = []

    @property
    def device(self):
        return self._stream.device

    @property
    def priority(self):
        return self._stream.priority

    @property
    def handle(self):
        return self._stream.handle

    def synchronize(self):
        self._stream.synchronize()

    def query(self):
        """True when all work queued on the stream has finished."""
        return self._stream.query()

    def __enter__(self):
        self._previous.append(_rocm.current_stream(self.device))
        _rocm.set_current_stream(self.device, self.handle)
        return self

    def __exit__(self, *exc):
        _rocm.set_current_stream(self.device, self._previous.pop())
        return False


def current_stream(device=None):
    """The handle of this thread's current stream on `device`: the stream of the
    innermost Stream context, else default_stream(device)."""
    return _require().current_stream(_device_index(device))


def default_stream(device=None):
    """The handle of this thread's default stream on `device`. Each thread has its
    own, a non-blocking stream (never the legacy null stream), so work of different
    threads runs concurrently and is not ordered: hand tensors between threads after
    a synchronize() or an Event."""
    return _require().default_stream(_device_index(device))


class Event:
    """A GPU event: record() on a stream, then synchronize(), query() or elapsed_time(end) in ms."""

    def __init__(self, enable_timing=False):
        self._event = _require().Event(enable_timing)

    def record(self, stream=None):
        handle = stream.handle if stream is not None else _rocm.current_stream(_C.rocm_get_device())
        self._event.record(handle)

    def synchronize(self):
        self._event.synchronize()

    def query(self):
        return self._event.query()

    def elapsed_time(self, end):
        return self._event.elapsed_time(end._event)


def get_memory_manager(device=None):
    """The caching memory manager of `device` (default: the current one): get_stats(),
    reset_stats(), clear_pool(), get_memory_info() -> (free, total), warmup(bytes)."""
    return _require().get_memory_manager(-1 if device is None else _device_index(device))


def get_pinned_pool():
    """The pool of page-locked host buffers used for transfers."""
    return _require().get_pinned_pool()


def warmup_memory_pool(batch_size, model_size="medium"):
    """Reserve GPU memory for a model of `model_size` ('small', 'medium', 'large') at
    `batch_size`, and the pinned staging buffers, so first steps do not wait for the driver."""
    _require().warmup_memory_pool(batch_size, model_size)


def set_allow_tf32(allow):
    """Let float32 matmuls use TF32 tensor cores (NVIDIA Ampere and newer): several times
    faster, about 1e-3 relative error. Off by default, as PyTorch's
    torch.backends.cuda.matmul.allow_tf32; PYFLAME_ALLOW_TF32=1 sets it at start-up.
    rocBLAS has no TF32 mode: on AMD float32 stays full precision."""
    _require().set_allow_tf32(bool(allow))


def allow_tf32():
    return _require().allow_tf32()


def set_conv_allow_tf32(allow):
    """Let float32 convolutions use TF32 (on by default, as torch.backends.cudnn.allow_tf32;
    PYFLAME_CONV_ALLOW_TF32=0 turns it off at start-up)."""
    _require().set_conv_allow_tf32(bool(allow))


def conv_allow_tf32():
    return _require().conv_allow_tf32()


def set_dnn_enabled(enabled):
    """Let convolutions use the DNN library (MIOpen on AMD, cuDNN on NVIDIA) where the
    build has it: on by default, as torch.backends.cudnn.enabled; PYFLAME_DNN_ENABLED=0
    turns it off at start-up. Off, they run as im2col + BLAS, as on an AMD machine
    without MIOpen: slower, the same results."""
    _require().set_dnn_enabled(bool(enabled))


def dnn_enabled():
    return _require().dnn_enabled()


def get_tuning_cache():
    """The convolution algorithm cache (seed 000's MIOpenTuningCache):
    enable_exhaustive_search(bool), set_cache_file(path), clear(), get_stats() ->
    {'hits', 'misses', 'entries'}. Entries are keyed by shapes, dtype, GPU
    architecture and DNN library version."""
    return _require().get_tuning_cache()


# ---- The DNN adapter's entry points (seed 000's ROCmDNN) on tensors: packed
# floating tensors on the current device, results in new tensors. The ops
# (pf.max_pool2d, pf.batch_norm, ...) run the project's own kernels; these
# call the library (cuDNN on NVIDIA, MIOpen on AMD), so that the two can be
# timed on the same inputs (benchmarks/rocm_benchmark.py --dnn).

def _dnn():
    r = _require()
    if not hasattr(r, "dnn_library"):
        raise _C.NotSupportedError("this build has no DNN adapter (built with PYFLAME_WITH_DNN=OFF, or on AMD "
                                   "without MIOpen)")
    return r


def _dnn_operand(t, name):
    if t.device != f"rocm:{_C.rocm_get_device()}" or not t.is_contiguous():
        raise ValueError(f"{name}: the DNN entry points take contiguous tensors on the current device "
                         f"(rocm:{_C.rocm_get_device()}); got one on {t.device}"
                         + ("" if t.is_contiguous() else ", not contiguous"))
    return t.data_ptr()


def _dtype_name(t):
    return str(t.dtype).rsplit(".", 1)[-1]


def _like(x, shape):
    return _C._empty(*shape, dtype=x.dtype, device=x.device)


def _pair(v):
    return [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]


def dnn_library():
    """'cuDNN' or 'MIOpen': the library the dnn_* functions call."""
    return _dnn().dnn_library()


def dnn_pooling2d_forward(pool_type, input, kernel_size, stride=None, padding=0, ceil_mode=False,
                          count_include_pad=True):
    """pool_type 'max_pool2d' or 'avg_pool2d' of input (N, C, H, W), with
    pf.max_pool2d / pf.avg_pool2d's arguments (dilation 1). A ceil_mode that adds
    a window raises NotSupportedError: the libraries round the output size down."""
    r = _dnn()
    kernel = _pair(kernel_size)
    stride = kernel if stride is None else _pair(stride)
    padding = _pair(padding)
    shape = list(input.shape[:2])
    for size, k, s, p in zip(input.shape[2:], kernel, stride, padding):
        span = size + 2 * p - k
        out = (span + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= size + p:
            out -= 1
        shape.append(out)
    out = _like(input, shape)
    r.dnn_pooling2d_forward(pool_type, _dtype_name(input), list(input.shape), _dnn_operand(input, pool_type), shape,
                            out.data_ptr(), kernel, padding, stride, bool(ceil_mode), bool(count_include_pad))
    return out


def dnn_batchnorm_forward_training(input, weight, bias, running_mean, running_var, momentum=0.1, eps=1e-5):
    """Batch norm of input (N, C, ...) by its batch statistics, as pf.batch_norm(training=True):
    running_mean and running_var (C) are updated in place. Returns (output, saved_mean,
    saved_inv_var), the last two the batch mean and 1 / sqrt(biased variance + eps)."""
    r = _dnn()
    name = "batchnorm_forward_training"
    out = _like(input, input.shape)
    saved_mean, saved_inv_var = _like(running_mean, running_mean.shape), _like(running_var, running_var.shape)
    r.dnn_batchnorm_forward_training(_dtype_name(input), list(input.shape), _dnn_operand(input, name),
                                     out.data_ptr(), _dnn_operand(weight, name), _dnn_operand(bias, name),
                                     float(momentum), _dnn_operand(running_mean, name),
                                     _dnn_operand(running_var, name), float(eps), saved_mean.data_ptr(),
                                     saved_inv_var.data_ptr())
    return out, saved_mean, saved_inv_var


def dnn_batchnorm_forward_inference(input, weight, bias, running_mean, running_var, eps=1e-5):
    """Batch norm of input (N, C, ...) by the running statistics, as pf.batch_norm(training=False)."""
    r = _dnn()
    name = "batchnorm_forward_inference"
    out = _like(input, input.shape)
    r.dnn_batchnorm_forward_inference(_dtype_name(input), list(input.shape), _dnn_operand(input, name),
                                      out.data_ptr(), _dnn_operand(weight, name), _dnn_operand(bias, name),
                                      _dnn_operand(running_mean, name), _dnn_operand(running_var, name), float(eps))
    return out


def dnn_activation_forward(activation_type, input, alpha=0.0):
    """activation_type 'relu', 'sigmoid', 'tanh' or 'elu' (alpha: ELU's alpha) of input;
    others raise NotSupportedError (the libraries share only these)."""
    r = _dnn()
    out = _like(input, input.shape)
    r.dnn_activation_forward(activation_type, _dtype_name(input), list(input.shape),
                             _dnn_operand(input, activation_type), out.data_ptr(), float(alpha))
    return out


def dnn_softmax_forward(input, axis=-1, log_softmax=False):
    """Softmax (log_softmax=True: its logarithm) of input along axis."""
    r = _dnn()
    out = _like(input, input.shape)
    r.dnn_softmax_forward(_dtype_name(input), list(input.shape), _dnn_operand(input, "softmax_forward"),
                          out.data_ptr(), int(axis), bool(log_softmax))
    return out


def dnn_reduce(reduce_type, input, dims=(), keepdim=False):
    """reduce_type 'sum', 'mean', 'max', 'min' or 'prod' of input over dims (empty: all),
    as pf.sum(input, dims, keepdim) and its siblings; max and min return values only."""
    r = _dnn()
    dims = [dims] if isinstance(dims, int) else [int(d) for d in dims]
    rank = len(input.shape)
    reduced = {d + rank if d < 0 else d for d in dims} if dims else set(range(rank))  # the library checks the range
    shape = [1 if d in reduced else n for d, n in enumerate(input.shape) if keepdim or d not in reduced]
    out = _like(input, shape)
    r.dnn_reduce(reduce_type, _dtype_name(input), list(input.shape), _dnn_operand(input, reduce_type), shape,
                 out.data_ptr(), dims)
    return out


def _runtime_libraries():
    found = {}
    for name in ("cudart", "amdhip64"):
        path = ctypes.util.find_library(name)
        if path:
            found[name] = path
    return found


def _driver():
    try:
        with open("/proc/driver/nvidia/version") as f:
            return "NVIDIA " + f.readline().strip()
    except OSError:
        pass
    if os.path.exists("/dev/kfd"):
        return "AMD kernel driver (/dev/kfd present)"
    return None


def diagnose():
    """What the ROCm backend found on this machine and, if it is not usable, what to do."""
    lib_dir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lib")
    built = os.path.exists(os.path.join(lib_dir, "libpyflame_rocm.so"))
    lines = ["PyFlame ROCm backend"]
    lines.append(f"  built with the backend: {'yes' if built else 'no'}"
                 + (f" ({_rocm.platform()} platform)" if _rocm is not None else ""))
    libs = _runtime_libraries()
    lines.append("  GPU runtime libraries on the search path: "
                 + (", ".join(f"{k} ({v})" for k, v in libs.items()) if libs else "none found"))
    lines.append(f"  driver: {_driver() or 'none found'}")
    if _C.rocm_is_available():
        for i in range(_C.rocm_device_count()):
            info = _C.rocm_get_device_info(i)
            lines.append(
                f"  rocm:{i}: {info['name']} ({info['platform']}, {info['architecture']}, warp {info['warp_size']}), "
                f"{info['total_memory'] / 2**30:.1f} GiB, {info['compute_units']} compute units, {info['runtime_version']}")
        return "\n".join(lines)
    lines.append(f"  not available: {_C.rocm_unavailable_reason()}")
    if not built:
        lines.append("  to do: rebuild with PYFLAME_USE_ROCM=1 (and PYFLAME_HIP_PLATFORM=nvidia on NVIDIA), "
                     "e.g. PYFLAME_USE_ROCM=1 pip install .  (docs/rocm.md)")
    elif _import_error:
        lines.append(f"  the backend's Python module failed to load: {_import_error}")
        lines.append("  to do: install the GPU runtime (ROCm, or the CUDA toolkit) and put its libraries on the "
                     "library path")
    else:
        lines.append("  to do: check the driver and that a GPU is visible (HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES)")
    return "\n".join(lines)
