"""The CUDA backend's orderings (kernels/sort.cu): ``sort cumsum cumprod scan running_extreme searchsorted
bincount``, with the CPU backend's signatures, result dtypes and errors.

Sorts and scans work along the last dim of a contiguous array; another axis is moved there (and the
result moved back). ``axis`` may be negative (counted from the end); for a 0-d array 0 and -1 name
its one element.
"""

from __future__ import annotations

from ... import _native
from ... import dtypes as dt
from ..seam import declared
from . import _common as _k
from ._common import BackendArray
from .elementwise import binary, where
from .index import gather, scatter_add
from .reduce import reduce
from .storage import arange, astype, contiguous, dtype_of, expand, full, permute, view

__all__ = ["sort", "cumsum", "cumprod", "scan", "running_extreme", "searchsorted", "bincount"]


def _C():
    return _native._C


def _to_last(a, axis):
    """``a`` with ``axis`` moved last, and the permutation that moves it back."""
    last = a.ndim - 1
    if axis == last:
        return a, None
    order = [d for d in range(a.ndim) if d != axis] + [axis]
    back = [order.index(d) for d in range(a.ndim)]
    return permute(a, order), back


def reshape_flat(a):
    """``a``'s elements as a 1-D array in row-major order (a view where the layout allows)."""
    return _reshaped(a, (a.size,))


def _from_last(x, back):
    return x if back is None else contiguous(permute(x, back))


def sort(a: BackendArray, axis: int | None, descending: bool, stable: bool) -> tuple[BackendArray, BackendArray]:
    """(values, int64 indices) along ``axis`` (None: of the flattened array): always stable; NaN sorts
    as the largest value."""
    C = _C()
    if axis is None:
        a, axis = reshape_flat(a), 0
    axis = _k.axis_index("sort", axis, a.shape)
    if a.ndim == 0:
        return C.astype(a, a.dtype), C.arange(0, 1, 1, _k.scalar_type("int64")).as_strided((), (), 0)
    moved, back = _to_last(a, axis)
    values, indices = C.sort_rows(moved, bool(descending))
    return _from_last(values, back), _from_last(indices, back)


def cumsum(a: BackendArray, axis: int | None) -> BackendArray:
    """Inclusive prefix sum along ``axis`` (None: of the flattened array); int and bool give int64; a 0-d
    array gives shape (1,), as NumPy's."""
    return _prefix_scan("cumsum", _C().cumsum_rows, a, axis)


def cumprod(a: BackendArray, axis: int | None) -> BackendArray:
    """Inclusive prefix product along ``axis``, with ``cumsum``'s conventions."""
    return _prefix_scan("cumprod", _C().cumprod_rows, a, axis)


def _prefix_scan(op, scan_rows, a, axis):
    """``scan_rows`` (a native scan along the last dim) along ``axis`` of ``a``, with ``cumsum``'s
    conventions."""
    if axis is None:
        a, axis = reshape_flat(a), 0
    axis = _k.axis_index(op, axis, a.shape)
    if a.ndim == 0:
        return scan_rows(a.as_strided((1,), (0,), a.offset))
    moved, back = _to_last(a, axis)
    return _from_last(scan_rows(moved), back)


def scan(op: str, a: BackendArray, axis: int) -> BackendArray:
    """Inclusive scan by ``op`` along ``axis``, in ``a``'s dtype (the kernel's integer scans run in int64)."""
    declared.scan(op, a, axis)
    C = _C()
    axis = _k.axis_index("scan", axis, a.shape)
    if a.ndim == 0:
        return C.astype(a, a.dtype)
    moved, back = _to_last(a, axis)
    out = C.scan_rows(moved, op)
    if out.dtype != a.dtype:
        out = astype(out, dtype_of(a))
    return _from_last(out, back)


def running_extreme(op: str, a: BackendArray, axis: int) -> tuple[BackendArray, BackendArray]:
    """(running ``op`` along ``axis``, the int64 index of each) of the scans above: the last position at or
    before each one that holds the running value (or a NaN), and the value there (a later equal one's own)."""
    declared.running_extreme(op, a, axis)
    axis = _k.axis_index("running_extreme", axis, a.shape)
    if a.ndim == 0:
        return _C().astype(a, a.dtype), full((), 0, dt.int64)
    dtype = dtype_of(a)
    holds = binary("eq", a, scan(op, a, axis), dtype)
    if _k.is_floating(a):
        holds = binary("logical_or", holds, binary("ne", a, a, dtype), dt.bool_)
    along = tuple(a.shape[axis] if d == axis else 1 for d in range(a.ndim))
    positions = expand(_reshaped(arange(0, a.shape[axis], 1, dt.int64), along), tuple(a.shape))
    indices = scan("max", where(holds, positions, 0, dt.int64), axis)
    return gather(a, axis, indices), indices


def searchsorted(boundaries: BackendArray, values: BackendArray, right: bool) -> BackendArray:
    """The boundaries below (or at, ``right``) each value counted along the last dim, with memory for
    values x boundaries comparisons; a NaN value last, as a binary search puts it (the CPU's)."""
    declared.searchsorted(boundaries, values, right)
    if values.ndim == 0:
        return _reshaped(searchsorted(boundaries, _reshaped(values, (1,)), right), ())
    dtype = dtype_of(values)
    lead = boundaries.ndim - 1
    b = _unsqueezed(boundaries, lead)
    below = binary("le" if right else "lt", b, _unsqueezed(values, values.ndim), dtype)
    counts = reduce("sum", below, (-1,), False)
    if _k.is_floating(values):
        counts = where(binary("ne", values, values, dtype), boundaries.shape[-1], counts, dt.int64)
    return counts


def _unsqueezed(a, axis):
    """``a`` with a dim of size 1 inserted at ``axis``."""
    return _reshaped(a, tuple(a.shape[:axis]) + (1,) + tuple(a.shape[axis:]))


def _reshaped(a, shape):
    """``a`` in ``shape`` (a view where the layout allows, else one of a contiguous copy)."""
    moved = view(a, shape)
    return moved if moved is not None else view(contiguous(a), shape)


def bincount(slots: BackendArray, size: int) -> BackendArray:
    """A one added at each slot of a zeroed int64 array of ``size`` (the index kernels' scatter_add)."""
    declared.bincount(slots, size)
    return scatter_add(full((size,), 0, dt.int64), 0, slots, full(tuple(slots.shape), 1, dt.int64))
