"""Moving tensors between dtypes and devices: ``to cpu cuda float half bfloat16 double long int bool
type type_as``, pinning host memory, and the Python protocols that copy tensors (pickling,
deepcopy) or share them (DLPack, ``__cuda_array_interface__``).

Forwards call the backend's storage primitives (``astype from_numpy to_numpy``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .. import _interop, _native
from .. import dtypes as dt
from ..backends import backend_for
from ..backends import cpu as _cpu
from ..backends.cuda_availability import check_not_forked, is_initialized, unavailable_reason
from ..backends.pinned_host import pinned_host_array
from ..device import CPU, as_device
from ..errors import AutogradError, DeviceError
from ..tensor import Tensor, primitives, version_counter
from .common import on_device, wrap
from .factories import tensor
from .registry import lowering, op

if TYPE_CHECKING:
    from ..backends.seam import CPUArray
    from ..types import Any, Device, DType


@op(
    "to_copy",
    doc="A copy of input on device in dtype (differentiable: the gradient goes back the same way).",
    function=False,
    method=False,
    node="ToCopyBackward0",
    grads={"input": lambda grad, input_device, input_dtype: grad.to(input_device, input_dtype)},
)
def to_copy(input: Tensor, device: Device, dtype: DType | None, non_blocking: bool = False, name: str = "to") -> Tensor:
    # ``non_blocking``: a copy from pinned memory to a CUDA device is only queued on the stream
    src_bk = primitives(input)
    if device is input._device or device == input._device:
        data = src_bk.astype(input._data, dtype)
    elif device is CPU:
        # a device backend's to_numpy is a fresh host array (pinned): it becomes the data as it is
        data = src_bk.to_numpy(input._data)
        if dtype is not input.dtype:
            data = backend_for(device, name).astype(data, dtype)
    else:
        dst_bk = backend_for(device, name)
        host = src_bk.to_numpy(input._data)
        with on_device(device, name):
            data = (
                dst_bk.from_numpy(host, input.dtype, non_blocking=True)
                if non_blocking
                else dst_bk.from_numpy(host, input.dtype)
            )
            if dtype is not input.dtype:
                data = dst_bk.astype(data, dtype)
    return wrap(data, device)


@op(
    "working_copy_cast",
    doc="input in the dtype of its working copy ``copy`` (input rounded to that dtype, kept current by the "
    "optimizer), read instead of cast; differentiable in input as a cast is.",
    function=False,
    method=False,
    node="ToCopyBackward0",
    grads={"input": lambda grad, input_device, input_dtype: grad.to(input_device, input_dtype)},
)
def working_copy_cast(input: Tensor, copy: Tensor) -> Tensor:
    # the copy's memory itself, with its version counter: a backward that saved this result fails
    # loudly if the optimizer has rewritten the copy since (as it would for a modified saved tensor)
    out = wrap(copy._data, copy._device)
    out._vc = version_counter(copy)
    return out


def to_device_and_dtype(t, device=None, dtype=None, copy=False, name="to", non_blocking=False):
    """What ``Tensor.to``, ``cuda()``, ``cpu()``, ``float()``, ... share."""
    device = t._device if device is None or device is t._device else as_device(device, name)
    current = t.dtype  # (a property that maps the array's dtype: read once)
    dtype = current if dtype is None else dt.as_dtype(dtype, name)
    if (device is t._device or device == t._device) and dtype is current and not copy:
        return t
    return to_copy(t, device, dtype, non_blocking, name)


@op(
    "to",
    doc="input on another device and/or in another dtype (itself if nothing changes).",
    composite=True,
    function=False,
)
def to(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
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
    return to_device_and_dtype(input, device, dtype, copy, "to", non_blocking)


@op("cpu", doc="input on the CPU.", composite=True, function=False)
def cpu(input: Tensor) -> Tensor:
    if input._device is CPU:
        return input  # as in PyTorch: no copy
    return to_device_and_dtype(input, CPU, None, False, "cpu")


@op("cuda", doc="input on a CUDA device (the current one by default).", composite=True, function=False)
def cuda(input: Tensor, device: Device | str | int | None = None, non_blocking: bool = False) -> Tensor:
    target = "cuda" if device is None else (device if not isinstance(device, int) else f"cuda:{device}")
    return to_device_and_dtype(input, target, None, False, "cuda", non_blocking)


def _cast_op(name, dtype):
    @op(name, doc=f"input as {dtype}.", composite=True, function=False)
    def cast_to(input: Tensor) -> Tensor:
        # (to_device_and_dtype's work, with nothing to resolve: the device stays, the dtype is one)
        if input.dtype is dtype:
            return input  # as in PyTorch: no copy
        return to_copy(input, input._device, dtype, False, name)

    return cast_to


# Tensor.float(), .half(), ...: named as_<dtype> here so that they do not shadow Python's builtins
as_float = _cast_op("float", dt.float32)
as_half = _cast_op("half", dt.float16)
as_bfloat16 = _cast_op("bfloat16", dt.bfloat16)
as_double = _cast_op("double", dt.float64)
as_long = _cast_op("long", dt.int64)
as_int = _cast_op("int", dt.int32)
as_bool = _cast_op("bool", dt.bool_)


@op("type_as", doc="input in other's dtype.", composite=True, function=False)
def type_as(input: Tensor, other: Tensor) -> Tensor:
    dtype = other.dtype
    if input.dtype is dtype:
        return input
    return to_copy(input, input._device, dtype, False, "type_as")


_TYPE_NAMES = {
    dt.float32: "FloatTensor",
    dt.float64: "DoubleTensor",
    dt.float16: "HalfTensor",
    dt.bfloat16: "BFloat16Tensor",
    dt.int32: "IntTensor",
    dt.int64: "LongTensor",
    dt.bool_: "BoolTensor",
}
_BY_TYPE_NAME = {name: dtype for dtype, name in _TYPE_NAMES.items()}


@op(
    "type",
    doc="The tensor type's name ('adcuda.FloatTensor'), or with dtype, input converted to it.",
    composite=True,
    function=False,
)
def tensor_type(input: Tensor, dtype: DType | str | None = None, non_blocking: bool = False) -> str | Tensor:
    if dtype is None:
        prefix = "adcuda." if input.device.type == "cpu" else "adcuda.cuda."
        return prefix + _TYPE_NAMES[input.dtype]
    device = None
    if isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), dt.dtype):
        dtype, device = dtype.dtype, "cpu"  # a legacy type (adcuda.IntTensor): a CPU tensor of its dtype
    elif isinstance(dtype, str) and dtype.rpartition(".")[2] in _BY_TYPE_NAME:
        # 'adcuda.IntTensor', 'torch.cuda.IntTensor': the type's dtype, on the device its name says
        module, _, name = dtype.rpartition(".")
        dtype, device = _BY_TYPE_NAME[name], ("cuda" if module.rpartition(".")[2] == "cuda" else "cpu")
    return to_device_and_dtype(input, device, dtype, False, "type")


# ------------------------------------------------------------------------------------------------
# pinned host memory
@op(
    "pin_memory",
    doc="A copy of this CPU tensor in page-locked memory (itself if it is pinned already).",
    function=False,
    node="PinMemoryBackward0",
    grads={"input": lambda grad: grad},
)
def pin_memory(input: Tensor, device: Device | str | None = None) -> Tensor:
    # ``.to("cuda", non_blocking=True)`` copies from pinned memory asynchronously; needs CUDA, as in PyTorch
    if input._device is not CPU:
        raise DeviceError(f"pin_memory: only CPU tensors can be pinned; this tensor is on {input._device}")
    array = cast("CPUArray", input._data)
    if _is_pinned_array(array):
        return input
    if array.size:
        check_not_forked("pin_memory")
        reason = unavailable_reason()
        if reason is not None:
            raise DeviceError(
                f"pin_memory: pinned (page-locked) host memory needs CUDA, which is not available: {reason}"
            )
    pinned = pinned_host_array(array.shape, array.dtype)
    _cpu.copy_(pinned, array)
    return wrap(pinned, CPU)


@op(
    "is_pinned",
    doc="Whether this CPU tensor's memory is page-locked (False for CUDA tensors and without CUDA).",
    function=False,
)
def is_pinned(input: Tensor, device: Device | str | None = None) -> bool:
    return input._device is CPU and _is_pinned_array(input._data)


def _is_pinned_array(array):
    """Whether a host array's memory is page-locked (adcuda's pinned pool, or any other library's pinned
    memory); False where this process has not initialised CUDA (nothing can be pinned then)."""
    # (a build without CUDA first, known at import: nothing to ask the runtime)
    if not _PINNING or array.size == 0 or not is_initialized():
        return False
    C = _native._C
    address = array.__array_interface__["data"][0]
    return C.is_pool_pinned(address) or C.is_page_locked(address)


# whether this build can pin memory: asking the module for a name it lacks raises and catches an
# AttributeError, most of is_pinned's own cost on every call
_PINNING = hasattr(_native._C, "PinnedMemory")


# ------------------------------------------------------------------------------------------------
# the Python protocols that copy or share a tensor (not ops: nothing to record or dispatch)
def _reduce_ex(self, protocol):
    return (_rebuild, (self.detach().cpu().numpy(), str(self._device), self._requires_grad))


def _rebuild(array, device, requires_grad):
    return tensor(array, device=device, requires_grad=requires_grad)


def _deepcopy(self, memo):
    if not self.is_leaf:
        raise AutogradError(
            "deepcopy: only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol"
        )
    t = self.detach().clone()
    t._requires_grad = self._requires_grad
    if self.grad is not None:
        t.grad = self.grad.detach().clone()
    memo[id(self)] = t
    return t


def _dlpack(self, stream=None, *, max_version=None, dl_device=None, copy=None):
    return _interop.to_dlpack(self, stream, max_version, dl_device, copy)


# Attached at import, as autograd's methods are (autograd/tensor_methods.py); _tensor_ops.pyi declares them on
# Tensor for type checkers, so mypy sees each assignment as replacing a declared method: the ignores are for that.
Tensor.__reduce_ex__ = _reduce_ex  # type: ignore[method-assign]
Tensor.__deepcopy__ = _deepcopy  # type: ignore[method-assign]
Tensor.__dlpack__ = _dlpack  # type: ignore[method-assign]
Tensor.__dlpack_device__ = _interop.dlpack_device  # type: ignore[method-assign]
Tensor.__cuda_array_interface__ = property(_interop.cuda_array_interface)  # type: ignore[method-assign, assignment]


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("astype", onnx=lambda w, node, **params: w.astype(node, **params), c=lambda lower, node: lower.astype(node))
