"""Reductions over any set of dims, with ``keepdim``: sum mean prod amax amin max min var std
logsumexp norm argmax argmin all any; and the running sum ``cumsum``.

Forwards call the backend's reduce family (``reduce``, ``argreduce``, ``var``, ``logsumexp``,
``cumsum``: ``kernels/reduce.cu``)."""

from __future__ import annotations

import builtins
import math
import typing
from collections import namedtuple
from typing import TYPE_CHECKING, overload

from .. import dtypes as dt
from ..autograd.graph import needs_grad
from ..backends import cpu as _cpu
from ..backends.cpu.reduce import (
    count_nonzero_all,
    host_renorm,
    whole_extremes,
    whole_nansum,
    whole_norm2,
    whole_var_mean,
)
from ..backends.cpu.sort import count_slots
from ..errors import DTypeError, EmptyReductionError, ShapeError, UnsupportedDTypeError, UnsupportedError, fmt_shape
from ..tensor import Tensor, primitives
from .common import cast, filled, host_extremes, wrap, wrap_dim
from .dtype_support import FLOATING, NUMBERS
from .elementwise import abs as _abs
from .elementwise import exp, maximum, minimum, ne, sign, where
from .registry import lowering, op

if TYPE_CHECKING:
    from ..backends.seam import CPUArray
    from ..types import DType, Number, Sequence

# what max(dim) and min(dim) return: (values, indices), named like PyTorch's return types
max_result = namedtuple("max", ["values", "indices"])
min_result = namedtuple("min", ["values", "indices"])


def reduce_axes(op_name, ndim, dim):
    """``dim`` (None, int, tuple or list) as a sorted tuple of distinct non-negative axes; an empty
    tuple means every dim, as in PyTorch."""
    if dim is None:
        return tuple(range(ndim))
    if dim.__class__ is int and ndim:  # the commonest dim: one int, nothing to sort or compare
        return (wrap_dim(dim, ndim, op_name),)
    if isinstance(dim, Tensor):  # integer tensors of dims, as PyTorch takes them (wrap_dim checks the dtype)
        dims = tuple(dim.reshape(-1).unbind(0)) if dim.ndim else (dim,)
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return tuple(range(ndim))
    if ndim == 0:
        for d in dims:
            wrap_dim(d, 0, op_name)
        return ()
    axes = tuple(sorted(wrap_dim(d, ndim, op_name) for d in dims))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{op_name}: dim {dims} contains a dim more than once")
    return axes


def expand_reduced(g, input_shape, axes, keepdim):
    """Bring a reduced gradient back to the input's shape (the inverse of reducing ``axes``)."""
    if not keepdim and axes and len(axes) < len(input_shape):
        shape = list(input_shape)
        for ax in axes:
            shape[ax] = 1
        g = g.reshape(tuple(shape))
    return g.expand(tuple(input_shape))


def _check_nonempty(op_name, input, axes, whole=False):
    """Refuse a reduction with no identity over an empty dim, as PyTorch does: an IndexError naming the
    dim; over the whole tensor (``whole``, no dim given), PyTorch's RuntimeError, except for argmax
    and argmin, whose refusal is an IndexError either way."""
    if input._data.size != 0:
        return
    if whole or not axes:
        cls = EmptyReductionError if op_name in ("argmax", "argmin") else ShapeError
        raise cls(
            f"{op_name}: expected reduction dim to be specified for an empty tensor of shape "
            f"{fmt_shape(input.shape)} (the operation has no identity)"
        )
    empty = next((a for a in axes if input.shape[a] == 0), None)
    if empty is not None:
        raise EmptyReductionError(
            f"{op_name}: expected reduction dim {empty} to have non-zero size (input shape "
            f"{fmt_shape(input.shape)}; the operation has no identity)"
        )


def _reduce(prim, input, axes, keepdim):
    return wrap(primitives(input).reduce(prim, input._data, axes, keepdim), input._device)


def _accumulation_dtype(dtype):
    """The dtype PyTorch accumulates a floating ``dtype``'s reductions in: float32 for the half types."""
    return dt.float32 if dtype is dt.float16 or dtype is dt.bfloat16 else dtype


def _count(shape, axes):
    count = 1
    for ax in axes:
        count *= shape[ax]
    return count


# ------------------------------------------------------------------------------------------------
# sum, mean, prod
def _sum_grad(grad, input_shape, dim, keepdim):
    if dim is None:  # a sum of every element (a loss): its gradient broadcast back, nothing to unsqueeze
        return grad.expand(input_shape)
    return expand_reduced(grad, input_shape, reduce_axes("sum", len(input_shape), dim), keepdim)


@op(
    "sum",
    plain="reduce",
    doc="The sum over dim (all elements by default); int and bool sum as int64.",
    node=lambda input, dim=None, keepdim=False, *, dtype=None: "SumBackward1" if dim is not None else "SumBackward0",
    grads={"input": _sum_grad},
)
def sum(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,  # noqa: A001
    dtype: DType | None = None,
) -> Tensor:
    return _sum_forward(input, dim, keepdim, dtype)


def _sum_forward(input, dim, keepdim, dtype):
    if dtype is not None:
        # the sum of the input cast to dtype, in dtype (an integer one too: not widened to int64)
        dtype = dt.as_dtype(dtype, "sum")
        input = cast(input, dtype)
        return cast(_reduce("sum", input, reduce_axes("sum", input.ndim, dim), keepdim), dtype)
    if dim is None:  # a sum of every element (a loss): axes=None, the primitive's every dim, directly
        return wrap(primitives(input).reduce("sum", input._data, None, keepdim), input._device)
    return _reduce("sum", input, reduce_axes("sum", input.ndim, dim), keepdim)


lowering("reduce", "sum", onnx="ReduceSum", c=("0.0f", "{acc} + {v}", None))


def _mean_grad(grad, input_shape, dim, keepdim):
    axes = reduce_axes("mean", len(input_shape), dim)
    return expand_reduced(grad / builtins.max(_count(input_shape, axes), 1), input_shape, axes, keepdim)


@op(
    "mean",
    plain="reduce",
    doc="The mean over dim (all elements by default).",
    node=lambda input, dim=None, keepdim=False, *, dtype=None: "MeanBackward1" if dim is not None else "MeanBackward0",
    grads={"input": _mean_grad},
)
def mean(
    input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: DType | None = None
) -> Tensor:
    if dtype is not None:
        input = cast(input, dt.as_dtype(dtype, "mean"))
    if not input.dtype.is_floating_point:
        raise UnsupportedDTypeError(
            f"mean: could not infer output dtype. Input dtype must be a floating point dtype, got {input.dtype}"
        )
    return _reduce("mean", input, reduce_axes("mean", input.ndim, dim), keepdim)


# C: the sum, divided at the end
lowering("reduce", "mean", onnx="ReduceMean", c=("0.0f", "{acc} + {v}", "{acc} / {count}"))


def _prod_grad(grad, input, result, dim, keepdim):
    shape = tuple(input.shape)
    axes = reduce_axes("prod", len(shape), dim)
    x = input
    is_zero = x == 0
    zeros = sum(is_zero.to(dtype=x.dtype), axes, keepdim=True)
    safe_x = where(is_zero, 1.0, x)
    prod_nonzero = safe_x
    for ax in axes:
        prod_nonzero = prod(prod_nonzero, ax, keepdim=True)
    y_k = expand_reduced(result, shape, axes, keepdim)
    no_zero = where(zeros == 0, y_k / safe_x, 0.0)
    one_zero = where(is_zero.logical_and(zeros == 1), prod_nonzero, 0.0)
    return expand_reduced(grad, shape, axes, keepdim) * (no_zero + one_zero)


@op(
    "prod",
    doc="The product over dim (an int; all elements by default).",
    node="ProdBackward0",
    grads={"input": _prod_grad},
)
def prod(input: Tensor, dim: int | None = None, keepdim: bool = False, *, dtype: DType | None = None) -> Tensor:
    if dim is not None and not isinstance(dim, int):
        raise TypeError("prod: dim must be an int (as in PyTorch)")
    if dtype is not None:
        dtype = dt.as_dtype(dtype, "prod")
        input = cast(input, dtype)
        return cast(_reduce("prod", input, reduce_axes("prod", input.ndim, dim), keepdim), dtype)
    if dim is None:  # every dim as the primitive's axes=None, NumPy's cheapest reduction
        return wrap(primitives(input).reduce("prod", input._data, None, keepdim), input._device)
    return _reduce("prod", input, reduce_axes("prod", input.ndim, dim), keepdim)


lowering("reduce", "prod", onnx="ReduceProd", c=("1.0f", "{acc} * {v}", None))


# ------------------------------------------------------------------------------------------------
# extremes
def _no_dims(dim):
    """Whether ``dim`` is (), amax's and amin's every dim (a dim may also be a tensor, not compared with ==)."""
    return dim.__class__ is tuple and not dim


def _extreme_grad(name):
    def grad_fn(grad, input, result, dim, keepdim):
        shape = tuple(input.shape)
        axes = reduce_axes(name, len(shape), None if _no_dims(dim) else dim)
        hit = (input == expand_reduced(result, shape, axes, keepdim)).to(dtype=grad.dtype)
        count = sum(hit, axes, keepdim=True)
        return expand_reduced(grad, shape, axes, keepdim) * hit / count

    return grad_fn


def _extreme(prim, input, dim, keepdim):
    if dim is None or dim.__class__ is tuple and not dim:
        # every dim as the primitive's axes=None, NumPy's cheapest reduction
        if not input._data.size:
            _check_nonempty(prim, input, None, whole=True)
        return wrap(primitives(input).reduce(prim, input._data, None, keepdim), input._device)
    axes = reduce_axes(prim, input.ndim, dim)
    _check_nonempty(prim, input, axes)
    return wrap(primitives(input).reduce(prim, input._data, axes, keepdim), input._device)


@op(
    "amax",
    doc="The largest value over dim (all elements by default); ties share the gradient.",
    node="AmaxBackward0",
    grads={"input": _extreme_grad("amax")},
)
def amax(input: Tensor, dim: int | Sequence[int] = (), keepdim: bool = False) -> Tensor:
    return _extreme("amax", input, dim, keepdim)


# C: amax and amin pass a NaN on, as NumPy's
lowering("reduce", "amax", onnx="ReduceMax", c=("-INFINITY", "(({v} != {v} || {v} > {acc}) ? {v} : {acc})", None))


@op(
    "amin",
    doc="The smallest value over dim (all elements by default); ties share the gradient.",
    node="AminBackward0",
    grads={"input": _extreme_grad("amin")},
)
def amin(input: Tensor, dim: int | Sequence[int] = (), keepdim: bool = False) -> Tensor:
    return _extreme("amin", input, dim, keepdim)


lowering("reduce", "amin", onnx="ReduceMin", c=("INFINITY", "(({v} != {v} || {v} < {acc}) ? {v} : {acc})", None))


def _host(t: Tensor) -> CPUArray:
    """A CPU tensor's array, for the CPU backend's host paths (the caller checked ``primitives(t) is _cpu``)."""
    return typing.cast("CPUArray", t._data)


def _may_record(t):
    """Whether ``t`` may take part in a graph (then ``needs_grad`` decides): a tensor with none of the
    marks of one skips grad mode's thread-local read."""
    return t._requires_grad or t._grad_fn is not None or t._base is not None


def _max_min(name, input, dim, keepdim):
    if dim is None:
        if _may_record(input) and needs_grad(input):
            return (amax if name == "max" else amin)(input)
        if primitives(input) is _cpu:  # the host module's one pass, where it takes the array
            both = whole_extremes(_host(input))
            if both is not None:
                return wrap(both[name == "max"], input._device)
        # amax's own forward, without a second entry: nothing to record
        return _extreme("amax" if name == "max" else "amin", input, (), False)
    if isinstance(dim, Tensor):  # max(a, b) is PyTorch's elementwise maximum
        return (maximum if name == "max" else minimum)(input, dim)
    axis = wrap_dim(dim, input.ndim, name)
    _check_nonempty(name, input, (axis,) if input.ndim else ())
    result = max_result if name == "max" else min_result
    P = primitives(input)
    if input.ndim == 0:
        return result(input.clone(), wrap(P.full((), 0, dt.int64), input._device))
    kept = P.argreduce("argmax" if name == "max" else "argmin", input._data, axis, True)
    return result(*values_and_indices(input, axis, kept, None, keepdim))


def values_and_indices(input, axis, kept, values, keepdim):
    """(values, indices) of a reduction of ``input`` along ``axis`` from backend arrays of keepdim shape:
    the int64 indices ``kept`` and the ``values`` there (None: gathered from the input). Where a gradient
    is needed the values are a differentiable gather; without, the gather and squeeze stay on the
    backend's arrays (the public ops would each pay the dispatch again). Dim ``axis`` kept if ``keepdim``."""
    P, device = primitives(input), input._device
    if needs_grad(input):
        gathered = input.gather(axis, wrap(kept, device))
        return (gathered if keepdim else gathered.squeeze(axis)), wrap(_squeezed(P, kept, axis, keepdim), device)
    if values is None:
        values = P.gather(input._data, axis, kept)
    return wrap(_squeezed(P, values, axis, keepdim), device), wrap(_squeezed(P, kept, axis, keepdim), device)


def _squeezed(P, a, axis, keepdim):
    """The backend array ``a`` (of keepdim shape) without its dim ``axis`` unless ``keepdim``."""
    if keepdim:
        return a
    shape = tuple(s for d, s in enumerate(a.shape) if d != axis)
    view = P.view(a, shape)
    return view if view is not None else P.view(P.contiguous(a), shape)


@overload
def max(input: Tensor) -> Tensor: ...
@overload
def max(input: Tensor, dim: int, keepdim: bool = False) -> tuple[Tensor, Tensor]: ...
@overload
def max(input: Tensor, dim: Tensor) -> Tensor: ...
@overload
def max(input: Tensor, *, other: Tensor) -> Tensor: ...
@op("max", doc="The largest value (and with dim, its index along dim); max(a, b) is maximum.", composite=True)
def max(
    input: Tensor,
    dim: int | Tensor | None = None,  # noqa: A001
    keepdim: bool = False,
    *,
    other: Tensor | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    return _max_min("max", input, dim if other is None else other, keepdim)


@overload
def min(input: Tensor) -> Tensor: ...
@overload
def min(input: Tensor, dim: int, keepdim: bool = False) -> tuple[Tensor, Tensor]: ...
@overload
def min(input: Tensor, dim: Tensor) -> Tensor: ...
@overload
def min(input: Tensor, *, other: Tensor) -> Tensor: ...
@op("min", doc="The smallest value (and with dim, its index along dim); min(a, b) is minimum.", composite=True)
def min(
    input: Tensor,
    dim: int | Tensor | None = None,  # noqa: A001
    keepdim: bool = False,
    *,
    other: Tensor | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    return _max_min("min", input, dim if other is None else other, keepdim)


def _argext(name, input, dim, keepdim):
    if dim is not None and not input.ndim:
        wrap_dim(dim, 0, name)  # a 0-d tensor takes dim 0 or -1 only, as in PyTorch
    axis = None if dim is None else (wrap_dim(dim, input.ndim, name) if input.ndim else None)
    _check_nonempty(name, input, (axis,) if axis is not None else ())
    return wrap(primitives(input).argreduce(name, input._data, axis, keepdim), input._device)


@op("argmax", dtypes=NUMBERS, doc="The index of the largest value (over the flattened tensor without dim).")
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _argext("argmax", input, dim, keepdim)


@op("argmin", dtypes=NUMBERS, doc="The index of the smallest value (over the flattened tensor without dim).")
def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    return _argext("argmin", input, dim, keepdim)


# ------------------------------------------------------------------------------------------------
# variance, standard deviation
def _correction(name, unbiased, correction):
    if unbiased is not None and not isinstance(unbiased, bool):
        raise TypeError(f"{name}: unbiased must be a bool")
    if correction is None:
        return 1 if unbiased is None or unbiased else 0
    return correction


def _var_grad_of(x, g, axes, keepdim, correction, whole):
    """The gradient of ``var`` over ``axes`` given the gradient ``g`` of its result, as PyTorch's
    var_backward: over the whole tensor (``whole``: no dim, or a 0-d tensor) with no degrees of freedom
    left, NaN where x equals the mean and inf elsewhere, constants (so its own gradient is 0, not
    the NaN that inf * 0 would make); otherwise 2 / (n - correction) * (x - mean), that quotient inf
    where n == correction."""
    shape = tuple(x.shape)
    dof = _count(shape, axes) - correction
    centered = x - mean(x, axes, keepdim=True)
    if whole and dof <= 0:
        return expand_reduced(g, shape, axes, keepdim) * where(centered == 0, math.nan, math.inf)
    scale = 2.0 / dof if dof else math.inf
    return expand_reduced(g, shape, axes, keepdim) * centered * scale


def _var_forward(name, input, dim, unbiased, keepdim, correction):
    correction = _correction(name, unbiased, correction)
    if not input.dtype.is_floating_point:
        raise UnsupportedDTypeError(f"{name}: expected a floating point tensor, got {input.dtype}")
    axes = None if dim is None else reduce_axes(name, input.ndim, dim)  # None: the primitive's every dim
    return primitives(input).var(input._data, axes, correction, keepdim)


@op(
    "var",
    dtypes=FLOATING,
    doc="The variance over dim, with Bessel's correction unless unbiased=False / correction=0.",
    node="VarBackward0",
    grads={
        "input": lambda grad, input, dim, unbiased, keepdim, correction: _var_grad_of(
            input,
            grad,
            reduce_axes("var", input.ndim, dim),
            keepdim,
            _correction("var", unbiased, correction),
            whole=dim is None or input.ndim == 0,
        )
    },
)
def var(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Number | None = None,
) -> Tensor:
    return wrap(_var_forward("var", input, dim, unbiased, keepdim, correction), input._device)


def _std_grad(grad, input, result, dim, unbiased, keepdim, correction):
    # d std = d var / (2 std), and 0 (not NaN) where all values are equal, as in PyTorch
    zero = result == 0
    g = where(zero, 0.0, grad / (2 * where(zero, 1.0, result)))
    return _var_grad_of(
        input,
        g,
        reduce_axes("std", input.ndim, dim),
        keepdim,
        _correction("std", unbiased, correction),
        whole=dim is None or input.ndim == 0,
    )


@op(
    "std",
    dtypes=FLOATING,
    doc="The standard deviation over dim (see var for the correction).",
    node="StdBackward0",
    grads={"input": _std_grad},
)
def std(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Number | None = None,
) -> Tensor:
    return wrap(_std_forward(input, dim, unbiased, keepdim, correction), input._device)


def _std_forward(input, dim, unbiased, keepdim, correction):
    bk, dtype = primitives(input), input.dtype
    if dtype is dt.float32 or dtype is dt.float64:  # (the commonest: nothing to widen)
        return bk.unary("sqrt", _var_forward("std", input, dim, unbiased, keepdim, correction))
    wide = _accumulation_dtype(dtype) if dtype.is_floating_point else dtype
    # the root before narrowing half types: the variance of [300, -300] is past float16's range, its root is not
    root = bk.unary("sqrt", _var_forward("std", cast(input, wide), dim, unbiased, keepdim, correction))
    return root if wide is input.dtype else bk.astype(root, input.dtype)


@op("var_mean", doc="(var, mean) over dim.", composite=True)
def var_mean(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Number | None = None,
) -> tuple[Tensor, Tensor]:
    if needs_grad(input):
        return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)
    if dim is None and not keepdim:
        both = _whole_spread_and_mean("var", input, unbiased, correction)
        if both is not None:
            return both
    # both forwards without their entries: nothing to record
    spread = _var_forward("var", input, dim, unbiased, keepdim, correction)
    return wrap(spread, input._device), _mean_of(input, dim, keepdim)


def _whole_spread_and_mean(name, input, unbiased, correction):
    """var_mean's ("var") or std_mean's ("std") pair over every dim for a CPU tensor that records nothing,
    by the host module's one call where it takes the array (None elsewhere): the values of the forwards'
    primitives."""
    if primitives(input) is not _cpu:
        return None
    both = whole_var_mean(_host(input), _correction(name, unbiased, correction), name == "std")
    return None if both is None else (wrap(both[0], input._device), wrap(both[1], input._device))


def _mean_of(input, dim, keepdim):
    """mean's forward for var_mean and std_mean, whose forwards checked the dtype (dim None: the
    primitive's every dim, its cheapest)."""
    axes = None if dim is None else reduce_axes("mean", input.ndim, dim)
    return wrap(primitives(input).reduce("mean", input._data, axes, keepdim), input._device)


@op("std_mean", doc="(std, mean) over dim.", composite=True)
def std_mean(
    input: Tensor,
    dim: int | Sequence[int] | None = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: Number | None = None,
) -> tuple[Tensor, Tensor]:
    if needs_grad(input):
        return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)
    if dim is None and not keepdim:
        both = _whole_spread_and_mean("std", input, unbiased, correction)
        if both is not None:
            return both
    spread = _std_forward(input, dim, unbiased, keepdim, correction)  # (no entries: nothing to record)
    return wrap(spread, input._device), _mean_of(input, dim, keepdim)


# ------------------------------------------------------------------------------------------------
# logsumexp, norm
def _logsumexp_grad(grad, input, result, dim, keepdim):
    shape = tuple(input.shape)
    axes = reduce_axes("logsumexp", len(shape), dim)
    return expand_reduced(grad, shape, axes, keepdim) * exp(input - expand_reduced(result, shape, axes, keepdim))


@op(
    "logsumexp",
    doc="log(sum(exp(input))) over dim, computed without overflow.",
    node="LogsumexpBackward0",
    grads={"input": _logsumexp_grad},
)
def logsumexp(input: Tensor, dim: int | Sequence[int], keepdim: bool = False) -> Tensor:
    axes = reduce_axes("logsumexp", input.ndim, dim)
    if not keepdim and input.ndim and not isinstance(dim, int) and len(dim) == 0:
        # PyTorch reduces every dim for dim=() and then fails to add back the kept-dims maximum
        raise ShapeError(
            f"logsumexp: dim=() with keepdim=False is not supported for input of shape {fmt_shape(input.shape)} "
            "(PyTorch raises here); pass dim=tuple(range(input.ndim))"
        )
    if not input.dtype.is_floating_point:
        input = cast(input, dt.default_float)
    if input.ndim and _count(input.shape, axes) == 0:  # log of an empty sum, as PyTorch: -inf
        shape = [1 if i in axes else n for i, n in enumerate(input.shape) if keepdim or i not in axes]
        return filled(shape, -math.inf, input.dtype, input._device)
    return wrap(primitives(input).logsumexp(input._data, axes, keepdim), input._device)


def _pnorm_grad(grad, input, result, p, dim, keepdim):
    shape = tuple(input.shape)
    axes = reduce_axes("norm", len(shape), dim)
    if p == 0:  # a count: its gradient is 0, as PyTorch's (whose output still requires grad)
        return expand_reduced(grad, shape, axes, keepdim) * 0.0
    if p == 1:
        return expand_reduced(grad, shape, axes, keepdim) * sign(input)
    # d||x||_p = x |x|^(p-2) / ||x||^(p-1), and 0 (not NaN) where the norm is 0, as PyTorch's masked
    # formula: its own gradient there is NaN (the division's, 0 / 0), as PyTorch's second order
    yk = expand_reduced(result, shape, axes, keepdim)
    scale = input / yk if p == 2 else input * _abs(input) ** (p - 2) / yk ** (p - 1)
    return expand_reduced(grad, shape, axes, keepdim) * where(yk == 0, 0.0, scale)


@op(
    "pnorm",
    doc="The vector p-norm for a finite p (norm's differentiable core; p = 0 counts the nonzero elements).",
    node="NormBackward1",
    function=False,
    method=False,
    grads={"input": _pnorm_grad},
)
def pnorm(input: Tensor, p: float, dim: int | Sequence[int] | None, keepdim: bool) -> Tensor:
    return _pnorm_forward(input, p, dim, keepdim)


def _pnorm_forward(input, p, dim, keepdim):
    bk = primitives(input)
    axes = None if dim is None else reduce_axes("norm", input.ndim, dim)  # None: the primitive's every dim
    # the powers and their sum in float32 for half types, as PyTorch accumulates: 300 ** 2 is past
    # float16's range while the norm of four of them is 600
    d = _accumulation_dtype(input.dtype)
    x = bk.astype(input._data, d) if d is not input.dtype else input._data
    if p == 0:
        out = bk.astype(bk.reduce("sum", bk.binary("ne", x, 0, d), axes, keepdim), d)
    elif p == 1:
        out = bk.reduce("sum", bk.unary("abs", x), axes, keepdim)
    elif p == 2:
        out = bk.unary("sqrt", bk.reduce("sum", bk.binary("mul", x, x, d), axes, keepdim))
    else:
        total = bk.reduce("sum", bk.binary("pow", bk.unary("abs", x), float(p), d), axes, keepdim)
        out = bk.binary("pow", total, 1.0 / p, d)
    return wrap(out if d is input.dtype else bk.astype(out, input.dtype), input._device)


@op("norm", doc="The vector p-norm over dim (all elements by default); 'fro' is the 2-norm.", composite=True)
def norm(
    input: Tensor,
    p: float | str | None = "fro",
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    dtype: DType | None = None,
) -> Tensor:
    if not input.dtype.is_floating_point:
        raise UnsupportedDTypeError(f"norm: expected a floating point tensor, got {input.dtype}")
    if dtype is not None:
        dtype = dt.as_dtype(dtype, "norm")
        if not dtype.is_floating_point or dt.promote(input.dtype, dtype) is not dtype:
            raise DTypeError(f"norm: the input's dtype {input.dtype} does not convert to {dtype} without narrowing")
        input = input.to(dtype=dtype)
    if p == "fro":
        p = 2
    if isinstance(p, str) or not isinstance(p, (int, float)):
        raise ValueError(f"norm: p must be a number or 'fro', got {p!r}")
    if p == math.inf:
        return amax(_abs(input), () if dim is None else dim, keepdim)
    if p == -math.inf:
        return amin(_abs(input), () if dim is None else dim, keepdim)
    if needs_grad(input):
        return pnorm(input, p, dim, keepdim)
    if p == 2 and dim is None and not keepdim and primitives(input) is _cpu:
        out = whole_norm2(_host(input))  # the host module's one call, where it takes the array
        if out is not None:
            return wrap(out, input._device)
    return _pnorm_forward(input, p, dim, keepdim)  # pnorm's forward without its entry: nothing to record


# ------------------------------------------------------------------------------------------------
# running sum, logical reductions
def _cumsum_grad(grad, input_shape, dim):
    if not input_shape:
        return grad
    axis = wrap_dim(dim, len(input_shape), "cumsum")
    # each input element reaches every later output: the gradient is a reversed running sum
    return cumsum(grad.flip(axis), axis).flip(axis)


@op(
    "cumsum",
    doc="The running sum along dim; int and bool inputs give int64.",
    node="CumsumBackward0",
    grads={"input": _cumsum_grad},
)
def cumsum(input: Tensor, dim: int, *, dtype: DType | None = None) -> Tensor:
    return _running("cumsum", input, dim, dtype)


def _running(name, input, dim, dtype):
    """cumsum's and cumprod's forward: the backend primitive of the op's own name along ``dim`` (a 0-d
    input as one element), after the cast to ``dtype`` if one is given."""
    if dtype is not None:
        dtype = dt.as_dtype(dtype, name)
        return cast(_running(name, cast(input, dtype), dim, None), dtype)  # in dtype, not widened to int64
    bk = primitives(input)
    primitive = bk.cumsum if name == "cumsum" else bk.cumprod
    if input.ndim == 0:
        wrap_dim(dim, 0, name)
        return wrap(bk.view(bk.contiguous(primitive(bk.view(input._data, (1,)), 0)), ()), input._device)
    return wrap(primitive(input._data, wrap_dim(dim, input.ndim, name)), input._device)


def _reduces_nothing(dim):
    """all's and any's ``dim=()``: PyTorch reduces no dim there (``x.all(())`` is ``x != 0``), where
    sum and the other reductions reduce every dim."""
    return dim is not None and not isinstance(dim, int) and len(dim) == 0


@op("all", doc="Whether every element over dim is nonzero.")
def all(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    if _reduces_nothing(dim):
        return ne(input, 0)
    axes = None if dim is None else reduce_axes("all", input.ndim, dim)  # None: the primitive's every dim
    return wrap(primitives(input).reduce("all", input._data, axes, keepdim), input._device)


lowering(
    "reduce",
    "all",
    onnx=lambda w, x, dtype, axes, keepdim, out: w.reduce_truth("ReduceMin", x, dtype, axes, keepdim, out),
)


@op("any", doc="Whether any element over dim is nonzero.")
def any(input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False) -> Tensor:  # noqa: A001
    if _reduces_nothing(dim):
        return ne(input, 0)
    axes = None if dim is None else reduce_axes("any", input.ndim, dim)  # None: the primitive's every dim
    return wrap(primitives(input).reduce("any", input._data, axes, keepdim), input._device)


lowering(
    "reduce",
    "any",
    onnx=lambda w, x, dtype, axes, keepdim, out: w.reduce_truth("ReduceMax", x, dtype, axes, keepdim, out),
)


@op("count_nonzero", doc="The number of nonzero elements over dim.", composite=True)
def count_nonzero(input: Tensor, *dim: int | Sequence[int] | None) -> Tensor:
    # x.count_nonzero(), (0), (0, 1), ((0, 1)), dim=None
    if len(dim) == 1:
        dims = dim[0]
    else:  # none, or several: ints (a sequence comes alone)
        dims = typing.cast("tuple[int, ...]", dim) or None
    P = primitives(input)
    if P is _cpu and dims is None:
        return wrap(count_nonzero_all(_host(input)), input._device)
    # on the backend's arrays: a comparison and a sum (as public ops, two dispatches); a float tensor's
    # zero as a float, which the comparison takes without converting
    nonzero = P.binary("ne", input._data, 0.0 if input.dtype.is_floating_point else 0, input.dtype)
    axes = None if dims is None else reduce_axes("count_nonzero", input.ndim, dims)  # None: NumPy's cheapest
    return wrap(P.reduce("sum", nonzero, axes, False), input._device)


# ------------------------------------------------------------------------------------------------
# running product
def _cumprod_grad(grad, input, result, dim):
    if input.ndim == 0:
        return grad
    axis = wrap_dim(dim, input.ndim, "cumprod")
    if not bool((input == 0).any()):
        # each output is the product of the inputs up to it: d out_k / d x_j = out_k / x_j for j <= k
        return cumsum((grad * result).flip(axis), axis).flip(axis) / input
    # with zeros the quotient is undefined: the product of the other factors, prod_{i <= k, i != j} x_i,
    # as the running product of x with x_j replaced by 1 (n x n values along the dim, only here)
    x = input.movedim(axis, -1)
    g = grad.movedim(axis, -1)
    n = x.shape[-1]
    eye = _arange_like(x, n).unsqueeze(-1) == _arange_like(x, n)
    others = cumprod(where(eye, 1.0, x.unsqueeze(-2).expand(tuple(x.shape[:-1]) + (n, n))), -1)
    later = _arange_like(x, n).unsqueeze(-1) <= _arange_like(x, n)  # [j, k]: k >= j
    return (where(later, others, 0.0) * g.unsqueeze(-2)).sum(-1).movedim(-1, axis)


def _arange_like(x, n):
    """0..n-1 as int64 on x's device."""
    return wrap(primitives(x).arange(0, n, 1, dt.int64), x._device)


@op(
    "cumprod",
    doc="The running product along dim; int and bool inputs give int64.",
    node="CumprodBackward0",
    grads={"input": _cumprod_grad},
)
def cumprod(input: Tensor, dim: int, *, dtype: DType | None = None) -> Tensor:
    return _running("cumprod", input, dim, dtype)


# ------------------------------------------------------------------------------------------------
# More of PyTorch's reductions (issue 15), composed of the ops above
aminmax_result = namedtuple("aminmax", ["min", "max"])


@op("nansum", doc="The sum over dim, NaN counted as 0.", composite=True)
def nansum(
    input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: DType | None = None
) -> Tensor:
    if needs_grad(input):
        if input.dtype.is_floating_point:
            input = where(input != input, 0.0, input)
        return sum(input, dim, keepdim, dtype=dtype)
    if dim is None and not keepdim and dtype is None and primitives(input) is _cpu:
        total = whole_nansum(_host(input), False)  # the host module's one call, where it takes the array
        if total is not None:
            return wrap(total, input._device)
    return _sum_forward(_without_nan(input), dim, keepdim, dtype)  # (no entries: nothing to record)


def _without_nan(input):
    """``input`` with its NaN replaced by 0, on the backend's arrays (integers have none)."""
    if not input.dtype.is_floating_point:
        return input
    P, x, d = primitives(input), input._data, input.dtype
    return wrap(P.where(P.binary("ne", x, x, d), 0.0, x, d), input._device)


@op("nanmean", doc="The mean over dim of the elements that are not NaN.", composite=True)
def nanmean(
    input: Tensor, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: DType | None = None
) -> Tensor:
    if not input.dtype.is_floating_point:
        raise UnsupportedDTypeError(f"nanmean: expected a floating point tensor, got {input.dtype}")
    if needs_grad(input):
        present = input == input
        return nansum(input, dim, keepdim, dtype=dtype) / sum(present, dim, keepdim, dtype=dtype or input.dtype)
    if dim is None and not keepdim and dtype is None and primitives(input) is _cpu:
        average = whole_nansum(_host(input), True)
        if average is not None:
            return wrap(average, input._device)
    # on the backend's arrays: nothing to record
    P, x, d = primitives(input), input._data, input.dtype
    count = _sum_forward(wrap(P.binary("eq", x, x, d), input._device), dim, keepdim, dtype or d)
    total = _sum_forward(_without_nan(input), dim, keepdim, dtype)
    return wrap(P.binary("div", total._data, count._data, total.dtype), input._device)


@op("aminmax", doc="(min, max) of input over dim (every element when dim is None).", composite=True)
def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    dims: int | tuple[int, ...] = () if dim is None else dim
    if dim is None and keepdim:
        dims = tuple(range(input.ndim))
    if _may_record(input) and needs_grad(input):
        return aminmax_result(amin(input, dims, keepdim), amax(input, dims, keepdim))
    # the two forwards' reductions, the dims read and checked once (nothing to record)
    axes = None if dim is None and not keepdim else reduce_axes("aminmax", input.ndim, dims)
    _check_nonempty("aminmax", input, axes, whole=axes is None)
    P, x, device = primitives(input), input._data, input._device
    if axes is None and P is _cpu:  # both in one pass of the host module's, where it takes the array
        both = whole_extremes(typing.cast("CPUArray", x))
        if both is not None:
            return aminmax_result(wrap(both[0], device), wrap(both[1], device))
    return aminmax_result(
        wrap(P.reduce("amin", x, axes, keepdim), device), wrap(P.reduce("amax", x, axes, keepdim), device)
    )


@op(
    "cov",
    dtypes=NUMBERS,
    doc="The covariance matrix of the variables (rows) of input over its observations (columns).",
    composite=True,
)
def cov(
    input: Tensor, *, correction: int = 1, fweights: Tensor | None = None, aweights: Tensor | None = None
) -> Tensor:
    return _cov(input, correction, fweights, aweights)


def _cov(input, correction, fweights, aweights):
    """cov's forward (corrcoef's first step)."""
    name = "cov"
    if input.ndim > 2:
        raise ShapeError(f"{name}: expected a 1-d or 2-d input, got shape {fmt_shape(input.shape)}")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = cast(x, dt.default_float)
    n = x.shape[1]
    weights = None
    for what, w in (("fweights", fweights), ("aweights", aweights)):
        if w is not None:
            if w.ndim != 1 or w.shape[0] != n:
                raise ShapeError(
                    f"{name}: {what} of shape {fmt_shape(w.shape)} must be 1-d with one weight per observation ({n})"
                )
            weights = w if weights is None else weights * w
    if weights is None and not needs_grad(x):
        # the formula below on the backend's arrays: nothing to record (five public ops fewer to dispatch)
        P, a, d = primitives(x), x._data, x.dtype
        centred = P.binary("sub", a, P.reduce("mean", a, (1,), True), d)
        product = P.binary("div", P.matmul(centred, P.permute(centred, (1, 0))), float(n) - correction, d)
        return wrap(P.view(product, ()) if input.ndim < 2 else product, x._device)
    if weights is None:
        total: float | Tensor = float(n)
        mean_ = mean(x, 1, keepdim=True)
        factor: float | Tensor = total - correction
        centred = x - mean_
        scaled = centred
    else:
        weights = cast(weights, x.dtype)
        total = sum(weights)
        mean_ = sum(x * weights, 1, keepdim=True) / total
        factor = total - (correction if aweights is None else correction * sum(weights * aweights) / total)
        centred = x - mean_
        scaled = centred * weights
    out = (scaled @ centred.mT) / factor
    return out.reshape(()) if input.ndim < 2 else out


@op("corrcoef", dtypes=NUMBERS, doc="The Pearson correlation matrix of the variables (rows) of input.", composite=True)
def corrcoef(input: Tensor) -> Tensor:
    c = _cov(input, 1, None, None)
    if c.ndim == 0:
        return c / c
    if not needs_grad(c):
        # the formula below on the backend's arrays (the diagonal of c, contiguous: every (k + 1)-th element)
        P, a, d, k = primitives(c), c._data, c.dtype, c.shape[0]
        std = P.unary("sqrt", P.slice(P.view(a, (k * k,)), (slice(0, None, k + 1),)))
        scaled = P.binary("div", P.binary("div", a, P.view(std, (k, 1)), d), P.view(std, (1, k)), d)
        return wrap(P.clamp(scaled, -1, 1), c._device)
    std = c.diagonal().sqrt()
    return (c / std.unsqueeze(1) / std.unsqueeze(0)).clamp(-1, 1)


def _check_counts_input(name, input):
    """-> the largest value of ``input`` (-1 for an empty one), after the checks of PyTorch's."""
    if input.__class__ is not Tensor or input.dtype.category != dt.INTEGER or input.ndim != 1:
        got = f"{input.dtype} of shape {fmt_shape(input.shape)}" if input.__class__ is Tensor else type(input).__name__
        raise UnsupportedDTypeError(f"{name}: expected a 1-d tensor of non-negative integers, got {got}")
    if not input.numel():
        return -1
    lowest, largest = host_extremes(input)
    if lowest < 0:
        raise ValueError(f"{name}: expected non-negative values, got a minimum of {int(lowest)}")
    return int(largest)


@op(
    "bincount",
    doc="How often each non-negative integer of 1-d input occurs (or the sum of its weights).",
    composite=True,
)
def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    if weights is None and input.__class__ is Tensor and input.dtype is dt.int64 and primitives(input) is _cpu:
        counts = (
            count_slots(_host(input), minlength) if input.ndim == 1 else None
        )  # one NumPy call, where it takes them
        if counts is not None:
            return wrap(counts, input._device)
    size = builtins.max(_check_counts_input("bincount", input) + 1, minlength)
    if weights is None:
        P = primitives(input)
        slots = input._data if input.dtype is dt.int64 else P.astype(input._data, dt.int64)
        return wrap(P.bincount(slots, size), input._device)
    else:
        if tuple(weights.shape) != tuple(input.shape):
            raise ShapeError(
                f"bincount: weights {fmt_shape(weights.shape)} must have input {fmt_shape(input.shape)}'s shape"
            )
        dtype = dt.float32 if weights.dtype is dt.float32 else dt.float64  # PyTorch's: float32 or double
        values = cast(weights, dtype)
    counts = Tensor._make(primitives(input).full((size,), 0, dtype), input._device)
    return counts.scatter_add(0, input.to(dtype=dt.int64), cast(values, dtype))


@op(
    "histc",
    dtypes=FLOATING,
    doc="The histogram of input in bins equal-width bins over [min, max] (input's range if equal).",
    composite=True,
)
def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:  # noqa: A002
    if bins <= 0:
        raise ValueError(f"histc: bins must be > 0, got {bins}")
    low, high = float(min), float(max)
    of_data = low == high and input.numel()
    if of_data:
        low, high = (float(v) for v in host_extremes(input))
    if low == high:
        low, high = low - 1, high + 1
    if low > high:
        raise ValueError(f"histc: max must be larger than min, got min={min}, max={max}")
    # on the backend's arrays: a dozen public ops would each pay the dispatch again
    P, d = primitives(input), input.dtype
    inside = P.view(P.contiguous(input._data), (input.numel(),))
    if not (of_data and math.isfinite(low) and math.isfinite(high)):  # the input's own range holds every element
        inside = P.index(
            inside,
            (P.binary("logical_and", P.binary("ge", inside, low, d), P.binary("le", inside, high, d), dt.bool_),),
        )
    # each element's bin: at least 0 (the elements are at least low), the last one for high; the
    # conversion of a value at least 0 to int64 is its floor
    scaled = P.binary("mul", P.binary("sub", inside, low, d), bins / (high - low), d)
    slots = P.astype(P.binary("minimum", scaled, float(bins - 1), d), dt.int64)
    return wrap(P.astype(P.bincount(slots, bins), d), input._device)


# ------------------------------------------------------------------------------------------------
# renorm
@op(
    "renorm",
    doc="Each slice along dim whose p-norm exceeds maxnorm scaled down to norm maxnorm.",
    composite=True,
    inplace=True,
)
def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    if not input.dtype.is_floating_point:
        raise UnsupportedError(f"renorm: expected a floating point tensor, got {input.dtype}")
    if not p > 0:
        raise ValueError(f"renorm: non-positive norm not supported, got p={p}")
    if not maxnorm >= 0:
        raise ValueError(f"renorm: expected maxnorm to be >= 0, got {maxnorm}")
    if input.ndim <= 1:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got shape {fmt_shape(input.shape)}")
    axis = wrap_dim(dim, input.ndim, "renorm")
    others = tuple(d for d in range(input.ndim) if d != axis)
    # PyTorch's factor, with its 1e-7 against a zero norm (maxnorm / x as PyTorch's scalar division:
    # x's reciprocal times maxnorm)
    if needs_grad(input):
        norms = norm(input, p, others, keepdim=True)
        return input * where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0).to(dtype=input.dtype)
    # without a gradient to build: on a CPU tensor the host module's one loop where it takes the array;
    # else the norms and the factor on the backend's arrays (seven ops fewer to dispatch), an infinite p
    # as norm's amax of the magnitudes
    P, d = primitives(input), input.dtype
    if P is _cpu:
        out = host_renorm(_host(input), axis, float(p), float(maxnorm))
        if out is not None:
            return wrap(out, input._device)
    if math.isinf(p):
        n = P.reduce("amax", P.unary("abs", input._data), others, True)
    else:
        n = _pnorm_forward(input, p, others, True)._data
    shrink = P.binary("mul", P.binary("div", 1.0, P.binary("add", n, 1e-7, d), d), maxnorm, d)
    factor = P.where(P.binary("gt", n, maxnorm, d), shrink, 1.0, d)
    return wrap(P.binary("mul", input._data, factor, d), input._device)


# ------------------------------------------------------------------------------------------------
# the trapezoidal rule
def _spacing(name, y, x, dx, d):
    """The widths between neighbouring samples along dim d: from x (1-d, or y's shape) or the
    constant dx (1 by default)."""
    if x is None:
        return 1 if dx is None else dx
    if dx is not None:
        raise DTypeError(f"{name}: takes either x or dx, not both")
    n = y.shape[d]
    if x.ndim == 1:
        if x.shape[0] != n:
            raise ShapeError(f"{name}: x of {x.shape[0]} samples for {n} values of y along dim {d}")
        return x.diff().reshape((n - 1,) + (1,) * (y.ndim - 1 - d))
    return x.diff(dim=d)


@op(
    "trapezoid",
    doc="The integral of y along dim by the trapezoidal rule, at x or spacing dx.",
    composite=True,
    method=False,
    aliases=("trapz",),
)
def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: Number | None = None, dim: int = -1) -> Tensor:
    d = wrap_dim(dim, y.ndim, "trapezoid")
    n = y.shape[d]
    if n == 0:
        return y.sum(d) * 0.0
    spacing = _spacing("trapezoid", y, x, dx, d)
    if x is None and not needs_grad(y) and y.dtype.is_floating_point and isinstance(spacing, (int, float)):
        # the formula below on the backend's arrays (seven ops fewer to dispatch)
        P, a, t = primitives(y), y._data, y.dtype
        ends = P.binary("add", P.slice(a, along(d, 0)), P.slice(a, along(d, n - 1)), t)
        total = P.binary("sub", P.reduce("sum", a, (d,), False), P.binary("mul", ends, 0.5, t), t)
        return wrap(P.binary("mul", total, spacing, t), y._device)
    if x is None:  # PyTorch's form for even spacing: the sum less half the end points
        return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * spacing
    return ((y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * spacing).sum(d) / 2


@op(
    "cumulative_trapezoid",
    doc="The running trapezoidal integral of y along dim, at x or spacing dx.",
    composite=True,
    method=False,
)
def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: Number | None = None, dim: int = -1) -> Tensor:
    d = wrap_dim(dim, y.ndim, "cumulative_trapezoid")
    n = y.shape[d]
    if n <= 1:
        return y.narrow(d, 0, 0) * 0.5
    spacing = _spacing("cumulative_trapezoid", y, x, dx, d)
    if not needs_grad(y) and y.dtype.is_floating_point and isinstance(spacing, (int, float)):
        # the formula below on the backend's arrays (five ops fewer to dispatch)
        P, a, t = primitives(y), y._data, y.dtype
        pairs = P.binary("add", P.slice(a, along(d, slice(1, n))), P.slice(a, along(d, slice(0, n - 1))), t)
        if spacing != 1:  # (a product by 1 changes no value, not even a zero's sign or a NaN)
            pairs = P.binary("mul", pairs, spacing, t)
        return wrap(P.cumsum(P.binary("div", pairs, 2, t), d), y._device)
    return ((y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * spacing / 2).cumsum(d)


def along(axis, key):
    """A basic-index key applying ``key`` to dim ``axis`` only."""
    return (slice(None),) * axis + (key,)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("reduce", onnx=lambda w, node, **params: w.reduce(node, **params), c=lambda lower, node: lower.reduce(node))
lowering("argreduce", onnx=lambda w, node, **params: w.argreduce(node, **params))
lowering("var", onnx=lambda w, node, **params: w.var(node, **params))
lowering("logsumexp", onnx=lambda w, node, **params: w.logsumexp(node, **params))
lowering("cumsum", onnx=lambda w, node, **params: w.cumsum(node, **params))
