"""``adcuda.Tensor``: a plain data holder over a backend array.

The array (``_data``) belongs to the tensor's device backend and carries shape, strides and dtype;
the tensor adds the fields autograd and in-place writes keep per tensor: ``requires_grad``,
``grad``, the node that produced it, a version counter shared with its views, and the view's base.
This module gives those fields and the read-only metadata, and what a node of autograd's is to a
tensor (``NodeName``, and the ``GradFn`` protocol ``grad_fn`` is typed with); it imports no op and
nothing from autograd. The autograd layer attaches the graph behaviour (``backward``, ``grad_fn``, hooks,
``retain_grad``, ...) and the ops layer attaches every op as a method (see ``adcuda/ops/registry.py``).

Most fields live as class-level defaults and are only written per tensor when they change, so that
making the result of an op costs two attribute writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast, overload

import numpy as np

from . import dtypes as dt
from .backends import backend_for
from .backends import cpu as _cpu
from .device import CPU
from .errors import (
    AutogradError,
    DTypeError,
    IndexOutOfRangeError,
    InvalidArgumentError,
    NumericOverflowError,
    ShapeError,
    fmt_shape,
)
from .layouts import strided

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any

    from numpy import ndarray

    from .backends.seam import BackendArray, CPUArray, CUDAArray
    from .device import device as Device
    from .dtypes import DType, Number
    from .hooks import RemovableHandle

_NUMPY_TO_DTYPE: dict[Any, DType] = dt._FROM_NUMPY  # looked up by the dtype object of either backend's array


class VersionCounter:
    """Bumped by every in-place write; shared by a tensor and all its views."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


class NodeName(str):
    """An autograd node's name, as a string (``node.name == "MulBackward0"``) that is also callable:
    PyTorch's ``grad_fn.name()`` is a method, and programs written for it call it."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


class GradFn(Protocol):
    """What ``Tensor.grad_fn`` is to a type checker: the autograd node that produced a tensor, as far as
    tensors and their users see it. The class is ``adcuda.autograd.Node`` (autograd/graph.py, which keeps
    to this protocol); it sits above this module, which it imports, so the declarations of Tensor's
    members name this protocol instead and a type checker sees no import circle."""

    name: NodeName

    @property
    def next_functions(self) -> tuple[tuple[GradFn | None, int], ...]: ...

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]: ...

    def add_pre_hook(self, output_nr: int, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle: ...


if TYPE_CHECKING:
    # what the autograd and ops layers attach to Tensor at import (every op method, operator and
    # property, backward, requires_grad, ...), declared for type checkers by a stub generated from the
    # live package (scripts/gen_type_stubs.py); at run time Tensor has no base class. The stub names
    # nothing of this module (it would be an import circle): its TensorOps is generic over the names of
    # this module its declarations use, which Tensor binds here.
    from ._tensor_ops import TensorOps

    _AttachedAtImport = TensorOps["Tensor", "GradFn"]
else:
    _AttachedAtImport = object


class Tensor(_AttachedAtImport):
    __array_priority__ = 1000  # NumPy defers ``ndarray + Tensor`` to Tensor.__radd__

    # set by _make for every tensor: the array, held by its device's backend, and that device
    _data: BackendArray
    _device: Device

    # per-tensor state, written only where it differs from these defaults
    grad: Tensor | None = None
    _requires_grad = False
    _grad_fn = None  # the autograd node that produced this tensor (None for leaves)
    _output_nr = 0  # which output of that node this tensor is
    _vc = None  # the VersionCounter, made on first need (see ``_version``)
    _base = None  # for a view: the tensor whose memory it shares
    _view_fn = None  # for a view: how to rebuild it from its base (see replay_view)
    _view_version = None  # for a recorded view: the version its history was recorded at
    _accumulator = None  # a leaf's AccumulateGrad node
    _hooks: dict[int, Callable[[Tensor], Tensor | None]] | None = None  # a leaf's gradient hooks
    _retains_grad = False
    # a dense tensor's layout (adcuda/ops/sparse.py's SparseTensor, a subclass, says sparse_coo)
    layout = strided
    is_sparse = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # ``Tensor(data)``, PyTorch's legacy constructor, is made by __new__ (ops/factories.py)

    def __format__(self, spec: str) -> str:
        # f"{loss:.4f}": a 0-d tensor formats as its Python number, as in PyTorch
        if self._data.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    @classmethod
    def _make(cls, data, device=CPU):
        t = object.__new__(cls)
        t._data = data
        t._device = device
        return t

    @property
    def _version(self):
        """The version counter (made on first use: most tensors are never written in place or saved
        for backward; a view uses its base's)."""
        return version_counter(self)

    @_version.setter
    def _version(self, counter):
        self._vc = counter

    # ------------------------------------------------------------------ metadata
    @property
    def _backend(self):
        return backend_for(self._device)

    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None) -> Size | int:
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_own_dim(dim, self._data.ndim, "size")]

    @property
    def dtype(self) -> DType:
        if self._device is CPU:  # (read on nearly every op call: the CPU case in as few steps as it takes)
            d = _NUMPY_TO_DTYPE.get(self._data.dtype)
            if d is not None:
                return d
        return backend_for(self._device).dtype_of(self._data)

    @property
    def device(self) -> Device:
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._device.type == "cpu"

    # PyTorch's other device kinds and tensor kinds, which adcuda's tensors never are (programs test
    # them to pick a code path: `if x.is_mps: ...`)
    @property
    def is_xpu(self) -> bool:
        return False

    @property
    def is_mps(self) -> bool:
        return False

    @property
    def is_meta(self) -> bool:
        return False

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def is_mkldnn(self) -> bool:
        return False

    @property
    def is_nested(self) -> bool:
        return False

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    # PyTorch's other spellings of the same facts
    ndimension = dim

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def get_device(self) -> int:
        """The CUDA device's index, or -1 for a CPU tensor (PyTorch's convention)."""
        return -1 if self._device.type == "cpu" else self._device.index

    def is_complex(self) -> bool:
        return False  # adcuda has no complex dtypes

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_contiguous(self) -> bool:
        # asked of the array itself: a backend's contiguous() would copy a non-contiguous one to answer
        if self._device is CPU:
            return cast("CPUArray", self._data).flags.c_contiguous
        return cast("CUDAArray", self._data).is_contiguous()

    @overload
    def stride(self, dim: None = None) -> tuple[int, ...]: ...
    @overload
    def stride(self, dim: int) -> int: ...
    def stride(self, dim: int | None = None) -> tuple[int, ...] | int:
        data = self._data
        strides = tuple(s // data.itemsize for s in data.strides)
        if 0 in strides:
            strides = _empty_strides(data.shape, strides) if 0 in data.shape else _unit_dim_strides(data.shape, strides)
        return strides if dim is None else strides[_own_dim(dim, data.ndim, "stride")]

    def data_ptr(self) -> int:
        if self._device is CPU:
            return cast("CPUArray", self._data).__array_interface__["data"][0]
        return cast("CUDAArray", self._data).data_ptr()

    def __len__(self) -> int:
        if self.ndim == 0:
            raise DTypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    # ------------------------------------------------------------------ reading values
    def numpy(self, *, force: bool = False) -> ndarray:
        if not force and (self._requires_grad or self._grad_fn is not None):
            raise AutogradError(
                "numpy: can't call numpy() on a Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        if self._device is not CPU and not force:
            raise DTypeError(f"numpy: can't convert a {self._device} tensor to NumPy; use .cpu() first")
        return primitives(self).to_numpy(self._data)

    def __array__(self, dtype=None, copy=None):
        a = primitives(self).to_numpy(self._data)
        return a if dtype is None else a.astype(dtype)

    def item(self) -> Number:
        if self.numel() != 1:
            raise ShapeError(
                f"item: a Tensor with {self.numel()} elements cannot be converted to a "
                f"Python scalar (shape {fmt_shape(self.shape)})"
            )
        return primitives(self).to_numpy(self._data).item()  # (NumPy's item takes any one-element array)

    def tolist(self) -> Any:
        return primitives(self).to_numpy(self._data).tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ShapeError(f"bool: the truth value of a Tensor with {self.numel()} elements is ambiguous")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        value = self.item()
        try:
            return int(value)
        except ValueError:  # NaN: Python's ValueError, as PyTorch raises, as an adcuda error
            raise InvalidArgumentError(f"int: cannot convert float {value} to integer") from None
        except OverflowError:  # inf
            raise NumericOverflowError(f"int: cannot convert float {value} to integer") from None

    def __index__(self) -> int:
        if self.dtype.category != dt.INTEGER or self.numel() != 1:
            raise DTypeError(
                f"__index__: only integer tensors of a single element can be converted to an index "
                f"(got shape {fmt_shape(self.shape)}, {self.dtype})"
            )
        return int(self.item())

    def __hash__(self):
        return id(self)

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise DTypeError("__iter__: iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __repr__(self):
        array = primitives(self).to_numpy(self._data)
        formatter = {"float_kind": _float_formatter(array)} if array.dtype.kind == "f" else None
        body = np.array2string(array, separator=", ", prefix="tensor(", formatter=formatter)
        extras = []
        if self._device is not CPU:
            extras.append(f"device='{self._device}'")
        if self.dtype not in (dt.float32, dt.int64, dt.bool_):
            extras.append(f"dtype={self.dtype}")
        node = self.grad_fn
        if node is not None:
            extras.append(f"grad_fn=<{node.name}>")
        elif self._requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"


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


class Size(tuple):
    """``tensor.shape``: a tuple that prints like PyTorch's."""

    def __repr__(self):
        return f"adcuda.Size({list(self)})"

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


def version_counter(t):
    """``t``'s version counter, made on first need. A view shares its base's (``_base`` is always
    the root of a chain of views), so the counter is made on the base."""
    vc = t._vc
    if vc is None:
        base = t._base
        if base is None:
            vc = t._vc = VersionCounter()
        else:
            vc = t._vc = version_counter(base)
    return vc


def replay_view(chain, t):
    """The view a chain of view steps makes of ``t`` (a tensor of the root base's shape). A step is
    ``(parent step, op entry, args, kwargs)``; the chain is walked in a loop, so a view of a view of
    ... stays shallow to call and to free, however long the chain."""
    steps = []
    while chain is not None:
        steps.append(chain)
        chain = chain[0]
    for _, entry, args, kwargs in reversed(steps):
        t = entry(t, *args, **kwargs)
    return t


def version_of(t):
    """The value of ``t``'s version counter, without making one (0 for a tensor that has none yet)."""
    vc = t._vc
    if vc is None:
        base = t._base
        vc = None if base is None else base._vc
        if vc is None:
            return 0
    return vc.value


def wrap_dim(dim, ndim, op):
    """A possibly negative ``dim`` as an index into a shape of ``ndim`` dims (0-d acts as 1-d)."""
    if dim.__class__ is int:  # the common case first: nearly every op with a dim calls this
        if 0 <= dim < ndim:
            return dim
        if -ndim <= dim < 0:
            return dim + ndim
    n = max(ndim, 1)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        if not (isinstance(dim, Tensor) and dim.numel() == 1 and dim.dtype.category != dt.FLOATING):
            raise DTypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
        dim = int(dim.item())  # a one-element integer tensor, as PyTorch takes it
    if dim < -n or dim >= n:
        raise IndexOutOfRangeError(
            f"{op}: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    return dim + n if dim < 0 else dim


def _own_dim(dim, ndim, op):
    """``wrap_dim`` for what only a real dim has (its size, its stride): a 0-d tensor has none."""
    if ndim == 0 and isinstance(dim, (int, np.integer)):
        raise IndexOutOfRangeError(f"{op}: dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(dim, ndim, op)


# ----------------------------------------------------------------------------------------------
# the primitives of a tensor's device, as ops and autograd reach them
_primitive_observer = None


def primitives(t):
    """The backend module that computes on ``t``'s device. While a hook watches primitive calls (the
    profiler counting kernel launches, graph capture) it is that hook's view of the module, so every
    primitive call an op or a backward rule makes passes the hook."""
    if _primitive_observer is None:
        return _cpu if t._device is CPU else backend_for(t._device)
    device = t._device
    return _primitive_observer(_cpu if device is CPU else backend_for(device))


def primitives_on(device):
    """``primitives`` for a device rather than a tensor (factories, zero gradients)."""
    backend = _cpu if device is CPU else backend_for(device)
    return backend if _primitive_observer is None else _primitive_observer(backend)


def set_primitive_observer(observer):
    """Install ``observer(backend) -> backend-like`` (or None to remove it); returns the previous one.
    Only the dispatch point (``adcuda.ops.dispatch``) calls this."""
    global _primitive_observer
    previous, _primitive_observer = _primitive_observer, observer
    return previous


def _unit_dim_strides(shape, strides):
    """PyTorch's stride for a dim of size 1 that NumPy strides by 0 (a new axis: ``x[None]``,
    ``unsqueeze``): the extent of the dims after it, as PyTorch's unsqueeze gives it. Such a stride is
    never stepped along, so only what ``stride()`` reports changes."""
    out = list(strides)
    for i in range(len(shape) - 1, -1, -1):
        if shape[i] == 1 and out[i] == 0:
            out[i] = out[i + 1] * shape[i + 1] if i + 1 < len(shape) else 1
    return tuple(out)


def _empty_strides(shape, strides):
    """PyTorch's strides for a tensor with no elements: NumPy gives a new empty array strides of 0, where
    PyTorch lays it out row-major with each size counted as at least 1 (``zeros(0, 5)``: (5, 1)). A view
    of a non-empty array (a slice to nothing) keeps the strides it has."""
    if any(st for st in strides):
        return strides
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))
