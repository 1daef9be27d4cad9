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


@pytest.mark.parametrize("op", ["erf", "sigmoid"])
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
