"""pyflame.distributions, as torch.distributions: Normal, Uniform, Bernoulli, Categorical, Gamma, Beta,
Dirichlet and MultivariateNormal with sample, rsample (the reparameterised ones), log_prob, entropy,
mean, mode, variance and stddev, Independent (batch dims read as event dims), and kl_divergence
between two of one family. Parameters broadcast to the batch shape and may live on any device;
samples are drawn there.

Gamma, Beta and Dirichlet draw by Marsaglia and Tsang's rejection; their rsample gradients are
torch's implicit ones (_gamma.py). MultivariateNormal factors covariance_matrix and precision_matrix
by a Cholesky decomposition written in tensor ops (one step per column: meant for small matrices).

Not here yet (AttributeError): the rest of torch's families, transforms and constraints;
validate_args is accepted and checks nothing.
"""

import math
import numbers

from .. import _C, _creation
from .._misc_api import bernoulli, multinomial
from .._shape_api import Size, broadcast_shapes, broadcast_tensors, finfo
from ..autograd import no_grad
from ..nn import functional as F
from ._gamma import DirichletSample, StandardGamma

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "Gamma", "Beta", "Dirichlet",
           "MultivariateNormal", "Independent", "kl_divergence"]


def _as_tensor(value, like=None):
    if isinstance(value, _C.Tensor):
        return value
    if isinstance(value, numbers.Number):
        device = like.device if like is not None else None
        dtype = like.dtype if like is not None and like.dtype.is_floating_point else _C.dtype.float32
        return _creation.tensor(float(value), dtype=dtype, device=device)
    return _creation.tensor(value)


def _broadcast(*values):
    tensors = [v for v in values if isinstance(v, _C.Tensor)]
    like = tensors[0] if tensors else None
    return broadcast_tensors(*[_as_tensor(v, like) for v in values])


class Distribution:
    """The base: batch_shape and event_shape, sample() by rsample() without gradient."""

    has_rsample = False

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape, self._event_shape = tuple(batch_shape), tuple(event_shape)

    @property
    def batch_shape(self):
        return Size(self._batch_shape)

    @property
    def event_shape(self):
        return Size(self._event_shape)

    def _set_broadcast(self, **params):
        """Sets the parameters, broadcast to one shape: the batch shape."""
        tensors = _broadcast(*params.values())
        self.__dict__.update(zip(params, tensors))
        Distribution.__init__(self, tuple(tensors[0].shape))

    def _extended_shape(self, sample_shape=()):
        return tuple(sample_shape) + self._batch_shape + self._event_shape

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise _C.NotSupportedError(f"{type(self).__name__} has no reparameterised sampler (rsample)")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def _kl(self, other):
        """KL(self || other), other of the same class."""
        raise _C.NotSupportedError(f"kl_divergence of {type(self).__name__} is not implemented")

    def __repr__(self):
        return f"{type(self).__name__}()"


class Normal(Distribution):
    """N(loc, scale^2)."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._set_broadcast(loc=loc, scale=scale)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self.scale.pow(2)

    @property
    def stddev(self):
        return self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _creation.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        value = _as_tensor(value, self.loc)
        return -((value - self.loc) ** 2) / (2 * self.variance) - self.scale.log() - math.log(math.sqrt(2 * math.pi))

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    def cdf(self, value):
        value = _as_tensor(value, self.loc)
        return 0.5 * (1 + ((value - self.loc) / (self.scale * math.sqrt(2))).erf())

    def _kl(self, q):
        var_ratio = (self.scale / q.scale).pow(2)
        t1 = ((self.loc - q.loc) / q.scale).pow(2)
        return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())

    def __repr__(self):
        return f"Normal(loc: {self.loc}, scale: {self.scale})"


class Uniform(Distribution):
    """Uniform on [low, high)."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self._set_broadcast(low=low, high=high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = _creation.rand(*shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        value = _as_tensor(value, self.low)
        inside = (self.low <= value) & (self.high > value)
        return inside.to(self.low.dtype).log() - (self.high - self.low).log()

    def entropy(self):
        return (self.high - self.low).log()

    def _kl(self, q):
        result = ((q.high - q.low) / (self.high - self.low)).log()
        outside = (q.low > self.low) | (q.high < self.high)
        return result.masked_fill(outside, float("inf"))

    def __repr__(self):
        return f"Uniform(low: {self.low}, high: {self.high})"


def _probs_and_logits(probs, logits, binary):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    if probs is not None:
        probs = _as_tensor(probs)
        if not binary:
            probs = probs / probs.sum(-1, keepdim=True)
        eps = finfo(probs.dtype).eps
        clamped = probs.clamp(eps, 1 - eps)
        logits = (clamped.log() - (-clamped).log1p()) if binary else clamped.log()
        return probs, logits
    logits = _as_tensor(logits)
    if binary:
        return logits.sigmoid(), logits
    logits = logits - logits.logsumexp(-1, keepdim=True)
    return logits.exp(), logits


class Bernoulli(Distribution):
    """1 with probability probs (or sigmoid(logits)), else 0."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        self.probs, self.logits = _probs_and_logits(probs, logits, True)
        super().__init__(tuple(self.probs.shape))

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            return bernoulli(self.probs.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        value = _as_tensor(value, self.logits)
        logits, value = broadcast_tensors(self.logits, value.to(self.logits.dtype))
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def _kl(self, q):
        t1 = self.probs * (F.softplus(-q.logits) - F.softplus(-self.logits))
        t1 = t1.masked_fill(q.probs == 0, float("inf")).masked_fill(self.probs == 0, 0)
        t2 = (1 - self.probs) * (F.softplus(q.logits) - F.softplus(self.logits))
        t2 = t2.masked_fill(q.probs == 1, float("inf")).masked_fill(self.probs == 1, 0)
        return t1 + t2

    def __repr__(self):
        return f"Bernoulli(probs: {self.probs})"


class Categorical(Distribution):
    """One of K categories (the last dim of probs or logits), by their (normalised) probabilities."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        self.probs, self.logits = _probs_and_logits(probs, logits, False)
        self._num_events = self.probs.shape[-1]
        super().__init__(tuple(self.probs.shape[:-1]))

    @property
    def param_shape(self):
        return tuple(self.probs.shape)

    @property
    def mean(self):
        return _creation.full(self._batch_shape, float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def variance(self):
        return self.mean

    def sample(self, sample_shape=()):
        with no_grad():
            n = math.prod(sample_shape)
            flat = self.probs.reshape(-1, self._num_events)
            drawn = multinomial(flat, n, True).t()  # (n, batch)
            return drawn.reshape(tuple(sample_shape) + self._batch_shape)

    def log_prob(self, value):
        value = _as_tensor(value).long()
        value, logits = broadcast_tensors(value.unsqueeze(-1), self.logits)
        return logits.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def _kl(self, q):
        t = self.probs * (self.logits - q.logits)
        t = t.masked_fill(q.probs == 0, float("inf")).masked_fill(self.probs == 0, 0)
        return t.sum(-1)

    def __repr__(self):
        return f"Categorical(probs: {self.probs})"


class Gamma(Distribution):
    """Gamma(concentration, rate): density rate^a x^(a - 1) e^(-rate x) / Gamma(a) on x > 0 (a the
    concentration). rsample's gradient wrt concentration is torch's implicit one."""

    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self._set_broadcast(concentration=concentration, rate=rate)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = StandardGamma.apply(self.concentration.expand(shape)) / self.rate.expand(shape)
        value.detach().clamp_(min=finfo(value.dtype).tiny)  # as torch: not in the graph
        return value

    def log_prob(self, value):
        value = _as_tensor(value, self.rate)
        a = self.concentration
        return _C.xlogy(a, self.rate) + _C.xlogy(a - 1, value) - self.rate * value - a.lgamma()

    def entropy(self):
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1 - a) * a.digamma()

    def _kl(self, q):
        t1 = q.concentration * (self.rate / q.rate).log()
        t2 = q.concentration.lgamma() - self.concentration.lgamma()
        t3 = (self.concentration - q.concentration) * self.concentration.digamma()
        return t1 + t2 + t3 + (q.rate - self.rate) * (self.concentration / self.rate)

    def __repr__(self):
        return f"Gamma(concentration: {self.concentration}, rate: {self.rate})"


class Dirichlet(Distribution):
    """Dirichlet(concentration) on the probability simplex of concentration's last dim (the event);
    draws are normalised Gamma draws, rsample's gradient is torch's implicit one."""

    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        concentration = _as_tensor(concentration)
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(tuple(concentration.shape[:-1]), tuple(concentration.shape[-1:]))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        """(a - 1)+ normalised; where every a < 1, the first vertex (torch's argmax of NaNs)."""
        excess = (self.concentration - 1).clamp(min=0.0)
        mode = excess / excess.sum(-1, keepdim=True)
        vertex = _creation.arange(self._event_shape[0], device=mode.device) == 0
        return _C.where((self.concentration < 1).all(-1, keepdim=True), vertex.to(mode.dtype), mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return DirichletSample.apply(self.concentration.expand(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        a = self.concentration
        return _C.xlogy(a - 1, _as_tensor(value, a)).sum(-1) + a.sum(-1).lgamma() - a.lgamma().sum(-1)

    def entropy(self):
        a, total = self.concentration, self.concentration.sum(-1)
        return (a.lgamma().sum(-1) - total.lgamma() - (self._event_shape[0] - total) * total.digamma()
                - ((a - 1) * a.digamma()).sum(-1))

    def _kl(self, q):
        p_total, q_total = self.concentration.sum(-1), q.concentration.sum(-1)
        t1 = p_total.lgamma() - q_total.lgamma()
        t2 = (self.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
        t3 = self.concentration.digamma() - p_total.digamma().unsqueeze(-1)
        return t1 - t2 + ((self.concentration - q.concentration) * t3).sum(-1)

    def __repr__(self):
        return f"Dirichlet(concentration: {self.concentration})"


def _dirichlet_coordinate(name, index=0):
    """A property of Beta: coordinate `index` of its Dirichlet's `name`."""
    return property(lambda self: getattr(self._dirichlet, name)[..., index])


class Beta(Distribution):
    """Beta(concentration1, concentration0) on [0, 1]: the first coordinate of
    Dirichlet([concentration1, concentration0]), which does the work (as in torch)."""

    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self._dirichlet = Dirichlet(_C.stack(_broadcast(concentration1, concentration0), -1))
        super().__init__(self._dirichlet._batch_shape)

    concentration1, concentration0 = _dirichlet_coordinate("concentration"), _dirichlet_coordinate("concentration", 1)
    mean, mode, variance = (_dirichlet_coordinate(name) for name in ("mean", "mode", "variance"))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value):
        value = _as_tensor(value, self._dirichlet.concentration)
        return self._dirichlet.log_prob(_C.stack([value, 1 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()

    def _kl(self, q):
        return self._dirichlet._kl(q._dirichlet)

    def __repr__(self):
        return f"Beta(concentration1: {self.concentration1}, concentration0: {self.concentration0})"


def _solve_lower(L, B):
    """X with L @ X = B for lower triangular L (..., n, n) and B (..., n, k), batch dims broadcast:
    forward substitution, one row per step."""
    rows = []
    for i in range(L.shape[-1]):
        row = B[..., i, :]
        if rows:
            row = row - (L[..., i, :i].unsqueeze(-1) * _C.stack(rows, -2)).sum(-2)
        rows.append(row / L[..., i, i:i + 1])
    return _C.stack(rows, -2)


def _cholesky(A):
    """The lower triangular L with L @ L^T = A (positive definite, (..., n, n)), one column per step
    (what torch.linalg.cholesky gives, differentiable through the tensor ops). A is symmetrised first:
    the gradient is then symmetric, as torch's."""
    n = A.shape[-1]
    A = (A + A.mT) / 2
    cols = []
    for j in range(n):
        col = A[..., :, j]
        if cols:
            done = _C.stack(cols, -1)
            col = col - (done * done[..., j:j + 1, :]).sum(-1)
        pivot = col[..., j:j + 1]
        if not bool((pivot > 0).all()):
            raise _C.InvalidArgumentError("linalg.cholesky: The factorization could not be completed because the "
                                          f"input is not positive-definite (the leading minor of order {j + 1} is "
                                          "not positive-definite).")
        above = _creation.arange(n, device=A.device) < j
        cols.append((col / pivot.sqrt()).masked_fill(above, 0.0))
    return _C.stack(cols, -1)


def _precision_to_scale_tril(P):
    """torch's: the Cholesky factor of P reversed and transposed is L^-1 (lower triangular)."""
    l_inv = _cholesky(P.flip((-2, -1))).flip((-2, -1)).mT
    return _solve_lower(l_inv, _creation.eye(P.shape[-1], dtype=P.dtype, device=P.device))


class MultivariateNormal(Distribution):
    """N(loc, covariance) over loc's last dim, given exactly one of covariance_matrix, precision_matrix
    (each factored by _cholesky: small matrices) or scale_tril (L with covariance L L^T)."""

    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        loc = _as_tensor(loc)
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = {"covariance_matrix": covariance_matrix, "precision_matrix": precision_matrix,
                 "scale_tril": scale_tril}
        given = {name: _as_tensor(m, loc) for name, m in given.items() if m is not None}
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        [(name, matrix)] = given.items()
        if matrix.dim() < 2:
            raise ValueError(f"{'scale_tril matrix' if name == 'scale_tril' else name} must be at least "
                             "two-dimensional, with optional leading batch dimensions")
        batch = tuple(broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        self.loc = loc.expand(batch + tuple(loc.shape[-1:]))
        super().__init__(batch, tuple(loc.shape[-1:]))
        self._given = given
        factor = {"covariance_matrix": _cholesky, "precision_matrix": _precision_to_scale_tril}.get(name)
        self._unbroadcasted_scale_tril = factor(matrix) if factor else matrix

    def _matrix(self, name, compute):
        matrix = self._given[name] if name in self._given else compute(self._unbroadcasted_scale_tril)
        return matrix.expand(self._batch_shape + self._event_shape * 2)

    @property
    def scale_tril(self):
        return self._matrix("scale_tril", lambda L: L)

    @property
    def covariance_matrix(self):
        return self._matrix("covariance_matrix", lambda L: L @ L.mT)

    @property
    def precision_matrix(self):
        def inverse(L):
            l_inv = _solve_lower(L, _creation.eye(L.shape[-1], dtype=L.dtype, device=L.device))
            return l_inv.mT @ l_inv
        return self._matrix("precision_matrix", inverse)

    mean = mode = property(lambda self: self.loc)

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(self._batch_shape + self._event_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _creation.randn(*shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def _mahalanobis(self, diff):
        return _solve_lower(self._unbroadcasted_scale_tril, diff.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1)

    def log_prob(self, value):
        diff = _as_tensor(value, self.loc) - self.loc
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + self._mahalanobis(diff)) - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(self._batch_shape)

    def _kl(self, q):
        if self._event_shape != q._event_shape:
            raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be "
                             "computed")
        trace = _solve_lower(q._unbroadcasted_scale_tril, self._unbroadcasted_scale_tril).pow(2).sum((-2, -1))
        mahalanobis = q._mahalanobis(q.loc - self.loc)
        return q._half_log_det() - self._half_log_det() + 0.5 * (trace + mahalanobis - self._event_shape[0])

    def __repr__(self):
        return f"MultivariateNormal(loc: {self.loc}, scale_tril: {self.scale_tril})"


class Independent(Distribution):
    """`base_distribution` with its rightmost `reinterpreted_batch_ndims` batch dims read as event
    dims (torch.distributions.Independent): log_prob and entropy sum over them."""

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        batch = tuple(base_distribution.batch_shape)
        if not 0 <= reinterpreted_batch_ndims <= len(batch):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual "
                             f"{reinterpreted_batch_ndims} vs {len(batch)}")
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        split = len(batch) - reinterpreted_batch_ndims
        super().__init__(batch[:split], batch[split:] + tuple(base_distribution.event_shape))

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    def _sum_reinterpreted(self, value):
        n = self.reinterpreted_batch_ndims
        return value.sum(tuple(range(-n, 0))) if n else value

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return self._sum_reinterpreted(self.base_dist.log_prob(value))

    def entropy(self):
        return self._sum_reinterpreted(self.base_dist.entropy())

    def _kl(self, q):
        if self.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
            raise _C.NotSupportedError("kl_divergence of two Independent distributions reinterpreting different "
                                       "numbers of dims is not implemented")
        return self._sum_reinterpreted(kl_divergence(self.base_dist, q.base_dist))

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


def kl_divergence(p, q):
    """KL(p || q) for two distributions of one family (Normal, Uniform, Bernoulli, Categorical, Gamma,
    Beta, Dirichlet, MultivariateNormal, and Independent ones of one family reinterpreting as many dims)."""
    if type(p) is not type(q):
        raise _C.NotSupportedError(f"kl_divergence({type(p).__name__}, {type(q).__name__}) is not implemented; "
                                   "pyflame has it for two distributions of one family")
    return p._kl(q)
