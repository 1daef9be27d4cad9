"""The CPU backend's storage, view and copy primitives (the CUDA backend's are the runtime's, over
kernels/runtime/copy.cu): arrays are NumPy arrays, views are NumPy views.
"""
import numpy as np

from ... import dtypes as dt
from ._common import _F16, _np_dtype

__all__ = ["from_numpy", "to_numpy", "empty", "full", "arange", "dtype_of", "shape_of", "astype", "contiguous", "copy_",
           "view", "permute", "expand", "slice", "flip", "shares_memory"]


def from_numpy(x, dtype):
    x = np.asarray(x)
    out_dt = _np_dtype(dtype)
    if x.dtype != out_dt:
        x = x.astype(out_dt)
    return x


def to_numpy(a):
    return a


def empty(shape, dtype):
    return np.empty(shape, _np_dtype(dtype))


def full(shape, value, dtype):
    return np.full(shape, value, _np_dtype(dtype))


def arange(start, stop, step, dtype):
    return np.arange(start, stop, step, dtype=np.float64 if dtype.is_floating_point else np.int64).astype(
        _np_dtype(dtype), copy=False)


def dtype_of(a):
    return dt.from_numpy_dtype(a.dtype)


def shape_of(a):
    return a.shape


def astype(a, dtype):
    out_dt = _np_dtype(dtype)
    if out_dt == _F16:
        # overflow to inf is float16's expected behaviour (loss scaling watches for it): no NumPy warning
        with np.errstate(over="ignore"):
            return a.astype(out_dt, copy=True)
    return a.astype(out_dt, copy=True)


def contiguous(a):
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def copy_(dst, src):
    np.copyto(dst, src, casting="unsafe")
    return dst



# views
def view(a, shape):
    try:
        return np.reshape(a, shape, copy=False)
    except ValueError:
        return None


def permute(a, axes):
    return a.transpose(axes)


def expand(a, shape):
    return np.broadcast_to(a, shape)


def slice(a, key):  # noqa: A001 (primitive name)
    if Ellipsis not in key:
        key = key + (Ellipsis,)  # keeps a 0-d result an array view, not a NumPy scalar
    return a[key]


def flip(a, axes):
    return np.flip(a, axes)


def shares_memory(a, b):
    return np.may_share_memory(a, b)
