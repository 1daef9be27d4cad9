"""``adcuda.Tensor``: a backend array plus what autograd needs.

The array (``_data``) belongs to the tensor's device backend and carries shape, strides and dtype;
the tensor adds ``requires_grad``, ``grad``, ``grad_fn``, a version counter shared with its views,
and the view's base. Ops are defined in ``adcuda.ops`` and attached as methods there.
"""
import weakref

import numpy as np

from . import dtypes as dt
from .backends import backend_for
from .device import CPU, as_device
from .errors import AutogradError, DeviceError, DTypeError, ShapeError, fmt_shape
from .autograd.grad_mode import is_grad_enabled
from .autograd.graph import AccumulateGrad, RemovableHandle


_NUMPY_TO_DTYPE = dt._FROM_NUMPY


class VersionCounter:
    """Bumped by every in-place write; shared by a tensor and all its views."""
    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


class Tensor:
    __slots__ = ("_data", "_device", "_requires_grad", "grad", "_grad_fn", "_output_nr", "_version",
                 "_base", "_view_fn", "_view_version", "_accumulator", "_hooks", "_retains_grad",
                 "__weakref__")

    __array_priority__ = 1000  # NumPy defers ``ndarray + Tensor`` to Tensor.__radd__

    def __init__(self, *args, **kwargs):
        raise TypeError("use adcuda.tensor(data) or a factory (zeros, ones, ...) to create a Tensor")

    @classmethod
    def _make(cls, data, device=CPU, requires_grad=False):
        t = object.__new__(cls)
        t._data = data
        t._device = device
        t._requires_grad = requires_grad
        t.grad = None
        t._grad_fn = None
        t._output_nr = 0
        t._version = VersionCounter()
        t._base = None
        t._view_fn = None
        t._view_version = None
        t._accumulator = None
        t._hooks = None
        t._retains_grad = False
        return t

    # ------------------------------------------------------------------ metadata
    @property
    def _backend(self):
        return backend_for(self._device)

    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    @property
    def dtype(self):
        d = _NUMPY_TO_DTYPE.get(self._data.dtype) if self._device is CPU else None
        return d if d is not None else self._backend.dtype_of(self._data)

    @property
    def device(self):
        return self._device

    @property
    def is_cuda(self):
        return self._device.type == "cuda"

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    def numel(self):
        n = 1
        for s in self._data.shape:
            n *= s
        return n

    nelement = numel

    def element_size(self):
        return self.dtype.itemsize

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def is_contiguous(self):
        # asked of the array itself: a backend's contiguous() would copy a non-contiguous one to answer
        data = self._data
        return data.flags.c_contiguous if self._device is CPU else data.is_contiguous()

    def stride(self, dim=None):
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        return strides if dim is None else strides[_wrap_dim(dim, self.ndim, "stride")]

    def data_ptr(self):
        return self._data.__array_interface__["data"][0] if self._device is CPU else self._data.data_ptr()

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # ------------------------------------------------------------------ autograd state
    @property
    def grad_fn(self):
        # A view whose base was written in place since its history was recorded reads its
        # history again from the base (PyTorch regenerates a view's grad_fn the same way).
        if self._view_version is not None and self._view_version != self._version.value:
            self._refresh_view_history()
        return self._grad_fn

    @grad_fn.setter
    def grad_fn(self, node):
        self._grad_fn = node
        if self._view_version is not None:
            self._view_version = self._version.value

    def _refresh_view_history(self):
        base = self._base
        self._view_version = self._version.value
        if self._grad_fn is None and not base.requires_grad:
            return
        from .autograd.grad_mode import enable_grad
        with enable_grad():
            fresh = self._view_fn(base)
        self._grad_fn, self._output_nr = fresh._grad_fn, fresh._output_nr

    @property
    def requires_grad(self):
        return self._requires_grad or self.grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value):
        if self.grad_fn is not None:
            if not value:
                raise AutogradError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a "
                    "computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach().")
            return
        if value and not self.dtype.is_floating_point:
            raise DTypeError(f"requires_grad: only Tensors of floating point dtype can require "
                             f"gradients, got {self.dtype}")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def retains_grad(self):
        return self._retains_grad

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, value):
        if value.shape != self.shape and self._base is not None:
            raise ShapeError("data: cannot change the shape of a view's data")
        self._data = value._data
        self._device = value._device

    def _edge(self):
        """(node, output index) that gradients for this tensor flow into, or (None, 0)."""
        if self.grad_fn is not None:
            return self.grad_fn, self._output_nr
        if self._requires_grad:
            acc = self._accumulator() if self._accumulator is not None else None
            if acc is None:
                acc = AccumulateGrad(self)
                self._accumulator = weakref.ref(acc)
            return acc, 0
        return None, 0

    def detach(self):
        t = Tensor._make(self._data, self._device)
        t._version = self._version
        return t

    def detach_(self):
        if self._base is not None and self._base.requires_grad:
            raise AutogradError("detach_: can't detach a view of a tensor that requires grad in place; "
                                "use detach()")
        self._grad_fn = None
        self._view_version = None
        self._requires_grad = False
        return self

    def retain_grad(self):
        node = self.grad_fn
        if node is None:
            if not self._requires_grad:
                raise AutogradError("retain_grad: can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._retains_grad:
            return
        self._retains_grad = True
        self._attach_retain_hook(node)

    def _attach_retain_hook(self, node):
        """Hook ``retain_grad`` on the node that produces this tensor now (an in-place op moves it
        to the new node, so ``.grad`` is the gradient of the latest value). The hook holds the
        tensor weakly: the graph must not keep it alive."""
        ref = weakref.ref(self)

        def retain(grad):
            t = ref()
            if t is not None:
                g = grad if is_grad_enabled() else grad.detach()
                t.grad = g.clone() if t.grad is None else t.grad + g
        node.set_retain_hook(self._output_nr, retain)

    def register_hook(self, hook):
        if not self.requires_grad:
            raise AutogradError("register_hook: cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            return self.grad_fn.add_pre_hook(self._output_nr, hook)
        if self._hooks is None:
            self._hooks = {}
        return RemovableHandle(self._hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        from .autograd import backward
        backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs)

    def _add_inplace_data(self, other):
        """``self.data += other.data`` without autograd (gradient accumulation)."""
        bk = self._backend
        bk.copy_(self._data, bk.binary("add", self._data, other._data, self.dtype))
        self._version.value += 1

    def _all_finite(self):
        bk = self._backend
        finite = bk.binary("eq", self._data, self._data, self.dtype)  # NaN != NaN
        bounded = bk.binary("lt", bk.unary("abs", self._data), float("inf"), self.dtype)
        return bool(bk.to_numpy(bk.reduce("all", bk.binary("logical_and", finite, bounded, dt.bool_),
                                          None, False)))

    # ------------------------------------------------------------------ conversions
    def numpy(self, *, force=False):
        if self.requires_grad and not force:
            raise AutogradError("numpy: can't call numpy() on a Tensor that requires grad. "
                                "Use tensor.detach().numpy() instead.")
        if self._device is not CPU and not force:
            raise DTypeError(f"numpy: can't convert a {self._device} tensor to NumPy; use .cpu() first")
        return self._backend.to_numpy(self._data)

    def pin_memory(self, device=None):
        """A copy of this CPU tensor in page-locked memory from adcuda's pinned pool (this tensor if it
        is pinned already), from which ``.to("cuda", non_blocking=True)`` copies asynchronously. Needs
        CUDA, as in PyTorch."""
        from .cuda import pinned
        if self._device is not CPU:
            raise DeviceError(f"pin_memory: only CPU tensors can be pinned; this tensor is on {self._device}")
        if pinned.is_pinned_array(self._data):
            return self
        out = Tensor._make(pinned.pin_array(self._data, "pin_memory"), CPU)
        from .ops._core import needs_grad, record
        if needs_grad(self):
            record("PinMemoryBackward0", out, (self,), lambda node, g: g)
        return out

    def is_pinned(self, device=None):
        """Whether this CPU tensor's memory is page-locked (False for CUDA tensors and without CUDA)."""
        from .cuda import pinned
        return self._device is CPU and pinned.is_pinned_array(self._data)

    def __dlpack__(self, stream=None, *, max_version=None, dl_device=None, copy=None):
        from ._interop import to_dlpack
        return to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        from ._interop import dlpack_device
        return dlpack_device(self)

    @property
    def __cuda_array_interface__(self):
        from ._interop import cuda_array_interface
        return cuda_array_interface(self)

    def __array__(self, dtype=None, copy=None):
        a = self.detach().cpu().numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise ShapeError(f"item: a Tensor with {self.numel()} elements cannot be converted to a "
                             f"Python scalar (shape {fmt_shape(self.shape)})")
        return self._backend.to_numpy(self._data).reshape(()).item()

    def tolist(self):
        return self._backend.to_numpy(self._data).tolist()

    def __bool__(self):
        if self.numel() != 1:
            raise ShapeError(f"bool: the truth value of a Tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.category != dt.INTEGER or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __hash__(self):
        return id(self)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __repr__(self):
        array = self._backend.to_numpy(self._data)
        formatter = {"float_kind": _float_formatter(array)} if array.dtype.kind == "f" else None
        body = np.array2string(array, separator=", ", prefix="tensor(", formatter=formatter)
        extras = []
        if self._device is not CPU:
            extras.append(f"device='{self._device}'")
        if self.dtype not in (dt.float32, dt.int64, dt.bool_):
            extras.append(f"dtype={self.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    def __reduce_ex__(self, protocol):
        from .factories import tensor as _tensor_factory
        return (_rebuild, (self.detach().cpu().numpy(), str(self._device), self._requires_grad))

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise AutogradError("deepcopy: only Tensors created explicitly by the user (graph leaves) "
                                "support the deepcopy protocol")
        t = self.detach().clone()
        t._requires_grad = self._requires_grad
        if self.grad is not None:
            t.grad = self.grad.detach().clone()
        memo[id(self)] = t
        return t


def _float_formatter(array):
    """PyTorch's way of printing floats: ``1.`` when every value is whole, four decimals otherwise,
    scientific when the magnitudes span too much; all padded to one width."""
    values = np.asarray(array, dtype=np.float64)
    if values.size > 1000:  # only the summarised corners are printed
        values = np.concatenate([values.ravel()[:500], values.ravel()[-500:]])
    finite = np.abs(values[np.isfinite(values)])
    nonzero = finite[finite != 0]
    big = nonzero.size and (nonzero.max() > 1e8 or nonzero.max() / nonzero.min() > 1000)
    if finite.size == 0 or np.all(finite == np.floor(finite)):
        fmt = "{:.4e}" if big else "{:.0f}."
    else:
        fmt = "{:.4e}" if big or nonzero.min() < 1e-4 else "{:.4f}"

    def one(v):
        return fmt.format(v) if np.isfinite(v) else str(float(v))
    width = max((len(one(v)) for v in values.ravel()), default=0)
    return lambda v: one(v).rjust(width)


def _rebuild(array, device, requires_grad):
    from .factories import tensor as _tensor_factory
    return _tensor_factory(array, device=device, requires_grad=requires_grad)


class Size(tuple):
    """``tensor.shape``: a tuple that prints like PyTorch's."""

    def __repr__(self):
        return f"adcuda.Size({list(self)})"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


def _wrap_dim(dim, ndim, op):
    """A possibly negative ``dim`` as an index into a shape of ``ndim`` dims (0-d acts as 1-d)."""
    from .errors import IndexOutOfRangeError
    n = max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if dim < -n or dim >= n:
        raise IndexOutOfRangeError(
            f"{op}: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def _is_tensor(x):
    return isinstance(x, Tensor)


def to_device_and_dtype(t, device=None, dtype=None, copy=False, op="to", non_blocking=False):
    """Shared by ``Tensor.to``, ``cuda()``, ``cpu()``, ``float()``, ..."""
    device = t._device if device is None else as_device(device, op)
    dtype = t.dtype if dtype is None else dt.as_dtype(dtype, op)
    if device == t._device and dtype is t.dtype and not copy:
        return t
    from .ops.conversion import convert
    return convert(t, device, dtype, non_blocking=non_blocking, op=op)
