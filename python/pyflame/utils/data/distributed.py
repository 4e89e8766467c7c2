"""DistributedSampler as torch.utils.data.distributed: each rank reads its own share of a dataset.

    sampler = DistributedSampler(dataset)          # rank and world size from pyflame.distributed
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)                   # a new order each epoch, the same on every rank
        for batch in loader:
            ...

The partition is PyTorch's: pad by repeating indices from the start (or drop the tail with
drop_last) to a multiple of num_replicas, then rank r takes every num_replicas-th index from r.
Shuffled orders come from a pf.Generator seeded with seed + epoch, so all ranks agree on the
permutation without communicating; it is a different permutation from PyTorch's for the same
seed, since the RNGs differ.
"""

import math
from typing import Iterator, Optional, Sized

import pyflame as pf

from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _distributed():
    """pyflame.distributed, imported only when a rank or world size must be looked up."""
    try:
        import pyflame.distributed as dist
    except ImportError as e:
        raise RuntimeError("Requires distributed package to be available") from e
    return dist


class DistributedSampler(Sampler[int]):
    """Indices of the share of `dataset` that this rank reads, as torch's DistributedSampler.

    Args:
        dataset: the dataset (needs __len__).
        num_replicas: number of ranks (default: pyflame.distributed.get_world_size()).
        rank: this rank, in [0, num_replicas) (default: pyflame.distributed.get_rank()).
        shuffle: permute the indices, identically on all ranks (default True).
        seed: the permutation's seed; must be the same on all ranks (default 0).
        drop_last: drop the tail that does not divide evenly instead of padding with
            repeated indices (default False).
    """

    def __init__(self, dataset: Sized, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None:
            num_replicas = _distributed().get_world_size()
        if rank is None:
            rank = _distributed().get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if self.drop_last and len(self.dataset) % self.num_replicas != 0:
            # the largest multiple of num_replicas that fits, so every rank reads as many samples
            self.num_samples = math.ceil((len(self.dataset) - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(len(self.dataset) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            g = pf.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = pf.randperm(n, generator=g, device="cpu").tolist()
        else:
            indices = list(range(n))

        padding_size = self.total_size - n
        if padding_size > 0:
            # the indices repeat more than once when num_replicas > len(dataset)
            indices += (indices * math.ceil(padding_size / n))[:padding_size]
        # stopping at total_size drops the tail that drop_last leaves out
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch that, with the seed, picks the permutation; call it before each epoch so
        that epochs differ (all ranks must pass the same epoch)."""
        self.epoch = epoch
