"""pyflame.distributions against torch.distributions: densities, entropies, moments and KL divergences on
the same parameters (both devices); samples by their statistics; rsample's gradients."""

import numpy as np
import pytest
import torch

import pyflame as pf
from op_registry import pf_to_numpy

D, T = pf.distributions, torch.distributions


def _spd(rng, shape):
    """Symmetric positive definite matrices of shape (..., n, n)."""
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + 0.5 * np.eye(shape[-1])


def _cases(rng):
    """(name, pyflame args, torch args, values inside the support) per family; params of batch shape (2, 3)."""
    loc, scale = rng.standard_normal((2, 3)), rng.uniform(0.3, 2.0, (2, 3))
    low = rng.uniform(-1, 0, (2, 3))
    high = low + rng.uniform(0.5, 2, (2, 3))
    probs = rng.uniform(0.05, 0.95, (2, 3))
    logits = rng.standard_normal((2, 3, 4))
    conc, rate = rng.uniform(0.3, 4, (2, 3)), rng.uniform(0.3, 2, (2, 3))
    mvn_loc, mvn_values = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    return [
        ("Normal", (loc, scale), {}, rng.standard_normal((2, 3))),
        ("Uniform", (low, high), {}, low + (high - low) * rng.uniform(0, 1, (2, 3))),
        ("Bernoulli", (), {"probs": probs}, rng.integers(0, 2, (2, 3)).astype(np.float64)),
        ("Bernoulli", (), {"logits": logits[..., 0]}, rng.integers(0, 2, (2, 3)).astype(np.float64)),
        ("Categorical", (), {"logits": logits}, rng.integers(0, 4, (2, 3))),
        ("Categorical", (), {"probs": np.exp(logits)}, rng.integers(0, 4, (2, 3))),
        ("Gamma", (conc, rate), {}, rng.gamma(2.0, 1.0, (2, 3))),
        ("Beta", (conc, rate), {}, rng.uniform(0.02, 0.98, (2, 3))),
        ("Dirichlet", (rng.uniform(0.3, 4, (2, 3, 4)),), {}, rng.dirichlet(np.ones(4), (2, 3))),
        # the matrices broadcast against loc's batch dims
        ("MultivariateNormal", (mvn_loc,), {"covariance_matrix": _spd(rng, (3, 4, 4))}, mvn_values),
        ("MultivariateNormal", (mvn_loc,), {"precision_matrix": _spd(rng, (2, 3, 4, 4))}, mvn_values),
        ("MultivariateNormal", (mvn_loc[0, 0],), {"scale_tril": np.linalg.cholesky(_spd(rng, (2, 3, 4, 4)))},
         mvn_values),
    ]


def _make(lib, name, args, kwargs, device, dtype=np.float32):
    def conv(a):
        if lib is torch:
            return torch.from_numpy(np.asarray(a, dtype=dtype))
        return pf.tensor(np.asarray(a, dtype=dtype), device=device)

    return getattr(lib.distributions, name)(*[conv(a) for a in args], **{k: conv(v) for k, v in kwargs.items()})


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_densities_moments_and_kl_as_torch(device, rng, dtype):
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-12}
    cases = _cases(rng)
    for (name, args, kwargs, values), (_, args2, kwargs2, _) in zip(cases, _cases(rng)):
        p, tp = _make(pf, name, args, kwargs, device, dtype), _make(torch, name, args, kwargs, device, dtype)
        assert (tuple(p.batch_shape), tuple(p.event_shape)) == (tuple(tp.batch_shape), tuple(tp.event_shape))
        assert p.has_rsample == tp.has_rsample
        v = values.astype(np.int64 if name == "Categorical" else dtype)
        got = p.log_prob(pf.tensor(v, device=device))
        assert got.device.type == device and got.dtype == p.entropy().dtype
        np.testing.assert_allclose(pf_to_numpy(got), tp.log_prob(torch.from_numpy(v)).detach().numpy(), **tol,
                                   err_msg=f"{name} log_prob")
        np.testing.assert_allclose(pf_to_numpy(p.entropy()), tp.entropy().detach().numpy(), **tol, err_msg=f"{name} entropy")
        attrs = ("mean", "variance", "stddev") if name != "Categorical" else ()  # torch's Categorical mean is nan
        attrs += ("mode",) if hasattr(p, "mode") else ()
        attrs += ("scale_tril", "covariance_matrix", "precision_matrix") if name == "MultivariateNormal" else ()
        attrs += ("concentration1", "concentration0") if name == "Beta" else ()
        for attr in attrs:
            np.testing.assert_allclose(pf_to_numpy(getattr(p, attr)), getattr(tp, attr).detach().numpy(), **tol,
                                       err_msg=f"{name} {attr}")
        q, tq = _make(pf, name, args2, kwargs2, device, dtype), _make(torch, name, args2, kwargs2, device, dtype)
        np.testing.assert_allclose(pf_to_numpy(D.kl_divergence(p, q)), T.kl_divergence(tp, tq).detach().numpy(), **tol,
                                   err_msg=f"{name} kl")


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
                                   tp.log_prob(torch.from_numpy(v)).detach().numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(pf_to_numpy(p.entropy()), tp.entropy().detach().numpy(), rtol=1e-5, atol=1e-5)
        q = D.Independent(_make(pf, name, args2, kwargs2, device), ndims)
        tq = T.Independent(_make(torch, name, args2, kwargs2, device), ndims)
        np.testing.assert_allclose(pf_to_numpy(D.kl_divergence(p, q)), T.kl_divergence(tp, tq).detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
        assert tuple(p.sample((5,)).shape) == tuple(tp.sample((5,)).shape)
        if name == "Normal":
            np.testing.assert_allclose(pf_to_numpy(p.mean), tp.mean.detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(pf.zeros(2, device=device), pf.ones(2, device=device)), 2)


@pytest.mark.parametrize("dtype", [pf.float32, pf.float64])
def test_gamma_beta_dirichlet_mvn_samples_by_their_statistics(device, dtype):
    """Shapes, dtype, device, support, moments of 20000 draws, and the same draws again after
    manual_seed (Gamma's rejection loop included)."""
    n = 20000

    def t(values):
        return pf.tensor(values, dtype=dtype, device=device)

    conc, rate = np.array([0.3, 1.0, 4.5, 20.0]), np.array([1.0, 2.0, 0.5, 3.0])
    c1, c0 = np.array([0.5, 2.0]), np.array([0.5, 5.0])
    alpha, loc = np.array([0.4, 1.0, 3.0]), np.array([1.0, -1.0])  # alpha sums to 4.4
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    cases = [  # distribution, mean, variance, in the support
        (D.Gamma(t(conc), t(rate)), conc / rate, conc / rate ** 2, lambda s: (s > 0).all()),
        (D.Beta(t(c1), t(c0)), c1 / (c1 + c0), c1 * c0 / ((c1 + c0) ** 2 * (c1 + c0 + 1)),
         lambda s: ((s >= 0) & (s <= 1)).all()),
        (D.Dirichlet(t(alpha)), alpha / 4.4, alpha * (4.4 - alpha) / (4.4 ** 2 * 5.4),
         lambda s: (s >= 0).all() and np.allclose(s.sum(-1), 1, atol=1e-5)),
        (D.MultivariateNormal(t(loc), covariance_matrix=t(cov)), loc, np.diag(cov), lambda s: np.isfinite(s).all()),
    ]
    for dist, mean, var, in_support in cases:
        name = type(dist).__name__
        pf.manual_seed(7)
        s = dist.sample((n,))
        assert tuple(s.shape) == (n,) + tuple(dist.batch_shape) + tuple(dist.event_shape), name
        assert s.dtype == dtype and s.device.type == device and not s.requires_grad, name
        got = pf_to_numpy(s)
        assert in_support(got), name
        np.testing.assert_allclose(got.mean(0), mean, rtol=0.05, atol=0.01, err_msg=f"{name} mean")
        np.testing.assert_allclose(got.var(0), var, rtol=0.1, atol=0.002, err_msg=f"{name} variance")
        pf.manual_seed(7)
        np.testing.assert_array_equal(pf_to_numpy(dist.sample((n,))), got, err_msg=f"{name} under manual_seed")
        assert tuple(dist.rsample().shape) == tuple(dist.batch_shape) + tuple(dist.event_shape), name
    got = pf_to_numpy(cases[3][0].sample((n,)))
    np.testing.assert_allclose(np.cov(got.T), cov, atol=0.05)


def test_implicit_reparameterisation_gradients_as_torch(device, rng):
    """The gradients of Gamma, Dirichlet and Beta's rsample are torch's on the same draws
    (torch._standard_gamma_grad and torch's Dirichlet backward), and so are MultivariateNormal's
    through the Cholesky factor of a covariance matrix."""
    from torch.distributions.dirichlet import _Dirichlet_backward

    def leaf(values):
        return pf.tensor(values, dtype=pf.float64, device=device, requires_grad=True)

    conc, rate = np.exp(rng.uniform(-3, 4, (3, 40))), rng.uniform(0.5, 2, (3, 40))  # every branch of the grad
    c, r = leaf(conc), leaf(rate)
    x = D.Gamma(c, r).rsample((5,))
    x.sum().backward()
    xr = torch.from_numpy(pf_to_numpy(x.detach()) * rate)
    expected = torch._standard_gamma_grad(torch.from_numpy(conc).expand(5, 3, 40), xr) / torch.from_numpy(rate)
    np.testing.assert_allclose(pf_to_numpy(c.grad), expected.sum(0).detach().numpy(), rtol=1e-9)
    np.testing.assert_allclose(pf_to_numpy(r.grad), -(pf_to_numpy(x.detach()) / rate).sum(0), rtol=1e-12)

    alpha, weights = np.exp(rng.uniform(-2, 3, (30, 4))), rng.standard_normal(4)
    a = leaf(alpha)
    x = D.Dirichlet(a).rsample((5,))
    (x * pf.tensor(weights, device=device)).sum().backward()
    expected = _Dirichlet_backward(torch.from_numpy(pf_to_numpy(x.detach())), torch.from_numpy(alpha).expand(5, 30, 4),
                                   torch.from_numpy(weights).expand(5, 30, 4))
    np.testing.assert_allclose(pf_to_numpy(a.grad), expected.sum(0).detach().numpy(), rtol=1e-9, atol=1e-12)

    c1, c0 = leaf(alpha[:, 0]), leaf(alpha[:, 1])
    x = D.Beta(c1, c0).rsample()
    x.sum().backward()
    heads_tails = torch.from_numpy(np.stack([pf_to_numpy(x.detach()), 1 - pf_to_numpy(x.detach())], -1))
    expected = _Dirichlet_backward(heads_tails, torch.from_numpy(alpha[:, :2]), torch.tensor([1.0, 0.0],
                                   dtype=torch.float64).expand(30, 2))
    np.testing.assert_allclose(np.stack([pf_to_numpy(c1.grad), pf_to_numpy(c0.grad)], -1), expected.detach().numpy(),
                               rtol=1e-9, atol=1e-12)

    loc, cov = rng.standard_normal((2, 3)), _spd(rng, (2, 3, 3))
    pl, pc = leaf(loc), leaf(cov)
    x = D.MultivariateNormal(pl, covariance_matrix=pc).rsample((4,))
    (x ** 2).sum().backward()
    tl, tc = (torch.from_numpy(v).requires_grad_() for v in (loc, cov))
    eps = np.linalg.solve(np.linalg.cholesky(cov), (pf_to_numpy(x.detach()) - loc)[..., None])
    tx = tl + (torch.linalg.cholesky(tc) @ torch.from_numpy(eps)).squeeze(-1)
    (tx ** 2).sum().backward()
    np.testing.assert_allclose(pf_to_numpy(pl.grad), tl.grad.detach().numpy(), rtol=1e-9)
    np.testing.assert_allclose(pf_to_numpy(pc.grad), tc.grad.detach().numpy(), rtol=1e-8, atol=1e-10)


def test_gamma_beta_dirichlet_mvn_errors(device):
    def t(values):
        return pf.tensor(values, device=device)

    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Dirichlet(t(1.0))
    with pytest.raises(ValueError, match="loc must be at least one-dimensional"):
        D.MultivariateNormal(t(0.0), scale_tril=t([[1.0]]))
    with pytest.raises(ValueError, match="Exactly one of"):
        D.MultivariateNormal(t([0.0]), covariance_matrix=t([[1.0]]), scale_tril=t([[1.0]]))
    with pytest.raises(ValueError, match="Exactly one of"):
        D.MultivariateNormal(t([0.0]))
    with pytest.raises(ValueError, match="covariance_matrix must be at least two-dimensional"):
        D.MultivariateNormal(t([0.0]), covariance_matrix=t([1.0]))
    with pytest.raises(pf.InvalidArgumentError, match="not positive-definite"):  # torch: LinAlgError
        D.MultivariateNormal(t([0.0, 0.0]), covariance_matrix=t([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="different event shapes"):
        D.kl_divergence(D.MultivariateNormal(t([0.0]), scale_tril=t([[1.0]])),
                        D.MultivariateNormal(t([0.0, 0.0]), scale_tril=t([[1.0, 0.0], [0.0, 1.0]])))
    with pytest.raises(pf.NotSupportedError, match="one family"):
        D.kl_divergence(D.Gamma(t(1.0), t(1.0)), D.Beta(t(1.0), t(1.0)))
    # Python numbers: batch shape () in float32, as torch
    for dist, tdist in [(D.Gamma(2.0, 3.0), T.Gamma(2.0, 3.0)), (D.Beta(2.0, 3.0), T.Beta(2.0, 3.0))]:
        assert tuple(dist.batch_shape) == tuple(tdist.batch_shape) == ()
        assert dist.sample().dtype == pf.float32 and tuple(dist.sample((3,)).shape) == (3,)
        np.testing.assert_allclose(pf_to_numpy(dist.log_prob(0.25)), tdist.log_prob(torch.tensor(0.25)).detach().numpy(),
                                   rtol=1e-6)
