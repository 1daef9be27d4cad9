"""The CUDA backend: the primitives of ``adcuda.backends`` over ``adcuda._C.DeviceArray``.

This module holds the storage, view and copy primitives (the runtime's own kernels,
kernels/runtime/copy.cu). The compute primitives come from the kernel families, one
``kernels/<family>.cu`` with its bindings in ``kernels/bindings/<family>.cpp`` each, and are defined
below as they are built; asking for one that this build does not have raises ``KernelNotBuiltError``
(a ``DeviceError``) naming it.

Conventions: arrays are created on the calling thread's current CUDA device (callers that target
another device select it first, ``with adcuda.cuda.device(i):``) and every kernel runs on the thread's
current stream; the runtime orders streams by events where arrays cross them. Host<->device copies
go through the pinned-memory pool (``adcuda.cuda.pinned``).
"""
import math

import numpy as np

from ... import _native
from ... import dtypes as dt
from ...cuda import pinned as _pinned
from ...errors import DeviceError, DTypeError
from .. import _strided

name = "cuda"

_C = _native._C
if not hasattr(_C, "DeviceArray"):
    raise ImportError("adcuda.backends.cuda needs adcuda._C built with CUDA (this build has no CUDA runtime)")
DeviceArray = _C.DeviceArray
_ST = _C.ScalarType

_SCALAR_TYPE = {dt.bool_: _ST.bool, dt.int32: _ST.int32, dt.int64: _ST.int64, dt.float16: _ST.float16,
                dt.bfloat16: _ST.bfloat16, dt.float32: _ST.float32, dt.float64: _ST.float64}
_DTYPE = {scalar_type: dtype for dtype, scalar_type in _SCALAR_TYPE.items()}
# NumPy has no bfloat16: such arrays travel through the host as float32.
_HOST_DTYPE = {dtype: dt.float32 if dtype is dt.bfloat16 else dtype for dtype in _SCALAR_TYPE}


class KernelNotBuiltError(DeviceError, AttributeError):
    """A primitive this build has no CUDA kernel for. Also an AttributeError, so ``hasattr`` and
    ``getattr(module, name, default)`` see the primitive as absent."""


def __getattr__(primitive):
    from .. import PRIMITIVES
    if primitive in PRIMITIVES:
        raise KernelNotBuiltError(f"{primitive}: this adcuda build has no CUDA kernel for it yet; move the "
                                  "tensor to the CPU (.cpu()) to run it there")
    raise AttributeError(f"module {__name__!r} has no attribute {primitive!r}")


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
def from_numpy(x, dtype, non_blocking=False):
    """A device copy of host array ``x`` in ``dtype``. From a C-contiguous array of the pinned pool
    in that dtype the copy goes straight from it, asynchronously with ``non_blocking=True``; anything
    else is gathered (and converted) into a pinned staging block first, after which the copy needs
    nothing from ``x`` and runs asynchronously."""
    x = np.asarray(x)
    host_dtype = _HOST_DTYPE[dtype]
    host_np = np.dtype(host_dtype.numpy)
    out = DeviceArray.empty(x.shape, _scalar_type(host_dtype))
    if out.nbytes:
        if x.dtype == host_np and x.flags.c_contiguous and _pinned.is_pool_pinned(x):
            _C.copy_host_to_device(out, x, not non_blocking)
        else:
            staging = _pinned.empty_pinned(x.shape, host_np, "from_numpy")
            np.copyto(staging, x, casting="unsafe")
            _C.copy_host_to_device(out, staging, False)
    return out if host_dtype is dtype else _C.astype(out, _scalar_type(dtype))


def to_numpy(a):
    """A host copy of ``a`` (bfloat16 widened to float32), in pinned memory: the device->host copy
    lands there and the array is returned as is, without a second copy."""
    host_dtype = _HOST_DTYPE[_DTYPE[a.dtype]]
    source = _C.astype(a, _scalar_type(host_dtype)) if host_dtype is not _DTYPE[a.dtype] else contiguous(a)
    host = _pinned.empty_pinned(source.shape, np.dtype(host_dtype.numpy), "to_numpy")
    if source.nbytes:
        _C.copy_device_to_host(host, source)
    return host


def empty(shape, dtype):
    return DeviceArray.empty(tuple(shape), _scalar_type(dtype))


def full(shape, value, dtype):
    out = DeviceArray.empty(tuple(shape), _scalar_type(dtype))
    _C.fill_(out, _python_scalar(value, dtype))
    return out


def arange(start, stop, step, dtype):
    """[start, start + step, ...) below ``stop``, computed in float64 (float dtypes) or int64, as
    ``np.arange`` does, then converted."""
    n = max(math.ceil((stop - start) / step), 0)
    if dtype.is_floating_point:
        return _C.arange(float(start), float(step), n, _scalar_type(dtype))
    return _C.arange(int(start), int(step), n, _scalar_type(dtype))


def dtype_of(a):
    return _DTYPE[a.dtype]


def shape_of(a):
    return a.shape


def astype(a, dtype):
    return _C.astype(a, _scalar_type(dtype))


def contiguous(a):
    return a if a.is_contiguous() else _C.contiguous(a)


def copy_(dst, src):
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
def view(a, shape):
    shape = tuple(shape)
    strides = _strided.reshape_strides(a.shape, a.element_strides, shape)
    return None if strides is None else a.as_strided(shape, strides, a.offset)


def permute(a, axes):
    shape, strides = _strided.permute(a.shape, a.element_strides, tuple(axes))
    return a.as_strided(shape, strides, a.offset)


def expand(a, shape):
    shape = tuple(shape)
    return a.as_strided(shape, _strided.broadcast_strides(a.shape, a.element_strides, shape), a.offset)


def slice(a, key):  # noqa: A001 (primitive name)
    shape, strides, offset = _strided.basic_index(a.shape, a.element_strides, a.offset, tuple(key))
    return a.as_strided(shape, strides, offset)


def flip(a, axes):
    strides, offset = _strided.flip(a.shape, a.element_strides, a.offset, tuple(axes))
    return a.as_strided(a.shape, strides, offset)


def shares_memory(a, b):
    return isinstance(a, DeviceArray) and isinstance(b, DeviceArray) and _C.may_overlap(a, b)


# ---------------------------------------------------------------------------------------------
# kernel families (each module defines its primitives over its kernels' bindings)
from .gemm import *  # noqa: E402,F401,F403 (matmul: kernels/gemm.cu)
from .softmax_loss import *  # noqa: E402,F401,F403 (softmax, cross-entropy, layer norm, attention)
from .optim import *  # noqa: E402,F401,F403 (SGD, Adam, loss scaling)
from .elementwise import *  # noqa: E402,F401,F403 (unary, binary, where, clamp: kernels/elementwise.cu)
from .reduce import *  # noqa: E402,F401,F403 (reductions, sort, cumsum: kernels/reduce.cu, sort.cu)
from .index import *  # noqa: E402,F401,F403 (indexing, cat, tril, triu: kernels/index.cu, layout.cu)
from .index import deterministic_indexing, set_deterministic_indexing  # noqa: E402,F401 (a setting, not a primitive)
from .random import *  # noqa: E402,F401,F403 (rand, randn, randint, bernoulli: kernels/random.cu)
from .embedding import *  # noqa: E402,F401,F403 (embedding and its backward: kernels/embedding.cu)
