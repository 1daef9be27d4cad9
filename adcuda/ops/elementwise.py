"""Elementwise ops with broadcasting: arithmetic, math functions, activations, comparisons.

Each forward calls the ``unary``/``binary`` (or ``where``/``clamp``) primitive of the backend's
elementwise family (``adcuda/backends/cpu`` and ``cuda``, ``kernels/elementwise_unary.cu`` and
``elementwise_binary.cu`` with their functors in ``kernels/functors.cuh``); fused backward formulas
call ``unary_backward``.
"""

from __future__ import annotations

import builtins
import functools
import math
import typing
from typing import TYPE_CHECKING, overload

from .. import dtypes as dt
from ..autograd.graph import needs_grad
from ..errors import AdcudaError, DTypeError, ShapeError, UnsupportedDTypeError, adapt_error, fmt_shape
from ..tensor import Tensor, primitives
from .common import (
    as_tensor_operand,
    cast,
    check_float,
    check_same_device,
    check_tensor,
    dense,
    filled,
    float_result_type,
    result_type,
    scalar_for,
    wrap,
)
from .dtype_support import FLOATING, NUMBERS
from .registry import ReplayKeep, lowering, op

if TYPE_CHECKING:
    from ..types import Number

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# ------------------------------------------------------------------------------------------------
# forward helpers
def _operand(x, name, like):
    """A binary op's operand as a Tensor or a Python scalar: NumPy scalars act like Python ones and
    NumPy arrays like tensors (as in PyTorch)."""
    if x.__class__ is Tensor or isinstance(x, (bool, int, float)):
        return x
    if getattr(x, "shape", None) == () and hasattr(x, "item"):  # a NumPy scalar
        return _operand(x.item(), name, like)
    if hasattr(x, "__array__"):
        return as_tensor_operand(x, name, like)
    raise DTypeError(f"{name}: unsupported operand of type {type(x).__name__}")


def binary(prim, a, b, dtype=None, name=None):
    """``prim`` (a name in the backend's BINARY_OPS) of tensors and/or scalars, broadcast, in
    ``dtype`` (PyTorch's promotion of the operands by default)."""
    if a.__class__ is Tensor and (dtype is None or dtype is a.dtype):
        # fast path: two tensors of one dtype on one device, or a tensor and a float scalar (in that
        # dtype, the result's: the dtype asked for, if any, is theirs)
        ad = a._data
        if b.__class__ is Tensor:
            bd = b._data
            # (one dtype object is the common case: an identity test first, 0.1 us less than ==)
            if a._device is b._device and (bd.dtype is ad.dtype or bd.dtype == ad.dtype):
                try:
                    return Tensor._make(primitives(a).binary(prim, ad, bd, a.dtype), a._device)
                except ValueError:
                    pass  # the general path below raises the proper error
        elif b.__class__ is float:
            d = a.dtype
            if d.is_floating_point:
                return Tensor._make(primitives(a).binary(prim, ad, b, d), a._device)
    name = name or prim
    if a.__class__ is not Tensor and b.__class__ is not Tensor:
        raise DTypeError(f"{name}: expected at least one Tensor operand")
    t = a if a.__class__ is Tensor else b
    a, b = _operand(a, name, t), _operand(b, name, t)
    dev = check_same_device(name, a, b)
    if dtype is None:
        dtype = result_type(a, b)
    ad = a._data if a.__class__ is Tensor else a
    bd = b._data if b.__class__ is Tensor else b
    try:
        data = primitives(t).binary(prim, ad, bd, dtype)
    except AdcudaError:  # the backend's own refusal (integers to negative powers) says it best
        raise
    except ValueError as e:
        if a.__class__ is Tensor and b.__class__ is Tensor:
            raise ShapeError(
                f"{name}: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot be broadcast"
            ) from None
        raise ValueError(f"{name}: {e}") from None
    return Tensor._make(data, dev)


def unary(prim, x, name=None):
    """``prim`` (a name in the backend's UNARY_OPS) of tensor ``x``, in ``x``'s dtype."""
    if x.__class__ is not Tensor:
        raise DTypeError(f"{name or prim}: expected a Tensor, got {type(x).__name__}")
    return wrap(primitives(x).unary(prim, x._data), x._device)


def select(condition, a, b):
    """``where`` for forwards: a bool tensor chooses between tensors or scalars, in their promoted
    dtype, recording nothing."""
    ad = a._data if a.__class__ is Tensor else a
    bd = b._data if b.__class__ is Tensor else b
    return Tensor._make(primitives(condition).where(condition._data, ad, bd, result_type(a, b)), condition._device)


def _float_unary(prim, x):
    """A unary op defined on floating point values: integer and bool tensors become float32 first."""
    if x.__class__ is not Tensor:
        raise DTypeError(f"{prim}: expected a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        x = cast(x, dt.default_float)
    return Tensor._make(primitives(x).unary(prim, x._data), x._device)


def fused_unary_backward(prim, grad, x=None, y=None):
    """The backend's fused gradient of unary op ``prim`` from its input ``x`` and/or output ``y``."""
    return Tensor._make(
        primitives(grad).unary_backward(
            prim, None if x is None else x._data, None if y is None else y._data, grad._data
        ),
        grad._device,
    )


def _zeros_like(t):
    return filled(t._data.shape, 0, t.dtype, t._device)


def _is_bool(x):
    return x.dtype is dt.bool_ if x.__class__ is Tensor else x.__class__ is bool


def _alpha_sum(name, prim, input, other, alpha):
    """add/sub with ``alpha``: ``alpha * other`` in the operands' promoted dtype (alpha takes no part
    in the promotion, as in PyTorch, which rejects a float alpha for an integer result and a bool
    alpha for a non-bool one)."""
    if alpha.__class__ is not bool and not isinstance(alpha, (int, float)):
        raise DTypeError(f"{name}: alpha must be a Python number, got {type(alpha).__name__}")
    if input.__class__ is not Tensor and other.__class__ is not Tensor:
        raise DTypeError(f"{name}: expected at least one Tensor operand")
    like = input if input.__class__ is Tensor else other
    dtype = result_type(_operand(input, name, like), _operand(other, name, like))
    if isinstance(alpha, float) and not dtype.is_floating_point:
        raise UnsupportedDTypeError(
            f"{name}: for integral input tensors ({dtype}), alpha must not be a floating point number"
        )
    if alpha.__class__ is bool and dtype is not dt.bool_:
        raise UnsupportedDTypeError(f"{name}: a boolean alpha is only supported for boolean results, got {dtype}")
    scaled = binary("mul", other, alpha, dtype=dtype, name=name) if other.__class__ is Tensor else other * alpha
    return binary(prim, input, scaled, dtype=dtype, name=name)


# ------------------------------------------------------------------------------------------------
# arithmetic
@op(
    "add",
    plain="binary",
    doc="input + alpha * other, elementwise with broadcasting and PyTorch's type promotion.",
    node="AddBackward0",
    inplace=True,
    operators=("__add__", "__radd__", "__iadd__"),
    grads={"input": lambda grad: grad, "other": lambda grad, alpha: grad if alpha == 1 else grad * alpha},
)
def add(input: Tensor | Number, other: Tensor | Number, *, alpha: Number = 1) -> Tensor:
    if alpha.__class__ is not int or alpha != 1:
        return _alpha_sum("add", "add", input, other, alpha)
    return binary("add", input, other, name="add")


lowering("binary", "add", onnx="Add", c="{a} + {b}")


@op(
    "sub",
    plain="binary",
    doc="input - alpha * other, elementwise with broadcasting.",
    node="SubBackward0",
    inplace=True,
    operators=("__sub__", "__rsub__", "__isub__"),
    aliases=("subtract",),
    grads={"input": lambda grad: grad, "other": lambda grad, alpha: -grad if alpha == 1 else grad * -alpha},
)
def sub(input: Tensor | Number, other: Tensor | Number, *, alpha: Number = 1) -> Tensor:
    if (
        alpha.__class__ is int
        and alpha == 1
        and input.__class__ is Tensor
        and (other.__class__ is float or other.__class__ is Tensor and other._data.dtype == input._data.dtype)
        and input.dtype.is_floating_point
    ):
        return binary("sub", input, other, name="sub")  # the common call: floating, no bool to refuse
    if _is_bool(input) and _is_bool(other):
        raise UnsupportedDTypeError(
            "sub: subtraction, the `-` operator, with two bool tensors is not supported; "
            "use the `^` operator or logical_xor() instead"
        )
    if _is_bool(input) or _is_bool(other):
        raise UnsupportedDTypeError(
            "sub: subtraction, the `-` operator, with a bool tensor is not supported; "
            "to invert a mask use the `~` operator or logical_not() instead"
        )
    if alpha.__class__ is not int or alpha != 1:
        return _alpha_sum("sub", "sub", input, other, alpha)
    return binary("sub", input, other, name="sub")


lowering("binary", "sub", onnx="Sub", c="{a} - {b}")


@op(
    "mul",
    plain="binary",
    doc="input * other, elementwise with broadcasting and PyTorch's type promotion.",
    node="MulBackward0",
    inplace=True,
    operators=("__mul__", "__rmul__", "__imul__"),
    aliases=("multiply",),
    grads={"input": lambda grad, other: grad * other, "other": lambda grad, input: grad * input},
)
def mul(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("mul", input, other, name="mul")


lowering("binary", "mul", onnx="Mul", c="{a} * {b}")


def _div_node(input, other, *, rounding_mode=None):
    return "DivBackward0" if rounding_mode is None else "DivBackward2"


def _rtruediv(self: Tensor, other: Number) -> Tensor:
    """``other / self`` as PyTorch's Tensor.__rtruediv__ computes it: self's reciprocal, in self's
    dtype (a float16 reciprocal rounds, or overflows, in float16), times other."""
    try:
        return mul(reciprocal(self), other)
    except AdcudaError as error:  # named as the division the user wrote: "div: mul: shapes ..."
        raise adapt_error("div", error, ()) from None


@op(
    "div",
    plain="binary",
    doc="input / other (true division; rounding_mode 'trunc' or 'floor' rounds the quotient).",
    node=_div_node,
    inplace=True,
    operators=("__truediv__", ("__rtruediv__", _rtruediv), "__itruediv__"),
    aliases=("divide", "true_divide"),
    grads={
        "input": lambda grad, other, rounding_mode: grad / other if rounding_mode is None else _zeros_like(grad),
        "other": lambda grad, input, other, rounding_mode: (
            -grad * input / (other * other) if rounding_mode is None else _zeros_like(grad)
        ),
    },
)
def div(input: Tensor | Number, other: Tensor | Number, *, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode is None:
        if input.__class__ is Tensor and input.dtype.is_floating_point:  # (its dtype, if other's is too)
            return binary("div", input, other, name="div")
        return binary("div", input, other, dtype=float_result_type(input, other), name="div")
    if rounding_mode is not None and _is_bool(input) and _is_bool(other):
        raise UnsupportedDTypeError(f"div: rounding_mode={rounding_mode!r} is not defined for bool operands")
    if rounding_mode == "floor":
        return binary("floor_divide", input, other, name="div")
    if rounding_mode == "trunc":
        q = binary("div", input, other, dtype=float_result_type(input, other), name="div")
        return cast(unary("trunc", q), result_type(input, other))
    raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


lowering("binary", "div", onnx="Div", c="{a} / {b}")


@op(
    "floor_divide",
    plain="binary",
    inplace=True,
    doc="input // other: the quotient rounded towards minus infinity.",
    composite=True,
    operators=("__floordiv__", "__rfloordiv__"),
)
def floor_divide(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return div(input, other, rounding_mode="floor")


lowering(
    "binary",
    "floor_divide",
    onnx=lambda w, a, b, dtype, out: w.floor_division(w.operand(a, dtype), w.operand(b, dtype), dtype, out, False),
)


@op(
    "remainder",
    plain="binary",
    inplace=True,
    doc="Python's modulo: the remainder with the divisor's sign.",
    operators=("__mod__", "__rmod__", "__imod__"),
    node="RemainderBackward0",
    grads={
        "input": lambda grad: grad,
        "other": lambda grad, input, other: -grad * div(input, other, rounding_mode="floor"),
    },
)
def remainder(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("remainder", input, other, name="remainder")


lowering(
    "binary",
    "remainder",
    onnx=lambda w, a, b, dtype, out: w.floor_division(w.operand(a, dtype), w.operand(b, dtype), dtype, out, True),
)


def _pow_grad_input(grad, input, exponent):
    # PyTorch's order of operations, grad * (b * a ** (b - 1)), so that a ** 3 trains bit for bit alike
    if exponent.__class__ is not Tensor:
        return _zeros_like(grad) if exponent == 0 else grad * (exponent * input ** (exponent - 1))
    # d/da a**b is 0 where b == 0, even at a == 0 (not 0 * inf): PyTorch's pow_backward_self, whose
    # where() also gives its second order (NaN where the branch left out has 0 ** -1)
    return where(eq(exponent, 0), 0.0, grad * (exponent * input ** (exponent - 1)))


def _pow_grad_exponent(grad, input, exponent, result):
    if input.__class__ is Tensor:
        # 0 ** b for b >= 0 does not change with b; elsewhere y * log(a) (NaN for a < 0): PyTorch's
        # pow_backward_exponent, its second order included
        flat = logical_and(eq(input, 0), ge(exponent, 0))
        return grad * where(flat, 0.0, result * log(input))
    log_a = math.log(input) if input > 0 else 0.0 if input == 0 else math.nan
    return grad * result * log_a


@op(
    "pow",
    plain="scalars",
    doc="input ** exponent, elementwise with broadcasting.",
    node="PowBackward0",
    inplace=True,
    operators=("__pow__", "__rpow__"),
    grads={"input": _pow_grad_input, "exponent": _pow_grad_exponent},
)
def pow(input: Tensor | Number, exponent: Tensor | Number) -> Tensor:  # noqa: A001 (PyTorch's name)
    if input.__class__ is Tensor and exponent.__class__ in (int, float):
        shortcut = _pow_by_scalar(input, exponent)
        if shortcut is not None:
            return shortcut
    return binary("pow", input, exponent, name="pow")


lowering("binary", "pow", onnx="Pow", c="powf({a}, {b})")


def _pow_by_scalar(input, exponent):
    """PyTorch's shortcuts for a floating tensor to the power of a Python number, rounded as PyTorch
    rounds them (x ** 3 is x * x * x, not the library pow, one ulp apart often enough to make a
    training run drift): 0 and 1 are a fill and a copy, 2 and 3 products, -1 and -2 quotients,
    +-0.5 square roots (not for the half types, which PyTorch takes through pow). Half types compute
    in float32 and round once. None where pow itself applies."""
    dtype = result_type(input, exponent)
    if not dtype.is_floating_point:
        return None
    half = dtype.itemsize == 2
    if exponent not in (0, 1, 2, 3, -1, -2) and (half or exponent not in (0.5, -0.5)):
        return None
    bk = primitives(input)
    if exponent == 0:
        return wrap(bk.full(tuple(input.shape), 1, dtype), input._device)
    work = dt.float32 if half else dtype
    x = bk.astype(input._data, work)
    if exponent == 1:
        y = x
    elif exponent == 0.5:
        y = bk.unary("sqrt", x)
    elif exponent == -0.5:
        y = bk.unary("rsqrt", x)
    else:
        y = bk.binary("mul", x, x, work) if exponent in (2, -2) else x
        if exponent == 3:
            y = bk.binary("mul", bk.binary("mul", x, x, work), x, work)
        if exponent < 0:
            y = bk.binary("div", 1.0, y, work)
    return wrap(y if work is dtype else bk.astype(y, dtype), input._device)


@op(
    "neg",
    plain="unary",
    dtypes=NUMBERS.with_message(
        "{op}: negation, the `-` operator, on a bool tensor is not supported; "
        "use the `~` operator or logical_not() instead"
    ),
    doc="-input.",
    node="NegBackward0",
    inplace=True,
    operators=("__neg__",),
    aliases=("negative",),
    grads={"input": lambda grad: -grad},
)
def neg(input: Tensor) -> Tensor:
    return unary("neg", input)


lowering("unary", "neg", onnx="Neg", c="-v")


@op(
    "positive",
    dtypes=NUMBERS.with_message("{op}: the `+` operator, on a bool tensor is not supported"),
    doc="+input: the input itself.",
    composite=True,
    operators=("__pos__",),
)
def positive(input: Tensor) -> Tensor:
    check_tensor("positive", "input", input)  # returning anything else unchanged would hide the mistake
    return input


def _minmax_forward(prim, input, other):
    if other.__class__ is not Tensor:
        raise DTypeError(f"{prim}: expected other to be a Tensor, got {type(other).__name__}")
    return binary(prim, input, other, name=prim)


def _minmax_grads(wins):
    def input_grad(grad, input, other):
        a_wins = wins(input, other).to(dtype=grad.dtype)
        tie = eq(input, other).to(dtype=grad.dtype) * 0.5
        return grad * (a_wins + tie)

    def other_grad(grad, input, other):
        a_wins = wins(input, other).to(dtype=grad.dtype)
        tie = eq(input, other).to(dtype=grad.dtype) * 0.5
        return grad * (1.0 - a_wins - tie)

    return {"input": input_grad, "other": other_grad}


@op(
    "maximum",
    plain="binary_tensors",
    doc="The larger of input and other, elementwise (NaN propagates).",
    node="MaximumBackward0",
    grads=_minmax_grads(lambda a, b: gt(a, b)),
)
def maximum(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return _minmax_forward("maximum", input, other)


# C: maximum and minimum pass a NaN on, as NumPy's
lowering("binary", "maximum", onnx="Max", c="(({a} != {a} || {a} > {b}) ? {a} : {b})")


@op(
    "minimum",
    plain="binary_tensors",
    doc="The smaller of input and other, elementwise (NaN propagates).",
    node="MinimumBackward0",
    grads=_minmax_grads(lambda a, b: lt(a, b)),
)
def minimum(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return _minmax_forward("minimum", input, other)


lowering("binary", "minimum", onnx="Min", c="(({a} != {a} || {a} < {b}) ? {a} : {b})")


@op(
    "logaddexp",
    plain="binary",
    doc="log(exp(input) + exp(other)), without overflow.",
    node="LogaddexpBackward0",
    grads={
        "input": lambda grad, input, other: grad * sigmoid(input - other),
        "other": lambda grad, input, other: grad * sigmoid(other - input),
    },
)
def logaddexp(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("logaddexp", input, other, dtype=_floating_only("logaddexp", input, other), name="logaddexp")


def _onnx_logaddexp(w, a, b, dtype, out):
    x, y = w.operand(a, dtype), w.operand(b, dtype)
    m = w.emit("Max", [x, y])
    total = w.emit("Add", [w.emit("Exp", [w.emit("Sub", [x, m])]), w.emit("Exp", [w.emit("Sub", [y, m])])])
    w.emit("Add", [m, w.emit("Log", [total])], [out])


lowering("binary", "logaddexp", onnx=_onnx_logaddexp)


@op(
    "hypot",
    plain="binary",
    inplace=True,
    doc="sqrt(input**2 + other**2), without overflow or underflow of the squares.",
    node="HypotBackward0",
    grads={
        "input": lambda grad, input, result: grad * input / result,
        "other": lambda grad, other, result: grad * other / result,
    },
)
def hypot(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("hypot", input, other, dtype=_floating_only("hypot", input, other), name="hypot")


def _onnx_hypot(w, a, b, dtype, out):
    x, y = w.operand(a, dtype), w.operand(b, dtype)
    w.emit("Sqrt", [w.emit("Add", [w.emit("Mul", [x, x]), w.emit("Mul", [y, y])])], [out])


lowering("binary", "hypot", onnx=_onnx_hypot)


def _floating_only(name, input, other):
    """The promoted dtype of an op PyTorch defines for floating point results only (logaddexp of two
    integer tensors raises there: it is not computed in float32)."""
    dtype = _same_floating_dtype(input, other)
    if dtype is not None:
        return dtype
    dtype = result_type(*(x for x in (input, other) if x.__class__ is Tensor or isinstance(x, (bool, int, float))))
    if dtype is None or not dtype.is_floating_point:
        raise UnsupportedDTypeError(f"{name}: not implemented for {dtype} operands (it takes floating point ones)")
    return dtype


def _same_floating_dtype(input, other):
    """The floating dtype of two tensors of that one dtype (their common call, whose promotion is
    theirs: the loops of ``result_type`` cost a microsecond), else None."""
    if input.__class__ is Tensor and other.__class__ is Tensor:
        d = input._data.dtype
        if d is other._data.dtype:
            d = input.dtype
            if d.is_floating_point:
                return d
    return None


def _float_dtype(input, other):
    """``float_result_type(input, other)``, at once for two tensors of one floating dtype."""
    return _same_floating_dtype(input, other) or float_result_type(input, other)


# ------------------------------------------------------------------------------------------------
# unary math (integer and bool inputs compute in float32)
@op(
    "exp",
    doc="e ** input.",
    grads={"input": lambda grad, result: grad * result},
    node="ExpBackward0",
    inplace=True,
    plain="unary",
)
def exp(input: Tensor) -> Tensor:
    return _float_unary("exp", input)


lowering("unary", "exp", onnx="Exp", c="expf(v)")


@op(
    "log",
    plain="unary",
    inplace=True,
    doc="The natural logarithm.",
    node="LogBackward0",
    grads={"input": lambda grad, input: grad / input},
)
def log(input: Tensor) -> Tensor:
    return _float_unary("log", input)


lowering("unary", "log", onnx="Log", c="logf(v)")


@op(
    "log1p",
    plain="unary",
    inplace=True,
    doc="log(1 + input), accurate for small input.",
    node="Log1PBackward0",
    grads={"input": lambda grad, input: grad / (input + 1)},
)
def log1p(input: Tensor) -> Tensor:
    return _float_unary("log1p", input)


lowering(
    "unary",
    "log1p",
    onnx=lambda w, x, dtype, out: w.emit("Log", [w.emit("Add", [x, w.const(1, dtype)])], [out]),
    c="log1pf(v)",
)


@op(
    "sqrt",
    plain="unary",
    doc="The square root.",
    node="SqrtBackward0",
    inplace=True,
    grads={"input": lambda grad, result: grad / (2 * result)},
)
def sqrt(input: Tensor) -> Tensor:
    return _float_unary("sqrt", input)


lowering("unary", "sqrt", onnx="Sqrt", c="sqrtf(v)")


@op(
    "rsqrt",
    plain="unary",
    inplace=True,
    doc="1 / sqrt(input).",
    node="RsqrtBackward0",
    grads={"input": lambda grad, result: -0.5 * grad * result * result * result},
)
def rsqrt(input: Tensor) -> Tensor:
    return _float_unary("rsqrt", input)


lowering(
    "unary",
    "rsqrt",
    onnx=lambda w, x, dtype, out: w.emit("Reciprocal", [w.emit("Sqrt", [x])], [out]),
    c="1.0f / sqrtf(v)",
)


@op(
    "sin",
    plain="unary",
    inplace=True,
    doc="The sine.",
    node="SinBackward0",
    grads={"input": lambda grad, input: grad * cos(input)},
)
def sin(input: Tensor) -> Tensor:
    return _float_unary("sin", input)


lowering("unary", "sin", onnx="Sin", c="sinf(v)")


@op(
    "cos",
    plain="unary",
    inplace=True,
    doc="The cosine.",
    node="CosBackward0",
    grads={"input": lambda grad, input: -grad * sin(input)},
)
def cos(input: Tensor) -> Tensor:
    return _float_unary("cos", input)


lowering("unary", "cos", onnx="Cos", c="cosf(v)")


@op(
    "tanh",
    plain="unary",
    doc="The hyperbolic tangent.",
    node="TanhBackward0",
    inplace=True,
    functional=True,
    grads={"input": lambda grad, result: grad * (1 - result * result)},
    fused={"input": lambda grad, result: fused_unary_backward("tanh", grad, y=result)},
)
def tanh(input: Tensor) -> Tensor:
    return _float_unary("tanh", input)


lowering("unary", "tanh", onnx="Tanh", c="tanhf(v)", c_fusable=True)


@op(
    "sigmoid",
    plain="unary",
    doc="1 / (1 + exp(-input)), without overflow for large |input|.",
    node="SigmoidBackward0",
    inplace=True,
    functional=True,
    grads={"input": lambda grad, result: grad * result * (1 - result)},
    fused={"input": lambda grad, result: fused_unary_backward("sigmoid", grad, y=result)},
)
def sigmoid(input: Tensor) -> Tensor:
    return _float_unary("sigmoid", input)


lowering("unary", "sigmoid", onnx="Sigmoid", c="1.0f / (1.0f + expf(-v))", c_fusable=True)


@op(
    "erf",
    plain="unary",
    inplace=True,
    doc="The error function.",
    node="ErfBackward0",
    grads={"input": lambda grad, input: grad * _TWO_OVER_SQRT_PI * exp(-input * input)},
)
def erf(input: Tensor) -> Tensor:
    return _float_unary("erf", input)


lowering("unary", "erf", onnx="Erf", c="erf_rational(v)")


@op(
    "exp2",
    plain="unary",
    inplace=True,
    doc="2 ** input.",
    node="Exp2Backward0",
    grads={"input": lambda grad, result: grad * result * _LN2},
)
def exp2(input: Tensor) -> Tensor:
    return _float_unary("exp2", input)


lowering("unary", "exp2", onnx=lambda w, x, dtype, out: w.emit("Pow", [w.const(2, dtype), x], [out]), c="exp2f(v)")


@op(
    "log2",
    plain="unary",
    inplace=True,
    doc="The base-2 logarithm.",
    node="Log2Backward0",
    grads={"input": lambda grad, input: grad / (input * _LN2)},
)
def log2(input: Tensor) -> Tensor:
    return _float_unary("log2", input)


lowering(
    "unary",
    "log2",
    onnx=lambda w, x, dtype, out: w.emit("Div", [w.emit("Log", [x]), w.const(_LN2, dtype)], [out]),
    c="log2f(v)",
)


@op(
    "log10",
    plain="unary",
    inplace=True,
    doc="The base-10 logarithm.",
    node="Log10Backward0",
    grads={"input": lambda grad, input: grad / (input * _LN10)},
)
def log10(input: Tensor) -> Tensor:
    return _float_unary("log10", input)


lowering(
    "unary",
    "log10",
    onnx=lambda w, x, dtype, out: w.emit("Div", [w.emit("Log", [x]), w.const(_LN10, dtype)], [out]),
    c="log10f(v)",
)


# ------------------------------------------------------------------------------------------------
# activations
def _silu_grad(grad, input):
    s = sigmoid(input)
    return grad * s * (1 + input * (1 - s))


@op(
    "silu",
    plain="unary",
    dtypes=FLOATING,
    doc="input * sigmoid(input) (swish).",
    node="SiluBackward0",
    inplace=True,
    functional="inplace",
    grads={"input": _silu_grad},
    fused={"input": lambda grad, input: fused_unary_backward("silu", grad, x=input)},
)
def silu(input: Tensor) -> Tensor:
    return _float_unary("silu", input)


lowering(
    "unary",
    "silu",
    onnx=lambda w, x, dtype, out: w.emit("Mul", [x, w.emit("Sigmoid", [x])], [out]),
    c="v / (1.0f + expf(-v))",
    c_fusable=True,
)


_INV_SQRT_2 = 1 / math.sqrt(2)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_GELU_TANH_COEFFICIENT = 0.044715


def _gelu_grad(grad, input, approximate):
    x = input
    if approximate == "tanh":
        # With s = sigmoid(2u) = (1 + tanh u) / 2: 1 - tanh^2 u = 4 s (1 - s). Written with tanh, 1 + tanh u
        # and 1 - tanh^2 u cancel for u << 0 (at x = -6 half the digits are gone; below x = -7.2 tanh u
        # rounds to -1 in float64 and both are exactly 0, where the gradient is still ~1e-20); written
        # with s, as the fused formulas of both backends are, they keep their precision.
        u = _SQRT_2_OVER_PI * (x + _GELU_TANH_COEFFICIENT * x * x * x)
        s = sigmoid(2 * u)
        return grad * (s + 2 * x * s * (1 - s) * _SQRT_2_OVER_PI * (1 + 3 * _GELU_TANH_COEFFICIENT * x * x))
    cdf = 0.5 * (1 + erf(x * _INV_SQRT_2))
    pdf = exp(-0.5 * x * x) * _INV_SQRT_2PI
    return grad * (cdf + x * pdf)


def _gelu_primitive(approximate):
    if approximate == "none":
        return "gelu"
    if approximate == "tanh":
        return "gelu_tanh"
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


@op(
    "gelu",
    dtypes=FLOATING,
    doc="Gaussian error linear unit, exact (approximate='none') or with tanh (approximate='tanh').",
    node="GeluBackward0",
    functional=True,
    grads={"input": _gelu_grad},
    fused={"input": lambda grad, input, approximate: fused_unary_backward(_gelu_primitive(approximate), grad, x=input)},
)
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    return _float_unary(_gelu_primitive(approximate), input)


def _onnx_gelu(w, x, dtype, out, tanh):
    """ONNX's Gelu from opset 20; before, its formula in ONNX operators."""
    if w.opset >= 20:
        return w.emit("Gelu", [x], [out], approximate="tanh" if tanh else "none")
    if tanh:  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = w.emit("Mul", [w.emit("Mul", [x, x]), x])
        inner = w.emit("Add", [x, w.emit("Mul", [cube, w.const(_GELU_TANH_COEFFICIENT, dtype)])])
        t = w.emit("Tanh", [w.emit("Mul", [inner, w.const(_SQRT_2_OVER_PI, dtype)])])
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        t = w.emit("Erf", [w.emit("Mul", [x, w.const(_INV_SQRT_2, dtype)])])
    half_x = w.emit("Mul", [x, w.const(0.5, dtype)])
    return w.emit("Mul", [half_x, w.emit("Add", [t, w.const(1.0, dtype)])], [out])


# C: the CPU backend's erf within rounding (c_code.py's erf_rational: branch-free, so the loops vectorize;
# libm's erff is a call per element and would take most of a GELU MLP's time)
lowering(
    "unary",
    "gelu",
    onnx=lambda w, x, dtype, out: _onnx_gelu(w, x, dtype, out, False),
    c="0.5f * v * (1.0f + erf_rational(v * 0.70710678118654752f))",
    c_fusable=True,
)


def _gelu_tanh_replay_pair(same, shape_of, forward, backward):
    """gelu_tanh's replay kernels, forward and backward, of one x: tanh's argument (five passes fewer)."""
    x = backward[1]
    return (shape_of(x), (x,)) if same(forward[1], x) else None


# the CPU replay's gelu_tanh kernels make nine passes forward, fifteen backward: capture runs them in chunks
lowering(
    "unary",
    "gelu_tanh",
    onnx=lambda w, x, dtype, out: _onnx_gelu(w, x, dtype, out, True),
    c="0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)))",
    c_fusable=True,
    replay_passes=True,
    replay_keeps=ReplayKeep("inner", "unary_backward", arity=2, kernels_only=True, pair=_gelu_tanh_replay_pair),
)


@op(
    "relu",
    plain="unary",
    dtypes=NUMBERS,
    doc="max(input, 0).",
    node="ReluBackward0",
    inplace=True,
    functional="inplace",
    # PyTorch's threshold_backward: 0 where the result is <= 0, the gradient elsewhere (NaN included)
    grads={"input": lambda grad, result: where(le(result, 0), 0.0, grad)},
    fused={"input": lambda grad, result: fused_unary_backward("relu", grad, x=result)},
)
def relu(input: Tensor) -> Tensor:
    return unary("relu", input)


lowering("unary", "relu", onnx="Relu", c="(v > 0.0f ? v : 0.0f)", c_fusable=True)


def _leaky_relu_fused_grad(grad, input, negative_slope):
    # the formula's gt, mul and where on the arrays, with no op call around each
    bk, g, d = primitives(grad), dense(grad), grad.dtype
    positive = bk.binary("gt", dense(input), 0.0, input.dtype)
    return wrap(bk.where(positive, g, bk.binary("mul", g, float(negative_slope), d), d), grad._device)


@op(
    "leaky_relu",
    plain="scalars",
    dtypes=FLOATING,
    doc="input where positive, negative_slope * input elsewhere.",
    node="LeakyReluBackward0",
    inplace=True,
    functional="inplace",
    grads={"input": lambda grad, input, negative_slope: where(gt(input, 0), grad, grad * negative_slope)},
    fused={"input": _leaky_relu_fused_grad},
)
def leaky_relu(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    if input.__class__ is not Tensor:
        raise DTypeError(f"leaky_relu: expected a Tensor, got {type(input).__name__}")
    if (
        not input.dtype.is_floating_point
        or isinstance(negative_slope, bool)
        or not isinstance(negative_slope, (int, float))
    ):
        return select(gt(input, 0), input, input * negative_slope)
    bk, x, d = primitives(input), input._data, input.dtype
    scaled = bk.binary("mul", x, float(negative_slope), d)
    if 0 < negative_slope <= 1:
        # slope * x <= x where x > 0 and >= x elsewhere (equal at 0, signed zeros and NaN kept): one
        # pass instead of a comparison and a select. Not for a slope of 0 (0 * inf is NaN)
        return wrap(bk.binary("maximum", x, scaled, d), input._device)
    return wrap(bk.where(bk.binary("gt", x, 0.0, d), x, scaled, d), input._device)


@op(
    "abs",
    plain="unary",
    dtypes=NUMBERS,
    inplace=True,
    doc="|input|.",
    node="AbsBackward0",
    operators=("__abs__",),
    aliases=("absolute",),
    grads={"input": lambda grad, input: grad * sign(input)},
)
def abs(input: Tensor) -> Tensor:  # noqa: A001
    return unary("abs", input)


lowering("unary", "abs", onnx="Abs", c="fabsf(v)")


# ------------------------------------------------------------------------------------------------
# piecewise constant: the gradient is zero almost everywhere (PyTorch gives zeros, not NaN or None);
# integer and bool inputs come back unchanged, as in PyTorch
def _zero_grad(grad):
    return _zeros_like(grad)


def _rounding(prim, input):
    if input.__class__ is not Tensor:
        raise DTypeError(f"{prim}: expected a Tensor, got {type(input).__name__}")
    if not input.dtype.is_floating_point:
        return wrap(primitives(input).astype(input._data, input.dtype), input._device)
    return unary(prim, input)


@op(
    "floor",
    plain="unary",
    dtypes=NUMBERS,
    inplace=True,
    doc="The largest integer <= input.",
    node="FloorBackward0",
    grads={"input": _zero_grad},
)
def floor(input: Tensor) -> Tensor:
    return _rounding("floor", input)


lowering("unary", "floor", onnx="Floor", c="floorf(v)")


@op(
    "ceil",
    plain="unary",
    dtypes=NUMBERS,
    inplace=True,
    doc="The smallest integer >= input.",
    node="CeilBackward0",
    grads={"input": _zero_grad},
)
def ceil(input: Tensor) -> Tensor:
    return _rounding("ceil", input)


lowering("unary", "ceil", onnx="Ceil", c="ceilf(v)")


@op(
    "trunc",
    plain="unary",
    dtypes=NUMBERS,
    inplace=("trunc_", "fix_"),
    doc="input rounded towards zero.",
    node="TruncBackward0",
    aliases=("fix",),
    grads={"input": _zero_grad},
)
def trunc(input: Tensor) -> Tensor:
    return _rounding("trunc", input)


lowering(
    "unary",
    "trunc",
    onnx=lambda w, x, dtype, out: w.emit("Mul", [w.emit("Sign", [x]), w.emit("Floor", [w.emit("Abs", [x])])], [out]),
    c="truncf(v)",
)


@op(
    "round",
    dtypes=NUMBERS,
    inplace=True,
    doc="Round half to even; with decimals, round(input * 10**decimals) / 10**decimals.",
    node=lambda input, *, decimals=0: "RoundBackward0" if decimals == 0 else "RoundBackward1",
    grads={"input": _zero_grad},
)
def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001 (PyTorch's name)
    if decimals == 0:
        return _rounding("round", input)
    scale = 10.0**decimals
    return binary("div", _rounding("round", binary("mul", input, scale)), scale)


# C: the default rounding mode rounds halves to even, as NumPy's round
lowering("unary", "round", onnx="Round", c="rintf(v)")


@op(
    "sign",
    inplace=("sign_", "sgn_"),
    aliases=("sgn",),
    doc="-1, 0 or 1 by the sign of input (0 for NaN); sgn is its name for complex-capable code.",
    node="SignBackward0",
    grads={"input": _zero_grad},
)
def sign(input: Tensor) -> Tensor:
    if input.dtype is dt.bool_:
        return wrap(primitives(input).astype(input._data, input.dtype), input._device)
    return unary("sign", input)


lowering("unary", "sign", onnx="Sign", c="(float)((v > 0.0f) - (v < 0.0f))")


# ------------------------------------------------------------------------------------------------
# floating-point classification (no gradient)
_INF = float("inf")


def _classify(name, input, if_not_float, test):
    if input.__class__ is not Tensor:
        raise DTypeError(f"{name}: expected a Tensor, got {type(input).__name__}")
    bk = primitives(input)
    if not input.dtype.is_floating_point:
        return wrap(bk.full(tuple(input.shape), if_not_float, dt.bool_), input._device)
    return wrap(test(bk, input._data, input.dtype), input._device)


@op("isnan", plain="unary_any", doc="Whether each element is NaN.")
def isnan(input: Tensor) -> Tensor:
    return _classify("isnan", input, False, lambda bk, x, d: bk.binary("ne", x, x, d))  # NaN alone is unequal to itself


@op("isinf", plain="unary_any", doc="Whether each element is +inf or -inf.")
def isinf(input: Tensor) -> Tensor:
    return _classify("isinf", input, False, lambda bk, x, d: bk.binary("eq", bk.unary("abs", x), _INF, d))


@op("isfinite", plain="unary_any", doc="Whether each element is neither inf nor NaN.")
def isfinite(input: Tensor) -> Tensor:
    return _classify("isfinite", input, True, lambda bk, x, d: bk.binary("lt", bk.unary("abs", x), _INF, d))


# ------------------------------------------------------------------------------------------------
# clamp
def _clamp_grads(grad, input, min, max):  # noqa: A002
    if min.__class__ is not Tensor and max.__class__ is not Tensor:
        inside = None
        if min is not None:
            inside = ge(input, min)
        if max is not None:
            below = le(input, max)
            inside = below if inside is None else logical_and(inside, below)
        return grad * inside.to(dtype=grad.dtype), None, None
    # PyTorch's gradients for tensor bounds: a bound gets the gradient where it is the result; where
    # lo > hi the result is hi
    if min is not None and max is not None:
        masks = (
            logical_and(ge(input, min), le(input, max)),
            logical_and(lt(input, min), lt(min, max)),
            logical_or(gt(input, max), lt(max, min)),
        )
    elif min is not None:
        masks = (ge(input, min), lt(input, min), None)
    else:
        masks = (le(input, max), None, gt(input, max))
    return tuple(None if m is None else where(m, grad, 0.0) for m in masks)


_NUMBER_BOUNDS = frozenset({float, int, type(None)})  # (not bool: a bool bound promotes as PyTorch's does)


@op(
    "clamp",
    plain="scalars",
    doc="input limited to [min, max] (either bound may be None; bounds may be tensors).",
    node=lambda input, min=None, max=None: (
        "ClampBackward0" if Tensor in (min.__class__, max.__class__) else "ClampBackward1"
    ),
    inplace=("clamp_", "clip_"),
    aliases=("clip",),
    grads={("input", "min", "max"): _clamp_grads},
)
def clamp(
    input: Tensor,
    min: Tensor | Number | None = None,  # noqa: A002
    max: Tensor | Number | None = None,
) -> Tensor:
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    if input.__class__ is Tensor and min.__class__ in _NUMBER_BOUNDS and max.__class__ in _NUMBER_BOUNDS:
        # the common call, numbers bounding a floating tensor: the result is the tensor's dtype
        d = input.dtype
        if d.is_floating_point:
            return wrap(primitives(input).clamp(input._data, min, max), input._device)
    dtype = result_type(input, min, max)
    if dtype is dt.bool_ and not (min is None and max.__class__ is Tensor or max is None and min.__class__ is Tensor):
        # PyTorch's bool kernels are the tensor maximum and minimum alone: one tensor bound
        raise UnsupportedDTypeError("clamp: not implemented for bool results (a bool tensor with bool bounds)")
    if min.__class__ is Tensor or max.__class__ is Tensor:
        out = input
        if min is not None:
            out = binary("maximum", out, min, dtype=dtype, name="clamp")
        if max is not None:
            out = binary("minimum", out, max, dtype=dtype, name="clamp")
        return out
    x = cast(input, dtype)  # clamp(int tensor, 0.5) is a float tensor, as in PyTorch
    return wrap(primitives(x).clamp(x._data, min, max), x._device)


@op("clamp_min", plain="scalars", inplace=True, doc="input limited from below by min.", composite=True)
def clamp_min(input: Tensor, min: Tensor | Number) -> Tensor:  # noqa: A002
    return clamp(input, min=min)


@op("clamp_max", plain="scalars", inplace=True, doc="input limited from above by max.", composite=True)
def clamp_max(input: Tensor, max: Tensor | Number) -> Tensor:  # noqa: A002
    return clamp(input, max=max)


# ------------------------------------------------------------------------------------------------
# selection and comparisons (comparisons and logical ops have no gradient)
def _where_method(self: Tensor, condition: Tensor, other: Tensor | Number) -> Tensor:
    return where(condition, self, other)  # Tensor.where(condition, other): self is the input


@overload
def where(condition: Tensor) -> tuple[Tensor, ...]: ...
@overload
def where(condition: Tensor, input: Tensor | Number, other: Tensor | Number) -> Tensor: ...
@op(
    "where",
    plain="where",
    doc="input where condition holds, other elsewhere (broadcast).",
    node="WhereBackward0",
    method=_where_method,
    grads={
        # zeros, not grad * 0, where the branch was not taken: an inf gradient must not become NaN there
        "input": lambda grad, condition: where(condition, grad, 0.0),
        "other": lambda grad, condition: where(condition, 0.0, grad),
    },
)
def where(
    condition: Tensor, input: Tensor | Number | None = None, other: Tensor | Number | None = None
) -> Tensor | tuple[Tensor, ...]:
    if condition.__class__ is not Tensor:
        raise DTypeError("where: condition must be a bool Tensor")
    if input is None and other is None:  # PyTorch's where(condition): nonzero(condition, as_tuple=True)
        return condition.nonzero(as_tuple=True)  # the method: the indexing family imports this one
    if input is None or other is None:
        raise DTypeError("where: expected both input and other, or neither (where(condition) is nonzero's tuple)")
    if input.__class__ is Tensor and other.__class__ is Tensor and input._data.dtype == other._data.dtype:
        # the common call, two tensors of one dtype: no promotion to find
        dev = input._device
        if condition._device is dev and other._device is dev and condition.dtype is dt.bool_:
            try:
                return wrap(primitives(condition).where(condition._data, input._data, other._data, input.dtype), dev)
            except ValueError:
                pass  # the general path below names the shapes
    if condition.dtype is not dt.bool_:  # PyTorch's where(x) alone takes any dtype (above), a selection does not
        raise UnsupportedDTypeError(f"where: expected condition to be a bool tensor, got {condition.dtype}")
    dev = check_same_device("where", condition, input, other)
    dtype = result_type(input, other)
    ad = input._data if input.__class__ is Tensor else input
    bd = other._data if other.__class__ is Tensor else other
    try:
        data = primitives(condition).where(condition._data, ad, bd, dtype)
    except ValueError:
        shapes = [fmt_shape(x.shape) for x in (condition, input, other) if x.__class__ is Tensor]
        raise ShapeError(f"where: shapes {', '.join(shapes)} cannot be broadcast") from None
    return wrap(data, dev)


def _eq_operator(self, other):
    return False if other is None else eq(self, other)  # PyTorch: t == None is False


def _ne_operator(self, other):
    return True if other is None else ne(self, other)


@op("eq", plain="binary_any", doc="input == other, elementwise.", operators=(("__eq__", _eq_operator),))
def eq(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("eq", input, other, name="eq")


# C: a bool value is a float 0 or 1 (never a buffer of the caller's)
lowering("binary", "eq", onnx="Equal", c="({a} == {b} ? 1.0f : 0.0f)")


@op(
    "ne",
    plain="binary_any",
    doc="input != other, elementwise.",
    operators=(("__ne__", _ne_operator),),
    aliases=("not_equal",),
)
def ne(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("ne", input, other, name="ne")


lowering(
    "binary",
    "ne",
    onnx=lambda w, a, b, dtype, out: w.emit(
        "Not", [w.emit("Equal", [w.operand(a, dtype), w.operand(b, dtype)])], [out]
    ),
    c="({a} != {b} ? 1.0f : 0.0f)",
)


@op("lt", plain="binary_any", doc="input < other, elementwise.", operators=("__lt__",), aliases=("less",))
def lt(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("lt", input, other, name="lt")


lowering("binary", "lt", onnx="Less", c="({a} < {b} ? 1.0f : 0.0f)")


@op("le", plain="binary_any", doc="input <= other, elementwise.", operators=("__le__",), aliases=("less_equal",))
def le(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("le", input, other, name="le")


lowering("binary", "le", onnx="LessOrEqual", c="({a} <= {b} ? 1.0f : 0.0f)")


@op("gt", plain="binary_any", doc="input > other, elementwise.", operators=("__gt__",), aliases=("greater",))
def gt(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("gt", input, other, name="gt")


lowering("binary", "gt", onnx="Greater", c="({a} > {b} ? 1.0f : 0.0f)")


@op("ge", plain="binary_any", doc="input >= other, elementwise.", operators=("__ge__",), aliases=("greater_equal",))
def ge(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("ge", input, other, name="ge")


lowering("binary", "ge", onnx="GreaterOrEqual", c="({a} >= {b} ? 1.0f : 0.0f)")


@op("logical_and", plain="binary_any", doc="input and other, elementwise (nonzero is true).")
def logical_and(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("logical_and", input, other, name="logical_and")


lowering(
    "binary",
    "logical_and",
    onnx=lambda w, a, b, dtype, out: w.logical("And", a, b, out),
    c="({a} != 0.0f && {b} != 0.0f ? 1.0f : 0.0f)",
)


@op("logical_or", plain="binary_any", doc="input or other, elementwise (nonzero is true).")
def logical_or(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("logical_or", input, other, name="logical_or")


lowering(
    "binary",
    "logical_or",
    onnx=lambda w, a, b, dtype, out: w.logical("Or", a, b, out),
    c="({a} != 0.0f || {b} != 0.0f ? 1.0f : 0.0f)",
)


@op("logical_xor", plain="binary_any", doc="input xor other, elementwise (nonzero is true).")
def logical_xor(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return binary("logical_xor", input, other, name="logical_xor")


lowering(
    "binary",
    "logical_xor",
    onnx=lambda w, a, b, dtype, out: w.logical("Xor", a, b, out),
    c="(({a} != 0.0f) != ({b} != 0.0f) ? 1.0f : 0.0f)",
)


@op("logical_not", doc="not input, elementwise (nonzero is true).")
def logical_not(input: Tensor) -> Tensor:
    return wrap(primitives(input).unary("logical_not", input._data), input._device)


lowering("unary", "logical_not", onnx="Not", c="(v == 0.0f ? 1.0f : 0.0f)")


def _bitwise(prim, input, other):
    for x in (input, other):
        if x.dtype.is_floating_point if x.__class__ is Tensor else isinstance(x, float):
            raise UnsupportedDTypeError(
                f"{prim}: only integer and bool operands are supported, got "
                f"{x.dtype if x.__class__ is Tensor else 'float'}"
            )
    return binary(prim, input, other, name=prim)


# & | ^ ~ are bitwise, as in PyTorch (for bool tensors the same as logical)
@op(
    "bitwise_and",
    plain="binary_any",
    doc="input & other for integer and bool tensors.",
    operators=("__and__", "__rand__"),
)
def bitwise_and(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return _bitwise("bitwise_and", input, other)


lowering("binary", "bitwise_and", onnx="BitwiseAnd")


@op(
    "bitwise_or",
    plain="binary_any",
    doc="input | other for integer and bool tensors.",
    operators=("__or__", "__ror__"),
)
def bitwise_or(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return _bitwise("bitwise_or", input, other)


lowering("binary", "bitwise_or", onnx="BitwiseOr")


@op(
    "bitwise_xor",
    plain="binary_any",
    doc="input ^ other for integer and bool tensors.",
    operators=("__xor__", "__rxor__"),
)
def bitwise_xor(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    return _bitwise("bitwise_xor", input, other)


lowering("binary", "bitwise_xor", onnx="BitwiseXor")


def _invert_operator(self):
    # PyTorch's ~ refuses a float tensor before dispatch, with a TypeError; its function form raises
    # NotImplementedError (bitwise_not's own check)
    if self.dtype.is_floating_point:
        raise DTypeError(f"~ (operator.invert) is only implemented on integer and bool tensors, got {self.dtype}")
    return bitwise_not(self)


@op("bitwise_not", doc="~input for integer and bool tensors.", operators=(("__invert__", _invert_operator),))
def bitwise_not(input: Tensor) -> Tensor:
    if input.dtype.is_floating_point:
        raise UnsupportedDTypeError(f"bitwise_not: only integer and bool tensors are supported, got {input.dtype}")
    return wrap(primitives(input).unary("bitwise_not", input._data), input._device)


lowering("unary", "bitwise_not", onnx="BitwiseNot")


@op("square", inplace=True, doc="input * input.", composite=True)
def square(input: Tensor) -> Tensor:
    if input.__class__ is Tensor and input.dtype is dt.bool_:
        input = input.to(dtype=dt.int64)  # PyTorch's square is pow(input, 2): a bool squares to int64
    return mul(input, input)


@op(
    "reciprocal",
    plain="unary",
    inplace=True,
    doc="1 / input.",
    node="ReciprocalBackward0",
    # PyTorch's formula, in the result: its own gradient at 0 is +-inf (2 * grad * result**3), where
    # div's formula in input would make inf * 0
    grads={"input": lambda grad, result: -grad * (result * result)},
)
def reciprocal(input: Tensor) -> Tensor:
    if input.__class__ is Tensor and input.dtype.is_floating_point:  # (the common case: no promotion to find)
        return Tensor._make(primitives(input).binary("div", 1.0, input._data, input.dtype), input._device)
    return binary("div", 1.0, input, dtype=float_result_type(1.0, input), name="reciprocal")


# ------------------------------------------------------------------------------------------------
# lerp, isclose, allclose, equal
@op(
    "lerp",
    plain="binary_scalars",
    dtypes=FLOATING,
    doc="input + weight * (end - input), elementwise with broadcasting.",
    node=lambda input, end, weight: "LerpBackward1" if weight.__class__ is Tensor else "LerpBackward0",
    inplace=True,
    grads={
        "input": lambda grad, weight: grad * (1 - weight),
        "end": lambda grad, weight: grad * weight,
        "weight": lambda grad, input, end: grad * (end - input),
    },
)
def lerp(input: Tensor, end: Tensor, weight: Tensor | Number) -> Tensor:
    if input.__class__ is not Tensor or end.__class__ is not Tensor:
        raise DTypeError(f"lerp: input and end must be Tensors, got {type(input).__name__} and {type(end).__name__}")
    check_same_device("lerp", input, end, weight)
    if input.dtype is not end.dtype:
        raise UnsupportedDTypeError(f"lerp: expected input and end of one dtype, got {input.dtype} and {end.dtype}")
    half = input.dtype.itemsize == 2  # computed in float32 and rounded once, as PyTorch's kernel
    if not half and weight.__class__ in (int, float) and input._data.shape == end._data.shape:
        # the common call, a Python weight between tensors of one shape: over the primitives
        bk, a, b, d = primitives(input), input._data, end._data, input.dtype
        diff = bk.binary("sub", b, a, d)
        if builtins.abs(weight) < 0.5:
            return wrap(bk.binary("add", a, bk.binary("mul", diff, float(weight), d), d), input._device)
        return wrap(bk.binary("sub", b, bk.binary("mul", diff, float(1 - weight), d), d), input._device)
    start, stop = (cast(input, dt.float32), cast(end, dt.float32)) if half else (input, end)
    if half and weight.__class__ is Tensor:
        weight = cast(weight, dt.float32)
    diff = binary("sub", stop, start, name="lerp")
    # PyTorch's formula: from the nearer end, so that weight 1 gives end exactly
    if weight.__class__ is Tensor:
        near_start = binary("lt", unary("abs", weight), 0.5)
        from_start = binary("add", start, binary("mul", weight, diff, name="lerp"), name="lerp")
        from_stop = binary("sub", stop, binary("mul", diff, binary("sub", 1.0, weight), name="lerp"), name="lerp")
        out = select(near_start, from_start, from_stop)
    else:
        number = typing.cast("Number", weight)  # (not a Tensor)
        if builtins.abs(number) < 0.5:
            out = binary("add", start, binary("mul", diff, number), name="lerp")
        else:
            out = binary("sub", stop, binary("mul", diff, 1 - number), name="lerp")
    return cast(out, input.dtype) if half else out


def _same_dtype(name, input, other):
    if input.__class__ is not Tensor or other.__class__ is not Tensor:
        raise DTypeError(f"{name}: expected two Tensors, got {type(input).__name__} and {type(other).__name__}")
    check_same_device(name, input, other)
    if input.dtype is not other.dtype:
        raise UnsupportedDTypeError(
            f"{name}: expected both inputs of one dtype, got {input.dtype} (shape "
            f"{fmt_shape(input.shape)}) and {other.dtype} (shape {fmt_shape(other.shape)})"
        )


@op("isclose", doc="Whether |input - other| <= atol + rtol * |other|, elementwise (equal infinities are close).")
def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
    _same_dtype("isclose", input, other)
    if rtol < 0 or atol < 0:
        raise ValueError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    try:
        same = binary("eq", input, other, name="isclose")
    except ShapeError:
        raise ShapeError(
            f"isclose: shapes {fmt_shape(input.shape)} and {fmt_shape(other.shape)} cannot be broadcast"
        ) from None
    if input.dtype is dt.bool_ or (not input.dtype.is_floating_point and rtol == 0 and atol == 0):
        return same
    a, b = input, other
    diff = unary("abs", binary("sub", a, b))
    if not input.dtype.is_floating_point:  # the integer difference is exact; the tolerance is a float
        diff, b = cast(diff, dt.float32), cast(b, dt.float32)
    tolerance = binary("add", binary("mul", unary("abs", b), float(rtol)), float(atol))
    # a NaN or infinite difference is never close (equal infinities are caught by ``same``), even
    # against an infinite tolerance
    within = binary("logical_and", binary("le", diff, tolerance), binary("lt", diff, math.inf))
    close = binary("logical_or", same, within)
    if equal_nan:
        both_nan = binary("logical_and", binary("ne", a, a), binary("ne", b, b))
        close = binary("logical_or", close, both_nan)
    return close


@op("allclose", doc="Whether every element of input is close to other's (see isclose); a Python bool.", composite=True)
def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


@op(
    "equal",
    plain="predicate",
    doc="Whether input and other have the same shape and elements; a Python bool.",
    composite=True,
)
def equal(input: Tensor, other: Tensor) -> bool:
    if input.__class__ is not Tensor or other.__class__ is not Tensor:
        raise DTypeError(f"equal: expected two Tensors, got {type(input).__name__} and {type(other).__name__}")
    check_same_device("equal", input, other)
    if input._data.shape != other._data.shape:  # (the arrays' shapes: tuples, read without a Size made)
        return False
    # over the primitives: a bool has no history to record
    bk = primitives(input)
    if input.dtype is other.dtype:  # nothing to promote: the comparison of the arrays as they are
        same = bk.binary("eq", input._data, other._data, input.dtype)
    else:
        same = binary("eq", input, other, name="equal")._data
    return bool(bk.to_numpy(bk.reduce("all", same, None, False)).item())


# ------------------------------------------------------------------------------------------------
# More of PyTorch's elementwise names (issue 15): expm1 and the hyperbolic functions a primitive each,
# the others composed of the ops above, so both backends run them and they differentiate through those
# ops.
@op(
    "expm1",
    plain="unary",
    doc="exp(input) - 1, accurate near 0.",
    node="Expm1Backward0",
    inplace=True,
    grads={"input": lambda grad, result: grad * (result + 1)},
)
def expm1(input: Tensor) -> Tensor:
    return _float_unary("expm1", input)


# tan, sinh and cosh: a primitive each (the C library's functions: exact near 0, finite up to where
# the result overflows, which a composition of exp or expm1 is not)
@op(
    "tan",
    plain="unary",
    doc="The tangent.",
    node="TanBackward0",
    inplace=True,
    grads={"input": lambda grad, result: grad * (result * result + 1)},
)
def tan(input: Tensor) -> Tensor:
    return _float_unary("tan", input)


@op(
    "sinh",
    plain="unary",
    doc="The hyperbolic sine.",
    node="SinhBackward0",
    inplace=True,
    grads={"input": lambda grad, input: grad * cosh(input)},
)
def sinh(input: Tensor) -> Tensor:
    return _float_unary("sinh", input)


@op(
    "cosh",
    plain="unary",
    doc="The hyperbolic cosine.",
    node="CoshBackward0",
    inplace=True,
    grads={"input": lambda grad, input: grad * sinh(input)},
)
def cosh(input: Tensor) -> Tensor:
    return _float_unary("cosh", input)


lowering("unary", "tan", onnx="Tan", c="tanf(v)")
lowering("unary", "sinh", onnx="Sinh", c="sinhf(v)")
lowering("unary", "cosh", onnx="Cosh", c="coshf(v)")


def _logit_grad(grad, input, eps):
    # PyTorch's: grad / (x (1 - x)) inside the domain (infinite at its ends), NaN outside it; with eps,
    # 0 outside [eps, 1 - eps] (where the forward clamped)
    if eps is None:
        outside, fill = logical_or(lt(input, 0), gt(input, 1)), math.nan
    else:
        outside, fill = logical_or(lt(input, eps), gt(input, 1.0 - eps)), 0.0
    return where(outside, fill, grad / (input * (1 - input)))


@op(
    "logit",
    doc="log(input / (1 - input)), input first clamped to [eps, 1 - eps] when eps is given.",
    node="LogitBackward0",
    grads={"input": _logit_grad},
)
def logit(input: Tensor, eps: float | None = None) -> Tensor:
    check_tensor("logit", "input", input)
    x = input if input.dtype.is_floating_point else cast(input, dt.default_float)
    bk, a = primitives(x), x._data
    if eps is not None:
        a = bk.clamp(a, eps, 1.0 - eps)
    return wrap(bk.unary("logit", a), x._device)


def _onnx_logit(w, x, dtype, out):
    one = w.const(1.0, dtype)  # (a unary lowering is given NumPy's dtype)
    w.emit("Log", [w.emit("Div", [x, w.emit("Sub", [one, x])])], [out])


lowering("unary", "logit", onnx=_onnx_logit, c="logf(v / (1.0f - v))")


@op(
    "frac",
    dtypes=FLOATING,
    doc="The fractional part: input - trunc(input).",
    node="FracBackward0",
    inplace=True,
    grads={"input": lambda grad: grad},
)
def frac(input: Tensor) -> Tensor:
    return wrap(primitives(input).unary("frac", input._data), input._device)


def _onnx_frac(w, x, dtype, out):
    # x - trunc(x), ONNX having no Trunc: trunc(x) = sign(x) floor(|x|)
    whole = w.emit("Mul", [w.emit("Sign", [x]), w.emit("Floor", [w.emit("Abs", [x])])])
    w.emit("Sub", [x, whole], [out])


lowering("unary", "frac", onnx=_onnx_frac, c="(v - truncf(v))")


@functools.cache
def _largest_finite(dtype):
    return dt.finfo(dtype).max  # (a finfo is a microsecond or two to make: nan_to_num's every call made one)


@op(
    "nan_to_num",
    plain="scalars",
    doc="input with NaN, +inf and -inf replaced by finite values.",
    node="NanToNumBackward0",
    inplace=True,
    grads={"input": lambda grad, input: grad * isfinite(input)},  # PyTorch's
)
def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor:
    check_tensor("nan_to_num", "input", input)
    bk, x, d = primitives(input), input._data, input.dtype
    if not d.is_floating_point:
        return wrap(bk.astype(x, d), input._device)  # a copy
    limit = _largest_finite(d)
    if posinf is None and neginf is None:
        # the infinities become the largest finite values: a clamp to them (NaN is replaced after); the
        # default NaN (+0.0) in the same pass
        if nan == 0 and math.copysign(1.0, nan) == 1.0:
            return wrap(bk.binary("nan_to_num", x, float(limit), d), input._device)
        return wrap(bk.where(bk.binary("ne", x, x, d), nan, bk.clamp(x, -limit, limit), d), input._device)
    out = bk.where(bk.binary("ne", x, x, d), nan, x, d)
    out = bk.where(bk.binary("eq", x, math.inf, d), limit if posinf is None else posinf, out, d)
    return wrap(bk.where(bk.binary("eq", x, -math.inf, d), -limit if neginf is None else neginf, out, d), input._device)


def _onnx_nan_to_num(w, a, b, dtype, out):
    x, bound = w.operand(a, dtype), w.operand(b, dtype)
    clamped = w.emit("Clip", [x, w.emit("Neg", [bound]), bound])
    w.emit("Where", [w.emit("IsNaN", [x]), w.operand(0.0, dtype), clamped], [out])


lowering(
    "binary", "nan_to_num", onnx=_onnx_nan_to_num, c="(({a}) != ({a}) ? 0.0f : fminf(fmaxf(({a}), -({b})), ({b})))"
)


def _check_pointwise(name, *tensors):
    """A three-operand op's shapes broadcast together, or an error naming the op and every shape."""
    shapes = [tuple(t.shape) for t in tensors if t.__class__ is Tensor]
    try:
        _broadcast_all(shapes)
    except ValueError:
        raise ShapeError(f"{name}: shapes {', '.join(fmt_shape(s) for s in shapes)} cannot be broadcast") from None


def _broadcast_all(shapes):
    out = ()
    for shape in shapes:
        n = max(len(out), len(shape))
        a, b = (1,) * (n - len(out)) + out, (1,) * (n - len(shape)) + tuple(shape)
        if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
            raise ValueError
        out = tuple(max(x, y) if 0 not in (x, y) else 0 for x, y in zip(a, b))
    return out


def _add_scaled_directly(prim, input, tensor1, tensor2, value):
    """input + value * prim(tensor1, tensor2) (addcmul's, addcdiv's) over the primitives where the
    operands are floating tensors of one dtype, shape and device and value a Python number: their
    common call, with no promotion to find and no broadcast to check; else None."""
    if (
        input.__class__ is Tensor
        and tensor1.__class__ is Tensor
        and tensor2.__class__ is Tensor
        and (value.__class__ is int or value.__class__ is float)
    ):
        a, d = input._data, input.dtype
        if (
            d.is_floating_point
            and tensor1.dtype is d
            and tensor2.dtype is d
            and input._device is tensor1._device
            and input._device is tensor2._device
            and a.shape == tensor1._data.shape == tensor2._data.shape
        ):
            bk = primitives(input)
            scaled = bk.binary(prim, tensor1._data, tensor2._data, d)
            if value != 1:
                scaled = bk.binary("mul", scaled, float(value), d)
            return wrap(bk.binary("add", a, scaled, d), input._device)
    return None


# addcmul and addcdiv: the forwards over the primitives, PyTorch's derivatives (value times the other
# factor's; the quotient's)
@op(
    "addcmul",
    plain="ternary_scalars",
    dtypes=NUMBERS.of("input", "tensor1", "tensor2"),
    doc="input + value * tensor1 * tensor2, broadcast.",
    node="AddcmulBackward0",
    inplace=True,
    grads={
        "input": lambda grad: grad,
        "tensor1": lambda grad, tensor2, value: grad * tensor2 * value,
        "tensor2": lambda grad, tensor1, value: grad * tensor1 * value,
    },
)
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Number = 1) -> Tensor:
    fast = _add_scaled_directly("mul", input, tensor1, tensor2, value)
    if fast is not None:
        return fast
    _check_pointwise("addcmul", input, tensor1, tensor2)
    product = binary("mul", tensor1, tensor2, name="addcmul")
    value = scalar_for(result_type(input, product), value)
    return binary("add", input, product if value == 1 else binary("mul", product, value), name="addcmul")


@op(
    "addcdiv",
    plain="ternary_scalars",
    doc="input + value * tensor1 / tensor2, broadcast.",
    node="AddcdivBackward0",
    inplace=True,
    grads={
        "input": lambda grad: grad,
        "tensor1": lambda grad, tensor2, value: grad * value / tensor2,
        "tensor2": lambda grad, tensor1, tensor2, value: -grad * value * tensor1 / (tensor2 * tensor2),
    },
)
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value: Number = 1) -> Tensor:
    fast = _add_scaled_directly("div", input, tensor1, tensor2, value)
    if fast is not None:
        return fast
    _check_pointwise("addcdiv", input, tensor1, tensor2)
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise UnsupportedDTypeError(
            f"addcdiv: integer division of tensors is not supported (tensor1 {tensor1.dtype}, "
            f"tensor2 {tensor2.dtype}); use a floating point tensor"
        )
    quotient = binary("div", tensor1, tensor2, dtype=float_result_type(tensor1, tensor2), name="addcdiv")
    return binary("add", input, quotient if value == 1 else binary("mul", quotient, value), name="addcdiv")


# activations (adcuda.nn.functional, with PyTorch's ``inplace=`` keyword and an ``F.<name>_``)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _elu_forward(input, alpha, inner_scale):
    """alpha * expm1(input * inner_scale) where input <= 0, input elsewhere (a NaN stays), over the
    primitives."""
    bk, x, d = primitives(input), input._data, input.dtype
    inner = x if inner_scale == 1.0 else bk.binary("mul", x, float(inner_scale), d)
    below = bk.unary("expm1", inner)
    if alpha != 1.0:
        below = bk.binary("mul", below, float(alpha), d)
    return wrap(bk.where(bk.binary("le", x, 0.0, d), below, x, d), input._device)


def _elu_grad(grad, input, alpha, inner_scale):
    """PyTorch's elu_backward: grad * alpha * inner_scale * exp(input * inner_scale) where input <= 0,
    grad elsewhere. The exp reads input below 0 only (a constant 0 at 0), so the second derivative is
    0 at 0, as PyTorch's double backward (masked by input < 0), and the branch where() leaves out has
    no inf whose zero gradient would become NaN."""
    below = where(lt(input, 0), input, 0.0)
    if inner_scale != 1.0:
        below = below * inner_scale
    return where(le(input, 0), grad * exp(below) * (alpha * inner_scale), grad)


@op(
    "elu",
    plain="scalars",
    dtypes=FLOATING,
    doc="input where positive, alpha * (exp(input) - 1) elsewhere.",
    node="EluBackward0",
    method=False,
    inplace=True,
    functional="inplace",
    grads={"input": lambda grad, input, alpha: _elu_grad(grad, input, alpha, 1.0)},
)
def elu(input: Tensor, alpha: float = 1.0) -> Tensor:
    check_tensor("elu", "input", input)
    if alpha == 1.0 and alpha.__class__ is float and input.dtype.itemsize > 2:
        # celu's one pass: expm1(x * 1) * 1 where x <= 0 is elu's at alpha 1 (the half types keep
        # expm1's float32 detour)
        return _with_parameter("celu", input, alpha)
    return _elu_forward(input, alpha, 1.0)


def _selu_grad(grad, input):
    # PyTorch's: scale * alpha * exp(input) where input <= 0, scale elsewhere (exp of the non-positive
    # part only, so the branch where() leaves out has no inf whose zero gradient would become NaN); its
    # second derivative is masked by input < 0, so at 0 the exp's argument is the constant 0
    below = where(lt(input, 0), input, 0.0)
    return where(le(input, 0), grad * exp(below) * (_SELU_SCALE * _SELU_ALPHA), grad * _SELU_SCALE)


@op(
    "selu",
    dtypes=FLOATING,
    doc="scale * elu(input, alpha) with the self-normalising constants.",
    node="EluBackward0",
    method=False,
    inplace=True,
    functional="inplace",
    grads={"input": _selu_grad},
)
def selu(input: Tensor) -> Tensor:
    check_tensor("selu", "input", input)
    return _float_unary("selu", input)


lowering("unary", "selu", onnx="Selu")


@op(
    "celu",
    plain="scalars",
    dtypes=FLOATING,
    doc="input where positive, alpha * (exp(input / alpha) - 1) elsewhere.",
    node="CeluBackward0",
    method=False,
    inplace=True,
    functional="inplace",
    grads={"input": lambda grad, input, alpha: _elu_grad(grad, input, alpha, 1.0 / alpha)},
)
def celu(input: Tensor, alpha: float = 1.0) -> Tensor:
    check_tensor("celu", "input", input)
    if alpha == 0:
        raise ValueError("celu: ZeroDivisionError, alpha must not be 0")
    return _with_parameter("celu", input, alpha)


def _onnx_celu(w, a, b, dtype, out):
    x, alpha = w.operand(a, dtype), w.operand(b, dtype)
    below = w.emit("Mul", [w.emit("Sub", [w.emit("Exp", [w.emit("Div", [x, alpha])]), w.operand(1.0, dtype)]), alpha])
    w.emit("Where", [w.emit("LessOrEqual", [x, w.operand(0.0, dtype)]), below, x], [out])


lowering("binary", "celu", onnx=_onnx_celu, c="(({a}) <= 0.0f ? expm1f(({a}) * (1.0f / ({b}))) * ({b}) : ({a}))")


# PyTorch's gradients at the kinks of the piecewise-linear activations (hardtanh, relu6, hardsigmoid,
# hardswish, hardshrink, softshrink): the gradient is that of the flat piece at a boundary (clamp's is
# the slope's). A NaN input gets what the formulas of PyTorch's scalar kernels give it (its vectorised
# kernels differ there, and disagree with each other)
def _hardtanh_grad(grad, input, min_val, max_val):
    return where(logical_or(le(input, min_val), ge(input, max_val)), 0.0, grad)


def _with_parameter(prim, input, value):
    """Binary primitive ``prim`` of floating tensor ``input`` and the op's parameter ``value`` (a Python
    number, taken in input's dtype): the one-parameter activations' forward, one call."""
    if value.__class__ is not float:
        if value.__class__ is bool or not isinstance(value, (int, float)):
            raise DTypeError(f"{prim}: expected a number, got {type(value).__name__}")
        value = float(value)
    return wrap(primitives(input).binary(prim, input._data, value, input.dtype), input._device)


def _shrink_grad(grad, input, lambd):
    return where(logical_and(ge(input, -lambd), le(input, lambd)), 0.0, grad)


@op(
    "hardtanh",
    plain="scalars",
    dtypes=NUMBERS,
    doc="input clamped to [min_val, max_val].",
    node="HardtanhBackward0",
    method=False,
    inplace=True,
    functional="inplace",
    grads={"input": _hardtanh_grad},
)
def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    check_tensor("hardtanh", "input", input)
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    return wrap(primitives(input).clamp(input._data, min_val, max_val), input._device)


@op(
    "relu6",
    plain="unary",
    dtypes=NUMBERS,
    doc="input clamped to [0, 6].",
    composite=True,
    method=False,
    inplace=True,
    functional="inplace",
)
def relu6(input: Tensor) -> Tensor:
    return hardtanh(input, 0.0, 6.0)


_ONE_SIXTH = 0.1666666716337204  # PyTorch's hardsigmoid gradient: 1/6 rounded to float32, in every dtype


@op(
    "hardsigmoid",
    dtypes=FLOATING,
    doc="relu6(input + 3) / 6.",
    node="HardsigmoidBackward0",
    method=False,
    inplace=True,
    functional="inplace",
    grads={"input": lambda grad, input: where(logical_and(gt(input, -3.0), lt(input, 3.0)), grad * _ONE_SIXTH, 0.0)},
)
def hardsigmoid(input: Tensor) -> Tensor:
    check_float("hardsigmoid", "input", input)
    return _float_unary("hardsigmoid", input)  # the half types in float32, as PyTorch's kernels


def _hardswish_grad(grad, input):
    slope = where(lt(input, 3.0), grad * (input / 3.0 + 0.5), grad)
    return where(le(input, -3.0), 0.0, slope)


@op(
    "hardswish",
    dtypes=FLOATING,
    doc="input * relu6(input + 3) / 6.",
    node="HardswishBackward0",
    method=False,
    inplace=True,
    functional="inplace",
    grads={"input": _hardswish_grad},
)
def hardswish(input: Tensor) -> Tensor:
    check_float("hardswish", "input", input)
    # PyTorch's order, x * relu6(x + 3) then / 6: the product overflows where x is near float's limit;
    # the half types in float32, as PyTorch's kernels
    return _float_unary("hardswish", input)


lowering("unary", "hardswish", onnx="HardSwish")


# softsign and tanhshrink are compositions in PyTorch (their nodes are those of the last op), and a
# primitive each here
@op(
    "softsign",
    doc="input / (1 + |input|).",
    node="DivBackward0",
    dtypes=NUMBERS,
    method=False,
    functional=True,
    grads={"input": lambda grad, input: grad / ((abs(input) + 1) * (abs(input) + 1))},
)
def softsign(input: Tensor) -> Tensor:
    check_tensor("softsign", "input", input)
    if input.dtype.itemsize == 2:  # PyTorch rounds each step to the half type: the same steps here
        return input / (abs(input) + 1)
    return _float_unary("softsign", input)


lowering("unary", "softsign", onnx="Softsign")


@op(
    "tanhshrink",
    doc="input - tanh(input).",
    node="SubBackward0",
    dtypes=NUMBERS,
    method=False,
    functional=True,
    grads={"input": lambda grad, input: grad * tanh(input) * tanh(input)},
)
def tanhshrink(input: Tensor) -> Tensor:
    check_tensor("tanhshrink", "input", input)
    if input.dtype.itemsize == 2:  # PyTorch rounds tanh to the half type first: the same steps here
        return input - tanh(input)
    return _float_unary("tanhshrink", input)


@op(
    "threshold",
    plain="scalars",
    dtypes=NUMBERS,
    doc="input where input > threshold, value elsewhere.",
    node="ThresholdBackward0",
    method=False,
    inplace=True,
    functional="inplace",
    grads={"input": lambda grad, input, threshold: where(le(input, threshold), 0.0, grad)},
)
def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    check_tensor("threshold", "input", input)
    threshold, value = scalar_for(input.dtype, threshold), scalar_for(input.dtype, value)
    # (a NaN input stays, as in PyTorch)
    return select(binary("le", input, threshold, name="threshold"), value, input)


def _prelu_weight(input, weight):
    """weight shaped to broadcast over input's channels (dim 1)."""
    n = weight.numel()
    return weight.reshape((n,) + (1,) * (input.ndim - 2)) if n > 1 and input.ndim > 2 else weight


# At 0, PyTorch's first derivatives are the negative side's (weight for input, input = 0 for weight) and
# its second derivatives the positive side's (0): the formulas read weight and input below 0 only, and
# input's slope at 0 alone is the constant weight.
def _prelu_grad_input(grad, input, weight):
    weight = _prelu_weight(input, weight)
    return where(gt(input, 0), grad, where(lt(input, 0), grad * weight, grad * weight.detach()))


def _prelu_grad_weight(grad, input, weight):
    # input * grad where input < 0, summed over everything but the channels
    per_element = where(lt(input, 0), input * grad, 0.0)
    if weight.numel() == 1:
        return per_element.sum().reshape(weight.shape)
    return per_element.sum(tuple(d for d in range(input.ndim) if d != 1)).reshape(weight.shape)


@op(
    "prelu",
    plain="binary_scalars",
    dtypes=FLOATING.one_dtype("input", "weight"),
    doc="input where positive, weight * input elsewhere; weight has 1 or input.shape[1] elements.",
    node="PreluKernelBackward0",
    functional=True,
    grads={"input": _prelu_grad_input, "weight": _prelu_grad_weight},
)
def prelu(input: Tensor, weight: Tensor) -> Tensor:
    check_tensor("prelu", "input", input)
    if weight.__class__ is not Tensor:
        raise DTypeError(f"prelu: weight must be a Tensor, got {type(weight).__name__}")
    x, w = input._data, weight._data
    n, ndim = w.size, x.ndim
    if w.ndim > 1 or n not in (1, x.shape[1] if ndim >= 2 else 1):
        raise ShapeError(
            f"prelu: weight of shape {fmt_shape(weight.shape)} must have 1 element or one per channel "
            f"(input.shape[1]) of input of shape {fmt_shape(input.shape)}"
        )
    dev = check_same_device("prelu", input, weight)
    bk, d = primitives(input), input.dtype
    if n > 1 and ndim > 2:  # one weight per channel (dim 1), broadcast over the dims after it
        w = bk.view(bk.contiguous(w), (n,) + (1,) * (ndim - 2))
    # one pass (a NaN stays NaN: it is not > 0, and NaN * weight is NaN)
    return wrap(bk.binary("prelu", x, w, d), dev)


lowering("binary", "prelu", onnx="PRelu", c="(({a}) > 0.0f ? ({a}) : ({b}) * ({a}))")


def _tensor_pair(name, input, other):
    """Both operands as tensors (a Python number on the other's device), for ops that need masks of each."""
    if input.__class__ is not Tensor and other.__class__ is not Tensor:
        raise DTypeError(f"{name}: expected at least one Tensor operand")
    like = input if input.__class__ is Tensor else other
    return as_tensor_operand(input, name, like), as_tensor_operand(other, name, like)


@op(
    "fmod",
    plain="binary",
    doc="The remainder of input / other with the dividend's sign (C's fmod).",
    node="FmodBackward0",
    inplace=True,
    grads={
        "input": lambda grad: grad,
        "other": lambda grad, input, other: -grad * div(input, other, rounding_mode="trunc"),
    },
)
def fmod(input: Tensor, other: Tensor | Number) -> Tensor:
    check_tensor("fmod", "input", input)
    # C's fmod itself, exact: derived from remainder it lost the dividend where one divisor step
    # rounds (fmod(-0.001, 1e5) in float32 was 0)
    return binary("fmod", input, other, name="fmod")


def _xlogy_grad_input(grad, input, other):
    # PyTorch's: xlogy(grad, other), 0 where input is 0 and other <= 0
    other = as_tensor_operand(other, "xlogy", grad)
    input = as_tensor_operand(input, "xlogy", grad)
    return where(logical_and(eq(input, 0), le(other, 0)), 0.0, grad * log(other))


@op(
    "xlogy",
    plain="binary",
    doc="input * log(other), 0 where input is 0 (unless other is NaN).",
    node="XlogyBackward0",
    inplace=True,
    grads={"input": _xlogy_grad_input, "other": lambda grad, input, other: grad * input / other},
)
def xlogy(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    x, y = _tensor_pair("xlogy", input, other)
    return binary("xlogy", x, y, dtype=_float_dtype(x, y), name="xlogy")


@op(
    "heaviside",
    plain="binary_tensors",
    doc="0 where input < 0, values where input == 0, 1 where input > 0.",
    composite=True,
    inplace=True,
)
def heaviside(input: Tensor, values: Tensor) -> Tensor:
    check_tensor("heaviside", "input", input)
    check_tensor("heaviside", "values", values)
    if values.dtype is not input.dtype:
        raise UnsupportedDTypeError(f"heaviside: input ({input.dtype}) and values ({values.dtype}) must have one dtype")
    check_same_device("heaviside", input, values)
    # over the primitives (PyTorch has no derivative for it: nothing to record); one pass for floats
    bk, x, d = primitives(input), input._data, input.dtype
    try:
        if d.is_floating_point:
            return wrap(bk.binary("heaviside", x, values._data, d), input._device)
        step = bk.astype(bk.binary("gt", x, 0, d), d)
        return wrap(bk.where(bk.binary("eq", x, 0, d), values._data, step, d), input._device)
    except ValueError:
        raise ShapeError(
            f"heaviside: shapes {fmt_shape(input.shape)} and {fmt_shape(values.shape)} cannot be broadcast"
        ) from None


def _onnx_heaviside(w, a, b, dtype, out):
    x, values, zero = w.operand(a, dtype), w.operand(b, dtype), w.operand(0.0, dtype)
    step = w.cast(w.emit("Greater", [x, zero]), dtype.numpy)
    w.emit("Where", [w.emit("Equal", [x, zero]), values, step], [out])


lowering("binary", "heaviside", onnx=_onnx_heaviside, c="(({a}) == 0.0f ? ({b}) : (({a}) > 0.0f ? 1.0f : 0.0f))")


@op("float_power", plain="scalars", doc="input ** exponent computed in float64.", composite=True)
def float_power(input: Tensor | Number, exponent: Tensor | Number) -> Tensor:
    if input.__class__ is Tensor and exponent.__class__ in (int, float):
        # a Python exponent stays one: pow of a float64 tensor by it is float64 (no tensor to make of it);
        # the cast through the op only where it records (its gradient goes back to input's dtype)
        x = input.to(dtype=dt.float64) if needs_grad(input) else cast(input, dt.float64)
        return pow(x, float(exponent))
    x, y = _tensor_pair("float_power", input, exponent)
    return pow(x.to(dtype=dt.float64), y.to(dtype=dt.float64))


@op("signbit", plain="unary_any", doc="Whether the sign bit is set (true for -0.0 too).", composite=True)
def signbit(input: Tensor) -> Tensor:
    check_tensor("signbit", "input", input)
    # over the primitives (a bool result has no history to record): copysign reads the sign bit, of
    # -0.0 and of a NaN too, as PyTorch's signbit
    bk, x, d = primitives(input), input._data, input.dtype
    if not d.is_floating_point:
        return wrap(bk.binary("lt", x, 0, d), input._device)
    return wrap(bk.binary("lt", bk.binary("copysign", 1.0, x, d), 0.0, d), input._device)


@op(
    "hardshrink",
    plain="scalars",
    dtypes=FLOATING,
    doc="input where |input| > lambd, 0 elsewhere.",
    node="HardshrinkBackward0",
    functional=True,
    grads={"input": _shrink_grad},
)
def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    check_tensor("hardshrink", "input", input)
    return _with_parameter("hardshrink", input, lambd)  # (NaN is not inside: it stays, as in PyTorch)


def _onnx_hardshrink(w, a, b, dtype, out):
    x, lambd = w.operand(a, dtype), w.operand(b, dtype)
    inside = w.emit("LessOrEqual", [w.emit("Abs", [x]), lambd])
    w.emit("Where", [inside, w.operand(0.0, dtype), x], [out])


lowering("binary", "hardshrink", onnx=_onnx_hardshrink, c="(fabsf({a}) <= ({b}) ? 0.0f : ({a}))")


@op(
    "softshrink",
    plain="scalars",
    dtypes=FLOATING,
    doc="input - lambd above lambd, input + lambd below -lambd, 0 between.",
    node="SoftshrinkBackward0",
    grads={"input": _shrink_grad},
    function=False,
    method=False,
    functional=True,
)
def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    check_tensor("softshrink", "input", input)
    if lambd < 0:
        raise ValueError(f"softshrink: lambda must be greater or equal to 0, got {lambd}")
    # input - lambd above lambd, input + lambd below -lambd, 0 between (x - x); a NaN stays NaN, an
    # infinity infinite, as in PyTorch
    return _with_parameter("softshrink", input, lambd)


def _onnx_softshrink(w, a, b, dtype, out):
    x, lambd = w.operand(a, dtype), w.operand(b, dtype)
    below = w.emit(
        "Where", [w.emit("Less", [x, w.emit("Neg", [lambd])]), w.emit("Add", [x, lambd]), w.emit("Sub", [x, x])]
    )
    w.emit("Where", [w.emit("Greater", [x, lambd]), w.emit("Sub", [x, lambd]), below], [out])


lowering(
    "binary",
    "softshrink",
    onnx=_onnx_softshrink,
    c="(({a}) > ({b}) ? ({a}) - ({b}) : (({a}) < -({b}) ? ({a}) + ({b}) : ({a}) - ({a})))",
)


def _copysign_grad_input(grad, input, result):
    # PyTorch's: grad * result / input, 0 where input is 0 (no division by 0 in the branch left out)
    zero = eq(input, 0)
    return where(zero, 0.0, grad * (result / where(zero, 1.0, input)))


@op(
    "copysign",
    plain="binary",
    doc="The magnitude of input with the sign of other (a floating point result).",
    node=lambda input, other: "CopysignBackward0" if other.__class__ is Tensor else "CopysignBackward1",
    inplace=True,
    grads={"input": _copysign_grad_input, "other": lambda grad, other: _zeros_like(other)},
)
def copysign(input: Tensor, other: Tensor | Number) -> Tensor:
    check_tensor("copysign", "input", input)
    return binary("copysign", input, other, dtype=_float_dtype(input, other), name="copysign")


def _takes_input(name, input, other):
    """Where fmax (``ge``) or fmin (``le``) takes input: where it wins or ties, or other is NaN (as
    PyTorch's gradient, which gives all of a tie to input), over the primitives."""
    return binary("logical_or", binary(name, input, other), binary("ne", other, other))


def _nan_ignoring(name, input, other):
    """fmax or fmin: one primitive (floating results; integers and bools have no NaN, so theirs is the
    maximum or minimum)."""
    check_tensor(name, "input", input)
    check_tensor(name, "other", other)
    dtype = result_type(input, other)
    prim = name if dtype.is_floating_point else {"fmax": "maximum", "fmin": "minimum"}[name]
    return binary(prim, input, other, dtype=dtype, name=name)


@op(
    "fmax",
    plain="binary_tensors",
    doc="The elementwise maximum, a NaN taken only where both are NaN.",
    node="FmaxBackward0",
    grads={
        "input": lambda grad, input, other: where(_takes_input("ge", input, other), grad, 0.0),
        "other": lambda grad, input, other: where(_takes_input("ge", input, other), 0.0, grad),
    },
)
def fmax(input: Tensor, other: Tensor) -> Tensor:
    return _nan_ignoring("fmax", input, other)


@op(
    "fmin",
    plain="binary_tensors",
    doc="The elementwise minimum, a NaN taken only where both are NaN.",
    node="FminBackward0",
    grads={
        "input": lambda grad, input, other: where(_takes_input("le", input, other), grad, 0.0),
        "other": lambda grad, input, other: where(_takes_input("le", input, other), 0.0, grad),
    },
)
def fmin(input: Tensor, other: Tensor) -> Tensor:
    return _nan_ignoring("fmin", input, other)


@op("rsub", doc="other - alpha * input (sub with the operands swapped).", composite=True, method=False)
def rsub(input: Tensor | Number, other: Tensor | Number, *, alpha: Number = 1) -> Tensor:
    return sub(other, input, alpha=alpha)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("unary", onnx=lambda w, node, **params: w.unary(node, **params), c=lambda lower, node: lower.unary(node))
lowering("binary", onnx=lambda w, node, **params: w.binary(node, **params), c=lambda lower, node: lower.binary(node))
lowering("where", onnx=lambda w, node, **params: w.where(node, **params), c=lambda lower, node: lower.where(node))
lowering("clamp", onnx=lambda w, node, **params: w.clamp(node, **params), c=lambda lower, node: lower.clamp(node))
