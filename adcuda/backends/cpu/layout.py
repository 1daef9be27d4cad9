"""The CPU backend's layout primitives (kernels/layout.cu on CUDA): ``cat tril triu``."""

from __future__ import annotations

import numpy as np

from ..._native import _C
from ...errors import DTypeError, ShapeError, fmt_shape
from ..memo import remember
from ._common import Arrays, BackendArray

__all__ = ["cat", "tril", "triu"]


# the host module's join (kernels/host/layout.cpp): C-contiguous arrays of one plain dtype in one pass,
# where NumPy's concatenate spends 0.1 us a part on checks (most of a stack of 32 small rows)
_native_join = getattr(_C, "host_join", None)


def cat(arrays: Arrays, axis: int) -> BackendArray:
    """``arrays`` (of one dtype: the ops layer converts them) joined along ``axis``."""
    if arrays.__class__ is not list:
        arrays = list(arrays)
    if not arrays:
        return np.concatenate(arrays, axis=axis)  # (NumPy's error)
    if _native_join is not None and axis.__class__ is int and axis >= 0:
        out = _native_join(arrays, axis, False)
        if out is not None:
            return out
    try:  # NumPy refuses another dtype itself (casting "no"): one pass over the arrays, not two
        return np.concatenate(arrays, axis, dtype=arrays[0].dtype, casting="no")
    except TypeError:
        raise DTypeError("cat: expected arrays of one dtype, got " + ", ".join(str(a.dtype) for a in arrays)) from None


def stacked(arrays: list, axis: int) -> BackendArray | None:
    """``arrays`` (a list, of one shape and dtype) joined along a new ``axis`` (0 to their ndim) in the
    host module's one pass; None where it does not take them (another layout, dtype or shape)."""
    return None if _native_join is None else _native_join(arrays, axis, True)


def _matrices(op, a):
    if a.ndim < 2:  # np.tril would make a matrix of a vector
        raise ShapeError(f"{op}: needs at least 2 dims, got shape {fmt_shape(a.shape)}")
    return a


# the masks of the triangles asked for, by (rows, cols, k, lower): a program uses a few matrix sizes,
# and np.tril makes its mask anew on every call (two thirds of its time on a small matrix)
_MASKS: dict[tuple[int, int, int, bool], np.ndarray] = {}
_MASKS_KEPT = 64


def _triangle(op, a, k, lower):
    rows, cols = _matrices(op, a).shape[-2:]
    key = (rows, cols, k, lower)
    mask = _MASKS.get(key)
    if mask is None:
        mask = np.tri(rows, cols, k, dtype=bool) if lower else ~np.tri(rows, cols, k - 1, dtype=bool)
        mask.flags.writeable = False
        remember(_MASKS, key, mask, _MASKS_KEPT)
    zero = _ZEROS.get(a.dtype)
    if zero is None:
        zero = _ZEROS[a.dtype] = np.zeros((), a.dtype)
        zero.flags.writeable = False
    return np.where(mask, a, zero)


# a 0-d zero of each dtype seen: np.where converts a scalar operand to an array on every call (a third
# of a small tril's time)
_ZEROS: dict[np.dtype, np.ndarray] = {}


def tril(a: BackendArray, k: int) -> BackendArray:
    return _triangle("tril", a, k, True)


def triu(a: BackendArray, k: int) -> BackendArray:
    return _triangle("triu", a, k, False)
