"""The CPU backend's reductions (kernels/reduce.cu on CUDA): ``reduce argreduce var logsumexp`` and
``REDUCE_OPS``, the op names ``reduce`` takes. ``axes`` are NumPy's: a tuple (or list, or one int) of
dims, negative ones counted from the end, or None for every dim.
"""

import math

import numpy as np

from ...errors import DTypeError
from ..seam import Axes, BackendArray
from ._common import _F32, _column_sums, _compute

_F64 = np.dtype(np.float64)

__all__ = ["REDUCE_OPS", "reduce", "argreduce", "var", "logsumexp"]


REDUCE_OPS = {
    "sum": np.sum,
    "prod": np.prod,
    "amax": np.amax,
    "amin": np.amin,
    "mean": np.mean,
    "all": np.all,
    "any": np.any,
}
# the ufuncs behind them, called directly: np.sum and friends add a Python-level layer (~0.8 us)
_REDUCE_UFUNCS = {
    "sum": np.add,
    "prod": np.multiply,
    "amax": np.maximum,
    "amin": np.minimum,
    "all": np.logical_and,
    "any": np.logical_or,
}


def reduce(op: str, a: BackendArray, axes: Axes | None, keepdim: bool) -> BackendArray:
    if axes.__class__ is list:
        axes = tuple(axes)
    if op == "sum" and (a.dtype == _F32 or a.dtype == _F64):  # the common case, straight to the ufunc
        lead = _leading_count(a, axes)
        if lead:
            # a sum over leading dims (every bias gradient) as one BLAS product with a vector of ones:
            # several times faster than NumPy's reduction, which adds row after row
            r = _column_sums(a, a.ndim - lead)
            return r.reshape((1,) * lead + r.shape) if keepdim else r
        return np.asarray(np.add.reduce(a, axis=axes, keepdims=keepdim))
    x = _compute(a)
    if op in ("sum", "prod") and x.dtype.kind in "biu":
        r = _REDUCE_UFUNCS[op].reduce(x, axis=axes, keepdims=keepdim, dtype=np.int64)
    elif op in _REDUCE_UFUNCS:
        r = _REDUCE_UFUNCS[op].reduce(x, axis=axes, keepdims=keepdim)
    elif op == "mean" and x.size == 0:
        with np.errstate(all="ignore"):  # NaN, as in PyTorch (np.mean would also warn)
            r = np.sum(x, axis=axes, keepdims=keepdim) / 0.0
    elif op in REDUCE_OPS:
        r = REDUCE_OPS[op](x, axis=axes, keepdims=keepdim)
    else:
        raise ValueError(f"reduce: unknown op '{op}'")
    r = np.asarray(r)
    if op in ("all", "any"):
        return r
    if a.dtype.kind == "b" and op in ("amax", "amin"):
        return r
    return r.astype(a.dtype if a.dtype.kind in "f" or op in ("amax", "amin") else r.dtype, copy=False)


def _leading_count(a, axes):
    """k where ``axes`` are dims 0..k-1 of the non-empty row-major ``a``, leaving at least one dim; else 0."""
    if axes.__class__ is int:
        axes = (axes,)
    if axes.__class__ is not tuple or not axes or not a.flags.c_contiguous or a.size == 0:
        return 0
    k = len(axes)
    if k >= a.ndim or sorted(ax % a.ndim if -a.ndim <= ax < a.ndim else -1 for ax in axes) != list(range(k)):
        return 0
    return k


def argreduce(op: str, a: BackendArray, axis: int | None, keepdim: bool) -> BackendArray:
    if op not in ("argmax", "argmin"):
        raise ValueError(f"argreduce: unknown op '{op}'")
    fn = np.argmax if op == "argmax" else np.argmin
    x = _compute(a)
    if axis is None:
        r = np.asarray(fn(x))
        return r.reshape((1,) * a.ndim) if keepdim else r
    return np.asarray(fn(x, axis=axis, keepdims=keepdim), dtype=np.int64)


def _floating(op, a, axes):
    """``a`` computed in fp32 (fp64 kept), and ``axes`` as NumPy takes them; DTypeError unless ``a`` is
    floating point."""
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: expected a floating point array, got {a.dtype}")
    return _compute(a), tuple(axes) if axes.__class__ is list else axes


def var(a: BackendArray, axes: Axes | None, correction: float, keepdim: bool) -> BackendArray:
    x, axes = _floating("var", a, axes)
    mean = np.mean(x, axis=axes, keepdims=True)
    n = math.prod(x.shape if axes is None else (x.shape[ax] for ax in ((axes,) if isinstance(axes, int) else axes)))
    with np.errstate(all="ignore"):
        r = np.sum((x - mean) ** 2, axis=axes, keepdims=keepdim) / max(n - correction, 0)
    return np.asarray(r).astype(a.dtype, copy=False)


def logsumexp(a: BackendArray, axes: Axes | None, keepdim: bool) -> BackendArray:
    x, axes = _floating("logsumexp", a, axes)
    m = np.amax(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        r = np.squeeze(r, axis=axes)
    return np.asarray(r).astype(a.dtype, copy=False)
