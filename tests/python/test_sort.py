"""Sorting and selection beyond the OpInfo registry (opinfo_sort.py): sort's
forms and named tuples, argsort, msort, topk, kthvalue, median, unique,
unique_consecutive, nonzero, where(condition) and argwhere against PyTorch
(CPU) on fresh random inputs with ties, NaNs, non-contiguous views, empty and
0-d tensors, on every dim; gradients of the selected values; the errors."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import ALL_DTYPES, FLOAT_DTYPES, PF_DTYPE, TORCH_DTYPE, assert_matches, make_values, pf_to_numpy

NONBOOL = [d for d in ALL_DTYPES if d != "bool"]
# Rows of every length class of the GPU kernel: one small block, a 2048-element tile, several tiles.
SHAPES = [(7,), (3, 4, 5), (2, 300), (2, 3000), (0, 3), (2, 0, 4), ()]


def values(rng, shape, dtype, nan=True, ties=True):
    """Random values with duplicates (ties=True) and, for floats, NaNs (nan=True)."""
    v = make_values(rng, shape, dtype, low=-4, high=4, ilow=-3, ihigh=3, discrete=ties)
    if not ties and dtype in ("float16", "bfloat16"):
        v = _distinct(rng, shape, dtype)
    if nan and dtype in FLOAT_DTYPES and v.size > 1:
        v.reshape(-1)[rng.integers(0, v.size, size=max(1, v.size // 6))] = np.nan
    return v


def _distinct(rng, shape, dtype):
    """Distinct values, exact in dtype (quarters of small integers)."""
    n = int(np.prod(shape)) if shape else 1
    v = (rng.permutation(n) - n // 2) / 4
    return v.reshape(shape).astype(np.float32 if dtype == "bfloat16" else dtype)


def pair(rng, shape, dtype, transposed=False, **kw):
    """(pyflame, torch) tensors of the same values; transposed: the pyflame one is a non-contiguous view."""
    v = values(rng, shape, dtype, **kw)
    t = torch.from_numpy(np.array(v, copy=True)).to(TORCH_DTYPE[dtype])
    if transposed and v.ndim >= 2:
        p = pf.tensor(np.ascontiguousarray(np.swapaxes(v, 0, -1))).to(PF_DTYPE[dtype]).transpose(0, -1)
        assert not p.is_contiguous() or v.size == 0 or min(v.shape) == 1
    elif v.ndim == 0:
        p = pf.tensor(v.item()).to(PF_DTYPE[dtype])
    else:
        p = pf.tensor(v).to(PF_DTYPE[dtype])
    return p, t


def same(actual, expected, what):
    assert_matches(actual, expected, 0, 0, what=what)


def dims_of(shape):
    return list(range(-max(len(shape), 1), max(len(shape), 1)))


def check_indices_select(x, t, dim, values, indices, what):
    """indices point at entries equal to values (ties may pick any of them, as torch leaves it open)."""
    tv = pf_to_numpy(values)
    ti = torch.from_numpy(pf_to_numpy(indices))
    assert indices.dtype == pf.int64, what
    tx = t if t.dim() else t.reshape(1)
    ti = ti if t.dim() else ti.reshape(1)
    picked = torch.gather(tx.to(torch.float64), dim, ti).detach().numpy()
    np.testing.assert_array_equal(picked.reshape(tv.shape), tv.astype(np.float64), err_msg=what)


def check_selection(name, got, want, x, t, dim, keepdim, what):
    """A (values, indices) named tuple of pf.<name> against torch's: its type, the values, the indices' shape,
    and indices that select the values from x (ties may pick any)."""
    assert type(got).__name__ == name, what
    same(got.values, want.values, what)
    assert tuple(got.indices.shape) == tuple(want.indices.shape), what
    # without keepdim the reduced dim is put back, so that the indices gather along it
    gv = got.values if keepdim or not t.dim() else got.values.unsqueeze(dim)
    gi = got.indices if keepdim or not t.dim() else got.indices.unsqueeze(dim)
    check_indices_select(x, t, dim if t.dim() else 0, gv, gi, what)


# ----------------------------------------------------------------- sort, argsort, msort


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_sort_matches_torch(dtype, device, rng):
    for shape in SHAPES:
        for transposed in (False, True):
            x, t = pair(rng, shape, dtype, transposed)
            for dim in dims_of(shape):
                for descending in (False, True):
                    want = torch.sort(t, dim=dim, descending=descending, stable=True)
                    for stable in (False, True):  # every sort is stable: the same indices as torch's stable one
                        got = pf.sort(x, dim, descending, stable=stable)
                        what = f"sort {shape} T={transposed} dim={dim} desc={descending} stable={stable} [{dtype}]"
                        assert isinstance(got, tuple) and type(got).__name__ == "sort", what
                        same(got.values, want.values, what + " values")
                        same(got.indices, want.indices, what + " indices")
                    same(pf.argsort(x, dim, descending), want.indices, f"argsort {shape} dim={dim} [{dtype}]")


def test_sort_forms_and_methods(device, rng):
    x, t = pair(rng, (4, 6), "float32")
    v, i = x.sort()  # unpacks as a tuple
    same(v, torch.sort(t, stable=True).values, "x.sort() values")
    same(i, torch.sort(t, stable=True).indices, "x.sort() indices")
    same(x.sort(0, True).indices, torch.sort(t, dim=0, descending=True, stable=True).indices, "x.sort(0, True)")
    same(x.sort(dim=0, descending=True, stable=True)[0], torch.sort(t, dim=0, descending=True).values, "keywords")
    same(x.argsort(dim=0, descending=True), torch.argsort(t, dim=0, descending=True, stable=True), "x.argsort")
    same(pf.argsort(x, stable=True), torch.argsort(t, stable=True), "argsort(stable=True)")
    same(pf.msort(x), torch.msort(t), "msort")
    same(x.msort(), torch.msort(t), "x.msort()")
    with pytest.raises(TypeError):
        pf.sort(x, 0, False, True)  # stable is keyword-only, as in torch


def test_sort_nan_and_signed_zero(device):
    data = [3.0, float("nan"), -0.0, 1.0, float("nan"), 0.0, float("-inf"), float("inf"), -0.0]
    t = torch.tensor(data, dtype=torch.float64)
    x = pf.tensor(data, dtype=pf.float64)
    for descending in (False, True):
        want = torch.sort(t, descending=descending, stable=True)
        got = pf.sort(x, descending=descending)
        same(got.values, want.values, f"desc={descending}")
        same(got.indices, want.indices, f"desc={descending}")
        assert np.array_equal(np.signbit(pf_to_numpy(got.values)), np.signbit(want.values.detach().numpy()))


@pytest.mark.parametrize("n", [1, 2, 255, 256, 257, 2047, 2048, 2049, 4096, 5000])
def test_sort_row_lengths(n, device, rng):
    """Every padding case around the GPU's tile sizes, both directions, many ties."""
    for dtype in ("int16", "float32"):
        x, t = pair(rng, (3, n), dtype)
        for descending in (False, True):
            want = torch.sort(t, descending=descending, stable=True)
            got = pf.sort(x, descending=descending)
            same(got.values, want.values, f"n={n} {dtype} desc={descending}")
            same(got.indices, want.indices, f"n={n} {dtype} desc={descending}")


# ----------------------------------------------------------------- topk, kthvalue, median


@pytest.mark.parametrize("dtype", NONBOOL)
def test_topk(dtype, device, rng):
    for shape in [(7,), (3, 4, 5), (2, 3000), (0, 3), ()]:
        for transposed in (False, True):
            x, t = pair(rng, shape, dtype, transposed)
            for dim in dims_of(shape):
                size = t.shape[dim] if t.dim() else 1
                for k in sorted({0, min(1, size), size // 2, size}):
                    for largest in (True, False):
                        what = f"topk {shape} T={transposed} k={k} dim={dim} largest={largest} [{dtype}]"
                        want = torch.topk(t, k, dim, largest)
                        got = pf.topk(x, k, dim, largest)
                        check_selection("topk", got, want, x, t, dim, True, what)  # topk keeps its dim


def test_topk_distinct_indices_and_method(device, rng):
    x, t = pair(rng, (5, 40), "float64", nan=False, ties=False)
    for largest in (True, False):
        want = torch.topk(t, 7, largest=largest)
        got = x.topk(7, largest=largest, sorted=True)
        same(got.values, want.values, "topk distinct")
        same(got.indices, want.indices, "topk distinct")
    same(x.topk(3, dim=0).indices, torch.topk(t, 3, dim=0).indices, "topk dim=0")
    same(pf.topk(x, 4, sorted=False).values, torch.topk(t, 4).values, "sorted=False gives the sorted result")


@pytest.mark.parametrize("dtype", NONBOOL)
def test_kthvalue(dtype, device, rng):
    for shape in [(7,), (3, 4, 5), (2, 300), ()]:
        for transposed in (False, True):
            x, t = pair(rng, shape, dtype, transposed)
            for dim in dims_of(shape):
                size = t.shape[dim] if t.dim() else 1
                for k in sorted({1, (size + 1) // 2, size}):
                    for keepdim in (False, True):
                        what = f"kthvalue {shape} T={transposed} k={k} dim={dim} keepdim={keepdim} [{dtype}]"
                        want = torch.kthvalue(t, k, dim, keepdim)
                        got = pf.kthvalue(x, k, dim, keepdim)
                        check_selection("kthvalue", got, want, x, t, dim, keepdim, what)
    x, t = pair(rng, (4, 9), "float64", nan=False, ties=False)
    same(x.kthvalue(3, 0).indices, torch.kthvalue(t, 3, 0).indices, "kthvalue distinct indices")


@pytest.mark.parametrize("dtype", NONBOOL)
def test_median(dtype, device, rng):
    for shape in [(7,), (8,), (3, 4, 5), (2, 301), (1, 6), ()]:
        for transposed in (False, True):
            x, t = pair(rng, shape, dtype, transposed)
            same(pf.median(x), torch.median(t), f"median {shape} T={transposed} [{dtype}]")
            same(x.median(), torch.median(t), f"x.median() {shape} [{dtype}]")
            for dim in dims_of(shape):
                for keepdim in (False, True):
                    what = f"median {shape} T={transposed} dim={dim} keepdim={keepdim} [{dtype}]"
                    want = torch.median(t, dim, keepdim)
                    got = pf.median(x, dim, keepdim=keepdim)
                    check_selection("median", got, want, x, t, dim, keepdim, what)


def test_median_nan_takes_the_first_nan(device):
    data = [[1.0, float("nan"), 0.0, float("nan")], [2.0, 5.0, 1.0, 3.0], [float("nan")] * 4]
    t = torch.tensor(data)
    x = pf.tensor(data)
    got, want = pf.median(x, 1), torch.median(t, 1)
    same(got.values, want.values, "median NaN values")
    same(got.indices, want.indices, "median NaN indices: the first NaN")
    same(pf.median(x), torch.median(t), "global median with NaN")
    same(pf.median(pf.tensor([], dtype=pf.float32)), torch.median(torch.tensor([])), "empty median is NaN")
    same(pf.median(x[1]), torch.median(t[1]), "lower median of an even count")


def test_median_distinct_indices(device, rng):
    x, t = pair(rng, (6, 11), "float64", nan=False, ties=False)
    for dim in (0, 1):
        same(pf.median(x, dim).indices, torch.median(t, dim).indices, f"median indices dim={dim}")
        same(pf.kthvalue(x, 2, dim).indices, torch.kthvalue(t, 2, dim).indices, f"kthvalue indices dim={dim}")


# ----------------------------------------------------------------- unique, unique_consecutive


def _nan_slots_alike(got, want, t):
    """unique's inverse with torch's slots where the input is NaN (any NaN slot fits any NaN)."""
    if not t.dtype.is_floating_point:
        return got, want
    g = torch.from_numpy(pf_to_numpy(got))
    nan = torch.isnan(t.to(torch.float64))
    assert torch.equal(torch.sort(g[nan]).values, torch.sort(want[nan]).values), "NaN slots differ"
    return pf.tensor(torch.where(nan, want, g).detach().numpy()), want


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_unique(dtype, device, rng):
    for shape in [(7,), (3, 4, 5), (2, 3000), (0, 3), ()]:
        for transposed in (False, True):
            x, t = pair(rng, shape, dtype, transposed)
            what = f"unique {shape} T={transposed} [{dtype}]"
            same(pf.unique(x), torch.unique(t), what)
            same(x.unique(), torch.unique(t), what + " method")
            for inv in (False, True):
                for counts in (False, True):
                    got = pf.unique(x, return_inverse=inv, return_counts=counts)
                    want = torch.unique(t, return_inverse=inv, return_counts=counts)
                    if not (inv or counts):
                        got, want = (got,), (want,)
                    assert len(got) == len(want), what
                    for i, (g, w) in enumerate(zip(got, want)):
                        if inv and i == 1:  # NaNs are distinct: which NaN takes which slot is torch's accident
                            g, w = _nan_slots_alike(g, w, t)
                        same(g, w, f"{what} inverse={inv} counts={counts} output {i}")
            vals, inverse = pf.unique(x, sorted=False, return_inverse=True)
            np.testing.assert_array_equal(pf_to_numpy(vals[inverse]), pf_to_numpy(x), err_msg=what)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_unique_consecutive(dtype, device, rng):
    for shape in [(9,), (3, 4, 5), (0,), ()]:
        x, t = pair(rng, shape, dtype, nan=False)
        got = pf.unique_consecutive(x, return_inverse=True, return_counts=True)
        want = torch.unique_consecutive(t, return_inverse=True, return_counts=True)
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"unique_consecutive {shape} [{dtype}] output {i}")
        same(x.unique_consecutive(), torch.unique_consecutive(t), f"unique_consecutive {shape} [{dtype}]")


@pytest.mark.parametrize("dtype", ["int64", "float32", "bool"])
def test_unique_slices_as_torch(dtype, device, rng):
    """unique(dim=) sorts the slices lexicographically; unique_consecutive(dim=) merges equal neighbours.
    Few distinct values, so that slices repeat, first in runs and then scattered."""
    for shape in [(6, 3), (4, 5, 2), (7,)]:
        values = rng.integers(0, 2, shape)
        values = np.repeat(values, 2, axis=0) if len(shape) > 1 else values
        t = torch.from_numpy(values).to(getattr(torch, dtype))
        x = pf.tensor(values, device=device).to(getattr(pf, dtype))
        for dim in dims_of(values.shape):
            for fn, kw in (("unique", dict(sorted=True)), ("unique_consecutive", {})):
                got = getattr(pf, fn)(x, return_inverse=True, return_counts=True, dim=dim, **kw)
                want = getattr(torch, fn)(t, return_inverse=True, return_counts=True, dim=dim, **kw)
                for i, (g, w) in enumerate(zip(got, want)):
                    same(g, w, f"{fn} {values.shape} dim {dim} [{dtype}] output {i}")
            same(x.unique(dim=dim), torch.unique(t, dim=dim), f"Tensor.unique {values.shape} dim {dim}")
    with pytest.raises(IndexError, match="no dimensions"):
        pf.unique(pf.tensor(1, device=device), dim=0)
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        pf.unique(pf.zeros(3, 0, device=device), dim=0)


# ----------------------------------------------------------------- nonzero, where, argwhere


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_nonzero(dtype, device, rng):
    for shape in [(7,), (3, 4, 5), (2, 3, 1, 4), (0, 3), (1,), ()]:
        for transposed in (False, True):
            v = make_values(rng, shape, dtype, low=-1, high=1, ilow=-1, ihigh=1, discrete=True)
            if dtype in FLOAT_DTYPES and v.size > 2:
                v.reshape(-1)[0] = np.nan
            t = torch.from_numpy(np.array(v, copy=True)).to(TORCH_DTYPE[dtype])
            if transposed and v.ndim >= 2:
                x = pf.tensor(np.ascontiguousarray(np.swapaxes(v, 0, -1))).to(PF_DTYPE[dtype]).transpose(0, -1)
            else:
                x = pf.tensor(v if v.ndim else v.item()).to(PF_DTYPE[dtype])
            what = f"nonzero {shape} T={transposed} [{dtype}]"
            same(pf.nonzero(x), torch.nonzero(t), what)
            same(x.nonzero(), torch.nonzero(t), what)
            same(pf.argwhere(x), torch.argwhere(t), what)
            same(x.argwhere(), torch.argwhere(t), what)
            got, want = pf.nonzero(x, as_tuple=True), torch.nonzero(t, as_tuple=True)
            assert isinstance(got, tuple) and len(got) == len(want), what
            for g, w in zip(got, want):
                same(g, w, what + " as_tuple")
            got = pf.where(x != 0) if dtype != "bool" else pf.where(x)
            want = torch.where(t != 0) if dtype != "bool" else torch.where(t)
            assert len(got) == len(want), what
            for g, w in zip(got, want):
                same(g, w, what + " where(condition)")


def test_where_forms(device, rng):
    x, t = pair(rng, (3, 4), "float32", nan=False)
    same(pf.where(x > 0, x, 0.0), torch.where(t > 0, t, 0.0), "where(c, x, scalar)")
    same(pf.where(x > 0, x, -x), torch.where(t > 0, t, -t), "where(c, x, y)")
    with pytest.raises(TypeError):
        pf.where(x > 0, x)


# ----------------------------------------------------------------- gradients


def _grad_pair(rng, shape):
    v = _distinct(rng, shape, "float64")
    x = pf.tensor(v, dtype=pf.float64, requires_grad=True)
    t = torch.tensor(v, dtype=torch.float64, requires_grad=True)
    return x, t


@pytest.mark.parametrize("name", ["sort", "topk", "kthvalue", "median_dim", "median", "msort"])
def test_gradients_match_torch(name, device, rng):
    calls = {
        "sort": lambda m, a: m.sort(a, 1, descending=True).values,
        "topk": lambda m, a: m.topk(a, 3, 0).values,
        "kthvalue": lambda m, a: m.kthvalue(a, 2, 1, True).values,
        "median_dim": lambda m, a: m.median(a, 0).values,
        "median": lambda m, a: m.median(a),
        "msort": lambda m, a: m.msort(a),
    }
    for shape in [(5, 7), (4, 300)]:
        x, t = _grad_pair(rng, shape)
        got, want = calls[name](pf, x), calls[name](torch, t)
        upstream = rng.uniform(-1, 1, size=tuple(want.shape))
        want.backward(torch.from_numpy(upstream))
        got.backward(pf.tensor(upstream, dtype=pf.float64))
        np.testing.assert_allclose(pf_to_numpy(x.grad), t.grad.detach().numpy(), rtol=1e-12, atol=0, err_msg=f"{name} {shape}")


def test_indices_carry_no_gradient(device, rng):
    x, _ = _grad_pair(rng, (3, 4))
    values, indices = pf.sort(x)
    assert values.requires_grad and not indices.requires_grad
    assert not pf.topk(x, 2).indices.requires_grad
    assert not pf.nonzero(x).requires_grad
    assert not pf.argsort(x).requires_grad


# ----------------------------------------------------------------- errors


def test_errors(device):
    x = pf.tensor([[3.0, 1.0, 2.0]])
    with pytest.raises(IndexError):
        pf.sort(x, 2)
    with pytest.raises(RuntimeError):  # torch: RuntimeError "selected index k out of range"
        pf.topk(x, 4)
    with pytest.raises(IndexError):
        pf.topk(x, -1)
    with pytest.raises(RuntimeError):
        pf.kthvalue(x, 0)
    with pytest.raises(IndexError):
        pf.kthvalue(x, 4)
    with pytest.raises(IndexError):
        pf.median(pf.zeros(0, 3), 0)
    with pytest.raises(TypeError):
        pf.median(pf.tensor([True, False]))
    with pytest.raises(TypeError):
        pf.topk(pf.tensor([True, False]), 1)
    with pytest.raises(TypeError):
        pf.sort(x, out=(x, x))
    assert x.tolist() == [[3.0, 1.0, 2.0]]
