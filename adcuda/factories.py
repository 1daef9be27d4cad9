"""Creating tensors: ``tensor from_numpy as_tensor zeros ones full empty arange linspace eye rand randn
randint randperm *_like``. The ops are declared in ``adcuda/ops/factories.py`` and
``adcuda/ops/random.py``; this module gathers them under the name the library imports them by."""

from .ops.factories import (
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    tensor,
    zeros,
    zeros_like,
)
from .ops.random import bernoulli_mask, rand, rand_like, randint, randn, randn_like, randperm

__all__ = [
    "arange",
    "as_tensor",
    "bernoulli_mask",
    "empty",
    "empty_like",
    "eye",
    "from_dlpack",
    "from_numpy",
    "full",
    "full_like",
    "linspace",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "randperm",
    "tensor",
    "zeros",
    "zeros_like",
]
