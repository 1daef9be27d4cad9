"""Reductions over any set of dims, with ``keepdim``: sum mean prod amax amin max min var std
logsumexp norm argmax argmin all any; and the running sum ``cumsum``."""
import builtins
import math
from collections import namedtuple

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError, fmt_shape
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from ._core import method, needs_grad, record, wrap, wrap_dim

# what max(dim) and min(dim) return: (values, indices), named like PyTorch's return types
max_result = namedtuple("max", ["values", "indices"])
min_result = namedtuple("min", ["values", "indices"])


def reduce_axes(op, ndim, dim):
    """``dim`` (None, int, tuple or list) as a sorted tuple of distinct non-negative axes; an empty
    tuple means every dim, as in PyTorch."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return tuple(range(ndim))
    if ndim == 0:
        for d in dims:
            wrap_dim(d, 0, op)
        return ()
    axes = tuple(sorted(wrap_dim(d, ndim, op) for d in dims))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{op}: dim {dims} contains a dim more than once")
    return axes


def expand_reduced(g, input_shape, axes, keepdim):
    """Bring a reduced gradient back to the input's shape (the inverse of reducing ``axes``)."""
    if not keepdim and axes:
        shape = list(input_shape)
        for ax in axes:
            shape[ax] = 1
        g = g.reshape(tuple(shape))
    return g.expand(tuple(input_shape))


def _check_nonempty(op, input, axes):
    if input.numel() == 0 and (not axes or builtins.any(input.shape[a] == 0 for a in axes)):
        raise ShapeError(f"{op}: cannot reduce an empty tensor of shape {fmt_shape(input.shape)} over "
                         f"dims {axes} (the operation has no identity)")


def sum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    if dtype is not None:
        input = input.to(dtype=dtype)
    axes = reduce_axes("sum", input.ndim, dim)
    out = wrap(input._backend.reduce("sum", input._data, axes, keepdim), input._device)
    if needs_grad(input):
        shape = tuple(input.shape)
        record("SumBackward1" if dim is not None else "SumBackward0", out, (input,),
               lambda node, g: expand_reduced(g, shape, axes, keepdim))
    return out


def mean(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype=dtype)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"mean: could not infer output dtype. Input dtype must be a floating point "
                         f"dtype, got {input.dtype}")
    axes = reduce_axes("mean", input.ndim, dim)
    out = wrap(input._backend.reduce("mean", input._data, axes, keepdim), input._device)
    if needs_grad(input):
        shape = tuple(input.shape)
        count = 1
        for ax in axes:
            count *= shape[ax]
        record("MeanBackward1" if dim is not None else "MeanBackward0", out, (input,),
               lambda node, g: expand_reduced(g / builtins.max(count, 1), shape, axes, keepdim))
    return out


def prod(input, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        input = input.to(dtype=dtype)
    if dim is not None and not isinstance(dim, int):
        raise TypeError("prod: dim must be an int (as in PyTorch)")
    axes = reduce_axes("prod", input.ndim, dim)
    out = wrap(input._backend.reduce("prod", input._data, axes, keepdim), input._device)
    if needs_grad(input):
        shape = tuple(input.shape)

        def backward(node, g):
            x, y = node.saved_tensors
            is_zero = x == 0
            zeros = sum(is_zero.to(dtype=x.dtype), axes, keepdim=True)
            safe_x = _where(is_zero, 1.0, x)
            prod_nonzero = prod_keep(safe_x, axes)
            y_k = expand_reduced(y, shape, axes, keepdim)
            no_zero = _where(zeros == 0, y_k / safe_x, 0.0)
            one_zero = _where(is_zero.logical_and(zeros == 1), prod_nonzero, 0.0)
            return expand_reduced(g, shape, axes, keepdim) * (no_zero + one_zero)
        record("ProdBackward0", out, (input,), backward, saved=(input, out))
    return out


def prod_keep(x, axes):
    r = x
    for ax in axes:
        r = prod(r, ax, keepdim=True)
    return r


def _where(c, a, b):
    from .elementwise import where
    return where(c, a, b)


def _extreme(op, input, dim, keepdim):
    axes = reduce_axes(op, input.ndim, dim)
    _check_nonempty(op, input, axes)
    out = wrap(input._backend.reduce(op, input._data, axes, keepdim), input._device)
    if needs_grad(input):
        shape = tuple(input.shape)

        def backward(node, g):
            x, y = node.saved_tensors
            hit = (x == expand_reduced(y, shape, axes, keepdim)).to(dtype=g.dtype)
            count = sum(hit, axes, keepdim=True)
            return expand_reduced(g, shape, axes, keepdim) * hit / count
        record(op.capitalize() + "Backward0", out, (input,), backward, saved=(input, out))
    return out


def amax(input, dim=(), keepdim=False):
    return _extreme("amax", input, None if dim == () else dim, keepdim)


def amin(input, dim=(), keepdim=False):
    return _extreme("amin", input, None if dim == () else dim, keepdim)


def _max_min(op, input, dim, keepdim, other):
    if isinstance(dim, Tensor):  # max(a, b) is PyTorch's elementwise maximum
        from .elementwise import maximum, minimum
        return (maximum if op == "max" else minimum)(input, dim)
    if dim is None:
        return _extreme("amax" if op == "max" else "amin", input, None, False)
    axis = wrap_dim(dim, input.ndim, op)
    _check_nonempty(op, input, (axis,) if input.ndim else ())
    bk = input._backend
    arg = "argmax" if op == "max" else "argmin"
    result = max_result if op == "max" else min_result
    if input.ndim == 0:
        return result(input.clone(), wrap(bk.full((), 0, dt.int64), input._device))
    indices = wrap(bk.argreduce(arg, input._data, axis, True), input._device)
    from .indexing import gather
    values = gather(input, axis, indices)
    if not keepdim:
        values = values.squeeze(axis)
        indices = indices.squeeze(axis)
    return result(values, indices)


def max(input, dim=None, keepdim=False):  # noqa: A001
    return _max_min("max", input, dim, keepdim, None)


def min(input, dim=None, keepdim=False):  # noqa: A001
    return _max_min("min", input, dim, keepdim, None)


def argmax(input, dim=None, keepdim=False):
    return _argext("argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return _argext("argmin", input, dim, keepdim)


def _argext(op, input, dim, keepdim):
    axis = None if dim is None else (wrap_dim(dim, input.ndim, op) if input.ndim else None)
    _check_nonempty(op, input, (axis,) if axis is not None else ())
    return wrap(input._backend.argreduce(op, input._data, axis, keepdim), input._device)


def _correction(op, unbiased, correction):
    if unbiased is not None and not isinstance(unbiased, bool):
        raise TypeError(f"{op}: unbiased must be a bool")
    if correction is None:
        return 1 if unbiased is None or unbiased else 0
    return correction


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    correction = _correction("var", unbiased, correction)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"var: expected a floating point tensor, got {input.dtype}")
    axes = reduce_axes("var", input.ndim, dim)
    out = wrap(input._backend.var(input._data, axes, correction, keepdim), input._device)
    if needs_grad(input):
        def backward(node, g):
            (x,) = node.saved_tensors
            return _var_grad(x, g, axes, keepdim, correction)
        record("VarBackward0", out, (input,), backward, saved=(input,))
    return out


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    correction = _correction("std", unbiased, correction)
    with no_grad():
        out = _sqrt(var(input, dim, keepdim=keepdim, correction=correction))
    if needs_grad(input):
        axes = reduce_axes("std", input.ndim, dim)

        def backward(node, g):
            # d std = d var / (2 std), and 0 (not NaN) where all values are equal, as in PyTorch
            from .elementwise import where
            x, y = node.saved_tensors
            zero = y == 0
            return _var_grad(x, where(zero, 0.0, g / (2 * where(zero, 1.0, y))), axes, keepdim, correction)
        out = wrap(out._data, out._device)
        record("StdBackward0", out, (input,), backward, saved=(input, out))
    return out


def _var_grad(x, g, axes, keepdim, correction):
    """The gradient of ``var`` over ``axes`` given the gradient ``g`` of its result."""
    shape = tuple(x.shape)
    count = 1
    for ax in axes:
        count *= shape[ax]
    dof = builtins.max(count - correction, 0)
    scale = 2.0 / dof if dof else math.inf  # as the forward divides by 0: inf, or NaN where centered is 0
    centered = x - mean(x, axes, keepdim=True)
    return expand_reduced(g, shape, axes, keepdim) * centered * scale


def logsumexp(input, dim, keepdim=False):
    axes = reduce_axes("logsumexp", input.ndim, dim)
    if not input.dtype.is_floating_point:
        input = input.to(dtype=dt.default_float)
    out = wrap(input._backend.logsumexp(input._data, axes, keepdim), input._device)
    if needs_grad(input):
        shape = tuple(input.shape)

        def backward(node, g):
            from .elementwise import exp
            x, y = node.saved_tensors
            return expand_reduced(g, shape, axes, keepdim) * exp(x - expand_reduced(y, shape, axes, keepdim))
        record("LogsumexpBackward0", out, (input,), backward, saved=(input, out))
    return out


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """The vector p-norm over ``dim`` (all elements by default); ``"fro"`` is the 2-norm."""
    from .elementwise import abs as _abs
    if dtype is not None:
        input = input.to(dtype=dtype)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"norm: expected a floating point tensor, got {input.dtype}")
    if p == "fro":
        p = 2
    if isinstance(p, str) or not isinstance(p, (int, float)):
        raise ValueError(f"norm: p must be a number or 'fro', got {p!r}")
    if p == float("inf"):
        return amax(_abs(input), () if dim is None else dim, keepdim)
    if p == -float("inf"):
        return amin(_abs(input), () if dim is None else dim, keepdim)
    axes = reduce_axes("norm", input.ndim, dim)
    with no_grad():
        if p == 0:
            return sum(input != 0, dim, keepdim).to(dtype=input.dtype)
        if p == 1:
            out = sum(_abs(input), dim, keepdim)
        elif p == 2:
            out = _sqrt(sum(input * input, dim, keepdim))
        else:
            out = sum(_abs(input) ** p, dim, keepdim) ** (1.0 / p)
    if needs_grad(input):
        shape = tuple(input.shape)

        def backward(node, g):
            from .elementwise import sign, where
            x, y = node.saved_tensors
            if p == 1:
                return expand_reduced(g, shape, axes, keepdim) * sign(x)
            # d||x||_p = x |x|^(p-2) / ||x||^(p-1), and 0 (not NaN) where the norm is 0
            yk = expand_reduced(y, shape, axes, keepdim)
            safe = where(yk == 0, 1.0, yk)
            scale = x / safe if p == 2 else x * _abs(x) ** (p - 2) / safe ** (p - 1)
            return expand_reduced(g, shape, axes, keepdim) * where(yk == 0, 0.0, scale)
        out = wrap(out._data, out._device)
        record("NormBackward1", out, (input,), backward, saved=(input, out))
    return out


def _sqrt(x):
    from .elementwise import sqrt
    return sqrt(x)


def cumsum(input, dim, *, dtype=None):
    """Running sum along ``dim``; int and bool inputs give int64, as in PyTorch."""
    if dtype is not None:
        input = input.to(dtype=dtype)
    if input.ndim == 0:
        wrap_dim(dim, 0, "cumsum")
        return cumsum(input.reshape(1), 0).reshape(())
    axis = wrap_dim(dim, input.ndim, "cumsum")
    out = wrap(input._backend.cumsum(input._data, axis), input._device)
    if needs_grad(input):
        # each input element reaches every later output: the gradient is a reversed running sum
        record("CumsumBackward0", out, (input,), lambda node, g: cumsum(g.flip(axis), axis).flip(axis))
    return out


def all(input, dim=None, keepdim=False):  # noqa: A001
    axes = reduce_axes("all", input.ndim, dim)
    return wrap(input._backend.reduce("all", input._data, axes, keepdim), input._device)


def any(input, dim=None, keepdim=False):  # noqa: A001
    axes = reduce_axes("any", input.ndim, dim)
    return wrap(input._backend.reduce("any", input._data, axes, keepdim), input._device)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def count_nonzero(input, dim=None):
    return sum(input != 0, dim)


for _name in ("sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std",
              "logsumexp", "norm", "all", "any", "cumsum", "var_mean", "std_mean", "count_nonzero"):
    method(_name)(globals()[_name])
