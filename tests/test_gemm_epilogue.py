"""The CPU backend's fused GEMM epilogue (the oracle of the CUDA one, tests/test_cuda_gemm.py): the
bias per output column, GELU's tanh form, and the pre-activation the activation's backward needs."""

import math

import numpy as np
import pytest

from adcuda.backends.cpu import gemm


def test_bias_gelu_and_preactivation():
    g = np.random.default_rng(0)
    a, b, bias = g.standard_normal((2, 5, 7)), g.standard_normal((7, 3)), g.standard_normal(3)
    out, pre = gemm.matmul(a, b, bias=bias, activation="gelu_tanh", save_preactivation=True)
    expected_pre = a @ b + bias
    np.testing.assert_allclose(pre, expected_pre, rtol=1e-12)
    gelu = 0.5 * expected_pre * (1 + np.tanh(math.sqrt(2 / math.pi) * (expected_pre + 0.044715 * expected_pre**3)))
    np.testing.assert_allclose(out, gelu, rtol=1e-12)
    np.testing.assert_array_equal(gemm.matmul(a, b), a @ b)


def test_half_inputs_compute_in_fp32_and_return_half():
    a = np.full((2, 3), 0.1, np.float16)
    b = np.full((3, 2), 0.1, np.float16)
    out = gemm.matmul(a, b, bias=np.ones(2, np.float16))
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), 1 + 3 * float(np.float16(0.1)) ** 2, rtol=1e-3)


def test_unknown_activation():
    with pytest.raises(ValueError, match="activation must be None or 'gelu_tanh'"):
        gemm.matmul(np.ones((1, 1)), np.ones((1, 1)), activation="relu")
