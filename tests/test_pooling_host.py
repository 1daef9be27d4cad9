"""The host module's pooling forwards (kernels/host/pooling.cpp) against the CPU backend's NumPy path,
their reference: the same values and PyTorch's flat indices, with NaNs, infinities, ties, padding,
dilation, ceil_mode's last windows and adaptive windows that overlap."""

import numpy as np
import pytest
from helpers import native_and_numpy

from adcuda.backends.cpu import pooling as cpu_pooling


def _both(monkeypatch, fn, *args):
    return native_and_numpy(monkeypatch, cpu_pooling, fn, *args)


def _input(dtype, shape, seed, unusual):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    if unusual:
        x = np.round(x)  # ties
        x[rng.random(shape) < 0.2] = np.nan
        x[rng.random(shape) < 0.2] = -np.inf
        x[..., 0, :] = -np.inf  # windows of nothing but the lowest value
    return x


def _assert_same(native, reference):
    for got, want in zip(native, reference):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


# (H, W), kernel, stride, padding, dilation, out_size (ceil_mode's where it has one more window)
MAX_WINDOWS = [
    ((8, 8), (2, 2), (2, 2), (0, 0), (1, 1), (4, 4)),
    ((7, 5), (3, 2), (2, 1), (1, 1), (1, 1), (4, 6)),
    ((7, 7), (3, 3), (2, 2), (1, 0), (2, 1), (3, 3)),
    ((5, 6), (2, 3), (2, 2), (0, 1), (1, 2), (3, 3)),  # ceil_mode: the last windows run past the input
    ((1, 16), (1, 2), (1, 2), (0, 0), (1, 1), (1, 8)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("unusual", [False, True], ids=["finite", "nan-inf-ties"])
@pytest.mark.parametrize("window", MAX_WINDOWS)
def test_max_pool2d_matches_numpy(monkeypatch, dtype, unusual, window):
    spatial, kernel, stride, padding, dilation, out = window
    x = _input(dtype, (2, 3) + spatial, 0, unusual)
    _assert_same(*_both(monkeypatch, cpu_pooling.max_pool2d, x, kernel, stride, padding, dilation, out))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("unusual", [False, True], ids=["finite", "nan-inf-ties"])
@pytest.mark.parametrize("sizes", [((8, 8), (3, 5)), ((5, 7), (5, 7)), ((4, 9), (1, 4)), ((3, 3), (5, 2))])
def test_adaptive_max_pool2d_matches_numpy(monkeypatch, dtype, unusual, sizes):
    spatial, out = sizes
    x = _input(dtype, (2, 3) + spatial, 1, unusual)
    _assert_same(*_both(monkeypatch, cpu_pooling.adaptive_max_pool2d, x, out))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("divisor_override", [None, 3])
@pytest.mark.parametrize("window", [w[:4] + w[5:] for w in MAX_WINDOWS if w[4] == (1, 1)])
def test_avg_pool2d_matches_numpy(monkeypatch, dtype, count_include_pad, divisor_override, window):
    spatial, kernel, stride, padding, out = window
    x = _input(dtype, (2, 3) + spatial, 2, False)
    native, reference = _both(
        monkeypatch, cpu_pooling.avg_pool2d, x, kernel, stride, padding, out, count_include_pad, divisor_override
    )
    assert native.dtype == reference.dtype and native.shape == reference.shape
    np.testing.assert_allclose(native, reference, rtol=1e-6 if dtype == np.float32 else 1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sizes", [((8, 8), (3, 5)), ((5, 7), (5, 7)), ((4, 9), (1, 4)), ((3, 3), (5, 2))])
def test_adaptive_avg_pool2d_matches_numpy(monkeypatch, dtype, sizes):
    spatial, out = sizes
    x = _input(dtype, (2, 3) + spatial, 3, False)
    native, reference = _both(monkeypatch, cpu_pooling.adaptive_avg_pool2d, x, out)
    assert native.dtype == reference.dtype and native.shape == reference.shape
    np.testing.assert_allclose(native, reference, rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-7)


def test_other_dtypes_and_strided_arrays_take_numpy(monkeypatch):
    calls = []
    with monkeypatch.context() as m:
        m.setattr(cpu_pooling._NATIVE, "cpu_max_pool2d", lambda *a: calls.append(a), raising=False)
        ints = np.arange(32, dtype=np.int64).reshape(1, 2, 4, 4)
        values, _ = cpu_pooling.max_pool2d(ints, (2, 2), (2, 2), (0, 0), (1, 1), (2, 2))
        np.testing.assert_array_equal(values[0, 0], [[5, 7], [13, 15]])
        strided = np.arange(64, dtype=np.float32).reshape(1, 2, 4, 8)[..., ::2]
        values, _ = cpu_pooling.max_pool2d(strided, (2, 2), (2, 2), (0, 0), (1, 1), (2, 2))
        np.testing.assert_array_equal(values[0, 0], [[10, 14], [26, 30]])
    assert calls == []
