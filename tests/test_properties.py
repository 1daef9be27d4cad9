"""Property tests (hypothesis): broadcasting binary ops against NumPy's broadcasting and sum-to-shape,
and random small programs of differentiable ops checked by gradcheck and against PyTorch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import adcuda as A
from adcuda.autograd import gradcheck

F64 = A.float64
# derandomized: CI runs the same examples every time, so a failure reproduces
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True)


def unbroadcast(g, shape):
    """NumPy reference for undoing broadcasting: sum over the leading and the stretched dims."""
    g = g.sum(axis=tuple(range(g.ndim - len(shape))))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return g.sum(axis=stretched, keepdims=True).reshape(shape)


def arrays(rng, *shapes):
    return [rng.uniform(-2, 2, size=s) for s in shapes]


@SETTINGS
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=4, min_side=0, max_side=4),
    op=st.sampled_from(["add", "sub", "mul", "div", "maximum"]),
    seed=st.integers(0, 2**16),
)
def test_broadcast_binary_ops_match_numpy(shapes, op, seed):
    (sa, sb), out_shape = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(seed)
    x, y, w = arrays(rng, sa, sb, out_shape)
    if op == "div":
        y = np.where(np.abs(y) < 0.5, 0.5, y)
    a, b = (A.tensor(v, dtype=F64, requires_grad=True) for v in (x, y))
    out = getattr(A, op)(a, b)
    reference = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum}[op](
        x, y
    )
    assert out.shape == reference.shape == out_shape
    np.testing.assert_allclose(out.detach().numpy(), reference, rtol=1e-12)
    (out * A.tensor(w, dtype=F64)).sum().backward()
    xb, yb = np.broadcast_to(x, out_shape), np.broadcast_to(y, out_shape)
    da, db = {
        "add": (w, w),
        "sub": (w, -w),
        "mul": (w * yb, w * xb),
        "div": (w / yb, -w * xb / yb**2),
        "maximum": (w * (xb > yb) + 0.5 * w * (xb == yb), w * (yb > xb) + 0.5 * w * (xb == yb)),
    }[op]
    np.testing.assert_allclose(a.grad.numpy(), unbroadcast(da, sa), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), unbroadcast(db, sb), rtol=1e-10, atol=1e-12)


@SETTINGS
@given(shapes=mutually_broadcastable_shapes(num_shapes=3, max_dims=3, max_side=4), seed=st.integers(0, 2**16))
def test_broadcast_where_matches_numpy(shapes, seed):
    (sc, sa, sb), out_shape = shapes.input_shapes, shapes.result_shape
    rng = np.random.default_rng(seed)
    c = rng.uniform(size=sc) > 0.5
    x, y, w = arrays(rng, sa, sb, out_shape)
    a, b = (A.tensor(v, dtype=F64, requires_grad=True) for v in (x, y))
    out = A.where(A.tensor(c), a, b)
    np.testing.assert_allclose(out.detach().numpy(), np.where(c, x, y))
    (out * A.tensor(w, dtype=F64)).sum().backward()
    cb = np.broadcast_to(c, out_shape)
    np.testing.assert_allclose(a.grad.numpy(), unbroadcast(np.where(cb, w, 0.0), sa), atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), unbroadcast(np.where(cb, 0.0, w), sb), atol=1e-12)


@SETTINGS
@given(
    shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
    op=st.sampled_from(["add", "mul", "div", "pow"]),
    seed=st.integers(0, 2**16),
)
def test_broadcast_binary_ops_gradcheck(shapes, op, seed):
    sa, sb = shapes.input_shapes
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(0.5, 2.0, size=s) for s in (sa, sb))  # positive: pow and div are smooth there
    a, b = (A.tensor(v, dtype=F64, requires_grad=True) for v in (x, y))
    assert gradcheck(getattr(A, op), (a, b))


# ---------------------------------------------------------------------------------------------------
# random programs: every value is a (2, 3) float64 tensor; each op reads one or two earlier values
SHAPE = (2, 3)
UNARY_MENU = {
    "tanh": lambda lib, x: lib.tanh(x),
    "sigmoid": lambda lib, x: lib.sigmoid(x),
    "sin": lambda lib, x: lib.sin(x),
    "exp_tanh": lambda lib, x: lib.exp(lib.tanh(x)),
    "log1p_square": lambda lib, x: lib.log1p(x * x),
    "sqrt_1_plus_square": lambda lib, x: lib.sqrt(x * x + 1),
    "gelu": lambda lib, x: lib.nn.functional.gelu(x) if lib is not A else A.gelu(x),
    "silu": lambda lib, x: lib.nn.functional.silu(x) if lib is not A else A.silu(x),
    "scale": lambda lib, x: 0.5 * x - 1,
    "rpow": lambda lib, x: 2 ** lib.tanh(x),
    "center_rows": lambda lib, x: x - x.mean(1, keepdim=True),
    "normalise_cols": lambda lib, x: x / (x.std(0, keepdim=True) + 1),
    "logsumexp_rows": lambda lib, x: x - x.logsumexp(1, keepdim=True),
    "cumsum": lambda lib, x: lib.cumsum(x, 1) * 0.5,
    "transpose_twice": lambda lib, x: x.t().contiguous().t() * 1.5,
    "norm_rows": lambda lib, x: x / (x.norm(dim=1, keepdim=True) + 1),
    "max_cols": lambda lib, x: x + x.amax(0, keepdim=True),
}
BINARY_MENU = {
    "add": lambda lib, x, y: x + y,
    "sub": lambda lib, x, y: x - y,
    "mul": lambda lib, x, y: x * y,
    "div": lambda lib, x, y: x / (1 + y * y),
    "mix_rows": lambda lib, x, y: x * y.sum(0),  # a (3,) row broadcast against (2, 3)
    "matmul": lambda lib, x, y: (x @ y.t()) @ y * 0.25,
    "where": lambda lib, x, y: lib.where(x > y, x * 2, y),
    "pow": lambda lib, x, y: (1 + x * x) ** lib.tanh(y),
}


@st.composite
def programs(draw):
    n_inputs = draw(st.integers(1, 3))
    steps = []
    for k in range(draw(st.integers(3, 8))):
        available = n_inputs + k
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(sorted(UNARY_MENU))), draw(st.integers(0, available - 1))))
        else:
            steps.append(
                (
                    draw(st.sampled_from(sorted(BINARY_MENU))),
                    draw(st.integers(0, available - 1)),
                    draw(st.integers(0, available - 1)),
                )
            )
    return n_inputs, steps, draw(st.integers(0, 2**16))


def run_program(lib, steps, inputs):
    vals = list(inputs)
    for name, *args in steps:
        fn = UNARY_MENU.get(name) or BINARY_MENU[name]
        vals.append(fn(lib, *(vals[i] for i in args)))
    return vals[-1]


@SETTINGS
@given(program=programs())
def test_random_programs_pass_gradcheck(program):
    n_inputs, steps, seed = program
    rng = np.random.default_rng(seed)
    inputs = [A.tensor(rng.uniform(-1.5, 1.5, size=SHAPE), dtype=F64, requires_grad=True) for _ in range(n_inputs)]
    assert gradcheck(lambda *xs: run_program(A, steps, xs), tuple(inputs), atol=1e-5, rtol=1e-4)


@SETTINGS
@given(program=programs())
def test_random_programs_match_torch(program):
    torch = pytest.importorskip("torch")
    n_inputs, steps, seed = program
    rng = np.random.default_rng(seed)
    data = [rng.uniform(-1.5, 1.5, size=SHAPE) for _ in range(n_inputs)]
    ours = [A.tensor(v, dtype=F64, requires_grad=True) for v in data]
    theirs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in data]
    out, tout = run_program(A, steps, ours), run_program(torch, steps, theirs)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    w = rng.uniform(-1, 1, size=SHAPE)
    grads = A.autograd.grad((out * A.tensor(w, dtype=F64)).sum(), ours, allow_unused=True)
    tgrads = torch.autograd.grad((tout * torch.tensor(w)).sum(), theirs, allow_unused=True)
    for g, tg in zip(grads, tgrads):
        if tg is None:
            assert g is None or not g.numpy().any()
        else:
            np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-9, atol=1e-12)
