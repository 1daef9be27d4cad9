"""The CPU backend's ``matmul`` (kernels/gemm.cu on CUDA), computed in fp32 for float16.
"""
import numpy as np

from ...errors import ShapeError, fmt_shape
from ..seam import BackendArray
from ._common import _compute

__all__ = ["matmul"]


def matmul(a: BackendArray, b: BackendArray) -> BackendArray:
    """``a (..., M, K) @ b (..., K, N)`` with the batch dims broadcast, in ``a``'s dtype (integers too,
    which the CUDA backend does not multiply)."""
    if a.ndim < 2 or b.ndim < 2:  # NumPy's 1-D rules are the ops layer's (it unsqueezes)
        raise ShapeError(f"matmul: both operands need at least 2 dims, got shapes {fmt_shape(a.shape)} and "
                         f"{fmt_shape(b.shape)}")
    x, y = _compute(a), _compute(b)
    try:
        return np.matmul(x, y).astype(a.dtype, copy=False)
    except ValueError:
        raise ShapeError(f"matmul: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot be multiplied (inner "
                         "dims differ, or the batch dims do not broadcast)") from None
