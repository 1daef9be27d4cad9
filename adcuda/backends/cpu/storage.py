"""The CPU backend's storage, view and copy primitives (the CUDA backend's are the runtime's, over
kernels/runtime/copy.cu): arrays are NumPy arrays, views are NumPy views.
"""

from __future__ import annotations

import builtins

import numpy as np

from ... import dtypes as dt
from ...errors import IndexOutOfRangeError, ShapeError
from .. import _strided, float_errors
from ..memo import remember
from ..seam import ArrayLike, Axes, BasicKey, DType, Scalar, Shape
from ._common import _F16, BackendArray, _np_dtype

__all__ = [
    "from_numpy",
    "to_numpy",
    "empty",
    "full",
    "arange",
    "dtype_of",
    "shape_of",
    "astype",
    "contiguous",
    "copy_",
    "view",
    "permute",
    "expand",
    "slice",
    "flip",
    "as_strided",
    "shares_memory",
    "storage_offset",
]


def from_numpy(x: ArrayLike, dtype: DType, non_blocking: bool = False) -> BackendArray:
    """``x`` in ``dtype``: ``x`` itself when it already is (``non_blocking`` is for CUDA's copies; a host
    array needs none)."""
    x = np.asarray(x)
    out_dt = _np_dtype(dtype)
    if x.dtype != out_dt:
        x = x.astype(out_dt)
    return x


def to_numpy(a: BackendArray) -> np.ndarray:
    return a


def empty(shape: Shape, dtype: DType) -> BackendArray:
    return np.empty(shape, _np_dtype(dtype))


def full(shape: Shape, value: Scalar, dtype: DType) -> BackendArray:
    if value.__class__ is int and value == 0:  # zeros: calloc'd memory, a third of a small fill's cost
        return np.zeros(shape, _np_dtype(dtype))
    a = np.empty(shape, _np_dtype(dtype))
    a.fill(value)  # what np.full does, without its Python-level wrapper (half the cost for small arrays)
    return a


def arange(start: float, stop: float, step: float, dtype: DType) -> BackendArray:
    return np.arange(start, stop, step, dtype=np.float64 if dtype.is_floating_point else np.int64).astype(
        _np_dtype(dtype), copy=False
    )


def dtype_of(a: BackendArray) -> DType:
    return dt.from_numpy_dtype(a.dtype)


def shape_of(a: BackendArray) -> Shape:
    return a.shape


def astype(a: BackendArray, dtype: DType) -> BackendArray:
    out_dt = _np_dtype(dtype)
    if out_dt == _F16 and float_errors.current() is not float_errors.QUIET:
        # overflow to inf is float16's expected behaviour (loss scaling watches for it): no NumPy warning
        # (an op's entry has silenced NumPy already: np.errstate would cost twice the cast)
        with np.errstate(over="ignore"):
            return a.astype(out_dt, copy=True)
    return a.astype(out_dt, copy=True)


def contiguous(a: BackendArray) -> BackendArray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def copy_(dst: BackendArray, src: BackendArray | np.ndarray | Scalar) -> BackendArray:
    # an assignment casts as np.copyto(casting="unsafe") does, broadcasting src, for a third of its
    # cost on small arrays (every fill_, zero_ and copy_)
    dst[...] = src
    return dst


# views
def view(a: BackendArray, shape: Shape) -> BackendArray | None:
    try:
        if a.flags.c_contiguous:  # always a view where the size fits; reshape's copy=False check costs more
            return a.reshape(shape)
        return a.reshape(shape, copy=False)
    except ValueError:
        _strided.resolve_shape(a.size, (shape,) if isinstance(shape, int) else shape)  # a wrong size raises
        return None  # the right size, but the strides do not allow a view


def permute(a: BackendArray, axes: Axes) -> BackendArray:
    return a.transpose(axes)


def expand(a: BackendArray, shape: Shape) -> BackendArray:
    if a.flags.c_contiguous and a.size and shape.__class__ is tuple:
        # np.broadcast_to's view, made directly over a's memory (a quarter of the cost: the gradient of
        # every sum and mean is an expand); a contiguous array's strides follow from its shape, so the
        # view's strides are worked out once per (shape, item size, target)
        key = (a.shape, a.itemsize, shape)
        strides = _EXPANDED_STRIDES.get(key)
        if strides is None:
            strides = remember(_EXPANDED_STRIDES, key, _broadcast_strides(a, shape), _EXPANDED_KEPT)
        # (positional arguments: half the cost of the same call by keyword)
        r = np.ndarray(shape, a.dtype, a, 0, strides)
        r.setflags(write=False)  # as broadcast_to's: its elements share memory
        return r
    return np.broadcast_to(a, shape)


_EXPANDED_STRIDES: dict[tuple[Shape, int, Shape], tuple[int, ...]] = {}
_EXPANDED_KEPT = 256


def _broadcast_strides(a, shape):
    lead = len(shape) - a.ndim
    if lead < 0:
        raise ValueError(f"cannot broadcast an array of shape {a.shape} to {tuple(shape)}")
    strides = [0] * lead
    for n, m, step in zip(shape[lead:], a.shape, a.strides):
        if m == n:
            strides.append(step)
        elif m == 1:
            strides.append(0)
        else:
            raise ValueError(f"cannot broadcast an array of shape {a.shape} to {tuple(shape)}")
    return tuple(strides)


def slice(a: BackendArray, key: BasicKey) -> BackendArray:  # noqa: A001 (primitive name)
    if key.__class__ is not tuple:
        key = tuple(key)
    if Ellipsis not in key:
        key = key + (Ellipsis,)  # keeps a 0-d result an array view, not a NumPy scalar
    return a[key]


def flip(a: BackendArray, axes: Axes | None) -> BackendArray:
    # a basic key of reversed slices: np.flip builds the same key after normalizing its axes, at
    # several times the cost; the trailing Ellipsis keeps a 0-d result a view, not a NumPy scalar
    key = [_FULL] * a.ndim
    for axis in range(a.ndim) if axes is None else axes:
        try:
            if key[axis] is _REVERSED:
                raise ShapeError(f"flip: repeated axis in {axes}")
            key[axis] = _REVERSED
        except IndexError:
            raise IndexOutOfRangeError(f"flip: axis {axis} is out of bounds for array of dimension {a.ndim}") from None
    flipped: BasicKey = (*key, Ellipsis)
    return a[flipped]


_FULL, _REVERSED = builtins.slice(None), builtins.slice(None, None, -1)


def shares_memory(a: BackendArray, b: BackendArray) -> bool:
    return np.may_share_memory(a, b)


def _owner(a: BackendArray) -> np.ndarray:
    """The array that owns ``a``'s memory (NumPy's chain of bases ends at it): its data pointer is the
    memory's start."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def storage_offset(a: BackendArray) -> int:
    if a.base is None:  # an array that owns its memory starts it (reading addresses costs 2 us)
        return 0
    return (_address(a) - _address(_owner(a))) // a.itemsize


def as_strided(a: BackendArray, shape: Shape, strides: Shape, offset: int) -> BackendArray:
    owner = a if a.base is None else _owner(a)
    size = a.itemsize
    shape, strides = _strided.check_as_strided(shape, strides, offset, owner.nbytes // size)
    return np.ndarray(shape, a.dtype, owner, offset * size, tuple([s * size for s in strides]))
