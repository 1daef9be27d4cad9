"""Probability distributions with PyTorch's API (``torch.distributions``): sampling from adcuda's
generators (reproducible under ``adcuda.manual_seed``, on every device), reparameterised sampling
(``rsample``) and log-densities differentiable by autograd, ``kl_divergence`` with its registry,
constraints and transforms. docs/distributions.md lists what is there."""

from . import constraints, transforms
from .categorical import Bernoulli, Categorical, OneHotCategorical
from .constraints import Constraint
from .dirichlet import Beta, Dirichlet
from .distribution import Distribution
from .gamma import Gamma
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .relaxed import ExpRelaxedCategorical, LogitRelaxedBernoulli, RelaxedBernoulli, RelaxedOneHotCategorical
from .simple import Exponential, Gumbel, Laplace, Poisson, Uniform
from .transformed_distribution import LogNormal, TransformedDistribution
from .transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    SigmoidTransform,
    TanhTransform,
    Transform,
    identity_transform,
)

__all__ = [
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Categorical",
    "ComposeTransform",
    "Constraint",
    "Dirichlet",
    "Distribution",
    "ExpRelaxedCategorical",
    "ExpTransform",
    "Exponential",
    "Gamma",
    "Gumbel",
    "Independent",
    "Laplace",
    "LogNormal",
    "LogitRelaxedBernoulli",
    "MultivariateNormal",
    "Normal",
    "OneHotCategorical",
    "Poisson",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "SigmoidTransform",
    "TanhTransform",
    "TransformedDistribution",
    "Transform",
    "Uniform",
    "constraints",
    "identity_transform",
    "kl_divergence",
    "register_kl",
    "transforms",
]
