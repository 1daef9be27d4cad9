"""The CPU backend's ``matmul`` (kernels/gemm.cu on CUDA), computed in fp32 for float16, with the
epilogue the GEMM fuses on CUDA: a bias per output column and GELU's tanh form.
"""

import math

import numpy as np

from ...errors import ShapeError, fmt_shape
from ..seam import BackendArray
from . import threads
from ._common import _F16, _compute

__all__ = ["matmul"]


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.asarray(math.sqrt(2.0 / math.pi), x.dtype) * (x + 0.044715 * x * x * x)))


def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    save_preactivation: bool = False,
) -> BackendArray | tuple[BackendArray, BackendArray]:
    """``activation(a (..., M, K) @ b (..., K, N) + bias)`` with the batch dims broadcast, in ``a``'s dtype
    (integers too, which the CUDA backend does not multiply); a vector ``b`` (K,) gives ``a @ b`` of
    shape (..., M), without an epilogue. See the CUDA backend for the epilogue."""
    if (
        bias is None
        and activation is None
        and not save_preactivation
        and a.ndim == 2
        and 0 < b.ndim < 3
        and a.dtype == b.dtype != _F16
    ):
        # the common case first, before the other checks (this is every small product's cost): nothing
        # to widen, add or narrow; for a matrix and a matrix or a vector ndarray.dot is the same product
        # (BLAS's), without np.matmul's generalised-ufunc overhead (0.5 us for small ones)
        work = a.size * b.shape[1] if b.ndim == 2 else a.size
        try:
            return a.dot(b) if work < threads.min_work else threads.run_product(a.dot, b, work=work)
        except ValueError:
            raise _cannot_multiply(a, b) from None
    if a.ndim < 2 or b.ndim < 1:  # NumPy's rules for a vector ``a`` or 0-d operands are the ops layer's
        raise ShapeError(
            f"matmul: a needs at least 2 dims and b at least 1, got shapes {fmt_shape(a.shape)} and "
            f"{fmt_shape(b.shape)}"
        )
    if activation not in (None, "gelu_tanh"):
        raise ValueError(f"matmul: activation must be None or 'gelu_tanh', got {activation!r}")
    if b.ndim == 1 and (bias is not None or activation is not None or save_preactivation):
        raise ShapeError(f"matmul: the epilogue needs a matrix b, got shape {fmt_shape(b.shape)}")
    if bias is not None and bias.shape != (b.shape[-1],):
        raise ShapeError(f"matmul: the bias must have shape ({b.shape[-1]},), got {fmt_shape(bias.shape)}")
    x, y = _compute(a), _compute(b)
    try:
        out = threads.matmul(x, y) if y.ndim > 1 else np.matmul(x, y)
    except ValueError:
        raise _cannot_multiply(a, b) from None
    if bias is not None:
        out = out + _compute(bias).astype(out.dtype, copy=False)
    pre = out
    if activation == "gelu_tanh":
        out = _gelu_tanh(out)
    out = out.astype(a.dtype, copy=False)
    return (out, pre.astype(a.dtype, copy=False)) if save_preactivation else out


def _cannot_multiply(a, b):
    return ShapeError(
        f"matmul: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot be multiplied (inner dims "
        "differ, or the batch dims do not broadcast)"
    )
