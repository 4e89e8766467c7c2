"""OpInfo registry: one entry per op of pf.op_table().

Each OpInfo has
  * sample_inputs(rng, dtype, shape_class) -> [Sample]: fresh random inputs
    (numpy values, exactly representable in `dtype`, never all zeros) for a
    shape class (plain, broadcast, noncontig, empty, size1, scalar0d, pyscalar),
  * dtypes: the dtype names the op supports,
  * ref: a reference implementation in PyTorch (CPU), called with torch
    tensors / Python scalars in the places of the sample's arguments.

The test harness (test_ops.py) turns every `Arg` of a sample into a PyFlame
tensor (with the requested memory layout) and a torch tensor holding the same
values, calls pf.<name>(*args, **kwargs) and ref(*args, **kwargs) and compares.
"""

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

import pyflame as pf

# ----------------------------------------------------------------- dtypes

ALL_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
NONBOOL_DTYPES = INT_DTYPES + FLOAT_DTYPES

PF_DTYPE = {n: getattr(pf.dtype, n) for n in ALL_DTYPES}
TORCH_DTYPE = {n: getattr(torch, n) for n in ALL_DTYPES}
TORCH_TO_NAME = {v: k for k, v in TORCH_DTYPE.items()}
# numpy dtype that holds the values of each dtype (bfloat16 values live in float32).
NP_DTYPE = {
    "bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "int32": np.int32,
    "int64": np.int64, "float16": np.float16, "bfloat16": np.float32, "float32": np.float32,
    "float64": np.float64,
}


def pf_dtype_name(d):
    """'float32' for pf.float32."""
    return str(d).rsplit(".", 1)[-1]


def is_float(dtype):
    return dtype in FLOAT_DTYPES


def is_int(dtype):
    return dtype in INT_DTYPES


SHAPE_CLASSES = ("plain", "broadcast", "noncontig", "empty", "size1", "scalar0d", "pyscalar")

# ----------------------------------------------------------------- samples


@dataclass
class Arg:
    """A tensor argument: its values and how the PyFlame tensor is laid out.

    layout: 'contig'; 'T' (a transposed view of a contiguous tensor, last two
    dims swapped); 'strided' (every other element of the last dim of a bigger
    tensor). dtype overrides the sample's dtype (e.g. where's condition).
    """

    values: np.ndarray
    layout: str = "contig"
    dtype: str = None


@dataclass
class Sample:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""

    def __repr__(self):
        parts = []
        for a in self.args:
            if isinstance(a, Arg):
                parts.append(f"T{tuple(a.values.shape)}{'' if a.layout == 'contig' else '/' + a.layout}"
                             f"{'' if a.dtype is None else ':' + a.dtype}")
            else:
                parts.append(repr(a))
        kw = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"({', '.join(parts)}{', ' if kw else ''}{kw}){' ' + self.desc if self.desc else ''}"


def _exact(arr, dtype):
    """Round `arr` to values exactly representable in dtype (numpy holder dtype)."""
    if dtype == "bfloat16":
        return torch.from_numpy(np.asarray(arr, dtype=np.float32).copy()).to(torch.bfloat16).to(torch.float32).numpy()
    return np.asarray(arr).astype(NP_DTYPE[dtype])


def make_values(rng, shape, dtype, low=-5.0, high=5.0, ilow=None, ihigh=None, nonzero=False, discrete=False):
    """Random values of `shape` for `dtype`, never all zeros (when non-empty).

    floats: uniform in [low, high] (or multiples of 0.5 when discrete=True,
    so that comparisons see ties); ints: integers in [ilow, ihigh] (defaults
    from low/high), clipped to the dtype's range; bool: random.
    """
    shape = tuple(shape)
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        v = rng.random(shape) < 0.5
        if n and not np.any(v):
            v.reshape(-1)[rng.integers(n)] = True
        return np.asarray(v, dtype=np.bool_)
    if is_int(dtype):
        lo = int(np.floor(low)) if ilow is None else ilow
        hi = int(np.ceil(high)) if ihigh is None else ihigh
        info = np.iinfo(NP_DTYPE[dtype])
        lo, hi = max(lo, int(info.min) + 1), min(hi, int(info.max))
        v = rng.integers(lo, hi + 1, size=shape)
        if nonzero:
            v = np.where(v == 0, hi if hi != 0 else lo, v)
        if n and not np.any(v):
            v.reshape(-1)[rng.integers(n)] = hi if hi != 0 else lo
        return np.asarray(v).astype(NP_DTYPE[dtype])
    if discrete:
        v = rng.integers(int(low * 2), int(high * 2) + 1, size=shape) / 2.0
    else:
        v = rng.uniform(low, high, size=shape)
    if nonzero:
        v = np.where(np.abs(v) < 0.25, np.sign(v + 1e-9) * (0.25 + np.abs(v)), v)
    if n and not np.any(v):
        v = np.asarray(v, dtype=np.float64)
        v.reshape(-1)[rng.integers(n)] = high if high != 0 else low
    return _exact(v, dtype)


# ----------------------------------------------------------------- references


def _binary(fn):
    """A torch reference for a binary op that also takes Python scalars anywhere
    (torch.maximum & co. do not): the operands are promoted with torch.result_type
    (wrapped-number rules) and the scalars made tensors of that dtype. Sample
    scalars are exactly representable, so this equals torch's scalar path."""

    def ref(a, b):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            return fn(a, b)
        rt = torch.result_type(a, b)
        ta = a.to(rt) if isinstance(a, torch.Tensor) else torch.tensor(a, dtype=rt)
        tb = b.to(rt) if isinstance(b, torch.Tensor) else torch.tensor(b, dtype=rt)
        return fn(ta, tb)

    return ref


def _pow(a, b):
    if a.dtype == torch.bool and b.dtype == torch.bool:
        # torch has no bool pow; a ** b over {0, 1}: 1 unless (a=0, b=1).
        return a | ~b
    return torch.pow(a, b)


def _float_unary(fn):
    """UNARY_FLOAT: integer/bool inputs are computed as float32."""

    def ref(x, **kw):
        if not x.dtype.is_floating_point:
            x = x.to(torch.float32)
        return fn(x, **kw)

    return ref


def _dims(dim):
    if dim is None:
        return ()
    return (dim,) if isinstance(dim, int) else tuple(dim)


def _amax(x, dim=None, keepdim=False):
    return torch.amax(x, dim=_dims(dim), keepdim=keepdim)


def _amin(x, dim=None, keepdim=False):
    return torch.amin(x, dim=_dims(dim), keepdim=keepdim)


def _sum(x, dim=None, keepdim=False):
    return torch.sum(x, dim=dim, keepdim=keepdim)


def _mean(x, dim=None, keepdim=False):
    return torch.mean(x, dim=dim, keepdim=keepdim)


def _prod(x, dim=None, keepdim=False):
    # torch.prod takes one dim; reduce several one after the other.
    dims = _dims(dim)
    if not dims:
        r = torch.prod(x)
        return r.reshape((1,) * x.dim()) if keepdim else r
    dims = sorted({d % x.dim() if x.dim() else 0 for d in dims}, reverse=True)
    r = x
    for d in dims:
        r = torch.prod(r, dim=d, keepdim=True)
    if not keepdim:
        for d in dims:
            r = r.squeeze(d)
    return r


def _argmax(x, dim=None, keepdim=False):
    return torch.argmax(x, dim=dim, keepdim=keepdim)


def _argmin(x, dim=None, keepdim=False):
    return torch.argmin(x, dim=dim, keepdim=keepdim)


def _gelu(x, approximate="none"):
    return F.gelu(x, approximate=approximate)


def _clamp(x, min=None, max=None):
    return torch.clamp(x, min=min, max=max)


def _softmax(x, dim=-1):
    return torch.softmax(x, dim=dim)


def _log_softmax(x, dim=-1):
    return torch.log_softmax(x, dim=dim)


# ----------------------------------------------------------------- OpInfo


@dataclass
class OpInfo:
    name: str
    family: str
    dtypes: tuple
    sample_inputs: Callable  # (rng, dtype, shape_class) -> [Sample]
    ref: Callable
    shape_classes: tuple
    # (rtol, atol) per float dtype where the defaults are too tight
    tol: dict = field(default_factory=dict)
    exact_float: bool = False  # result is exact (no rounding beyond the inputs')
    domain: dict = field(default_factory=dict)
    method: bool = True  # also a Tensor method (torch.nn.functional ops are not)
    python_name: str = None  # the function that runs the op, where its name differs (max: amax)

    @property
    def fn(self):
        return getattr(pf, self.python_name or self.name)


DEFAULT_TOL = {
    "float16": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-12),
}
LOOSE_TOL = {  # transcendental functions, reductions, softmax, matmul, division
    "float16": (1e-3, 1e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
    "float32": (1e-5, 1e-5),
    "float64": (1e-12, 1e-12),
}


def tolerance(op, dtype):
    """(rtol, atol) for comparing a result of dtype `dtype` (a name)."""
    if dtype in op.tol:
        return op.tol[dtype]
    if not is_float(dtype):
        return (0.0, 0.0)
    return (DEFAULT_TOL if op.exact_float else LOOSE_TOL)[dtype]


# ----------------------------------------------------------------- generators


def _x(rng, shape, dtype, dom, layout="contig", **kw):
    return Arg(make_values(rng, shape, dtype, **{**dom, **kw}), layout)


def _unary_samples(dom, kwargs_variants=({},)):
    def gen(rng, dtype, cls):
        if cls == "plain":
            shapes = [((3, 5), "contig"), ((2, 3, 4), "contig")]
        elif cls == "noncontig":
            shapes = [((4, 5), "T"), ((3, 5), "strided"), ((2, 3, 4), "T")]
        elif cls == "empty":
            shapes = [((0,), "contig"), ((2, 0, 3), "contig")]
        elif cls == "size1":
            shapes = [((1,), "contig"), ((1, 5, 1), "contig")]
        elif cls == "scalar0d":
            shapes = [((), "contig")]
        else:
            return []
        return [Sample((_x(rng, s, dtype, dom, lay),), dict(kw)) for s, lay in shapes for kw in kwargs_variants]

    return gen


UNARY_CLASSES = ("plain", "noncontig", "empty", "size1", "scalar0d")
BINARY_CLASSES = SHAPE_CLASSES


def _binary_samples(dom_a, dom_b=None, scalars=(3, 2.5, True), scalar_first=(2, 1.5, True)):
    dom_b = dom_a if dom_b is None else dom_b

    def gen(rng, dtype, cls):
        def a(shape, layout="contig"):
            return _x(rng, shape, dtype, dom_a, layout)

        def b(shape, layout="contig"):
            return _x(rng, shape, dtype, dom_b, layout)

        if cls == "plain":
            return [Sample((a((3, 5)), b((3, 5)))), Sample((a((2, 3, 4)), b((2, 3, 4))))]
        if cls == "broadcast":
            return [
                Sample((a((3, 1, 5)), b((4, 5)))),
                Sample((a((5,)), b((2, 3, 5)))),
                Sample((a((2, 1)), b((1, 3)))),
                Sample((a((4, 1, 3)), b((4, 2, 1)))),
            ]
        if cls == "noncontig":
            return [
                Sample((a((4, 5), "T"), b((4, 5), "strided"))),
                Sample((a((3, 4), "strided"), b((3, 4), "T"))),
                Sample((a((2, 3, 4), "T"), b((3, 4)))),
                Sample((a((4, 3), "T"), b((4, 1), "strided"))),
            ]
        if cls == "empty":
            return [
                Sample((a((0, 4)), b((0, 4)))),
                Sample((a((0, 4)), b((4,)))),
                Sample((a((2, 0, 3)), b((1, 1, 3)))),
                Sample((a((3, 1)), b((0, 1, 4)))),
            ]
        if cls == "size1":
            return [Sample((a((1, 5, 1)), b((1, 5, 1)))), Sample((a((1, 1)), b((3, 1)))), Sample((a((1,)), b((1,))))]
        if cls == "scalar0d":
            return [Sample((a(()), b(()))), Sample((a(()), b((3, 4)))), Sample((a((2, 3)), b(())))]
        if cls == "pyscalar":
            out = []
            for s in scalars:
                out.append(Sample((a((3, 4)), s)))
            for s in scalar_first:
                out.append(Sample((s, b((3, 4)))))
            return out
        return []

    return gen


def _where_samples(rng, dtype, cls):
    dom = dict(low=-5, high=5)

    def c(shape, layout="contig"):
        return Arg(make_values(rng, shape, "bool"), layout, dtype="bool")

    def v(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    if cls == "plain":
        return [Sample((c((3, 5)), v((3, 5)), v((3, 5))))]
    if cls == "broadcast":
        return [Sample((c((4, 1)), v((1, 5)), v((5,)))), Sample((c((3,)), v((2, 3)), v((2, 1)))),
                Sample((c((2, 3, 4)), v((3, 4)), v(())))]
    if cls == "noncontig":
        return [Sample((c((4, 5), "T"), v((4, 5), "strided"), v((4, 5), "T"))),
                Sample((c((3, 4), "strided"), v((3, 4), "T"), v((3, 4))))]
    if cls == "empty":
        return [Sample((c((0, 3)), v((0, 3)), v((3,)))), Sample((c((2, 0)), v((2, 1)), v((1, 0))))]
    if cls == "size1":
        return [Sample((c((1, 1)), v((1, 4)), v((3, 1)))), Sample((c((1,)), v((1,)), v((1,))))]
    if cls == "scalar0d":
        return [Sample((c(()), v(()), v(()))), Sample((c((2, 3)), v(()), v(())))]
    if cls == "pyscalar":
        s = True if dtype == "bool" else (2.5 if is_float(dtype) else 3)
        return [Sample((c((3, 4)), v((3, 4)), s)), Sample((c((3, 4)), s, v((3, 4)))),
                Sample((c((3, 4)), v((3, 4)), 1.5)), Sample((c((3, 4)), 2.5, 1)), Sample((c((2,)), 2, -1))]
    return []


def _clamp_samples(rng, dtype, cls):
    dom = dict(low=-5, high=5, ilow=-9, ihigh=9)
    if dtype == "uint8":
        bounds = [dict(min=2, max=7), dict(min=3), dict(max=4), dict(min=6, max=2)]
    elif is_int(dtype):
        bounds = [dict(min=-2, max=3), dict(min=0), dict(max=-1), dict(min=4, max=-4)]
    else:
        bounds = [dict(min=-1.5, max=2.5), dict(min=0.5), dict(max=-1.25), dict(min=2, max=3),
                  dict(min=1.0, max=-1.0)]
    shapes = {
        "plain": [((3, 5), "contig")],
        "noncontig": [((4, 5), "T"), ((3, 4), "strided")],
        "empty": [((0, 3), "contig")],
        "size1": [((1, 4, 1), "contig")],
        "scalar0d": [((), "contig")],
    }.get(cls, [])
    return [Sample((_x(rng, s, dtype, dom, lay),), dict(bd)) for s, lay in shapes for bd in bounds]


def _reduce_samples(dom, allow_empty_reduce=True):
    def gen(rng, dtype, cls):
        def x(shape, layout="contig"):
            return _x(rng, shape, dtype, dom, layout)

        out = []
        if cls == "plain":
            t = (2, 3, 4)
            for dim in (None, 0, 1, -1, (0, 2), (2, 0), (-1, -2), (0, 1, 2)):
                for keepdim in (False, True):
                    out.append(Sample((x(t),), dict(dim=dim, keepdim=keepdim)))
            out.append(Sample((x((7,)),), dict(dim=0)))
            out.append(Sample((x((2, 3, 2, 3)),), dict(dim=(1, 3), keepdim=True)))
        elif cls == "noncontig":
            for dim in (None, 0, 1, (0, 1)):
                out.append(Sample((x((4, 5), "T"),), dict(dim=dim)))
                out.append(Sample((x((3, 4), "strided"),), dict(dim=dim, keepdim=True)))
            out.append(Sample((x((2, 3, 4), "T"),), dict(dim=(0, 2))))
        elif cls == "empty":
            out.append(Sample((x((0, 3)),), dict(dim=1)))
            out.append(Sample((x((2, 0, 3)),), dict(dim=(0, 2), keepdim=True)))
            if allow_empty_reduce:
                out.append(Sample((x((0, 3)),), dict(dim=0)))
                out.append(Sample((x((0,)),), dict(dim=None)))
                out.append(Sample((x((2, 0)),), dict(dim=1, keepdim=True)))
        elif cls == "size1":
            for dim in (None, 0, 2, (0, 2), 1):
                out.append(Sample((x((1, 5, 1)),), dict(dim=dim)))
            out.append(Sample((x((1,)),), dict(dim=0, keepdim=True)))
        elif cls == "scalar0d":
            for dim in (None, 0, -1):
                for keepdim in (False, True):
                    out.append(Sample((x(()),), dict(dim=dim, keepdim=keepdim)))
        return out

    return gen


def _arg_reduce_samples(rng, dtype, cls):
    # discrete values give ties: torch returns the first extreme index.
    dom = dict(low=-3, high=3, discrete=True)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    out = []
    if cls == "plain":
        for dim in (None, 0, 1, 2, -1):
            for keepdim in (False, True):
                out.append(Sample((x((2, 3, 4)),), dict(dim=dim, keepdim=keepdim)))
        out.append(Sample((x((11,)),), {}))
    elif cls == "noncontig":
        for dim in (None, 0, 1):
            out.append(Sample((x((4, 5), "T"),), dict(dim=dim)))
            out.append(Sample((x((3, 4), "strided"),), dict(dim=dim, keepdim=True)))
    elif cls == "empty":
        out.append(Sample((x((0, 3)),), dict(dim=1)))
        out.append(Sample((x((2, 0, 3)),), dict(dim=2, keepdim=True)))
    elif cls == "size1":
        for dim in (None, 0, 1, 2):
            out.append(Sample((x((1, 5, 1)),), dict(dim=dim)))
    elif cls == "scalar0d":
        for dim in (None, 0, -1):
            out.append(Sample((x(()),), dict(dim=dim)))
        out.append(Sample((x(()),), dict(dim=0, keepdim=True)))
    return out


def _matmul_samples(batch_only):
    def gen(rng, dtype, cls):
        # small K keeps int8/uint8 products in range
        dom = dict(low=-1, high=1, ilow=-3, ihigh=3)

        def x(shape, layout="contig"):
            return _x(rng, shape, dtype, dom, layout)

        def s(*pairs):
            return [Sample((x(a, la), x(b, lb))) for (a, la), (b, lb) in pairs]

        c = "contig"
        if batch_only:
            table = {
                "plain": s((((2, 4, 3), c), ((2, 3, 5), c)), (((3, 2, 4, 3), c), ((3, 2, 3, 2), c))),
                "broadcast": s((((2, 1, 4, 3), c), ((3, 3, 5), c)), (((1, 4, 3), c), ((3, 3, 5), c)),
                               (((2, 4, 3), c), ((1, 3, 5), c)), (((2, 1, 2, 3), c), ((1, 3, 3, 2), c))),
                "noncontig": s((((2, 4, 3), "T"), ((2, 3, 5), "strided")), (((2, 4, 3), "strided"), ((2, 3, 5), "T"))),
                "empty": s((((0, 4, 3), c), ((1, 3, 5), c)), (((2, 4, 0), c), ((2, 0, 5), c)),
                           (((2, 0, 3), c), ((2, 3, 5), c)), (((2, 4, 3), c), ((2, 3, 0), c))),
                "size1": s((((1, 1, 3), c), ((1, 3, 1), c)), (((2, 4, 1), c), ((2, 1, 3), c))),
            }
        else:
            table = {
                "plain": s((((4, 3), c), ((3, 5), c)), (((2, 4, 3), c), ((2, 3, 5), c))),
                "broadcast": s((((2, 1, 4, 3), c), ((3, 3, 5), c)), (((4, 3), c), ((2, 3, 5), c)),
                               (((3,), c), ((2, 3, 4), c)), (((2, 4, 3), c), ((3,), c)),
                               (((3,), c), ((3,), c)), (((3,), c), ((3, 4), c)), (((4, 3), c), ((3,), c))),
                "noncontig": s((((4, 3), "T"), ((3, 5), "strided")), (((4, 3), "strided"), ((3, 5), "T")),
                               (((2, 4, 3), "T"), ((3, 2), "T")), (((3,), "strided"), ((3, 4), "T"))),
                "empty": s((((0, 3), c), ((3, 4), c)), (((2, 0), c), ((0, 3), c)), (((2, 3), c), ((3, 0), c)),
                           (((0,), c), ((0,), c)), (((0, 2, 3), c), ((3, 4), c))),
                "size1": s((((1, 3), c), ((3, 1), c)), (((4, 1), c), ((1, 5), c)), (((1,), c), ((1,), c)),
                           (((1, 1, 3), c), ((3, 2), c))),
            }
        return table.get(cls, [])

    return gen


def _softmax_samples(rng, dtype, cls):
    dom = dict(low=-5, high=5)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    out = []
    if cls == "plain":
        out.append(Sample((x((3, 4, 5)),), {}))
        for dim in (0, 1, 2, -1, -2, -3):
            out.append(Sample((x((3, 4, 5)),), dict(dim=dim)))
        out.append(Sample((x((37,)),), dict(dim=0)))
    elif cls == "noncontig":
        for dim in (0, 1, -1):
            out.append(Sample((x((4, 5), "T"),), dict(dim=dim)))
            out.append(Sample((x((3, 4), "strided"),), dict(dim=dim)))
    elif cls == "empty":
        out.append(Sample((x((0, 5)),), dict(dim=-1)))
        out.append(Sample((x((3, 0)),), dict(dim=0)))
        out.append(Sample((x((3, 0)),), dict(dim=1)))
    elif cls == "size1":
        out.append(Sample((x((1, 5)),), dict(dim=0)))
        out.append(Sample((x((1, 5)),), dict(dim=1)))
        out.append(Sample((x((4, 1)),), dict(dim=-1)))
    elif cls == "scalar0d":
        out.append(Sample((x(()),), dict(dim=0)))
        out.append(Sample((x(()),), dict(dim=-1)))
    return out


def _transpose_samples(rng, dtype, cls):
    dom = dict(low=-5, high=5)

    def x(shape, layout="contig"):
        return _x(rng, shape, dtype, dom, layout)

    if cls == "plain":
        return [Sample((x((3, 4, 5)), d0, d1)) for d0, d1 in ((0, 2), (-1, 0), (1, 1), (1, 2))] + \
               [Sample((x((3, 4)), 0, 1))]
    if cls == "noncontig":
        return [Sample((x((4, 5), "T"), 0, 1)), Sample((x((3, 4), "strided"), 1, 0)),
                Sample((x((2, 3, 4), "T"), 0, 2))]
    if cls == "empty":
        return [Sample((x((0, 3)), 0, 1)), Sample((x((2, 0, 3)), -1, 1))]
    if cls == "size1":
        return [Sample((x((1, 5, 1)), 0, 2)), Sample((x((1,)), 0, 0))]
    if cls == "scalar0d":
        return [Sample((x(()), 0, 0)), Sample((x(()), -1, -1))]
    return []


# ----------------------------------------------------------------- the registry

REDUCE_CLASSES = ("plain", "noncontig", "empty", "size1", "scalar0d")
MATMUL_CLASSES = ("plain", "broadcast", "noncontig", "empty", "size1")

_STD = dict(low=-5, high=5, ilow=-9, ihigh=9)
_POS = dict(low=0.1, high=10, ilow=1, ihigh=20)

OP_INFOS = [
    # BINARY
    OpInfo("add", "BINARY", ALL_DTYPES, _binary_samples(_STD), _binary(torch.add), BINARY_CLASSES, exact_float=True),
    OpInfo("sub", "BINARY", NONBOOL_DTYPES, _binary_samples(_STD, scalars=(3, 2.5), scalar_first=(2, 1.5)),
           _binary(torch.sub), BINARY_CLASSES, exact_float=True),
    OpInfo("mul", "BINARY", ALL_DTYPES, _binary_samples(_STD), _binary(torch.mul), BINARY_CLASSES, exact_float=True),
    OpInfo("div", "BINARY_FLOAT", ALL_DTYPES,
           _binary_samples(_STD, dict(low=-5, high=5, nonzero=True, ilow=-9, ihigh=9), scalars=(3, 2.5, True),
                           scalar_first=(2, 1.5, True)),
           _binary(torch.div), BINARY_CLASSES),
    # pow: positive float bases; small non-negative integer exponents for ints
    OpInfo("pow", "BINARY", ALL_DTYPES,
           _binary_samples(dict(low=0.5, high=3, ilow=-3, ihigh=3), dict(low=-2, high=2, ilow=0, ihigh=3),
                           scalars=(2, 0.5, True), scalar_first=(2, 1.5, True)),
           _binary(_pow), BINARY_CLASSES),
    OpInfo("maximum", "BINARY", ALL_DTYPES, _binary_samples(dict(_STD, discrete=True)), _binary(torch.maximum),
           BINARY_CLASSES, exact_float=True),
    OpInfo("minimum", "BINARY", ALL_DTYPES, _binary_samples(dict(_STD, discrete=True)), _binary(torch.minimum),
           BINARY_CLASSES, exact_float=True),
    # UNARY
    OpInfo("neg", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), torch.neg, UNARY_CLASSES, exact_float=True),
    OpInfo("abs", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), torch.abs, UNARY_CLASSES, exact_float=True),
    OpInfo("relu", "UNARY", NONBOOL_DTYPES, _unary_samples(_STD), torch.relu, UNARY_CLASSES, exact_float=True),
    # UNARY_FLOAT
    OpInfo("sqrt", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(_POS), _float_unary(torch.sqrt), UNARY_CLASSES),
    OpInfo("rsqrt", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(_POS), _float_unary(torch.rsqrt), UNARY_CLASSES),
    OpInfo("exp", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-4, high=4)), _float_unary(torch.exp),
           UNARY_CLASSES),
    OpInfo("log", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(_POS), _float_unary(torch.log), UNARY_CLASSES),
    OpInfo("sin", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-6, high=6)), _float_unary(torch.sin),
           UNARY_CLASSES),
    OpInfo("cos", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-6, high=6)), _float_unary(torch.cos),
           UNARY_CLASSES),
    OpInfo("tanh", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-5, high=5)), _float_unary(torch.tanh),
           UNARY_CLASSES),
    OpInfo("sigmoid", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-6, high=6)), _float_unary(torch.sigmoid),
           UNARY_CLASSES),
    OpInfo("gelu", "UNARY_FLOAT", ALL_DTYPES,
           _unary_samples(dict(low=-5, high=5), kwargs_variants=({}, dict(approximate="none"),
                                                                  dict(approximate="tanh"))),
           _float_unary(_gelu), UNARY_CLASSES),
    OpInfo("silu", "UNARY_FLOAT", ALL_DTYPES, _unary_samples(dict(low=-6, high=6)), _float_unary(F.silu),
           UNARY_CLASSES),
    # COMPARE (discrete values so that ties occur)
    *[OpInfo(n, "COMPARE", ALL_DTYPES, _binary_samples(dict(low=-3, high=3, discrete=True), scalars=(1, 0.5, True),
                                                       scalar_first=(1, -0.5, False)),
             _binary(getattr(torch, n)), BINARY_CLASSES, exact_float=True)
      for n in ("eq", "ne", "lt", "le", "gt", "ge")],
    OpInfo("where", "WHERE", ALL_DTYPES, _where_samples, torch.where, BINARY_CLASSES, exact_float=True),
    OpInfo("clamp", "CLAMP", NONBOOL_DTYPES, _clamp_samples, _clamp, UNARY_CLASSES, exact_float=True),
    # REDUCE
    OpInfo("sum", "REDUCE", ALL_DTYPES, _reduce_samples(dict(low=-2, high=2, ilow=-5, ihigh=5)), _sum,
           REDUCE_CLASSES, tol={"float16": (1e-3, 2e-3)}),
    OpInfo("mean", "REDUCE", FLOAT_DTYPES, _reduce_samples(dict(low=-2, high=2)), _mean, REDUCE_CLASSES),
    # The table's max/min reduce over any dims: pf.amax/amin (pf.max(x, dim) returns values and indices).
    OpInfo("max", "REDUCE", ALL_DTYPES, _reduce_samples(_STD, allow_empty_reduce=False), _amax, REDUCE_CLASSES,
           exact_float=True, python_name="amax"),
    OpInfo("min", "REDUCE", ALL_DTYPES, _reduce_samples(_STD, allow_empty_reduce=False), _amin, REDUCE_CLASSES,
           exact_float=True, python_name="amin"),
    OpInfo("prod", "REDUCE", ALL_DTYPES, _reduce_samples(dict(low=0.5, high=1.5, ilow=1, ihigh=3)), _prod,
           REDUCE_CLASSES),
    # ARG_REDUCE
    OpInfo("argmax", "ARG_REDUCE", NONBOOL_DTYPES, _arg_reduce_samples, _argmax, REDUCE_CLASSES),
    OpInfo("argmin", "ARG_REDUCE", NONBOOL_DTYPES, _arg_reduce_samples, _argmin, REDUCE_CLASSES),
    # MATMUL
    OpInfo("matmul", "MATMUL", NONBOOL_DTYPES, _matmul_samples(False), torch.matmul, MATMUL_CLASSES,
           tol={"float16": (1e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2)}),
    OpInfo("batch_matmul", "MATMUL", NONBOOL_DTYPES, _matmul_samples(True), torch.matmul, MATMUL_CLASSES,
           tol={"float16": (1e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2)}),
    # SOFTMAX
    OpInfo("softmax", "SOFTMAX", FLOAT_DTYPES, _softmax_samples, _softmax, REDUCE_CLASSES),
    OpInfo("log_softmax", "SOFTMAX", FLOAT_DTYPES, _softmax_samples, _log_softmax, REDUCE_CLASSES,
           tol={"float16": (1e-3, 2e-3)}),
    # VIEW
    OpInfo("transpose", "VIEW", ALL_DTYPES, _transpose_samples, torch.transpose, REDUCE_CLASSES, exact_float=True),
]

# Ops of other areas (CUSTOM family: conv, nn, shape ops, ...) keep their samples and
# references in tests/python/opinfo_<area>.py, each with a list OP_INFOS; they
# build on the helpers above, so they are imported here, at the end.
for _path in sorted(Path(__file__).parent.glob("opinfo_*.py")):
    OP_INFOS += importlib.import_module(_path.stem).OP_INFOS

# A unary op of the table with no entry above is tested against torch's function of the
# same name on the standard domain, so adding an elementwise op takes no test code; an op
# that needs its own domain, dtypes or reference has an entry.
_GENERATED_UNARY = {
    "UNARY": (NONBOOL_DTYPES, lambda fn: fn),
    "UNARY_FLOAT": (ALL_DTYPES, _float_unary),
}
_listed = {op.name for op in OP_INFOS}
for _name, _family in pf.op_table():
    if _name not in _listed and _family in _GENERATED_UNARY:
        _dtypes, _reference = _GENERATED_UNARY[_family]
        OP_INFOS.append(OpInfo(_name, _family, _dtypes, _unary_samples(_STD), _reference(getattr(torch, _name)),
                               UNARY_CLASSES))

OPS = {op.name: op for op in OP_INFOS}
assert len(OPS) == len(OP_INFOS), "duplicate registry entries"


def params(families=None):
    """(op, dtype, shape_class) for every registry op, dtype and applicable shape class."""
    out = []
    for op in OP_INFOS:
        if families and op.family not in families:
            continue
        for dt in op.dtypes:
            for cls in op.shape_classes:
                out.append((op.name, dt, cls))
    return out


# ----------------------------------------------------------------- harness helpers


def make_pf(arg, dtype):
    """The PyFlame tensor of an Arg, with its layout (a view for 'T' and 'strided')."""
    dtype = arg.dtype or dtype
    v = arg.values
    pd = PF_DTYPE[dtype]
    if arg.layout == "T" and v.ndim >= 2:
        base = np.ascontiguousarray(np.swapaxes(v, -1, -2))
        t = pf.tensor(base).to(pd).transpose(-1, -2)
    elif arg.layout in ("T", "strided") and v.ndim >= 1:
        big = np.empty(v.shape[:-1] + (2 * v.shape[-1],), dtype=v.dtype)
        big[...] = np.asarray(True if v.dtype == np.bool_ else 7).astype(v.dtype)  # filler between the values
        big[..., ::2] = v
        t = pf.tensor(big).to(pd)[..., ::2]
    elif v.ndim == 0:
        # pf.tensor(0-d array) is covered by test_tensor.py; build 0-d inputs without it
        t = pf.from_numpy(np.array(v, copy=True)).clone().to(pd).to(pf.get_device())
    else:
        t = pf.tensor(v).to(pd)
    assert t.shape == v.shape and t.dtype == pd
    return t


def make_torch(arg, dtype):
    dtype = arg.dtype or dtype
    return torch.from_numpy(np.array(arg.values, copy=True)).to(TORCH_DTYPE[dtype])


def pf_to_torch(t):
    """A torch tensor with the dtype and values of a PyFlame tensor (through NumPy)."""
    name = pf_dtype_name(t.dtype)
    t = t.detach()
    if name == "bfloat16":
        return torch.from_numpy(np.array(t.to(pf.float32).numpy(), copy=True)).to(torch.bfloat16)
    return torch.from_numpy(np.array(t.numpy(), copy=True))


def pf_to_numpy(t):
    t = t.detach()
    if pf_dtype_name(t.dtype) == "bfloat16":
        t = t.to(pf.float32)
    return np.array(t.numpy(), copy=True)


def assert_matches(actual, expected, rtol, atol, what=""):
    """actual: a PyFlame tensor; expected: a torch tensor. Same dtype, shape, values (NaNs equal)."""
    assert isinstance(actual, pf.Tensor), f"{what}: expected a pyflame Tensor, got {type(actual).__name__}"
    exp_dtype = TORCH_TO_NAME[expected.dtype]
    got_dtype = pf_dtype_name(actual.dtype)
    assert got_dtype == exp_dtype, f"{what}: dtype {got_dtype}, torch gives {exp_dtype}"
    assert tuple(actual.shape) == tuple(expected.shape), \
        f"{what}: shape {tuple(actual.shape)}, torch gives {tuple(expected.shape)}"
    got = pf_to_torch(actual)
    torch.testing.assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}")
