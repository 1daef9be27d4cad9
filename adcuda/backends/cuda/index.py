"""The CUDA backend's indexing primitives (kernels/index.cu; boolean masks are compacted by sort.cu's
``nonzero``): ``index index_put_ gather scatter_add``, with the CPU backend's (NumPy's) semantics.

Every indexing primitive becomes one gather or one scatter kernel over an index geometry: the key's
basic parts make a strided view, its integer arrays (boolean masks turned into their nonzero
coordinates, one count copied back to size the result) address that view's dims, laid out by NumPy's
rules (``_advanced_index.plan``). Integer index arrays are bounds-checked on the device without waiting:
an index out of range is raised (adcuda.cuda.DeviceIndexError, an IndexError) at the next synchronising
call, and meanwhile gathers read element 0 of its dim and scatters skip it, never touching memory
outside (kernels/runtime/device_errors.h).

Determinism: gathers are deterministic. Scatters that accumulate (``index_put_(accumulate=True)``, the
backward of indexing, ``scatter_add``) add with atomics, so floating-point results with duplicate
indices can differ in the last bits from run to run; without accumulate, which duplicate wins is
unspecified. ``set_deterministic_indexing(True)`` (or ``ADCUDA_DETERMINISTIC_INDEXING=1``) makes them
sort the destinations first and then sum each duplicate run in index order / let the last duplicate
win as NumPy does: bit-for-bit reproducible, at the cost of a radix sort.
"""

from __future__ import annotations

import math
import numbers
import os

from ... import _native
from ...dtypes import iinfo
from ...errors import DTypeError, ShapeError
from .. import _advanced_index
from . import _common as _k
from ._common import ArrayOrScalar, BackendArray, IndexKey, is_device_array
from .storage import dtype_of, from_numpy, full, shares_memory, to_numpy

__all__ = ["index", "index_put_", "gather", "scatter_add", "scatter_reduce"]

_deterministic = os.environ.get("ADCUDA_DETERMINISTIC_INDEXING", "0") not in ("", "0")


def set_deterministic_indexing(enabled=True):
    """Make CUDA scatters (accumulating or not) reproducible bit for bit, via a sort (see the module doc)."""
    global _deterministic
    _deterministic = bool(enabled)


def deterministic_indexing():
    return _deterministic


def _C():
    return _native._C


def _int64(a):
    return _k.cast(a, _k.scalar_type("int64"))


def _entry(a):
    """An index array as the planner takes it: (handle, shape, element strides)."""
    return (a, tuple(a.shape), tuple(a.element_strides))


def _bool_index(value):
    """The index array of a 0-d boolean index: [0] for True, empty for False."""
    return _entry(_C().arange(0, 1, 1 if value else 0, _k.scalar_type("int64")))


def _items(key):
    """The key as planner items, and the integer index arrays to bounds-check."""
    C = _C()
    items, user_arrays = [], []
    for k in key:
        if k is None:
            items.append(("none",))
        elif k is Ellipsis:
            items.append(("ellipsis",))
        elif isinstance(k, slice):
            items.append(("slice", k))
        elif isinstance(k, bool):
            items.append(("bool", _bool_index(k)))
        elif isinstance(k, numbers.Integral):
            items.append(("int", int(k)))
        elif k.__class__ is C.DeviceArray:
            if k.dtype.name == "bool":
                if k.ndim == 0:
                    items.append(("bool", _bool_index(bool(to_numpy(k)))))
                    continue
                coordinates = C.nonzero(k)
                count, ndim = coordinates.shape
                columns = [
                    _entry(coordinates.as_strided((count,), (ndim,), coordinates.offset + j)) for j in range(ndim)
                ]
                items.append(("arrays", columns, tuple(k.shape)))
            elif k.dtype.name in ("int32", "int64"):
                idx = _int64(k)
                user_arrays.append(idx)
                items.append(("arrays", [_entry(idx)], None))
            else:
                raise IndexError(f"tensors used as indices must be long, int or bool tensors, got {k.dtype.name}")
        else:
            raise IndexError(f"unsupported index of type {type(k).__name__}")
    return items, user_arrays


def _geometry(a, key):
    """(view of a, the kernels' geometry arguments) for ``a[key]``, index arrays bounds-checked."""
    if not isinstance(key, tuple):
        key = (key,)
    items, user_arrays = _items(key)
    plan = _advanced_index.plan(tuple(a.shape), tuple(a.element_strides), a.offset, items)
    view = a.as_strided(plan.view_shape, plan.view_strides, plan.view_offset)
    checked = {id(x) for x in user_arrays}
    to_check = [(ia.handle, ia.size) for ia in plan.arrays if id(ia.handle) in checked]
    if to_check:
        _C().check_indices([h for h, _ in to_check], [n for _, n in to_check])
    indices = [ia.handle.as_strided(plan.shape, ia.result_strides, ia.handle.offset) for ia in plan.arrays]
    return view, (
        list(plan.shape),
        list(plan.strides),
        indices,
        [ia.size for ia in plan.arrays],
        [ia.stride for ia in plan.arrays],
    )


def index(a: BackendArray, key: IndexKey) -> BackendArray:
    """``a[key]`` with NumPy's advanced indexing: a new array."""
    view, geometry = _geometry(a, key)
    return _C().index_gather(view, *geometry)


def _values_for(a: BackendArray, values: ArrayOrScalar) -> BackendArray:
    """``values`` as a device array in a's dtype that does not overlap ``a``."""
    if is_device_array(values):
        array = values
    elif hasattr(values, "__array__") and getattr(values, "shape", ()) != ():
        array = from_numpy(values, dtype_of(a))
    else:
        array = full((), values.item() if hasattr(values, "item") else values, dtype_of(a))
    if array.dtype != a.dtype or shares_memory(a, array):
        array = _C().astype(array, a.dtype)  # also a snapshot when it aliases a
    return array


def index_put_(a: BackendArray, key: IndexKey, values: ArrayOrScalar, accumulate: bool) -> BackendArray:
    """``a[key] = values`` (``+=`` with duplicates summed when ``accumulate``), in place; returns a."""
    view, geometry = _geometry(a, key)
    values = _values_for(a, values)
    shape = tuple(geometry[0])
    strides = _advanced_index.value_strides(tuple(values.shape), tuple(values.element_strides), shape)
    values = values.as_strided(shape, strides, values.offset)
    _C().index_scatter_(view, *geometry, values, bool(accumulate), _deterministic)
    return a


def _along_axis(op, a, axis, idx):
    """The geometry of PyTorch's gather/scatter along ``axis`` (``idx`` may be smaller than ``a`` in the
    other dims): (a or a view of it, geometry)."""
    if idx.dtype.name not in ("int32", "int64"):
        raise DTypeError(f"{op}: index must be an integer array, got {idx.dtype.name}")
    idx = _int64(idx)
    axis = _k.axis_index(op, axis, a.shape)
    if a.ndim == 0:  # a 0-d input indexed by a 0-d or 1-d index, as PyTorch allows
        a = a.as_strided((1,) * idx.ndim, (0,) * idx.ndim, a.offset)
    if idx.ndim != a.ndim:
        raise ShapeError(f"{op}: index {tuple(idx.shape)} and input {tuple(a.shape)} must have the same number of dims")
    for d, (n, m) in enumerate(zip(idx.shape, a.shape)):
        if d != axis and n > m:
            raise ShapeError(f"{op}: index {tuple(idx.shape)} is larger than input {tuple(a.shape)} in dim {d}")
    size = a.shape[axis] if a.ndim else 1
    _C().check_indices([idx], [size])
    strides = list(a.element_strides)
    if strides:
        strides[axis] = 0
    return a, (list(idx.shape), strides, [idx], [size], [a.element_strides[axis] if a.ndim else 0])


def gather(a: BackendArray, axis: int, idx: BackendArray) -> BackendArray:
    base, geometry = _along_axis("gather", a, axis, idx)
    return _C().index_gather(base, *geometry)


def scatter_add(a: BackendArray, axis: int, idx: BackendArray, src: BackendArray) -> BackendArray:
    """A copy of ``a`` with ``src``'s leading box added at ``idx`` along ``axis`` (PyTorch's scatter_add)."""
    C = _C()
    out = C.astype(a, a.dtype)
    base, geometry = _along_axis("scatter_add", out, axis, idx)
    shape = tuple(geometry[0])
    if src.ndim == 0:  # a 0-d src with a 0-d or 1-d index, as PyTorch allows
        src = src.as_strided((1,) * len(shape), (0,) * len(shape), src.offset)
    if len(src.shape) != len(shape) or any(n > m for n, m in zip(shape, src.shape)):
        raise ShapeError(f"scatter_add: index {shape} is larger than src {tuple(src.shape)}")
    src = _k.cast(src, out.dtype)
    values = src.as_strided(shape, tuple(src.element_strides), src.offset)
    C.index_scatter_(base, *geometry, values, True, _deterministic)
    return out


# scatter_reduce's kernel combines 4- and 8-byte elements; these are widened for it and narrowed back
_WIDENED = {"float16": "float32", "bfloat16": "float32", "bool": "int32"}


def _identity(reduce, dtype):
    """The value a product, maximum or minimum starts from, in adcuda dtype ``dtype``."""
    if reduce == "prod":
        return 1
    if dtype.is_floating_point:
        return -math.inf if reduce == "amax" else math.inf
    info = iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def scatter_reduce(
    a: BackendArray, axis: int, idx: BackendArray, src: BackendArray, reduce: str, include_self: bool
) -> BackendArray:
    """A copy of ``a`` with ``src``'s leading box combined at ``idx`` along ``axis`` by ``reduce`` ('prod',
    'amax', 'amin'); without ``include_self`` the scattered-to elements start from the reduction's identity."""
    if reduce not in ("prod", "amax", "amin"):
        raise ValueError(f"scatter_reduce: unknown reduce {reduce!r} (expected 'prod', 'amax' or 'amin')")
    C = _C()
    wide = _WIDENED.get(dtype_of(a).name)
    out = C.astype(a, _k.scalar_type(wide) if wide else a.dtype)
    base, geometry = _along_axis("scatter_reduce", out, axis, idx)
    shape = tuple(geometry[0])
    if src.ndim == 0:
        src = src.as_strided((1,) * len(shape), (0,) * len(shape), src.offset)
    if len(src.shape) != len(shape) or any(n > m for n, m in zip(shape, src.shape)):
        raise ShapeError(f"scatter_reduce: index {shape} is larger than src {tuple(src.shape)}")
    src = _k.cast(src, out.dtype)
    values = src.as_strided(shape, tuple(src.element_strides), src.offset)
    if not include_self:
        start = full((), _identity(reduce, dtype_of(out)), dtype_of(out))
        C.index_scatter_(base, *geometry, start.as_strided(shape, (0,) * len(shape), start.offset), False, False)
    C.index_scatter_reduce_(base, *geometry, values, reduce)
    return C.astype(out, a.dtype) if wide else out
