"""The CUDA backend's (log-)softmax and fused cross-entropy, forward and backward
(kernels/softmax_loss.cu), with the CPU backend's signatures, dtype rules and results (the CPU backend,
adcuda/backends/cpu/softmax_loss.py, is the oracle). Half types are computed in fp32.

Arguments are made to fit the kernels here: contiguous where a kernel walks rows, operands in one
dtype (converted like the CPU backend's fp32 compute would see them), int64 class targets. Results
come back in the dtypes the CPU backend gives.
"""
from ... import _native
from ...errors import DTypeError, ShapeError, fmt_shape
from ._common import cast, dense, require_floating, scalar_type

__all__ = ["softmax", "softmax_backward", "cross_entropy", "cross_entropy_backward"]


def _check_axis(op, a, axis):
    if not 0 <= axis < a.ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for shape {fmt_shape(a.shape)}")


# ---------------------------------------------------------------------------------------------
# softmax
def softmax(a, axis, log):
    require_floating("softmax", "the input", a)
    _check_axis("softmax", a, axis)
    return _native._C.softmax(dense(a), axis, log)


def softmax_backward(y, g, axis, log):
    require_floating("softmax_backward", "the gradient", g)
    if tuple(y.shape) != tuple(g.shape):
        raise ShapeError(f"softmax_backward: output {fmt_shape(y.shape)} and gradient {fmt_shape(g.shape)} differ")
    _check_axis("softmax_backward", g, axis)
    return _native._C.softmax_backward(dense(cast(y, g.dtype)), dense(g), axis, log)


# ---------------------------------------------------------------------------------------------
# cross-entropy
def _class_rows(op, rows, target):
    if rows.ndim != 2 or target.ndim != 1 or target.shape[0] != rows.shape[0]:
        raise ShapeError(f"{op}: expected (N, C) rows and (N,) class targets, got {fmt_shape(rows.shape)} and "
                         f"{fmt_shape(target.shape)}")
    if target.dtype.name not in ("int32", "int64"):
        raise DTypeError(f"{op}: class targets must be integers, got {target.dtype.name}")
    return dense(cast(target, scalar_type("int64")))


def cross_entropy(logits, target, ignore_index, label_smoothing):
    """Per-row losses of ``logits`` (N, C) against class indices ``target`` (N,) -> (losses, log-probs)."""
    require_floating("cross_entropy", "the logits", logits)
    target = _class_rows("cross_entropy", logits, target)
    return _native._C.cross_entropy(dense(logits), target, int(ignore_index), float(label_smoothing))


def cross_entropy_backward(logp, target, g_rows, ignore_index, label_smoothing):
    require_floating("cross_entropy_backward", "the log-probabilities", logp)
    target = _class_rows("cross_entropy_backward", logp, target)
    if tuple(g_rows.shape) != (logp.shape[0],):
        raise ShapeError(f"cross_entropy_backward: row gradients {fmt_shape(g_rows.shape)} do not match "
                         f"{logp.shape[0]} rows")
    return _native._C.cross_entropy_backward(dense(logp), target, dense(cast(g_rows, logp.dtype)), int(ignore_index),
                                             float(label_smoothing))
