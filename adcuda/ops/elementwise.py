"""Elementwise ops with broadcasting: arithmetic, math functions, activations, comparisons."""
import math

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError, fmt_shape
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import Tensor
from ._core import (as_tensor_operand, check_same_device, method, needs_grad, record, result_type, sum_to_shape,
                    wrap)


def grad_for(g, shape, dtype):
    """A gradient brought back to an input's shape (undoing broadcasting) and dtype."""
    g = sum_to_shape(g, shape)
    if g.dtype is not dtype:
        g = g.to(dtype=dtype)
    return g


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


def _binary_forward(op, a, b, dtype=None, name=None):
    """Forward of a binary op on tensors and/or scalars; returns (out, dev, a_info, b_info)."""
    if a.__class__ is Tensor and dtype is None:
        # fast path: two tensors of one dtype on one device, or a tensor and a float scalar
        ad = a._data
        if b.__class__ is Tensor:
            if a._device is b._device and ad.dtype == b._data.dtype:
                try:
                    return Tensor._make(a._backend.binary(op, ad, b._data, a.dtype), a._device)
                except ValueError:
                    pass  # the general path below raises the proper error
        elif b.__class__ is float:
            d = a.dtype
            if d.is_floating_point:
                return Tensor._make(a._backend.binary(op, ad, b, d), a._device)
    name = name or op
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
        data = t._backend.binary(op, ad, bd, dtype)
    except ValueError as e:
        if a.__class__ is Tensor and b.__class__ is Tensor:
            raise ShapeError(f"{name}: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot be "
                             "broadcast") from None
        raise ValueError(f"{name}: {e}") from None
    return Tensor._make(data, dev)


def _float_dtype(*operands):
    d = result_type(*operands)
    return d if d.is_floating_point else dt.default_float


# ------------------------------------------------------------------------------------------------
# arithmetic
def _scaled(other, alpha):
    """``alpha * other`` for add/sub's ``alpha`` keyword (a Python product when both are scalars)."""
    return other * alpha if other.__class__ is not Tensor else mul(other, alpha)


def add(input, other, *, alpha=1):
    if alpha != 1:
        other = _scaled(other, alpha)
    out = _binary_forward("add", input, other, name="add")
    if needs_grad(input, other):
        sa, sb = _shape_dtype(input), _shape_dtype(other)
        record("AddBackward0", out, (input, other),
               lambda node, g: (sa and grad_for(g, *sa), sb and grad_for(g, *sb)))
    return out


def sub(input, other, *, alpha=1):
    if alpha != 1:
        other = _scaled(other, alpha)
    if _is_bool(input) and _is_bool(other):
        raise DTypeError("sub: subtraction, the `-` operator, with two bool tensors is not supported; "
                         "use the `^` operator or logical_xor() instead")
    out = _binary_forward("sub", input, other, name="sub")
    if needs_grad(input, other):
        sa, sb = _shape_dtype(input), _shape_dtype(other)
        record("SubBackward0", out, (input, other),
               lambda node, g: (sa and grad_for(g, *sa), sb and grad_for(-g, *sb)))
    return out


def mul(input, other):
    out = _binary_forward("mul", input, other, name="mul")
    if needs_grad(input, other):
        sa, sb = _shape_dtype(input), _shape_dtype(other)

        a_scalar, b_scalar = _scalar_or_none(input), _scalar_or_none(other)

        def backward(node, g):
            a, b = node.saved_tensors
            a = a_scalar if a is None else a
            b = b_scalar if b is None else b
            return (sa and grad_for(g * b, *sa), sb and grad_for(g * a, *sb))
        # each operand is kept only if the other one needs a gradient
        record("MulBackward0", out, (input, other), backward,
               saved=(input if sb and input.__class__ is Tensor else None,
                      other if sa and other.__class__ is Tensor else None))
    return out


def div(input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        return _rounded_div(input, other, rounding_mode)
    out = _binary_forward("div", input, other, dtype=_float_dtype(input, other), name="div")
    if needs_grad(input, other):
        sa, sb = _shape_dtype(input), _shape_dtype(other)
        a_scalar, b_scalar = _scalar_or_none(input), _scalar_or_none(other)

        def backward(node, g):
            a, b = node.saved_tensors
            a = a_scalar if a is None else a
            b = b_scalar if b is None else b
            return (sa and grad_for(g / b, *sa), sb and grad_for(-g * a / (b * b), *sb))
        record("DivBackward0", out, (input, other), backward, saved=_tensors_only(input, other))
    return out


def _rounded_div(input, other, rounding_mode):
    """``div`` with ``rounding_mode`` 'floor' or 'trunc': piecewise constant, so a zero gradient."""
    if rounding_mode == "floor":
        out = _binary_forward("floor_divide", input, other, name="div")
    elif rounding_mode == "trunc":
        q = _binary_forward("div", input, other, dtype=_float_dtype(input, other), name="div")
        out = wrap(q._backend.unary("trunc", q._data), q._device).to(dtype=result_type(input, other))
    else:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if needs_grad(input, other) and out.dtype.is_floating_point:
        sa, sb = _shape_dtype(input), _shape_dtype(other)
        record("DivBackward2", out, (input, other),
               lambda node, g: (sa and grad_for(g * 0, *sa), sb and grad_for(g * 0, *sb)))
    return out


def pow(input, exponent):  # noqa: A001 (PyTorch's name)
    out = _binary_forward("pow", input, exponent, name="pow")
    if needs_grad(input, exponent):
        sa, sb = _shape_dtype(input), _shape_dtype(exponent)
        a_scalar, b_scalar = _scalar_or_none(input), _scalar_or_none(exponent)

        def backward(node, g):
            a, b, y = node.saved_tensors
            a = a_scalar if a is None else a
            b = b_scalar if b is None else b
            ga = gb = None
            if sa:
                if b.__class__ is not Tensor:
                    ga = g * 0 if b == 0 else grad_for(g * b * a ** (b - 1), *sa)
                else:  # d/da a**b is 0 where b == 0, even at a == 0 (not 0 * inf): base 1 there
                    ga = grad_for(g * b * where(eq(b, 0), 1.0, a) ** (b - 1), *sa)
            if sb:
                if a.__class__ is Tensor:
                    # 0 ** b for b >= 0 does not change with b; elsewhere y * log(a) (NaN for a < 0)
                    flat = logical_and(eq(a, 0), ge(b, 0))
                    gb = grad_for(g * where(flat, 0.0, y * log(where(flat, 1.0, a))), *sb)
                else:
                    log_a = math.log(a) if a > 0 else 0.0 if a == 0 else math.nan
                    gb = grad_for(g * y * log_a, *sb)
            return ga, gb
        record("PowBackward0", out, (input, exponent), backward,
               saved=_tensors_only(input, exponent) + (out,))
    return out


def neg(input):
    if input.dtype is dt.bool_:
        raise DTypeError("neg: negation, the `-` operator, on a bool tensor is not supported; "
                         "use the `~` operator or logical_not() instead")
    out = wrap(input._backend.unary("neg", input._data), input._device)
    if needs_grad(input):
        record("NegBackward0", out, (input,), lambda node, g: -g)
    return out


def maximum(input, other):
    return _minmax("maximum", input, other, gt)


def minimum(input, other):
    return _minmax("minimum", input, other, lt)


def _minmax(op, input, other, wins):
    if other.__class__ is not Tensor:
        raise DTypeError(f"{op}: expected other to be a Tensor, got {type(other).__name__}")
    out = _binary_forward(op, input, other, name=op)
    if needs_grad(input, other):
        sa, sb = _shape_dtype(input), _shape_dtype(other)

        def backward(node, g):
            a, b = node.saved_tensors
            a_wins = wins(a, b).to(dtype=g.dtype)
            tie = eq(a, b).to(dtype=g.dtype) * 0.5
            return (sa and grad_for(g * (a_wins + tie), *sa),
                    sb and grad_for(g * (1.0 - a_wins - tie), *sb))
        record(op.capitalize() + "Backward0", out, (input, other), backward, saved=(input, other))
    return out


def _shape_dtype(x):
    """What a backward rule needs to know about an operand: ``None`` unless it takes a gradient."""
    if x.__class__ is Tensor and x.requires_grad:
        return (tuple(x.shape), x.dtype)
    return None


def _tensors_only(*xs):
    return tuple(x if x.__class__ is Tensor else None for x in xs)


def _is_bool(x):
    return x.dtype is dt.bool_ if x.__class__ is Tensor else x.__class__ is bool


def _scalar_or_none(x):
    """A Python-scalar operand, for a backward closure (tensors go through ``saved=`` instead)."""
    return None if x.__class__ is Tensor else x


# ------------------------------------------------------------------------------------------------
# unary math
def _unary_forward(op, input, float_only=True):
    if input.__class__ is not Tensor:
        raise DTypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
    if float_only and not input.dtype.is_floating_point:
        input = input.to(dtype=dt.default_float)
    return wrap(input._backend.unary(op, input._data), input._device), input


def _unary(op, name, grad_rule, save_input=False, save_output=False):
    """Define a unary op from its primitive name and ``grad_rule(g, x, y)``."""
    def fn(input):
        out, x = _unary_forward(op, input)
        if needs_grad(x):
            saved = ((x,) if save_input else ()) + ((out,) if save_output else ())

            def backward(node, g):
                vals = node.saved_tensors
                xs = vals[0] if save_input else None
                ys = vals[-1] if save_output else None
                return grad_rule(g, xs, ys)
            record(name, out, (x,), backward, saved=saved)
        return out
    fn.__name__ = op
    return fn


def _fused_backward(op, g, x, y, composite):
    """Use the fused backward primitive unless a graph of the backward is being built."""
    if is_grad_enabled():
        return composite()
    ref = x if x is not None else y
    return wrap(ref._backend.unary_backward(op, x._data if x is not None else None,
                                            y._data if y is not None else None, g._data), g._device)


exp = _unary("exp", "ExpBackward0", lambda g, x, y: g * y, save_output=True)
log = _unary("log", "LogBackward0", lambda g, x, y: g / x, save_input=True)
log1p = _unary("log1p", "Log1PBackward0", lambda g, x, y: g / (x + 1), save_input=True)
sqrt = _unary("sqrt", "SqrtBackward0", lambda g, x, y: g / (2 * y), save_output=True)
rsqrt = _unary("rsqrt", "RsqrtBackward0", lambda g, x, y: -0.5 * g * y * y * y, save_output=True)
sin = _unary("sin", "SinBackward0", lambda g, x, y: g * cos(x), save_input=True)
cos = _unary("cos", "CosBackward0", lambda g, x, y: -g * sin(x), save_input=True)
tanh = _unary("tanh", "TanhBackward0", lambda g, x, y: _fused_backward(
    "tanh", g, None, y, lambda: g * (1 - y * y)), save_output=True)
sigmoid = _unary("sigmoid", "SigmoidBackward0", lambda g, x, y: _fused_backward(
    "sigmoid", g, None, y, lambda: g * y * (1 - y)), save_output=True)
erf = _unary("erf", "ErfBackward0", lambda g, x, y: g * (2.0 / math.sqrt(math.pi)) * exp(-x * x),
             save_input=True)
exp2 = _unary("exp2", "Exp2Backward0", lambda g, x, y: g * y * math.log(2.0), save_output=True)
log2 = _unary("log2", "Log2Backward0", lambda g, x, y: g / (x * math.log(2.0)), save_input=True)
log10 = _unary("log10", "Log10Backward0", lambda g, x, y: g / (x * math.log(10.0)), save_input=True)


def _silu_composite(g, x):
    s = sigmoid(x)
    return g * s * (1 + x * (1 - s))


silu = _unary("silu", "SiluBackward0", lambda g, x, y: _fused_backward(
    "silu", g, x, None, lambda: _silu_composite(g, x)), save_input=True)


def _gelu_composite(g, x):
    cdf = 0.5 * (1 + erf(x * (1 / math.sqrt(2))))
    pdf = exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi))
    return g * (cdf + x * pdf)


def _gelu_tanh_composite(g, x):
    k = math.sqrt(2 / math.pi)
    inner = tanh(k * (x + 0.044715 * x * x * x))
    return g * (0.5 * (1 + inner) + 0.5 * x * (1 - inner * inner) * k * (1 + 3 * 0.044715 * x * x))


_gelu_exact = _unary("gelu", "GeluBackward0", lambda g, x, y: _fused_backward(
    "gelu", g, x, None, lambda: _gelu_composite(g, x)), save_input=True)
_gelu_tanh = _unary("gelu_tanh", "GeluBackward0", lambda g, x, y: _fused_backward(
    "gelu_tanh", g, x, None, lambda: _gelu_tanh_composite(g, x)), save_input=True)


def gelu(input, approximate="none"):
    if approximate == "none":
        return _gelu_exact(input)
    if approximate == "tanh":
        return _gelu_tanh(input)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def relu(input):
    out = wrap(input._backend.unary("relu", input._data), input._device)
    if needs_grad(input):
        def backward(node, g):
            (y,) = node.saved_tensors
            if is_grad_enabled():
                return g * gt(y, 0).to(dtype=g.dtype)
            return wrap(g._backend.unary_backward("relu", y._data, None, g._data), g._device)
        record("ReluBackward0", out, (input,), backward, saved=(out,))
    return out


def leaky_relu(input, negative_slope=0.01):
    positive = gt(input, 0)
    return where(positive, input, input * negative_slope)


def abs(input):  # noqa: A001
    out = wrap(input._backend.unary("abs", input._data), input._device)
    if needs_grad(input):
        def backward(node, g):
            (x,) = node.saved_tensors
            return g * sign(x)
        record("AbsBackward0", out, (input,), backward, saved=(input,))
    return out


def _zeros_like(g):
    return wrap(g._backend.full(tuple(g.shape), 0, g.dtype), g._device)


def _piecewise_constant(op, name):
    """An op whose gradient is zero almost everywhere (PyTorch returns zeros, not NaN or None).
    Integer and bool inputs come back unchanged, as in PyTorch."""
    def fn(input):
        if input.__class__ is not Tensor:
            raise DTypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
        if not input.dtype.is_floating_point:
            return input.clone()
        out = wrap(input._backend.unary(op, input._data), input._device)
        if needs_grad(input):
            record(name, out, (input,), lambda node, g: _zeros_like(g))
        return out
    fn.__name__ = op
    return fn


floor = _piecewise_constant("floor", "FloorBackward0")
ceil = _piecewise_constant("ceil", "CeilBackward0")
trunc = _piecewise_constant("trunc", "TruncBackward0")
_round_half_even = _piecewise_constant("round", "RoundBackward0")


def sign(input):
    if input.dtype is dt.bool_:
        return input.clone()
    out = wrap(input._backend.unary("sign", input._data), input._device)
    if needs_grad(input):
        record("SignBackward0", out, (input,), lambda node, g: _zeros_like(g))
    return out


def round(input, *, decimals=0):  # noqa: A001 (PyTorch's name)
    """Round half to even; with ``decimals``, PyTorch's ``round(x * 10**d) / 10**d``."""
    if decimals == 0:
        return _round_half_even(input)
    scale = 10.0 ** decimals
    return _round_half_even(input * scale) / scale


# ------------------------------------------------------------------------------------------------
# floating-point classification (no gradient)
def _float_test(op, test, if_not_float):
    def fn(input):
        if input.__class__ is not Tensor:
            raise DTypeError(f"{op}: expected a Tensor, got {type(input).__name__}")
        bk = input._backend
        if not input.dtype.is_floating_point:
            return wrap(bk.full(tuple(input.shape), if_not_float, dt.bool_), input._device)
        return wrap(test(bk, input._data, input.dtype), input._device)
    fn.__name__ = op
    return fn


_INF = float("inf")
isnan = _float_test("isnan", lambda bk, x, d: bk.binary("ne", x, x, d), False)  # NaN alone is unequal to itself
isinf = _float_test("isinf", lambda bk, x, d: bk.binary("eq", bk.unary("abs", x), _INF, d), False)
isfinite = _float_test("isfinite", lambda bk, x, d: bk.binary("lt", bk.unary("abs", x), _INF, d), True)


def clamp(input, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    if min.__class__ is Tensor or max.__class__ is Tensor:
        return _clamp_tensor(input, min, max)
    dtype = result_type(input, min, max)
    if dtype is not input.dtype:  # clamp(int tensor, 0.5) is a float tensor, as in PyTorch
        input = input.to(dtype=dtype)
    out = wrap(input._backend.clamp(input._data, min, max), input._device)
    if needs_grad(input):
        def backward(node, g):
            (x,) = node.saved_tensors
            inside = ones_mask = None
            if min is not None:
                inside = ge(x, min)
            if max is not None:
                ones_mask = le(x, max)
                inside = ones_mask if inside is None else logical_and(inside, ones_mask)
            return g * inside.to(dtype=g.dtype)
        record("ClampBackward1", out, (input,), backward, saved=(input,))
    return out


def _clamp_tensor(input, lo, hi):
    """clamp with tensor bounds: ``min(max(x, lo), hi)`` broadcast, with PyTorch's gradients (a
    bound gets the gradient where it is the result; where ``lo > hi`` the result is ``hi``)."""
    out = input
    if lo is not None:
        out = _binary_forward("maximum", out, lo, dtype=result_type(input, lo, hi), name="clamp")
    if hi is not None:
        out = _binary_forward("minimum", out, hi, dtype=result_type(input, lo, hi), name="clamp")
    if needs_grad(input, lo, hi):
        shapes = tuple(_shape_dtype(t) for t in (input, lo, hi))

        def backward(node, g):
            x, lo_t, hi_t = node.saved_tensors
            lo_v = lo if lo_t is None else lo_t
            hi_v = hi if hi_t is None else hi_t
            if lo_v is not None and hi_v is not None:
                masks = (logical_and(ge(x, lo_v), le(x, hi_v)), logical_and(lt(x, lo_v), lt(lo_v, hi_v)),
                         logical_or(gt(x, hi_v), lt(hi_v, lo_v)))
            elif lo_v is not None:
                masks = (ge(x, lo_v), lt(x, lo_v), None)
            else:
                masks = (le(x, hi_v), None, gt(x, hi_v))
            return tuple(s and grad_for(where(m, g, 0.0), *s) for s, m in zip(shapes, masks))
        record("ClampBackward0", out, (input, lo, hi), backward, saved=_tensors_only(input, lo, hi))
    return out


# ------------------------------------------------------------------------------------------------
# selection and comparisons (comparisons and logical ops have no gradient)
def where(condition, input, other):
    if condition.__class__ is not Tensor:
        raise DTypeError("where: condition must be a bool Tensor")
    if condition.dtype is not dt.bool_:
        condition = ne(condition, 0)
    dev = check_same_device("where", condition, input, other)
    dtype = result_type(input, other)
    ad = input._data if input.__class__ is Tensor else input
    bd = other._data if other.__class__ is Tensor else other
    try:
        data = condition._backend.where(condition._data, ad, bd, dtype)
    except ValueError:
        shapes = [fmt_shape(x.shape) for x in (condition, input, other) if x.__class__ is Tensor]
        raise ShapeError(f"where: shapes {', '.join(shapes)} cannot be broadcast") from None
    out = wrap(data, dev)
    if needs_grad(input, other):
        sa, sb = _shape_dtype(input), _shape_dtype(other)

        def backward(node, g):
            (c,) = node.saved_tensors
            zero = g * 0
            return (None, sa and grad_for(where(c, g, zero), *sa), sb and grad_for(where(c, zero, g), *sb))
        record("WhereBackward0", out, (condition, input, other), backward, saved=(condition,))
    return out


def _comparison(op):
    def fn(input, other):
        return _binary_forward(op, input, other, name=op)
    fn.__name__ = op
    return fn


eq, ne, lt, le, gt, ge = (_comparison(op) for op in ("eq", "ne", "lt", "le", "gt", "ge"))
logical_and, logical_or, logical_xor = (_comparison(op) for op in ("logical_and", "logical_or", "logical_xor"))


def logical_not(input):
    return wrap(input._backend.unary("logical_not", input._data), input._device)


def _bitwise(op):
    def fn(input, other):
        for x in (input, other):
            if (x.dtype.is_floating_point if x.__class__ is Tensor else isinstance(x, float)):
                raise DTypeError(f"{op}: only integer and bool operands are supported, got "
                                 f"{x.dtype if x.__class__ is Tensor else 'float'}")
        return _binary_forward(op, input, other, name=op)
    fn.__name__ = op
    return fn


bitwise_and, bitwise_or, bitwise_xor = (_bitwise(op) for op in ("bitwise_and", "bitwise_or", "bitwise_xor"))


def bitwise_not(input):
    if input.dtype.is_floating_point:
        raise DTypeError(f"bitwise_not: only integer and bool tensors are supported, got {input.dtype}")
    return wrap(input._backend.unary("bitwise_not", input._data), input._device)


def square(input):
    return mul(input, input)


def reciprocal(input):
    return div(1.0, input)


# ------------------------------------------------------------------------------------------------
# Tensor methods and Python operators
def _reflected(fn):
    return lambda self, other: fn(other, self)


for _name in ("add", "sub", "mul", "div", "pow", "neg", "maximum", "minimum", "exp", "log", "log1p",
              "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "sign", "clamp", "where",
              "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
              "logical_not", "square", "reciprocal", "erf", "floor", "ceil", "trunc", "round", "exp2", "log2",
              "log10", "isnan", "isinf", "isfinite", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"):
    method(_name)(globals()[_name])
Tensor.clip = Tensor.clamp
Tensor.clamp_min = lambda self, min: clamp(self, min=min)  # noqa: A002
Tensor.clamp_max = lambda self, max: clamp(self, max=max)  # noqa: A002
Tensor.true_divide = Tensor.divide = Tensor.div
Tensor.multiply, Tensor.subtract, Tensor.negative = Tensor.mul, Tensor.sub, Tensor.neg
Tensor.greater, Tensor.less, Tensor.greater_equal, Tensor.less_equal = Tensor.gt, Tensor.lt, Tensor.ge, Tensor.le
Tensor.not_equal = Tensor.ne
Tensor.where = lambda self, condition, other: where(condition, self, other)
Tensor.gelu = gelu
Tensor.silu = silu
Tensor.__add__ = add
Tensor.__radd__ = _reflected(add)
Tensor.__sub__ = sub
Tensor.__rsub__ = _reflected(sub)
Tensor.__mul__ = mul
Tensor.__rmul__ = _reflected(mul)
Tensor.__truediv__ = div
Tensor.__rtruediv__ = _reflected(div)
Tensor.__floordiv__ = lambda self, other: div(self, other, rounding_mode="floor")
Tensor.__rfloordiv__ = lambda self, other: div(other, self, rounding_mode="floor")
Tensor.__mod__ = lambda self, other: _binary_forward("remainder", self, other, name="remainder")
Tensor.__pow__ = pow
Tensor.__rpow__ = _reflected(pow)
Tensor.__neg__ = neg
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = abs
Tensor.__eq__ = lambda self, other: False if other is None else eq(self, other)  # PyTorch: t == None is False
Tensor.__ne__ = lambda self, other: True if other is None else ne(self, other)
Tensor.__lt__ = lt
Tensor.__le__ = le
Tensor.__gt__ = gt
Tensor.__ge__ = ge
# & | ^ ~ are bitwise, as in PyTorch (for bool tensors the same as logical)
Tensor.__and__ = Tensor.__rand__ = bitwise_and
Tensor.__or__ = Tensor.__ror__ = bitwise_or
Tensor.__xor__ = Tensor.__rxor__ = bitwise_xor
Tensor.__invert__ = bitwise_not
Tensor.fix = Tensor.trunc
