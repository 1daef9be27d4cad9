"""Issue 27's names (asin ... atanh and their arc* aliases, erfc, sinc, deg2rad, rad2deg, isposinf,
isneginf, atan2, logaddexp2, ldexp, isin) against PyTorch: values at the edges, dtypes, forms and
float64 gradients. tests/test_cuda_names_27.py compares the CUDA backend with the CPU."""

import math

import numpy as np
import pytest

import adcuda

torch = pytest.importorskip("torch")

INF, NAN = math.inf, math.nan
EDGES = [-1.0, 1.0, 0.0, -0.0, 0.5, -0.5, 2.0, -2.0, 3.0, 10.0, 30.0, INF, -INF, NAN, 1e30, -1e30, 1e-30, 1e-45]
UNARY = ["asin", "acos", "atan", "asinh", "acosh", "atanh", "erfc", "sinc", "deg2rad", "rad2deg"]
PREDICATES = ["isposinf", "isneginf"]
ALIASES = {"arcsin": "asin", "arccos": "acos", "arctan": "atan", "arcsinh": "asinh", "arccosh": "acosh"}
ALIASES["arctanh"] = "atanh"
TOL = {"float32": 2e-6, "float64": 1e-12}


def _check(got, want, rtol, atol=0.0):
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", UNARY + PREDICATES)
def test_unary_values_at_the_edges(name, dtype):
    got = getattr(adcuda, name)(adcuda.tensor(EDGES, dtype=getattr(adcuda, dtype)))
    want = getattr(torch, name)(torch.tensor(EDGES, dtype=getattr(torch, dtype)))
    _check(got, want, TOL[dtype], 1e-300)


def test_erfc_keeps_its_digits_where_erf_rounds_to_one():
    x = [5.0, 9.0, 10.0, 26.0, 27.0, -30.0]
    for dtype in ("float32", "float64"):
        got = adcuda.erfc(adcuda.tensor(x, dtype=getattr(adcuda, dtype)))
        want = torch.erfc(torch.tensor(x, dtype=getattr(torch, dtype)))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=TOL[dtype], atol=0)
    assert adcuda.erfc(adcuda.tensor([10.0], dtype=adcuda.float64)).item() > 2e-45


@pytest.mark.parametrize("name", UNARY + PREDICATES)
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool", "float16"])
def test_unary_dtypes(name, dtype):
    values = [0, 1, 2, 1] if dtype != "bool" else [True, False, True, True]
    got = getattr(adcuda, name)(adcuda.tensor(values, dtype=getattr(adcuda, dtype)))
    want = getattr(torch, name)(torch.tensor(values, dtype=getattr(torch, dtype)))
    _check(got, want, 1e-3 if dtype == "float16" else 2e-6)


def test_sinc_float16_computes_in_float32():
    # pi * 60000 overflows float16: PyTorch computes in float32 and gets a finite value
    got = adcuda.sinc(adcuda.tensor([60000.0, -60000.0, 0.0], dtype=adcuda.float16))
    want = torch.sinc(torch.tensor([60000.0, -60000.0, 0.0], dtype=torch.float16))
    _check(got, want, 1e-3, 1e-7)


@pytest.mark.parametrize("alias,name", ALIASES.items())
def test_aliases_methods_and_in_place_forms(alias, name):
    x = [0.25, -0.5, 0.75]
    want = getattr(torch, name)(torch.tensor(x, dtype=torch.float64))
    for form in (
        lambda t: getattr(adcuda, alias)(t),
        lambda t: getattr(t, name)(),
        lambda t: getattr(t, alias)(),
        lambda t: getattr(t, name + "_")(),
        lambda t: getattr(t, alias + "_")(),
    ):
        t = adcuda.tensor(x if name != "acosh" else [1.25, 1.5, 3.0], dtype=adcuda.float64)
        w = want if name != "acosh" else torch.acosh(torch.tensor([1.25, 1.5, 3.0], dtype=torch.float64))
        _check(form(t), w, 1e-12)


def test_in_place_writes_the_input():
    t = adcuda.tensor([0.0, 30.0, 90.0])
    assert t.deg2rad_() is t
    np.testing.assert_allclose(t.numpy(), np.deg2rad([0.0, 30.0, 90.0]).astype(np.float32), rtol=1e-6)
    u = adcuda.tensor([0.0, 0.5])
    u.sinc_()
    np.testing.assert_allclose(u.numpy(), [1.0, 2 / math.pi], rtol=1e-6)


def test_in_place_float_op_of_an_integer_tensor_raises():
    with pytest.raises(adcuda.errors.AdcudaError, match="asin_"):
        adcuda.tensor([0, 1]).asin_()


GRAD_INPUTS = {
    "asin": [-0.9, -0.3, 0.0, 0.6],
    "acos": [-0.9, -0.3, 0.0, 0.6],
    "atan": [-3.0, -0.3, 0.0, 5.0],
    "asinh": [-3.0, -0.3, 0.0, 5.0],
    "acosh": [1.1, 1.5, 3.0, 20.0],
    "atanh": [-0.9, -0.3, 0.0, 0.6],
    "erfc": [-3.0, -0.3, 0.0, 2.5],
    "sinc": [-1.5, -0.3, 0.7, 2.0],
    "deg2rad": [-90.0, 0.0, 45.0, 3.0],
    "rad2deg": [-3.0, 0.0, 0.5, 3.0],
}


@pytest.mark.parametrize("name", UNARY)
def test_unary_gradients_match_torch_to_second_order(name):
    x = GRAD_INPUTS[name]
    grads = []
    for lib in (adcuda, torch):
        t = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(getattr(lib, name)(t).sum(), t, create_graph=True)
        # deg2rad and rad2deg are linear: their gradient is a constant with no graph, in both
        gg = lib.autograd.grad(g.sum(), t)[0].numpy() if g.requires_grad else np.zeros(len(x))
        grads.append((g.detach().numpy(), gg))
    np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", ["asin", "erfc", "sinc", "atan2", "logaddexp2"])
def test_gradcheck(name):
    rng = np.random.default_rng(0)
    data = rng.uniform(-0.9, 0.9, (2, 3))
    inputs = [adcuda.tensor(data, dtype=adcuda.float64, requires_grad=True)]
    if name in ("atan2", "logaddexp2"):
        inputs.append(adcuda.tensor(rng.uniform(0.2, 2.0, (3,)), dtype=adcuda.float64, requires_grad=True))
    assert adcuda.autograd.gradcheck(getattr(adcuda, name), tuple(inputs))


def test_sinc_gradient_at_zero_is_torchs():
    grads = []
    for lib in (adcuda, torch):
        t = lib.tensor([0.0, 1.0], dtype=lib.float64, requires_grad=True)
        (g,) = lib.autograd.grad(lib.sinc(t).sum(), t)
        grads.append(g.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)
    assert grads[0][0] == 0.0


# ------------------------------------------------------------------------------------------------
# binary
PAIRS = [(y, x) for y in (0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e30) for x in (0.0, -0.0, 2.0, -2.0, INF, -INF, 1e-30)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["atan2", "arctan2", "logaddexp2", "ldexp"])
def test_binary_values_at_the_edges(name, dtype):
    a, b = zip(*PAIRS, strict=True)
    if name == "ldexp":
        b = [0.0, 3.0, -3.0, 10.0, -1074.0, 1.0, 2.0] * 8
        b = b[: len(a)]
    got = getattr(adcuda, name)(
        adcuda.tensor(a, dtype=getattr(adcuda, dtype)), adcuda.tensor(b, dtype=getattr(adcuda, dtype))
    )
    want = getattr(torch, name)(
        torch.tensor(a, dtype=getattr(torch, dtype)), torch.tensor(b, dtype=getattr(torch, dtype))
    )
    _check(got, want, TOL[dtype], 1e-300)
    if name.endswith("atan2"):  # the sign of a zero angle is kept
        ok = ~np.isnan(want.numpy())
        np.testing.assert_array_equal(np.signbit(got.numpy())[ok], np.signbit(want.numpy())[ok])


@pytest.mark.parametrize("name", ["atan2", "logaddexp2", "ldexp"])
@pytest.mark.parametrize(
    "dtypes", [("int64", "int64"), ("int32", "float64"), ("bool", "int32"), ("float16", "float32")]
)
def test_binary_promotion(name, dtypes):
    if name == "logaddexp2" and "float" not in dtypes[0] + dtypes[1]:
        for lib in (torch, adcuda):  # PyTorch has no integer logaddexp2
            with pytest.raises((NotImplementedError, RuntimeError)):
                lib.logaddexp2(
                    lib.tensor([1], dtype=getattr(lib, dtypes[0])), lib.tensor([1], dtype=getattr(lib, dtypes[1]))
                )
        return
    a, b = [1, 0, 2], [2, 1, 0]
    got = getattr(adcuda, name)(
        adcuda.tensor(a, dtype=getattr(adcuda, dtypes[0])), adcuda.tensor(b, dtype=getattr(adcuda, dtypes[1]))
    )
    want = getattr(torch, name)(
        torch.tensor(a, dtype=getattr(torch, dtypes[0])), torch.tensor(b, dtype=getattr(torch, dtypes[1]))
    )
    _check(got, want, 1e-3, 1e-6)


@pytest.mark.parametrize("name", ["atan2", "logaddexp2", "ldexp"])
def test_binary_gradients_match_torch(name):
    a, b = [0.5, -1.0, 0.0, 2.0], [1.5, 0.25, 0.0, -3.0]
    if name == "logaddexp2":
        b[2] = 0.0  # a tie
    got, want = [], []
    for lib, out in ((adcuda, got), (torch, want)):
        x = lib.tensor(a, dtype=lib.float64, requires_grad=True)
        y = lib.tensor(b, dtype=lib.float64, requires_grad=True)
        out.extend(g.numpy() for g in lib.autograd.grad(getattr(lib, name)(x, y).sum(), (x, y)))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_atan2_in_place_and_scalar_rejected():
    t = adcuda.tensor([1.0, -1.0])
    assert t.arctan2_(adcuda.tensor([1.0, 1.0])) is t
    np.testing.assert_allclose(t.numpy(), [math.pi / 4, -math.pi / 4], rtol=1e-6)
    with pytest.raises(adcuda.errors.AdcudaError, match="atan2"):
        adcuda.atan2(adcuda.tensor([1.0]), 2.0)


def test_binary_shapes_broadcast_and_mismatch():
    got = adcuda.atan2(adcuda.ones(2, 1, 3), adcuda.ones(4, 1))
    assert tuple(got.shape) == (2, 4, 3)
    with pytest.raises(adcuda.errors.AdcudaError, match="atan2"):
        adcuda.atan2(adcuda.ones(2), adcuda.ones(3))


@pytest.mark.parametrize("name", ["gcd", "lcm"])
@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("int32", "int32"), ("int32", "int64")])
def test_gcd_lcm(name, dtypes):
    a, b = [0, 12, -18, 7, 0, 5, 1 << 20], [0, 8, 12, -21, 5, -10, 3 << 12]
    got = getattr(adcuda, name)(
        adcuda.tensor(a, dtype=getattr(adcuda, dtypes[0])), adcuda.tensor(b, dtype=getattr(adcuda, dtypes[1]))
    )
    want = getattr(torch, name)(
        torch.tensor(a, dtype=getattr(torch, dtypes[0])), torch.tensor(b, dtype=getattr(torch, dtypes[1]))
    )
    _check(got, want, 0)
    t = adcuda.tensor(a)
    assert getattr(t, name + "_")(adcuda.tensor(b)) is t
    np.testing.assert_array_equal(t.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm_reject_floats_and_bools(name):
    for x in (adcuda.tensor([1.0]), adcuda.tensor([True])):
        with pytest.raises(adcuda.errors.AdcudaError, match=name):
            getattr(adcuda, name)(x, x)


@pytest.mark.parametrize(
    "elements,test_elements,kwargs",
    [
        ([1, 2, 3, 4, 2], [2, 5], {}),
        ([[1, 2], [3, 4]], [[4], [1]], {}),
        ([1.0, NAN, 0.0, -0.0], [NAN, 0.0], {}),
        ([1, 2, 3], [2, 7], {"invert": True}),
        ([1, 2, 3], 2, {}),
        (2, [1, 2, 3], {}),
        ([1.5, 2.0], [2], {}),
        ([], [1.0], {}),
        ([1.0, 2.0], [], {}),
    ],
)
def test_isin(elements, test_elements, kwargs):
    def make(lib, v):
        return lib.tensor(v) if isinstance(v, list) else v

    got = adcuda.isin(make(adcuda, elements), make(adcuda, test_elements), **kwargs)
    want = torch.isin(make(torch, elements), make(torch, test_elements), **kwargs)
    _check(got, want, 0)
