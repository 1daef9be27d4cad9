"""The CUDA backend's embedding primitives (kernels/embedding.cu), with the CPU backend's signatures,
results and errors: ``embedding`` gathers rows and checks every index on the device without waiting
(an index out of range is raised as adcuda.cuda.DeviceIndexError, an IndexOutOfRangeError, at the
next synchronising call: kernels/runtime/device_errors.h); ``embedding_backward`` is deterministic (a
stable radix sort of the indices, then one warp per weight row adding its gradient rows in index
order in fp32, no float atomics).
"""

from __future__ import annotations

from ... import _native
from ...errors import DTypeError, ShapeError, fmt_shape
from ._common import BackendArray, dense, is_floating, rows_dense

__all__ = ["embedding", "embedding_backward"]


def _indices(op, indices):
    if indices.dtype.name not in ("int32", "int64"):
        raise DTypeError(f"{op}: indices must be integers (int32 or int64), got {indices.dtype.name}")
    return dense(indices)


def embedding(weight: BackendArray, indices: BackendArray) -> BackendArray:
    """Rows of the 2-D ``weight`` picked by ``indices`` -> ``indices.shape + (dim,)``."""
    if weight.ndim != 2:
        raise ShapeError(
            f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape {fmt_shape(weight.shape)}"
        )
    return _native._C.embedding(rows_dense(weight), _indices("embedding", indices))


def embedding_backward(
    grad: BackendArray, indices: BackendArray, num_embeddings: int, padding_idx: int | None, scale_grad_by_freq: bool
) -> BackendArray:
    """The dense ``(num_embeddings, dim)`` weight gradient (see the CPU backend). The indices are the
    ones the forward checked: on the GPU one outside the table adds nowhere instead of raising."""
    op = "embedding_backward"
    if not is_floating(grad):
        raise DTypeError(f"{op}: grad must be floating point, got {grad.dtype.name}")
    idx = _indices(op, indices)
    if grad.ndim != idx.ndim + 1 or tuple(grad.shape[:-1]) != tuple(idx.shape):
        raise ShapeError(
            f"{op}: grad of shape {fmt_shape(grad.shape)} does not fit indices of shape "
            f"{fmt_shape(idx.shape)} (expected indices.shape + (embedding_dim,))"
        )
    return _native._C.embedding_backward(
        dense(grad), idx, int(num_embeddings), -1 if padding_idx is None else int(padding_idx), bool(scale_grad_by_freq)
    )
