"""The CPU backend's indexing primitives (kernels/index.cu on CUDA): ``index index_put_ gather
scatter_add``, NumPy's advanced indexing and PyTorch's gather/scatter_add.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..._native import _C
from ...errors import DTypeError, ShapeError
from ..memo import remember
from ._common import ArrayOrScalar, BackendArray, IndexKey
from .layout import tril, triu
from .reduce import reduce

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)

__all__ = ["index", "index_put_", "gather", "scatter_add", "scatter_reduce"]


def index(a: BackendArray, key: IndexKey) -> BackendArray:
    out = a[key]
    # an array of its own memory is already the copy (advanced indexing makes one); a view (a key of
    # basic items alone) is copied
    return out if out.__class__ is np.ndarray and out.base is None else np.array(out, copy=True)


def index_put_(a: BackendArray, key: IndexKey, values: ArrayOrScalar, accumulate: bool) -> BackendArray:
    if accumulate:
        # NumPy's stubs take only integer arrays as ufunc.at's indices; it takes every key a[key] does
        np.add.at(a, key, values)  # type: ignore[arg-type]
    else:
        a[key] = values
    return a


def _along_axis(op, a, axis, idx):
    """(``a``, ``axis``) as NumPy's take_along_axis takes them, with PyTorch's checks: ``idx`` an integer
    array of ``a``'s rank, no larger than ``a`` but along ``axis``. A 0-d ``a`` is taken as a (1,)*k
    array for a k-d index (k = 0 or 1, as PyTorch allows)."""
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{op}: index must be an integer array, got {idx.dtype}")
    if a.ndim == 0:
        np.cumsum(a, axis=axis)  # checks the axis as NumPy does for a 0-d array
        a, axis = a.reshape((1,) * idx.ndim), 0
    if idx.ndim != a.ndim:
        raise ShapeError(f"{op}: index {idx.shape} and input {a.shape} must have the same number of dims")
    axis = axis + a.ndim if axis < 0 else axis
    if idx.shape == a.shape:  # (the common case: nothing larger anywhere)
        return a, axis
    for d, (n, m) in enumerate(zip(idx.shape, a.shape)):
        if d != axis and n > m:
            raise ShapeError(f"{op}: index {idx.shape} is larger than input {a.shape} in dim {d}")
    return a, axis


# the position grids of index shapes seen, by (shape, axis): np.take_along_axis and np.indices make them
# anew on every call (most of a small gather's time)
_GRIDS: dict[tuple[tuple[int, ...], int], tuple[np.ndarray | None, ...]] = {}
_GRIDS_KEPT = 64


def _scatter_key(idx, axis):
    """The advanced key that addresses ``a[idx[i][j]][j]`` (for axis 0): ``idx`` along ``axis``, each
    other dim its own position (an arange that broadcasts along it)."""
    shape = idx.shape
    grids = _GRIDS.get((shape, axis))
    if grids is None:
        ndim = len(shape)
        grids = tuple(
            None if d == axis else np.arange(n).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1))
            for d, n in enumerate(shape)
        )
        remember(_GRIDS, (shape, axis), grids, _GRIDS_KEPT)
    return tuple(idx if d == axis else g for d, g in enumerate(grids))


# kernels/host/index.cpp's loops over the index (None in a pure-source checkout without the native module),
# for the dtypes they are built for: a fraction of the grid and advanced indexing (or ufunc.at) below,
# which stay their reference. An index value they refuse (outside [0, size)) goes the NumPy way, which
# counts a negative one from the end or raises its own IndexError.
_native_gather = getattr(_C, "host_gather_along", None)
_native_scatter = getattr(_C, "host_scatter_along", None)
_NATIVE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32))
_I64 = np.dtype(np.int64)
_HOW = {"write": 0, "add": 1, "sum": 1, "prod": 2, "amax": 3, "amin": 4}  # host_scatter_along's combines


def _native_fits(a, idx):
    return _native_scatter is not None and idx.ndim and a.dtype in _NATIVE and idx.dtype == _I64


def _scattered_natively(out, axis, idx, src, reduce):
    """``out`` (a fresh array) combined with src at idx along axis by the host loop; False where it refused
    an index value (``out`` then partly written: the caller starts again from a fresh copy)."""
    try:
        _native_scatter(out, axis, idx, src, _HOW[reduce])
    except IndexError:
        return False
    return True


def scattered_along(a: Any, axis: int, idx: Any, src: Any, how: str) -> BackendArray | None:
    """A copy of ``a`` (its layout kept, as the op's copy keeps it) with ``src`` combined at ``idx`` along
    ``axis`` by the host loop (``how``: "write", "add" or "sum", "prod", "amax", "amin"; NumPy's maximum
    and minimum): the common case of scatter, scatter_add and scatter_reduce (include_self) for their
    direct lanes (ops/index.py), on arrays the loop takes as they are: float32/float64/int64/int32 of one
    dtype, an int64 index of their rank no larger than src, nor than ``a`` but along ``axis`` (0 <= axis
    < rank). None for anything else, and where an index value lies outside [0, size): the op's path then
    checks and names the error."""
    combine = _HOW.get(how)
    if _native_scatter is None or combine is None or a.__class__ is not np.ndarray:
        return None
    out = a.copy("K")
    try:
        _native_scatter(out, axis, idx, src, combine)
    except (IndexError, ValueError, TypeError):
        return None
    return out


def gathered_along(a: Any, axis: int, idx: Any) -> BackendArray | None:
    """``a``'s elements at ``idx`` along ``axis`` by the host loop (a new row-major array of idx's shape):
    gather's common case for its direct lane (ops/index.py), on arrays the loop takes as they are (see
    ``scattered_along``); None for anything else and for an index value outside [0, size)."""
    if _native_gather is None or a.__class__ is not np.ndarray:
        return None
    try:
        return _native_gather(a, axis, idx)
    except (IndexError, ValueError, TypeError):
        return None


_native_masked_scatter = getattr(_C, "host_masked_scatter", None)


def masked_scattered(a: Any, mask: Any, src: Any) -> BackendArray | None:
    """A row-major copy of ``a`` with ``src``'s leading elements (row-major) written in order where
    ``mask`` (a bool array of ``a``'s shape) is true, by the host loop: masked_scatter's common case for its
    direct lane (ops/index.py). None for anything else (a mask of another shape, src of another dtype,
    not row-major or with fewer elements than the mask selects): the op's path checks and names it."""
    if _native_masked_scatter is None or a.__class__ is not np.ndarray or mask.shape != a.shape:
        return None
    out = a.copy()
    try:
        return out if _native_masked_scatter(out, mask, src) else None
    except (ValueError, TypeError):
        return None


def embedded_diagonals(a: Any, offset: int) -> BackendArray | None:
    """Zeros with ``a``'s last dim on the diagonals (at ``offset``) of new planes of its size + |offset|
    (the last two dims): diag_embed's default dims and diagflat (of ``a`` flattened), for their direct
    lanes (ops/index.py), in one strided write where the forward's views cost several calls. None for
    an array of another kind or a 0-d one."""
    if a.__class__ is not np.ndarray or not a.ndim:
        return None
    lead, n = a.shape[:-1], a.shape[-1]
    size = n + (offset if offset >= 0 else -offset)
    out = np.zeros(lead + (size, size), a.dtype)
    start = offset if offset >= 0 else -offset * size
    out.reshape(lead + (size * size,))[..., start : start + n * (size + 1) : size + 1] = a
    return out


_native_nonzero = getattr(_C, "host_nonzero", None)
_native_one_hot = getattr(_C, "host_one_hot", None)
_native_bounds = getattr(_C, "host_bounds", None)
_BOOL = np.dtype(np.bool_)


def nonzero_rows(mask: Any) -> BackendArray | None:
    """The (count, ndim) int64 coordinates of a bool array's true elements, row-major, by the host loop:
    nonzero's and argwhere's common case for their direct lane (ops/index.py); None for anything else
    (another dtype or layout, a 0-d array)."""
    if _native_nonzero is None or mask.__class__ is not np.ndarray or mask.dtype is not _BOOL:
        return None
    try:
        return _native_nonzero(mask)
    except ValueError:
        return None


def one_hot_rows(idx: Any, num_classes: int) -> BackendArray | None:
    """int64 one-hot rows of a non-empty int64 array of classes (``num_classes`` -1: one more than the
    largest) by the host loop: one_hot's common case for its direct lane (ops/index.py); None for
    anything else and for a class out of range (the op's path names it)."""
    if _native_one_hot is None or _native_bounds is None or idx.__class__ is not np.ndarray:
        return None
    if idx.dtype is not _I64 or not idx.size:
        return None
    try:
        if num_classes == -1:
            num_classes = _native_bounds(idx)[1] + 1
        return _native_one_hot(idx, num_classes)
    except (ValueError, TypeError):
        return None


_native_index_along = getattr(_C, "host_index_along", None)
_INDEX_HOW = {"write": 0, "add": 1}


def indexed_along(a: Any, dim: int, idx: Any, src: Any, how: str) -> BackendArray | None:
    """A copy of the row-major ``a`` with ``src``'s slices along ``dim`` written ("write") or added ("add")
    at the 1-D int64 ``idx``'s positions by the host loop: index_copy's and index_add's (and put's, on
    the flat arrays) common case for their direct lanes (ops/index.py). None for anything else (another
    layout, dtype or shape, an index value outside [0, size)): the op's path checks and names it."""
    if _native_index_along is None or a.__class__ is not np.ndarray or not a.flags.c_contiguous:
        return None
    out = a.copy()
    try:
        _native_index_along(out, dim, idx, src, _INDEX_HOW[how])
    except (IndexError, ValueError, TypeError):
        return None
    return out


def _plain_case(a, axis, idx):
    """Whether the host loop takes ``a`` along ``axis`` at ``idx`` as it is: an index of ``a``'s shape (then
    nothing is larger anywhere: none of _along_axis's checks can refuse it), int64, ``axis`` a dim of it."""
    return (
        _native_scatter is not None
        and idx.__class__ is np.ndarray
        and idx.dtype is _I64
        and idx.shape == a.shape
        and 0 <= axis < idx.ndim
        and a.dtype in _NATIVE
    )


def gather(a: BackendArray, axis: int, idx: BackendArray) -> BackendArray:
    if _native_gather is not None and _plain_case(a, axis, idx):  # the common case, straight to the host loop
        try:
            return _native_gather(a, axis, idx)
        except IndexError:
            pass  # a negative index value: NumPy's way below
    a, axis = _along_axis("gather", a, axis, idx)
    if idx.ndim == 0:  # a 0-d input and index
        return a.reshape(1)[idx.reshape(1)].reshape(())
    if _native_gather is not None and _native_fits(a, idx):
        try:
            return _native_gather(a, axis, idx)
        except IndexError:
            pass
    return a[_scatter_key(idx, axis)]


def scatter_add(a: BackendArray, axis: int, idx: BackendArray, src: BackendArray) -> BackendArray:
    out = np.array(a, copy=True)
    if src.__class__ is np.ndarray and src.dtype is a.dtype and src.shape == a.shape and _plain_case(a, axis, idx):
        # the common case, straight to the host loop
        if _scattered_natively(out, axis, idx, src, "add"):
            return out
        out = np.array(a, copy=True)
    target, axis = _along_axis("scatter_add", out, axis, idx)
    if src.ndim == 0:  # a 0-d src with a 0-d or 1-d index, as PyTorch allows
        src = src.reshape((1,) * idx.ndim)
    if src.shape != idx.shape and (src.ndim != idx.ndim or any(n > m for n, m in zip(idx.shape, src.shape))):
        raise ShapeError(f"scatter_add: index {idx.shape} is larger than src {src.shape}")
    if idx.ndim == 0:  # a 0-d input, index and src
        target, idx, src = target.reshape(1), idx.reshape(1), src.reshape(1)
    if _native_fits(out, idx) and src.dtype == out.dtype:
        if _scattered_natively(target, axis, idx, src, "add"):
            return out
        out = np.array(a, copy=True)
        target = out.reshape(target.shape)
    # src is read at the index's own positions, along `axis` too (PyTorch allows a larger src)
    np.add.at(target, _scatter_key(idx, axis), _index_part(src, idx))
    return out


def _index_part(src, idx):
    """``src`` cut to ``idx``'s shape (itself where it has that shape)."""
    return src if src.shape == idx.shape else src[tuple(np.s_[:n] for n in idx.shape)]


_COMBINE = {"prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _identity(reduce, dtype):
    """The value a product, maximum or minimum starts from, in ``dtype``."""
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def scatter_reduce(
    a: BackendArray, axis: int, idx: BackendArray, src: BackendArray, reduce: str, include_self: bool
) -> BackendArray:
    try:
        combine = _COMBINE[reduce]
    except KeyError:
        raise ValueError(f"scatter_reduce: unknown reduce {reduce!r} (expected 'prod', 'amax' or 'amin')") from None
    if (
        include_self
        and src.__class__ is np.ndarray
        and src.dtype is a.dtype
        and src.shape == a.shape
        and _plain_case(a, axis, idx)
    ):  # the common case, straight to the host loop
        out = np.array(a, copy=True)
        if _scattered_natively(out, axis, idx, src, reduce):
            return out
    a_dtype = a.dtype
    out = np.array(a, dtype=_F32 if a_dtype == _F16 else a_dtype, copy=True)  # float16 computed in fp32
    target, axis = _along_axis("scatter_reduce", out, axis, idx)
    if src.ndim == 0:
        src = src.reshape((1,) * idx.ndim)
    if src.shape != idx.shape and (src.ndim != idx.ndim or any(n > m for n, m in zip(idx.shape, src.shape))):
        raise ShapeError(f"scatter_reduce: index {idx.shape} is larger than src {src.shape}")
    if idx.ndim == 0:
        target, idx, src = target.reshape(1), idx.reshape(1), src.reshape(1)
    src = src.astype(out.dtype, copy=False)
    if _native_fits(out, idx) and include_self:
        if _scattered_natively(target, axis, idx, src, reduce):
            return out.astype(a_dtype, copy=False)
        out = np.array(a, dtype=out.dtype, copy=True)
        target = out.reshape(target.shape)
    key = _scatter_key(idx, axis)
    if not include_self:
        target[key] = _identity(reduce, out.dtype)
    combine.at(target, key, _index_part(src, idx))
    return out.astype(a_dtype, copy=False)


# kernels/host/index.cpp's one-pass forms of trace, tril and triu (None in a pure-source checkout): a
# fraction of the views, the reduction and np.where they compute the same values as
_native_diagonal_sum = getattr(_C, "host_diagonal_sum", None)
_native_triangle = getattr(_C, "host_triangle", None)
# the longest diagonal the host sum takes: NumPy reduces a row up to its buffer size in one pairwise sum
_NATIVE_DIAGONAL = 4096


def _trace_kernel(a):
    """trace's forward on a row-major matrix: the sum primitive over the strided view of its main
    diagonal, as ops/index.py's ``_diagonal_data`` makes it (None for the forward's other cases)."""
    if a.ndim != 2 or not a.flags.c_contiguous:
        return None
    rows, cols = a.shape
    n = rows if rows < cols else cols
    if _native_diagonal_sum is not None and n <= _NATIVE_DIAGONAL:
        return _native_diagonal_sum(a)
    return reduce("sum", a.reshape(rows * cols)[: (n - 1) * (cols + 1) + 1 if n else 0 : cols + 1], None, False)


def _triangle_kernel(triangle, lower):
    def at_main_diagonal(a):
        if a.ndim < 2:
            return None  # (a vector: the forward raises the named error)
        if _native_triangle is not None and a.flags.c_contiguous:
            return _native_triangle(a, lower)
        return triangle(a, 0)

    return at_main_diagonal


_PLAIN_INDEX = {"trace": _trace_kernel, "tril": _triangle_kernel(tril, True), "triu": _triangle_kernel(triu, False)}


def plain_index(op: str) -> Callable[..., Any] | None:
    """What the forward of the index-family op ``op`` computes for an exact float32/float64 ndarray, its
    other arguments at their defaults, as one call with none of the forward's frames, for the dispatch
    point's fast lane (``plain="index"``, as elementwise.py's ``plain_unary``): the primitives the forward
    calls, on the same views; None where the forward takes another path. None for an op without one."""
    return _PLAIN_INDEX.get(op)
