"""Shape ops: views (view permute expand, and from them reshape flatten unflatten squeeze unsqueeze
transpose t movedim broadcast_to narrow split chunk unbind select T mT), and copies (flip cat stack
repeat contiguous clone; reshape where the strides leave no choice).

Views are the backend's layout primitives (``view permute expand slice flip``): they share the
base's memory and, through the dispatch point, its version counter."""

from __future__ import annotations

import builtins
import functools
import itertools
import numbers
import operator
from typing import TYPE_CHECKING, Any, overload

from numpy import ndarray as _ndarray
from numpy import zeros as _np_zeros

from .. import dtypes as dt
from ..autograd.graph import sum_to_shape
from ..backends import cpu as _cpu
from ..backends.cpu.layout import stacked as _cpu_stacked
from ..backends.memo import remember
from ..device import CPU
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError, UnsupportedDTypeError, fmt_shape
from ..tensor import Size, Tensor, primitives
from .common import (
    broadcast_shapes,
    cast,
    check_same_device,
    filled,
    laid_out,
    preserved_order,
    result_type,
    wrap,
    wrap_dim,
)
from .dispatch import NotAView
from .dtype_support import NUMBERS
from .factories import arange, full
from .index import _scatter_back, slice_key
from .registry import lowering, op

if TYPE_CHECKING:
    from ..types import DType, Sequence


def _infer_shape(name: str, shape: Any, numel: int) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    n = 1
    for s in shape:
        if s.__class__ is not int or s < 0:
            break
        n *= s
    else:
        if n == numel:  # the common case: every size given, and they fit
            return shape
    try:
        shape = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a sequence of ints, got {shape!r}") from None
    if shape.count(-1) > 1:
        raise ShapeError(f"{name}: only one dimension can be inferred, got shape {fmt_shape(shape)}")
    for s in shape:
        if s < -1:
            raise ShapeError(f"{name}: invalid shape dimension {s} in {fmt_shape(shape)}")
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known == 0 or numel % known:
            raise ShapeError(f"{name}: shape {fmt_shape(shape)} is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    n = 1
    for s in shape:
        n *= s
    if n != numel:
        raise ShapeError(f"{name}: shape {fmt_shape(shape)} is invalid for input of size {numel}")
    return shape


# ------------------------------------------------------------------------------------------------
# the views' plain cases: each view op below declares (``view=``) the function that makes its output's
# array from a CPU input's NumPy array and its other arguments, which the dispatch point's view lane
# runs while no hook is attached (dispatch.py, ``_VIEW_LANE_SOURCE``). Each gives exactly the array
# the forward's primitive would (the same NumPy call, over the CPU backend), None where it is not
# sure to (a stride that allows no view, an argument other than plain ints, anything an error may
# come of: the forward then runs and names it), or the input array itself where the op gives its
# input back.
def _plain_sizes(sizes):
    """``sizes`` (one sequence, or the sizes themselves) where they are plain ints of which NumPy
    reads -1 as PyTorch does (NumPy infers any negative size), else None."""
    if len(sizes) == 1 and sizes[0].__class__ in _SEQUENCES:
        sizes = sizes[0]
    for n in sizes:
        if n.__class__ is not int or n < -1:  # (a bool is no plain int either)
            return None
    return sizes


def _reshaped_array(a, shape):
    """A row-major array seen with ``shape`` (a plain one, or None), which NumPy checks: the layout
    primitive's view (``storage.view``)."""
    if shape is None or not a.flags.c_contiguous:
        return None
    return a.reshape(shape)


def _plain_dim(d, ndim):
    """``d`` wrapped into ``range(ndim)``, or None where it is no plain int in range (or ``ndim`` is 0,
    whose dims 0 and -1 name the tensor itself)."""
    if d.__class__ is not int or not -ndim <= d < ndim:
        return None
    return d + ndim if d < 0 else d


def _view_array(a, size):
    return _reshaped_array(a, _plain_sizes(size))


def _view_as_array(a, other):
    return _reshaped_array(a, other._data.shape)


def _flatten_array(a, start_dim, end_dim):
    shape = a.shape
    if start_dim.__class__ is int and start_dim == 0 and end_dim.__class__ is int and end_dim == -1 and len(shape) != 1:
        return a.reshape(a.size) if a.flags.c_contiguous else None  # (a 0-d one too: its shape is (1,))
    s, e = _plain_dim(start_dim, len(shape)), _plain_dim(end_dim, len(shape))
    if s is None or e is None or s > e:
        return None
    if s == e:
        return a
    n = 1
    for size in shape[s : e + 1]:
        n *= size
    return _reshaped_array(a, shape[:s] + (n,) + shape[e + 1 :])


def _unflatten_array(a, dim, sizes):
    shape = a.shape
    d = _plain_dim(dim, len(shape))
    if d is None or sizes.__class__ not in _SEQUENCES:
        return None
    n = 1
    for size in sizes:
        if size.__class__ is not int or size < 0:  # (-1 is inferred within dim d: the forward's)
            return None
        n *= size
    if n != shape[d]:
        return None
    return _reshaped_array(a, shape[:d] + tuple(sizes) + shape[d + 1 :])


def _squeeze_array(a, dim):
    shape = a.shape
    if not dim:
        squeezed = _SQUEEZED.get(shape)
        if squeezed is None:
            squeezed = remember(_SQUEEZED, shape, tuple([n for n in shape if n != 1]), _SHAPES_KEPT)
        return _reshaped_array(a, squeezed)
    if len(dim) != 1:
        return None
    d = _plain_dim(dim[0], len(shape))
    if d is None:
        return None
    return _reshaped_array(a, shape[:d] + shape[d + 1 :] if shape[d] == 1 else shape)


# the shapes a program squeezes and unsqueezes are few: each result shape is worked out once
_SQUEEZED: dict[tuple[int, ...], tuple[int, ...]] = {}  # shape -> its size-1 dims removed
_UNSQUEEZED: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}  # (shape, dim) -> a 1 inserted at dim
_SHAPES_KEPT = 256


def _unsqueeze_array(a, dim):
    shape = a.shape
    key = (shape, dim)
    unsqueezed = _UNSQUEEZED.get(key) if dim.__class__ is int else None
    if unsqueezed is None:
        d = _plain_dim(dim, len(shape) + 1)
        if d is None:
            return None
        unsqueezed = remember(_UNSQUEEZED, key, shape[:d] + (1,) + shape[d:], _SHAPES_KEPT)
    return a.reshape(unsqueezed) if a.flags.c_contiguous else None


def _ravel_array(a):
    return a.reshape(a.size) if a.flags.c_contiguous else None


def _permute_array(a, dims):
    if len(dims) == 1 and dims[0].__class__ in _SEQUENCES:
        dims = dims[0]
    if dims.__class__ is list:
        dims = tuple(dims)
    try:
        if len(dims) != a.ndim or dims not in _SMALL_PERMUTATIONS:
            return None
    except TypeError:  # an unhashable item
        return None
    for d in dims:
        if d.__class__ is not int:  # (a bool equals an int)
            return None
    return a.transpose(dims)


def _transpose_array(a, dim0, dim1):
    ndim = a.ndim
    if _plain_dim(dim0, ndim) is None or _plain_dim(dim1, ndim) is None:
        return None
    return a.swapaxes(dim0, dim1)  # the view transpose's swapped order gives


def _t_array(a):
    ndim = a.ndim
    return a.transpose() if ndim <= 2 else None


def _T_array(a):  # noqa: N802 (T's)
    return a.transpose()


def _mT_array(a):  # noqa: N802 (mT's)
    return a.swapaxes(-2, -1) if a.ndim >= 2 else None


def _movedim_array(a, source, destination):
    ndim = a.ndim
    s, d = _plain_dim(source, ndim), _plain_dim(destination, ndim)
    if s is None or d is None:
        return None
    order = [i for i in range(ndim) if i != s]
    order.insert(d, s)
    return a.transpose(order)


def _expand_array(a, size, implicit=False):
    # one look-up from (a's layout, the sizes asked for) to the view's shape and strides, and the view
    # made over a's memory: the checks, the target and the strides (expand's forward, the backend's
    # expand) are worked out once per layout and sizes, at the first call
    try:
        view = _EXPAND_VIEWS[a.shape, a.strides, size]
    except (KeyError, TypeError):  # (TypeError: unhashable sizes, which take the path below)
        view = _expand_view(a, size)
    if view is None:
        return a
    r = _ndarray(view[0], a.dtype, a, 0, view[1])
    r.setflags(False)  # as the backend's expand: its elements share memory (positional: a third cheaper)
    return r


def _expand_view(a, size):
    """(shape, strides) of the expand of ``a`` to ``size``, None where it is ``a``'s own shape; kept
    (``_EXPAND_VIEWS``) where ``a`` is a row-major array with elements (its memory starts the view) and
    the sizes plain ints. The checks raise as expand's forward does."""
    target = _expanded_shape(a.shape, size)
    if target == a.shape:
        view = None
    else:
        made = _cpu.expand(a, target)
        view = made.shape, made.strides
    if a.flags.c_contiguous and a.size and _plain_sizes(size) is not None:
        remember(_EXPAND_VIEWS, (a.shape, a.strides, size), view, _EXPANDED_KEPT)
    return view


# (shape, strides, sizes) -> the view's (shape, strides), or None where the sizes give the shape back
_EXPAND_VIEWS: dict[tuple[Any, ...], tuple[tuple[int, ...], tuple[int, ...]] | None] = {}


def _expand_as_array(a, other):
    return _expand_array(a, other._data.shape)


def _as_strided_array(a, size, stride, storage_offset):
    offset = 0 if storage_offset is None else storage_offset
    plain = size.__class__ is tuple and stride.__class__ is tuple and offset.__class__ is int
    if a.base is not None or not plain:
        offset = _cpu.storage_offset(a) if storage_offset is None else storage_offset
        return _cpu.as_strided(a, tuple(size), tuple(stride), offset)
    # an array that owns its memory, sizes and strides as tuples: the view's strides in bytes, checked
    # once per (sizes, strides, offset, memory), kept with the very tuples checked (an equal tuple may
    # hold an equal float, which the checks refuse: a program's literal tuples are the same objects)
    item = a.itemsize
    key = (size, stride, offset, a.nbytes, item)
    known = _AS_STRIDED_VIEWS.get(key)
    if known is None or known[0] is not size or known[1] is not stride:
        known = _as_strided_steps(key)
        if known is None:
            return None
    return _ndarray(size, a.dtype, a, offset * item, known[2])


def _as_strided_steps(key):
    """(sizes, strides, the strides in bytes) of an as_strided view of memory of ``nbytes`` bytes
    (``key``: sizes, strides, storage offset, nbytes, item size), kept; None where the backend's checks
    (check_as_strided) would not pass it as it is: the forward then names the error."""
    size, stride, offset, nbytes, item = key
    if len(size) != len(stride) or offset < 0:
        return None
    last = offset
    steps = []
    for n, step in zip(size, stride):
        if n.__class__ is not int or step.__class__ is not int or n <= 0 or step < 0:
            return None
        last += (n - 1) * step
        steps.append(step * item)
    if last * item >= nbytes:
        return None
    return remember(_AS_STRIDED_VIEWS, key, (size, stride, tuple(steps)), _EXPANDED_KEPT)


_AS_STRIDED_VIEWS: dict[tuple[Any, ...], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}


# ------------------------------------------------------------------------------------------------
# views
def _reshape_fused_grad(grad, input_shape):
    """``grad.reshape(input_shape)`` for plain backward, with the primitives alone (a view where the
    gradient's strides allow one, else a copy): the view ops' gradients, with no op call."""
    bk = primitives(grad)
    data = bk.view(grad._data, input_shape)
    if data is None:
        data = bk.view(bk.contiguous(grad._data), input_shape)
    return wrap(data, grad._device)


# The ops that only compute a shape and see input so (view, reshape, flatten, squeeze, ...) are each a
# view op of its own that calls the layout primitive directly: one dispatch per call, not one for the
# op and one for the view it would be written with (half the cost of a squeeze). They share one
# derivative, declared here.
_RESHAPE_GRADS = {"input": lambda grad, input_shape: grad.reshape(input_shape)}
_RESHAPE_FUSED = {"input": _reshape_fused_grad}


@op(
    "view",
    doc="The same data seen with another shape (one dim may be -1); fails where strides forbid.",
    view=_view_array,
    node="ViewBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def view(input: Tensor, *size: int | Sequence[int] | DType) -> Tensor:
    return _view_forward(input, size)


def _view_forward(input, size):
    """view's forward (view_as's too): input seen with ``size``, or view's error."""
    shape = _infer_shape("view", size, input._data.size)
    data = primitives(input).view(input._data, shape)
    if data is None:
        raise ShapeError(
            f"view: view size {fmt_shape(shape)} is not compatible with input tensor's size "
            f"{fmt_shape(input.shape)} and stride {input.stride()} (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead."
        )
    return wrap(data, input._device)


@op(
    "reshape",
    doc="input with another shape: a view where the strides allow one, else a copy.",
    view=_view_array,
    node="ViewBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def reshape(input: Tensor, *shape: int | Sequence[int]) -> Tensor:
    return _viewed(input, _infer_shape("reshape", shape, input._data.size))


def _viewed(input, shape):
    """input seen with ``shape`` (of as many elements): a view where its strides allow one, else (a
    NotAView of) a contiguous copy viewed so, with the history of the ops that made it."""
    data = primitives(input).view(input._data, shape)
    if data is None:
        return NotAView(view(contiguous(input), shape))
    return wrap(data, input._device)


@op(
    "view_as",
    doc="view(other.shape).",
    view=_view_as_array,
    function=False,
    node="ViewBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def view_as(input: Tensor, other: Tensor) -> Tensor:
    return _view_forward(input, other._data.shape)


@op(
    "reshape_as",
    doc="reshape(other.shape).",
    view=_view_as_array,
    function=False,
    node="ViewBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    return _viewed(input, _infer_shape("reshape", other._data.shape, input._data.size))


@op(
    "flatten",
    doc="Dims start_dim..end_dim merged into one.",
    view=_flatten_array,
    node="ViewBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    shape = input._data.shape
    ndim = len(shape)
    if ndim == 0:
        return _viewed(input, (1,))
    s = wrap_dim(start_dim, ndim, "flatten")
    e = wrap_dim(end_dim, ndim, "flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim})")
    if s == e:  # PyTorch gives input itself back (a vector's flatten too)
        return input
    n = 1
    for size in shape[s : e + 1]:
        n *= size
    return _viewed(input, shape[:s] + (n,) + shape[e + 1 :])


@op(
    "unflatten",
    doc="Dim dim split into sizes.",
    view=_unflatten_array,
    node="ViewBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    d = wrap_dim(dim, input.ndim, "unflatten")
    shape = tuple(input.shape)
    inner = _infer_shape("unflatten", tuple(sizes), shape[d])
    return _viewed(input, shape[:d] + inner + shape[d + 1 :])


@op(
    "squeeze",
    doc="Dims of size 1 removed (all, or those of dim).",
    view=_squeeze_array,
    node="SqueezeBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def squeeze(input: Tensor, *dim: int | Sequence[int] | None) -> Tensor:
    # x.squeeze(), x.squeeze(0), x.squeeze(0, 2), x.squeeze((0, 2)), x.squeeze(dim=None)
    shape = input._data.shape
    if not dim or dim == (None,):
        return _viewed(input, tuple([n for n in shape if n != 1]))
    ndim = len(shape)
    axes = {wrap_dim(d, ndim, "squeeze") for d in _dims_arg(dim)}  # checked on a 0-d tensor too
    return _viewed(input, tuple(n for i, n in enumerate(shape) if n != 1 or i not in axes))


@op(
    "unsqueeze",
    doc="A dim of size 1 inserted at dim.",
    view=_unsqueeze_array,
    node="UnsqueezeBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    shape = input._data.shape
    d = wrap_dim(dim, len(shape) + 1, "unsqueeze")
    return _viewed(input, shape[:d] + (1,) + shape[d:])


@op(
    "ravel",
    doc="input flattened to 1-d (a view where the strides allow).",
    view=_ravel_array,
    node="ViewBackward0",
    grads=_RESHAPE_GRADS,
    fused=_RESHAPE_FUSED,
)
def ravel(input: Tensor) -> Tensor:
    return _viewed(input, (input._data.size,))


_SEQUENCES = (tuple, list)

# list(range(n)) for the ranks a permutation is checked against without building it per call
_IDENTITY_ORDERS = tuple(list(range(n)) for n in range(17))
# every permutation of up to 4 dims, for one set lookup in place of a sort
_SMALL_PERMUTATIONS = frozenset(p for n in range(1, 5) for p in itertools.permutations(range(n)))


def _permutation(input, dims):
    ndim = input._data.ndim
    given = dims
    if len(dims) == 1 and dims[0].__class__ in _SEQUENCES:  # permute(x, (1, 0)): one sequence of dims
        dims = dims[0]
    # the common case first: a tuple of plain ints that is already a permutation of a few dims (no
    # dims at all is an error even for a 0-d tensor, as in PyTorch)
    if dims.__class__ is list:
        dims = tuple(dims)
    try:
        known = len(dims) == ndim and dims in _SMALL_PERMUTATIONS
    except TypeError:  # an unhashable item: the checks below name it
        known = False
    if known:
        for d in dims:
            if d.__class__ is not int:  # (a bool equals an int)
                break
        else:
            return dims
    if not given:
        raise DTypeError("permute: missing 1 required positional argument: 'dims'")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if len(dims) != input.ndim:
        raise ShapeError(
            f"permute: number of dims {len(dims)} doesn't match the tensor's {input.ndim} "
            f"dims (shape {fmt_shape(input.shape)})"
        )
    axes = tuple(wrap_dim(d, input.ndim, "permute") for d in dims) if input.ndim else ()
    if sorted(axes) != list(range(input.ndim)):
        raise ShapeError(f"permute: dims {dims} are not a permutation of {input.ndim} dims")
    return axes


def _inverse_permutation(input_shape, dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    axes = tuple(wrap_dim(d, len(input_shape), "permute") for d in dims) if input_shape else ()
    return tuple(sorted(range(len(axes)), key=axes.__getitem__))


def _permute_grad(grad, input_shape, dims):
    return permute(grad, _inverse_permutation(input_shape, dims))


def _permute_fused_grad(grad, input_shape, dims):
    """``_permute_grad`` for plain backward: the primitive's view, with no op call."""
    return wrap(primitives(grad).permute(grad._data, _inverse_permutation(input_shape, dims)), grad._device)


@op(
    "permute",
    doc="The dims reordered (a view).",
    view=_permute_array,
    node="PermuteBackward0",
    grads={"input": _permute_grad},
    fused={"input": _permute_fused_grad},
)
def permute(input: Tensor, *dims: int | Sequence[int]) -> Tensor:
    return _permuted(input, _permutation(input, dims))


def _permuted(input, order):
    """input with its dims in ``order`` (a checked permutation): the forward of the view ops below,
    each of which computes an order and calls the primitive itself (one dispatch, not its own and
    permute's). Each is its own inverse, or movedim's with source and destination swapped: the fused
    gradient (plain backward) is the op's own forward applied to the gradient, over the primitives."""
    return wrap(primitives(input).permute(input._data, order), input._device)


def _swapped(ndim, dim0, dim1, name):
    """The order of ``ndim`` dims with ``dim0`` and ``dim1`` swapped (() for a 0-d tensor, whose dims
    0 and -1 name the tensor itself)."""
    a = wrap_dim(dim0, ndim, name)
    b = wrap_dim(dim1, ndim, name)
    if ndim == 2:
        return (0, 1) if a == b else (1, 0)
    axes = list(range(ndim))
    if ndim:
        axes[a], axes[b] = axes[b], axes[a]
    return tuple(axes)


@op(
    "transpose",
    doc="Dims dim0 and dim1 swapped (a view).",
    view=_transpose_array,
    aliases=("swapdims",),
    node="TransposeBackward0",
    grads={"input": lambda grad, dim0, dim1: transpose(grad, dim0, dim1)},
    fused={"input": lambda grad, dim0, dim1: transpose.op.forward(grad, dim0, dim1)},
)
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    return _permuted(input, _swapped(input._data.ndim, dim0, dim1, "transpose"))


@op(
    "swapaxes",
    doc="transpose, with NumPy's names for the two dims.",
    view=_transpose_array,
    node="TransposeBackward0",
    grads={"input": lambda grad, axis0, axis1: swapaxes(grad, axis0, axis1)},
    fused={"input": lambda grad, axis0, axis1: swapaxes.op.forward(grad, axis0, axis1)},
)
def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    return _permuted(input, _swapped(input._data.ndim, axis0, axis1, "swapaxes"))


_REVERSED_ORDERS = tuple(tuple(reversed(range(n))) for n in range(17))  # T's order by rank, made once


@op(
    "t",
    doc="The transpose of a matrix (vectors and scalars as they are).",
    view=_t_array,
    node="TBackward0",
    grads={"input": lambda grad: t(grad)},
    fused={"input": lambda grad: t.op.forward(grad)},
)
def t(input: Tensor) -> Tensor:
    ndim = input._data.ndim
    if ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dimensions, but got shape {fmt_shape(input.shape)}")
    return _permuted(input, (1, 0) if ndim == 2 else _IDENTITY_ORDERS[ndim])


@op(
    "T",
    doc="All dims reversed.",
    view=_T_array,
    function=False,
    as_property=True,
    node="PermuteBackward0",
    grads={"input": lambda grad: T(grad)},
    fused={"input": lambda grad: T.op.forward(grad)},
)
def T(input: Tensor) -> Tensor:  # noqa: N802 (PyTorch's name)
    ndim = input._data.ndim
    return _permuted(input, _REVERSED_ORDERS[ndim] if ndim < len(_REVERSED_ORDERS) else tuple(reversed(range(ndim))))


@op(
    "mT",
    doc="The last two dims swapped (batches of matrices).",
    view=_mT_array,
    function=False,
    as_property=True,
    node="TransposeBackward0",
    grads={"input": lambda grad: mT(grad)},
    fused={"input": lambda grad: mT.op.forward(grad)},
)
def mT(input: Tensor) -> Tensor:  # noqa: N802 (PyTorch's name)
    ndim = input._data.ndim
    if ndim == 1:  # (a 0-d tensor PyTorch gives back as it is)
        raise ShapeError(
            f"mT: tensor.mT is only supported on matrices or batches of matrices, got a "
            f"{ndim}-D tensor of shape {fmt_shape(input.shape)}"
        )
    return _permuted(input, _swapped(ndim, -2, -1, "mT") if ndim else ())


@op(
    "movedim",
    doc="Dims source moved to positions destination.",
    view=_movedim_array,
    aliases=("moveaxis",),
    node="PermuteBackward0",
    grads={"input": lambda grad, source, destination: movedim(grad, destination, source)},
    fused={"input": lambda grad, source, destination: movedim.op.forward(grad, destination, source)},
)
def movedim(input: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    ndim = input._data.ndim
    if source.__class__ is int and destination.__class__ is int:
        src, dst = [wrap_dim(source, ndim, "movedim")], [wrap_dim(destination, ndim, "movedim")]
    else:
        src = [source] if isinstance(source, int) else list(source)
        dst = [destination] if isinstance(destination, int) else list(destination)
        src = [wrap_dim(s, ndim, "movedim") for s in src]
        dst = [wrap_dim(s, ndim, "movedim") for s in dst]
        if len(src) != len(dst):
            raise ShapeError(
                f"movedim: source {tuple(src)} and destination {tuple(dst)} must have the same number of dims"
            )
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise ShapeError(f"movedim: repeated dim in source {tuple(src)} or destination {tuple(dst)}")
    if ndim == 0:  # dim 0 (or -1) of a 0-d tensor names the tensor itself
        return _permuted(input, ())
    order = [i for i in range(ndim) if i not in src]
    for s, d in sorted(zip(dst, src)):
        order.insert(s, d)
    return _permuted(input, tuple(order))


def _expanded_shape(in_shape, sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    try:  # the shapes a program expands are few: each pair is checked once
        return _EXPANDED[in_shape, sizes]
    except (KeyError, TypeError):  # (TypeError: an unhashable size, which the checks below name)
        pass
    target = _checked_expansion(in_shape, sizes)
    if all(s.__class__ is int for s in sizes):  # (not a 0-d tensor's size)
        remember(_EXPANDED, (in_shape, sizes), target, _EXPANDED_KEPT)
    return target


_EXPANDED: dict[tuple[tuple[int, ...], tuple[Any, ...]], tuple[int, ...]] = {}  # (shape, sizes) -> target
_EXPANDED_KEPT = 256


def _checked_expansion(in_shape, sizes):
    in_shape = tuple(in_shape)
    if len(sizes) < len(in_shape):
        raise ShapeError(
            f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal "
            f"to the number of dimensions in the tensor ({len(in_shape)})"
        )
    lead = len(sizes) - len(in_shape)
    target = []
    for i, s in enumerate(sizes):
        n = in_shape[i - lead] if i >= lead else None
        if s == -1:
            if n is None:
                raise ShapeError(f"expand: -1 not allowed in a new leading dimension (sizes {tuple(sizes)})")
            s = n
        if n is not None and n != 1 and n != s:
            raise ShapeError(
                f"expand: the expanded size of the tensor ({s}) must match the existing size "
                f"({n}) at non-singleton dimension {i}. Target sizes: {tuple(sizes)}. "
                f"Tensor sizes: {fmt_shape(in_shape)}"
            )
        target.append(int(s))
    return tuple(target)


_EXPAND_GRADS = {"input": lambda grad, input_shape: sum_to_shape(grad, input_shape)}


@op(
    "expand",
    doc="Size-1 dims repeated (a view with stride 0; -1 keeps a size).",
    view=_expand_array,
    node="ExpandBackward0",
    grads=_EXPAND_GRADS,
)
def expand(input: Tensor, *size: int | Sequence[int], implicit: bool = False) -> Tensor:
    # implicit marks, for PyTorch's tracer, an expand that broadcasting made: the same view here
    return _expanded(input, _expanded_shape(input._data.shape, size))


def _expanded(input, target):
    """expand's forward (expand_as's and broadcast_to's: view ops of their own, one dispatch a call)."""
    if target == input._data.shape:
        return input
    return wrap(primitives(input).expand(input._data, target), input._device)


@op(
    "expand_as",
    doc="expand(other.shape).",
    view=_expand_as_array,
    function=False,
    node="ExpandBackward0",
    grads=_EXPAND_GRADS,
)
def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return _expanded(input, _expanded_shape(input._data.shape, other._data.shape))


@op("broadcast_to", doc="expand to size.", view=_expand_array, node="ExpandBackward0", grads=_EXPAND_GRADS)
def broadcast_to(input: Tensor, *size: int | Sequence[int]) -> Tensor:
    return _expanded(input, _expanded_shape(input._data.shape, size))


_BROADCAST: dict[tuple[tuple[int, ...], ...], tuple[int, ...]] = {}  # the input shapes -> their broadcast
_BROADCAST_KEPT = 256


@op("broadcast_tensors", doc="The tensors expanded to their common broadcast shape.", composite=True, method=False)
def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    shapes = tuple([t._data.shape for t in tensors])
    shape = _BROADCAST.get(shapes)  # (the shapes a program broadcasts are few: each set is worked out once)
    if shape is None:
        shape = remember(_BROADCAST, shapes, broadcast_shapes("broadcast_tensors", *shapes), _BROADCAST_KEPT)
    # a tensor of that shape already is its own expand (which gives it back): no dispatch for it
    return tuple(t if t._data.shape == shape else expand(t, shape) for t in tensors)


# ------------------------------------------------------------------------------------------------
# copies
def _dims_arg(dims: Any) -> tuple[int, ...]:
    """Dims given as varargs (``x.flip(0, 2)``) or as one sequence (``flip(x, (0, 2))``; ``dims=(0, 2)``
    by keyword arrives so too), as a tuple."""
    if len(dims) == 1 and not isinstance(dims[0], numbers.Integral):
        return tuple(dims[0])
    return tuple(dims)


def _flip_axes(ndim, dims):
    axes = tuple(wrap_dim(d, ndim, "flip") for d in dims)  # checked on a 0-d tensor too, as PyTorch does
    if len(set(axes)) != len(axes):
        raise ShapeError(f"flip: dims {tuple(dims)} name a dim more than once")
    return axes if ndim else ()


def _flipped(input, axes):
    """input reversed along ``axes`` (checked), as a new contiguous tensor: flip's forward and that of
    fliplr and flipud, ops of their own (one dispatch a call), each its own gradient."""
    bk = primitives(input)
    flipped = bk.flip(input._data, axes)
    data = bk.contiguous(flipped)
    if data is flipped:  # nothing reversed (no dims, or only dims of size 1): still input's memory
        data = bk.astype(flipped, input.dtype)
    return wrap(data, input._device)


@op(
    "flip",
    doc="The order of elements reversed along dims (a copy).",
    node="FlipBackward0",
    grads={"input": lambda grad, dims: flip(grad, *dims)},
)
def flip(input: Tensor, *dims: int | Sequence[int]) -> Tensor:
    return _flipped(input, _flip_axes(input._data.ndim, _dims_arg(dims)))


@op("narrow", doc="length elements of dim from start (a view).", composite=True)
def narrow(input: Tensor, dim: int, start: int | Tensor, length: int) -> Tensor:
    return slice_key(input, _narrow_key("narrow", input, dim, start, length))


def _narrow_key(name, input, dim, start, length):
    """The basic key of narrow's view (checked), for slice_key."""
    return _narrow_key_of(name, input._data.shape, dim, start, length)


def _narrow_key_of(name, shape, dim, start, length):
    """``_narrow_key`` for an input of ``shape``."""
    if not shape:
        raise ShapeError(f"{name}: cannot be applied to a 0-dim tensor")
    d = wrap_dim(dim, len(shape), name)
    size = shape[d]
    if start.__class__ is not int:
        start = int(start)  # a 0-d integer tensor too, as PyTorch takes it
    if start < 0:
        start += size
    if start < 0 or length < 0 or start + length > size:
        raise ShapeError(
            f"{name}: start ({start}) + length ({length}) exceeds dimension size ({size}) of shape {fmt_shape(shape)}"
        )
    return (_FULL,) * d + (slice(start, start + length),)


_FULL = slice(None)


def _slices(input, d, bounds):
    """The views of input from each of ``bounds`` to the next along dim ``d`` (empty where the next is
    smaller): slice_key called directly, one dispatch a piece (split, chunk, tensor_split; narrow's and
    getitem's would add two)."""
    keys = _slice_keys(d, bounds)
    return _pieces(input, keys) or tuple([slice_key(input, key) for key in keys])


def _slice_keys(d, bounds):
    """The keys of ``_slices``' pieces."""
    lead = (_FULL,) * d
    keys = []
    start = bounds[0]
    for stop in bounds[1:]:  # (a plain loop: a generator and max() per piece cost half a slice_key)
        # (no trailing Ellipsis: compiled programs match the pieces' gradient writes by these keys)
        keys.append(lead + (slice(start, stop if stop > start else start),))
        start = stop
    return keys


def _pieces(input, keys):
    """slice_key's views of input at each of ``keys``, made in one call by its view lane (``views``); None
    where that declines (a hook attached, an input in the graph: one entry call each is then the caller's)."""
    views = slice_key.views(input, [(key, None) for key in keys])
    return None if views is None else tuple(views)


def _contiguous_method(self: Tensor) -> Tensor:
    """Tensor.contiguous: the tensor itself where it already is contiguous, with no dispatch (as
    PyTorch's method answers before it dispatches; the op would give back the same tensor, recording
    nothing), else the op."""
    data = self._data
    # (a CPU array's flag read here: Tensor.is_contiguous's call was a third of the method's cost)
    if data.flags.c_contiguous if data.__class__ is _ndarray else self.is_contiguous():
        return self
    return contiguous(self)


@op(
    "contiguous",
    doc="input in row-major layout (input itself if it is already).",
    node="CloneBackward0",
    method=_contiguous_method,
    grads={"input": lambda grad: grad},
)
def contiguous(input: Tensor) -> Tensor:
    data = primitives(input).contiguous(input._data)
    return input if data is input._data else wrap(data, input._device)


@op("clone", doc="A copy with its own memory.", node="CloneBackward0", grads={"input": lambda grad: grad})
def clone(input: Tensor) -> Tensor:
    bk = primitives(input)
    order = preserved_order(input)  # PyTorch's preserve_format: a transposed tensor's clone is transposed
    if order is not None:
        return wrap(
            laid_out(bk, order, input.shape, lambda _: bk.contiguous(bk.permute(input._data, order))), input._device
        )
    data = bk.contiguous(input._data)
    if data is input._data:
        data = bk.astype(data, input.dtype)
    return wrap(data, input._device)


def _same_kind_arrays(tensors):
    """The arrays of ``tensors`` where all are Tensors on one device object (the common case, read with
    NumPy-speed loops: per-tensor checks cost about 2 us a tensor); None where any is not, for the
    general path's checks and errors. Their dtypes and dims the caller checks (or the backend's cat)."""
    try:
        arrays = [t._data for t in tensors]
        devices = [t._device for t in tensors]
    except AttributeError:  # not a Tensor, or a sparse one (no array)
        return None
    return arrays if _all_same(devices) else None


def _all_same(items):
    """Whether every one of ``items`` equals the first (list.count: a C loop that tries identity first;
    a set would hash each, a Python-level hash for devices and dtypes)."""
    return items.count(items[0]) == len(items)


def _cat_parts(tensors):
    """The tensors cat joins: PyTorch skips legacy empty 1-d tensors of shape (0,)."""
    return [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]


def _cat_grad(grad, tensors_shape, dim):
    ndim = grad.ndim
    d = wrap_dim(dim, ndim, "cat")
    grads, start = [], 0
    for shape in tensors_shape:
        if len(shape) != ndim:  # a skipped legacy empty tensor
            grads.append(None)
            continue
        grads.append(narrow(grad, d, start, shape[d]))
        start += shape[d]
    return grads


def _cpu_arrays(tensors):
    """The arrays of a list or tuple of CPU tensors (``_same_kind_arrays``), else None: the joins' lanes."""
    if tensors.__class__ is not list and tensors.__class__ is not tuple or not tensors:
        return None
    try:  # (_same_kind_arrays' loops, with CPU as the device: two frames fewer)
        arrays = [t._data for t in tensors]
        devices = [t._device for t in tensors]
    except AttributeError:
        return None
    return arrays if devices.count(CPU) == len(devices) else None


def _cat_lane(tensors, dim=0):
    """cat's common case (the forward's first branch) on the CPU, for the entry's kernel lane."""
    arrays = _cpu_arrays(tensors)
    if arrays is None or dim.__class__ is not int:
        return None
    ndim = arrays[0].ndim
    if not ndim or not -ndim <= dim < ndim:
        return None
    return _cpu.cat(arrays, dim % ndim)  # (other sizes or dtypes raise: the path names or promotes them)


def _stacked_rows(bk, arrays):
    """stack's common case (rows stacked into a batch): the arrays joined along a new dim 0, where the
    backend's cat checks the other dims and the dtypes (raising ValueError or DTypeError: the forward's
    general part names or promotes them; len() reads the sizes along dim 0 without a shape tuple);
    None where their sizes along dim 0 differ or one has no dims."""
    sizes = _leading_sizes(arrays)
    if sizes is None or not _all_same(sizes):
        return None
    return bk.view(bk.cat(arrays, 0), (len(arrays),) + arrays[0].shape)


def _stack_lane(tensors, dim=0):
    """stack's common case on the CPU (tensors of one shape and dtype), for the entry's kernel lane: the
    host module's one pass (None where it does not take them: the path names or promotes them)."""
    arrays = _cpu_arrays(tensors)
    if arrays is None or dim.__class__ is not int:
        return None
    ndim = arrays[0].ndim + 1
    return _cpu_stacked(arrays, dim % ndim) if -ndim <= dim < ndim else None


@op(
    "cat",
    doc="The tensors joined along dim.",
    node="CatBackward0",
    method=False,
    aliases=("concat", "concatenate"),
    grads={"tensors": _cat_grad},
    lane=_cat_lane,
)
def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of Tensors")
    arrays = _same_kind_arrays(tensors)
    if arrays is not None and dim.__class__ is int:
        # one pass over the arrays where nothing needs promoting (the per-tensor checks below cost
        # about 2 us a tensor); both backends' cat refuse other sizes but along dim (ValueError) and
        # other dtypes (DTypeError), and the general path then says which or promotes
        ndim = arrays[0].ndim
        if ndim and -ndim <= dim < ndim:
            try:
                return wrap(primitives(tensors[0]).cat(arrays, dim % ndim), tensors[0]._device)
            except (ValueError, DTypeError):
                pass
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"cat: expected a sequence of Tensors, but element {i} is {type(x).__name__}")
    dev = check_same_device("cat", *tensors)
    parts = _cat_parts(tensors)
    ref = parts[0]
    if ref.ndim == 0:
        raise ShapeError("cat: zero-dimensional tensor cannot be concatenated")
    d = wrap_dim(dim, ref.ndim, "cat")
    for x in parts:
        if x.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, ref.shape)) if i != d):
            raise ShapeError(
                f"cat: sizes of tensors must match except in dimension {d}; got shapes "
                + ", ".join(fmt_shape(p.shape) for p in parts)
            )
    dtype = result_type(*parts) if len({p.dtype for p in parts}) > 1 else ref.dtype
    return wrap(primitives(ref).cat([cast(p, dtype)._data for p in parts], d), dev)


def _stack_grad(grad, dim):
    return unbind(grad, wrap_dim(dim, grad.ndim, "stack"))


@op(
    "stack",
    doc="The tensors (of one shape) joined along a new dim.",
    node="StackBackward0",
    method=False,
    grads={"tensors": _stack_grad},
    lane=_stack_lane,
)
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    # one op of its own, not an unsqueeze per tensor and a cat: a batch built of 32 rows took 32 + 1
    # dispatches (about 35x PyTorch's time)
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of Tensors")
    arrays = _same_kind_arrays(tensors)
    if arrays is not None and dim == 0:
        try:
            rows = _stacked_rows(primitives(tensors[0]), arrays)
        except (ValueError, DTypeError):
            rows = None
        if rows is not None:
            return wrap(rows, tensors[0]._device)
    if arrays is not None and not (_all_same([a.shape for a in arrays]) and _all_same([a.dtype for a in arrays])):
        arrays = None  # another shape (refused below) or dtype (promoted)
    if arrays is None:
        for i, x in enumerate(tensors):
            if not isinstance(x, Tensor):
                raise DTypeError(f"stack: tensors[{i}] must be a Tensor, got {type(x).__name__}")
        check_same_device("stack", *tensors)
        dtype = result_type(*tensors)
        arrays = [cast(x, dtype)._data for x in tensors]
        if any(a.shape != arrays[0].shape for a in arrays):
            raise ShapeError(
                "stack: expects each tensor to be equal size, but got " + ", ".join(fmt_shape(x.shape) for x in tensors)
            )
    shape = arrays[0].shape
    d = wrap_dim(dim, len(shape) + 1, "stack")
    bk = primitives(tensors[0])
    if d < len(shape):  # joined along d, then d split into (number of tensors, its size): one copy
        out = bk.view(bk.cat(arrays, d), shape[:d] + (len(arrays),) + shape[d:])
    else:  # a new last dim (0-d tensors too): each array viewed with a trailing dim of 1
        unit = shape + (1,)
        out = bk.cat([_view_or_copy(bk, a, unit) for a in arrays], d)
    return wrap(out, tensors[0]._device)


def _leading_sizes(arrays):
    """Each array's size along dim 0, or None where one has no dims or no len() (a device array)."""
    try:
        return list(map(len, arrays))
    except TypeError:
        return None


def _view_or_copy(bk, a, shape):
    view = bk.view(a, shape)
    return view if view is not None else bk.view(bk.contiguous(a), shape)


def _require_dims(name, input):
    if input._data.ndim == 0:
        raise ShapeError(f"{name}: expects at least a 1-dimensional tensor, got a 0-d tensor")


def _real_dim(name, input, dim):
    """``dim`` wrapped, for an op that needs the dim to exist (a 0-d tensor has none)."""
    return _real_dim_of(name, input._data.ndim, dim)


def _real_dim_of(name, ndim, dim):
    if ndim == 0:
        raise IndexOutOfRangeError(f"{name}: dimension specified as {dim} but tensor has no dimensions")
    return wrap_dim(dim, ndim, name)


def _split_direct(tensor, split_size_or_sections, dim=0):
    """split's common case (pieces of an int size along a non-empty dim) as its entry's direct lane."""
    d = _plain_dim_of(tensor, dim)
    step = split_size_or_sections
    if d is None or step.__class__ is not int or step <= 0 or not tensor._data.shape[d]:
        return None
    return _step_pieces(tensor, d, step)


def _split_method(self: Tensor, split_size: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """Tensor.split names its sizes split_size, as PyTorch's does."""
    return split(self, split_size, dim)


@op(
    "split",
    doc="Pieces of split_size (or of the listed sizes) along dim (views).",
    composite=True,
    method=_split_method,
    direct=_split_direct,
)
def split(tensor: Tensor, split_size_or_sections: int | Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    input = tensor
    _require_dims("split", input)
    d = wrap_dim(dim, input.ndim, "split")
    size = input.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise ValueError(f"split: split_size must be positive, got {step}")
        sections = [min(step, size - s) for s in range(0, size, step)] if size else [0]
    else:
        sections = list(split_size_or_sections)
        if sum(sections) != size:
            raise ShapeError(f"split: split sizes {sections} don't sum to dimension {d}'s size {size}")
    bounds = [0]
    for n in sections:
        bounds.append(bounds[-1] + n)
    return _slices(input, d, bounds)


def _chunk_bounds(size, chunks):
    step = max(-(-size // chunks), 1)
    return list(range(0, size, step)) + [size]


def _plain_dim_of(input, dim):
    """``dim`` wrapped where input is a Tensor with that dim and dim a plain int (the direct lanes of
    chunk and unbind), else None."""
    if input.__class__ is not Tensor or dim.__class__ is not int:
        return None
    return _plain_dim(dim, input._data.ndim)


# the calls of slice_key.views that cut a dim into pieces of ``step`` elements (the last one the rest), by
# (dim, its size, step): split, chunk, hsplit, vsplit and dsplit of a shape are worked out once
_STEP_PIECES: dict[tuple[int, int, int], list[tuple[tuple[Any, ...], None]]] = {}
_STEP_PIECES_KEPT = 256


def _step_pieces(input, d, step):
    """The views of input (with elements along dim ``d``) in pieces of ``step`` > 0 elements along d, in one
    ``views`` call (the direct lanes of the split family); None where that declines."""
    size = input._data.shape[d]
    key = (d, size, step)
    calls = _STEP_PIECES.get(key)
    if calls is None:
        keys = _slice_keys(d, list(range(0, size, step)) + [size])
        calls = remember(_STEP_PIECES, key, [(k, None) for k in keys], _STEP_PIECES_KEPT)
    views = slice_key.views(input, calls)
    return None if views is None else tuple(views)


def _chunk_direct(input, chunks, dim=0):
    """chunk's common case (a non-empty dim of plain ints) as its entry's direct lane: the pieces in one
    ``views`` call; None for any other call, or where that declines."""
    d = _plain_dim_of(input, dim)
    if d is None or chunks.__class__ is not int or chunks <= 0:
        return None
    size = input._data.shape[d]
    return _step_pieces(input, d, -(-size // chunks)) if size else None


@op("chunk", doc="chunks nearly equal pieces along dim (views).", composite=True, direct=_chunk_direct)
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    _require_dims("chunk", input)
    shape = input._data.shape
    d = wrap_dim(dim, len(shape), "chunk")
    size = shape[d]
    if size == 0:  # PyTorch gives ``chunks`` empty pieces here
        return _slices(input, d, [0] * (chunks + 1))
    return _slices(input, d, _chunk_bounds(size, chunks))


def _unbind_keys(d, size):
    # keys that end in an Ellipsis already (the CPU primitive adds one to keep a 0-d piece a view)
    lead = (_FULL,) * d
    return [lead + (i, Ellipsis) for i in range(size)]


def _unbind_direct(input, dim=0):
    """unbind's common case as its entry's direct lane: the pieces in one ``views`` call (None where that
    declines, or for any other call)."""
    d = _plain_dim_of(input, dim)
    return None if d is None else _pieces(input, _unbind_keys(d, input._data.shape[d]))


@op("unbind", doc="The slices along dim, as a tuple (views).", composite=True, direct=_unbind_direct)
def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    d = _real_dim("unbind", input, dim)
    keys = _unbind_keys(d, input._data.shape[d])
    return _pieces(input, keys) or tuple([slice_key(input, key) for key in keys])


@op("select", doc="The slice at index along dim, without that dim (a view).", composite=True)
def select(input: Tensor, dim: int, index: int) -> Tensor:
    d = wrap_dim(dim, input.ndim, "select")
    if index.__class__ is not int:
        return input[(_FULL,) * d + (index,)]  # getitem's checks and errors for another index
    return slice_key(input, (_FULL,) * d + (index,), (_FULL,) * d + (index,))


def _repeat_layout(input_ndim, repeats):
    """(repeats as a tuple, input's shape with the leading 1s it gains, the expanded shape (repeat,
    size) per dim) for repeat; ShapeError for too few or negative repeats."""
    if len(repeats) == 1 and isinstance(repeats[0], (tuple, list)):
        repeats = tuple(repeats[0])
    if len(repeats) < input_ndim:
        raise ShapeError(
            f"repeat: number of repeat dims ({len(repeats)}) can not be smaller than the "
            f"number of tensor dims ({input_ndim})"
        )
    if any(r < 0 for r in repeats):
        raise ShapeError(f"repeat: repeats can not be negative, got {tuple(repeats)}")
    return tuple(repeats)


def _repeat_grad(grad, input_shape, repeats):
    """Each input element's gradient: the sum over its copies (the repeat dims of the (repeat, size)
    pairs)."""
    repeats = _repeat_layout(len(input_shape), repeats)
    shape = (1,) * (len(repeats) - len(input_shape)) + tuple(input_shape)
    pairs = tuple(n for r, size in zip(repeats, shape) for n in (r, size))
    summed = grad.reshape(pairs).sum(tuple(range(0, len(pairs), 2))) if pairs else grad
    return summed.reshape(input_shape)


@op(
    "repeat",
    doc="input tiled repeats times along each dim (a copy).",
    node="RepeatBackward0",
    grads={"input": _repeat_grad},
)
def repeat(input: Tensor, *repeats: int | Sequence[int]) -> Tensor:
    repeats = _repeat_layout(input.ndim, repeats)
    shape = (1,) * (len(repeats) - input.ndim) + tuple(input.shape)
    # each dim as (1, size) expanded to (repeat, size), copied and merged: one dispatch, over the
    # primitives; a copy, as in PyTorch, even where the strides would allow a view (repeats of 1): the
    # result must be writable and must not alias the input
    interleaved, expanded, final = [], [], []
    for r, n in zip(repeats, shape):
        interleaved += [1, n]
        expanded += [r, n]
        final.append(r * n)
    bk = primitives(input)
    tiled = bk.expand(bk.view(bk.contiguous(input._data), tuple(interleaved)), tuple(expanded))
    data = bk.contiguous(tiled)
    if data is tiled:
        data = bk.astype(tiled, input.dtype)
    return wrap(bk.view(data, tuple(final)), input._device)


# ------------------------------------------------------------------------------------------------
# padding: the backend's pad primitive over up to 3 trailing dims at a time; pad_nd and its backward
# are linear op pairs, each the other's gradient
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


@op(
    "pad_nd",
    doc="input with its last len(pads) // 2 <= 3 dims padded by (before, after) pairs given in dim order.",
    node="PadNdBackward0",
    function=False,
    method=False,
    grads={"input": lambda grad, input_shape, pads, mode: pad_nd_backward(grad, input_shape, pads, mode)},
)
def pad_nd(input: Tensor, pads: Sequence[int], mode: str, value: float) -> Tensor:
    return wrap(primitives(input).pad(input._data, tuple(pads), mode, value), input._device)


@op(
    "pad_nd_backward",
    doc="The gradient of pad_nd: each input element sums the output gradients that read it.",
    node="PadNdBackwardBackward0",
    function=False,
    method=False,
    grads={"grad_output": lambda grad, pads, mode: pad_nd(grad, pads, mode, 0)},
)
def pad_nd_backward(grad_output: Tensor, input_shape: Sequence[int], pads: Sequence[int], mode: str) -> Tensor:
    bk = primitives(grad_output)
    return wrap(bk.pad_backward(grad_output._data, tuple(input_shape), tuple(pads), mode), grad_output._device)


@op(
    "pad",
    doc="The last len(pad) // 2 dims padded (or cropped) by (before, after) pairs, last dim first.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def pad(
    input: Tensor,
    pad: Sequence[int],
    mode: str = "constant",  # noqa: A002 (PyTorch's names)
    value: float | None = None,
) -> Tensor:
    if not isinstance(input, Tensor):
        raise DTypeError(f"pad: input must be a Tensor, got {type(input).__name__}")
    pad = tuple([int(p) for p in pad])
    if len(pad) % 2:
        raise ShapeError(f"pad: padding length must be divisible by 2, got {len(pad)} values {pad}")
    if len(pad) // 2 > input.ndim:
        raise ShapeError(
            f"pad: padding {pad} covers {len(pad) // 2} dims but the input has shape {fmt_shape(input.shape)}"
        )
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(_PAD_MODES)}, got {mode!r}")
    if mode != "constant" and value not in (None, 0):
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    if mode in ("reflect", "replicate") and isinstance(input, Tensor) and input.dtype is dt.bool_:
        raise UnsupportedDTypeError(f"pad: mode {mode!r} is not implemented for bool tensors (PyTorch's kernels)")
    fill = 0 if value is None else value
    ndim, pairs = input._data.ndim, len(pad) // 2
    if pairs == 1:  # the last dim alone: the pairs are already in the primitive's order
        return pad_nd(input, pad, mode, fill)
    if pairs == 0:
        return input.clone()
    out = input
    # PyTorch's pairs run from the last dim backwards; the primitive takes up to 3 trailing dims in dim order
    for first in range(0, pairs, 3):
        count = min(3, pairs - first)
        dims = list(range(ndim - first - count, ndim - first))
        pads = [p for i in reversed(range(first, first + count)) for p in (pad[2 * i], pad[2 * i + 1])]
        if first == 0:
            out = pad_nd(out, pads, mode, fill)
        else:  # dims before the last three: moved to the end and back
            last = list(range(ndim - count, ndim))
            out = pad_nd(out.movedim(dims, last), pads, mode, fill).movedim(last, dims)
    return out


# ------------------------------------------------------------------------------------------------
# roll, meshgrid, repeat_interleave
def _int_tuple(x: Any) -> tuple[int, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _roll_lane(input, shifts, dims=None):
    """roll's common case on the CPU (one int shift, of the flattened input or along one int dim), for the
    entry's kernel lane: the forward's two pieces joined by the backend's cat, without its frames; None for
    any other call (the path names it)."""
    if input.__class__ is not Tensor or input._device is not CPU or shifts.__class__ is not int:
        return None
    data = input._data
    if dims is None:
        if not data.flags.c_contiguous or not data.size:
            return None
        flat = data.reshape(data.size)
        out = _rolled(_cpu, flat, (shifts,), (0,))
        return None if out is flat else out.reshape(data.shape)  # (nothing moved: the forward's copy)
    axis = _plain_dim(dims, data.ndim) if dims.__class__ is int else None
    if axis is None or not data.shape[axis]:
        return None
    out = _rolled(_cpu, data, (shifts,), (axis,))
    return None if out is data else out


@op(
    "roll",
    doc="Elements shifted along dims, wrapping around (flattened first when dims is None).",
    node="RollBackward0",
    grads={"input": lambda grad, shifts, dims: roll(grad, tuple(-s for s in _int_tuple(shifts)), dims)},
    lane=_roll_lane,
)
def roll(input: Tensor, shifts: int | Sequence[int], dims: int | Sequence[int] | None = None) -> Tensor:
    # over the primitives (one dispatch): each shifted dim is the two pieces either side of the element
    # that lands first, joined in the other order
    shifts = _int_tuple(shifts)
    bk, data = primitives(input), input._data
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(f"roll: without dims, shifts must be one int, got {shifts}")
        flat = bk.view(bk.contiguous(data), (data.size,))
        rolled = _rolled(bk, flat, shifts, (0,))
        if rolled is flat:  # nothing moved: a copy all the same, as PyTorch's
            rolled = bk.astype(flat, input.dtype)
        return wrap(bk.view(rolled, data.shape), input._device)
    dims = _int_tuple(dims)
    if len(shifts) != len(dims):
        raise ShapeError(
            f"roll: shifts and dimensions must align, got shifts={shifts}, dims={dims} for input of "
            f"shape {fmt_shape(input.shape)}"
        )
    rolled = _rolled(bk, data, shifts, tuple(_real_dim("roll", input, dim) for dim in dims))
    if rolled is data:  # nothing moved: a copy all the same, as PyTorch's
        rolled = bk.astype(bk.contiguous(data), input.dtype)
    return wrap(rolled, input._device)


def _rolled(bk, data, shifts, axes):
    for shift, axis in zip(shifts, axes):
        n = data.shape[axis]
        if n == 0 or shift % n == 0:
            continue
        start = n - shift % n  # the element that lands at position 0
        lead = (_FULL,) * axis
        data = bk.cat([bk.slice(data, lead + (slice(start, n),)), bk.slice(data, lead + (slice(0, start),))], axis)
    return data


def _meshgrid_direct(tensors, indexing=None):
    """meshgrid's common case (CPU vectors, by varargs or in one list) as its entry's direct lane: each
    grid made by expand_along's view lane, without the forward's checks and one dispatch a grid; None for
    any other call, or where a view lane declines (a vector in the graph)."""
    if len(tensors) == 1 and tensors[0].__class__ in _SEQUENCES:
        tensors = tensors[0]
    arrays = _cpu_arrays(tensors)
    if arrays is None or indexing is not None and indexing != "ij" and indexing != "xy":
        return None
    sizes = []
    for a in arrays:
        if a.ndim != 1:
            return None
        sizes.append(a.shape[0])
    dims = list(range(len(sizes)))
    if indexing == "xy" and len(sizes) >= 2:  # (the first two dims swapped, as the forward's order)
        dims[0], dims[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    shape = tuple(sizes)
    grids = []
    for t, d in zip(tensors, dims):
        views = expand_along.views(t, [(d, shape)])
        if views is None:
            return None
        grids.append(views[0])
    return tuple(grids)


@op(
    "meshgrid",
    doc="Coordinate grids from 1-D tensors (indexing 'ij' or 'xy'), as expanded views.",
    composite=True,
    method=False,
    direct=_meshgrid_direct,
)
def meshgrid(*tensors: Tensor | Sequence[Tensor], indexing: str | None = None) -> tuple[Tensor, ...]:
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    vectors: list[Tensor] = []
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor) or t.ndim > 1:
            raise ShapeError(
                f"meshgrid: expected 0-D or 1-D tensors, got tensor {i} of shape "
                f"{fmt_shape(t.shape) if isinstance(t, Tensor) else type(t).__name__}"
            )
        vectors.append(t)
    check_same_device("meshgrid", *vectors)
    sizes = [t.numel() for t in vectors]
    # 'xy' is 'ij' with the first two inputs' dims swapped (Cartesian rather than matrix indexing)
    order = list(range(len(vectors)))
    if indexing == "xy" and len(vectors) >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[i] for i in order)
    return tuple(expand_along(t, order.index(i), shape) for i, t in enumerate(vectors))


def _other_dims_summed(grad, input_shape, dim):
    """The gradient of ``expand_along``: the sum over the dims it spread input over."""
    others = tuple(d for d in range(grad.ndim) if d != dim)
    return (grad.sum(others) if others else grad).reshape(input_shape)


def _expand_along_array(a, dim, shape):
    # a vector with its own elements (a row-major one): its grid reads its memory with step 0 along the
    # other dims, strides kept per (shape, dim, length, item size) from the first call's checked view
    vector = a.ndim == 1 and shape.__class__ is tuple and a.flags.c_contiguous and a.size
    if vector:
        key = (shape, dim, a.shape[0], a.itemsize)
        strides = _ALONG_STRIDES.get(key)
        if strides is not None:
            r = _ndarray(shape, a.dtype, a, 0, strides)
            r.setflags(False)  # (as the backend's expand: its elements share memory)
            return r
    r = _cpu.expand(_view_or_copy(_cpu, a, _unit_except(len(shape), dim, shape[dim])), tuple(shape))
    if vector:
        remember(_ALONG_STRIDES, key, r.strides, _EXPANDED_KEPT)
    return r


_ALONG_STRIDES: dict[tuple[Any, ...], tuple[int, ...]] = {}


@op(
    "expand_along",
    doc="A 0- or 1-d input laid along dim of a grid of shape, repeated over its other dims (a view).",
    view=_expand_along_array,
    function=False,
    method=False,
    node="ExpandBackward0",
    grads={"input": _other_dims_summed},
)
def expand_along(input: Tensor, dim: int, shape: Sequence[int]) -> Tensor:
    # meshgrid's grids, one dispatch each (a reshape and an expand were two)
    bk = primitives(input)
    unit = _unit_except(len(shape), dim, shape[dim])
    return wrap(bk.expand(_view_or_copy(bk, input._data, unit), tuple(shape)), input._device)


def _repeat_positions(repeats, n, total):
    """The source index of each output position: i repeated repeats[i] times (int64, on repeats' device)."""
    ends = repeats.cumsum(0)
    marks = full((total + 1,), 0, dtype=repeats.dtype, device=repeats.device)
    if n > 1:
        marks = marks.scatter_add(0, ends[:-1], full((n - 1,), 1, dtype=repeats.dtype, device=repeats.device))
    return marks.cumsum(0)[:total]


@op(
    "repeat_interleave", doc="Each element (or slice along dim) repeated repeats times, in place of it.", composite=True
)
def repeat_interleave(
    input: Tensor, repeats: int | Tensor | None = None, dim: int | None = None, *, output_size: int | None = None
) -> Tensor:
    name = "repeat_interleave"
    source: Tensor | None = input  # None for repeat_interleave(repeats)
    if repeats is None:  # repeat_interleave(repeats): the indices 0..n-1, each repeated
        repeats, source = input, None
    if source is not None and not isinstance(source, Tensor):
        raise DTypeError(f"{name}: input must be a Tensor, got {type(source).__name__}")
    if repeats.__class__ is int and repeats >= 0 and source is not None:
        if dim is None:
            return repeat_each(source, repeats, None)
        axis = wrap_dim(dim, source.ndim, name)
        if source.ndim == 0:  # the dim after it, where the repeats would go, is out of range (as in PyTorch)
            wrap_dim(axis + 1, 0, name)
        return repeat_each(source, repeats, axis)
    if source is not None and dim is None:
        source, dim = source.reshape(-1), 0
    if isinstance(repeats, Tensor):
        if repeats.dtype.category != dt.INTEGER or repeats.ndim > 1:
            raise DTypeError(
                f"{name}: repeats must be an int64 tensor of 0 or 1 dims, got {repeats.dtype} of "
                f"shape {fmt_shape(repeats.shape)}"
            )
        if source is None:
            n = repeats.numel()
        else:
            axis = wrap_dim(dim, source.ndim, name)
            n = source.shape[axis]
            if repeats.numel() == 1:
                repeats = repeats.reshape(1).expand(n)
            elif repeats.numel() != n:
                raise ShapeError(
                    f"{name}: repeats must have the same size as input along dim {dim}: got "
                    f"{repeats.numel()} repeats for input of shape {fmt_shape(source.shape)}"
                )
        repeats = repeats.reshape(-1).to(dtype=dt.int64)
        if repeats.numel() and bool((repeats < 0).any()):
            raise ShapeError(f"{name}: repeats can not be negative")
        total = int(repeats.sum().item()) if output_size is None else int(output_size)
        positions = _repeat_positions(repeats, n, total)
        if source is None:
            return positions
        return source.index_select(axis, positions)
    raise ShapeError(f"{name}: repeats must be a non-negative int or an int64 tensor, got {repeats!r}")


def _each_repeated(shape, repeats, dim):
    """(the shape seen with a dim of 1 after ``dim``, that dim expanded to ``repeats``) for repeat_each
    of an input of ``shape`` (flattened first where dim is None)."""
    if dim is None:
        shape, dim = (_numel(shape),), 0
    shape = tuple(shape)
    return shape[: dim + 1] + (1,) + shape[dim + 1 :], shape[: dim + 1] + (repeats,) + shape[dim + 1 :]


@op(
    "repeat_each",
    doc="repeat_interleave by an int: each slice along dim (each element where dim is None) repeats times.",
    function=False,
    method=False,
    node="RepeatInterleaveBackward0",
    grads={
        "input": lambda grad, input_shape, repeats, dim: (
            grad.reshape(_each_repeated(input_shape, repeats, dim)[1])
            .sum(1 if dim is None else dim + 1)
            .reshape(input_shape)
        )
    },
)
def repeat_each(input: Tensor, repeats: int, dim: int | None) -> Tensor:
    # one dispatch over the primitives: input seen with a dim of 1 after dim, expanded to repeats and
    # copied (an unsqueeze, an expand and a reshape were three, a flatten four)
    bk = primitives(input)
    unit, expanded = _each_repeated(input._data.shape, repeats, dim)
    tiled = bk.expand(_view_or_copy(bk, input._data, unit), expanded)
    data = bk.contiguous(tiled)
    if data is tiled:  # one repeat of a contiguous input: still input's memory
        data = bk.astype(tiled, input.dtype)
    axis = 0 if dim is None else dim
    return wrap(bk.view(data, expanded[:axis] + (expanded[axis] * repeats,) + expanded[axis + 2 :]), input._device)


# ------------------------------------------------------------------------------------------------
# More of PyTorch's shape names (issue 15), composed of the ops above
def _tensor_list(name, tensors):
    tensors = list(tensors)
    if not tensors or any(t.__class__ is not Tensor for t in tensors):
        raise _not_tensors(name)
    return tensors


def _not_tensors(name):
    return DTypeError(f"{name}: expected a non-empty sequence of Tensors")


def _at_least(name, tensors, ndim):
    if len(tensors) == 1 and not isinstance(tensors[0], Tensor):
        tensors = tuple(tensors[0])
    out = _each_at_least(_tensor_list(name, tensors), ndim)
    return out[0] if len(out) == 1 else tuple(out)


def _each_at_least(tensors, ndim):
    """Each of ``tensors`` with at least ``ndim`` dims: the atleast_*d forward (only those that need a
    reshape dispatch one)."""
    return [t if t._data.ndim >= ndim else reshape(t, _at_least_shape(t._data.shape, ndim)) for t in tensors]


def _at_least_shape(shape, ndim):
    """``shape`` with at least ``ndim`` dims, in PyTorch's placements: () -> (1, 1, 1), (n,) -> (1, n) or
    (1, n, 1), (a, b) -> (a, b, 1)."""
    if len(shape) >= ndim:
        return shape
    if not shape:
        return (1,) * ndim
    if len(shape) == 1:
        return ((1,) + tuple(shape) + (1,))[:ndim] if ndim > 1 else tuple(shape)
    return tuple(shape) + (1,)


@overload
def atleast_1d(tensor: Tensor, /) -> Tensor: ...
@overload
def atleast_1d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]: ...
@op("atleast_1d", doc="Each input viewed with at least 1 dim.", composite=True, method=False)
def atleast_1d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]:
    return _at_least("atleast_1d", tensors, 1)


@overload
def atleast_2d(tensor: Tensor, /) -> Tensor: ...
@overload
def atleast_2d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]: ...
@op("atleast_2d", doc="Each input viewed with at least 2 dims (a vector as a row).", composite=True, method=False)
def atleast_2d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]:
    return _at_least("atleast_2d", tensors, 2)


@overload
def atleast_3d(tensor: Tensor, /) -> Tensor: ...
@overload
def atleast_3d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]: ...
@op("atleast_3d", doc="Each input viewed with at least 3 dims.", composite=True, method=False)
def atleast_3d(*tensors: Tensor | Sequence[Tensor]) -> Tensor | tuple[Tensor, ...]:
    return _at_least("atleast_3d", tensors, 3)


def _stacked(name, tensors, layout):
    """The forward of hstack, vstack, dstack and column_stack, whose ``layout`` is (the rank below which a
    tensor is viewed with another shape; that shape, given its shape; the dim joined along, given the
    joined rank): each tensor viewed so (outside the graph: the op's own gradient undoes it), joined as
    cat joins them. One dispatch a call, not a reshape for each tensor and a cat."""
    min_ndim, shape_of, dim_of = layout
    pieces = list(tensors)
    arrays = _same_kind_arrays(pieces) if pieces else None
    if arrays is not None:
        try:
            return wrap(_joined(primitives(pieces[0]), arrays, layout), pieces[0]._device)
        except (ValueError, DTypeError):
            pass
    if not pieces:
        raise _not_tensors(name)
    for i, t in enumerate(pieces):
        if t.__class__ is not Tensor:
            raise _not_tensors(name)
        a = t._data
        if a.ndim < min_ndim:
            pieces[i] = wrap(_view_or_copy(primitives(t), a, shape_of(a.shape)), t._device)
    return cat.op.forward(pieces, dim_of(pieces[0]._data.ndim))


def _joined(bk, arrays, layout):
    """The arrays of a ``_stacked`` op's tensors (a list, changed in place) viewed with its layout and
    joined by the backend's cat directly (cat's own common case): no tensor made for a piece, no second
    forward. Another dtype or size raises (ValueError, DTypeError): the general path then promotes or
    names it."""
    min_ndim, shape_of, dim_of = layout
    for i, a in enumerate(arrays):
        if a.ndim < min_ndim:
            arrays[i] = _view_or_copy(bk, a, shape_of(a.shape))
    return bk.cat(arrays, dim_of(arrays[0].ndim))


def _stacked_lane(layout):
    """The kernel lane of a ``_stacked`` op: its join of CPU tensors."""

    def lane(tensors):
        arrays = _cpu_arrays(tensors)
        return None if arrays is None else _joined(_cpu, arrays, layout)

    return lane


def _stacked_grads(layout):
    """The gradient rule of a ``_stacked`` op: each tensor's piece of the gradient along the joined dim,
    back in its own shape (cat's gradient, through the shapes the forward gave the tensors)."""
    _, shape_of, dim_of = layout

    def grads(grad, tensors_shape):
        d, start, out = dim_of(grad.ndim), 0, []
        for shape in tensors_shape:
            shape = tuple(shape)
            seen = shape_of(shape)
            piece = narrow(grad, d, start, seen[d])
            out.append(piece if seen == shape else reshape(piece, shape))
            start += seen[d]
        return out

    return {"tensors": grads}


def _numel(shape):
    n = 1
    for size in shape:
        n *= size
    return n


_HSTACK = (1, lambda shape: _at_least_shape(shape, 1), lambda ndim: 0 if ndim == 1 else 1)
_VSTACK = (2, lambda shape: _at_least_shape(shape, 2), lambda ndim: 0)
_DSTACK = (3, lambda shape: _at_least_shape(shape, 3), lambda ndim: 2)
_COLUMN_STACK = (2, lambda shape: (_numel(shape), 1) if len(shape) <= 1 else shape, lambda ndim: 1)


def _stack_op(name, doc, layout, aliases=()):
    """The op ``name`` (hstack, vstack, dstack, column_stack): ``_stacked`` with its layout, declared
    with the gradient rule of that layout."""

    def forward(tensors: Sequence[Tensor]) -> Tensor:
        return _stacked(name, tensors, layout)

    forward.__name__ = forward.__qualname__ = name
    return op(
        name,
        doc=doc,
        method=False,
        aliases=aliases,
        node="CatBackward0",
        grads=_stacked_grads(layout),
        lane=_stacked_lane(layout),
    )(forward)


hstack = _stack_op("hstack", "The tensors joined column-wise (along dim 1; dim 0 for vectors).", _HSTACK)
vstack = _stack_op("vstack", "The tensors joined row-wise (vectors as rows).", _VSTACK, aliases=("row_stack",))
dstack = _stack_op("dstack", "The tensors joined depth-wise (along dim 2).", _DSTACK)
column_stack = _stack_op("column_stack", "The tensors as columns side by side (vectors become columns).", _COLUMN_STACK)


@op(
    "tile", doc="input repeated dims times along each dim (leading 1s added to the shorter of the two).", composite=True
)
def tile(input: Tensor, *dims: int | Sequence[int]) -> Tensor:
    dims = _dims_arg(dims)
    if input.ndim > len(dims):
        dims = (1,) * (input.ndim - len(dims)) + dims
    return input.repeat(*dims)


@op(
    "tensor_split",
    doc="input split along dim into sections parts (as even as can be) or at the given indices; views.",
    composite=True,
)
def tensor_split(
    input: Tensor,
    indices_or_sections: int | Sequence[int] | Tensor | None = None,
    dim: int = 0,
    *,
    sections: int | None = None,
    indices: Sequence[int] | None = None,
    tensor_indices_or_sections: Tensor | None = None,
) -> tuple[Tensor, ...]:
    ndim = input._data.ndim
    if ndim == 0:
        raise ShapeError("tensor_split: expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    if (
        indices_or_sections is None
        or sections is not None
        or indices is not None
        or tensor_indices_or_sections is not None
    ):
        indices_or_sections = _one_of(
            "tensor_split",
            indices_or_sections=indices_or_sections,
            sections=sections,
            indices=indices,
            tensor_indices_or_sections=tensor_indices_or_sections,
        )
    return _split_at(input, indices_or_sections, wrap_dim(dim, ndim, "tensor_split"))


@functools.lru_cache(maxsize=256)
def _section_bounds(n, sections):
    """Where ``sections`` parts of ``n`` elements (as even as can be, the larger first) start, and n: a
    program splits a few sizes, each worked out once."""
    big, size = n % sections, n // sections
    return tuple(i * size + min(i, big) for i in range(sections + 1))


def _split_at(input, indices_or_sections, d):
    """tensor_split's views (hsplit, vsplit and dsplit call it directly, not through its dispatch)."""
    n = input._data.shape[d]
    if indices_or_sections.__class__ is not int and isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if indices_or_sections.__class__ is int or isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise ValueError(f"tensor_split: number of sections must be larger than 0, got {sections}")
        bounds = _section_bounds(n, sections)
    else:
        bounds = [0] + [min(max(int(i) if i >= 0 else n + int(i), 0), n) for i in indices_or_sections] + [n]
    return _slices(input, d, bounds)


@op(
    "fliplr",
    doc="input with the order of its columns (dim 1) reversed.",
    node="FlipBackward0",
    grads={"input": lambda grad: fliplr(grad)},
)
def fliplr(input: Tensor) -> Tensor:
    if input.ndim < 2:
        raise ShapeError(f"fliplr: input must be at least 2-d, got shape {fmt_shape(input.shape)}")
    return _flipped(input, (1,))


@op(
    "flipud",
    doc="input with the order of its rows (dim 0) reversed.",
    node="FlipBackward0",
    grads={"input": lambda grad: flipud(grad)},
)
def flipud(input: Tensor) -> Tensor:
    if input.ndim < 1:
        raise ShapeError("flipud: input must be at least 1-d, got a 0-d tensor")
    return _flipped(input, (0,))


@op(
    "rot90",
    doc="input rotated by k quarter turns in the plane of dims (from the first towards the second).",
    node="Rot90Backward0",
    grads={"input": lambda grad, k, dims: rot90(grad, -k, dims)},
)
def rot90(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    dims = tuple(dims)
    if len(dims) != 2 or input.ndim < 2:
        raise ShapeError(
            f"rot90: expected two dims of an input with at least 2 dims, got dims {dims}, "
            f"input {fmt_shape(input.shape)}"
        )
    d0, d1 = (wrap_dim(d, input.ndim, "rot90") for d in dims)
    if d0 == d1:
        raise ShapeError(f"rot90: the two dims must differ, got {dims}")
    # a flip, then the two dims swapped (a view of the flipped copy), as PyTorch's rot90 does
    bk, data = primitives(input), input._data
    k %= 4
    if k == 0:  # a copy, as PyTorch's
        out = bk.contiguous(data)
        return wrap(bk.astype(out, input.dtype) if out is data else out, input._device)
    out = bk.contiguous(bk.flip(data, (d0, d1) if k == 2 else (d1,) if k == 1 else (d0,)))
    if k != 2:
        out = bk.permute(out, _swapped(input.ndim, d0, d1, "rot90"))
    return wrap(out, input._device)


def _rearranged(input, split, order, shape):
    """A new contiguous tensor of ``shape``: input's elements seen as ``split``, their dims reordered
    as ``order``: the forward of pixel_shuffle, pixel_unshuffle and channel_shuffle, each an op of its
    own (one dispatch, not a reshape, a permute and a reshape) whose gradient is the inverse shuffle."""
    bk = primitives(input)
    moved = bk.permute(bk.view(bk.contiguous(input._data), split), order)
    data = bk.contiguous(moved)
    if data is moved:  # the order moved only dims of size 1: still a view of input, so copied
        data = bk.astype(moved, input.dtype)
    return wrap(bk.view(data, shape), input._device)


def _rearranged_lane(plan):
    """The kernel lane (registry.py's ``lane=``) of a shuffle whose ``plan(shape, factor)`` gives
    ``_rearranged``'s (split, order, shape), or None where the forward raises: a CPU input's array
    rearranged as the forward's primitives do (the same copy, so the same values), in one call. The plans
    are kept by (shape, factor): working one out was a fifth of a small shuffle."""
    plans: dict[tuple[tuple[int, ...], int], tuple[Any, ...]] = {}

    def lane(input, factor):
        try:
            data = input._data
            on_cpu = input._device is CPU
        except AttributeError:
            return None
        if not on_cpu or factor.__class__ is not int:
            return None
        key = (data.shape, factor)
        found = plans.get(key)
        if found is None:
            found = plan(data.shape, factor)
            if found is None:
                return None
            remember(plans, key, found, _SHAPES_KEPT)
        split, order, shape = found
        # (ndarray.copy: always a new C-ordered array, also where the order moves no data)
        return data.reshape(split).transpose(order).copy().reshape(shape)

    return lane


def _pixel_shuffle_plan(shape, r):
    """pixel_shuffle's ``_rearranged`` arguments for an input of ``shape``, or None where it raises."""
    if len(shape) < 3 or r <= 0 or shape[-3] % (r * r):
        return None
    *batch, c, h, w = shape
    n = len(batch)
    return (
        (*batch, c // (r * r), r, r, h, w),
        (*range(n), n, n + 3, n + 1, n + 4, n + 2),
        (*batch, c // (r * r), h * r, w * r),
    )


def _pixel_unshuffle_plan(shape, r):
    """pixel_unshuffle's ``_rearranged`` arguments for an input of ``shape``, or None where it raises."""
    if len(shape) < 3 or r <= 0 or shape[-1] % r or shape[-2] % r:
        return None
    *batch, c, h, w = shape
    n = len(batch)
    return (
        (*batch, c, h // r, r, w // r, r),
        (*range(n), n, n + 2, n + 4, n + 1, n + 3),
        (*batch, c * r * r, h // r, w // r),
    )


def _channel_shuffle_plan(shape, groups):
    """channel_shuffle's ``_rearranged`` arguments for an input of ``shape``, or None where it raises."""
    if len(shape) < 3 or groups <= 0 or shape[1] % groups:
        return None
    n, c, *rest = shape
    return (n, groups, c // groups, *rest), (0, 2, 1, *range(3, len(shape) + 1)), shape


@op(
    "pixel_shuffle",
    doc="(*, C r^2, H, W) rearranged to (*, C, H r, W r).",
    method=False,
    functional=True,
    node="PixelShuffleBackward0",
    grads={"input": lambda grad, upscale_factor: pixel_unshuffle(grad, upscale_factor)},
    lane=_rearranged_lane(_pixel_shuffle_plan),
)
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    shape = input._data.shape  # (read once: each Tensor.shape is a new Size)
    plan = _pixel_shuffle_plan(shape, upscale_factor)
    if plan is None:
        raise ShapeError(
            f"pixel_shuffle: input {fmt_shape(shape)} needs at least 3 dims and a channel count (dim -3) "
            f"divisible by upscale_factor**2 = {upscale_factor * upscale_factor}"
        )
    return _rearranged(input, *plan)


@op(
    "pixel_unshuffle",
    doc="(*, C, H r, W r) rearranged to (*, C r^2, H, W).",
    method=False,
    functional=True,
    node="PixelUnshuffleBackward0",
    grads={"input": lambda grad, downscale_factor: pixel_shuffle(grad, downscale_factor)},
    lane=_rearranged_lane(_pixel_unshuffle_plan),
)
def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    shape = input._data.shape
    plan = _pixel_unshuffle_plan(shape, downscale_factor)
    if plan is None:
        raise ShapeError(
            f"pixel_unshuffle: input {fmt_shape(shape)} needs at least 3 dims and a height and width "
            f"divisible by downscale_factor = {downscale_factor}"
        )
    return _rearranged(input, *plan)


@op("diff", doc="The n-th forward difference along dim, after joining prepend and append to input.", composite=True)
def diff(
    input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None
) -> Tensor:
    ndim = input._data.ndim
    if ndim == 0:
        raise ShapeError("diff: expected an input with at least one dim, got a 0-d tensor")
    if n < 0:
        raise ValueError(f"diff: order must be non-negative, got {n}")
    d = wrap_dim(dim, ndim, "diff")
    x = input if prepend is None and append is None else cat([t for t in (prepend, input, append) if t is not None], d)
    for _ in range(n):
        length = x._data.shape[d]
        if length == 0:
            break
        if x.dtype is not dt.bool_:
            x = difference(x, d)
            continue
        later, earlier = _difference_keys(x._data.ndim, d, length)
        x = slice_key(x, later) != slice_key(x, earlier)
    return x


def _difference_keys(ndim, d, length):
    """The keys of the later and the earlier of two overlapping views along dim d, one element apart."""
    lead = (_FULL,) * d
    return lead + (slice(1, length),), lead + (slice(0, length - 1),)


def _difference_grad(grad, input_shape, dim):
    later, earlier = _difference_keys(len(input_shape), dim, input_shape[dim])
    return _scatter_back(grad, input_shape, later, False) - _scatter_back(grad, input_shape, earlier, False)


@op(
    "difference",
    doc="One forward difference of a non-empty number tensor along dim (a later element less the one before).",
    function=False,
    method=False,
    dtypes=NUMBERS,  # (diff of bool tensors compares instead)
    node="SubBackward0",
    grads={"input": _difference_grad},
)
def difference(input: Tensor, dim: int) -> Tensor:
    # diff's step as one dispatch over the primitives (two views and a subtraction were three)
    bk, data = primitives(input), input._data
    later, earlier = _difference_keys(data.ndim, dim, data.shape[dim])
    return wrap(bk.binary("sub", bk.slice(data, later), bk.slice(data, earlier), input.dtype), input._device)


def _block_shape(shape):
    """The (rows, columns) a tensor of ``shape`` (0-, 1- or 2-d) fills in block_diag: a scalar 1 x 1, a
    vector a row."""
    return (1, 1) if not shape else (1, shape[0]) if len(shape) == 1 else tuple(shape)


def _block_diag_grad(grad, tensors_shape):
    """Each block's gradient: the output gradient's piece at the block, in the block's shape."""
    out, row, col = [], 0, 0
    for shape in tensors_shape:
        rows, cols = _block_shape(shape)
        piece = slice_key(grad, (slice(row, row + rows), slice(col, col + cols)))
        out.append(piece if len(shape) == 2 else reshape(piece, tuple(shape)))
        row, col = row + rows, col + cols
    return out


def _block_diag_lane(tensors):
    """block_diag's common case on the CPU (matrices of one dtype), for the entry's kernel lane: the blocks
    written into zeros with NumPy alone (the forward's checks, casts and primitive calls were half of a
    call of two small blocks); None for any other call (the path names or promotes it)."""
    arrays = _cpu_arrays(tensors)
    if arrays is None:
        return None
    dtype = arrays[0].dtype
    rows = cols = 0
    for a in arrays:
        if a.ndim != 2 or a.dtype != dtype:
            return None
        rows += a.shape[0]
        cols += a.shape[1]
    out = _np_zeros((rows, cols), dtype)
    row = col = 0
    for a in arrays:
        n, m = a.shape
        out[row : row + n, col : col + m] = a
        row, col = row + n, col + m
    return out


@op(
    "block_diag",
    doc="The tensors (0-, 1- or 2-d) as the blocks of a block-diagonal matrix.",
    method=False,
    node="BlockDiagBackward0",
    grads={"tensors": _block_diag_grad},
    lane=_block_diag_lane,
)
def block_diag(*tensors: Tensor) -> Tensor:
    # one op: a zero matrix with each block copied in over the primitives (it was a pad and a cast
    # dispatched per block, and a cat: 7x PyTorch's time for two blocks)
    shapes = []
    for t in tensors:
        if t.__class__ is not Tensor or t._data.ndim > 2:
            got = fmt_shape(t.shape) if t.__class__ is Tensor else type(t).__name__
            raise ShapeError(f"block_diag: expected 0-, 1- or 2-d tensors, got {got}")
        shapes.append(_block_shape(t._data.shape))
    if not tensors:
        return full((1, 0), 0, dtype=dt.default_float)
    device = check_same_device("block_diag", *tensors)
    dtype = result_type(*tensors)
    bk = primitives(tensors[0])
    out = bk.full((sum(r for r, _ in shapes), sum(c for _, c in shapes)), 0, dtype)
    row = col = 0
    for t, (rows, cols) in zip(tensors, shapes):
        block = _view_or_copy(bk, cast(t, dtype)._data, (rows, cols))
        bk.copy_(bk.slice(out, (slice(row, row + rows), slice(col, col + cols))), block)
        row, col = row + rows, col + cols
    return wrap(out, device)


@op(
    "cartesian_prod",
    doc="Every combination of the elements of the 1-d tensors, one per row.",
    composite=True,
    method=False,
)
def cartesian_prod(*tensors: Tensor) -> Tensor:
    if not tensors or any(t.__class__ is not Tensor or t.ndim != 1 for t in tensors):
        raise ShapeError("cartesian_prod: expected one or more 1-d tensors")
    if len(tensors) == 1:  # the tensor itself, as PyTorch gives it
        return tensors[0]
    return cartesian_rows(tensors)


def _cartesian_grad(grad, tensors_shape):
    """Each tensor's gradient: its column of the output's gradient, seen as the grid of combinations
    and summed over the other tensors' dims."""
    sizes = tuple(shape[0] for shape in tensors_shape)
    return [_other_dims_summed(select(grad, 1, i).reshape(sizes), shape, i) for i, shape in enumerate(tensors_shape)]


@op(
    "cartesian_rows",
    doc="cartesian_prod of two or more 1-d tensors: one row per combination of their elements.",
    function=False,
    method=False,
    node="StackBackward0",
    grads={"tensors": _cartesian_grad},
)
def cartesian_rows(tensors: Sequence[Tensor]) -> Tensor:
    # one op over the primitives: each tensor expanded over the grid of combinations and copied into
    # its column (a reshape, an expand and a reshape dispatched per tensor, then a stack, cost 3.4x
    # PyTorch's time)
    device = check_same_device("cartesian_prod", *tensors)
    dtype = result_type(*tensors)
    sizes = tuple(t._data.shape[0] for t in tensors)
    bk = primitives(tensors[0])
    out = bk.empty((_numel(sizes), len(tensors)), dtype)
    for i, t in enumerate(tensors):
        column = bk.view(bk.slice(out, (_FULL, i)), sizes)  # a view: the grid's strides step over the row
        bk.copy_(column, bk.expand(bk.view(cast(t, dtype)._data, _unit_except(len(sizes), i, sizes[i])), sizes))
    return wrap(out, device)


def _unit_except(ndim, dim, size):
    shape = [1] * ndim
    shape[dim] = size
    return tuple(shape)


@op(
    "channel_shuffle",
    doc="The channels (dim 1) of input split into groups and interleaved.",
    functional=True,
    method=False,
    node="ChannelShuffleBackward0",
    grads={"input": lambda grad, groups: channel_shuffle(grad, grad.shape[1] // groups)},  # the inverse shuffle
    lane=_rearranged_lane(_channel_shuffle_plan),
)
def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    shape = input._data.shape
    plan = _channel_shuffle_plan(shape, groups)
    if plan is None:
        raise ShapeError(
            f"channel_shuffle: expected an input (N, C, *) with at least 3 dims and C divisible by groups "
            f"({groups}), got {fmt_shape(shape)}"
        )
    return _rearranged(input, *plan)


@op(
    "broadcast_shapes",
    doc="The shape the given shapes broadcast to (an int counts as a 1-d shape).",
    composite=True,
    method=False,
)
def broadcast_shapes_of(*shapes: int | Sequence[int]) -> Size:
    sizes = [(s,) if isinstance(s, (int, numbers.Integral)) else tuple(s) for s in shapes]
    for s in sizes:
        if any(not isinstance(n, numbers.Integral) or n < 0 for n in s):
            raise ShapeError(f"broadcast_shapes: a shape must hold non-negative ints, got {s}")
    return Size(broadcast_shapes("broadcast_shapes", *sizes))


def _one_of(name, **given):
    """The one of PyTorch's names for the split points that was given (its overloads name them
    ``sections`` for a count, ``indices`` for a list; its documentation ``indices_or_sections``)."""
    named = [(k, v) for k, v in given.items() if v is not None]
    if len(named) != 1:
        raise DTypeError(f"{name}: expected exactly one of {', '.join(given)}, got {[k for k, _ in named] or 'none'}")
    return named[0][1]


def _sections_direct(dim_of, min_ndim):
    """The direct lane of hsplit, vsplit or dsplit (``dim_of(ndim)``: the dim it splits): its common case,
    one int of sections that divides a non-empty dim, in one ``views`` call; None for any other call."""

    def lane(input, indices_or_sections, sections=None, indices=None):
        if (
            input.__class__ is not Tensor
            or sections is not None
            or indices is not None
            or len(indices_or_sections) != 1
        ):
            return None
        count = indices_or_sections[0]
        shape = input._data.shape
        if count.__class__ is not int or count <= 0 or len(shape) < min_ndim:
            return None
        d = dim_of(len(shape))
        size = shape[d]
        return _step_pieces(input, d, size // count) if size and not size % count else None

    return lane


def _varargs_split(name, input, indices_or_sections, sections, indices, dim, min_ndim):
    """hsplit, vsplit, dsplit: the split points as one argument, by a keyword, or as varargs
    (``x.hsplit(1, 2)``, PyTorch's method form of a list of ints)."""
    if len(indices_or_sections) == 1 and sections is None and indices is None:  # the common case: one argument
        return _split_along(name, input, indices_or_sections[0], dim, min_ndim)
    spec = None
    if len(indices_or_sections) == 1:
        spec = indices_or_sections[0]
    elif indices_or_sections:
        spec = list(indices_or_sections)
    spec = _one_of(name, indices_or_sections=spec, sections=sections, indices=indices)
    return _split_along(name, input, spec, dim, min_ndim)


def _split_along(name, input, sections, dim, min_ndim):
    if input._data.ndim < min_ndim:
        raise ShapeError(
            f"{name}: requires a tensor with at least {min_ndim} dimension(s), got shape {fmt_shape(input.shape)}"
        )
    if (sections.__class__ is int or isinstance(sections, numbers.Integral)) and (
        sections <= 0 or input._data.shape[dim] % sections
    ):
        raise ShapeError(
            f"{name}: the size {input.shape[dim]} of dimension {dim} is not divisible by the split_size {sections}"
        )
    return _split_at(input, sections, dim)


@op(
    "hsplit",
    doc="tensor_split along dim 1 (dim 0 of a vector); whole sections must divide it.",
    composite=True,
    direct=_sections_direct(lambda ndim: 1 if ndim > 1 else 0, 1),
)
def hsplit(
    input: Tensor,
    *indices_or_sections: int | Sequence[int],
    sections: int | None = None,
    indices: Sequence[int] | None = None,
) -> tuple[Tensor, ...]:
    dim = 1 if input._data.ndim > 1 else 0
    return _varargs_split("hsplit", input, indices_or_sections, sections, indices, dim, 1)


@op(
    "vsplit",
    doc="tensor_split along dim 0 of an input of at least 2 dims; whole sections must divide it.",
    composite=True,
    direct=_sections_direct(lambda ndim: 0, 2),
)
def vsplit(
    input: Tensor,
    *indices_or_sections: int | Sequence[int],
    sections: int | None = None,
    indices: Sequence[int] | None = None,
) -> tuple[Tensor, ...]:
    return _varargs_split("vsplit", input, indices_or_sections, sections, indices, 0, 2)


@op(
    "dsplit",
    doc="tensor_split along dim 2 of an input of at least 3 dims; whole sections must divide it.",
    composite=True,
    direct=_sections_direct(lambda ndim: 2, 3),
)
def dsplit(
    input: Tensor,
    *indices_or_sections: int | Sequence[int],
    sections: int | None = None,
    indices: Sequence[int] | None = None,
) -> tuple[Tensor, ...]:
    return _varargs_split("dsplit", input, indices_or_sections, sections, indices, 2, 3)


def _copied(bk, input, data):
    """A contiguous copy of ``data`` (a view of input's memory) that is input's no longer."""
    copy = bk.contiguous(data)
    return bk.astype(copy, input.dtype) if copy is data else copy


def _narrow_copy_grad(grad, input_shape, dim, start, length):
    """The gradient written back at the piece, zeros elsewhere."""
    return _scatter_back(grad, input_shape, _narrow_key_of("narrow_copy", input_shape, dim, start, length), False)


@op(
    "narrow_copy",
    doc="narrow as a new tensor (a copy).",
    node="NarrowCopyBackward0",
    grads={"input": _narrow_copy_grad},
)
def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    # one dispatch (a narrow and a clone were two, with their checks)
    bk = primitives(input)
    piece = bk.slice(input._data, _narrow_key("narrow_copy", input, dim, start, length))
    return wrap(_copied(bk, input, piece), input._device)


def _scattered(name, input, key, src):
    """The forward of select_scatter and slice_scatter: a copy of input with src (of the shape of input
    at the basic ``key``, checked) written there, over the primitives (one dispatch; a clone and an
    index write were two, and slice_scatter's check a third)."""
    bk = primitives(input)
    out = _copied(bk, input, input._data)
    try:
        target = bk.slice(out, key)
    except IndexError as e:
        raise IndexOutOfRangeError(f"{name}: {e} (input of shape {fmt_shape(input.shape)})") from None
    if src._data.shape != target.shape:
        item = key[-1]
        at = f"{item.start}:{item.stop}:{item.step}" if item.__class__ is slice else item
        raise ShapeError(
            f"{name}: src of shape {fmt_shape(src.shape)} must have the shape {fmt_shape(target.shape)} of input "
            f"{fmt_shape(input.shape)} at {at} along dim {len(key) - 1}"
        )
    check_same_device(name, input, src)
    bk.copy_(target, cast(src, input.dtype)._data)
    return wrap(out, input._device)


def _storage_offset_method(self: Tensor) -> int:
    """Tensor.storage_offset: metadata read with no dispatch, as ``stride()`` is (and PyTorch's method)."""
    data = self._data
    if data.__class__ is _ndarray and data.base is None:
        return 0  # (a CPU array that owns its memory starts it: the backend's answer, without its calls)
    return primitives(self).storage_offset(data)


@op(
    "storage_offset",
    doc="Where input starts in the memory it is a view of, in elements.",
    function=False,
    method=_storage_offset_method,
)
def storage_offset(input: Tensor) -> int:
    return primitives(input).storage_offset(input._data)


def _storage_positions(shape, strides, offset, device):
    """The memory position (in elements) of each element of a strided layout, as an int64 tensor."""
    positions = full(tuple(shape), offset, dtype=dt.int64, device=device)
    for d, (n, step) in enumerate(zip(shape, strides)):
        if n > 1 and step:
            along = [1] * len(shape)
            along[d] = n
            positions = positions + arange(0, n * step, step, device=device).reshape(along)
    return positions


def _as_strided_grad(grad, input_layout, size, stride, storage_offset):
    """The gradient of a strided view of input's memory: the output's gradient added up at each memory
    position it was read from (an element read twice gets both), then read back at input's own
    positions (PyTorch's rule for inputs that do not overlap themselves). Only input's layout is
    saved, not its values: a write through the view in place leaves the gradient computable."""
    shape, strides, own_offset = input_layout
    offset = own_offset if storage_offset is None else storage_offset
    read = _storage_positions(tuple(grad.shape), tuple(stride), offset, grad.device).reshape(-1)
    own = _storage_positions(shape, strides, own_offset, grad.device)
    extent = builtins.max([int(read.max()) + 1 if read.numel() else 0, int(own.max()) + 1 if own.numel() else 0])
    memory = full((extent,), 0, dtype=grad.dtype, device=grad.device).index_add(0, read, grad.reshape(-1))
    return memory[own]


@op(
    "as_strided",
    doc="A view of input's memory with the given sizes, strides (in elements) and storage offset.",
    view=_as_strided_array,
    node="AsStridedBackward0",
    grads={"input": _as_strided_grad},
)
def as_strided(input: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None) -> Tensor:
    bk = primitives(input)
    offset = bk.storage_offset(input._data) if storage_offset is None else storage_offset
    return wrap(bk.as_strided(input._data, tuple(size), tuple(stride), offset), input._device)


@op("sum_to_size", doc="input summed to size, which must broadcast to its shape.", composite=True, function=False)
def sum_to_size(input: Tensor, *size: int | Sequence[int]) -> Tensor:
    target = _dims_arg(size)
    shape = tuple(input.shape)
    lead = len(shape) - len(target)
    if lead < 0 or any(t not in (n, 1) for t, n in zip(target, shape[lead:])):
        raise ShapeError(f"sum_to_size: size {list(target)} is not expandable to size {list(shape)}")
    summed = tuple(lead + i for i, t in enumerate(target) if t == 1 and shape[lead + i] != 1)
    out = input.sum(summed, keepdim=True) if summed else input
    return out.sum(tuple(range(lead))) if lead else out


def _select_key(input_shape, dim, index):
    return (_FULL,) * _real_dim_of("select_scatter", len(input_shape), dim) + (index,)


def _slice_scatter_key(input_shape, dim, start, end, step):
    return (_FULL,) * _real_dim_of("slice_scatter", len(input_shape), dim) + (slice(start, end, step),)


def _select_scatter_input_grad(grad, src_shape, dim, index):
    return select_scatter(grad, filled(src_shape, 0, grad.dtype, grad._device), dim, index)


def _select_scatter_src_grad(grad, input_shape, dim, index):
    return slice_key(grad, _select_key(input_shape, dim, index))


@op(
    "select_scatter",
    doc="A copy of input with src written at index along dim.",
    node="SelectScatterBackward0",
    grads={"input": _select_scatter_input_grad, "src": _select_scatter_src_grad},
)
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    return _scattered("select_scatter", input, _select_key(input._data.shape, dim, index), src)


def _slice_scatter_input_grad(grad, src_shape, dim, start, end, step):
    return slice_scatter(grad, filled(src_shape, 0, grad.dtype, grad._device), dim, start, end, step)


def _slice_scatter_src_grad(grad, input_shape, dim, start, end, step):
    return slice_key(grad, _slice_scatter_key(input_shape, dim, start, end, step))


@op(
    "slice_scatter",
    doc="A copy of input with src written at start:end:step along dim.",
    node="SliceScatterBackward0",
    grads={"input": _slice_scatter_input_grad, "src": _slice_scatter_src_grad},
)
def slice_scatter(
    input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> Tensor:
    return _scattered("slice_scatter", input, _slice_scatter_key(input._data.shape, dim, start, end, step), src)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("view", onnx=lambda w, node, **params: w.view(node, **params), c=lambda lower, node: lower.view(node))
lowering("permute", onnx=lambda w, node, **params: w.permute(node, **params), c=lambda lower, node: lower.permute(node))
lowering("expand", onnx=lambda w, node, **params: w.expand(node, **params), c=lambda lower, node: lower.expand(node))
lowering("flip", onnx=lambda w, node, **params: w.flip(node, **params))
lowering("slice", onnx=lambda w, node, **params: w.slice(node, **params), c=lambda lower, node: lower.slice(node))
lowering("cat", onnx=lambda w, node, **params: w.cat(node, **params), c=lambda lower, node: lower.cat(node))
lowering("pad", onnx=lambda w, node, **params: w.pad(node, **params), c=lambda lower, node: lower.pad(node))
