"""Elementwise ops: gradients (gradcheck in float64, on broadcast, non-contiguous, 0-d and empty
inputs), forward values against closed forms and NumPy, against PyTorch when it is installed,
float16 storage computed in fp32, Python scalars on either side, and errors that name the op."""

import math

import numpy as np
import pytest

import adcuda as A
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.errors import DTypeError, ShapeError, UnsupportedDTypeError

F64 = A.float64


def values(shape, domain="any", seed=0):
    """Float64 test data away from the places where an op has a kink or is undefined."""
    rng = np.random.default_rng(seed)
    magnitude = rng.uniform(0.2, 1.8, size=shape)
    if domain == "positive":
        return magnitude
    if domain == "unit":  # inside (-1, 1), away from 0
        return np.sign(rng.uniform(-1, 1, size=shape)) * magnitude / 2
    sign = np.where(rng.uniform(-1, 1, size=shape) >= 0, 1.0, -1.0)
    return sign * magnitude


def leaf(shape, domain="any", seed=0, dtype=F64):
    return A.tensor(values(shape, domain, seed), dtype=dtype, requires_grad=True)


# How an input reaches the op: the leaf that gradcheck perturbs, and the view the op is applied to.
LAYOUTS = {
    "contiguous": ((3, 4), lambda t: t),
    "transposed": ((4, 3), lambda t: t.t()),
    "stepped": ((3, 8), lambda t: t[:, 1::2]),
    "expanded": ((1, 4), lambda t: t.expand(3, 4)),
    "0-d": ((), lambda t: t),
    "empty": ((0, 4), lambda t: t),
}

# name: (adcuda op, input domain, name of the PyTorch equivalent or None)
UNARY = {
    "neg": (A.neg, "any", "neg"),
    "abs": (A.abs, "any", "abs"),
    "exp": (A.exp, "any", "exp"),
    "exp2": (A.exp2, "any", "exp2"),
    "log": (A.log, "positive", "log"),
    "log2": (A.log2, "positive", "log2"),
    "log10": (A.log10, "positive", "log10"),
    "log1p": (A.log1p, "unit", "log1p"),
    "sqrt": (A.sqrt, "positive", "sqrt"),
    "rsqrt": (A.rsqrt, "positive", "rsqrt"),
    "sin": (A.sin, "any", "sin"),
    "cos": (A.cos, "any", "cos"),
    "tanh": (A.tanh, "any", "tanh"),
    "sigmoid": (A.sigmoid, "any", "sigmoid"),
    "erf": (A.erf, "any", "erf"),
    "relu": (A.relu, "any", "relu"),
    "leaky_relu": (lambda x: A.leaky_relu(x, 0.1), "any", "leaky_relu"),
    "gelu": (A.gelu, "any", "gelu"),
    "gelu_tanh": (lambda x: A.gelu(x, approximate="tanh"), "any", "gelu_tanh"),
    "silu": (A.silu, "any", "silu"),
    "square": (A.square, "any", "square"),
    "reciprocal": (A.reciprocal, "any", "reciprocal"),
    "sign": (A.sign, "any", "sign"),
    "floor": (A.floor, "any", "floor"),
    "ceil": (A.ceil, "any", "ceil"),
    "round": (A.round, "any", "round"),
    "trunc": (A.trunc, "any", "trunc"),
    "clamp": (lambda x: A.clamp(x, -0.5, 0.7), "any", "clamp"),
    "pow_scalar": (lambda x: x**3, "any", "pow3"),
    "pow_half": (lambda x: x**0.5, "positive", "pow_half"),
    "pow_negative": (lambda x: x**-1.5, "positive", "pow_negative"),
    "rpow": (lambda x: 2**x, "any", "rpow"),
    "rsub": (lambda x: 2 - x, "any", "rsub"),
    "rdiv": (lambda x: 2 / x, "any", "rdiv"),
    "scalar_mul": (lambda x: x * 3, "any", "scalar_mul"),
}


def torch_unary(torch, name):
    F = torch.nn.functional
    special = {
        "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
        "gelu": F.gelu,
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": F.silu,
        "clamp": lambda x: torch.clamp(x, -0.5, 0.7),
        "pow3": lambda x: x**3,
        "pow_half": lambda x: x**0.5,
        "pow_negative": lambda x: x**-1.5,
        "rpow": lambda x: 2**x,
        "rsub": lambda x: 2 - x,
        "rdiv": lambda x: 2 / x,
        "scalar_mul": lambda x: x * 3,
    }
    return special.get(name) or getattr(torch, name)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_gradcheck(name, layout):
    op, domain, _ = UNARY[name]
    shape, view = LAYOUTS[layout]
    assert gradcheck(lambda x: op(view(x)), (leaf(shape, domain),))


# Ops whose backward is a composite of differentiable ops: the second derivative must be right too.
@pytest.mark.parametrize(
    "name",
    [
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "sin",
        "tanh",
        "sigmoid",
        "erf",
        "gelu",
        "gelu_tanh",
        "silu",
        "reciprocal",
        "pow_half",
        "rpow",
        "exp2",
        "log2",
    ],
)
def test_unary_second_derivative(name):
    op, domain, _ = UNARY[name]
    assert gradgradcheck(op, (leaf((5,), domain),))


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "relu"])
def test_fused_backward_matches_the_composite_one(name):
    """``backward()`` uses a fused backward primitive; ``create_graph=True`` the composite rule."""
    op, domain, _ = UNARY[name]
    x = leaf((7,), domain)
    (fused,) = A.autograd.grad(op(x).sum(), [x])
    (composite,) = A.autograd.grad(op(x).sum(), [x], create_graph=True)
    np.testing.assert_allclose(fused.numpy(), composite.detach().numpy(), rtol=1e-12, atol=1e-12)


def _closed_form(name, x):
    erf = np.vectorize(math.erf)
    sig = 1 / (1 + np.exp(-x))
    table = {
        "sigmoid": lambda: sig,
        "silu": lambda: x * sig,
        "erf": lambda: erf(x),
        "gelu": lambda: x * 0.5 * (1 + erf(x / math.sqrt(2))),
        "rsqrt": lambda: 1 / np.sqrt(x),
        "gelu_tanh": lambda: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        "leaky_relu": lambda: np.where(x > 0, x, 0.1 * x),
        "relu": lambda: np.maximum(x, 0),
        "round": lambda: np.round(x),
        "exp2": lambda: 2.0**x,
        "log10": lambda: np.log10(x),
        "log2": lambda: np.log2(x),
        "clamp": lambda: np.clip(x, -0.5, 0.7),
    }
    return table[name]()


@pytest.mark.parametrize(
    "name",
    [
        "sigmoid",
        "silu",
        "gelu",
        "gelu_tanh",
        "erf",
        "rsqrt",
        "leaky_relu",
        "relu",
        "round",
        "exp2",
        "log10",
        "log2",
        "clamp",
    ],
)
@pytest.mark.parametrize("dtype", [A.float32, F64])
def test_unary_forward_closed_form(name, dtype):
    op, domain, _ = UNARY[name]
    x = values((50,), domain, seed=3) * 3
    got = op(A.tensor(x, dtype=dtype)).numpy()
    tol = 1e-6 if dtype is A.float32 else 1e-12
    np.testing.assert_allclose(got, _closed_form(name, x.astype(dtype.numpy)), rtol=tol, atol=tol)


def test_float32_erf_keeps_its_relative_accuracy_near_zero():
    x = np.concatenate([np.logspace(-30, 0, 61), -np.logspace(-8, 0, 17), np.linspace(-4, 4, 81)])
    x = x.astype(np.float32)
    got = A.erf(A.tensor(x)).numpy().astype(np.float64)
    expected = np.array([math.erf(float(v)) for v in x])
    np.testing.assert_allclose(got, expected, rtol=5e-7, atol=1e-30)


def test_rounding_ops_have_zero_gradient_and_keep_integers():
    x = A.tensor([-2.5, -0.5, 0.5, 1.5, 2.49], dtype=F64, requires_grad=True)
    assert A.round(x).tolist() == [-2.0, -0.0, 0.0, 2.0, 2.0]  # half to even, as in PyTorch
    assert A.round(A.tensor([1.2345, -2.5678]), decimals=2).tolist() == pytest.approx([1.23, -2.57])
    for op in (A.floor, A.ceil, A.round, A.trunc, A.sign):
        y = op(x)
        assert y.requires_grad
        (g,) = A.autograd.grad(y.sum(), [x])
        assert g.tolist() == [0.0] * 5
    ints = A.tensor([-3, 0, 4])
    for op in (A.floor, A.ceil, A.round, A.trunc):
        out = op(ints)
        assert out.dtype is A.int64 and out.tolist() == [-3, 0, 4]
    assert A.sign(ints).tolist() == [-1, 0, 1]
    assert A.sign(A.tensor([float("nan"), -0.5, 0.0])).tolist() == [0.0, -1.0, 0.0]  # as in PyTorch
    assert A.sign(A.tensor([True, False])).tolist() == [True, False]


@pytest.mark.parametrize("name", [n for n, (_, _, t) in UNARY.items() if t])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_matches_torch(name, dtype):
    torch = pytest.importorskip("torch")
    op, domain, tname = UNARY[name]
    x = values((4, 5), domain, seed=1)
    a = A.tensor(x, dtype=getattr(A, dtype), requires_grad=True)
    t = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    ya, yt = op(a.t()), torch_unary(torch, tname)(t.t())
    g = np.linspace(-1, 1, ya.numel()).reshape(tuple(ya.shape))
    ya.backward(A.tensor(g, dtype=ya.dtype))
    yt.backward(torch.tensor(g, dtype=yt.dtype))
    tol = dict(rtol=2e-6, atol=2e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **tol)
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), **tol)
    assert ya.dtype.name == str(yt.dtype).split(".")[1]


# ---------------------------------------------------------------------------------------------------
# binary ops
BINARY = {
    "add": (A.add, "any"),
    "sub": (A.sub, "any"),
    "mul": (A.mul, "any"),
    "div": (A.div, "any"),
    "pow": (A.pow, "positive"),
    "maximum": (A.maximum, "any"),
    "minimum": (A.minimum, "any"),
    "add_alpha": (lambda a, b: A.add(a, b, alpha=-2.5), "any"),
    "sub_alpha": (lambda a, b: A.sub(a, b, alpha=0.5), "any"),
    "where": (lambda a, b: A.where(a > b, a, b * 2), "any"),
    "clamp_min_tensor": (lambda a, b: A.clamp(a, min=b), "any"),
    "clamp_max_tensor": (lambda a, b: A.clamp(a, max=b), "any"),
}

# (leaf shape a, view a, leaf shape b, view b): broadcasting, non-contiguous, 0-d and empty operands
SHAPE_PAIRS = {
    "same": ((3, 4), None, (3, 4), None),
    "row": ((3, 4), None, (4,), None),
    "outer": ((3, 1), None, (1, 4), None),
    "rank3": ((2, 3, 4), None, (3, 1), None),
    "0-d": ((), None, (2, 3), None),
    "both 0-d": ((), None, (), None),
    "empty": ((0, 3), None, (3,), None),
    "transposed": ((4, 3), lambda t: t.t(), (3, 4), None),
    "stepped": ((3, 8), lambda t: t[:, ::2], (1, 4), None),
    "expanded": ((1, 4), lambda t: t.expand(3, 4), (3, 1), lambda t: t.expand(3, 4)),
}


@pytest.mark.parametrize("pair", SHAPE_PAIRS)
@pytest.mark.parametrize("name", BINARY)
def test_binary_gradcheck(name, pair):
    op, domain = BINARY[name]
    sa, va, sb, vb = SHAPE_PAIRS[pair]
    va, vb = va or (lambda t: t), vb or (lambda t: t)
    a, b = leaf(sa, domain, seed=1), leaf(sb, domain, seed=2)
    assert gradcheck(lambda x, y: op(va(x), vb(y)), (a, b))


@pytest.mark.parametrize("name", ["mul", "div", "pow", "maximum", "where"])
def test_binary_second_derivative(name):
    op, domain = BINARY[name]
    assert gradgradcheck(op, (leaf((2, 3), domain, seed=1), leaf((3,), domain, seed=2)))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_matches_torch_with_broadcasting(name, dtype):
    torch = pytest.importorskip("torch")
    op, domain = BINARY[name]
    x, y = values((2, 3, 4), domain, seed=1), values((3, 1), domain, seed=2)
    a, b = (A.tensor(v, dtype=getattr(A, dtype), requires_grad=True) for v in (x, y))
    ta, tb = (torch.tensor(v, dtype=getattr(torch, dtype), requires_grad=True) for v in (x, y))
    out, tout = op(a, b), getattr(torch, name)(ta, tb)
    out.sum().backward()
    tout.sum().backward()
    tol = dict(rtol=2e-6, atol=2e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), **tol)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), **tol)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), **tol)


def test_binary_forward_matches_numpy_broadcasting():
    x, y = values((2, 3, 4), seed=1), values((3, 1), seed=2)
    a, b = A.tensor(x, dtype=F64), A.tensor(y, dtype=F64)
    np.testing.assert_allclose((a + b).numpy(), x + y)
    np.testing.assert_allclose((a - b).numpy(), x - y)
    np.testing.assert_allclose((a * b).numpy(), x * y)
    np.testing.assert_allclose((a / b).numpy(), x / y)
    np.testing.assert_allclose((a.abs() ** b).numpy(), np.abs(x) ** y)
    np.testing.assert_allclose(A.maximum(a, b).numpy(), np.maximum(x, y))
    np.testing.assert_allclose(A.where(a > b, a, b).numpy(), np.where(x > y, x, y))


def test_python_scalars_on_either_side():
    t = A.tensor([1.0, 2.0, 4.0])
    assert (2 - t).tolist() == [1.0, 0.0, -2.0]
    assert (t - 2).tolist() == [-1.0, 0.0, 2.0]
    assert (2**t).tolist() == [2.0, 4.0, 16.0]
    assert (t**0.5).tolist() == pytest.approx([1.0, math.sqrt(2), 2.0])
    assert (8 / t).tolist() == [8.0, 4.0, 2.0]
    assert (3 * t).tolist() == (t * 3).tolist() == [3.0, 6.0, 12.0]
    assert (1 + t).tolist() == (t + 1).tolist() == [2.0, 3.0, 5.0]
    assert (7 // A.tensor([2, -2])).tolist() == [3, -4]
    assert (A.tensor([7, -7]) % 3).tolist() == [1, 2]
    assert A.add(t, 2, alpha=3).tolist() == [7.0, 8.0, 10.0]
    # NumPy scalars act like Python ones, NumPy arrays like tensors
    assert (t + np.float64(1)).dtype is A.float32
    assert (t + np.ones(3)).dtype is A.float64


def test_gradient_reaches_a_tensor_exponent_with_a_scalar_base():
    x = A.tensor([0.5, 1.0, 2.0], dtype=F64, requires_grad=True)
    (3**x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), math.log(3) * 3 ** np.array([0.5, 1.0, 2.0]))
    x = A.tensor([0.5, 1.0], dtype=F64, requires_grad=True)
    (0**x).sum().backward()  # 0 ** x does not change with x > 0
    assert x.grad.tolist() == [0.0, 0.0]


def test_pow_gradients_at_zero_follow_pytorch():
    a = A.tensor([0.0, 0.0, 2.0], dtype=F64, requires_grad=True)
    b = A.tensor([0.0, 2.0, 0.0], dtype=F64, requires_grad=True)
    (a**b).sum().backward()
    assert a.grad.tolist() == [0.0, 0.0, 0.0]  # b == 0: 0, not 0 * inf
    assert b.grad.tolist() == [0.0, 0.0, math.log(2.0)]  # a == 0 with b >= 0: 0, not NaN


def test_ties_split_the_gradient_of_maximum_and_minimum():
    a = A.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = A.tensor([1.0, 5.0, 0.0], requires_grad=True)
    (A.maximum(a, b) + A.minimum(a, b) * 10).sum().backward()
    assert a.grad.tolist() == [5.5, 10.0, 1.0]
    assert b.grad.tolist() == [5.5, 1.0, 10.0]


def test_clamp_gradient_at_the_bounds_and_with_crossed_bounds():
    x = A.tensor([-1.0, 0.0, 0.5, 1.0, 2.0], requires_grad=True)
    x.clamp(0.0, 1.0).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]  # a value on a bound keeps its gradient
    x = A.tensor([-1.0, 0.0, 0.5, 1.0, 2.0], requires_grad=True)
    lo = A.full((5,), 0.0, requires_grad=True)
    hi = A.full((5,), 1.0, requires_grad=True)
    out = A.clamp(x, lo, hi)
    assert out.tolist() == [0.0, 0.0, 0.5, 1.0, 1.0]
    out.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    assert lo.grad.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert hi.grad.tolist() == [0.0, 0.0, 0.0, 0.0, 1.0]
    # min > max: the result is max everywhere, and max takes the whole gradient
    x = A.tensor([0.0, 5.0], requires_grad=True)
    lo, hi = A.tensor([3.0, 3.0], requires_grad=True), A.tensor([2.0, 2.0], requires_grad=True)
    out = A.clamp(x, lo, hi)
    out.sum().backward()
    assert out.tolist() == [2.0, 2.0]
    assert (x.grad.tolist(), lo.grad.tolist(), hi.grad.tolist()) == ([0.0, 0.0], [0.0, 0.0], [1.0, 1.0])


def test_clamp_matches_torch_with_tensor_bounds():
    torch = pytest.importorskip("torch")
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0])
    lo, hi = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 4.0]), np.array([1.0, 1.0, 1.0, 1.0, 1.0, 2.0])
    ours = [A.tensor(v, requires_grad=True) for v in (x, lo, hi)]
    theirs = [torch.tensor(v, dtype=torch.float32, requires_grad=True) for v in (x, lo, hi)]
    A.clamp(*ours).sum().backward()
    torch.clamp(*theirs).sum().backward()
    for o, t in zip(ours, theirs):
        assert o.grad.tolist() == t.grad.tolist()


def test_clamp_promotes_like_pytorch():
    assert A.clamp(A.tensor([1, 5]), 1.5, 3.5).tolist() == [1.5, 3.5]
    assert A.clamp(A.tensor([1, 5]), 2, 3).dtype is A.int64
    assert A.clamp(A.tensor([1.0], dtype=A.float16), 2.0).dtype is A.float16
    assert A.tensor([1.0, 5.0]).clamp_min(2.0).tolist() == [2.0, 5.0]
    assert A.tensor([1.0, 5.0]).clamp_max(A.tensor([0.0, 9.0])).tolist() == [0.0, 5.0]


def test_rounded_division():
    a = A.tensor([-7.0, 7.0], requires_grad=True)
    assert A.div(a, 2, rounding_mode="floor").tolist() == [-4.0, 3.0]
    out = A.div(a, 2, rounding_mode="trunc")
    assert out.tolist() == [-3.0, 3.0]
    out.sum().backward()
    assert a.grad.tolist() == [0.0, 0.0]
    assert A.div(A.tensor([-7, 7]), 2, rounding_mode="trunc").tolist() == [-3, 3]
    with pytest.raises(ValueError, match="div: rounding_mode"):
        A.div(a, 2, rounding_mode="up")


def test_comparisons_and_logical_ops():
    a, b = A.tensor([1, 2, 3]), A.tensor([1.0, 2.5, 2.0])
    assert (a == b).tolist() == [True, False, False]
    assert (a != b).tolist() == [False, True, True]
    assert (a < b).tolist() == [False, True, False]
    assert (a <= b).tolist() == [True, True, False]
    assert (a > b).tolist() == [False, False, True]
    assert (a >= b).tolist() == [True, False, True]
    assert (a > 1.5).dtype is A.bool
    assert A.logical_and(a > 1, b > 2).tolist() == [False, True, False]
    assert A.logical_or(a > 2, b < 2).tolist() == [True, False, True]
    assert A.logical_not(a > 1).tolist() == [True, False, False]
    assert A.logical_xor(a > 1, b > 2).tolist() == [False, False, True]
    x = A.tensor([1.0, 2.0], requires_grad=True)
    assert not (x > 1).requires_grad
    assert (x == None) is False and (x != None) is True  # noqa: E711 (PyTorch's answer to this)


def test_operators_on_integer_tensors_are_bitwise():
    a, b = A.tensor([12, 10, -1]), A.tensor([10, 6, 3])
    assert (a & b).tolist() == [8, 2, 3]
    assert (a | b).tolist() == [14, 14, -1]
    assert (a ^ b).tolist() == [6, 12, -4]
    assert (~a).tolist() == [-13, -11, 0]
    m = A.tensor([True, False])
    assert (~m).tolist() == [False, True]
    assert (m & A.tensor([True, True])).tolist() == [True, False]
    with pytest.raises(UnsupportedDTypeError, match="bitwise_and"):
        A.tensor([1.0]) & A.tensor([1.0])


def test_float_classification():
    x = A.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])
    assert A.isnan(x).tolist() == [False, True, False, False, False]
    assert A.isinf(x).tolist() == [False, False, True, True, False]
    assert A.isfinite(x).tolist() == [True, False, False, False, True]
    ints = A.tensor([1, 2])
    assert A.isnan(ints).tolist() == [False, False] and A.isfinite(ints).tolist() == [True, True]
    h = A.tensor([1.0, float("inf")], dtype=A.float16)
    assert A.isinf(h).tolist() == [False, True] and A.isnan(h).dtype is A.bool


# ---------------------------------------------------------------------------------------------------
# float16: stored in half, computed in fp32
HALF_UNARY = [
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "sin",
    "tanh",
    "sigmoid",
    "gelu",
    "gelu_tanh",
    "silu",
    "relu",
    "erf",
    "log1p",
    "exp2",
    "reciprocal",
]


@pytest.mark.parametrize("name", HALF_UNARY)
def test_float16_unary_is_computed_in_fp32(name):
    op, domain, _ = UNARY[name]
    x16 = A.tensor(values((64,), domain, seed=4), dtype=A.float16)
    out = op(x16)
    assert out.dtype is A.float16
    reference = op(x16.float()).numpy()  # the same half inputs, in fp32
    np.testing.assert_allclose(out.numpy().astype(np.float32), reference, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum"])
def test_float16_binary_and_gradients_stay_half(name):
    op, domain = BINARY[name]
    a = A.tensor(values((3, 4), domain, seed=5), dtype=A.float16, requires_grad=True)
    b = A.tensor(values((4,), domain, seed=6), dtype=A.float16, requires_grad=True)
    out = op(a, b)
    assert out.dtype is A.float16
    reference = op(a.detach().float(), b.detach().float()).numpy()
    np.testing.assert_allclose(out.detach().numpy().astype(np.float32), reference, rtol=2e-3, atol=2e-3)
    out.sum().backward()
    assert a.grad.dtype is A.float16 and b.grad.dtype is A.float16


# ---------------------------------------------------------------------------------------------------
# errors name the op and the shapes or dtypes
def test_broadcast_mismatch_names_op_and_both_shapes():
    a, b = A.ones(3, 4), A.ones(5)
    for op, name in (
        (A.add, "add"),
        (A.sub, "sub"),
        (A.mul, "mul"),
        (A.div, "div"),
        (A.maximum, "maximum"),
        (A.pow, "pow"),
        (A.eq, "eq"),
    ):
        with pytest.raises(ShapeError, match=rf"{name}: shapes \(3, 4\) and \(5,\)"):
            op(a, b)
    with pytest.raises(ShapeError, match=r"where: shapes .*\(3, 4\).*\(5,\)"):
        A.where(a > 0, a, b)
    with pytest.raises(ShapeError, match=r"clamp: shapes"):
        A.clamp(a, min=b)


def test_integer_to_negative_integer_power_is_an_error():
    with pytest.raises(RuntimeError, match="pow: integers to negative integer powers"):  # PyTorch's class
        A.tensor([2, 3]) ** -1
    with pytest.raises(RuntimeError, match="pow: integers to negative integer powers"):
        A.tensor([2, 3]) ** A.tensor([1, -2])
    assert (A.tensor([2, 4]) ** -1.0).tolist() == [0.5, 0.25]  # a float exponent is fine
    assert (A.tensor([2, 3]) ** 2).tolist() == [4, 9]


def test_bool_arithmetic_follows_pytorch():
    t = A.tensor([True, False])
    assert (t + t).dtype is A.bool and (t + t).tolist() == [True, False]
    assert (t * 2).dtype is A.int64 and (t * 2.5).dtype is A.float32
    assert (t / t).dtype is A.float32
    with pytest.raises(UnsupportedDTypeError, match="sub: .*bool"):
        t - t
    with pytest.raises(UnsupportedDTypeError, match="neg: .*bool"):
        _ = -t


def test_integer_division_by_zero_raises():
    with pytest.raises(ZeroDivisionError, match="floor_divide"):
        A.tensor([1, 2]) // A.tensor([1, 0])
    with pytest.raises(ZeroDivisionError, match="remainder"):
        A.tensor([1, 2]) % 0
    assert (A.tensor([1, 2]) / 0).tolist() == [math.inf, math.inf]  # true division is float


def test_unsupported_operands_name_the_op():
    with pytest.raises(DTypeError, match="add: unsupported operand of type str"):
        A.ones(2) + "a"
    with pytest.raises(DTypeError, match="maximum: expected other to be a Tensor"):
        A.maximum(A.ones(2), 1.0)
    with pytest.raises(DTypeError, match="exp: expected a Tensor"):
        A.exp(1.0)
