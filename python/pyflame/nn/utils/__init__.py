"""Small helpers shared by the layers (PyTorch's _single/_pair/_triple, the legacy loss arguments) and
torch.nn.utils' functions: gradient clipping, parameters_to_vector/vector_to_parameters; rnn (its own module):
padded and packed sequences."""

import collections.abc
import math
import types
import warnings

from ... import _C
from ...autograd import no_grad


def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return (x,) * n

    return parse


_single = _ntuple(1)
_pair = _ntuple(2)
_triple = _ntuple(3)


def _reverse_repeat_tuple(t, n):
    """(1, 2) -> (2, 2, 1, 1) for n=2: pad's order (last dim first) from per-dim values."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _layer_class(name, base, **attrs):
    """A subclass of `base` that only sets class attributes: one variant of a layer (ReLU, Conv2d...). Made as a
    class statement in base's module would make it, so that pickle and repr find it under `name`."""
    return type(name, (base,), {"__module__": base.__module__, **attrs})


def _op_classes(base, **fns):
    """Variants of `base` named by the keywords, each applying its functional op (`_fn`)."""
    return tuple(_layer_class(name, base, _fn=staticmethod(fn)) for name, fn in fns.items())


def _nd_classes(prefix, base, fns):
    """prefix1d, prefix2d and prefix3d: variants of `base` for 1, 2 and 3 dims (`_dim`), each applying its
    functional op of `fns` (`_fn`)."""
    return tuple(_layer_class(f"{prefix}{dim}d", base, _dim=dim, _fn=staticmethod(fn))
                 for dim, fn in enumerate(fns, 1))


def legacy_reduction(size_average, reduce):
    """The reduction string for the deprecated size_average/reduce arguments of the losses."""
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='mean'|'sum'|'none' "
                  "instead.", stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


# ---------------------------------------------------------------- gradient clipping (torch.nn.utils.clip_grad)

def _as_tensor_list(tensors):
    return [tensors] if isinstance(tensors, _C.Tensor) else list(tensors)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the tensors taken together (as one vector), a 0-d tensor on the first tensor's device.

    As torch.nn.utils.get_total_norm: `norm_type` any p > 0, inf, -inf or 0 (which, as in PyTorch, counts
    the tensors that have a nonzero element: the 0-norm of the per-tensor norms).
    float16/bfloat16 tensors are summed in float32; the result has the tensors' promoted dtype.
    `foreach` is accepted for PyTorch compatibility and ignored."""
    tensors = _as_tensor_list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return _C._full((), 0.0, dtype=_C.dtype.float32, device="cpu")
    device = tensors[0].device
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = _C.promote_types(dtype, t.dtype)
    with no_grad():
        # Per tensor one reduction that the total combines: sum |g|^p for finite p
        # (the p-th root once, at the end), max/min |g| for +-inf.
        parts = []
        for g in tensors:
            if g.dtype in (_C.dtype.float16, _C.dtype.bfloat16):
                g = g.float()
            if norm_type == 2.0:
                part = (g * g).sum()
            elif norm_type == 1.0:
                part = g.abs().sum()
            elif norm_type == math.inf:
                part = g.abs().amax()
            elif norm_type == -math.inf:
                part = g.abs().amin()
            elif norm_type == 0.0:
                part = g.ne(0).sum().to(g.dtype)
            else:
                part = g.abs().pow(norm_type).sum()
            parts.append(part.to(device))
        if len({p.dtype for p in parts}) > 1:
            parts = [p.to(_C.dtype.float64) for p in parts]
        stacked = _C.stack(parts)
        if norm_type == math.inf:
            total = stacked.amax()
        elif norm_type == -math.inf:
            total = stacked.amin()
        elif norm_type == 2.0:
            total = stacked.sum().sqrt()
        elif norm_type == 0.0:  # PyTorch's: the 0-"norm" of the per-tensor counts, i.e. how many are nonzero
            total = stacked.ne(0).sum()
        elif norm_type == 1.0:
            total = stacked.sum()
        else:
            total = stacked.sum().pow(1.0 / norm_type)
        total = total.to(dtype)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales the parameters' .grad in place by min(max_norm / (total_norm + 1e-6), 1).

    The factor stays a 0-d tensor (no device synchronisation), as in PyTorch."""
    grads = [p.grad for p in _as_tensor_list(parameters) if p.grad is not None]
    if len(grads) == 0:
        return
    with no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        by_device = {}
        for g in grads:
            key = (g.device, g.dtype)
            if key not in by_device:
                by_device[key] = coef.to(g.device, dtype=g.dtype)
            g.mul_(by_device[key])


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients of `parameters` in place so that their total norm is at most max_norm.

    As torch.nn.utils.clip_grad_norm_: returns the total norm before clipping (a 0-d tensor);
    gradients are multiplied by min(max_norm / (total_norm + 1e-6), 1). `foreach` is ignored."""
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)
        if is_generator and len(parameters) == 0:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps the gradients of `parameters` in place to [-clip_value, clip_value] (torch.nn.utils.clip_grad_value_)."""
    clip_value = float(clip_value)
    with no_grad():
        for p in _as_tensor_list(parameters):
            g = p.grad
            if g is None:
                continue
            if clip_value >= 0:
                g.hardtanh_(-clip_value, clip_value)  # clamp in place, one op (NaN stays NaN, as clamp_)
            else:  # PyTorch's clamp_min_ then clamp_max_: everything becomes clip_value
                g.maximum_(-clip_value).minimum_(clip_value)


# ---------------------------------------------------------------- torch.nn.utils.convert_parameters

def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-D tensor (differentiable, as torch's)."""
    return _C.cat([p.reshape((-1,)) for p in parameters], 0)


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of the 1-D `vec` into the parameters, in order (torch's inverse of
    parameters_to_vector). PyTorch swaps each parameter's .data for a view of vec; PyFlame copies the values."""
    if not isinstance(vec, _C.Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[pointer:pointer + n].reshape(tuple(p.shape)))
            pointer += n


from . import rnn  # noqa: E402,F401  (pad_sequence, pack_padded_sequence, pad_packed_sequence, ...)
