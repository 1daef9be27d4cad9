"""Indexing: ``t[key]`` and ``t[key] = v`` (ints, slices with steps, None, Ellipsis, integer
tensors and boolean masks), gather, scatter_add, index_select, index_put, masked_fill, tril, triu,
one_hot.

Forwards call the backend's index family (``slice index index_put_ gather scatter_add tril triu``:
``kernels/index.cu``, ``kernels/layout.cu``)."""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import operator
from typing import TYPE_CHECKING, Literal, overload

import numpy as np

from .. import dtypes as dt
from .._native import _C
from ..autograd.graph import needs_grad
from ..backends import device_caches
from ..backends.cpu import slice as _cpu_slice
from ..backends.cpu import where as _cpu_where
from ..backends.cpu.index import (
    embedded_diagonals,
    gathered_along,
    indexed_along,
    masked_scattered,
    nonzero_rows,
    one_hot_rows,
    scattered_along,
)
from ..backends.memo import remember
from ..device import CPU
from ..errors import (
    DeviceError,
    DTypeError,
    IndexOutOfRangeError,
    IndexValueError,
    ShapeError,
    UnsupportedDTypeError,
    fmt_shape,
)
from ..tensor import Tensor, primitives, primitives_on
from . import dispatch as _dispatch
from .common import broadcast_shapes, cast, constant, filled, int_tuple, scalar_into, wrap, wrap_dim
from .dispatch import host_step
from .dtype_support import ANY, FLOATING_OR_BOOL, NUMBERS
from .dtype_support import check as check_dtype
from .elementwise import where
from .factories import arange, full, new_tensor, tensor
from .mutation import check_inplace_allowed, commit_inplace, version_counter
from .registry import get, lowering, op

if TYPE_CHECKING:
    from ..types import Any, Device, DType, EllipsisType, Number, Sequence

_PLAIN = (int, type(None))  # slice bounds the backend takes as they are
_NUMBERS = frozenset((int, float, bool))  # the fill values the direct lanes take (a tensor's go the forward's way)
_SIZES = frozenset((int, tuple, list))  # the shapes unravel_index's direct lane takes


def _is_basic_item(k):
    return (
        k is None
        or k is Ellipsis
        or isinstance(k, slice)
        or (isinstance(k, numbers.Integral) and not isinstance(k, bool))
    )


def _int_or_none(bound):
    """A slice bound as an int (a 0-d tensor's value too), or None."""
    if bound is None or bound.__class__ is int:
        return bound
    if bound.__class__ is Tensor and bound._device is CPU:
        data = bound._data
        if data.__class__ is np.ndarray and data.dtype is _INT64 and not data.ndim:
            return data.item()  # (a CPU int64 scalar's value: int()'s checks and calls cannot fail here)
    return int(bound)


def _sequence_as_tuple(key):
    """PyTorch reads a list key that holds a slice, None, Ellipsis, a sequence, a tensor or an array as
    a tuple of indices (``x[[0, [1]]]`` is ``x[0, [1]]``), any other sequence as one index tensor
    (``x[[0, 1]]``, ``x[range(2)]``)."""
    if len(key) >= 32:
        return False
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, (slice, list, tuple, range)):
            return True
        if isinstance(k, Tensor):
            return True
        if hasattr(k, "__array__") and getattr(k, "ndim", 0):
            return True
    return False


def convert_key(input, key, name):
    """``(backend key, basic, move)``: the key as the backend takes it (NumPy's rules), whether it is
    basic (gives a view), and where PyTorch's rule places the dims of the index tensors elsewhere than
    NumPy's: None, or ``(at, to, count, ndim)``: the ``count`` dims at ``at`` of NumPy's result (of ``ndim``
    dims) belong at ``to``."""
    if key.__class__ is int:
        return (key,), True, None
    if key.__class__ is Tensor and key._device is input._device:
        # one index tensor (x[idx], x[mask]): what the loop below makes of it, without its bookkeeping
        # (a single index places its dims alike by NumPy's rule and PyTorch's)
        # (a 0-d integer tensor is an int index below: a selection, a view, as in PyTorch)
        kind = key.dtype
        if kind is dt.bool_ or kind.category == dt.INTEGER and key._data.ndim:
            return (key._data,), False, None
    if (
        key.__class__ is slice
        and key.start.__class__ in _PLAIN
        and key.stop.__class__ in _PLAIN
        and (key.step is None or key.step.__class__ is int and key.step > 0)
    ):
        return (key,), True, None
    if key.__class__ is slice and key.step is None:
        # x[a:b] with bounds of another kind (0-d tensors): what the loop below makes of it
        return (slice(_int_or_none(key.start), _int_or_none(key.stop)),), True, None
    if key.__class__ is tuple:
        # a tuple of ints and plain slices (x[:, 1], select, narrow) is basic and taken as it is: what
        # the loop below makes of it, without its bookkeeping
        for k in key:
            if k.__class__ is int:
                continue
            if (
                k.__class__ is not slice
                or k.start.__class__ not in _PLAIN
                or k.stop.__class__ not in _PLAIN
                or not (k.step is None or k.step.__class__ is int and k.step > 0)
            ):
                break
        else:
            return key, True, None
    if not isinstance(key, tuple):
        key = tuple(key) if isinstance(key, list) and _sequence_as_tuple(key) else (key,)
    out, basic = [], True
    kinds = []  # per item: (kind, dims of the index) for placing the index dims as PyTorch does
    for k in key:
        if isinstance(k, Tensor):
            if k._device != input._device:
                raise IndexOutOfRangeError(f"{name}: indices on {k._device} for a tensor on {input._device}")
            if k.dtype is not dt.bool_ and k.dtype.category != dt.INTEGER:
                raise IndexOutOfRangeError(
                    f"{name}: tensors used as indices must be long, int or bool tensors, got {k.dtype}"
                )
            if k.ndim == 0 and k.dtype is not dt.bool_:  # as PyTorch, an int: a selection, and a view
                out.append(k.item())
                kinds.append(("int", 0, 1))
                continue
            out.append(k._data)
            basic = False
            if k.dtype is dt.bool_:
                kinds.append(("array", 1, k.ndim))
            else:
                kinds.append(("int", 0, 1) if k.ndim == 0 else ("array", k.ndim, 1))
        elif isinstance(k, slice):
            if k.step is not None and int(k.step) <= 0:
                raise ValueError(f"{name}: slice step must be greater than zero, got {k.step}")
            out.append(slice(_int_or_none(k.start), _int_or_none(k.stop), _int_or_none(k.step)))
            kinds.append(("kept", 1, 1))
        elif _is_basic_item(k):
            if k is None:
                out.append(None)
                kinds.append(("kept", 1, 0))
            elif k is Ellipsis:
                out.append(Ellipsis)
                kinds.append(("ellipsis", 0, 0))
            else:
                out.append(int(k))
                kinds.append(("int", 0, 1))
        elif isinstance(k, bool):
            out.append(k)
            basic = False
            kinds.append(("array", 1, 0))
        elif isinstance(k, (list, tuple, range)) or hasattr(k, "__array__"):
            idx = tensor(k, device=input._device)
            if idx.numel() == 0:
                idx = cast(idx, dt.int64)
            return convert_key(input, key[: len(out)] + (idx,) + key[len(out) + 1 :], name)
        elif isinstance(k, (str, bytes, dict, set)):
            raise DTypeError(f"{name}: unsupported index of type {type(k).__name__}")
        else:
            raise IndexOutOfRangeError(
                f"{name}: only integers, slices (`:`), ellipsis (`...`), None and long or byte tensors "
                f"are valid indices, got {type(k).__name__}"
            )
    return tuple(out), basic, None if basic else _torch_placement(kinds, input.ndim)


def _torch_placement(kinds, ndim):
    """Where the dims of the index tensors go by PyTorch's rule, if NumPy's puts them elsewhere.

    NumPy counts integers (and 0-d integer tensors) as advanced indices once any index array is
    present, and an Ellipsis, even one standing for no dims, separates index arrays. PyTorch applies
    integers first as selections (they drop their dim and separate nothing) and then indexes with the
    tensors, which are adjacent unless a kept dim (a slice, None, or an Ellipsis over dims) stands
    between them. Adjacent index dims go where the first index stood, else first; the two results then
    differ only by where that block of dims is."""
    ellipsis_dims = ndim - sum(consumed for _, _, consumed in kinds)
    block = max((dims for kind, dims, _ in kinds if kind == "array"), default=0)
    if block == 0:
        return None
    kept_before = []  # kept dims before each item
    kept = 0
    for kind, _, _ in kinds:
        kept_before.append(kept)
        if kind == "kept":
            kept += 1
        elif kind == "ellipsis":
            kept += ellipsis_dims

    def first_and_adjacent(is_advanced, separates):
        positions = [i for i, item in enumerate(kinds) if is_advanced(item)]
        first, last = positions[0], positions[-1]
        adjacent = not any(separates(kinds[i]) for i in range(first + 1, last))
        return (kept_before[first] if adjacent else 0), adjacent

    numpy_at, _ = first_and_adjacent(
        lambda item: item[0] in ("array", "int"), lambda item: item[0] in ("kept", "ellipsis")
    )
    torch_at, _ = first_and_adjacent(
        lambda item: item[0] == "array",
        lambda item: item[0] == "kept" or (item[0] == "ellipsis" and ellipsis_dims > 0),
    )
    if numpy_at == torch_at:
        return None
    if not any(kind == "ellipsis" for kind, _, _ in kinds):
        kept += ellipsis_dims  # the dims after the key's last item are kept too
    return numpy_at, torch_at, block, kept + block


def _moved(t, move, back=False):
    """``t`` (NumPy's layout of an indexing result) with its block of index dims moved to PyTorch's
    place; ``back``: the other way (a value to write, from PyTorch's layout to NumPy's)."""
    at, to, count, _ = move
    if back:
        at, to = to, at
    order = list(range(t.ndim))
    block = order[at : at + count]
    del order[at : at + count]
    order[to:to] = block
    return t.permute(order)


def _index_error(name, input, key, err):
    return IndexOutOfRangeError(
        f"{name}: index {_describe(key)} is out of range or invalid for a tensor "
        f"of shape {fmt_shape(input.shape)} ({err})"
    )


def _describe(key):
    items = key if isinstance(key, tuple) else (key,)
    return (
        "["
        + ", ".join(f"tensor of shape {fmt_shape(k.shape)}" if isinstance(k, Tensor) else repr(k) for k in items)
        + "]"
    )


def _scatter_back(g, shape, bkey, accumulate):
    """A zero tensor of ``shape`` with ``g`` written (or added) at the backend key ``bkey``."""
    return index_put_key(filled(shape, 0, g.dtype, g._device), bkey, g, accumulate)


def _slice_fused_grad(grad, input_shape, bkey):
    """``_scatter_back`` for plain backward, with the primitives alone: the zeros written in place, not
    copied by an out-of-place index_put (the gradient of every piece of a split, at the size of the
    whole)."""
    bk = primitives(grad)
    data = bk.full(tuple(input_shape), 0, grad.dtype)
    bk.index_put_(data, bkey, grad._data, False)
    return wrap(data, grad._device)


# ------------------------------------------------------------------------------------------------
# reading: t[key]
def _slice_array(a, bkey, key):
    """slice_key's array on the CPU, for the view lane (ops/layout.py, "the views' plain cases"): the
    primitive's own view (``storage.slice``, inlined for a tuple key: a piece of split, chunk and unbind
    is one such call); an index out of range raises, and the forward then names it."""
    if bkey.__class__ is not tuple:
        return _cpu_slice(a, bkey)
    return a[bkey if Ellipsis in bkey else bkey + (Ellipsis,)]  # (keeps a 0-d result a view)


@op(
    "slice_key",
    doc="input at a basic key in backend form (ints, slices, None, Ellipsis): a view.",
    view=_slice_array,
    function=False,
    method=False,
    node="SliceBackward0",
    grads={"input": lambda grad, input_shape, bkey: _scatter_back(grad, input_shape, bkey, False)},
    fused={"input": _slice_fused_grad},
)
def slice_key(input: Tensor, bkey: tuple, key: Any = None) -> Tensor:
    try:
        data = primitives(input).slice(input._data, bkey)
    except IndexError as e:
        raise _index_error("index", input, bkey if key is None else key, e) from None
    return wrap(data, input._device)


@op(
    "index_key",
    doc="input at an advanced key in backend form (integer arrays, boolean masks): a copy.",
    function=False,
    method=False,
    node="IndexBackward0",
    grads={"input": lambda grad, input_shape, bkey: _scatter_back(grad, input_shape, bkey, True)},
)
def index_key(input: Tensor, bkey: tuple, key: Any = None) -> Tensor:
    try:
        data = primitives(input).index(input._data, bkey)
    except IndexError as e:
        raise _index_error("index", input, bkey if key is None else key, e) from None
    return wrap(data, input._device)


def _read(input, key):
    """getitem's forward, which is also its direct lane (registry.py's ``direct=``): the ops it calls
    (slice_key's view lane, index_key, the conversions) record, link views and quiet NumPy themselves,
    so the entry's own error-state switch and forward frame are not needed around them; an error raised
    here takes the entry's path, which raises it named."""
    bkey, basic, move = convert_key(input, key, "index")
    if basic:
        return slice_key(input, bkey, key)
    out = index_key(input, bkey, key)
    return out if move is None else _moved(out, move)


@op(
    "getitem",
    doc="input[key]: a view for basic keys, a copy for integer-tensor and mask keys.",
    composite=True,
    function=False,
    method=False,
    operators=("__getitem__",),
    direct=_read,
)
def getitem(input: Tensor, key: Any) -> Tensor:
    return _read(input, key)


def _unrecorded(entry, *tensors):
    """``entry``, an op with a derivative, or its forward alone where none of ``tensors`` takes part in a
    graph: then there is nothing to record, and the entry is most of a small call's cost (the composites
    here call it for their one write or read)."""
    return entry if needs_grad(*tensors) else entry.op.forward


def _on_host(*tensors):
    """Whether each of ``tensors`` is a tensor on the CPU: the direct lanes' first test."""
    for t in tensors:
        if t.__class__ is not Tensor or t._device is not CPU:
            return False
    return True


def _on_cpu(array):
    """A CPU tensor over the host array a direct lane's kernel gave, or None where it gave none."""
    return None if array is None else wrap(array, CPU)


def _untracked(t):
    """Whether ``t`` is a tensor that takes part in no graph (``needs_grad``'s test, without its grad mode
    read): where a direct lane of a composite computes the output itself, with nothing to record."""
    return t.__class__ is Tensor and not (
        t._requires_grad or t._grad_fn is not None or (t._base is not None and t.grad_fn is not None)
    )


def _flat(bk, data):
    """The backend array ``data`` as a 1-D row-major array (a view where it is contiguous)."""
    return bk.view(bk.contiguous(data), (-1,))


def _own_contiguous(bk, input):
    """A row-major copy of ``input``'s array, to write into (the result of an out-of-place write)."""
    data = bk.contiguous(input._data)
    return bk.astype(data, input.dtype) if data is input._data else data


def _take(g, bkey):
    """``g[bkey]`` for a key already in backend form (differentiable)."""
    basic = all(_is_basic_item(k) for k in bkey)
    return slice_key(g, bkey) if basic else index_key(g, bkey)


# ------------------------------------------------------------------------------------------------
# writing: index_put, t[key] = v
def _index_put_input_grad(grad, bkey, accumulate):
    if accumulate:
        return grad
    return index_put_key(grad, bkey, filled((), 0, grad.dtype, grad._device), False)


@op(
    "index_put_key",
    doc="Out-of-place input[bkey] = values (+= with duplicates summed when accumulate).",
    function=False,
    method=False,
    node="IndexPutBackward0",
    grads={"input": _index_put_input_grad, "values": lambda grad, bkey: _take(grad, bkey)},
)
def index_put_key(
    input: Tensor,
    bkey: tuple,
    values: Tensor | Number,
    accumulate: bool = False,
    key: Any = None,
    name: str = "index_put",
) -> Tensor:
    if not isinstance(values, Tensor):
        values = constant(values, input.dtype, input._device)
    values = cast(values, input.dtype)
    data = primitives(input).astype(input._data, input.dtype)
    try:
        primitives(input).index_put_(data, bkey, values._data, accumulate)
    except IndexError as e:
        raise _index_error(name, input, bkey if key is None else key, e) from None
    except ValueError as e:
        raise ShapeError(
            f"{name}: values of shape {fmt_shape(values.shape)} cannot be written to index "
            f"{_describe(bkey if key is None else key)} of a tensor of shape "
            f"{fmt_shape(input.shape)} ({e})"
        ) from None
    return wrap(data, input._device)


@op(
    "index_put",
    doc="Out-of-place input[indices] = values (+= with duplicates summed when accumulate).",
    composite=True,
    inplace=True,
)
def index_put(
    input: Tensor,
    indices: tuple[Tensor | int | slice | EllipsisType | None, ...],  # PyTorch's Tensors, or any item a key takes
    values: Tensor | Number,
    accumulate: bool = False,
) -> Tensor:
    key = tuple(indices)
    # (one index tensor: convert_key's short path for it, the same key as the tuple's)
    bkey, _, move = convert_key(input, key[0] if len(key) == 1 and key[0].__class__ is Tensor else key, "index_put")
    values = _values_in_numpy_layout(values, move)
    return _unrecorded(index_put_key, input, values)(input, bkey, values, accumulate, key)


def _values_in_numpy_layout(value, move):
    """A value to write at an advanced key, its dims laid out as the backend's (NumPy's) indexing result
    has them, from PyTorch's layout (``convert_key``'s ``move``); size-1 dims broadcast as before."""
    if move is None or not isinstance(value, Tensor) or value.ndim == 0:
        return value
    ndim = move[3]
    if value.ndim < ndim:  # a value broadcasts from the right: its missing leading dims are size 1
        value = value.reshape((1,) * (ndim - value.ndim) + tuple(value.shape))
    lead = value.ndim - ndim  # more leading dims than the result has: size 1, or the write fails
    at, to, count, _ = move
    return _moved(value, (at + lead, to + lead, count, ndim), back=True)


@op(
    "setitem",
    doc="input[key] = value, in place.",
    composite=True,
    function=False,
    method=False,
    operators=("__setitem__",),
)
def setitem(input: Tensor, key: Any, value: Tensor | Number) -> None:
    check_inplace_allowed(input, "index_put_")
    if isinstance(value, Tensor) and value._device != input._device:
        raise DeviceError(f"index_put_: value on {value._device} for a tensor on {input._device}")
    bkey, basic, move = convert_key(input, key, "index_put_")
    value = _values_in_numpy_layout(value, move)
    if needs_grad(input, value):
        if basic:
            _write_into_view(input, key, value)
        else:
            commit_inplace(input, index_put_key(input, bkey, value, False, key, "index_put_"), "index_put_")
        return
    bk = primitives(input)
    vdata = value._data if isinstance(value, Tensor) else value
    try:
        if basic:
            bk.copy_(bk.slice(input._data, bkey), vdata)
        else:
            bk.index_put_(input._data, bkey, vdata, False)
    except IndexError as e:
        raise _index_error("index_put_", input, key, e) from None
    except ValueError as e:
        vshape = fmt_shape(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ShapeError(
            f"index_put_: value of shape {vshape} cannot be written to index "
            f"{_describe(key)} of a tensor of shape {fmt_shape(input.shape)} ({e})"
        ) from None
    version_counter(input).value += 1


def _write_into_view(input, key, value):
    """``input[key] = value`` for a basic key while recording: an in-place write into the view,
    so only the view's elements are copied and the base's history becomes CopySlices."""
    target = getitem(input, key)
    if not isinstance(value, Tensor):
        value = filled((), value, input.dtype, input._device)
    elif value.dtype is not input.dtype:
        value = value.to(dtype=input.dtype)
    try:
        value = value.expand(tuple(target.shape))
    except ShapeError:
        raise ShapeError(
            f"index_put_: value of shape {fmt_shape(value.shape)} cannot be written to index "
            f"{_describe(key)} of a tensor of shape {fmt_shape(input.shape)} (the indexed "
            f"part has shape {fmt_shape(target.shape)})"
        ) from None
    commit_inplace(target, value, "index_put_")


# ------------------------------------------------------------------------------------------------
# gather, scatter_add, index_select
def _check_index_tensor(name, input, dim, index, same_rank=True):
    if index.__class__ is Tensor and dim.__class__ is int:
        # the common case in a few reads: a non-empty int64 index of the input's rank, a dim in range, every
        # value below the size along it (one pass of the host loop: the checks below find the same)
        data, input_shape = index._data, input._data.shape
        if (
            data.__class__ is np.ndarray
            and data.dtype is _INT64
            and (data.ndim == len(input_shape) or not same_rank and data.ndim)
            and 0 <= dim < len(input_shape)
            and data.size
            and _in_range_on_host(index, input_shape[dim])
        ):
            return dim
    if not isinstance(index, Tensor) or index.dtype.category != dt.INTEGER:
        # a tensor of another dtype: PyTorch's RuntimeError; not a tensor at all: its TypeError
        raise (IndexValueError if isinstance(index, Tensor) else DTypeError)(
            f"{name}: index must be an int64 tensor, got "
            f"{index.dtype if isinstance(index, Tensor) else type(index).__name__}"
        )
    input_shape, index_ndim = input._data.shape, index._data.ndim  # (the arrays': no Tensor.shape objects)
    d = wrap_dim(dim, len(input_shape), name)
    if same_rank and index_ndim != len(input_shape) and not (not input_shape and index_ndim <= 1):
        raise ShapeError(
            f"{name}: index tensor must have the same number of dimensions as the input "
            f"tensor; got index {fmt_shape(index.shape)} and input {fmt_shape(input.shape)}"
        )
    if index.numel() and not _in_range_on_host(index, input_shape[d] if input_shape else 1):
        _check_index_range(name, index, d, tuple(input_shape))
    return d


def _bounds(index):
    """The smallest and largest of a non-empty integer tensor's values, as ints."""
    if index._device is CPU:
        # the host's own array (to_numpy gives it back): one pass of the host loop, or two NumPy
        # reductions, where two reduction ops and two .item() calls cost most of a small call
        host = primitives(index).to_numpy(index._data)
        if _native_bounds is not None and host.dtype in _NATIVE_INDEX and (host.ndim == 1 or host.flags.c_contiguous):
            return _native_bounds(host)
        return int(host.min()), int(host.max())
    return int(index.min().item()), int(index.max().item())


_UNSIGNED: dict[Any, Any] = {}  # an integer host dtype -> the unsigned one of its size
# kernels/host/index.cpp's one pass over an int64/int32 index (None in a pure-source checkout): a third of
# the NumPy reduction's cost below on the few indices of a small call
_native_all_below = getattr(_C, "host_all_below", None)
_native_bounds = getattr(_C, "host_bounds", None)
_NATIVE_INDEX = frozenset((np.dtype(np.int64), np.dtype(np.int32)))
_INT64, _BOOL = np.dtype(np.int64), np.dtype(np.bool_)


def _in_range_on_host(index, n):
    """Whether every value of the integer tensor ``index`` lies in [0, n), found by the host loop where it
    takes the index (a host int64/int32 array, row-major or 1-d) and no graph capture records the
    checks as host steps; False elsewhere, for the caller's check (a host step)."""
    if index._device is not CPU or _native_all_below is None or _dispatch._host_step_observer is not None:
        return False
    data = index._data
    return (
        data.__class__ is np.ndarray
        and data.dtype in _NATIVE_INDEX
        and (data.ndim == 1 or data.flags.c_contiguous)
        and _native_all_below(data, n)
    )


def _all_below(index, n):
    """Whether every value of the non-empty integer tensor ``index`` lies in [0, n), found on the CPU in
    one reduction: its host array read as unsigned, where a negative value is past any size (the
    minimum and maximum take two); False elsewhere, for the caller's full check."""
    if index._device is not CPU:
        return False
    host = primitives(index).to_numpy(index._data)
    if _native_all_below is not None and host.dtype in _NATIVE_INDEX and (host.ndim == 1 or host.flags.c_contiguous):
        return _native_all_below(host, n)
    unsigned = _UNSIGNED.get(host.dtype)
    if unsigned is None:
        unsigned = _UNSIGNED[host.dtype] = np.dtype(f"u{host.dtype.itemsize}")
    return int(host.view(unsigned).max()) < n


@host_step  # reads the indices: graph capture runs the check again on every replay
def _check_index_range(name, index, d, input_shape):
    n = input_shape[d] if input_shape else 1
    if _all_below(index, n):
        return
    lo, hi = _bounds(index)
    if lo < 0 or hi >= n:
        # PyTorch: a RuntimeError, but index_select along dim 0 raises IndexError
        error = IndexOutOfRangeError if name == "index_select" and d == 0 else IndexValueError
        raise error(
            f"{name}: index {hi if hi >= n else lo} is out of bounds for "
            f"dimension {d} with size {n} (input shape {fmt_shape(input_shape)})"
        )


@host_step  # reads the indices, as _check_index_range
def _check_wrapping_range(name, index, n, what):
    """IndexOutOfRangeError unless every value of (non-empty) ``index`` is in [-n, n) (negative ones
    counting from the end): ``what()`` says of what (made only for the error)."""
    if _all_below(index, n):
        return
    lo, hi = _bounds(index)
    if lo < -n or hi >= n:
        raise IndexOutOfRangeError(f"{name}: index out of range for {what()}")


def _gather_grad(grad, input_shape, dim, index):
    d = wrap_dim(dim, len(input_shape), "gather")
    return scatter_add(filled(input_shape, 0, grad.dtype, grad._device), d, index, grad)


def _gather_lane(input, dim, index):
    """gather's kernel lane (registry.py's ``lane=``; the entry wraps and records its array): the host
    loop's gather of CPU tensors at an int64 index; None for any other call (the forward's path, which
    checks and names the errors)."""
    if _on_host(input, index) and dim.__class__ is int:
        a = input._data
        return gathered_along(a, dim + a.ndim if dim < 0 else dim, index._data)
    return None


@op(
    "gather",
    doc="Values of input at index along dim (out[i][j] = input[index[i][j]][j] for dim 0).",
    node="GatherBackward0",
    grads={"input": _gather_grad},
    lane=_gather_lane,
)
def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    d = _check_index_tensor("gather", input, dim, index)
    index_shape, input_shape = index._data.shape, input._data.shape
    for i, (a, b) in enumerate(zip(index_shape, input_shape) if index_shape != input_shape else ()):
        if i != d and a > b:
            raise ShapeError(
                f"gather: index {fmt_shape(index.shape)} is larger than input {fmt_shape(input.shape)} in dimension {i}"
            )
    return wrap(primitives(input).gather(input._data, d, index._data), input._device)


def _scatter_add_src_grad(grad, dim, index, src_shape):
    d = wrap_dim(dim, grad.ndim, "scatter_add")
    g_src = gather(grad, d, index)
    if tuple(g_src.shape) != tuple(src_shape):
        pad = filled(src_shape, 0, grad.dtype, grad._device)
        g_src = index_put(pad, tuple(slice(0, n) for n in index.shape), g_src)
    return g_src


def _along_array(input, dim, index, src, how):
    """The host loop's combine (``how``: "write", "add" or "sum", "prod", "amax", "amin") of src (of
    input's dtype) into a copy of input's array at an int64 index along dim, CPU tensors: scatter_add's
    kernel lane (the entry wraps and records it) and, wrapped, scatter's and scatter_reduce's direct
    lanes (for inputs in no graph); None for any other call (the forward's path, which checks and names
    the errors)."""
    if _on_host(input, index, src) and dim.__class__ is int:
        a = input._data
        return scattered_along(a, dim + a.ndim if dim < 0 else dim, index._data, src._data, how)
    return None


@op(
    "scatter_add",
    dtypes=ANY.one_dtype("input", "src"),
    doc="input with src added at index along dim (out-of-place).",
    node="ScatterAddBackward0",
    inplace=True,
    grads={"input": lambda grad: grad, "src": _scatter_add_src_grad},
    lane=lambda input, dim, index, src: _along_array(input, dim, index, src, "add"),
)
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    d = _check_index_tensor("scatter_add", input, dim, index)
    if not isinstance(src, Tensor):
        raise DTypeError("scatter_add: src must be a Tensor")
    src_shape, input_shape, index_shape = src._data.shape, input._data.shape, index._data.shape
    for i, a in enumerate(index_shape if index_shape != src_shape or index_shape != input_shape else ()):
        if a > src_shape[i] or (i != d and a > input_shape[i]):
            raise ShapeError(
                f"scatter_add: index {fmt_shape(index.shape)} is larger than src "
                f"{fmt_shape(src.shape)} or input {fmt_shape(input.shape)} in dimension {i}"
            )
    if src._data.dtype is not input._data.dtype:
        src = cast(src, input.dtype)
    return wrap(primitives(input).scatter_add(input._data, d, index._data, src._data), input._device)


def _index_select_direct(input, dim, index):
    """index_select's direct lane: NumPy's take of a CPU tensor that takes part in no graph along dim, at
    a 1-D int64 index the host loop found in [0, size); None for any other call (the forward's path)."""
    if _on_host(input, index) and dim.__class__ is int and _untracked(input):
        a, i = input._data, index._data
        if i.__class__ is np.ndarray and i.ndim == 1 and i.dtype is _INT64 and i.size and a.ndim:
            d = dim + a.ndim if dim < 0 else dim
            if 0 <= d < a.ndim and _native_all_below is not None and _native_all_below(i, a.shape[d]):
                return wrap(a.take(i, d), CPU)
    return None


@op("index_select", doc="The entries of input at the 1-D index along dim.", composite=True, direct=_index_select_direct)
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    if not isinstance(index, Tensor) or index._data.ndim > 1:
        raise IndexOutOfRangeError("index_select: index must be a 1-D int64 tensor (a vector)")
    d = _check_index_tensor("index_select", input, dim, index, same_rank=False)
    if not input._data.ndim:
        if index.numel() != 1:
            raise IndexOutOfRangeError(
                f"index_select: index to a 0-d tensor can have only 1 value, got {index.numel()}"
            )
        return input.clone()
    vector = index._data if index._data.ndim == 1 else primitives(index).view(index._data, (1,))
    if index._device is not input._device:
        return getitem(input, (slice(None),) * d + (wrap(vector, index._device),))  # getitem's device error
    # the backend key itself (one index array, placed at dim d by NumPy's rule and PyTorch's alike):
    # index_key directly, not getitem's key conversion and dispatch
    key = (vector,) if d == 0 else (slice(None),) * d + (vector,)
    if needs_grad(input):
        return index_key(input, key)
    # row-major, as PyTorch's (NumPy's advanced indexing lays a key after a slice out otherwise)
    bk = primitives(input)
    return wrap(bk.contiguous(bk.index(input._data, key)), input._device)


def _masked_fill_direct(input, mask, value):
    """masked_fill's direct lane: the forward's one where of the backend, for a number, a bool mask of
    input's shape and a CPU float32/float64 tensor that takes part in no graph; None for any other call."""
    if _on_host(input, mask) and value.__class__ in _NUMBERS and _untracked(input):
        a, m = input._data, mask._data
        if m.__class__ is np.ndarray and m.dtype is _BOOL and m.shape == a.shape and a.dtype in _FLOAT_ARRAYS:
            dtype = input.dtype
            return wrap(_cpu_where(m, scalar_into("masked_fill", value, dtype), a, dtype), CPU)
    return None


_FLOAT_ARRAYS = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


@op(
    "masked_fill",
    doc="input with value where mask is true.",
    composite=True,
    inplace=True,
    direct=_masked_fill_direct,
)
def masked_fill(input: Tensor, mask: Tensor, value: Tensor | Number) -> Tensor:
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        raise (IndexValueError if isinstance(mask, Tensor) else DTypeError)(
            f"masked_fill: mask must be a bool tensor, got "
            f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}"
        )
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError("masked_fill: only supports a 0-dimensional value tensor")
        value = value.to(dtype=input.dtype)
    else:
        value = scalar_into("masked_fill", value, input.dtype)
    if mask._data.shape == input._data.shape and mask._device is input._device and not needs_grad(input, value):
        # one where of the backend's (the where op's entry and promotion are most of a small fill's cost)
        bk = primitives(input)
        filler = value._data if isinstance(value, Tensor) else value
        return wrap(bk.where(mask._data, filler, input._data, input.dtype), input._device)
    try:
        out = where(mask, value, input)
    except ShapeError:
        out = None
    if out is None or tuple(out.shape) != tuple(input.shape):
        raise ShapeError(
            f"masked_fill: mask of shape {fmt_shape(mask.shape)} does not broadcast to the "
            f"input's shape {fmt_shape(input.shape)}"
        )
    return out if out.dtype is input.dtype else out.to(dtype=input.dtype)


# ------------------------------------------------------------------------------------------------
# triangles, one_hot
def _triangle(prim, input, diagonal):
    if input.ndim < 2:
        raise ShapeError(f"{prim}: input tensor must have at least 2 dimensions, got shape {fmt_shape(input.shape)}")
    return wrap(getattr(primitives(input), prim)(input._data, diagonal), input._device)


@op(
    "tril",
    inplace=True,
    plain="index",
    doc="The lower triangle of the last two dims (above diagonal set to 0).",
    node="TrilBackward0",
    grads={"input": lambda grad, diagonal: tril(grad, diagonal)},
)
def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    return _triangle("tril", input, diagonal)


@op(
    "triu",
    inplace=True,
    plain="index",
    doc="The upper triangle of the last two dims (below diagonal set to 0).",
    node="TriuBackward0",
    grads={"input": lambda grad, diagonal: triu(grad, diagonal)},
)
def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    return _triangle("triu", input, diagonal)


def _one_hot_direct(input, num_classes):
    """one_hot's direct lane: the host loop's rows of a non-empty CPU int64 tensor of classes in range;
    None for any other call (the forward's path, which names the errors)."""
    if input.__class__ is Tensor and num_classes.__class__ is int and input._device is CPU:
        return _on_cpu(one_hot_rows(input._data, num_classes))
    return None


@op(
    "one_hot",
    doc="Class indices as one-hot int64 rows of num_classes (inferred when -1).",
    composite=True,
    method=False,
    functional=True,
    direct=_one_hot_direct,
)
def one_hot(input: Tensor, num_classes: int = -1) -> Tensor:
    if input.dtype.category != dt.INTEGER:
        raise UnsupportedDTypeError(f"one_hot: is only applicable to index tensors, got {input.dtype}")
    if input.numel():
        lo, hi = _one_hot_bounds(input)
        if lo < 0:
            raise IndexValueError(f"one_hot: class values must be non-negative, got {lo}")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise IndexValueError(f"one_hot: class value {hi} is out of range for num_classes={num_classes}")
    elif num_classes == -1:
        raise ShapeError("one_hot: can not infer the total number of classes from an empty tensor")
    # an int64 result with no history: made over the primitives (it was five dispatched ops)
    bk = primitives(input)
    data = input._data if input.dtype is dt.int64 else bk.astype(input._data, dt.int64)
    column = bk.view(bk.contiguous(data), tuple(data.shape) + (1,))
    hot = bk.binary("eq", column, bk.arange(0, num_classes, 1, dt.int64), dt.int64)
    return wrap(bk.astype(hot, dt.int64), input._device)


@host_step  # reads the classes: graph capture runs it again on every replay (num_classes may follow them)
def _one_hot_bounds(input):
    return _bounds(input)


# ------------------------------------------------------------------------------------------------
# scatter, scatter_reduce, masked_select, nonzero
# the position grids of _scatter_key by (index shape, dim, device): made anew they cost a primitive pair a dim
_SCATTER_GRIDS: dict[Any, tuple[Any, ...]] = {}
_SCATTER_GRIDS_KEPT = 64
device_caches.register(_SCATTER_GRIDS.clear)  # (adcuda.cuda.empty_cache() drops them)


def _scatter_key(index, d):
    """The backend key that addresses out[index[i][j]][j] (for d = 0): index's array along d, each
    other dim its own position (an arange that broadcasts along it; kept, read-only)."""
    shape = index._data.shape
    # (the CPU's grids keyed without the device: a device's hash is a Python call, a third of the lookup)
    key = (shape, d) if index._device is CPU else (shape, d, index._device)
    grids = _SCATTER_GRIDS.get(key)
    if grids is None:
        bk = primitives(index)  # integer arrays with no history: made over the primitives, not dispatched
        ndim = len(shape)
        grids = tuple(
            None if k == d else bk.view(bk.arange(0, n, 1, dt.int64), (1,) * k + (n,) + (1,) * (ndim - k - 1))
            for k, n in enumerate(shape)
        )
        remember(_SCATTER_GRIDS, key, grids, _SCATTER_GRIDS_KEPT)
    return grids[:d] + (index._data,) + grids[d + 1 :]


def _src_part(name: str, src: object, index: Tensor, input: Tensor) -> Tensor:
    """src cut to index's shape (PyTorch reads only that much of it), as input's dtype."""
    if not isinstance(src, Tensor):
        raise DTypeError(f"{name}: src must be a Tensor, got {type(src).__name__}")
    src_shape, index_shape = src._data.shape, index._data.shape  # (the arrays': Tensor.shape makes one a read)
    if src_shape != index_shape:
        if len(src_shape) != len(index_shape) or any(a > b for a, b in zip(index_shape, src_shape)):
            raise ShapeError(
                f"{name}: index {fmt_shape(index.shape)} is larger than src {fmt_shape(src.shape)} (they "
                f"must have the same number of dims; input shape {fmt_shape(input.shape)})"
            )
        src = src[tuple(slice(0, n) for n in index_shape)]
    return src if src._data.dtype is input._data.dtype or src.dtype is input.dtype else src.to(dtype=input.dtype)


def _check_scatter_index(name, input, dim, index):
    d = _check_index_tensor(name, input, dim, index)
    input_shape, index_shape = input._data.shape, index._data.shape
    for i, a in enumerate(index_shape if index_shape != input_shape else ()):
        if i != d and a > input_shape[i]:
            raise ShapeError(
                f"{name}: index {fmt_shape(index.shape)} is larger than input {fmt_shape(input.shape)} in dimension {i}"
            )
    return d


def _scatter_direct(input, dim, index, src, value, reduce):
    """scatter's direct lane (registry.py's ``direct=``): ``_along_array``'s write, for CPU tensors that
    take part in no graph (the forward's common case without its frames, its checks and NumPy's fancy
    indexing); None for any other call (the forward's path, which checks and names the errors)."""
    if reduce is None and value is None and _untracked(input) and _untracked(src):
        return _on_cpu(_along_array(input, dim, index, src, "write"))
    return None


@op(
    "scatter",
    dtypes=ANY.one_dtype("input", "src"),
    doc="input with src (or value) written at index along dim; reduce='add'/'multiply' combines.",
    composite=True,
    inplace=True,
    direct=_scatter_direct,
)
def scatter(
    input: Tensor,
    dim: int,
    index: Tensor,
    src: Tensor | Number | None = None,
    value: Number | None = None,
    *,
    reduce: str | None = None,
) -> Tensor:
    name = "scatter"
    if (
        src.__class__ is Tensor
        and reduce is None
        and value is None
        and src._data.dtype is input._data.dtype
        and src._data.shape == index._data.shape == input._data.shape
        and input._data.ndim
        and not needs_grad(input, src)
    ):
        # the common case in a few reads: src, index and input of one shape (nothing larger anywhere),
        # src of input's dtype, nothing to record: the checked index, then the write below
        return _scattered(input, _check_index_tensor(name, input, dim, index), index, src)
    if src is not None and not isinstance(src, Tensor):
        src, value = None, src  # scatter(input, dim, index, 1.5): the scalar overload
    if (src is None) == (value is None):
        raise DTypeError(f"{name}: give either src (a Tensor) or value (a number)")
    if input.ndim == 0:  # PyTorch takes a 0-d input as one element along dim 0 (or -1)
        _check_index_tensor(name, input, dim, index)
        one = scatter(
            input.reshape(1), 0, index.reshape(-1), src if src is None else src.reshape(-1), value, reduce=reduce
        )
        return one.reshape(())
    d = _check_scatter_index(name, input, dim, index)
    if reduce is not None:
        if reduce not in ("add", "multiply"):
            raise ValueError(f"{name}: reduce must be 'add' or 'multiply', got {reduce!r}")
        if value is not None:  # (then src is None)
            source = full(tuple(index.shape), value, dtype=input.dtype, device=input.device)
        else:
            source = _src_part(name, src, index, input)
        return scatter_reduce(input, d, index, source, "sum" if reduce == "add" else "prod")
    if index.numel() == 0:
        return input.clone()
    if (
        src.__class__ is Tensor
        and src._data.shape == index._data.shape
        and src._data.dtype is input._data.dtype
        and not needs_grad(input, src)
    ):
        return _scattered(input, d, index, src)
    # the value written as it is, broadcast by the write (a scalar fills each indexed position)
    values = value if value is not None else _src_part(name, src, index, input)
    return _unrecorded(index_put_key, input, values)(input, _scatter_key(index, d), values, False, None, name)


def _scattered(input, d, index, src):
    """scatter's write of src as it is (index's shape, input's dtype) with no graph to record: on the
    backend's arrays, index_put_key's forward without its conversions (the index checked in range)."""
    bk = primitives(input)
    data = bk.astype(input._data, input.dtype)
    bk.index_put_(data, _scatter_key(index, d), src._data, False)
    return wrap(data, input._device)


_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_direct(input, dim, index, src, reduce, include_self):
    """scatter_reduce's direct lane: ``_scatter_direct``'s for the reductions the host loop combines as the
    forward's path does (sum, prod, amax, amin, including input's own values); None for any other call."""
    if include_self is True and reduce != "mean" and _untracked(input) and _untracked(src):
        return _on_cpu(_along_array(input, dim, index, src, reduce))
    return None


@op(
    "scatter_reduce",
    dtypes=ANY.one_dtype("input", "src"),
    doc="input with src combined at index along dim by sum, prod, mean, amax or amin.",
    composite=True,
    inplace=True,
    direct=_scatter_reduce_direct,
)
def scatter_reduce(
    input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    name = "scatter_reduce"
    if reduce not in _REDUCTIONS:
        raise ValueError(f"{name}: reduce must be one of {', '.join(map(repr, _REDUCTIONS))}, got {reduce!r}")
    if input.ndim == 0:  # one element along dim 0 (or -1), as PyTorch takes it
        _check_index_tensor(name, input, dim, index)
        src = src.reshape(-1) if isinstance(src, Tensor) else src
        one = scatter_reduce(input.reshape(1), 0, index.reshape(-1), src, reduce, include_self=include_self)
        return one.reshape(())
    d = _check_scatter_index(name, input, dim, index)
    src = _src_part(name, src, index, input)
    if index.numel() == 0:
        return input.clone()
    if reduce in ("sum", "mean"):
        key = _scatter_key(index, d)
        base = input if include_self else index_put_key(input, key, 0, False, None, name)
        total = _unrecorded(index_put_key, base, src)(base, key, src, True, None, name)
        if reduce == "sum":
            return total
        start = filled(tuple(input.shape), 1 if include_self else 0, input.dtype, input._device)
        count = index_put_key(start if include_self else index_put_key(start, key, 0), key, 1, True)
        count = where(count == 0, 1, count)  # positions nothing was scattered to keep their value
        if input.dtype.is_floating_point:
            return total / count
        return total.div(count, rounding_mode="floor")
    return _unrecorded(scatter_combine, input, src)(input, d, index, src, reduce, include_self)


def _identity_of(reduce, dtype):
    """The value that leaves a product, maximum or minimum unchanged, in ``dtype``."""
    if reduce == "prod":
        return 1
    if dtype.is_floating_point:
        return float("-inf") if reduce == "amax" else float("inf")
    if dtype is dt.bool_:
        return reduce == "amin"
    info = dt.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_combine_grads(grad, input, dim, index, src, reduce, include_self, result):
    """(input gradient, src gradient) of a product, maximum or minimum scatter, written with ops."""
    key = _scatter_key(index, dim)
    zero = filled((), 0, grad.dtype, grad._device)
    hit = index_put_key(filled(tuple(input.shape), False, dt.bool_, input._device), key, True)
    # the input's own value takes part where include_self, or where nothing was scattered to
    own = hit.logical_not() if not include_self else filled(tuple(input.shape), True, dt.bool_, input._device)
    if reduce == "prod":
        # the product of the other factors, exact where zeros are: with z zeros at a position and P the
        # product of its nonzero factors, a nonzero factor x gets P / x if z == 0 (else 0), a zero gets P
        # if z == 1 (else 0)
        ones = filled((), 1, input.dtype, input._device)
        nonzero_input, nonzero_src = where(input == 0, ones, input), where(src == 0, ones, src)
        nonzero_product = scatter_combine(nonzero_input, dim, index, nonzero_src, "prod", include_self)
        input_zeros = ((input == 0) & own).to(dtype=input.dtype)
        zeros = index_put_key(input_zeros, key, (src == 0).to(dtype=input.dtype), True)

        def others(x, nonzero_x, p, z):
            return where(x == 0, where(z == 1, p, 0.0), where(z == 0, p / nonzero_x, 0.0))

        g_input = where(own, grad * others(input, nonzero_input, nonzero_product, zeros), zero)
        g_src = gather(grad, dim, index) * others(
            src, nonzero_src, gather(nonzero_product, dim, index), gather(zeros, dim, index)
        )
        return g_input, g_src
    # amax / amin: the gradient shared evenly by every value equal to the result (PyTorch's rule, which
    # counts an equal input value among them even when include_self=False leaves it out)
    input_equal = input == result
    src_wins = src == gather(result, dim, index)
    count = index_put_key(input_equal.to(dtype=grad.dtype), key, src_wins.to(dtype=grad.dtype), True)
    share = grad / where(count == 0, 1.0, count)
    return where(input_equal & own, share, zero), where(src_wins, gather(share, dim, index), zero)


@op(
    "scatter_combine",
    doc="input with src combined at index along dim by prod, amax or amin (scatter_reduce's).",
    function=False,
    method=False,
    node="ScatterReduceBackward0",
    grads={("input", "src"): _scatter_combine_grads},
)
def scatter_combine(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool) -> Tensor:
    data = primitives(input).scatter_reduce(input._data, dim, index._data, src._data, reduce, include_self)
    return wrap(data, input._device)


@op("masked_select", doc="The elements of input where mask (broadcast) is true, as a 1-D tensor.", composite=True)
def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        raise UnsupportedDTypeError(
            f"masked_select: mask must be a bool tensor, got "
            f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}"
        )
    shape = broadcast_shapes("masked_select", tuple(input.shape), tuple(mask.shape))
    return getitem(input.expand(shape), mask.expand(shape))


def _nonzero_direct(input, as_tuple=False):
    """nonzero's (as_tuple False) and argwhere's direct lane: the host loop's coordinates of the true
    elements of a CPU bool tensor of at least one dim (the forward's rows of its coordinate grid); None
    for any other call."""
    if as_tuple is False and input.__class__ is Tensor and input._device is CPU:
        return _on_cpu(nonzero_rows(input._data))
    return None


@overload
def nonzero(input: Tensor, *, as_tuple: Literal[False] = False) -> Tensor: ...
@overload
def nonzero(input: Tensor, *, as_tuple: Literal[True]) -> tuple[Tensor, ...]: ...
@overload
def nonzero(input: Tensor, *, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]: ...
@op(
    "nonzero",
    doc="The indices of the nonzero elements: (count, ndim) int64, or one 1-D tensor per dim.",
    composite=True,
    direct=_nonzero_direct,
)
def nonzero(input: Tensor, *, as_tuple: bool = False) -> Tensor | tuple[Tensor, ...]:
    return _nonzero(input, as_tuple)


def _nonzero(input, as_tuple):
    """nonzero's forward, which argwhere calls directly (not through nonzero's dispatch)."""
    bk, dev, data = primitives(input), input._device, input._data
    mask = data if data.dtype is _BOOL or input.dtype is dt.bool_ else bk.binary("ne", data, 0, input.dtype)
    if data.ndim == 0:  # PyTorch's (count, 0), or one index tensor of 0s as a tuple
        count = int(bool(bk.to_numpy(mask)))
        if as_tuple:
            return (full((count,), 0, dtype=dt.int64, device=input.device),)
        return full((count, 0), 0, dtype=dt.int64, device=input.device)
    # over the primitives (an int64 result has no history): the coordinates of every position, the
    # rows of the true ones taken by the mask in row-major order (it was two small tensors and eight
    # dispatched ops, then a division and a remainder per dim)
    found = bk.index(_coordinate_grid(bk, mask.shape, dev), (mask,))
    if as_tuple:
        return tuple(wrap(bk.contiguous(bk.slice(found, (slice(None), k))), dev) for k in range(input.ndim))
    return wrap(found, dev)


# the coordinate grids of _coordinate_grid by (shape, device), for shapes of up to _GRID_KEPT_SIZE elements
_COORDINATE_GRIDS: dict[Any, Any] = {}
device_caches.register(_COORDINATE_GRIDS.clear)  # (adcuda.cuda.empty_cache() drops them)
_GRIDS_KEPT = 64
_GRID_KEPT_SIZE = 4096


def _coordinate_grid(bk, shape, device):
    """An int64 array of ``shape + (len(shape),)``: each position's coordinates (kept, read-only, for
    small shapes)."""
    # (the CPU's grids keyed by the shape alone: a device's hash is a Python call, a third of the lookup)
    key = shape if device is CPU else (shape, device)
    grid = _COORDINATE_GRIDS.get(key)
    if grid is None:
        ndim = len(shape)
        columns = [
            bk.contiguous(
                bk.expand(bk.view(bk.arange(0, n, 1, dt.int64), (1,) * k + (n,) + (1,) * (ndim - k)), shape + (1,))
            )
            for k, n in enumerate(shape)
        ]
        grid = bk.cat(columns, ndim)
        if math.prod(shape) <= _GRID_KEPT_SIZE:
            remember(_COORDINATE_GRIDS, key, grid, _GRIDS_KEPT)
    return grid


# ------------------------------------------------------------------------------------------------
# More of PyTorch's indexing names (issue 15), composed of the ops above
def _index_vector(name, input, dim, index):
    if not isinstance(index, Tensor) or index.dtype.category != dt.INTEGER or index.ndim > 1:
        got = f"{index.dtype} of shape {fmt_shape(index.shape)}" if isinstance(index, Tensor) else type(index).__name__
        raise DTypeError(f"{name}: index must be a 1-D integer tensor, got {got}")
    d = wrap_dim(dim, max(input._data.ndim, 1), name)
    if index._data.ndim == 1:
        return d, index
    return d, wrap(primitives(index).view(index._data, (1,)), index._device)  # a 0-d index as a vector


def _index_along(name, input, dim, index, source):
    """(dim, the 1-D index) after checking that source is input's shape with index's length along dim
    and that index is in range along it (index_put would count negative ones from the end)."""
    d, index = _index_vector(name, input, dim, index)
    expected = list(input._data.shape) or [1]  # (the arrays' shapes: Tensor.shape makes one a read)
    expected[d] = index._data.shape[0]
    if not isinstance(source, Tensor) or (list(source._data.shape) or [1]) != expected:
        raise ShapeError(
            f"{name}: source {fmt_shape(source.shape) if isinstance(source, Tensor) else type(source).__name__} "
            f"must have input {fmt_shape(input.shape)}'s shape with {index.shape[0]} (index's length) at dim {d}"
        )
    if expected[d] and not _in_range_on_host(index, input._data.shape[d] if input._data.ndim else 1):
        _check_index_range(name, index, d, input._data.shape)
    return d, index


def _put_along(name, input, d, index, source, accumulate):
    """input with source's slices written (or added) at the 1-D index along dim d: one index_put_key
    with the backend key (every position of the other dims, index along d), whose derivative is the
    op's; its forward alone where there is no graph. A 0-d input as one element."""
    if input.ndim == 0:
        return index_put_key(input.reshape(1), (index._data,), source.reshape(1), accumulate, None, name).reshape(())
    key = (index._data,) if d == 0 else (slice(None),) * d + (index._data,)
    if source._data.dtype is input._data.dtype and not needs_grad(input, source):
        # no graph, nothing to convert (the caller checked the shapes and the index's range): the write
        # on the backend's arrays, index_put_key's forward without its conversions
        bk = primitives(input)
        data = bk.astype(input._data, input.dtype)
        bk.index_put_(data, key, source._data, accumulate)
        return wrap(data, input._device)
    return _unrecorded(index_put_key, input, source)(input, key, source, accumulate, None, name)


def _index_along_direct(how):
    """index_copy's ("write") or index_add's ("add") direct lane: the host loop's write of source's slices
    into a row-major copy of input at a 1-D int64 index in [0, size) along dim, CPU tensors of one dtype
    that take part in no graph (index_add's alpha 1); None for any other call (the forward's path)."""

    def direct(input, dim, index, source, alpha=1):
        if (
            _on_host(input, index, source)
            and dim.__class__ is int
            and alpha.__class__ is int
            and alpha == 1
            and _untracked(input)
            and _untracked(source)
        ):
            a = input._data
            return _on_cpu(indexed_along(a, dim + a.ndim if dim < 0 else dim, index._data, source._data, how))
        return None

    return direct


@op(
    "index_add",
    dtypes=ANY.one_dtype("input", "source"),
    doc="input with alpha * source added at the 1-D index along dim.",
    composite=True,
    inplace=True,
    direct=_index_along_direct("add"),
)
def index_add(input: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: Number = 1) -> Tensor:
    d, index = _index_along("index_add", input, dim, index, source)
    return _put_along("index_add", input, d, index, source if alpha == 1 else source * alpha, True)


@op(
    "index_copy",
    dtypes=ANY.one_dtype("input", "source"),
    doc="input with source's slices written at the 1-D index along dim.",
    composite=True,
    inplace=True,
    direct=_index_along_direct("write"),
)
def index_copy(input: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    d, index = _index_along("index_copy", input, dim, index, source)
    return _put_along("index_copy", input, d, index, source, False)


def _index_fill_direct(input, dim, index, value):
    """index_fill's direct lane: a number written into a row-major copy of input at a 1-D int64 index
    along dim (negative values from the end) by NumPy's assignment, a CPU tensor that takes part in no
    graph; None for any other call, and where NumPy finds a value out of range (the forward's path)."""
    if _on_host(input, index) and dim.__class__ is int and value.__class__ in _NUMBERS and _untracked(input):
        a, i = input._data, index._data
        if a.ndim and i.__class__ is np.ndarray and i.ndim == 1 and i.dtype is _INT64:
            d = dim + a.ndim if dim < 0 else dim
            if 0 <= d < a.ndim:
                out = a.copy()
                out[(i,) if d == 0 else (slice(None),) * d + (i,)] = scalar_into("index_fill", value, input.dtype)
                return wrap(out, CPU)
    return None


@op(
    "index_fill",
    doc="input with value at the 1-D index along dim.",
    composite=True,
    inplace=True,
    direct=_index_fill_direct,
)
def index_fill(input: Tensor, dim: int, index: Tensor, value: Tensor | Number) -> Tensor:
    d, index = _index_vector("index_fill", input, dim, index)
    bk = primitives(input)
    if input.ndim == 0:
        return masked_fill(input, wrap(bk.full((), index.numel() > 0, dt.bool_), input._device), value)
    n = input._data.shape[d]
    if not _in_range_on_host(index, n) and index.numel():
        _check_wrapping_range("index_fill", index, n, lambda: f"dim {d} of size {n} (input {fmt_shape(input.shape)})")
    if not isinstance(value, Tensor) and not needs_grad(input):  # the write itself, on the backend's arrays
        data = _own_contiguous(bk, input)
        bk.index_put_(data, (slice(None),) * d + (index._data,), scalar_into("index_fill", value, input.dtype), False)
        return wrap(data, input._device)
    # the mask along dim, made over the primitives (it has no history), then one masked_fill
    mask = bk.full((n,), False, dt.bool_)
    bk.index_put_(mask, (index._data,), True, False)
    return masked_fill(input, wrap(bk.view(mask, (n,) + (1,) * (input.ndim - d - 1)), input._device), value)


@op(
    "take_along_dim",
    doc="gather of input at indices along dim, the two broadcast elsewhere (flat when dim is None).",
    composite=True,
)
def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    if not isinstance(indices, Tensor) or indices.dtype.category != dt.INTEGER:
        raise DTypeError("take_along_dim: indices must be an integer tensor")
    if dim is None:
        # as PyTorch, a flat view of each: a tensor whose strides allow none is refused, not copied
        return gather(input.view(-1), 0, indices.view(-1))
    x_shape, i_shape = input._data.shape, indices._data.shape
    if len(x_shape) != len(i_shape):
        raise ShapeError(
            f"take_along_dim: input {fmt_shape(input.shape)} and indices {fmt_shape(indices.shape)} "
            "must have the same number of dims"
        )
    d = wrap_dim(dim, len(x_shape), "take_along_dim")
    if x_shape[:d] == i_shape[:d] and x_shape[d + 1 :] == i_shape[d + 1 :]:  # nothing to broadcast
        return _unrecorded(gather, input)(input, d, indices)
    a, b = list(x_shape), list(i_shape)
    a[d] = b[d] = 1
    shape = broadcast_shapes("take_along_dim", tuple(a), tuple(b))
    wanted = shape[:d] + (input.shape[d],) + shape[d + 1 :]
    if input._data.shape != wanted:  # (expand would give it back as it is, after a dispatch)
        input = input.expand(wanted)
    wanted = shape[:d] + (indices.shape[d],) + shape[d + 1 :]
    if indices._data.shape != wanted:
        indices = indices.expand(wanted)
    return _unrecorded(gather, input)(input, d, indices)


@op("argwhere", doc="The indices of the nonzero elements, (count, ndim) int64.", composite=True, direct=_nonzero_direct)
def argwhere(input: Tensor) -> Tensor:
    return _nonzero(input, False)


def _diagonal_dims(name, ndim, offset, dim1, dim2):
    """dim1 and dim2 wrapped for a tensor of ``ndim`` dims, checked as PyTorch checks them."""
    d1, d2 = wrap_dim(dim1, ndim, name), wrap_dim(dim2, ndim, name)
    if d1 == d2:
        raise ShapeError(f"{name}: dim1 and dim2 cannot be the same dim ({d1})")
    if ndim < 2:
        raise ShapeError(f"{name}: input must be at least 2-d, got {ndim} dims")
    if offset.__class__ is not int:
        offset = operator.index(offset)
    return offset, d1, d2


def _diagonal_data(bk, data, offset, d1, d2):
    """The diagonal (at ``offset``) of the planes of dims ``d1`` and ``d2`` of backend array ``data``,
    as a strided view of it with those dims gone and the diagonal last, as PyTorch lays it out: the
    two dims moved last and merged into one (a view where their strides allow), then every
    (columns + 1)-th element from the diagonal's first; else the same layout made by as_strided.
    diagonal's forward, and where diagonal_scatter and diag_embed write."""
    ndim = data.ndim
    if ndim == 2 and d1 == 0 and offset == 0:
        # a matrix's main diagonal (trace, diagonal's defaults), the general steps below in a few
        rows, cols = data.shape
        flat = bk.view(data, (rows * cols,))
        if flat is not None:
            n = rows if rows < cols else cols
            return bk.slice(flat, (slice(0, (n - 1) * (cols + 1) + 1 if n else 0, cols + 1),))
    if d2 != ndim - 1 or d1 != ndim - 2:
        data = bk.permute(data, tuple(i for i in range(ndim) if i != d1 and i != d2) + (d1, d2))
    shape = data.shape
    lead, rows, cols = tuple(shape[:-2]), shape[-2], shape[-1]
    # the diagonal's first row and column and its length
    start_row, start_col = (0, offset) if offset >= 0 else (-offset, 0)
    n = min(rows - start_row, cols - start_col)
    if n < 0:
        n = 0
    flat = bk.view(data, lead + (rows * cols,))
    if flat is not None:
        start = start_row * cols + start_col
        return bk.slice(flat, (Ellipsis, slice(start, start + (n - 1) * (cols + 1) + 1 if n else start, cols + 1)))
    itemsize = data.itemsize
    strides = tuple(s // itemsize for s in data.strides)
    first = bk.storage_offset(data)
    if n:  # (an empty diagonal starts where the planes do: its first position may lie past their end)
        first += start_row * strides[-2] + start_col * strides[-1]
    return bk.as_strided(data, lead + (n,), strides[:-2] + (strides[-2] + strides[-1],), first)


def _diagonal_grad(grad, input_shape, offset, dim1, dim2):
    return diagonal_scatter(filled(input_shape, 0, grad.dtype, grad._device), grad, offset, dim1, dim2)


def _diagonal_array(a, offset, dim1, dim2):
    """diagonal's array on the CPU, for the view lane (registry.py's ``view=``): a row-major matrix's
    diagonal at an int offset of the default dims, the strided view of its flat memory that
    ``_diagonal_data`` makes; None for any other call (an empty diagonal too: the forward's path)."""
    if not (
        dim1.__class__ is dim2.__class__ is offset.__class__ is int
        and dim1 == 0
        and dim2 == 1
        and a.ndim == 2
        and a.flags.c_contiguous
    ):
        return None
    rows, cols = a.shape
    if offset >= 0:  # (its first element and length, without min's call)
        start, n = offset, cols - offset
        if rows < n:
            n = rows
    else:
        start, n = -offset * cols, rows + offset
        if cols < n:
            n = cols
    if n <= 0:
        return None
    return a.ravel()[start : start + (n - 1) * (cols + 1) + 1 : cols + 1]  # (a row-major array: a view)


@op(
    "diagonal",
    doc="The diagonal at offset of the planes of dim1 and dim2, as the last dim (a view).",
    view=_diagonal_array,
    node="DiagonalBackward0",
    grads={"input": _diagonal_grad},
)
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    data = input._data
    # the default dims (ints, not bools, which wrap_dim refuses): nothing to wrap or check
    if dim1 == 0 and dim2 == 1 and dim1.__class__ is dim2.__class__ is offset.__class__ is int and data.ndim >= 2:
        return wrap(_diagonal_data(primitives(input), data, offset, 0, 1), input._device)
    offset, d1, d2 = _diagonal_dims("diagonal", data.ndim, offset, dim1, dim2)
    return wrap(_diagonal_data(primitives(input), data, offset, d1, d2), input._device)


def _diagonal_scatter_lane(input, src, offset, dim1, dim2):
    """diagonal_scatter's kernel lane (the entry wraps and records its array): src (of input's dtype)
    copied onto the diagonal view ``_diagonal_array`` makes of a row-major copy of a CPU matrix; None for
    any other call (the forward's path, which checks and names the errors)."""
    if _on_host(input, src):
        a, s = input._data, src._data
        if a.__class__ is np.ndarray and s.__class__ is np.ndarray and s.dtype is a.dtype:
            out = a.copy()
            target = _diagonal_array(out, offset, dim1, dim2)
            if target is not None and target.shape == s.shape:
                target[...] = s
                return out
    return None


@op(
    "diagonal_scatter",
    doc="A copy of input with src written on the diagonal (at offset) of the planes of dim1 and dim2.",
    node="DiagonalScatterBackward0",
    grads={
        "input": lambda grad, src, offset, dim1, dim2: diagonal_scatter(
            grad, filled(src.shape, 0, grad.dtype, grad._device), offset, dim1, dim2
        ),
        "src": lambda grad, offset, dim1, dim2: diagonal(grad, offset, dim1, dim2),
    },
    lane=_diagonal_scatter_lane,
)
def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    offset, d1, d2 = _diagonal_dims("diagonal_scatter", input._data.ndim, offset, dim1, dim2)
    bk = primitives(input)
    data = _own_contiguous(bk, input)
    target = _diagonal_data(bk, data, offset, d1, d2)
    if tuple(src.shape) != tuple(target.shape):
        raise ShapeError(
            f"diagonal_scatter: src of shape {fmt_shape(src.shape)} must have the shape {fmt_shape(target.shape)} of "
            f"the diagonal (offset {offset}, dims {dim1} and {dim2}) of input {fmt_shape(input.shape)}"
        )
    bk.copy_(target, cast(src, input.dtype)._data)
    return wrap(data, input._device)


def _unravel_index_direct(indices, shape):
    """unravel_index's direct lane: the forward's floor remainders and quotients, one NumPy pair per dim,
    of a CPU int64 tensor of at least one dim and positive sizes; None for any other call."""
    if _on_host(indices) and shape.__class__ in _SIZES:
        rest = indices._data
        sizes = (shape,) if shape.__class__ is int else shape
        if (
            rest.__class__ is np.ndarray
            and rest.dtype is _INT64
            and rest.ndim
            and all(n.__class__ is int and n > 0 for n in sizes)
        ):
            coordinates = []
            for n in reversed(sizes):
                coordinates.append(wrap(rest % n, CPU))
                rest = rest // n
            return tuple(reversed(coordinates))
    return None


@op(
    "unravel_index",
    doc="Flat indices as the tuple of their coordinates in shape.",
    composite=True,
    method=False,
    direct=_unravel_index_direct,
)
def unravel_index(indices: Tensor, shape: int | Sequence[int]) -> tuple[Tensor, ...]:
    if indices.dtype.category != dt.INTEGER:
        raise DTypeError(f"unravel_index: expected 'indices' to be an integer tensor, got {indices.dtype}")
    sizes = (shape,) if isinstance(shape, (int, numbers.Integral)) else tuple(shape)
    if any(n < 0 for n in sizes):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, got {sizes}")
    rest = cast(indices, dt.int64)
    coordinates = []
    for n in reversed(sizes):
        coordinates.append(rest.remainder(n) if n else rest * 0)
        rest = rest.div(n, rounding_mode="floor") if n else rest
    return tuple(reversed(coordinates))


@op(
    "combinations",
    doc="The r-element combinations of the 1-D input, as rows (itertools' order).",
    composite=True,
    method=False,
)
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    if input.ndim != 1:
        raise ShapeError(f"combinations: expects a 1-D tensor, got shape {fmt_shape(input.shape)}")
    if r.__class__ is not int or r < 0:
        raise ValueError(f"combinations: r must be a non-negative integer, got {r!r}")
    if r == 0:
        return input[:0]
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(choose(range(input.shape[0]), r))
    if not rows:
        return input[:0].unsqueeze(1).expand(0, r)
    return input[tensor(rows, dtype=dt.int64, device=input.device)]


_diagonal_of = diagonal  # diag's parameter is called diagonal, as in PyTorch


def _diag_embed_lane(input, offset, dim1, dim2):
    """diag_embed's kernel lane (the entry wraps and records its array): the planes last (the default
    dims), made on the host in one write, a CPU tensor of at least one dim; None for any other call."""
    if input.__class__ is Tensor and dim1.__class__ is dim2.__class__ is offset.__class__ is int:
        a = input._data
        last = a.ndim  # (the output's last dim)
        if input._device is CPU and (dim1 == -2 or dim1 == last - 1) and (dim2 == -1 or dim2 == last):
            return embedded_diagonals(a, offset)
    return None


@op(
    "diag_embed",
    doc="The last dim of input as the diagonals (at offset) of the planes of dim1 and dim2.",
    node="DiagEmbedBackward0",
    grads={"input": lambda grad, offset, dim1, dim2: diagonal(grad, offset, dim1, dim2)},
    lane=_diag_embed_lane,
)
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    in_shape = input._data.shape  # (the array's: Tensor.shape makes one a read)
    out_ndim = len(in_shape) + 1
    d1, d2 = wrap_dim(dim1, out_ndim, "diag_embed"), wrap_dim(dim2, out_ndim, "diag_embed")
    if not in_shape:
        raise ShapeError("diag_embed: expected an input with at least one dim, got a 0-d tensor")
    if d1 == d2:
        raise ShapeError(f"diag_embed: dim1 and dim2 cannot be the same dim ({d1})")
    if offset.__class__ is not int:
        offset = operator.index(offset)
    # zeros with the planes' two dims at dim1 and dim2, input written on their diagonal in one copy
    size = in_shape[-1] + abs(offset)
    if d1 == out_ndim - 2 and d2 == out_ndim - 1:  # the default dims: the planes last
        shape = tuple(in_shape[:-1]) + (size, size)
    else:
        lead = iter(in_shape[:-1])
        shape = tuple(size if i == d1 or i == d2 else next(lead) for i in range(out_ndim))
    bk = primitives(input)
    data = bk.full(shape, 0, input.dtype)
    bk.copy_(_diagonal_data(bk, data, offset, d1, d2), input._data)
    return wrap(data, input._device)


@op("diag", doc="A 1-D input as the diagonal (at offset) of a square matrix; a 2-D input's diagonal.", composite=True)
def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    if input.ndim == 2:
        return _diagonal_of(input, diagonal)
    if input.ndim != 1:
        raise ShapeError(f"diag: input must be 1-d or 2-d, got shape {fmt_shape(input.shape)}")
    return diag_embed(input, diagonal, 0, 1)


def _diagflat_direct(input, offset):
    """diagflat's direct lane: the matrix made on the host in one write, for a CPU tensor that takes part
    in no graph; None for any other call (the forward's path)."""
    if input.__class__ is Tensor and offset.__class__ is int and input._device is CPU and _untracked(input):
        a = input._data
        return _on_cpu(embedded_diagonals(a.reshape(a.size), offset))
    return None


@op(
    "diagflat",
    doc="input flattened, as the diagonal (at offset) of a square matrix.",
    composite=True,
    direct=_diagflat_direct,
)
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    if input.ndim != 1:
        # (the flat view made on the backend where there is no graph: reshape's entry costs as much again)
        flat = input.reshape(-1) if needs_grad(input) else wrap(_flat(primitives(input), input._data), input._device)
        return _unrecorded(diag_embed, input)(flat, offset, 0, 1)
    return _unrecorded(diag_embed, input)(input, offset, 0, 1)


@op(
    "trace",
    dtypes=NUMBERS,
    plain="index",
    doc="The sum of the main diagonal of a matrix.",
    node="TraceBackward0",
    grads={
        "input": lambda grad, input_shape: diagonal_scatter(
            filled(input_shape, 0, grad.dtype, grad._device), grad.expand(min(input_shape)), 0, 0, 1
        )
    },
)
def trace(input: Tensor) -> Tensor:
    # one sum primitive over the diagonal's view (it was diagonal's and sum's dispatches); integers
    # sum as int64, as sum's do
    data = input._data
    if data.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, got shape {fmt_shape(input.shape)}")
    bk = primitives(input)
    return wrap(bk.reduce("sum", _diagonal_data(bk, data, 0, 0, 1), None, False), input._device)


def _sliding_blocks(
    name: str,
    input: Tensor,
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int],
    padding: int | Sequence[int],
    stride: int | Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The checked (kernel, dilation, padding, stride) pairs of F.unfold/F.fold and the block grid:
    (rows (kh, 1, oh, 1), cols (1, kw, 1, ow)) that index the padded image, and (oh, ow)."""
    for a in (kernel_size, dilation, padding, stride):
        if a.__class__ is not int and not (a.__class__ is tuple and all(v.__class__ is int for v in a)):
            return _checked_sliding_blocks(name, kernel_size, dilation, padding, stride)
    # ints and tuples of ints: the checked pairs kept for those last asked
    return _kept_sliding_blocks(name, kernel_size, dilation, padding, stride)


def _checked_sliding_blocks(name, kernel_size, dilation, padding, stride):
    kernel = int_tuple(name, "kernel_size", kernel_size, 2)
    dilation = int_tuple(name, "dilation", dilation, 2)
    padding = int_tuple(name, "padding", padding, 2)
    stride = int_tuple(name, "stride", stride, 2)
    if min(kernel) <= 0 or min(dilation) <= 0 or min(stride) <= 0 or min(padding) < 0:
        raise ShapeError(
            f"{name}: kernel_size {kernel}, dilation {dilation} and stride {stride} must be positive and padding "
            f"{padding} non-negative"
        )
    return kernel, dilation, padding, stride


_kept_sliding_blocks = functools.lru_cache(maxsize=64)(_checked_sliding_blocks)


def _block_grid(name, size, kernel, dilation, padding, stride, device):
    """The padded-image positions of every block: rows (kh, 1, oh, 1) and cols (1, kw, 1, ow), which
    together index every (kernel row, kernel col, block row, block col), as backend arrays on
    ``device``; and (oh, ow)."""
    rows, cols, counts = _block_positions(name, size, kernel, dilation, padding, stride)
    bk = primitives_on(device)
    return bk.from_numpy(rows, dt.int64), bk.from_numpy(cols, dt.int64), counts


@functools.lru_cache(maxsize=64)
def _block_positions(name, size, kernel, dilation, padding, stride):
    """``_block_grid``'s positions as host arrays (read-only, kept for the sizes last asked: made with
    ops they were a dozen dispatches a call, from the sizes alone)."""
    grids, counts = [], []
    for n, k, d, p, s in zip(size, kernel, dilation, padding, stride):
        span = d * (k - 1) + 1
        if n + 2 * p < span:
            raise ShapeError(f"{name}: a block of {span} positions does not fit a padded size of {n + 2 * p}")
        count = (n + 2 * p - span) // s + 1
        grids.append(np.arange(count)[:, None] * s + np.arange(k) * d)
        counts.append(count)
    rows = np.ascontiguousarray(grids[0].T).reshape(kernel[0], 1, counts[0], 1)
    cols = np.ascontiguousarray(grids[1].T).reshape(1, kernel[1], 1, counts[1])
    for positions in (rows, cols):
        positions.flags.writeable = False
    return rows, cols, tuple(counts)


def _im2col(
    input: Tensor,
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    stride: int | Sequence[int] = 1,
) -> Tensor:
    """F.unfold: the sliding kernel_size blocks of input (N, C, H, W) or (C, H, W) as the columns of
    (N, C * kh * kw, blocks), gathered by indexing the zero-padded image."""
    name = "unfold"
    if not isinstance(input, Tensor) or input.ndim not in (3, 4):
        raise ShapeError(
            f"{name}: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got {getattr(input, 'shape', input)}"
        )
    check_dtype(name, FLOATING_OR_BOOL, input)  # the op's declared rule is Tensor.unfold's, which takes any
    kernel, dilation, padding, stride = _sliding_blocks(name, input, kernel_size, dilation, padding, stride)
    batched = input if input.ndim == 4 else input.unsqueeze(0)
    rows, cols, (oh, ow) = _block_grid(name, tuple(batched.shape[2:]), kernel, dilation, padding, stride, input._device)
    # pad is looked up by name: layout.py imports this module (its split family takes slice_key's views)
    pad = get("pad").entry
    padded = pad(batched, (padding[1], padding[1], padding[0], padding[0])) if any(padding) else batched
    blocks = _unrecorded(index_key, padded)(padded, (slice(None), slice(None), rows, cols))  # (N, C, kh, kw, oh, ow)
    n, c = batched.shape[:2]
    out = blocks.reshape(n, c * kernel[0] * kernel[1], oh * ow)
    return out if input.ndim == 4 else out.squeeze(0)


def _unfold_grad(grad, input_shape, dimension, size, step):
    """Each window's gradient added back at the positions it was cut from (windows may overlap)."""
    if not input_shape:
        return grad.reshape(())
    d = wrap_dim(dimension, len(input_shape), "unfold")
    count = grad.shape[d]
    index = (arange(count, device=grad.device).unsqueeze(1) * step + arange(size, device=grad.device)).reshape(-1)
    # (..., count, ..., size) -> (..., count * size, ...): the windows laid along dim d, in index's order
    windows = grad.movedim(-1, d + 1)
    shape = list(windows.shape)
    shape[d : d + 2] = [count * size]
    zeros = filled(input_shape, 0, grad.dtype, grad._device)
    return index_add(zeros, d, index, windows.reshape(shape))


@op(
    "unfold",
    doc="Tensor.unfold: windows of size every step along dimension, as a new last dim (a view); "
    "F.unfold: the sliding blocks of images as columns (im2col).",
    view=True,
    node="UnfoldBackward0",
    grads={"input": _unfold_grad},
    function=False,
    functional=_im2col,
)
def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    data = input._data  # (its shape: Tensor.shape makes a Size each read)
    ndim = data.ndim
    d = wrap_dim(dimension, ndim if ndim else 1, "unfold")
    length = data.shape[d] if ndim else 1
    if size < 0 or size > length or step <= 0:
        raise ShapeError(
            f"unfold: size {size} must be in [0, {length}] (dim {d} of input {fmt_shape(input.shape)}) "
            f"and step {step} positive"
        )
    bk = primitives(input)
    if ndim == 0:
        return wrap(bk.view(data, (1,)), input._device)
    # as PyTorch, a strided view of input's memory: window i of dim d starts i * step elements on
    count = (length - size) // step + 1
    if step == size:
        # windows side by side: the windows' part of dim d split in two and the window dim moved last,
        # the same view without as_strided's check of its reach (most of a small unfold's cost)
        dims = data.shape
        part = data if count * size == length else bk.slice(data, (slice(None),) * d + (slice(0, count * size),))
        windows = bk.view(part, dims[:d] + (count, size) + dims[d + 1 :])
        if windows is not None:
            if d == ndim - 1:  # (the window dim last already)
                return wrap(windows, input._device)
            return wrap(bk.permute(windows, _window_last(d, ndim)), input._device)
    shape, strides = list(input.shape), list(input.stride())
    shape[d], strides[d] = count, strides[d] * step
    shape.append(size)
    strides.append(input.stride(d))
    return wrap(bk.as_strided(input._data, tuple(shape), tuple(strides), bk.storage_offset(input._data)), input._device)


@functools.lru_cache(maxsize=64)
def _window_last(d, ndim):
    """The order that moves dim d + 1 (unfold's window dim after its split) last, of ndim + 1 dims."""
    return tuple(range(d + 1)) + tuple(range(d + 2, ndim + 1)) + (d + 1,)


def _triangle_indices(name, row, col, offset, dtype, device, lower):
    if row < 0 or col < 0:
        raise ShapeError(f"{name}: row and col must be non-negative, got {row} and {col}")
    # the coordinates from the sizes alone, made on the host and sent once: seven ops dispatched
    # (two aranges, their expansions, a mask, two boolean selections, a stack) cost 20 times this
    coords = triangle_coordinates(row, col, offset, lower)
    if device is None and dtype is None:  # the CPU's int64 coordinates: new_tensor's checks have nothing to check
        return wrap(primitives_on(CPU).from_numpy(coords.copy(), dt.int64), CPU)
    # a copy: the backend may keep the host array it is given as the tensor's memory
    return new_tensor(
        name,
        lambda bk, d: bk.from_numpy(coords.copy(), d),
        coords.shape,
        dtype or dt.int64,
        device,
        requires_grad=False,
    )


def triangle_coordinates(row, col, offset, lower):
    """The (2, n) int64 coordinates of the lower (or upper) triangle at ``offset`` of a row x col matrix,
    as a host array (read-only where it is kept)."""
    if row.__class__ is int and col.__class__ is int and offset.__class__ is int:
        return _kept_triangle_coordinates(row, col, offset, lower)
    return _triangle_coordinates(row, col, offset, lower)


def _triangle_coordinates(row, col, offset, lower):
    return np.stack((np.tril_indices if lower else np.triu_indices)(row, offset, col))


@functools.lru_cache(maxsize=64)
def _kept_triangle_coordinates(row, col, offset, lower):
    """``_triangle_coordinates`` kept for the sizes last asked (ints): NumPy's tril_indices takes 10 us
    for a few elements, a copy of the kept array a fraction of one."""
    coords = _triangle_coordinates(row, col, offset, lower)
    coords.flags.writeable = False
    return coords


def _triangle_direct(lower):
    """tril_indices' (``lower``) or triu_indices' direct lane: a copy of the kept coordinates of int sizes,
    the CPU's int64 ones (the forward's common case without its frames); None for any other call."""

    def direct(row, col, offset, dtype, device):
        if (
            dtype is None
            and device is None
            and row.__class__ is col.__class__ is offset.__class__ is int
            and row >= 0
            and col >= 0
        ):
            return wrap(_kept_triangle_coordinates(row, col, offset, lower).copy(), CPU)
        return None

    return direct


@op(
    "tril_indices",
    doc="The (2, n) coordinates of the lower triangle (at offset) of a row x col matrix.",
    method=False,
    direct=_triangle_direct(True),
)
def tril_indices(
    row: int,
    col: int,
    offset: int = 0,
    *,
    dtype: DType | None = None,
    device: Device | str | None = None,
) -> Tensor:
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, lower=True)


@op(
    "triu_indices",
    doc="The (2, n) coordinates of the upper triangle (at offset) of a row x col matrix.",
    method=False,
    direct=_triangle_direct(False),
)
def triu_indices(
    row: int,
    col: int,
    offset: int = 0,
    *,
    dtype: DType | None = None,
    device: Device | str | None = None,
) -> Tensor:
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, lower=False)


@op(
    "fold",
    dtypes=FLOATING_OR_BOOL,
    doc="The columns (N, C * kh * kw, blocks) of sliding blocks summed back into images of output_size (col2im).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def fold(
    input: Tensor,
    output_size: int | Sequence[int],
    kernel_size: int | Sequence[int],
    dilation: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    stride: int | Sequence[int] = 1,
) -> Tensor:
    name = "fold"
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise ShapeError(
            f"{name}: expected a 2-d or 3-d input (N, C * kh * kw, L), got {getattr(input, 'shape', input)}"
        )
    size = int_tuple(name, "output_size", output_size, 2)
    kernel, dilation, padding, stride = _sliding_blocks(name, input, kernel_size, dilation, padding, stride)
    bk = primitives(input)
    recording = needs_grad(input)
    if input.ndim == 3:
        batched = input
    elif recording:
        batched = input.unsqueeze(0)
    else:  # (a view made on the backend where there is no graph)
        batched = wrap(bk.slice(input._data, (None,)), input._device)
    rows, cols, (oh, ow) = _block_grid(name, size, kernel, dilation, padding, stride, input._device)
    n, columns, blocks = batched.shape
    per_block = kernel[0] * kernel[1]
    if columns % per_block or blocks != oh * ow:
        raise ShapeError(
            f"{name}: input {fmt_shape(input.shape)} needs a dim 1 divisible by kh * kw = {per_block} and "
            f"{oh * ow} blocks (dim 2) for output_size {size}, kernel_size {kernel}"
        )
    c = columns // per_block
    blocks_shape = (n, c, kernel[0], kernel[1], oh, ow)
    image_shape = (n, c, size[0] + 2 * padding[0], size[1] + 2 * padding[1])
    key = (slice(None), slice(None), rows, cols)
    if recording:
        # overlapping blocks add up: index_put_key with accumulate, whose gradient reads each block back
        values = batched.reshape(blocks_shape)
        image = index_put_key(filled(image_shape, 0, input.dtype, input._device), key, values, True, None, name)
    else:  # nothing recorded: the blocks (a view) added into zeros of the image's own, on the backend's arrays
        image_data = bk.full(image_shape, 0, input.dtype)
        bk.index_put_(image_data, key, bk.view(bk.contiguous(batched._data), blocks_shape), True)
        image = wrap(image_data, input._device)
    if any(padding):
        image = image[:, :, padding[0] : padding[0] + size[0], padding[1] : padding[1] + size[1]]
    return image if input.ndim == 3 else image.squeeze(0)


def _take_direct(input, index):
    """take's direct lane: NumPy's take of a CPU tensor that takes part in no graph, read flat (row-major)
    at an int64 index (negative values from the end, as the forward's); None for any other call, and
    where NumPy finds a value out of range (the forward's path names it)."""
    if _on_host(input, index) and _untracked(input):
        a, i = input._data, index._data
        if a.__class__ is np.ndarray and i.__class__ is np.ndarray and i.ndim and i.dtype is _INT64:
            return wrap(a.take(i), CPU)
    return None


@op("take", doc="The elements of input (read flat) at index, in index's shape.", composite=True, direct=_take_direct)
def take(input: Tensor, index: Tensor) -> Tensor:
    if not isinstance(index, Tensor) or index.dtype.category != dt.INTEGER:
        raise DTypeError("take: index must be an integer tensor")
    n = input.numel()
    if not _in_range_on_host(index, n) and index.numel():
        _check_wrapping_range("take", index, n, lambda: f"input {fmt_shape(input.shape)} of {n} elements")
    if index._data.ndim and index._device is input._device:  # the flat view's index_key, not getitem's key checks
        if not needs_grad(input):
            bk = primitives(input)
            return wrap(bk.index(_flat(bk, input._data), (index._data,)), input._device)
        return index_key(input.reshape(-1), (index._data,))
    return getitem(input.reshape(-1), index)


def _put_direct(input, index, source, accumulate):
    """put's direct lane: the host loop's write (or sum) of source into a row-major copy of input read
    flat, at an int64 index in [0, size), CPU tensors that take part in no graph; None for any other call
    (the forward's path, which wraps negative positions and names the errors)."""
    if _on_host(input, index, source) and accumulate.__class__ is bool and _untracked(input) and _untracked(source):
        a, i, src = input._data, index._data, source._data
        if a.ndim and i.__class__ is np.ndarray and src.__class__ is np.ndarray and i.size == src.size:
            out = indexed_along(a.reshape(a.size), 0, i.reshape(i.size), src.reshape(src.size), _PUT_HOW[accumulate])
            if out is not None:
                return wrap(out.reshape(a.shape), CPU)
    return None


_PUT_HOW = {False: "write", True: "add"}  # put's accumulate, as indexed_along's combine


@op(
    "put",
    dtypes=ANY.one_dtype("input", "source"),
    doc="input with source written (or added) at the flat positions index.",
    composite=True,
    inplace=True,
    direct=_put_direct,
)
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    if not isinstance(index, Tensor) or index.dtype.category != dt.INTEGER:
        raise DTypeError("put: index must be an integer tensor")
    if not isinstance(source, Tensor) or source.numel() != index.numel():
        raise ShapeError(
            f"put: source must have as many elements as index ({index.numel()}), got "
            f"{fmt_shape(source.shape) if isinstance(source, Tensor) else type(source).__name__}"
        )
    n = input.numel()
    if not _in_range_on_host(index, n) and index.numel():
        _check_wrapping_range("put", index, n, lambda: f"input {fmt_shape(input.shape)} of {n} elements")
    if input.ndim == 0:
        return index_put(input.reshape(1), (index.reshape(-1) * 0,), source.reshape(-1), accumulate).reshape(())
    # one index into the flat view (negative positions wrap as index_put's do), then the shape back: a
    # view of the result, where unravelling the positions into coordinates cost two ops per dim
    if not needs_grad(input, source):  # the write itself, on the backend's flat views
        bk = primitives(input)
        data = _own_contiguous(bk, input)
        bk.index_put_(bk.view(data, (-1,)), (_flat(bk, index._data),), _flat(bk, source._data), accumulate)
        return wrap(data, input._device)
    flat = index_put(input.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(tuple(input.shape))


def _masked_scatter_direct(input, mask, source):
    """masked_scatter's direct lane: the host loop's count and write (source of input's dtype, a mask of
    input's shape), for CPU tensors that take part in no graph; None for any other call (the forward's
    path, which checks and names the errors)."""
    if _on_host(input, mask, source) and _untracked(input) and _untracked(source):
        return _on_cpu(masked_scattered(input._data, mask._data, source._data))
    return None


@op(
    "masked_scatter",
    dtypes=ANY.one_dtype("input", "source"),
    doc="input with source's leading elements written, in order, where mask is true.",
    composite=True,
    inplace=True,
    direct=_masked_scatter_direct,
)
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    if not isinstance(mask, Tensor) or mask._data.dtype is not _BOOL and mask.dtype is not dt.bool_:
        raise DTypeError("masked_scatter: mask must be a bool tensor")
    shape = input._data.shape
    if mask._data.shape != shape and broadcast_shapes("masked_scatter", shape, mask._data.shape) != shape:
        raise ShapeError(
            f"masked_scatter: mask {fmt_shape(mask.shape)} does not broadcast to input {fmt_shape(input.shape)}"
        )
    bk = primitives(input)
    selected = mask._data if mask._data.shape == shape else bk.expand(mask._data, shape)
    count = int(bk.to_numpy(bk.reduce("sum", selected, None, False)))
    if source.numel() < count:
        raise ShapeError(
            f"masked_scatter: mask selects {count} elements but source {fmt_shape(source.shape)} has {source.numel()}"
        )
    if not needs_grad(input, source):  # the write itself, on the backend's arrays
        data = _own_contiguous(bk, input)
        bk.index_put_(data, (selected,), bk.slice(_flat(bk, source._data), (slice(0, count),)), False)
        return wrap(data, input._device)
    return index_put_key(input, (selected,), source.reshape(-1)[:count], False, None, "masked_scatter")


def _write_diagonal(self, count, step, fill_value):
    """fill_diagonal_'s write where nothing is recorded: ``count`` elements ``step`` apart from the first
    of a contiguous tensor's flat memory set to a number, with fill_'s checks (the ops it would take
    cost three dispatches)."""
    check_inplace_allowed(self, "fill_diagonal_")
    bk = primitives(self)
    diagonal = bk.slice(bk.view(self._data, (-1,)), (slice(0, (count - 1) * step + 1, step),))
    bk.copy_(diagonal, scalar_into("fill_diagonal_", fill_value, self.dtype))
    version_counter(self).value += 1
    return self


def _fill_diagonal_direct(self, fill_value, wrap):
    """fill_diagonal_'s direct lane: ``_write_diagonal``'s write for a non-empty row-major CPU matrix in no
    graph and a number, on its host array's flat view (without the forward's and the primitives'
    frames); None for any other call."""
    if _untracked(self) and self._device is CPU and fill_value.__class__ in _NUMBERS and wrap.__class__ is bool:
        a = self._data
        if a.ndim == 2 and a.size and a.flags.c_contiguous:
            rows, cols = a.shape
            step = cols + 1
            count = (rows if rows < cols else cols) if not (wrap and rows > cols) else (rows * cols - 1) // step + 1
            check_inplace_allowed(self, "fill_diagonal_")
            a.reshape(rows * cols)[: (count - 1) * step + 1 : step] = scalar_into(
                "fill_diagonal_", fill_value, self.dtype
            )
            version_counter(self).value += 1
            return self
    return None


@op(
    "fill_diagonal_",
    doc="The main diagonal (all dims equal; wrap continues it down tall matrices) set to fill_value.",
    composite=True,
    function=False,
    direct=_fill_diagonal_direct,
)
def fill_diagonal_(self: Tensor, fill_value: Number, wrap: bool = False) -> Tensor:
    shape = self._data.shape  # (the array's: Tensor.shape makes one a read)
    ndim = len(shape)
    if ndim < 2 or (ndim > 2 and len(set(shape)) != 1):
        raise ShapeError(f"fill_diagonal_: expected a 2-d tensor, or all dims of equal length, got {fmt_shape(shape)}")
    rows, cols = shape[0], shape[-1]
    if ndim == 2:  # (a matrix: the steps below in a few reads)
        step = cols + 1
        count = (rows if rows < cols else cols) if not (wrap and rows > cols) else (rows * cols - 1) // step + 1
    else:  # the flat distance between diagonal elements: the sum of the strides of a contiguous layout
        strides = [1] * ndim
        for d in range(ndim - 2, -1, -1):
            strides[d] = strides[d + 1] * shape[d + 1]
        step, count = sum(strides), min(shape)
    if count and self.is_contiguous():
        # the diagonal as a strided view of the flat memory, written in place: no mask over every element
        if needs_grad(self) or isinstance(fill_value, Tensor):
            self.view(-1)[: (count - 1) * step + 1 : step].fill_(fill_value)
            return self
        return _write_diagonal(self, count, step, fill_value)
    positions = arange(count, device=self.device) * step
    mask = index_put(full((self.numel(),), False, dtype=dt.bool_, device=self.device), (positions,), True)
    return self.masked_fill_(mask.reshape(tuple(self.shape)), fill_value)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("index", onnx=lambda w, node, **params: w.index(node, **params))
lowering(
    "index_put_",
    onnx=lambda w, node, **params: w.index_put_(node, **params),
    c=lambda lower, node: lower.index_put(node),
)
lowering("gather", onnx=lambda w, node, **params: w.gather(node, **params))
lowering("scatter_add", onnx=lambda w, node, **params: w.scatter_add(node, **params))
lowering("tril", onnx=lambda w, node, **params: w.tril(node, **params))
lowering("triu", onnx=lambda w, node, **params: w.triu(node, **params))
