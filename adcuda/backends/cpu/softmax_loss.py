"""The CPU backend's (log-)softmax and fused cross-entropy, forward and backward
(kernels/softmax_loss.cu on CUDA).
"""
import numpy as np

from ...errors import DTypeError, IndexOutOfRangeError, ShapeError, fmt_shape
from ..seam import BackendArray
from ._common import _compute

__all__ = ["softmax", "softmax_backward", "cross_entropy", "cross_entropy_backward"]


def _require_floating(op, name, a):
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: expected {name} to be a floating point array, got {a.dtype}")


def softmax(a: BackendArray, axis: int, log: bool) -> BackendArray:
    _require_floating("softmax", "the input", a)
    x = _compute(a)
    m = np.amax(x, axis=axis, keepdims=True, initial=-np.inf)  # initial: an empty axis is no error
    m = np.where(np.isfinite(m), m, 0)
    shifted = x - m
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.exp(shifted)
        s = np.sum(e, axis=axis, keepdims=True)
        r = shifted - np.log(s) if log else e / s
    return np.asarray(r).astype(a.dtype, copy=False)


def softmax_backward(y: BackendArray, g: BackendArray, axis: int, log: bool) -> BackendArray:
    _require_floating("softmax_backward", "the gradient", g)
    if y.shape != g.shape:
        raise ShapeError(f"softmax_backward: output {fmt_shape(y.shape)} and gradient {fmt_shape(g.shape)} differ")
    yy, gg = _compute(y), _compute(g)
    if log:
        r = gg - np.exp(yy) * np.sum(gg, axis=axis, keepdims=True)
    else:
        r = yy * (gg - np.sum(gg * yy, axis=axis, keepdims=True))
    return np.asarray(r).astype(g.dtype, copy=False)


def _class_rows(op, rows, target):
    if rows.ndim != 2 or target.ndim != 1 or target.shape[0] != rows.shape[0]:
        raise ShapeError(f"{op}: expected (N, C) rows and (N,) class targets, got {fmt_shape(rows.shape)} and "
                         f"{fmt_shape(target.shape)}")
    if target.dtype.kind not in "iu":
        raise DTypeError(f"{op}: class targets must be integers, got {target.dtype}")


def _check_targets(op, target, n_classes, ignore_index):
    """The ops layer checks the targets (the CUDA kernels do not: it would cost a host sync); NumPy's
    indexing would wrap a negative one around silently."""
    bad = ((target < 0) | (target >= n_classes)) & (target != ignore_index)
    if bad.any():
        raise IndexOutOfRangeError(f"{op}: target {int(target[bad][0])} is out of bounds for {n_classes} classes")


def cross_entropy(logits: BackendArray, target: BackendArray, ignore_index: int,
                  label_smoothing: float) -> tuple[BackendArray, BackendArray]:
    """Per-row losses of ``logits`` (N, C) against class indices ``target`` (N,)."""
    _require_floating("cross_entropy", "the logits", logits)
    _class_rows("cross_entropy", logits, target)
    _check_targets("cross_entropy", target, logits.shape[1], ignore_index)
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


def cross_entropy_backward(logp: BackendArray, target: BackendArray, g_rows: BackendArray, ignore_index: int,
                           label_smoothing: float) -> BackendArray:
    _require_floating("cross_entropy_backward", "the log-probabilities", logp)
    _class_rows("cross_entropy_backward", logp, target)
    _check_targets("cross_entropy_backward", target, logp.shape[1], ignore_index)
    if g_rows.shape != (logp.shape[0],):
        raise ShapeError(f"cross_entropy_backward: row gradients {fmt_shape(g_rows.shape)} do not match "
                         f"{logp.shape[0]} rows")
    lp = _compute(logp)
    n, c = lp.shape
    valid = target != ignore_index
    q = np.zeros_like(lp)
    q[np.arange(n)[valid], target[valid]] = 1.0 - label_smoothing
    if label_smoothing:
        q += label_smoothing / c
    grad = (np.exp(lp) - q) * (_compute(g_rows) * valid)[:, None]
    return grad.astype(logp.dtype, copy=False)
