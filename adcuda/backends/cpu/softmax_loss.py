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
    """Per-row losses of ``logits`` (N, C) against class indices ``target`` (N,)."""
    logp = softmax(logits, 1, True)
    lp = _compute(logp)
    n, c = lp.shape
    valid = target != ignore_index
    safe_t = np.where(valid, target, 0)
    picked = lp[np.arange(n), safe_t]
    loss = -(1.0 - label_smoothing) * picked
    if label_smoothing:
        loss = loss - label_smoothing / c * np.sum(lp, axis=1)
    loss = np.where(valid, loss, 0.0)
    return loss.astype(logits.dtype, copy=False), logp


def cross_entropy_backward(logp, target, g_rows, ignore_index, label_smoothing):
    lp = _compute(logp)
    n, c = lp.shape
    valid = target != ignore_index
    q = np.zeros_like(lp)
    q[np.arange(n)[valid], target[valid]] = 1.0 - label_smoothing
    if label_smoothing:
        q += label_smoothing / c
    grad = (np.exp(lp) - q) * (_compute(g_rows) * valid)[:, None]
    return grad.astype(logp.dtype, copy=False)
