"""pf.special: torch.special's names for the functions PyFlame has (each is the pf function itself)."""

from . import _C
from ._linalg import logsumexp  # noqa: F401

expit = _C.sigmoid
erf = _C.erf
erfinv = _C.erfinv
erfc = _C.erfc
expm1 = _C.expm1
exp2 = _C.exp2
log1p = _C.log1p
xlogy = _C.xlogy
gammaln = _C.lgamma
digamma = psi = _C.digamma
softmax = _C.softmax
log_softmax = _C.log_softmax
round = _C.round  # noqa: A001
sinc = _C.sinc


def logit(input, eps=None):
    """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given, as torch.special.logit (the table's logit)."""
    return _C.logit(input, eps)

