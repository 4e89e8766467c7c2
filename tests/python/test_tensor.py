"""The Tensor class: creation, views, NumPy interop, conversions, operators, promotion."""

import operator

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import ALL_DTYPES, PF_DTYPE, TORCH_DTYPE, TORCH_TO_NAME, assert_matches, pf_dtype_name

NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


def _shares(a, b):
    """Two CPU tensors / arrays whose memory overlaps (by writing)."""
    return np.shares_memory(np.asarray(a), np.asarray(b))


# ----------------------------------------------------------------- pf.tensor


@pytest.mark.parametrize(
    "data,dtype",
    [
        ([1.0, 2.5], pf.float32),
        ([1, 2, 3], pf.int64),
        ([True, False], pf.bool),
        ([1, 2.5], pf.float32),
        ([[1, 2], [3, 4]], pf.int64),
        ([[1.5], [2.0], [3.0]], pf.float32),
    ],
)
def test_tensor_from_lists(data, dtype):
    t = pf.tensor(data)
    assert t.dtype == dtype
    expected = torch.tensor(data)
    assert t.shape == tuple(expected.shape)
    assert t.tolist() == expected.tolist()


@pytest.mark.parametrize("value,dtype", [(2.5, pf.float32), (3, pf.int64), (True, pf.bool), (-7, pf.int64)])
def test_tensor_from_python_scalar_is_0d(value, dtype):
    t = pf.tensor(value)
    assert t.shape == (), f"pf.tensor({value!r}).shape == {t.shape}, torch gives ()"
    assert t.ndim == 0 and t.dtype == dtype
    assert t.item() == value
    # a 0-d tensor does not take part in promotion within its category
    if dtype == pf.int64:
        assert (pf.ones(2, dtype=pf.int8) + pf.tensor(value)).dtype == pf.int8


@pytest.mark.parametrize("npdt", NP_DTYPES, ids=lambda d: np.dtype(d).name)
def test_tensor_from_numpy_keeps_dtype(npdt):
    arr = (np.arange(6).reshape(2, 3) % 3).astype(npdt)
    t = pf.tensor(arr)
    assert pf_dtype_name(t.dtype) == np.dtype(npdt).name
    assert t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), arr)
    # a copy: changing the array afterwards does not change the tensor
    orig = arr.copy()
    arr[0, 0] = 1
    arr[1, 2] = 0
    np.testing.assert_array_equal(t.numpy(), orig)


@pytest.mark.parametrize("npdt", [np.float64, np.float16, np.int32, np.int8], ids=lambda d: np.dtype(d).name)
def test_tensor_from_numpy_0d_and_scalar(npdt):
    for value in (np.array(3, dtype=npdt), npdt(3)):
        t = pf.tensor(value)
        assert t.shape == (), f"pf.tensor({value!r}).shape == {t.shape}, torch gives ()"
        assert pf_dtype_name(t.dtype) == np.dtype(npdt).name
        assert t.item() == 3


def test_tensor_from_noncontiguous_numpy_and_dtype_arg():
    arr = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2].T
    t = pf.tensor(arr)
    np.testing.assert_array_equal(t.numpy(), arr)
    h = pf.tensor([1.5, 2.25], dtype=pf.float16)
    assert h.dtype == pf.float16 and h.tolist() == [1.5, 2.25]
    assert pf.tensor([1, 2], dtype="float64").dtype == pf.float64
    c = pf.tensor(h)  # from a Tensor: a copy
    c[0] = 9.0
    assert h[0].item() == 1.5


# ----------------------------------------------------------------- from_numpy / numpy()


def test_from_numpy_of_read_only_arrays_copies_with_a_warning():
    ro = np.arange(6.0).reshape(2, 3)
    ro.setflags(write=False)
    for arr in (ro, np.broadcast_to(np.arange(3.0), (2, 3))):  # broadcast: read-only, stride 0
        with pytest.warns(UserWarning, match="read-only"):
            t = pf.from_numpy(arr)
        np.testing.assert_array_equal(t.numpy(), torch.from_numpy(arr.copy()).numpy())
        t[0, 0] = 9.0  # the tensor is writable; the array is untouched
        assert arr[0, 0] != 9.0


def test_from_numpy_refuses_what_it_cannot_share():
    with pytest.raises(ValueError, match="byte order"):
        pf.from_numpy(np.arange(3, dtype=">f4"))
    with pytest.raises(TypeError, match="NumPy array.*pf.tensor"):
        pf.from_numpy([1, 2])
    with pytest.raises(TypeError, match="complex128"):
        pf.from_numpy(np.zeros(2, dtype=np.complex128))


def test_from_numpy_is_zero_copy():
    arr = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = pf.from_numpy(arr)
    assert t.dtype == pf.float64 and t.shape == (2, 3)
    arr[0, 1] = 42.0
    assert t[0, 1].item() == 42.0
    t[1, 2] = -1.0
    assert arr[1, 2] == -1.0
    # strided arrays are viewed too
    s = np.arange(12, dtype=np.int32).reshape(3, 4)[:, ::2]
    ts = pf.from_numpy(s)
    np.testing.assert_array_equal(ts.numpy(), s)
    s[2, 1] = 100
    assert ts[2, 1].item() == 100
    # the tensor keeps the memory alive
    del arr
    assert t.tolist() == [[0.0, 42.0, 2.0], [3.0, 4.0, -1.0]]


def test_numpy_is_zero_copy_for_contiguous_cpu_tensors():
    t = pf.zeros(2, 3)
    a = t.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 3)
    assert a.__array_interface__["data"][0] == t.data_ptr()
    a[0, 0] = 5.0
    assert t[0, 0].item() == 5.0
    t[1, 1] = 7.0
    assert a[1, 1] == 7.0


def test_numpy_of_views_and_array_protocol():
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = pf.tensor(base)
    for view, ref in ((t.transpose(0, 2), base.transpose(2, 1, 0)), (t[:, 1::2, ::3], base[:, 1::2, ::3]),
                      (t.permute(1, 2, 0), base.transpose(1, 2, 0))):
        np.testing.assert_array_equal(view.numpy(), ref)
        np.testing.assert_array_equal(np.asarray(view), ref)
    a64 = np.asarray(t, dtype=np.float64)
    assert a64.dtype == np.float64
    np.testing.assert_array_equal(a64, base)
    np.testing.assert_array_equal(np.array(pf.tensor([[1, 2]])), [[1, 2]])


def test_bfloat16_to_numpy():
    b = pf.tensor([1.0, 2.5, -3.0]).to(pf.bfloat16)
    with pytest.raises(TypeError):
        b.numpy()
    assert b.to(pf.float32).numpy().tolist() == [1.0, 2.5, -3.0]
    assert b.tolist() == [1.0, 2.5, -3.0]


# ----------------------------------------------------------------- factories


@pytest.mark.parametrize("fn,tfn", [(pf.zeros, torch.zeros), (pf.ones, torch.ones), (pf.empty, torch.empty)])
def test_zeros_ones_empty(fn, tfn):
    for shape_args in ((2, 3), ((2, 3),), ([2, 3],), (4,), ((),), ((0, 3),)):
        t = fn(*shape_args)
        e = tfn(*shape_args)
        assert t.shape == tuple(e.shape) and t.dtype == pf.float32, shape_args
        if fn is not pf.empty:
            np.testing.assert_array_equal(t.numpy(), e.numpy())
    for dt in ALL_DTYPES:
        t = fn(2, 2, dtype=PF_DTYPE[dt])
        assert t.dtype == PF_DTYPE[dt]
        if fn is not pf.empty:
            assert t.to(pf.float64).tolist() == [[float(fn is pf.ones)] * 2] * 2


def test_full():
    for value, dtype in ((7, pf.int64), (2.5, pf.float32), (True, pf.bool)):
        t = pf.full((2, 3), value)
        e = torch.full((2, 3), value)
        assert t.dtype == PF_DTYPE[TORCH_TO_NAME[e.dtype]] == dtype
        assert t.tolist() == e.tolist()
    t = pf.full((3,), 4, dtype=pf.float16)
    assert t.dtype == pf.float16 and t.tolist() == [4.0] * 3
    assert pf.full(5, 1.5).shape == (5,)


def test_like_factories():
    x = pf.tensor([[1, 2, 3], [4, 5, 6]], dtype=pf.int16)
    for fn, v in ((pf.zeros_like, 0), (pf.ones_like, 1)):
        t = fn(x)
        assert t.shape == x.shape and t.dtype == pf.int16 and t.tolist() == [[v] * 3] * 2
    f = pf.full_like(x, 9)
    assert f.dtype == pf.int16 and f.tolist() == [[9] * 3] * 2
    g = pf.full_like(x, 2.5, dtype=pf.float64)
    assert g.dtype == pf.float64 and g.tolist() == [[2.5] * 3] * 2
    z = pf.zeros_like(x.T)
    assert z.shape == (3, 2)
    o = pf.ones_like(x, dtype=pf.bool)
    assert o.dtype == pf.bool and o.tolist() == [[True] * 3] * 2


@pytest.mark.parametrize(
    "args,kwargs",
    [((5,), {}), ((2, 9), {}), ((0, 10, 3), {}), ((1, 2.5, 0.5), {}), ((5,), {"dtype": pf.float64}),
     ((-3, 3), {}), ((10, 0, -2), {}), ((0.0, 1.0, 0.1), {})],
)
def test_arange(args, kwargs):
    t = pf.arange(*args, **kwargs)
    tkw = {"dtype": TORCH_DTYPE[pf_dtype_name(kwargs["dtype"])]} if kwargs else {}
    e = torch.arange(*args, **tkw)
    assert_matches(t, e, 1e-6, 1e-6, what=f"arange{args}")


@pytest.mark.parametrize("args", [(0, 1, 5), (-2, 3, 11), (1, 1, 1), (0, 1, 1), (0, 10, 2), (5, 0, 4), (0, 1, 0)])
def test_linspace(args):
    assert_matches(pf.linspace(*args), torch.linspace(*args), 1e-6, 1e-6, what=f"linspace{args}")
    assert_matches(pf.linspace(*args, dtype=pf.float64), torch.linspace(*args, dtype=torch.float64), 1e-12, 1e-12,
                   what=f"linspace{args} float64")


def test_eye():
    assert_matches(pf.eye(3), torch.eye(3), 0, 0, what="eye(3)")
    assert_matches(pf.eye(2, 4), torch.eye(2, 4), 0, 0, what="eye(2, 4)")
    assert_matches(pf.eye(4, 2, dtype=pf.int32), torch.eye(4, 2, dtype=torch.int32), 0, 0, what="eye(4, 2)")
    assert pf.eye(0).shape == (0, 0)


@pytest.mark.parametrize("fn", [pf.randn, pf.rand])
def test_random_shapes_and_dtypes(fn):
    assert fn(2, 3).shape == (2, 3)
    assert fn((2, 3)).shape == (2, 3)
    assert fn([4]).shape == (4,)
    assert fn(2, 3).dtype == pf.float32
    assert fn(3, dtype=pf.float64).dtype == pf.float64
    assert fn(0, 2).shape == (0, 2)


def test_randint():
    t = pf.randint(0, 10, (3, 4))
    assert t.shape == (3, 4) and t.dtype == pf.int64
    v = pf.randint(-5, 5, (10000,)).numpy()
    assert v.min() >= -5 and v.max() < 5 and len(np.unique(v)) == 10
    t2 = pf.randint(10, (5,))
    assert t2.shape == (5,) and t2.numpy().min() >= 0 and t2.numpy().max() < 10
    assert pf.randint(0, 3, (4,), dtype=pf.int32).dtype == pf.int32


def test_manual_seed_reproducibility():
    for fn in (lambda: pf.randn(5, 7), lambda: pf.rand(64), lambda: pf.randint(0, 1000, (32,))):
        pf.manual_seed(1234)
        a = fn().numpy().copy()
        b = fn().numpy().copy()
        pf.manual_seed(1234)
        c = fn().numpy().copy()
        pf.manual_seed(4321)
        d = fn().numpy().copy()
        np.testing.assert_array_equal(a, c)
        assert not np.array_equal(a, b), "consecutive draws are equal"
        assert not np.array_equal(a, d), "different seeds give equal draws"


def test_rand_range_and_randn_moments():
    pf.manual_seed(7)
    u = pf.rand(100_000).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.std() - (1 / 12) ** 0.5) < 0.01
    u64 = pf.rand(10_000, dtype=pf.float64).numpy()
    assert u64.min() >= 0.0 and u64.max() < 1.0
    n = pf.randn(100_000).numpy()
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1.0) < 0.02
    assert np.all(np.isfinite(n))
    # roughly normal: about 68% within one sigma
    assert abs(np.mean(np.abs(n) < 1.0) - 0.6827) < 0.01


# ----------------------------------------------------------------- views


@pytest.fixture
def base():
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    return pf.tensor(arr), arr


def _check_view(view, ref, base_t, write_index):
    """view has ref's values and writing through it changes base_t."""
    assert view.shape == ref.shape
    np.testing.assert_array_equal(view.numpy(), ref)
    assert _shares(view.numpy(), base_t.numpy()), "not a view"
    before = base_t.numpy().copy()
    view[write_index] = -100.0
    assert (base_t.numpy() == -100.0).sum() == 1 and not np.array_equal(before, base_t.numpy())
    base_t.numpy()[...] = before  # restore for the next check


def test_reshape_view_flatten(base):
    t, a = base
    _check_view(t.reshape(4, 6), a.reshape(4, 6), t, (0, 1))
    _check_view(t.view(6, -1), a.reshape(6, -1), t, (5, 3))
    _check_view(t.view((3, 8)), a.reshape(3, 8), t, (1, 1))
    _check_view(t.flatten(), a.reshape(-1), t, 7)
    _check_view(t.flatten(1), a.reshape(2, 12), t, (1, 11))
    _check_view(t.reshape(24), a.reshape(24), t, 9)
    # reshape of a non-contiguous tensor copies when it must, with the right values
    r = t.transpose(0, 2).reshape(-1)
    np.testing.assert_array_equal(r.numpy(), a.transpose(2, 1, 0).reshape(-1))


def test_permute_transpose_T(base):
    t, a = base
    _check_view(t.permute(2, 0, 1), a.transpose(2, 0, 1), t, (3, 1, 2))
    _check_view(t.permute((1, 0, 2)), a.transpose(1, 0, 2), t, (2, 1, 0))
    _check_view(t.transpose(0, 2), a.swapaxes(0, 2), t, (1, 2, 0))
    _check_view(t.transpose(-1, -2), a.swapaxes(-1, -2), t, (0, 3, 2))
    _check_view(t.T, a.T, t, (3, 0, 1))
    assert not t.permute(2, 0, 1).is_contiguous()


def test_squeeze_unsqueeze_expand():
    arr = np.arange(6, dtype=np.float64).reshape(1, 3, 1, 2)
    t = pf.tensor(arr)
    _check_view(t.squeeze(), arr.squeeze(), t, (0, 0))
    _check_view(t.squeeze(0), arr.squeeze(0), t, (1, 0, 1))
    _check_view(t.squeeze(2), arr.squeeze(2), t, (0, 2, 1))
    assert t.squeeze(1).shape == (1, 3, 1, 2)  # not size 1: unchanged, as in torch
    _check_view(t.unsqueeze(0), arr[None], t, (0, 0, 1, 0, 1))
    _check_view(t.unsqueeze(-1), arr[..., None], t, (0, 1, 0, 1, 0))
    _check_view(t.unsqueeze(2), np.expand_dims(arr, 2), t, (0, 2, 0, 0, 1))
    c = pf.tensor(np.array([[1.0], [2.0], [3.0]]))
    e = c.expand(3, 4)
    assert e.shape == (3, 4) and e.stride(1) == 0
    np.testing.assert_array_equal(e.numpy(), np.broadcast_to(c.numpy(), (3, 4)))
    assert _shares(e.numpy(), c.numpy())
    assert c.expand(2, 3, 4).shape == (2, 3, 4)
    assert c.expand(-1, 5).shape == (3, 5)
    c[1, 0] = 20.0
    assert e[1, 3].item() == 20.0


def test_slicing_like_numpy():
    arr = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    t = pf.tensor(arr)
    cases = [
        (slice(1, None), slice(None, None, 2), None, -1),
        (Ellipsis, 1),
        (0, Ellipsis),
        (Ellipsis, None),
        (None, Ellipsis, None),
        (-1,),
        (slice(1, 100),),
        (slice(-2, None), 1, slice(None, None, 3)),
        (1, 2, 3),
        (slice(2, 1),),
        (0, Ellipsis, slice(1, 4, 2)),
        (slice(None), None, 2),
    ]
    for key in cases:
        v = t[key]
        ref = arr[key]
        assert v.shape == ref.shape, key
        np.testing.assert_array_equal(v.numpy(), ref, err_msg=str(key))
    v = t[1:, ::2, None, -1]
    assert v.shape == (2, 2, 1)
    v[1, 1, 0] = -1
    assert t[2, 2, 4].item() == -1 and arr[2, 2, 4] != -1  # a view of t, not of arr
    s = t[1]
    s[0, 0] = 1000
    assert t[1, 0, 0].item() == 1000


def test_index_with_single_none():
    t = pf.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    v = t[None]
    assert v.shape == (1, 2, 3)
    np.testing.assert_array_equal(v.numpy(), t.numpy()[None])


def test_contiguous():
    t = pf.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    c = t.contiguous()
    assert c.is_contiguous() and c.data_ptr() == t.data_ptr()
    nc = t.T
    assert not nc.is_contiguous()
    cc = nc.contiguous()
    assert cc.is_contiguous() and cc.shape == (4, 3)
    np.testing.assert_array_equal(cc.numpy(), t.numpy().T)
    cc[0, 0] = 99.0
    assert t[0, 0].item() == 0.0, "contiguous() of a non-contiguous tensor must copy"
    assert cc.stride() == (3, 1)


# ----------------------------------------------------------------- properties and conversions


def test_item_tolist_shape_dtype_device():
    assert isinstance(pf.tensor([2.5])[0].item(), float) and pf.tensor([2.5])[0].item() == 2.5
    assert isinstance(pf.tensor([3])[0].item(), int) and pf.tensor([3])[0].item() == 3
    assert pf.tensor([True])[0].item() is True
    assert pf.ones(1, 1, dtype=pf.int8).item() == 1
    t = pf.tensor([[1, 2], [3, 4]], dtype=pf.int32)
    assert t.tolist() == [[1, 2], [3, 4]]
    assert isinstance(t.shape, tuple) and t.shape == (2, 2) and t.size() == (2, 2) and t.size(1) == 2
    assert t.dtype == pf.int32 and t.ndim == 2 and t.dim() == 2 and t.numel() == 4
    assert t.device == "cpu"
    assert pf.tensor([1.5, 2.0]).tolist() == [1.5, 2.0]
    assert pf.tensor([[True, False]]).tolist() == [[True, False]]
    assert pf.zeros(0, 3).tolist() == []
    assert float(pf.tensor([2.5])) == 2.5 and int(pf.tensor([7])) == 7


def test_to_dtype_and_device():
    t = pf.tensor([1.5, -2.0, 3.0])
    d = t.to(pf.float64)
    assert d.dtype == pf.float64 and d.tolist() == [1.5, -2.0, 3.0]
    assert t.to("float16").dtype == pf.float16
    assert t.to(dtype=pf.int32).tolist() == [1, -2, 3]
    c = t.to("cpu")
    assert c.device == "cpu" and c.data_ptr() == t.data_ptr()
    assert t.to(pf.float32).data_ptr() == t.data_ptr()
    assert t.cpu().device == "cpu"
    assert t.double().dtype == pf.float64 and t.half().dtype == pf.float16 and t.int().dtype == pf.int32
    assert t.long().dtype == pf.int64 and t.bool().dtype == pf.bool and t.bfloat16().dtype == pf.bfloat16
    # a converted tensor is a new one
    d[0] = 100.0
    assert t[0].item() == 1.5


def test_inplace_returns_self():
    """As in torch: t.add_(...) returns t itself and `t += 1` keeps the object."""
    x = pf.ones(3)
    assert x.add_(1) is x
    assert x.mul_(pf.ones(3)) is x
    assert x.exp_() is x
    alias = x
    x += 1
    assert x is alias


def test_numpy_dtypes_accepted():
    """bindings.cpp's as_dtype says NumPy dtypes and scalar types (np.float32) are accepted."""
    t = pf.ones(2)
    assert t.to(np.dtype("float64")).dtype == pf.float64
    assert t.to(np.int16).dtype == pf.int16
    assert pf.zeros(2, dtype=np.float64).dtype == pf.float64


def test_numpy_scalars_as_operands():
    """NumPy scalars work as operands, as in torch (bindings.cpp's as_operand means to accept them)."""
    t = pf.ones(2)
    assert (t * np.float32(2)).tolist() == [2.0, 2.0]
    assert (np.float32(2) * t).tolist() == [2.0, 2.0]
    assert pf.add(t, np.int64(3)).tolist() == [4.0, 4.0]
    assert (t * np.bool_(True)).tolist() == [1.0, 1.0]
    t[0] = np.float32(1.25)
    assert t.tolist() == [1.25, 1.0]


@pytest.mark.parametrize("src", ALL_DTYPES)
def test_to_dtype_matches_torch(src):
    """Conversions between every pair of dtypes on values valid for both."""
    vals = np.array([0, 1, 2, 5, 100, 3, 0, 1], dtype=np.float64)
    if src not in ("bool", "uint8"):
        vals = vals * np.array([1, -1, 1, -1, 1, 1, 1, -1])
    if src in ("float16", "bfloat16", "float32", "float64"):
        vals = vals + np.array([0.0, -0.7, 0.5, 0.25, 0.75, 0.5, 0.0, 0.0])
    ts = torch.from_numpy(vals).to(TORCH_DTYPE[src])
    if src == "bfloat16":
        x = pf.tensor(ts.to(torch.float32).numpy()).to(pf.bfloat16)
    else:
        x = pf.tensor(ts.numpy())
    for dst in ALL_DTYPES:
        if dst == "uint8" and src not in ("bool", "uint8"):
            continue  # negative values: implementation-defined in torch for floats
        assert_matches(x.to(PF_DTYPE[dst]), ts.to(TORCH_DTYPE[dst]), 0, 0, what=f"{src} -> {dst}")


def test_float_rounding_conversions():
    v = np.array([1.00390625, 1.01171875, 65519.0, 1e-8, 3.14159], dtype=np.float32)
    for dst in ("bfloat16", "float16"):
        assert_matches(pf.tensor(v).to(PF_DTYPE[dst]), torch.from_numpy(v).to(TORCH_DTYPE[dst]), 0, 0,
                       what=f"float32 -> {dst} rounding")


def test_repr_shows_values():
    r = repr(pf.tensor([1.5, 2.0]))
    assert r.startswith("tensor(") and "1.5" in r and "2." in r
    r = repr(pf.tensor([[1, 2], [3, 4]], dtype=pf.int16))
    assert "1" in r and "4" in r and "int16" in r
    assert "7" in str(pf.tensor([7]))
    assert "2.5" in repr(pf.tensor([2.5]).to(pf.bfloat16))
    assert "size=(0, 3)" in repr(pf.zeros(0, 3)) or "0, 3" in repr(pf.zeros(0, 3))


def test_len_iteration():
    t = pf.tensor(np.arange(12, dtype=np.int64).reshape(3, 4))
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and all(r.shape == (4,) for r in rows)
    assert [r.tolist() for r in rows] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    rows[1][0] = -5  # rows are views
    assert t[1, 0].item() == -5
    assert len(pf.zeros(0, 2)) == 0 and list(pf.zeros(0, 2)) == []
    with pytest.raises(TypeError):
        len(pf.zeros(()))


def test_setitem():
    t = pf.zeros(3, 4)
    t[0] = 5
    t[:, 1] = 2.5
    t[1:, ::2] = pf.tensor([[7.0, 8.0], [9.0, 10.0]])
    t[2, 3] = True
    ref = np.zeros((3, 4), dtype=np.float32)
    ref[0] = 5
    ref[:, 1] = 2.5
    ref[1:, ::2] = [[7.0, 8.0], [9.0, 10.0]]
    ref[2, 3] = True
    np.testing.assert_array_equal(t.numpy(), ref)
    # the value broadcasts, as in torch
    t[..., 0] = pf.tensor([1.0, 2.0, 3.0])
    ref[..., 0] = [1.0, 2.0, 3.0]
    t[1] = pf.tensor([4.0])
    ref[1] = 4.0
    np.testing.assert_array_equal(t.numpy(), ref)
    i = pf.zeros(3, dtype=pf.int32)
    i[0] = 2.7  # cast as in torch (truncation)
    ti = torch.zeros(3, dtype=torch.int32)
    ti[0] = 2.7
    assert i.tolist() == ti.tolist()
    t[0, 0] = 1.25
    assert t[0, 0].item() == 1.25
    t[:] = 0
    assert pf.sum(t).item() == 0


# ----------------------------------------------------------------- operators


def _pair(rng, dtype="float32", shape=(3, 4), low=0.5, high=3.0):
    v = rng.uniform(low, high, size=shape).astype(np.float32)
    return pf.tensor(v).to(PF_DTYPE[dtype]), torch.from_numpy(v).to(TORCH_DTYPE[dtype])


OPS_FWD = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
           operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("op", OPS_FWD, ids=lambda f: f.__name__)
def test_operators_tensor_tensor_and_scalar(op, rng):
    a, ta = _pair(rng)
    b, tb = _pair(rng, shape=(4,))
    assert_matches(op(a, b), op(ta, tb), 1e-5, 1e-6, what=f"{op.__name__}(t, t)")
    for s in (2, 1.5) if op is operator.sub else (2, 1.5, True):  # torch refuses t - True
        assert_matches(op(a, s), op(ta, s), 1e-5, 1e-6, what=f"{op.__name__}(t, {s!r})")
        assert_matches(op(s, a), op(s, ta), 1e-5, 1e-6, what=f"{op.__name__}({s!r}, t) (reflected)")
    ai, tai = pf.tensor([1, 2, 3], dtype=pf.int32), torch.tensor([1, 2, 3], dtype=torch.int32)
    assert_matches(op(2, ai), op(2, tai), 1e-6, 0, what=f"{op.__name__}(2, int32 t)")
    assert_matches(op(ai, 2), op(tai, 2), 1e-6, 0, what=f"{op.__name__}(int32 t, 2)")


def test_reflected_sub_pow_div_values():
    t = pf.tensor([1.0, 2.0, 3.0])
    assert (2 - t).tolist() == [1.0, 0.0, -1.0]
    assert (2 ** t).tolist() == [2.0, 4.0, 8.0]
    assert (6 / t).tolist() == [6.0, 3.0, 2.0]
    assert (1 < t).tolist() == [False, True, True]
    assert (t.__rsub__(10)).tolist() == [9.0, 8.0, 7.0]
    assert (2.0 * t).tolist() == [2.0, 4.0, 6.0]


def test_matmul_neg_abs_operators(rng):
    a, ta = _pair(rng, shape=(3, 4), low=-2)
    b, tb = _pair(rng, shape=(4, 2), low=-2)
    assert_matches(a @ b, ta @ tb, 1e-5, 1e-6, what="@")
    assert_matches(-a, -ta, 0, 0, what="neg")
    assert_matches(abs(a), abs(ta), 0, 0, what="abs")
    i = pf.tensor([-3, 0, 4], dtype=pf.int8)
    assert (-i).tolist() == [3, 0, -4] and abs(i).tolist() == [3, 0, 4] and (-i).dtype == pf.int8


# ----------------------------------------------------------------- in place


@pytest.mark.parametrize("name,iop", [("add_", operator.iadd), ("sub_", operator.isub), ("mul_", operator.imul),
                                      ("div_", operator.itruediv), ("pow_", operator.ipow)])
def test_inplace_methods_and_operators(name, iop, rng):
    v = rng.uniform(0.5, 2.0, size=(3, 4)).astype(np.float32)
    w = rng.uniform(0.5, 2.0, size=(4,)).astype(np.float32)
    tref = getattr(torch.from_numpy(v.copy()), name)(torch.from_numpy(w))

    x = pf.tensor(v)
    ptr = x.data_ptr()
    r = getattr(x, name)(pf.tensor(w))
    assert x.data_ptr() == ptr and r.data_ptr() == ptr
    assert_matches(x, tref, 1e-6, 1e-6, what=name)

    y = pf.tensor(v)
    alias = y
    y = iop(y, pf.tensor(w))
    assert y.data_ptr() == ptr or y.data_ptr() == alias.data_ptr()
    assert_matches(y, tref, 1e-6, 1e-6, what=iop.__name__)
    assert_matches(alias, tref, 1e-6, 1e-6, what=iop.__name__ + " (other reference)")

    z = pf.tensor(v)
    z = iop(z, 2)
    assert_matches(z, iop(torch.from_numpy(v.copy()), 2), 1e-6, 1e-6, what=f"{iop.__name__} scalar")


def test_inplace_through_a_view_and_dtype_rules():
    x = pf.zeros(2, 3)
    row = x[1]
    row += 1
    assert x.tolist() == [[0, 0, 0], [1, 1, 1]]
    h = pf.ones(3, dtype=pf.float16)
    h += pf.ones(3, dtype=pf.float32)  # result float32 stored in float16, as torch allows
    assert h.dtype == pf.float16 and h.tolist() == [2.0] * 3
    i = pf.ones(3, dtype=pf.int32)
    i += pf.ones(3, dtype=pf.int64)
    i *= 3
    assert i.dtype == pf.int32 and i.tolist() == [6] * 3
    f = pf.ones(2)
    f += 2  # int scalar into float tensor
    assert f.tolist() == [3.0, 3.0]


def test_int_tensor_iadd_float_raises_type_error():
    t = pf.tensor([1, 2, 3])
    with pytest.raises(TypeError):
        t += 1.5
    assert t.tolist() == [1, 2, 3] and t.dtype == pf.int64
    with pytest.raises(TypeError):
        t /= 2
    with pytest.raises(TypeError):
        t.add_(pf.tensor([0.5, 0.5, 0.5]))
    assert t.tolist() == [1, 2, 3]
    t += 1
    assert t.tolist() == [2, 3, 4]


# ----------------------------------------------------------------- type promotion


@pytest.mark.parametrize(
    "make,expected",
    [
        (lambda: pf.ones(2, dtype=pf.int32) + 2.5, torch.float32),
        (lambda: pf.ones(2, dtype=pf.float16) * 3, torch.float16),
        (lambda: pf.ones(2, dtype=pf.int32) + pf.full((), 5, dtype=pf.int64), torch.int32),
        (lambda: pf.ones(2, dtype=pf.bool) + 1, torch.int64),
        (lambda: pf.ones(2, dtype=pf.uint8) + pf.ones(2, dtype=pf.int8), torch.int16),
        (lambda: pf.ones(2, dtype=pf.float16) + pf.ones(2, dtype=pf.bfloat16), torch.float32),
        (lambda: pf.ones(2, dtype=pf.int8) * True, torch.int8),
        (lambda: pf.ones(2, dtype=pf.bool) * 2.5, torch.float32),
        (lambda: pf.ones(2, dtype=pf.float16) + pf.full((), 1.0, dtype=pf.float64), torch.float16),
        (lambda: pf.ones(2, dtype=pf.int16) + pf.full((), 1.0, dtype=pf.float64), torch.float64),
        (lambda: pf.ones(2, dtype=pf.int64) / 2, torch.float32),
    ],
    ids=["int32+2.5", "f16*3", "int32+int64_0d", "bool+1", "u8+i8", "f16+bf16", "i8*True", "bool*2.5",
         "f16+f64_0d", "i16+f64_0d", "i64/2"],
)
def test_type_promotion_cases(make, expected):
    r = make()
    assert pf_dtype_name(r.dtype) == TORCH_TO_NAME[expected], f"got {r.dtype}, torch gives {expected}"


def test_type_promotion_against_torch_result_type():
    cases = [
        ((torch.int32, (2,)), 2.5),
        ((torch.float16, (2,)), 3),
        ((torch.int32, (2,)), (torch.int64, ())),
        ((torch.bool, (2,)), 1),
        ((torch.uint8, (2,)), (torch.int8, (2,))),
        ((torch.float16, (2,)), (torch.bfloat16, (2,))),
        ((torch.float32, (2,)), (torch.float64, ())),
        ((torch.int8, ()), (torch.int64, ())),
        ((torch.uint8, (2,)), -1),
    ]

    def mk(spec):
        if not isinstance(spec, tuple):
            return spec, spec
        dt, shape = spec
        name = TORCH_TO_NAME[dt]
        return pf.zeros(*shape, dtype=PF_DTYPE[name]) if shape else pf.zeros((), dtype=PF_DTYPE[name]), \
            torch.zeros(shape, dtype=dt)

    for a, b in cases:
        pa, ta = mk(a)
        pb, tb = mk(b)
        expected = TORCH_TO_NAME[torch.result_type(ta, tb)]
        assert pf_dtype_name(pf.result_type(pa, pb)) == expected, (a, b)
        assert pf_dtype_name((pa + pb).dtype) == expected, (a, b)


@pytest.mark.parametrize("make", [
    lambda: pf.zeros(2**40, 2**40),
    lambda: pf.randn(2**33, 2**33),
    lambda: pf.ones(2**62, 4),
    lambda: pf.empty(2**31, 2**31, 2**31),
    lambda: pf.ones(1, 1).expand(2**40, 2**40),
    lambda: pf.zeros(2**61, dtype=pf.float32),  # the element count fits, the byte count does not
], ids=["zeros", "randn", "ones", "empty", "expand", "bytes"])
def test_sizes_that_overflow_raise_before_allocating(make):
    # A wrapped count would give a tensor of that shape with a wrong (often empty) buffer.
    with pytest.raises(ValueError, match="int64"):
        make()


def test_empty_and_countable_shapes_still_work():
    assert pf.zeros(0, 2**20, 2**20).numel() == 0 and pf.zeros(0, 2**20, 2**20).shape == (0, 2**20, 2**20)
    assert pf.ones(1, 1).expand(2**20, 2**20).numel() == 2**40  # a view: no memory behind it
    with pytest.raises(ValueError, match="int64"):  # as PyTorch: its strides would overflow
        pf.zeros(0, 2**40, 2**40)
    with pytest.raises(RuntimeError):
        torch.zeros(0, 2**40, 2**40)


def test_keywords_pytorch_code_passes():
    assert pf.zeros(size=(2, 3)).shape == (2, 3) and pf.ones(size=4).shape == (4,)
    assert pf.empty(size=[1, 2]).shape == (1, 2)
    with pytest.raises(TypeError, match="twice"):
        pf.zeros(2, size=(2,))
    x = pf.ones(2, 3)
    assert x.to("cpu", non_blocking=True) is not None
    y = x.to("cpu", copy=True)
    assert y.data_ptr() != x.data_ptr() and y.tolist() == x.tolist()
    assert x.to(pf.float32).data_ptr() == x.data_ptr()  # nothing to change: the same tensor


def test_load_map_location(tmp_path):
    path = tmp_path / "t.safetensors"
    pf.save({"w": pf.arange(3)}, path)
    assert pf.load(path, map_location="cpu")["w"].tolist() == [0, 1, 2]
    # torch's dict and function forms (more in test_interop.py): the saved location is 'cpu'.
    assert pf.load(path, map_location={"cuda:0": "cpu"})["w"].tolist() == [0, 1, 2]
    assert pf.load(path, map_location=lambda t, loc: t + 1)["w"].tolist() == [1, 2, 3]
    with pytest.raises(TypeError, match="not both"):
        pf.load(path, device="cpu", map_location="cpu")


@pytest.mark.parametrize("args,kwargs", [
    ((5, (3, 4)), {}), ((2, 9, (6,)), {}), ((), dict(high=5, size=(3,))), ((), dict(low=-3, high=4, size=(2, 2))),
    ((7,), dict(size=(5,))), ((1, 4), dict(size=(8,))), ((), dict(high=3, size=[4])),
])
def test_randint_forms_as_torch(args, kwargs):
    """Every way torch.randint takes low, high and size gives the same shape and range."""
    import torch

    want = torch.randint(*args, **kwargs)
    got = pf.randint(*args, **kwargs)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype == pf.int64
    low = kwargs.get("low", args[0] if len(args) == 3 or (len(args) == 2 and "size" in kwargs) else 0)
    high = kwargs.get("high", args[1] if len(args) >= 2 and (len(args) == 3 or "size" in kwargs) else
                      (args[0] if args else None))
    values = got.numpy()
    assert values.min() >= low and values.max() < high


def test_randint_needs_high_and_size():
    with pytest.raises(TypeError):
        pf.randint(size=(3,))
    with pytest.raises(TypeError):
        pf.randint(5)


@pytest.mark.skipif(pf.rocm_is_available(), reason="a GPU is usable: test_rocm_runtime.py pins memory")
def test_pin_memory_without_a_gpu_raises():
    x = pf.randn(3)
    assert not x.is_pinned()
    with pytest.raises(pf.NotSupportedError, match="pin_memory: page-locked memory needs a usable GPU"):
        x.pin_memory()
