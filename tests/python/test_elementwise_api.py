"""The elementwise API beyond the OpInfo registry (opinfo_elementwise.py):
Python operators and their reflected and in-place forms, div's rounding_mode,
integer division by zero, shift edges, clamp with tensor bounds, lerp, and
their errors, on every device against PyTorch (CPU)."""

import operator

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import INT_DTYPES, PF_DTYPE, TORCH_DTYPE, assert_matches, make_values


@pytest.fixture(params=["cpu", "rocm"])
def device(request):
    if request.param == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    pf.set_device(request.param)
    return request.param


def pair(rng, shape, dtype, **dom):
    v = make_values(rng, shape, dtype, **dom)
    return pf.tensor(v).to(PF_DTYPE[dtype]), torch.from_numpy(np.array(v, copy=True)).to(TORCH_DTYPE[dtype])


def same(actual, expected, what, tol=0.0):
    assert_matches(actual, expected, tol, tol, what=what)


_INT_OPS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift, operator.floordiv,
            operator.mod]
_IN_PLACE = {operator.and_: operator.iand, operator.or_: operator.ior, operator.xor: operator.ixor,
             operator.lshift: operator.ilshift, operator.rshift: operator.irshift,
             operator.floordiv: operator.ifloordiv, operator.mod: operator.imod}


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", _INT_OPS, ids=lambda f: f.__name__)
def test_integer_operators(op, dtype, device, rng):
    """t op t, t op number, number op t and t op= ... as torch, results and dtypes."""
    shift = op in (operator.lshift, operator.rshift)
    a, ta = pair(rng, (3, 4), dtype, ilow=-60, ihigh=60)
    b, tb = pair(rng, (4,), dtype, ilow=0 if shift else -7, ihigh=9 if shift else 7, nonzero=not shift)
    same(op(a, b), op(ta, tb), f"{op.__name__}(t, t)")
    same(op(a, 3), op(ta, 3), f"{op.__name__}(t, 3)")
    same(op(5, b), op(5, tb), f"{op.__name__}(5, t)")
    x, tx = a.clone(), ta.clone()
    ptr = x.data_ptr()
    y = _IN_PLACE[op](x, b)
    assert y is x and x.data_ptr() == ptr
    same(x, _IN_PLACE[op](tx, tb), f"{op.__name__}=")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("op", [operator.floordiv, operator.mod], ids=lambda f: f.__name__)
def test_float_floordiv_and_mod(op, dtype, device, rng):
    a, ta = pair(rng, (5, 6), dtype, low=-8, high=8, discrete=True)
    b, tb = pair(rng, (5, 6), dtype, low=-3, high=3, discrete=True, nonzero=True)
    tol = 1e-3 if dtype == "float16" else 1e-6
    same(op(a, b), op(ta, tb), op.__name__, tol)
    same(op(a, -2.5), op(ta, -2.5), op.__name__, tol)
    same(op(7.5, b), op(7.5, tb), op.__name__, tol)
    # an integer tensor with a float number gives float32, as in torch
    i, ti = pair(rng, (4,), "int32", ilow=-9, ihigh=9)
    same(op(i, 1.5), op(ti, 1.5), f"{op.__name__}(int, 1.5)", 1e-6)


def test_float_division_by_zero_follows_ieee(device):
    a = pf.tensor([5.0, -5.0, 0.0])
    ta = torch.tensor([5.0, -5.0, 0.0])
    for f in (lambda x: x // 0.0, lambda x: x % 0.0, lambda x: x.fmod(0.0),
              lambda x: x.div(0.0, rounding_mode="trunc"), lambda x: x.div(0.0, rounding_mode="floor")):
        same(f(a), f(ta), "float / 0")


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_division_by_zero_raises(dtype, device, rng):
    """As torch on the CPU: ZeroDivisionError, also catchable as RuntimeError; the library stays usable."""
    a, _ = pair(rng, (3, 4), dtype, ilow=1, ihigh=9)
    zero = pf.tensor(np.array([1, 0, 2, 3]).astype(np.dtype(dtype))).to(PF_DTYPE[dtype])
    for f in (lambda: a // zero, lambda: a % zero, lambda: a.fmod(zero), lambda: a.div(zero, rounding_mode="trunc"),
              lambda: a // 0, lambda: pf.remainder(7, zero), lambda: a.floor_divide_(zero)):
        with pytest.raises(pf.ZeroDivisionError, match="division by zero"):
            f().tolist()  # .tolist() waits for the GPU, where the kernel's error is raised
    with pytest.raises(RuntimeError):
        (a % zero).tolist()
    with pytest.raises(ZeroDivisionError):
        (a // zero).tolist()
    assert (a // 1).tolist() == a.tolist()


def test_most_negative_integer_divided_by_minus_one_wraps(device):
    """As torch's floor_divide, remainder and fmod; its div(rounding_mode='trunc') traps (SIGFPE) there,
    ours wraps around as floor_divide does."""
    for dtype in ("int8", "int16", "int32", "int64"):
        lo = int(np.iinfo(dtype).min)
        a, ta = pf.tensor([lo, lo, 7]).to(PF_DTYPE[dtype]), torch.tensor([lo, lo, 7], dtype=TORCH_DTYPE[dtype])
        b, tb = pf.tensor([-1, 1, -1]).to(PF_DTYPE[dtype]), torch.tensor([-1, 1, -1], dtype=TORCH_DTYPE[dtype])
        same(a // b, ta // tb, f"{dtype} //")
        same(a % b, ta % tb, f"{dtype} %")
        same(pf.fmod(a, b), torch.fmod(ta, tb), f"{dtype} fmod")
        same(a.div(b, rounding_mode="trunc"), torch.tensor([lo, lo, -7], dtype=TORCH_DTYPE[dtype]), f"{dtype} trunc")


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shift_edges(dtype, device):
    """Counts of 0 up past the width and negative counts, on negative and positive values, as torch."""
    bits = np.iinfo(dtype).bits
    values = [1, 5, 100, int(np.iinfo(dtype).max), int(np.iinfo(dtype).min)]
    if dtype != "uint8":
        values += [-1, -100]
    counts = [0, 1, bits - 1, bits, bits + 1, 63, 64] + ([-1, -5] if dtype != "uint8" else [])
    counts = [c for c in counts if c <= int(np.iinfo(dtype).max)]
    v = np.array([x for x in values for _ in counts]).astype(dtype)
    c = np.array([s for _ in values for s in counts]).astype(dtype)
    a, b = pf.tensor(v).to(PF_DTYPE[dtype]), pf.tensor(c).to(PF_DTYPE[dtype])
    ta, tb = torch.from_numpy(v.copy()), torch.from_numpy(c.copy())
    same(a << b, ta << tb, f"{dtype} <<")
    same(a >> b, ta >> tb, f"{dtype} >>")
    same(pf.bitwise_left_shift(a, 3), torch.bitwise_left_shift(ta, 3), "bitwise_left_shift(t, 3)")
    same(1 << b, 1 << tb, "1 << t")


def test_bool_bitwise_and_invert(device, rng):
    a, ta = pair(rng, (4, 5), "bool")
    b, tb = pair(rng, (5,), "bool")
    for op in (operator.and_, operator.or_, operator.xor):
        same(op(a, b), op(ta, tb), op.__name__)
        same(op(a, True), op(ta, True), op.__name__)
    same(~a, ~ta, "~bool is logical not")
    i, ti = pair(rng, (3, 3), "int16", ilow=-50, ihigh=50)
    same(~i, ~ti, "~int16")
    x = a.clone()
    x &= b
    same(x, ta & tb, "&=")
    assert i.bitwise_not_() is i
    same(i, ti.bitwise_not_(), "bitwise_not_")


def test_bitwise_refuses_floats_and_bool_shifts(device):
    f = pf.tensor([1.0, 2.0])
    i = pf.tensor([1, 2])
    b = pf.tensor([True, False])
    for fn in (lambda: f & f, lambda: i | 1.5, lambda: ~f, lambda: pf.bitwise_xor(f, i), lambda: f << 1,
               lambda: b << b, lambda: b >> True, lambda: b // b, lambda: b % b, lambda: pf.fmod(b, b)):
        with pytest.raises(TypeError):
            fn()
    with pytest.raises(TypeError, match="only integer and bool"):
        i.bitwise_and_(1.5)
    assert (i & 3).tolist() == [1, 2]


# ----------------------------------------------------------------- div and its rounding modes


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float32", "float16"])
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_rounding_mode(mode, dtype, device, rng):
    a, ta = pair(rng, (3, 4), dtype, low=-9, high=9, ilow=-30, ihigh=30)
    b, tb = pair(rng, (3, 4), dtype, low=-4, high=4, ilow=-5, ihigh=5, nonzero=True)
    tol = 1e-3 if dtype == "float16" else 1e-6
    for f, g in ((pf.div, torch.div), (pf.divide, torch.divide)):
        same(f(a, b, rounding_mode=mode), g(ta, tb, rounding_mode=mode), f"{f.__name__} {mode}", tol)
    same(a.div(2, rounding_mode=mode), ta.div(2, rounding_mode=mode), f"Tensor.div {mode}", tol)
    same(pf.div(7, b, rounding_mode=mode), torch.div(7, tb, rounding_mode=mode), f"div(7, t) {mode}", tol)
    x, tx = a.clone(), ta.clone()
    if mode is None and dtype not in ("float32", "float16"):
        with pytest.raises(TypeError):  # a float result does not fit an integer tensor (torch: RuntimeError)
            x.div_(b, rounding_mode=mode)
    else:
        assert x.div_(b, rounding_mode=mode) is x
        same(x, tx.div_(tb, rounding_mode=mode), f"div_ {mode}", tol)


def test_true_divide_is_div(device, rng):
    a, ta = pair(rng, (3, 4), "int32", ilow=-9, ihigh=9)
    b, tb = pair(rng, (4,), "int32", ilow=1, ihigh=5)
    same(pf.true_divide(a, b), torch.true_divide(ta, tb), "true_divide", 1e-6)
    same(a.true_divide(3), ta.true_divide(3), "Tensor.true_divide", 1e-6)
    x, tx = a.to(pf.float32), ta.float()
    x.true_divide_(b)
    same(x, tx.true_divide_(tb), "true_divide_", 1e-6)


def test_div_bad_rounding_mode(device):
    with pytest.raises(ValueError, match="rounding_mode"):
        pf.div(pf.tensor([1.0]), 2, rounding_mode="round")


def test_inplace_methods(device, rng):
    a, ta = pair(rng, (3, 4), "int32", ilow=-20, ihigh=20)
    b, tb = pair(rng, (4,), "int32", ilow=-5, ihigh=5, nonzero=True)
    for name in ("bitwise_and_", "bitwise_or_", "bitwise_xor_", "remainder_", "fmod_", "floor_divide_"):
        x, tx = a.clone(), ta.clone()
        assert getattr(x, name)(b) is x
        same(x, getattr(tx, name)(tb), name)
    f, tf = pair(rng, (3, 4), "float32")
    f[0, 0], tf[0, 0] = float("nan"), float("nan")
    x, tx = f.clone(), tf.clone()
    assert x.nan_to_num_(nan=2.0) is x
    same(x, tx.nan_to_num_(nan=2.0), "nan_to_num_")
    with pytest.raises(TypeError):  # remainder of floats does not fit an int tensor
        a.clone().remainder_(1.5)


def test_nan_to_num_defaults_per_dtype(device):
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        v = [float("nan"), float("inf"), -float("inf"), 1.5]
        x, tx = pf.tensor(v).to(PF_DTYPE[dtype]), torch.tensor(v, dtype=TORCH_DTYPE[dtype])
        same(pf.nan_to_num(x), torch.nan_to_num(tx), f"nan_to_num {dtype}")
        same(x.nan_to_num(posinf=1.0), tx.nan_to_num(posinf=1.0), f"nan_to_num {dtype}")


# ----------------------------------------------------------------- clamp with tensor bounds


def _grads(fn, tensors):
    out = fn(*tensors)
    out.sum().backward()
    return out, [t.grad for t in tensors]


@pytest.mark.parametrize("which", ["min", "max", "both", "min_number", "max_number"])
def test_clamp_tensor_bounds(which, device, rng):
    """Broadcast tensor bounds (either may be None or a number), values and gradients as torch."""
    xv = make_values(rng, (3, 4), "float64", low=-3, high=3, discrete=True)
    lov = make_values(rng, (4,), "float64", low=-2, high=0, discrete=True)
    # min < max: where they are equal and x lies below, torch's gradient reaches neither bound, ours min
    hiv = make_values(rng, (3, 1), "float64", low=0.5, high=2, discrete=True)
    pfs = [pf.tensor(v).requires_grad_() for v in (xv, lov, hiv)]
    ths = [torch.tensor(v, requires_grad=True) for v in (xv, lov, hiv)]

    def make(lib):
        # torch takes numbers and tensors together as 0-d tensors only
        number = (lambda v: v) if lib is pf else (lambda v: torch.tensor(v, dtype=torch.float64))

        def f(x, lo, hi):
            args = {"min": dict(min=lo), "max": dict(max=hi), "both": dict(min=lo, max=hi),
                    "min_number": dict(min=number(-1.0), max=hi), "max_number": dict(min=lo, max=number(1.5))}[which]
            return lib.clamp(x, **args)
        return f

    out, grads = _grads(make(pf), pfs)
    tout, tgrads = _grads(make(torch), ths)
    same(out, tout.detach(), "clamp")
    for g, tg, n in zip(grads, tgrads, ("x", "min", "max")):
        if tg is None:
            assert g is None, n
        else:
            same(g, tg, f"grad {n}")


def test_clamp_forms(device, rng):
    x, tx = pair(rng, (2, 3, 4), "float32")
    lo, tlo = pair(rng, (3, 1), "float32", low=-2, high=0)
    hi, thi = pair(rng, (4,), "float32", low=0, high=2)
    same(pf.clip(x, lo, hi), torch.clip(tx, tlo, thi), "clip")
    same(x.clip(max=hi), tx.clip(max=thi), "Tensor.clip")
    same(pf.clamp_min(x, lo), torch.clamp_min(tx, tlo), "clamp_min")
    same(pf.clamp_max(x, 0.5), torch.clamp_max(tx, 0.5), "clamp_max(number)")
    same(x.clamp_max(hi), tx.clamp_max(thi), "Tensor.clamp_max")
    same(x.clamp_min(-0.5), tx.clamp_min(-0.5), "Tensor.clamp_min")
    for name, args in (("clamp_", (lo, hi)), ("clip_", (None, hi)), ("clamp_min_", (lo,)), ("clamp_max_", (hi,)),
                       ("clamp_", (-1.0, 1.0)), ("clip_", (-0.5,))):
        y, ty = x.clone(), tx.clone()
        ptr = y.data_ptr()
        targs = [{lo: tlo, hi: thi}.get(a, a) if isinstance(a, pf.Tensor) else a for a in args]
        assert getattr(y, name)(*args) is y and y.data_ptr() == ptr
        same(y, getattr(ty, name)(*targs), name)
    # dtypes: an int tensor with float tensor bounds promotes; a NaN bound gives NaN, as torch
    i, ti = pair(rng, (3, 4), "int64", ilow=-9, ihigh=9)
    same(pf.clamp(i, min=lo), torch.clamp(ti, min=tlo), "int clamp(float bound)")
    nan_lo = pf.tensor([float("nan"), 0.0, 0.0, 0.0])
    same(pf.clamp(x, min=nan_lo), torch.clamp(tx, min=torch.tensor([float("nan"), 0.0, 0.0, 0.0])), "NaN bound")


def test_clamp_errors(device):
    x = pf.tensor([1.0, 2.0])
    with pytest.raises(ValueError, match="at least one"):
        pf.clamp(x)
    with pytest.raises(ValueError):  # the bound's shape does not broadcast into x in place
        x.clone().clamp_(min=pf.zeros(3, 2))
    with pytest.raises(TypeError):
        pf.tensor([1, 2]).clamp_(min=pf.tensor([0.5, 0.5]))  # a float result in an int tensor
    with pytest.raises(TypeError):
        pf.tensor([True]).clamp(min=pf.tensor([False]))


# ----------------------------------------------------------------- lerp


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_lerp(dtype, device, rng):
    s, ts = pair(rng, (3, 4), dtype)
    e, te = pair(rng, (4,), dtype)
    w, tw = pair(rng, (3, 1), dtype, low=-0.5, high=1.5)
    tol = {"float16": 1e-3, "bfloat16": 1.6e-2}.get(dtype, 1e-6)
    for weight, tweight in ((0.25, 0.25), (0.75, 0.75), (w, tw)):
        same(pf.lerp(s, e, weight), torch.lerp(ts, te, tweight), f"lerp {weight!r}", tol)
    same(s.lerp(e, 1.0), ts.lerp(te, 1.0), "Tensor.lerp at 1 is end", 0.0)
    y, ty = s.clone(), ts.clone()
    assert y.lerp_(e, w) is y
    same(y, ty.lerp_(te, tw), "lerp_", tol)


def test_lerp_gradients_and_errors(device, rng):
    vals = [make_values(rng, sh, "float64") for sh in ((3, 4), (4,), (3, 1))]
    pfs = [pf.tensor(v).requires_grad_() for v in vals]
    ths = [torch.tensor(v, requires_grad=True) for v in vals]
    out, grads = _grads(pf.lerp, pfs)
    tout, tgrads = _grads(torch.lerp, ths)
    same(out, tout.detach(), "lerp", 1e-12)
    for g, tg in zip(grads, tgrads):
        same(g, tg, "lerp grad", 1e-12)
    with pytest.raises(TypeError):
        pf.lerp(pf.tensor([1]), pf.tensor([2]), 0.5)
    with pytest.raises(TypeError, match="expected dtype"):
        pf.lerp(pf.tensor([1.0]), pf.tensor([2.0], dtype=pf.float64), 0.5)


def test_new_functions_are_differentiable_as_torch(device, rng):
    """remainder/fmod/div's rounded forms: the gradients torch gives (floor_divide: zeros, where torch raises)."""
    a = make_values(rng, (3, 4), "float64", low=-5, high=5)
    b = make_values(rng, (4,), "float64", low=1, high=3)
    for name, f in (("remainder", lambda x, y: x % y), ("fmod", lambda x, y: x.fmod(y)),
                    ("trunc", lambda x, y: x.div(y, rounding_mode="trunc")),
                    ("floor", lambda x, y: x.div(y, rounding_mode="floor"))):
        pa, pb = pf.tensor(a).requires_grad_(), pf.tensor(b).requires_grad_()
        ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        f(pa, pb).sum().backward()
        f(ta, tb).sum().backward()
        same(pa.grad, ta.grad, f"{name} grad a", 1e-12)
        same(pb.grad, tb.grad, f"{name} grad b", 1e-12)
