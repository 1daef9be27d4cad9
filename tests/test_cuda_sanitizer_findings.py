"""Regression tests for what the sanitizer runs of the CUDA emulator found (kernels/README.md, "The CUDA
emulator": the cuda tests run on an ADCUDA_CUDA=EMULATE build compiled with -fsanitize=address or
-fsanitize=undefined).

Each test pins the behaviour on any build (and on a GPU) against the CPU backend, and exercises the
code path where the sanitizer reported, so that the report comes back if the fault does.
"""

import numpy as np
import pytest

import adcuda
from adcuda import dtypes as dt
from adcuda.backends import cpu

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")]


def _wrapped_exact(x, axes, op):
    """(the reduction in Python integers modulo 2**64, as int64: what two's complement arithmetic gives;
    whether any output's exact value lies outside int64)."""
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.transpose(x, kept + list(axes)).reshape(int(np.prod([x.shape[d] for d in kept])), -1)
    wrapped, overflows = [], False
    for row in rows:
        values = [int(v) for v in row]
        if op == "sum":
            exact = sum(values)
            overflows |= not -(2**63) <= exact < 2**63
            total = exact % 2**64
        else:
            total = 1
            for v in values:
                total = total * v % 2**64
            # a product's bit length is at least the sum of its factors' minus one per factor
            overflows |= 0 not in values and sum(v.bit_length() - 1 for v in values) >= 64
        wrapped.append(total - 2**64 if total >= 2**63 else total)
    return np.array(wrapped, dtype=np.int64).reshape([x.shape[d] for d in kept]), overflows


# Integer sums and products that overflow int64 wrap around as NumPy's do. The reduce kernels did it
# with signed arithmetic, where overflow is undefined behaviour (UBSan: reduce.cu "signed integer
# overflow"); they now compute in unsigned arithmetic.
@pytest.mark.parametrize(
    "op, dtype",
    [("sum", dt.int64), ("prod", dt.int64), ("prod", dt.int32)],
    ids=["sum-int64", "prod-int64", "prod-int32"],
)
@pytest.mark.parametrize(
    "shape, axes", [((65537,), (0,)), ((33, 65), (1,)), ((33, 65), (0,)), ((7, 5), (0, 1))], ids=str
)
def test_integer_sum_and_prod_wrap_around_as_numpy(cb, op, dtype, shape, axes):
    rng = np.random.default_rng(11)
    top = np.iinfo(dtype.numpy).max
    # magnitudes in [max / 2, max) of both signs: products of two and sums of a few leave int64
    x = rng.integers(top // 2, top, size=shape, dtype=dtype.numpy)
    x *= np.where(rng.random(shape) < 0.5, -1, 1).astype(dtype.numpy)
    expected, overflows = _wrapped_exact(x, axes, op)
    assert overflows  # the case does leave int64
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(cpu.reduce(op, x, axes, False), expected)
    got = np.array(cb.to_numpy(cb.reduce(op, cb.from_numpy(x, dtype), axes, False)))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)


# Elementwise integer arithmetic that leaves its type wraps around as NumPy's does (neg and abs of the
# minimum, add/sub/mul/pow past the maximum); the functors compute signed types in their unsigned type,
# since signed overflow is undefined behaviour the compiler may assume never happens.
@pytest.mark.parametrize("dtype", [dt.int32, dt.int64], ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "pow", "neg", "abs"])
def test_integer_elementwise_overflow_wraps_around_as_numpy(cb, op, dtype):
    info = np.iinfo(dtype.numpy)
    a = np.array([info.max, info.min, info.max - 1, info.min + 1, 3, -7], dtype=dtype.numpy)
    b = np.array([1, -1, info.max, 2, 63, 5], dtype=dtype.numpy)
    if op == "pow":  # integers to negative powers are refused
        b = np.abs(b)
    with np.errstate(over="ignore"):
        if op in ("neg", "abs"):
            expected = cpu.unary(op, a)
            got = cb.unary(op, cb.from_numpy(a, dtype))
        else:
            expected = cpu.binary(op, a, b, dtype)
            got = cb.binary(op, cb.from_numpy(a, dtype), cb.from_numpy(b, dtype), dtype)
    got = np.array(cb.to_numpy(got))
    assert got.dtype == dtype.numpy
    np.testing.assert_array_equal(got, expected)
