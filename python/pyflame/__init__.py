"""PyFlame: a tensor library with a C++ core, a CPU backend and a GPU backend
written once in HIP for AMD ROCm and NVIDIA.

    import pyflame as pf
    x = pf.randn(2, 3)
    y = pf.softmax(x @ x.T, dim=-1)
"""

import ctypes as _ctypes
import os as _os

# OpenMP threads that wait passively: the CPU kernels' OpenMP threads and
# OpenBLAS's own threads take turns on the same cores (matmul, then an
# elementwise op, then matmul), and threads spinning after their region steal
# the cores from the other pool (an MLP ran 2.8x slower). Read by the OpenMP
# runtime when it starts, so set before the core library loads; a value set by
# the user wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _preload_openblas():
    # libpyflame links OpenBLAS from the scipy-openblas32 package; loading it
    # here makes that work for every install layout (venv, --target, editable).
    import scipy_openblas32 as _sob

    _ctypes.CDLL(_os.path.join(_sob.get_lib_dir(), _sob.get_library(True)), mode=_ctypes.RTLD_GLOBAL)


_preload_openblas()

from . import _C  # noqa: E402
from ._C import (  # noqa: E402,F401
    AutogradError,
    DeviceError,
    Generator,
    HIPCompilationError,
    InvalidArgumentError,
    InvalidTypeError,
    NotSupportedError,
    ROCmError,
    ROCmMemoryError,
    ROCmNotAvailableError,
    Tensor,
    cpu_threads,
    dtype,
    get_device,
    default_generator,
    has_derivative,
    has_kernel,
    host_transfer_count,
    implicit_copy_count,
    is_differentiable,
    is_supported,
    manual_seed,
    op_table,
    promote_types,
    reset_host_transfer_count,
    reset_implicit_copy_count,
    result_type,
    rocm_device_count,
    rocm_get_device,
    rocm_get_device_info,
    rocm_is_available,
    rocm_set_device,
    rocm_synchronize,
    rocm_unavailable_reason,
    set_cpu_threads,
    set_device,
    set_strict_device_placement,
    strict_device_placement,
    synchronization_count,
    synchronize,
)
from ._C import (  # noqa: E402,F401  losses and attention (compositions, outside the op table)
    bce_loss,
    bce_with_logits,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    kl_div,
    l1_loss,
    mse_loss,
    scaled_dot_product_attention,
    smooth_l1_loss,
)
from ._creation import (  # noqa: E402,F401
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    get_default_dtype,
    linspace,
    logspace,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    set_default_dtype,
    tensor,
    zeros,
    zeros_like,
)
from ._C import cat, chunk, embedding, masked_fill, one_hot, split, stack, tril, triu  # noqa: E402,F401  (shape_ops.h)
from ._device import device, device_info  # noqa: E402,F401
from . import autograd  # noqa: E402,F401
from .autograd import (  # noqa: E402,F401
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled)
from . import amp  # noqa: E402,F401
from . import utils  # noqa: E402,F401  (pf.utils.data, pf.utils.checkpoint)
from . import datasets  # noqa: E402,F401
from .amp import autocast, is_autocast_enabled  # noqa: E402,F401
from ._tensor_repr import get_printoptions, set_printoptions  # noqa: E402,F401  (and Tensor.__repr__)
from ._interop import DLDeviceType, from_dlpack  # noqa: E402,F401  (and Tensor.__array_wrap__, __dlpack_device__)
from . import backend  # noqa: E402,F401  (pf.backend.rocm)
from . import cuda  # noqa: E402,F401  (pf.cuda: the GPU backend under torch.cuda's names)

__version__ = "0.1.0"

uint8 = dtype.uint8
int8 = dtype.int8
int16 = dtype.int16
int32 = dtype.int32
int64 = dtype.int64
float16 = dtype.float16
bfloat16 = dtype.bfloat16
float32 = dtype.float32
float64 = dtype.float64

# Every op of the op table, as pf.<name> (pf.add, pf.softmax, ...); the
# random ones are the factories of _creation. These shadow Python's
# max/min/sum/abs/pow inside this module, so nothing below may use those builtins.
for _name, _family in _C.op_table():
    if _family != "RANDOM":
        globals()[_name] = getattr(_C, _name)
del _name, _family
# max/min with PyTorch's forms (values and indices over a dim), and amax/amin.
from ._reductions import amax, amin, max, min  # noqa: E402,F401,A004
from ._shape_api import *  # noqa: E402,F401,F403  (function forms of the methods, Size, finfo, iinfo; after the table's squeeze)
from ._sorting import (  # noqa: E402,F401  sort, topk, median, unique, nonzero, where(condition), ...
    argsort, argwhere, kthvalue, median, msort, nonzero, sort, topk, unique, unique_consecutive, where)
from ._linalg import (  # noqa: E402,F401,A004  reductions, products, norms, einsum, pf.linalg (compositions)
    addbmm, addmm, addmv, addr, all, any, baddbmm, bmm, bucketize, cholesky, count_nonzero, det, dist, dot, einsum,
    ger, inner, inverse, linalg, logdet, logsumexp, matrix_exp, matrix_power, mm, mv, nanmean, nansum, norm, outer,
    pinverse, qr, slogdet, std_mean, svd, tensordot, var_mean, vdot,
)
from ._misc_api import *  # noqa: E402,F401,F403  (addcmul, isclose, index_add, normal, ...: _misc_api.__all__)
from . import special  # noqa: E402,F401  (torch.special's names)
from ._elementwise import ZeroDivisionError, clamp_max, clamp_min, clip, divide, lerp, true_divide  # noqa: E402,F401,A004

# Ops outside the op table: they run as table ops (conv1d and the 1-D pools
# as the 2-D ops) or compose them (pad).
from ._C import avg_pool1d, conv1d, max_pool1d, pad  # noqa: E402,F401

# PyTorch-style aliases (also shadow builtins here, hence last).
bool = dtype.bool  # noqa: A001
half = float16
float = float32  # noqa: A001
double = float64
short = int16
int = int32  # noqa: A001
long = int64

# Last: pyflame.nn.functional re-exports the ops defined above.
from .serialization import load, save  # noqa: E402,F401
from . import _pickle  # noqa: E402,F401  (copy.deepcopy and pickle of tensors)
from . import nn  # noqa: E402,F401
from ._compile import compile  # noqa: E402,F401,A004  graph mode (torch.compile)
from . import profiler  # noqa: E402,F401  profiling regions (seed 003)
from .backend.rocm_config import ConfigurationError  # noqa: E402,F401
from . import optim  # noqa: E402,F401
from . import distributions  # noqa: E402,F401
from . import distributed  # noqa: E402,F401  (torch.distributed's names)
