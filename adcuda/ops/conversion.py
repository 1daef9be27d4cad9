"""Moving tensors between dtypes and devices: ``to cpu cuda float half double long int bool``."""
from .. import dtypes as dt
from ..backends import backend_for
from ..device import CPU
from ..tensor import Tensor, to_device_and_dtype
from ._core import method, needs_grad, record, wrap


def convert(t, device, dtype, non_blocking=False, op="to"):
    """A copy of ``t`` on ``device`` in ``dtype``; differentiable (the gradient goes back the same way).
    ``non_blocking``: a copy from pinned memory to a CUDA device is only queued on the stream."""
    src_bk = t._backend
    if device == t._device:
        data = src_bk.astype(t._data, dtype)
    elif device is CPU:
        # a device backend's to_numpy is a fresh host array (pinned): it becomes the data as it is
        data = src_bk.to_numpy(t._data)
        if dtype is not t.dtype:
            data = backend_for(device, op).astype(data, dtype)
    else:
        from ..cuda import device as selected_device
        dst_bk = backend_for(device, op)
        host = src_bk.to_numpy(t._data)
        with selected_device(device.index):
            data = dst_bk.from_numpy(host, t.dtype, non_blocking=True) if non_blocking else dst_bk.from_numpy(
                host, t.dtype)
            if dtype is not t.dtype:
                data = dst_bk.astype(data, dtype)
    out = wrap(data, device)
    if needs_grad(t) and dtype.is_floating_point:
        src_device, src_dtype = t._device, t.dtype
        record("ToCopyBackward0", out, (t,), lambda node, g: g.to(src_device, src_dtype))
    return out


def to(self, *args, **kwargs):
    """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(other)``; ``non_blocking`` and
    ``copy`` keywords as in PyTorch."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    non_blocking = kwargs.pop("non_blocking", False)
    if kwargs:
        raise TypeError(f"to: unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, dt.dtype) or a in (float, int, bool):
            dtype = a
        elif isinstance(a, bool):
            non_blocking = a
        else:
            device = a
    return to_device_and_dtype(self, device, dtype, copy, "to", non_blocking)


method("to")(to)
Tensor.cpu = lambda self: to_device_and_dtype(self, "cpu", None, False, "cpu")
Tensor.cuda = lambda self, device=None, non_blocking=False: to_device_and_dtype(
    self, "cuda" if device is None else (device if not isinstance(device, int) else f"cuda:{device}"),
    None, False, "cuda", non_blocking)
Tensor.float = lambda self: to_device_and_dtype(self, None, dt.float32)
Tensor.half = lambda self: to_device_and_dtype(self, None, dt.float16)
Tensor.bfloat16 = lambda self: to_device_and_dtype(self, None, dt.bfloat16)
Tensor.double = lambda self: to_device_and_dtype(self, None, dt.float64)
Tensor.long = lambda self: to_device_and_dtype(self, None, dt.int64)
Tensor.int = lambda self: to_device_and_dtype(self, None, dt.int32)
Tensor.bool = lambda self: to_device_and_dtype(self, None, dt.bool_)
Tensor.type_as = lambda self, other: to_device_and_dtype(self, None, other.dtype)

_TYPE_NAMES = {dt.float32: "FloatTensor", dt.float64: "DoubleTensor", dt.float16: "HalfTensor",
               dt.bfloat16: "BFloat16Tensor", dt.int32: "IntTensor", dt.int64: "LongTensor", dt.bool_: "BoolTensor"}


def type(self, dtype=None, non_blocking=False):  # noqa: A001 (PyTorch's name)
    """``type()`` names the tensor type (``'adcuda.FloatTensor'``); ``type(dtype)`` converts."""
    if dtype is None:
        prefix = "adcuda." if self.device.type == "cpu" else "adcuda.cuda."
        return prefix + _TYPE_NAMES[self.dtype]
    return to_device_and_dtype(self, None, dtype, False, "type")


method("type")(type)
