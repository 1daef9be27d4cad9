"""Sharing tensors with other libraries without copies: DLPack (``Tensor.__dlpack__``,
``__dlpack_device__``, ``adcuda.from_dlpack``) and ``__cuda_array_interface__`` (version 3).

CPU tensors go through NumPy's own DLPack support (a CPU tensor's data is a NumPy array); CUDA
tensors through the native runtime (kernels/bindings/interop.cpp), which also orders the consumer's
and the producer's streams. Either way the memory is shared, never copied (unless ``copy=True``).
Imports give back backend arrays; the factory ops (``adcuda/ops/factories.py``) make the tensors.

A consumer's stream is recorded as a user of exported memory (PyTorch's ``record_stream``, done for
you): it waits for adcuda's earlier work on the memory, adcuda's later work on it waits for the
consumer's work queued before, and the caching allocator reuses the memory only after the consumer's
queued work, even if the tensor is freed first. DLPack names the consumer's stream; the
``__cuda_array_interface__`` protocol does not, so there the legacy default stream (the one CuPy, Numba
and PyTorch use unless told otherwise) is recorded; a consumer on another stream calls
``adcuda.cuda.record_stream(tensor, its_stream)``.
"""

import numpy as np

from . import _native
from . import dtypes as dt
from .backends.cuda_availability import require_cuda
from .device import device as device_type
from .errors import AutogradError, DeviceError, DTypeError

__all__ = [
    "dlpack_device",
    "to_dlpack",
    "from_dlpack",
    "cuda_array_interface",
    "from_cuda_array_interface",
    "record_external_use",
]

# DLPack device types (DLDeviceType)
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
# The legacy default stream's handle in the stream protocols (DLPack, __cuda_array_interface__)
LEGACY_DEFAULT_STREAM = 1

_TYPESTR = {dt.bool_: "|b1", dt.int32: "<i4", dt.int64: "<i8", dt.float16: "<f2", dt.float32: "<f4", dt.float64: "<f8"}


def _check_exportable(t, what):
    if t.requires_grad:
        raise AutogradError(f"{what}: can't export a tensor that requires grad; use tensor.detach()")


def dlpack_device(t):
    if t.device.type == "cuda":
        return KDL_CUDA, t._data.device
    return KDL_CPU, 0


def to_dlpack(t, stream=None, max_version=None, dl_device=None, copy=None):
    """The capsule for ``Tensor.__dlpack__``; the arguments are the protocol's."""
    _check_exportable(t, "__dlpack__")
    if dl_device is not None and tuple(dl_device) != dlpack_device(t):
        raise BufferError(
            f"__dlpack__: the tensor is on {t.device}, DLPack device {tuple(dl_device)} was asked "
            "for; move it with .to() first"
        )
    data = t._data
    if copy:
        data = t._backend.astype(data, t.dtype)
    if t.device.type == "cuda":
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return _native._C.to_dlpack(data, versioned, stream)
    if stream is not None:
        raise BufferError("__dlpack__: stream must be None for a CPU tensor")
    kwargs = {} if max_version is None else {"max_version": max_version}
    return data.__dlpack__(**kwargs)


def array_device(data):
    """The device of an array ``from_dlpack`` or ``from_cuda_array_interface`` gave back."""
    return device_type("cpu") if isinstance(data, np.ndarray) else device_type("cuda", data.device)


def from_dlpack(obj):
    """An array sharing the memory of ``obj`` (any object with ``__dlpack__``: NumPy and PyTorch CPU
    arrays, CuPy and PyTorch CUDA arrays, ...): a NumPy array or a CUDA device array."""
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(
            f"from_dlpack: expected an object with __dlpack__ and __dlpack_device__, got {type(obj).__name__}"
        )
    device_kind, device_index = obj.__dlpack_device__()
    if device_kind in (KDL_CPU, KDL_CUDA_HOST):
        try:
            array = np.from_dlpack(obj)
        except (BufferError, TypeError, RuntimeError) as e:
            raise DTypeError(f"from_dlpack: NumPy cannot take this CPU array ({e})") from None
        return array
    if device_kind not in (KDL_CUDA, KDL_CUDA_MANAGED):
        raise DeviceError(f"from_dlpack: DLPack device type {device_kind} is neither CPU nor CUDA memory")
    require_cuda("from_dlpack")
    consumer = _native._C.current_stream(int(device_index))
    try:
        capsule = obj.__dlpack__(stream=consumer, max_version=(1, 0))
    except TypeError:  # a producer from before DLPack 1.0
        capsule = obj.__dlpack__(stream=consumer)
    return _native._C.from_dlpack(capsule)


def cuda_array_interface(t):
    """``Tensor.__cuda_array_interface__`` (version 3). Only CUDA tensors have it."""
    if t.device.type != "cuda":
        raise AttributeError(f"__cuda_array_interface__: only CUDA tensors have it; this tensor is on {t.device}")
    _check_exportable(t, "__cuda_array_interface__")
    typestr = _TYPESTR.get(t.dtype)
    if typestr is None:
        raise DTypeError(f"__cuda_array_interface__: {t.dtype} has no array-interface type string")
    a = t._data
    _native._C.record_external_use(a, LEGACY_DEFAULT_STREAM)
    return {
        "shape": a.shape,
        "typestr": typestr,
        "data": (a.data_ptr(), False),
        "version": 3,
        "strides": None if a.is_contiguous() else a.strides,
        # the stream whose queued work wrote the data: a consumer synchronises with it first
        "stream": a.last_stream,
    }


def from_cuda_array_interface(obj):
    """A CUDA device array over the memory ``obj.__cuda_array_interface__`` describes (CuPy, Numba,
    PyTorch arrays); ``obj`` is kept alive while the array is."""
    require_cuda("from_cuda_array_interface")
    interface = obj.__cuda_array_interface__
    if interface.get("mask") is not None:
        raise BufferError("__cuda_array_interface__: masked arrays are not supported")
    try:
        dtype = dt.from_numpy_dtype(np.dtype(interface["typestr"]), "from_cuda_array_interface")
    except DTypeError:
        raise DTypeError(
            f"from_cuda_array_interface: element type {interface['typestr']!r} has no adcuda dtype"
        ) from None
    if dtype.numpy is None or np.dtype(dtype.numpy) != np.dtype(interface["typestr"]):
        raise DTypeError(
            f"from_cuda_array_interface: element type {interface['typestr']!r} has no adcuda dtype "
            "that holds it without a conversion"
        )
    pointer = interface["data"][0] or 0
    strides = interface.get("strides")
    stream = interface.get("stream") if interface.get("version", 0) >= 3 else None
    data = _native._C.from_cuda_array_interface(
        pointer,
        tuple(interface["shape"]),
        None if strides is None else tuple(strides),
        cuda_scalar_type(dtype),
        obj,
        stream,
    )
    return data


def record_external_use(t, stream, device_index=None):
    """Record the stream with handle ``stream`` (of ``device_index``, default the tensor's device) as a
    user of CUDA tensor ``t``'s memory (``adcuda.cuda.record_stream``)."""
    _native._C.record_external_use(t._data, stream, -1 if device_index is None else device_index)


def cuda_scalar_type(dtype):
    return getattr(_native._C.ScalarType, dtype.name)
