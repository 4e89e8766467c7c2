"""The shape area against PyTorch (CPU) on fresh random inputs: cat, stack, split,
chunk, embedding, one_hot, masked_fill, tril, triu, indexing with integer tensors
and bool masks (get and set), in-place forms, errors and 64-bit indexing.

index_select, gather, scatter and scatter_add also run through the OpInfo
registry (opinfo_shape.py); here they meet duplicates, threads and errors.
"""

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pyflame as pf
from host_memory import N, marked_past_int32, needs_free_memory
from op_registry import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    PF_DTYPE,
    TORCH_DTYPE,
    Arg,
    assert_matches,
    make_pf,
    make_torch,
    make_values,
    pf_to_numpy,
)

_DOM = dict(low=-5, high=5, ilow=-9, ihigh=9)


def pair(rng, shape, dtype, layout="contig", **dom):
    """A PyFlame tensor (laid out as `layout`: contig, T or strided) and a torch
    tensor holding the same random values."""
    arg = Arg(make_values(rng, shape, dtype, **(dom or _DOM)), layout)
    return make_pf(arg, dtype), make_torch(arg, dtype)


def index_pair(rng, shape, size, dtype="int64", layout="contig"):
    """Random positions in [0, size) as a PyFlame and a torch (int64) tensor."""
    arg = Arg(make_values(rng, shape, "int64", ilow=0, ihigh=max(size - 1, 0)), layout, dtype=dtype)
    return make_pf(arg, dtype), make_torch(arg, dtype).long()


def snapshot(*tensors):
    return [pf_to_numpy(t).copy() for t in tensors]


def unchanged(before, *tensors):
    for b, t in zip(before, tensors):
        np.testing.assert_array_equal(pf_to_numpy(t), b, err_msg="an input was modified")


def expect(exc, fn, *inputs, match=None):
    """fn() raises exc with a message matching `match`; the inputs stay as they were."""
    before = snapshot(*inputs)
    with pytest.raises(exc) as info:
        fn()
    if match is not None:
        assert re.search(match, str(info.value)), f"message {str(info.value)!r} does not match {match!r}"
    unchanged(before, *inputs)
    assert pf.add(pf.ones(2), 1).tolist() == [2.0, 2.0]  # the library still works


# ----------------------------------------------------------------- cat, stack


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_cat(dtype, rng):
    cases = [
        ([((2, 3), "contig"), ((4, 3), "contig")], 0),
        ([((2, 3), "contig"), ((2, 5), "T")], 1),
        ([((2, 3, 4), "strided"), ((2, 1, 4), "contig"), ((2, 0, 4), "contig"), ((2, 5, 4), "T")], -2),
        ([((3, 4), "T"), ((0,), "contig"), ((1, 4), "strided")], 0),  # 1-D empty tensors are skipped
        ([((1,), "contig"), ((1,), "contig"), ((7,), "strided")], -1),
        ([((0, 3), "contig"), ((0, 3), "contig")], 0),
        ([((2, 3), "T")], 1),
    ]
    for shapes, dim in cases:
        pairs = [pair(rng, s, dtype, lay) for s, lay in shapes]
        before = snapshot(*[p for p, _ in pairs])
        r = pf.cat([p for p, _ in pairs], dim=dim)
        assert_matches(r, torch.cat([t for _, t in pairs], dim=dim), 0, 0, what=f"cat({shapes}, {dim})")
        assert r.is_contiguous()
        unchanged(before, *[p for p, _ in pairs])
    (a, ta), (b, tb) = pair(rng, (2, 2), dtype), pair(rng, (1, 2), dtype)
    assert_matches(pf.cat((a, b)), torch.cat((ta, tb)), 0, 0, what="cat(tuple)")
    assert_matches(pf.cat(tensors=[a, b], dim=0), torch.cat([ta, tb]), 0, 0, what="cat(keywords)")


@pytest.mark.parametrize("da,db", [("int32", "float32"), ("bool", "int8"), ("float16", "bfloat16"),
                                   ("uint8", "int8"), ("int64", "float64"), ("bool", "float16")])
def test_cat_and_stack_promote(da, db, rng):
    (a, ta), (b, tb) = pair(rng, (2, 3), da), pair(rng, (2, 3), db)
    assert_matches(pf.cat([a, b], 1), torch.cat([ta, tb], 1), 0, 0, what=f"cat {da}+{db}")
    assert_matches(pf.stack([a, b]), torch.stack([ta, tb]), 0, 0, what=f"stack {da}+{db}")
    assert_matches(pf.cat([pf.empty(0, dtype=PF_DTYPE[da]), b]), torch.cat([torch.empty(0, dtype=ta.dtype), tb]),
                   0, 0, what="a skipped empty tensor still takes part in promotion")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_stack(dtype, rng):
    for shape, layout, dims in [((2, 3), "contig", (0, 1, 2, -1, -3)), ((4, 5), "T", (0, 1, -1)),
                                ((3, 4), "strided", (1,)), ((), "contig", (0, -1)), ((0, 3), "contig", (0, 2)),
                                ((1, 1), "contig", (1,))]:
        for dim in dims:
            pairs = [pair(rng, shape, dtype, layout) for _ in range(3)]
            r = pf.stack([p for p, _ in pairs], dim=dim)
            assert_matches(r, torch.stack([t for _, t in pairs], dim=dim), 0, 0, what=f"stack({shape}, {dim})")


# ----------------------------------------------------------------- split, chunk


def _check_parts(parts, expected, base, what):
    assert isinstance(parts, tuple), f"{what}: a tuple, as torch"
    assert len(parts) == len(expected), f"{what}: {len(parts)} parts, torch gives {len(expected)}"
    for p, e in zip(parts, expected):
        assert_matches(p, e, 0, 0, what=what)
        if p.numel():
            assert p.data_ptr() >= base.data_ptr(), f"{what}: a part is not a view"


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16"])
def test_split(dtype, rng):
    for shape, layout in [((7, 4), "contig"), ((4, 9), "T"), ((3, 10), "strided"), ((0, 3), "contig")]:
        x, tx = pair(rng, shape, dtype, layout)
        for dim in (0, 1, -1):
            n = shape[dim]
            for size in (1, 2, 3, n, n + 2):
                if size == 0:
                    continue
                what = f"split({shape}/{layout}, {size}, dim={dim})"
                _check_parts(pf.split(x, size, dim), torch.split(tx, size, dim), x, what)
                _check_parts(x.split(size, dim=dim), torch.split(tx, size, dim), x, what + " method")
            sections = [n // 3, n - n // 3 - 1, 1] if n else [0, 0]
            _check_parts(pf.split(x, sections, dim=dim), torch.split(tx, sections, dim), x, f"split({sections})")
    x, tx = pair(rng, (5,), dtype)
    _check_parts(pf.split(tensor=x, split_size_or_sections=(2, 0, 3)), torch.split(tx, (2, 0, 3)), x, "keywords")
    _check_parts(pf.split(pf.empty(0), 0), torch.split(torch.empty(0), 0), x, "split of an empty dim by 0")


def test_split_parts_are_views():
    x = pf.zeros(6, 2)
    a, b = pf.split(x, [4, 2])
    b[0, 1] = 5.0
    assert x[4, 1].item() == 5.0
    c = x.chunk(3, dim=0)[1]
    c.fill_(2.0)
    assert pf.sum(x).item() == 5.0 + 8.0


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float16"])
def test_chunk(dtype, rng):
    for shape, layout in [((7, 4), "contig"), ((4, 6), "T"), ((3, 5), "strided"), ((0, 3), "contig"),
                          ((1, 1), "contig")]:
        x, tx = pair(rng, shape, dtype, layout)
        for dim in (0, -1):
            for chunks in (1, 2, 3, 4, 7, 9):
                what = f"chunk({shape}/{layout}, {chunks}, dim={dim})"
                _check_parts(pf.chunk(x, chunks, dim), torch.chunk(tx, chunks, dim), x, what)
                _check_parts(x.chunk(chunks, dim=dim), torch.chunk(tx, chunks, dim), x, what + " method")
    x, tx = pair(rng, (6,), dtype)
    _check_parts(pf.chunk(input=x, chunks=4, dim=0), torch.chunk(tx, 4), x, "keywords")


# ----------------------------------------------------------------- embedding, one_hot


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + ("int64",))
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_embedding(dtype, index_dtype, rng):
    for wshape, wlayout, ishape, ilayout in [((10, 4), "contig", (5,), "contig"), ((10, 4), "T", (2, 3), "contig"),
                                            ((7, 3), "strided", (3, 4), "T"), ((6, 5), "contig", (), "contig"),
                                            ((6, 5), "contig", (0,), "contig"), ((1, 1), "contig", (3, 1), "contig"),
                                            ((6, 0), "contig", (2,), "contig")]:
        w, tw = pair(rng, wshape, dtype, wlayout)
        idx, tidx = index_pair(rng, ishape, wshape[0], index_dtype, ilayout)
        what = f"embedding({ishape}/{ilayout}, {wshape}/{wlayout})"
        assert_matches(pf.embedding(idx, w), F.embedding(tidx, tw), 0, 0, what=what)
        for p in (0, -1):  # padding_idx only matters for gradients
            assert_matches(pf.embedding(input=idx, weight=w, padding_idx=p), F.embedding(tidx, tw, padding_idx=p),
                           0, 0, what=what + f" padding_idx={p}")


@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_one_hot(index_dtype, rng):
    for shape, layout, num_classes in [((6,), "contig", -1), ((6,), "contig", 9), ((2, 3), "T", 5),
                                       ((3, 4), "strided", -1), ((), "contig", 4), ((0,), "contig", 3),
                                       ((2, 0), "contig", 2), ((1,), "contig", 1)]:
        x, tx = index_pair(rng, shape, 4 if num_classes == -1 else num_classes, index_dtype, layout)
        expected = F.one_hot(tx, num_classes)
        assert_matches(pf.one_hot(x, num_classes), expected, 0, 0, what=f"one_hot({shape}, {num_classes})")
        assert_matches(pf.one_hot(tensor=x, num_classes=num_classes), expected, 0, 0, what="keywords")
    x, tx = index_pair(rng, (5,), 3, index_dtype)
    assert_matches(pf.one_hot(x), F.one_hot(tx), 0, 0, what="default num_classes")
    assert pf.one_hot(pf.zeros(2, 0, dtype=PF_DTYPE[index_dtype]), 0).shape == (2, 0, 0)  # torch refuses this


# ----------------------------------------------------------------- masked_fill, tril, triu


def _fill_value(dtype):
    return True if dtype == "bool" else (-2.5 if dtype in FLOAT_DTYPES else 7)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_masked_fill(dtype, rng):
    for xs, xl, ms, ml in [((3, 5), "contig", (3, 5), "contig"), ((4, 5), "T", (4, 5), "strided"),
                           ((2, 3, 4), "contig", (3, 1), "contig"), ((3, 4), "strided", (4,), "contig"),
                           ((3, 1), "contig", (2, 1, 4), "T"), ((0, 3), "contig", (3,), "contig"),
                           ((), "contig", (), "contig"), ((1, 5), "contig", (1, 1), "contig")]:
        x, tx = pair(rng, xs, dtype, xl)
        m, tm = pair(rng, ms, "bool", ml)
        for value in (_fill_value(dtype), 0, 3):
            what = f"masked_fill({xs}/{xl}, {ms}/{ml}, {value!r})"
            before = snapshot(x, m)
            expected = tx.masked_fill(tm, value)
            assert_matches(pf.masked_fill(x, m, value), expected, 0, 0, what=what)
            assert_matches(x.masked_fill(m, value), expected, 0, 0, what=what + " method")
            unchanged(before, x, m)
    x, tx = pair(rng, (3, 4), dtype)
    m, tm = pair(rng, (3, 4), "bool")
    v = pf.tensor(2.0, dtype=pf.float64)  # a 0-d tensor value is cast, as torch
    assert_matches(pf.masked_fill(input=x, mask=m, value=v), tx.masked_fill(tm, torch.tensor(2.0, dtype=torch.float64)),
                   0, 0, what="0-d tensor value")


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "bfloat16", "uint8"])
def test_masked_fill_in_place(dtype, rng):
    x, tx = pair(rng, (3, 4), dtype)
    m, tm = pair(rng, (4,), "bool")
    ptr = x.data_ptr()
    r = x.masked_fill_(m, _fill_value(dtype))
    tx.masked_fill_(tm, _fill_value(dtype))
    assert r is x and x.data_ptr() == ptr
    assert_matches(x, tx, 0, 0, what="masked_fill_")
    # into a non-contiguous view: only its elements change
    base, tbase = pair(rng, (4, 6), dtype)
    m2, tm2 = pair(rng, (4, 3), "bool")
    base[:, ::2].masked_fill_(m2, 1)
    tbase[:, ::2].masked_fill_(tm2, 1)
    assert_matches(base, tbase, 0, 0, what="masked_fill_ of a view")


def test_masked_fill_value_is_cast_to_the_input_dtype():
    x = pf.zeros(3, dtype=pf.int32)
    m = pf.tensor([True, False, True])
    r = pf.masked_fill(x, m, 2.7)
    assert r.dtype == pf.int32 and r.tolist() == [2, 0, 2]
    assert pf.masked_fill(pf.zeros(2, dtype=pf.bool), pf.tensor([True, False]), 2.5).tolist() == [True, False]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tril_triu(name, dtype, rng):
    fn, tfn = getattr(pf, name), getattr(torch, name)
    for shape, layout in [((4, 5), "contig"), ((5, 3), "T"), ((2, 3, 4), "strided"), ((2, 2, 3, 3), "T"),
                          ((0, 3), "contig"), ((3, 0), "contig"), ((1, 1), "contig"), ((2, 0, 4), "contig")]:
        x, tx = pair(rng, shape, dtype, layout)
        before = snapshot(x)
        for diagonal in (0, 1, -1, 2, -3, 7, -7):
            what = f"{name}({shape}/{layout}, {diagonal})"
            expected = tfn(tx, diagonal)
            assert_matches(fn(x, diagonal), expected, 0, 0, what=what)
            assert_matches(getattr(x, name)(diagonal=diagonal), expected, 0, 0, what=what + " method")
        assert_matches(fn(input=x), tfn(tx), 0, 0, what=f"{name} default diagonal")
        unchanged(before, x)
    x, tx = pair(rng, (4, 4), dtype)
    r = getattr(x, name + "_")(1)
    getattr(tx, name + "_")(1)
    assert r is x
    assert_matches(x, tx, 0, 0, what=f"{name}_")


# ----------------------------------------------------------------- indexing with tensors


@pytest.mark.parametrize("dtype", ["float32", "int16", "bool", "float16"])
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_getitem_integer_tensor(dtype, index_dtype, rng):
    x, tx = pair(rng, (5, 4, 3), dtype)
    xt, txt = pair(rng, (5, 4), dtype, "T")
    for key_shape, size in [((3,), 5), ((2, 2), 5), ((0,), 5), ((1,), 5)]:
        i, ti = index_pair(rng, key_shape, size, index_dtype)
        assert_matches(x[i], tx[ti], 0, 0, what=f"x[{key_shape}]")
        assert_matches(xt[i], txt[ti], 0, 0, what=f"noncontig x[{key_shape}]")
    j, tj = index_pair(rng, (2, 3), 4, index_dtype, "T")
    k, tk = index_pair(rng, (4,), 3, index_dtype, "strided")
    cases = [
        (lambda a, j, k: a[:, j], "x[:, j]"),
        (lambda a, j, k: a[..., k], "x[..., k]"),
        (lambda a, j, k: a[1, j], "x[1, j]"),
        (lambda a, j, k: a[0, :, k], "x[0, :, k]"),
        (lambda a, j, k: a[None, :, j, 1:], "x[None, :, j, 1:]"),
        (lambda a, j, k: a[1:4, j, ::2], "x[1:4, j, ::2]"),
        (lambda a, j, k: a[:, :, k][0], "x[:, :, k][0]"),
    ]
    for f, what in cases:
        assert_matches(f(x, j, k), f(tx, tj, tk), 0, 0, what=what)
    # negative positions count from the end
    neg = pf.tensor([-1, 0, -5, 2], dtype=PF_DTYPE[index_dtype])
    assert_matches(x[neg], tx[torch.tensor([-1, 0, -5, 2])], 0, 0, what="negative positions")
    # a one-element index tensor keeps its dim (torch: an index list)
    assert x[pf.tensor([2])].shape == (1, 4, 3)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16"])
def test_getitem_bool_mask(dtype, rng):
    x, tx = pair(rng, (3, 4, 5), dtype)
    xt, txt = pair(rng, (3, 4, 5), dtype, "T")
    for mshape in [(3, 4, 5), (3, 4), (3,)]:
        m, tm = pair(rng, mshape, "bool")
        assert_matches(x[m], tx[tm], 0, 0, what=f"x[mask {mshape}]")
        assert_matches(xt[m], txt[tm], 0, 0, what=f"noncontig x[mask {mshape}]")
    m, tm = pair(rng, (4, 5), "bool", "T")
    assert_matches(x[:, m], tx[:, tm], 0, 0, what="x[:, mask]")
    assert_matches(x[1, m], tx[1, tm], 0, 0, what="x[1, mask]")
    m, tm = pair(rng, (4,), "bool")
    assert_matches(x[..., m, 2:], tx[..., tm, 2:], 0, 0, what="x[..., mask, 2:]")
    assert_matches(x[x > 0] if dtype != "bool" else x[x], tx[tx > 0] if dtype != "bool" else tx[tx], 0, 0,
                   what="x[x > 0]")
    none = pf.zeros(3, 4, dtype=pf.bool)
    assert_matches(x[none], tx[torch.zeros(3, 4, dtype=torch.bool)], 0, 0, what="all-false mask")
    for b in (True, False):
        assert_matches(x[pf.tensor(b)], tx[torch.tensor(b)], 0, 0, what=f"x[tensor({b})]")
        assert_matches(x[0, pf.tensor(b), 1], tx[0, torch.tensor(b), 1], 0, 0, what=f"x[0, tensor({b}), 1]")


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float16"])
def test_setitem_with_tensor_keys(dtype, rng):
    v = _fill_value(dtype)
    i, ti = index_pair(rng, (3,), 5)
    rows, trows = pair(rng, (3, 4), dtype)
    row, trow = pair(rng, (4,), dtype)
    m, tm = pair(rng, (5, 4), "bool")
    mr, tmr = pair(rng, (5,), "bool")
    nr = int(tmr.sum())
    vals, tvals = pair(rng, (int(tm.sum()),), dtype)
    rvals, trvals = pair(rng, (nr, 4), dtype)
    col, tcol = pair(rng, (4,), "bool")
    all_rows = slice(None)
    # (what, assign into x.T, pyflame key, torch key, pyflame value, torch value)
    cases = [
        ("x[i] = number", False, i, ti, v, v),
        ("x[i] = rows", False, pf.tensor([4, 0, 2]), torch.tensor([4, 0, 2]), rows, trows),
        ("x[i] = row (broadcast)", False, i, ti, row, trow),
        ("x[:, j] = number, negative j", False, (all_rows, pf.tensor([-1, 1])), (all_rows, torch.tensor([-1, 1])),
         v, v),
        ("x[mask] = number", False, m, tm, v, v),
        ("x[mask] = values", False, m, tm, vals, tvals),
        ("x[row mask] = rows", False, mr, tmr, rvals, trvals),
        ("x.T[mask.T] = values (masked dims not flattenable into a view)", True, m.T, tm.T, vals, tvals),
        ("x[1:, mask cols] = number", False, (slice(1, None), col), (slice(1, None), tcol), v, v),
    ]
    for what, transposed, key, tkey, value, tvalue in cases:
        x, tx = pair(rng, (5, 4), dtype)
        (x.T if transposed else x)[key] = value
        (tx.T if transposed else tx)[tkey] = tvalue
        assert_matches(x, tx, 0, 0, what=what)


# ----------------------------------------------------------------- index kernels: duplicates, threads, in place


@pytest.mark.parametrize("dtype", ["int64", "float64", "float16", "bool"])
def test_scatter_add_duplicates_across_threads(dtype, rng):
    """Many writes to few places, on sizes the CPU splits between threads: no update is lost."""
    n = 300_000
    for x_shape, dim, i_shape in [((1, 7), 1, (1, n)), ((7,), 0, (n,)), ((7, 3), 0, (n, 3)), ((3, 7), 1, (3, n // 3))]:
        # multiples of 0.5: float sums are exact whatever their order
        x, tx = pair(rng, x_shape, dtype, low=0, high=1, ilow=0, ihigh=1, discrete=True)
        src, tsrc = pair(rng, i_shape, dtype, low=0, high=1, ilow=0, ihigh=1, discrete=True)
        i, ti = index_pair(rng, i_shape, x_shape[dim])
        # float16 sums are accumulated in float32 and rounded once (at 2048 an fp16 add of 1 would be lost)
        compute = torch.float32 if dtype == "float16" else tx.dtype
        expected = torch.scatter_add(tx.to(compute), dim, ti, tsrc.to(compute)).to(tx.dtype)
        assert_matches(pf.scatter_add(x, dim, i, src), expected, 0, 0, what=f"scatter_add {x_shape} {i_shape}")
        y = x.clone()
        y.scatter_add_(dim, i, src)
        assert_matches(y, expected, 0, 0, what="scatter_add_")


def test_scatter_last_write_wins_in_index_order():
    # torch leaves duplicate scatter writes unordered; on the CPU both take the last
    x = pf.zeros(3)
    r = pf.scatter(x, 0, pf.tensor([1, 1, 2, 1]), pf.tensor([1.0, 2.0, 3.0, 4.0]))
    assert r.tolist() == [0.0, 4.0, 3.0]


def test_large_gather_and_index_select_match_torch(rng):
    x, tx = pair(rng, (301, 513), "float32", "T")
    i, ti = index_pair(rng, (400, 513), 301)
    assert_matches(pf.gather(x, 0, i), torch.gather(tx, 0, ti), 0, 0, what="gather")
    j, tj = index_pair(rng, (1000,), 513)
    assert_matches(pf.index_select(x, 1, j), torch.index_select(tx, 1, tj), 0, 0, what="index_select dim 1")
    k, tk = index_pair(rng, (1000,), 301)
    assert_matches(pf.index_select(x, 0, k), torch.index_select(tx, 0, tk), 0, 0, what="index_select dim 0")
    assert_matches(x.scatter(1, i[:301, :100], 1.5), tx.scatter(1, ti[:301, :100], 1.5), 0, 0, what="scatter")


@pytest.mark.parametrize("name", ["scatter", "scatter_add"])
def test_scatter_in_place(name, rng):
    x, tx = pair(rng, (4, 5), "float32")
    i, ti = index_pair(rng, (2, 5), 4)
    src, tsrc = pair(rng, (2, 5), "float32")
    ptr = x.data_ptr()
    r = getattr(x, name + "_")(0, i, src)
    getattr(tx, name + "_")(0, ti, tsrc)
    assert r is x and x.data_ptr() == ptr
    assert_matches(x, tx, 0, 0, what=name + "_")
    # into a non-contiguous view, and from a src that is a view of the target
    base, tbase = pair(rng, (5, 8), "float32")
    view, tview = base[:, 1::2], tbase[:, 1::2]
    getattr(view, name + "_")(1, pf.tensor([[3, 0]] * 5), base[:, :2])
    getattr(tview, name + "_")(1, torch.tensor([[3, 0]] * 5), tbase[:, :2].clone())
    assert_matches(base, tbase, 0, 0, what=name + "_ of a view")


def test_scatter_with_an_empty_index_returns_a_copy():
    x = pf.rand(2, 3)
    r = pf.scatter(x, 0, pf.zeros(0, dtype=pf.int64), pf.rand(2, 3))
    assert r.tolist() == x.tolist() and r.data_ptr() != x.data_ptr()


def test_scatter_value_forms(rng):
    x, tx = pair(rng, (3, 4), "float32")
    i, ti = index_pair(rng, (3, 2), 4)
    expected = torch.scatter(tx, 1, ti, 2.5)
    assert_matches(pf.scatter(x, 1, i, 2.5), expected, 0, 0, what="positional value")
    assert_matches(pf.scatter(x, 1, i, value=2.5), expected, 0, 0, what="value=")
    assert_matches(x.scatter(1, i, value=2.5), expected, 0, 0, what="method value=")
    y = x.clone()
    y.scatter_(1, i, 2.5)
    assert_matches(y, expected, 0, 0, what="scatter_ value")
    src, tsrc = pair(rng, (3, 4), "float32")
    assert_matches(pf.scatter(input=x, dim=1, index=i, src=src), torch.scatter(tx, 1, ti, tsrc), 0, 0, what="src=")


@pytest.mark.skipif(not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")
def test_compositions_run_on_the_gpu(rng):
    """cat, stack, split, masked_fill, tril, triu and one_hot are built from ops with GPU kernels:
    on the GPU they give the CPU's results without a copy to the host (strict placement)."""
    xv, mv = make_values(rng, (4, 6), "float32"), make_values(rng, (4, 6), "bool")

    def put(t, key, value):
        t[key] = value
        return t

    def run():
        x, m = pf.tensor(xv), pf.tensor(mv)
        return {"cat": pf.cat([x, x[:, :2].to(pf.float16)], 1), "stack": pf.stack([x, x.T.T], 1),
                "split": pf.split(x, [1, 5], 1)[1], "masked_fill": pf.masked_fill(x, m, 1.5),
                "masked_fill_": x.clone().masked_fill_(m, -2), "tril": pf.tril(x, 1), "triu": pf.triu(x.T, -1),
                "one_hot": pf.one_hot(pf.tensor([0, 3, 2]), 5), "x[mask] = 0": put(x.clone(), m, 0.0)}

    expected = run()
    pf.set_device("rocm")
    pf.set_strict_device_placement(True)
    for name, r in run().items():
        assert r.device.startswith("rocm"), name
        np.testing.assert_array_equal(pf_to_numpy(r), pf_to_numpy(expected[name]), err_msg=name)


# ----------------------------------------------------------------- errors


def test_index_errors():
    x = pf.rand(3, 4)
    expect(TypeError, lambda: pf.index_select(x, 0, pf.tensor([0.0])), x, match="int32 or int64.*float32")
    expect(ValueError, lambda: pf.index_select(x, 0, pf.tensor([[0]])), x, match="0-d or 1-D")
    expect(IndexError, lambda: pf.index_select(x, 1, pf.tensor([0, 4, 1])), x,
           match=r"index 4 is out of bounds for dimension 1 with size 4")
    expect(IndexError, lambda: pf.index_select(x, 0, pf.tensor([-1])), x, match="index -1 .*dimension 0 with size 3")
    expect(IndexError, lambda: pf.index_select(x, 2, pf.tensor([0])), x, match="dimension 2 is out of range")
    expect(ValueError, lambda: pf.index_select(pf.tensor(1.0), 0, pf.tensor([0, 0])), match="exactly one")
    expect(TypeError, lambda: pf.gather(x, 0, pf.tensor([[0]], dtype=pf.int16)), x, match="int16")
    expect(ValueError, lambda: pf.gather(x, 1, pf.tensor([0, 1])), x, match="as many dimensions")
    expect(ValueError, lambda: pf.gather(x, 1, pf.zeros(4, 1, dtype=pf.int64)), x, match="larger than the input")
    expect(IndexError, lambda: pf.gather(x, 1, pf.tensor([[0], [9], [1]])), x,
           match="index 9 .*dimension 1 with size 4")


def test_scatter_errors_leave_the_input_unchanged():
    x = pf.rand(3, 4)
    src = pf.rand(2, 4)
    i = pf.tensor([[0, 1, 2, 0], [2, 3, 1, 1]])
    i3 = pf.tensor([[0, 1, 2, 0], [2, 0, 1, 1]])
    expect(IndexError, lambda: x.scatter_(0, i, src), x, src,
           match="index 3 is out of bounds for dimension 0 with size 3")
    expect(IndexError, lambda: x.scatter_add_(0, pf.tensor([[0, -1, 0, 0]]), src), x, src, match="index -1")
    expect(TypeError, lambda: pf.scatter(x, 0, i3, src.to(pf.float64)), x, match="dtype float64")
    expect(TypeError, lambda: pf.scatter_add(x, 0, (i3).to(pf.float32), src), x, match="int32 or int64")
    expect(ValueError, lambda: pf.scatter(x, 0, i3, pf.rand(1, 4)), x, match="larger than src")
    expect(ValueError, lambda: pf.scatter(x, 0, pf.zeros(2, 5, dtype=pf.int64), pf.rand(2, 5)), x,
           match="larger than the input")
    expect(ValueError, lambda: pf.scatter(x, 0, pf.zeros(2, dtype=pf.int64), src), x, match="as many dimensions")
    expect(TypeError, lambda: pf.scatter(x, 0, i3), x, match="exactly one of src")
    expect(TypeError, lambda: pf.scatter(x, 0, i3, src=src, value=1.0), x, match="exactly one of src")
    e = pf.zeros(3).expand(2, 3)
    expect(ValueError, lambda: e.scatter_(1, pf.tensor([[0], [1]]), 1.0), match="share memory")


def test_embedding_and_one_hot_errors():
    w = pf.rand(5, 3)
    expect(ValueError, lambda: pf.embedding(pf.tensor([0]), pf.rand(5)), match="2-D")
    expect(TypeError, lambda: pf.embedding(pf.tensor([0.0]), w), w, match="int32 or int64")
    expect(IndexError, lambda: pf.embedding(pf.tensor([[1, 5]]), w), w, match="index 5 is out of bounds.*size 5")
    expect(ValueError, lambda: pf.embedding(pf.tensor([1]), w, padding_idx=5), w, match="padding_idx 5")
    expect(TypeError, lambda: pf.one_hot(pf.tensor([1.0])), match="int64")
    expect(IndexError, lambda: pf.one_hot(pf.tensor([1, -2]), 3), match="class value -2")
    expect(IndexError, lambda: pf.one_hot(pf.tensor([1, 3]), 3), match="class value 3 .*num_classes 3")
    expect(ValueError, lambda: pf.one_hot(pf.zeros(0, dtype=pf.int64)), match="empty")
    expect(ValueError, lambda: pf.one_hot(pf.tensor([1]), -2), match="num_classes")


def test_mask_and_triangle_errors():
    x = pf.rand(3, 4)
    expect(TypeError, lambda: pf.masked_fill(x, pf.tensor([1, 0, 1, 0]), 0.0), x, match="bool")
    expect(ValueError, lambda: pf.masked_fill(x, pf.tensor([True, False]), 0.0), x, match="masked_fill")
    expect(ValueError, lambda: x.masked_fill(x > 0.5, pf.tensor([1.0])), x, match="0-d tensor")
    expect(ValueError, lambda: x[0:1].masked_fill_(x > 0.5, 0.0), x, match="does not broadcast")
    expect(ValueError, lambda: pf.tril(pf.rand(4)), match="at least 2 dimensions")
    expect(ValueError, lambda: pf.triu(pf.tensor(1.0)), match="at least 2 dimensions")


def test_join_and_split_errors():
    a, b = pf.rand(2, 3), pf.rand(3, 3)
    expect(ValueError, lambda: pf.cat([]), match="non-empty")
    expect(ValueError, lambda: pf.cat([a, pf.tensor(1.0)]), a, match="0-d tensor")
    expect(ValueError, lambda: pf.cat([a, b], dim=1), a, b, match=r"except in dimension 1.*\[2, 3\].*\[3, 3\]")
    expect(ValueError, lambda: pf.cat([a, pf.rand(2)]), a, match="same number of dimensions")
    expect(IndexError, lambda: pf.cat([a, a], dim=2), a, match="dimension 2 is out of range")
    expect(TypeError, lambda: pf.cat([a, 1.0]), a)
    expect(ValueError, lambda: pf.stack([a, b]), a, b, match=r"same shape.*\[3, 3\] at entry 1")
    expect(ValueError, lambda: pf.stack([]), match="non-empty")
    expect(IndexError, lambda: pf.stack([a, a], dim=3), a)
    expect(ValueError, lambda: pf.split(a, [1, 2]), a, match="must sum to 2")
    expect(ValueError, lambda: pf.split(a, [3, -1]), a, match="non-negative")
    expect(ValueError, lambda: pf.split(a, 0), a, match="split_size can only be 0")
    expect(ValueError, lambda: pf.split(a, -2), a, match="non-negative")
    expect(ValueError, lambda: pf.split(pf.tensor(1.0), 1), match="at least 1 dimension")
    expect(TypeError, lambda: pf.split(a, 1.5), a)
    expect(ValueError, lambda: pf.chunk(a, 0), a, match="chunks must be positive")
    expect(ValueError, lambda: pf.chunk(pf.tensor(1.0), 1), match="at least 1 dimension")


# Several advanced keys (tensors, lists, NumPy arrays, masks) in one index: PyTorch's
# result shapes (the broadcast keys replace adjacent indexed dims, else lead), reads and writes.
_MULTI_KEYS = [
    lambda k: k([0, 1]),
    lambda k: k(np.array([1, 0])),
    lambda k: (slice(None), k([0, 2])),
    lambda k: (0, k([0, 2]), k([1, 3])),
    lambda k: (Ellipsis, k([1, 0])),
    lambda k: (0, slice(None), k([1, 2])),
    lambda k: (k([0, 1]), slice(None), k([1, 2])),
    lambda k: (slice(None), k([0, 1]), k([1, 2])),
    lambda k: (slice(None), k([[0], [1]]), k([1, 2])),
    lambda k: (k([0, 1]), Ellipsis, k([1, 2])),
    lambda k: (None, k([0, 1]), None, k([1, 2])),
    lambda k: (k([True, False]), k([1, 2])),
    lambda k: (k([-1, 0]), k([-2, 1])),
    lambda k: (k([]),),
    lambda k: (slice(None), k(np.array([[0, 1], [2, 0]])), slice(1, 3), k([[1], [0]])),
    lambda k: (k(np.array([[True, False, True], [False, True, True]])),),
    lambda k: (k(np.array([[True, False, True], [False, True, True]])), k([0, 1, 3, 2])),
    lambda k: (k([1, 1, 0]), k([2, 2, 1])),  # repeated positions: reads repeat, writes pick one
]


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("case", range(len(_MULTI_KEYS)))
@pytest.mark.parametrize("as_tensor", [False, True], ids=["lists", "tensors"])
def test_advanced_indexing_with_several_keys(case, as_tensor, device, rng):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    values = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    x, t = pf.tensor(values, device=device), torch.tensor(values)

    def pf_key(v):
        if not as_tensor or isinstance(v, np.ndarray):
            return v
        return pf.tensor(v, device=device, dtype=pf.int64 if np.asarray(v).size == 0 else None)

    def torch_key(v):
        return torch.tensor(np.asarray(v), dtype=torch.int64 if np.asarray(v).size == 0 else None)

    pkey, tkey = _MULTI_KEYS[case](pf_key), _MULTI_KEYS[case](torch_key)
    expected = t[tkey]
    got = x[pkey]
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(pf_to_numpy(got), expected.detach().numpy())
    if case == len(_MULTI_KEYS) - 1:
        return  # duplicate positions: which write lands is unspecified, in PyTorch as here
    new = rng.standard_normal(tuple(expected.shape)).astype(np.float32)
    x[pkey] = pf.tensor(new, device=device)
    t[tkey] = torch.tensor(new)
    np.testing.assert_array_equal(pf_to_numpy(x), t.detach().numpy())
    x[pkey] = -3.5
    t[tkey] = -3.5
    np.testing.assert_array_equal(pf_to_numpy(x), t.detach().numpy())


def test_advanced_indexing_writes_through_views_and_gradients(rng):
    values = rng.standard_normal((4, 6)).astype(np.float32)
    base, tbase = pf.tensor(values), torch.tensor(values)
    view, tview = base[:, 1:5].T, tbase[:, 1:5].T  # non-contiguous: written through a copy
    view[[0, 3], [1, 2]] = 9.0
    tview[[0, 3], [1, 2]] = 9.0
    np.testing.assert_array_equal(base.detach().numpy(), tbase.detach().numpy())
    w = pf.tensor(values, requires_grad=True)
    tw = torch.tensor(values, requires_grad=True)
    g = rng.standard_normal((3,)).astype(np.float32)
    w[[0, 2, 0], [1, 5, 1]].backward(pf.tensor(g))
    tw[[0, 2, 0], [1, 5, 1]].backward(torch.tensor(g))
    np.testing.assert_allclose(w.grad.detach().numpy(), tw.grad.detach().numpy(), rtol=1e-6)


def test_tensor_key_errors():
    x = pf.rand(3, 4)
    expect(IndexError, lambda: x[pf.tensor([1.0])], x, match="int64, int32 or bool")
    expect(IndexError, lambda: x[pf.tensor([1], dtype=pf.int16)], x, match="int16")
    expect(IndexError, lambda: x[pf.tensor([3])], x, match="index 3 is out of bounds for dimension 0 with size 3")
    expect(IndexError, lambda: x[:, pf.tensor([-5])], x, match="index -5 .*dimension 1 with size 4")
    expect(IndexError, lambda: x[pf.tensor([True, False])], x, match="shape of the mask")
    expect(IndexError, lambda: x[0, pf.zeros(4, 1, dtype=pf.bool)], x, match="too many indices")
    expect(IndexError, lambda: x[pf.zeros(3, 4, 1, dtype=pf.bool)], x, match="too many indices")
    expect(IndexError, lambda: x[pf.tensor([0]), pf.tensor([4])], x, match="index 4 is out of bounds for dimension 1")
    expect(IndexError, lambda: x[[0, 1], [[0], [-5]]], x, match="index -5 is out of bounds for dimension 1")
    expect(IndexError, lambda: x[[0, 1], [0, 1, 2]], x, match=r"could not be broadcast together with shapes \[2\], \[3\]")
    expect(IndexError, lambda: x[[0.5]], x, match="int64, int32 or bool")
    expect(pf.NotSupportedError, lambda: x[True, [0, 1]], x, match="0-d bool")
    expect(IndexError, lambda: x[pf.tensor([1, 0, 1], dtype=pf.uint8)], x, match="uint8")

    def put(key, value):
        def f():
            x[key] = value
        return f

    expect(ValueError, put(pf.tensor([0, 1]), pf.rand(3, 4)), x, match="cannot be broadcast")
    expect(ValueError, put(x > 2.0, pf.rand(2)), x, match="cannot be broadcast")  # no true entries
    expect(IndexError, put(pf.tensor([7]), 1.0), x, match="index 7")
    expect(IndexError, put(pf.tensor([True]), 1.0), x, match="shape of the mask")


# ----------------------------------------------------------------- 64-bit indexing


@needs_free_memory(5)
def test_past_int32_indexing():
    t = marked_past_int32()
    far = pf.tensor([N - 1, 2**31 + 3, 0])
    assert pf.index_select(t, 0, far).tolist() == [7, 5, 0]
    assert pf.gather(t, 0, far).tolist() == [7, 5, 0]
    assert t[far].tolist() == [7, 5, 0]
    assert t[pf.tensor([-1, -13])].tolist() == [7, 5]  # negative positions count from the end
    assert t[pf.tensor([-1, -13], dtype=pf.int32)].tolist() == [7, 5]  # int32 keys into a dim past 2^31
    t.scatter_(0, pf.tensor([N - 2]), 9)
    t.scatter_add_(0, pf.tensor([N - 1, N - 1]), pf.tensor([1, 2], dtype=pf.uint8))
    t[pf.tensor([N - 3])] = 4
    assert t[N - 3 :].tolist() == [4, 9, 10]
    m = t.view(2, N // 2)  # a row stride past 2^31
    assert pf.index_select(m, 1, pf.tensor([N // 2 - 1])).tolist() == [[0], [10]]
    assert pf.gather(m, 1, pf.tensor([[0], [N // 2 - 2]])).tolist() == [[0], [9]]
    tail = t[2**31 :]  # views whose offset is past 2^31
    assert pf.cat([tail[:4], t[-3:]]).tolist() == [0, 0, 0, 5, 4, 9, 10]
    assert pf.masked_fill(tail, tail > 4, 1).tolist()[-3:] == [4, 1, 1]
    assert pf.embedding(pf.tensor([1]), m[:, -3:]).tolist() == [[4, 9, 10]]
    tail[tail > 8] = 2
    assert t[-3:].tolist() == [4, 2, 2] and t[2**31 + 3].item() == 5


@pytest.mark.parametrize("name,args", [("unsqueeze_", (1,)), ("unsqueeze_", (-1,)), ("squeeze_", ()),
                                       ("squeeze_", (0,)), ("transpose_", (0, 2)), ("swapdims_", (1, 0)),
                                       ("swapaxes_", (2, 1))])
def test_in_place_shape_ops_as_torch(name, args, device, rng):
    values = rng.standard_normal((1, 3, 4)).astype(np.float32)
    x, tx = pf.tensor(values, device=device), torch.from_numpy(values.copy())
    assert getattr(x, name)(*args) is x
    getattr(tx, name)(*args)
    assert tuple(x.shape) == tuple(tx.shape) and tuple(x.stride()) == tuple(tx.stride())
    np.testing.assert_array_equal(pf_to_numpy(x), tx.detach().numpy())
    # a tensor with history takes the view's; the gradient reaches the leaf through it
    leaf, tleaf = pf.tensor(values, device=device, requires_grad=True), torch.from_numpy(values.copy()).requires_grad_()
    y, ty = leaf * 2, tleaf * 2
    getattr(y, name)(*args)
    getattr(ty, name)(*args)
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    (y * pf.tensor(g, device=device)).sum().backward()
    (ty * torch.from_numpy(g)).sum().backward()
    np.testing.assert_allclose(pf_to_numpy(leaf.grad), tleaf.grad.detach().numpy())


def test_in_place_shape_ops_on_leaves(device):
    m = pf.ones(2, 3, device=device)
    assert m.t_() is m and tuple(m.shape) == (3, 2)
    w = pf.ones(2, 3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.unsqueeze_(0)
    with pf.no_grad():  # as torch: allowed, the leaf keeps requiring grad
        w.unsqueeze_(0)
    assert tuple(w.shape) == (1, 2, 3) and w.requires_grad and w.is_leaf


@pytest.mark.parametrize("to", ["int32", "int16", "float64", "uint8", "bfloat16", "float32"])
def test_view_dtype_as_torch(to, device, rng):
    values = rng.standard_normal((3, 4)).astype(np.float32)
    x, tx = pf.tensor(values, device=device), torch.from_numpy(values.copy())
    views = [lambda t: t, lambda t: t[1:]]  # and with an offset
    if to in ("int32", "float32"):  # a column-major slice: the last dim keeps stride 1 only with equal sizes
        views.append(lambda t: t.t().contiguous().t()[:, :2])
    for view in views:
        got, want = view(x).view(getattr(pf, to)), view(tx).view(getattr(torch, to))
        assert tuple(got.shape) == tuple(want.shape) and tuple(got.stride()) == tuple(want.stride())
        assert got.dtype == getattr(pf, to) and got.device.type == device
        mine = np.ascontiguousarray(pf_to_numpy(got.to(pf.float32) if to == "bfloat16" else got))
        theirs = np.ascontiguousarray((want.float() if to == "bfloat16" else want).detach().numpy())
        np.testing.assert_array_equal(mine.view(np.uint8), theirs.view(np.uint8))


def test_view_dtype_shares_memory_and_checks(device):
    x = pf.zeros(2, 2, device=device)
    x.view(pf.int32)[0, 0] = 0x3F800000  # the bits of 1.0
    assert pf_to_numpy(x)[0, 0] == 1.0
    y = pf.ones(2, 2, device=device, requires_grad=True)
    assert not y.view(pf.float32).requires_grad  # no history, as torch
    with pytest.raises(ValueError, match="stride\\(-1\\) must be 1"):
        pf.ones(4, 3, device=device).t().view(pf.int16)
    with pytest.raises(ValueError, match="size\\(-1\\) must be divisible by 2"):
        pf.ones(3, 3, device=device).view(pf.float64)
    with pytest.raises(ValueError, match="0-dim"):
        pf.tensor(1.0, device=device).view(pf.int16)
    np.testing.assert_array_equal(pf_to_numpy(pf.tensor([True, False], device=device).view(pf.uint8)), [1, 0])
