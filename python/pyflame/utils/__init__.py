"""Utilities mirroring torch.utils: pyflame.utils.data (datasets, samplers, DataLoader),
pyflame.utils.checkpoint (gradient checkpointing), pyflame.utils.dlpack (DLPack capsules) and
pyflame.utils.hooks (RemovableHandle)."""

from . import checkpoint, data, dlpack, hooks  # noqa: F401
