"""The CPU backend's layout primitives (kernels/layout.cu on CUDA): ``cat tril triu``."""

from __future__ import annotations

import numpy as np

from ...errors import DTypeError, ShapeError, fmt_shape
from ._common import Arrays, BackendArray

__all__ = ["cat", "tril", "triu"]


def cat(arrays: Arrays, axis: int) -> BackendArray:
    """``arrays`` (of one dtype: the ops layer converts them) joined along ``axis``."""
    arrays = list(arrays)
    if len({a.dtype for a in arrays}) > 1:
        raise DTypeError("cat: expected arrays of one dtype, got " + ", ".join(str(a.dtype) for a in arrays))
    return np.concatenate(arrays, axis=axis)


def _matrices(op, a):
    if a.ndim < 2:  # np.tril would make a matrix of a vector
        raise ShapeError(f"{op}: needs at least 2 dims, got shape {fmt_shape(a.shape)}")
    return a


def tril(a: BackendArray, k: int) -> BackendArray:
    return np.tril(_matrices("tril", a), k)


def triu(a: BackendArray, k: int) -> BackendArray:
    return np.triu(_matrices("triu", a), k)
