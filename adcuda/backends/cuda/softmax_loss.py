"""The CUDA backend's (log-)softmax and fused cross-entropy, forward and backward
(kernels/softmax_loss.cu), with the CPU backend's signatures, dtype rules and results (the CPU backend,
adcuda/backends/cpu/softmax_loss.py, is the oracle). Half types are computed in fp32.

Arguments are made to fit the kernels here: contiguous where a kernel walks rows, operands in one
dtype (converted like the CPU backend's fp32 compute would see them), int64 class targets. Results
come back in the dtypes the CPU backend gives.
"""

from __future__ import annotations

from ... import _native
from ... import dtypes as dt
from ...errors import DTypeError, ShapeError, fmt_shape
from ._common import BackendArray, axis_index, cast, dense, require_floating, scalar_type, statistics_type
from .elementwise import binary, unary, where
from .index import gather
from .reduce import reduce
from .storage import arange, astype, dtype_of, view

__all__ = ["softmax", "softmax_backward", "classifier_loss", "classifier_loss_backward"]
__all__ += ["nll_loss", "multi_margin_loss"]  # the class losses, reduced


def _rows(op, a, axis):
    """(``a`` as the kernels take it, the axis as a dim): negative axes count from the end, and a 0-d
    array is one row of one element (axis 0 or -1 names it, as in NumPy)."""
    dim = axis_index(op, axis, a.shape)
    return (a if a.ndim else a.as_strided((1,), (0,), a.offset)), dim


# ---------------------------------------------------------------------------------------------
# softmax
def softmax(a: BackendArray, axis: int, log: bool) -> BackendArray:
    require_floating("softmax", "the input", a)
    rows, dim = _rows("softmax", a, axis)
    out = _native._C.softmax(dense(rows), dim, log)
    return out if a.ndim else out.as_strided((), (), out.offset)


def softmax_backward(y: BackendArray, g: BackendArray, axis: int, log: bool) -> BackendArray:
    require_floating("softmax_backward", "the gradient", g)
    if tuple(y.shape) != tuple(g.shape):
        raise ShapeError(f"softmax_backward: output {fmt_shape(y.shape)} and gradient {fmt_shape(g.shape)} differ")
    y_rows, dim = _rows("softmax_backward", y, axis)
    g_rows, _ = _rows("softmax_backward", g, axis)
    out = _native._C.softmax_backward(dense(cast(y_rows, g.dtype)), dense(g_rows), dim, log)
    return out if g.ndim else out.as_strided((), (), out.offset)


# ---------------------------------------------------------------------------------------------
# cross-entropy
def _class_rows(op, rows, target):
    if rows.ndim != 2 or target.ndim != 1 or target.shape[0] != rows.shape[0]:
        raise ShapeError(
            f"{op}: expected (N, C) rows and (N,) class targets, got {fmt_shape(rows.shape)} and "
            f"{fmt_shape(target.shape)}"
        )
    if target.dtype.name not in ("int32", "int64"):
        raise DTypeError(f"{op}: class targets must be integers, got {target.dtype.name}")
    return dense(cast(target, scalar_type("int64")))


def _class_weight(op, logits, weight):
    if weight is None:
        return None
    require_floating(op, "the class weights", weight)
    if tuple(weight.shape) != (logits.shape[1],):
        raise ShapeError(f"{op}: class weights {fmt_shape(weight.shape)} do not match {logits.shape[1]} classes")
    return dense(cast(weight, statistics_type(logits)))


def classifier_loss(
    logits: BackendArray,
    target: BackendArray,
    weight: BackendArray | None,
    ignore_index: int,
    label_smoothing: float,
) -> tuple[BackendArray, BackendArray]:
    """Per-row losses of ``logits`` (N, C) against class indices ``target`` (N,) -> (losses, stats (N, 2))."""
    require_floating("classifier_loss", "the logits", logits)
    target = _class_rows("classifier_loss", logits, target)
    weight = _class_weight("classifier_loss", logits, weight)
    return _native._C.classifier_loss(dense(logits), target, weight, int(ignore_index), float(label_smoothing))


def classifier_loss_backward(
    logits: BackendArray,
    stats: BackendArray,
    target: BackendArray,
    weight: BackendArray | None,
    g_rows: BackendArray,
    ignore_index: int,
    label_smoothing: float,
) -> BackendArray:
    require_floating("classifier_loss_backward", "the logits", logits)
    target = _class_rows("classifier_loss_backward", logits, target)
    weight = _class_weight("classifier_loss_backward", logits, weight)
    rows = logits.shape[0]
    if tuple(g_rows.shape) != (rows,):
        raise ShapeError(f"classifier_loss_backward: row gradients {fmt_shape(g_rows.shape)} do not match {rows} rows")
    if tuple(stats.shape) != (rows, 2):
        raise ShapeError(f"classifier_loss_backward: row statistics {fmt_shape(stats.shape)} do not match ({rows}, 2)")
    wide = statistics_type(logits)
    return _native._C.classifier_loss_backward(
        dense(logits),
        dense(cast(stats, wide)),
        target,
        weight,
        dense(cast(g_rows, wide)),
        int(ignore_index),
        float(label_smoothing),
    )


# ---------------------------------------------------------------------------------------------
# nll_loss and multi_margin_loss: the elementwise, index and reduction kernels composed (the CPU's
# are one host loop each: a small batch's loss is a per-call cost there)
def _viewed(a, shape):
    """The contiguous ``a`` in ``shape`` (a view, which its layout always allows)."""
    out = view(a, shape)
    assert out is not None
    return out


def _reduced(op, rows, reduction, divisor, dtype):
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    if reduction == "none":
        return rows
    total = reduce("sum", rows, None, False)
    return binary("div", total, divisor, dtype) if reduction == "mean" else total


def nll_loss(
    logp: BackendArray, target: BackendArray, weight: BackendArray | None, ignore_index: int, reduction: str
) -> tuple[BackendArray, BackendArray]:
    """(loss, total weight) of ``logp`` (N, C) against class indices ``target`` (N,), as the CPU's."""
    require_floating("nll_loss", "the log-probabilities", logp)
    t = _class_rows("nll_loss", logp, target)
    dtype, n = dtype_of(logp), logp.shape[0]
    valid = binary("ne", t, int(ignore_index), dt.int64)
    safe = where(valid, t, 0, dt.int64)
    picked = _viewed(gather(dense(logp), 1, _viewed(safe, (n, 1))), (n,))
    if weight is None:
        row_weight = astype(valid, dtype)
    else:
        if tuple(weight.shape) != (logp.shape[1],) or dtype_of(weight) is not dtype:
            raise ShapeError(f"nll_loss: class weights {fmt_shape(weight.shape)} do not match the log-probabilities")
        row_weight = where(valid, gather(dense(weight), 0, safe), 0.0, dtype)
    # ignored rows are 0 even where their log-probability is infinite
    rows = where(valid, unary("neg", binary("mul", row_weight, picked, dtype)), 0.0, dtype)
    total_weight = reduce("sum", row_weight, None, False)
    return _reduced("nll_loss", rows, reduction, total_weight, dtype), total_weight


def multi_margin_loss(
    scores: BackendArray, target: BackendArray, p: int, margin: float, weight: BackendArray | None, reduction: str
) -> BackendArray:
    """multi_margin_loss of ``scores`` (N, C) against class indices ``target`` (N,), as the CPU's."""
    require_floating("multi_margin_loss", "the scores", scores)
    t = _class_rows("multi_margin_loss", scores, target)
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: p must be 1 or 2, got {p}")
    dtype, (n, c) = dtype_of(scores), scores.shape
    x, labels = dense(scores), _viewed(t, (n, 1))
    hinge = binary("add", binary("sub", float(margin), gather(x, 1, labels), dtype), x, dtype)
    hinge = where(binary("gt", hinge, 0.0, dtype), hinge, 0.0, dtype)  # a NaN hinge adds nothing, as in PyTorch
    if p == 2:
        hinge = binary("mul", hinge, hinge, dtype)
    if weight is not None:
        hinge = binary("mul", hinge, _viewed(gather(dense(weight), 0, t), (n, 1)), dtype)
    others = binary("ne", _viewed(arange(0, c, 1, dt.int64), (1, c)), labels, dt.int64)  # the target's own left out
    rows = binary("div", reduce("sum", where(others, hinge, 0.0, dtype), (1,), False), float(c), dtype)
    return _reduced("multi_margin_loss", rows, reduction, float(n), dtype)
