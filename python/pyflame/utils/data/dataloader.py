"""DataLoader as torch.utils.data.DataLoader (single-process), with default_collate and
default_convert.

A DataLoader combines a dataset with a sampler (the order: sequential, or shuffled from
PyFlame's RNG) and a collate function (how samples become a batch). Differences from
PyTorch: docs/data.md.
"""

import collections
import copy
import re
import warnings
from typing import Any, Callable, Dict, Generic, Optional, Tuple, TypeVar, Union

import numpy as np

import pyflame as pf

from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = [
    "DataLoader",
    "collate",
    "default_collate",
    "default_collate_fn_map",
    "default_convert",
    "get_worker_info",
]

_T_co = TypeVar("_T_co", covariant=True)

# ------------------------------------------------------------------------------------------
# Collation (torch.utils.data._utils.collate)
# ------------------------------------------------------------------------------------------

# NumPy dtype strings of byte strings, unicode strings and objects: no tensor for those.
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _as_tensor(data):
    """torch.as_tensor for NumPy data (an array, a NumPy scalar or a list of NumPy scalars):
    the dtype is kept, and on the CPU the tensor shares the array's memory where it can."""
    arr = np.asarray(data)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.flags.writeable and pf.get_device() == "cpu":
        return pf.from_numpy(arr)
    return pf.tensor(arr)  # a copy: read-only arrays, or a GPU as the current device


def _rebuild_mapping(like, values):
    """A mapping of like's type holding `values` (a dict over like's keys), as PyTorch rebuilds one: a mutable
    mapping is copied and updated, another made from the dict; the dict itself where that type cannot be."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            clone = copy.copy(like)
            clone.update(values)
            return clone
        return type(like)(values)
    except TypeError:
        return values


def _rebuild_sequence(like, values):
    """A sequence of like's type holding `values` (a list, one per position), as PyTorch rebuilds one: a mutable
    sequence is copied and filled in, another made from the list; the list itself where that type cannot be."""
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, value in enumerate(values):
                clone[i] = value
            return clone
        return type(like)(values)
    except TypeError:
        return values


def default_convert(data):
    """Converts each NumPy array (and NumPy scalar) in `data` to a tensor, recursing into
    mappings, namedtuples, tuples (which become lists, as in PyTorch) and sequences; anything
    else is returned unchanged. The collate function of DataLoader(batch_size=None)."""
    elem_type = type(data)
    if isinstance(data, pf.Tensor):
        return data
    elif elem_type.__module__ == "numpy" and elem_type.__name__ != "str_" and elem_type.__name__ != "string_":
        if elem_type.__name__ == "ndarray" and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return _as_tensor(data)
    elif isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    elif isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    elif isinstance(data, tuple):
        return [default_convert(d) for d in data]  # a list, as PyTorch (backwards compatibility there)
    elif isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def collate(batch, *, collate_fn_map: Optional[Dict[Union[type, Tuple[type, ...]], Callable]] = None):
    """Collates a list of samples by the type of the first: a type in `collate_fn_map` (exactly,
    else the first key it is an instance of) gets that function; mappings, namedtuples and
    sequences are collated field by field, recursively. As torch.utils.data._utils.collate.collate:
    extend default_collate by copying default_collate_fn_map and adding types."""
    elem = batch[0]
    elem_type = type(elem)

    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)

    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                                       for key in elem})
    elif isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    elif isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(elem) == elem_size for elem in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = zip(*batch)
        if isinstance(elem, tuple):
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]  # a list, as PyTorch
        return _rebuild_sequence(elem, [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed])

    raise TypeError(default_collate_err_msg_format.format(elem_type))


def collate_tensor_fn(batch, *, collate_fn_map=None):
    return pf.stack(list(batch), 0)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([_as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    return _as_tensor(list(batch))  # keeps the NumPy dtype (np.float32 -> float32)


def collate_float_fn(batch, *, collate_fn_map=None):
    return pf.tensor(list(batch), dtype=pf.float64)  # Python floats: float64, as PyTorch's collate


def collate_int_fn(batch, *, collate_fn_map=None):
    return pf.tensor(list(batch))  # ints: int64; bools: bool


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map: Dict[Union[type, Tuple[type, ...]], Callable] = {pf.Tensor: collate_tensor_fn}
default_collate_fn_map[np.ndarray] = collate_numpy_array_fn
default_collate_fn_map[(np.bool_, np.number, np.object_)] = collate_numpy_scalar_fn
default_collate_fn_map[float] = collate_float_fn
default_collate_fn_map[int] = collate_int_fn
default_collate_fn_map[str] = collate_str_fn
default_collate_fn_map[bytes] = collate_str_fn


def default_collate(batch):
    """Puts a list of samples together into a batch with a new leading dimension, as PyTorch:

    * tensors -> pf.stack(batch)
    * NumPy arrays and NumPy scalars -> tensors of their dtype, stacked
    * Python floats -> float64 tensor; ints -> int64 tensor; bools -> bool tensor
    * str and bytes -> unchanged (the list, or the tuple when inside a tuple sample)
    * Mapping -> the same mapping with each key collated
    * namedtuple -> the same namedtuple with each field collated
    * other sequences (tuples become lists) -> each position collated

        >>> default_collate([{"a": 0, "b": 1.5}, {"a": 2, "b": 3.5}])
        {'a': tensor([0, 2]), 'b': tensor([1.5, 3.5], dtype=pyflame.float64)}
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)


def get_worker_info():
    """Information about the current worker process: always None, since PyFlame loads data in
    the main process only (num_workers=0)."""
    return None


# ------------------------------------------------------------------------------------------
# Pinned memory
# ------------------------------------------------------------------------------------------


def _pin_memory(data):
    """data with each tensor (and each object with a pin_memory method) replaced by its pinned copy."""
    if isinstance(data, pf.Tensor) or hasattr(data, "pin_memory"):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {k: _pin_memory(sample) for k, sample in data.items()})
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):  # namedtuple
            return type(data)(*(_pin_memory(sample) for sample in data))
        return type(data)(_pin_memory(sample) for sample in data)
    if isinstance(data, collections.abc.Sequence):
        return _rebuild_sequence(data, [_pin_memory(sample) for sample in data])
    return data


def _pin_memory_enabled(loader):
    """Whether the loader's batches get pinned; warns, as PyTorch, when pin_memory=True cannot be honoured."""
    if not loader.pin_memory:
        return False
    if loader.pin_memory_device:
        warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                      f"ignore pin_memory_device='{loader.pin_memory_device}'.", stacklevel=4)
    if not pf.rocm_is_available():
        warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                      "then device pinned memory won't be used.", stacklevel=4)
        return False
    return True


# ------------------------------------------------------------------------------------------
# Fetchers and the iterator (torch.utils.data._utils.fetch, _SingleProcessDataLoaderIter)
# ------------------------------------------------------------------------------------------


class _DatasetKind:
    Map = 0
    Iterable = 1


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: None forever (the dataset's own iterator decides)."""

    def __iter__(self):
        while True:
            yield None


class _MapDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last

    def fetch(self, possibly_batched_index):
        if self.auto_collation:
            if hasattr(self.dataset, "__getitems__") and self.dataset.__getitems__:
                data = self.dataset.__getitems__(possibly_batched_index)
            else:
                data = [self.dataset[idx] for idx in possibly_batched_index]
        else:
            data = self.dataset[possibly_batched_index]
        return self.collate_fn(data)


class _IterableDatasetFetcher(_MapDatasetFetcher):
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        super().__init__(dataset, auto_collation, collate_fn, drop_last)
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, possibly_batched_index):
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in possibly_batched_index:
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
            if len(data) == 0 or (self.drop_last and len(data) < len(possibly_batched_index)):
                raise StopIteration
        else:
            data = next(self.dataset_iter)
        return self.collate_fn(data)


class _SingleProcessDataLoaderIter:
    """One pass over a DataLoader, in the main process."""

    def __init__(self, loader):
        if loader.timeout != 0:
            # PyTorch raises the same (an AssertionError) here.
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0: timeout applies to worker "
                                 "processes only, and PyFlame loads in the main process (num_workers=0)")
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._pin_memory = _pin_memory_enabled(loader)
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        fetcher = _MapDatasetFetcher if self._dataset_kind == _DatasetKind.Map else _IterableDatasetFetcher
        self._dataset_fetcher = fetcher(self._dataset, self._auto_collation, self._collate_fn, self._drop_last)

    def __iter__(self):
        return self

    def __next__(self) -> Any:
        index = next(self._sampler_iter)  # may raise StopIteration
        data = self._dataset_fetcher.fetch(index)  # may raise StopIteration
        if self._pin_memory:
            data = _pin_memory(data)
        self._num_yielded += 1
        if (self._dataset_kind == _DatasetKind.Iterable and self._IterableDataset_len_called is not None
                and self._num_yielded > self._IterableDataset_len_called):
            warnings.warn(f"Length of IterableDataset {self._dataset} was reported to be "
                          f"{self._IterableDataset_len_called}(when accessing len(dataloader)), but "
                          f"{self._num_yielded} samples have been fetched. ", stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{self.__class__.__name__} cannot be pickled")


# ------------------------------------------------------------------------------------------
# DataLoader
# ------------------------------------------------------------------------------------------


class DataLoader(Generic[_T_co]):
    """Iterates over a dataset in batches, as torch.utils.data.DataLoader.

    Args:
        dataset: a map-style Dataset (__getitem__ and __len__) or an IterableDataset.
        batch_size: samples per batch (default 1); None turns batching off (each sample is
            passed through default_convert, or collate_fn).
        shuffle: a new random order each epoch, drawn from PyFlame's RNG (default False).
        sampler: the order of indices (a Sampler or any iterable); excludes shuffle.
        batch_sampler: yields lists of indices; excludes batch_size, shuffle, sampler, drop_last.
        num_workers: must be 0: PyFlame loads data in the main process only (> 0 raises
            pf.NotSupportedError).
        collate_fn: turns a list of samples into a batch (default: default_collate).
        pin_memory: pin each batch's tensors for faster host-to-GPU copies, where PyFlame can;
            warns and goes on unpinned where it cannot (no GPU, as PyTorch).
        drop_last: drop the last batch when it is shorter than batch_size.
        timeout, worker_init_fn, multiprocessing_context, prefetch_factor, persistent_workers:
            worker-process options, validated as PyTorch does; they need num_workers > 0.
        generator: a pf.Generator for the shuffle order (default: a seed drawn each epoch from
            the default generator, so pf.manual_seed makes the run reproducible).
    """

    dataset: Any
    batch_size: Optional[int]
    num_workers: int
    pin_memory: bool
    drop_last: bool
    timeout: float
    sampler: Any
    prefetch_factor: Optional[int]
    __initialized = False

    def __init__(self, dataset, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None, sampler=None,
                 batch_sampler=None, num_workers: int = 0, collate_fn=None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None, multiprocessing_context=None,
                 generator=None, *, prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            # The dataset's iterator gives the order: no shuffle, sampler or batch_sampler.
            if shuffle not in {False, None}:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}")
            elif batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = _DatasetKind.Map

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")

        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                                 "drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                 "drop_last")

        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)

        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator

        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers

        if num_workers > 0:
            raise pf.NotSupportedError(
                f"DataLoader: num_workers={num_workers} is not supported: PyFlame has no multi-process data "
                "loading yet; use num_workers=0 (batches are then loaded in the main process)")

        self.__initialized = True
        self._IterableDataset_len_called = None

    @property
    def multiprocessing_context(self):
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, multiprocessing_context) -> None:
        if multiprocessing_context is not None and self.num_workers == 0:
            raise ValueError("multiprocessing_context can only be used with multi-process loading "
                             f"(num_workers > 0), but got num_workers={self.num_workers}")
        self.__multiprocessing_context = multiprocessing_context

    def __setattr__(self, attr, val) -> None:
        if self.__initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                           "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    def __iter__(self) -> _SingleProcessDataLoaderIter:
        return _SingleProcessDataLoaderIter(self)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        # the sampler the fetcher reads: batch_sampler with batching, else sampler
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self) -> int:
        if self._dataset_kind == _DatasetKind.Iterable:
            # the dataset's own __len__ (TypeError without one), in batches
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                if self.drop_last:
                    length = length // self.batch_size
                else:
                    length = -(-length // self.batch_size)
            return length
        return len(self._index_sampler)
