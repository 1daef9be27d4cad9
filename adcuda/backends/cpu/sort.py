"""The CPU backend's orderings (kernels/sort.cu on CUDA): ``sort``, ``cumsum``, ``cumprod``, ``scan`` and
``running_extreme``, ``searchsorted`` and ``bincount``."""

from __future__ import annotations

import numpy as np

from ..._native import _C
from ..seam import declared
from ._common import _F32, _F64, BackendArray, _compute

__all__ = ["sort", "cumsum", "cumprod", "scan", "running_extreme", "searchsorted", "bincount"]

# the seam's shared checks, looked up once (``declared.<name>`` is a lookup per call)
_check_scan = declared.scan
_check_running_extreme = declared.running_extreme
_check_searchsorted = declared.searchsorted
_check_bincount = declared.bincount

# NumPy's maximum and minimum propagate NaN, as PyTorch's cummax and cummin do
_SCANS = {"max": np.maximum, "min": np.minimum, "logaddexp": np.logaddexp}


# kernels/host/sort.cpp's stable sort of rows (None in a pure-source checkout without the native module),
# for small arrays of the dtypes it is built for, sorted along their last dim (or flattened): one call
# where NumPy takes several (a descending order alone is two reversals, a sort and a subtraction); the
# NumPy path below is its reference
_native_sort = getattr(_C, "host_sort_rows", None)
_NATIVE_SORT = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32))
_HOST_SORT_MAX = 1 << 14


def sort(a: BackendArray, axis: int | None, descending: bool, stable: bool) -> tuple[BackendArray, BackendArray]:
    """(values, int64 indices) along ``axis``; always stable; NaN sorts as the largest value. A 0-d
    array is its own sort (axis 0 or -1 names its one element)."""
    if a.ndim == 0:
        np.cumsum(a, axis=axis)  # checks the axis as NumPy does for a 0-d array
        return a.copy(), np.zeros((), np.int64)
    if (
        _native_sort is not None
        and a.dtype in _NATIVE_SORT
        and (axis is None or axis == a.ndim - 1 or axis == -1)
        and 0 < a.size <= _HOST_SORT_MAX
        and a.flags.c_contiguous
    ):
        return _native_sort(descending, a if axis is not None else a.reshape(-1))
    x = _compute(a)
    if descending:
        # a stable descending order keeps equal values in their original order: sort the reversed
        # array ascending, then reverse the result and map the indices back
        n = x.shape[axis]
        idx = (n - 1) - _reversed(_reversed(x, axis).argsort(axis=axis, kind="stable"), axis)
    else:
        idx = x.argsort(axis=axis, kind="stable")
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    return _sorted_values(a, idx, axis, descending), idx


# Up to this many elements the values come from a second sort of their own: a stable sort's order is
# the only one its comparisons allow, so it moves every element (a -0.0 beside a 0.0, a NaN's payload)
# where the index sort put it, in a tenth of np.take_along_axis's time on a small array (which builds
# index grids in Python). Larger arrays gather: one pass, where a sort is n log n.
_RESORT_MAX = 1 << 12


# kernels/host/sort.cpp's mode of rows (None in a pure-source checkout): for ops/sort.py's mode on a CPU
# tensor that records nothing, in place of its seven primitives (a sort, the run starts, a running
# maximum, an argmax, two gathers), which stay the reference and every other case's path
_native_mode = getattr(_C, "host_mode_rows", None)


def mode_of_rows(a: BackendArray) -> tuple[BackendArray, BackendArray] | None:
    """(values, int64 indices) of shape ``a.shape[:-1]``: the mode of each row (the last dim) of ``a``
    (the smallest of equally frequent values, at its last occurrence), or None where the native loop
    does not take ``a`` (another dtype, strided or empty rows, or too large for one call holding the GIL)."""
    return _native_mode(a) if _native_mode is not None and _takes_rows(a) else None


def _takes_rows(a):
    """Whether the host module's functions of rows take ``a``: of a dtype they are built for, C-contiguous,
    of >= 1 dim, non-empty and small enough for one call holding the GIL."""
    return a.dtype in _NATIVE_SORT and 0 < a.size <= _HOST_SORT_MAX and a.flags.c_contiguous and a.ndim > 0


_native_median = getattr(_C, "host_median_all", None)
_native_first_sorted = getattr(_C, "host_first_sorted", None)


def first_sorted(a: BackendArray, k: int, descending: bool) -> tuple[BackendArray, BackendArray] | None:
    """(values, int64 indices) of shape ``a.shape[:-1] + (k,)``, new C-contiguous arrays: the first ``k`` of
    ``sort(a, -1, descending, True)`` (topk's, kthvalue's), by the host module's one call without the rest
    of the rows; None where it does not take ``a`` (0 <= k <= the last dim's size is the caller's)."""
    return _native_first_sorted(descending, a, k) if _native_first_sorted is not None and _takes_rows(a) else None


def median_of_all(a: BackendArray, skip_nan: bool) -> BackendArray | None:
    """ops/sort.py's median() (nanmedian() if ``skip_nan``) of every element of ``a`` as a 0-d array, by the
    host module's one selection, or None where it does not take ``a`` (the op's sort is the reference)."""
    return _native_median(skip_nan, a) if _native_median is not None and _takes_rows(a) else None


def _sorted_values(a, idx, axis, descending):
    """``a``'s values in the order of ``idx`` (its stable sort along ``axis``, None: flattened)."""
    if a.ndim == 1 or axis is None:
        return a.reshape(-1).take(idx)
    if a.size > _RESORT_MAX:
        return np.take_along_axis(a, idx, axis=axis)
    if descending:
        values = _reversed(a, axis).copy()
        values.sort(axis=axis, kind="stable")
        return np.ascontiguousarray(_reversed(values, axis))
    values = a.copy()
    values.sort(axis=axis, kind="stable")
    return values


def _reversed(a, axis):
    """A view of ``a`` reversed along ``axis`` (np.flip, without its Python layer's axis checks)."""
    return a[(slice(None),) * (axis % a.ndim) + (slice(None, None, -1),)]


def cumsum(a: BackendArray, axis: int | None) -> BackendArray:
    return _running(np.cumsum, np.add, a, axis)


def cumprod(a: BackendArray, axis: int | None) -> BackendArray:
    return _running(np.cumprod, np.multiply, a, axis)


# kernels/host/sort.cpp's running sum or product of rows (None in a pure-source checkout): the ufunc's
# accumulate, its reference, in one loop for the small arrays accumulated along their last dim
_native_accumulate = getattr(_C, "host_accumulate_rows", None)


def _running(function, ufunc, a, axis):
    """np.cumsum's or np.cumprod's result (``function``); along a dim of an array of any, its ufunc's
    accumulate called directly (the function's Python layer costs more than the loop on a small array).
    Integers and bools accumulate in int64."""
    if (a.dtype is _F32 or a.dtype is _F64) and axis is not None and a.ndim:  # the commonest: no conversion
        if (
            _native_accumulate is not None
            and (axis == -1 or axis == a.ndim - 1)
            and 0 < a.size <= _HOST_SORT_MAX
            and a.flags.c_contiguous
        ):
            return _native_accumulate(ufunc is np.multiply, a)
        return ufunc.accumulate(a, axis=axis)
    x = _compute(a)
    whole = axis is None or x.ndim == 0  # flattened: NumPy's function's own (and its checks of the axis)
    if x.dtype.kind in "biu":
        return function(x, axis=axis, dtype=np.int64) if whole else ufunc.accumulate(x, axis=axis, dtype=np.int64)
    return (function(x, axis=axis) if whole else ufunc.accumulate(x, axis=axis)).astype(a.dtype, copy=False)


# kernels/host/sort.cpp's logaddexp scan of rows (None in a pure-source checkout): NumPy's accumulate in
# one pass, for the small arrays scanned along their last dim
_native_logcumsumexp = getattr(_C, "host_logcumsumexp_rows", None)


def scan(op: str, a: BackendArray, axis: int) -> BackendArray:
    _check_scan(op, a, axis)
    if a.ndim == 0:
        return np.array(a, copy=True)
    if (
        op == "logaddexp"
        and _native_logcumsumexp is not None
        and (a.dtype is _F32 or a.dtype is _F64)
        and (axis == -1 or axis == a.ndim - 1)
        and 0 < a.size <= _HOST_SORT_MAX
        and a.flags.c_contiguous
    ):
        return _native_logcumsumexp(a)
    x = _compute(a)
    return _SCANS[op].accumulate(x, axis=axis).astype(a.dtype, copy=False)


# kernels/host/sort.cpp's one-pass loop (None in a pure-source checkout without the native module), for
# the dtypes it is built for; the NumPy path below is its reference
_native_running_extreme = getattr(_C, "host_running_extreme", None)
_NATIVE_RUNNING = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32, np.bool_))


def running_extreme(op: str, a: BackendArray, axis: int) -> tuple[BackendArray, BackendArray]:
    _check_running_extreme(op, a, axis)
    if a.ndim == 0:
        np.cumsum(a, axis=axis)  # checks the axis as NumPy does for a 0-d array
        return a.copy(), np.zeros((), np.int64)
    x = _compute(a)
    last = a.ndim - 1
    if (
        _native_running_extreme is not None
        and x.dtype in _NATIVE_RUNNING
        and (axis == last or axis == -1)
        and x.flags.c_contiguous
    ):
        values, indices = _native_running_extreme(op == "max", x)
        if x is a:  # (not widened from float16: nothing to narrow)
            return values, indices
    else:
        values, indices = _running_extreme(op, x, axis)
    return values.astype(a.dtype, copy=False), indices


def _running_extreme(op, x, axis):
    """running_extreme by NumPy: the last position at or before each one that holds the running value (or
    a NaN), and the value there (an equal later value's own: its zero's sign)."""
    running = _SCANS[op].accumulate(x, axis=axis)
    holds = x == running
    if x.dtype.kind == "f":
        holds |= x != x
    along = [1] * x.ndim
    along[axis] = x.shape[axis]
    positions = np.arange(x.shape[axis], dtype=np.int64).reshape(along)
    indices = np.maximum.accumulate(np.where(holds, positions, 0), axis=axis)
    return np.take_along_axis(x, indices, axis=axis), indices


def search_row(boundaries: BackendArray, values: BackendArray, right: bool) -> BackendArray:
    """``searchsorted`` for 1-d ``boundaries`` of ``values``' dtype (what it checks, checked): one binary
    search per value, NumPy's (the method: np.searchsorted adds a layer); ops/sort.py calls it directly
    for a CPU tensor."""
    return np.asarray(boundaries.searchsorted(values, side="right" if right else "left"), dtype=np.int64)


def searchsorted(boundaries: BackendArray, values: BackendArray, right: bool) -> BackendArray:
    _check_searchsorted(boundaries, values, right)
    if boundaries.ndim == 1:
        return search_row(boundaries, values, right)
    # rows of boundaries: the boundaries below each value of the row counted (the CUDA backend's way), a
    # NaN value last, as a binary search puts it
    b, v = _compute(boundaries)[..., None, :], _compute(values)[..., None]
    counts = np.add.reduce(b <= v if right else b < v, axis=-1, dtype=np.int64)
    if v.dtype.kind == "f":
        counts[values != values] = boundaries.shape[-1]
    return counts


def count_slots(slots: BackendArray, minlength: int) -> BackendArray | None:
    """ops/reduce.py's bincount of non-empty 1-d int64 ``slots`` without weights: how often each of
    0..max(max(slots), minlength - 1) occurs, NumPy's count in one call (which finds the largest itself);
    None where a slot is negative (or ``minlength`` is), for the op's checks to name."""
    if not slots.size:
        return None
    try:
        return np.bincount(slots, minlength=minlength)
    except (ValueError, TypeError):  # (a minlength of another type too: the op's path decides)
        return None


def bincount(slots: BackendArray, size: int) -> BackendArray:
    _check_bincount(slots, size)
    return np.bincount(slots, minlength=size).astype(np.int64, copy=False)
