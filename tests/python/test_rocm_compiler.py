"""The run-time compiler (pyflame.backend.rocm.ROCmCompiler): kernels compiled from
source, launched on tensors placed with device=, checked against NumPy on fresh
random inputs; the memory and disk caches, a corrupt disk entry (recompiled with a
warning), an unusable cache directory, compiler errors with their log. The disk
cache's own format is tested on the CPU (tests/cpp/test_kernel_cache.cpp)."""

import glob
import os
import warnings

import numpy as np
import pytest

import pyflame as pf
from pyflame.backend import rocm

pytestmark = pytest.mark.skipif(not pf.rocm_is_available(), reason=f"no usable GPU: {pf.rocm_unavailable_reason()}")

SAXPY = r"""
template <class T>
__global__ void saxpy(T* out, const T* x, const T* y, T a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
extern "C" __global__ void fill_index(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}
"""


@pytest.fixture
def compiler(tmp_path):
    return rocm.ROCmCompiler(rocm.Config(kernel_cache_dir=str(tmp_path / "kernels")))


def _poisoned(n, dtype):
    out = pf.empty(n, dtype=dtype, device="rocm")
    out.fill_(float("nan") if dtype in (pf.float32, pf.float64) else -7)
    return out


@pytest.mark.parametrize("dtype, ctype", [(pf.float32, "float"), (pf.float64, "double")])
def test_template_kernel_matches_numpy(compiler, dtype, ctype):
    rng = np.random.default_rng()
    n = 10_007  # not a multiple of the block
    npd = np.float32 if ctype == "float" else np.float64
    x, y = rng.standard_normal(n).astype(npd), rng.standard_normal(n).astype(npd)
    a = npd(rng.uniform(0.5, 2.0))
    k = compiler.compile_kernel(SAXPY, f"saxpy<{ctype}>")
    assert k.name == f"saxpy<{ctype}>" and k.architecture == pf.rocm_get_device_info(0)["architecture"]
    out = _poisoned(n, dtype)
    k(((n + 255) // 256,), 256, [out, pf.tensor(x, device="rocm"), pf.tensor(y, device="rocm"), a, n])
    # The GPU may contract a * x + y into one FMA (one rounding, NumPy's two): an absolute
    # tolerance of a few units of the largest value covers the cancellation near zero.
    want = a * x + y
    eps = np.finfo(npd).eps
    np.testing.assert_allclose(out.cpu().detach().numpy(), want, rtol=4 * eps, atol=4 * eps * np.max(np.abs(want)))


def test_extern_c_kernel_and_numpy_int32_argument(compiler):
    n = 1000
    out = _poisoned(n, pf.int32)
    compiler.compile_kernel(SAXPY, "fill_index")(4, 256, [out, np.int32(n)])
    np.testing.assert_array_equal(out.cpu().detach().numpy(), 3 * np.arange(n) + 1)


def test_memory_then_disk_cache_hits(tmp_path):
    config = rocm.Config(kernel_cache_dir=str(tmp_path / "kernels"))
    first = rocm.ROCmCompiler(config)
    first.compile_kernel(SAXPY, "fill_index")
    first.compile_kernel(SAXPY, "fill_index")
    s = first.get_compilation_stats()
    assert (s["compilations"], s["cache_misses"], s["memory_hits"], s["disk_hits"]) == (1, 1, 1, 0)
    assert s["cache_hit_rate_percent"] == pytest.approx(50.0) and s["total_compile_time_ms"] > 0
    assert len(glob.glob(str(tmp_path / "kernels" / "*.pfk"))) == 1

    second = rocm.ROCmCompiler(config)  # as a new process: only the disk has it
    out = _poisoned(64, pf.int32)
    second.compile_kernel(SAXPY, "fill_index")(1, 64, [out, np.int32(64)])
    np.testing.assert_array_equal(out.cpu().detach().numpy(), 3 * np.arange(64) + 1)
    s = second.get_compilation_stats()
    assert (s["compilations"], s["disk_hits"]) == (0, 1)

    # Another option is another kernel.
    second.compile_kernel(SAXPY, "fill_index", options=["-DUNUSED=1"])
    assert second.get_compilation_stats()["compilations"] == 1


def test_corrupt_disk_entry_is_recompiled_with_a_warning(tmp_path):
    config = rocm.Config(kernel_cache_dir=str(tmp_path / "kernels"))
    rocm.ROCmCompiler(config).compile_kernel(SAXPY, "fill_index")
    (entry,) = glob.glob(str(tmp_path / "kernels" / "*.pfk"))
    data = bytearray(open(entry, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(entry, "wb").write(bytes(data))

    fresh = rocm.ROCmCompiler(config)
    with pytest.warns(UserWarning, match="checksum"):
        k = fresh.compile_kernel(SAXPY, "fill_index")
    assert fresh.get_compilation_stats()["compilations"] == 1
    out = _poisoned(100, pf.int32)
    k(1, 128, [out, np.int32(100)])
    np.testing.assert_array_equal(out.cpu().detach().numpy(), 3 * np.arange(100) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten entry is whole again
        rocm.ROCmCompiler(config).compile_kernel(SAXPY, "fill_index")


def test_unusable_cache_directory_degrades_to_memory_with_one_warning(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    c = rocm.ROCmCompiler(rocm.Config(kernel_cache_dir=str(blocker / "kernels")))
    with pytest.warns(UserWarning, match="in memory only") as record:
        c.compile_kernel(SAXPY, "fill_index")
        c.compile_kernel(SAXPY, "saxpy<float>")
    assert len(record) == 1
    c.compile_kernel(SAXPY, "fill_index")
    assert c.get_compilation_stats()["memory_hits"] == 1


def test_cache_disabled_and_clear(tmp_path):
    off = rocm.ROCmCompiler(rocm.Config(kernel_cache_enabled=False))
    assert off.cache_dir is None
    off.compile_kernel(SAXPY, "fill_index")
    c = rocm.ROCmCompiler(rocm.Config(kernel_cache_dir=str(tmp_path / "k")))
    k = c.compile_kernel(SAXPY, "fill_index")
    c.clear_cache()
    assert glob.glob(str(tmp_path / "k" / "*.pfk")) == []
    out = _poisoned(8, pf.int32)
    k(1, 8, [out, np.int32(8)])  # a kernel already returned stays loaded
    np.testing.assert_array_equal(out.cpu().detach().numpy(), 3 * np.arange(8) + 1)
    c.compile_kernel(SAXPY, "fill_index")
    assert c.get_compilation_stats()["compilations"] == 2


def test_compile_error_carries_the_log_and_the_source_line(compiler):
    bad = "__global__ void broken(float* x) {\n  x[0] = undeclared_name;\n}\n"
    with pytest.raises(pf.HIPCompilationError, match="undeclared_name") as info:
        compiler.compile_kernel(bad, "broken")
    assert isinstance(info.value, pf.ROCmError)
    assert "2:   x[0] = undeclared_name;" in str(info.value)
    with pytest.raises(pf.HIPCompilationError):
        compiler.compile_kernel(SAXPY, "no_such_kernel")


def test_bad_launch_arguments(compiler):
    k = compiler.compile_kernel(SAXPY, "fill_index")
    with pytest.raises(ValueError, match="argument 0 is on 'cpu'"):
        k(1, 32, [pf.zeros(4, dtype=pf.int32), np.int32(4)])
    with pytest.raises(TypeError, match="argument 1 has type str"):
        k(1, 32, [pf.zeros(4, dtype=pf.int32, device="rocm"), "4"])
    with pytest.raises(ValueError, match="block"):
        k(1, (0,), [pf.zeros(4, dtype=pf.int32, device="rocm"), np.int32(4)])


def test_compiler_version_names_the_vendor_compiler():
    v = rocm.compiler_version()
    assert v.startswith("NVRTC " if rocm._rocm.platform() == "nvidia" else "hiprtc "), v


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PYFLAME_KERNEL_CACHE", str(tmp_path / "env_cache"))
    assert rocm.Config().kernel_cache_dir == str(tmp_path / "env_cache")
    rocm.ROCmCompiler().compile_kernel(SAXPY, "fill_index")
    assert len(glob.glob(str(tmp_path / "env_cache" / "*.pfk"))) == 1
    assert os.path.isdir(tmp_path / "env_cache")


FUNCTORS = r"""
#include "kernels/functors.h"
using namespace pyflame::kernels;
// A kernel takes a functor by value: its bytes are the parameters' (one float here).
template <class F>
__global__ void apply(float* out, const float* x, F f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = f(x[i]);
}
"""


def test_kernel_calls_the_library_functors(compiler):
    rng = np.random.default_rng()
    n = 3001
    x = rng.standard_normal(n).astype(np.float32) * 3
    xt = pf.tensor(x, device="rocm")
    slope = np.float32(rng.uniform(0.01, 0.3))
    out = _poisoned(n, pf.float32)
    compiler.compile_kernel(FUNCTORS, "apply<LeakyRelu<float>>")((n + 127) // 128, 128, [out, xt, slope, np.int32(n)])
    np.testing.assert_array_equal(out.cpu().detach().numpy(), np.where(x > 0, x, x * slope))
    # Gelu's one member selects the tanh form: the library's own op is the reference.
    for approximate, flag in (("none", 0.0), ("tanh", 1.0)):
        out = _poisoned(n, pf.float32)
        compiler.compile_kernel(FUNCTORS, "apply<Gelu<float>>")((n + 127) // 128, 128,
                                                                 [out, xt, np.float32(flag), np.int32(n)])
        want = pf.nn.functional.gelu(xt, approximate=approximate).cpu().detach().numpy()
        np.testing.assert_allclose(out.cpu().detach().numpy(), want, rtol=1e-6, atol=1e-6)
