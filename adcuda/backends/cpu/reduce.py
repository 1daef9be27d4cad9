"""The CPU backend's reductions (kernels/reduce.cu on CUDA): ``reduce argreduce var logsumexp`` and
``REDUCE_OPS``, the op names ``reduce`` takes. ``axes`` are NumPy's: a tuple (or list, or one int) of
dims, negative ones counted from the end, or None for every dim.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..._native import _C
from ...errors import DTypeError
from ..float_errors import QUIET
from ..float_errors import current as current_errors
from ..seam import Axes
from ._common import _F32, BackendArray, _column_sums, _compute

_F64 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)

__all__ = ["REDUCE_OPS", "reduce", "argreduce", "var", "logsumexp"]


REDUCE_OPS: dict[str, Callable[..., Any]] = {
    "sum": np.sum,
    "prod": np.prod,
    "amax": np.amax,
    "amin": np.amin,
    "mean": np.mean,
    "all": np.all,
    "any": np.any,
}
# the ufuncs behind them, called directly: np.sum and friends add a Python-level layer (~0.8 us). Typed as
# the general ufunc: the stubs of each one's reduce have no overload for a keepdims known only at run time
_ADD: np.ufunc = np.add
_MULTIPLY: np.ufunc = np.multiply
_REDUCE_UFUNCS: dict[str, np.ufunc] = {
    "sum": np.add,
    "prod": np.multiply,
    "amax": np.maximum,
    "amin": np.minimum,
    "all": np.logical_and,
    "any": np.logical_or,
}


# the reductions whose result is exactly the ufunc's own for any dtype (a maximum of float16 values is
# one of them, whatever it is computed in): straight to the ufunc
_EXACT_UFUNCS: dict[str, np.ufunc] = {
    "amax": np.maximum,
    "amin": np.minimum,
    "all": np.logical_and,  # (bool results whatever the input)
    "any": np.logical_or,
}


# kernels/host/reduce.cpp's whole-array extremes and truth tests (None in a pure-source checkout without the
# native module), for the small C-contiguous arrays of the dtypes they are built for: one call where a
# ufunc's reduction costs a microsecond; the ufuncs stay the reference and serve every other case
_native_extremes = getattr(_C, "host_extremes_all", None)
_native_truth = getattr(_C, "host_truth_all", None)
_NATIVE_EXTREMES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32))
_NATIVE_TRUTH = frozenset(np.dtype(t) for t in (np.bool_, np.float32, np.float64))
_HOST_WHOLE_MAX = 1 << 14


def _small_contiguous(a):
    """Whether ``a`` is a non-empty C-contiguous array small enough for one native call holding the GIL."""
    return 0 < a.size <= _HOST_WHOLE_MAX and a.flags.c_contiguous


def whole_extremes(a: BackendArray) -> tuple[BackendArray, BackendArray] | None:
    """(min, max) of every element of ``a`` as 0-d arrays of its dtype (NaN both where it holds one), by
    the host module's one pass; None where that does not take ``a``."""
    if _native_extremes is None or a.dtype not in _NATIVE_EXTREMES or not _small_contiguous(a):
        return None
    return _native_extremes(a)


def count_nonzero_all(a: BackendArray) -> BackendArray:
    """How many elements of ``a`` are nonzero (NaN is; -0.0 is not), as a 0-d int64 array: NumPy's count,
    one call where a comparison and a sum are two."""
    return np.array(np.count_nonzero(a), np.int64)


def _whole(op, a):
    """``reduce(op, a, None, False)`` for amax, amin, any and all by the host module, or None."""
    if op == "amax" or op == "amin":
        both = whole_extremes(a)
        return None if both is None else both[op == "amax"]
    if _native_truth is None or a.dtype not in _NATIVE_TRUTH or not _small_contiguous(a):
        return None
    return _native_truth(op == "any", a)


_native_renorm = getattr(_C, "host_renorm", None)
_FLOATS = frozenset((_F32, _F64))


def host_renorm(a: BackendArray, axis: int, p: float, maxnorm: float) -> BackendArray | None:
    """ops/reduce.py's renorm of ``a`` along ``axis`` (non-negative; p > 0, inf included) by the host
    module's one loop over a small C-contiguous float32/float64 array, or None where it does not take
    ``a`` (the op's composition of primitives, the reference, computes it then)."""
    if _native_renorm is None or a.dtype not in _FLOATS or not _small_contiguous(a):
        return None
    shape = a.shape
    return _native_renorm(a, math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :]), p, maxnorm)


def reduce(op: str, a: BackendArray, axes: Axes | None, keepdim: bool) -> BackendArray:
    if axes.__class__ is list:
        axes = tuple(axes)
    exact = _EXACT_UFUNCS.get(op)
    if exact is not None:
        if axes is None:
            r = _whole(op, a)
            if r is not None:
                return r.reshape((1,) * a.ndim) if keepdim else r
        return np.asarray(exact.reduce(a, axis=axes, keepdims=keepdim))
    if op == "prod" and (a.dtype is _F32 or a.dtype is _F64):  # nothing to widen or narrow
        return np.asarray(_MULTIPLY.reduce(a, axis=axes, keepdims=keepdim))
    if axes is None and op == "sum" and a.dtype is _BOOL:  # a count of the whole (count_nonzero): NumPy's count
        count = np.array(np.count_nonzero(a), np.int64)
        return count.reshape((1,) * a.ndim) if keepdim else count
    if (op == "sum" or op == "mean") and (a.dtype == _F32 or a.dtype == _F64) and _sums_in_torch_order(a, axes):
        total = _torch_order_total(op, a)
        return total.reshape((1,) * a.ndim) if keepdim else total
    if op == "sum" and (a.dtype == _F32 or a.dtype == _F64):  # the common case, straight to the ufunc
        lead = _leading_count(a, axes)
        if lead:
            # a sum over leading dims (every bias gradient) as one BLAS product with a vector of ones:
            # several times faster than NumPy's reduction, which adds row after row
            r = _column_sums(a, a.ndim - lead)
            return r.reshape((1,) * lead + r.shape) if keepdim else r
        return np.asarray(_ADD.reduce(a, axis=axes, keepdims=keepdim))
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


def _torch_order_total(op, a):
    """The sum ("sum") or mean ("mean") of every element of ``a``, which ``_sums_in_torch_order``
    accepted, as a 0-d array of its dtype."""
    row = a.ravel(order="K")
    if _native_sum is not None:
        total = _native_sum(row)  # exact: the float holds a value of a's dtype
        if op == "sum":
            return np.array(total, a.dtype)  # (a NumPy scalar made first would cost twice as much)
        total = a.dtype.type(total)
    else:
        with np.errstate(over="ignore", invalid="ignore"):  # inf - inf is NaN, as in C++, unwarned
            total = _torch_order_sum(row)
    if op == "mean":
        # PyTorch's mean: the sum, then one division in the sum's dtype (the count is exact in it:
        # at most _TORCH_ORDER_LIMIT); a NumPy scalar's division, a third of np.divide's cost
        total = total / a.dtype.type(a.size)
    return np.asarray(total)


def plain_reduce(op: str) -> Callable[..., Any] | None:
    """What ``reduce(op, a, <every dim>, False)`` computes for an exact float32/float64 ndarray ``a``,
    as one call with none of its checks, for the dispatch point's fast lane (as elementwise.py's
    ``plain_unary``): a 0-d array, or None where ``a`` takes the primitive's other paths (too
    large, empty or strided for PyTorch's order of additions). None for an op without one."""
    if op != "sum" and op != "mean":
        return None

    def every_element(a):
        return _torch_order_total(op, a) if _sums_in_torch_order(a, None) else None

    return every_element


# PyTorch's CPU sum of a contiguous float32/float64 row, in its order of additions (SumKernel.cpp's
# cascade_sum: 32-byte vectors of lanes, four of them interleaved, each lane a cascade of running sums over
# blocks of 16 or more elements), so that a loss and the gradients summed into 0-d parameters round as
# PyTorch's do and a training run follows PyTorch bit for bit. Up to PyTorch's grain size: larger sums are
# split over its threads (the result then depends on their count), and NumPy's pairwise sum, as
# accurate, is faster there.
_TORCH_ORDER_LIMIT = 32768
_VECTOR_BYTES = 32


def _sums_in_torch_order(a, axes):
    """Whether ``reduce`` sums ``a`` over ``axes`` in PyTorch's order: every element, in memory order."""
    if axes is None:
        return 0 < a.size <= _TORCH_ORDER_LIMIT and (a.flags.c_contiguous or a.flags.f_contiguous)
    dims = (axes,) if axes.__class__ is int else axes
    if len(dims) != a.ndim:  # (the commonest refusal first: some dims kept)
        return False
    if not 0 < a.size <= _TORCH_ORDER_LIMIT or not (a.flags.c_contiguous or a.flags.f_contiguous):
        return False
    return len({d % a.ndim for d in dims if -a.ndim <= d < a.ndim}) == a.ndim == len(dims)


def _running_sum(parts, axis=0):
    """``parts`` added one after another along ``axis``, from the first (a running sum rounds as a loop does)."""
    if parts.shape[axis] == 1:
        return np.take(parts, 0, axis=axis)
    return np.take(np.cumsum(parts, axis=axis), -1, axis=axis)


def _block_sums(rows, step):
    """Running sums of consecutive blocks of ``step`` of ``rows`` (count, *lanes), count a multiple of step."""
    blocks = rows.reshape((rows.shape[0] // step, step) + rows.shape[1:])
    total = blocks[:, 0].copy()
    for j in range(1, step):
        total += blocks[:, j]
    return total


def _cascade(rows):
    """PyTorch's multi_row_sum of ``rows`` (size, *lanes) over axis 0: a running sum of each block of
    ``step`` rows, of each block of ``step`` of those, of those again, and of the rest; the incomplete
    blocks' sums are then added to the leftover rows' sum from the lowest level up."""
    size, lanes = rows.shape[0], rows.shape[1:]
    step = 1 << max(4, ((size - 1).bit_length() if size > 2 else 1) // 4)
    full = size // step
    total = _running_sum(rows[full * step :]) if size > full * step else np.zeros(lanes, rows.dtype)
    level = _block_sums(rows[: full * step], step) if full else None
    for depth in range(2):
        if level is None:
            break
        done = level.shape[0] // step
        if level.shape[0] > done * step:
            total = total + _running_sum(level[done * step :])
        level = _block_sums(level[: done * step], step) if done else None
        if level is not None and depth == 1:
            total = total + _running_sum(level)
    return total


def _row_sum(x):
    """PyTorch's row_sum of ``x`` (n, *lanes): four interleaved cascades, the leftover rows added to the
    first, then the other three."""
    n, lanes = x.shape[0], x.shape[1:]
    k = n // 4
    partial = _cascade(x[: k * 4].reshape((k, 4) + lanes)) if k else np.zeros((4,) + lanes, x.dtype)
    return _running_sum(np.concatenate([partial[:1], x[k * 4 :], partial[1:]]))


def _torch_order_sum(x):
    """The sum of the 1-d ``x`` as PyTorch's vectorised inner sum adds it up (0-d, in x's dtype)."""
    width = _VECTOR_BYTES // x.itemsize
    n = x.shape[0]
    if n < width:
        return np.asarray(_row_sum(x))
    vectors = n // width
    lanes = _row_sum(x[: vectors * width].reshape(vectors, width))
    return np.asarray(_running_sum(np.concatenate([np.zeros(1, x.dtype), x[vectors * width :], lanes])))


# The same sum in C++ (kernels/host/torch_order_sum.h), bit for bit (tests/test_reduce_order.py checks it
# against the NumPy one above, the reference): about 0.3 us for a small row where NumPy's calls take 15.
# A pure-source checkout without the native module uses the NumPy one.
_native_sum = getattr(_C, "host_torch_order_sum", None)


def _leading_count(a, axes):
    """k where ``axes`` are dims 0..k-1 of the non-empty row-major ``a``, leaving at least one dim; else 0."""
    if axes.__class__ is int:
        axes = (axes,)
    if axes.__class__ is not tuple or not axes or not a.flags.c_contiguous or a.size == 0:
        return 0
    k = len(axes)
    if k == 1:  # one dim: the first (named either way) or none
        return 1 if a.ndim > 1 and (axes[0] == 0 or axes[0] == -a.ndim) else 0
    if k >= a.ndim or sorted(ax % a.ndim if -a.ndim <= ax < a.ndim else -1 for ax in axes) != list(range(k)):
        return 0
    return k


def argreduce(op: str, a: BackendArray, axis: int | None, keepdim: bool) -> BackendArray:
    if op not in ("argmax", "argmin"):
        raise ValueError(f"argreduce: unknown op '{op}'")
    x = _compute(a)
    # the array's methods: np.argmax and np.argmin add a Python layer that costs more than a small array's search
    fn = x.argmax if op == "argmax" else x.argmin
    if axis is None:
        r = np.asarray(fn(), dtype=np.int64)
        return r.reshape((1,) * a.ndim) if keepdim else r
    return np.asarray(fn(axis=axis, keepdims=keepdim), dtype=np.int64)


def _floating(op, a, axes):
    """``a`` computed in fp32 (fp64 kept), and ``axes`` as NumPy takes them; DTypeError unless ``a`` is
    floating point."""
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: expected a floating point array, got {a.dtype}")
    return _compute(a), tuple(axes) if axes.__class__ is list else axes


# kernels/host/reduce.cpp's variance of rows (None in a pure-source checkout without the native module),
# for the small float32/float64 arrays where NumPy's eight calls cost more than the arithmetic; the
# NumPy path below is its reference
_native_row_variance = getattr(_C, "host_row_variance", None)
_HOST_VARIANCE_MAX = 1 << 14


def _trailing_rows(x, axes):
    """How many rows ``x`` is, reduced over ``axes`` (None: every dim) when those are its last dims and it
    is a small non-empty C-contiguous float32/float64 array (the host variance's case); else 0."""
    if not 0 < x.size <= _HOST_VARIANCE_MAX or not x.flags.c_contiguous or not (x.dtype == _F32 or x.dtype == _F64):
        return 0
    ndim = x.ndim
    if axes is None or ndim == 0:
        return 1
    if axes.__class__ is int:
        axes = (axes,)
    if len(axes) == 1:  # the commonest: the last dim
        return x.size // x.shape[-1] if axes[0] == ndim - 1 or axes[0] == -1 else 0
    dims = sorted(d % ndim for d in axes)
    if not dims or dims != list(range(ndim - len(dims), ndim)):
        return 0
    return math.prod(x.shape[: ndim - len(dims)])


_native_var_mean = getattr(_C, "host_var_mean_all", None)
_native_norm2 = getattr(_C, "host_norm2_all", None)
_native_nansum = getattr(_C, "host_nansum_all", None)


def whole_nansum(a: BackendArray, mean: bool) -> BackendArray | None:
    """ops/reduce.py's nansum() (nanmean() if ``mean``) of ``a`` (NaN as 0 summed in PyTorch's order; the
    mean over the count of the others) by the host module's one call over a small C-contiguous
    float32/float64 array, or None where it does not take ``a``."""
    if _native_nansum is None or a.dtype not in _FLOATS or not 0 < a.size <= _TORCH_ORDER_LIMIT:
        return None
    return _native_nansum(a, mean) if a.flags.c_contiguous else None


def whole_norm2(a: BackendArray) -> BackendArray | None:
    """ops/reduce.py's 2-norm of every element of ``a`` (the squares' sum in PyTorch's order, its root) by
    the host module's one call over a small C-contiguous float32/float64 array, or None where it does
    not take ``a``."""
    if _native_norm2 is None or a.dtype not in _FLOATS or not 0 < a.size <= _TORCH_ORDER_LIMIT:
        return None
    return _native_norm2(a) if a.flags.c_contiguous else None


def whole_var_mean(a: BackendArray, correction: float, root: bool) -> tuple[BackendArray, BackendArray] | None:
    """(``var(a, None, correction, False)``, or its root if ``root``; ``reduce("mean", a, None, False)``) for
    var_mean and std_mean, by the host module's one call over a small C-contiguous float32/float64 array
    (the same values as those primitives'), or None where it does not take ``a``."""
    if _native_var_mean is None or a.dtype not in _FLOATS or not 0 < a.size <= _HOST_VARIANCE_MAX:
        return None
    return _native_var_mean(a, float(correction), root) if a.flags.c_contiguous else None


def _row_shape(x, axes, keepdim):
    """The shape of ``x`` reduced over ``axes``, which ``_trailing_rows`` accepted (its last dims)."""
    kept = 0 if axes is None else x.ndim - len((axes,) if axes.__class__ is int else axes)
    return x.shape[:kept] + ((1,) * (x.ndim - kept) if keepdim else ())


def var(a: BackendArray, axes: Axes | None, correction: float, keepdim: bool) -> BackendArray:
    x, axes = _floating("var", a, axes)
    rows = _trailing_rows(x, axes)
    if rows and _native_row_variance is not None:
        r = _native_row_variance(x, rows, float(correction)).reshape(_row_shape(x, axes, keepdim))
        return r if r.dtype == a.dtype else r.astype(a.dtype)
    n = math.prod(x.shape if axes is None else (x.shape[ax] for ax in ((axes,) if isinstance(axes, int) else axes)))
    if current_errors() is QUIET:  # inside an op's entry: NumPy already says nothing
        r = _variance(x, axes, n, correction, keepdim)
    else:
        with np.errstate(all="ignore"):  # np.mean's sum / n, without its "Mean of empty slice" warning (n = 0: NaN)
            r = _variance(x, axes, n, correction, keepdim)
    return np.asarray(r).astype(a.dtype, copy=False)


def _variance(x, axes, n, correction, keepdim):
    """The sum of squared deviations from the mean over ``axes`` (n elements each) / (n - correction), by
    the ufuncs (np.sum and ``** 2`` add a Python layer each); the square is x * x, as NumPy's power by 2."""
    centered = x - _ADD.reduce(x, axis=axes, keepdims=True) / n
    return _ADD.reduce(centered * centered, axis=axes, keepdims=keepdim) / max(n - correction, 0)


# kernels/host/reduce.cpp's log-sum-exp of rows (None in a pure-source checkout), for the small arrays
# reduced over their last dims, as the variance's; the NumPy path below (nine calls) is its reference
_native_row_logsumexp = getattr(_C, "host_row_logsumexp", None)


def logsumexp(a: BackendArray, axes: Axes | None, keepdim: bool) -> BackendArray:
    x, axes = _floating("logsumexp", a, axes)
    rows = _trailing_rows(x, axes)
    if rows and _native_row_logsumexp is not None:
        r = _native_row_logsumexp(x, rows).reshape(_row_shape(x, axes, keepdim))
        return r if r.dtype == a.dtype else r.astype(a.dtype)
    m = np.amax(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        r = np.squeeze(r, axis=axes)
    return np.asarray(r).astype(a.dtype, copy=False)
