"""pyflame.distributions, as torch.distributions: Normal, Uniform, Bernoulli and Categorical with
sample, rsample (the reparameterised ones), log_prob, entropy, mean, variance and stddev,
Independent (batch dims read as event dims), and kl_divergence between two of one family.
Parameters broadcast to the batch shape and may live on any device; samples are drawn there.

Not here yet (AttributeError): Beta, Gamma, Dirichlet, MultivariateNormal and the rest of torch's
families, transforms and constraints; validate_args is accepted and checks nothing.
"""

import math
import numbers

from .. import _C, _creation
from .._misc_api import bernoulli, multinomial
from .._shape_api import Size, broadcast_tensors, finfo
from ..autograd import no_grad
from ..nn import functional as F

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical", "Independent", "kl_divergence"]


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

    def __repr__(self):
        return f"{type(self).__name__}()"


class Normal(Distribution):
    """N(loc, scale^2)."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(tuple(self.loc.shape))

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

    def __repr__(self):
        return f"Normal(loc: {self.loc}, scale: {self.scale})"


class Uniform(Distribution):
    """Uniform on [low, high)."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = _broadcast(low, high)
        super().__init__(tuple(self.low.shape))

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

    def __repr__(self):
        return f"Categorical(probs: {self.probs})"


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

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


def kl_divergence(p, q):
    """KL(p || q) for two distributions of one family (Normal, Uniform, Bernoulli, Categorical, and
    Independent ones of one family reinterpreting as many dims)."""
    if type(p) is not type(q):
        raise _C.NotSupportedError(f"kl_divergence({type(p).__name__}, {type(q).__name__}) is not implemented; "
                                   "pyflame has it for two distributions of one family")
    if isinstance(p, Independent):
        if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
            raise _C.NotSupportedError("kl_divergence of two Independent distributions reinterpreting different "
                                       "numbers of dims is not implemented")
        return p._sum_reinterpreted(kl_divergence(p.base_dist, q.base_dist))
    if isinstance(p, Normal):
        var_ratio = (p.scale / q.scale).pow(2)
        t1 = ((p.loc - q.loc) / q.scale).pow(2)
        return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())
    if isinstance(p, Uniform):
        result = ((q.high - q.low) / (p.high - p.low)).log()
        outside = (q.low > p.low) | (q.high < p.high)
        return result.masked_fill(outside, float("inf"))
    if isinstance(p, Bernoulli):
        t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
        t1 = t1.masked_fill(q.probs == 0, float("inf")).masked_fill(p.probs == 0, 0)
        t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
        t2 = t2.masked_fill(q.probs == 1, float("inf")).masked_fill(p.probs == 1, 0)
        return t1 + t2
    if isinstance(p, Categorical):
        t = p.probs * (p.logits - q.logits)
        t = t.masked_fill(q.probs == 0, float("inf")).masked_fill(p.probs == 0, 0)
        return t.sum(-1)
    raise _C.NotSupportedError(f"kl_divergence of {type(p).__name__} is not implemented")
