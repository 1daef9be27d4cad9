"""Ordering along a dim: ``sort argsort topk msort median nanmedian mode``; ``unique``; and the
running extremes and log-sum-exp ``cummax cummin logcumsumexp`` (scans of public ops, so they run
on every backend).

The backend's ``sort`` primitive (its sort family: ``kernels/sort.cu``) gives the order; values are
then gathered from the input, so their gradient flows back to the positions they came from
(PyTorch's SortBackward / TopkBackward). All of them are composite ops.
"""

from __future__ import annotations

import math
import typing
from collections import namedtuple
from typing import TYPE_CHECKING

import numpy as np  # the direct lanes' host arrays (their dtypes)

from .. import dtypes as dt
from ..autograd.graph import needs_grad
from ..backends import cpu as _cpu
from ..backends.cpu.sort import first_sorted, median_of_all, mode_of_rows, search_row
from ..errors import (
    DTypeError,
    EmptyReductionError,
    IndexOutOfRangeError,
    InvalidArgumentError,
    ShapeError,
    UnsupportedError,
    fmt_shape,
)
from ..tensor import Tensor, primitives
from .common import has_shape, result_type, wrap, wrap_dim
from .dtype_support import FLOAT32_64, NUMBERS
from .elementwise import logaddexp, where
from .index import gather
from .layout import cat
from .reduce import along, values_and_indices
from .registry import op

if TYPE_CHECKING:
    from ..backends.seam import CPUArray

sort_result = namedtuple("sort", ["values", "indices"])
topk_result = namedtuple("topk", ["values", "indices"])
median_result = namedtuple("median", ["values", "indices"])


def _order(name, input, dim, descending):
    """(axis, int64 indices that order ``input`` along ``dim``, sorted values) for a tensor of >= 1 dim."""
    axis = wrap_dim(dim, input.ndim, name)
    values, idx = primitives(input).sort(input._data, axis, descending, True)
    return axis, wrap(idx, input._device), wrap(values, input._device)


def _values_at(input, axis, indices, sorted_values):
    """The input's values at ``indices``: a differentiable gather when a gradient is needed."""
    if needs_grad(input):
        return gather(input, axis, indices)
    return sorted_values


def _scalar_order(name, input, dim):
    """A 0-d tensor is its own ordering (index 0), as in PyTorch."""
    wrap_dim(dim, 0, name)
    zero = wrap(primitives(input).full((), 0, dt.int64), input._device)
    return input.clone(), zero


@op("sort", doc="Values sorted along dim and their indices (a stable sort).", composite=True)
def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> tuple[Tensor, Tensor]:
    """Sorted values and their indices along ``dim``. The sort is always stable (``stable=True`` asks
    for what is always given): equal values keep their order."""
    return _sorted("sort", input, dim, descending)


def _sorted(name, input, dim, descending):
    if input.ndim == 0:
        return sort_result(*_scalar_order(name, input, dim))
    axis, indices, values = _order(name, input, dim, descending)
    return sort_result(_values_at(input, axis, indices, values), indices)


@op("argsort", doc="The indices that sort input along dim.", composite=True)
def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    if input.ndim == 0:
        return _scalar_order("argsort", input, dim)[1]
    return _order("argsort", input, dim, descending)[1]


@op(
    "topk",
    dtypes=NUMBERS,
    doc="The k largest (or smallest) values along dim and their indices, in order.",
    composite=True,
)
def topk(
    input: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,  # noqa: A002 (PyTorch's name)
    sorted: bool = True,
) -> tuple[Tensor, Tensor]:
    """The ``k`` largest (or smallest) values along ``dim`` and their indices, in sorted order."""
    data = input._data
    axis = wrap_dim(dim, data.ndim, "topk") if data.ndim else 0
    size = data.shape[axis] if data.ndim else 1
    if k.__class__ is not int and (not isinstance(k, int) or isinstance(k, bool)):
        raise DTypeError(f"topk: k must be an int, got {type(k).__name__}")
    if k < 0 or k > size:  # PyTorch's RuntimeError: a value, not an index, out of range
        raise InvalidArgumentError(
            f"topk: k ({k}) is out of range for dimension {dim} of size {size} (input shape {fmt_shape(input.shape)})"
        )
    if input.ndim == 0:
        values, indices = _scalar_order("topk", input, dim)
        if k == 0:
            values, indices = values.reshape(1)[:0], indices.reshape(1)[:0]
        return topk_result(values, indices)
    P, device = primitives(input), input._device
    if P is _cpu and axis == data.ndim - 1 and not needs_grad(input):
        first = first_sorted(
            typing.cast("CPUArray", data), k, largest
        )  # the host module's one call, where it takes the array
        if first is not None:
            return topk_result(wrap(first[0], device), wrap(first[1], device))
    ordered, order = P.sort(data, axis, largest, True)
    first_k = along(axis, slice(0, k))
    indices = wrap(P.contiguous(P.slice(order, first_k)), device)
    if needs_grad(input):
        return topk_result(gather(input, axis, indices), indices)
    return topk_result(wrap(P.slice(ordered, first_k), device), indices)


@op("msort", doc="input sorted along dim 0.", composite=True)
def msort(input: Tensor) -> Tensor:
    return _sorted("msort", input, 0, False).values  # sort's forward, without its entry


@op("median", dtypes=NUMBERS, doc="The lower median (of all elements, or along dim with its index).", composite=True)
def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """The lower median (PyTorch's choice for an even count); with ``dim``, also its index."""
    if dim is None:
        if input.ndim and input._data.size and not needs_grad(input):
            return _middle_of_all(input, skip_nan=False)
        flat = input.reshape(-1)
        if flat.numel() == 0:  # NaN, as PyTorch gives (an integer tensor's NaN cast: its lowest value)
            nan = flat.sum() * math.nan if flat.dtype.is_floating_point else flat.to(dt.float32).sum() * math.nan
            return nan.to(dtype=input.dtype)
        return _evenly_shared(flat, _kth_smallest(flat, 0, (flat.numel() - 1) // 2, False).values)
    axis = wrap_dim(dim, input.ndim, "median")
    if input.ndim == 0:
        return median_result(*_scalar_order("median", input, dim))
    n = input.shape[axis]
    if n == 0:
        raise EmptyReductionError(
            f"median: expected reduction dim {dim} to have non-zero size (input shape {fmt_shape(input.shape)})"
        )
    return _kth_smallest(input, axis, (n - 1) // 2, keepdim)


def _evenly_shared(flat, value):
    """PyTorch's median of all elements: NaN if there is one, and the gradient shared evenly by every
    element equal to the result (every NaN for NaN): the amax of those elements, whose gradient is
    shared so (for NaN, NaN plus a sum of theirs divided by their count)."""
    if not flat.dtype.is_floating_point:
        return value
    nan = flat != flat
    if bool(nan.any()):
        tied = flat.where(nan, 0.0).sum()
        return tied / nan.sum()  # NaN, whatever the count
    return flat.where(flat == value.detach(), -math.inf).amax()


def _kth_smallest(input, axis, k, keepdim):
    """The k-th smallest (from 0) along ``axis`` and its index, sliced from the backend's sort."""
    P, device = primitives(input), input._device
    x = input._data
    if P is _cpu and axis == x.ndim - 1 and not needs_grad(input):
        first = first_sorted(
            typing.cast("CPUArray", x), k + 1, False
        )  # the host module's one call, where it takes the array
        if first is not None:
            at = k if not keepdim else slice(k, k + 1)
            return median_result(wrap(first[0][..., at].copy(), device), wrap(first[1][..., at].copy(), device))
    ordered, order = P.sort(x, axis, False, True)
    kept = along(axis, slice(k, k + 1))
    indices = P.contiguous(P.slice(order, kept))
    if needs_grad(input):
        values = gather(input, axis, wrap(indices, device))
        if not keepdim:
            values = values.squeeze(axis)
    else:
        values = wrap(P.contiguous(P.slice(ordered, kept if keepdim else along(axis, k))), device)
    if not keepdim:
        indices = P.view(indices, tuple(s for d, s in enumerate(input.shape) if d != axis))
    return median_result(values, wrap(indices, device))


def _middle_of_all(input, skip_nan):
    """median() (nanmedian() if ``skip_nan``) of a non-empty input that needs no gradient: the lower
    middle of the flattened sort (of its numbers, NaN left out), or a NaN where the input holds one
    (PyTorch's median) or holds nothing else (nanmedian). NaN sorts last."""
    P = primitives(input)
    if P is _cpu:  # the host module's selection, where it takes the array
        middle = median_of_all(typing.cast("CPUArray", input._data), skip_nan)
        if middle is not None:
            return wrap(middle, input._device)
    ordered, _ = P.sort(input._data, None, False, True)
    n = count = input.numel()
    if input.dtype.is_floating_point:
        numbers = P.index(ordered, (P.binary("eq", ordered, ordered, input.dtype),))
        count = numbers.shape[0]
        if count == 0 or count < n and not skip_nan:
            return wrap(P.contiguous(P.slice(ordered, (n - 1,))), input._device)  # a NaN
    return wrap(P.contiguous(P.slice(ordered, ((count - 1) // 2,))), input._device)


@op(
    "unique",
    doc="The distinct elements (or slices along dim), sorted, with the inverse indices and counts if asked.",
    composite=True,
)
def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,  # noqa: A002
    dim: int | None = None,
) -> Tensor | tuple[Tensor, ...]:
    """The distinct elements of the flattened input in ascending order (``sorted=False`` gives them
    sorted too, which PyTorch allows); NaNs are each distinct, as in PyTorch. With ``dim``, the
    distinct slices along ``dim`` in lexicographic order (``_unique_slices``)."""
    if dim is not None:
        return _unique_slices(input, return_inverse, return_counts, dim)
    n = input.numel()
    if n == 0:
        values = input.detach().reshape(-1).clone()
        empty_int = wrap(primitives(input).full((0,), 0, dt.int64), input._device)
        extras = ([empty_int.reshape(tuple(input.shape))] if return_inverse else []) + (
            [empty_int] if return_counts else []
        )
        return tuple([values] + extras) if extras else values
    # on the backend's arrays (nothing to record: the input is detached; each public op would pay the
    # dispatch again)
    P, device = primitives(input), input._device
    ordered, order = P.sort(P.view(P.contiguous(input._data), (n,)), 0, False, True)
    # where a new value begins in the sorted order
    starts = _run_starts(P, ordered, 0, input.dtype)
    values = P.index(ordered, (starts,))
    out = [wrap(values, device)]
    if return_inverse or return_counts:
        group = P.binary("sub", P.cumsum(starts, 0), 1, dt.int64)  # each sorted element's position in values
        if return_inverse:
            inverse = P.index_put_(P.full((n,), 0, dt.int64), (order,), group, False)
            out.append(wrap(P.view(inverse, tuple(input.shape)), device))
        if return_counts:
            out.append(wrap(P.bincount(group, values.shape[0]), device))
    return tuple(out) if len(out) > 1 else out[0]


@op(
    "unique_consecutive",
    doc="input with each run of equal consecutive elements (or slices along dim) kept once; inverse and "
    "counts if asked.",
    composite=True,
)
def unique_consecutive(
    input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> Tensor | tuple[Tensor, ...]:
    # on the backend's arrays: the public ops would each pay the dispatch again
    P, x, device = primitives(input), input._data, input._device
    if dim is None:
        x, axis = P.view(P.contiguous(x), (input.numel(),)), 0
    else:
        axis = wrap_dim(dim, input.ndim, "unique_consecutive")
        if input.ndim == 0:
            raise IndexOutOfRangeError(f"unique_consecutive: dim={dim} given, but the input is 0-d (it has no dims)")
    n = x.shape[axis]
    if n == 0:
        values = P.astype(x, input.dtype)
        run_of = starts = P.full((0,), 0, dt.int64)
    else:
        changed = _changes(P, x, axis, input.dtype)
        if x.ndim > 1:  # a slice starts a run where any of its elements differs
            changed = P.reduce("any", changed, tuple(d for d in range(x.ndim) if d != axis), False)
        new_run = P.cat([P.full((1,), True, dt.bool_), changed], 0)
        if dim is None and not return_counts:  # the flattened values where a run starts, by the mask itself
            values = P.index(x, (new_run,))
        else:
            starts = P.index(P.arange(0, n, 1, dt.int64), (new_run,))
            values = P.index(x, along(axis, starts))
        if return_inverse:
            run_of = P.binary("sub", P.cumsum(new_run, 0), 1, dt.int64)  # each element's run
    out = [wrap(values, device)]
    if return_inverse:
        out.append(wrap(P.view(run_of, tuple(input.shape)) if dim is None else run_of, device))
    if return_counts:
        ends = P.cat([P.slice(starts, (slice(1, None),)), P.full((1,), n, dt.int64)], 0) if n else starts
        out.append(wrap(P.binary("sub", ends, starts, dt.int64), device))
    return tuple(out) if len(out) > 1 else out[0]


def _changes(P, x, axis, dtype):
    """Where each element of the backend array ``x`` along ``axis`` differs from the one before (n - 1
    marks: the first element has none before it), as bools; NaN differs from everything."""
    n = x.shape[axis]
    return P.binary("ne", P.slice(x, along(axis, slice(1, None))), P.slice(x, along(axis, slice(None, n - 1))), dtype)


def _run_starts(P, x, axis, dtype):
    """Where each run of equal elements of ``x`` along ``axis`` starts (the first element, and each that
    differs from the one before), as bools of x's shape."""
    first = tuple(1 if d == axis else s for d, s in enumerate(x.shape))
    return P.cat([P.full(first, True, dt.bool_), _changes(P, x, axis, dtype)], axis)


def _int64(input, shape, value):
    return wrap(primitives(input).full(shape, value, dt.int64), input._device)


def _unique_slices(input, return_inverse, return_counts, dim):
    """unique(dim=...): the slices along ``dim`` sorted lexicographically (as PyTorch, whatever
    ``sorted`` says), made of sorts, cumsums and scatters only, so every backend runs it. Each
    column (one element position of the slices) is first replaced by its dense rank among the
    slices (one batched sort), which keeps order and equality; the ranks of as many columns as fit
    in 63 bits are packed into one key, and stable sorts by the keys from the last to the first
    give the lexicographic order."""
    if input.ndim == 0:
        raise IndexOutOfRangeError(f"unique: dim={dim} given, but the input is 0-d (it has no dims)")
    axis = wrap_dim(dim, input.ndim, "unique")
    x = input.detach().movedim(axis, 0)
    n, rest = x.shape[0], tuple(x.shape[1:])
    width = 1
    for size in rest:
        width *= size
    if width == 0 and n:
        raise ShapeError(
            f"unique: input of shape {fmt_shape(input.shape)} has 0-sized dims other than dim={dim}, so its "
            "slices cannot be told apart"
        )
    if n == 0:
        extras = ([_int64(input, (0,), 0)] if return_inverse else []) + (
            [_int64(input, (0,), 0)] if return_counts else []
        )
        return tuple([input.detach().clone()] + extras) if extras else input.detach().clone()
    rows = x.reshape(n, width)
    ordered, order = sort(rows, 0)
    steps = (ordered[1:] != ordered[:-1]).to(dtype=dt.int64)
    ranks_in_order = cat([_int64(input, (1, width), 0), steps.cumsum(0)])
    ranks = _int64(input, (n, width), 0).scatter(0, order, ranks_in_order)  # (n, width), each < n
    bits = max(1, (n - 1).bit_length())
    per_key = max(1, 63 // bits)
    permutation = None
    for start in reversed(range(0, width, per_key)):
        chunk = ranks[:, start : start + per_key]
        shifts = [bits * (chunk.shape[1] - 1 - j) for j in range(chunk.shape[1])]
        weights = wrap(primitives(input).from_numpy([1 << s for s in shifts], dt.int64), input._device)
        key = (chunk * weights).sum(1)
        if permutation is not None:
            key = key[permutation]
        _, by_key = sort(key)
        permutation = by_key if permutation is None else permutation[by_key]
    sorted_ranks = ranks[permutation]
    starts = cat(
        [
            wrap(primitives(input).full((1,), True, dt.bool_), input._device),
            (sorted_ranks[1:] != sorted_ranks[:-1]).any(1),
        ]
    )
    values = rows[permutation][starts]
    out = [values.reshape((values.shape[0],) + rest).movedim(0, axis)]
    if return_inverse or return_counts:
        group = starts.to(dtype=dt.int64).cumsum(0) - 1
        if return_inverse:
            out.append(_int64(input, (n,), 0).scatter(0, permutation, group))
        if return_counts:
            out.append(_int64(input, (values.shape[0],), 0).scatter_add(0, group, _int64(input, (n,), 1)))
    return tuple(out) if len(out) > 1 else out[0]


# ------------------------------------------------------------------------------------------------
# More of PyTorch's order statistics (issue 15), over the sort above
kthvalue_result = namedtuple("kthvalue", ["values", "indices"])
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


@op("kthvalue", dtypes=NUMBERS, doc="The k-th smallest value along dim (k from 1) and its index.", composite=True)
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    if not isinstance(k, int) or isinstance(k, bool):
        raise DTypeError(f"kthvalue: k must be an int, got {type(k).__name__}")
    if input.ndim == 0:
        if k != 1:
            raise InvalidArgumentError(f"kthvalue: k ({k}) out of range for a 0-d tensor")
        return kthvalue_result(*_scalar_order("kthvalue", input, dim))
    axis = wrap_dim(dim, input.ndim, "kthvalue")
    n = input.shape[axis]
    if n == 0:
        raise EmptyReductionError(
            f"kthvalue: expected reduction dim {dim} to have non-zero size (input shape {fmt_shape(input.shape)})"
        )
    if not 1 <= k <= n:  # PyTorch's RuntimeError, as topk's
        raise InvalidArgumentError(
            f"kthvalue: k ({k}) out of range for dimension {dim} of size {n} (input shape {fmt_shape(input.shape)})"
        )
    values, indices = _kth_smallest(input, axis, k - 1, keepdim)
    return kthvalue_result(values, indices)


@op(
    "quantile",
    dtypes=FLOAT32_64.with_message("{op}: expected a floating point input of dtype float32 or float64, got {dtype}"),
    doc="The q-th quantiles of input along dim (of all elements when dim is None).",
    composite=True,
)
def quantile(
    input: Tensor, q: float | Tensor, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    name = "quantile"
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}: interpolation must be one of {_INTERPOLATIONS}, got {interpolation!r}")
    scalar_q = not has_shape(q)
    if has_shape(q):
        qs = [float(v) for v in q.reshape(-1).tolist()]
        if q.ndim > 1:
            raise ShapeError(f"{name}: q must be a scalar or a 1-d tensor, got shape {fmt_shape(q.shape)}")
    else:
        qs = [float(q)]
    if any(not 0 <= v <= 1 for v in qs):
        raise ValueError(f"{name}: q values must be in the range [0, 1], got {qs}")
    x = input.reshape(-1) if dim is None else input
    axis = 0 if dim is None else wrap_dim(dim, max(input.ndim, 1), name)
    if x.ndim == 0:
        x = x.reshape(1)
    n = x.shape[axis]
    if n == 0:
        raise ShapeError(f"{name}: input {fmt_shape(input.shape)} is empty along the reduced dim")
    ordered, _ = sort(x, axis)
    has_nan = (x != x).any(axis, keepdim=True)  # PyTorch: a NaN anywhere in a slice makes its quantiles NaN
    results = []
    for v in qs:
        position = v * (n - 1)
        below, above = math.floor(position), math.ceil(position)
        if interpolation == "lower" or (interpolation == "nearest" and round(position) == below):
            above = below  # Python's round: half to even, as PyTorch's
        elif interpolation in ("higher", "nearest"):
            below = above
        low, high = ordered.narrow(axis, below, 1), ordered.narrow(axis, above, 1)
        fraction = 0.5 if interpolation == "midpoint" else position - below
        value = low if below == above else low + (high - low) * fraction
        results.append(where(has_nan, math.nan, value))
    out = cat(results, axis)  # one slot per q along the reduced dim, moved to the front below
    if dim is None:
        out = out.reshape((len(qs),) + ((1,) * input.ndim if keepdim else ()))
    elif not keepdim:
        out = out.movedim(axis, 0)
    else:
        out = out.movedim(axis, 0).unsqueeze(axis + 1)
    return out.reshape(out.shape[1:]) if scalar_q else out


def _row_search(boundaries, values, right):
    """The direct lanes' (registry.py's ``direct=``) common case of searchsorted and bucketize: CPU tensors
    ``boundaries`` (1-d) and ``values`` of one float32/float64/int64/int32 dtype (the entry's dtype check
    is the forward's: the lane takes none it would refuse), int64 positions; else None."""
    if boundaries.__class__ is not Tensor or values.__class__ is not Tensor or right.__class__ is not bool:
        return None
    b, v = boundaries._data, values._data
    if primitives(boundaries) is not _cpu or values._device is not boundaries._device or b.ndim != 1:
        return None
    if b.dtype is not v.dtype or b.dtype not in _SEARCHED:
        return None
    return wrap(search_row(b, v, right), values._device)


def _searchsorted_direct(sorted_sequence, input, out_int32=False, right=False, side=None, sorter=None):
    return None if out_int32 or side is not None or sorter is not None else _row_search(sorted_sequence, input, right)


def _bucketize_direct(input, boundaries, out_int32=False, right=False):
    return None if out_int32 else _row_search(boundaries, input, right)


_SEARCHED = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32))


@op(
    "searchsorted",
    dtypes=NUMBERS.of("sorted_sequence", "input").unless_empty(),
    direct=_searchsorted_direct,
    doc="Where each value would be inserted into the sorted last dim of sorted_sequence.",
    composite=True,
    method=False,
)
def searchsorted(
    sorted_sequence: Tensor,
    input: Tensor | float,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    name = "searchsorted"
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"{name}: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError(f"{name}: side='left' contradicts right=True")
        right = side == "right"
    if getattr(sorted_sequence, "ndim", None) == 0:  # PyTorch's RuntimeError, before any dim is read
        raise ShapeError(f"{name}: boundaries tensor should have positive dimension, but got 0 dimension")
    if sorter is not None:
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    return _search(name, sorted_sequence, input, out_int32, right)


def _search(name, sorted_sequence, input, out_int32, right):
    """searchsorted's (and bucketize's) positions of ``input`` in ``sorted_sequence``'s last dim."""
    if input.__class__ is Tensor and primitives(sorted_sequence) is _cpu and input._device is sorted_sequence._device:
        boundaries, points = sorted_sequence._data, input._data
        if boundaries.ndim == 1 and boundaries.dtype == points.dtype and not out_int32:  # the commonest call
            return wrap(
                search_row(typing.cast("CPUArray", boundaries), typing.cast("CPUArray", points), right), input._device
            )
    scalar = input.__class__ is not Tensor and not has_shape(input)
    values = sorted_sequence.new_tensor([input]) if scalar else input
    if sorted_sequence._data.ndim > 1 and tuple(sorted_sequence.shape[:-1]) != tuple(values.shape[:-1]):
        raise ShapeError(
            f"{name}: sorted_sequence {fmt_shape(sorted_sequence.shape)} and input {fmt_shape(values.shape)} "
            "must agree in every dim but the last (or sorted_sequence must be 1-d)"
        )
    P, boundaries, points = primitives(sorted_sequence), sorted_sequence._data, values._data
    if sorted_sequence.dtype is values.dtype:  # the common call: nothing to promote
        out = P.searchsorted(boundaries, points, right)
    else:
        common = result_type(sorted_sequence, values)
        out = P.searchsorted(
            boundaries if sorted_sequence.dtype is common else P.astype(boundaries, common),
            points if values.dtype is common else P.astype(points, common),
            right,
        )
    if out_int32:
        out = P.astype(out, dt.int32)
    return wrap(P.view(out, ()) if scalar else out, sorted_sequence._device)


@op(
    "bucketize",
    dtypes=NUMBERS.of("input", "boundaries").unless_empty(),
    direct=_bucketize_direct,
    doc="The index of the bucket of 1-d boundaries each element of input falls in.",
    composite=True,
)
def bucketize(input: Tensor | float, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-d, got shape {fmt_shape(boundaries.shape)}")
    return _search("bucketize", boundaries, input, out_int32, right)  # searchsorted's forward, without its entry


# ------------------------------------------------------------------------------------------------
# median without NaN, mode
nanmedian_result = namedtuple("nanmedian", ["values", "indices"])
mode_result = namedtuple("mode", ["values", "indices"])


@op(
    "nanmedian",
    doc="The lower median of the elements that are not NaN (of all elements, or along dim with its index).",
    composite=True,
)
def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    if dim is None:
        if input.ndim and input._data.size and not needs_grad(input):
            return _middle_of_all(input, skip_nan=True)
        flat = input.reshape(-1)
        if flat.numel() == 0:  # NaN, as PyTorch gives (no element is a number)
            return (flat.sum() * math.nan).to(dtype=input.dtype) if input.dtype.is_floating_point else flat.sum()
        count = int((flat == flat).sum())
        if count == 0:  # all NaN: NaN, its gradient shared by every element
            return _evenly_shared(flat, flat.detach()[0])
        _, _, ordered = _order("nanmedian", flat, 0, False)  # NaN sorts last
        value = ordered[(count - 1) // 2]
        if not flat.dtype.is_floating_point:
            return value
        # the gradient shared evenly by the elements equal to the median, as median's
        return flat.where(flat == value, -math.inf).amax()
    axis = wrap_dim(dim, input.ndim, "nanmedian")
    if input.ndim == 0:
        return nanmedian_result(*_scalar_order("nanmedian", input, dim))
    n = input.shape[axis]
    if n == 0:
        raise EmptyReductionError(
            f"nanmedian: expected reduction dim {axis} to have non-zero size (input shape {fmt_shape(input.shape)})"
        )
    P = primitives(input)
    ordered, order = P.sort(input._data, axis, False, True)
    # of a row of NaN only, PyTorch's position (n - 1) // 2
    k = _lower_median_position(P, ordered, axis, input.dtype, (n - 1) // 2)
    at_k = values_and_indices(input, axis, P.gather(order, axis, k), P.gather(ordered, axis, k), keepdim)
    return nanmedian_result(*at_k)


def _lower_median_position(P, ordered, axis, dtype, all_nan):
    """Where the lower median of the numbers is in each slice of ``ordered`` along ``axis`` (NaN
    sorted last), as int64 of keepdim shape; ``all_nan`` in a slice of NaN only."""
    count = P.reduce("sum", P.binary("eq", ordered, ordered, dtype), (axis,), True)
    middle = P.binary("floor_divide", P.binary("sub", count, 1, dt.int64), 2, dt.int64)
    return P.where(P.binary("gt", count, 0, dt.int64), middle, all_nan, dt.int64)


@op(
    "mode",
    doc="The most frequent value along dim (the smallest of equally frequent ones) and its last index.",
    composite=True,
)
def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    if input.ndim == 0:
        return mode_result(*_scalar_order("mode", input, dim))
    axis = wrap_dim(dim, input.ndim, "mode")
    n = input.shape[axis]
    if n == 0:
        raise EmptyReductionError(
            f"mode: expected reduction dim {axis} to have non-zero size (input shape {fmt_shape(input.shape)})"
        )
    P, x = primitives(input), input._data
    if P is _cpu and axis == x.ndim - 1 and not needs_grad(input):
        # a CPU tensor recording nothing: the host module's one loop, where it takes the array
        both = mode_of_rows(typing.cast("CPUArray", x))
        if both is not None:
            values, indices = both
            if keepdim:
                values, indices = values.reshape(values.shape + (1,)), indices.reshape(indices.shape + (1,))
            return mode_result(wrap(values, input._device), wrap(indices, input._device))
    # on the backend's arrays, one primitive per step (each public op would pay the dispatch again)
    ordered, order = P.sort(x, axis, False, True)
    # equal values are adjacent once sorted: a run starts where an element differs from the one before
    starts = _run_starts(P, ordered, axis, input.dtype)
    # each position's run start (the index of the running maximum of the starts: the last True), then the
    # end of the first longest run: the smallest of the most frequent values. The sort is stable, so the
    # run's last element is the value's last occurrence in the input, PyTorch's index
    _, first = P.running_extreme("max", starts, axis)
    positions = P.view(P.arange(0, n, 1, dt.int64), (1,) * axis + (n,) + (1,) * (x.ndim - axis - 1))
    best = P.argreduce("argmax", P.binary("sub", positions, first, dt.int64), axis, True)
    at_best = values_and_indices(input, axis, P.gather(order, axis, best), P.gather(ordered, axis, best), keepdim)
    return mode_result(*at_best)


# ------------------------------------------------------------------------------------------------
# running extremes and log-sum-exp: inclusive scans
cummax_result = namedtuple("cummax", ["values", "indices"])
cummin_result = namedtuple("cummin", ["values", "indices"])


def _scan(values, axis, combine):
    """The inclusive scan of the tensors ``values`` (a tuple, scanned together) along ``axis`` by the
    associative ``combine(earlier, later)``: log2(n) steps, each combining every element with the one
    a power of two before it (Hillis and Steele), of public ops."""
    n = values[0].shape[axis]
    step = 1
    while step < n:
        earlier = tuple(v.narrow(axis, 0, n - step) for v in values)
        later = tuple(v.narrow(axis, step, n - step) for v in values)
        combined = combine(earlier, later)
        values = tuple(cat([v.narrow(axis, 0, step), c], axis) for v, c in zip(values, combined))
        step *= 2
    return values


def _running_extreme(name, input, dim, result, op):
    """The running ``op`` ("max" or "min") and its index: the last position at or before each one that
    holds the running value (PyTorch's rule: a later equal value wins; NaN propagates, and its index is
    the last NaN's): the backend's running_extreme."""
    if input.ndim == 0:
        return result(*_scalar_order(name, input, dim))
    axis = wrap_dim(dim, input.ndim, name)
    device = input._device
    values, indices = primitives(input).running_extreme(op, input._data, axis)
    indices = wrap(indices, device)
    return result(_values_at(input, axis, indices, wrap(values, device)), indices)


@op(
    "cummax",
    doc="The running maximum along dim and its index (the last of equal values; NaN propagates).",
    composite=True,
)
def cummax(input: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    return _running_extreme("cummax", input, dim, cummax_result, "max")


@op(
    "cummin",
    doc="The running minimum along dim and its index (the last of equal values; NaN propagates).",
    composite=True,
)
def cummin(input: Tensor, dim: int) -> tuple[Tensor, Tensor]:
    return _running_extreme("cummin", input, dim, cummin_result, "min")


@op(
    "logcumsumexp",
    doc="The running log of the sum of exponentials along dim (stable at any magnitude).",
    composite=True,
)
def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    if not input.dtype.is_floating_point:
        raise UnsupportedError(f"logcumsumexp: not implemented for {input.dtype} (floating point tensors only)")
    if input.ndim == 0:
        wrap_dim(dim, 0, "logcumsumexp")
        return input.clone()
    axis = wrap_dim(dim, input.ndim, "logcumsumexp")
    if not needs_grad(input):  # the backend's scan; the gradient is the one of the scan of public ops
        return wrap(primitives(input).scan("logaddexp", input._data, axis), input._device)
    return _scan((input,), axis, lambda earlier, later: (logaddexp(earlier[0], later[0]),))[0]
