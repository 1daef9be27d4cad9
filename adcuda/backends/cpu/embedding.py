"""The CPU backend's embedding lookup and its deterministic backward (kernels/embedding.cu on CUDA)."""

import numpy as np

from ...errors import DTypeError, IndexOutOfRangeError, ShapeError
from ..seam import BackendArray
from ._common import _compute

__all__ = ["embedding", "embedding_backward"]


def _check_embedding_indices(op, idx, num_embeddings, weight_shape):
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{op}: indices must be integers (int32 or int64), got {idx.dtype}")
    bad = (idx < 0) | (idx >= num_embeddings)
    if bad.any():
        raise IndexOutOfRangeError(
            f"{op}: index {int(idx[bad].flat[0])} is out of range for "
            f"num_embeddings={num_embeddings} (weight shape {tuple(weight_shape)})"
        )


def embedding(weight: BackendArray, indices: BackendArray) -> BackendArray:
    """Rows of the 2-D ``weight`` picked by ``indices`` (any shape) -> ``indices.shape + (dim,)``."""
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape {weight.shape}")
    idx = np.asarray(indices)
    _check_embedding_indices("embedding", idx, weight.shape[0], weight.shape)
    return np.take(weight, idx, axis=0)


# above this many occurrences of one index, np.add.at's element-by-element scatter beats a pass per
# occurrence
_MAX_PASSES = 64


def _add_rows_in_order(out, idx, rows):
    """out[idx[k]] += rows[k] one k after the other (the sequential order the CUDA kernel keeps, so
    the sums are bit for bit the same). Grouped by occurrence: pass r adds every index's r-th row,
    indices distinct within a pass, so each pass is one vectorised add."""
    if not idx.size:
        return
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])
    counts = np.diff(np.r_[starts, idx.size])
    if counts.max() > _MAX_PASSES:
        np.add.at(out, idx, rows)
        return
    occurrence = np.arange(idx.size) - np.repeat(starts, counts)
    by_occurrence = np.argsort(occurrence, kind="stable")
    bounds = np.searchsorted(occurrence[by_occurrence], np.arange(counts.max() + 1))
    sorted_rows = rows[order]
    for r in range(counts.max()):
        taken = by_occurrence[bounds[r] : bounds[r + 1]]
        out[sorted_idx[taken]] += sorted_rows[taken]


def embedding_backward(
    grad: BackendArray, indices: BackendArray, num_embeddings: int, padding_idx: int | None, scale_grad_by_freq: bool
) -> BackendArray:
    """The dense ``(num_embeddings, dim)`` weight gradient: the grad rows of each index summed in
    index order in fp32 (fp64 for fp64), the ``padding_idx`` row zero, and with
    ``scale_grad_by_freq`` each row divided by how often its index occurs."""
    op = "embedding_backward"
    if grad.dtype.kind != "f":
        raise DTypeError(f"{op}: grad must be floating point, got {grad.dtype}")
    idx = np.asarray(indices)
    if grad.ndim != idx.ndim + 1 or tuple(grad.shape[:-1]) != idx.shape:
        raise ShapeError(
            f"{op}: grad of shape {tuple(grad.shape)} does not fit indices of shape {idx.shape} "
            "(expected indices.shape + (embedding_dim,))"
        )
    dim = grad.shape[-1]
    _check_embedding_indices(op, idx, num_embeddings, (num_embeddings, dim))
    idx = idx.reshape(-1)
    rows = _compute(grad).reshape(-1, dim)
    if padding_idx is not None:
        used = idx != padding_idx
        idx, rows = idx[used], rows[used]
    out = np.zeros((num_embeddings, dim), rows.dtype)
    _add_rows_in_order(out, idx, rows)
    if scale_grad_by_freq:
        counts = np.bincount(idx, minlength=num_embeddings)
        out /= np.maximum(counts, 1).astype(out.dtype)[:, None]
    return out.astype(grad.dtype, copy=False)
