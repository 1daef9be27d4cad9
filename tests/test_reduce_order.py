"""The CPU backend's small sums in PyTorch's order of additions: the native one (kernels/host/
torch_order_sum.h, used when the module is built) against the NumPy reference (reduce.py's
``_torch_order_sum``), bit for bit, over the sizes where the cascade's structure changes; and the
backend's ``reduce`` taking it."""

import importlib

import numpy as np
import pytest

from adcuda._native import _C

cpu_reduce = importlib.import_module("adcuda.backends.cpu.reduce")  # the package exports its function reduce

pytestmark = pytest.mark.skipif(
    getattr(_C, "host_torch_order_sum", None) is None, reason="needs the native module adcuda._C"
)

# every size up to two levels of 16-blocks of the 4 interleaved accumulators of 8 lanes, then the
# edges of the deeper levels and of the limit
SIZES = [*range(1, 200), 255, 256, 257, 511, 512, 513, 2047, 2048, 2049, 4096, 8191, 16385, 32767, 32768]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_sum_is_the_reference_bit_for_bit(dtype):
    rng = np.random.default_rng(7)
    for n in SIZES:
        # magnitudes spread over six decades, so that the order of additions shows in the rounding
        x = (rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(dtype)
        expected = np.asarray(cpu_reduce._torch_order_sum(x))
        got = np.asarray(_C.host_torch_order_sum(x), dtype)
        assert got.tobytes() == expected.tobytes(), (dtype, n, got, expected)


@pytest.mark.parametrize(
    "values", [[-0.0], [-0.0, -0.0], [np.inf, 1.0], [np.inf, -np.inf], [np.nan, 2.0], [1e38, 1e38]]
)
def test_native_sum_of_special_values(values):
    x = np.array(values * 9, np.float32)
    expected = np.asarray(cpu_reduce._torch_order_sum(x))
    got = np.asarray(_C.host_torch_order_sum(x), np.float32)
    assert got.tobytes() == expected.tobytes()


def test_native_sum_refuses_other_rows():
    with pytest.raises(TypeError):
        _C.host_torch_order_sum(np.ones(4, np.int64))  # no silent conversion
    with pytest.raises(TypeError):
        _C.host_torch_order_sum(np.ones(8, np.float32)[::2])  # not contiguous


def test_reduce_sums_with_it_as_with_the_reference(monkeypatch):
    x = np.random.default_rng(1).standard_normal((3, 5, 7)).astype(np.float32)
    native = [cpu_reduce.reduce(op, x, None, keepdim) for op in ("sum", "mean") for keepdim in (False, True)]
    monkeypatch.setattr(cpu_reduce, "_native_sum", None)
    reference = [cpu_reduce.reduce(op, x, None, keepdim) for op in ("sum", "mean") for keepdim in (False, True)]
    for got, expected in zip(native, reference):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes()
