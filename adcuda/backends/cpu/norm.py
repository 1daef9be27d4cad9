"""The CPU backend's layer norm, forward and backward (kernels/norm.cu on CUDA).
"""
import numpy as np

from ._common import _compute

__all__ = ["layer_norm", "layer_norm_backward"]


def layer_norm(x, weight, bias, n, eps):
    xx = _compute(x)
    axes = tuple(range(x.ndim - n, x.ndim))
    mean = np.mean(xx, axis=axes, keepdims=True)
    var_ = np.mean((xx - mean) ** 2, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var_ + eps)
    y = (xx - mean) * rstd
    if weight is not None:
        y = y * _compute(weight)
    if bias is not None:
        y = y + _compute(bias)
    stat_dt = np.float64 if x.dtype == np.float64 else np.float32
    return y.astype(x.dtype, copy=False), mean.astype(stat_dt), rstd.astype(stat_dt)


def layer_norm_backward(g, x, weight, mean, rstd, n):
    gg, xx = _compute(g), _compute(x)
    axes = tuple(range(x.ndim - n, x.ndim))
    lead = tuple(range(x.ndim - n))
    xhat = (xx - mean) * rstd
    dweight = np.sum(gg * xhat, axis=lead).astype(weight.dtype) if weight is not None else None
    dbias = np.sum(gg, axis=lead).astype(weight.dtype if weight is not None else g.dtype)
    gx = gg * _compute(weight) if weight is not None else gg
    dx = rstd * (gx - np.mean(gx, axis=axes, keepdims=True)
                 - xhat * np.mean(gx * xhat, axis=axes, keepdims=True))
    return dx.astype(x.dtype, copy=False), dweight, dbias
