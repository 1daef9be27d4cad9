"""The CPU backend's ``matmul`` (kernels/gemm.cu on CUDA), computed in fp32 for float16, with the
epilogue the GEMM fuses on CUDA: a bias per output column and GELU's tanh form.
"""

from __future__ import annotations

from typing import Literal, overload

import numpy as np

from ...errors import ShapeError, fmt_shape
from ..seam import declared
from . import threads
from ._common import _F16, BackendArray, _compute
from .elementwise import _gelu_tanh

__all__ = ["matmul"]


# (for type checkers: the result is a pair only with save_preactivation=True)
@overload
def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    save_preactivation: Literal[False] = False,
) -> BackendArray: ...
@overload
def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    *,
    save_preactivation: Literal[True],
) -> tuple[BackendArray, BackendArray]: ...
@overload
def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    save_preactivation: bool = False,
) -> BackendArray | tuple[BackendArray, BackendArray]: ...
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
    if (
        bias is None
        and activation is None
        and not save_preactivation
        and a.ndim == 3
        and b.ndim == 3
        and a.dtype == b.dtype != _F16
    ):
        # batches of matrices (bmm, baddbmm) likewise: np.matmul as it is, without the checks and
        # widening of the general path below
        try:
            return threads.matmul(a, b)
        except ValueError:
            raise _cannot_multiply(a, b) from None
    declared.matmul(a, b, bias, activation, save_preactivation)
    x, y = _compute(a), _compute(b)
    try:
        out = threads.matmul(x, y) if y.ndim > 1 else np.matmul(x, y)
    except ValueError:
        raise _cannot_multiply(a, b) from None
    if bias is not None:
        out = out + _compute(bias).astype(out.dtype, copy=False)
    pre = out
    if activation == "gelu_tanh":
        # the elementwise primitive's formula, in place unless the pre-activation is kept
        out = _gelu_tanh(out, out=None if save_preactivation else out)
    out = out.astype(a.dtype, copy=False)
    return (out, pre.astype(a.dtype, copy=False)) if save_preactivation else out


def _cannot_multiply(a, b):
    return ShapeError(
        f"matmul: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot be multiplied (inner dims "
        "differ, or the batch dims do not broadcast)"
    )
