"""The gamma-function family and erfinv: ``lgamma digamma polygamma mvlgamma erfinv`` (``adcuda.special``
has PyTorch's other names for them: gammaln, psi, multigammaln).

lgamma, digamma, polygamma(1, .) and erfinv are ``unary`` primitives of the elementwise family (CPU:
adcuda/backends/cpu/_special.py; CUDA: their functors in kernels/functors.cuh); polygamma of a higher
order is computed from the elementwise primitives as (-1)^(n+1) n! zeta(n+1, x): the recurrence
shifts x up until the Hurwitz zeta's asymptotic series is accurate, so it too runs on both backends.
"""

from __future__ import annotations

import math

from .. import dtypes as dt
from ..errors import DTypeError
from ..tensor import Tensor
from .common import cast
from .dtype_support import NUMBERS
from .elementwise import _float_unary, exp, mul
from .reduction import amin
from .registry import op

_SQRT_PI_INV_2 = math.sqrt(math.pi) / 2
_LOG_PI = math.log(math.pi)

# B_2k / (2k)! for k = 1..7: the Hurwitz zeta's asymptotic series (Euler-Maclaurin)
_BERNOULLI_2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)
_ZETA_SERIES = tuple(b / math.factorial(2 * (k + 1)) for k, b in enumerate(_BERNOULLI_2K))


@op(
    "lgamma",
    inplace=True,
    doc="The natural logarithm of |Gamma(input)|.",
    node="LgammaBackward0",
    grads={"input": lambda grad, input: grad * digamma(input)},
)
def lgamma(input: Tensor) -> Tensor:
    return _float_unary("lgamma", input)


@op(
    "digamma",
    inplace=True,
    doc="The logarithmic derivative of Gamma: d/dx lgamma(x).",
    node="DigammaBackward0",
    grads={"input": lambda grad, input: grad * polygamma(1, input)},
)
def digamma(input: Tensor) -> Tensor:
    return _float_unary("digamma", input)


def _hurwitz_zeta(s, x):
    """zeta(s, x) = sum_k (x + k)^-s for an integer s >= 3 and tensor x without poles, elementwise, from
    public ops on a detached x (it records nothing)."""
    threshold = 10.0 + s  # the series below (to x^-(s+13)) reaches float64 rounding from here
    lowest = float(amin(x)) if x.numel() else threshold
    shifts = max(0, math.ceil(threshold - lowest)) if math.isfinite(lowest) else 0
    total = x * 0
    for _ in range(shifts):
        low = x < threshold
        total = total + (x**-s) * low
        x = x + low
    inverse = 1 / x
    t = inverse * inverse
    series = x * 0
    rising = [s * math.prod(range(s + 1, s + 2 * k - 1)) for k in range(1, len(_ZETA_SERIES) + 1)]
    for c, r in zip(reversed(_ZETA_SERIES), reversed(rising)):
        series = (series + c * r) * t
    tail = x ** (1 - s) / (s - 1) + 0.5 * x**-s + series * x ** (1 - s)
    return total + tail


def _check_order(n):
    if n.__class__ is not int or n < 0:
        raise ValueError(f"polygamma(): n must be a non-negative integer, got {n!r}")


def _polygamma_method(self: Tensor, n: int) -> Tensor:
    return polygamma(n, self)  # Tensor.polygamma(n): self is the input


@op(
    "polygamma",
    doc="The n-th derivative of digamma: polygamma(n, input).",
    node="PolygammaBackward0",
    method=_polygamma_method,
    grads={"input": lambda grad, n, input: grad * polygamma(n + 1, input)},
)
def polygamma(n: int, input: Tensor) -> Tensor:
    _check_order(n)
    if input.__class__ is not Tensor:
        raise DTypeError(f"polygamma: expected a Tensor, got {type(input).__name__}")
    if n == 0:
        return _float_unary("digamma", input)
    if n == 1:
        return _float_unary("trigamma", input)
    x = input.detach()
    if not x.dtype.is_floating_point:
        x = cast(x, dt.default_float)
    pole = (x <= 0) & (x == x.floor())
    value = _hurwitz_zeta(n + 1, x.where(~pole, 1.0)) * ((-1) ** (n + 1) * math.factorial(n))
    return value.where(~pole, (-1) ** (n + 1) * math.inf)


@op(
    "mvlgamma",
    dtypes=NUMBERS,
    doc="The multivariate log-gamma function of dimension p, summed over its p lgamma terms.",
    composite=True,
)
def mvlgamma(input: Tensor, p: int) -> Tensor:
    if p.__class__ is not int or p < 1:
        raise ValueError(f"mvlgamma: p must be a positive integer, got {p!r}")
    if not input.dtype.is_floating_point:  # integers in the default float dtype, as PyTorch computes them
        input = input.to(dtype=dt.get_default_dtype())
    if bool((input <= (p - 1) / 2).any()):
        raise ValueError("All elements must be greater than (p-1)/2")
    total = lgamma(input)
    for j in range(1, p):
        total = total + lgamma(input - j / 2)
    return total + p * (p - 1) / 4 * _LOG_PI


@op(
    "erfinv",
    inplace=True,
    doc="The inverse error function on (-1, 1).",
    node="ErfinvBackward0",
    grads={"input": lambda grad, result: mul(grad, exp(result * result)) * _SQRT_PI_INV_2},
)
def erfinv(input: Tensor) -> Tensor:
    return _float_unary("erfinv", input)
