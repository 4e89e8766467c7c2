"""Reductions, scans, searching and linear algebra beyond the OpInfo registry
(opinfo_scan.py has cumprod and searchsorted): all/any/count_nonzero,
logsumexp, nansum/nanmean, var_mean/std_mean, the norms and pf.linalg, the
matrix products, einsum and tensordot (compositions of table ops), cumprod's
gradient through zeros, long scans, sorter/side/bucketize, and the errors.
Every result is compared with PyTorch on the CPU, on fresh random inputs, on
each device."""

import math
import re

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import PF_DTYPE, TORCH_DTYPE, assert_matches, make_values

TOL = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 2e-2), "float32": (2e-5, 2e-5), "float64": (1e-11, 1e-11)}


def pair(rng, shape, dtype="float32", **kw):
    """(pyflame, torch) tensors holding the same random values."""
    v = make_values(rng, shape, dtype, **kw)
    return pf.tensor(v).to(PF_DTYPE[dtype]), torch.from_numpy(np.array(v, copy=True)).to(TORCH_DTYPE[dtype])


def grad_pair(rng, shape, dtype="float64", **kw):
    p, t = pair(rng, shape, dtype, **kw)
    return p.requires_grad_(True), t.requires_grad_(True)


def close(actual, expected, dtype="float32", what="", scale=1.0):
    rtol, atol = TOL.get(dtype, (0, 0))
    assert_matches(actual, expected.detach(), rtol * scale, atol * scale, what=what)


def check_grads(rng, pf_out, th_out, pf_inputs, th_inputs, what, scale=1.0):
    """Backward of a random upstream gradient through both; the inputs' gradients agree (float64)."""
    up = rng.standard_normal(tuple(th_out.shape))
    th_out.backward(torch.from_numpy(up).to(th_out.dtype))
    pf_out.backward(pf.tensor(up, dtype=pf_out.dtype, device=pf_out.device))
    for i, (p, t) in enumerate(zip(pf_inputs, th_inputs)):
        assert p.grad is not None, f"{what}: no gradient for input {i}"
        close(p.grad, t.grad, "float64", f"{what}: gradient of input {i}", scale)


def raises(exc, fn, *patterns):
    with pytest.raises(exc) as info:
        fn()
    for p in patterns:
        assert re.search(p, str(info.value)), f"message {str(info.value)!r} does not match {p!r}"
    return info.value


# ----------------------------------------------------------------- all, any, count_nonzero


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "float32", "float64"])
def test_all_any_count_nonzero(device, rng, dtype):
    for shape, dims in [((3, 4, 5), [None, 0, 1, -1, (0, 2), (1, 2, 0)]), ((7,), [None, 0]), ((), [None, 0]),
                        ((2, 0, 3), [None, 1, (0, 2)])]:
        # small integers and multiples of 0.5 in [-1, 1]: zeros are frequent, so rows differ
        p, t = pair(rng, shape, dtype, low=-1, high=1, ilow=0, ihigh=2, discrete=True)
        for dim in dims:
            for keepdim in (False, True):
                kw = {} if dim is None else dict(dim=dim, keepdim=keepdim)
                if dim is None and keepdim:
                    continue
                for name in ("all", "any"):
                    close(getattr(pf, name)(p, **kw), getattr(torch, name)(t, **kw), what=f"{name}{shape} {kw}")
                    close(getattr(p, name)(**kw), getattr(t, name)(**kw), what=f"Tensor.{name}{shape} {kw}")
            close(pf.count_nonzero(p, dim), torch.count_nonzero(t, dim), what=f"count_nonzero {shape} {dim}")
    # NaN is true, as in PyTorch
    x = pf.tensor([[float("nan"), 0.0], [1.0, 2.0]])
    assert pf.all(x, 1).tolist() == [False, True] and pf.any(x, 1).tolist() == [True, True]


# ----------------------------------------------------------------- logsumexp, nansum, nanmean


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_logsumexp(device, rng, dtype):
    for shape, dims in [((3, 4, 5), [0, 2, -1, (0, 2)]), ((6,), [0]), ((), [0])]:
        p, t = pair(rng, shape, dtype, low=-5, high=5)
        for dim in dims:
            for keepdim in (False, True):
                close(pf.logsumexp(p, dim, keepdim), torch.logsumexp(t, dim, keepdim), dtype,
                      f"logsumexp {shape} {dim} {keepdim}", scale=4)
                close(p.logsumexp(dim, keepdim=keepdim), t.logsumexp(dim, keepdim=keepdim), dtype, "method", scale=4)


def test_logsumexp_is_stable_and_handles_infinities(device, rng):
    p, t = pair(rng, (4, 6), "float32", low=900, high=1000)
    close(pf.logsumexp(p, 1), torch.logsumexp(t, 1), what="large values")
    close(pf.logsumexp(-p, 1), torch.logsumexp(-t, 1), what="large negative values")
    close(pf.logsumexp(p, None), torch.logsumexp(t, (0, 1)), what="dim None: every dim")
    inf = float("inf")
    v = [[-inf, -inf], [inf, 1.0], [float("nan"), 1.0], [-inf, 2.0]]
    close(pf.logsumexp(pf.tensor(v), 1), torch.logsumexp(torch.tensor(v), 1), what="infinities")
    close(pf.logsumexp(pf.tensor([[1, 2], [3, 4]]), 1), torch.logsumexp(torch.tensor([[1, 2], [3, 4]]), 1),
          what="integers")
    close(pf.logsumexp(pf.ones(2, 0), 1), torch.logsumexp(torch.ones(2, 0), 1), what="empty dim")


def test_logsumexp_gradient(device, rng):
    p, t = grad_pair(rng, (3, 5), low=-3, high=3)
    check_grads(rng, pf.logsumexp(p, 1), torch.logsumexp(t, 1), [p], [t], "logsumexp")
    p, t = grad_pair(rng, (2, 3, 4), low=-3, high=3)
    check_grads(rng, pf.logsumexp(p, (0, 2), keepdim=True), torch.logsumexp(t, (0, 2), keepdim=True), [p], [t],
                "logsumexp over two dims")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_nansum_nanmean(device, rng, dtype):
    v = make_values(rng, (4, 5), dtype, low=-3, high=3)
    if dtype.startswith("float"):
        v[rng.random(v.shape) < 0.3] = np.nan
        v[2, :] = np.nan
    p, t = pf.tensor(v).to(PF_DTYPE[dtype]), torch.from_numpy(v.copy())
    for dim in (None, 0, 1, (0, 1)):
        for keepdim in (False, True):
            close(pf.nansum(p, dim, keepdim), torch.nansum(t, dim, keepdim), dtype, f"nansum {dim}")
            if dtype != "int32":
                close(pf.nanmean(p, dim, keepdim), torch.nanmean(t, dim, keepdim), dtype, f"nanmean {dim}")
                close(p.nanmean(dim, keepdim), t.nanmean(dim, keepdim), dtype, f"Tensor.nanmean {dim}")
    close(pf.nansum(p, 1, dtype=pf.float64), torch.nansum(t, 1, dtype=torch.float64), "float64", "nansum dtype=")
    if dtype == "int32":
        raises(RuntimeError, lambda: pf.nanmean(p), "floating point")


# ----------------------------------------------------------------- var_mean, std_mean


@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
def test_var_mean_std_mean(device, rng, name):
    p, t = pair(rng, (3, 4, 5), "float32")
    pf_fn, th_fn = getattr(pf, name), getattr(torch, name)
    forms = [((), {}), ((1,), {}), (((0, 2),), dict(keepdim=True)), ((1,), dict(correction=0)),
             ((1,), dict(correction=2)), ((False,), {}), ((2, False), {}), ((2, True, True), {})]
    for args, kw in forms:
        got, want = pf_fn(p, *args, **kw), th_fn(t, *args, **kw)
        assert isinstance(got, tuple) and len(got) == 2
        close(got[0], want[0], what=f"{name}{args} {kw}: spread")
        close(got[1], want[1], what=f"{name}{args} {kw}: mean")


# ----------------------------------------------------------------- norms


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_vector_norm(device, rng, dtype):
    p, t = pair(rng, (3, 4, 5), dtype, low=-2, high=2)
    for ord in (2, 1, 3, 0.5, -1, 0, math.inf, -math.inf, 2.5):
        for dim in (None, 1, (0, 2), -1):
            for keepdim in (False, True):
                close(pf.linalg.vector_norm(p, ord, dim, keepdim), torch.linalg.vector_norm(t, ord, dim, keepdim),
                      dtype, f"vector_norm ord={ord} dim={dim}", scale=4)
    close(pf.linalg.vector_norm(p, dtype=pf.float64), torch.linalg.vector_norm(t, dtype=torch.float64), "float64",
          "vector_norm dtype=")


def test_norm_forms(device, rng):
    p, t = pair(rng, (3, 4, 5), "float32", low=-2, high=2)
    for args, kw in [((), {}), ((2,), {}), ((1, 1), {}), (("fro",), dict(dim=(1, 2))), ((3, (0, 1), True), {}),
                     ((math.inf,), dict(dim=2)), ((), dict(p=1, dim=0, dtype=pf.float64))]:
        tkw = dict(kw, dtype=torch.float64) if "dtype" in kw else kw
        close(pf.norm(p, *args, **kw), torch.norm(t, *args, **tkw), "float32", f"norm{args} {kw}")
    close(p.norm(), t.norm(), what="Tensor.norm()")
    close(p.norm(1, dim=2), t.norm(1, dim=2), what="Tensor.norm(1, dim=2)")
    m, tm = pair(rng, (4, 6), "float32", low=-2, high=2)
    for ord in (None, "fro", 1, -1, math.inf, -math.inf):
        close(pf.linalg.norm(m, ord), torch.linalg.norm(tm, ord), what=f"linalg.norm matrix ord={ord}")
        close(pf.linalg.matrix_norm(p, "fro" if ord is None else ord, dim=(2, 0), keepdim=True),
              torch.linalg.matrix_norm(t, "fro" if ord is None else ord, dim=(2, 0), keepdim=True),
              what=f"matrix_norm ord={ord} dim=(2, 0)")
    v, tv = pair(rng, (7,), "float32", low=-2, high=2)
    for ord in (None, 1, 3, math.inf, 0):
        close(pf.linalg.norm(v, ord), torch.linalg.norm(tv, ord), what=f"linalg.norm vector ord={ord}")
    close(pf.linalg.norm(p, 3, dim=1), torch.linalg.norm(t, 3, dim=1), what="linalg.norm dim=1")
    close(pf.linalg.norm(p), torch.linalg.norm(t), what="linalg.norm 3-D, no ord")


def test_norm_gradients(device, rng):
    for ord in (2, 1, 3, math.inf):
        p, t = grad_pair(rng, (3, 4), low=-2, high=2)
        check_grads(rng, pf.linalg.vector_norm(p, ord, 1), torch.linalg.vector_norm(t, ord, 1), [p], [t],
                    f"vector_norm ord={ord}")
    p, t = grad_pair(rng, (2, 3, 4), low=-2, high=2)
    check_grads(rng, pf.linalg.matrix_norm(p, 1), torch.linalg.matrix_norm(t, 1), [p], [t], "matrix_norm ord=1")
    # at a zero vector the 2-norm's gradient is 0 (PyTorch's subgradient), not NaN
    z = pf.zeros(3, dtype=pf.float64).requires_grad_(True)
    tz = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    check_grads(rng, pf.linalg.vector_norm(z), torch.linalg.vector_norm(tz), [z], [tz], "2-norm at zero")
    # ord 0 counts the nonzero elements: a gradient of zeros (torch's is undefined, which counts as zeros)
    p, _ = grad_pair(rng, (3, 4))
    pf.linalg.vector_norm(p, 0, 1).sum().backward()
    assert p.grad is not None and pf.all(p.grad == 0).item()


def test_singular_value_norms_match_torch(rng):
    """Matrix norms of ord 'nuc', 2 and -2 (the singular values' sum, largest, smallest; CPU), any two
    dims, keepdim, and their gradients, as torch's; torch.norm's 'nuc'."""
    for shape, dims in [((4, 3), (-2, -1)), ((2, 3, 5), (-2, -1)), ((3, 2, 4), (0, 2)), ((2, 4, 3), (2, 1))]:
        for ord in ("nuc", 2, -2):
            for keepdim in (False, True):
                p, t = grad_pair(rng, shape)
                got = pf.linalg.matrix_norm(p, ord, dims, keepdim)
                want = torch.linalg.matrix_norm(t, ord, dims, keepdim)
                close(got, want, "float64", f"matrix_norm {shape} {ord} {dims} keepdim={keepdim}")
                check_grads(rng, got, want, [p], [t], f"matrix_norm {shape} {ord}")
    p, t = pair(rng, (3, 4), "float32")
    close(pf.norm(p, "nuc"), torch.norm(t, "nuc"), "float32", "torch.norm nuc", scale=10)
    close(pf.linalg.norm(p, 2), torch.linalg.norm(t, 2), "float32", "linalg.norm 2", scale=10)


def test_norm_errors(device):
    x = pf.tensor([[1, 2], [3, 4]])
    raises(RuntimeError, lambda: pf.linalg.vector_norm(x), "floating point", "Long")
    raises(TypeError, lambda: pf.norm(x), "floating point")
    m = pf.ones(3, 3)
    raises(RuntimeError, lambda: pf.linalg.matrix_norm(pf.ones(3)), "at least 2 dimensions")
    raises(RuntimeError, lambda: pf.linalg.norm(pf.ones(2, 2, 2), 1), "1D or 2D")
    raises(ValueError, lambda: pf.linalg.matrix_norm(m, 3), "Order 3 not supported")
    raises(ValueError, lambda: pf.linalg.matrix_norm(m, "abc"), "Order abc not supported")
    raises(ValueError, lambda: pf.linalg.matrix_norm(m, 1, (0, 0)), "dims must be different")
    raises(ValueError, lambda: pf.linalg.matrix_norm(m, 1, (0,)), "2-tuple")
    raises(TypeError, lambda: pf.linalg.vector_norm(m, "fro"), "ord must be a number, got str")
    raises(TypeError, lambda: pf.linalg.vector_norm(m, dtype=pf.int64), "dtype should be floating point")
    raises(IndexError, lambda: pf.linalg.vector_norm(m, 2, 2), "out of range")
    # The norms without an identity (inf, -inf, negative ords) refuse an empty reduction only, as torch.
    e = pf.zeros(0, 3)
    for ord in (math.inf, -math.inf, -1):
        raises(ValueError, lambda: pf.linalg.vector_norm(e, ord, 0), "does not have an identity", r"\[0, 3\]")
        assert pf.linalg.vector_norm(e, ord, 1).shape == (0,)
    raises(ValueError, lambda: pf.linalg.matrix_norm(pf.ones(3, 0), 1), "without columns", r"\[3, 0\]")
    assert pf.linalg.matrix_norm(pf.ones(0, 3), 1).item() == 0


# ----------------------------------------------------------------- cumprod and the scans


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "float64"])
def test_scans_of_many_tiles(device, rng, dtype):
    """Rows of many GPU tiles (8192 elements each): the look-back walks back over more than a warp's
    width of tiles; several such rows at once; rows not a multiple of 4 (scalar loads)."""
    for shape in [(1_000_003,), (3, 300_000), (2, 70_001)]:
        # Small integers: float16 sums stay exact (|sum| < 2048 at these lengths); others uniform.
        v = rng.integers(-1, 2, size=shape) if dtype in ("float16", "int32") else rng.uniform(-1, 1, size=shape)
        p, t = pf.tensor(v).to(PF_DTYPE[dtype]), torch.from_numpy(v).to(TORCH_DTYPE[dtype])
        expected = torch.cumsum(t.double(), -1).to(torch.cumsum(t, -1).dtype)  # float64 sums, then rounded
        close(pf.cumsum(p, -1), expected, dtype, f"cumsum {shape}", scale=20)
    v = np.exp(rng.uniform(-1e-4, 1e-4, size=(2, 100_000)))
    close(pf.cumprod(pf.tensor(v), 1), torch.cumprod(torch.from_numpy(v), 1), "float64", "cumprod of long rows",
          scale=1e3)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "float64"])
def test_reductions_that_split_rows(device, rng, dtype):
    """Full and row reductions long enough to be split across blocks (a second launch reduces the
    partials), odd lengths (no vector loads), and rows just past one warp's span."""
    for shape, dims in [((2_000_000,), None), ((1_000_003,), None), ((3, 500_001), 1), ((100, 4097), 1),
                        ((600, 9000), 1), ((2, 4, 70_000), (0, 2))]:
        p, t = pair(rng, shape, dtype)
        kw = {} if dims is None else dict(dim=dims)
        what = f"{shape} over {dims}"
        close(pf.sum(p, **kw), torch.sum(t.double(), **kw).to(torch.sum(t, **kw).dtype), dtype, "sum " + what,
              scale=50)
        close(pf.amax(p, **kw) if dims else pf.max(p), torch.amax(t, **kw) if dims else torch.max(t), dtype,
              "max " + what)
        if dtype != "int32":
            close(pf.mean(p, **kw), torch.mean(t.double(), **kw).to(t.dtype), dtype, "mean " + what, scale=50)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_cumprod_long_rows_and_columns(device, rng, dtype):
    """Rows longer than a GPU tile (4096) and than several tiles, and scans across rows."""
    for shape, dim in [((2, 5000), 1), ((20001,), 0), ((3, 9000), -1), ((3000, 4), 0), ((5, 7, 3), 1)]:
        if dtype == "int64":  # +-1 and a few 2s: exact products that change sign
            v = rng.choice(np.array([-1, 1, 1, 1, 2]), size=shape) if shape[dim] < 64 else \
                rng.choice(np.array([-1, 1]), size=shape)
        else:  # exp of small numbers: products stay near 1 over long rows
            v = np.exp(rng.uniform(-0.02, 0.02, size=shape)) * rng.choice(np.array([-1.0, 1.0]), size=shape)
        p, t = pf.tensor(v).to(PF_DTYPE[dtype]), torch.from_numpy(v).to(TORCH_DTYPE[dtype])
        close(pf.cumprod(p, dim), torch.cumprod(t, dim), dtype, f"cumprod {shape} dim {dim}", scale=20)
        close(p.cumprod(dim), t.cumprod(dim), dtype, "Tensor.cumprod", scale=20)
        close(pf.cumsum(p, dim), torch.cumsum(t, dim), dtype, f"cumsum {shape} dim {dim}", scale=50)


def test_cumprod_dtypes_and_overflow(device):
    x = pf.tensor([1, 2, 3, 4], dtype=pf.int8)
    assert pf.cumprod(x, 0).dtype == pf.int64 and pf.cumprod(x, 0).tolist() == [1, 2, 6, 24]
    assert pf.cumprod(pf.tensor([True, True, False]), 0).tolist() == [1, 1, 0]
    f = pf.cumprod(pf.tensor([1, 2, 3], dtype=pf.int32), 0, dtype=pf.float64)
    assert f.dtype == pf.float64 and f.tolist() == [1.0, 2.0, 6.0]
    big = [3 ** 39, 3 ** 39, 5]  # int64 products wrap around as PyTorch's
    assert pf.cumprod(pf.tensor(big), 0).tolist() == torch.cumprod(torch.tensor(big), 0).tolist()
    raises(IndexError, lambda: pf.cumprod(pf.ones(2, 3), 2), "out of range")


@pytest.mark.parametrize("zeros", [(), (2,), (0,), (5,), (1, 3), (2, 2)])
def test_cumprod_gradient_with_zeros(device, rng, zeros):
    """Zeros: none, one (first, middle, last position) or several in a row, as torch's cumprod_backward."""
    v = make_values(rng, (3, 6), "float64", low=-2, high=2, nonzero=True)
    v[1, list(zeros)] = 0.0
    v[2, list(zeros)] = 0.0
    p = pf.tensor(v).requires_grad_(True)
    t = torch.from_numpy(v.copy()).requires_grad_(True)
    check_grads(rng, pf.cumprod(p, 1), torch.cumprod(t, 1), [p], [t], f"cumprod with zeros at {zeros}")
    p2 = pf.tensor(v.T.copy()).requires_grad_(True)
    t2 = torch.from_numpy(v.T.copy()).requires_grad_(True)
    check_grads(rng, pf.cumprod(p2, 0), torch.cumprod(t2, 0), [p2], [t2], f"cumprod dim 0, zeros at {zeros}")


# ----------------------------------------------------------------- searchsorted, bucketize


@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_searchsorted_forms(device, rng, dtype):
    seq = np.sort(make_values(rng, (2, 3, 8), dtype, low=-4, high=4, discrete=True), axis=-1)
    vals = make_values(rng, (2, 3, 5), dtype, low=-5, high=5, discrete=True)
    ps, ts = pf.tensor(seq).to(PF_DTYPE[dtype]), torch.from_numpy(seq.copy()).to(TORCH_DTYPE[dtype])
    pv, tv = pf.tensor(vals).to(PF_DTYPE[dtype]), torch.from_numpy(vals.copy()).to(TORCH_DTYPE[dtype])
    for kw in (dict(), dict(right=True), dict(side="left"), dict(side="right", right=False),
               dict(out_int32=True, right=True)):
        close(pf.searchsorted(ps, pv, **kw), torch.searchsorted(ts, tv, **kw), what=f"batched {kw}")
        close(pf.searchsorted(ps[0, 1], pv, **kw), torch.searchsorted(ts[0, 1], tv, **kw), what=f"1-D {kw}")
    # sorter: the sequence unsorted, with the permutation that sorts it
    raw = make_values(rng, (3, 9), dtype, low=-4, high=4, discrete=True)
    order = np.argsort(raw, axis=-1, kind="stable")
    pr, tr = pf.tensor(raw).to(PF_DTYPE[dtype]), torch.from_numpy(raw.copy()).to(TORCH_DTYPE[dtype])
    got = pf.searchsorted(pr, pv[0], sorter=pf.tensor(order))
    close(got, torch.searchsorted(tr, tv[0], sorter=torch.from_numpy(order)), what="sorter")
    close(pf.searchsorted(pr, pv[0], right=True, sorter=pf.tensor(order)),
          torch.searchsorted(tr, tv[0], right=True, sorter=torch.from_numpy(order)), what="sorter, right")


def test_searchsorted_scalars_nan_and_promotion(device, rng):
    s = pf.tensor([1.0, 2.0, 2.0, 3.0, float("nan")])
    ts = torch.tensor([1.0, 2.0, 2.0, 3.0, float("nan")])
    v = [float("nan"), 2.0, 0.5, 3.5, float("inf")]
    for right in (False, True):
        close(pf.searchsorted(s, pf.tensor(v), right=right), torch.searchsorted(ts, torch.tensor(v), right=right),
              what=f"NaN, right={right}")
        for x in (2, 2.5, -1):
            close(pf.searchsorted(s, x, right=right), torch.searchsorted(ts, x, right=right), what=f"scalar {x}")
    si, tsi = pf.tensor([1, 3, 5, 7]), torch.tensor([1, 3, 5, 7])
    close(pf.searchsorted(si, 2.5), torch.searchsorted(tsi, 2.5), what="float scalar into int64")
    close(pf.searchsorted(si, pf.tensor([2.5, 5.0])), torch.searchsorted(tsi, torch.tensor([2.5, 5.0])),
          what="float values into int64")


def test_searchsorted_large(device, rng):
    seq = np.sort(rng.standard_normal((4, 3000)), axis=-1)
    vals = rng.standard_normal((4, 7000))
    close(pf.searchsorted(pf.tensor(seq), pf.tensor(vals), right=True),
          torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(vals), right=True), what="4 x 7000 in 4 x 3000")


def test_bucketize(device, rng):
    b = np.sort(make_values(rng, (6,), "float32", low=-3, high=3, discrete=True))
    x = make_values(rng, (3, 4), "float32", low=-4, high=4, discrete=True)
    pb, tb, px, tx = pf.tensor(b), torch.from_numpy(b.copy()), pf.tensor(x), torch.from_numpy(x.copy())
    for kw in (dict(), dict(right=True), dict(out_int32=True)):
        close(pf.bucketize(px, pb, **kw), torch.bucketize(tx, tb, **kw), what=f"bucketize {kw}")
    close(pf.bucketize(1.0, pb), torch.bucketize(1.0, tb), what="bucketize of a number")
    raises(RuntimeError, lambda: pf.bucketize(px, pf.ones(2, 3)), "boundaries tensor must be 1 dimension")


def test_searchsorted_errors(device):
    s2 = pf.tensor([[1.0, 2.0], [3.0, 4.0]])
    raises(ValueError, lambda: pf.searchsorted(s2, pf.tensor([1.0, 2.0, 3.0])), r"\[2, 2\]", r"\[3\]")
    raises(ValueError, lambda: pf.searchsorted(s2, 3.0), "scalar only when boundaries tensor dimension is 1")
    raises(ValueError, lambda: pf.searchsorted(pf.tensor(3.0), pf.tensor([3.0])), "positive dimension")
    s = pf.tensor([1.0, 2.0, 3.0])
    raises(ValueError, lambda: pf.searchsorted(s, pf.tensor([1.0]), side="middle"), "'left' or 'right'")
    raises(ValueError, lambda: pf.searchsorted(s, pf.tensor([1.0]), right=True, side="left"), "opposites")
    raises(TypeError, lambda: pf.searchsorted(s, pf.tensor([1.0]), sorter=pf.tensor([0, 1, 2], dtype=pf.int32)),
           "long")
    raises(ValueError, lambda: pf.searchsorted(s, pf.tensor([1.0]), sorter=pf.tensor([0, 1])), "same size")
    raises(TypeError, lambda: pf.searchsorted(pf.tensor([True, False]), pf.tensor([True])), "bool")
    assert not pf.is_differentiable("searchsorted")


# ----------------------------------------------------------------- matrix products


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_products(device, rng, dtype):
    a, ta = pair(rng, (3, 4), dtype)
    b, tb = pair(rng, (4, 5), dtype)
    v, tv = pair(rng, (4,), dtype)
    w, tw = pair(rng, (3,), dtype)
    b1, tb1 = pair(rng, (2, 3, 4), dtype)
    b2, tb2 = pair(rng, (2, 4, 5), dtype)
    c, tc = pair(rng, (3, 5), dtype)
    s = 4
    for name, args, targs in [("mm", (a, b), (ta, tb)), ("mv", (a, v), (ta, tv)), ("dot", (v, v), (tv, tv)),
                              ("vdot", (w, w), (tw, tw)), ("outer", (w, v), (tw, tv)), ("ger", (w, v), (tw, tv)),
                              ("bmm", (b1, b2), (tb1, tb2)), ("inner", (a, a), (ta, ta)),
                              ("inner", (b1, v), (tb1, tv))]:
        close(getattr(pf, name)(*args), getattr(torch, name)(*targs), dtype, name, scale=s)
        close(getattr(args[0], name)(*args[1:]), getattr(targs[0], name)(*targs[1:]), dtype, f"Tensor.{name}", scale=s)
    kw = dict(beta=2, alpha=3) if dtype == "int64" else dict(beta=0.5, alpha=-1.5)
    for name, args, targs in [("addmm", (c, a, b), (tc, ta, tb)), ("addmm", (c[0], a, b), (tc[0], ta, tb)),
                              ("addmv", (w, a, v), (tw, ta, tv)), ("addr", (a, w, v), (ta, tw, tv)),
                              ("baddbmm", (c, b1, b2), (tc, tb1, tb2)), ("addbmm", (c, b1, b2), (tc, tb1, tb2))]:
        for k in ({}, kw):
            close(getattr(pf, name)(*args, **k), getattr(torch, name)(*targs, **k), dtype, f"{name} {k}", scale=s)
            close(getattr(args[0], name)(*args[1:], **k), getattr(targs[0], name)(*targs[1:], **k), dtype,
                  f"Tensor.{name} {k}", scale=s)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_trace_and_dist(device, rng, dtype):
    for shape in ((4, 4), (3, 5), (5, 2)):
        a, ta = pair(rng, shape, dtype)
        close(pf.trace(a), torch.trace(ta), dtype, f"trace {shape}")
        close(a.trace(), ta.trace(), dtype, f"Tensor.trace {shape}")
    m = np.full((3, 3), np.nan)
    np.fill_diagonal(m, [1.0, 2.0, 3.0])
    assert pf.trace(pf.tensor(m)).item() == 6.0
    raises(RuntimeError, lambda: pf.trace(pf.ones(3)), "expected a matrix")
    if dtype == "float32":
        a, ta = pair(rng, (2, 3), dtype)
        b, tb = pair(rng, (3,), dtype)
        for p in (2, 1, 3, math.inf, 0):
            close(pf.dist(a, b, p), torch.dist(ta, tb, p), dtype, f"dist p={p}")
            close(a.dist(b, p), ta.dist(tb, p), dtype, f"Tensor.dist p={p}")
        g, tg = grad_pair(rng, (2, 3))
        h, th = grad_pair(rng, (2, 3))
        check_grads(rng, pf.dist(g, h), torch.dist(tg, th), [g, h], [tg, th], "dist")


def test_add_products_ignore_input_when_beta_is_zero(device, rng):
    a, ta = pair(rng, (3, 4))
    b, tb = pair(rng, (4, 5))
    nan = pf.full((3, 5), float("nan"))
    close(pf.addmm(nan, a, b, beta=0), torch.addmm(torch.full((3, 5), float("nan")), ta, tb, beta=0),
          what="addmm beta=0")
    raises(RuntimeError, lambda: pf.addmm(pf.ones(2, 3, 5), a, b), r"\[2, 3, 5\]", r"\[3, 5\]")


def test_product_gradients(device, rng):
    a, ta = grad_pair(rng, (3, 4))
    b, tb = grad_pair(rng, (4, 5))
    c, tc = grad_pair(rng, (5,))
    check_grads(rng, pf.addmm(c, a, b, beta=0.5, alpha=2), torch.addmm(tc, ta, tb, beta=0.5, alpha=2),
                [a, b, c], [ta, tb, tc], "addmm")
    b1, tb1 = grad_pair(rng, (2, 3, 4))
    b2, tb2 = grad_pair(rng, (2, 4, 5))
    i, ti = grad_pair(rng, (3, 5))
    check_grads(rng, pf.addbmm(i, b1, b2, alpha=-1), torch.addbmm(ti, tb1, tb2, alpha=-1), [i, b1, b2],
                [ti, tb1, tb2], "addbmm")
    u, tu = grad_pair(rng, (4,))
    v, tv = grad_pair(rng, (5,))
    check_grads(rng, pf.outer(u, v), torch.outer(tu, tv), [u, v], [tu, tv], "outer")


def test_product_errors(device):
    f, d = pf.ones(2, 3), pf.ones(2, 3, dtype=pf.float64)
    raises(RuntimeError, lambda: pf.mm(f, f), r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)")
    raises(ValueError, lambda: pf.mm(f, f), "2x3")
    raises(RuntimeError, lambda: pf.mm(f, d.T), "same dtype", "float != double")
    raises(RuntimeError, lambda: pf.mm(pf.ones(2, 3, 1), f), "self must be a matrix")
    raises(RuntimeError, lambda: pf.bmm(pf.ones(2, 2, 3), pf.ones(3, 3, 3)), r"\[2, 3\] but got: \[3, 3\]")
    raises(RuntimeError, lambda: pf.bmm(f, f), "3D")
    raises(RuntimeError, lambda: pf.mv(f, pf.ones(4)), r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)")
    raises(RuntimeError, lambda: pf.dot(pf.ones(3), pf.ones(4)), r"expected tensor \[3\] and src \[4\]")
    raises(RuntimeError, lambda: pf.dot(f, pf.ones(3)), "1D tensors expected, but got 2D and 1D")
    raises(RuntimeError, lambda: pf.dot(pf.ones(3), pf.ones(3, dtype=pf.float64)), "Float and Double")
    raises(RuntimeError, lambda: pf.outer(f, pf.ones(3)), "Expected 1-D argument self, but got 2-D")
    raises(RuntimeError, lambda: pf.tensordot(f, f, dims=([1], [0])), "size 3 in dim 1", "size 2 in dim 0")
    raises(IndexError, lambda: pf.tensordot(pf.tensor(2.0), pf.ones(3), ([0], [0])), "tensor has no dimensions")
    raises(RuntimeError, lambda: pf.tensordot(f, f, ([0, 1], [0])), "same length, got 2 and 1")
    raises(RuntimeError, lambda: pf.tensordot(f, pf.ones(2, 2), ([0, 0], [0, 1])), "appears multiple times")
    raises(TypeError, lambda: pf.tensordot(f, f.double(), 1), "same dtype")


# ----------------------------------------------------------------- einsum, tensordot

EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]), ("ij->j", [(3, 4)]),
    ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]), ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("ijk,jl->ilk", [(2, 3, 4), (3, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 2)]), ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ("i...->...", [(3, 4, 5)]), ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]), ("ij,kj,ik->i", [(3, 4), (5, 4), (3, 5)]),
    ("bii->bi", [(2, 3, 3)]), ("iij->j", [(3, 3, 4)]), ("ij,jk->", [(3, 4), (4, 5)]), ("Ab,bA->A", [(3, 4), (4, 3)]),
    ("ij,j->i", [(3, 4), (1,)]), ("ij,jk->ik", [(0, 3), (3, 2)]), ("ij,jk->ik", [(2, 0), (0, 2)]),
    ("ij,jk->ik", [(2, 1), (3, 2)]), ("iii->i", [(3, 3, 3)]), ("i j , j k -> i k", [(3, 4), (4, 5)]), ("ijk", [(2, 3, 4)]), ("kji", [(2, 3, 4)]),
]


@pytest.mark.parametrize("equation,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum(device, rng, equation, shapes):
    pairs = [pair(rng, s, "float64") for s in shapes]
    close(pf.einsum(equation, *[p for p, _ in pairs]), torch.einsum(equation, *[t for _, t in pairs]), "float64",
          equation)
    close(pf.einsum(equation, [p for p, _ in pairs]), torch.einsum(equation, [t for _, t in pairs]), "float64",
          f"{equation} (operands as a list)")
    grads = [grad_pair(rng, s) for s in shapes]
    check_grads(rng, pf.einsum(equation, *[p for p, _ in grads]), torch.einsum(equation, *[t for _, t in grads]),
                [p for p, _ in grads], [t for _, t in grads], f"einsum {equation}")


def test_einsum_dtypes_and_nan_off_diagonal(device, rng):
    a, ta = pair(rng, (3, 4), "int32")
    b, tb = pair(rng, (4, 2), "int32")
    close(pf.einsum("ij,jk->ik", a, b), torch.einsum("ij,jk->ik", ta, tb), "int32", "int32 product")
    close(pf.einsum("ij->i", a), torch.einsum("ij->i", ta), "int32", "an int32 sum is int64, as torch")
    m = np.full((3, 3), np.nan)
    np.fill_diagonal(m, [1.0, 2.0, 3.0])
    assert pf.einsum("ii->i", pf.tensor(m)).tolist() == [1.0, 2.0, 3.0]


def test_einsum_errors(device):
    x = pf.ones(2, 3)
    raises(RuntimeError, lambda: pf.einsum("ijk->i", x), r"number of subscripts in the equation \(3\)",
           r"dimensions \(2\) for operand 0")
    raises(ValueError, lambda: pf.einsum("ij,jk->ik", x), "fewer operands")
    raises(ValueError, lambda: pf.einsum("ij->ii", x), "output subscript i appears more than once")
    raises(ValueError, lambda: pf.einsum("ij->k", x), "output subscript k does not appear")
    raises(RuntimeError, lambda: pf.einsum("ij,jk->ik", x, pf.ones(4, 2)), "sizes 3 and 4")
    raises(ValueError, lambda: pf.einsum("i1->i", x), "subscripts must be in")
    raises(pf.NotSupportedError, lambda: pf.einsum(x, [0, 1]), "sublist format")


def test_tensordot(device, rng):
    a, ta = pair(rng, (2, 3, 4), "float64")
    b, tb = pair(rng, (3, 4, 5), "float64")
    for dims in (2, 0, ([1, 2], [0, 1]), ([2, 1], [1, 0]), ([1], [0])):
        close(pf.tensordot(a, b, dims), torch.tensordot(ta, tb, dims), "float64", f"tensordot dims={dims}")
    ga, gta = grad_pair(rng, (2, 3, 4))
    gb, gtb = grad_pair(rng, (3, 4, 5))
    check_grads(rng, pf.tensordot(ga, gb), torch.tensordot(gta, gtb), [ga, gb], [gta, gtb], "tensordot")


# ----------------------------------------------------------------- pf.linalg


def test_linalg_products(device, rng):
    a, ta = pair(rng, (2, 3, 4), "float64")
    b, tb = pair(rng, (4, 5), "float64")
    close(pf.linalg.matmul(a, b), torch.linalg.matmul(ta, tb), "float64", "linalg.matmul")
    x, tx = pair(rng, (2, 3, 4), "float64")
    y, ty = pair(rng, (3, 4), "float64")
    close(pf.linalg.vecdot(x, y), torch.linalg.vecdot(tx, ty), "float64", "vecdot")
    close(pf.linalg.vecdot(x, x, dim=1), torch.linalg.vecdot(tx, tx, dim=1), "float64", "vecdot dim=1")
    m = [pair(rng, s, "float64") for s in [(4,), (4, 3), (3, 5), (5,)]]
    close(pf.linalg.multi_dot([p for p, _ in m]), torch.linalg.multi_dot([t for _, t in m]), "float64", "multi_dot")
    sq, tsq = pair(rng, (2, 3, 3), "float64", low=-1, high=1)
    for n in (0, 1, 2, 5):
        close(pf.linalg.matrix_power(sq, n), torch.linalg.matrix_power(tsq, n), "float64", f"matrix_power {n}")
        close(sq.matrix_power(n), tsq.matrix_power(n), "float64", f"Tensor.matrix_power {n}")


@pytest.mark.parametrize("name", ["eig", "eigvals", "ldl_factor", "householder_product"])
def test_linalg_decompositions_are_not_supported(device, name):
    err = raises(pf.NotSupportedError, lambda: getattr(pf.linalg, name)(pf.eye(3)), ".numpy()")
    assert isinstance(err, RuntimeError)
    assert re.search(r"(numpy|scipy)\.linalg\.", str(err))
    if name.startswith("eig"):
        assert "complex" in str(err) and "eigh" in str(err)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matrix_exp_matches_torch(device, rng, dtype):
    """Scales that need no squaring and many, a batch sharing one scaling, the Tensor method and pf.matrix_exp,
    empty matrices, and the gradient (through the matrix products)."""
    tol = {"float32": 1e-5, "float64": 1e-12}[dtype]
    for shape, scale in [((4, 4), 0.1), ((3, 5, 5), 3.0), ((2, 2), 30.0), ((1, 1), 2.0)]:
        p, t = pair(rng, shape, dtype, low=-scale, high=scale)
        want = torch.linalg.matrix_exp(t)
        for got in (pf.linalg.matrix_exp(p), pf.matrix_exp(p), p.matrix_exp()):
            assert got.dtype == p.dtype and got.device == p.device
            np.testing.assert_allclose(got.to("cpu").detach().numpy(), want.detach().numpy(), rtol=tol * 10, atol=tol * float(want.abs().max()))
    assert pf.linalg.matrix_exp(pf.zeros(3, 0, 0)).shape == (3, 0, 0)
    x, tx = pair(rng, (2, 3, 3), "float64", low=-1, high=1)
    x.requires_grad_(True), tx.requires_grad_(True)
    up = rng.standard_normal((2, 3, 3))
    (pf.linalg.matrix_exp(x) * pf.tensor(up, device=x.device)).sum().backward()
    (torch.linalg.matrix_exp(tx) * torch.tensor(up)).sum().backward()
    close(x.grad, tx.grad, "float64", "matrix_exp gradient")
    raises(RuntimeError, lambda: pf.linalg.matrix_exp(pf.ones(2, 3)), "square matrices")
    raises(RuntimeError, lambda: pf.linalg.matrix_exp(pf.ones(2, 2, dtype=pf.int64)), "floating point")


def test_tensorinv_and_tensorsolve_match_torch(rng):
    a, ta = pair(rng, (2, 3, 6), "float64", low=-1, high=1)
    close(pf.linalg.tensorinv(a, ind=2), torch.linalg.tensorinv(ta, ind=2), "float64", "tensorinv")
    b, tb = pair(rng, (2, 3), "float64", low=-1, high=1)
    close(pf.linalg.tensorsolve(a, b), torch.linalg.tensorsolve(ta, tb), "float64", "tensorsolve")
    a2, ta2 = pair(rng, (6, 2, 3), "float64", low=-1, high=1)
    close(pf.linalg.tensorsolve(a2, b, dims=(0,)), torch.linalg.tensorsolve(ta2, tb, dims=(0,)), "float64",
          "tensorsolve dims")
    raises(RuntimeError, lambda: pf.linalg.tensorinv(pf.ones(2, 3, 4), ind=1), re.escape("prod(self.shape[ind:])"))
    raises(RuntimeError, lambda: pf.linalg.tensorsolve(pf.ones(2, 3, 6), pf.ones(2, 4)),
           re.escape("prod(self.shape[other.ndim:])"))
