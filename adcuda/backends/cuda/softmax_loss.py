"""The CUDA backend's (log-)softmax and fused cross-entropy, forward and backward
(kernels/softmax_loss.cu), with the CPU backend's signatures, dtype rules and results (the CPU backend,
adcuda/backends/cpu/softmax_loss.py, is the oracle). Half types are computed in fp32.

Arguments are made to fit the kernels here: contiguous where a kernel walks rows, operands in one
dtype (converted like the CPU backend's fp32 compute would see them), int64 class targets. Results
come back in the dtypes the CPU backend gives.
"""

from __future__ import annotations

from ... import _native
from ...errors import DTypeError, ShapeError, fmt_shape
from ._common import BackendArray, axis_index, cast, dense, require_floating, scalar_type, statistics_type

__all__ = ["softmax", "softmax_backward", "classifier_loss", "classifier_loss_backward"]


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
