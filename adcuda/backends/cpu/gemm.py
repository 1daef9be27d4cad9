"""The CPU backend's ``matmul`` (kernels/gemm.cu on CUDA), computed in fp32 for float16, with the
epilogue the GEMM fuses on CUDA: a bias per output column and GELU's tanh form.
"""
import math

import numpy as np

from ._common import _compute

__all__ = ["matmul"]


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.asarray(math.sqrt(2.0 / math.pi), x.dtype) * (x + 0.044715 * x * x * x)))


def matmul(a, b, bias=None, activation=None, save_preactivation=False):
    if activation not in (None, "gelu_tanh"):
        raise ValueError(f"matmul: activation must be None or 'gelu_tanh', got {activation!r}")
    x, y = _compute(a), _compute(b)
    out = np.matmul(x, y)
    if bias is not None:
        out = out + _compute(bias).astype(out.dtype, copy=False)
    pre = out
    if activation == "gelu_tanh":
        out = _gelu_tanh(out)
    out = out.astype(a.dtype, copy=False)
    return (out, pre.astype(a.dtype, copy=False)) if save_preactivation else out
