"""pyflame.utils.data.distributed.DistributedSampler next to torch's: the same partition of a dataset."""

import sys
import types

import pytest

import pyflame as pf
from pyflame.utils.data import DataLoader
from pyflame.utils.data.distributed import DistributedSampler

torch = pytest.importorskip("torch")
from torch.utils.data.distributed import DistributedSampler as TorchDistributedSampler  # noqa: E402

# Sizes below, equal to and above the replica counts, divisible and not.
SIZES = [0, 1, 2, 3, 5, 7, 8, 12, 13]
REPLICAS = [1, 2, 3, 4]


def both(n, num_replicas, rank, **kwargs):
    data = list(range(n))
    return (DistributedSampler(data, num_replicas=num_replicas, rank=rank, **kwargs),
            TorchDistributedSampler(data, num_replicas=num_replicas, rank=rank, **kwargs))


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("num_replicas", REPLICAS)
@pytest.mark.parametrize("n", SIZES)
def test_unshuffled_matches_torch(n, num_replicas, drop_last):
    for rank in range(num_replicas):
        ours, theirs = both(n, num_replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs), f"rank {rank}"
        assert len(ours) == len(theirs) == len(list(ours))


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("num_replicas", REPLICAS)
@pytest.mark.parametrize("n", SIZES)
def test_shuffled_covers_the_dataset_as_torch(n, num_replicas, drop_last):
    ours = [list(both(n, num_replicas, r, seed=5, drop_last=drop_last)[0]) for r in range(num_replicas)]
    theirs = [list(both(n, num_replicas, r, seed=5, drop_last=drop_last)[1]) for r in range(num_replicas)]
    assert [len(x) for x in ours] == [len(x) for x in theirs]
    flat = [i for share in ours for i in share]
    assert all(0 <= i < n for i in flat)
    if drop_last:
        # each index at most once; the ones dropped are as many as torch drops
        assert len(set(flat)) == len(flat) == sum(len(x) for x in theirs)
    else:
        # every index, and the padding repeats as many as torch's
        assert set(flat) == set(range(n))
        assert len(flat) == sum(len(x) for x in theirs)


def test_shuffled_ranks_share_one_permutation():
    # Interleaving the ranks' shares gives back the padded permutation, the same on every rank.
    n, num_replicas = 10, 4
    shares = [list(DistributedSampler(range(n), num_replicas=num_replicas, rank=r, seed=3))
              for r in range(num_replicas)]
    interleaved = [shares[r][i] for i in range(len(shares[0])) for r in range(num_replicas)]
    assert sorted(interleaved[:n]) == list(range(n))
    assert interleaved[n:] == interleaved[: len(interleaved) - n]
    g = pf.Generator()
    g.manual_seed(3)
    assert interleaved[:n] == pf.randperm(n, generator=g, device="cpu").tolist()


def test_set_epoch_changes_the_order_reproducibly():
    sampler = DistributedSampler(range(100), num_replicas=2, rank=1, seed=7)
    epoch0 = list(sampler)
    assert list(sampler) == epoch0  # no set_epoch: the same order again
    sampler.set_epoch(1)
    epoch1 = list(sampler)
    assert epoch1 != epoch0
    again = DistributedSampler(range(100), num_replicas=2, rank=1, seed=7)
    again.set_epoch(1)
    assert list(again) == epoch1
    # seed + epoch is what counts, as in torch
    shifted = DistributedSampler(range(100), num_replicas=2, rank=1, seed=8)
    assert list(shifted) == epoch1
    assert list(DistributedSampler(range(100), num_replicas=2, rank=1, seed=9)) != epoch1


def test_independent_of_the_default_generator():
    # Every rank must get the same permutation whatever each process did to the default RNG,
    # and sampling must not disturb the user's random stream.
    pf.manual_seed(1)
    a = list(DistributedSampler(range(50), num_replicas=2, rank=0))
    pf.manual_seed(2)
    pf.rand(3)
    assert list(DistributedSampler(range(50), num_replicas=2, rank=0)) == a

    pf.manual_seed(4)
    expected = pf.rand(5).tolist()
    pf.manual_seed(4)
    list(DistributedSampler(range(50), num_replicas=2, rank=0))
    assert pf.rand(5).tolist() == expected


@pytest.mark.parametrize("rank", [-1, 3, 4])
def test_bad_rank(rank):
    with pytest.raises(ValueError, match=r"Invalid rank .*interval \[0, 2\]"):
        DistributedSampler(range(10), num_replicas=3, rank=rank)
    with pytest.raises(ValueError):
        TorchDistributedSampler(range(10), num_replicas=3, rank=rank)


def fake_distributed(monkeypatch, module):
    """Make `import pyflame.distributed` give module (None: fail to import)."""
    monkeypatch.setitem(sys.modules, "pyflame.distributed", module)
    if module is None:
        monkeypatch.delattr(pf, "distributed", raising=False)
    else:
        monkeypatch.setattr(pf, "distributed", module, raising=False)


def test_rank_and_world_size_from_the_process_group(monkeypatch):
    fake_distributed(monkeypatch, types.SimpleNamespace(get_world_size=lambda: 3, get_rank=lambda: 1))
    sampler = DistributedSampler(range(7), shuffle=False)
    assert (sampler.num_replicas, sampler.rank) == (3, 1)
    assert list(sampler) == [1, 4, 0]
    # explicit arguments win over the process group
    assert list(DistributedSampler(range(7), num_replicas=2, rank=0, shuffle=False)) == [0, 2, 4, 6]


def test_without_the_distributed_package(monkeypatch):
    fake_distributed(monkeypatch, None)
    with pytest.raises(RuntimeError, match="Requires distributed package to be available"):
        DistributedSampler(range(7))
    with pytest.raises(RuntimeError, match="Requires distributed package to be available"):
        DistributedSampler(range(7), num_replicas=2)
    assert len(DistributedSampler(range(7), num_replicas=2, rank=1)) == 4


def test_with_dataloader():
    sampler = DistributedSampler(range(10), num_replicas=3, rank=2, shuffle=False)
    batches = [b.tolist() for b in DataLoader(list(range(10)), batch_size=2, sampler=sampler)]
    assert batches == [[2, 5], [8, 1]]
