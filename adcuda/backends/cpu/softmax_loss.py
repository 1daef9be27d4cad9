"""The CPU backend's (log-)softmax and fused cross-entropy, forward and backward
(kernels/softmax_loss.cu on CUDA).
"""
import numpy as np

from ._common import _compute

__all__ = ["softmax", "softmax_backward", "cross_entropy", "cross_entropy_backward"]


def softmax(a, axis, log):
    x = _compute(a)
    m = np.amax(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    shifted = x - m
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.exp(shifted)
        s = np.sum(e, axis=axis, keepdims=True)
        r = shifted - np.log(s) if log else e / s
    return r.astype(a.dtype, copy=False)


def softmax_backward(y, g, axis, log):
    yy, gg = _compute(y), _compute(g)
    if log:
        r = gg - np.exp(yy) * np.sum(gg, axis=axis, keepdims=True)
    else:
        r = yy * (gg - np.sum(gg * yy, axis=axis, keepdims=True))
    return r.astype(g.dtype, copy=False)


def cross_entropy(logits, target, ignore_index, label_smoothing):
    """Per-row losses of ``logits`` (N, C) against class indices ``target`` (N,), and each row's
    log-sum-exp (float32; float64 for float64 logits), which is all the backward needs: the
    log-probabilities ``logits - lse`` are never stored. The log-sum-exp takes softmax's order of
    operations (NaN-propagating max, shift 0 where it is not finite); the loss is
    ``(1 - ls) * (lse - x[t]) + ls / C * (C * lse - sum(x))``, i.e. ``-(1 - ls) * logp[t] - ls / C *
    sum(logp)``."""
    x = _compute(logits)
    n, c = x.shape
    m = np.amax(x, axis=1, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lse = (m + np.log(np.sum(np.exp(x - m), axis=1, keepdims=True)))[:, 0]
        valid = target != ignore_index
        safe_t = np.where(valid, target, 0)
        picked = x[np.arange(n), safe_t] if c else np.zeros(n, x.dtype)
        loss = (1.0 - label_smoothing) * (lse - picked)
        if label_smoothing:
            loss = loss + label_smoothing / c * (c * lse - np.sum(x, axis=1))
    loss = np.where(valid, loss, 0.0)
    return loss.astype(logits.dtype, copy=False), lse.astype(np.float64 if x.dtype == np.float64 else np.float32)


def cross_entropy_backward(logits, lse, target, g_rows, ignore_index, label_smoothing):
    """The gradient w.r.t. the logits: ``(exp(logits - lse) - q) * g_row`` with ``q`` the smoothed
    one-hot target, 0 for ignored rows."""
    x = _compute(logits)
    n, c = x.shape
    valid = target != ignore_index
    q = np.zeros_like(x)
    q[np.arange(n)[valid], target[valid]] = 1.0 - label_smoothing
    if label_smoothing:
        q += label_smoothing / c
    with np.errstate(over="ignore", invalid="ignore"):
        grad = (np.exp(x - _compute(lse)[:, None]) - q) * (_compute(g_rows) * valid)[:, None]
    return grad.astype(logits.dtype, copy=False)
