"""Bernoulli(probs | logits), Categorical(probs | logits) and OneHotCategorical(probs | logits)."""

from numbers import Number

from . import _torch as torch
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical"]


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def _expand_probs_or_logits(source, new, shape):
    """Give ``new`` the parameters ``source`` holds (probs, logits or both) expanded to ``shape``."""
    for name in ("probs", "logits"):
        if name in source.__dict__:
            setattr(new, name, getattr(source, name).expand(shape))
            new._param = getattr(new, name)


class _BinaryProbsOrLogits(Distribution):
    """One binary event per element, parameterised by ``probs`` or ``logits`` (exactly one of them
    given; the other is computed when first read)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}

    def __init__(self, probs, logits, validate_args):
        _one_of(probs, logits)
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = torch.Size() if is_scalar else self._param.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def _expand_into(self, new, batch_shape):
        """``expand``'s work once ``new`` is checked: the parameter and the batch shape."""
        batch_shape = torch.Size(tuple(batch_shape))
        _expand_probs_or_logits(self, new, batch_shape)
        return self._expand_with(new, batch_shape)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()


def _bce_with_logits(logits, target):
    """-(target log sigmoid(logits) + (1 - target) log sigmoid(-logits)), without overflow."""
    return logits.clamp(min=0) - logits * target + torch.log1p(torch.exp(-logits.abs()))


class Bernoulli(_BinaryProbsOrLogits):
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        super().__init__(probs, logits, validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_into(self._get_checked_instance(Bernoulli, _instance), batch_shape)

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(dtype=self.probs.dtype)
        return torch.where(self.probs == 0.5, float("nan"), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with torch.no_grad():
            return torch.bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value)

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        values = torch.arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self):
        return (torch.logit(self.probs),)


class Categorical(Distribution):
    """Over {0, ..., K-1}, K = the last dimension of probs or logits (probs need not sum to 1: they are
    normalised; logits are normalised to log-probabilities)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.size()[-1]
        batch_shape = self._param.size()[:-1] if self._param.dim() > 1 else torch.Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = torch.Size(tuple(batch_shape))
        _expand_probs_or_logits(self, new, tuple(batch_shape) + (self._num_events,))
        return self._expand_with(new, batch_shape, _num_events=self._num_events)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.size()

    @property
    def mean(self):
        return torch.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return torch.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype, device=self.probs.device)

    def sample(self, sample_shape=()):
        sample_shape = torch.Size(tuple(sample_shape))
        probs_2d = self.probs.reshape(-1, self._num_events)
        n = 1
        for s in sample_shape:
            n *= s
        with torch.no_grad():
            samples_2d = torch.multinomial(probs_2d.detach(), n, True).T
        return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = torch.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = torch.finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand=True):
        values = torch.arange(self._num_events, dtype=torch.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class OneHotCategorical(Distribution):
    """Categorical with one-hot samples of K elements (event_shape (K,))."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        return self._expand_with(new, batch_shape, _categorical=self._categorical.expand(batch_shape))

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return self._one_hot(probs.argmax(-1), probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def _one_hot(self, indices, dtype):
        k = self._categorical._num_events
        return (indices.unsqueeze(-1) == torch.arange(k, device=indices.device)).to(dtype=dtype)

    def sample(self, sample_shape=()):
        probs = self._categorical.probs
        return self._one_hot(self._categorical.sample(sample_shape), probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        values = torch.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values
