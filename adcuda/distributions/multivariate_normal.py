"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril)."""

import math

from . import _torch as torch
from . import constraints
from .distribution import LocatedDistribution
from .linalg import cholesky, inverse_lower, solve_lower_vector
from .utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(matrix, vector):
    return (matrix @ vector.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(scale_tril, x):
    """||scale_tril^-1 x||^2 over the last dimension, broadcast."""
    shape = torch.broadcast_tensors(scale_tril[..., 0], x)[0].shape[:-1]
    n = x.shape[-1]
    solved = solve_lower_vector(scale_tril.expand(tuple(shape) + (n, n)), x.expand(tuple(shape) + (n,)))
    return solved.pow(2).sum(-1)


def _precision_to_scale_tril(precision):
    # P = L^-T L^-1 with L the scale_tril; with J the exchange matrix (flipping rows and columns),
    # J P J = (J L^-T J)(J L^-1 J) where J L^-T J is lower triangular: chol(J P J) = J L^-T J, so
    # L^-1 = (J chol(J P J) J)^T, inverted as a triangular matrix
    flipped = cholesky(precision.flip((-2, -1)))
    inverse_scale_tril = flipped.flip((-2, -1)).mT
    return inverse_lower(inverse_scale_tril)


class MultivariateNormal(LocatedDistribution):
    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError(
                    "scale_tril matrix must be at least two-dimensional, with optional leading batch dimensions"
                )
            matrix = scale_tril
        elif covariance_matrix is not None:
            if covariance_matrix.dim() < 2:
                raise ValueError(
                    "covariance_matrix must be at least two-dimensional, with optional leading batch dimensions"
                )
            matrix = covariance_matrix
        else:
            if precision_matrix.dim() < 2:
                raise ValueError(
                    "precision_matrix must be at least two-dimensional, with optional leading batch dimensions"
                )
            matrix = precision_matrix
        batch_shape = torch.broadcast_tensors(matrix[..., 0], loc)[0].shape[:-1]
        n = loc.shape[-1]
        if matrix.shape[-1] != n or matrix.shape[-2] != n:
            raise ValueError(
                f"The last dimension of loc ({n}) and the matrix ({tuple(matrix.shape[-2:])}) do not agree"
            )
        full = tuple(batch_shape) + (n, n)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(full)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(full)
        else:
            self.precision_matrix = precision_matrix.expand(full)
        self.loc = loc.expand(tuple(batch_shape) + (n,))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = torch.Size(tuple(batch_shape))
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        return self._expand_with(new, batch_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        lower = self._unbroadcasted_scale_tril
        return (lower @ lower.mT).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        inverse = inverse_lower(self._unbroadcasted_scale_tril)
        return (inverse.mT @ inverse).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return torch.diagonal(self._unbroadcasted_scale_tril, dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        half_log_det = self._half_log_det()
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        if len(self._batch_shape) == 0:
            return h
        return h.expand(self._batch_shape)
