"""Samplers as torch.utils.data.sampler: the order in which a DataLoader reads a dataset.

Random orders come from PyFlame's RNG (the default generator that pf.manual_seed seeds, or
the pf.Generator passed as generator=), drawn on the CPU.
"""

import itertools
from typing import Generic, Iterator, List, Sequence, Sized, TypeVar

import numpy as np

import pyflame as pf

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
]

_T_co = TypeVar("_T_co", covariant=True)


def _randperm(n, generator=None):
    """A random permutation of range(n) as an int64 CPU tensor, as torch.randperm(n, generator=...).

    PyFlame has no randperm yet: this draws n uniform float64 keys with pf.rand from
    `generator` (None: the default generator) and takes their stable argsort on the host.
    float64 keys have 53 random bits, so ties (which the stable sort would break by
    index) are practically absent. Replace with pf.randperm once it exists.
    """
    keys = pf.rand(n, dtype=pf.float64, generator=generator, device="cpu").numpy()
    return pf.from_numpy(np.argsort(keys, kind="stable").astype(np.int64))


def _seed_from_default_generator():
    """A fresh seed drawn from the default generator, as PyTorch's samplers draw one per epoch:
    each epoch gets a different order, and the whole run repeats after pf.manual_seed."""
    return int(pf.randint(0, 2**63 - 1, (1,), dtype=pf.int64, device="cpu").item())


class Sampler(Generic[_T_co]):
    """Base class of all samplers: __iter__ yields indices (or lists of indices) of a dataset;
    __len__, if defined, is the number it yields.

    No default __len__, as in PyTorch: len() of a sampler without one raises TypeError.
    """

    def __init__(self, data_source=None) -> None:
        # PyTorch deprecated and ignores this argument; accepted for compatibility.
        pass

    def __iter__(self) -> Iterator[_T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """Indices 0, 1, ..., len(data_source) - 1, always in this order."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices: a permutation of the dataset (replacement=False), or num_samples indices
    drawn with replacement.

    Args:
        data_source: the dataset (needs __len__).
        replacement: draw with replacement (default False).
        num_samples: how many indices to yield (default len(data_source)); without replacement,
            more than len(data_source) chains several permutations, as PyTorch.
        generator: a pf.Generator. Without one, each iteration draws a fresh seed from the
            default generator, so epochs differ and pf.manual_seed makes the run reproducible.
    """

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples=None, generator=None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator

        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        # the dataset's size may change between epochs
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if self.generator is None:
            generator = pf.Generator()
            generator.manual_seed(_seed_from_default_generator())
        else:
            generator = self.generator

        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from pf.randint(0, n, (32,), dtype=pf.int64, generator=generator, device="cpu").tolist()
            yield from pf.randint(0, n, (self.num_samples % 32,), dtype=pf.int64, generator=generator,
                                  device="cpu").tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from _randperm(n, generator).tolist()
            yield from _randperm(n, generator).tolist()[: self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a random order (a new one each iteration), without replacement.

    generator: a pf.Generator; None draws from the default generator.
    """

    def __init__(self, indices: Sequence[int], generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in _randperm(len(self.indices), self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler[List[int]]):
    """Groups the indices of another sampler (or any iterable) into lists of batch_size;
    drop_last drops a last, shorter list.

        >>> list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False))
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[List[int]]:
        sampler_iter = iter(self.sampler)
        if self.drop_last:
            args = [sampler_iter] * self.batch_size  # the same iterator batch_size times
            for batch in zip(*args):
                yield [*batch]
        else:
            batch = [*itertools.islice(sampler_iter, self.batch_size)]
            while batch:
                yield batch
                batch = [*itertools.islice(sampler_iter, self.batch_size)]

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
