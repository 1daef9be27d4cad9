"""The host module's unary loops (kernels/host/elementwise.cpp), which the CPU backend runs on small
arrays, against the NumPy formulas they stand in for (backends/cpu/elementwise.py): the same values
to a few ulp, NaN and infinities included, in float32 and float64."""

import numpy as np
import pytest

from adcuda import dtypes as dt
from adcuda._native import _C
from adcuda.backends.cpu import elementwise as cpu
from adcuda.backends.elementwise_table import UNARY

pytestmark = pytest.mark.skipif(_C is None, reason="no native module")

_VALUES = [0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 0.3, -0.3, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 2.9, -2.9]
_VALUES += [3.0, -3.0, 4.5, -4.5, 7.0, -7.0, 12.0, -12.0, 19.9, 20.5, -20.5, 40.0, -40.0, 90.0, -90.0]
_VALUES += [1e4, -1e4, np.inf, -np.inf, np.nan]


def test_the_host_rows_are_the_tables_in_its_order():
    assert list(_C.host_unary_names()) == [op.name for op in UNARY]


def test_the_host_path_takes_the_multi_pass_formulas():
    assert {"sigmoid", "silu", "erf", "erfc", "sign", "selu", "softplus"} <= set(cpu._HOST_INDEX)
    assert not {"gelu", "gelu_tanh", "relu", "exp", "round"} & set(cpu._HOST_INDEX)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(cpu._HOST_INDEX))
def test_host_loop_matches_the_numpy_formula(op, dtype):
    x = np.array(_VALUES, dtype)
    if op in ("lgamma", "digamma", "trigamma"):
        x = x[np.abs(x) < 1e3]  # (poles at the negative integers: covered by tests/test_special_native.py)
    if op == "erfinv":
        x = np.concatenate([x[np.abs(x) <= 1], np.array([0.9999, -0.99, 1.5], dtype)])
    host = _C.host_unary(cpu._HOST_INDEX[op], x)
    with np.errstate(all="ignore"):  # (as every op's entry runs the NumPy formulas)
        reference = np.asarray(cpu.UNARY_OPS[op](x)).astype(dtype)
    assert host.dtype == dtype and host.shape == x.shape
    eps = np.finfo(dtype).eps
    if op == "tanhshrink":  # x - tanh(x) cancels: tanh's last bits, of x's size, are what may differ
        np.testing.assert_array_equal(np.isnan(host), np.isnan(reference))
        finite = np.isfinite(x)
        assert np.all(np.abs(host - reference)[finite] <= 4 * eps * np.abs(x[finite]))
        return
    np.testing.assert_allclose(host, reference, rtol=8 * eps, atol=1e-37, equal_nan=True)


def test_small_arrays_take_the_host_path_and_large_ones_numpy(monkeypatch):
    calls = []
    monkeypatch.setattr(cpu, "_C", type("Spy", (), {"host_unary": lambda i, a: calls.append(a.size) or a.copy()}))
    small, large = np.ones(cpu._HOST_MAX, np.float32), np.ones(cpu._HOST_MAX + 1, np.float32)
    cpu.unary("sigmoid", small)
    np.testing.assert_allclose(cpu.unary("sigmoid", large), 1 / (1 + np.exp(-1.0)), rtol=1e-6)
    cpu.unary("sigmoid", np.ones((8, 8), np.float32).T[::2])  # strided: NumPy's
    cpu.unary("exp", small)  # one ufunc: NumPy's
    assert calls == [cpu._HOST_MAX]


def test_float16_and_integer_inputs_keep_their_dtype():
    half = np.array([-1.0, 0.0, 2.0], np.float16)
    np.testing.assert_allclose(cpu.unary("sigmoid", half), 1 / (1 + np.exp(-half.astype(np.float64))), rtol=1e-3)
    assert cpu.unary("sigmoid", half).dtype == np.float16
    assert cpu.unary("sign", np.array([-3, 0, 5])).tolist() == [-1, 0, 1]


@pytest.mark.parametrize("op", ["erf", "sigmoid", "gelu"])
def test_a_numpy_scalar_takes_numpy_s_loop(op):
    """0-d arithmetic on arrays gives NumPy scalars, which the host module does not take: the primitive
    computes them as before (once a DTypeError 'not defined for float64 arrays')."""
    x = np.float64(0.2667140660682762)
    assert cpu.unary(op, x) == cpu.unary(op, np.array([x]))[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", sorted(cpu._HOST_BINARY_INDEX))
def test_host_binary_loop_matches_numpy(op, dtype):
    values = [0.0, -0.0, 1e-6, -0.3, 1.0, -2.5, 3.0, -7.0, 20.5, -90.0, 1e4, np.inf, -np.inf, np.nan]
    a, b = (g.ravel().astype(dtype) for g in np.meshgrid(values, values + [2.9, -12.0]))
    assert a.size <= cpu._HOST_MAX
    index = cpu._HOST_BINARY_INDEX[op]
    with np.errstate(all="ignore"):
        for host, reference in (
            (_C.host_binary(index, a, b), cpu.BINARY_OPS[op](a, b)),
            (_C.host_binary(index, a, -2.5), cpu.BINARY_OPS[op](a, np.asarray(-2.5, dtype))),
            (_C.host_binary(index, a[:1].reshape(()), 0.0), cpu.BINARY_OPS[op](a[:1].reshape(()), dtype(0.0))),
        ):
            reference = np.asarray(reference)
            assert host.dtype == dtype and host.shape == reference.shape
            np.testing.assert_allclose(host.ravel(), reference.ravel(), rtol=8 * np.finfo(dtype).eps, equal_nan=True)
            zero = reference.ravel() == 0  # remainder and xlogy define the sign of a zero result
            np.testing.assert_array_equal(np.signbit(host.ravel()[zero]), np.signbit(reference.ravel()[zero]))


def test_small_binary_operands_take_the_host_path(monkeypatch):
    calls = []
    spy = type("Spy", (), {"host_binary": lambda i, a, b: calls.append(a.size) or a.copy()})
    monkeypatch.setattr(cpu, "_C", spy)
    small, large = np.ones(cpu._HOST_MAX, np.float32), np.ones(cpu._HOST_MAX + 1, np.float32)
    cpu.binary("xlogy", small, small, dt.float32)
    cpu.binary("xlogy", small, 2.0, dt.float32)
    np.testing.assert_array_equal(cpu.binary("xlogy", large, large, dt.float32), 0)
    cpu.binary("xlogy", small, small[:1], dt.float32)  # one value (prelu's one weight): the loop's scalar
    cpu.binary("xlogy", small.reshape(2, -1), small[:2].reshape(2, 1), dt.float32)  # broadcast: NumPy's
    cpu.binary("xlogy", small[:1], small.reshape(2, -1), dt.float32)  # (a broadcast of the first: NumPy's)
    cpu.binary("add", small, small, dt.float32)  # one SIMD ufunc: NumPy's
    assert calls == [cpu._HOST_MAX, cpu._HOST_MAX, cpu._HOST_MAX]


def test_one_broadcast_value_gives_numpy_s_result():
    a = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    weight = np.array([0.25], np.float32)
    np.testing.assert_array_equal(cpu.binary("prelu", a, weight, dt.float32), np.where(a > 0, a, 0.25 * a))
    assert cpu.binary("prelu", a, weight, dt.float32).shape == (3, 4)


# gelu_tanh's and gelu's AVX2 loops (kernels/host/elementwise_avx2.cpp), which the CPU backend takes for
# row-major float32 arrays where the CPU has AVX2 and FMA; the NumPy formulas are the reference and the path
# elsewhere
_avx2 = pytest.mark.skipif(not cpu._GELU_AVX2, reason="no AVX2 and FMA on this CPU")


def _gelu_inputs():
    """The special values, then normal draws: 1003 values, so the loops' tail of fewer than eight lanes too."""
    rng = np.random.default_rng(0)
    x = np.concatenate([np.array(_VALUES[:-3], np.float32), rng.standard_normal(1003 - len(_VALUES) + 3) * 4])
    return x.astype(np.float32), rng.standard_normal(1003).astype(np.float32)


def _numpy_gelu_tanh(monkeypatch, x, g=None, inner=None):
    monkeypatch.setattr(cpu, "_GELU_AVX2", False)
    try:
        with np.errstate(all="ignore"):  # (NumPy's passes over inf and NaN warn)
            if g is None:
                return cpu._gelu_tanh(x, out=np.empty_like(x), inner=inner)
            return cpu._gelu_tanh_backward(x, None, g, out=np.empty_like(x), inner=inner)
    finally:
        monkeypatch.undo()


@_avx2
def test_avx2_gelu_tanh_matches_the_numpy_formula(monkeypatch):
    x, g = _gelu_inputs()
    eps = np.finfo(np.float32).eps
    forward = cpu._gelu_tanh(x)
    reference = _numpy_gelu_tanh(monkeypatch, x)
    # 0.5 x (1 + tanh u): tanh's last bits near -1, of x's size, are what may differ
    assert np.all(np.abs(forward - reference) <= 4 * eps * np.maximum(np.abs(x), np.abs(reference)))
    backward = cpu._gelu_tanh_backward(x, None, g)
    reference = _numpy_gelu_tanh(monkeypatch, x, g)
    assert np.all(np.abs(backward - reference) <= 8 * eps * np.abs(g) * np.maximum(np.abs(x), 1))
    assert forward.dtype == backward.dtype == np.float32 and forward.shape == backward.shape == x.shape
    big = np.array([np.inf, -np.inf, np.nan, 1e4, -1e4, 90.0, -90.0], np.float32)
    for got, want in (
        (cpu._gelu_tanh(big), _numpy_gelu_tanh(monkeypatch, big)),
        (cpu._gelu_tanh_backward(big, None, np.ones_like(big)), _numpy_gelu_tanh(monkeypatch, big, np.ones_like(big))),
    ):
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(got, want, rtol=4 * eps, atol=0, equal_nan=True)


@_avx2
def test_avx2_gelu_matches_the_numpy_formula(monkeypatch):
    """The exact GELU's loop: erf as the NumPy path's formula, tanh and exp of its own."""
    x, g = _gelu_inputs()
    big = np.array([np.inf, -np.inf, np.nan, 1e4, -1e4, 90.0, -90.0, 3e38, -3e38], np.float32)
    eps = np.finfo(np.float32).eps
    with monkeypatch.context() as m, np.errstate(all="ignore"):
        m.setattr(cpu, "_GELU_AVX2", False)
        forward, backward = cpu._gelu(x), cpu._gelu_backward(x, None, g)
        big_forward, big_backward = cpu._gelu(big), cpu._gelu_backward(big, None, np.ones_like(big))
    assert np.all(np.abs(cpu._gelu(x) - forward) <= 4 * eps * np.maximum(np.abs(x), 1e-30))
    assert np.all(np.abs(cpu._gelu_backward(x, None, g) - backward) <= 8 * eps * np.abs(g) * np.maximum(np.abs(x), 1))
    # inf * 0 is NaN on both, and x (1 + erf) overflows to inf on both above half of float32's largest
    np.testing.assert_array_equal(cpu._gelu(big), big_forward)
    np.testing.assert_array_equal(cpu._gelu_backward(big, None, np.ones_like(big)), big_backward)
    assert cpu._gelu(x).dtype == np.float32 and cpu._gelu(np.array(1.5, np.float32)).shape == ()


@_avx2
def test_avx2_gelu_tanh_keeps_the_numpy_formula_s_tanh_argument(monkeypatch):
    """What the forward keeps in ``inner`` is the NumPy path's, bit for bit (the same products in the same
    order, no fused multiply-add), so either path's backward may read the other's; a backward given it
    equals one that computes it."""
    x, g = _gelu_inputs()
    kept, numpy_kept = np.empty_like(x), np.empty_like(x)
    y = np.empty_like(x)
    cpu._gelu_tanh(x, out=y, inner=kept)
    _numpy_gelu_tanh(monkeypatch, x, inner=numpy_kept)
    np.testing.assert_array_equal(kept, numpy_kept)
    np.testing.assert_array_equal(y, cpu._gelu_tanh(x))
    np.testing.assert_array_equal(
        cpu._gelu_tanh_backward(x, None, g, out=np.empty_like(x), inner=kept), cpu._gelu_tanh_backward(x, None, g)
    )
    in_place = x.copy()
    np.testing.assert_array_equal(cpu._gelu_tanh(in_place, out=in_place), y)


@_avx2
def test_avx2_gelu_loops_are_taken_for_row_major_float32_only(monkeypatch):
    calls = []
    real, real_gelu = _C.host_gelu_tanh, _C.host_gelu
    spy = {
        "host_gelu_tanh": lambda x, out, inner: calls.append(("gelu_tanh", x.dtype)) or real(x, out, inner),
        "host_gelu": lambda x, out: calls.append(("gelu", x.dtype)) or real_gelu(x, out),
        "host_unary": _C.host_unary,  # (NumPy's gelu of a small array: erf's loop)
    }
    monkeypatch.setattr(cpu, "_C", type("Spy", (), spy))
    x = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)
    for op in ("gelu_tanh", "gelu"):
        cpu.unary(op, x)
        cpu.unary(op, x.astype(np.float64))  # NumPy's
        cpu.unary(op, x.T)  # strided: NumPy's
    assert calls == [("gelu_tanh", np.float32), ("gelu", np.float32)]


def test_host_gelu_loops_check_their_arrays():
    if not _C.host_has_avx2():
        with pytest.raises(RuntimeError, match="no AVX2"):
            _C.host_gelu_tanh(np.ones(3, np.float32), np.ones(3, np.float32))
        return
    with pytest.raises(ValueError, match="size"):
        _C.host_gelu_tanh(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="size"):
        _C.host_gelu_tanh_backward(
            np.ones(3, np.float32), np.ones(3, np.float32), np.ones(3, np.float32), np.ones(2, np.float32)
        )
    with pytest.raises(ValueError, match="size"):
        _C.host_gelu(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(ValueError, match="size"):
        _C.host_gelu_backward(np.ones(3, np.float32), np.ones(2, np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError):
        _C.host_gelu_tanh(np.ones(3, np.float64), np.ones(3, np.float32))
    with pytest.raises(TypeError):
        _C.host_gelu(np.ones(3, np.float32), np.ones(3, np.float32)[::-1])
    with pytest.raises(TypeError, match="inner"):
        _C.host_gelu_tanh(np.ones(3, np.float32), np.ones(3, np.float32), np.ones(3, np.float64))


@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("avx2", [True, False] if cpu._GELU_AVX2 else [False])
def test_gelu_on_each_path_gives_pytorch_s_values(monkeypatch, avx2, approximate):
    torch = pytest.importorskip("torch")
    import adcuda

    monkeypatch.setattr(cpu, "_GELU_AVX2", avx2)
    x, g = _gelu_inputs()
    ours = adcuda.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    y = adcuda.nn.functional.gelu(ours, approximate=approximate)
    expected = torch.nn.functional.gelu(theirs, approximate=approximate)
    y.backward(adcuda.tensor(g))
    expected.backward(torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), expected.detach().numpy(), rtol=1e-6, atol=1e-6)
    # (PyTorch's 1 - tanh^2 cancels where the slope is near 0: a few ulp of 1 either way)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_host_equal_is_numpy_s_comparison_of_every_pair(dtype):
    a = np.array([[1.5, -0.0, 3.0], [0.0, 2.0, -1.0]]).astype(dtype)
    assert _C.host_equal(a, a.copy()) is True
    if dtype in (np.float32, np.float64):
        zero = a.copy()
        zero[0, 1] = 0.0
        assert _C.host_equal(a, zero) is True  # -0.0 == 0.0
        nan = a.copy()
        nan[1, 2] = np.nan
        assert _C.host_equal(nan, nan.copy()) is False  # NaN is unequal to itself
    other = a.copy()
    other[1, 2] = not other[1, 2] if dtype is np.bool_ else 7
    assert _C.host_equal(a, other) is False
    with pytest.raises(ValueError, match="sizes"):
        _C.host_equal(a, a[:1].copy())
    assert _C.host_equal(a.T, a.T) is None  # not row-major: the caller's NumPy path
    assert _C.host_equal(a.astype(np.int32), a.astype(np.int32)) is None
