"""pyflame.utils.data: datasets, samplers, DataLoader and collation next to torch.utils.data."""

import collections
import warnings

import numpy as np
import pytest

import pyflame as pf
from pyflame.utils import data as pfd
from pyflame.utils.data import sampler as pf_sampler

torch = pytest.importorskip("torch")
import torch.utils.data as td  # noqa: E402

Point = collections.namedtuple("Point", ["x", "y"])


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------


def assert_same(p, t, where="batch"):
    """A PyFlame result equals PyTorch's: the same structure (container types, keys, lengths),
    tensors of the same shape, dtype and values, and equal non-tensor leaves."""
    if isinstance(t, torch.Tensor):
        assert isinstance(p, pf.Tensor), f"{where}: {type(p).__name__} instead of a tensor"
        a, b = p.detach().numpy(), t.detach().numpy()
        assert a.dtype == b.dtype, f"{where}: dtype {a.dtype} vs torch {b.dtype}"
        assert a.shape == b.shape, f"{where}: shape {a.shape} vs torch {b.shape}"
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(t, dict):
        assert type(p) is type(t), f"{where}: {type(p).__name__} vs torch {type(t).__name__}"
        assert list(p) == list(t), f"{where}: keys"
        for k in t:
            assert_same(p[k], t[k], f"{where}[{k!r}]")
    elif isinstance(t, (list, tuple)):
        assert type(p) is type(t), f"{where}: {type(p).__name__} vs torch {type(t).__name__}"
        assert len(p) == len(t), f"{where}: length"
        for i, (a, b) in enumerate(zip(p, t)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert type(p) is type(t) and p == t, f"{where}: {p!r} vs torch {t!r}"


def to_torch_tree(x):
    """The same nested sample with each pf tensor replaced by a torch tensor of its values."""
    if isinstance(x, pf.Tensor):
        return torch.from_numpy(x.detach().numpy().copy())
    if isinstance(x, dict):
        return type(x)((k, to_torch_tree(v)) for k, v in x.items())
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(to_torch_tree(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(to_torch_tree(v) for v in x)
    return x


def tensor_pair(arr):
    return pf.tensor(arr), torch.from_numpy(np.array(arr, copy=True))


def datasets_pair(rng, n):
    """(pf TensorDataset, torch TensorDataset) over the same float32, float64, int64 and bool data."""
    arrays = [
        rng.standard_normal((n, 3, 2)).astype(np.float32),
        rng.standard_normal(n),
        rng.integers(-1000, 1000, size=n),
        rng.random((n, 4)) < 0.5,
    ]
    pairs = [tensor_pair(a) for a in arrays]
    return pfd.TensorDataset(*(p for p, _ in pairs)), td.TensorDataset(*(t for _, t in pairs))


def epoch_order(loader):
    """The sample indices of one pass over a loader of index_dataset, in order."""
    out = []
    for (idx,) in loader:
        out.extend(idx.tolist())
    return out


def index_dataset(n):
    return pfd.TensorDataset(pf.arange(n))


# ----------------------------------------------------------------------------------------------
# DataLoader over a TensorDataset, without shuffle: batch for batch as PyTorch
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1, 2, 3, 4, 5, 10, 16])
def test_loader_batches_match_torch(rng, batch_size, drop_last):
    n = 10
    pds, tds = datasets_pair(rng, n)
    pl = pfd.DataLoader(pds, batch_size=batch_size, drop_last=drop_last)
    tl = td.DataLoader(tds, batch_size=batch_size, drop_last=drop_last)
    assert len(pl) == len(tl)
    pb, tb = list(pl), list(tl)
    assert len(pb) == len(tb) == len(pl)
    for i, (p, t) in enumerate(zip(pb, tb)):
        assert_same(p, t, f"batch {i}")


def test_loader_defaults_and_reiteration(rng):
    pds, tds = datasets_pair(rng, 7)
    pl, tl = pfd.DataLoader(pds), td.DataLoader(tds)
    assert pl.batch_size == 1 and not pl.drop_last and len(pl) == len(tl) == 7
    assert isinstance(pl.sampler, pfd.SequentialSampler) and isinstance(pl.batch_sampler, pfd.BatchSampler)
    for _ in range(2):  # a new pass each time
        for p, t in zip(pl, tl):
            assert_same(p, t)


def test_loader_no_batching_matches_torch(rng):
    pds, tds = datasets_pair(rng, 6)
    pl, tl = pfd.DataLoader(pds, batch_size=None), td.DataLoader(tds, batch_size=None)
    assert len(pl) == len(tl) == 6 and pl.batch_sampler is None
    for i, (p, t) in enumerate(zip(pl, tl)):
        assert_same(list(p), t, f"sample {i}")  # default_convert turns the sample tuple into a list, as torch


def test_loader_no_batching_converts_numpy(rng):
    samples = [{"a": rng.standard_normal(3).astype(np.float32), "b": (int(rng.integers(9)), "s"),
                "c": np.int16(rng.integers(100))} for _ in range(4)]
    pl, tl = pfd.DataLoader(samples, batch_size=None), td.DataLoader(samples, batch_size=None)
    for i, (p, t) in enumerate(zip(pl, tl)):
        assert_same(p, t, f"sample {i}")


def test_loader_custom_collate_and_sampler(rng):
    pds, tds = datasets_pair(rng, 9)
    order = rng.permutation(9).tolist()
    pl = pfd.DataLoader(pds, batch_size=4, sampler=order, collate_fn=lambda b: [s[2].item() for s in b])
    tl = td.DataLoader(tds, batch_size=4, sampler=order, collate_fn=lambda b: [s[2].item() for s in b])
    assert list(pl) == list(tl) and len(pl) == len(tl) == 3


def test_loader_batch_sampler_matches_torch(rng):
    pds, tds = datasets_pair(rng, 11)
    batches = [rng.permutation(11)[:k].tolist() for k in (3, 1, 5)]
    pl, tl = pfd.DataLoader(pds, batch_sampler=batches), td.DataLoader(tds, batch_sampler=batches)
    assert len(pl) == len(tl) == 3 and pl.batch_size is None
    for p, t in zip(pl, tl):
        assert_same(p, t)


def test_loader_uses_getitems(rng):
    calls = []

    class Batched(pfd.Dataset):
        def __init__(self, x):
            self.x = x

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            raise AssertionError("the loader should read whole batches through __getitems__")

        def __getitems__(self, indices):
            calls.append(list(indices))
            return [float(self.x[i]) for i in indices]

    x = rng.standard_normal(5)
    batches = list(pfd.DataLoader(Batched(x), batch_size=2))
    assert calls == [[0, 1], [2, 3], [4]]
    np.testing.assert_array_equal(np.concatenate([b.detach().numpy() for b in batches]), x)
    assert batches[0].dtype == pf.float64


class _Values:
    """An iterable dataset's body, the same for both libraries' base classes."""

    def __init__(self, values):
        self.values = values

    def __iter__(self):
        return iter(self.values)

    def __len__(self):
        return len(self.values)


class _PfRange(_Values, pfd.IterableDataset):
    pass


class _TorchRange(_Values, td.IterableDataset):
    pass


@pytest.mark.parametrize("batch_size,drop_last", [(3, False), (3, True), (5, False), (None, False)])
def test_iterable_dataset_matches_torch(rng, batch_size, drop_last):
    values = rng.integers(-50, 50, size=10).tolist()
    pl = pfd.DataLoader(_PfRange(values), batch_size=batch_size, drop_last=drop_last)
    tl = td.DataLoader(_TorchRange(values), batch_size=batch_size, drop_last=drop_last)
    assert len(pl) == len(tl)
    pb, tb = list(pl), list(tl)
    assert len(pb) == len(tb)
    for p, t in zip(pb, tb):
        assert_same(p, t)


def test_iterable_dataset_chain_and_add(rng):
    a, b = rng.integers(0, 9, size=4).tolist(), rng.integers(0, 9, size=3).tolist()
    chained = _PfRange(a) + _PfRange(b)
    assert isinstance(chained, pfd.ChainDataset)
    assert list(chained) == a + b and len(chained) == 7
    with pytest.raises(TypeError):  # an IterableDataset needs __iter__, as in PyTorch

        class NoIter(pfd.IterableDataset):
            pass

        NoIter()


# ----------------------------------------------------------------------------------------------
# Shuffling: PyFlame's RNG
# ----------------------------------------------------------------------------------------------


def test_randperm_helper_is_a_permutation():
    g = pf.Generator()
    g.manual_seed(5)
    p = pf_sampler._randperm(1000, g)
    assert p.dtype == pf.int64 and p.shape == (1000,)
    assert sorted(p.tolist()) == list(range(1000))
    assert pf_sampler._randperm(0, g).tolist() == []


@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_shuffle_each_epoch_is_a_permutation(rng, batch_size):
    n = 50
    pf.manual_seed(int(rng.integers(2**31)))
    loader = pfd.DataLoader(index_dataset(n), batch_size=batch_size, shuffle=True)
    epochs = [epoch_order(loader) for _ in range(3)]
    for e in epochs:
        assert sorted(e) == list(range(n))  # every sample exactly once
    assert epochs[0] != epochs[1] and epochs[1] != epochs[2] and epochs[0] != epochs[2]
    assert epochs[0] != list(range(n))


def test_shuffle_reproducible_after_manual_seed(rng):
    seed = int(rng.integers(2**31))
    loader = pfd.DataLoader(index_dataset(40), batch_size=6, shuffle=True)

    def run():
        pf.manual_seed(seed)
        return [epoch_order(loader) for _ in range(3)]

    first = run()
    assert run() == first
    # a fresh loader after the same seed gives the same run too
    pf.manual_seed(seed)
    other = pfd.DataLoader(index_dataset(40), batch_size=6, shuffle=True)
    assert [epoch_order(other) for _ in range(3)] == first
    pf.manual_seed(seed + 1)
    assert [epoch_order(loader) for _ in range(3)] != first


def test_shuffle_with_generator(rng):
    seed = int(rng.integers(2**31))
    n = 40

    def run(s):
        g = pf.Generator()
        g.manual_seed(s)
        loader = pfd.DataLoader(index_dataset(n), batch_size=5, shuffle=True, generator=g)
        return [epoch_order(loader) for _ in range(2)]

    first = run(seed)
    assert all(sorted(e) == list(range(n)) for e in first) and first[0] != first[1]
    assert run(seed) == first
    assert run(seed + 1) != first


def test_shuffle_with_generator_leaves_default_generator_alone(rng):
    g = pf.Generator()
    g.manual_seed(int(rng.integers(2**31)))
    loader = pfd.DataLoader(index_dataset(20), batch_size=3, shuffle=True, generator=g)
    pf.manual_seed(3)
    expected = pf.rand(4).detach().numpy()
    pf.manual_seed(3)
    epoch_order(loader)
    np.testing.assert_array_equal(pf.rand(4).detach().numpy(), expected)


def test_random_sampler_options(rng):
    data = list(range(13))
    g = pf.Generator()
    g.manual_seed(int(rng.integers(2**31)))
    with_repl = pfd.RandomSampler(data, replacement=True, num_samples=70, generator=g)
    drawn = list(with_repl)
    assert len(with_repl) == 70 and len(drawn) == 70 and all(0 <= i < 13 for i in drawn)
    assert len(set(drawn)) > 1
    longer = list(pfd.RandomSampler(data, num_samples=30, generator=g))  # chained permutations
    assert len(longer) == 30
    assert sorted(longer[:13]) == data and sorted(longer[13:26]) == data and len(set(longer[26:])) == 4
    assert sorted(pfd.RandomSampler(data, generator=g)) == data
    for kwargs in ({"replacement": 1}, {"num_samples": 0}, {"num_samples": 2.5}):
        with pytest.raises(Exception) as pe:
            pfd.RandomSampler(data, **kwargs)
        with pytest.raises(Exception) as te:
            td.RandomSampler(data, **kwargs)
        assert pe.type is te.type, kwargs


def test_subset_random_sampler(rng):
    indices = rng.choice(100, size=17, replace=False).tolist()
    g1, g2 = pf.Generator(), pf.Generator()
    g1.manual_seed(11)
    g2.manual_seed(11)
    a, b = pfd.SubsetRandomSampler(indices, g1), pfd.SubsetRandomSampler(indices, g2)
    first = list(a)
    assert len(a) == 17 and sorted(first) == sorted(indices)
    assert list(b) == first
    assert list(a) != first  # a new order each pass


# ----------------------------------------------------------------------------------------------
# Collation
# ----------------------------------------------------------------------------------------------


def _nested_sample(rng):
    return {
        "image": pf.tensor(rng.standard_normal((2, 3)).astype(np.float32)),
        "label": int(rng.integers(-5, 5)),
        "weight": float(rng.standard_normal()),
        "flag": bool(rng.integers(2)),
        "name": f"s{int(rng.integers(100))}",
        "raw": b"bytes",
        "np": rng.integers(0, 9, size=(3,)).astype(np.int32),
        "np_f64": rng.standard_normal((2, 2)),
        "np_scalar": np.float32(rng.standard_normal()),
        "np_i64_scalar": np.int64(rng.integers(100)),
        "pair": (float(rng.standard_normal()), f"t{int(rng.integers(9))}"),
        "list": [int(rng.integers(9)), pf.tensor(rng.integers(0, 9, size=2))],
        "point": Point(pf.tensor(rng.standard_normal(2)), int(rng.integers(9))),
        "nested": {"deep": [np.bool_(rng.integers(2)), {"x": float(rng.random())}]},
    }


def test_default_collate_nested_matches_torch(rng):
    batch = [_nested_sample(rng) for _ in range(4)]
    p = pfd.default_collate(batch)
    t = td.default_collate([to_torch_tree(s) for s in batch])
    assert_same(p, t, "collated")
    # the documented dtypes
    assert p["label"].dtype == pf.int64 and p["weight"].dtype == pf.float64 and p["flag"].dtype == pf.bool
    assert p["np_scalar"].dtype == pf.float32 and p["np"].dtype == pf.int32
    assert p["name"] == [s["name"] for s in batch] and isinstance(p["point"], Point)


@pytest.mark.parametrize("kind", ["tuple", "list", "namedtuple", "numbers", "strings", "tensors", "numpy"])
def test_default_collate_top_level_matches_torch(rng, kind):
    n = 5
    if kind == "tuple":
        batch = [(pf.tensor(rng.standard_normal(3)), int(rng.integers(9)), "a") for _ in range(n)]
    elif kind == "list":
        batch = [[float(rng.random()), np.float64(rng.random())] for _ in range(n)]
    elif kind == "namedtuple":
        batch = [Point(float(rng.random()), [int(rng.integers(9))]) for _ in range(n)]
    elif kind == "numbers":
        batch = [int(rng.integers(-9, 9)) for _ in range(n)]
    elif kind == "strings":
        batch = [f"w{int(rng.integers(9))}" for _ in range(n)]
    elif kind == "tensors":
        batch = [pf.tensor(rng.integers(-9, 9, size=(2, 2)).astype(np.int16)) for _ in range(n)]
    else:
        batch = [rng.random((3,)).astype(np.float32) for _ in range(n)]
    assert_same(pfd.default_collate(batch), td.default_collate([to_torch_tree(s) for s in batch]), kind)


def test_default_collate_mixed_numbers_match_torch(rng):
    for batch in ([True, False, True], [1, True, 2], [1.5, 2, float(rng.random())]):
        assert_same(pfd.default_collate(batch), td.default_collate(batch), repr(batch))


def test_default_convert_matches_torch(rng):
    samples = [
        rng.standard_normal((2, 3)),
        np.int8(rng.integers(9)),
        (rng.random(2).astype(np.float32), "x", 3),
        Point(rng.integers(0, 9, size=2), 1.5),
        {"a": [rng.random(1), 2]},
        np.array(["a", "b"]),
        "str",
        7,
    ]
    for s in samples:
        p, t = pfd.default_convert(s), td.default_convert(s)
        if isinstance(t, np.ndarray):  # a string array stays as it is
            assert p is s
        else:
            assert_same(p, t, repr(s))
    x = pf.tensor(rng.standard_normal(3))
    assert pfd.default_convert(x) is x


def test_collate_errors_match_torch(rng):
    cases = [
        [np.array(["a", "b"]), np.array(["c", "d"])],  # string arrays
        [[1, 2], [3]],  # sequences of unequal length
        [object(), object()],  # no rule
    ]
    for batch in cases:
        with pytest.raises(Exception) as te:
            td.default_collate(batch)
        with pytest.raises(Exception) as pe:
            pfd.default_collate(batch)
        assert pe.type is te.type, batch


def test_collate_fn_map_extension(rng):
    from pyflame.utils.data.dataloader import collate, default_collate_fn_map

    class Box:
        def __init__(self, v):
            self.v = v

    fn_map = dict(default_collate_fn_map)
    fn_map[Box] = lambda batch, *, collate_fn_map: [b.v for b in batch]
    vals = rng.integers(0, 9, size=3).tolist()
    out = collate([(Box(v), v) for v in vals], collate_fn_map=fn_map)
    assert out[0] == vals and out[1].tolist() == vals


# ----------------------------------------------------------------------------------------------
# Datasets: TensorDataset, Subset, ConcatDataset, random_split
# ----------------------------------------------------------------------------------------------


def test_tensor_dataset_indexing(rng):
    pds, tds = datasets_pair(rng, 8)
    assert len(pds) == len(tds) == 8
    for i in (0, 3, 7, -1, -8, np.int64(2)):
        assert_same(pds[i], tds[i], f"item {i}")
    assert_same(pds[[4, 1, 1]], tds[[4, 1, 1]], "list index")
    assert_same(pds[2:5], tds[2:5], "slice")


def test_tensor_dataset_size_mismatch(rng):
    a, b = rng.standard_normal((4, 2)), rng.standard_normal((5, 2))
    with pytest.raises(Exception) as te:
        td.TensorDataset(torch.from_numpy(a), torch.from_numpy(b))
    with pytest.raises(Exception, match="Size mismatch between tensors") as pe:
        pfd.TensorDataset(pf.tensor(a), pf.tensor(b))
    assert pe.type is te.type


def test_subset(rng):
    pds, tds = datasets_pair(rng, 12)
    idx = rng.choice(12, size=5, replace=False).tolist()
    ps, ts = pfd.Subset(pds, idx), td.Subset(tds, idx)
    assert len(ps) == len(ts) == 5
    for i in range(-5, 5):
        assert_same(ps[i], ts[i], f"subset[{i}]")
    assert_same(ps[[0, 2]], ts[[0, 2]], "subset list index")
    for p, t in zip(pfd.DataLoader(ps, batch_size=2), td.DataLoader(ts, batch_size=2)):
        assert_same(p, t)


def test_subset_subclass_needs_getitems():
    class Bad(pfd.Subset):
        def __getitem__(self, i):
            return 0

    with pytest.raises(NotImplementedError):
        Bad([1, 2], [0])


def test_concat_dataset(rng):
    parts = [rng.integers(-99, 99, size=k).tolist() for k in (3, 1, 4)]
    pc, tc = pfd.ConcatDataset(parts), td.ConcatDataset(parts)
    assert len(pc) == len(tc) == 8 and pc.cumulative_sizes == tc.cumulative_sizes
    for i in range(-8, 8):
        assert pc[i] == tc[i], i
    for bad in (8, -9):
        with pytest.raises(Exception) as te:
            tc[bad]
        with pytest.raises(Exception) as pe:
            pc[bad]
        assert pe.type is te.type, bad
    with pytest.raises(AssertionError):
        pfd.ConcatDataset([])
    with pytest.raises(AssertionError):
        pfd.ConcatDataset([parts[0], _PfRange([1])])


def test_dataset_add_and_base_class(rng):
    pds, tds = datasets_pair(rng, 4)
    pds2, tds2 = datasets_pair(rng, 3)
    pc, tc = pds + pds2, tds + tds2
    assert isinstance(pc, pfd.ConcatDataset) and len(pc) == 7
    for i in range(-7, 7):
        assert_same(pc[i], tc[i], f"concat[{i}]")
    for p, t in zip(pfd.DataLoader(pc, batch_size=3), td.DataLoader(tc, batch_size=3)):
        assert_same(p, t)
    with pytest.raises(NotImplementedError):
        pfd.Dataset()[0]


def test_random_split_lengths(rng):
    n = 31
    data = list(range(n))
    for lengths in ([10, 21], [0.3, 0.3, 0.4], [0.5, 0.5], [1.0], [31, 0]):
        g = pf.Generator()
        g.manual_seed(int(rng.integers(2**31)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a split of length 0 warns
            parts = pfd.random_split(data, lengths, generator=g)
            expected = td.random_split(data, lengths, generator=torch.Generator().manual_seed(0))
        assert [len(p) for p in parts] == [len(e) for e in expected], lengths
        assert all(isinstance(p, pfd.Subset) for p in parts)
        seen = [x for p in parts for x in (p[i] for i in range(len(p)))]
        assert sorted(seen) == data  # disjoint, and together the whole dataset


def test_random_split_reproducible_and_shuffled(rng):
    data = list(range(50))
    seed = int(rng.integers(2**31))

    def split(s):
        g = pf.Generator()
        g.manual_seed(s)
        return [list(p.indices) for p in pfd.random_split(data, [20, 30], generator=g)]

    assert split(seed) == split(seed) and split(seed) != split(seed + 1)
    assert split(seed)[0] != list(range(20))
    pf.manual_seed(seed)
    a = [list(p.indices) for p in pfd.random_split(data, [0.4, 0.6])]
    pf.manual_seed(seed)
    assert [list(p.indices) for p in pfd.random_split(data, [0.4, 0.6])] == a


def test_random_split_errors_match_torch():
    data = list(range(10))
    for lengths in ([3, 3], [1.5, -0.5], [4, 4, 4]):
        with pytest.raises(Exception) as te:
            td.random_split(data, lengths)
        with pytest.raises(Exception) as pe:
            pfd.random_split(data, lengths)
        assert pe.type is te.type, lengths
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        pfd.random_split(list(range(2)), [0.9, 0.1])


# ----------------------------------------------------------------------------------------------
# Samplers
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1, 3, 4, 13, 20])
def test_batch_sampler_matches_torch(rng, batch_size, drop_last):
    order = rng.permutation(13).tolist()
    p = pfd.BatchSampler(order, batch_size, drop_last)
    t = td.BatchSampler(order, batch_size, drop_last)
    assert list(p) == list(t) and len(p) == len(t)
    ps = pfd.BatchSampler(pfd.SequentialSampler(range(13)), batch_size, drop_last)
    ts = td.BatchSampler(td.SequentialSampler(range(13)), batch_size, drop_last)
    assert list(ps) == list(ts) and len(ps) == len(ts)


def test_batch_sampler_errors_match_torch():
    for args in ((0, False), (-2, False), (True, False), (2.0, False), (2, 1), (2, None)):
        with pytest.raises(Exception) as te:
            td.BatchSampler(range(5), *args)
        with pytest.raises(Exception) as pe:
            pfd.BatchSampler(range(5), *args)
        assert pe.type is te.type, args


def test_sequential_sampler_and_base():
    s = pfd.SequentialSampler(range(6))
    assert list(s) == list(range(6)) and len(s) == 6
    with pytest.raises(NotImplementedError):
        iter(pfd.Sampler()).__next__()
    with pytest.raises(TypeError):
        len(pfd.Sampler())


# ----------------------------------------------------------------------------------------------
# Argument errors: the same exception types as PyTorch
# ----------------------------------------------------------------------------------------------

_CONFLICTS = [
    {"batch_sampler": [[0, 1]], "batch_size": 2},
    {"batch_sampler": [[0, 1]], "shuffle": True},
    {"batch_sampler": [[0, 1]], "sampler": [0, 1]},
    {"batch_sampler": [[0, 1]], "drop_last": True},
    {"shuffle": True, "sampler": [0, 1]},
    {"batch_size": None, "drop_last": True},
    {"batch_size": 0},
    {"batch_size": -1},
    {"num_workers": -1},
    {"timeout": -1},
    {"prefetch_factor": 2},
    {"persistent_workers": True},
    {"multiprocessing_context": "spawn"},
]


@pytest.mark.parametrize("kwargs", _CONFLICTS, ids=lambda k: ",".join(k))
def test_argument_errors_match_torch(rng, kwargs):
    pds, tds = datasets_pair(rng, 4)
    with pytest.raises(Exception) as te:
        td.DataLoader(tds, **kwargs)
    with pytest.raises(Exception) as pe:
        pfd.DataLoader(pds, **kwargs)
    assert pe.type is te.type, (pe.value, te.value)
    assert str(pe.value) == str(te.value)  # PyTorch's messages too


@pytest.mark.parametrize("kwargs", [{"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}], ids=str)
def test_iterable_dataset_argument_errors_match_torch(kwargs):
    with pytest.raises(Exception) as te:
        td.DataLoader(_TorchRange([1, 2]), **kwargs)
    with pytest.raises(Exception) as pe:
        pfd.DataLoader(_PfRange([1, 2]), **kwargs)
    assert pe.type is te.type


def test_timeout_and_setattr_errors_match_torch(rng):
    pds, tds = datasets_pair(rng, 4)
    with pytest.raises(Exception) as te:
        iter(td.DataLoader(tds, timeout=1))
    with pytest.raises(Exception) as pe:
        iter(pfd.DataLoader(pds, timeout=1))
    assert pe.type is te.type
    pl, tl = pfd.DataLoader(pds), td.DataLoader(tds)
    for attr in ("batch_size", "sampler", "drop_last", "dataset"):
        with pytest.raises(Exception) as te:
            setattr(tl, attr, None)
        with pytest.raises(Exception) as pe:
            setattr(pl, attr, None)
        assert pe.type is te.type, attr
    pl.collate_fn = pfd.default_collate  # other attributes may change


@pytest.mark.parametrize("kwargs", [{"num_workers": 2}, {"num_workers": 1, "persistent_workers": True},
                                    {"num_workers": 2, "prefetch_factor": 3}], ids=str)
def test_num_workers_not_supported(rng, kwargs):
    pds, tds = datasets_pair(rng, 4)
    td.DataLoader(tds, **kwargs)  # valid in PyTorch
    with pytest.raises(pf.NotSupportedError, match="num_workers=0"):
        pfd.DataLoader(pds, **kwargs)
    assert pfd.get_worker_info() is None


def test_pin_memory(rng):
    pds, tds = datasets_pair(rng, 5)
    pl = pfd.DataLoader(pds, batch_size=2, pin_memory=True)
    if not pf.rocm_is_available():
        with pytest.warns(UserWarning, match="pin_memory.*no accelerator is found"):
            batches = list(pl)
    else:
        batches = list(pl)
        assert all(x.is_pinned() for batch in batches for x in batch)
    for p, t in zip(batches, td.DataLoader(tds, batch_size=2)):
        assert_same(p, t)


def test_pin_memory_calls_pin_memory(monkeypatch, rng):
    """With a GPU and a pin_memory method, each tensor of the batch is pinned (simulated here)."""
    from pyflame.utils.data import dataloader as dl

    class Pinnable:
        def __init__(self, v):
            self.v, self.pinned = v, False

        def pin_memory(self):
            out = Pinnable(self.v)
            out.pinned = True
            return out

    monkeypatch.setattr(pf, "rocm_is_available", lambda: True)
    monkeypatch.setattr(pf.Tensor, "pin_memory", lambda self: self.clone(), raising=False)  # undone after the test
    data = [(Pinnable(1), {"a": "s"})]
    loader = pfd.DataLoader(data, batch_size=None, pin_memory=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,) = list(loader)
    assert out[0].pinned and out[1] == {"a": "s"}
    x = pf.tensor(rng.standard_normal(3))
    y = dl._pin_memory({"x": [x]})["x"][0]
    assert y is not x and np.array_equal(y.detach().numpy(), x.detach().numpy())
