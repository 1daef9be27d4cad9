"""Gamma(concentration, rate), its sampler (Marsaglia and Tsang's, vectorised) and the implicit
reparameterisation gradient of a standard gamma sample with respect to its concentration."""

import math
from numbers import Number

from ..autograd.function import Function
from . import _torch as torch
from . import constraints
from .distribution import Distribution, _expanded
from .utils import broadcast_all

__all__ = ["Gamma", "standard_gamma", "standard_gamma_grad"]

# Every round of the sampler accepts ~96% (at least) of the elements still waiting; a generous cap that
# no real draw reaches keeps a NaN concentration from looping forever (such elements stay NaN).
_MAX_ROUNDS = 64


def _sample_standard_gamma(concentration):
    """Gamma(concentration, 1) samples, no gradient: Marsaglia and Tsang (2000) for concentration >= 1,
    with a rejection round over every element still waiting; below 1, a Gamma(concentration + 1) sample
    times U^(1 / concentration) (their boost), kept in logarithms so that tiny values do not underflow
    to 0 before the clamp to the dtype's smallest normal number, as PyTorch's sampler."""
    alpha = concentration.detach()
    small = alpha < 1
    boosted = torch.where(small, alpha + 1, alpha)
    d = boosted - 1.0 / 3.0
    c = (9.0 * d).rsqrt()
    result = torch.zeros_like(alpha)
    waiting = alpha == alpha  # NaN concentrations never finish; they give NaN
    for _ in range(_MAX_ROUNDS):
        if not bool(waiting.any()):
            break
        z = torch.randn(alpha.shape, dtype=alpha.dtype, device=alpha.device)
        u = torch.rand(alpha.shape, dtype=alpha.dtype, device=alpha.device)
        v = (1 + c * z) ** 3
        positive = v > 0
        log_v = torch.where(positive, v, 1.0).log()
        accept = positive & (u.log() < 0.5 * z * z + d - d * v + d * log_v) & waiting
        result = torch.where(accept, d * v, result)
        waiting = waiting & ~accept
    result = torch.where(waiting, math.nan, result)
    if bool(small.any()):
        u = torch.rand(alpha.shape, dtype=alpha.dtype, device=alpha.device)
        log_boost = u.clamp(min=torch.finfo(alpha.dtype).tiny).log() / torch.where(small, alpha, 1.0)
        result = torch.where(small, (result.log() + log_boost).exp(), result)
    return result.clamp(min=torch.finfo(alpha.dtype).tiny)


# The implicit gradient dx/d(alpha) = -(dP(alpha, x)/d(alpha)) / p(x; alpha), P the regularised lower
# incomplete gamma function and p the density. With t_k = x^(alpha+k) e^-x / Gamma(alpha+k+1),
# P = sum_k t_k and dP/d(alpha) = sum_k t_k (log x - psi(alpha+k+1)); p = t_0 alpha / x, so
#   dx/d(alpha) = -(x / alpha) sum_k r_k (log x - psi(alpha+k+1)),   r_k = t_k / t_0 = prod_j x / (alpha+j),
# a series that needs no exponential and converges once alpha + k > x. Summed in float64 (it cancels
# where P is near 1: relative error ~ 1e-16 / t_0, below 1e-8 for any sample a float64 sampler gives up
# to alpha = _SERIES_UP_TO). Above that, the series would need hundreds of terms: the Wilson-Hilferty
# cube-root normal approximation x = alpha (1 - 1/(9 alpha) + z / (3 sqrt(alpha)))^3 at fixed z is
# differentiated instead (relative error below 1e-4 there, shrinking as 1/alpha).
_SERIES_UP_TO = 256.0
_SERIES_TOLERANCE = 1e-17
_SERIES_MAX_TERMS = 2000
_CHECK_EVERY = 8


def _series_grad(x, alpha):
    log_x = x.log()
    ratio = torch.ones_like(x)
    psi = torch.digamma(alpha + 1)
    total = log_x - psi
    k = 0
    while k < _SERIES_MAX_TERMS:
        for _ in range(_CHECK_EVERY):
            k += 1
            shifted = alpha + k
            ratio = ratio * x / shifted
            psi = psi + 1 / shifted
            term = ratio * (log_x - psi)
            total = total + term
        converged = (shifted > x) & (term.abs() <= _SERIES_TOLERANCE * total.abs())
        if bool(converged.all()):
            break
    return -(x / alpha) * total


def _wilson_hilferty_grad(x, alpha):
    root_alpha = alpha.sqrt()
    w = (x / alpha) ** (1.0 / 3.0)
    z = (w - 1 + 1 / (9 * alpha)) * 3 * root_alpha
    dw = 1 / (9 * alpha * alpha) - z / (6 * alpha * root_alpha)
    return w**3 + 3 * alpha * w * w * dw


def standard_gamma_grad(x, concentration):
    """d x / d concentration of standard gamma samples ``x`` (as ``torch._standard_gamma_grad``),
    elementwise, without gradient, in ``x``'s dtype."""
    with torch.no_grad():
        x64 = x.detach().to(dtype=torch.float64)
        alpha = concentration.detach().to(dtype=torch.float64).expand(x.shape)
        large = alpha > _SERIES_UP_TO
        grad = torch.zeros_like(x64)
        if bool((~large).any()):
            grad = torch.where(large, grad, _series_grad(x64, torch.where(large, 1.0, alpha)))
        if bool(large.any()):
            grad = torch.where(large, _wilson_hilferty_grad(x64, alpha), grad)
        grad = torch.where(grad == grad, grad, 0.0)  # 0 where x underflowed, as PyTorch
        return grad.to(dtype=x.dtype)


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx, concentration):
        x = _sample_standard_gamma(concentration)
        ctx.save_for_backward(x, concentration)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, concentration = ctx.saved_tensors
        return grad * standard_gamma_grad(x, concentration)


def standard_gamma(concentration):
    """Gamma(concentration, 1) samples of concentration's shape, differentiable in concentration."""
    return _StandardGamma.apply(concentration)


class Gamma(Distribution):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, Number) and isinstance(rate, Number):
            batch_shape = torch.Size()
        else:
            batch_shape = self.concentration.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expanded(self, Gamma, ("concentration", "rate"), batch_shape, _instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=torch.finfo(value.dtype).tiny)

    def log_prob(self, value):
        value = torch.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (
            torch.xlogy(self.concentration, self.rate)
            + torch.xlogy(self.concentration - 1, value)
            - self.rate * value
            - torch.lgamma(self.concentration)
        )

    def entropy(self):
        return (
            self.concentration
            - torch.log(self.rate)
            + torch.lgamma(self.concentration)
            + (1.0 - self.concentration) * torch.digamma(self.concentration)
        )

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        x = self.rate * value
        cdf = regularized_lower_gamma(self.concentration, x)
        # dP(a, x)/dx is the standard gamma density: it carries the gradient to rate and value (as
        # PyTorch's gammainc, none to the concentration)
        a = self.concentration.detach()
        density = (torch.xlogy(a - 1, x.detach()) - x.detach() - torch.lgamma(a)).exp()
        return cdf + (x - x.detach()) * density

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)


def regularized_lower_gamma(a, x):
    """P(a, x), no gradient in a: the series sum_k x^(a+k) e^-x / Gamma(a+k+1) where x < a + 1, else
    1 - Q(a, x) from Legendre's continued fraction (modified Lentz), each to float64 precision."""
    a, x = broadcast_all(a, x)
    with torch.no_grad():
        a64 = a.detach().to(dtype=torch.float64)
        x64 = x.detach().to(dtype=torch.float64).clamp(min=0)
        log_prefactor = torch.xlogy(a64, x64) - x64 - torch.lgamma(a64)
        use_series = x64 < a64 + 1
        # the series
        term = 1 / a64
        total = term
        for k in range(1, 400):
            term = term * x64 / (a64 + k)
            total = total + term
            if k % 16 == 0 and bool(((term <= total * 1e-17) | ~use_series).all()):
                break
        lower = total * log_prefactor.exp()
        # the continued fraction for Q
        tiny = 1e-300
        b = x64 + 1 - a64
        c = torch.full_like(x64, 1 / tiny)
        d = 1 / torch.where(b == 0, tiny, b)
        h = d
        for i in range(1, 400):
            an = -i * (i - a64)
            b = b + 2
            d = an * d + b
            d = 1 / torch.where(d.abs() < tiny, tiny, d)
            c = b + an / c
            c = torch.where(c.abs() < tiny, tiny, c)
            delta = d * c
            h = h * delta
            if i % 16 == 0 and bool((((delta - 1).abs() <= 1e-16) | use_series).all()):
                break
        upper = (log_prefactor.exp()) * h
        result = torch.where(use_series, lower, 1 - upper)
        result = torch.where(x64 == 0, 0.0, result)
    value = result.to(dtype=x.dtype)
    return value
