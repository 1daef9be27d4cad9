"""What the CPU backend's family modules share: NumPy dtypes and the fp32 compute rule (float16 is
widened to float32 for the arithmetic and narrowed on the way out; float64 is kept for gradcheck).
"""

import numpy as np

from ...errors import DTypeError

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


def _np_dtype(dtype):
    if dtype.numpy is None:
        raise DTypeError(f"{dtype.name} is not supported on the CPU backend (it is a CUDA-only dtype)")
    return np.dtype(dtype.numpy)


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


_ONES = {}


def _ones(n, dtype):
    """A cached read-only vector of ``n`` ones (the right operand of the BLAS row and column sums)."""
    ones = _ONES.get((n, dtype))
    if ones is None:
        ones = _ONES[(n, dtype)] = np.ones(n, dtype)
        ones.flags.writeable = False
    return ones


def _row_sums(a, n):
    """Sums of ``a``'s (float32/float64) rows of its last ``n`` elements, with those dims kept as size 1:
    one BLAS matrix-vector product, several times faster than NumPy's reduction along short rows."""
    count = int(np.prod(a.shape[a.ndim - n :], dtype=np.int64))
    if a.size == 0:
        return np.add.reduce(a, axis=tuple(range(a.ndim - n, a.ndim)), keepdims=True)
    return (a.reshape(-1, count) @ _ones(count, a.dtype)).reshape(a.shape[: a.ndim - n] + (1,) * n)


def _column_sums(a, n):
    """Sums over every dim of ``a`` (float32/float64) but its last ``n``: one BLAS matrix-vector product."""
    trailing = a.shape[a.ndim - n :]
    count = int(np.prod(trailing, dtype=np.int64))
    if a.size == 0:
        return np.add.reduce(a, axis=tuple(range(a.ndim - n)))
    rows = a.size // count
    return (_ones(rows, a.dtype) @ a.reshape(rows, count)).reshape(trailing)
