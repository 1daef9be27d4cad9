"""What op forwards share: wrapping backend arrays as tensors, PyTorch's type promotion, broadcasting
and device checks, conversions that record nothing."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, TypeGuard
from typing import cast as cast_type

import numpy as np  # Python data turned into a host array for the backend

from .. import _native
from .. import dtypes as dt
from ..backends import cpu as _cpu
from ..backends.cpu.reduce import whole_extremes
from ..backends.cuda_availability import device_count, require_cuda
from ..device import CPU
from ..errors import DeviceError, DTypeError, InvalidArgumentError, ShapeError, UnsupportedDTypeError, fmt_shape
from ..tensor import Tensor, primitives, primitives_on, wrap_dim  # noqa: F401 (wrap_dim: for the families)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..backends.seam import CPUArray
    from ..types import Device, DType

_new = object.__new__


def wrap(data, device):
    """A new tensor over a backend array computed by a primitive (Tensor._make, inlined: one is made
    per op call)."""
    t = _new(Tensor)
    t._data = data
    t._device = device
    return t


def cast(t: Tensor, dtype: DType) -> Tensor:
    """``t`` in ``dtype`` (itself if it is already), outside the graph: for forwards."""
    if t.dtype is dtype:
        return t
    return Tensor._make(primitives(t).astype(t._data, dtype), t._device)


def dense(t):
    """``t``'s array, row-major (fused primitives may assume that layout)."""
    return primitives(t).contiguous(t._data)


def constant(value: object, dtype: DType, device: Device) -> Tensor:
    """A tensor holding ``value`` (a Python scalar or nested data) on ``device``."""
    return Tensor._make(primitives_on(device).from_numpy(np.array(value), dtype), device)


class on_device:
    """``with on_device(device, op):`` makes a CUDA ``device`` the calling thread's current one for the
    block (the backends create arrays on the current device); nothing for the CPU or plain ``cuda``."""

    __slots__ = ("index", "op", "previous")

    def __init__(self, device, op):
        self.index = device.index if device.type == "cuda" else None
        self.op = op
        self.previous = None

    def __enter__(self):
        index = self.index
        if index is None:
            return self
        require_cuda(self.op)
        count = device_count()
        if not 0 <= index < count:
            raise DeviceError(
                f"{self.op}: invalid CUDA device index {index}; "
                f"{count} device{'s' if count != 1 else ''} visible (cuda:0..cuda:{count - 1})"
            )
        C = _native._C
        previous = C.cuda_current_device()
        if previous != index:
            C.cuda_set_device(index)
            self.previous = previous
        return self

    def __exit__(self, *exc):
        if self.previous is not None:
            _native._C.cuda_set_device(self.previous)
            self.previous = None


def filled(shape, value, dtype, device):
    return Tensor._make(primitives_on(device).full(tuple(shape), value, dtype), device)


def preserved_order(t):
    """The dims of ``t`` from outermost to innermost as PyTorch's ``preserve_format`` lays out a new
    tensor like it (clone, zeros_like, ...), or None where that is row-major (a contiguous tensor, a
    0-d, 1-d or empty one): by decreasing stride, equal strides by decreasing size, a 0 stride (an
    expanded dim) keeping its place; so a dense tensor's strides are kept and a sliced one is made
    dense in its own dim order (PyTorch's infer_dense_strides)."""
    if t.ndim < 2 or t.is_contiguous() or t.numel() == 0:
        return None
    sizes, strides = t.shape, t.stride()
    order = list(range(t.ndim - 1, -1, -1))  # innermost first, sorted in place (insertion sort, stable)
    for i in range(1, t.ndim):
        moved = i
        for j in range(i - 1, -1, -1):
            a, b = order[j], order[moved]
            if strides[a] == 0 or strides[b] == 0:
                continue
            if strides[a] > strides[b] or (strides[a] == strides[b] and sizes[a] > sizes[b]):
                order[j], order[moved] = b, a
                moved = j
            elif strides[a] < strides[b]:
                break
    order.reverse()
    return None if order == sorted(order) else tuple(order)


def laid_out(bk, order, shape, make):
    """``make(shape)``, an array made row-major, laid out with its dims in ``order`` (outermost first,
    from ``preserved_order``; None: row-major): made in that order and permuted back, so it owns
    dense memory with those strides."""
    if order is None:
        return make(tuple(shape))
    data = make(tuple(shape[d] for d in order))
    return bk.permute(data, tuple(order.index(d) for d in range(len(order))))


def scalar_for(dtype, value):
    """A Python float scalar of an op whose result is of integer ``dtype`` (addmm's alpha and beta,
    addcmul's value, threshold's bounds) truncated toward zero, as PyTorch converts it to the result's
    type; anything else as it is."""
    if value.__class__ is float and dtype.category == dt.INTEGER:
        return int(value)
    return value


# dtype -> (least, greatest) value a number written into it may take (least None: a floating dtype,
# symmetric): iinfo and finfo build objects from NumPy's, two thirds of a small fill_'s time
_SCALAR_LIMITS: dict[DType, tuple[int | None, float]] = {}


def _scalar_limits(dtype):
    if dtype.category == dt.INTEGER:
        info = dt.iinfo(dtype)
        limits = _SCALAR_LIMITS[dtype] = (info.min, info.max)
    else:
        limits = _SCALAR_LIMITS[dtype] = (None, dt.finfo(dtype).max)
    return limits


def scalar_into(op, value, dtype):
    """A Python number written into a tensor of ``dtype`` (fill_, masked_fill, full), converted as
    PyTorch converts it (a float into an integer dtype truncated toward zero, into bool its truth);
    refused as PyTorch refuses it where it does not fit: inf, NaN or a value past the range of an
    integer dtype, a finite value past the largest of a floating one."""
    if value.__class__ not in (int, float) or dtype is dt.bool_ or dtype is dt.float64:
        return value
    limits = _SCALAR_LIMITS.get(dtype) or _scalar_limits(dtype)
    if limits[0] is not None:  # an integer dtype
        fits = math.isfinite(value) and limits[0] <= int(value) <= limits[1]
        value = int(value) if fits else value
    else:
        fits = not math.isfinite(value) or abs(value) <= limits[1]
    if not fits:
        raise InvalidArgumentError(f"{op}: value {value!r} cannot be converted to {dtype} without overflow")
    return value


def check_same_device(op, *tensors):
    dev = None
    for t in tensors:
        if t.__class__ is Tensor:
            if dev is None:
                dev = t._device
            elif t._device is not dev and t._device != dev:  # (one device object: the same device)
                raise DeviceError(
                    f"{op}: expected all tensors to be on the same device, but found at "
                    f"least two devices, {dev} and {t._device}"
                )
    return dev


def result_type(*operands):
    """PyTorch's type promotion over tensors and Python scalars."""
    dim_dt = zero_dt = None
    scalar_cat = -1
    for o in operands:
        if o.__class__ is Tensor:
            d = o.dtype
            if o._data.ndim:
                dim_dt = d if dim_dt is None else dt.promote(dim_dt, d)
            else:
                zero_dt = d if zero_dt is None else dt.promote(zero_dt, d)
        elif o is not None:
            scalar_cat = max(scalar_cat, dt.scalar_category(o))
    result = dim_dt
    if zero_dt is not None and (result is None or zero_dt.category > result.category):
        result = zero_dt
    if scalar_cat >= 0 and (result is None or scalar_cat > result.category):
        result = dt.default_for_category(scalar_cat)
    return result


def result_type_of(tensor: Tensor | float, other: Tensor | float) -> dt.DType:
    """PyTorch's ``torch.result_type(tensor, other)``: the dtype an arithmetic op of the two gives."""
    for name, value in (("tensor", tensor), ("other", other)):
        if value.__class__ is not Tensor and (
            isinstance(value, (str, bytes)) or not isinstance(value, (numbers.Number, np.generic))
        ):
            raise DTypeError(
                f"result_type(): argument '{name}' must be a Tensor or a number, not {type(value).__name__}"
            )
    return result_type(tensor, other)


def float_result_type(*operands):
    d = result_type(*operands)
    return d if d.is_floating_point else dt.default_float


def as_tensor_operand(x, op, like=None):
    """A Python scalar or NumPy value as a 0-d (or n-d) tensor on ``like``'s device (used where an op
    needs a tensor rather than a scalar)."""
    if x.__class__ is Tensor:
        return x
    device = like._device if like is not None else CPU
    if isinstance(x, (bool, int, float)):
        return constant(x, result_type(x) if like is None else result_type(like, x), device)
    try:
        array = np.asarray(x)
        d = dt.from_numpy_dtype(array.dtype, op)
    except Exception as e:
        raise DTypeError(f"{op}: unsupported operand of type {type(x).__name__}") from e
    return constant(array, d, device)


def broadcast_shapes(op, *shapes):
    if len(shapes) == 2 and shapes[0] == shapes[1]:  # (the common case: nothing to broadcast)
        return tuple(shapes[0])
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n == out[i] or n == 1:
                continue
            if out[i] == 1:
                out[i] = n
            else:
                raise ShapeError(f"{op}: shapes " + " and ".join(fmt_shape(x) for x in shapes) + " cannot be broadcast")
    return tuple(out)


def has_shape(x: object) -> TypeGuard[Tensor]:
    """Whether ``x`` has a shape (a Tensor, or an array an op takes as one) rather than being a Python
    number: the ops that take either tell them apart so; type checkers then read ``x`` as a Tensor."""
    return hasattr(x, "shape")


def check_tensor(op, name, x):
    if x.__class__ is not Tensor:
        raise DTypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


def check_float(op, name, x):
    check_tensor(op, name, x)
    if not x.dtype.is_floating_point:
        raise UnsupportedDTypeError(f"{op}: expected {name} to be a floating point tensor, got {x.dtype}")


def int_tuple(op: str, what: str, value: int | Sequence[int], n: int) -> tuple[int, ...]:
    """``value`` (an int, or one or ``n`` ints) as ``n`` ints: PyTorch's rule for a convolution's or a
    pooling's kernel_size, stride, padding and dilation; any other count is a ShapeError naming ``what``."""
    if isinstance(value, (int, numbers.Integral)):  # (int for type checkers, which do not see it is Integral)
        return (int(value),) * n
    ints = tuple(int(v) for v in value)
    if len(ints) == 1:
        return ints * n
    if len(ints) != n:
        raise ShapeError(f"{op}: expected {what} to be an int or {n} ints, got {ints}")
    return ints


def batched_input(op, input, spatial):
    """``input`` (a convolution's or a pooling's, with ``spatial`` trailing dims) with a batch dim, and
    whether it had one: PyTorch takes unbatched (C, *spatial) inputs too."""
    check_tensor(op, "input", input)
    if input.ndim == spatial + 2:
        return input, True
    if input.ndim == spatial + 1:
        return input.unsqueeze(0), False
    raise ShapeError(
        f"{op}: expected a {spatial + 1}-d (unbatched) or {spatial + 2}-d (batched) input, got "
        f"input of shape {fmt_shape(input.shape)}"
    )


_HOST_EXTREMES_MAX = 4096  # elements: a read of 32 KiB at most, as quick as the read of two values


def host_extremes(input: Tensor) -> tuple[float, float]:
    """(min, max) of a non-empty tensor as Python numbers: two reductions of the backend's and one
    read to the host (two public reductions read back one by one cost two dispatches and two reads).
    A small tensor is read to the host whole, in one read as well, and reduced there: NumPy's two
    reductions of a host array cost less than the backend's four calls (bincount, histc)."""
    P, x = primitives(input), input._data
    if P is _cpu:  # the host module's one pass over both, where it takes the array
        both = whole_extremes(cast_type("CPUArray", x))
        if both is not None:
            return both[0].item(), both[1].item()
    if x.size <= _HOST_EXTREMES_MAX:
        host = P.to_numpy(x)
        return np.minimum.reduce(host, axis=None).item(), np.maximum.reduce(host, axis=None).item()
    both = P.cat([P.view(P.reduce(op, x, None, False), (1,)) for op in ("amin", "amax")], 0)
    lowest, largest = P.to_numpy(both).tolist()
    return lowest, largest
