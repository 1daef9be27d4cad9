"""Creating tensors: ``tensor from_numpy as_tensor zeros ones full empty arange linspace eye rand
randn randint randperm *_like``."""
import contextlib
import math
import numbers

import numpy as np  # host-side parsing of user data only; computation goes through backends

from . import dtypes as dt
from .backends import backend_for
from .device import CPU, as_device
from .errors import DTypeError, ShapeError
from .random import default_generator
from .tensor import Tensor


def _shape_arg(op, size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    elif len(size) == 1 and hasattr(size[0], "__iter__") and not isinstance(size[0], (str, bytes)):
        size = tuple(size[0])
    shape = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s.item())
        if not isinstance(s, numbers.Integral) or isinstance(s, bool):
            raise DTypeError(f"{op}: size must be a tuple of ints, got {size!r}")
        if s < 0:
            raise ShapeError(f"{op}: negative dimension {s} in size {tuple(size)}")
        shape.append(int(s))
    return tuple(shape)


def _new(op, data_fn, shape, dtype, device, requires_grad):
    dev = as_device(device, op)
    dtype = dt.as_dtype(dtype, op) or dt.default_float
    bk = backend_for(dev, op)
    n = 1
    for s in shape:
        n *= s
    if n * dtype.itemsize > 1 << 46:
        raise MemoryError(f"{op}: cannot allocate a tensor of shape {shape} and dtype {dtype} "
                          f"({n * dtype.itemsize / 2**30:.1f} GiB)")
    try:
        with _selected(dev):
            data = data_fn(bk, dtype)
    except MemoryError:
        raise MemoryError(f"{op}: out of memory allocating a tensor of shape {shape} and dtype {dtype} "
                          f"({n * dtype.itemsize / 2**30:.2f} GiB) on {dev}") from None
    t = Tensor._make(data, dev)
    if requires_grad:
        _require_grad(op, t)
    return t


def _selected(dev):
    """Backends create arrays on the current device: make ``dev`` current while they do."""
    if dev.type != "cuda":
        return contextlib.nullcontext()
    from .cuda import device as cuda_device
    return cuda_device(dev.index)


def _require_grad(op, t):
    if not t.dtype.is_floating_point:
        raise DTypeError(f"{op}: only tensors of floating point dtype can require gradients, got {t.dtype}")
    t.requires_grad_(True)


def _infer_dtype(obj):
    """PyTorch's inference for nested data: Python bool, int and float are bool, int64 and float32;
    NumPy scalars and arrays keep their own dtype; the elements' dtypes are promoted together."""
    result = None
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
            continue
        if isinstance(x, (np.generic, np.ndarray)):
            d = dt.from_numpy_dtype(x.dtype, "tensor")
        else:
            d = dt.default_for_category(dt.scalar_category(x))
        result = d if result is None else dt.promote(result, d)
    return result or dt.default_float


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
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
            if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flatten_once(data)):
                data = _tensors_to_lists(data)
            if dtype is None:
                try:
                    dtype = _infer_dtype(data)
                except DTypeError:
                    raise DTypeError(f"tensor: could not infer dtype of {type(data).__name__}") from None
            try:
                arr = np.array(data, dtype=dtype.numpy if dtype.numpy is not None else np.float32)
            except ValueError as e:
                raise ShapeError(f"tensor: expected a rectangular nested sequence of numbers, got ragged "
                                 f"or invalid data ({e})") from None
            except TypeError as e:
                raise DTypeError(f"tensor: could not convert data of type {type(data).__name__} ({e})") from None
            except OverflowError as e:
                raise DTypeError(f"tensor: a value does not fit in {dtype} ({e})") from None
            if arr.dtype == object:
                raise DTypeError("tensor: could not convert data made of non-numbers")
        dev = as_device(device, "tensor")
        bk = backend_for(dev, "tensor")
        with _selected(dev):
            data_arr = bk.from_numpy(np.array(arr, copy=True), dtype)
        out = Tensor._make(data_arr, dev)
    if pin_memory:
        out = out.pin_memory()
    if requires_grad:
        _require_grad("tensor", out)
    return out


def _flatten_once(data):
    for x in data:
        if isinstance(x, (list, tuple)):
            yield from _flatten_once(x)
        else:
            yield x


def _tensors_to_lists(data):
    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_tensors_to_lists(x) for x in data]
    return data


def as_tensor(data, dtype=None, device=None):
    if not isinstance(data, Tensor) and hasattr(data, "__cuda_array_interface__"):
        # CuPy, Numba, PyTorch CUDA arrays: shared without a copy, as PyTorch does
        from ._interop import from_cuda_array_interface
        data = from_cuda_array_interface(data)
    if isinstance(data, Tensor) and (dtype is None or data.dtype is dt.as_dtype(dtype)) and (
            device is None or data.device == as_device(device)):
        return data
    if isinstance(data, np.ndarray) and device in (None, "cpu") and (dtype is None or dt.as_dtype(dtype).numpy == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype, device)


def from_numpy(array):
    if not isinstance(array, np.ndarray):
        raise DTypeError(f"from_numpy: expected np.ndarray, got {type(array).__name__}")
    dt.from_numpy_dtype(array.dtype, "from_numpy")
    if array.dtype not in (np.bool_, np.int32, np.int64, np.float16, np.float32, np.float64):
        raise DTypeError(f"from_numpy: NumPy dtype {array.dtype} cannot be shared without a copy; "
                         "use adcuda.tensor(array) instead")
    return Tensor._make(array, CPU)


def from_dlpack(ext_tensor):
    """A tensor sharing the memory of ``ext_tensor``, any object with ``__dlpack__`` (NumPy, PyTorch,
    CuPy, JAX arrays, adcuda tensors): no copy, on the CPU or on the GPU."""
    from ._interop import from_dlpack as _from_dlpack
    return _from_dlpack(ext_tensor)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    shape = _shape_arg("zeros", size)
    return _new("zeros", lambda bk, d: bk.full(shape, 0, d), shape, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    shape = _shape_arg("ones", size)
    return _new("ones", lambda bk, d: bk.full(shape, 1, d), shape, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, pin_memory=False):
    shape = _shape_arg("empty", size)
    out = _new("empty", lambda bk, d: bk.empty(shape, d), shape, dtype, device, False)
    if pin_memory:
        out = out.pin_memory()
    if requires_grad:
        _require_grad("empty", out)
    return out


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    shape = _shape_arg("full", (size,) if not isinstance(size, (tuple, list)) else (tuple(size),))
    if dtype is None:
        dtype = dt.default_for_category(dt.scalar_category(fill_value))
    return _new("full", lambda bk, d: bk.full(shape, fill_value, d), shape, dtype, device, requires_grad)


def zeros_like(input, dtype=None, device=None, requires_grad=False):
    return zeros(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def ones_like(input, dtype=None, device=None, requires_grad=False):
    return ones(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def empty_like(input, dtype=None, device=None, requires_grad=False):
    return empty(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False):
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def rand_like(input, dtype=None, device=None, requires_grad=False):
    return rand(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def randn_like(input, dtype=None, device=None, requires_grad=False):
    return randn(tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    if step == 0:
        raise ShapeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise ShapeError(f"arange: upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    if dtype is None:
        dtype = dt.default_float if any(isinstance(v, float) for v in vals) else dt.int64
    n = max(math.ceil((end - start) / step), 0)
    return _new("arange", lambda bk, d: bk.slice(bk.arange(start, start + n * step, step, d), (slice(0, n),)),
                (n,), dtype, device, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    if steps < 0:
        raise ShapeError(f"linspace: number of steps must be non-negative, got {steps}")
    values = np.linspace(float(start), float(end), int(steps))
    return tensor(values, dtype=dtype or dt.default_float, device=device, requires_grad=requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    m = n if m is None else m
    if n < 0 or m < 0:
        raise ShapeError(f"eye: n and m must be non-negative, got {n} and {m}")
    return tensor(np.eye(n, m), dtype=dtype or dt.default_float, device=device, requires_grad=requires_grad)


def _random(op, prim, shape, dtype, device, requires_grad, generator, *args):
    gen = generator or default_generator
    n = 1
    for s in shape:
        n *= s

    def draw(bk, d):
        seed, offset = gen.next_offset(n)
        return getattr(bk, prim)(*args, shape, d, seed, offset)
    return _new(op, draw, shape, dtype, device, requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    shape = _shape_arg("rand", size)
    if dtype is not None and not dt.as_dtype(dtype).is_floating_point:
        raise DTypeError(f"rand: expected a floating point dtype, got {dtype}")
    return _random("rand", "rand", shape, dtype, device, requires_grad, generator)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    shape = _shape_arg("randn", size)
    if dtype is not None and not dt.as_dtype(dtype).is_floating_point:
        raise DTypeError(f"randn: expected a floating point dtype, got {dtype}")
    return _random("randn", "randn", shape, dtype, device, requires_grad, generator)


def randint(low, high=None, size=None, generator=None, dtype=None, device=None, requires_grad=False):
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if size is None:
        raise DTypeError("randint: missing required argument 'size'")
    if high <= low:
        raise ShapeError(f"randint: expected low < high, got low={low}, high={high}")
    shape = _shape_arg("randint", (size,))
    return _random("randint", "randint", shape, dtype or dt.int64, device, requires_grad, generator, low, high)


def randperm(n, generator=None, dtype=None, device=None):
    """The order of ``n`` uniform keys from the generator's stream (drawn and sorted on the CPU, so
    the permutation depends only on (seed, offset), whatever the device)."""
    keys = rand(n, generator=generator, dtype=dt.float64)
    return keys.argsort().to(device=device or "cpu", dtype=dtype or dt.int64)


def bernoulli_mask(shape, p, dtype, device, generator=None):
    """1 with probability ``p`` (dropout keeps with probability ``1 - drop``)."""
    shape = tuple(shape)
    gen = generator or default_generator
    n = 1
    for s in shape:
        n *= s

    def draw(bk, d):
        seed, offset = gen.next_offset(n)
        return bk.bernoulli(shape, p, d, seed, offset)
    return _new("bernoulli", draw, shape, dtype, device, False)
