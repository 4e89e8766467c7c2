"""pyflame.distributions against torch.distributions: densities, entropies, moments and KL divergences on
the same parameters (both devices); samples by their statistics; rsample's gradients."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import pf_to_numpy

D, T = pf.distributions, torch.distributions


def _cases(rng):
    """(name, pyflame args, torch args, values inside the support) per family; params of batch shape (2, 3)."""
    loc, scale = rng.standard_normal((2, 3)), rng.uniform(0.3, 2.0, (2, 3))
    low = rng.uniform(-1, 0, (2, 3))
    high = low + rng.uniform(0.5, 2, (2, 3))
    probs = rng.uniform(0.05, 0.95, (2, 3))
    logits = rng.standard_normal((2, 3, 4))
    return [
        ("Normal", (loc, scale), {}, rng.standard_normal((2, 3))),
        ("Uniform", (low, high), {}, low + (high - low) * rng.uniform(0, 1, (2, 3))),
        ("Bernoulli", (), {"probs": probs}, rng.integers(0, 2, (2, 3)).astype(np.float64)),
        ("Bernoulli", (), {"logits": logits[..., 0]}, rng.integers(0, 2, (2, 3)).astype(np.float64)),
        ("Categorical", (), {"logits": logits}, rng.integers(0, 4, (2, 3))),
        ("Categorical", (), {"probs": np.exp(logits)}, rng.integers(0, 4, (2, 3))),
    ]


def _make(lib, name, args, kwargs, device):
    def conv(a):
        if lib is torch:
            return torch.from_numpy(np.asarray(a, dtype=np.float32))
        return pf.tensor(np.asarray(a, dtype=np.float32), device=device)

    return getattr(lib.distributions, name)(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})


def test_densities_moments_and_kl_as_torch(device, rng):
    cases = _cases(rng)
    for (name, args, kwargs, values), (_, args2, kwargs2, _) in zip(cases, _cases(rng)):
        p, tp = _make(pf, name, args, kwargs, device), _make(torch, name, args, kwargs, device)
        assert tuple(p.batch_shape) == tuple(tp.batch_shape)
        v = values.astype(np.int64 if name == "Categorical" else np.float32)
        got = p.log_prob(pf.tensor(v, device=device))
        assert got.device.type == device
        np.testing.assert_allclose(pf_to_numpy(got), tp.log_prob(torch.from_numpy(v)).numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=f"{name} log_prob")
        np.testing.assert_allclose(pf_to_numpy(p.entropy()), tp.entropy().numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name} entropy")
        if name != "Categorical":  # torch's Categorical mean is nan
            for attr in ("mean", "variance", "stddev"):
                np.testing.assert_allclose(pf_to_numpy(getattr(p, attr)), getattr(tp, attr).numpy(), rtol=1e-5,
                                           err_msg=f"{name} {attr}")
        q, tq = _make(pf, name, args2, kwargs2, device), _make(torch, name, args2, kwargs2, device)
        np.testing.assert_allclose(pf_to_numpy(D.kl_divergence(p, q)), T.kl_divergence(tp, tq).numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=f"{name} kl")


def test_samples_by_their_statistics(device):
    pf.manual_seed(0)
    n = 20000
    normal = D.Normal(pf.tensor([1.0, -2.0], device=device), pf.tensor([0.5, 2.0], device=device))
    s = normal.sample((n,))
    assert tuple(s.shape) == (n, 2) and s.device.type == device and not s.requires_grad
    np.testing.assert_allclose(pf_to_numpy(s.mean(0)), [1.0, -2.0], atol=0.05)
    np.testing.assert_allclose(pf_to_numpy(s.std(0)), [0.5, 2.0], rtol=0.05)
    u = pf_to_numpy(D.Uniform(pf.tensor(-1.0, device=device), pf.tensor(3.0, device=device)).sample((n,)))
    assert u.min() >= -1 and u.max() < 3 and abs(u.mean() - 1) < 0.05
    b = pf_to_numpy(D.Bernoulli(probs=pf.tensor([0.2, 0.7], device=device)).sample((n,)))
    assert set(np.unique(b)) <= {0.0, 1.0}
    np.testing.assert_allclose(b.mean(0), [0.2, 0.7], atol=0.02)
    probs = np.array([0.1, 0.6, 0.3], np.float32)
    c = pf_to_numpy(D.Categorical(probs=pf.tensor(probs, device=device)).sample((n,)))
    np.testing.assert_allclose(np.bincount(c, minlength=3) / n, probs, atol=0.02)


def test_rsample_is_differentiable(device):
    loc = pf.tensor([0.5, 1.5], device=device, requires_grad=True)
    scale = pf.tensor([2.0, 0.5], device=device, requires_grad=True)
    x = D.Normal(loc, scale).rsample((5,))
    x.sum().backward()
    np.testing.assert_allclose(pf_to_numpy(loc.grad), [5.0, 5.0])
    eps = (pf_to_numpy(x.detach()) - pf_to_numpy(loc.detach())) / pf_to_numpy(scale.detach())
    np.testing.assert_allclose(pf_to_numpy(scale.grad), eps.sum(0), rtol=1e-5)
    with pytest.raises(pf.NotSupportedError, match="rsample"):
        D.Bernoulli(probs=pf.tensor([0.5], device=device)).rsample()
    with pytest.raises(pf.NotSupportedError, match="one family"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Uniform(0.0, 1.0))
    with pytest.raises(ValueError, match="not both"):
        D.Bernoulli(probs=pf.tensor([0.5]), logits=pf.tensor([0.0]))


@pytest.mark.parametrize("ndims", [0, 1, 2])
def test_independent_as_torch(device, rng, ndims):
    """Normal and Categorical bases with 0-2 batch dims read as event dims: shapes, densities,
    entropies, moments, KL and samples as torch's."""
    for (name, args, kwargs, values), (_, args2, kwargs2, _) in zip(_cases(rng), _cases(rng)):
        if name not in ("Normal", "Categorical"):
            continue
        p = D.Independent(_make(pf, name, args, kwargs, device), ndims)
        tp = T.Independent(_make(torch, name, args, kwargs, device), ndims)
        assert (tuple(p.batch_shape), tuple(p.event_shape)) == (tuple(tp.batch_shape), tuple(tp.event_shape))
        assert p.has_rsample == tp.has_rsample
        v = values.astype(np.int64 if name == "Categorical" else np.float32)
        np.testing.assert_allclose(pf_to_numpy(p.log_prob(pf.tensor(v, device=device))),
                                   tp.log_prob(torch.from_numpy(v)).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(pf_to_numpy(p.entropy()), tp.entropy().numpy(), rtol=1e-5, atol=1e-5)
        q = D.Independent(_make(pf, name, args2, kwargs2, device), ndims)
        tq = T.Independent(_make(torch, name, args2, kwargs2, device), ndims)
        np.testing.assert_allclose(pf_to_numpy(D.kl_divergence(p, q)), T.kl_divergence(tp, tq).numpy(), rtol=1e-4,
                                   atol=1e-5)
        assert tuple(p.sample((5,)).shape) == tuple(tp.sample((5,)).shape)
        if name == "Normal":
            np.testing.assert_allclose(pf_to_numpy(p.mean), tp.mean.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(pf.zeros(2, device=device), pf.ones(2, device=device)), 2)
