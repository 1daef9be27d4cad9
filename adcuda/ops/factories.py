"""Creating tensors: ``tensor from_numpy as_tensor from_dlpack zeros ones full empty arange linspace
eye *_like``. (The random ones are in ``ops/random.py``.)

Forwards call the backend's storage primitives (``from_numpy full empty arange``), on the device's
backend with that device current."""

from __future__ import annotations

import collections.abc
import math
import numbers
from typing import TYPE_CHECKING

import numpy as np  # host-side parsing of user data only; computation goes through backends

from .. import _interop
from .. import dtypes as dt
from ..backends import backend_for
from ..device import CPU, as_device
from ..errors import DeviceError, DTypeError, InvalidArgumentError, ShapeError
from ..tensor import Size, Tensor, primitives_on
from .common import laid_out, on_device, preserved_order, scalar_into, wrap
from .registry import lowering, op

if TYPE_CHECKING:
    from ..types import Any, Device, DType, Number, Sequence, ndarray


def shape_arg(name, size):
    """``size`` as given to a factory (ints, or one tuple/list/Size; ``size=(3, 4)`` by keyword arrives
    as the latter) as a tuple of ints."""
    if size.__class__ is tuple:
        # the common cases first: sizes as plain non-negative ints, as they are or in one tuple, list or
        # Size (the numbers ABC's isinstance below costs a quarter of a small factory's call)
        flat = tuple(size[0]) if len(size) == 1 and size[0].__class__ in _SHAPE_SEQUENCES else size
        for s in flat:
            if s.__class__ is not int or s < 0:
                break
        else:
            return flat
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    elif len(size) == 1 and hasattr(size[0], "__iter__") and not isinstance(size[0], (str, bytes)):
        size = tuple(size[0])
    shape = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s.item())
        if not isinstance(s, numbers.Integral) or isinstance(s, bool):
            raise DTypeError(f"{name}: size must be a tuple of ints, got {size!r}")
        if s < 0:
            raise ShapeError(f"{name}: negative dimension {s} in size {tuple(size)}")
        shape.append(int(s))
    return tuple(shape)


_SHAPE_SEQUENCES = (tuple, list, Size)


def new_tensor(name, data_fn, shape, dtype, device, requires_grad):
    """A tensor of ``shape`` made by ``data_fn(backend, dtype)`` on ``device``."""
    dev = CPU if device is None or device is CPU else as_device(device, name)
    if dtype.__class__ is not dt.dtype:
        dtype = dt.as_dtype(dtype, name) or dt.default_float
    cpu = dev is CPU
    if not cpu:
        backend_for(dev, name)  # a clear error naming the op where the device cannot compute
    bk = primitives_on(dev)  # as the dispatch hooks see it: the profiler counts, graph capture records
    n = dtype.itemsize
    for s in shape:
        n *= s
    if n > 1 << 46:
        raise MemoryError(f"{name}: cannot allocate a tensor of shape {shape} and dtype {dtype} ({n / 2**30:.1f} GiB)")
    try:
        if cpu:  # no current device to set (on_device's enter and exit: a third of a small factory's call)
            data = data_fn(bk, dtype)
        else:
            with on_device(dev, name):
                data = data_fn(bk, dtype)
    except MemoryError:
        raise MemoryError(
            f"{name}: out of memory allocating a tensor of shape {shape} and dtype {dtype} "
            f"({n / 2**30:.2f} GiB) on {dev}"
        ) from None
    t = wrap(data, dev)
    if requires_grad:
        require_grad(name, t)
    return t


def require_grad(name, t):
    if not t.dtype.is_floating_point:
        raise DTypeError(f"{name}: only tensors of floating point dtype can require gradients, got {t.dtype}")
    t.requires_grad_(True)


# ------------------------------------------------------------------------------------------------
# from data
def _infer_dtype(obj):
    """PyTorch's inference for nested data: Python bool, int and float are bool, int64 and float32;
    NumPy scalars and arrays keep their own dtype; the elements' dtypes are promoted together."""
    result = None
    stack = [obj]
    seen = set()  # the Python scalar classes met: each promotes once (their dtype is their class's)
    while stack:
        x = stack.pop()
        kind = x.__class__
        if kind is float or kind is int or kind is bool:
            if kind in seen:
                continue
            seen.add(kind)
        elif isinstance(x, (list, tuple)) or _is_other_sequence(x):
            stack.extend(x)
            continue
        if isinstance(x, (np.generic, np.ndarray)):
            d = dt.from_numpy_dtype(x.dtype, "tensor")
        else:
            d = dt.default_for_category(dt.scalar_category(x))
        result = d if result is None else dt.promote(result, d)
    return result or dt.default_float


def _not_data(data):
    """PyTorch's error for data that is not numbers: text is a TypeError, any other object (a set, a
    generator, None) a RuntimeError, since it cannot infer a dtype from it."""
    items = list(_flatten_once(data)) if isinstance(data, (list, tuple)) else [data]
    text = next((x for x in items if isinstance(x, (str, bytes))), None)
    if text is not None:
        return DTypeError(f"tensor: invalid data type '{type(text).__name__}'")
    odd = next((x for x in items if not isinstance(x, (numbers.Number, np.generic, np.ndarray))), data)
    return InvalidArgumentError(f"tensor: could not infer dtype of {type(odd).__name__}")


def _is_other_sequence(x):
    """A sequence PyTorch reads as nested data beside lists and tuples (range, deque, array.array);
    strings are not data."""
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, (list, tuple, str, bytes, bytearray))


def _flatten_once(data):
    for x in data:
        if isinstance(x, (list, tuple)):
            yield from _flatten_once(x)
        else:
            yield x


def _holds_tensor(data):
    """Whether nested lists and tuples ``data`` hold a Tensor (plain numbers passed over by their class)."""
    stack = [data]
    while stack:
        for x in stack.pop():
            kind = x.__class__
            if kind is float or kind is int or kind is bool:
                continue
            if isinstance(x, Tensor):
                return True
            if isinstance(x, (list, tuple)):
                stack.append(x)
    return False


def _tensors_to_lists(data):
    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_tensors_to_lists(x) for x in data]
    return data


@op("tensor", doc="A new tensor (a copy) from nested Python data, a NumPy array or another tensor.", method=False)
def tensor(
    data: Any,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    dtype = dt.as_dtype(dtype, "tensor")
    if isinstance(data, Tensor):
        src = data.detach()
        out = src.to(device if device is not None else src.device, dtype or src.dtype, copy=True)
        out = Tensor._make(out._data, out._device)
    else:
        if isinstance(data, np.ndarray):
            arr = data
            if dtype is None:
                dtype = dt.from_numpy_dtype(arr.dtype, "tensor")
        else:
            if _is_other_sequence(data):
                data = list(data)
            if isinstance(data, (list, tuple)) and _holds_tensor(data):
                data = _tensors_to_lists(data)
            if dtype is None:
                try:
                    dtype = _infer_dtype(data)
                except DTypeError:
                    raise _not_data(data) from None
            try:
                arr = np.array(data, dtype=dtype.numpy if dtype.numpy is not None else np.float32)
            except ValueError as e:
                raise ShapeError(
                    f"tensor: expected a rectangular nested sequence of numbers, got ragged or invalid data ({e})"
                ) from None
            except TypeError as e:
                raise DTypeError(f"tensor: could not convert data of type {type(data).__name__} ({e})") from None
            except OverflowError as e:
                raise DTypeError(f"tensor: a value does not fit in {dtype} ({e})") from None
            if arr.dtype == object:
                raise DTypeError("tensor: could not convert data made of non-numbers")
        dev = as_device(device, "tensor")
        backend_for(dev, "tensor")
        bk = primitives_on(dev)
        with on_device(dev, "tensor"):
            data_arr = bk.from_numpy(np.array(arr, copy=True), dtype)
        out = Tensor._make(data_arr, dev)
    if pin_memory:
        out = out.pin_memory()
    if requires_grad:
        require_grad("tensor", out)
    return out


@op("from_numpy", doc="A CPU tensor sharing the NumPy array's memory (no copy).", method=False)
def from_numpy(array: ndarray) -> Tensor:
    if not isinstance(array, np.ndarray):
        raise DTypeError(f"from_numpy: expected np.ndarray, got {type(array).__name__}")
    dt.from_numpy_dtype(array.dtype, "from_numpy")
    if array.dtype not in (np.bool_, np.int32, np.int64, np.float16, np.float32, np.float64):
        raise DTypeError(
            f"from_numpy: NumPy dtype {array.dtype} cannot be shared without a copy; use adcuda.tensor(array) instead"
        )
    return Tensor._make(array, CPU)


@op("as_tensor", doc="data as a tensor, sharing memory where it can (tensors, NumPy, CUDA arrays).", method=False)
def as_tensor(data: Any, dtype: DType | None = None, device: Device | str | None = None) -> Tensor:
    if not isinstance(data, Tensor) and hasattr(data, "__cuda_array_interface__"):
        # CuPy, Numba, PyTorch CUDA arrays: shared without a copy, as PyTorch does
        shared = _interop.from_cuda_array_interface(data)
        data = Tensor._make(shared, _interop.array_device(shared))
    if (
        isinstance(data, Tensor)
        and (dtype is None or data.dtype is dt.as_dtype(dtype))
        and (device is None or data.device == as_device(device))
    ):
        return data
    if (
        isinstance(data, np.ndarray)
        and device in (None, "cpu")
        and (dtype is None or dt.as_dtype(dtype).numpy == data.dtype)
    ):
        return from_numpy(data)
    return tensor(data, dtype, device)


@op("from_dlpack", doc="A tensor sharing the memory of any object with __dlpack__ (no copy).", method=False)
def from_dlpack(ext_tensor: Any, *, device: Device | str | None = None, copy: bool | None = None) -> Tensor:
    shared = _interop.from_dlpack(ext_tensor)
    if isinstance(shared, np.ndarray):
        result = from_numpy(shared)
    else:
        result = Tensor._make(shared, _interop.array_device(shared))
    # PyTorch's keywords: copy=True always copies, copy=False never does (an error where the device
    # asks for one), None copies only to move to device
    moves = device is not None and as_device(device, "from_dlpack") != result.device
    if moves and copy is False:
        raise DeviceError(f"from_dlpack: copy=False, but the tensor is on {result.device}, not {device}")
    if moves:
        return result.to(as_device(device, "from_dlpack"))
    return result.clone() if copy else result


# ------------------------------------------------------------------------------------------------
# filled
@op("zeros", doc="A tensor of zeros.", method=False)
def zeros(
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _constant("zeros", shape_arg("zeros", size), 0, dtype, device, requires_grad)


def _constant(name, shape, value, dtype, device, requires_grad):
    """zeros' and ones' body: ``value`` (0 or 1, which every dtype holds) in ``shape``, a tuple of ints."""
    return new_tensor(name, lambda bk, d: bk.full(shape, value, d), shape, dtype, device, requires_grad)


@op("ones", doc="A tensor of ones.", method=False)
def ones(
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _constant("ones", shape_arg("ones", size), 1, dtype, device, requires_grad)


@op("empty", doc="A tensor whose values are not set.", method=False)
def empty(
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    shape = shape_arg("empty", size)
    if not pin_memory:
        return _empty("empty", shape, dtype, device, requires_grad)
    out = _empty("empty", shape, dtype, device, False).pin_memory()
    if requires_grad:
        require_grad("empty", out)
    return out


def _empty(name, shape, dtype, device, requires_grad):
    return new_tensor(name, lambda bk, d: bk.empty(shape, d), shape, dtype, device, requires_grad)


@op("scalar_tensor", doc="A 0-d tensor holding s (float32 by default, whatever the kind of s).", method=False)
def scalar_tensor(
    s: Number, *, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return _full("scalar_tensor", (), s, dtype or dt.default_float, device, requires_grad)


def _full(name, shape, fill_value, dtype, device, requires_grad):
    """full's body (shape a tuple of ints), for the factories that make one without its entry."""
    if dtype is None:
        dtype = dt.default_for_category(dt.scalar_category(fill_value))
    fill_value = scalar_into(name, fill_value, dt.as_dtype(dtype, name))
    return new_tensor(name, lambda bk, d: bk.full(shape, fill_value, d), shape, dtype, device, requires_grad)


@op("full", doc="A tensor filled with fill_value (its dtype by default).", method=False)
def full(
    size: Sequence[int],
    fill_value: Number,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _full("full", _size_arg("full", size), fill_value, dtype, device, requires_grad)


def _size_arg(name, size):
    """One size argument (a tuple, list or Size of ints, or one int) as a tuple of ints."""
    return shape_arg(name, (size,) if not isinstance(size, (tuple, list)) else (tuple(size),))


def _like(name, input, make, dtype, device, requires_grad):
    """The ``*_like`` factories: ``make(backend, shape, dtype)`` in input's shape, laid out as input
    is (PyTorch's preserve_format) where it stays on input's device."""
    shape = tuple(input._data.shape)
    order = preserved_order(input) if device is None or as_device(device, name) == input._device else None
    return new_tensor(
        name,
        lambda bk, d: laid_out(bk, order, shape, lambda s: make(bk, s, d)),
        shape,
        dtype or input.dtype,
        device or input._device,
        requires_grad,
    )


@op("zeros_like", doc="zeros of input's shape, dtype and device.", method=False)
def zeros_like(
    input: Tensor, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return _like("zeros_like", input, lambda bk, s, d: bk.full(s, 0, d), dtype, device, requires_grad)


@op("ones_like", doc="ones of input's shape, dtype and device.", method=False)
def ones_like(
    input: Tensor, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return _like("ones_like", input, lambda bk, s, d: bk.full(s, 1, d), dtype, device, requires_grad)


@op("empty_like", doc="empty of input's shape, dtype and device.", method=False)
def empty_like(
    input: Tensor, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return _like("empty_like", input, lambda bk, s, d: bk.empty(s, d), dtype, device, requires_grad)


@op("full_like", doc="full of input's shape, dtype and device.", method=False)
def full_like(
    input: Tensor,
    fill_value: Number,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _like("full_like", input, lambda bk, s, d: bk.full(s, fill_value, d), dtype, device, requires_grad)


# ------------------------------------------------------------------------------------------------
# ranges
@op("arange", doc="start, start + step, ... below end (int64 for ints, float32 if any bound is a float).", method=False)
def arange(
    start: Number,
    end: Number | None = None,
    step: Number = 1,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    if end is None:
        start, end = 0, start
    if isinstance(start, Tensor) or isinstance(end, Tensor) or isinstance(step, Tensor):
        start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise ShapeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise ShapeError(
            f"arange: upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})"
        )
    if dtype is None:
        floating = isinstance(start, float) or isinstance(end, float) or isinstance(step, float)
        dtype = dt.default_float if floating else dt.int64
    n = max(math.ceil((end - start) / step), 0)

    def make(bk, d):
        values = bk.arange(start, start + n * step, step, d)
        # a floating step can give one value too many, at the end
        return values if values.shape[0] == n else bk.slice(values, (slice(0, n),))

    return new_tensor("arange", make, (n,), dtype, device, requires_grad)


def _from_host(name, values, dtype, device, requires_grad):
    """A new tensor of host array ``values`` (made for it, so shared as it is on the CPU) in ``dtype``:
    tensor()'s work without its parsing of user data."""
    return new_tensor(name, lambda bk, d: bk.from_numpy(values, d), values.shape, dtype, device, requires_grad)


@op("linspace", doc="steps values evenly spaced from start to end (both included).", method=False)
def linspace(
    start: Number,
    end: Number,
    steps: int,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    if steps < 0:
        raise ShapeError(f"linspace: number of steps must be non-negative, got {steps}")
    values = _evenly_spaced(float(start), float(end), int(steps))
    return _from_host("linspace", values, dtype or dt.default_float, device, requires_grad)


def _evenly_spaced(start, end, steps):
    """``np.linspace(start, end, steps)`` (floats; float64), its formula without its layer of argument
    handling (two thirds of a small linspace's cost): ``start + i * step``, the last value ``end``."""
    values = np.arange(steps, dtype=np.float64)
    div, delta = steps - 1, end - start
    if div > 0 and delta / div != 0:
        values *= delta / div
    else:  # one value, or a step too small to hold: NumPy scales by the whole distance
        if div > 0:
            values /= div
        values *= delta
    values += start
    if steps > 1:
        values[-1] = end
    return values


@op("eye", doc="The n x m identity matrix.", method=False)
def eye(
    n: int,
    m: int | None = None,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    m = n if m is None else m
    if n < 0 or m < 0:
        raise ShapeError(f"eye: n and m must be non-negative, got {n} and {m}")
    return _from_host("eye", np.eye(n, m), dtype or dt.default_float, device, requires_grad)


# ------------------------------------------------------------------------------------------------
# new_*: tensors with this tensor's dtype and device unless told otherwise
@op("new_zeros", doc="zeros of size, with self's dtype and device by default.", function=False)
def new_zeros(
    self: Tensor,
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = shape_arg("new_zeros", size)
    return _constant("new_zeros", shape, 0, dtype or self.dtype, device or self._device, requires_grad)


@op("new_ones", doc="ones of size, with self's dtype and device by default.", function=False)
def new_ones(
    self: Tensor,
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = shape_arg("new_ones", size)
    return _constant("new_ones", shape, 1, dtype or self.dtype, device or self._device, requires_grad)


@op("new_empty", doc="An unset tensor of size, with self's dtype and device by default.", function=False)
def new_empty(
    self: Tensor,
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = shape_arg("new_empty", size)
    return _empty("new_empty", shape, dtype or self.dtype, device or self._device, requires_grad)


@op("new_full", doc="A tensor of size filled with fill_value, with self's dtype and device by default.", function=False)
def new_full(
    self: Tensor,
    size: Sequence[int],
    fill_value: Number,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = _size_arg("new_full", size)
    return _full("new_full", shape, fill_value, dtype or self.dtype, device or self._device, requires_grad)


@op("new_tensor", doc="A copy of data, with self's dtype and device by default.", function=False)
def new_tensor_copy(
    self: Tensor, data: Any, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad)


# ------------------------------------------------------------------------------------------------
# PyTorch's legacy constructors: ``Tensor(data)``, ``Tensor(2, 3)``, ``LongTensor([1, 2])``, ...
def legacy_construct(name, dtype, args, device=None):
    """What ``torch.Tensor(*args)`` (float32) and the typed ``torch.<T>Tensor(*args)`` make: sizes
    given as ints (or one ``Size``) make a tensor of that shape whose values are not set; one sequence,
    NumPy array or tensor is data, copied into a new tensor of ``dtype`` (a tensor already of that
    dtype is returned as it is, as in PyTorch); no argument makes an empty 1-d tensor."""
    if not args:
        return _empty(name, (0,), dtype, device, False)
    if _all_ints(args):
        return _empty(name, shape_arg(name, args), dtype, device, False)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not dtype:
                raise DTypeError(
                    f"{name}: expected a tensor of dtype {dtype}, got one of {data.dtype} "
                    f"(shape {tuple(data.shape)}); convert it with .to({dtype})"
                )
            return data if device is None else data.to(device)
        if isinstance(data, Size):
            return empty(*data, dtype=dtype, device=device)
        if isinstance(data, (list, tuple)) or hasattr(data, "__array__"):
            return tensor(data, dtype=dtype, device=device)
    raise DTypeError(
        f"{name}: expected sizes (ints) or one sequence of data, got ({', '.join(type(a).__name__ for a in args)})"
    )


def _all_ints(args):
    """Whether every one of ``args`` is an integer (not a bool): sizes, for the legacy constructors."""
    for a in args:  # (a loop: all() over a generator costs a third of a small Tensor.new)
        if a.__class__ is not int and (not isinstance(a, numbers.Integral) or isinstance(a, bool)):
            return False
    return True


@op("new", doc="PyTorch's legacy self.new(sizes or data): a tensor of self's dtype and device.", function=False)
def legacy_new(self: Tensor, *args: Any, device: Device | str | None = None) -> Tensor:
    return legacy_construct("new", self.dtype, args, device or self._device)


def _tensor_new(cls, *args: Any, device: Device | str | None = None) -> Tensor:
    if cls is not Tensor:  # a subclass (nn.Parameter) makes itself
        return object.__new__(cls)
    return legacy_construct("Tensor", dt.float32, args, device)


class _LegacyTensorType(type):
    """``isinstance(t, LongTensor)`` holds for a CPU tensor of that dtype, as in PyTorch."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"


def _legacy_type(name, dtype):
    def __new__(cls, *args, device=None):
        return legacy_construct(name, dtype, args, device)

    return _LegacyTensorType(
        name,
        (),
        {
            "dtype": dtype,
            "__new__": __new__,
            "__module__": "adcuda",
            "__doc__": f"PyTorch's legacy constructor of {dtype} tensors.",
        },
    )


Tensor.__new__ = _tensor_new  # type: ignore[method-assign,assignment]  # the legacy constructor, made here (tensor.py has no ops)
FloatTensor = _legacy_type("FloatTensor", dt.float32)
DoubleTensor = _legacy_type("DoubleTensor", dt.float64)
HalfTensor = _legacy_type("HalfTensor", dt.float16)
BFloat16Tensor = _legacy_type("BFloat16Tensor", dt.bfloat16)
IntTensor = _legacy_type("IntTensor", dt.int32)
LongTensor = _legacy_type("LongTensor", dt.int64)
BoolTensor = _legacy_type("BoolTensor", dt.bool_)
LEGACY_TYPES = (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, IntTensor, LongTensor, BoolTensor)


# ------------------------------------------------------------------------------------------------
# More of PyTorch's factories (issue 15)
@op("logspace", doc="steps values base ** linspace(start, end, steps).", method=False)
def logspace(
    start: Number,
    end: Number,
    steps: int,
    base: float = 10.0,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    if steps < 0:
        raise ShapeError(f"logspace: number of steps must be non-negative, got {steps}")
    values = np.power(float(base), _evenly_spaced(float(start), float(end), int(steps)))
    return _from_host("logspace", values, dtype or dt.default_float, device, requires_grad)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("full", onnx=lambda w, node, **params: w.full(node, **params))
lowering("arange", onnx=lambda w, node, **params: w.arange(node, **params))
