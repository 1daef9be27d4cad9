"""The gamma-function family and erfinv: ``lgamma digamma polygamma mvlgamma erfinv`` (``adcuda.special``
has PyTorch's other names for them: gammaln, psi, multigammaln), ``xlog1py`` (``adcuda.special``'s
only); the modified Bessel function ``i0``; ``frexp``, composed of elementwise ops, so it runs on every
backend; and the signal windows ``hann_window hamming_window bartlett_window blackman_window
kaiser_window``.

lgamma, digamma, polygamma(1, .), erfinv and i0 are ``unary`` primitives of the elementwise family (CPU:
adcuda/backends/cpu/_special.py; CUDA: their functors in kernels/functors.cuh); polygamma of a higher
order is computed from the elementwise primitives as (-1)^(n+1) n! zeta(n+1, x): the recurrence
shifts x up until the Hurwitz zeta's asymptotic series is accurate, so it too runs on both backends.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import TYPE_CHECKING
from typing import cast as cast_type

import numpy as np  # the CPU's frexp: NumPy's, both parts in one call

from .. import dtypes as dt
from ..autograd.graph import needs_grad
from ..backends import cpu as _cpu
from ..device import CPU as _CPU
from ..errors import DTypeError, UnsupportedError
from ..tensor import Tensor, primitives
from .common import as_tensor_operand, cast, float_result_type, wrap
from .dtype_support import NUMBERS
from .elementwise import _float_unary, _tensor_pair, binary, exp, log1p, mul, select, unary, where
from .factories import host_dtype, new_tensor
from .reduce import amin
from .registry import op

if TYPE_CHECKING:
    from ..backends.seam import CPUArray
    from ..types import Device, DType, Number

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
    # the domain check and, with nothing to record, the sum over the primitives (each op of it would
    # pay a dispatch)
    bk, x, d = primitives(input), input._data, input.dtype
    if bk.to_numpy(bk.reduce("any", bk.binary("le", x, (p - 1) / 2, d), None, False)).item():
        raise ValueError("All elements must be greater than (p-1)/2")
    constant = p * (p - 1) / 4 * _LOG_PI
    if not needs_grad(input):
        total = bk.unary("lgamma", x)
        for j in range(1, p):
            total = bk.binary("add", total, bk.unary("lgamma", bk.binary("sub", x, j / 2, d)), d)
        return Tensor._make(bk.binary("add", total, constant, d), input._device)
    total = lgamma(input)
    for j in range(1, p):
        total = total + lgamma(input - j / 2)
    return total + constant


@op(
    "erfinv",
    inplace=True,
    doc="The inverse error function on (-1, 1).",
    node="ErfinvBackward0",
    grads={"input": lambda grad, result: mul(grad, exp(result * result)) * _SQRT_PI_INV_2},
)
def erfinv(input: Tensor) -> Tensor:
    return _float_unary("erfinv", input)


# ------------------------------------------------------------------------------------------------
# the modified Bessel function of the first kind of order 1: i0's derivative
_BESSEL_ASYMPTOTIC_FROM = 20.0  # |x| from which the asymptotic series reaches float64 rounding
_BESSEL_ASYMPTOTIC_TERMS = 16
_EXP_OVERFLOW_32 = math.log(3.4028234663852886e38)  # above it, e^x is inf in float32
_EXP_OVERFLOW_64 = math.log(1.7976931348623157e308)


def _bessel_i1(x):
    """I_1(x) elementwise in float64, of public ops (differentiable in x): the power series sum_k
    (x/2)^(2k+1) / (k! (k+1)!) below 20 (every term of one sign: no cancellation), the asymptotic
    series e^x / sqrt(2 pi x) sum_k (-1)^k a_k(1) / x^k above (i0's are kernels/functors.cuh's)."""
    ax = x.abs()
    large = ax >= _BESSEL_ASYMPTOTIC_FROM
    small = x.where(~large, 0.0)  # the series in x itself (odd): smooth at 0
    top = float(small.abs().amax()) if small.numel() else 0.0
    quarter_square = small * small / 4
    term = small / 2
    total = term
    # terms fall below float64 rounding of the sum after about 1.75 |x| of them
    for k in range(1, int(1.75 * top) + 12):
        term = term * quarter_square / (k * (k + 1))
        total = total + term
    z = ax.where(large, _BESSEL_ASYMPTOTIC_FROM)
    inverse = 1 / z
    term = z * 0 + 1
    series = term
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS):
        term = term * inverse * (((2 * k - 1) ** 2 - 4) / (8 * k))
        series = series + term
    asymptotic = (z - 0.5 * (2 * math.pi * z).log()).exp() * series  # e^z / sqrt(2 pi z) without overflow
    return (asymptotic * x.sign()).where(large, total)


def _float64_of(input):
    if input.dtype is dt.float64:
        return input
    return input.to(dtype=dt.float64)


def _result_float(input):
    return input.dtype if input.dtype.is_floating_point else dt.default_float


def _overflowed(value, x, dtype):
    """PyTorch's formulas multiply by e^|x| in float32 (float64 for float64): inf where that overflows."""
    overflow = _EXP_OVERFLOW_64 if dtype is dt.float64 else _EXP_OVERFLOW_32
    return value.where(x.abs() <= overflow, where(value < 0, -math.inf, math.inf))


def _i0_grad(grad, input):
    x = _float64_of(input)
    return grad * _overflowed(_bessel_i1(x), x, input.dtype).to(dtype=_result_float(input))


@op(
    "i0",
    inplace=True,
    doc="The modified Bessel function of the first kind of order 0.",
    node="I0Backward0",
    grads={"input": _i0_grad},
)
def i0(input: Tensor) -> Tensor:
    return _float_unary("i0", input)


# ------------------------------------------------------------------------------------------------
# frexp
frexp_result = namedtuple("frexp", ["mantissa", "exponent"])
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


@op(
    "frexp",
    doc="input as mantissa * 2**exponent: mantissa in [0.5, 1) (or 0, inf, NaN), int32 exponent.",
    composite=True,
)
def frexp(input: Tensor) -> tuple[Tensor, Tensor]:
    if not input.dtype.is_floating_point:
        raise UnsupportedError(f"frexp: only supports floating-point dtypes, got {input.dtype}")
    # the C library's frexp, a unary primitive for each part (the exponent as a value of the input's
    # dtype, exact in each: at most 11 bits); the exponent has no gradient
    bk, x, d, device = primitives(input), input._data, input.dtype, input._device
    if bk is _cpu and (x.dtype is _F32 or x.dtype is _F64) and not needs_grad(input):
        # NumPy's frexp: the C library's, both parts and the int32 exponent in one call, where the
        # primitives and the cast were three (0 for an infinity or NaN, as the primitive gives it)
        mantissa, exponent = np.frexp(cast_type("CPUArray", x))
        return frexp_result(Tensor._make(mantissa, device), Tensor._make(exponent, device))
    exponent = bk.unary("frexp_exponent", x)
    exponent_int = Tensor._make(bk.astype(exponent, dt.int32), device)
    if not needs_grad(input):
        return frexp_result(Tensor._make(bk.unary("frexp_mantissa", x), device), exponent_int)
    # the mantissa through the ops, for its gradient (grad / 2^exponent): x / 2^(exponent - 1) / 2, exact,
    # where 2^(exponent - 1) is within the range of the input's dtype (2^exponent is not: 2^128 in float32)
    power = Tensor._make(bk.unary("exp2", bk.binary("sub", exponent, 1.0, d)), device)
    return frexp_result(input / power * 0.5, exponent_int)


# ------------------------------------------------------------------------------------------------
# signal windows (PyTorch's formulas, of arange in the window's dtype), computed over the forward
# helpers (``binary``, ``unary``): a window is a constant, no op of its formula needs dispatching
def _window(name, window_length, periodic, dtype, device, requires_grad, shape):
    """``shape(positions, n)`` for positions 0..window_length-1 of a symmetric window of n points (n =
    window_length + 1 when periodic: its last point is the one left out)."""
    dtype = dt.default_float if dtype is None else dt.as_dtype(dtype, name)
    if not dtype.is_floating_point:
        raise UnsupportedError(f"{name}: expects a floating point dtype, got {dtype}")
    if window_length.__class__ is not int or window_length < 0:
        raise ValueError(f"{name}: window_length must be a non-negative integer, got {window_length!r}")

    def count(bk, d):  # arange's work without its dispatch and argument checks (an integer count, step 1)
        return bk.arange(0, window_length, 1, d)

    positions = new_tensor(name, count, (window_length,), dtype, device, False)
    if window_length <= 1:
        window = binary("add", binary("mul", positions, 0.0), 1.0)
    else:
        window = shape(positions, window_length + 1 if periodic else window_length)
    return window.requires_grad_(requires_grad) if requires_grad else window


def _cosine_sum(*coefficients):
    """a0 - a1 cos(2 pi k / (n - 1)) + a2 cos(4 pi k / (n - 1)) - ...: the cosine-sum windows."""

    def shape(k, n):
        step = binary("mul", k, 2 * math.pi / (n - 1))
        out = coefficients[0]
        for i, a in enumerate(coefficients[1:], 1):
            angle = step if i == 1 else binary("mul", step, float(i))
            out = binary("add", binary("mul", unary("cos", angle), (-1) ** i * a), out)
        return out

    return shape


@op("hann_window", doc="The Hann window of window_length points (periodic: for spectra).", method=False)
def hann_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad, _cosine_sum(0.5, 0.5))


@op("hamming_window", doc="The Hamming window alpha - beta cos(2 pi n / (N - 1)).", method=False)
def hamming_window(
    window_length: int,
    periodic: bool = True,
    alpha: float = 0.54,
    beta: float = 0.46,
    *,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad, _cosine_sum(alpha, beta))


@op(
    "blackman_window",
    doc="The Blackman window 0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1)).",
    method=False,
)
def blackman_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    shape = _cosine_sum(0.42, 0.5, 0.08)
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, shape)


def _bartlett(k, n):
    return binary("sub", 1.0, unary("abs", binary("sub", binary("mul", k, 2 / (n - 1)), 1.0)))


@op("bartlett_window", doc="The triangular Bartlett window 1 - |2n / (N - 1) - 1|.", method=False)
def bartlett_window(
    window_length: int,
    periodic: bool = True,
    *,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, _bartlett)


def _kaiser_ratio(bk, a, n, d):
    """The window's argument 2k / (n - 1) - 1 of positions ``a`` on backend ``bk``, in dtype ``d``."""
    return bk.binary("sub", bk.binary("mul", a, 2 / (n - 1), d), 1.0, d)


def _kaiser_direct(window_length, periodic=True, beta=12.0, dtype=None, device=None, requires_grad=False):
    """kaiser_window's direct lane (registry.py's ``direct=``): the forward's values on the CPU, without
    ``_window``'s tensor of positions and the backend's dispatch of each step, for a CPU float32/float64
    window of 2 to 256 points (the window's host functor: no NumPy loop that can warn); else None."""
    d = host_dtype(dtype, device, requires_grad)
    if (
        d is not _F32
        and d is not _F64
        or window_length.__class__ is not int
        or not 1 < window_length <= 256
        or periodic.__class__ is not bool
        or beta.__class__ not in (float, int)
    ):
        return None
    # (the backend's arange and two binary ops with a scalar, as NumPy loops: each rounding the same)
    ratio = np.arange(window_length, dtype=np.float64).astype(d)
    np.multiply(ratio, d.type(2 / (window_length + periodic - 1)), out=ratio)
    np.subtract(ratio, d.type(1.0), out=ratio)
    return wrap(_cpu.binary("kaiser_window", ratio, float(beta), dtype or dt.default_float), _CPU)


@op(
    "kaiser_window",
    doc="The Kaiser window i0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / i0(beta).",
    method=False,
    direct=_kaiser_direct,
)
def kaiser_window(
    window_length: int,
    periodic: bool = True,
    beta: float = 12.0,
    *,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    def shape(k, n):
        # over the primitives themselves: the ratio 2k / (n - 1) - 1, then the window of it, one pass
        bk, d = primitives(k), k.dtype
        return Tensor._make(bk.binary("kaiser_window", _kaiser_ratio(bk, k._data, n, d), float(beta), d), k._device)

    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, shape)


def _xlog1py_grad_input(grad, other):
    # log1p(other) where input is 0 too, as PyTorch's (only the value there is defined to be 0)
    return grad * log1p(as_tensor_operand(other, "xlog1py", grad))


@op(
    "xlog1py",
    doc="input * log1p(other), 0 where input is 0 (unless other is NaN).",
    node="SpecialXlog1PyBackward0",
    function=False,  # PyTorch has it as torch.special.xlog1py alone (adcuda/special.py)
    method=False,
    grads={
        "input": _xlog1py_grad_input,
        "other": lambda grad, input, other: grad * input / (other + 1),
    },
)
def xlog1py(input: Tensor | Number, other: Tensor | Number) -> Tensor:
    x, y = _tensor_pair("xlog1py", input, other)
    dtype = float_result_type(x, y)
    x, y = cast(x, dtype), cast(y, dtype)
    # exported through the primitives it calls (their lowerings: elementwise.py): it declares none itself
    product = binary("mul", x, unary("log1p", y), name="xlog1py")
    return select(binary("logical_and", binary("eq", x, 0.0), binary("eq", y, y), name="xlog1py"), 0.0, product)
