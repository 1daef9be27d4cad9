"""The CUDA backend's storage, view and copy primitives over ``adcuda._C.DeviceArray``: the
runtime's own kernels (kernels/runtime/copy.cu, bound in kernels/bindings/runtime.cpp) and strided
views, which copy nothing.

Host<->device copies go through the pinned-memory pool (``adcuda.backends.pinned_host``).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _native
from ... import dtypes as dt
from ...errors import DTypeError
from .. import _strided
from ..pinned_host import in_pinned_pool, pinned_host_array
from ..seam import ArrayLike, Axes, BasicKey, DType, Scalar, Shape
from ._common import BackendArray, shape_tuple

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

_C = _native._C
DeviceArray = _C.DeviceArray
_ST = _C.ScalarType

_SCALAR_TYPE = {
    dt.bool_: _ST.bool,
    dt.int32: _ST.int32,
    dt.int64: _ST.int64,
    dt.float16: _ST.float16,
    dt.bfloat16: _ST.bfloat16,
    dt.float32: _ST.float32,
    dt.float64: _ST.float64,
}
_DTYPE = {scalar_type: dtype for dtype, scalar_type in _SCALAR_TYPE.items()}
# NumPy has no bfloat16: such arrays travel through the host as float32.
_HOST_DTYPE = {dtype: dt.float32 if dtype is dt.bfloat16 else dtype for dtype in _SCALAR_TYPE}


def _scalar_type(dtype):
    return _SCALAR_TYPE[dtype]


def _python_scalar(value, dtype):
    """A fill value as the Python bool/int/float the runtime takes, checked like NumPy checks it."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, complex):
        raise DTypeError(f"cannot convert complex value {value} to {dtype}")
    if dtype.category == dt.INTEGER and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dtype.numpy)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python integer {value} out of bounds for {dtype.name}")
    return value


# ---------------------------------------------------------------------------------------------
# storage
def from_numpy(x: ArrayLike, dtype: DType, non_blocking: bool = False) -> BackendArray:
    """A device copy of host array ``x`` in ``dtype``. From a C-contiguous array of the pinned pool
    in that dtype the copy goes straight from it, asynchronously with ``non_blocking=True``; anything
    else is gathered (and converted) into a pinned staging block first, after which the copy needs
    nothing from ``x`` and runs asynchronously."""
    x = np.asarray(x)
    host_dtype = _HOST_DTYPE[dtype]
    host_np = np.dtype(host_dtype.numpy)
    out = DeviceArray.empty(x.shape, _scalar_type(host_dtype))
    if out.nbytes:
        if x.dtype == host_np and x.flags.c_contiguous and in_pinned_pool(x):
            _C.copy_host_to_device(out, x, not non_blocking)
        else:
            staging = pinned_host_array(x.shape, host_np)
            np.copyto(staging, x, casting="unsafe")
            _C.copy_host_to_device(out, staging, False)
    return out if host_dtype is dtype else _C.astype(out, _scalar_type(dtype))


def to_numpy(a: BackendArray) -> np.ndarray:
    """A host copy of ``a`` (bfloat16 widened to float32), in pinned memory: the device->host copy
    lands there and the array is returned as is, without a second copy."""
    host_dtype = _HOST_DTYPE[_DTYPE[a.dtype]]
    source = _C.astype(a, _scalar_type(host_dtype)) if host_dtype is not _DTYPE[a.dtype] else contiguous(a)
    host = pinned_host_array(source.shape, np.dtype(host_dtype.numpy))
    if source.nbytes:
        _C.copy_device_to_host(host, source)
    return host


def empty(shape: Shape, dtype: DType) -> BackendArray:
    return DeviceArray.empty(shape_tuple(shape), _scalar_type(dtype))


def full(shape: Shape, value: Scalar, dtype: DType) -> BackendArray:
    out = DeviceArray.empty(shape_tuple(shape), _scalar_type(dtype))
    _C.fill_(out, _python_scalar(value, dtype))
    return out


def arange(start: float, stop: float, step: float, dtype: DType) -> BackendArray:
    """[start, start + step, ...) below ``stop``, computed in float64 (float dtypes) or int64, as
    ``np.arange`` does, then converted."""
    n = max(math.ceil((stop - start) / step), 0)
    if dtype.is_floating_point:
        return _C.arange(float(start), float(step), n, _scalar_type(dtype))
    return _C.arange(int(start), int(step), n, _scalar_type(dtype))


def dtype_of(a: BackendArray) -> DType:
    return _DTYPE[a.dtype]


def shape_of(a: BackendArray) -> Shape:
    return a.shape


def astype(a: BackendArray, dtype: DType) -> BackendArray:
    return _C.astype(a, _scalar_type(dtype))


def contiguous(a: BackendArray) -> BackendArray:
    return a if a.is_contiguous() else _C.contiguous(a)


def copy_(dst: BackendArray, src: BackendArray | np.ndarray | Scalar) -> BackendArray:
    """Write ``src`` (a device array, a host array or a scalar; broadcast) into the view ``dst``."""
    if isinstance(src, DeviceArray):
        if src.shape != dst.shape:
            src = expand(src, dst.shape)
        _C.copy_(dst, src)
    elif isinstance(src, np.ndarray):
        copy_(dst, from_numpy(src, dtype_of(dst)))
    else:
        _C.fill_(dst, _python_scalar(src, dtype_of(dst)))
    return dst


# ---------------------------------------------------------------------------------------------
# views
def view(a: BackendArray, shape: Shape) -> BackendArray | None:
    shape = _strided.resolve_shape(a.size, shape_tuple(shape))
    strides = _strided.reshape_strides(a.shape, a.element_strides, shape)
    return None if strides is None else a.as_strided(shape, strides, a.offset)


def permute(a: BackendArray, axes: Axes) -> BackendArray:
    shape, strides = _strided.permute(a.shape, a.element_strides, tuple(axes))
    return a.as_strided(shape, strides, a.offset)


def expand(a: BackendArray, shape: Shape) -> BackendArray:
    shape = shape_tuple(shape)
    return a.as_strided(shape, _strided.broadcast_strides(a.shape, a.element_strides, shape), a.offset)


def slice(a: BackendArray, key: BasicKey) -> BackendArray:  # noqa: A001 (primitive name)
    shape, strides, offset = _strided.basic_index(a.shape, a.element_strides, a.offset, tuple(key))
    return a.as_strided(shape, strides, offset)


def flip(a: BackendArray, axes: Axes | None) -> BackendArray:
    strides, offset = _strided.flip(a.shape, a.element_strides, a.offset, None if axes is None else tuple(axes))
    return a.as_strided(a.shape, strides, offset)


def shares_memory(a: BackendArray, b: BackendArray) -> bool:
    return isinstance(a, DeviceArray) and isinstance(b, DeviceArray) and _C.may_overlap(a, b)


def storage_offset(a: BackendArray) -> int:
    return a.offset


def as_strided(a: BackendArray, shape: Shape, strides: Shape, offset: int) -> BackendArray:
    shape, strides = _strided.check_as_strided(shape, strides, offset, a.storage.nbytes // a.itemsize)
    return a.as_strided(shape, strides, offset)
