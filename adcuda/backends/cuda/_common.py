"""What the CUDA backend's family modules share: dtype checks and the layout fixes the kernels need,
over ``adcuda._C.DeviceArray``."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, NoReturn, TypeAlias

from ... import _native
from ...errors import DTypeError, IndexOutOfRangeError, UnsupportedDTypeError, fmt_shape
from ..seam import CUDAArray, Scalar

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # (typing's own from Python 3.13)

# The seam's names for the arrays a primitive takes and returns, bound to this backend's array
# (adcuda._C.DeviceArray): the CUDA primitives are annotated with these, so their signatures read as the
# CPU backend's do
BackendArray: TypeAlias = CUDAArray
ArrayOrScalar: TypeAlias = BackendArray | Scalar
Arrays: TypeAlias = Sequence[BackendArray]
IndexKey: TypeAlias = tuple[int | bool | slice | None | EllipsisType | BackendArray, ...]

_FLOATING = frozenset({"float16", "bfloat16", "float32", "float64"})


def is_device_array(x: object) -> TypeIs[BackendArray]:
    return isinstance(x, _native._C.DeviceArray)


def is_floating(a):
    return a.dtype.name in _FLOATING


def dense(a):
    """``a`` itself when contiguous, else a contiguous copy."""
    return a if a.is_contiguous() else _native._C.contiguous(a)


def cast(a, scalar_type):
    """``a`` in ``scalar_type`` (an ``adcuda._C.ScalarType``): itself when it already is."""
    return a if a.dtype == scalar_type else _native._C.astype(a, scalar_type)


def scalar_type(name):
    return getattr(_native._C.ScalarType, name)


def require_floating(op, name, a):
    if not is_floating(a):
        raise DTypeError(f"{op}: expected {name} to be a floating point array, got {a.dtype.name}")


def statistics_type(a):
    """The dtype of saved statistics (mean, rstd, logsumexp rows): float64 for float64, else float32."""
    return scalar_type("float64" if a.dtype.name == "float64" else "float32")


def rows_dense(a):
    """``a`` itself when its last dim is contiguous (the kernels take any other strides), else a
    contiguous copy."""
    if a.ndim == 0 or a.shape[-1] <= 1 or a.element_strides[-1] == 1:
        return a
    return _native._C.contiguous(a)


def broadcast_shape(*shapes):
    """NumPy's broadcast of ``shapes``, or None where they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        size = 1
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if size not in (1, s[k]):
                return None
            size = s[k]
        out.append(size)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# the seam's argument conventions (NumPy's, which the CPU backend inherits), turned into what the
# kernels take: non-negative dims, tuple shapes
def shape_tuple(shape):
    """A shape as a tuple of ints: a tuple, a list or one int (NumPy's convention)."""
    if shape.__class__ is tuple:
        return shape
    try:
        return (operator.index(shape),)
    except TypeError:
        return tuple(shape)


def axis_index(op, axis, shape):
    """``axis`` (negative counts from the end) as a dim of an array of ``shape``; IndexOutOfRangeError
    naming ``op`` where there is no such dim. A 0-d array has one element: axis 0 or -1 names it (as
    in NumPy's argmax and cumsum, and PyTorch), and 0 is returned."""
    n = max(len(shape), 1)
    if not -n <= axis < n:
        raise IndexOutOfRangeError(f"{op}: axis {axis} is out of range for an array of shape {fmt_shape(shape)}")
    return axis + n if axis < 0 else axis


def axes_list(op, axes, shape):
    """``axes`` (a tuple or list of ints, or None for every dim; negative ones counted from the end) as
    the list of dims the kernels take. A 0-d array has no dim to reduce over: its axes are ()."""
    ndim = len(shape)
    if axes is None:
        return list(range(ndim))
    if isinstance(axes, int):
        axes = (axes,)
    dims = []
    for axis in axes:
        if not -ndim <= axis < ndim:
            raise IndexOutOfRangeError(f"{op}: axis {axis} is out of range for an array of shape {fmt_shape(shape)}")
        dims.append(axis + ndim if axis < 0 else axis)
    return dims


def raise_dtype_error(error: ValueError) -> NoReturn:
    """Re-raise the kernels' ValueError (std::invalid_argument) for a dtype an op is not defined for
    ("<op>: not defined for dtype ...", "sub: subtraction of bool arrays ...") as the error the CPU
    backend raises for it; any other error as it is."""
    message = str(error)
    if " not defined for dtype " in message:
        raise UnsupportedDTypeError(message) from None
    if "subtraction of bool" in message:
        raise DTypeError(message) from None
    raise error
