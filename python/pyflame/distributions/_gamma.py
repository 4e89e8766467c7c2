"""Gamma and Dirichlet draws for pyflame.distributions, with torch's implicit reparameterisation
gradients (Figurnov et al. 2018): d sample / d concentration = -(d cdf / d concentration) / pdf, by
the approximations of torch's ATen/native/Distributions.h (standard_gamma_grad_one and
dirichlet_grad_one), written in tensor ops so that they run on the tensor's device."""

from .. import _C, _creation
from .._shape_api import finfo
from ..autograd import Function


def _horner(t, coefs):
    """coefs[0] + t * (coefs[1] + t * (coefs[2] + ...))."""
    result = coefs[-1]
    for c in reversed(coefs[:-1]):
        result = c + t * result
    return result


def _nan_to_zero(t):
    return t.masked_fill(t.isnan(), 0.0)


def standard_gamma(concentration):
    """One Gamma(concentration, 1) draw per element: Marsaglia and Tsang's rejection (2000), every
    element drawing again until accepted; below concentration 1, Gamma(concentration + 1) * u^(1/concentration).
    Clamped below by the dtype's smallest normal number, as torch."""
    shape, dtype, device = tuple(concentration.shape), concentration.dtype, concentration.device
    boost = concentration < 1
    scale = (1 - _creation.rand(*shape, dtype=dtype, device=device)).pow(1 / concentration)
    scale = _C.where(boost, scale, 1.0)
    d = concentration + boost.to(dtype) - 1 / 3
    c = (9 * d).rsqrt()
    out = _creation.zeros(*shape, dtype=dtype, device=device)
    pending = _creation.ones(*shape, dtype=_C.dtype.bool, device=device)
    while bool(pending.any()):
        x = _creation.randn(*shape, dtype=dtype, device=device)
        y = 1 + c * x
        v, u, xx = y * y * y, 1 - _creation.rand(*shape, dtype=dtype, device=device), x * x
        accept = (y > 0) & ((u < 1 - 0.0331 * xx * xx) | (u.log() < 0.5 * xx + d * (1 - v + v.log())))
        out = _C.where(accept & pending, d * v, out)
        pending = pending & ~accept
    return (scale * out).clamp(min=finfo(dtype).tiny)


_GAMMA_GRAD_UV = ((0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084),
                  (0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
                   -0.00058392623),
                  (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326,
                   0.00085092367, -1.5247877e-07))


def standard_gamma_grad(alpha, x):
    """d x / d alpha for x ~ Gamma(alpha, 1), as torch._standard_gamma_grad: a Taylor series of the cdf
    for x < 0.8, Rice's saddle point expansion for alpha > 8, a bivariate rational fit otherwise."""
    numer, denom = 1, alpha
    series1, series2 = 1 / alpha, 1 / (alpha * alpha)
    for i in range(1, 6):
        numer, denom = numer * (-x / i), denom + 1
        series1, series2 = series1 + numer / denom, series2 + numer / (denom * denom)
    pow_x_alpha = x.pow(alpha)
    cdf_alpha = (x.log() - alpha.digamma()) * pow_x_alpha * series1 - pow_x_alpha * series2
    taylor = _nan_to_zero(-cdf_alpha / (x.pow(alpha - 1) * (-x).exp()))

    near = ((1 + 24 * alpha * (1 + 12 * alpha)) * (1440 * alpha * alpha + 6 * x * (53 - 120 * x)
            - 65 * x * x / alpha + alpha * (107 + 3600 * x)) / (1244160 * alpha.pow(4)))
    denom = (8 * alpha).sqrt()
    term2 = denom / (alpha - x)
    term3 = (x - alpha - alpha * (x / alpha).log()).pow(-1.5)
    term1 = ((x / alpha).log() * _C.where(x < alpha, term2 - term3, term2 + term3)
             - (2 / alpha).sqrt() * (alpha + x) / (alpha - x).pow(2))
    stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
    saddle = _C.where((0.9 * alpha <= x) & (x <= 1.1 * alpha), near, -stirling * x * term1 / denom)

    u, v = (x / alpha).log(), alpha.log()
    coef = [c0 + u * (c1 + u * c2) for c0, c1, c2 in zip(*_GAMMA_GRAD_UV)]
    rational = (_horner(v, coef[:4]) / _horner(v, coef[4:])).exp()
    return _C.where(x < 0.8, taylor, _C.where(alpha > 8, saddle, rational))


def _beta_grad_alpha_small(x, alpha, beta):
    """torch's Taylor expansion of the Beta(alpha, beta) gradient wrt alpha for x near 0."""
    factor = alpha.digamma() - (alpha + beta).digamma() - x.log()
    numer, series = 1, 1 / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * (i - beta) * x / i
        series = series + numer / (alpha + i) * (factor + 1 / (alpha + i))
    return _nan_to_zero(x * (1 - x).pow(-beta) * series)


def _beta_grad_beta_small(x, alpha, beta):
    """torch's Taylor expansion of the Beta(alpha, beta) gradient wrt beta for x near 0."""
    factor = (alpha + beta).digamma() - beta.digamma()
    numer, betas, dbetas, series = 1, 1, 0, factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas, betas = dbetas * (beta - i) + betas, betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    return _nan_to_zero(-(1 - x).pow(1 - beta) * series)


def _stirling(t):
    return 1 + 1 / (12 * t) + 1 / (288 * t * t)


def _beta_grad_alpha_mid(x, alpha, beta):
    """torch's Rice saddle point expansion of the Beta(alpha, beta) gradient wrt alpha, both large."""
    total = alpha + beta
    mean, std = alpha / total, (alpha * beta / (total + 1)).sqrt() / total
    b2 = beta * beta
    poly = 47 * x * b2 * b2 + alpha * ((43 + 20 * (16 + 27 * beta) * x) * b2 * beta + alpha * (
        3 * (59 + 180 * beta - 90 * x) * b2 + alpha * ((453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (
            8 * (1 - x) * (135 * beta - 11)))))
    near = ((1 + 12 * alpha) * (1 + 12 * beta) / (total * total) / (1 - x) * poly
            / (12960 * alpha.pow(3) * b2 * (1 + 12 * total)))
    prefactor = -x / (2 * alpha * beta / total).sqrt()
    axbx = alpha * (x - 1) + beta * x
    term1 = ((2 * alpha * alpha * (x - 1) + alpha * beta * (x - 1) - x * b2)
             / ((2 * alpha / beta).sqrt() * total.pow(1.5) * axbx * axbx))
    term2 = 0.5 * (alpha / (total * x)).log()
    term3 = (8 * alpha * beta / total).sqrt() / axbx
    term4 = (beta * (beta / (total * (1 - x))).log() + alpha * (alpha / (total * x)).log()).pow(-1.5)
    far = (_stirling(alpha) * _stirling(beta) / _stirling(total) * prefactor
           * (term1 + term2 * (term3 + _C.where(x < mean, term4, -term4))))
    return _C.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), near, far)


# c[k][i][j]: the cubic in log(total) - a of the numerator (k = 0) and denominator (k = 1) term u^i a^j.
_DIRICHLET_GRAD_C = (
    (((1.003668233, -0.01061107488, -0.0657888334, 0.01201642863),
      (0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033),
      (-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013)),
     ((0.221950385, -0.3187676331, 0.01799915743, 0.01074823814),
      (-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057),
      (0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05)),
     ((-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565),
      (0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181),
      (0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05))),
    (((1, -0.02924021934, -0.04438342661, 0.007285809825),
      (0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521),
      (-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149)),
     ((0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273),
      (0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956),
      (-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05)),
     ((0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05),
      (0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05),
      (-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06))),
)


def dirichlet_grad(x, alpha, total):
    """torch._dirichlet_grad: -(d cdf / d alpha) / pdf / (1 - x) for x ~ Beta(alpha, total - alpha)."""
    beta = total - alpha
    boundary = total * x * (1 - x)
    u = x.log()
    a = alpha.log() - u
    b = total.log() - a
    p = q = 0
    for i in range(3):
        for j in range(3):
            ua = u.pow(i) * a.pow(j)
            p = p + ua * _horner(b, _DIRICHLET_GRAD_C[0][i][j])
            q = q + ua * _horner(b, _DIRICHLET_GRAD_C[1][i][j])
    rational = p / q * x * (total.digamma() - alpha.digamma()) / beta
    result = _C.where((alpha > 6) & (beta > 6), _beta_grad_alpha_mid(x, alpha, beta), rational)
    result = _C.where((x >= 0.5) & (boundary < 0.75), -_beta_grad_beta_small(1 - x, beta, alpha), result)
    return _C.where((x <= 0.5) & (boundary < 2.5), _beta_grad_alpha_small(x, alpha, beta), result)


def _as_float64(*tensors):
    """The gradients' approximations lose digits in float32 (torch computes them in double on the CPU)."""
    return [t.to(_C.dtype.float64) for t in tensors]


class StandardGamma(Function):
    """Gamma(concentration, 1) draws whose gradient wrt concentration is torch's implicit one."""

    @staticmethod
    def forward(ctx, concentration):
        x = standard_gamma(concentration)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, concentration = _as_float64(*ctx.saved_tensors)
        return grad * standard_gamma_grad(concentration, x).to(grad.dtype)


class DirichletSample(Function):
    """Dirichlet(concentration) draws (normalised Gamma draws, concentration's last dim the event)
    whose gradient wrt concentration is torch's implicit one."""

    @staticmethod
    def forward(ctx, concentration):
        gammas = standard_gamma(concentration)
        x = gammas / gammas.sum(-1, keepdim=True)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, concentration = _as_float64(*ctx.saved_tensors)
        total = concentration.sum(-1, keepdim=True).expand(*concentration.shape)
        x, implicit = x.to(grad.dtype), dirichlet_grad(x, concentration, total).to(grad.dtype)
        return implicit * (grad - (x * grad).sum(-1, keepdim=True))
