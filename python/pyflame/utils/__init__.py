"""Utilities mirroring torch.utils: pyflame.utils.data (datasets, samplers, DataLoader)."""

from . import data  # noqa: F401
