"""Every op of the op table x dtype x shape class against PyTorch (CPU)."""

import math

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import (
    ALL_DTYPES,
    FLOAT_DTYPES,
    OP_INFOS,
    OPS,
    PF_DTYPE,
    TORCH_DTYPE,
    TORCH_TO_NAME,
    Arg,
    assert_matches,
    make_pf,
    make_torch,
    make_values,
    params,
    pf_to_numpy,
    tolerance,
)


def _run_sample(op, dtype, s):
    """Run one sample; return None or a failure message."""
    pf_args = [make_pf(a, dtype) if isinstance(a, Arg) else a for a in s.args]
    th_args = [make_torch(a, dtype) if isinstance(a, Arg) else a for a in s.args]
    before = [pf_to_numpy(t) for t in pf_args if isinstance(t, pf.Tensor)]
    what = f"pf.{op.name}{s!r} [{dtype}]"
    expected = op.ref(*th_args, **s.kwargs)
    try:
        actual = op.fn(*pf_args, **s.kwargs)
        if isinstance(expected, tuple):  # several outputs (the norms' backward passes)
            assert isinstance(actual, tuple) and len(actual) == len(expected), f"{what}: {len(expected)} outputs"
            pairs = [(a, e, f"{what} output {i}") for i, (a, e) in enumerate(zip(actual, expected))]
        else:
            pairs = [(actual, expected, what)]
        for a, e, w in pairs:
            rtol, atol = tolerance(op, TORCH_TO_NAME[e.dtype])
            assert_matches(a, e, rtol, atol, what=w)
        after = [pf_to_numpy(t) for t in pf_args if isinstance(t, pf.Tensor)]
        for b, a in zip(before, after):
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: an input tensor was modified")
    except Exception as e:  # noqa: BLE001 - collected and reported together
        return f"{what}: {type(e).__name__}: {e}"
    return None


def _use_device(device, name):
    """Make `device` current for the test, or skip saying why it cannot run there."""
    if device == "rocm":
        if not pf.rocm_is_available():
            pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
        if not pf.is_supported(name, "rocm"):  # a kernel, a composite (linear) or a view
            pytest.skip(f"{name} does not run on the GPU yet (docs/ops.md)")
    pf.set_device(device)


# The device is one more parameter: GPU kernels meet the same samples and references.
@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("name,dtype,cls", params(), ids=lambda v: str(v))
def test_op(name, dtype, cls, device, rng):
    _use_device(device, name)
    op = OPS[name]
    samples = op.sample_inputs(rng, dtype, cls)
    assert samples, f"no samples for {name} {dtype} {cls}"
    if cls == "noncontig":
        # the harness really passes non-contiguous views
        for s in samples:
            ts = [make_pf(a, dtype) for a in s.args if isinstance(a, Arg)]
            assert any(not t.is_contiguous() for t in ts), f"{s!r}: no non-contiguous input"
    failures = [m for m in (_run_sample(op, dtype, s) for s in samples) if m]
    if failures:
        pytest.fail(f"{len(failures)}/{len(samples)} samples failed:\n" + "\n".join(failures), pytrace=False)


# ----------------------------------------------------------------- registry completeness


def test_registry_covers_op_table():
    table = dict(pf.op_table())
    missing = sorted(set(table) - set(OPS))
    assert not missing, f"ops without a registry entry (add them to tests/python/op_registry.py): {missing}"
    stale = sorted(set(OPS) - set(table))
    assert not stale, f"registry entries for ops not in pf.op_table(): {stale}"
    for name, family in table.items():
        assert OPS[name].family == family, f"{name}: table family {family}, registry {OPS[name].family}"
        assert callable(getattr(pf, name)), name


def test_every_op_has_samples(rng):
    for op in OP_INFOS:
        assert op.dtypes and op.shape_classes, op.name
        for dt in op.dtypes:
            n = sum(len(op.sample_inputs(rng, dt, cls)) for cls in op.shape_classes)
            assert n > 0, f"{op.name} {dt}"


def test_has_kernel_cpu():
    """Every op runs on the CPU: a kernel, or (composite ops) its decomposition."""
    for name, family in pf.op_table():
        if family == "VIEW":
            continue
        assert pf.is_supported(name, "cpu"), f"{name} ({family}) does not run on the CPU"


def test_unsupported_dtypes_raise_type_error():
    """Dtypes an op does not support are refused with TypeError, never computed silently."""
    for op in OP_INFOS:
        for dt in set(ALL_DTYPES) - set(op.dtypes):
            x = pf.ones(2, 2, dtype=PF_DTYPE[dt])
            args = {"WHERE": (x > 0, x, x), "MATMUL": (x.unsqueeze(0), x.unsqueeze(0)), "VIEW": (x, 0, 1)}.get(
                op.family, (x, x) if op.family.startswith("BINARY") or op.family == "COMPARE" else (x,))
            if op.name == "einsum":  # the equation first; bool fails where a product is needed, as torch's bmm
                args = ("ij,jk->ik", x, x)
            kwargs = {"min": 0} if op.family == "CLAMP" else {}
            if op.family == "RANDOM":  # factories: the dtype is an argument
                args, kwargs = (2, 2), {"dtype": PF_DTYPE[dt]}
            with pytest.raises(TypeError):
                op.fn(*args, **kwargs)
    assert pf.add(pf.ones(2), 1).tolist() == [2.0, 2.0]  # still working


# ----------------------------------------------------------------- methods


@pytest.mark.parametrize("name", [op.name for op in OP_INFOS if op.method and op.name != "where"])
def test_tensor_method_matches_function(name, rng):
    op = OPS[name]
    dtype = "float32" if "float32" in op.dtypes else op.dtypes[0]
    for s in op.sample_inputs(rng, dtype, "plain")[:3]:
        args = [make_pf(a, dtype) if isinstance(a, Arg) else a for a in s.args]
        f = op.fn(*args, **s.kwargs)
        m = getattr(args[0], op.python_name or name)(*args[1:], **s.kwargs)
        for got, want in zip(m, f) if isinstance(f, tuple) else [(m, f)]:  # ops of several outputs: each
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(pf_to_numpy(got), pf_to_numpy(want))


@pytest.mark.parametrize("name", [op.name for op in OP_INFOS if op.family in ("UNARY", "UNARY_FLOAT")])
def test_unary_inplace(name, rng):
    op = OPS[name]
    v = make_values(rng, (3, 4), "float32", low=0.5, high=3)
    x = pf.tensor(v)
    ptr = x.data_ptr()
    r = getattr(x, name + "_")()
    expected = op.ref(torch.from_numpy(v.copy()))
    assert r.data_ptr() == ptr and x.data_ptr() == ptr
    assert_matches(x, expected, 1e-5, 1e-5, what=f"{name}_")


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_binary_inplace_method(name, rng):
    op = OPS[name]
    a = make_values(rng, (3, 4), "float32", low=0.5, high=3)
    b = make_values(rng, (4,), "float32", low=0.5, high=2)
    x = pf.tensor(a)
    ptr = x.data_ptr()
    getattr(x, name + "_")(pf.tensor(b))
    assert x.data_ptr() == ptr
    assert_matches(x, op.ref(torch.from_numpy(a), torch.from_numpy(b)), 1e-5, 1e-5, what=f"{name}_")


# ----------------------------------------------------------------- type promotion across dtypes


@pytest.mark.parametrize("other_kind", ["same_ndim", "zero_dim"])
@pytest.mark.parametrize("name", ["add", "mul", "div", "maximum", "eq", "lt", "where"])
@pytest.mark.parametrize("dtype_a", ALL_DTYPES)
def test_mixed_dtype_promotion(name, dtype_a, other_kind, rng):
    """Every (dtype_a, dtype_b) pair: result dtype and values as torch (0-d tensors
    only win across categories)."""
    op = OPS[name]
    failures = []
    for dtype_b in ALL_DTYPES:
        av = make_values(rng, (3, 4), dtype_a, low=-3, high=3, discrete=True)
        bv = make_values(rng, (3, 4) if other_kind == "same_ndim" else (), dtype_b, low=-3, high=3,
                         nonzero=(name == "div"), discrete=True)
        a, b = make_pf(Arg(av), dtype_a), make_pf(Arg(bv), dtype_b)
        ta = torch.from_numpy(av.copy()).to(TORCH_DTYPE[dtype_a])
        tb = torch.from_numpy(bv.copy()).to(TORCH_DTYPE[dtype_b])
        what = f"pf.{name}({dtype_a}{tuple(av.shape)}, {dtype_b}{tuple(bv.shape)})"
        try:
            if name == "where":
                cv = make_values(rng, (3, 4), "bool")
                expected = torch.where(torch.from_numpy(cv), ta, tb)
                actual = pf.where(pf.tensor(cv), a, b)
            else:
                expected = op.ref(ta, tb)
                actual = op.fn(a, b)
            rtol, atol = tolerance(op, TORCH_TO_NAME[expected.dtype])
            assert_matches(actual, expected, rtol, atol, what=what)
        except Exception as e:  # noqa: BLE001
            failures.append(f"{what}: {type(e).__name__}: {e}")
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


@pytest.mark.parametrize("dtype_a", ALL_DTYPES)
def test_result_type_matches_torch(dtype_a):
    for dtype_b in ALL_DTYPES:
        assert pf.promote_types(PF_DTYPE[dtype_a], PF_DTYPE[dtype_b]) == PF_DTYPE[
            TORCH_TO_NAME[torch.promote_types(TORCH_DTYPE[dtype_a], TORCH_DTYPE[dtype_b])]], (dtype_a, dtype_b)
    a = pf.ones(2, dtype=PF_DTYPE[dtype_a])
    ta = torch.ones(2, dtype=TORCH_DTYPE[dtype_a])
    for scalar in (2, 2.5, True):
        assert pf.result_type(a, scalar) == PF_DTYPE[TORCH_TO_NAME[torch.result_type(ta, scalar)]], (dtype_a, scalar)
        assert pf.result_type(scalar, a) == PF_DTYPE[TORCH_TO_NAME[torch.result_type(scalar, ta)]], (scalar, dtype_a)


# ----------------------------------------------------------------- NaN, stability, special cases

NAN = float("nan")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_maximum_minimum_propagate_nan(dtype):
    a = pf.tensor([NAN, 1.0, NAN, -2.0]).to(PF_DTYPE[dtype])
    b = pf.tensor([0.0, NAN, NAN, 3.0]).to(PF_DTYPE[dtype])
    for fn, tfn in ((pf.maximum, torch.maximum), (pf.minimum, torch.minimum)):
        ta = torch.tensor([NAN, 1.0, NAN, -2.0], dtype=TORCH_DTYPE[dtype])
        tb = torch.tensor([0.0, NAN, NAN, 3.0], dtype=TORCH_DTYPE[dtype])
        assert_matches(fn(a, b), tfn(ta, tb), 0, 0, what=fn.__name__)
        assert_matches(fn(b, a), tfn(tb, ta), 0, 0, what=fn.__name__ + " (swapped)")
        assert_matches(fn(a, 0.5), tfn(ta, torch.tensor(0.5, dtype=ta.dtype)), 0, 0, what=fn.__name__ + " scalar")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_max_min_reductions_propagate_nan(dtype):
    v = np.array([[1.0, NAN, 3.0, -1.0], [2.0, 5.0, -4.0, 0.5], [-1.0, 2.0, 7.0, NAN]], dtype=np.float32)
    x = pf.tensor(v).to(PF_DTYPE[dtype])
    t = torch.from_numpy(v).to(TORCH_DTYPE[dtype])
    for dim in (None, 0, 1, (0, 1)):
        for name, tfn in (("amax", torch.amax), ("amin", torch.amin)):
            dims = () if dim is None else dim
            assert_matches(getattr(pf, name)(x, dim=dims), tfn(t, dim=dims), 0, 0, what=f"{name}(dim={dim})")
    # NaN in the middle of a long row (vectorised loops must not drop it)
    long = np.arange(100, dtype=np.float32)
    long[37] = NAN
    for name in ("max", "min"):
        r = getattr(pf, name)(pf.tensor(long).to(PF_DTYPE[dtype]))
        assert math.isnan(r.item()), f"{name} of a row with a NaN gave {r.item()}"


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reduce_nan_is_extreme(name):
    v = np.array([[1.0, NAN, 3.0], [7.0, 2.0, NAN]], dtype=np.float32)
    expected = getattr(torch, name)(torch.from_numpy(v), dim=1)
    assert_matches(getattr(pf, name)(pf.tensor(v), dim=1), expected, 0, 0, what=name)
    assert_matches(getattr(pf, name)(pf.tensor(v)), getattr(torch, name)(torch.from_numpy(v)), 0, 0, what=name)


def test_clamp_and_relu_propagate_nan():
    v = np.array([NAN, -1.0, 2.0], dtype=np.float32)
    t = torch.from_numpy(v)
    assert_matches(pf.clamp(pf.tensor(v), min=0.0, max=1.0), torch.clamp(t, 0.0, 1.0), 0, 0, what="clamp")
    assert_matches(pf.relu(pf.tensor(v)), torch.relu(t), 0, 0, what="relu")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_stability_large_logits(name, dtype):
    v = np.array([[1e4, 1e4 - 1.0, 1e4 - 2.0, 0.0], [-1e4, -1e4 + 2.0, -1e4, -1e4]], dtype=np.float32)
    if dtype in ("float16", "bfloat16"):
        v = np.array([[6e4 if dtype == "float16" else 1e4, 0.0, -3.0, 6e4 if dtype == "float16" else 1e4]],
                     dtype=np.float32)
    x = pf.tensor(v).to(PF_DTYPE[dtype])
    t = torch.from_numpy(v).to(TORCH_DTYPE[dtype])
    r = getattr(pf, name)(x, dim=-1)
    assert not np.any(np.isnan(pf_to_numpy(r))), f"{name} of large logits gave NaN: {r}"
    expected = getattr(torch, name)(t, dim=-1)
    rtol, atol = tolerance(OPS[name], dtype)
    assert_matches(r, expected, rtol, atol, what=name)


def test_softmax_neg_inf_and_default_dim():
    v = np.array([[0.0, -np.inf, 1.0], [-np.inf, 2.0, 2.0]], dtype=np.float32)
    t = torch.from_numpy(v)
    assert_matches(pf.softmax(pf.tensor(v)), torch.softmax(t, dim=-1), 1e-6, 1e-7, what="softmax -inf")
    assert_matches(pf.log_softmax(pf.tensor(v)), torch.log_softmax(t, dim=-1), 1e-6, 1e-6, what="log_softmax -inf")
    rows = pf_to_numpy(pf.softmax(pf.randn(4, 7)))
    np.testing.assert_allclose(rows.sum(-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_reductions_over_multiple_dims(dtype, rng):
    v = make_values(rng, (2, 3, 4, 5), dtype, low=-2, high=2)
    x = pf.tensor(v)
    t = torch.from_numpy(v.copy())
    for dims in ((0, 2), (1, 3), (3, 1, 0), (-1, -3), (0, 1, 2, 3)):
        for keepdim in (False, True):
            assert_matches(pf.sum(x, dim=dims, keepdim=keepdim), torch.sum(t, dim=dims, keepdim=keepdim),
                           1e-5, 1e-5, what=f"sum{dims}")
            assert_matches(pf.amax(x, dim=dims, keepdim=keepdim), torch.amax(t, dim=dims, keepdim=keepdim),
                           0, 0, what=f"amax{dims}")
            if dtype != "int32":
                assert_matches(pf.mean(x, dim=dims, keepdim=keepdim), torch.mean(t, dim=dims, keepdim=keepdim),
                               1e-5, 1e-5, what=f"mean{dims}")
    # a list works like a tuple
    assert_matches(pf.sum(x, dim=[0, 2]), torch.sum(t, dim=(0, 2)), 1e-5, 1e-5, what="sum[list]")


@pytest.mark.parametrize("name", ["sum", "mean", "prod"])
def test_reduction_dtype_and_axis_keywords(name, rng):
    v = make_values(rng, (3, 4), "int32", low=-2, high=2)
    x, t = pf.tensor(v), torch.from_numpy(v.copy())
    for kw in (dict(dtype=pf.float64), dict(axis=1, dtype=pf.float32), dict(axis=0, keepdim=True, dtype=pf.float32)):
        tkw = {k: (TORCH_DTYPE[str(v).split(".")[-1]] if k == "dtype" else v) for k, v in kw.items()}
        assert_matches(getattr(pf, name)(x, **kw), getattr(torch, name)(t, **tkw), 1e-6, 1e-6, what=f"{name}{kw}")
        assert_matches(getattr(x, name)(**kw), getattr(t, name)(**tkw), 1e-6, 1e-6, what=f"Tensor.{name}{kw}")
    with pytest.raises(TypeError, match="both dim and axis"):
        getattr(x, name)(0, axis=1)


def test_large_reductions_and_matmul_fp32(rng):
    """Bigger than one vector/tile: sums of 100k values, a 67x129 @ 129x45 matmul."""
    v = make_values(rng, (100003,), "float32", low=0, high=1)
    s = pf.sum(pf.tensor(v)).item()
    assert s == pytest.approx(float(np.sum(v.astype(np.float64))), rel=1e-5)
    a = make_values(rng, (67, 129), "float32", low=-1, high=1)
    b = make_values(rng, (129, 45), "float32", low=-1, high=1)
    assert_matches(pf.matmul(pf.tensor(a), pf.tensor(b)), torch.from_numpy(a) @ torch.from_numpy(b), 1e-5, 1e-5,
                   what="matmul 67x129x45")
    x = make_values(rng, (33, 257), "float32")
    assert_matches(pf.softmax(pf.tensor(x), dim=0), torch.softmax(torch.from_numpy(x), dim=0), 1e-5, 1e-6,
                   what="softmax dim 0")
    assert_matches(pf.argmax(pf.tensor(x), dim=1), torch.argmax(torch.from_numpy(x), dim=1), 0, 0, what="argmax")


def test_integer_pow_and_division_semantics():
    a = pf.tensor([7, -7, 3, 0], dtype=pf.int32)
    b = pf.tensor([2, 2, -2, 5], dtype=pf.int32)
    ta, tb = torch.tensor([7, -7, 3, 0], dtype=torch.int32), torch.tensor([2, 2, -2, 5], dtype=torch.int32)
    assert_matches(a / b, ta / tb, 1e-6, 0, what="int / int")
    assert_matches(pf.pow(a, 2), torch.pow(ta, 2), 0, 0, what="int ** 2")
    assert_matches(pf.pow(a, 0.5), torch.pow(ta, 0.5), 1e-6, 1e-6, what="int ** 0.5")
    f = pf.tensor([1.0, -1.0, 0.0]) / 0.0
    assert_matches(f, torch.tensor([1.0, -1.0, 0.0]) / 0.0, 0, 0, what="x / 0.0")


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_clamp_integer_tensor_float_bounds_promotes(dtype):
    v = np.array([1, 2, 3, 4], dtype=np.dtype(dtype))
    t = torch.from_numpy(v.copy())
    for kw in (dict(min=1.5), dict(max=2.5), dict(min=1.5, max=3.25), dict(min=2, max=3.5)):
        assert_matches(pf.clamp(pf.tensor(v), **kw), torch.clamp(t, **kw), 0, 0, what=f"clamp({dtype}, {kw})")


def test_gelu_approximate_variants(rng):
    v = make_values(rng, (64,), "float64", low=-6, high=6)
    t = torch.from_numpy(v.copy())
    x = pf.tensor(v)
    exact = pf.gelu(x)
    tanh = pf.gelu(x, approximate="tanh")
    assert_matches(exact, torch.nn.functional.gelu(t), 1e-12, 1e-12, what="gelu")
    assert_matches(tanh, torch.nn.functional.gelu(t, approximate="tanh"), 1e-12, 1e-12, what="gelu tanh")
    assert not np.array_equal(pf_to_numpy(exact), pf_to_numpy(tanh))


def test_transpose_is_a_view():
    x = pf.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    y = pf.transpose(x, 0, 1)
    assert y.shape == (4, 3) and not y.is_contiguous()
    assert y.data_ptr() == x.data_ptr()
    x[1, 2] = 100.0
    assert y[2, 1].item() == 100.0


def test_matmul_operator_and_batch_matmul_agree(rng):
    a = make_values(rng, (2, 3, 4), "float32", low=-1, high=1)
    b = make_values(rng, (2, 4, 5), "float32", low=-1, high=1)
    pa, pb = pf.tensor(a), pf.tensor(b)
    np.testing.assert_allclose(pf_to_numpy(pa @ pb), pf_to_numpy(pf.batch_matmul(pa, pb)), rtol=1e-6)
    np.testing.assert_allclose(pf_to_numpy(pa @ pb), a @ b, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------- accumulation, range, big inputs


def test_low_precision_sums_accumulate_in_float32():
    """torch accumulates fp16/bf16 reductions and matmuls in float32."""
    h = pf.ones(4096, dtype=pf.float16)
    assert pf.sum(h).item() == 4096.0, "fp16 sum stalls: accumulated in fp16"
    assert pf.mean(h).item() == 1.0
    b = pf.ones(1000, dtype=pf.bfloat16)
    assert pf.sum(b).to(pf.float32).item() == torch.ones(1000, dtype=torch.bfloat16).sum().item()
    a = pf.ones(1, 4096, dtype=pf.float16)
    assert pf.matmul(a, pf.ones(4096, 1, dtype=pf.float16)).item() == 4096.0
    x = pf.full((3000,), 0.1, dtype=pf.float16)
    expected = torch.full((3000,), 0.1, dtype=torch.float16).sum().item()
    assert pf.sum(x).item() == pytest.approx(expected, rel=1e-3)


def test_integer_range_is_exact():
    big = 2**60 + 1
    x = pf.tensor([big, big - 1, -big], dtype=pf.int64)
    assert (x + 1).tolist() == [big + 1, big, -big + 1]
    assert pf.max(x).item() == big and pf.min(x).item() == -big
    assert pf.argmax(x).item() == 0 and pf.argmin(x).item() == 2
    assert pf.maximum(x, big - 1).tolist() == [big, big - 1, big - 1]
    assert pf.clamp(x, max=big - 1).tolist() == [big - 1, big - 1, -big]
    assert pf.sum(pf.full((4,), 2**30, dtype=pf.int32)).item() == 2**32  # int32 sums give int64
    assert pf.prod(pf.full((3,), 2**20, dtype=pf.int32)).item() == 2**60
    assert pf.where(x > 0, x, 0).tolist() == [big, big - 1, 0]
    assert (x == big).tolist() == [True, False, False]
    m = pf.matmul(pf.tensor([[big, 1]]), pf.tensor([[1], [1]]))
    assert m.item() == big + 1


@pytest.mark.parametrize("name", ["add", "mul", "exp", "gelu", "sum", "max", "argmax", "softmax", "log_softmax",
                                  "matmul", "where", "clamp", "prod", "mean"])
def test_large_noncontiguous_inputs(name, rng):
    """Sizes that take the vectorised and multi-threaded paths, on transposed inputs."""
    op = OPS[name]
    v = make_values(rng, (129, 1031), "float32", low=-1, high=1)
    if name == "prod":
        v = make_values(rng, (129, 1031), "float32", low=0.999, high=1.001)
    w = make_values(rng, (1031, 129), "float32", low=-1, high=1)
    x = pf.tensor(np.ascontiguousarray(v.T)).transpose(0, 1)  # (129, 1031), non-contiguous
    tx = torch.from_numpy(v.copy())
    if op.family in ("BINARY",):
        y = pf.tensor(w).transpose(0, 1)
        actual, expected = op.fn(x, y), op.ref(tx, torch.from_numpy(w.T.copy()))
    elif name == "matmul":
        actual, expected = op.fn(x, pf.tensor(w)), op.ref(tx, torch.from_numpy(w))
        assert_matches(actual, expected, 1e-4, 1e-4, what=name)  # K = 1031
        return
    elif name == "where":
        actual, expected = pf.where(x > 0, x, 0.5), torch.where(tx > 0, tx, 0.5)
    elif name == "clamp":
        actual, expected = pf.clamp(x, min=-0.5, max=0.25), torch.clamp(tx, min=-0.5, max=0.25)
    elif op.family in ("REDUCE", "ARG_REDUCE", "SOFTMAX"):
        for dim in (0, 1) if op.family != "REDUCE" else (0, 1, None):
            assert_matches(op.fn(x, dim=dim), op.ref(tx, dim=dim), 1e-4, 1e-4, what=f"{name}(dim={dim})")
        return
    else:
        actual, expected = op.fn(x), op.ref(tx)
    assert_matches(actual, expected, 1e-5, 1e-5, what=name)


def test_thread_count_does_not_change_results(rng):
    v = make_values(rng, (300, 700), "float32")
    x = pf.tensor(v)
    n = pf.cpu_threads()
    try:
        pf.set_cpu_threads(1)
        one = [pf_to_numpy(f(x)) for f in (pf.exp, lambda t: pf.sum(t, dim=0), lambda t: pf.softmax(t, dim=0),
                                          lambda t: t @ t.T)]
        pf.set_cpu_threads(max(2, n))
        many = [pf_to_numpy(f(x)) for f in (pf.exp, lambda t: pf.sum(t, dim=0), lambda t: pf.softmax(t, dim=0),
                                           lambda t: t @ t.T)]
    finally:
        pf.set_cpu_threads(n)
    for a, b in zip(one, many):
        # summation order may depend on the thread count: tolerance scaled to the magnitudes
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(a).max())))


def test_expanded_and_overlapping_inputs(rng):
    """Stride-0 (expanded) inputs and outputs written into a view."""
    col = make_values(rng, (4, 1), "float32")
    row = make_values(rng, (1, 5), "float32")
    a = pf.tensor(col).expand(4, 5)
    b = pf.tensor(row).expand(4, 5)
    tc, tr = torch.from_numpy(col).expand(4, 5), torch.from_numpy(row).expand(4, 5)
    assert_matches(a * b, tc * tr, 1e-6, 1e-6, what="expanded * expanded")
    assert_matches(pf.sum(a, dim=1), torch.sum(tc, dim=1), 1e-5, 1e-6, what="sum of expanded")
    assert_matches(pf.softmax(b, dim=0), torch.softmax(tr, dim=0), 1e-6, 1e-6, what="softmax of expanded")
    base = pf.zeros(4, 6)
    view = base[:, 1::2]
    view.add_(pf.ones(4, 3))
    assert pf.sum(base).item() == 12.0 and base[:, ::2].detach().numpy().sum() == 0


# ----------------------------------------------------------------- max / min forms


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_forms_match_pytorch(name, device, rng):
    _use_device(device, name)
    v = rng.integers(-3, 4, size=(4, 5)).astype(np.float32)  # ties: the first index, as argmax
    x, t = pf.tensor(v), torch.from_numpy(v)
    other = rng.standard_normal((4, 5)).astype(np.float32)
    for dim, keepdim in ((1, False), (0, True), (-1, True)):
        got, want = getattr(pf, name)(x, dim, keepdim=keepdim), getattr(torch, name)(t, dim, keepdim=keepdim)
        values, indices = got  # unpacks like PyTorch's named tuple
        np.testing.assert_array_equal(got.values.detach().numpy(), want.values.detach().numpy())
        np.testing.assert_array_equal(indices.detach().numpy(), want.indices.detach().numpy())
        assert values.shape == tuple(want.values.shape) and indices.dtype == pf.int64
        method = getattr(x, name)(dim, keepdim)
        np.testing.assert_array_equal(method[1].detach().numpy(), want[1].detach().numpy())
    assert getattr(x, name)().item() == getattr(t, name)().item()
    both = getattr(pf, name)(x, pf.tensor(other))  # the elementwise form
    np.testing.assert_array_equal(both.detach().numpy(), getattr(torch, name)(t, torch.from_numpy(other)).detach().numpy())
    np.testing.assert_array_equal(getattr(pf, "a" + name)(x, (0, 1)).detach().numpy(),
                                  getattr(torch, "a" + name)(t, (0, 1)).detach().numpy())
    with pytest.raises(TypeError, match="amax|amin"):
        getattr(pf, name)(x, (0, 1))


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("name", ["add", "sub"])
def test_add_sub_alpha(name, device, rng):
    _use_device(device, name)
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4,)).astype(np.float32)
    x, y, ta, tb = pf.tensor(a), pf.tensor(b), torch.from_numpy(a), torch.from_numpy(b)
    want = getattr(torch, name)(ta, tb, alpha=2.5)
    assert_matches(getattr(pf, name)(x, y, alpha=2.5), want, 1e-6, 1e-6, what=f"{name}(alpha)")
    assert_matches(getattr(x, name)(y, alpha=2.5), want, 1e-6, 1e-6, what=f"Tensor.{name}(alpha)")
    z = x.clone()
    assert getattr(z, name + "_")(y, alpha=2.5) is z
    assert_matches(z, want, 1e-6, 1e-6, what=f"{name}_(alpha)")
    assert_matches(getattr(pf, name)(x, 1.5, alpha=-2), getattr(torch, name)(ta, 1.5, alpha=-2), 1e-6, 1e-6,
                   what=f"{name}(number, alpha)")
    i = pf.tensor([1, 2, 3])
    assert getattr(pf, name)(i, i, alpha=3).tolist() == getattr(torch, name)(
        torch.tensor([1, 2, 3]), torch.tensor([1, 2, 3]), alpha=3).tolist()
    with pytest.raises(TypeError, match="alpha"):
        getattr(pf, name)(i, i, alpha=0.5)
