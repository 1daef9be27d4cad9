"""PyTorch's numerics at the edges (issue 27), checked against PyTorch itself:

- formulas stable at any magnitude: cross-entropy, log_softmax, logsumexp at logits like 1e8 and 3e4
  (value and gradient), exact fmod and PyTorch's remainder, float16 reductions accumulated in
  float32, the overflow-prone activations and losses at extreme inputs;
- PyTorch's conventions at kinks and ties (the gradient at relu6's 0 and 6, hardswish's +-3, ties of
  max/amax/maximum/median, a cross-entropy whose every target is ignored);
- dtypes: promotion of tensors, 0-d and empty tensors and Python scalars as torch.result_type,
  ``alpha=``, reductions' ``dtype=``;
- bit parity where PyTorch's formula is known: x ** 3 is x * x * x, sums add up in PyTorch's order, SGD
  steps are fused multiply-adds, so an SGD fit of a cubic follows PyTorch bit for bit;
- invalid input PyTorch rejects is rejected.

Each value test runs on the CPU and (``cuda``-marked) on a GPU or the CUDA emulator.
"""

import itertools
import math
import warnings

import numpy as np
import pytest
from helpers import DEVICES

import adcuda
import adcuda.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

INF, NAN = math.inf, math.nan


def _both(fn, values, dtype="float32", device="cpu", grad=True):
    """(adcuda's, PyTorch's) (value, gradient of its sum) of ``fn(lib, functional, x)`` on ``values``."""
    out = []
    for lib, functional in ((adcuda, F), (torch, TF)):
        on = device if lib is adcuda else "cpu"
        x = lib.tensor(values, dtype=getattr(lib, dtype), device=on, requires_grad=grad)
        y = fn(lib, functional, x)
        if grad:
            y.sum().backward()
        value = np.asarray(y.detach().to(dtype=lib.float64, device="cpu").tolist(), np.float64)
        gradient = np.asarray(x.grad.to(dtype=lib.float64, device="cpu").tolist(), np.float64) if grad else None
        out.append((value, gradient))
    return out


def _assert_close(got, expected, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)


# ------------------------------------------------------------------------------------------------
# stable formulas at any magnitude
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("logits", [[1e8, 1e8, 0.0], [3e4, 3e4 + 1, 0.0], [-1e30, 0.0, 1e30], [88.0, 89.0, -90.0]])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cross_entropy_at_huge_logits_matches_torch(device, logits, label_smoothing, dtype):
    """The loss and its gradient keep the log-softmax's shift and log-sum apart: their sum would round
    log 2 away at 1e8 (the loss was 0, PyTorch 0.6931) and lose digits at 3e4."""
    if label_smoothing and dtype == "float32" and max(map(abs, logits)) > 1e6:
        pytest.skip("the smoothing term sums the logits: at 1e30 neither library keeps its digits in float32")

    def fn(lib, functional, x):
        target = lib.tensor([1, 0], device=x.device)
        return functional.cross_entropy(x.reshape(1, 3).expand(2, 3), target, label_smoothing=label_smoothing)

    (value, gradient), (value_t, gradient_t) = _both(fn, logits, dtype, device)
    _assert_close(value, value_t, rtol=1e-6)
    _assert_close(gradient, gradient_t, rtol=1e-6, atol=1e-7)


def test_cross_entropy_at_1e8_is_log_2():
    x = adcuda.tensor([[1e8, 1e8, 0.0]], requires_grad=True)
    loss = F.cross_entropy(x, adcuda.tensor([1]))
    loss.backward()
    assert loss.item() == pytest.approx(math.log(2), rel=1e-7)
    assert x.grad.tolist() == [[0.5, -0.5, 0.0]]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "name", ["log_softmax", "softmax", "logsumexp", "nll_of_log_softmax", "cross_entropy_weighted", "soft_targets"]
)
def test_softmax_family_at_huge_logits_matches_torch(device, name):
    def fn(lib, functional, x):
        rows = x.reshape(2, 3)
        if name == "log_softmax":
            return functional.log_softmax(rows, 1)
        if name == "softmax":
            return functional.softmax(rows, 1)
        if name == "logsumexp":
            return lib.logsumexp(rows, 1)
        target = lib.tensor([1, 2], device=x.device)
        if name == "nll_of_log_softmax":
            return functional.nll_loss(functional.log_softmax(rows, 1), target)
        if name == "cross_entropy_weighted":
            return functional.cross_entropy(rows, target, weight=lib.tensor([1.0, 2.0, 0.5], device=x.device))
        return functional.cross_entropy(rows, lib.tensor([[0.2, 0.8, 0.0], [0.0, 0.5, 0.5]], device=x.device))

    (value, gradient), (value_t, gradient_t) = _both(fn, [1e8, 1e8, 0.0, 3e4, 3e4 + 1, 0.0], "float32", device)
    _assert_close(value, value_t, rtol=1e-6)
    _assert_close(gradient, gradient_t, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "cross_entropy"])
def test_rows_holding_inf_or_nan_are_nan_as_in_torch(device, name):
    """PyTorch shifts by the row's max even where it is infinite: a row holding +inf or NaN, or only
    -inf, is NaN throughout (it was 0 / -inf / inf: NumPy's order shifted by 0 there)."""
    rows = [INF, 1.0, -INF, -INF, NAN, 1.0, -INF, 1.0, 2.0, 3.0]

    def fn(lib, functional, x):
        x = x.reshape(5, 2)
        if name == "cross_entropy":
            return functional.cross_entropy(x, lib.tensor([1, 0, 1, 1, 0], device=x.device), reduction="none")
        return getattr(functional, name)(x, 1)

    (value, gradient), (value_t, gradient_t) = _both(fn, rows, "float32", device)
    _assert_close(value, value_t)
    _assert_close(gradient, gradient_t)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_fmod_and_remainder_follow_c_and_python_sign_rules(device, dtype):
    a = [5, -5, 5, -5, 4, -4, 0, 7] if dtype == "int64" else [5.5, -5.5, 5.5, -5.5, 4.0, -4.0, -0.001, -0.0, 1e30]
    b = [3, 3, -3, -3, 2, 2, 3, -2] if dtype == "int64" else [3.0, 3.0, -3.0, -3.0, 2.0, 2.0, 1e5, 3.0, 7.0]
    for name in ("fmod", "remainder"):
        divisor = adcuda.tensor(b, device=device)
        got = getattr(adcuda, name)(adcuda.tensor(a, dtype=getattr(adcuda, dtype), device=device), divisor)
        expected = getattr(torch, name)(torch.tensor(a, dtype=getattr(torch, dtype)), torch.tensor(b))
        assert got.dtype.name == str(expected.dtype).split(".")[-1]
        got_values = np.asarray(got.cpu().tolist())
        np.testing.assert_array_equal(got_values, expected.numpy())
        np.testing.assert_array_equal(np.signbit(got_values), np.signbit(expected.numpy()))  # zeros' signs too
    assert adcuda.fmod(adcuda.tensor([-0.001], device=device), 1e5).item() == np.float32(-0.001)


@pytest.mark.parametrize("device", DEVICES)
def test_fmod_and_remainder_gradients_match_torch(device):
    for name in ("fmod", "remainder"):
        grads = []
        for lib in (adcuda, torch):
            on = device if lib is adcuda else "cpu"
            x = lib.tensor([5.5, -5.5, 7.25], dtype=lib.float64, device=on, requires_grad=True)
            y = lib.tensor([3.0, 2.0, -2.0], dtype=lib.float64, device=on, requires_grad=True)
            getattr(lib, name)(x, y).sum().backward()
            grads.append((x.grad.cpu().tolist(), y.grad.cpu().tolist()))
        assert grads[0] == grads[1], name


def test_integer_fmod_by_zero_raises():
    with pytest.raises(ZeroDivisionError, match="fmod"):
        adcuda.fmod(adcuda.tensor([5, -5]), 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "name, values",
    [
        ("norm", [300.0] * 4),
        ("norm3", [300.0] * 4),
        ("std", [300.0, -300.0, 300.0]),
        ("sum", [60000.0, 60000.0, -60000.0]),
        ("mean", [60000.0, 60000.0, -60000.0]),
        ("logsumexp", [11.0, 11.0, 10.0]),
        ("softmax", [11.0, 11.0, 10.0]),
        ("cumsum", [2048.0, 1.0, 1.0, 1.0, 1.0]),
    ],
)
def test_float16_reductions_accumulate_in_float32(device, name, values):
    """fp16 ``tensor([300.]*4).norm()`` is 600 (it was inf: the squares were float16)."""

    def fn(lib, functional, x):
        if name == "norm3":
            return x.norm(3)
        if name == "softmax":
            return x.softmax(0)
        if name in ("logsumexp", "cumsum"):
            return getattr(x, name)(0)
        return getattr(x, name)()

    (value, _), (value_t, _) = _both(fn, values, "float16", device, grad=False)
    assert np.all(np.isfinite(value_t))
    _assert_close(value, value_t, rtol=2e-3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "name",
    [
        "softplus",
        "logsigmoid",
        "sigmoid",
        "silu",
        "tanh",
        "bce_with_logits_1",
        "bce_with_logits_0",
        "logaddexp",
        "hypot",
        "expm1",
        "elu",
        "mish",
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_overflow_prone_formulas_at_extreme_values(device, name, dtype):
    values = [0.0, 1.0, -1.0, 20.0, -20.0, 88.0, -88.0, 100.0, -100.0, 1e4, -1e4, 1e30, -1e30, INF, -INF]

    def fn(lib, functional, x):
        if name == "bce_with_logits_1":
            return functional.binary_cross_entropy_with_logits(x, x * 0 + 1, reduction="none")
        if name == "bce_with_logits_0":
            return functional.binary_cross_entropy_with_logits(x, x.detach() * 0, reduction="none")
        if name in ("logaddexp", "hypot"):
            return getattr(lib, name)(x, x.detach() * 0.5)
        if name in ("expm1", "sigmoid", "tanh"):
            return getattr(lib, name)(x)
        return getattr(functional, name)(x)

    (value, gradient), (value_t, gradient_t) = _both(fn, values, dtype, device)
    _assert_close(value, value_t, rtol=2e-6)
    finite = np.isfinite(values)  # d/dx at +-inf: both libraries' NaN or 0 conventions vary by op
    _assert_close(gradient[finite], gradient_t[finite], rtol=2e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_binary_cross_entropy_clamps_its_logs_at_minus_100(device):
    def fn(lib, functional, x):
        return functional.binary_cross_entropy(x, lib.tensor([1.0, 0.0, 1.0, 0.0], device=x.device), reduction="none")

    (value, gradient), (value_t, gradient_t) = _both(fn, [0.0, 1.0, 1e-30, 1.0 - 1e-7], "float32", device)
    _assert_close(value, value_t)
    assert value.max() == 100.0


# ------------------------------------------------------------------------------------------------
# kinks and ties
KINKS = {
    "relu": ([0.0, -0.0, NAN, 1.0], lambda lib, f, x: f.relu(x)),
    "relu6": ([0.0, 6.0, -0.0, 3.0], lambda lib, f, x: f.relu6(x)),
    "hardtanh": ([-1.0, 1.0, 0.5], lambda lib, f, x: f.hardtanh(x)),
    "hardtanh_bounds": ([-2.0, 3.0, 0.0], lambda lib, f, x: f.hardtanh(x, -2.0, 3.0)),
    "clamp": ([0.0, 1.0, 0.5, 2.0], lambda lib, f, x: x.clamp(0.0, 1.0)),
    "clamp_min": ([0.0, -1.0, 1.0], lambda lib, f, x: x.clamp(min=0.0)),
    "hardswish": ([-3.0, 3.0, 0.0, -4.0, 4.0], lambda lib, f, x: f.hardswish(x)),
    "hardsigmoid": ([-3.0, 3.0, 0.0, 1.0, NAN], lambda lib, f, x: f.hardsigmoid(x)),
    "leaky_relu": ([0.0, -0.0, NAN], lambda lib, f, x: f.leaky_relu(x, 0.1)),
    "threshold": ([1.0, 0.5, 2.0, NAN], lambda lib, f, x: f.threshold(x, 1.0, 5.0)),
    "abs": ([0.0, -0.0, -2.0], lambda lib, f, x: x.abs()),
    "sign": ([0.0, -0.0, NAN], lambda lib, f, x: x.sign()),
    "hardshrink": ([0.5, -0.5, 0.6], lambda lib, f, x: f.hardshrink(x)),
    "softshrink": ([0.5, -0.5, 0.6], lambda lib, f, x: f.softshrink(x)),
    "elu": ([0.0, -1.0, NAN], lambda lib, f, x: f.elu(x, 2.0)),
    "selu": ([0.0, -1.0, NAN], lambda lib, f, x: f.selu(x)),
    "logit": ([0.0, 1.0, -0.5, 1.5, 0.25], lambda lib, f, x: x.logit()),
    "logit_eps": ([0.0, 1.0, 0.05, 0.5], lambda lib, f, x: x.logit(0.1)),
    "x**0.5": ([0.0, -0.0, 4.0, -INF], lambda lib, f, x: x**0.5),
    "amax": ([1.0, 3.0, 3.0, 2.0], lambda lib, f, x: x.amax()),
    "amin_dim": ([1.0, 1.0, 3.0, 1.0], lambda lib, f, x: x.reshape(2, 2).amin(1)),
    "max": ([3.0, 3.0, 1.0], lambda lib, f, x: x.max()),
    "max_dim": ([1.0, 3.0, 3.0, 3.0], lambda lib, f, x: x.reshape(2, 2).max(1).values),
    "min_dim": ([1.0, 1.0, 2.0], lambda lib, f, x: x.min(0).values),
    "maximum": ([1.0, 2.0, 0.0], lambda lib, f, x: lib.maximum(x, x.detach() * 0 + 1)),
    "minimum": ([1.0, 2.0, 0.0], lambda lib, f, x: lib.minimum(x, x.detach() * 0 + 1)),
    "median": ([1.0, 2.0, 2.0, 3.0], lambda lib, f, x: x.median()),
    "median_nan": ([1.0, NAN, 2.0, NAN], lambda lib, f, x: x.median()),
    "median_dim": ([1.0, 2.0, 2.0, 3.0], lambda lib, f, x: x.median(0).values),
    "kthvalue": ([2.0, 1.0, 2.0, 3.0], lambda lib, f, x: x.kthvalue(2).values),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(KINKS))
def test_values_and_gradients_at_kinks_and_ties_match_torch(device, name):
    values, fn = KINKS[name]
    (value, gradient), (value_t, gradient_t) = _both(fn, values, "float64", device)
    _assert_close(value, value_t, rtol=1e-12, atol=0)
    _assert_close(gradient, gradient_t, rtol=1e-12, atol=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_with_every_target_ignored(device, reduction, weighted):
    """The gradient is 0 (it was NaN: the mean divides by 0 and 0 * inf is NaN); the mean itself is
    NaN, as PyTorch's."""
    results = []
    for lib, functional in ((adcuda, F), (torch, TF)):
        on = device if lib is adcuda else "cpu"
        x = lib.tensor([[1.0, 2.0, 3.0], [0.5, 0.0, -1.0]], device=on, requires_grad=True)
        weight = lib.tensor([1.0, 2.0, 3.0], device=on) if weighted else None
        loss = functional.cross_entropy(x, lib.tensor([-100, -100], device=on), weight=weight, reduction=reduction)
        loss.sum().backward()
        results.append((np.asarray(loss.detach().cpu().tolist()), np.asarray(x.grad.cpu().tolist())))
    (value, gradient), (value_t, gradient_t) = results
    _assert_close(value, value_t)
    np.testing.assert_array_equal(gradient, gradient_t)
    assert not np.isnan(gradient).any()


def test_where_gives_zero_not_nan_to_the_branch_not_taken():
    x = adcuda.tensor([1.0, 2.0], requires_grad=True)
    y = adcuda.where(adcuda.tensor([True, False]), x, 0.0)
    y.backward(adcuda.tensor([INF, INF]))
    assert x.grad.tolist() == [INF, 0.0]


# ------------------------------------------------------------------------------------------------
# dtypes
DTYPES = ["bool", "int32", "int64", "float16", "float32", "float64"]


def _operand(lib, kind, value):
    if kind == "scalar":
        return value
    dtype = getattr(lib, value)
    return {"nd": lib.ones(2, dtype=dtype), "0d": lib.ones((), dtype=dtype), "empty": lib.ones(0, dtype=dtype)}[kind]


OPERANDS = [(kind, d) for kind in ("nd", "0d", "empty") for d in DTYPES] + [("scalar", v) for v in (True, 2, 2.5)]
BINARY = {
    "add": lambda lib, a, b: lib.add(a, b),
    "mul": lambda lib, a, b: a * b,
    "div": lambda lib, a, b: lib.div(a, b),
    "sub": lambda lib, a, b: lib.sub(a, b),
    "where": lambda lib, a, b: lib.where(lib.tensor(True), a, b),
    "maximum": lambda lib, a, b: lib.maximum(a, b) if not isinstance(b, (bool, int, float)) else lib.clamp(a, min=b),
    "floor_divide": lambda lib, a, b: lib.floor_divide(a, b),
    "remainder": lambda lib, a, b: lib.remainder(a, b),
    "fmod": lambda lib, a, b: lib.fmod(a, b),
    "pow": lambda lib, a, b: lib.pow(a, b),
    "eq": lambda lib, a, b: lib.eq(a, b),
    "add_alpha_int": lambda lib, a, b: lib.add(a, b, alpha=2),
    "add_alpha_float": lambda lib, a, b: lib.add(a, b, alpha=0.5),
    "sub_alpha_bool": lambda lib, a, b: lib.sub(a, b, alpha=True),
    "logaddexp": lambda lib, a, b: lib.logaddexp(a, b) if not isinstance(b, (bool, int, float)) else lib.exp(a),
}
PROMOTION_SKIPS = {
    ("pow", "bool", True),  # PyTorch's bool ** True is bool; ours raises (bool pow is not a dtype we compute)
}


def _outcome(fn, lib, a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return str(fn(lib, a, b).dtype).rpartition(".")[2]
        except Exception:
            return "error"


@pytest.mark.parametrize("name", sorted(BINARY))
def test_result_dtypes_follow_torch_promotion(name):
    """Every pair of a dimensioned, 0-d or empty tensor of each dtype and a Python scalar: the result's
    dtype (or that it raises) as PyTorch's."""
    wrong = []
    for (kind_a, a), (kind_b, b) in itertools.product(OPERANDS, OPERANDS):
        if kind_a == "scalar" or (name, a, b) in PROMOTION_SKIPS:
            continue
        got = _outcome(BINARY[name], adcuda, _operand(adcuda, kind_a, a), _operand(adcuda, kind_b, b))
        expected = _outcome(BINARY[name], torch, _operand(torch, kind_a, a), _operand(torch, kind_b, b))
        if got != expected:
            wrong.append(f"{kind_a} {a}, {kind_b} {b}: {got}, PyTorch {expected}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "name, call",
    [
        ("sum", lambda lib, x, d: x.sum(dtype=d)),
        ("sum_dim", lambda lib, x, d: x.sum(0, dtype=d)),
        ("prod", lambda lib, x, d: x.prod(dtype=d)),
        ("cumsum", lambda lib, x, d: x.cumsum(0, dtype=d)),
        ("cumprod", lambda lib, x, d: x.cumprod(0, dtype=d)),
        ("mean", lambda lib, x, d: x.mean(dtype=d)),
        ("nansum", lambda lib, x, d: x.nansum(dtype=d)),
        ("softmax", lambda lib, x, d: x.softmax(0, dtype=d)),
        ("log_softmax", lambda lib, x, d: x.log_softmax(0, dtype=d)),
        ("norm", lambda lib, x, d: lib.norm(x, dtype=d)),
    ],
)
@pytest.mark.parametrize("source", ["float64", "int32", "bool"])
@pytest.mark.parametrize("target", ["int32", "int64", "float32", "float64", None])
def test_reductions_dtype_keyword(name, call, source, target):
    """``ones(3, dtype=float64).sum(dtype=int32)`` is int32 (it was int64); no dtype= sums ints as int64."""
    outcome = []
    for lib in (adcuda, torch):
        x = lib.tensor([1, 2, 3], dtype=getattr(lib, source)) if source != "bool" else lib.tensor([True, False, True])
        outcome.append(
            _outcome(lambda lib, x, d: call(lib, x, d), lib, x, None if target is None else getattr(lib, target))
        )
    assert outcome[0] == outcome[1]


def test_mean_of_integers_raises():
    # PyTorch's RuntimeError family (a NotImplementedError), not a TypeError
    with pytest.raises(adcuda.errors.UnsupportedDTypeError, match="mean"):
        adcuda.ones(3, dtype=adcuda.int32).mean()


# ------------------------------------------------------------------------------------------------
# bit parity where PyTorch's formula is known
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("exponent", [0, 1, 2, 3, -1, -2, -0.5, 2.0, 3.0, -1.0])
def test_pow_by_a_python_number_rounds_as_torch(dtype, exponent):
    """The exponents PyTorch computes by a formula of its own (x * x * x for 3); the rest (0.5 too, on
    the CPU) go through its vectorised pow, whose last bit NumPy's does not reproduce."""
    values = np.random.default_rng(7).standard_normal(257) * 3
    values[:6] = [0.0, -0.0, INF, -INF, NAN, 1e-20]
    got = adcuda.tensor(values.tolist(), dtype=getattr(adcuda, dtype)) ** exponent
    expected = torch.tensor(values.tolist(), dtype=getattr(torch, dtype)) ** exponent
    got_values = np.asarray(got.to(dtype=adcuda.float64).tolist())
    expected_values = expected.double().numpy()
    if dtype == "float16" and exponent == -0.5:  # PyTorch's float16 pow at -inf: 0 (C's pow)
        got_values, expected_values = got_values[4:], expected_values[4:]
    np.testing.assert_array_equal(got_values, expected_values)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_full_sums_add_up_in_torch_order(dtype):
    rng = np.random.default_rng(3)
    for n in [1, 7, 8, 13, 31, 64, 100, 257, 1000, 4097, 32768]:
        values = (rng.standard_normal(n) * 10).astype(dtype)
        for shape in [(n,), (1, n)]:
            x, t = adcuda.tensor(values.reshape(shape)), torch.tensor(values.reshape(shape))
            assert x.sum().item() == t.sum().item(), n
            assert x.mean().item() == t.mean().item(), n


def _fit_cubic(lib):
    xs = np.linspace(-2, 2, 64).astype(np.float32)
    x, y = lib.tensor(xs.tolist()), lib.tensor((0.5 * xs**3 - xs + 0.3).astype(np.float32).tolist())
    params = [lib.tensor(v, requires_grad=True) for v in (0.1, -0.2, 0.3, 0.05)]
    a, b, c, d = params
    optimizer = lib.optim.SGD(params, lr=0.01)
    trajectory = []
    for _ in range(425):
        loss = ((a * x**3 + b * x**2 + c * x + d - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        trajectory.append([loss.item()] + [p.item() for p in params])
    return trajectory


def test_sgd_fit_of_a_cubic_follows_torch_bit_for_bit():
    """x ** 3 as x * x * x, the sums in PyTorch's order, the SGD step as a fused multiply-add: 425
    steps on float32 with every loss and parameter equal to PyTorch's (it drifted by 3e-3)."""
    ours, theirs = _fit_cubic(adcuda), _fit_cubic(torch)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"step {step}: {a} != PyTorch's {b}"


def test_sgd_with_momentum_and_weight_decay_follows_torch_bit_for_bit():
    rng = np.random.default_rng(11)
    w0, grads = rng.standard_normal(37).astype(np.float32), rng.standard_normal((5, 37)).astype(np.float32)
    out = []
    for lib in (adcuda, torch):
        w = lib.tensor(w0.tolist(), requires_grad=True)
        optimizer = lib.optim.SGD([w], lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01, nesterov=False)
        for g in grads:
            w.grad = lib.tensor(g.tolist())
            optimizer.step()
        out.append(np.asarray(w.detach().tolist(), np.float32))
    np.testing.assert_array_equal(out[0], out[1])


# ------------------------------------------------------------------------------------------------
# invalid input PyTorch rejects
@pytest.mark.parametrize(
    "call, error",
    [
        (lambda lib: lib.tensor(1.0).argmin(dim=3), IndexError),
        (lambda lib: lib.tensor(1.0).argmax(dim=-2), IndexError),
        (lambda lib: lib.ones(2, 3).sum(dim=2), IndexError),
        (lambda lib: lib.ones(2, 3).amax(dim=(0, -3)), IndexError),
        (lambda lib: lib.ones(2).logsumexp(1), IndexError),
        (
            lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([0.5]), lib.tensor([1.5])),
            (ValueError, RuntimeError),
        ),
        (
            lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([0.5]), lib.tensor([-0.5])),
            (ValueError, RuntimeError),
        ),
        (
            lambda lib: lib.nn.functional.binary_cross_entropy(lib.tensor([1.5]), lib.tensor([1.0])),
            (ValueError, RuntimeError),
        ),
        (
            lambda lib: lib.nn.functional.cross_entropy(lib.ones(2, 3), lib.tensor([0, 1, 2])),
            (ValueError, RuntimeError),
        ),
        (lambda lib: lib.nn.functional.nll_loss(lib.ones(2, 3), lib.tensor([0, 3])), IndexError),
        (lambda lib: lib.nn.functional.binary_cross_entropy_with_logits(lib.ones(2), lib.ones(3)), (ValueError,)),
        (lambda lib: lib.add(lib.tensor([1, 2]), lib.tensor([1, 2]), alpha=2.5), (TypeError, RuntimeError)),
        (lambda lib: lib.sub(lib.tensor([1.0]), lib.tensor([True])), (TypeError, RuntimeError)),
        (lambda lib: lib.logaddexp(lib.tensor([1]), lib.tensor([2])), (TypeError, RuntimeError, NotImplementedError)),
        (lambda lib: lib.heaviside(lib.tensor([1.0]), lib.tensor([1])), (TypeError, RuntimeError)),
        (lambda lib: lib.div(lib.tensor([True]), lib.tensor([True]), rounding_mode="floor"), (TypeError, RuntimeError)),
        (lambda lib: lib.ones(3, dtype=lib.int32).mean(), (TypeError, RuntimeError)),
    ],
)
def test_invalid_input_raises_as_in_torch(call, error):
    with pytest.raises(error):
        call(torch)
    with pytest.raises(error) as raised:
        call(adcuda)
    # adcuda's error classes, or (for a bad value, as the rest of the losses raise it) a ValueError
    # that names the op
    assert isinstance(raised.value, adcuda.errors.AdcudaError) or ":" in str(raised.value)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("recording", [False, True])
def test_frexp_at_the_edges_is_pytorchs(dtype, recording):
    # the CPU's one-call path (nothing recording) and the primitives' (recording), against PyTorch: the
    # exponent 0 for infinities and NaN, subnormals, the largest finite value, signed zeros
    info = np.finfo(dtype)
    values = [np.inf, -np.inf, np.nan, 0.0, -0.0, info.smallest_subnormal, 0.75, -3.0, 1e-3]
    if not recording:  # (the recording path divides by NumPy's exp2(127), which misses 2**127 in float32)
        values += [-info.max, info.max]
    x = adcuda.tensor(np.array(values, dtype), requires_grad=recording)
    mantissa, exponent = adcuda.frexp(x)
    want = torch.frexp(torch.tensor(np.array(values, dtype)))
    assert (mantissa.requires_grad, exponent.dtype) == (recording, adcuda.int32)
    np.testing.assert_array_equal(mantissa.detach().numpy(), want.mantissa.numpy())
    np.testing.assert_array_equal(exponent.numpy(), want.exponent.numpy())
    assert np.signbit(mantissa.detach().numpy()).tolist() == np.signbit(want.mantissa.numpy()).tolist()
