"""More of PyTorch's elementwise names (issue 27): the inverse trigonometric and hyperbolic functions,
erfc, atan2 and logaddexp2 with kernels of their own (the unary and binary primitives, functors in
``kernels/functors.cuh``), and deg2rad, rad2deg, sinc, isneginf, isposinf, ldexp and isin composed of
other ops. Integer and bool inputs of the float functions compute in float32, as PyTorch's do.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .. import dtypes as dt
from ..errors import DTypeError, UnsupportedError
from ..tensor import Tensor
from .common import check_tensor, result_type
from .dtype_support import NUMBERS
from .elementwise import (
    _classify,
    _float_dtype,
    _float_unary,
    binary,
    eq,
    exp,
    isinf,
    reciprocal,
    rsqrt,
    where,
)
from .registry import op

if TYPE_CHECKING:
    from ..types import Number

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LN2 = math.log(2.0)
_INF = float("inf")


# ------------------------------------------------------------------------------------------------
# inverse trigonometric and hyperbolic functions, erfc: PyTorch's gradient formulas
@op(
    "asin",
    inplace=("asin_", "arcsin_"),
    aliases=("arcsin",),
    doc="The inverse sine (NaN outside [-1, 1]).",
    node="AsinBackward0",
    grads={"input": lambda grad, input: grad * rsqrt(1 - input * input)},
)
def asin(input: Tensor) -> Tensor:
    return _float_unary("asin", input)


@op(
    "acos",
    inplace=("acos_", "arccos_"),
    aliases=("arccos",),
    doc="The inverse cosine (NaN outside [-1, 1]).",
    node="AcosBackward0",
    grads={"input": lambda grad, input: -grad * rsqrt(1 - input * input)},
)
def acos(input: Tensor) -> Tensor:
    return _float_unary("acos", input)


@op(
    "atan",
    inplace=("atan_", "arctan_"),
    aliases=("arctan",),
    doc="The inverse tangent.",
    node="AtanBackward0",
    grads={"input": lambda grad, input: grad / (input * input + 1)},
)
def atan(input: Tensor) -> Tensor:
    return _float_unary("atan", input)


@op(
    "asinh",
    inplace=("asinh_", "arcsinh_"),
    aliases=("arcsinh",),
    doc="The inverse hyperbolic sine.",
    node="AsinhBackward0",
    grads={"input": lambda grad, input: grad * rsqrt(input * input + 1)},
)
def asinh(input: Tensor) -> Tensor:
    return _float_unary("asinh", input)


@op(
    "acosh",
    inplace=("acosh_", "arccosh_"),
    aliases=("arccosh",),
    doc="The inverse hyperbolic cosine (NaN below 1).",
    node="AcoshBackward0",
    grads={"input": lambda grad, input: grad * rsqrt(input * input - 1)},
)
def acosh(input: Tensor) -> Tensor:
    return _float_unary("acosh", input)


@op(
    "atanh",
    inplace=("atanh_", "arctanh_"),
    aliases=("arctanh",),
    doc="The inverse hyperbolic tangent (+-inf at +-1, NaN beyond).",
    node="AtanhBackward0",
    grads={"input": lambda grad, input: grad / (1 - input * input)},
)
def atanh(input: Tensor) -> Tensor:
    return _float_unary("atanh", input)


@op(
    "erfc",
    inplace=True,
    doc="The complementary error function 1 - erf(input), accurate where erf(input) rounds to 1.",
    node="ErfcBackward0",
    grads={"input": lambda grad, input: grad * -_TWO_OVER_SQRT_PI * exp(-input * input)},
)
def erfc(input: Tensor) -> Tensor:
    return _float_unary("erfc", input)


# ------------------------------------------------------------------------------------------------
# binary
def _atan2_scale(input, other):
    # 1 / (input^2 + other^2), 0 at the origin (where PyTorch gives both gradients 0, not NaN)
    scale = reciprocal(input * input + other * other)
    return where(isinf(scale), 0.0, scale)


@op(
    "atan2",
    plain="binary_tensors",
    inplace=("atan2_", "arctan2_"),
    aliases=("arctan2",),
    doc="The angle of the point (other, input): atan(input / other) in the right quadrant.",
    node="Atan2Backward0",
    grads={
        "input": lambda grad, input, other: grad * other * _atan2_scale(input, other),
        "other": lambda grad, input, other: grad * -input * _atan2_scale(input, other),
    },
)
def atan2(input: Tensor, other: Tensor) -> Tensor:
    check_tensor("atan2", "input", input)
    check_tensor("atan2", "other", other)
    return binary("atan2", input, other, dtype=_float_dtype(input, other), name="atan2")


@op(
    "logaddexp2",
    plain="binary_tensors",
    doc="log2(2 ** input + 2 ** other), without overflow.",
    node="Logaddexp2Backward0",
    grads={
        "input": lambda grad, input, other: grad / (1 + 2.0 ** (other - input)),
        "other": lambda grad, input, other: grad / (1 + 2.0 ** (input - other)),
    },
)
def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
    check_tensor("logaddexp2", "input", input)
    check_tensor("logaddexp2", "other", other)
    if not (input.dtype.is_floating_point or other.dtype.is_floating_point):
        # PyTorch has no integer logaddexp2 (rather than computing it in float32, as logaddexp does)
        raise UnsupportedError(f"logaddexp2: not implemented for {input.dtype} and {other.dtype} operands")
    return binary("logaddexp2", input, other, dtype=_float_dtype(input, other), name="logaddexp2")


def _integer_binary(name, input, other):
    check_tensor(name, "input", input)
    check_tensor(name, "other", other)
    dtype = result_type(input, other)
    if dtype.category != dt.INTEGER:
        raise UnsupportedError(
            f"{name}: not defined for {input.dtype} and {other.dtype} operands (integer dtypes only)"
        )
    return binary(name, input, other, dtype=dtype, name=name)


@op(
    "gcd",
    plain="binary_any",
    inplace=True,
    doc="The greatest common divisor of integers, non-negative (gcd(0, 0) = 0).",
)
def gcd(input: Tensor, other: Tensor) -> Tensor:
    return _integer_binary("gcd", input, other)


@op(
    "lcm",
    plain="binary_any",
    inplace=True,
    doc="The least common multiple of integers, non-negative (0 where either is 0).",
)
def lcm(input: Tensor, other: Tensor) -> Tensor:
    return _integer_binary("lcm", input, other)


@op("ldexp", doc="input * 2 ** other, in a floating dtype.", composite=True, inplace=True)
def ldexp(input: Tensor, other: Tensor) -> Tensor:
    check_tensor("ldexp", "input", input)
    check_tensor("ldexp", "other", other)
    # PyTorch's definition, input * pow(2, other) (exact for integer exponents)
    return input * 2.0**other


# ------------------------------------------------------------------------------------------------
# composed of other ops
_DEG_TO_RAD = math.pi / 180.0
_RAD_TO_DEG = 180.0 / math.pi


@op("deg2rad", doc="Degrees to radians: input * pi / 180.", composite=True, inplace=True)
def deg2rad(input: Tensor) -> Tensor:
    check_tensor("deg2rad", "input", input)
    return input * _DEG_TO_RAD


@op("rad2deg", doc="Radians to degrees: input * 180 / pi.", composite=True, inplace=True)
def rad2deg(input: Tensor) -> Tensor:
    check_tensor("rad2deg", "input", input)
    return input * _RAD_TO_DEG


def _sinc_grad(grad, input):
    x = input * math.pi
    # d/dx sin(pi x) / (pi x) = (pi x cos(pi x) - sin(pi x)) / (pi x^2), 0 at 0 as PyTorch's
    # (no safe denominator: PyTorch's second derivative at 0 is NaN, through 0 / 0, and so is this one)
    return where(eq(input, 0), 0.0, grad * (x * x.cos() - x.sin()) / (input * input * math.pi))


@op("sinc", inplace=True, doc="sin(pi input) / (pi input), 1 at 0.", node="SincBackward0", grads={"input": _sinc_grad})
def sinc(input: Tensor) -> Tensor:
    check_tensor("sinc", "input", input)
    # one primitive (float16 and bfloat16 computed in float32, as PyTorch's: pi * 65504 overflows float16)
    return _float_unary("sinc", input)


@op("isposinf", plain="unary_any", doc="Whether each element is +inf.")
def isposinf(input: Tensor) -> Tensor:
    return _classify("isposinf", input, False, lambda bk, x, d: bk.binary("eq", x, _INF, d))


@op("isneginf", plain="unary_any", doc="Whether each element is -inf.")
def isneginf(input: Tensor) -> Tensor:
    return _classify("isneginf", input, False, lambda bk, x, d: bk.binary("eq", x, -_INF, d))


@op(
    "isin",
    dtypes=NUMBERS.of_each("elements", "test_elements"),
    doc="Whether each element of elements is among test_elements.",
    composite=True,
    method=False,
)
def isin(
    elements: Tensor | Number,
    test_elements: Tensor | Number,
    *,
    assume_unique: bool = False,
    invert: bool = False,
) -> Tensor:
    if elements.__class__ is not Tensor and test_elements.__class__ is not Tensor:
        raise DTypeError("isin: expected at least one Tensor of elements and test_elements")
    if test_elements.__class__ is not Tensor:
        found = eq(elements, test_elements)
    elif elements.__class__ is not Tensor:
        found = eq(test_elements, elements).any()
    else:
        # every element against every test element: (elements..., 1) == (n,), then any over the last dim
        found = eq(elements.unsqueeze(-1), test_elements.reshape(-1)).any(-1)
    return found.logical_not() if invert else found
