"""The CPU backend's (log-)softmax and fused cross-entropy, forward and backward
(kernels/softmax_loss.cu on CUDA).
"""

import numpy as np

from ...errors import DTypeError, IndexOutOfRangeError, ShapeError, fmt_shape
from ..seam import BackendArray
from ._common import _compute, _row_sums

__all__ = ["softmax", "softmax_backward", "cross_entropy", "cross_entropy_backward"]


def _require_floating(op, name, a):
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: expected {name} to be a floating point array, got {a.dtype}")


def softmax(a: BackendArray, axis: int, log: bool) -> BackendArray:
    _require_floating("softmax", "the input", a)
    x = _compute(a)
    # PyTorch's shift by the max, NaN-propagating and infinite too: a row holding +inf (or NaN, or only
    # -inf) is NaN throughout, as PyTorch's is
    m = np.amax(x, axis=axis, keepdims=True, initial=-np.inf)  # initial: an empty axis is no error
    with np.errstate(invalid="ignore"):
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
        raise ShapeError(
            f"{op}: expected (N, C) rows and (N,) class targets, got {fmt_shape(rows.shape)} and "
            f"{fmt_shape(target.shape)}"
        )
    if target.dtype.kind not in "iu":
        raise DTypeError(f"{op}: class targets must be integers, got {target.dtype}")


def _check_targets(op, target, n_classes, ignore_index):
    """The ops layer checks the targets (the CUDA kernels do not: it would cost a host sync); NumPy's
    indexing would wrap a negative one around silently."""
    bad = ((target < 0) | (target >= n_classes)) & (target != ignore_index)
    if bad.any():
        raise IndexOutOfRangeError(f"{op}: target {int(target[bad][0])} is out of bounds for {n_classes} classes")


def cross_entropy(
    logits: BackendArray, target: BackendArray, ignore_index: int, label_smoothing: float
) -> tuple[BackendArray, BackendArray]:
    """Per-row losses of ``logits`` (N, C) against class indices ``target`` (N,), and each row's
    log-softmax statistics (N, 2) (float32; float64 for float64 logits): the shift ``m`` (the row's max,
    as softmax shifts by it; 0 where it is not finite, whose rows are NaN) and ``log(sum(exp(x - m)))``,
    which is all the backward needs: the log-probabilities ``(x - m) - log_sum`` are never stored. The
    two are kept apart, as log_softmax keeps them, because their sum (the log-sum-exp) rounds away
    log_sum where |m| is large (at logits [1e8, 1e8, 0] it is 1e8 exactly and the loss would be 0).
    The loss is ``(1 - ls) * (log_sum - (x[t] - m)) + ls / C * (C * log_sum - sum(x - m))``, i.e.
    ``-(1 - ls) * logp[t] - ls / C * sum(logp)``."""
    _require_floating("cross_entropy", "the logits", logits)
    _class_rows("cross_entropy", logits, target)
    _check_targets("cross_entropy", target, logits.shape[1], ignore_index)
    x = _compute(logits)
    n, c = x.shape
    m = np.amax(x, axis=1, keepdims=True, initial=-np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shifted = np.subtract(x, m)
        log_sum = np.log(_row_sums(np.exp(shifted), 1))  # the row sums as BLAS products: 3x NumPy's
        valid = target != ignore_index
        safe_t = np.where(valid, target, 0)
        picked = shifted[np.arange(n), safe_t] if c else np.zeros(n, x.dtype)
        loss = (1.0 - label_smoothing) * (log_sum[:, 0] - picked)
        if label_smoothing:
            loss = loss + label_smoothing / c * (c * log_sum[:, 0] - _row_sums(shifted, 1)[:, 0])
    loss = np.where(valid, loss, 0.0)
    stats = np.concatenate([np.where(np.isfinite(m), m, 0), log_sum], axis=1)  # (the NaN log-sum says it)
    return loss.astype(logits.dtype, copy=False), stats.astype(np.float64 if x.dtype == np.float64 else np.float32)


def cross_entropy_backward(
    logits: BackendArray,
    stats: BackendArray,
    target: BackendArray,
    g_rows: BackendArray,
    ignore_index: int,
    label_smoothing: float,
) -> BackendArray:
    """The gradient w.r.t. the logits: ``(exp((logits - m) - log_sum) - q) * g_row`` with ``(m,
    log_sum)`` the rows of ``stats`` and ``q`` the smoothed one-hot target; 0 for ignored rows (even
    where g_row is inf or NaN: the mean of a batch whose every target is ignored divides by 0)."""
    _require_floating("cross_entropy_backward", "the logits", logits)
    _class_rows("cross_entropy_backward", logits, target)
    _check_targets("cross_entropy_backward", target, logits.shape[1], ignore_index)
    rows_count = logits.shape[0]
    if g_rows.shape != (rows_count,):
        raise ShapeError(
            f"cross_entropy_backward: row gradients {fmt_shape(g_rows.shape)} do not match {rows_count} rows"
        )
    if stats.shape != (rows_count, 2):
        raise ShapeError(
            f"cross_entropy_backward: row statistics {fmt_shape(stats.shape)} do not match ({rows_count}, 2)"
        )
    x = _compute(logits)
    n, c = x.shape
    valid = target != ignore_index
    rows, columns = np.arange(n)[valid], target[valid]
    stats = _compute(stats)
    with np.errstate(over="ignore", invalid="ignore"):
        grad = np.subtract(x, stats[:, :1])
        grad -= stats[:, 1:]
        np.exp(grad, out=grad)
        # minus q in place, q = (1 - ls) one-hot + ls / C: each element's difference rounded once,
        # q's values rounded in x's dtype as they would be in an array of q
        q_target = x.dtype.type(1.0 - label_smoothing)
        if label_smoothing:
            q_target += x.dtype.type(label_smoothing / c)
            at_target = grad[rows, columns]
            grad -= label_smoothing / c
            grad[rows, columns] = at_target - q_target
        else:
            grad[rows, columns] -= q_target
        grad *= np.where(valid, _compute(g_rows), 0)[:, None]
    return grad.astype(logits.dtype, copy=False)
