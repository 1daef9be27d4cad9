"""The CPU backend's embedding lookup and its deterministic backward (kernels/embedding.cu on CUDA)."""

from __future__ import annotations

import numpy as np

from ..._native import _C
from ...errors import DTypeError, IndexOutOfRangeError, ShapeError
from ._common import BackendArray, _compute

__all__ = ["embedding", "embedding_backward"]

# kernels/host/index.cpp's one pass over an int64/int32 index (None in a pure-source checkout), where
# NumPy's minimum and maximum cost two reductions' calls on the few indices of a small lookup
_native_all_below = getattr(_C, "host_all_below", None)
_NATIVE_INDEX = frozenset((np.dtype(np.int64), np.dtype(np.int32)))


def _check_embedding_indices(op, idx, num_embeddings, weight_shape):
    if (
        _native_all_below is not None
        and idx.dtype in _NATIVE_INDEX
        and (idx.ndim == 1 or idx.flags.c_contiguous)
        and _native_all_below(idx, num_embeddings)
    ):
        return  # the common case, in one pass
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{op}: indices must be integers (int32 or int64), got {idx.dtype}")
    if not idx.size or (0 <= np.minimum.reduce(idx, axis=None) and np.maximum.reduce(idx, axis=None) < num_embeddings):
        return  # the common case, in two reductions (four NumPy calls find and name a bad index)
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
    return weight.take(idx, axis=0)  # (the method: np.take adds a Python layer)


# kernels/host/index.cpp's index_add loop (None in a pure-source checkout): the rows added into their
# index's row one after the other, the order _rows_summed_in_order keeps, in one pass (a small GPT's
# 2048 token rows: 15 us, where the grouping below makes a dozen NumPy calls, 0.2 ms)
_native_index_along = getattr(_C, "host_index_along", None)
_I64 = np.dtype(np.int64)

# above this many occurrences of one index, np.add.at's element-by-element scatter beats a pass per
# occurrence
_MAX_PASSES = 64


def _rows_summed_in_order(idx, rows, num_embeddings):
    """(num_embeddings, dim): out[idx[k]] += rows[k] from zeros, one k after the other (the
    sequential order the CUDA kernel keeps, so the sums are bit for bit the same). Grouped by
    occurrence: layer r holds the r-th row of every index that occurs more than r times, and the
    layers are added in order, each one vectorised add (NumPy's reductions promise no order: a
    reduceat over the rows measured as not sequential). The rows are gathered once into their layers,
    the indices ranked by how often they occur, so that layer r is one contiguous block over the
    first indices of that ranking."""
    n = idx.size
    out = np.zeros((num_embeddings, rows.shape[1]), rows.dtype)
    if not n:
        return out
    if _native_index_along is not None and idx.dtype == _I64 and rows.flags.c_contiguous:
        _native_index_along(out, 0, idx, rows, 1)  # (indices checked by the caller)
        return out
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    new_run = np.empty(n, bool)
    new_run[0] = True
    np.not_equal(sorted_idx[1:], sorted_idx[:-1], out=new_run[1:])
    starts = np.flatnonzero(new_run)
    run = np.cumsum(new_run) - 1  # each sorted row's index among the distinct indices
    occurrence = np.arange(n) - starts[run]
    layer_sizes = np.bincount(occurrence)
    if layer_sizes.size > _MAX_PASSES:
        np.add.at(out, idx, rows)
        return out
    ranked = np.argsort(-np.diff(starts, append=n), kind="stable")  # the most frequent first
    rank = np.empty(starts.size, np.intp)
    rank[ranked] = np.arange(starts.size)
    layer_starts = np.cumsum(layer_sizes) - layer_sizes
    source = np.empty(n, np.intp)
    source[layer_starts[occurrence] + rank[run]] = order
    layers = np.take(rows, source, axis=0)
    total = np.add(layers[: starts.size], 0.0)  # 0 + each first row: a sum from 0 is never -0
    for start, size in zip(layer_starts[1:].tolist(), layer_sizes[1:].tolist()):
        total[:size] += layers[start : start + size]
    out[sorted_idx[starts[ranked]]] = total
    return out


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
    out = _rows_summed_in_order(idx, rows, num_embeddings)
    if scale_grad_by_freq:
        counts = np.bincount(idx, minlength=num_embeddings)
        out /= np.maximum(counts, 1).astype(out.dtype)[:, None]
    return out.astype(grad.dtype, copy=False)
