"""``Dropout``: zeroes elements with probability ``p`` while training, scaling the rest by 1/(1-p);
``Dropout1d``/``2d``/``3d`` zero whole channels; ``AlphaDropout``/``FeatureAlphaDropout`` keep SELU's statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import functional as F
from .module import Module

if TYPE_CHECKING:
    from ...types import Tensor


class Dropout(Module):
    _dropout = staticmethod(F.dropout)  # the functional form (the subclasses differ only in it)

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return self._dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Zeroes whole channels of (N, C, L) or (C, L) input."""

    _dropout = staticmethod(F.dropout1d)


class Dropout2d(Dropout):
    """Zeroes whole channels of (N, C, H, W) or (C, H, W) input."""

    _dropout = staticmethod(F.dropout2d)


class Dropout3d(Dropout):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) input."""

    _dropout = staticmethod(F.dropout3d)


class AlphaDropout(Dropout):
    """Dropout that keeps SELU's zero mean and unit variance."""

    _dropout = staticmethod(F.alpha_dropout)


class FeatureAlphaDropout(Dropout):
    """AlphaDropout of whole channels."""

    _dropout = staticmethod(F.feature_alpha_dropout)
