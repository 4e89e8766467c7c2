"""Utilities mirroring torch.utils: pyflame.utils.data (datasets, samplers, DataLoader),
pyflame.utils.checkpoint (gradient checkpointing) and pyflame.utils.dlpack (DLPack capsules)."""

from . import checkpoint, data, dlpack  # noqa: F401
