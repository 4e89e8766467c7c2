"""Device backends. `pyflame.backend.rocm` is the GPU backend (AMD through ROCm, NVIDIA through CUDA)."""

from . import rocm  # noqa: F401
