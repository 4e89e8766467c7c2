"""Data loading as torch.utils.data: datasets, samplers, DataLoader and collation.

    from pyflame.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    for xb, yb in loader:
        ...

Shuffling draws from PyFlame's RNG: pf.manual_seed(s), or a pf.Generator passed as
generator=, makes the order reproducible. Differences from PyTorch: docs/data.md.
"""

from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "DistributedSampler",
    "Dataset",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]
