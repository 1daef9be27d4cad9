"""The gamma-function family, erfinv and i0 for the CPU backend's ``unary``: lgamma, digamma, trigamma,
erfinv, i0.

Every function computes in float64 whatever the input's dtype (the caller casts back), with the same
algorithm as its functor in kernels/functors.cuh (``Lgamma``, ``Digamma``, ``Trigamma``, ``Erfinv``, ``I0``), so the two
backends agree to the last bits of their math libraries: shift the argument up with the recurrence
until the asymptotic (Stirling-type) series is accurate to float64, reflect negative arguments, and
polish erfinv's closed-form first guess with Halley steps. The special values follow PyTorch's.

``lgamma``, ``digamma``, ``trigamma``, ``erfinv`` and ``i0`` (what the unary table names) run those very functors
in the host module (``_C.host_special_unary``, built in every install): a float32/float64 array of the
input's dtype, each element computed in float64, about 1 us for a small array where the NumPy series
below take 50-90. The NumPy series (``*_reference``) stay the reference the native path is tested
against (tests/test_special_native.py) and the fallback of a pure-source checkout without ``_C``.
"""

import math

import numpy as np

from ..._native import _C

# The recurrences shift x up to here, where the asymptotic series below (to x^-14 and x^-15) is
# accurate to float64 rounding: the first term left out is below 1e-16 of the result from x = 10.
SHIFT_TO = 10.0

# B_2k / (2k) for k = 1..7 (digamma's series in 1/x^2) and B_2k for k = 1..7 (trigamma's), the
# Bernoulli numbers B_2 .. B_14 = 1/6, -1/30, 1/42, -1/30, 5/66, -691/2730, 7/6.
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)
_DIGAMMA_SERIES = tuple(b / (2 * (k + 1)) for k, b in enumerate(_BERNOULLI))


def _series(t, coefficients):
    """sum(c_k t^(k+1)) by Horner's rule (t = 1/x^2)."""
    acc = np.zeros_like(t)
    for c in reversed(coefficients):
        acc = (acc + c) * t
    return acc


# Stirling's series for lgamma: B_2k / (2k (2k - 1)) for k = 1..7
_STIRLING_SERIES = tuple(b / ((2 * k + 2) * (2 * k + 1)) for k, b in enumerate(_BERNOULLI))
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_LOG_PI = math.log(math.pi)


def lgamma_reference(x):
    """Shifted up to SHIFT_TO (dividing by the product of the shifts, one log), Stirling's series there;
    reflected below 0. Accurate to a few ulp of the terms: near the roots at 1 and 2 that is an
    absolute error of a few 1e-15, not a relative one (glibc's lgamma keeps those digits, but one
    Python call per element costs a hundred times this)."""
    x = np.asarray(x, np.float64)
    reflect = x < 0
    z = np.where(reflect, 1.0 - x, x)
    usable = np.isfinite(z)
    z = np.where(usable, z, SHIFT_TO)
    product = np.ones_like(z)
    low = z < SHIFT_TO
    while low.any():
        product[low] *= z[low]
        z[low] += 1.0
        low = z < SHIFT_TO
    inverse = 1.0 / z
    series = z * _series(inverse * inverse, _STIRLING_SERIES)  # sum_k c_k z^-(2k+1)
    result = (z - 0.5) * np.log(z) - z + _HALF_LOG_2PI + series - np.log(product)
    with np.errstate(divide="ignore"):
        # log(pi / |sin(pi x)|) without overflow; below 1e-8, sin(pi x) = pi x to float64 precision, and
        # taken so, as pi x itself would lose digits among the subnormal numbers
        log_sin = np.where(np.abs(x) < 1e-8, _LOG_PI + np.log(np.abs(x)), np.log(np.abs(_sin_pi(x))))
        reflected = _LOG_PI - log_sin - result
    result = np.where(reflect, reflected, result)
    pole = (x <= 0) & (x == np.floor(x))  # -inf included
    result = np.where(pole | (x == np.inf), np.inf, result)
    result = np.where((x == 1) | (x == 2), 0.0, result)  # exactly, as the roots' rounding would not give
    return np.where(np.isnan(x), np.nan, result)


def _positive_shifted(x, term):
    """(x shifted up to SHIFT_TO, sum of term(x + k) over the shifts) for x > 0, elementwise."""
    acc = np.zeros_like(x)
    x = x.copy()
    low = x < SHIFT_TO
    while low.any():
        acc[low] += term(x[low])
        x[low] += 1.0
        low = x < SHIFT_TO
    return x, acc


def _reflected_and_shifted(x, term):
    """The polygammas' start: (x as float64, x < 0, then ``_positive_shifted`` of the reflected argument
    1 - x where x < 0, x elsewhere, with 1 standing in where that is not finite and positive)."""
    x = np.asarray(x, np.float64)
    negative = x < 0
    z = np.where(negative, 1.0 - x, x)
    shifted, acc = _positive_shifted(np.where(np.isfinite(z) & (z > 0), z, 1.0), term)
    return x, negative, shifted, acc


def _tan_pi(x):
    """tan(pi x), reduced to x - round(x) in [-1/2, 1/2] first (exact), so that large |x| keeps its
    digits and tiny |x| is not rounded onto a neighbouring integer."""
    return np.tan(math.pi * (x - np.round(x)))


def _sin_pi(x):
    return np.sin(math.pi * (x - 2.0 * np.round(0.5 * x)))


def digamma_reference(x):
    # psi(x) = psi(1 - x) - pi / tan(pi x) for x < 0
    x, negative, shifted, acc = _reflected_and_shifted(x, lambda v: -1.0 / v)
    t = 1.0 / (shifted * shifted)
    result = acc + np.log(shifted) - 0.5 / shifted - _series(t, _DIGAMMA_SERIES)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.where(negative, result - math.pi / _tan_pi(x), result)
    result = np.where(x == np.inf, np.inf, result)
    result = np.where(x == 0, np.copysign(np.inf, -x), result)  # psi(+0) = -inf, psi(-0) = inf
    pole = (x < 0) & (x == np.floor(x))  # -inf included
    return np.where(pole | np.isnan(x), np.nan, result)


def trigamma_reference(x):
    # psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x) for x < 0
    x, negative, shifted, acc = _reflected_and_shifted(x, lambda v: 1.0 / (v * v))
    inverse = 1.0 / shifted
    t = inverse * inverse
    result = acc + inverse + 0.5 * t + inverse * _series(t, _BERNOULLI)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = _sin_pi(x)
        result = np.where(negative, math.pi * math.pi / (s * s) - result, result)
    result = np.where(x == np.inf, 0.0, result)
    pole = (x <= 0) & (x == np.floor(x)) & np.isfinite(x)
    result = np.where(pole, np.inf, result)
    return np.where(np.isnan(x) | (x == -np.inf), np.nan, result)


_erf64 = np.vectorize(math.erf, otypes=[np.float64])

# Winitzki's closed form for erfinv (about 2e-3 relative error) is the first guess; two Halley steps
# on erf(y) - z (cubic convergence: 1e-9, then below float64 rounding) take it to float64 rounding (a
# third changed no float32 result and float64 ones by 7e-15 at most, near +-1, where erf's slope
# vanishes: it was a third of the functor's time).
_WINITZKI_A = 0.147
_HALLEY_STEPS = 2
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erfinv_reference(x):
    z = np.asarray(x, np.float64)
    inside = np.abs(z) < 1
    zi = np.where(inside, z, 0.0)
    log_term = np.log1p(-zi * zi)
    first = 2.0 / (math.pi * _WINITZKI_A) + 0.5 * log_term
    y = np.copysign(np.sqrt(np.sqrt(first * first - log_term / _WINITZKI_A) - first), zi)
    for _ in range(_HALLEY_STEPS):
        f = _erf64(y) - zi
        slope = _TWO_OVER_SQRT_PI * np.exp(-y * y)
        y = y - f / (slope + y * f)
    result = np.where(z == 1, np.inf, np.where(z == -1, -np.inf, np.nan))
    return np.where(inside, y, result)


_BESSEL_ASYMPTOTIC_FROM = 20.0  # |x| from which the asymptotic series reaches float64 rounding
_BESSEL_ASYMPTOTIC_TERMS = 16
_EXP_OVERFLOW = {np.dtype(np.float32): math.log(np.finfo(np.float32).max), np.dtype(np.float64): 1024 * math.log(2.0)}


def i0_reference(x):
    """The modified Bessel function of the first kind of order 0: the power series sum_k (x^2/4)^k /
    (k!)^2 below |x| = 20 (every term positive: no cancellation), the asymptotic series e^|x| /
    sqrt(2 pi |x|) sum_k a_k / |x|^k above; inf where e^|x| overflows in x's dtype (float32 for the
    half types), as PyTorch's formula multiplies by it, and NaN at +-inf, as PyTorch's."""
    x = np.asarray(x)
    overflow = _EXP_OVERFLOW.get(x.dtype, _EXP_OVERFLOW[np.dtype(np.float32)])
    ax = np.abs(x.astype(np.float64))
    series_side = ax < _BESSEL_ASYMPTOTIC_FROM  # (a NaN takes the asymptotic side, and stays NaN)
    small = np.where(series_side, ax, 0.0)
    quarter_square = small * small / 4.0
    term = np.ones_like(small)
    total = term.copy()
    # terms fall below float64 rounding of the sum after about 1.75 |x| of them
    top = float(small.max()) if small.size else 0.0
    for k in range(1, int(1.75 * top) + 12):
        term = term * quarter_square / (k * k)
        total += term
    z = np.where(series_side, _BESSEL_ASYMPTOTIC_FROM, ax)
    inverse = 1.0 / z
    term = np.ones_like(z)
    series = term.copy()
    for k in range(1, _BESSEL_ASYMPTOTIC_TERMS):
        term = term * inverse * ((2 * k - 1) ** 2 / (8 * k))
        series += term
    with np.errstate(all="ignore"):  # (inf - inf at an infinite x: replaced by inf below)
        asymptotic = np.exp(z - 0.5 * np.log(2 * math.pi * z)) * series
    return np.where(ax == np.inf, np.nan, np.where(ax > overflow, np.inf, np.where(series_side, total, asymptotic)))


_native = getattr(_C, "host_special_unary", None)
_NATIVE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _native_or_reference(op, reference):
    """``op`` through the host module's functors for float32/float64 arrays (float64 for any other
    dtype, as the reference computes); the NumPy ``reference`` where there is no host module."""
    if _native is None:
        return reference

    def native(x):
        x = np.asarray(x)  # (not ascontiguousarray, which makes a 0-d array 1-d)
        if x.dtype not in _NATIVE_DTYPES:
            x = x.astype(np.float64)
        elif not x.flags.c_contiguous:
            x = x.copy(order="C")
        return _native(op, x)

    native.__name__ = native.__qualname__ = op
    native.__doc__ = reference.__doc__
    return native


lgamma = _native_or_reference("lgamma", lgamma_reference)
digamma = _native_or_reference("digamma", digamma_reference)
trigamma = _native_or_reference("trigamma", trigamma_reference)
erfinv = _native_or_reference("erfinv", erfinv_reference)
i0 = _native_or_reference("i0", i0_reference)
