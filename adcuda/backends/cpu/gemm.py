"""The CPU backend's ``matmul`` (kernels/gemm.cu on CUDA), computed in fp32 for float16, with the
epilogue the GEMM fuses on CUDA: a bias per output column and GELU's tanh form.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, overload

import numpy as np

from ... import _native
from ...errors import ShapeError, fmt_shape
from ..seam import declared
from . import threads
from ._common import _F16, _F32, _F64, BackendArray, _compute
from .elementwise import _gelu_tanh

__all__ = ["matmul", "pdist", "cdist", "cross"]


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


# The host module's pair distances and distances between rows (kernels/host/norm.cpp) for float32/float64;
# NumPy's (the reference it is tested against) for the half types and without the host module.
_PDIST = _native._C if hasattr(_native._C, "cpu_pdist") else None


def pdist(x: BackendArray, p: float) -> BackendArray:
    """The p-norms (finite p >= 0) of the differences of the rows i < j of ``x`` (N, M), pairs in
    row-major order, in x's dtype."""
    if _PDIST is not None and (x.dtype is _F32 or x.dtype is _F64) and x.ndim == 2 and 0 <= p < math.inf:
        # the common case first, before the declaration's checks (it passes them): a small pdist's cost
        return _PDIST.cpu_pdist(np.ascontiguousarray(x), float(p))
    declared.pdist(x, p)
    if _PDIST is not None and (x.dtype == _F32 or x.dtype == _F64):
        return _PDIST.cpu_pdist(np.ascontiguousarray(x), float(p))
    return pdist_reference(x, p)


def pdist_reference(x: BackendArray, p: float) -> BackendArray:
    """NumPy's pair distances: the pairs' rows gathered, their difference, its p-norm (fp32 for float16)."""
    first, second = np.triu_indices(x.shape[0], 1)
    data = _compute(x)
    return _norms_of_rows(data[first] - data[second], p).astype(x.dtype, copy=False)


def cdist(x1: BackendArray, x2: BackendArray, p: float) -> BackendArray:
    """The p-norms (finite p >= 0) of the differences of each row of x1 (B, P, M) and each row of x2
    (B, R, M): (B, P, R) in their dtype."""
    if not (
        (x1.dtype is _F32 or x1.dtype is _F64)
        and x2.dtype is x1.dtype
        and x1.ndim == 3 == x2.ndim
        and x1.shape[0] == x2.shape[0]
        and x1.shape[2] == x2.shape[2]
        and 0 <= p < math.inf
    ):  # (the common case passes the declaration's checks: a small cdist's cost)
        declared.cdist(x1, x2, p)
    if _PDIST is not None and (x1.dtype == _F32 or x1.dtype == _F64):
        return _PDIST.cpu_cdist(np.ascontiguousarray(x1), np.ascontiguousarray(x2), float(p))
    return cdist_reference(x1, x2, p)


def cdist_reference(x1: BackendArray, x2: BackendArray, p: float) -> BackendArray:
    """NumPy's distances: the broadcast difference (B, P, R, M), its p-norm over M (fp32 for float16)."""
    diff = _compute(x1)[:, :, None, :] - _compute(x2)[:, None, :, :]
    return _norms_of_rows(diff, p).astype(x1.dtype, copy=False)


def _norms_of_rows(diff, p):
    """The p-norms over the last dim of ``diff``, as PyTorch's distance kernels compute them."""
    if p == 0:
        return np.minimum(np.ceil(np.abs(diff)), 1).sum(-1)  # PyTorch's count: a NaN difference gives NaN
    if p == 1:
        return np.abs(diff).sum(-1)
    if p == 2:
        return np.sqrt(np.square(diff).sum(-1))
    return np.power(np.power(np.abs(diff), p).sum(-1), 1.0 / p)


_CROSS = _native._C if hasattr(_native._C, "cpu_cross") else None


def cross(a: BackendArray, b: BackendArray, axis: int) -> BackendArray:
    """The cross products of the 3-vectors along ``axis`` of ``a`` and ``b`` (one shape and dtype): the
    host module's loop (kernels/host/norm.cpp) for float32/float64, NumPy's np.cross (the same products
    and differences, its reference) otherwise."""
    if not (
        (a.dtype is _F32 or a.dtype is _F64)
        and b.dtype is a.dtype
        and a.shape == b.shape
        and -a.ndim <= axis < a.ndim
        and a.shape[axis] == 3
    ):  # (the common case passes the declaration's checks: a small cross's cost)
        declared.cross(a, b, axis)
    axis %= a.ndim
    if _CROSS is not None and (a.dtype == _F32 or a.dtype == _F64):
        shape = a.shape
        outer = math.prod(shape[:axis])
        return _CROSS.cpu_cross(np.ascontiguousarray(a), np.ascontiguousarray(b), outer, a.size // (3 * outer or 1))
    return cross_reference(a, b, axis)


def cross_reference(a: BackendArray, b: BackendArray, axis: int) -> BackendArray:
    """NumPy's cross products (in the arrays' dtype: float16 rounds each product and difference to it)."""
    return np.cross(a, b, axis=axis).astype(a.dtype, copy=False)


# ------------------------------------------------------------------------------------------------
# the dispatch point's fast lane (adcuda/ops/dispatch.py, ops declared plain="product" or "add_product"):
# what each product op's forward computes for exact float32/float64 ndarrays of one dtype object, as one
# call with none of its checks; None where the operands take the forward's other paths (shapes that do
# not multiply, batch dims to broadcast, a sum that would broadcast the product): the forward names the
# error or does the rest
def _matrix_times(a, b):  # mm's and addmm's: two matrices
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        return None
    # (a small product straight to BLAS: matmul's own test, without its frame)
    return a.dot(b) if a.size * b.shape[1] < threads.min_work else matmul(a, b)


def _matrix_vector_times(a, b):  # mv's and addmv's
    if a.ndim != 2 or b.ndim != 1 or a.shape[1] != b.shape[0]:
        return None
    return a.dot(b) if a.size < threads.min_work else matmul(a, b)


def _matrices_times(a, b):  # bmm's: batches of as many matrices
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        return None
    return np.matmul(a, b) if a.size * b.shape[2] < threads.min_work else threads.matmul(a, b)


def _vector_times(a, b):  # dot's: the (1, n) view of a times b, viewed 0-d (ops/gemm.py's _dot)
    n = a.shape[0]
    if a.ndim != 1 or b.ndim != 1 or b.shape[0] != n:
        return None
    return (a.reshape(1, n).dot(b) if n < threads.min_work else matmul(a.reshape(1, n), b)).reshape(())


def _rows_summed_times(a, b):  # addbmm's: the batch's products summed, as one product (ops/gemm.py)
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        return None
    count, n, k = a.shape
    left = np.ascontiguousarray(a.transpose(1, 0, 2)).reshape(n, count * k)
    return matmul(left, np.ascontiguousarray(b).reshape(count * k, b.shape[2]))


def _outer_times(a, b):  # outer's and addr's: a column times a row
    if a.ndim != 1 or b.ndim != 1:
        return None
    return np.multiply(a.reshape(a.shape[0], 1), b.reshape(1, b.shape[0]))


def _kron_times(a, b):  # kron's of operands of one rank: the product of the interleaved views (ops/gemm.py)
    if a.ndim != b.ndim:
        return None
    whole = slice(None)
    product = np.multiply(a[(whole, None) * a.ndim], b[(None, whole) * a.ndim])
    return product.reshape(tuple(x * y for x, y in zip(a.shape, b.shape)))


_PLAIN_PRODUCTS = {
    "mm": _matrix_times,
    "mv": _matrix_vector_times,
    # matmul's cases without a unit dim to add or batch dims to broadcast
    "matmul": lambda a, b: (_matrix_times if b.ndim == 2 else _matrix_vector_times if b.ndim == 1 else _matrices_times)(
        a, b
    ),
    "bmm": _matrices_times,
    "dot": _vector_times,
    "vdot": _vector_times,
    "outer": _outer_times,
    "kron": _kron_times,
}
_PLAIN_ADDED_PRODUCTS = {
    "addmm": _matrix_times,
    "addmv": _matrix_vector_times,
    "baddbmm": _matrices_times,
    "addbmm": _rows_summed_times,
    "addr": _outer_times,
}


def plain_product(op: str) -> Callable[..., Any] | None:
    """The product op ``op``'s forward for two float32/float64 ndarrays of one dtype (the fast lane's
    kernel), or None for an op without one."""
    return _PLAIN_PRODUCTS.get(op)


def plain_add_product(op: str) -> Callable[..., Any] | None:
    """``input + product`` of the add-a-product op ``op`` (addmm, addmv, ...) with beta and alpha 1, as its
    forward computes it (``_add_product``), for float32/float64 ndarrays of one dtype: None where input
    does not broadcast to the product's shape (or the product is not this case's)."""
    product_of = _PLAIN_ADDED_PRODUCTS.get(op)
    if product_of is None:
        return None

    def added(input, a, b):
        product = product_of(a, b)
        if product is None:
            return None
        out = np.add(product, input)
        return out if out.shape == product.shape else None

    return added


# The host module's cosine similarity (kernels/host/gemm.cpp); None: the ops' backend calls
_COSINE = getattr(_native._C, "cpu_cosine_similarity", None)


def plain_cosine_similarity(a: Any, b: Any, axis: int, eps: float) -> BackendArray | None:
    """cosine_similarity's result outside a graph (ops/gemm.py) in one host call: sum over ``axis`` (0 <= axis
    < ndim) of (a / max(|a|, eps)) (b / max(|b|, eps)), for C-contiguous float32/float64 ndarrays of one
    shape and dtype; None for others (any other array, a CUDA one included: the op's backend calls). Not a
    primitive of the seam: the op's CPU shortcut."""
    if (
        _COSINE is None
        or a.__class__ is not np.ndarray
        or b.__class__ is not np.ndarray
        or not (a.dtype == _F32 or a.dtype == _F64)
        or b.dtype != a.dtype
        or a.shape != b.shape
        or not (a.flags.c_contiguous and b.flags.c_contiguous)
    ):
        return None
    return _COSINE(a, b, axis, eps)
