"""Utilities mirroring torch.utils: pyflame.utils.data (datasets, samplers, DataLoader) and
pyflame.utils.checkpoint (gradient checkpointing)."""

from . import checkpoint, data  # noqa: F401
