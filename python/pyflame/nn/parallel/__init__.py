"""Parallel training of one module over several processes (see docs/distributed.md)."""

from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
