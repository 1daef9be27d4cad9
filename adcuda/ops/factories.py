"""Creating tensors: ``tensor from_numpy as_tensor from_dlpack zeros ones full empty arange linspace
eye *_like``. (The random ones are in ``ops/random.py``.)

Forwards call the backend's storage primitives (``from_numpy full empty arange``), on the device's
backend with that device current."""

from __future__ import annotations

import collections.abc
import importlib
import math
import numbers
from typing import TYPE_CHECKING

import numpy as np  # host-side parsing of user data only; computation goes through backends

from .. import _interop
from .. import dtypes as dt
from ..backends import backend_for
from ..backends.float_errors import QUIET as _QUIET
from ..backends.float_errors import current as _errstate
from ..backends.float_errors import quiet as _quiet
from ..backends.float_errors import restore as _restore
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


# the tensor module (``adcuda.tensor`` is the factory function once the package is imported): its
# primitive observer, read per call
_tensor_module = importlib.import_module("..tensor", __package__)
# adcuda dtype -> the NumPy dtype a host array of it has (CUDA-only dtypes have none)
_HOST_DTYPES = {d: np.dtype(d.numpy) for d in dt.ALL if d.numpy is not None}
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def host_dtype(dtype, device, requires_grad):
    """The NumPy dtype of a factory's result where it is a host array wrapped with nothing else to do
    (``dtype`` an adcuda dtype or None for the default float, ``device`` None or the CPU device object,
    nothing requiring grad, no observer of primitive calls: the profiler and graph capture see
    ``new_tensor``'s primitives); else None, for ``new_tensor``'s general path (which also converts
    and checks every other form of ``dtype`` and ``device``)."""
    if requires_grad or _tensor_module._primitive_observer is not None or (device is not None and device is not CPU):
        return None
    if dtype is None:
        dtype = dt.default_float
    elif dtype.__class__ is not dt.dtype:
        return None
    return _HOST_DTYPES.get(dtype)


def host_tensor(shape, value, dtype, device, requires_grad):
    """A CPU tensor of ``shape`` holding ``value`` (None: not set) as the CPU backend's ``full`` and
    ``empty`` make it, where ``host_dtype`` finds nothing else to do; else None (and where NumPy
    cannot allocate it), for ``new_tensor``'s general path, which names the op in its errors. One
    frame beside host_dtype's for the factories' common case (each helper frame cost a tenth of a small
    factory's call)."""
    d = host_dtype(dtype, device, requires_grad)
    if d is None:
        return None
    try:
        if value is None:
            data = np.empty(shape, d)
        elif value.__class__ is int and value == 0:  # calloc'd memory, as the backend's full makes zeros
            data = np.zeros(shape, d)
        else:
            data = np.empty(shape, d)
            data.fill(value)
    except (MemoryError, ValueError):
        return None
    return wrapped(data)


_new = object.__new__


def wrapped(data):
    """A CPU tensor over host array ``data`` (Tensor._make, inlined)."""
    t = _new(Tensor)
    t._data = data
    t._device = CPU
    return t


def plain_shape(size):
    """``size`` (a factory's ``*size``: ints, or one tuple, list or Size of them) as a tuple of plain
    non-negative ints, or None for any other form (``shape_arg`` converts or refuses it, named)."""
    if len(size) == 1 and size[0].__class__ in _SHAPE_SEQUENCES:
        size = tuple(size[0])
    for s in size:
        if s.__class__ is not int or s < 0:
            return None
    return size


# The factories' direct lanes (registry.py's ``direct=``): their common case, a CPU tensor made by
# ``host_tensor``, in one frame called by position; None (any other form) takes the forward.
def _filled_direct(value):
    def direct(size, dtype=None, device=None, requires_grad=False, pin_memory=False):
        shape = plain_shape(size)
        if shape is None or pin_memory:
            return None
        return host_tensor(shape, value, dtype, device, requires_grad)

    return direct


def _new_filled_direct(value):
    def direct(self, size, dtype=None, device=None, requires_grad=False):
        shape = plain_shape(size)
        if shape is None:
            return None
        return host_tensor(shape, value, dtype or self.dtype, device or self._device, requires_grad)

    return direct


def _like_direct(input, value, dtype, device, requires_grad):
    data = input._data
    if data.__class__ is not np.ndarray or not data.flags.c_contiguous:  # (laid out as input: the forward)
        return None
    return host_tensor(data.shape, value, dtype or input.dtype, device, requires_grad)


def _filled_like_direct(value):
    def direct(input, dtype=None, device=None, requires_grad=False):
        return _like_direct(input, value, dtype, device, requires_grad)

    return direct


def _full_direct(shape, fill_value, dtype, device, requires_grad):
    if shape is None or (fill_value.__class__ is not float and fill_value.__class__ is not int):
        return None
    if dtype is None:
        dtype = dt.default_float if fill_value.__class__ is float else dt.int64
    elif dtype.__class__ is not dt.dtype:
        return None
    return host_tensor(shape, scalar_into("full", fill_value, dtype), dtype, device, requires_grad)


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


_PYTHON_SCALARS, _NESTINGS = frozenset((bool, int, float)), frozenset((list, tuple))


def _plain_data_dtype(data):
    """``_infer_dtype`` of nested lists and tuples of Python bools, ints and floats only (their classes
    found a list at a time, by C loops), or None for any other data (NumPy scalars, tensors, ...), which
    the general walk reads."""
    seen = set()
    stack = [data]
    while stack:
        x = stack.pop()
        kinds = set(map(type, x))
        if kinds <= _PYTHON_SCALARS:
            seen |= kinds
        elif kinds <= _NESTINGS:
            stack.extend(x)
        else:
            return None
    if float in seen or not seen:
        return dt.default_float
    return dt.int64 if int in seen else dt.bool_


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


def _listed_direct(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """tensor()'s common case: nested lists or tuples of Python numbers made a CPU tensor's own array
    (under NumPy's quiet state, as the forward: a float past float32's range is inf); else None."""
    if data.__class__ is not list and data.__class__ is not tuple or pin_memory:
        return None
    plain = _plain_data_dtype(data)
    d = None if plain is None else host_dtype(dtype or plain, device, requires_grad)
    if d is None:
        return None
    token = None if _errstate() is _QUIET else _quiet(_QUIET)
    try:
        return wrapped(np.array(data, d))
    finally:
        if token is not None:
            _restore(token)


@op(
    "tensor",
    doc="A new tensor (a copy) from nested Python data, a NumPy array or another tensor.",
    method=False,
    direct=_listed_direct,
)
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
        made = False  # whether arr was made here (so it need not be copied)
        if isinstance(data, np.ndarray):
            arr = data
            if dtype is None:
                dtype = dt.from_numpy_dtype(arr.dtype, "tensor")
        else:
            if _is_other_sequence(data):
                data = list(data)
            plain = _plain_data_dtype(data) if data.__class__ is list or data.__class__ is tuple else None
            if plain is None and isinstance(data, (list, tuple)) and _holds_tensor(data):
                data = _tensors_to_lists(data)
            if dtype is None:
                try:
                    dtype = plain or _infer_dtype(data)
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
            made = True
        if made and not pin_memory and host_dtype(dtype, device, False) is arr.dtype:  # (from_numpy: arr itself)
            out = wrapped(arr)
            if requires_grad:
                require_grad("tensor", out)
            return out
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


# the NumPy dtypes a tensor shares an array of (from_numpy)
_SHAREABLE = frozenset(map(np.dtype, (np.bool_, np.int32, np.int64, np.float16, np.float32, np.float64)))


@op(
    "from_numpy",
    doc="A CPU tensor sharing the NumPy array's memory (no copy).",
    method=False,
    direct=lambda array: (
        wrapped(array)
        if array.__class__ is np.ndarray and array.dtype in _SHAREABLE and _tensor_module._primitive_observer is None
        else None
    ),
)
def from_numpy(array: ndarray) -> Tensor:
    if not isinstance(array, np.ndarray):
        raise DTypeError(f"from_numpy: expected np.ndarray, got {type(array).__name__}")
    dt.from_numpy_dtype(array.dtype, "from_numpy")
    if array.dtype not in _SHAREABLE:
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
@op("zeros", doc="A tensor of zeros.", method=False, direct=_filled_direct(0))
def zeros(
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _constant("zeros", shape_arg("zeros", size), 0, dtype, device, requires_grad)


def _constant(name, shape, value, dtype, device, requires_grad):
    """zeros' and ones' body: ``value`` (0 or 1, which every dtype holds) in ``shape``, a tuple of ints."""
    made = host_tensor(shape, value, dtype, device, requires_grad)
    if made is not None:
        return made
    return new_tensor(name, lambda bk, d: bk.full(shape, value, d), shape, dtype, device, requires_grad)


@op("ones", doc="A tensor of ones.", method=False, direct=_filled_direct(1))
def ones(
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _constant("ones", shape_arg("ones", size), 1, dtype, device, requires_grad)


@op("empty", doc="A tensor whose values are not set.", method=False, direct=_filled_direct(None))
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
    made = host_tensor(shape, None, dtype, device, requires_grad)
    if made is not None:
        return made
    return new_tensor(name, lambda bk, d: bk.empty(shape, d), shape, dtype, device, requires_grad)


@op(
    "scalar_tensor",
    doc="A 0-d tensor holding s (float32 by default, whatever the kind of s).",
    method=False,
    direct=lambda s, dtype=None, device=None, requires_grad=False: _full_direct(
        (), s, dtype or dt.default_float, device, requires_grad
    ),
)
def scalar_tensor(
    s: Number, *, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return _full("scalar_tensor", (), s, dtype or dt.default_float, device, requires_grad)


def _full(name, shape, fill_value, dtype, device, requires_grad):
    """full's body (shape a tuple of ints), for the factories that make one without its entry."""
    if dtype is None:
        dtype = dt.default_for_category(dt.scalar_category(fill_value))
    fill_value = scalar_into(name, fill_value, dt.as_dtype(dtype, name))
    made = host_tensor(shape, fill_value, dtype, device, requires_grad)
    if made is not None:
        return made
    return new_tensor(name, lambda bk, d: bk.full(shape, fill_value, d), shape, dtype, device, requires_grad)


@op(
    "full",
    doc="A tensor filled with fill_value (its dtype by default).",
    method=False,
    direct=lambda size, fill_value, dtype=None, device=None, requires_grad=False: _full_direct(
        plain_shape((size,)), fill_value, dtype, device, requires_grad
    ),
)
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


def _like(name, input, value, dtype, device, requires_grad):
    """The ``*_like`` factories: ``value`` (a number, or None: not set) in input's shape, laid out as
    input is (PyTorch's preserve_format) where it stays on input's device."""
    data = input._data
    shape = data.shape
    if data.__class__ is np.ndarray and data.flags.c_contiguous:  # a row-major CPU tensor: laid out as made
        made = host_tensor(shape, value, dtype or input.dtype, device, requires_grad)
        if made is not None:
            return made
    if value is None:

        def make(bk, s, d):
            return bk.empty(s, d)

    else:

        def make(bk, s, d):
            return bk.full(s, value, d)

    order = preserved_order(input) if device is None or as_device(device, name) == input._device else None
    return new_tensor(
        name,
        lambda bk, d: laid_out(bk, order, shape, lambda s: make(bk, s, d)),
        shape,
        dtype or input.dtype,
        device or input._device,
        requires_grad,
    )


@op(
    "zeros_like",
    doc="zeros of input's shape, dtype and device.",
    method=False,
    direct=_filled_like_direct(0),
)
def zeros_like(
    input: Tensor, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return _like("zeros_like", input, 0, dtype, device, requires_grad)


@op(
    "ones_like",
    doc="ones of input's shape, dtype and device.",
    method=False,
    direct=_filled_like_direct(1),
)
def ones_like(
    input: Tensor, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return _like("ones_like", input, 1, dtype, device, requires_grad)


@op(
    "empty_like",
    doc="empty of input's shape, dtype and device.",
    method=False,
    direct=_filled_like_direct(None),
)
def empty_like(
    input: Tensor, dtype: DType | None = None, device: Device | str | None = None, requires_grad: bool = False
) -> Tensor:
    return _like("empty_like", input, None, dtype, device, requires_grad)


@op(
    "full_like",
    doc="full of input's shape, dtype and device.",
    method=False,
    direct=lambda input, fill_value, dtype=None, device=None, requires_grad=False: (
        _like_direct(input, fill_value, dtype, device, requires_grad)
        if fill_value.__class__ is float or fill_value.__class__ is int
        else None
    ),
)
def full_like(
    input: Tensor,
    fill_value: Number,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _like("full_like", input, fill_value, dtype, device, requires_grad)


# ------------------------------------------------------------------------------------------------
# ranges
def _arange_direct(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if start.__class__ is not int or end.__class__ is not int or step.__class__ is not int or step == 0:
        return None
    # (the forward's count, ceil((end - start) / step), is exact below 2**53)
    if (end - start) * step < 0 or not -_EXACT < start < _EXACT or not -_EXACT < end < _EXACT:
        return None
    if host_dtype(dt.int64 if dtype is None else dtype, device, requires_grad) is not _INT64:
        return None
    return wrapped(np.arange(start, end, step, dtype=_INT64))


_INT64, _EXACT = np.dtype(np.int64), 2**52


@op(
    "arange",
    doc="start, start + step, ... below end (int64 for ints, float32 if any bound is a float).",
    method=False,
    direct=_arange_direct,
)
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
    d = host_dtype(dtype, device, requires_grad)
    if d is not None:  # (the CPU backend's from_numpy: the array itself, or a copy in d)
        return wrap(values if values.dtype is d else values.astype(d), CPU)
    return new_tensor(name, lambda bk, d: bk.from_numpy(values, d), values.shape, dtype, device, requires_grad)


def _spaced_direct(start, end, steps, dtype, device, requires_grad, base=None):
    """linspace's (``base`` None) or logspace's common case: Python numbers of magnitudes whose values,
    powers and float32 casts cannot overflow (under NumPy's quiet state, as the forward runs: a cast may
    underflow), ``steps`` a plain int, a CPU float32/float64 result; else None."""
    if start.__class__ not in _NUMBERS or end.__class__ not in _NUMBERS or steps.__class__ is not int or steps < 0:
        return None
    if not (abs(start) < _SPACED_BOUND and abs(end) < _SPACED_BOUND):  # (NaN is not below it)
        return None
    if base is not None:
        if base.__class__ not in _NUMBERS or not 0 < base < _SPACED_BOUND:
            return None
        scale = math.log10(base)
        if max(start * scale, end * scale) >= _POWER_BOUND:
            return None
    d = host_dtype(dtype, device, requires_grad)
    if d is not _F32 and d is not _F64:
        return None
    token = None if _errstate() is _QUIET else _quiet(_QUIET)
    try:
        if base is None:
            values = _evenly_spaced(float(start), float(end), steps, d)
        else:
            values = _log_spaced(float(base), float(start), float(end), steps, d)
        return wrapped(values if values.dtype is d else values.astype(d))
    finally:
        if token is not None:
            _restore(token)


_NUMBERS = (float, int)
_SPACED_BOUND, _POWER_BOUND = 1e30, 30  # (float32 holds up to 3.4e38)


@op(
    "linspace",
    doc="steps values evenly spaced from start to end (both included).",
    method=False,
    direct=lambda start, end, steps, dtype=None, device=None, requires_grad=False: _spaced_direct(
        start, end, steps, dtype, device, requires_grad
    ),
)
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


_LISTED_STEPS = 64  # (up to which a list beats NumPy's four calls)


def _evenly_spaced(start, end, steps, dtype=_F64):
    """``np.linspace(start, end, steps)`` (floats; float64), its formula without its layer of argument
    handling (two thirds of a small linspace's cost): ``start + i * step``, the last value ``end``;
    in NumPy dtype ``dtype`` (the float64 values rounded to it) where they are listed."""
    div, delta = steps - 1, end - start
    if 0 < div < _LISTED_STEPS and delta / div != 0:
        # the same float64 products and sums one by one in Python, for a fifth of NumPy's calls' cost
        step = delta / div
        listed = [i * step + start for i in range(div)]
        listed.append(end)
        return np.array(listed, dtype)
    values = np.arange(steps, dtype=np.float64)
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


def _log_spaced(base, start, end, steps, dtype=_F64):
    """``np.power(base, _evenly_spaced(start, end, steps))`` (floats): where the values are listed, each
    power is Python's (the C library's pow, as NumPy's scalar loop: NumPy's vector loop may round a
    float64 power's last bit the other way), in NumPy dtype ``dtype``, for half the cost of three
    NumPy calls; else NumPy's (a float64 array)."""
    div, delta = steps - 1, end - start
    if 0 < div < _LISTED_STEPS and delta / div != 0 and base > 0:
        step = delta / div
        try:  # (the same exponents as _evenly_spaced's)
            listed = [base ** (i * step + start) for i in range(div)]
            listed.append(base**end)
            return np.array(listed, dtype)
        except OverflowError:  # (NumPy's power gives inf)
            pass
    return np.power(base, _evenly_spaced(start, end, steps))


def _eye_direct(n, m=None, dtype=None, device=None, requires_grad=False):
    m = n if m is None else m
    if n.__class__ is not int or m.__class__ is not int or n < 0 or m < 0:
        return None
    out = host_tensor((n, m), 0, dtype, device, requires_grad)
    if out is not None and n and m:
        out._data.reshape(-1)[: min(n, m) * m : m + 1] = 1  # the diagonal, np.eye's ones
    return out


@op("eye", doc="The n x m identity matrix.", method=False, direct=_eye_direct)
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
@op(
    "new_zeros",
    doc="zeros of size, with self's dtype and device by default.",
    function=False,
    direct=_new_filled_direct(0),
)
def new_zeros(
    self: Tensor,
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = shape_arg("new_zeros", size)
    return _constant("new_zeros", shape, 0, dtype or self.dtype, device or self._device, requires_grad)


@op(
    "new_ones",
    doc="ones of size, with self's dtype and device by default.",
    function=False,
    direct=_new_filled_direct(1),
)
def new_ones(
    self: Tensor,
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = shape_arg("new_ones", size)
    return _constant("new_ones", shape, 1, dtype or self.dtype, device or self._device, requires_grad)


@op(
    "new_empty",
    doc="An unset tensor of size, with self's dtype and device by default.",
    function=False,
    direct=_new_filled_direct(None),
)
def new_empty(
    self: Tensor,
    *size: int | Sequence[int],
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = shape_arg("new_empty", size)
    return _empty("new_empty", shape, dtype or self.dtype, device or self._device, requires_grad)


@op(
    "new_full",
    doc="A tensor of size filled with fill_value, with self's dtype and device by default.",
    function=False,
    direct=lambda self, size, fill_value, dtype=None, device=None, requires_grad=False: _full_direct(
        plain_shape((size,)), fill_value, dtype or self.dtype, device or self._device, requires_grad
    ),
)
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


@op(
    "new_tensor",
    doc="A copy of data, with self's dtype and device by default.",
    function=False,
    direct=lambda self, data, dtype=None, device=None, requires_grad=False: _listed_direct(
        data, dtype or self.dtype, device or self._device, requires_grad
    ),
)
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


def _legacy_new_direct(self, args, device=None):
    for a in args:  # sizes (one tuple or list is data: the forward's)
        if a.__class__ is not int or a < 0:
            return None
    return host_tensor(args if args else (0,), None, self.dtype, device or self._device, False)


@op(
    "new",
    doc="PyTorch's legacy self.new(sizes or data): a tensor of self's dtype and device.",
    function=False,
    direct=_legacy_new_direct,
)
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
@op(
    "logspace",
    doc="steps values base ** linspace(start, end, steps).",
    method=False,
    direct=lambda start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False: _spaced_direct(
        start, end, steps, dtype, device, requires_grad, base
    ),
)
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
    values = _log_spaced(float(base), float(start), float(end), int(steps))
    return _from_host("logspace", values, dtype or dt.default_float, device, requires_grad)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("full", onnx=lambda w, node, **params: w.full(node, **params))
lowering("arange", onnx=lambda w, node, **params: w.arange(node, **params))
