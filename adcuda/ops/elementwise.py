"""Elementwise ops with broadcasting: arithmetic, math functions, activations, comparisons."""
import math

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError, fmt_shape
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import Tensor
from ._core import (check_same_device, method, needs_grad, record, result_type, sum_to_shape, wrap)


def grad_for(g, shape, dtype):
    """A gradient brought back to an input's shape (undoing broadcasting) and dtype."""
    g = sum_to_shape(g, shape)
    if g.dtype is not dtype:
        g = g.to(dtype=dtype)
    return g


def _operand_info(x):
    if x.__class__ is Tensor:
        return x._data, x.shape, x.dtype
    if isinstance(x, (bool, int, float)):
        return x, None, None
    if hasattr(x, "__float__") and not hasattr(x, "shape"):
        return float(x), None, None
    raise DTypeError(f"unsupported operand of type {type(x).__name__}")


def _binary_forward(op, a, b, dtype=None, name=None):
    """Forward of a binary op on tensors and/or scalars; returns (out, dev, a_info, b_info)."""
    name = name or op
    if a.__class__ is not Tensor and b.__class__ is not Tensor:
        raise DTypeError(f"{name}: expected at least one Tensor operand")
    dev = check_same_device(name, a, b)
    ad, ashape, adt = _operand_info(a)
    bd, bshape, bdt = _operand_info(b)
    work = result_type(a, b)
    if dtype is None:
        dtype = work
    t = a if a.__class__ is Tensor else b
    bk = t._backend
    try:
        data = bk.binary(op, ad, bd, dtype)
    except ValueError as e:
        if ashape is not None and bshape is not None:
            raise ShapeError(f"{name}: shapes {fmt_shape(ashape)} and {fmt_shape(bshape)} cannot be "
                             "broadcast") from None
        raise ValueError(f"{name}: {e}") from None
    return Tensor._make(data, dev)


def _float_dtype(*operands):
    d = result_type(*operands)
    return d if d.is_floating_point else dt.default_float


# ------------------------------------------------------------------------------------------------
# arithmetic
def add(input, other, *, alpha=1):
    if alpha != 1:
        other = mul(other, alpha)
    out = _binary_forward("add", input, other, name="add")
    if needs_grad(input, other):
        sa, sb = _shape_dtype(input), _shape_dtype(other)
        record("AddBackward0", out, (input, other),
               lambda node, g: (sa and grad_for(g, *sa), sb and grad_for(g, *sb)))
    return out


def sub(input, other, *, alpha=1):
    if alpha != 1:
        other = mul(other, alpha)
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

        def backward(node, g):
            a, b = node.saved_tensors
            a = input if a is None else a
            b = other if b is None else b
            return (sa and grad_for(g * b, *sa), sb and grad_for(g * a, *sb))
        # each operand is kept only if the other one needs a gradient
        record("MulBackward0", out, (input, other), backward,
               saved=(input if sb and input.__class__ is Tensor else None,
                      other if sa and other.__class__ is Tensor else None))
    return out


def div(input, other, *, rounding_mode=None):
    if rounding_mode is not None:
        if rounding_mode == "floor":
            return _binary_forward("floor_divide", input, other, name="div")
        if rounding_mode == "trunc":
            q = _binary_forward("div", input, other, dtype=_float_dtype(input, other), name="div")
            q = wrap(q._backend.unary("sign", q._data), q._device) * floor(abs(q))
            return q.to(dtype=result_type(input, other))
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    out = _binary_forward("div", input, other, dtype=_float_dtype(input, other), name="div")
    if needs_grad(input, other):
        sa, sb = _shape_dtype(input), _shape_dtype(other)

        def backward(node, g):
            a, b = node.saved_tensors
            a = input if a is None else a
            b = other if b is None else b
            return (sa and grad_for(g / b, *sa), sb and grad_for(-g * a / (b * b), *sb))
        record("DivBackward0", out, (input, other), backward, saved=_tensors_only(input, other))
    return out


def pow(input, exponent):  # noqa: A001 (PyTorch's name)
    out = _binary_forward("pow", input, exponent, name="pow")
    if needs_grad(input, exponent):
        sa, sb = _shape_dtype(input), _shape_dtype(exponent)

        def backward(node, g):
            a, b, y = node.saved_tensors
            a = input if a is None else a
            b = exponent if b is None else b
            ga = gb = None
            if sa:
                if b.__class__ is not Tensor and b == 0:
                    ga = g * 0
                else:
                    ga = grad_for(g * b * a ** (b - 1), *sa)
            if sb:
                log_a = where(eq(a, 0), 0.0, log(a)) if a.__class__ is Tensor else math.log(a) if a > 0 else 0.0
                gb = grad_for(g * y * log_a, *sb)
            return ga, gb
        record("PowBackward0", out, (input, exponent), backward,
               saved=_tensors_only(input, exponent) + (out,))
    return out


def neg(input):
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


def sign(input):
    out = wrap(input._backend.unary("sign", input._data), input._device)
    if needs_grad(input):
        record("SignBackward0", out, (input,), lambda node, g: g * 0)
    return out


def floor(input):
    out = wrap(input._backend.unary("floor", input._data), input._device)
    if needs_grad(input):
        record("FloorBackward0", out, (input,), lambda node, g: g * 0)
    return out


def clamp(input, min=None, max=None):  # noqa: A002
    if min is None and max is None:
        raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
    if min.__class__ is Tensor or max.__class__ is Tensor:
        out = input
        if min is not None:
            out = maximum(out, min if min.__class__ is Tensor else full_like_scalar(input, min))
        if max is not None:
            out = minimum(out, max if max.__class__ is Tensor else full_like_scalar(input, max))
        return out
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


def full_like_scalar(t, value):
    from ..factories import full
    return full((), value, dtype=t.dtype, device=t.device)


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
              "logical_not", "square", "reciprocal", "erf", "floor"):
    method(_name)(globals()[_name])
Tensor.clip = Tensor.clamp
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
Tensor.__eq__ = eq
Tensor.__ne__ = ne
Tensor.__lt__ = lt
Tensor.__le__ = le
Tensor.__gt__ = gt
Tensor.__ge__ = ge
Tensor.__and__ = Tensor.__rand__ = logical_and
Tensor.__or__ = Tensor.__ror__ = logical_or
Tensor.__xor__ = Tensor.__rxor__ = logical_xor
Tensor.__invert__ = logical_not
