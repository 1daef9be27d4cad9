"""What the CPU backend's family modules share: NumPy dtypes and the fp32 compute rule (float16 is
widened to float32 for the arithmetic and narrowed on the way out; float64 is kept for gradcheck).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import EllipsisType
from typing import TypeAlias

import numpy as np

from ...errors import DTypeError
from ..seam import CPUArray, Scalar

# The seam's names for the arrays a primitive takes and returns, bound to this backend's array (NumPy's):
# the CPU primitives are annotated with these, so their signatures read as the CUDA backend's do
BackendArray: TypeAlias = CPUArray
ArrayOrScalar: TypeAlias = BackendArray | Scalar
Arrays: TypeAlias = Sequence[BackendArray]
IndexKey: TypeAlias = tuple[int | bool | slice | None | EllipsisType | BackendArray, ...]

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _np_dtype(dtype):
    d = _NP_DTYPES.get(dtype)  # (a dict read: np.dtype() of a type costs as much as a small fill)
    if d is None:
        if dtype.numpy is None:
            raise DTypeError(f"{dtype.name} is not supported on the CPU backend (it is a CUDA-only dtype)")
        d = _NP_DTYPES[dtype] = np.dtype(dtype.numpy)
    return d


_NP_DTYPES: dict = {}  # adcuda dtype -> its NumPy dtype, filled as each is first used


def _compute(a):
    """Widen float16 to float32 so the arithmetic happens in fp32."""
    if isinstance(a, np.ndarray) and a.dtype == _F16:
        return a.astype(_F32)
    return a


def _finish(result, dtype):
    out_dt = _np_dtype(dtype)
    if result.dtype != out_dt:
        return result.astype(out_dt)
    return result


def _fresh(shape, dtype, k=0):
    """The scratch provider of an eager call (``scratch=None``): a new array each time."""
    return np.empty(shape, dtype)


_ONES: dict[tuple[int, np.dtype], np.ndarray] = {}

# The most elements one BLAS matrix-vector product of the sums below takes: OpenBLAS threads bigger ones,
# and a threaded one on a loaded machine took 6-9 ms where NumPy's reduction takes 0.1 ms (NumPy's
# OpenBLAS 0.3.31, two threads: 2048x384 and 8192x64 threaded, products of 2^18 elements did not;
# 2^17 leaves a margin, and as many calls cost a few microseconds)
_UNTHREADED_GEMV = 1 << 17


def _ones(n, dtype):
    """A cached read-only vector of ``n`` ones (the right operand of the BLAS row and column sums)."""
    ones = _ONES.get((n, dtype))
    if ones is None:
        ones = _ONES[(n, dtype)] = np.ones(n, dtype)
        ones.flags.writeable = False
    return ones


def _row_sums(a, n, weights=None):
    """Sums of ``a``'s (float32/float64) rows of its last ``n`` elements, with those dims kept as size 1:
    BLAS matrix-vector products with a vector of ones, over as many rows at a time as run on one
    thread, several times faster than NumPy's reduction along short rows. (Each row's sum is one dot
    product, whichever rows share a call.) ``weights`` (a vector of the rows' length, in a's dtype):
    the rows' dot products with it instead of their sums."""
    shape = a.shape
    count = math.prod(shape[len(shape) - n :])
    keep = shape[: len(shape) - n] + (1,) * n
    if a.size == 0 or count > _UNTHREADED_GEMV:
        if weights is not None:
            a = a * weights.reshape(shape[len(shape) - n :])
        return np.add.reduce(a, axis=tuple(range(len(shape) - n, len(shape))), keepdims=True)
    rows, ones = a.reshape(-1, count), _ones(count, a.dtype) if weights is None else weights
    step = _UNTHREADED_GEMV // count
    if rows.shape[0] <= step:
        return rows.dot(ones).reshape(keep)  # (ndarray.dot: np.matmul's product without its ufunc layer)
    sums = np.empty(rows.shape[0], a.dtype)
    for start in range(0, rows.shape[0], step):
        np.matmul(rows[start : start + step], ones, out=sums[start : start + step])
    return sums.reshape(keep)


def _column_sums(a, n):
    """Sums over every dim of ``a`` (float32/float64) but its last ``n``: BLAS matrix-vector products with
    a vector of ones over as many rows at a time as run on one thread, added up."""
    trailing = a.shape[a.ndim - n :]
    count = math.prod(trailing)
    if a.size == 0 or count > _UNTHREADED_GEMV:
        return np.add.reduce(a, axis=tuple(range(a.ndim - n)))
    rows = a.reshape(-1, count)
    step = _UNTHREADED_GEMV // count
    total = _ones(min(step, rows.shape[0]), a.dtype).dot(rows[:step])
    for start in range(step, rows.shape[0], step):
        chunk = rows[start : start + step]
        total += _ones(chunk.shape[0], a.dtype).dot(chunk)
    # (not a view where the shape is already right: a gradient that owns its array becomes a leaf's .grad
    # without a copy)
    return total if n == 1 else total.reshape(trailing)
