"""Seed 003's configuration: Config's validation, the AMD architectures, optimize()."""

import numpy as np
import pytest

import pyflame as pf
from op_registry import make_values
from pyflame.backend import rocm


def test_config_defaults_and_validation():
    c = rocm.Config()
    assert c.architecture is rocm.Architecture.AUTO and c.optimization_level == "balanced"
    assert rocm.Config(architecture="cdna3").architecture is rocm.Architecture.CDNA3
    bad = [("optimization_level", "fastest", "conservative"), ("miopen_find_mode", "SLOW", "HYBRID"),
           ("default_precision", "fp8", "bf16"), ("architecture", "gfx90a", "CDNA2"), ("device_id", -1, ">= 0"),
           ("memory_pool_fraction", 1.5, "(0, 1]"), ("kernel_cache_size", 0, ">= 1"), ("allow_fp16", 1, "True"),
           ("kernel_cache_dir", "", "directory")]
    for field, value, allowed in bad:
        allowed = allowed.replace("(", ".").replace(")", ".")
        with pytest.raises(pf.ConfigurationError, match=rf"Config\.{field}.*{allowed}"):
            rocm.Config(**{field: value})
        with pytest.raises(ValueError):  # a ValueError, and a ROCmError
            rocm.Config(**{field: value})
    assert issubclass(pf.ConfigurationError, pf.ROCmError)
    c.optimization_level = "aggressive"
    with pytest.raises(pf.ConfigurationError, match="enable_profiling"):
        c.enable_profiling = "yes"
    with pytest.raises(pf.ConfigurationError, match="no field"):
        c.enable_turbo = True
    assert c.to_dict()["optimization_level"] == "aggressive"


def test_architectures_of_gfx_targets():
    expected = {"gfx908": ("CDNA", True, 64), "gfx90a": ("CDNA2", True, 64), "gfx942": ("CDNA3", True, 64),
                "gfx1030": ("RDNA2", False, 32), "gfx1100": ("RDNA3", False, 32), "gfx1201": ("RDNA4", False, 32)}
    for gfx, (name, cores, wave) in expected.items():
        a = rocm.architecture_from_gfx(gfx)
        assert (a.name, a.has_matrix_cores, a.wave_size) == (name, cores, wave)
    assert rocm.architecture_from_gfx("gfx90a:sramecc+:xnack-") is rocm.Architecture.CDNA2
    with pytest.raises(ValueError, match="gfx1234"):
        rocm.architecture_from_gfx("gfx1234")
    with pytest.raises(ValueError):
        rocm.Architecture.AUTO.wave_size


def test_get_architecture_names_the_gpu():
    if not pf.rocm_is_available():
        with pytest.raises(pf.ROCmNotAvailableError):
            rocm.get_architecture()
        return
    info = pf.rocm_get_device_info(0)
    if info["platform"] == "nvidia":
        with pytest.raises(pf.NotSupportedError, match="NVIDIA"):
            rocm.get_architecture()
    else:
        assert rocm.get_architecture() is rocm.architecture_from_gfx(info["architecture"])


def test_optimize_levels_keep_results(rng):
    pf.manual_seed(0)
    model = pf.nn.Sequential(pf.nn.Linear(6, 8), pf.nn.ReLU(), pf.nn.Linear(8, 2)).eval()
    x = pf.tensor(make_values(rng, (4, 6), "float32"))
    want = model(x).detach().numpy()
    for level, applied in (("conservative", []), ("balanced", ["pf.compile"]),
                           ("aggressive", ["pf.compile(mode='reduce-overhead')"])):
        fast = rocm.optimize(model, level)
        assert (fast is model) == (level == "conservative")
        with pf.no_grad():
            for _ in range(2):
                np.testing.assert_array_equal(fast(x).detach().numpy(), want)
        assert rocm.get_optimization_summary() == {"level": level, "optimizations_applied": applied}
    assert rocm.optimize(model, config=rocm.Config(enable_operator_fusion=False)) is model
    with pytest.raises(pf.ConfigurationError):
        rocm.optimize(model, "extreme")


def test_kernel_cache_dir_default_follows_pyflame_kernel_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PYFLAME_KERNEL_CACHE", str(tmp_path / "cache"))
    assert rocm.Config().kernel_cache_dir == str(tmp_path / "cache")
    monkeypatch.delenv("PYFLAME_KERNEL_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert rocm.Config().kernel_cache_dir == str(tmp_path / "xdg" / "pyflame" / "kernels")
