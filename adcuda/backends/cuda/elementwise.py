"""The CUDA backend's elementwise primitives (kernels/elementwise_unary.cu and elementwise_binary.cu):
``unary binary unary_backward where clamp``, with the CPU backend's signatures, dtype rules and errors.

The kernels take the operands as they are (any strides, broadcast without copies, Python scalars as
kernel arguments); what needs the data before launching (integer division by zero, integers to
negative powers) is checked here, with one small device-to-host copy, as the CPU backend raises for
it too.
"""
from ... import _native
from ... import dtypes as dt
from ...errors import DTypeError
from . import _common as _k
from .storage import to_numpy

__all__ = ["unary", "binary", "unary_backward", "where", "clamp"]

_FLOAT_ONLY = frozenset({"exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "gelu", "gelu_tanh",
                         "silu", "erf", "exp2", "log2", "log10"})
_NOT_FOR_BOOL = frozenset({"neg", "sign"})
_INTEGER_DIVISION = frozenset({"floor_divide", "remainder"})


def _C():
    return _native._C


def _is_array(x):
    return x.__class__ is _native._C.DeviceArray


def _python_scalar(x):
    """NumPy scalars act as Python ones (the kernels take bool, int or float)."""
    return x.item() if hasattr(x, "item") and not _is_array(x) else x


def _any(flags):
    """Whether any element of a bool device array is true (one 1-byte copy back)."""
    C = _C()
    return bool(to_numpy(C.reduce("any", flags, list(range(flags.ndim)), False)))


def unary(op, a):
    kind = a.dtype.name
    if op in _FLOAT_ONLY and not _k.is_floating(a):
        # the CPU backend computes these in float64 and casts back to the integer dtype
        C = _C()
        return C.astype(C.unary(op, C.astype(a, _k.scalar_type("float64"))), a.dtype)
    if kind == "bool" and op in _NOT_FOR_BOOL:
        raise DTypeError(f"{op}: not defined for bool arrays")
    if op == "bitwise_not" and _k.is_floating(a):
        raise DTypeError(f"bitwise_not: not defined for {kind} arrays (bool and integer only)")
    return _C().unary(op, a)


def binary(op, a, b, dtype):
    """``op(a, b)`` with both operands taken in ``dtype``; ``a`` or ``b`` may be a Python scalar."""
    C = _C()
    a, b = _python_scalar(a), _python_scalar(b)
    st = _k.scalar_type(dtype.name)
    if dtype.category != dt.FLOATING:  # integer or bool: the CPU backend's data-dependent errors
        if op == "pow" and dtype.category == dt.INTEGER and _negative(b):
            raise DTypeError("pow: integers to negative integer powers are not allowed")
        if op in _INTEGER_DIVISION and _has_zero(b):
            raise ZeroDivisionError(f"{op}: integer division by zero")
    return C.binary(op, a, b, st)


def _negative(b):
    if _is_array(b):
        return b.size > 0 and _any(_C().binary("lt", b, 0, b.dtype))
    return b < 0


def _has_zero(b):
    if _is_array(b):
        return b.size > 0 and _any(_C().binary("eq", b, 0, b.dtype))
    return not b


def unary_backward(op, x, y, g):
    return _C().unary_backward(op, x, y, g)


def where(cond, a, b, dtype):
    return _C().where(cond, _python_scalar(a), _python_scalar(b), _k.scalar_type(dtype.name))


def clamp(a, lo, hi):
    return _C().clamp(a, _python_scalar(lo), _python_scalar(hi))
