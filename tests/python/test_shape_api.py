"""Function forms of the methods, the shape compositions (flip, roll, tile, diagonal, meshgrid, ...),
the Tensor methods and queries PyTorch code types, creation functions, default dtype, finfo/iinfo,
pf.Size and pf.device (python/pyflame/_shape_api.py, _creation.py, _device.py), against PyTorch on
the CPU, on 'cpu' and 'rocm'."""

import pickle
import warnings

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import PF_DTYPE, TORCH_DTYPE, assert_matches, make_values, pf_to_numpy


def pair(rng, shape, dtype, device, layout="contig"):
    """(pyflame on device, torch) tensors of `shape` holding the same fresh random values; 'T' makes both
    transposed views (non-contiguous)."""
    transposed = layout == "T" and len(shape) >= 2 and shape[0] != shape[-1] and 1 not in (shape[0], shape[-1])
    if transposed:
        shape = (shape[-1],) + tuple(shape[1:-1]) + (shape[0],)
    v = make_values(rng, shape, dtype)
    t = torch.from_numpy(np.array(v, copy=True)).to(TORCH_DTYPE[dtype])
    p = pf.tensor(v, device=device).to(PF_DTYPE[dtype])
    if transposed:
        p, t = p.transpose(0, -1), t.transpose(0, -1)
        assert not p.is_contiguous()
    return p, t


def same(got, want, device, what, tol=0.0):
    """Same structure (tensor, tuple of tensors), values, shapes, dtypes; pyflame results on `device`."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, pf.Tensor), f"{what}: got {type(got).__name__}"
        assert got.device == pf._C._parse_device(device), f"{what}: on {got.device}, expected {device}"
        assert_matches(got, want, tol, tol, what=what)
    else:
        assert isinstance(got, tuple) and len(got) == len(want), f"{what}: {type(got).__name__} of {len(got)}"
        for i, (g, w) in enumerate(zip(got, want)):
            same(g, w, device, f"{what}[{i}]", tol)


# (what, input shape, f(lib, x)): the same call with lib = pf and lib = torch.
SHAPE_CASES = [
    ("reshape", (2, 3, 4), lambda m, x: m.reshape(x, (4, -1))),
    ("permute", (2, 3, 4), lambda m, x: m.permute(x, (2, 0, 1))),
    ("flatten", (2, 3, 4), lambda m, x: m.flatten(x, 1)),
    ("unflatten", (2, 12), lambda m, x: m.unflatten(x, 1, (3, -1))),
    ("unflatten-method", (6, 2), lambda m, x: x.unflatten(0, (2, 3))),
    ("squeeze-tuple", (1, 3, 1), lambda m, x: m.squeeze(x, (0, 1))),
    ("squeeze-method-tuple", (1, 3, 1), lambda m, x: x.squeeze((0, 2))),
    ("squeeze-empty-tuple", (1, 3, 1), lambda m, x: x.squeeze(())),
    ("unsqueeze", (2, 3), lambda m, x: m.unsqueeze(x, -1)),
    ("transpose", (2, 3, 4), lambda m, x: m.transpose(x, 0, 2)),
    ("t", (2, 3), lambda m, x: m.t(x)),
    ("t-1d", (3,), lambda m, x: x.t()),
    ("T", (2, 3), lambda m, x: x.T),
    ("mT", (2, 3, 4), lambda m, x: x.mT),
    ("mH", (2, 3, 4), lambda m, x: x.mH),
    ("H", (3, 4), lambda m, x: x.H),
    ("narrow", (4, 5), lambda m, x: m.narrow(x, 1, 1, 3)),
    ("narrow-negative-start", (4, 5), lambda m, x: x.narrow(0, -3, 2)),
    ("narrow-tensor-start", (4, 5), lambda m, x: x.narrow(1, m.tensor(2), 3)),
    ("unbind", (3, 2), lambda m, x: m.unbind(x, 1)),
    ("ravel", (2, 3, 4), lambda m, x: m.ravel(x.transpose(0, 2))),
    ("ravel-method", (3, 4), lambda m, x: x.ravel()),
    ("tensor_split-sections", (7, 3), lambda m, x: m.tensor_split(x, 3)),
    ("tensor_split-indices", (3, 7), lambda m, x: m.tensor_split(x, [5, 2, 9, -2], dim=1)),
    ("tensor_split-0d-tensor", (7,), lambda m, x: x.tensor_split(m.tensor(2))),
    ("tensor_split-1d-tensor", (2, 6), lambda m, x: x.tensor_split(m.tensor([1, 4]), -1)),
    ("concat", (2, 3), lambda m, x: m.concat([x, x * 2], dim=1)),
    ("concatenate", (2, 3), lambda m, x: m.concatenate((x, x), 0)),
    ("unbind-method", (3, 2), lambda m, x: x.unbind()),
    ("clone", (2, 3), lambda m, x: m.clone(x)),
    ("movedim", (2, 3, 4, 5), lambda m, x: m.movedim(x, (0, 1), (3, 0))),
    ("movedim-int", (2, 3, 4), lambda m, x: x.movedim(0, -1)),
    ("moveaxis", (2, 3, 4), lambda m, x: m.moveaxis(x, 2, 0)),
    ("swapaxes", (2, 3, 4), lambda m, x: m.swapaxes(x, 0, 2)),
    ("swapdims", (2, 3, 4), lambda m, x: x.swapdims(1, 2)),
    ("flip", (2, 3, 4), lambda m, x: m.flip(x, (0, 2))),
    ("flip-method-args", (2, 3, 4), lambda m, x: x.flip(1, -1)),
    ("fliplr", (3, 4), lambda m, x: m.fliplr(x)),
    ("flipud", (3, 4), lambda m, x: m.flipud(x)),
    ("roll", (3, 5), lambda m, x: m.roll(x, 2, 1)),
    ("roll-negative", (3, 5), lambda m, x: x.roll(-7, 0)),
    ("roll-dims", (3, 4, 5), lambda m, x: m.roll(x, (1, -2), (0, 2))),
    ("roll-flat", (3, 4), lambda m, x: m.roll(x, 5)),
    ("repeat_interleave-int", (2, 3), lambda m, x: m.repeat_interleave(x, 2)),
    ("repeat_interleave-dim", (2, 3), lambda m, x: m.repeat_interleave(x, 3, dim=1)),
    ("repeat_interleave-tensor", (3, 2), lambda m, x: m.repeat_interleave(x, m.tensor([2, 0, 1]), dim=0)),
    ("repeat_interleave-method", (3, 2), lambda m, x: x.repeat_interleave(2, dim=-1)),
    ("tile", (2, 3), lambda m, x: m.tile(x, (2,))),
    ("tile-more-dims", (2, 3), lambda m, x: m.tile(x, (2, 1, 3))),
    ("tile-method", (2, 3), lambda m, x: x.tile(2, 2)),
    ("repeat", (2, 3), lambda m, x: x.repeat(2, 1, 3)),
    ("repeat-tuple", (2, 3), lambda m, x: x.repeat((3, 2))),
    ("diag-matrix", (4, 5), lambda m, x: m.diag(x)),
    ("diag-matrix-offset", (4, 5), lambda m, x: m.diag(x, 2)),
    ("diag-matrix-negative", (4, 5), lambda m, x: m.diag(x, -1)),
    ("diag-vector", (4,), lambda m, x: m.diag(x)),
    ("diag-vector-offset", (4,), lambda m, x: m.diag(x, 1)),
    ("diag-vector-negative", (4,), lambda m, x: x.diag(-2)),
    ("diagonal", (3, 4, 5), lambda m, x: m.diagonal(x)),
    ("diagonal-dims", (3, 4, 5), lambda m, x: m.diagonal(x, offset=-1, dim1=2, dim2=0)),
    ("diagonal-method", (4, 3), lambda m, x: x.diagonal(1)),
    ("diagonal-empty", (3, 4), lambda m, x: x.diagonal(5)),
    ("diag_embed", (2, 3), lambda m, x: m.diag_embed(x)),
    ("diag_embed-offset-dims", (2, 3), lambda m, x: m.diag_embed(x, offset=1, dim1=0, dim2=2)),
    ("diag_embed-negative", (2, 3), lambda m, x: x.diag_embed(-2)),
    ("broadcast_to", (3, 1), lambda m, x: m.broadcast_to(x, (2, 3, 4))),
    ("broadcast_to-method", (3, 1), lambda m, x: x.broadcast_to((3, 5))),
    ("broadcast_tensors", (3, 1), lambda m, x: m.broadcast_tensors(x, x.reshape(1, 3, 1).expand(2, 3, 4))),
    ("atleast_1d", (), lambda m, x: m.atleast_1d(x)),
    ("atleast_2d", (3,), lambda m, x: m.atleast_2d(x)),
    ("atleast_3d-1d", (3,), lambda m, x: m.atleast_3d(x)),
    ("atleast_3d-2d", (2, 3), lambda m, x: m.atleast_3d(x)),
    ("atleast_2d-several", (3,), lambda m, x: m.atleast_2d(x, x[0])),
    ("hstack-1d", (3,), lambda m, x: m.hstack([x, x[:2]])),
    ("hstack-2d", (3, 2), lambda m, x: m.hstack((x, x[:, :1]))),
    ("vstack", (3,), lambda m, x: m.vstack([x, x])),
    ("row_stack", (2, 3), lambda m, x: m.row_stack([x, x[:1]])),
    ("dstack", (3,), lambda m, x: m.dstack([x, x])),
    ("column_stack", (3,), lambda m, x: m.column_stack([x, x.reshape(3, 1).expand(3, 2)])),
    ("meshgrid-ij", (3,), lambda m, x: m.meshgrid(x, x[:2], indexing="ij")),
    ("meshgrid-xy", (3,), lambda m, x: m.meshgrid(x, x[:2], x[:1], indexing="xy")),
    ("meshgrid-list", (3,), lambda m, x: m.meshgrid([x, x[1:]], indexing="xy")),
    ("cartesian_prod", (3,), lambda m, x: m.cartesian_prod(x, x[:2])),
    ("cartesian_prod-three", (3,), lambda m, x: m.cartesian_prod(x, x[:2], x[1:])),
    ("take_along_dim", (3, 4), lambda m, x: m.take_along_dim(x, m.tensor([[0, 3], [1, 1], [2, 0]]), 1)),
    ("take_along_dim-broadcast", (3, 4), lambda m, x: m.take_along_dim(x, m.tensor([[2], [0]]).reshape(1, 2), 1)),
    ("take_along_dim-flat", (3, 4), lambda m, x: m.take_along_dim(x, m.tensor([0, 11, 5]))),
    ("take_along_dim-method", (3, 4), lambda m, x: x.take_along_dim(m.tensor([[2, 1, 0, 1]]), dim=0)),
    ("rot90", (2, 3), lambda m, x: m.rot90(x)),
    ("rot90-k2", (2, 3, 4), lambda m, x: m.rot90(x, 2, (0, 2))),
    ("rot90-k3", (2, 3), lambda m, x: m.rot90(x, 3)),
    ("rot90-k-neg", (2, 3), lambda m, x: x.rot90(-1, [1, 0])),
    ("expand_as", (3, 1), lambda m, x: x.expand_as(m.ones(2, 3, 4))),
    ("view_as", (2, 6), lambda m, x: x.contiguous().view_as(m.ones(3, 4))),
    ("reshape_as", (2, 6), lambda m, x: x.reshape_as(m.ones(4, 3))),
]
# torch.take_along_dim(dim=None) views its input as 1-d, so raises for non-contiguous inputs; pyflame reshapes.
READS_ANY_LAYOUT = {"take_along_dim-flat"}


@pytest.mark.parametrize("layout", ["contig", "T"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("case", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_functions(case, dtype, layout, device, rng):
    what, shape, f = case
    x, tx = pair(rng, shape, dtype, device, layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation of .T / .H outside matrices
        try:
            want = f(torch, tx)
        except RuntimeError:  # a view of a layout that has none: pyflame raises too, or reads it as any layout
            if what not in READS_ANY_LAYOUT:
                with pytest.raises((ValueError, RuntimeError)):
                    f(pf, x)
                return
            want = f(torch, tx.contiguous())
    same(f(pf, x), want, device, f"{what} {dtype} {layout}")


@pytest.mark.parametrize("case", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_functions_gradients(case, device, rng):
    """Gradients flow through each composition as through PyTorch's op."""
    what, shape, f = case
    v = make_values(rng, shape, "float32")
    x = pf.tensor(v, device=device, requires_grad=True)
    tx = torch.tensor(v, requires_grad=True)
    got, want = f(pf, x), f(torch, tx)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    loss, tloss = 0, 0
    for g, w in zip(got, want):
        weight = make_values(rng, tuple(w.shape), "float32")
        loss = loss + (g * pf.tensor(weight, device=device)).sum()
        tloss = tloss + (w * torch.tensor(weight)).sum()
    loss.backward()
    tloss.backward()
    same(x.grad, tx.grad, device, f"{what} d/dx", 1e-6)


def test_views_share_memory(device, rng):
    """The view functions write through to their input, as PyTorch's."""
    x, tx = pair(rng, (3, 4), "float32", device)
    for f in (lambda m, a: m.diagonal(a), lambda m, a: m.narrow(a, 1, 1, 2), lambda m, a: a.mT,
              lambda m, a: m.movedim(a, 0, 1), lambda m, a: m.unbind(a)[1], lambda m, a: m.diagonal(a.t(), -1),
              lambda m, a: m.meshgrid(a[0], indexing="ij")[0]):
        f(pf, x).fill_(7.5)
        f(torch, tx).fill_(7.5)
        same(x, tx, device, "write through a view")


def test_trace(device, rng):
    for dtype in ("float32", "int32", "int64", "float64"):
        x, tx = pair(rng, (4, 3), dtype, device)
        same(pf.trace(x), torch.trace(tx), device, f"trace {dtype}", 1e-5)
        same(x.trace(), tx.trace(), device, f"Tensor.trace {dtype}", 1e-5)


def test_repeat_interleave_counts_only(device):
    same(pf.repeat_interleave(pf.tensor([2, 0, 3], device=device)), torch.repeat_interleave(torch.tensor([2, 0, 3])),
         device, "repeat_interleave(counts)")


def test_shape_errors(device, rng):
    x, _ = pair(rng, (2, 3, 4), "float32", device)
    for fn, exc in [(lambda: x.t(), (ValueError, RuntimeError)), (lambda: x[0, 0].mT, (ValueError, RuntimeError)),
                    (lambda: x.narrow(1, 2, 2), (ValueError, RuntimeError)), (lambda: x.narrow(5, 0, 1), IndexError),
                    (lambda: x.repeat(2), (ValueError, RuntimeError)), (lambda: pf.movedim(x, (0, 1), 2), ValueError),
                    (lambda: pf.roll(x, (1, 2)), ValueError), (lambda: pf.roll(x[0, 0, 0], 1, 0), IndexError),
                    (lambda: pf.roll(x, (1, 2), (0,)), ValueError), (lambda: pf.diagonal(x, 0, 1, -2), ValueError),
                    (lambda: pf.flip(x, (0, 0)), ValueError), (lambda: pf.trace(x), (ValueError, RuntimeError)),
                    (lambda: pf.meshgrid(x, indexing="ij"), ValueError),
                    (lambda: pf.meshgrid(x[0, 0], indexing="yx"), ValueError),
                    (lambda: pf.broadcast_tensors(x, x[:, :2]), ValueError),
                    (lambda: pf.repeat_interleave(x[0, 0], pf.tensor([1, 2], device=device)), ValueError)]:
        with pytest.raises(exc):
            fn()


def test_meshgrid_warns_without_indexing(device):
    a = pf.tensor([1, 2], device=device)
    with pytest.warns(UserWarning, match="indexing"):
        grids = pf.meshgrid(a, a[:1])
    same(grids, torch.meshgrid(torch.tensor([1, 2]), torch.tensor([1]), indexing="ij"), device, "meshgrid default")


# ---------------------------------------------------------------- queries and small methods

def test_queries(device, rng):
    for dtype in ("float32", "float16", "bfloat16", "int64", "uint8", "bool"):
        x, tx = pair(rng, (2, 3), dtype, device)
        assert pf.is_floating_point(x) == torch.is_floating_point(tx) == x.is_floating_point()
        assert x.is_complex() is False and pf.is_complex(x) is False
        assert x.element_size() == x.itemsize == tx.itemsize
        assert x.nbytes == tx.nbytes and x.nelement() == tx.nelement() == pf.numel(x) == 6
        assert x.ndimension() == 2 and x.dim() == 2 and len(x) == 2
    x, tx = pair(rng, (2, 3), "float32", device)
    assert pf.is_tensor(x) and not pf.is_tensor(tx) and not pf.is_tensor([1.0])
    assert x.is_cuda is False
    assert x.is_rocm == (device == "rocm") and x.is_cpu == (device == "cpu")
    assert x.tolist() == tx.tolist() and isinstance(x.tolist()[0][0], float)


@pytest.mark.parametrize("value", [3.75, -2.0, 0.0, 7])
def test_one_element_conversions(value, device):
    x, tx = pf.tensor([value], device=device), torch.tensor([value])
    assert float(x) == float(tx) and int(x) == int(tx) and bool(x) == bool(tx)
    assert pf.is_nonzero(x) == torch.is_nonzero(tx) == x.is_nonzero()
    assert x.tolist() == tx.tolist()
    if isinstance(value, int):
        assert [10, 20, 30, 40, 50, 60, 70, 80][pf.tensor(value, device=device)] == 80
    else:
        with pytest.raises(TypeError):
            [1, 2][pf.tensor(value, device=device)]


def test_one_element_conversion_errors(device):
    x = pf.tensor([1.0, 2.0], device=device)
    for fn in (lambda: float(x), lambda: int(x), lambda: bool(x), lambda: pf.is_nonzero(x),
               lambda: pf.is_nonzero(pf.tensor([], device=device))):
        with pytest.raises((ValueError, RuntimeError)):
            fn()
    with pytest.raises(TypeError):
        len(pf.tensor(1.0, device=device))


def test_size(device, rng):
    x, tx = pair(rng, (2, 3, 4), "float32", device)
    assert isinstance(x.shape, pf.Size) and isinstance(x.size(), pf.Size) and isinstance(x.shape, tuple)
    assert x.shape == tx.shape == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert isinstance(x.shape[1:], pf.Size) and x.shape[1:] == (3, 4) and x.shape[0] == 2
    assert isinstance(x.shape + (5,), pf.Size) and x.shape.numel() == tx.shape.numel() == 24
    assert pf.Size([2, 3]) == (2, 3) and repr(pf.Size([2, 3])) == "pyflame.Size([2, 3])"
    assert pickle.loads(pickle.dumps(x.shape)) == x.shape
    assert pf.broadcast_shapes((2, 1), (3,), 1) == torch.broadcast_shapes((2, 1), (3,), 1)
    assert pf.zeros(x.shape, device=device).shape == (2, 3, 4)


# ---------------------------------------------------------------- type, type_as, new_*, .data

TYPE_NAMES = [("float32", "FloatTensor"), ("float64", "DoubleTensor"), ("float16", "HalfTensor"),
              ("bfloat16", "BFloat16Tensor"), ("int64", "LongTensor"), ("int32", "IntTensor"),
              ("int16", "ShortTensor"), ("int8", "CharTensor"), ("uint8", "ByteTensor"), ("bool", "BoolTensor")]


@pytest.mark.parametrize("dtype,name", TYPE_NAMES)
def test_type(dtype, name, device, rng):
    x, tx = pair(rng, (2, 3), "float32", device)
    prefix = "pyflame." if device == "cpu" else "pyflame.rocm."
    converted = x.type(prefix + name)
    assert converted.type() == prefix + name and tx.type("torch." + name).type() == "torch." + name
    same(converted, tx.type("torch." + name), device, f"type('{name}')")
    same(x.type("torch." + name) if device == "cpu" else x.type("torch.cuda." + name), tx.type("torch." + name),
         device, f"type('torch.{name}')")
    same(x.type(PF_DTYPE[dtype]), tx.type(TORCH_DTYPE[dtype]), device, f"type({dtype})")
    assert x.type(pf.float32) is x and x.type(prefix + "FloatTensor") is x
    with pytest.raises(ValueError):
        x.type("pyflame.ComplexTensor")


def test_type_as(device, rng):
    x, tx = pair(rng, (2, 3), "float32", device)
    y, ty = pair(rng, (1,), "int16", "cpu")
    same(x.type_as(y), tx.type_as(ty), "cpu", "type_as")
    same(y.type_as(x), ty.type_as(tx), device, "type_as moves to the other's device too")


def test_new_factories(device, rng):
    for dtype in ("float64", "int32", "float16"):
        x, tx = pair(rng, (2,), dtype, device)
        for f in (lambda a: a.new_zeros(2, 3), lambda a: a.new_zeros((2, 3)), lambda a: a.new_ones([3]),
                  lambda a: a.new_full((2, 2), 3), lambda a: a.new_full((2,), 2.5, dtype=TORCH_DTYPE["float32"]
                                                                       if a is tx else pf.float32),
                  lambda a: a.new_tensor([1.5, -2.0]), lambda a: a.new_tensor([[1, 2]]),
                  lambda a: a.new_ones(2, dtype=TORCH_DTYPE["int64"] if a is tx else pf.int64)):
            same(f(x), f(tx), device, f"new_* of {dtype}")
        e = x.new_empty(4, 5)
        assert e.shape == (4, 5) and e.dtype == x.dtype and e.device == x.device
    x = pf.ones(2, device=device)
    assert not x.new_zeros(2).requires_grad and x.new_ones(2, requires_grad=True).requires_grad
    assert x.new_zeros(2, device="cpu").device == "cpu"


def test_data(device, rng):
    x = pf.tensor(make_values(rng, (2, 3), "float32"), device=device, requires_grad=True)
    d = x.data
    assert not d.requires_grad and d.shape == x.shape
    d[0, 0] = 5.0  # the same memory
    assert x[0, 0].item() == 5.0
    v = make_values(rng, (2, 3), "float32")
    ident = id(x)
    x.data = pf.tensor(v, device=device)  # allowed on a leaf that requires grad, outside autograd
    np.testing.assert_array_equal(pf_to_numpy(x), v)
    assert x.requires_grad and x.grad_fn is None and id(x) == ident
    x.data = x.data.flip(0)  # a right-hand side made from x itself
    np.testing.assert_array_equal(pf_to_numpy(x), v[::-1])
    sq = pf.tensor(make_values(rng, (3, 3), "float32"), device=device)
    before = pf_to_numpy(sq)
    sq.data = sq.t()  # x takes y's memory and view, as PyTorch
    np.testing.assert_array_equal(pf_to_numpy(sq), before.T)
    x.data = pf.zeros(5, dtype=pf.float64, device=device)  # another shape and dtype: PyTorch's rebinding
    assert x.shape == (5,) and x.dtype == pf.float64 and x.requires_grad
    with pytest.raises(TypeError):
        x.data = [1.0]


# ---------------------------------------------------------------- in-place random fills

def test_uniform_normal(device):
    g = pf.Generator().manual_seed(3)
    x = pf.empty(20000, device=device)
    assert x.uniform_(-2.0, 3.0, generator=g) is x
    v = pf_to_numpy(x)
    assert v.min() >= -2.0 and v.max() < 3.0 and abs(v.mean() - 0.5) < 0.05 and abs(v.std() - 5 / 12 ** 0.5) < 0.05
    again = pf.empty(20000, device=device).uniform_(-2.0, 3.0, generator=pf.Generator().manual_seed(3))
    np.testing.assert_array_equal(pf_to_numpy(again), v)
    assert x.normal_(1.5, 0.5) is x
    v = pf_to_numpy(x)
    assert abs(v.mean() - 1.5) < 0.02 and abs(v.std() - 0.5) < 0.02
    h = pf.empty(1000, dtype=pf.float16, device=device).uniform_(**{"from": 1.0, "to": 2.0})
    assert h.dtype == pf.float16 and 1.0 <= pf_to_numpy(h).min() and pf_to_numpy(h).max() <= 2.0
    for fn in (lambda: pf.zeros(3, dtype=pf.int64).uniform_(), lambda: x.normal_(0.0, -1.0),
               lambda: x.uniform_(2.0, 1.0)):
        with pytest.raises((TypeError, ValueError, RuntimeError)):
            fn()
    leaf = pf.zeros(3, device=device, requires_grad=True)
    with pytest.raises((pf.AutogradError, RuntimeError)):
        leaf.uniform_()
    with pf.no_grad():
        leaf.uniform_()


def test_bernoulli_exponential(device):
    x = pf.empty(20000, device=device)
    assert x.bernoulli_(0.3) is x
    v = pf_to_numpy(x)
    assert set(np.unique(v)) == {0.0, 1.0} and abs(v.mean() - 0.3) < 0.02
    i = pf.zeros(1000, dtype=pf.int64, device=device).bernoulli_(0.5)
    assert i.dtype == pf.int64 and set(np.unique(pf_to_numpy(i))) == {0, 1}
    assert x.exponential_(2.0) is x
    v = pf_to_numpy(x)
    assert v.min() >= 0 and abs(v.mean() - 0.5) < 0.02


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((5, 3), False), ((7, 3), True), ((3, 5), True),
                                        ((4, 4, 4), False)])
def test_fill_diagonal(shape, wrap, device, rng):
    x, tx = pair(rng, shape, "float32", device)
    assert x.fill_diagonal_(-1.5, wrap=wrap) is x
    tx.fill_diagonal_(-1.5, wrap=wrap)
    same(x, tx, device, f"fill_diagonal_ {shape} wrap={wrap}")


# ---------------------------------------------------------------- creation

def test_as_tensor_shares_numpy_memory(rng):
    a = rng.standard_normal((2, 3))
    t = pf.as_tensor(a, device="cpu")
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0 and t.dtype == pf.float64
    assert pf.as_tensor(t) is t and pf.as_tensor(t, dtype=pf.float64) is t
    assert pf.as_tensor(a, dtype=pf.float32).dtype == pf.float32
    ro = a.copy()
    ro.flags.writeable = False
    assert pf.as_tensor(ro, device="cpu")[0, 0].item() == 42.0


def test_as_tensor(device, rng):
    v = make_values(rng, (2, 3), "int32")
    same(pf.as_tensor(v, device=device), torch.as_tensor(v), device, "as_tensor(ndarray)")
    same(pf.as_tensor([[1.5, 2.0]], device=device), torch.as_tensor([[1.5, 2.0]]), device, "as_tensor(list)")
    same(pf.as_tensor([1, 2], dtype=pf.float64, device=device),
         torch.as_tensor([1, 2], dtype=torch.float64), device, "as_tensor(dtype)")
    x = pf.tensor(v, device=device)
    same(pf.as_tensor(x, dtype=pf.int64), torch.as_tensor(torch.from_numpy(v), dtype=torch.int64), device,
         "as_tensor(tensor, dtype)")


def test_like_factories(device, rng):
    for dtype in ("float32", "float64", "float16"):
        x, tx = pair(rng, (3, 4), dtype, device)
        for fn in ("empty_like", "rand_like", "randn_like"):
            r = getattr(pf, fn)(x)
            assert r.shape == x.shape and r.dtype == x.dtype and r.device == x.device, fn
        r = pf.rand_like(x, dtype=pf.float64)
        assert r.dtype == pf.float64 and 0 <= pf_to_numpy(r).min() and pf_to_numpy(r).max() < 1
        assert pf_to_numpy(pf.randn_like(pf.empty(10000, device=device))).std() == pytest.approx(1, abs=0.05)
    g = pf.Generator().manual_seed(5)
    a = pf.rand_like(pf.empty(4, device=device), generator=g)
    assert pf_to_numpy(a) == pytest.approx(pf_to_numpy(pf.rand(4, generator=pf.Generator().manual_seed(5))))
    for dtype in ("int32", "float32", "int64"):
        x, tx = pair(rng, (500,), dtype, device)
        r = pf.randint_like(x, 3, 10)
        assert r.dtype == x.dtype == PF_DTYPE[dtype] and r.device == x.device and r.shape == x.shape
        v = pf_to_numpy(r)
        assert v.min() == 3 and v.max() == 9 and (v == np.floor(v)).all()
        assert pf_to_numpy(pf.randint_like(x, 4)).max() == 3
        assert torch.randint_like(tx, 3, 10).dtype == TORCH_DTYPE[dtype]


def test_randperm(device):
    for n in (0, 1, 7, 1000):
        p = pf.randperm(n, device=device)
        assert p.dtype == torch.randperm(n).dtype == pf.int64 or p.dtype == pf.int64
        assert p.device == pf._C._parse_device(device) and sorted(pf_to_numpy(p).tolist()) == list(range(n))
    assert pf.randperm(5, dtype=pf.int32, device=device).dtype == pf.int32
    a = pf.randperm(50, generator=pf.Generator().manual_seed(1), device=device)
    b = pf.randperm(50, generator=pf.Generator().manual_seed(1))
    np.testing.assert_array_equal(pf_to_numpy(a), pf_to_numpy(b))  # the same on every device
    assert (pf_to_numpy(a) != np.arange(50)).any()
    with pytest.raises(ValueError):
        pf.randperm(-1)


@pytest.mark.parametrize("args,kw", [((0, 2, 5), {}), ((-1, 1.5, 7), {"base": 2.0}), ((1, 3, 3), {"dtype": "int64"}),
                                     ((2, -2, 4), {"dtype": "float64"}), ((0, 1, 1), {}), ((0, 3, 4), {"base": 3})])
def test_logspace(args, kw, device):
    pkw = {k: PF_DTYPE[v] if k == "dtype" else v for k, v in kw.items()}
    tkw = {k: TORCH_DTYPE[v] if k == "dtype" else v for k, v in kw.items()}
    same(pf.logspace(*args, device=device, **pkw), torch.logspace(*args, **tkw), device, f"logspace{args} {kw}", 1e-6)


@pytest.mark.parametrize("args", [(0, 1, 0.1), (-1.0, 1.0, 0.1), (1, 2.5, 0.5), (0, 1, 0.3), (0.5, 10), (10, 0, -1.5),
                                  (0, 10, 3), (-3, 3), (5,), (2.5,), (0, 1e-3, 1e-4)])
def test_arange(args, device):
    same(pf.arange(*args, device=device), torch.arange(*args), device, f"arange{args}", 1e-6)


def test_factory_forms(device):
    same(pf.zeros(size=(2, 3), device=device), torch.zeros(size=(2, 3)), device, "zeros(size=)")
    same(pf.ones(size=[4], device=device), torch.ones(size=[4]), device, "ones(size=)")
    same(pf.full([2, 3], 1.5, device=device), torch.full([2, 3], 1.5), device, "full(list)")
    same(pf.full((2,), 7, device=device), torch.full((2,), 7), device, "full(int)")
    same(pf.full((2,), True, device=device), torch.full((2,), True), device, "full(bool)")
    for fn in (lambda: pf.tensor([1 + 2j]), lambda: pf.tensor(3j), lambda: pf.full((2,), 1j)):
        with pytest.raises(pf.NotSupportedError, match="complex"):
            fn()


# ---------------------------------------------------------------- default dtype

@pytest.fixture
def default_float64():
    pf.set_default_dtype(pf.float64)
    torch.set_default_dtype(torch.float64)
    yield
    pf.set_default_dtype(pf.float32)
    torch.set_default_dtype(torch.float32)


def test_default_dtype_is_float32():
    assert pf.get_default_dtype() == pf.float32
    assert pf.tensor([1.5]).dtype == pf.float32 and pf.zeros(2).dtype == pf.float32


def test_set_default_dtype(default_float64, device):
    assert pf.get_default_dtype() == pf.float64
    cases = [
        ("tensor", lambda m: m.tensor([1.5, 1e-300])), ("tensor-int", lambda m: m.tensor([1, 2])),
        ("as_tensor", lambda m: m.as_tensor([0.1])), ("zeros", lambda m: m.zeros(2, 3)),
        ("ones", lambda m: m.ones(2)), ("full-float", lambda m: m.full((2,), 0.1)),
        ("full-int", lambda m: m.full((2,), 3)), ("arange-float", lambda m: m.arange(0, 1, 0.1)),
        ("arange-int", lambda m: m.arange(5)), ("linspace", lambda m: m.linspace(0, 1, 7)),
        ("logspace", lambda m: m.logspace(0, 1, 7)), ("eye", lambda m: m.eye(3)),
        ("zeros-explicit", lambda m: m.zeros(2, dtype=m.float32)),
    ]
    for what, f in cases:
        same(f(pf), f(torch), device, f"{what} under float64 default", 1e-12)
    for fn in ("rand", "randn", "empty"):
        assert getattr(pf, fn)(3, device=device).dtype == pf.float64, fn
    assert pf.nn.Linear(2, 3).weight.dtype == pf.float64
    assert pf.finfo().bits == 64


def test_set_default_dtype_errors():
    for bad in (pf.int32, pf.bool, "float64", np.float64):
        with pytest.raises(TypeError):
            pf.set_default_dtype(bad)
    assert pf.get_default_dtype() == pf.float32
    pf.set_default_dtype(pf.bfloat16)
    try:
        assert pf.tensor([1.5]).dtype == pf.bfloat16 and pf.rand(2).dtype == pf.bfloat16
    finally:
        pf.set_default_dtype(pf.float32)


# ---------------------------------------------------------------- finfo / iinfo

@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_finfo(dtype):
    got, want = pf.finfo(PF_DTYPE[dtype]), torch.finfo(TORCH_DTYPE[dtype])
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(got, attr) == getattr(want, attr), attr
        assert type(getattr(got, attr)) is type(getattr(want, attr)), attr
    assert repr(got) == repr(want)
    assert pf.finfo(PF_DTYPE[dtype]) == got


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo(dtype):
    got, want = pf.iinfo(PF_DTYPE[dtype]), torch.iinfo(TORCH_DTYPE[dtype])
    for attr in ("bits", "max", "min", "dtype"):
        assert getattr(got, attr) == getattr(want, attr), attr
    assert repr(got) == repr(want)


def test_info_errors():
    for fn in (lambda: pf.iinfo(pf.bool), lambda: pf.iinfo(pf.float32), lambda: pf.finfo(pf.int32)):
        with pytest.raises(TypeError):
            fn()


# ---------------------------------------------------------------- devices

def test_device_objects():
    d = pf.device("rocm:1")
    assert d.type == "rocm" and d.index == 1 and d == "rocm:1" and str(d) == "rocm:1"
    assert repr(d) == "device(type='rocm', index=1)" and pf.device("rocm", 1) == d
    assert pf.device(2) == "rocm:2"
    c = pf.device("cpu")
    assert c.type == "cpu" and c.index is None and repr(c) == "device(type='cpu')" == repr(torch.device("cpu"))
    r = pf.device("rocm")
    assert r.type == "rocm" and r.index is None
    assert {d: 1}["rocm:1"] == 1 and {"cpu": 2}[c] == 2 and len({d, pf.device("rocm", 1), "rocm:1"}) == 1
    assert pf.device(d) is d and pickle.loads(pickle.dumps(d)) == d
    for bad, exc in [("tpu", ValueError), ("cuda", ValueError), (("rocm:0", 1), ValueError), (("rocm", -1), ValueError),
                     (3.5, TypeError)]:
        with pytest.raises(exc):
            pf.device(*bad) if isinstance(bad, tuple) else pf.device(bad)


def test_tensor_device(device, rng):
    x, _ = pair(rng, (2, 3), "float32", device)
    d = x.device
    assert isinstance(d, pf.device) and d == pf._C._parse_device(device) and d.type == device
    assert d.index == (None if device == "cpu" else 0)
    assert x.to(pf.device("cpu")).device == "cpu"
    assert pf.zeros(2, device=d).device == d and pf.tensor([1.0], device=d).device == d
    assert pf.ones(2, device=pf.device(device)).device == d and pf.randn(2, device=d).device == d
    assert x.to(d).device == d and x.new_zeros(2).device == d
    assert pf.empty_like(x, device=pf.device("cpu")).device == "cpu"


def test_device_objects_where_devices_are_taken(device):
    pf.set_device(pf.device(device))
    assert pf.get_device() == pf._C._parse_device(device)
    assert pf.zeros(2).device == pf._C._parse_device(device)
    assert pf.Generator(device=pf.device(device)) is not None
    assert pf.is_supported("add", pf.device(device))
