"""``Embedding``: a lookup table of ``num_embeddings`` vectors of size ``embedding_dim``;
``EmbeddingBag``: their sums, means or maxima per bag of indices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...autograd.grad_mode import no_grad
from ...errors import ShapeError, fmt_shape
from ...factories import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

if TYPE_CHECKING:
    from ...types import Device, DType, Tensor


class Embedding(Module):
    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | None = None,
        _freeze: bool = False,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        if sparse:
            raise ValueError("Embedding: sparse gradients are not supported by adcuda; use sparse=False")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx must be within num_embeddings ({num_embeddings}), got {padding_idx}"
                )
            if padding_idx < 0:
                padding_idx += num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(
                empty((num_embeddings, embedding_dim), device=device, dtype=dtype), requires_grad=not _freeze
            )
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(
                    f"Embedding: _weight of shape {fmt_shape(_weight.shape)} does not match "
                    f"(num_embeddings, embedding_dim) = {(num_embeddings, embedding_dim)}"
                )
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
        )

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        return s

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze=True,
        padding_idx=None,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        sparse=False,
    ):
        if embeddings.dim() != 2:
            raise ShapeError(
                f"Embedding.from_pretrained: embeddings must be 2-dimensional, got shape {fmt_shape(embeddings.shape)}"
            )
        rows, cols = embeddings.shape
        return cls(
            rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings, _freeze=freeze
        )


class EmbeddingBag(Embedding):
    """Embedding rows reduced per bag (sum, mean or max): bags given by offsets into a 1-d input, or
    one per row of a 2-d input; PyTorch's parameter name (``weight``) and N(0, 1) initialisation."""

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        super().__init__(
            num_embeddings,
            embedding_dim,
            padding_idx,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            sparse,
            _weight,
            device=device,
            dtype=dtype,
        )
        self.mode = mode
        self.include_last_offset = include_last_offset

    def forward(self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None) -> Tensor:
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )

    def extra_repr(self):
        return super().extra_repr() + f", mode={self.mode!r}"

    @classmethod
    def from_pretrained(
        cls,
        embeddings,
        freeze=True,
        max_norm=None,
        norm_type=2.0,
        scale_grad_by_freq=False,
        mode="mean",
        sparse=False,
        include_last_offset=False,
        padding_idx=None,
    ):
        if embeddings.dim() != 2:
            raise ShapeError(
                "EmbeddingBag.from_pretrained: embeddings must be 2-dimensional, got shape "
                f"{fmt_shape(embeddings.shape)}"
            )
        bag = cls(
            *embeddings.shape,
            max_norm,
            norm_type,
            scale_grad_by_freq,
            mode,
            sparse,
            embeddings,
            include_last_offset,
            padding_idx,
        )
        bag.weight.requires_grad_(not freeze)
        return bag
