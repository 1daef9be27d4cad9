"""Uniform(low, high), Laplace(loc, scale), Exponential(rate), Gumbel(loc, scale) and Poisson(rate)."""

import math
from numbers import Number

from . import _torch as torch
from . import constraints
from .distribution import Distribution, LocatedDistribution, _batch_shape, _expanded
from .utils import broadcast_all

__all__ = ["Exponential", "Gumbel", "Laplace", "Poisson", "Uniform"]

_EULER_GAMMA = 0.57721566490153286061


class Uniform(Distribution):
    has_rsample = True

    @property
    def arg_constraints(self):
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return math.nan * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(_batch_shape(self.low, low, high), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expanded(self, Uniform, ("low", "high"), batch_shape, _instance)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rand = torch.rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = self.low.le(value).to(dtype=self.low.dtype)
        ub = self.high.gt(value).to(dtype=self.low.dtype)
        return torch.log(lb * ub) - torch.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return torch.log(self.high - self.low)


class Laplace(LocatedDistribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2**0.5) * self.scale

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_batch_shape(self.loc, loc, scale), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expanded(self, Laplace, ("loc", "scale"), batch_shape, _instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        finfo = torch.finfo(self.loc.dtype)
        # U(-1, 1) without its endpoints: log1p(-|u|) stays finite
        u = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device) * 2 - 1
        u = u.clamp(min=finfo.eps - 1, max=1 - finfo.eps)
        return self.loc - self.scale * u.sign() * torch.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -torch.log(2 * self.scale) - torch.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * torch.expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * torch.log1p(-2 * term.abs())

    def entropy(self):
        return 1 + torch.log(2 * self.scale)


class Exponential(Distribution):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return torch.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = torch.Size() if isinstance(rate, Number) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expanded(self, Exponential, ("rate",), batch_shape, _instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = torch.rand(shape, dtype=self.rate.dtype, device=self.rate.device)
        # -log(1 - u) with u in [0, 1): finite, and 0 only where u is 0
        return -torch.log1p(-u) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - torch.exp(-self.rate * value)

    def icdf(self, value):
        return -torch.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - torch.log(self.rate)

    @property
    def _natural_params(self):
        return (-self.rate,)


class Gumbel(Distribution):
    """Gumbel(loc, scale): loc - scale log(-log U)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_batch_shape(self.loc, loc, scale), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expanded(self, Gumbel, ("loc", "scale"), batch_shape, _instance)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        finfo = torch.finfo(self.loc.dtype)
        u = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device).clamp(min=finfo.tiny, max=1 - finfo.eps)
        return self.loc - self.scale * torch.log(-torch.log(u))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return torch.exp(-torch.exp(-(value - self.loc) / self.scale))

    def icdf(self, value):
        return self.loc - self.scale * torch.log(-torch.log(value))

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)


# Poisson sampling: below this rate, count exponential inter-arrival times (Knuth: about rate + 1
# rounds); above, Hormann's transformed rejection with squeeze (PTRS, 1993), whose acceptance rate is
# about 90% whatever the rate.
_KNUTH_BELOW = 10.0
_MAX_ROUNDS = 256


def _sample_poisson(rate):
    rate = rate.detach()
    zeros = torch.zeros_like(rate)
    small = rate < _KNUTH_BELOW
    result = zeros
    if bool(small.any()):
        # the count of arrivals in [0, rate) of a unit-rate process, in logarithms: sum of -log U
        elapsed = zeros
        count = zeros
        running = small & (rate > 0)
        for _ in range(int(_KNUTH_BELOW * 8) + 64):
            if not bool(running.any()):
                break
            u = torch.rand(rate.shape, dtype=rate.dtype, device=rate.device)
            elapsed = elapsed - torch.log1p(-u)
            arrived = running & (elapsed < rate)
            count = count + arrived.to(dtype=rate.dtype)
            running = arrived
        result = torch.where(small, count, result)
    large = ~small & (rate == rate) & (rate != math.inf)
    if bool(large.any()):
        lam = torch.where(large, rate, _KNUTH_BELOW)
        log_lam = lam.log()
        b = 0.931 + 2.53 * lam.sqrt()
        a = -0.059 + 0.02483 * b
        inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
        v_r = 0.9277 - 3.6224 / (b - 2)
        waiting = large
        drawn = zeros
        for _ in range(_MAX_ROUNDS):
            if not bool(waiting.any()):
                break
            u = torch.rand(rate.shape, dtype=rate.dtype, device=rate.device) - 0.5
            v = torch.rand(rate.shape, dtype=rate.dtype, device=rate.device)
            us = 0.5 - u.abs()
            k = ((2 * a / us + b) * u + lam + 0.43).floor()
            squeeze = (us >= 0.07) & (v <= v_r)
            usable = (k >= 0) & ~((us < 0.013) & (v > us))
            log_accept = torch.log(v * inv_alpha / (a / (us * us) + b))
            exact = log_accept <= -lam + k * log_lam - torch.lgamma(k + 1)
            accept = waiting & (squeeze | (usable & exact))
            drawn = torch.where(accept, k, drawn)
            waiting = waiting & ~accept
        result = torch.where(large, drawn, result)
    return torch.where(rate == rate, result, math.nan)


class Poisson(Distribution):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = torch.Size() if isinstance(rate, Number) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expanded(self, Poisson, ("rate",), batch_shape, _instance)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with torch.no_grad():
            return _sample_poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - torch.lgamma(value + 1)

    @property
    def _natural_params(self):
        return (torch.log(self.rate),)
