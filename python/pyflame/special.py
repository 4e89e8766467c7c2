"""pf.special: torch.special's names for the functions PyFlame has (each is the pf function itself)."""

from . import _C
from ._linalg import logsumexp  # noqa: F401

expit = _C.sigmoid
erf = _C.erf
erfinv = _C.erfinv
expm1 = _C.expm1
exp2 = _C.exp2
log1p = _C.log1p
xlogy = _C.xlogy
gammaln = _C.lgamma
digamma = psi = _C.digamma
softmax = _C.softmax
log_softmax = _C.log_softmax
round = _C.round  # noqa: A001


def erfc(input):
    """1 - erf(input), as torch.special.erfc."""
    return _C.sub(1.0, _C.erf(input))


def logit(input, eps=None):
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given, as torch.special.logit."""
    p = input if eps is None else _C.clamp(input, eps, 1.0 - eps)
    return _C.sub(_C.log(p), _C.log1p(_C.neg(p)))


def sinc(input):
    """sin(pi x) / (pi x), 1 at 0, as torch.special.sinc."""
    x = _C.mul(input, 3.141592653589793)
    return _C.where(_C.eq(input, 0), 1.0, _C.div(_C.sin(x), x))
