"""The misc area beyond its OpInfos (opinfo_misc.py): addcmul/addcdiv, equal,
allclose/isclose, the index_* family, index_put, masked_select, take, scatter's
reduce=, range keys, aminmax, diff, unary plus and the random draws (normal,
bernoulli, multinomial, bernoulli_, exponential_), against PyTorch on the CPU,
on every device, with gradients where PyTorch has them."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import assert_matches, make_values, pf_to_numpy

def both(rng, shape, dtype="float64", low=-3.0, high=3.0, grad=False, **kw):
    """(pyflame, torch) tensors holding the same random values."""
    v = make_values(rng, shape, dtype, low=low, high=high, **kw)
    p = pf.tensor(v, dtype=getattr(pf, dtype))
    t = torch.from_numpy(np.array(v, copy=True)).to(getattr(torch, dtype))
    if grad:
        p.requires_grad_(True)
        t.requires_grad_(True)
    return p, t


def idx(values):
    v = np.asarray(values, dtype=np.int64)
    return pf.tensor(v), torch.from_numpy(v.copy())


def close(p, t, rtol=1e-10, atol=1e-12, what=""):
    assert_matches(p, t.detach() if isinstance(t, torch.Tensor) else t, rtol, atol, what=what)


def grads_match(p_inputs, t_inputs, p_out, t_out, rng):
    up = rng.uniform(-1, 1, size=tuple(t_out.shape))
    t_out.backward(torch.from_numpy(up))
    p_out.backward(pf.tensor(up, dtype=p_out.dtype))
    for i, (p, t) in enumerate(zip(p_inputs, t_inputs)):
        assert p.grad is not None, f"input {i}: no gradient"
        close(p.grad, t.grad, what=f"d/d(input {i})")


# ----------------------------------------------------------------- elementwise math


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_ignore_nan(name, device, rng):
    a = np.array([1.0, np.nan, np.nan, -2.0, 3.0, np.inf])
    b = np.array([np.nan, 2.0, np.nan, -1.0, 3.0, -np.inf])
    got = getattr(pf, name)(pf.tensor(a, dtype=pf.float32), pf.tensor(b, dtype=pf.float32))
    want = getattr(torch, name)(torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32))
    close(got, want, what=name)
    # the gradient goes to the chosen input, ties to the first, as PyTorch
    pa, ta = both(rng, (4, 5), discrete=True, grad=True)
    pb, tb = both(rng, (4, 5), discrete=True, grad=True)
    grads_match([pa, pb], [ta, tb], getattr(pf, name)(pa, pb), getattr(torch, name)(ta, tb), rng)


def test_special_functions_at_negative_arguments_and_poles(device):
    v = np.array([-3.5, -2.25, -0.5, -1e-3, 0.0, -0.0, -1.0, -2.0, 0.5, 1.0, 2.0, 7.25, 30.0, 1e3])
    for name in ("digamma", "lgamma"):
        for dt in ("float32", "float64"):
            got = getattr(pf, name)(pf.tensor(v, dtype=getattr(pf, dt)))
            want = getattr(torch, name)(torch.tensor(v, dtype=getattr(torch, dt)))
            close(got, want, rtol=1e-5 if dt == "float32" else 1e-12, atol=1e-5 if dt == "float32" else 1e-12,
                  what=f"{name} {dt}")


def test_digamma_gradient_is_trigamma(device, rng):
    v = np.array([-2.7, -0.3, 0.25, 1.0, 3.5, 12.0, 40.0])
    p = pf.tensor(v, dtype=pf.float64, requires_grad=True)
    t = torch.tensor(v, requires_grad=True)
    pf.digamma(p).sum().backward()
    torch.digamma(t).sum().backward()
    close(p.grad, t.grad, rtol=1e-9, atol=1e-9)


def test_inverse_trig_and_hyperbolic_edges(device):
    v = np.array([-1.0, 1.0, 1.5, -1.5, 0.0, np.inf, -np.inf])
    for name in ("asin", "acos", "atanh", "acosh", "asinh", "sinh", "cosh", "tan", "atan"):
        with np.errstate(all="ignore"):
            close(getattr(pf, name)(pf.tensor(v, dtype=pf.float32)),
                  getattr(torch, name)(torch.tensor(v, dtype=torch.float32)), rtol=1e-6, atol=1e-6, what=name)


def test_sgn_and_methods(device, rng):
    p, t = both(rng, (3, 4), discrete=True)
    close(pf.sgn(p), torch.sgn(t))
    close(p.clone().tan_(), torch.tan(t), rtol=1e-10)
    close(p.fmax(pf.zeros(4, dtype=pf.float64)), t.fmax(torch.zeros(4, dtype=torch.float64)))


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv(name, device, rng):
    x, tx = both(rng, (3, 4), grad=True)
    a, ta = both(rng, (4,), grad=True)
    b, tb = both(rng, (3, 1), nonzero=True, grad=True)
    for value in (1, 0.5, -2):
        close(getattr(pf, name)(x, a, b, value=value), getattr(torch, name)(tx, ta, tb, value=value), what=name)
    grads_match([x, a, b], [tx, ta, tb], getattr(x, name)(a, b, value=3), getattr(tx, name)(ta, tb, value=3), rng)
    y, ty = both(rng, (3, 4))
    ptr = y.data_ptr()
    getattr(y, name + "_")(a.detach(), b.detach(), value=0.25)
    getattr(ty, name + "_")(ta.detach(), tb.detach(), value=0.25)
    assert y.data_ptr() == ptr
    close(y, ty)
    # dtypes as PyTorch: integer tensors stay integers for addcmul; float32 with int operands
    i, ti = both(rng, (3, 4), "int32")
    close(pf.addcmul(i, i, i, value=2), torch.addcmul(ti, ti, ti, value=2))
    f, tf = both(rng, (3, 4), "float32")
    close(pf.addcdiv(f, i, f.abs() + 1), torch.addcdiv(tf, ti, tf.abs() + 1), rtol=1e-6)
    with pytest.raises(TypeError, match="integer division of tensor1 by tensor2 is not supported"):
        pf.addcdiv(i, i, i)  # integer division (PyTorch refuses it too)
    with pytest.raises(TypeError, match="argument value must not be a floating point number"):
        pf.addcmul(i, i, i, value=0.5)
    # In place, a result that the tensor's dtype cannot hold is refused, as torch ("can't be cast").
    with pytest.raises(TypeError, match="cannot be stored"):
        getattr(i, name + "_")(f, f)


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv_in_place_gradients(name, device, rng):
    """The in-place forms record their history: gradients reach the written tensor's inputs and the operands."""
    x, tx = both(rng, (3, 4), grad=True)
    a, ta = both(rng, (4,), grad=True)
    b, tb = both(rng, (3, 1), nonzero=True, grad=True)
    y, ty = x * 2, tx * 2
    getattr(y, name + "_")(a, b, value=0.5)
    getattr(ty, name + "_")(ta, tb, value=0.5)
    close(y, ty, what=name + "_")
    grads_match([x, a, b], [tx, ta, tb], y, ty, rng)
    with pytest.raises(pf.AutogradError, match="leaf tensor that requires grad"):
        getattr(x, name + "_")(a, b)


def test_unary_plus(device, rng):
    p, t = both(rng, (2, 3))
    assert (+p) is p
    close(+p, +t)
    assert pf.positive(p) is p
    with pytest.raises(TypeError):
        +pf.tensor([True, False])


# ----------------------------------------------------------------- comparisons


def test_equal(device, rng):
    p, t = both(rng, (3, 4))
    assert pf.equal(p, p.clone()) is True and torch.equal(t, t.clone())
    q = p.clone()
    q[1, 2] = 100.0
    assert pf.equal(p, q) is False
    assert pf.equal(p, p.reshape(4, 3)) is False  # same elements, other shape
    nan = pf.tensor([1.0, float("nan")])
    assert pf.equal(nan, nan) is torch.equal(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]))
    assert p.equal(p) is True


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_isclose_allclose(dtype, device, rng):
    a, ta = both(rng, (5, 6), dtype, low=-5, high=5)
    noise = make_values(rng, (5, 6), "float64", low=-1, high=1) * 1e-5
    if dtype.startswith("float"):
        bv = ta.detach().numpy() * (1 + noise)
        bv.reshape(-1)[::7] += 1.0  # some far apart
        bv.reshape(-1)[1] = np.inf
        b, tb = pf.tensor(bv, dtype=getattr(pf, dtype)), torch.tensor(bv, dtype=getattr(torch, dtype))
    else:
        b, tb = both(rng, (5, 6), dtype, low=-5, high=5)
    for kw in ({}, dict(rtol=1e-3), dict(atol=1.5), dict(rtol=0, atol=0), dict(rtol=0.5, atol=0.1)):
        got, want = pf.isclose(a, b, **kw), torch.isclose(ta, tb, **kw)
        assert got.dtype == pf.bool
        np.testing.assert_array_equal(pf_to_numpy(got), want.detach().numpy(), err_msg=f"{dtype} {kw}")
        assert pf.allclose(a, b, **kw) is torch.allclose(ta, tb, **kw)
        assert pf.allclose(a, a, **kw) is True
    assert a.isclose(b).shape == (5, 6) and a.allclose(a)


def test_isclose_nan_and_inf(device):
    v = [1.0, float("nan"), float("inf"), float("-inf"), float("inf")]
    w = [1.0, float("nan"), float("inf"), float("inf"), 1e38]
    for equal_nan in (False, True):
        got = pf.isclose(pf.tensor(v), pf.tensor(w), equal_nan=equal_nan)
        want = torch.isclose(torch.tensor(v), torch.tensor(w), equal_nan=equal_nan)
        assert pf_to_numpy(got).tolist() == want.tolist()
    assert pf.allclose(pf.tensor(v), pf.tensor(v)) is False
    assert pf.allclose(pf.tensor(v), pf.tensor(v), equal_nan=True) is True
    with pytest.raises(TypeError):
        pf.isclose(pf.tensor([1.0]), pf.tensor([1]))


# ----------------------------------------------------------------- indexing


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add_copy_fill(dim, device, rng):
    x, tx = both(rng, (4, 5, 3), grad=True)
    size = tx.shape[dim]
    dup = rng.integers(0, size, size=7)
    uniq = rng.permutation(size)[: size - 1]
    shape = list(tx.shape)
    shape[dim] = 7
    s, ts = both(rng, tuple(shape), grad=True)
    i, ti = idx(dup)
    for alpha in (1, 2.5):
        close(pf.index_add(x, dim, i, s, alpha=alpha), torch.index_add(tx, dim, ti, ts, alpha=alpha))
    grads_match([x, s], [tx, ts], x.index_add(dim, i, s, alpha=-1.5), tx.index_add(dim, ti, ts, alpha=-1.5), rng)
    shape[dim] = len(uniq)
    c, tc = both(rng, tuple(shape), grad=True)
    u, tu = idx(uniq)
    x.grad = None
    tx.grad = None
    grads_match([x, c], [tx, tc], x.index_copy(dim, u, c), tx.index_copy(dim, tu, tc), rng)
    close(x.index_fill(dim, u, -7.5), tx.index_fill(dim, tu, -7.5))
    close(x.index_fill(dim, u, pf.tensor(2.0)), tx.index_fill(dim, tu, torch.tensor(2.0)))
    # in place
    y, ty = x.detach().clone(), tx.detach().clone()
    ptr = y.data_ptr()
    y.index_add_(dim, i, s.detach())
    ty.index_add_(dim, ti, ts.detach())
    y.index_fill_(dim, u, 1.0)
    ty.index_fill_(dim, tu, 1.0)
    y.index_copy_(dim, u, c.detach())
    ty.index_copy_(dim, tu, tc.detach())
    assert y.data_ptr() == ptr
    close(y, ty)


def test_index_add_integers_and_errors(device, rng):
    x, tx = both(rng, (5,), "int64")
    s, ts = both(rng, (3,), "int64")
    i, ti = idx([4, 0, 4])
    close(pf.index_add(x, 0, i, s, alpha=3), torch.index_add(tx, 0, ti, ts, alpha=3))
    with pytest.raises(TypeError):
        pf.index_add(x, 0, i, s.to(pf.float32))
    with pytest.raises(IndexError):
        pf.index_add(x, 0, pf.tensor([5, 0, 1]), s)
        pf.synchronize()  # a GPU raises a bad index at the next wait
    with pytest.raises(IndexError):
        pf.index_add(x, 2, i, s)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(accumulate, device, rng):
    x, tx = both(rng, (4, 5, 2))
    i, ti = idx([0, 3, 3, 1] if accumulate else [0, 3, 2, 1])
    j, tj = idx([[1], [4]])
    v, tv = both(rng, (2, 4, 2))
    got = pf.index_put(x, (i, j), v, accumulate=accumulate)
    want = torch.index_put(tx, (ti, tj), tv, accumulate=accumulate)
    close(got, want)
    close(x, tx)  # index_put leaves its input alone
    # in place, a mask, a broadcast value, negative indices
    m = pf.tensor(make_values(rng, (4, 5), "bool"))
    tm = torch.from_numpy(pf_to_numpy(m))
    y, ty = x.clone(), tx.clone()
    y.index_put_((m,), pf.tensor([1.5, -2.0], dtype=pf.float64), accumulate=accumulate)
    ty.index_put_((tm,), torch.tensor([1.5, -2.0], dtype=torch.float64), accumulate=accumulate)
    close(y, ty)
    k, tk = idx([-1, 0, -1])
    y.index_put_((k,), pf.tensor(3.0, dtype=pf.float64), accumulate=accumulate)
    ty.index_put_((tk,), torch.tensor(3.0, dtype=torch.float64), accumulate=accumulate)
    close(y, ty)
    with pytest.raises(TypeError):
        y.index_put_((k,), pf.tensor(3.0), accumulate=accumulate)


def test_index_put_accumulate_gradient(device, rng):
    x, tx = both(rng, (4, 3), grad=True)
    v, tv = both(rng, (5, 3), grad=True)
    i, ti = idx([0, 2, 2, 3, 0])
    grads_match([x, v], [tx, tv], pf.index_put(x * 1, (i,), v, accumulate=True),
                torch.index_put(tx * 1, (ti,), tv, accumulate=True), rng)


def test_masked_select_and_take(device, rng):
    x, tx = both(rng, (3, 4), grad=True)
    mv = make_values(rng, (4,), "bool")
    m, tm = pf.tensor(mv), torch.from_numpy(mv.copy())
    grads_match([x], [tx], pf.masked_select(x, m), torch.masked_select(tx, tm), rng)
    mv2 = make_values(rng, (2, 1, 4), "bool")  # broadcasting the other way too
    close(x.masked_select(pf.tensor(mv2)), tx.masked_select(torch.from_numpy(mv2.copy())))
    x.grad = None
    tx.grad = None
    i, ti = idx([[0, 11, -1], [5, 5, 3]])
    grads_match([x], [tx], pf.take(x, i), torch.take(tx, ti), rng)
    close(x.T.take(i), tx.T.take(ti))  # the row-major order of a non-contiguous tensor
    with pytest.raises(IndexError):
        pf.take(x, pf.tensor([12]))
        pf.synchronize()  # a GPU raises a bad index at the next wait
    with pytest.raises(TypeError):
        pf.take(x, pf.tensor([1], dtype=pf.int32))
    with pytest.raises(TypeError):
        pf.masked_select(x, pf.tensor([1, 0, 1, 0]))


def test_range_keys(device, rng):
    x, tx = both(rng, (4, 6))
    labels = [5, 0, 2, 2]
    close(x[range(4), labels], tx[range(4), labels])
    close(x[range(1, 4, 2)], tx[range(1, 4, 2)])
    y, ty = x.clone(), tx.clone()
    y[range(4), labels] = 0.5
    ty[range(4), labels] = 0.5
    close(y, ty)


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")  # torch's own deprecation
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_argument(reduce, device, rng):
    x, tx = both(rng, (3, 5))
    s, ts = both(rng, (4, 5))
    iv = rng.integers(0, 3, size=(4, 5))
    i, ti = idx(iv)
    close(pf.scatter(x, 0, i, s, reduce=reduce), torch.scatter(tx, 0, ti, ts, reduce=reduce))
    close(x.scatter(0, i, value=2.0, reduce=reduce), tx.scatter(0, ti, 2.0, reduce=reduce))
    y, ty = x.clone(), tx.clone()
    y.scatter_(0, i, s, reduce=reduce)
    ty.scatter_(0, ti, ts, reduce=reduce)
    close(y, ty)
    with pytest.raises(ValueError):
        pf.scatter(x, 0, i, s, reduce="sum")


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "bfloat16", "int8"])
def test_scatter_reduce_many_duplicates(reduce, dtype, device, rng):
    """Many writes to few places: the GPU's atomics (compare-and-swap loops, wide copies) against PyTorch."""
    low, high = (0.5, 1.5) if reduce == "prod" else (-4, 4)
    if dtype == "int8" and reduce == "prod":
        low, high = -1, 2
    x, tx = both(rng, (3, 64), dtype, low=low, high=high)
    s, ts = both(rng, (400, 64), dtype, low=low, high=high)
    i, ti = idx(rng.integers(0, 3, size=(400, 64)))
    for include_self in (True, False):
        got = pf.scatter_reduce(x, 0, i, s, reduce, include_self=include_self)
        tx32, ts32 = (tx.float(), ts.float()) if dtype in ("float16", "bfloat16") else (tx, ts)
        want = torch.scatter_reduce(tx32, 0, ti, ts32, reduce, include_self=include_self).to(tx.dtype)
        tol = {"float32": 1e-4, "float16": 2e-3, "bfloat16": 1.6e-2}.get(dtype, 0)
        close(got, want, rtol=tol, atol=tol, what=f"{reduce} include_self={include_self}")
    y, ty = x.clone(), tx.clone()
    y.scatter_reduce_(0, i, s, reduce, include_self=False)
    ty.scatter_reduce_(0, ti, ts, reduce, include_self=False) if dtype not in ("float16", "bfloat16") else \
        ty.copy_(torch.scatter_reduce(tx.float(), 0, ti, ts.float(), reduce, include_self=False))
    close(y, ty, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_prod_gradient_with_zeros(include_self, device, rng):
    xv = make_values(rng, (3, 4), "float64")
    sv = make_values(rng, (5, 4), "float64")
    xv[0, 0] = sv[1, 1] = sv[2, 2] = sv[4, 2] = sv[3, 3] = 0.0  # lone zeros and a slot with two
    iv = np.array([[0, 1, 2, 0], [1, 1, 0, 2], [2, 0, 1, 1], [0, 2, 1, 1], [1, 0, 1, 2]])
    x, tx = pf.tensor(xv, requires_grad=True), torch.tensor(xv, requires_grad=True)
    s, ts = pf.tensor(sv, requires_grad=True), torch.tensor(sv, requires_grad=True)
    i, ti = idx(iv)
    grads_match([x, s], [tx, ts], pf.scatter_reduce(x, 0, i, s, "prod", include_self=include_self),
                torch.scatter_reduce(tx, 0, ti, ts, "prod", include_self=include_self), rng)


def test_scatter_reduce_nan_and_errors(device):
    x = pf.tensor([0.0, 1.0, 2.0])
    s = pf.tensor([float("nan"), 5.0, -1.0])
    i = pf.tensor([0, 1, 1])
    for reduce in ("amax", "amin", "sum"):
        want = torch.scatter_reduce(torch.tensor([0.0, 1.0, 2.0]), 0, torch.tensor([0, 1, 1]),
                                    torch.tensor([float("nan"), 5.0, -1.0]), reduce)
        close(pf.scatter_reduce(x, 0, i, s, reduce), want, what=reduce)
    with pytest.raises(ValueError):
        pf.scatter_reduce(x, 0, i, s, "max")
    with pytest.raises(TypeError):
        pf.scatter_reduce(x > 0, 0, i, s > 0, "mean")
    with pytest.raises(TypeError):
        pf.scatter_reduce(x, 0, i, s.to(pf.float64), "sum")
    with pytest.raises(IndexError):
        pf.scatter_reduce(x, 0, pf.tensor([0, 3, 1]), s, "amax")
        pf.synchronize()


# ----------------------------------------------------------------- aminmax, diff


def test_aminmax(device, rng):
    p, t = both(rng, (3, 4, 5))
    r, tr = pf.aminmax(p), torch.aminmax(t)
    close(r.min, tr.min)
    close(r.max, tr.max)
    for dim in (0, -1):
        for keepdim in (False, True):
            mn, mx = p.aminmax(dim=dim, keepdim=keepdim)
            tmn, tmx = t.aminmax(dim=dim, keepdim=keepdim)
            close(mn, tmn)
            close(mx, tmx)
    i, ti = both(rng, (6,), "int32")
    assert pf_to_numpy(pf.aminmax(i)[0]).tolist() == torch.aminmax(ti)[0].tolist()
    assert type(pf.aminmax(i)).__name__ == "aminmax"


def test_diff(device, rng):
    p, t = both(rng, (4, 6), grad=True)
    for n in (0, 1, 2, 5):
        for dim in (0, -1):
            close(pf.diff(p, n=n, dim=dim), torch.diff(t, n=n, dim=dim), what=f"n={n} dim={dim}")
    a, ta = both(rng, (4, 2))
    b, tb = both(rng, (1, 6))
    close(p.diff(dim=1, prepend=a, append=a), t.diff(dim=1, prepend=ta, append=ta))
    close(p.diff(n=2, dim=0, append=b), t.diff(n=2, dim=0, append=tb))
    grads_match([p], [t], pf.diff(p, n=2, dim=1), torch.diff(t, n=2, dim=1), rng)
    bv = make_values(rng, (7,), "bool")
    assert pf_to_numpy(pf.diff(pf.tensor(bv))).tolist() == torch.diff(torch.from_numpy(bv.copy())).tolist()
    i, ti = both(rng, (7,), "int64")
    assert pf_to_numpy(pf.diff(i)).tolist() == torch.diff(ti).tolist()
    with pytest.raises(ValueError):
        pf.diff(pf.tensor(1.0))


# ----------------------------------------------------------------- random draws


def test_normal_forms(device, rng):
    mean, _ = both(rng, (300, 400), "float32")
    std = pf.tensor(make_values(rng, (400,), "float32", low=0.5, high=2.0))
    for args, shape in (((mean, std), (300, 400)), ((1.5, std), (400,)), ((mean,), (300, 400)),
                        ((mean, 0.5), (300, 400)), ((2.0, 3.0, (500, 300)), (500, 300))):
        x = pf.normal(*args)
        assert tuple(x.shape) == shape and x.dtype == pf.float32 and x.device == pf.get_device()
        m = args[0] if isinstance(args[0], float) else args[0]
        s = args[1] if len(args) > 1 else 1.0
        z = (x - m) / s
        bound = 5 / np.sqrt(x.numel())  # five standard errors
        assert abs(z.mean().item()) < bound and abs(z.std().item() - 1) < bound, args[1:]
    assert pf.normal(0.0, 1.0, size=(3,), dtype=pf.float64).dtype == pf.float64
    with pytest.raises(ValueError):
        pf.normal(0.0, -1.0, (2,))
    with pytest.raises(ValueError):
        pf.normal(mean, pf.full((400,), -1.0))
    with pytest.raises(TypeError):
        pf.normal(0.0, 1.0)


def test_normal_is_differentiable_as_pytorch(device, rng):
    m = pf.tensor(make_values(rng, (50,), "float64"), requires_grad=True)
    s = pf.tensor(make_values(rng, (50,), "float64", low=0.5, high=2), requires_grad=True)
    x = pf.normal(m, s)
    assert x.requires_grad
    (x * 3).sum().backward()  # torch gives a sample's mean and std zero gradients
    np.testing.assert_array_equal(pf_to_numpy(m.grad), np.zeros(50))
    np.testing.assert_array_equal(pf_to_numpy(s.grad), np.zeros(50))
    y = pf.normal(pf.tensor(1.0), s)  # broadcast: the gradient has std's shape
    y.sum().backward()
    assert tuple(s.grad.shape) == (50,)


def _draw_everything(g_seed, device):
    pf.set_device(device)
    g = pf.Generator().manual_seed(g_seed)
    probs = pf.tensor([[0.1, 0.0, 0.5, 0.4], [1.0, 2.0, 3.0, 4.0]])
    return [pf_to_numpy(t) for t in (
        pf.normal(pf.zeros(5), pf.ones(5), generator=g), pf.normal(1.0, 2.0, (5,), generator=g),
        pf.bernoulli(pf.full((8,), 0.5), generator=g), pf.multinomial(probs, 6, True, generator=g),
        pf.zeros(6).bernoulli_(0.3, generator=g), pf.zeros(6).exponential_(2.0, generator=g))]


def test_random_draws_repeat_with_a_seed_and_agree_across_devices(device):
    first = _draw_everything(7, device)
    again = _draw_everything(7, device)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    other = _draw_everything(8, device)
    assert any(not np.array_equal(a, b) for a, b in zip(first, other))
    if device == "rocm":  # the same numbers as the CPU draws
        for a, b in zip(first, _draw_everything(7, "cpu")):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_bernoulli(device, rng):
    p = pf.tensor(make_values(rng, (200, 300), "float32", low=0.0, high=1.0))
    x = pf.bernoulli(p)
    assert x.dtype == pf.float32 and tuple(x.shape) == (200, 300)
    v = pf_to_numpy(x)
    assert set(np.unique(v)) <= {0.0, 1.0}
    assert abs(v.mean() - pf_to_numpy(p).mean()) < 0.01
    assert pf_to_numpy(pf.bernoulli(pf.zeros(100))).sum() == 0
    assert pf_to_numpy(pf.bernoulli(pf.ones(100))).sum() == 100
    assert abs(pf_to_numpy(pf.bernoulli(p, 0.2)).mean() - 0.2) < 0.01
    assert abs(pf_to_numpy(p.bernoulli()).mean() - pf_to_numpy(p).mean()) < 0.01
    y = pf.zeros(300, 200, dtype=pf.int64)
    assert y.bernoulli_(0.75) is y and y.dtype == pf.int64
    assert abs(pf_to_numpy(y).mean() - 0.75) < 0.01
    with pytest.raises(TypeError):
        pf.bernoulli(pf.ones(3, dtype=pf.int64))
    with pytest.raises(ValueError):
        pf.zeros(3).bernoulli_(1.5)


def test_exponential_(device):
    x = pf.empty(400, 500, dtype=pf.float64)
    assert x.exponential_(2.5) is x
    v = pf_to_numpy(x)
    assert v.min() >= 0 and abs(v.mean() - 0.4) < 0.005 and abs(v.std() - 0.4) < 0.005
    with pytest.raises(ValueError):
        x.exponential_(0)


def test_multinomial(device):
    w = np.array([[0.0, 1.0, 3.0, 0.0, 6.0], [5.0, 0.0, 0.0, 5.0, 0.0]])
    x = pf.multinomial(pf.tensor(w), 20000, replacement=True)
    assert x.dtype == pf.int64 and tuple(x.shape) == (2, 20000)
    counts = np.stack([np.bincount(r, minlength=5) for r in pf_to_numpy(x)]) / 20000
    np.testing.assert_allclose(counts, w / w.sum(1, keepdims=True), atol=0.015)
    assert counts[w == 0].sum() == 0  # zero weights are never drawn
    one = pf.multinomial(pf.tensor(w[0]), 1)
    assert tuple(one.shape) == (1,) and pf_to_numpy(one)[0] in (1, 2, 4)
    assert tuple(pf.tensor(w).multinomial(1).shape) == (2, 1)
    with pytest.raises(ValueError):  # only 2 categories with weight in row 1
        pf.multinomial(pf.tensor(w), 3)
    with pytest.raises(ValueError):
        pf.multinomial(pf.tensor([1.0, -1.0]), 1)
    with pytest.raises(ValueError):
        pf.multinomial(pf.tensor([0.0, 0.0]), 1)
    with pytest.raises(ValueError):
        pf.multinomial(pf.tensor([1.0, 1.0]), 3)


def test_multinomial_without_replacement(device):
    w = np.array([1.0, 2.0, 0.0, 3.0, 4.0])
    rows = 20000
    x = pf_to_numpy(pf.multinomial(pf.tensor(np.tile(w, (rows, 1))), 4))
    assert x.shape == (rows, 4) and x.dtype == np.int64
    assert all(len(set(r)) == 4 for r in x[:500]) and not np.any(x == 2)
    p = w / w.sum()
    np.testing.assert_allclose(np.bincount(x[:, 0], minlength=5) / rows, p, atol=0.015)
    # the second draw: sum over the first i of p_i * p_j / (1 - p_i)
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(5) if i != j) for j in range(5)])
    np.testing.assert_allclose(np.bincount(x[:, 1], minlength=5) / rows, second, atol=0.015)
    perm = pf_to_numpy(pf.multinomial(pf.tensor([5.0, 1.0, 2.0]), 3))
    assert sorted(perm.tolist()) == [0, 1, 2]


def test_counting_and_products(device, rng):
    """bincount, histc, kron, cross, cdist, logical_xor and Tensor.where against torch."""
    labels, tlabels = idx(rng.integers(0, 6, 40))
    close = lambda a, b, what: assert_matches(a, b, 1e-6, 1e-6, what=what)  # noqa: E731
    close(pf.bincount(labels), torch.bincount(tlabels), "bincount")
    close(pf.bincount(labels, minlength=9), torch.bincount(tlabels, minlength=9), "bincount minlength")
    w, tw = both(rng, (40,), "float32")
    close(pf.bincount(labels, weights=w), torch.bincount(tlabels, weights=tw), "bincount weights")
    x, tx = both(rng, (5, 7), "float32")
    close(pf.histc(x, bins=6, min=-2, max=2), torch.histc(tx, bins=6, min=-2, max=2), "histc")
    close(pf.histc(x, bins=4), torch.histc(tx, bins=4), "histc over min..max")
    a, ta = both(rng, (2, 3), "float64")
    b, tb = both(rng, (3, 2), "float64")
    close(pf.kron(a, b), torch.kron(ta, tb), "kron")
    u, tu = both(rng, (4, 3), "float64")
    v, tv = both(rng, (4, 3), "float64")
    close(pf.linalg.cross(u, v), torch.linalg.cross(tu, tv), "linalg.cross")
    close(pf.cross(u.t(), v.t(), dim=0), torch.cross(tu.t(), tv.t(), dim=0), "cross dim 0")
    p, tp = both(rng, (5, 3), "float64")
    q, tq = both(rng, (6, 3), "float64")
    for norm in (2.0, 1.0):
        close(pf.cdist(p, q, p=norm), torch.cdist(tp, tq, p=norm), f"cdist p={norm}")
    m, tm = both(rng, (3, 4), "float32")
    close(pf.logical_xor(m > 0, x[:3, :4] > 0), torch.logical_xor(tm > 0, tx[:3, :4] > 0), "logical_xor")
    close(m.where(m > 0, pf.tensor(0.0)), tm.where(tm > 0, torch.tensor(0.0)), "Tensor.where")
    close(pf.special.expit(m), torch.special.expit(tm), "special.expit")
    close(pf.special.logit(pf.sigmoid(m)), torch.special.logit(torch.sigmoid(tm)), "special.logit")


def test_can_cast_and_thread_count():
    """pf.can_cast against torch's over every dtype pair; get/set_num_threads are the CPU kernels' thread count."""
    names = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
    for a in names:
        for b in names:
            assert pf.can_cast(getattr(pf, a), getattr(pf, b)) == torch.can_cast(getattr(torch, a), getattr(torch, b)), \
                (a, b)
    n = pf.get_num_threads()
    assert n == pf.cpu_threads() >= 1
    pf.set_num_threads(1)
    try:
        assert pf.get_num_threads() == 1
    finally:
        pf.set_num_threads(n)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cummax_cummin_as_torch(name, device, rng):
    """Values, indices (ties and NaN move the index to the later element, as torch) and the input's gradient
    against torch, over floats with repeats and NaN, integers, an empty dim, a dim of 1 and a 0-d tensor."""
    cases = [((9,), 0, "float32"), ((3, 70), 1, "float32"), ((5, 4, 3), 0, "float64"), ((4, 6), -1, "int64"),
             ((2, 0, 3), 1, "float32"), ((3, 1), 1, "float32"), ((), 0, "float32")]
    for shape, dim, dtype in cases:
        v = rng.integers(-3, 4, size=shape).astype(dtype)  # repeats: ties
        if dtype.startswith("float") and v.size > 5:
            v.reshape(-1)[[1, 4]] = np.nan
        x = pf.tensor(v, device=device)
        tx = torch.from_numpy(np.array(v))
        if dtype.startswith("float"):
            x.requires_grad_(True)
            tx.requires_grad_(True)
        got, want = getattr(pf, name)(x, dim), getattr(torch, name)(tx, dim)
        what = f"{name}{shape} dim {dim} {dtype}"
        np.testing.assert_array_equal(pf_to_numpy(got.values), want.values.detach().numpy(), err_msg=what)
        np.testing.assert_array_equal(pf_to_numpy(got.indices), want.indices.detach().numpy(), err_msg=what)
        assert got.indices.dtype == pf.int64 and got.values.device == x.device
        if dtype.startswith("float") and v.size:
            g = rng.uniform(-1, 1, size=shape)
            got.values.backward(pf.tensor(g, dtype=x.dtype, device=device))
            want.values.backward(torch.from_numpy(g).to(tx.dtype))
            # Gradients of one position summed in another order (GPU scatter_add): float rounding.
            np.testing.assert_allclose(pf_to_numpy(x.grad), tx.grad.detach().numpy(), rtol=1e-6, atol=1e-7, err_msg=what)
    method = getattr(pf.tensor([[1.0, 3.0, 2.0]], device=device), name)(1)
    assert pf_to_numpy(method.indices).tolist() == getattr(torch.tensor([[1.0, 3.0, 2.0]]), name)(1).indices.tolist()
