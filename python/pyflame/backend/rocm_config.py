"""Seed 003's configuration of the ROCm backend: Config, the AMD architectures, optimize().

Config validates every field when it is made or changed: a bad value raises
pf.ConfigurationError (a pf.ROCmError and a ValueError) naming the field and what it
accepts. What each field does today is listed in docs/compile.md ("Configuration");
fields whose machinery is not built yet (MIOpen's find mode) are kept and validated so
that seed code runs, and say so there.

The architectures are AMD's GPU families by their gfx names (architecture_from_gfx);
get_architecture() names the current GPU's, and says so when it is an NVIDIA GPU (the
same HIP source runs there) instead of pretending to be an AMD one.
"""

import enum
import os
from dataclasses import dataclass, field, fields

from .. import _C


class ConfigurationError(_C.ROCmError, ValueError):
    """A Config field with a value it does not accept."""


class Architecture(enum.Enum):
    """AMD GPU families (seed 003's AMDArchitecture, with RDNA4)."""

    AUTO = "auto"
    CDNA = "cdna"    # gfx908 (MI100)
    CDNA2 = "cdna2"  # gfx90a (MI200)
    CDNA3 = "cdna3"  # gfx940-942 (MI300)
    RDNA2 = "rdna2"  # gfx1030-1036
    RDNA3 = "rdna3"  # gfx1100-1103
    RDNA4 = "rdna4"  # gfx1200-1201

    @property
    def has_matrix_cores(self):
        """MFMA matrix cores: the CDNA families (RDNA3/4's WMMA instructions are another unit)."""
        return self in (Architecture.CDNA, Architecture.CDNA2, Architecture.CDNA3)

    @property
    def wave_size(self):
        """Threads of a wavefront: 64 on CDNA, 32 (the compilers' default) on RDNA."""
        if self is Architecture.AUTO:
            raise ValueError("Architecture.AUTO has no wave size: it stands for the GPU found at run time")
        return 64 if self.has_matrix_cores else 32


_GFX = {"gfx908": Architecture.CDNA, "gfx90a": Architecture.CDNA2, "gfx940": Architecture.CDNA3,
        "gfx941": Architecture.CDNA3, "gfx942": Architecture.CDNA3, "gfx1030": Architecture.RDNA2,
        "gfx1031": Architecture.RDNA2, "gfx1032": Architecture.RDNA2, "gfx1034": Architecture.RDNA2,
        "gfx1035": Architecture.RDNA2, "gfx1036": Architecture.RDNA2, "gfx1100": Architecture.RDNA3,
        "gfx1101": Architecture.RDNA3, "gfx1102": Architecture.RDNA3, "gfx1103": Architecture.RDNA3,
        "gfx1200": Architecture.RDNA4, "gfx1201": Architecture.RDNA4}


def architecture_from_gfx(gfx):
    """The family of an AMD target name ("gfx90a", or the runtime's "gfx90a:sramecc+:xnack-")."""
    name = str(gfx).split(":")[0].strip().lower()
    if name not in _GFX:
        raise ValueError(f"architecture_from_gfx: unknown AMD target {gfx!r}; known: {', '.join(sorted(_GFX))}")
    return _GFX[name]


def get_architecture(device=None):
    """The Architecture of a GPU (default: the current one). On an NVIDIA GPU: pf.NotSupportedError
    saying which GPU it is (the HIP source runs there; it has no AMD architecture)."""
    if not _C.rocm_is_available():
        raise _C.ROCmNotAvailableError(f"get_architecture: no usable GPU ({_C.rocm_unavailable_reason()})")
    info = _C.rocm_get_device_info(_C.rocm_get_device() if device is None else int(device))
    if info["platform"] != "amd":
        raise _C.NotSupportedError(f"get_architecture: {info['name']} is an NVIDIA GPU ({info['architecture']}), "
                                   "not an AMD one; PyFlame's HIP source runs on it through CUDA")
    return architecture_from_gfx(info["architecture"])


_CHOICES = {
    "optimization_level": ("conservative", "balanced", "aggressive"),
    "miopen_find_mode": ("NORMAL", "FAST", "HYBRID"),
    "default_precision": ("fp32", "fp16", "bf16"),
}
_FLAGS = ("enable_matrix_cores", "enable_mixed_precision", "enable_operator_fusion", "kernel_cache_enabled",
          "allow_fp16", "allow_bf16", "enable_profiling", "enable_strict_validation", "enable_oom_protection")


@dataclass
class Config:
    """The ROCm backend's configuration (seed 003's AMDConfig); every field validated."""

    architecture: Architecture = Architecture.AUTO
    device_id: int = 0
    optimization_level: str = "balanced"
    enable_matrix_cores: bool = True
    enable_mixed_precision: bool = True
    enable_operator_fusion: bool = True
    memory_pool_fraction: float = 0.9
    kernel_cache_enabled: bool = True
    kernel_cache_dir: str = field(default_factory=_C._kernel_cache_default_dir)
    kernel_cache_size: int = 100
    miopen_find_mode: str = "NORMAL"
    default_precision: str = "fp32"
    allow_fp16: bool = True
    allow_bf16: bool = True
    enable_profiling: bool = False
    enable_strict_validation: bool = False
    enable_oom_protection: bool = True

    def __setattr__(self, name, value):
        if name not in self.__dataclass_fields__:
            raise ConfigurationError(f"Config has no field {name!r}; fields: {', '.join(self.__dataclass_fields__)}")
        object.__setattr__(self, name, _checked(name, value))

    def to_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _bad(name, value, allowed):
    return ConfigurationError(f"Config.{name}: {value!r} is not allowed; expected {allowed}")


def _checked(name, value):
    if name == "architecture":
        if isinstance(value, str):
            try:
                return Architecture(value.lower())
            except ValueError:
                pass
        if not isinstance(value, Architecture):
            raise _bad(name, value, "an Architecture (" + ", ".join(a.name for a in Architecture) + ")")
        return value
    if name in _CHOICES:
        if value not in _CHOICES[name]:
            raise _bad(name, value, "one of " + ", ".join(map(repr, _CHOICES[name])))
        return value
    if name in _FLAGS:
        if not isinstance(value, bool):
            raise _bad(name, value, "True or False")
        return value
    if name in ("device_id", "kernel_cache_size"):
        low = 0 if name == "device_id" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise _bad(name, value, f"an int >= {low}")
        return value
    if name == "memory_pool_fraction":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
            raise _bad(name, value, "a number in (0, 1]")
        return float(value)
    if name == "kernel_cache_dir":
        if not isinstance(value, (str, os.PathLike)) or not str(value):
            raise _bad(name, value, "a directory path")
        return str(value)
    return value


_LEVEL_MODES = {"conservative": None, "balanced": "default", "aggressive": "reduce-overhead"}
_summary = {"level": None, "optimizations_applied": []}


def optimize(model, level=None, config=None):
    """The model prepared at an optimisation level (seed 003's AMDOptimizer.optimize): conservative
    returns it unchanged; balanced compiles it (pf.compile: traced graphs replayed without Python);
    aggressive compiles it with mode="reduce-overhead" (inference graphs of one GPU as device graphs).
    Results are the same at every level; get_optimization_summary() lists what was applied."""
    from .._compile import compile as pf_compile

    config = config or Config()
    level = config.optimization_level if level is None else _checked("optimization_level", level)
    applied = []
    mode = _LEVEL_MODES[level]
    if mode is not None and config.enable_operator_fusion:
        model = pf_compile(model, mode=mode)
        applied.append("pf.compile" + ("" if mode == "default" else f"(mode={mode!r})"))
    _summary["level"], _summary["optimizations_applied"] = level, applied
    return model


def get_optimization_summary():
    """{"level": ..., "optimizations_applied": [...]} of the last optimize() call."""
    return {"level": _summary["level"], "optimizations_applied": list(_summary["optimizations_applied"])}
