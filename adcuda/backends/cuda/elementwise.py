"""The CUDA backend's elementwise primitives (kernels/elementwise_unary.cu and elementwise_binary.cu):
``unary binary unary_backward where clamp``, with the CPU backend's signatures, dtype rules and errors.

The kernels take the operands as they are (any strides, broadcast without copies, Python scalars as
kernel arguments); what needs the data before launching (integer division by zero, integers to
negative powers) is checked here, with one small device-to-host copy, as the CPU backend raises for
it too. A dtype an op is not defined for raises DTypeError, and a Python integer that does not fit
an integer dtype OverflowError, as on the CPU.
"""

from __future__ import annotations

import numpy as np

from ... import _native
from ... import dtypes as dt
from ...errors import DTypeError, InvalidArgumentError
from ..elementwise_table import BITWISE, FLOAT_ONLY, NOT_FOR_BOOL, UNARY_BY_NAME
from ..seam import DType, Scalar, declared
from . import _common as _k
from ._common import ArrayOrScalar, BackendArray
from .storage import dtype_of, to_numpy

__all__ = ["unary", "binary", "unary_backward", "where", "clamp"]

_INTEGER_DIVISION = frozenset({"floor_divide", "remainder", "fmod"})


def _C():
    return _native._C


def _is_array(x):
    return x.__class__ is _native._C.DeviceArray


def _python_scalar(x):
    """NumPy scalars act as Python ones (the kernels take bool, int or float)."""
    return x.item() if hasattr(x, "item") and not _is_array(x) else x


def _operand(op, x, dtype):
    """A binary or ``where`` operand: an array as it is, a scalar as the Python scalar the kernel takes;
    OverflowError for an integer outside an integer ``dtype`` (NumPy's check, which the CPU inherits)."""
    if _is_array(x):
        return x
    x = _python_scalar(x)
    if x.__class__ is int and dtype.category == dt.INTEGER:
        info = np.iinfo(dtype.numpy)
        if not info.min <= x <= info.max:
            raise OverflowError(f"{op}: Python integer {x} out of bounds for {dtype.name}")
    return x


def _any(flags):
    """Whether any element of a bool device array is true (one 1-byte copy back)."""
    C = _C()
    return bool(to_numpy(C.reduce("any", flags, list(range(flags.ndim)), False)))


def unary(op: str, a: BackendArray) -> BackendArray:
    declared.unary(op, a)
    kind = a.dtype.name
    if op in FLOAT_ONLY and not _k.is_floating(a):
        # the CPU backend computes these in float64 and casts back to the integer dtype
        C = _C()
        return C.astype(C.unary(op, C.astype(a, _k.scalar_type("float64"))), a.dtype)
    if kind == "bool" and op in NOT_FOR_BOOL:
        raise DTypeError(f"{op}: not defined for bool arrays")
    if _k.is_floating(a) and op in UNARY_BY_NAME and UNARY_BY_NAME[op].kind == BITWISE:
        raise DTypeError(f"{op}: not defined for {kind} arrays (bool and integer only)")
    try:
        return _C().unary(op, a)
    except ValueError as error:
        _k.raise_dtype_error(error)


def binary(op: str, a: ArrayOrScalar, b: ArrayOrScalar, dtype: DType) -> BackendArray:
    """``op(a, b)`` with both operands taken in ``dtype``; ``a`` or ``b`` may be a Python scalar."""
    C = _C()
    a, b = _operand(op, a, dtype), _operand(op, b, dtype)
    st = _k.scalar_type(dtype.name)
    if dtype.category != dt.FLOATING:  # integer or bool: the CPU backend's data-dependent errors
        if op == "pow" and dtype.category == dt.INTEGER and _negative(b):
            raise InvalidArgumentError("pow: integers to negative integer powers are not allowed")
        if op in _INTEGER_DIVISION and _has_zero(b):
            raise ZeroDivisionError(f"{op}: integer division by zero")
    try:
        return C.binary(op, a, b, st)
    except ValueError as error:
        _k.raise_dtype_error(error)


def _negative(b):
    if _is_array(b):
        return b.size > 0 and _any(_C().binary("lt", b, 0, b.dtype))
    return b < 0


def _has_zero(b):
    if _is_array(b):
        return b.size > 0 and _any(_C().binary("eq", b, 0, b.dtype))
    return not b


def unary_backward(op: str, x: BackendArray | None, y: BackendArray | None, g: BackendArray) -> BackendArray:
    """The kernel takes the saved array in g's dtype; one wider than g (float32 beside a float16
    gradient) would lose precision there, so the gradient is widened instead and the result narrowed,
    as the CPU backend computes it."""
    declared.unary_backward(op, x, y, g)
    C = _C()
    for saved in (x, y):
        if saved is not None and _WIDTH.get(saved.dtype.name, 0) > _WIDTH.get(g.dtype.name, 0):
            return C.astype(C.unary_backward(op, x, y, C.astype(g, saved.dtype)), g.dtype)
    return C.unary_backward(op, x, y, g)


_WIDTH = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def where(cond: BackendArray, a: ArrayOrScalar, b: ArrayOrScalar, dtype: DType) -> BackendArray:
    a, b = _python_scalar(a), _python_scalar(b)
    declared.where(cond, a, b, dtype)
    return _C().where(cond, a, b, _k.scalar_type(dtype.name))


def clamp(a: BackendArray, lo: Scalar | None, hi: Scalar | None) -> BackendArray:
    declared.clamp(a, lo, hi)
    dtype = dtype_of(a)
    lo, hi = _bound(lo, dtype), _bound(hi, dtype)
    if a.dtype.name == "bool":
        # the kernel has no bool clamp; for bools it is a maximum and a minimum (rare: two launches)
        C, st = _C(), a.dtype
        out = a if lo is None else C.binary("maximum", a, bool(lo), st)
        out = out if hi is None else C.binary("minimum", out, bool(hi), st)
        return C.astype(out, st) if out is a else out
    return _C().clamp(a, lo, hi)


def _bound(value, dtype):
    """A clamp bound: None (open) or a scalar (seam.declared.clamp has turned arrays away)."""
    if value is None:
        return None
    return _operand("clamp", value, dtype)
