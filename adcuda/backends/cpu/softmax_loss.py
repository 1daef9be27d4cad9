"""The CPU backend's (log-)softmax and fused cross-entropy, forward and backward
(kernels/softmax_loss.cu on CUDA).
"""

from __future__ import annotations

import numpy as np

from ... import _native
from ...errors import DTypeError, IndexOutOfRangeError, ShapeError, fmt_shape
from ._common import _F32, _F64, BackendArray, _compute, _row_sums

__all__ = ["softmax", "softmax_backward", "classifier_loss", "classifier_loss_backward"]
__all__ += ["nll_loss", "multi_margin_loss"]  # the class losses, reduced


# The host module's forwards and the classifier loss's backward (kernels/host/softmax_loss.cpp; None:
# NumPy's, the reference they are tested against), for arrays up to _NATIVE_MAX elements: there NumPy's
# passes cost a microsecond or more each whatever the size; above it its vectorised exp is faster than
# the host loop's.
_NATIVE = _native._C if hasattr(_native._C, "cpu_softmax") else None
_NATIVE_MAX = 1 << 14


def _native_for(a):
    """The native module when it computes over ``a`` (a small C-contiguous float32/float64 array), else None."""
    if _NATIVE is not None and (a.dtype == _F32 or a.dtype == _F64) and a.size <= _NATIVE_MAX and a.flags.c_contiguous:
        return _NATIVE
    return None


# Not a primitive: the host module's elementwise losses (kernels/host/softmax_loss.cpp's
# cpu_pointwise_loss), which the loss ops call on the CPU where nothing records, in place of their terms'
# primitives and reduction (eight NumPy calls of about a microsecond each on a small batch's losses)
POINTWISE_LOSSES = {
    "binary_cross_entropy": 0,
    "kl_div": 1,
    "kl_div_log_target": 2,
    "huber_loss": 3,
    "smooth_l1_loss": 4,
}
_SUM_LIMIT = 32768  # reduce.py's _TORCH_ORDER_LIMIT: up to it, reduce sums in PyTorch's order, as the host does
_POINTWISE = getattr(_NATIVE, "cpu_pointwise_loss", None)


def pointwise_loss(loss: str, x: BackendArray, t: BackendArray, param: float, divisor: float) -> BackendArray | None:
    """The terms of ``loss`` (a key of POINTWISE_LOSSES; ``param``: huber's delta, smooth L1's beta) of ``x``
    against ``t`` (divisor 0), or their sum (divisor 1) or mean (the divisor, a count) as reduce and a
    division give it, where the host module computes it: x and t C-contiguous host arrays of one
    float32/float64 dtype and shape, at most _SUM_LIMIT terms to reduce, every binary cross-entropy value
    in [0, 1]; else None (the terms' primitives then, which name what is wrong)."""
    if (
        _POINTWISE is None
        or x.__class__ is not np.ndarray
        or t.__class__ is not np.ndarray
        or x.dtype is not t.dtype
        or x.shape != t.shape
        or x.dtype is not _F32
        and x.dtype is not _F64
        or divisor
        and not 0 < x.size <= _SUM_LIMIT
    ):
        return None
    try:
        return _POINTWISE(POINTWISE_LOSSES[loss], x, t, param, divisor)
    except TypeError:  # (strided)
        return None


# Not a primitive: glu's halves, sigmoid and product in one call of the host module (cpu_glu), for arrays
# whose sigmoid the backend's unary computes with the same functor (elementwise.py's _HOST_MAX)
_GLU = getattr(_NATIVE, "cpu_glu", None)
_GLU_MAX = 512  # (twice the halves' _HOST_MAX)


def glu(x: BackendArray, axis: int) -> BackendArray | None:
    """glu of ``x`` along ``axis`` (a dim of an even size) as the primitives give it (the second half's
    sigmoid made contiguous, times the first half), where the host module computes it: a C-contiguous
    float32/float64 host array of at most _GLU_MAX elements; else None."""
    if (
        _GLU is None
        or x.__class__ is not np.ndarray
        or x.size > _GLU_MAX
        or (x.dtype is not _F32 and x.dtype is not _F64)
    ):
        return None
    try:
        return _GLU(x, axis)
    except TypeError:  # (strided)
        return None


def _require_floating(op, name, a):
    if a.dtype.kind != "f":
        raise DTypeError(f"{op}: expected {name} to be a floating point array, got {a.dtype}")


def softmax(a: BackendArray, axis: int, log: bool) -> BackendArray:
    _require_floating("softmax", "the input", a)
    if a.ndim == 0:  # ufuncs give NumPy scalars for 0-d arrays, which the out= writes below cannot take
        return softmax(a.reshape(1), 0, log).reshape(())
    native = _native_for(a)
    if native is not None and -a.ndim <= axis < a.ndim:  # (NumPy's path names a bad axis)
        return native.cpu_softmax(a, axis % a.ndim, log)
    x = _compute(a)
    # PyTorch's shift by the max, NaN-propagating and infinite too: a row holding +inf (or NaN, or only
    # -inf) is NaN throughout, as PyTorch's is
    # (the ufuncs' own reductions, not np.amax and np.sum, which wrap them in a Python layer; one
    # errstate: on an 8x8 input each of these cost as much as the arithmetic)
    m = np.maximum.reduce(x, axis=axis, keepdims=True, initial=-np.inf)  # initial: an empty axis is no error
    with np.errstate(divide="ignore", invalid="ignore"):
        shifted = np.subtract(x, m)
        if log:
            e = np.exp(shifted)
            r = np.subtract(shifted, np.log(np.add.reduce(e, axis=axis, keepdims=True), out=np.empty_like(m)))
        else:
            e = np.exp(shifted, out=shifted)  # shifted is not read again
            r = np.divide(e, np.add.reduce(e, axis=axis, keepdims=True), out=e)
    return r.astype(a.dtype, copy=False)


def softmax_backward(y: BackendArray, g: BackendArray, axis: int, log: bool) -> BackendArray:
    _require_floating("softmax_backward", "the gradient", g)
    if y.shape != g.shape:
        raise ShapeError(f"softmax_backward: output {fmt_shape(y.shape)} and gradient {fmt_shape(g.shape)} differ")
    yy, gg = _compute(y), _compute(g)
    if log:
        r = gg - np.exp(yy) * np.add.reduce(gg, axis=axis, keepdims=True)
    else:
        r = yy * (gg - np.add.reduce(gg * yy, axis=axis, keepdims=True))
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
        ignored = "" if ignore_index is None else f" or equal ignore_index={ignore_index}"
        raise IndexOutOfRangeError(
            f"{op}: target {int(target[bad][0])} is out of bounds for {n_classes} classes (class indices must be "
            f"in [0, {n_classes - 1}]{ignored})"
        )


def classifier_loss(
    logits: BackendArray,
    target: BackendArray,
    weight: BackendArray | None,
    ignore_index: int,
    label_smoothing: float,
) -> tuple[BackendArray, BackendArray]:
    """Per-row cross-entropy losses of ``logits`` (N, C) against class indices ``target`` (N,) with
    optional class weights ``weight`` (C,), and each row's log-softmax statistics (N, 2): the shift
    ``m`` (the row's max, by which softmax shifts; 0 where it is not finite, whose log-sum is NaN) and
    ``log_sum = log(sum(exp(x - m)))``, all the backward needs (the log-probabilities ``(x - m) - log_sum`` are
    never stored; the two are kept apart because their sum rounds log_sum away where |m| is large).
    Losses and statistics are float32 whatever the logits' floating dtype (float64 for float64), so
    half logits give full-precision losses without a float32 copy of the logits. With ``ls`` the label
    smoothing, ``w`` the weights (1 without) and ``W`` their sum, a row's loss is
    ``(1 - ls) * w[t] * (log_sum - (x[t] - m)) + ls / C * (W * log_sum - sum(w * (x - m)))``, i.e.
    ``-(1 - ls) * w[t] * logp[t] - ls / C * sum(w * logp)`` (PyTorch's), 0 where ``t == ignore_index``."""
    _require_floating("classifier_loss", "the logits", logits)
    _class_rows("classifier_loss", logits, target)
    native = _native_for(logits)
    if (
        native is not None
        and logits.shape[1]
        and target.dtype == np.int64
        and target.flags.c_contiguous
        and (weight is None or (weight.dtype == logits.dtype and weight.shape == logits.shape[1:]))
    ):
        try:
            return native.cpu_classifier_loss(logits, target, weight, ignore_index, label_smoothing)
        except IndexError:
            pass  # a target out of range: _check_targets names it
    _check_targets("classifier_loss", target, logits.shape[1], ignore_index)
    x = _compute(logits)
    n, c = x.shape
    w = None if weight is None else _check_class_weight("classifier_loss", weight, c, x.dtype)
    # shifting by a non-finite max makes the log-sum NaN (inf - inf, NaN, -inf - -inf): a row holding
    # NaN or +inf, or only -inf, then has statistics (0, NaN) and NaN losses and gradients, as PyTorch's
    m = np.amax(x, axis=1, keepdims=True, initial=-np.inf)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shifted = np.subtract(x, m)
        log_sum = np.log(_row_sums(np.exp(shifted), 1))[:, 0]  # the row sums as BLAS products: 3x NumPy's
        valid = target != ignore_index
        safe_t = np.where(valid, target, 0)
        picked = shifted[np.arange(n), safe_t] if c else np.zeros(n, x.dtype)
        loss = (1.0 - label_smoothing) * (log_sum - picked)
        if w is not None:
            loss = loss * w[safe_t]
        if label_smoothing:
            total_weight = c if w is None else np.sum(w)
            loss = loss + label_smoothing / c * (total_weight * log_sum - _row_sums(shifted, 1, w)[:, 0])
    loss = np.where(valid, loss, 0.0)
    stats = np.stack([np.where(np.isfinite(m[:, 0]), m[:, 0], 0), log_sum], axis=1)
    return loss.astype(x.dtype, copy=False), stats.astype(x.dtype, copy=False)


def classifier_loss_backward(
    logits: BackendArray,
    stats: BackendArray,
    target: BackendArray,
    weight: BackendArray | None,
    g_rows: BackendArray,
    ignore_index: int,
    label_smoothing: float,
) -> BackendArray:
    """The gradient w.r.t. the logits of classifier_loss's per-row losses, in the logits' dtype:
    ``p * ((1 - ls) * w[t] + ls / C * W) - (1 - ls) * w[t] * onehot(t) - ls / C * w``, times each row's
    loss gradient ``g_rows`` (float32, float64 for float64 logits), with ``p = exp((x - m) - log_sum)``
    from ``stats`` (and w = 1, W = C without weights); 0 for ignored rows, even where g_row is inf or
    NaN (the mean of a batch whose every target is ignored divides by 0)."""
    _require_floating("classifier_loss_backward", "the logits", logits)
    _class_rows("classifier_loss_backward", logits, target)
    n, c = logits.shape
    if g_rows.shape != (n,):
        raise ShapeError(f"classifier_loss_backward: row gradients {fmt_shape(g_rows.shape)} do not match {n} rows")
    if stats.shape != (n, 2):
        raise ShapeError(f"classifier_loss_backward: row statistics {fmt_shape(stats.shape)} do not match ({n}, 2)")
    native = _native_for(logits)
    if (
        native is not None
        and c
        and target.dtype == np.int64
        and target.flags.c_contiguous
        and all(
            a is None or (a.dtype == logits.dtype and a.flags.c_contiguous and a.ndim == b)
            for a, b in ((stats, 2), (g_rows, 1), (weight, 1))
        )
        and (weight is None or weight.shape == (c,))
    ):
        try:
            return native.cpu_classifier_loss_backward(
                logits, stats, target, weight, g_rows, ignore_index, label_smoothing
            )
        except IndexError:
            pass  # a target out of range: _check_targets names it
    _check_targets("classifier_loss_backward", target, c, ignore_index)
    x = _compute(logits)
    w = None if weight is None else _check_class_weight("classifier_loss_backward", weight, c, x.dtype)
    stats = _compute(stats)
    valid = target != ignore_index
    rows, columns = np.arange(n)[valid], target[valid]
    with np.errstate(over="ignore", invalid="ignore"):
        grad = np.subtract(x, stats[:, :1])
        grad -= stats[:, 1:]
        np.exp(grad, out=grad)
        keep = x.dtype.type(1.0 - label_smoothing)
        smooth = x.dtype.type(label_smoothing / c) if c else x.dtype.type(0)
        if w is None:
            # q = (1 - ls) one-hot + ls / C subtracted in place: each element's difference rounded once
            at_target = grad[rows, columns] - (keep + smooth)
            if label_smoothing:
                grad -= smooth
            grad[rows, columns] = at_target
        else:
            safe_t = np.where(valid, target, 0)
            grad *= (keep * w[safe_t] + smooth * np.sum(w))[:, None]
            grad[rows, columns] -= keep * w[columns]
            if label_smoothing:
                grad -= smooth * w
        grad *= np.where(valid, _compute(g_rows), 0)[:, None]
    return grad.astype(logits.dtype, copy=False)


def _check_class_weight(op, weight, c, dtype):
    if weight.shape != (c,):
        raise ShapeError(f"{op}: class weights {fmt_shape(weight.shape)} do not match {c} classes")
    _require_floating(op, "the class weights", weight)
    return _compute(weight).astype(dtype, copy=False)


def _class_loss_native(scores, target, weight):
    """The native module when it computes a class loss of ``scores`` (N, C) against ``target``, else None."""
    native = _native_for(scores)
    if (
        native is not None
        and target.dtype == np.int64
        and target.flags.c_contiguous
        and (weight is None or (weight.dtype == scores.dtype and weight.shape == scores.shape[1:]))
    ):
        return native
    return None


def _reduced(rows, reduction, divisor, dtype):
    """The per-row losses (N,), or their sum (over ``divisor`` for a mean) as a 0-d array, in ``dtype``."""
    if reduction == "none":
        return rows.astype(dtype, copy=False)
    total = np.add.reduce(rows.astype(np.float64), axis=None)
    return np.asarray(total / divisor if reduction == "mean" else total, dtype=dtype)


def _check_reduction(op, reduction):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def nll_loss(
    logp: BackendArray, target: BackendArray, weight: BackendArray | None, ignore_index: int, reduction: str
) -> tuple[BackendArray, BackendArray]:
    """(loss, total weight) of log-probabilities ``logp`` (N, C) against class indices ``target`` (N,)
    with optional class weights ``weight`` (C,): each row's ``-w[t] * logp[t]`` (0 where ``t ==
    ignore_index``), the (N,) losses (``reduction='none'``) or their sum or mean (over the total
    weight), and the total weight: the 0-d sum of ``w[t]`` over the rows that count, both in ``logp``'s
    dtype (sums accumulated in float64)."""
    native = _class_loss_native(logp, target, weight)
    if native is not None:  # it checks what the checks below check, in its one pass
        try:
            return native.cpu_nll_loss(logp, target, weight, ignore_index, reduction)
        except (IndexError, ValueError, TypeError):
            pass  # the checks below name what is wrong (a target out of range: _check_targets)
    _require_floating("nll_loss", "the log-probabilities", logp)
    _class_rows("nll_loss", logp, target)
    _check_reduction("nll_loss", reduction)
    n, c = logp.shape
    _check_targets("nll_loss", target, c, ignore_index)
    x = _compute(logp)
    w = np.ones(c, x.dtype) if weight is None else _check_class_weight("nll_loss", weight, c, x.dtype)
    valid = target != ignore_index
    safe_t = np.where(valid, target, 0)
    row_weight = np.where(valid, w[safe_t], 0).astype(x.dtype) if n else np.zeros(0, x.dtype)
    picked = x[np.arange(n), safe_t] if c else np.zeros(n, x.dtype)
    total_weight = np.add.reduce(row_weight.astype(np.float64), axis=None)
    # an ignored row's infinite log-probability times its weight 0, and the mean of no row: NaN, quietly
    with np.errstate(invalid="ignore", divide="ignore"):
        rows = np.where(valid, -(row_weight * picked), 0).astype(x.dtype)
        loss = _reduced(rows, reduction, total_weight, logp.dtype)
    return loss, np.asarray(total_weight, dtype=logp.dtype)


def multi_margin_loss(
    scores: BackendArray, target: BackendArray, p: int, margin: float, weight: BackendArray | None, reduction: str
) -> BackendArray:
    """multi_margin_loss of ``scores`` (N, C) against class indices ``target`` (N,) (each in range):
    each row's ``sum over j != t of w[t] * max(0, margin - x[t] + x[j]) ** p / C`` (``p`` 1 or 2; a NaN
    hinge adds nothing, as in PyTorch), the (N,) losses or their sum or mean, in the scores' dtype."""
    native = _class_loss_native(scores, target, weight)
    if native is not None:  # it checks what the checks below check, in its one pass
        try:
            return native.cpu_multi_margin_loss(scores, target, p, margin, weight, reduction)
        except (IndexError, ValueError, TypeError):
            pass  # the checks below name what is wrong (a target out of range: _check_targets)
    _require_floating("multi_margin_loss", "the scores", scores)
    _class_rows("multi_margin_loss", scores, target)
    _check_reduction("multi_margin_loss", reduction)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: p must be 1 or 2, got {p}")
    n, c = scores.shape
    _check_targets("multi_margin_loss", target, c, None)
    x = _compute(scores)
    at_target = np.take_along_axis(x, target.reshape(n, 1), 1) if c else np.zeros((n, 1), x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        hinge = (x.dtype.type(margin) - at_target) + x
        hinge = np.where(hinge > 0, hinge, 0).astype(x.dtype)
        if p == 2:
            hinge = hinge * hinge
        if weight is not None:
            hinge = hinge * _check_class_weight("multi_margin_loss", weight, c, x.dtype)[target].reshape(n, 1)
    hinge[np.arange(n), target] = 0  # the target's own term left out
    rows = np.add.reduce(hinge, axis=1) / x.dtype.type(c) if c else np.zeros(n, x.dtype)
    return _reduced(rows, reduction, n, scores.dtype)
