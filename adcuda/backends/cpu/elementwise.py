"""The CPU backend's elementwise primitives (kernels/elementwise_unary.cu and elementwise_binary.cu on
CUDA): ``unary binary unary_backward where clamp`` and the op tables they take their ``op`` names from.
The unary ones (``UNARY_OPS``, ``UNARY_BACKWARD_OPS``) are made from the declarative table of both
backends, adcuda/backends/elementwise_table.py: this module holds only the formulas its rows name."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import dtypes as dt
from ..._native import _C
from ...errors import DTypeError, InvalidArgumentError, UnsupportedDTypeError
from ..elementwise_table import FLOAT_BINARY, FLOAT_ONLY, UNARY
from ..memo import remember
from ..seam import DType, Scalar, Scratch, declared
from . import _special
from ._common import _F16, _F32, _F64, ArrayOrScalar, BackendArray, _compute, _finish, _fresh, _np_dtype

__all__ = ["UNARY_OPS", "UNARY_BACKWARD_OPS", "BINARY_OPS", "unary", "binary", "unary_backward", "where", "clamp"]


def _in_place_safe(fn):
    """``fn`` (which writes its temporaries in place) applied to a 0-d array through a 1-element one:
    NumPy turns 0-d results into scalars, which cannot be written in place."""

    def on_arrays(x):
        if isinstance(x, np.ndarray) and x.ndim == 0:
            return fn(x.reshape(1)).reshape(())
        return fn(x)

    on_arrays.__name__ = fn.__name__
    on_arrays.__doc__ = fn.__doc__
    return on_arrays


def _horner_(t, coefficients):
    """sum(c_i * t^i) for ``coefficients`` from the highest power down, in one buffer written in place
    (a temporary per step would cost NumPy an allocation per step)."""
    acc = t * coefficients[0]
    for c in coefficients[1:-1]:
        acc += c
        acc *= t
    acc += coefficients[-1]
    return acc


# erf(x) = tanh(x P(x^2) / Q(x^2)), P and Q of degree 3: atanh(erf(x)) / x is smooth, and tanh takes
# the saturation, so a much shorter rational than one for erf itself does; NumPy's tanh is one SIMD
# pass. Fitted for this backend by iteratively reweighted least squares on erf's relative error (3e-9
# in float64); evaluated in float32 its rounding dominates, about 3 ulp (3.2e-7 at most, as the 6/5
# rational it replaced). Beyond |x| = 5 erf is +-1 to float32 precision: x is clamped there, so
# that x^2 stays finite. Coefficients from the highest power down.
_ERF_P = (0.002178269265824373, 0.04264643124888671, 0.27980657739233034, 1.1283791708459951)
_ERF_Q = (0.0003249216250365561, 0.023689835331644774, 0.15689235506657712, 1.0)
_ERF_CLAMP = 5.0


@_in_place_safe
def _erf(x):
    if x.dtype == np.float64:
        return _erf64(x)
    # a dozen in-place passes over the array and no np.where (a select on a data-dependent mask costs
    # NumPy a mispredicted branch per element): the exact GELU spends its time here
    z = np.clip(x, -_ERF_CLAMP, _ERF_CLAMP)
    z2 = z * z
    argument = _horner_(z2, _ERF_P)
    argument /= _horner_(z2, _ERF_Q)
    argument *= z
    return np.tanh(argument, out=argument)  # (|tanh| <= 1: no bound to restore)


_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _erf_of_new(z):
    """erf of ``z``, a new array (gelu's x / sqrt 2, in x's layout): a small row-major one takes the host module's loop
    over erf's functor, as ``unary("erf")`` does (the dozen NumPy passes of ``_erf`` were most of
    gelu's time on a few dozen elements), a large one ``_erf``."""
    if (
        z.__class__ is np.ndarray  # (a NumPy scalar, e.g. of 0-d arithmetic, takes the NumPy formula)
        and z.size <= _HOST_MAX
        and (z.dtype is _F32 or z.dtype is _F64)
        and z.flags.c_contiguous
        and _C is not None
    ):
        return _C.host_unary(_HOST_INDEX["erf"], z)
    return _erf(z)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


_ZEROS: dict[np.dtype, np.ndarray] = {}


def _zero(dtype):
    """A 0-d zero of ``dtype`` (relu's other operand: a Python 0 costs NumPy a conversion per call)."""
    zero = _ZEROS.get(dtype)
    if zero is None:
        zero = _ZEROS[dtype] = np.zeros((), dtype)
    return zero


_ZERO_F32, _ZERO_F64 = _zero(_F32), _zero(_F64)


def _sigmoid(x):
    # exp of a non-positive number only: no overflow warnings for large |x|
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def _sign(x):
    s = np.sign(x)
    if s.dtype.kind == "f":
        s = np.where(s == s, s, 0).astype(s.dtype, copy=False)  # PyTorch: sign(NaN) = 0
    return s


# gelu and gelu_tanh of float32 arrays on a CPU with AVX2 and FMA: the host module's loops over the CUDA
# functors' formulas (kernels/host/elementwise_avx2.cpp; erf as ``_erf``), one pass where NumPy makes nine
# to fifteen (gelu_tanh's backward on the GPT step's 32x64x384 activations: 3 times faster); the NumPy
# formulas elsewhere, and the reference those loops are tested against. Chosen at import, from what the
# CPU says it has.
_GELU_AVX2 = _C is not None and _C.host_has_avx2()


def _row_major_f32(*arrays):
    """Whether every array (None aside) is a row-major float32 ndarray: what the AVX2 loops take."""
    return all(a is None or (a.__class__ is np.ndarray and a.dtype is _F32 and a.flags.c_contiguous) for a in arrays)


@_in_place_safe
def _gelu(x):
    if _GELU_AVX2 and _row_major_f32(x):
        y = np.empty(x.shape, _F32)
        _C.host_gelu(x, y)
        return y
    # x (1 + erf(x / sqrt 2)) / 2 in PyTorch's CPU order, in one buffer: its float32 kernel takes x
    # times (1 + erf) first, overflowing to inf above half of float32's largest value; its float64
    # one halves x first, and does not
    y = _erf_of_new(x * _INV_SQRT_2)
    y += 1.0
    if x.dtype == np.float64:
        y *= 0.5 * x
    else:
        y *= x
        y *= 0.5
    return y


_ERFC_OBJECT = np.frompyfunc(math.erfc, 1, 1)


def _erfc(x):
    # NumPy has no erfc, and 1 - erf(x) loses every digit once erf(x) rounds to 1 (x > 4 in float32,
    # where erfc is still 1e-8 and falls to 1e-45 by x = 10): the C library's erfc, element by element
    # in float64 (correctly rounded to float32 afterwards), is exact where a short rational is not
    return np.asarray(_ERFC_OBJECT(np.asarray(x, np.float64)), np.float64)


# The activations and hyperbolic functions PyTorch has one kernel for: one primitive each (composed of
# several ops, each call paid several dispatches), written as the compositions they replace were, so
# values and extremes are the same: no exp of a positive number where it could overflow.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _selu(x):
    negative = x <= 0
    # expm1 of the non-positive part only; NaN takes the linear part, as in PyTorch
    return np.where(negative, np.expm1(np.where(negative, x, 0)) * _SELU_ALPHA, x) * _SELU_SCALE


def _softplus_smooth(x):
    """log(1 + exp(x)) as log1p(exp(-|x|)) + max(x, 0): never exponentiates a positive number."""
    return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)


def _softplus(x):
    # beta 1, threshold 20 (softplus's defaults): linear above the threshold
    return np.where(x > 20, x, _softplus_smooth(x))


def _mish(x):
    return x * np.tanh(_softplus_smooth(x))


def _relu6_of_x_plus_3(x):
    """min(max(x + 3, 0), 6) in one buffer (a NaN stays NaN); np.clip costs microseconds more a call."""
    y = x + 3.0
    np.maximum(y, 0.0, out=y)
    np.minimum(y, 6.0, out=y)
    return y


@_in_place_safe
def _hardsigmoid(x):
    y = _relu6_of_x_plus_3(x)
    y /= 6.0
    return y


@_in_place_safe
def _hardswish(x):
    # PyTorch's order, x * relu6(x + 3) then / 6 (the half types already widened to float32)
    y = _relu6_of_x_plus_3(x)
    y *= x
    y /= 6.0
    return y


def _softsign(x):
    return x / (np.abs(x) + 1.0)


def _tanhshrink(x):
    return x - np.tanh(x)


def _logsigmoid(x):
    # min(x, 0) - log1p(exp(-|x|)): exact for very negative x, where log(sigmoid(x)) underflows
    return -_softplus_smooth(-x)


def _sinc(x):
    # sin(pi x) / (pi x) with pi x rounded to x's dtype first, as PyTorch's kernel; 1 at 0
    y = x * np.pi
    return np.where(x == 0, 1.0, np.sin(y) / y)


def _frac(x):
    return x - np.trunc(x)


def _logit(x):
    return np.log(x / (1.0 - x))


def _frexp_mantissa(x):
    return np.frexp(x)[0]


def _frexp_exponent(x):
    # 0 at an infinity or NaN, as the C library's frexp (and the functor) give it
    exponent = np.frexp(x)[1]
    return np.where(np.isfinite(x), exponent, 0).astype(x.dtype)


def _relu(x, out=None, scratch=None):
    return np.maximum(x, _zero(x.dtype), out=out)


def _gelu_tanh_inner(x, u):
    """c (x + 0.044715 x x x), rounded as written, into ``u``."""
    np.multiply(x, 0.044715, out=u)
    u *= x
    u *= x
    u += x
    u *= _SQRT_2_OVER_PI
    return u


def _gelu_tanh(x, out=None, scratch=None, inner=None):
    if _GELU_AVX2 and _row_major_f32(x, out, inner):
        y = np.empty(x.shape, _F32) if out is None else out
        _C.host_gelu_tanh(x, y, inner)
        return y
    # 0.5 x (1 + tanh(c (x + 0.044715 x^3))), rounded as written, in one scratch array and the result
    # (``out`` may be ``x``: x is read for the last time before it is written); with ``inner``, the
    # tanh's argument is kept there for the backward
    t = (scratch or _fresh)(x.shape, x.dtype, 0)
    np.tanh(_gelu_tanh_inner(x, t if inner is None else inner), out=t)
    t += 1.0
    y = np.multiply(x, 0.5, out=out)
    y *= t
    return y


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _silu(x):
    return x * _sigmoid(x)


def _unknown_op(family, op):
    return ValueError(f"{family}: unknown op '{op}'")


def _declared_error(check, *args):
    """The error primitive ``check``'s declaration (seam.declared) raises for ``args``, or None: the CPU's
    hot paths run the shared checks only once their fast path has failed."""
    try:
        check(*args)
    except Exception as error:
        return error
    return None


def unary(
    op: str,
    a: BackendArray,
    *,
    out: BackendArray | None = None,
    scratch: Scratch | None = None,
    inner: BackendArray | None = None,
) -> BackendArray:
    """``out`` and ``scratch`` (CPU only, seam.CPU_REPLAY_KEYWORDS): a float32/float64 array of ``a``'s
    shape and dtype to write the result into (it may be ``a``), and reusable temporaries; ``inner``
    (with ``out``, gelu_tanh only): an array of ``a``'s shape and dtype to keep tanh's argument in, for
    a backward given it (graph capture's replay)."""
    try:
        fn = UNARY_OPS[op]
    except KeyError:
        raise _declared_error(declared.unary, op, a) from None
    if inner is not None and (op not in _KEEPS_INNER or out is None):
        raise ValueError(f"unary: inner= is gelu_tanh's, with out=, not {op}'s")
    if out is not None:
        if inner is not None:
            return fn(a, out, scratch, inner)
        if op in UNARY_INTO:
            return fn(a, out, scratch)
        if fn.__class__ is np.ufunc:
            return fn(a, out=out)
        np.copyto(out, unary(op, a))
        return out
    x = a
    if x.dtype is not _F32:  # float32, the common case, has nothing to widen (0.1 us a call)
        x = _compute(a)
        if x.dtype.kind in "biu" and op in FLOAT_ONLY:
            x = x.astype(np.float64)
    # (NumPy's floating-point warnings, a NaN or inf cast into an integer included, are silenced by the
    # package's filter: no np.errstate, which would cost ~1 us a call)
    try:
        host = _HOST_INDEX.get(op)
        if (
            host is not None
            and x.__class__ is np.ndarray  # (a NumPy scalar, e.g. of 0-d arithmetic, takes NumPy's loop)
            and x.size <= _HOST_MAX
            and (x.dtype is _F32 or x.dtype is _F64)
            and x.flags.c_contiguous
        ):
            r = _C.host_unary(host, x)
        else:
            r = fn(x)
            if r.__class__ is not np.ndarray:
                r = np.asarray(r)  # (a NumPy scalar, of a 0-d array)
        if r.dtype is not a.dtype and r.dtype != a.dtype and op != "logical_not":  # (identity: the common case)
            r = r.astype(a.dtype)  # NaN and inf into integers: as the CUDA cast gives them
    except TypeError:  # NumPy has no loop for this dtype (neg of bool, bitwise_not of floats, ...)
        raise DTypeError(f"{op}: not defined for {a.dtype} arrays") from None
    return r


@_in_place_safe
def _gelu_grad(x):
    # 0.5 (1 + erf(x / sqrt 2)) + x / sqrt(2 pi) exp(-x^2 / 2), rounded as written, in two buffers
    cdf = _erf_of_new(x * _INV_SQRT_2)
    cdf += 1.0
    cdf *= 0.5
    density = x * x
    density *= -0.5
    np.exp(density, out=density)
    density *= x * _INV_SQRT_2PI
    cdf += density
    return cdf


def _times_(fresh, g):
    """``g * fresh`` written into ``fresh`` (a temporary of the backward's own) where the shapes and
    dtypes allow it."""
    if fresh.shape == np.shape(g) and fresh.dtype == np.result_type(fresh, g):
        fresh *= g
        return fresh
    return g * fresh


def _gelu_tanh_grad(x, scratch, inner=None):
    """s + 2 x s (1 - s) c (1 + 3 * 0.044715 x^2), rounded as written, in ``scratch`` arrays 0 (the
    result), 1 and 2. s = sigmoid(2u) = (1 + tanh u) / 2 keeps the tails precise (1 + tanh u cancels
    for u << 0). ``inner``: u as the forward kept it, read instead of computed again."""
    if inner is None:
        s = _gelu_tanh_inner(x, scratch(x.shape, x.dtype, 1))
        s *= -2.0
    else:
        s = np.multiply(inner, -2.0, out=scratch(x.shape, x.dtype, 1))
    np.exp(s, out=s)
    s += 1.0
    np.divide(1.0, s, out=s)
    slope = np.multiply(x, 2.0, out=scratch(x.shape, x.dtype, 0))
    slope *= s
    rest = np.subtract(1.0, s, out=scratch(x.shape, x.dtype, 2))
    slope *= rest
    slope *= _SQRT_2_OVER_PI
    np.multiply(x, 3 * 0.044715, out=rest)
    rest *= x
    rest += 1.0
    slope *= rest
    slope += s
    return slope


def _relu_backward(x, y, g, out=None, scratch=None):
    # PyTorch's threshold_backward: 0 where the output is <= 0, the gradient elsewhere (a NaN too)
    at_most_zero = np.less_equal(x, 0, out=None if scratch is None else scratch(x.shape, np.bool_, 0))
    keep = np.logical_not(at_most_zero, out=None if scratch is None else at_most_zero)
    return np.multiply(g, keep, out=out)


def _gelu_tanh_backward(x, y, g, out=None, scratch=None, inner=None):
    if _GELU_AVX2 and np.shape(g) == x.shape and _row_major_f32(x, g, out, inner):
        result = np.empty(x.shape, _F32) if out is None else out
        _C.host_gelu_tanh_backward(x, g, result, inner)
        return result
    grad = _gelu_tanh_grad(x, scratch or _fresh, inner)
    return _times_(grad, g) if out is None else np.multiply(g, grad, out=out)


def _silu_grad(x):
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _gelu_backward(x, y, g):
    if _GELU_AVX2 and np.shape(g) == np.shape(x) and _row_major_f32(x, g):
        grad = np.empty(x.shape, _F32)
        _C.host_gelu_backward(x, g, grad)
        return grad
    return _times_(_gelu_grad(x), g)


def _silu_backward(x, y, g):
    return g * _silu_grad(x)


def _sigmoid_backward(x, y, g):
    return g * y * (1.0 - y)


def _tanh_backward(x, y, g):
    return g * (1.0 - y * y)


def _formula(name):
    """The CPU formula a row of elementwise_table.UNARY names: ``np.<ufunc>`` or a function of this
    module (``_special.<name>`` one of _special.py's)."""
    scope, _, attribute = name.rpartition(".")
    return getattr({"np": np, "_special": _special}[scope], attribute) if scope else globals()[name]


# The dispatch tables, made from the declarative table (elementwise_table.UNARY): op name -> formula.
UNARY_OPS = {op.name: _formula(op.cpu) for op in UNARY}
UNARY_BACKWARD_OPS = {op.name: _formula(op.backward.cpu) for op in UNARY if op.backward is not None}
# ops whose formula (forward; backward) also takes ``out`` and ``scratch`` and writes its result there
# (with the ufuncs, which take ``out``): ``unary(..., out=)`` of any other op computes it and copies it
UNARY_INTO = frozenset(op.name for op in UNARY if op.cpu_into)
UNARY_BACKWARD_INTO = frozenset(op.name for op in UNARY if op.backward is not None and op.backward.cpu_into)
# ops whose forward can keep an intermediate in ``inner=`` for their backward (gelu_tanh: tanh's argument)
_KEEPS_INNER = frozenset(op.name for op in UNARY if op.keeps_inner)

# Small arrays of the ops whose formula is several NumPy passes go to the host module's loop over the
# CUDA functor of their row (kernels/host/elementwise.cpp): one call, where each pass costs NumPy about
# a microsecond however few the elements. Above _HOST_MAX elements NumPy's vectorised passes are as fast
# or faster (softplus's five passes broke even at 512 elements of float32, one thread). A formula of one
# ufunc has nothing to gain; gelu keeps PyTorch's CPU order of operations (its float32 product
# overflows where the functor's does not) and relu writes into ``out``: both stay NumPy's.
_HOST_MAX = 256
_NUMPY_ONLY = frozenset({"gelu", "gelu_tanh", "relu"})
_HOST_INDEX = {
    name: i
    for i, name in enumerate(_C.host_unary_names() if _C is not None else ())
    if name not in _NUMPY_ONLY and UNARY_OPS[name].__class__ is not np.ufunc
}


def unary_backward(
    op: str,
    x: BackendArray | None,
    y: BackendArray | None,
    g: BackendArray,
    *,
    out: BackendArray | None = None,
    scratch: Scratch | None = None,
    inner: BackendArray | None = None,
) -> BackendArray:
    """``x`` or ``y`` may be None where the op's gradient does not need it. ``out`` and ``scratch`` (CPU
    only, seam.CPU_REPLAY_KEYWORDS): a float32/float64 array of ``g``'s shape and dtype to write the
    result into (it may be an operand; the operands in its dtype), and reusable temporaries; ``inner``
    (with ``out``, gelu_tanh only): what the forward kept in its ``inner`` for this x, read instead of
    computed again."""
    try:
        fn = UNARY_BACKWARD_OPS[op]
    except KeyError:
        raise _declared_error(declared.unary_backward, op, x, y, g) from None
    if inner is not None and (op not in _KEEPS_INNER or out is None):
        raise ValueError(f"unary_backward: inner= is gelu_tanh's, with out=, not {op}'s")
    if out is not None:
        if inner is not None:
            return fn(x, y, g, out, scratch, inner)
        if op in UNARY_BACKWARD_INTO:
            return fn(x, y, g, out, scratch)
        np.copyto(out, unary_backward(op, x, y, g))
        return out
    try:
        r = np.asarray(fn(_compute(x), _compute(y), _compute(g)))
    except (TypeError, AttributeError):  # (the in-place formulas read None's shape)
        if x is None or y is None:  # perhaps the one the gradient reads
            error = _declared_error(declared.unary_backward, op, x, y, g)
            if error is not None:
                raise error from None
        raise
    return r.astype(g.dtype, copy=False)


def plain_binary(op: str) -> Callable[..., Any] | None:
    """What ``binary(op, a, b, <their dtype>)`` computes for exact ndarrays of one dtype object
    (float32/float64; for the ops of ``PLAIN_ANY_DTYPE``, any of its dtypes), as one call with none of
    its checks: the dispatch point's fast lane (adcuda/ops/dispatch.py) calls it for an op's plain case.
    ``b`` may also be a 0-d array of ``a``'s dtype (``float_operand``: a Python float in it). It returns
    the result array (or NumPy scalar, of 0-d operands); an error it raises is the primitive's to name.
    None for an op without such a kernel."""
    fn = BINARY_OPS.get(op)
    if fn is None:
        return None
    host = _HOST_BINARY_INDEX.get(op)
    return fn if host is None else functools.partial(_host_or_formula, fn, host)


def plain_unary(op: str) -> Callable[..., Any] | None:
    """``plain_binary`` for ``unary(op, x)``: the kernel may also return None where ``x`` takes the
    primitive's own path after all (a host loop's operand too large or not contiguous)."""
    fn = UNARY_OPS.get(op)
    if fn is None or op in _PLAIN_UNARY:
        return _PLAIN_UNARY.get(op)
    host = _HOST_INDEX.get(op)
    if host is not None:

        def host_loop(x):
            if x.size <= _HOST_MAX and x.flags.c_contiguous:
                return _C.host_unary(host, x)
            return None

        return host_loop
    if fn.__class__ is np.ufunc:
        keeps_dtype = "f->f" in fn.types and "d->d" in fn.types
    else:  # a formula: asked once, of one element of each dtype
        with np.errstate(all="ignore"):
            keeps_dtype = all(np.asarray(fn(np.full(1, 0.5, d))).dtype is d for d in (_F32, _F64))
    if keeps_dtype or op == "logical_not":
        return fn  # (float32 in, float32 out: nothing to cast; logical_not's bool is the primitive's too)

    def formula(x):
        r = fn(x)
        return r if r.dtype is x.dtype else None  # (another result dtype: the primitive casts it)

    return formula


# The float dtype of a float32/float64 array, for the backend's own functions the kernels below call.
_FLOAT_DTYPE_OF = {_F32: dt.float32, _F64: dt.float64}


def _plain_reciprocal(x):
    # binary("div", 1.0, x): a float first, in x's dtype
    r = np.true_divide(_scalar_array(1.0, x.dtype), x)
    return r if r.__class__ is np.ndarray else np.asarray(r)


def _plain_relu(x):
    # _relu's maximum, without its frame's out= and dtype lookup (a sixth of relu's call)
    return np.maximum(x, _ZERO_F32 if x.dtype is _F32 else _ZERO_F64)


def _plain_relu6(x):
    return clamp(x, 0.0, 6.0)


# ``plain_unary``'s kernels of the ops that are not a row of the table (or, relu, a leaner one): what
# their forwards compute of a float32/float64 array (of any array of the lane's dtypes for the
# classifications, whose integer and bool results NumPy's functions give as the forwards do: all
# False, or x < 0)
_PLAIN_UNARY: dict[str, Callable[..., Any]] = {
    "relu": _plain_relu,
    "reciprocal": _plain_reciprocal,
    "relu6": _plain_relu6,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "isfinite": np.isfinite,
    "isposinf": lambda x: np.equal(x, math.inf),  # (np.isposinf is several passes in Python)
    "isneginf": lambda x: np.equal(x, -math.inf),
    "signbit": np.signbit,
}


def _plain_leaky_relu(x, slope):
    # for 0 < slope <= 1 the forward's one pass, max(x, slope * x); else its comparison and select
    if 0 < slope <= 1:
        return np.maximum(x, np.multiply(x, _scalar_array(slope, x.dtype)))
    return None


def _plain_elu(x, alpha):
    # at alpha 1 the forward's celu pass; else expm1, scaled, where x <= 0
    if alpha == 1.0:
        return _CELU(x, 1.0)
    below = np.multiply(np.expm1(x), _scalar_array(alpha, x.dtype))
    return where(np.less_equal(x, _scalar_array(0.0, x.dtype)), below, x, _FLOAT_DTYPE_OF[x.dtype])


def _plain_threshold(x, threshold, value):
    d = _FLOAT_DTYPE_OF[x.dtype]
    return where(binary("le", x, threshold, d), value, x, d)


def _plain_hardtanh(x, min_val, max_val):
    return None if min_val > max_val else clamp(x, min_val, max_val)  # (the forward names the error)


def _plain_clamp(x, lo, hi):
    return None if lo is None and hi is None else clamp(x, lo, hi)  # (the forward names the error)


def _plain_pow(x, exponent):
    # the forward's shortcuts x ** 2 (x * x) and x ** 0.5 (sqrt); its others take its path; any other
    # power is NumPy's
    if exponent == 2.0:
        return binary("mul", x, x, _FLOAT_DTYPE_OF[x.dtype])
    if exponent == 0.5:
        return unary("sqrt", x)
    if exponent in (0.0, 1.0, 3.0, -1.0, -2.0, -0.5):
        return None
    return binary("pow", x, exponent, _FLOAT_DTYPE_OF[x.dtype])


def _plain_float_power(x, exponent):
    return _plain_pow(x if x.dtype is _F64 else x.astype(_F64), exponent)


def _with_parameter(op, allowed=None):
    """The kernel of a one-parameter op that is binary primitive ``op`` of x and the parameter (in x's
    dtype), as ``binary`` computes it of x and a Python float; None for a value the forward refuses
    (``allowed`` false)."""
    fn, host = BINARY_OPS[op], _HOST_BINARY_INDEX.get(op)

    def run(x, value):
        if allowed is not None and not allowed(value):
            return None
        if host is None:
            return fn(x, _scalar_array(value, x.dtype))
        return _host_or_formula(fn, host, x, value)

    return run


def _remainder(a, b, dtype=None, casting="same_kind"):
    """PyTorch's (and Python's) modulo: C's fmod, moved by one divisor where its sign differs from the
    divisor's. NumPy's remainder gives a zero the divisor's sign where PyTorch keeps fmod's (the
    dividend's): remainder(-4.0, 2.0) is -0.0."""
    mod = np.remainder(a, b, dtype=dtype, casting=casting)
    if mod.dtype.kind != "f":
        return mod  # integers: no signed zero
    # NumPy's floating remainder is C's fmod moved by one divisor, as PyTorch's, but for a zero result,
    # which takes the divisor's sign there and the dividend's (fmod's) here: set in place, where zero
    if mod.__class__ is not np.ndarray:
        mod = np.array(mod)  # (0-d operands give a NumPy scalar)
    return np.copysign(mod, a, out=mod, where=mod == 0)


def _xlogy(a, b, dtype=None, casting="same_kind"):
    """PyTorch's xlogy: a log(b), 0 where a is 0 (log(0) and log(inf) included) unless b is NaN."""
    product = np.multiply(a, np.log(b, dtype=dtype, casting=casting), dtype=dtype, casting=casting)
    return np.where(np.logical_and(np.equal(a, 0), np.equal(b, b)), 0, product)


def _in_dtype(a, b, dtype):
    """Both operands as arrays of ``dtype`` (the dtype the general path computes in), or as given."""
    return (a, b) if dtype is None else (np.asarray(a, dtype), np.asarray(b, dtype))


# The activations and step functions of a tensor and one parameter (their functors' formulas), for
# large arrays and float16; ``casting`` is unsafe only where an operand is wider than ``dtype``.
def _hardshrink(a, b, dtype=None, casting="same_kind"):
    a, b = _in_dtype(a, b, dtype)
    return np.where((a >= -b) & (a <= b), 0, a)


def _softshrink(a, b, dtype=None, casting="same_kind"):
    # a moved b towards 0, +0 between (a - a: a NaN kept)
    a, b = _in_dtype(a, b, dtype)
    return np.where(a > b, a - b, np.where(a < -b, a + b, a - a))


def _celu(a, b, dtype=None, casting="same_kind"):
    # expm1 of the non-positive part only: no overflow warning where a is large
    a, b = _in_dtype(a, b, dtype)
    below = a <= 0
    return np.where(below, np.expm1(np.where(below, a, 0) * (1 / b)) * b, a)


def _heaviside(a, b, dtype=None, casting="same_kind"):
    # 0 at NaN, as PyTorch's (NumPy's heaviside gives NaN)
    a, b = _in_dtype(a, b, dtype)
    return np.where(a == 0, b, (a > 0).astype(a.dtype))


def _prelu(a, b, dtype=None, casting="same_kind"):
    a, b = _in_dtype(a, b, dtype)
    return np.where(a > 0, a, b * a)


def _nan_to_num(a, b, dtype=None, casting="same_kind"):
    # NaN to 0, the rest clamped to [-b, b] (b the dtype's largest finite value: the infinities to it)
    a, b = _in_dtype(a, b, dtype)
    return np.where(a != a, 0, np.where(a > b, b, np.where(a < -b, -b, a)))


def _kaiser_window(a, b, dtype=None, casting="same_kind"):
    # i0(b sqrt(1 - a^2)) / i0(b) of the ratios a (1 - a^2 at least 0), each i0 rounded to a's dtype
    a, b = _in_dtype(a, b, dtype)
    peak = np.asarray(_special.i0(b), a.dtype)
    return np.asarray(_special.i0(b * np.sqrt(np.maximum(1 - a * a, 0))), a.dtype) / peak


BINARY_OPS: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "floor_divide": np.floor_divide,
    "fmod": np.fmod,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "gcd": np.gcd,
    "lcm": np.lcm,
    # the binary functions of floating operands (and remainder), from the declarative table
    **{op.name: _formula(op.cpu) for op in FLOAT_BINARY},
}
# Small float32/float64 operands of the binary ops whose NumPy formula is several passes (remainder,
# xlogy, the one-parameter activations) go to the host module's loop over their CUDA functor
# (kernels/host/elementwise.cpp), as the unary ones do.
_HOST_BINARY_INDEX = {name: i for i, name in enumerate(_C.host_binary_names() if _C is not None else ())}
_BOOL_RESULT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"}


# ops whose results can overflow or be undefined for ordinary inputs run inside np.errstate
_MAY_WARN = {"div", "pow", "floor_divide", "remainder", "fmod"}
_INTEGER_DIVISION = ("floor_divide", "remainder", "fmod")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# Python floats as 0-d arrays of float32 or float64, made once: a ufunc takes a 0-d array of its
# operand's dtype 0.25 us sooner than a Python float, which it converts on every call (to that dtype: the
# result is the same). Zeros are kept apart by sign (0.0 and -0.0 are one dict key).
_SCALAR_ARRAYS: dict[np.dtype, dict[float, np.ndarray]] = {_F32: {}, _F64: {}}
_ZERO_ARRAYS = {(d, sign): np.array(sign * 0.0, d) for d in (_F32, _F64) for sign in (1.0, -1.0)}
_SCALAR_ARRAYS_MAX = 512  # a program's constants are a few dozen; a loop over changing values is not cached long


def _scalar_array(value, dtype):
    """Python float ``value`` as a read-only 0-d array of ``dtype`` (float32 or float64)."""
    if value == 0.0:
        return _ZERO_ARRAYS[dtype, math.copysign(1.0, value)]
    cache = _SCALAR_ARRAYS[dtype]
    array = cache.get(value)
    if array is None:
        array = np.array(value, dtype)
        array.flags.writeable = False
        remember(cache, value, array, _SCALAR_ARRAYS_MAX)
    return array


# A Python float operand of a float32/float64 array as ``binary`` passes it to the formula, for a
# ``plain_binary`` kernel (the dispatch point's lane calls it so)
float_operand = _scalar_array


def binary(op: str, a: ArrayOrScalar, b: ArrayOrScalar, dtype: DType) -> BackendArray:
    """``op(a, b)`` with both operands in ``dtype`` (computed in fp32 for float16); ``a`` or ``b`` may be a
    Python scalar."""
    try:
        if (
            a.__class__ is np.ndarray
            and (b.__class__ is np.ndarray and b.dtype is a.dtype or b.__class__ is float)
            and (a.dtype is _F32 and dtype is dt.float32 or a.dtype is _F64 and dtype is dt.float64)
        ):
            # the commonest call, float32/float64 arrays of the result's dtype (a float scalar in it), in as
            # few steps as it takes: identity tests of the dtypes, no comparison of them (each costs NumPy
            # a conversion), and no error to check (IEEE results; the package's filter silences warnings)
            fn = BINARY_OPS.get(op)
            if fn is not None:
                host = _HOST_BINARY_INDEX.get(op)
                if host is not None:
                    return _host_or_formula(fn, host, a, b)
                r = fn(a, b if b.__class__ is np.ndarray else _scalar_array(b, a.dtype))
                return r if r.__class__ is np.ndarray else np.asarray(r)  # (0-d operands give a NumPy scalar)
        elif (
            a.__class__ is float
            and b.__class__ is np.ndarray
            and (b.dtype is _F32 and dtype is dt.float32 or b.dtype is _F64 and dtype is dt.float64)
        ):
            fn = BINARY_OPS.get(op)  # a float first (1 - x, 1 / x), likewise
            if fn is not None:
                r = fn(_scalar_array(a, b.dtype), b)
                return r if r.__class__ is np.ndarray else np.asarray(r)
        work: type | np.dtype | None = dtype.numpy  # a NumPy scalar type, then the dtype to compute in
        floating = work is np.float32 or work is np.float64
        if (
            work is not None
            and work is not np.float16
            and (floating or op not in _MAY_WARN)
            and (
                a.__class__ is np.ndarray
                and a.dtype == work
                and (
                    b.__class__ is np.ndarray
                    and b.dtype == work
                    or b.__class__ is float
                    and work is not np.int32
                    and work is not np.int64
                    or b.__class__ is int
                    and (floating or work is np.int64 and _INT64_MIN <= b <= _INT64_MAX)
                )
                or a.__class__ is float
                and floating
                and b.__class__ is np.ndarray
                and b.dtype == work
            )
        ):
            # fast path: operands already in the result dtype (the common case in training), or a
            # Python number that NumPy takes in a float array's dtype (an optimizer's step count + 1,
            # reciprocal's 1.0 / x), or in int64 (class indices against ignore_index). The divisions
            # and powers of floating point values have IEEE results (inf, NaN) and no error to check:
            # the package's filter silences their warnings
            return np.asarray(BINARY_OPS[op](a, b))
        work = _np_dtype(dtype)
        if work == _F16:
            work = _F32
        fn = BINARY_OPS[op]
        if op == "pow" and dtype.category == dt.INTEGER and np.any(np.asarray(b) < 0):
            raise InvalidArgumentError("pow: integers to negative integer powers are not allowed")
        if op in _INTEGER_DIVISION and dtype.category != dt.FLOATING and not np.all(np.asarray(b)):
            # NumPy quietly returns 0 here; PyTorch raises, and a silent 0 would be a wrong answer
            raise ZeroDivisionError(f"{op}: integer division by zero")
        with np.errstate(all="ignore"):
            if op in _BOOL_RESULT:
                return np.asarray(fn(np.asarray(a, work), np.asarray(b, work)))
            r = fn(a, b, dtype=work, casting="unsafe")  # both operands are taken in dtype, as on CUDA
        return _finish(np.asarray(r), dtype)
    except KeyError:
        if op not in BINARY_OPS:
            raise _unknown_op("binary", op) from None
        raise
    except TypeError:
        if not _defined_for(op, dtype):  # NumPy has no loop for it: say so as the CUDA backend does
            if op == "sub":
                raise DTypeError("sub: subtraction of bool arrays is not supported; use logical_xor") from None
            raise UnsupportedDTypeError(f"{op}: not defined for dtype {dtype.name}") from None
        raise


def _host_or_formula(fn, host, a, b):
    """``binary``'s kernel of an op with a host loop (``_HOST_BINARY_INDEX``), for float32/float64 array
    ``a`` and ``b`` an array of its dtype or a Python float: the loop for small contiguous operands of
    one shape (or ``b`` one value whose broadcast keeps a's shape: prelu's single weight, a 0-d
    operand), NumPy's formula otherwise."""
    if a.size <= _HOST_MAX and a.flags.c_contiguous:
        if b.__class__ is float or b.shape == a.shape and b.flags.c_contiguous:
            return _C.host_binary(host, a, b)
        if b.size == 1 and b.ndim <= a.ndim:
            return _C.host_binary(host, a, b.item())
    r = fn(a, b if b.__class__ is np.ndarray else _scalar_array(b, a.dtype))
    return r if r.__class__ is np.ndarray else np.asarray(r)  # (0-d operands give a NumPy scalar)


def _defined_for(op, dtype):
    """Whether binary ``op`` is defined for ``dtype``."""
    if op.startswith("bitwise_"):
        return dtype.category != dt.FLOATING
    if op == "div":
        return dtype.category == dt.FLOATING
    return dtype.category != dt.BOOL or op not in ("sub", "pow") + _INTEGER_DIVISION


def where(cond: BackendArray, a: ArrayOrScalar, b: ArrayOrScalar, dtype: DType) -> BackendArray:
    out_dt = _FLOAT_ARRAY_DTYPE.get(dtype)
    if out_dt is not None and cond.__class__ is np.ndarray and cond.dtype is _BOOL:
        # a floating result, the forwards' masks: the declaration checks Python integers against an
        # integer dtype alone, so it has nothing to check here
        if cond.size >= _SELECT_MIN:
            out = _select(cond, a, b, out_dt)
            if out is not None:
                return out
        r = np.where(
            cond,
            _scalar_array(a, out_dt) if a.__class__ is float else a,
            _scalar_array(b, out_dt) if b.__class__ is float else b,
        )
        return r if r.dtype is out_dt else r.astype(out_dt)
    _check_where(cond, a, b, dtype)
    return _finish(np.asarray(np.where(cond, a, b)), dtype)


_check_where = declared.where  # (bound once: ``declared``'s attribute lookup costs half a microsecond)
_BOOL = np.dtype(np.bool_)
# The NumPy dtype of each floating dtype the CPU computes in as it is (float16 is widened to float32).
_FLOAT_ARRAY_DTYPE: dict[DType, np.dtype] = {dt.float32: _F32, dt.float64: _F64}
# Unsigned integers as wide as each floating dtype, for ``_select``.
_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
# Below this many elements np.where's per-call cost is what counts and it stays.
_SELECT_MIN = 1 << 12


def _select(cond, a, b, out_dt):
    """where(cond, a, b) of floating ``a`` and ``b`` as a bitwise selection, b ^ ((a ^ b) & mask), on
    their bits: exact for every value (NaN payloads, signed zeros) and branch-free. np.where branches
    on each element, so with a mask like a ReLU's or a dropout's it is 6x slower. None where the
    operands are not arrays of ``out_dt`` or Python numbers (np.where's promotion handles those)."""
    u = _BITS.get(out_dt.itemsize)
    if u is None:
        return None
    operands = []
    for v in (a, b):
        if v.__class__ in (float, int):
            v = np.array(v, out_dt)
        elif v.__class__ is not np.ndarray or v.dtype != out_dt:
            return None
        operands.append(v)
    shape = np.broadcast_shapes(cond.shape, operands[0].shape, operands[1].shape)
    mask = np.negative(np.broadcast_to(cond, shape).astype(u))
    bb = np.broadcast_to(operands[1], shape).view(u)
    bits = np.bitwise_xor(np.broadcast_to(operands[0], shape).view(u), bb)
    bits &= mask
    bits ^= bb
    return bits.view(out_dt)


def clamp(a: BackendArray, lo: Scalar | None, hi: Scalar | None) -> BackendArray:
    """``a`` clamped to ``[lo, hi]``: scalar bounds (None leaves a side open; array bounds are the ops
    layer's, as a maximum and a minimum)."""
    if lo.__class__ not in _BOUND_CLASSES or hi.__class__ not in _BOUND_CLASSES:
        declared.clamp(a, lo, hi)  # (it refuses array bounds: a Python number or None has nothing to check)
    x = a
    if a.dtype is _F32 or a.dtype is _F64:
        # a float bound as a 0-d array of a's dtype: what NumPy converts it to, 0.25 us sooner a ufunc
        if lo.__class__ is float:
            lo = _scalar_array(lo, a.dtype)
        if hi.__class__ is float:
            hi = _scalar_array(hi, a.dtype)
    else:
        x = _compute(a)  # (float16 in float32)
    if lo is not None:
        x = np.maximum(x, lo)
        if hi is not None and x.__class__ is np.ndarray:
            return _finish_like(np.minimum(x, hi, out=x), a)  # (x is a new array: no second one)
    if hi is not None:
        x = np.minimum(x, hi)
    return _finish_like(np.asarray(x), a)


_BOUND_CLASSES = frozenset({float, int, bool, type(None)})


def _finish_like(x, a):
    """``x`` in ``a``'s dtype (no call where it already is)."""
    return x if x.dtype is a.dtype else x.astype(a.dtype, copy=False)


# (the kernels below call NumPy's functions of the primitive's formulas where the primitive's fast
# path, arrays of one float dtype or a float in it, would: binary's for add, sub, mul and div)
def _plain_lerp(a, b, weight):
    # the forward's common call: from the nearer end, so that weight 1 gives b exactly
    if a.shape != b.shape:
        return None
    diff = np.subtract(b, a)
    if abs(weight) < 0.5:
        return np.add(a, np.multiply(diff, _scalar_array(weight, a.dtype)))
    return np.subtract(b, np.multiply(diff, _scalar_array(1.0 - weight, a.dtype)))


def _add_scaled(fn):
    """addcmul's (``fn`` multiply) or addcdiv's (true_divide) kernel: a + value * fn(t1, t2), of one
    shape."""

    def run(a, t1, t2, value):
        if not a.shape == t1.shape == t2.shape:
            return None
        scaled = fn(t1, t2)
        if value != 1:
            scaled = np.multiply(scaled, _scalar_array(float(value), a.dtype))
        return np.add(a, scaled)

    return run


_LARGEST_FINITE = {d: float(np.finfo(d).max) for d in (_F32, _F64)}


def _plain_prelu(x, weight):
    # one weight, or one per channel of a matrix (the forward reshapes them for more dims: its path)
    if weight.ndim <= 1 and (weight.size == 1 or x.ndim == 2 and weight.size == x.shape[1]):
        return _PRELU(x, weight)
    return None


def _plain_nan_to_num(x, nan, posinf, neginf):
    # the forward's one pass, for the default replacements: NaN to +0.0, the infinities to the largest
    # finite values
    if posinf is None and neginf is None and nan == 0 and math.copysign(1.0, nan) == 1.0:
        return _NAN_TO_NUM(x, _LARGEST_FINITE[x.dtype])
    return None


_NAN_TO_NUM = plain_binary("nan_to_num")
_CELU = plain_binary("celu")
_PRELU = plain_binary("prelu")


# ``plain_scalars``'s kernels: of the arrays (``where``: a bool mask and two floating arrays) and the op's
# parameters after them, as Python floats (or their defaults)
_PLAIN_SCALARS: dict[str, Callable[..., Any]] = {
    "where": lambda condition, a, b: where(condition, a, b, _FLOAT_DTYPE_OF[a.dtype]),
    "lerp": _plain_lerp,
    "prelu": _plain_prelu,
    "addcmul": _add_scaled(np.multiply),
    "addcdiv": _add_scaled(BINARY_OPS["div"]),
    "leaky_relu": _plain_leaky_relu,
    "elu": _plain_elu,
    "threshold": _plain_threshold,
    "hardtanh": _plain_hardtanh,
    "clamp": _plain_clamp,
    "clamp_min": lambda x, lo: clamp(x, lo, None),
    "clamp_max": lambda x, hi: clamp(x, None, hi),
    "pow": _plain_pow,
    "float_power": _plain_float_power,
    "hardshrink": _with_parameter("hardshrink"),
    "softshrink": _with_parameter("softshrink", lambda lambd: not lambd < 0),
    "celu": _with_parameter("celu", lambda alpha: alpha != 0),
    "nan_to_num": _plain_nan_to_num,
}


def plain_scalars(op: str) -> Callable[..., Any] | None:
    """``plain_unary`` for an op of a tensor and Python float parameters (``leaky_relu(x, slope)``,
    ``clamp(x, lo, hi)``): a kernel of the array and the parameters, None for an op without one. The
    kernel returns None where the call takes the primitive's path after all (a parameter the forward
    refuses or takes another way)."""
    return _PLAIN_SCALARS.get(op)


def _plain_equal(a, b):
    # equal's: False for another shape; the host loop for small arrays it takes; else NumPy's comparison
    if a.shape != b.shape:
        return False
    if _C is not None and a.size <= _HOST_MAX:
        same = _C.host_equal(a, b)
        if same is not None:
            return same
    return bool(np.equal(a, b).all())


def plain_predicate(op: str) -> Callable[..., Any] | None:
    """``plain_binary`` for an op whose result is a Python bool of two arrays of one dtype (``equal``),
    which its lane returns as it is; None for an op without one."""
    return _plain_equal if op == "equal" else None
