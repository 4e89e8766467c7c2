"""The GPU's library-backed ops beyond the op registry: matmul's TF32 switch and
batch layouts through ROCmBLAS. Every op x dtype x shape class runs in test_ops.py."""

import threading

import numpy as np
import pytest
import torch

import pyflame as pf
from pyflame.backend import rocm

pytestmark = pytest.mark.skipif(not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")


@pytest.fixture
def on_gpu():
    pf.set_device("rocm")
    yield
    pf.set_device("cpu")


def _rel_err(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def test_matmul_tf32_is_off_by_default_and_switchable(on_gpu, rng):
    a = rng.standard_normal((512, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 256)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert not rocm.allow_tf32()
    full = _rel_err(pf.matmul(pf.tensor(a), pf.tensor(b)).detach().numpy(), want)
    assert full < 1e-5
    info = pf.rocm_get_device_info(0)
    rocm.set_allow_tf32(True)
    try:
        tf32 = _rel_err(pf.matmul(pf.tensor(a), pf.tensor(b)).detach().numpy(), want)
    finally:
        rocm.set_allow_tf32(False)
    assert tf32 < 1e-2
    if info["platform"] == "nvidia" and int(info["architecture"].split("_")[1]) >= 80:
        assert tf32 > 10 * full, "TF32 was allowed but the product has float32 accuracy"
    assert _rel_err(pf.matmul(pf.tensor(a), pf.tensor(b)).detach().numpy(), want) < 1e-5  # off again


@pytest.mark.parametrize("shape_a,shape_b", [
    ((2, 3, 5, 7), (3, 7, 4)),        # b broadcast over the outer batch dim: an outer loop
    ((4, 1, 6, 5), (1, 3, 5, 2)),     # both broadcast
    ((2, 3, 5, 7), (2, 3, 7, 4)),     # one strided-batched call
])
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "int32"])
def test_batched_matmul_layouts(on_gpu, rng, shape_a, shape_b, dtype):
    a = rng.integers(-4, 5, shape_a).astype(np.float32)
    b = rng.integers(-4, 5, shape_b).astype(np.float32)
    pa, pb = pf.tensor(a).to(getattr(pf, dtype)), pf.tensor(b).to(getattr(pf, dtype))
    got = pf.matmul(pa, pb.transpose(-1, -2).contiguous().transpose(-1, -2))  # b as a transposed view
    want = torch.matmul(torch.from_numpy(a).double(), torch.from_numpy(b).double())
    np.testing.assert_array_equal(got.to(pf.float64).detach().numpy(), want.detach().numpy())  # small integers: exact


def test_conv2d_tuning_cache_searches_once_and_persists(on_gpu, rng, tmp_path):
    cache = rocm.get_tuning_cache()
    cache.clear()
    path = tmp_path / "tuning.txt"
    cache.set_cache_file(str(path))
    try:
        x = pf.tensor(rng.standard_normal((3, 5, 17, 13)).astype(np.float32))
        w = pf.tensor(rng.standard_normal((7, 5, 3, 3)).astype(np.float32))
        first = pf.conv2d(x, w, padding=1).detach().numpy()
        assert cache.get_stats() == {"hits": 0, "misses": 1, "entries": 1}
        second = pf.conv2d(x, w, padding=1).detach().numpy()
        assert cache.get_stats()["hits"] == 1
        np.testing.assert_allclose(first, second, rtol=1e-6, atol=1e-6)
        arch = pf.rocm_get_device_info(0)["architecture"]
        lines = path.read_text().splitlines()
        assert len(lines) == 1 and f"|{arch}|" in lines[0] and "|x3x5x17x13|" in lines[0]
        if pf.rocm_get_device_info(0)["platform"] == "nvidia":
            # key, place in the heuristics' list, workspace, math type, engine: cuDNN's graph API chose
            assert len(lines[0].split("\t")) == 5, lines[0]
        # Another thread has its own DNN instance, which makes the plan again from the file's entry.
        cache.clear()
        cache.set_cache_file(str(path))
        third = []

        def convolve():
            pf.set_device("rocm")  # the current device is per thread
            third.append(pf.conv2d(x, w, padding=1).detach().numpy())

        worker = threading.Thread(target=convolve)
        worker.start()
        worker.join()
        assert cache.get_stats() == {"hits": 1, "misses": 0, "entries": 1}
        np.testing.assert_allclose(third[0], first, rtol=1e-6, atol=1e-6)
    finally:
        cache.set_cache_file("")
        cache.clear()


@pytest.mark.parametrize("dnn", [True, False], ids=["dnn", "im2col"])
def test_conv2d_tf32_switch(on_gpu, rng, dnn):
    """conv_allow_tf32 decides for the DNN library's convolutions and, with the library
    off, for the GEMMs of im2col + BLAS; the matmul setting decides for neither."""
    x = rng.standard_normal((2, 256, 20, 20)).astype(np.float32)
    w = rng.standard_normal((64, 256, 3, 3)).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), padding=1).detach().numpy()
    assert not rocm.conv_allow_tf32()  # the test suite turns it off (conftest.py); the library default is on
    info = pf.rocm_get_device_info(0)
    rocm.set_dnn_enabled(dnn)
    try:
        full = _rel_err(pf.conv2d(pf.tensor(x), pf.tensor(w), padding=1).detach().numpy(), want)
        rocm.set_allow_tf32(True)
        try:
            matmul_tf32 = _rel_err(pf.conv2d(pf.tensor(x), pf.tensor(w), padding=1).detach().numpy(), want)
        finally:
            rocm.set_allow_tf32(False)
        rocm.set_conv_allow_tf32(True)
        try:
            tf32 = _rel_err(pf.conv2d(pf.tensor(x), pf.tensor(w), padding=1).detach().numpy(), want)
        finally:
            rocm.set_conv_allow_tf32(False)
    finally:
        rocm.set_dnn_enabled(True)
    assert full < 1e-4 and matmul_tf32 < 1e-4 and tf32 < 1e-2  # 2304-term float32 sums against float64
    if not dnn and info["platform"] == "nvidia" and int(info["architecture"].split("_")[1]) >= 80:
        assert tf32 > 10 * full, "TF32 was allowed for convolutions but the im2col GEMM has float32 accuracy"


def _has_dnn():
    try:
        rocm.dnn_library()
        return True
    except pf.NotSupportedError:
        return False


@pytest.mark.parametrize("case", ["max_pool2d", "avg_pool2d", "bn_train", "bn_eval", "relu", "elu", "softmax",
                                  "log_softmax", "sum", "max"])
def test_dnn_entry_points_match_the_kernels(on_gpu, rng, case):
    """rocm.dnn_* (the DNN library, what the benchmark's --dnn section times) against the pf ops."""
    if not _has_dnn():
        pytest.skip("built without the DNN adapter")
    x = pf.tensor(rng.uniform(-3, 3, (4, 3, 13, 10)).astype(np.float32))
    if case in ("bn_train", "bn_eval"):
        w, b, mean, var = (pf.tensor(v.astype(np.float32)) for v in (
            rng.uniform(0.5, 1.5, 3), rng.standard_normal(3), rng.standard_normal(3), rng.uniform(0.5, 2, 3)))
        mean_l, var_l = mean.clone(), var.clone()
        training = case == "bn_train"
        want = pf.batch_norm(x, mean, var, w, b, training=training)
        if training:
            got, saved_mean, _ = rocm.dnn_batchnorm_forward_training(x, w, b, mean_l, var_l)
            np.testing.assert_allclose(mean_l.detach().numpy(), mean.detach().numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(var_l.detach().numpy(), var.detach().numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(saved_mean.detach().numpy(), pf.mean(x, (0, 2, 3)).detach().numpy(), rtol=1e-5, atol=1e-6)
        else:
            got = rocm.dnn_batchnorm_forward_inference(x, w, b, mean, var)
    else:
        want, got = {
            "max_pool2d": lambda: (pf.max_pool2d(x, 3, 2, 1), rocm.dnn_pooling2d_forward("max_pool2d", x, 3, 2, 1)),
            "avg_pool2d": lambda: (pf.avg_pool2d(x, 2), rocm.dnn_pooling2d_forward("avg_pool2d", x, 2)),
            "relu": lambda: (pf.relu(x), rocm.dnn_activation_forward("relu", x)),
            "elu": lambda: (pf.elu(x, 0.7), rocm.dnn_activation_forward("elu", x, 0.7)),
            "softmax": lambda: (pf.softmax(x, 1), rocm.dnn_softmax_forward(x, 1)),
            "log_softmax": lambda: (pf.log_softmax(x, -1), rocm.dnn_softmax_forward(x, -1, log_softmax=True)),
            "sum": lambda: (pf.sum(x, (0, 3)), rocm.dnn_reduce("sum", x, (0, 3))),
            "max": lambda: (pf.amax(x, -1, keepdim=True), rocm.dnn_reduce("max", x, -1, keepdim=True)),
        }[case]()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(pf.NotSupportedError):
        rocm.dnn_activation_forward("leaky_relu", x)
