"""Interop, errors, printing and keywords as PyTorch 2.13 has them (issue 13).

DLPack both ways with PyTorch and NumPy (zero-copy: a write through one is seen
through the other), NumPy's protocols (__array__, ufuncs, `tensor * ndarray`),
errors catchable as RuntimeError, one-line argument errors, repr/str/format
compared with torch's strings, and keywords (to(non_blocking=), alpha=,
softmax(dtype=), generator=, manual_seed's range, pf.load(map_location=)).
"""

import gc
import re
import weakref

import numpy as np
import pytest
import torch

import pyflame as pf

DTYPES = [
    (pf.float32, torch.float32), (pf.float64, torch.float64), (pf.float16, torch.float16),
    (pf.bfloat16, torch.bfloat16), (pf.int8, torch.int8), (pf.int16, torch.int16), (pf.int32, torch.int32),
    (pf.int64, torch.int64), (pf.uint8, torch.uint8), (pf.bool, torch.bool),
]


def _device_or_skip(device):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    pf.set_device(device)


def _synchronize(device):
    """Both libraries' queued work done: each writes on its own stream."""
    if device == "rocm":
        pf.synchronize()
        torch.cuda.synchronize()


def _torch_device(device):
    """torch's device for a pf device, or skip when this torch cannot reach it."""
    if device == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        pytest.skip("torch has no GPU here: the GPU exchange with torch needs a CUDA/ROCm build of torch")
    return f"cuda:{pf.rocm_get_device()}"


def _values(rng, shape, torch_dtype):
    v = rng.standard_normal(shape) * 10
    if torch_dtype == torch.bool:
        return torch.from_numpy(v > 0)
    if not torch_dtype.is_floating_point:
        lo = 0 if torch_dtype == torch.uint8 else -100
        return torch.from_numpy(rng.integers(lo, 100, shape)).to(torch_dtype)
    return torch.from_numpy(v).to(torch_dtype)


def _to_torch_cpu(t):
    """A pf tensor's values as a CPU torch tensor (through float32 for bfloat16)."""
    if t.dtype == pf.bfloat16:
        return torch.from_numpy(t.to(pf.float32).cpu().numpy().copy()).to(torch.bfloat16)
    return torch.from_numpy(np.array(t.cpu().numpy(), copy=True))


def _one(torch_dtype):
    return True if torch_dtype == torch.bool else 7


# ------------------------------------------------------------------ DLPack


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("pf_dtype,torch_dtype", DTYPES, ids=[str(d[1]) for d in DTYPES])
def test_torch_from_dlpack_of_pf_shares_memory(device, pf_dtype, torch_dtype, rng):
    _device_or_skip(device)
    tdev = _torch_device(device)
    src = _values(rng, (3, 4), torch_dtype)
    x = pf.from_dlpack(src).to(device)
    assert x.dtype == pf_dtype
    y = torch.from_dlpack(x)
    assert y.dtype == torch_dtype and y.shape == (3, 4) and str(y.device) == tdev
    assert torch.equal(y.cpu(), src)
    y[1, 2] = _one(torch_dtype)  # a write through torch is seen by pyflame
    _synchronize(device)  # two libraries' streams: ordered by waiting, as between any two
    assert _to_torch_cpu(x)[1, 2].item() == _one(torch_dtype)
    x[0, 0] = 0  # and the other way
    _synchronize(device)
    assert y[0, 0].item() == 0


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("pf_dtype,torch_dtype", DTYPES, ids=[str(d[1]) for d in DTYPES])
def test_pf_from_dlpack_of_torch_shares_memory(device, pf_dtype, torch_dtype, rng):
    _device_or_skip(device)
    src = _values(rng, (4, 5), torch_dtype).to(_torch_device(device))
    x = pf.from_dlpack(src)
    assert x.dtype == pf_dtype and x.shape == (4, 5) and str(x.device).split(":")[0] == device
    assert torch.equal(_to_torch_cpu(x), src.cpu())
    assert x.is_placed == (device == "rocm")  # GPU memory stays where the producer put it
    x[2, 3] = _one(torch_dtype)
    _synchronize(device)
    assert src[2, 3].item() == _one(torch_dtype)
    src[0, 1] = 0
    _synchronize(device)
    assert _to_torch_cpu(x)[0, 1].item() == 0


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_dlpack_views_and_0d(device, rng):
    _device_or_skip(device)
    tdev = _torch_device(device)
    base = torch.from_numpy(rng.standard_normal((6, 8)).astype(np.float32)).to(tdev)
    for view in (base.t(), base[1:5, ::3], base[2], base[3, 4], base[:, :0]):
        x = pf.from_dlpack(view)
        assert x.shape == tuple(view.shape) and x.stride() == view.stride(), view.shape
        np.testing.assert_array_equal(x.cpu().numpy(), view.cpu().numpy())
        back = torch.from_dlpack(x)
        assert back.stride() == view.stride() and torch.equal(back, view)
        if view.numel():
            assert back.data_ptr() == view.data_ptr()
    x = pf.from_dlpack(base.t())
    x.mul_(2)  # in place through a transposed view
    np.testing.assert_allclose(x.cpu().numpy(), base.t().cpu().numpy())


def test_dlpack_keeps_the_producer_alive(rng):
    src = torch.from_numpy(rng.standard_normal(1000).astype(np.float32))
    want = src.clone()
    alive = weakref.ref(src)
    x = pf.from_dlpack(src)
    del src
    gc.collect()
    assert alive() is not None
    torch.ones(1000).add_(1)  # reuse of freed memory would show below
    np.testing.assert_array_equal(x.numpy(), want.numpy())
    del x
    gc.collect()
    assert alive() is None

    # The other way: torch's tensor keeps pyflame's storage.
    x = pf.from_dlpack(want.clone())
    y = torch.from_dlpack(x)
    del x
    gc.collect()
    assert torch.equal(y, want)


def test_numpy_from_dlpack_shares_memory(rng):
    x = pf.from_dlpack(torch.from_numpy(rng.standard_normal((3, 4))))
    a = np.from_dlpack(x)
    assert a.dtype == np.float64 and a.shape == (3, 4)
    a[1, 1] = 123.0
    assert x[1, 1].item() == 123.0
    arr = rng.standard_normal((2, 5)).astype(np.float32)
    y = pf.from_dlpack(arr)
    y[0, 0] = -5.0
    assert arr[0, 0] == -5.0
    # A read-only array is copied: pyflame has no read-only tensors.
    ro = np.arange(6, dtype=np.int32)
    ro.flags.writeable = False
    z = pf.from_dlpack(ro)
    z[0] = 9
    assert ro[0] == 0 and z.tolist() == [9, 1, 2, 3, 4, 5]
    # Broadcast arrays are read-only in NumPy (copied, zero strides and all); negative strides do not exist here.
    bc = pf.from_dlpack(np.broadcast_to(np.arange(3.0), (2, 3)))
    assert bc.tolist() == [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
    with pytest.raises(BufferError, match="negative strides"):
        pf.from_dlpack(np.arange(5.0)[::-1])
    b = np.from_dlpack(pf.tensor([True, False, True]))
    assert b.dtype == np.bool_ and b.tolist() == [True, False, True]


def test_dlpack_capsules_versioned_and_legacy(rng):
    import torch.utils.dlpack

    x = pf.from_dlpack(torch.from_numpy(rng.standard_normal(5).astype(np.float32)))
    legacy = x.__dlpack__()
    assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
    versioned = x.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    for capsule in (legacy, versioned):
        y = pf.from_dlpack(capsule)
        assert y.data_ptr() == x.data_ptr()
        with pytest.raises(TypeError, match="unused DLPack capsule"):
            pf.from_dlpack(capsule)  # a capsule is consumed once
    t = torch.from_numpy(rng.standard_normal(4))
    z = pf.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    z[0] = 1.5
    assert t[0].item() == 1.5
    # An unconsumed capsule frees its tensor when it goes.
    del x, legacy, versioned
    gc.collect()


def test_utils_dlpack_round_trips_with_torch(rng):
    """pf.utils.dlpack as torch.utils.dlpack: capsules both ways, sharing memory."""
    import torch.utils.dlpack

    t = torch.from_numpy(rng.standard_normal(4))
    x = pf.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(t))
    y = torch.utils.dlpack.from_dlpack(pf.utils.dlpack.to_dlpack(x))
    assert x.data_ptr() == t.data_ptr() == y.data_ptr()
    y[1] = 2.5
    assert x[1].item() == 2.5 and t[1].item() == 2.5


def test_dlpack_jax(rng):
    """JAX arrays both ways, sharing memory (JAX's CPU backend; skipped where JAX is not installed)."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    v = rng.standard_normal((3, 4)).astype(np.float32)
    a = jnp.asarray(v)
    x = pf.from_dlpack(a)
    assert x.data_ptr() == a.unsafe_buffer_pointer()
    np.testing.assert_array_equal(x.numpy(), v)
    y = pf.tensor(v)
    b = jax.dlpack.from_dlpack(y)
    assert b.unsafe_buffer_pointer() == y.data_ptr()
    np.testing.assert_array_equal(np.asarray(b), v)
    for dtype in (jnp.bfloat16, jnp.float16, jnp.int8, jnp.bool_):
        c = jnp.asarray(v > 0).astype(dtype)
        np.testing.assert_array_equal(pf.from_dlpack(c).to(pf.float32).numpy(), np.asarray(c, dtype=np.float32))


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_dlpack_cupy(device, rng):
    """CuPy arrays on the GPU both ways (skipped without a GPU or CuPy)."""
    _device_or_skip(device)
    if device == "cpu":
        pytest.skip("CuPy arrays live on the GPU")
    cp = pytest.importorskip("cupy")
    v = rng.standard_normal((5, 3)).astype(np.float32)
    a = cp.asarray(v)
    x = pf.from_dlpack(a)
    assert x.data_ptr() == a.data.ptr
    x.mul_(2)
    # PyFlame's stream is non-blocking: CuPy's null stream does not wait for it (as with any two streams).
    pf.synchronize()
    np.testing.assert_allclose(cp.asnumpy(a), v * 2)
    b = cp.from_dlpack(pf.tensor(v, device=device))
    np.testing.assert_array_equal(cp.asnumpy(b), v)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_dlpack_device_and_copy(device, rng):
    _device_or_skip(device)
    x = pf.tensor(rng.standard_normal(4).astype(np.float32), device=device)
    if device == "cpu":
        assert x.__dlpack_device__() == (1, 0)
    else:
        info = pf.rocm_get_device_info(pf.rocm_get_device())
        want = {"nvidia": 2, "amd": 10}[info["platform"]]  # kDLCUDA, kDLROCM
        assert x.__dlpack_device__() == (want, pf.rocm_get_device())
    copied = pf.from_dlpack(x, copy=True)
    assert copied.data_ptr() != x.data_ptr()
    np.testing.assert_array_equal(copied.cpu().numpy(), x.cpu().numpy())
    host = pf.from_dlpack(x, device="cpu")
    assert str(host.device) == "cpu"
    np.testing.assert_array_equal(host.numpy(), x.cpu().numpy())
    if device != "cpu":
        with pytest.raises(ValueError, match="without copying"):
            pf.from_dlpack(x, device="cpu", copy=False)
        capsule = x.__dlpack__(dl_device=(1, 0), max_version=(1, 0))
        np.testing.assert_array_equal(pf.from_dlpack(capsule).numpy(), x.cpu().numpy())
    with pytest.raises(BufferError, match="require gradient"):
        pf.ones(2, requires_grad=True).__dlpack__()


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_dlpack_gpu_streams(device, rng):
    """The consumer's stream waits for the producer's work: a long computation is seen complete."""
    _device_or_skip(device)
    tdev = _torch_device(device)
    a = pf.tensor(rng.standard_normal((512, 512)).astype(np.float32), device=device)
    for _ in range(3):
        b = pf.matmul(a, a) / 512.0
        y = torch.from_dlpack(b)  # stream given by torch: its current stream
        np.testing.assert_allclose(y.cpu().numpy(), b.cpu().numpy(), rtol=1e-6)
    t = torch.from_numpy(rng.standard_normal((256, 256)).astype(np.float32)).to(tdev)
    u = t @ t
    x = pf.from_dlpack(u)  # pyflame passes its current stream to torch's __dlpack__
    np.testing.assert_allclose(x.cpu().numpy(), u.cpu().numpy(), rtol=1e-6)
    for stream in (None, -1):
        capsule = b.__dlpack__(stream=stream, max_version=(1, 0))
        assert "dltensor" in repr(capsule)


# ------------------------------------------------------------------ NumPy protocols


@pytest.mark.parametrize("pf_dtype,torch_dtype", [d for d in DTYPES if d[0] != pf.bfloat16],
                         ids=[str(d[1]) for d in DTYPES if d[0] != pf.bfloat16])
def test_asarray_and_torch_tensor(pf_dtype, torch_dtype, rng):
    src = _values(rng, (2, 3), torch_dtype)
    x = pf.from_dlpack(src.clone())
    a = np.asarray(x)
    assert a.dtype == src.numpy().dtype
    np.testing.assert_array_equal(a, src.numpy())
    t = torch.tensor(x)
    assert t.dtype == torch_dtype and torch.equal(t, src)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    c = x.__array__(copy=True)
    assert not np.shares_memory(c, a)
    assert np.shares_memory(x.__array__(copy=False), a)
    with pytest.raises(ValueError, match="copy"):
        x.__array__(dtype=np.complex64, copy=False)
    back = pf.tensor(src.numpy())
    assert back.dtype == pf_dtype


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_numpy_ufuncs_and_ndarray_operands(device, rng):
    _device_or_skip(device)
    v = rng.standard_normal((2, 3)).astype(np.float32)
    x, t = pf.tensor(v, device=device), torch.from_numpy(v.copy())
    arr64 = rng.standard_normal(3)
    arr_i = rng.integers(-5, 5, 3)
    arr_mat = rng.standard_normal((3, 2))

    def iadd(m):
        r = m.clone()
        r += arr64
        return r

    cases = [
        (lambda m: np.exp(m), "exp"),
        (lambda m: np.add(m, 1.5), "add"),
        (lambda m: np.greater(m, 0), "greater (uint8 as torch)"),
        (lambda m: m * arr64, "tensor * float64 array"),
        (lambda m: m + arr_i, "tensor + int64 array"),
        (lambda m: m - np.float32(2.5), "tensor - numpy scalar"),
        (lambda m: m / np.array(2.0), "tensor / 0-d array"),
        (lambda m: m == v, "tensor == array"),
        (lambda m: np.float64(3) * m, "numpy scalar * tensor"),
        (lambda m: np.exp(m[1, 2]), "exp of a 0-d tensor"),
        (lambda m: m @ arr_mat, "tensor @ array"),
        (lambda m: m ** np.array([2, 2, 2]), "tensor ** int array"),
        (iadd, "tensor += array (a new tensor, as torch)"),
    ]
    for fn, what in cases:
        want, got = fn(t), fn(x)
        assert isinstance(want, torch.Tensor), what
        assert isinstance(got, pf.Tensor), what
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], what
        assert str(got.device).split(":")[0] == device and tuple(got.shape) == tuple(want.shape), what
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-6, err_msg=what)
    for fn in (lambda m: arr64 * m, lambda m: arr64 + m, lambda m: m > arr64):
        with pytest.raises(TypeError):
            fn(t)
        with pytest.raises(TypeError):
            fn(x)


# ------------------------------------------------------------------ errors


def test_errors_are_runtime_errors_too():
    a, b = pf.ones(2, 3), pf.ones(4, 3)
    for exc in (ValueError, RuntimeError, pf.InvalidArgumentError):
        with pytest.raises(exc, match="add"):
            pf.add(a, b)
    with pytest.raises(RuntimeError):
        torch.add(torch.ones(2, 3), torch.ones(4, 3))
    c = pf.ones(2, 3, dtype=pf.float64)
    for exc in (TypeError, RuntimeError, pf.InvalidTypeError):
        with pytest.raises(exc, match="matmul"):
            pf.matmul(pf.ones(3, 2), c)
    with pytest.raises(RuntimeError):
        torch.matmul(torch.ones(3, 2), torch.ones(2, 3, dtype=torch.float64))
    with pytest.raises(RuntimeError):  # both raise RuntimeError: a ported except clause works
        pf.ones(6).view(4)
    with pytest.raises(RuntimeError):
        torch.ones(6).view(4)
    assert issubclass(pf.NotSupportedError, RuntimeError) and issubclass(pf.AutogradError, RuntimeError)


@pytest.mark.parametrize("call,message", [
    (lambda x: pf.add(x, x, foo=1), "add(): unexpected keyword argument 'foo'"),
    (lambda x: x.sum(axes=0), "sum(): unexpected keyword argument 'axes'"),
    (lambda x: pf.softmax(x, dim="a"), "softmax(): argument 'dim' must be int, not str"),
    (lambda x: x.transpose(0), "transpose(): missing required argument 'dim1'"),
    (lambda x: pf.transpose(x, 0, 1, 2), "transpose(): takes 3 positional arguments but 4 were given"),
    (lambda x: x.to("cpu", non_blocking="yes"), "to(): argument 'non_blocking' must be bool, not str"),
    (lambda x: x.unsqueeze(dim=0, keepdim=True), "unsqueeze(): unexpected keyword argument 'keepdim'"),
    (lambda x: pf.Generator(foo=1), "Generator(): unexpected keyword argument 'foo'"),
    (lambda x: pf.matmul(x, [1, 2]), "matmul(): argument 'other' must be Tensor, not list"),
    (lambda x: x.__getitem__(), "__getitem__(): missing required argument 'key'"),
])
def test_argument_errors_are_one_line(call, message):
    x = pf.ones(2, 3)
    with pytest.raises(TypeError) as info:
        call(x)
    assert str(info.value) == message


# ------------------------------------------------------------------ printing


REPR_CASES = [
    lambda m: m.tensor([[1.0, 2.5]]),
    lambda m: m.tensor([1.0, 2.0, 3.0]),
    lambda m: m.tensor([1e-5, 1.0]),
    lambda m: m.tensor([1e9, 1.0]),
    lambda m: m.tensor([3e9, 1e10]),
    lambda m: m.tensor([1.0, float("nan"), float("inf"), -float("inf")]),
    lambda m: m.tensor([1, 2, 300]),
    lambda m: m.tensor([-7, 2]),
    lambda m: m.tensor([True, False]),
    lambda m: m.tensor(3.5),
    lambda m: m.tensor(-3),
    lambda m: m.tensor(True),
    lambda m: m.zeros(0),
    lambda m: m.zeros(2, 0),
    lambda m: m.zeros(0, dtype=m.int64),
    lambda m: m.zeros(3, 0, 2, dtype=m.float16),
    lambda m: m.arange(2000).reshape(40, 50).float() / 7,
    lambda m: m.arange(5000),
    lambda m: m.arange(4000).reshape(10, 20, 20) > 1999,
    lambda m: m.arange(24).reshape(2, 3, 4),
    lambda m: m.arange(30).reshape(2, 3, 5).to(m.float16) / 3,
    lambda m: m.tensor([0.1, 0.25], dtype=m.float64),
    lambda m: m.tensor([1.5, -2.25]).to(m.bfloat16),
    lambda m: m.tensor([1, 2], dtype=m.int32),
    lambda m: m.tensor([1, 2], dtype=m.uint8),
    lambda m: m.arange(100).float() * 1.37,
    lambda m: m.tensor([-1.0, 0.0]),
    lambda m: m.tensor([0.0, 0.0]),
    lambda m: m.tensor([123456.789, 0.001]),
    lambda m: m.tensor([[1e-8, 5.0], [2.0, -3.0]]),
    lambda m: m.ones(2, 3, requires_grad=True),
    lambda m: m.ones(2, requires_grad=True) * 2,
    lambda m: (m.ones(2, requires_grad=True) + 1).sum(),
    lambda m: m.arange(60).reshape(3, 20).float() * 1000.5,
]


def _torch_repr(t):
    # Dtypes print with the module that names them: pyflame.float16 where torch prints torch.float16.
    return repr(t).replace("torch.", "pyflame.")


@pytest.mark.parametrize("case", range(len(REPR_CASES)))
@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_repr_as_torch(case, device):
    _device_or_skip(device)
    want = _torch_repr(REPR_CASES[case](torch))
    got = repr(REPR_CASES[case](pf))
    if device == "cpu":
        assert got == want
        assert str(REPR_CASES[case](pf)) == want
    else:
        assert f"device='{pf.get_device()}'" in got or "device='rocm" in got
        # The device suffix may wrap the line (as torch does for GPU tensors): compare without line breaks.
        def flat(s):
            return re.sub(r",\s+", ", ", s)
        assert flat(got.replace(f", device='{REPR_CASES[case](pf).device}'", "")) == flat(want)


@pytest.fixture
def restore_printoptions():
    yield
    pf.set_printoptions(profile="default")
    torch.set_printoptions(profile="default")


@pytest.mark.parametrize("options", [
    dict(precision=2), dict(precision=8), dict(sci_mode=True), dict(sci_mode=False), dict(threshold=5),
    dict(threshold=5, edgeitems=1), dict(linewidth=30), dict(profile="short"), dict(profile="full"),
    dict(profile="full", precision=1),
])
def test_set_printoptions_as_torch(options, restore_printoptions, rng):
    v = rng.standard_normal((4, 12)) * 100
    v[0, 0] = 1e-6
    for make in (lambda m: m.tensor(v.astype(np.float32)), lambda m: m.tensor(np.round(v).astype(np.int64)),
                 lambda m: m.tensor(np.abs(v).astype(np.float32) + 0.5), lambda m: m.arange(2000),
                 lambda m: m.zeros(3), lambda m: m.tensor(np.round(v[:2]).astype(np.float32))):
        pf.set_printoptions(**options)
        torch.set_printoptions(**options)
        assert repr(make(pf)) == _torch_repr(make(torch)), options
    assert pf.get_printoptions()["precision"] == torch._tensor_str.get_printoptions()["precision"]


def test_format():
    x, t = pf.tensor(3.14159), torch.tensor(3.14159)
    for spec in (".2f", "", ">10.3e", "g"):
        assert format(x, spec) == format(t, spec)
    assert f"{pf.tensor(7):d}" == f"{torch.tensor(7):d}" == "7"
    assert f"{pf.tensor([1.0, 2.0])}" == f"{torch.tensor([1.0, 2.0])}"
    for m in (pf, torch):
        with pytest.raises(TypeError):
            f"{m.tensor([1.0, 2.0]):.2f}"


# ------------------------------------------------------------------ keywords


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_keywords(device, rng):
    _device_or_skip(device)
    va, vb = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    a, b = pf.tensor(va, device=device), pf.tensor(vb, device=device)
    ta, tb = torch.from_numpy(va.copy()), torch.from_numpy(vb.copy())
    np.testing.assert_allclose(a.to("cpu", non_blocking=True).numpy(), ta.to("cpu", non_blocking=True).numpy())
    np.testing.assert_allclose(a.sub(b, alpha=2).cpu().numpy(), ta.sub(tb, alpha=2).numpy(), rtol=1e-6)
    np.testing.assert_allclose(pf.add(a, b, alpha=-0.5).cpu().numpy(), torch.add(ta, tb, alpha=-0.5).numpy(),
                               rtol=1e-6)
    r = a.clone()
    assert r.add_(b, alpha=3) is r
    np.testing.assert_allclose(r.cpu().numpy(), ta.clone().add_(tb, alpha=3).numpy(), rtol=1e-6)
    got, want = pf.softmax(a, dim=1, dtype=pf.float64), torch.softmax(ta, dim=1, dtype=torch.float64)
    assert got.dtype == pf.float64
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-6)
    got = a.softmax(0, dtype=pf.float64)
    np.testing.assert_allclose(got.cpu().numpy(), ta.softmax(0, dtype=torch.float64).numpy(), rtol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_generator_keyword(device):
    _device_or_skip(device)
    for make in (lambda g: pf.rand(3, 4, generator=g), lambda g: pf.randn(5, generator=g),
                 lambda g: pf.randint(0, 100, (6,), generator=g)):
        first = make(pf.Generator().manual_seed(1234)).cpu().numpy()
        again = make(pf.Generator().manual_seed(1234)).cpu().numpy()
        other = make(pf.Generator().manual_seed(99)).cpu().numpy()
        np.testing.assert_array_equal(first, again)
        assert not np.array_equal(first, other)


def test_manual_seed_range_as_torch():
    for seed in (-1, -2**63, 2**63, 2**64 - 1, 0, 12345):
        g = pf.manual_seed(seed)
        assert isinstance(g, pf.Generator)
        assert g.initial_seed() == torch.manual_seed(seed).initial_seed()
        assert pf.Generator().manual_seed(seed).initial_seed() == torch.Generator().manual_seed(seed).initial_seed()
    for seed in (2**64, -2**63 - 1):
        with pytest.raises(ValueError, match="Overflow"):
            pf.manual_seed(seed)
        with pytest.raises(ValueError, match="Overflow"):
            torch.manual_seed(seed)
    pf.manual_seed(-5)
    a = pf.rand(4).numpy()
    pf.manual_seed(2**64 - 5)
    np.testing.assert_array_equal(pf.rand(4).numpy(), a)  # -5 is 2**64 - 5, as in torch
    pf.manual_seed(0)


def test_load_map_location(tmp_path, rng):
    state = {"w": pf.tensor(rng.standard_normal((2, 3)).astype(np.float32)), "nested": [pf.arange(4), 3]}
    path = tmp_path / "ckpt.safetensors"
    pf.save(state, path)
    for where in ("cpu", {"cpu": "cpu"}, {"rocm:0": "cpu"}):
        out = pf.load(path, map_location=where)
        np.testing.assert_array_equal(out["w"].numpy(), state["w"].numpy())
    seen = []

    def fn(t, location):
        seen.append(location)
        return t * 2

    out = pf.load(path, map_location=fn)
    assert seen == ["cpu", "cpu"]
    np.testing.assert_array_equal(out["w"].numpy(), state["w"].numpy() * 2)
    assert out["nested"][0].tolist() == [0, 2, 4, 6] and out["nested"][1] == 3
    out = pf.load(path, map_location=lambda storage, loc: storage)
    np.testing.assert_array_equal(out["w"].numpy(), state["w"].numpy())
    with pytest.raises(TypeError, match="not both"):
        pf.load(path, device="cpu", map_location="cpu")


def test_types_as_torch_gives_them(device):
    """device.type a plain str; int64 arrays typed np.int64; __dlpack_device__ an enum: code that checks
    types (`type(x) is str`, `a.dtype.type is np.int64`, `dev[0] == DLDeviceType.kDLCPU`) ports."""
    t = pf.ones(2, device=device)
    assert type(t.device.type) is str and t.device.type == device
    assert type(torch.ones(2).device.type) is type(pf.ones(2).device.type)
    x = pf.tensor([5, 6], device="cpu")
    arr = x.numpy()
    assert arr.dtype.type is np.int64 and np.asarray(x).dtype.type is np.int64
    arr[0] = 9  # still the tensor's memory
    assert x.tolist() == [9, 6]
    kind, index = t.__dlpack_device__()
    assert isinstance(kind, pf.DLDeviceType) and kind.name.startswith("kDL")
    if device == "cpu":
        want = torch.ones(2).__dlpack_device__()
        assert (kind, index) == want and kind.name == want[0].name
