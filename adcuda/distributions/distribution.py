"""Distribution: the base class of every distribution, with PyTorch's interface and argument checks."""

import warnings
from numbers import Number

from ..errors import InvalidArgumentError
from . import _torch as torch
from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _size(shape):
    return shape if isinstance(shape, torch.Size) else torch.Size(tuple(shape))


def _check(constraint, value, what, expected):
    """Raise PyTorch's ValueError text where some element of ``value`` (``what``: a parameter or a value
    argument) breaks ``constraint`` (``expected``: what it should have satisfied)."""
    if not bool(constraint.check(value).all()):
        raise InvalidArgumentError(
            f"Expected {what} ({type(value).__name__} of shape {tuple(value.shape)}) {expected}, "
            f"but found invalid values:\n{value}"
        )


class Distribution:
    """A probability distribution of ``event_shape`` values, batched over ``batch_shape``.

    ``validate_args`` (default: ``Distribution.set_default_validate_args``, on as in PyTorch unless
    Python runs with -O) checks the parameters against ``arg_constraints`` when constructed, and values
    given to ``log_prob`` (and friends) against ``support``, raising PyTorch's ValueError texts."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        if value not in [True, False]:
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = _size(batch_shape)
        self._event_shape = _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(
                    f"{self.__class__} does not define `arg_constraints`. Please set `arg_constraints = {{}}` or "
                    "initialize the distribution with `validate_args=False` to turn off validation.",
                    stacklevel=2,
                )
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                    continue  # a parameter computed from another one, which is checked
                _check(
                    constraint,
                    getattr(self, param),
                    f"parameter {param}",
                    f"of distribution {self!r} to satisfy the constraint {constraint!r}",
                )
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution of the same family with its batch dimensions expanded to ``batch_shape``
        (parameters are expanded views, as Tensor.expand)."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        raise NotImplementedError

    @property
    def support(self):
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """Samples of shape ``sample_shape + batch_shape + event_shape``, without gradients."""
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """Reparameterised samples: gradients flow back to the parameters (``has_rsample``)."""
        raise NotImplementedError

    def sample_n(self, n):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning, stacklevel=2)
        return self.sample(torch.Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return torch.exp(self.entropy())

    def _extended_shape(self, sample_shape=()):
        return torch.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        if not isinstance(value, torch.Tensor):
            raise InvalidArgumentError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise InvalidArgumentError(
                f"The right-most size of value must match event_shape: {value.shape} vs {self._event_shape}."
            )
        actual_shape = value.shape
        expected_shape = torch.Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise InvalidArgumentError(
                    f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs {expected_shape}."
                )
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable sample validation. Please initialize the "
                "distribution with `validate_args=False` to turn off validation.",
                stacklevel=2,
            )
            return
        _check(support, value, "value argument", f"to be within the support ({support!r}) of the distribution {self!r}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom __init__ method "
                "must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def _expand_with(self, new, batch_shape, **attributes):
        """``expand``'s last step: ``new`` (from ``_get_checked_instance``) given ``attributes`` (its
        expanded parameters), ``batch_shape``, and self's event shape and argument checking."""
        for name, value in attributes.items():
            setattr(new, name, value)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        shown = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}" for p in names
        )
        return f"{self.__class__.__name__}({shown})"


# (no docstring: the families below keep Distribution's in the API reference)
class LocatedDistribution(Distribution):
    # a distribution whose mean and mode are its ``loc`` parameter (Normal, Laplace, MultivariateNormal)

    @property
    def mean(self):
        return self.loc

    mode = mean


def _batch_shape(first, *numbers_or_tensors):
    """A distribution's batch shape: () where every parameter is a Python number, else ``first``'s."""
    if all(isinstance(v, Number) for v in numbers_or_tensors):
        return torch.Size()
    return first.shape


def _expanded(self, cls, names, batch_shape, _instance):
    """``self.expand(batch_shape)`` for a family ``cls`` whose parameters ``names`` expand as tensors."""
    new = self._get_checked_instance(cls, _instance)
    batch_shape = torch.Size(tuple(batch_shape))
    return self._expand_with(new, batch_shape, **{name: getattr(self, name).expand(batch_shape) for name in names})
