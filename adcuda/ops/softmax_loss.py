"""Softmax and the losses: softmax, log_softmax, cross_entropy, nll_loss, mse_loss, l1_loss,
binary_cross_entropy_with_logits, softplus, logsigmoid.

softmax, log_softmax and cross_entropy's per-row losses run on the fused primitives of the backend's
softmax_loss family (``kernels/softmax_loss.cu``) with fused backward primitives; the losses are
composite ops over them. All of them compute in float32 under autocast.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING
from typing import cast as cast_type

import numpy as np

from .. import dtypes as dt
from ..autograd.graph import needs_grad
from ..backends import cpu as _cpu
from ..backends.cpu.softmax_loss import glu as _host_glu
from ..backends.cpu.softmax_loss import pointwise_loss as _host_pointwise_loss
from ..device import CPU
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError, UnsupportedDTypeError, fmt_shape
from ..tensor import Tensor as _Tensor
from ..tensor import primitives
from .autocast import is_enabled as autocast_enabled
from .common import (
    broadcast_shapes,
    cast,
    check_float,
    check_same_device,
    check_tensor,
    dense,
    has_shape,
    host_extremes,
    result_type,
    wrap,
    wrap_dim,
)
from .dispatch import host_step
from .dtype_support import FLOATING
from .elementwise import _float_unary, binary, clamp, exp, log, log1p, minimum, select, sigmoid, unary, where
from .elementwise import abs as _abs
from .factories import arange
from .gemm import pairwise_distance
from .index import gather
from .layout import cat
from .reduce import sum as _sum
from .registry import get, lowering, op

if TYPE_CHECKING:
    from ..backends.seam import CPUArray
    from ..types import Callable, DType, Tensor


# ------------------------------------------------------------------------------------------------
# softmax / log_softmax
def _softmax_forward(name, input, dim, log, dtype):
    if dim is None:
        raise TypeError(f"{name}: dim must be given (implicit dim is deprecated in PyTorch)")
    check_tensor(name, "input", input)
    if dtype is not None:
        input = cast(input, dt.as_dtype(dtype, name))
    if not input.dtype.is_floating_point:
        raise UnsupportedDTypeError(f"{name}: expected a floating point tensor, got {input.dtype}")
    bk = primitives(input)
    if input.ndim == 0:  # a 0-d tensor is one row of one element
        wrap_dim(dim, 0, name)
        rows = bk.view(input._data, (1,))
        return wrap(bk.view(bk.contiguous(bk.softmax(bk.contiguous(rows), 0, log)), ()), input._device)
    axis = wrap_dim(dim, input.ndim, name)
    if input.numel() == 0:
        return wrap(bk.astype(input._data, input.dtype), input._device)
    return wrap(bk.softmax(dense(input), axis, log), input._device)


def _softmax_grad(log):
    def grad_fn(grad, result, dim):
        axis = wrap_dim(dim, result.ndim, "softmax")
        if log:
            return grad - exp(result) * _sum(grad, axis, keepdim=True)
        return result * (grad - _sum(grad * result, axis, keepdim=True))

    return grad_fn


def _softmax_fused_grad(log):
    def grad_fn(grad, result, dim):
        bk = primitives(grad)
        if result.ndim == 0:
            y, g = bk.view(result._data, (1,)), bk.view(dense(grad), (1,))
            return wrap(bk.view(bk.contiguous(bk.softmax_backward(y, g, 0, log)), ()), grad._device)
        axis = wrap_dim(dim, result.ndim, "softmax")
        return wrap(bk.softmax_backward(result._data, dense(grad), axis, log), grad._device)

    return grad_fn


# F.softmax and F.log_softmax take PyTorch's (ignored) _stacklevel before dtype
def _functional_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: DType | None = None
) -> Tensor:
    return softmax(input, dim, dtype)


def _functional_log_softmax(
    input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: DType | None = None
) -> Tensor:
    return log_softmax(input, dim, dtype)


@op(
    "softmax",
    doc="exp(input) normalised to sum to 1 along dim.",
    node="SoftmaxBackward0",
    autocast="float32",
    functional=_functional_softmax,
    grads={"input": _softmax_grad(False)},
    fused={"input": _softmax_fused_grad(False)},
)
def softmax(input: Tensor, dim: int | None = None, dtype: DType | None = None) -> Tensor:
    # torch.softmax / Tensor.softmax order: (input, dim, dtype); F.softmax puts _stacklevel third
    return _softmax_forward("softmax", input, dim, False, dtype)


@op(
    "log_softmax",
    doc="log(softmax(input)) along dim, computed without overflow.",
    node="LogSoftmaxBackward0",
    autocast="float32",
    functional=_functional_log_softmax,
    grads={"input": _softmax_grad(True)},
    fused={"input": _softmax_fused_grad(True)},
)
def log_softmax(input: Tensor, dim: int | None = None, dtype: DType | None = None) -> Tensor:
    return _softmax_forward("log_softmax", input, dim, True, dtype)


# ------------------------------------------------------------------------------------------------
# shared loss plumbing
def _terms_op(name, doc, *, node, grads):
    """The declaration of a loss's unreduced terms: an op of its own (no public form) whose forward
    runs on the backend, its gradients declared once."""
    return op(name, doc=doc, function=False, method=False, node=node, grads=grads)


def _reduction_arg(op, size_average, reduce, reduction):
    """PyTorch's legacy ``size_average``/``reduce`` flags override ``reduction`` when given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction (expected 'none', 'mean' or 'sum')")
    return reduction


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if _in_graph(loss) or not loss.dtype.is_floating_point:  # (the ops refuse an integer mean, as PyTorch)
        return loss.mean() if reduction == "mean" else loss.sum()
    # nothing to record: the backend's reduction itself, where the op's dispatch costs as much as the
    # reduction of a small batch's losses
    return wrap(primitives(loss).reduce(reduction, loss._data, None, False), loss._device)


def _in_graph(t):
    return t.requires_grad or t.grad_fn is not None


def _weighted_reduce(op, loss, weight, reduction):
    """Elementwise losses times an optional same-shape weight; a weighted mean divides by the sum
    of the weights (PyTorch's rule for mse_loss / l1_loss ``weight``)."""
    if weight is None:
        return _reduce(loss, reduction)
    check_tensor(op, "weight", weight)
    if tuple(weight.shape) != tuple(loss.shape):
        raise ShapeError(
            f"{op}: weight of shape {fmt_shape(weight.shape)} must have the input's shape {fmt_shape(loss.shape)}"
        )
    loss = loss * weight
    if reduction == "mean":
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def _check_target_shape(op, input, target):
    # PyTorch only warns when target's shape differs from input's and then broadcasts, which
    # silently turns input (N, 1) against target (N,) into an (N, N) loss. We accept a target that
    # broadcasts to the input's shape (the result is then the same as PyTorch's) and raise for
    # anything that would change the shape of the loss.
    shape = broadcast_shapes(op, tuple(input.shape), tuple(target.shape))
    if shape != tuple(input.shape):
        raise ShapeError(
            f"{op}: target of shape {fmt_shape(target.shape)} does not match input of shape "
            f"{fmt_shape(input.shape)} (broadcasting them would give {fmt_shape(shape)}); "
            "reshape one of them"
        )


def _difference_loss(op, input, target, size_average, reduce, reduction, weight, loss_of_difference):
    """mse_loss's and l1_loss's body: ``loss_of_difference(input - target)``, optionally weighted, reduced."""
    check_tensor(op, "input", input)
    check_tensor(op, "target", target)
    reduction = _reduction_arg(op, size_average, reduce, reduction)
    _check_target_shape(op, input, target)
    return _weighted_reduce(op, loss_of_difference(input - target), weight, reduction)


@op(
    "mse_loss",
    dtypes=FLOATING.of("input", "target"),
    doc="The mean (or sum, or none) of squared differences, optionally weighted.",
    composite=True,
    autocast="float32",
    function=False,
    method=False,
    functional=True,
)
def mse_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    return _difference_loss("mse_loss", input, target, size_average, reduce, reduction, weight, lambda d: d * d)


@op(
    "l1_loss",
    doc="The mean (or sum, or none) of absolute differences, optionally weighted.",
    composite=True,
    autocast="float32",
    function=False,
    method=False,
    functional=True,
)
def l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    weight: Tensor | None = None,
) -> Tensor:
    return _difference_loss("l1_loss", input, target, size_average, reduce, reduction, weight, _abs)


# ------------------------------------------------------------------------------------------------
# softplus, logsigmoid, binary_cross_entropy_with_logits
def _softplus_grad(grad, scaled, threshold):
    below = where(scaled >= threshold, threshold, scaled)  # (NaN stays NaN)
    return grad * where(scaled > threshold, 1.0, sigmoid(below))


@op(
    "softplus",
    plain="unary",  # (softplus at its default beta and threshold)
    dtypes=FLOATING,
    doc="log(1 + exp(beta * input)) / beta, linear where beta * input > threshold.",
    node="SoftplusBackward0",
    autocast="float32",
    function=False,
    method=False,
    functional=True,
    # at beta * input == threshold, PyTorch's gradient is the sigmoid's and its second-order gradient 0
    # (softplus_double_backward takes beta * input < threshold): the sigmoid reads beta * input below it only
    grads={"input": lambda grad, input, beta, threshold: _softplus_grad(grad, input * beta, threshold)},
)
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    check_float("softplus", "input", input)
    if beta == 1.0 and threshold == 20.0:  # the defaults: one primitive of the same formula
        return _float_unary("softplus", input)
    bx = binary("mul", input, beta)
    # never exponentiates a positive number
    smooth = binary(
        "div", binary("add", unary("log1p", unary("exp", unary("neg", unary("abs", bx)))), unary("relu", bx)), beta
    )
    return select(binary("gt", bx, threshold), input, smooth)


@op(
    "logsigmoid",
    plain="unary",
    dtypes=FLOATING,
    doc="log(sigmoid(input)), exact for very negative input.",
    node="LogSigmoidBackward0",
    function=False,
    method=False,
    functional=True,
    grads={"input": lambda grad, input: grad * sigmoid(-input)},
)
def logsigmoid(input: Tensor) -> Tensor:
    # min(x, 0) - log1p(exp(-|x|)), one primitive: exact for very negative x
    return _float_unary("logsigmoid", input)


def _softplus_of_negated(bk, x):
    """softplus(-x) = log1p(exp(-|x|)) + relu(-x) of array ``x``: -logsigmoid(x), whose one primitive
    computes min(x, 0) - log1p(exp(-|x|)) (negated exactly: it never exponentiates a positive number)."""
    return bk.unary("neg", bk.unary("logsigmoid", x))


def _bce_logits_input_grad(grad, input, target, pos_weight):
    # PyTorch's: sigmoid(x) (1 + (pw - 1) t) - pw t, or sigmoid(x) - t
    if pos_weight is None:
        return grad * (sigmoid(input) - target)
    return grad * (sigmoid(input) * (1.0 + (pos_weight - 1.0) * target) - pos_weight * target)


def _bce_logits_target_grad(grad, input, pos_weight):
    if pos_weight is None:
        return -grad * input
    return grad * ((pos_weight - 1.0) * softplus(-input, 1.0, math.inf) - input)


@_terms_op(
    "binary_cross_entropy_with_logits_terms",
    "Unreduced binary cross-entropy of sigmoid(input) against target, from logits, with pos_weight.",
    node="BinaryCrossEntropyWithLogitsBackward0",
    grads={
        "input": _bce_logits_input_grad,
        "target": _bce_logits_target_grad,
        "pos_weight": lambda grad, input, target: grad * target * softplus(-input, 1.0, math.inf),
    },
)
def binary_cross_entropy_with_logits_terms(input: Tensor, target: Tensor, pos_weight: Tensor | None) -> Tensor:
    # (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x): the log-sigmoid form, finite for any logit, on
    # the backend (the ops of the formula dispatched six times)
    bk, d, t = primitives(input), result_type(input, target, pos_weight), target._data
    linear = bk.binary("mul", bk.binary("sub", 1.0, t, d), input._data, d)
    smooth = _softplus_of_negated(bk, input._data)
    if pos_weight is not None:
        scale = bk.binary("add", 1.0, bk.binary("mul", bk.binary("sub", pos_weight._data, 1.0, d), t, d), d)
        smooth = bk.binary("mul", scale, smooth, d)
    return wrap(bk.binary("add", linear, smooth, d), input._device)


_bce_with_logits_terms = get("binary_cross_entropy_with_logits_terms").forward  # nothing to record: the forward


@op(
    "binary_cross_entropy_with_logits",
    doc="Binary cross-entropy of sigmoid(input) against target, from logits.",
    composite=True,
    autocast="float32",
    function=False,
    method=False,
    functional=True,
)
def binary_cross_entropy_with_logits(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    pos_weight: Tensor | None = None,
) -> Tensor:
    name = "binary_cross_entropy_with_logits"
    check_float(name, "input", input)
    check_tensor(name, "target", target)
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"{name}: target size {fmt_shape(target.shape)} must be the same as input size {fmt_shape(input.shape)}"
        )
    for what, extra in (("weight", weight), ("pos_weight", pos_weight)):
        if extra is not None:
            check_tensor(name, what, extra)
            if broadcast_shapes(name, tuple(extra.shape), tuple(input.shape)) != tuple(input.shape):
                raise ShapeError(
                    f"{name}: {what} of shape {fmt_shape(extra.shape)} does not broadcast to "
                    f"the input's shape {fmt_shape(input.shape)}"
                )
    loss = _terms(binary_cross_entropy_with_logits_terms, _bce_with_logits_terms, input, target, pos_weight)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


# ------------------------------------------------------------------------------------------------
# cross_entropy and nll_loss
def _per_sample_shape(input):
    """The shape of class-index targets and of unreduced losses: the input's without its class dim."""
    return () if input.ndim == 1 else (input.shape[0],) + tuple(input.shape[2:])


def _class_rows(op, input, target, probabilities):
    """``input`` as (rows, C) with the class dim last, and the shape a per-row loss has."""
    if input.ndim == 0:
        raise ShapeError(f"{op}: input must have a class dimension, got a 0-d tensor")
    n_classes = input.shape[0] if input.ndim == 1 else input.shape[1]
    loss_shape = _per_sample_shape(input)
    if probabilities:
        if tuple(target.shape) != tuple(input.shape):
            raise ShapeError(
                f"{op}: class-probability target of shape {fmt_shape(target.shape)} must have "
                f"the input's shape {fmt_shape(input.shape)}"
            )
    elif tuple(target.shape) != loss_shape:
        if input.ndim >= 2 and target.ndim >= 1 and target.shape[0] != input.shape[0]:
            raise ShapeError(
                f"{op}: expected input batch_size ({input.shape[0]}) to match target "
                f"batch_size ({target.shape[0]}); input shape {fmt_shape(input.shape)}, "
                f"target shape {fmt_shape(target.shape)}"
            )
        raise ShapeError(
            f"{op}: expected target of shape {fmt_shape(loss_shape)} for input of shape "
            f"{fmt_shape(input.shape)}, got {fmt_shape(target.shape)}"
        )
    if input.ndim == 1:
        rows = input.reshape(1, n_classes)
    elif input.ndim == 2:
        rows = input
    else:
        rows = input.movedim(1, -1).reshape(-1, n_classes)
    return rows, n_classes, loss_shape


def _target_kind(op, input, target):
    """True for class-probability targets, False for class indices (with the dtype checked)."""
    check_tensor(op, "target", target)
    if target.dtype.is_floating_point:
        if tuple(target.shape) == tuple(input.shape):
            return True
        if input.ndim and tuple(target.shape) == _per_sample_shape(input):
            raise UnsupportedDTypeError(
                f"{op}: expected target of class indices with an integer dtype (int64), got "
                f"{target.dtype}; a floating point target holds class probabilities and must "
                f"have the input's shape {fmt_shape(input.shape)}"
            )
        raise ShapeError(
            f"{op}: floating point (class-probability) target of shape "
            f"{fmt_shape(target.shape)} must have the input's shape {fmt_shape(input.shape)}"
        )
    if target.dtype.category != dt.INTEGER:
        raise DTypeError(f"{op}: expected target of class indices with an integer dtype (int64), got {target.dtype}")
    return False


_F32, _F64, _I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)


def _plain_classes(input, target, weight):
    """Whether a class loss is the common case that the CPU primitives take as it is, with nothing to
    record: float32/float64 (N, C) input of N * C > 0 values, int64 (N,) targets, no class weights or
    (C,) ones of the input's dtype, all on the CPU. Such a call skips the general path's checks and
    reshapes (several times the loss of a small batch); the primitive checks the targets in its pass."""
    if input.__class__ is not _Tensor or target.__class__ is not _Tensor:
        return False
    x, t = input._data, target._data
    if (
        input._device is not CPU
        or target._device is not CPU
        or x.ndim != 2
        or not x.size
        or t.shape != x.shape[:1]
        or t.dtype != _I64
        or not (x.dtype == _F32 or x.dtype == _F64)
    ):
        return False
    if weight is not None and (
        weight.__class__ is not _Tensor
        or weight._device is not CPU
        or weight._data.dtype != x.dtype
        or weight._data.shape != x.shape[1:]
        or needs_grad(weight)
    ):
        return False
    return not needs_grad(input)


def _plain_nll_loss(op, logp, target, weight, ignore_index, reduction):
    """nll_loss's primitive over ``_plain_classes`` operands -> the loss tensor."""
    try:
        loss = primitives(logp).nll_loss(
            logp._data, target._data, None if weight is None else weight._data, ignore_index, reduction
        )[0]
    except IndexError:
        _name_targets(op, logp, target, ignore_index)
        raise
    return wrap(loss, logp._device)


def _name_targets(op, input, target, ignore_index):
    """After a CPU class loss primitive (which checks the targets in its pass) raised IndexError: the
    target out of range, named by ``op``."""
    _check_class_targets(op, target, input.shape[1], ignore_index)


def _target_rows(target):
    """The class indices as one int64 row: the target itself where it already is one (a reshape and a
    conversion that change nothing still dispatch two ops on every loss call)."""
    rows = target if target.ndim == 1 else target.reshape(-1)
    return rows if rows.dtype is dt.int64 else rows.to(dtype=dt.int64)


def _check_class_weight(op, weight, n_classes):
    if weight is None:
        return
    check_float(op, "weight", weight)
    if tuple(weight.shape) != (n_classes,):
        raise ShapeError(
            f"{op}: weight tensor should be defined either for all {n_classes} classes or no "
            f"classes but got weight tensor of shape {fmt_shape(weight.shape)}"
        )


_LOWEST, _HIGHEST = np.minimum.reduce, np.maximum.reduce  # (np.min and np.max add a Python layer)


@host_step  # reads the targets: graph capture runs the check again on every replay
def _check_class_targets(op, target, n_classes, ignore_index):
    # the test on a host copy of the targets (the array itself on the CPU): three NumPy calls, where
    # tensor ops would dispatch one primitive each and a replay would pay for them on every step
    targets = primitives(target).to_numpy(target._data)
    if targets.size == 0:
        return
    if 0 <= _LOWEST(targets) and _HIGHEST(targets) < n_classes:  # the common case, in two calls
        return
    outside = (targets < 0) | (targets >= n_classes)
    outside &= targets != ignore_index
    if outside.any():
        bad = int(targets[outside][0])
        raise IndexOutOfRangeError(
            f"{op}: target {bad} is out of bounds for {n_classes} classes (class "
            f"indices must be in [0, {n_classes - 1}] or equal ignore_index="
            f"{ignore_index})"
        )


def _picked_rows(logp, target, weight, ignore_index, label_smoothing):
    """Per-row losses from log-probabilities (rows, C) and class indices (rows,) with optional class
    weights; also the mean's denominator (the summed weights of the rows that count)."""
    n_classes = logp.shape[1]
    valid = target != ignore_index
    safe_target = where(valid, target, 0)
    picked = gather(logp, 1, safe_target.unsqueeze(1)).squeeze(1)
    if weight is None:
        row_weight = valid.to(dtype=logp.dtype)
        loss = -picked
        smooth = -logp.sum(1) if label_smoothing else None
    else:
        row_weight = weight[safe_target] * valid.to(dtype=logp.dtype)
        loss = -picked * weight[safe_target]
        smooth = -(logp * weight).sum(1) if label_smoothing else None
    if label_smoothing:
        loss = (1.0 - label_smoothing) * loss + (label_smoothing / n_classes) * smooth
    return where(valid, loss, 0.0), row_weight.sum()


def _cross_entropy_grad(grad, logits, target, weight, ignore_index, label_smoothing):
    # the composite rule (for create_graph): p * ((1 - ls) w[t] + ls / C * W) - (1 - ls) w[t] onehot - ls / C * w
    n_classes = logits.shape[1]
    valid = target != ignore_index
    safe_target = where(valid, target, 0)
    hit = (arange(n_classes, device=logits.device) == safe_target.unsqueeze(1)).to(dtype=grad.dtype)
    p = softmax(logits.to(dtype=grad.dtype), 1)
    keep, smooth = 1.0 - label_smoothing, label_smoothing / n_classes
    if weight is None:
        rows = p - (hit * keep + smooth)
    else:
        w = weight.to(dtype=grad.dtype)
        at_target = w[safe_target].unsqueeze(1)
        rows = p * (keep * at_target + smooth * w.sum()) - keep * at_target * hit - smooth * w
    return rows * where(valid, grad, 0.0).unsqueeze(1)  # brought back to the logits' dtype by the registry


def _cross_entropy_weight_grad(grad, logits, target, weight, ignore_index, label_smoothing):
    # class weights are differentiable here (PyTorch's are not): d loss_r / d w = -(1 - ls) logp[t] onehot(t)
    # - ls / C logp, composite (weights that require grad are rare; this keeps the (rows, C) log-probabilities)
    n_classes = logits.shape[1]
    valid = target != ignore_index
    safe_target = where(valid, target, 0)
    g = where(valid, grad, 0.0)
    logp = log_softmax(logits.to(dtype=grad.dtype), 1)
    picked = gather(logp, 1, safe_target.unsqueeze(1)).squeeze(1)
    hit = (arange(n_classes, device=logits.device) == safe_target.unsqueeze(1)).to(dtype=grad.dtype)
    dw = _sum(hit * (g * picked).unsqueeze(1), 0) * -(1.0 - label_smoothing)
    if label_smoothing:
        dw = dw - _sum(logp * g.unsqueeze(1), 0) * (label_smoothing / n_classes)
    return dw


def _cross_entropy_fused_grad(grad, logits, stats, target, weight, ignore_index, label_smoothing):
    bk = primitives(grad)
    return wrap(
        bk.classifier_loss_backward(
            dense(logits),
            stats._data,
            target._data,
            None if weight is None else dense(weight),
            dense(grad),
            ignore_index,
            label_smoothing,
        ),
        grad._device,
    )


@op(
    "cross_entropy_rows",
    doc="Per-row cross-entropy losses (float32) of (rows, C) logits against int64 class indices.",
    function=False,
    method=False,
    node="CrossEntropyLossBackward0",
    extra_outputs=("stats",),
    grads={"logits": _cross_entropy_grad, "weight": _cross_entropy_weight_grad},
    fused={"logits": _cross_entropy_fused_grad, "weight": _cross_entropy_weight_grad},
)
def cross_entropy_rows(
    logits: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, label_smoothing: float
) -> tuple[Tensor, Tensor]:
    # The fused classifier (kernels/softmax_loss.cu): one read of each row of the logits in their own
    # dtype gives the loss and the row's (shift, log-sum) statistics, all the backward keeps besides
    # the logits; the backward's one read of the logits writes the gradient in their dtype. No
    # float32 copy and no log-probabilities of the (rows, C) logits exist, even for half logits.
    loss_data, stats_data = primitives(logits).classifier_loss(
        dense(logits), dense(target), None if weight is None else dense(weight), ignore_index, label_smoothing
    )
    return wrap(loss_data, logits._device), wrap(stats_data, logits._device)


@op(
    "cross_entropy",
    doc="The cross-entropy of logits against class indices or class probabilities.",
    composite=True,
    autocast="float32_result",
    function=False,
    method=False,
    functional=True,
)
def cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    name = "cross_entropy"
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    if not label_smoothing and _plain_classes(input, target, weight):
        # nothing records: one log_softmax and nll_loss's one pass (PyTorch's own composition)
        logp = wrap(primitives(input).softmax(input._data, 1, True), input._device)
        return _plain_nll_loss(name, logp, target, weight, ignore_index, reduction)
    check_float(name, "input", input)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{name}: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    probabilities = _target_kind(name, input, target)
    check_same_device(name, input, target, weight)
    rows, n_classes, loss_shape = _class_rows(name, input, target, probabilities)
    _check_class_weight(name, weight, n_classes)
    if probabilities:
        if ignore_index != -100:
            raise ValueError(f"{name}: ignore_index is not supported for class-probability (floating point) targets")
        # under autocast, log_softmax's own policy computes it in float32
        return _soft_cross_entropy(input, target, weight, reduction, label_smoothing, n_classes)
    target_rows = _target_rows(target)
    _check_class_targets(name, target_rows, n_classes, ignore_index)
    if weight is not None and weight.dtype is not dt.float64:
        weight = weight.float()
    losses = cross_entropy_rows(rows, target_rows, weight, ignore_index, label_smoothing)
    if weight is None:
        denominator = _counted_rows(target_rows, ignore_index, losses.dtype)
    else:
        valid = target_rows != ignore_index
        denominator = (weight[where(valid, target_rows, 0)] * valid.to(dtype=weight.dtype)).sum()
    loss = _reduce_rows(losses, denominator, loss_shape, reduction)
    # The losses are float32 (float64 for float64): autocast's float32 result, else the logits' dtype
    # as PyTorch gives it, rounded once after the reduction.
    if loss.dtype is not input.dtype and not autocast_enabled(input.device.type):
        loss = loss.to(dtype=input.dtype)
    return loss


def _soft_cross_entropy(input, target, weight, reduction, label_smoothing, n_classes):
    class_dim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, class_dim)
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    if weight is not None:
        logp = logp * weight.reshape((n_classes,) + (1,) * (input.ndim - class_dim - 1))
    losses = -(target * logp).sum(class_dim)
    return _reduce(losses, reduction)  # the mean is over samples, whatever the weights


def _counted_rows(target, ignore_index, dtype):
    """How many class targets are not ``ignore_index`` (the mean's denominator without weights), in the
    losses' ``dtype``: a comparison, a sum and a cast of the backend's, where the public ops would pay the
    dispatch each (and a float sum over an int64 count takes the division's slow, mixed-dtype path)."""
    bk = primitives(target)
    count = bk.reduce("sum", bk.binary("ne", dense(target), ignore_index, dt.int64), None, False)
    return wrap(bk.astype(count, dtype), target._device)


def _reduce_rows(losses, denominator, loss_shape, reduction):
    if reduction == "none":
        return losses.reshape(loss_shape)
    if reduction == "sum":
        return losses.sum()
    # 0 / 0 = nan when every target is ignored, as in PyTorch
    if _in_graph(losses):
        return losses.sum() / denominator
    # nothing to record: the backend's sum and division, where the two ops' dispatch cost more than
    # the loss of a small batch
    bk = primitives(losses)
    total = bk.reduce("sum", dense(losses), None, False)
    return wrap(bk.binary("div", total, denominator._data, result_type(losses, denominator)), losses._device)


def _nll_grad(grad, logp_shape, logp_dtype, logp_device, target, weight, ignore_index, reduction, total_weight):
    # -w[t] times the loss's gradient (over the total weight for a mean) at each row's target, 0 for
    # ignored rows (as gather's would be) even where the mean of no counted row divides by 0
    valid = target != ignore_index
    safe_target = where(valid, target, 0)
    scale = -grad if reduction != "mean" else -grad / total_weight
    if weight is not None:
        scale = scale * weight[safe_target]
    scale = where(valid, scale, 0.0)
    hit = (arange(logp_shape[1], device=logp_device) == safe_target.unsqueeze(1)).to(dtype=logp_dtype)
    return hit * scale.unsqueeze(1)


@op(
    "nll_loss_reduced",
    doc="nll_loss of (rows, C) log-probabilities against int64 class indices, reduced (and the total weight).",
    function=False,
    method=False,
    node="NllLossBackward0",
    extra_outputs=("total_weight",),
    grads={"logp": _nll_grad},
)
def nll_loss_reduced(
    logp: Tensor, target: Tensor, weight: Tensor | None, ignore_index: int, reduction: str
) -> tuple[Tensor, Tensor]:
    # one primitive, the reduction inside: nll_loss is the loss of every classifier with an explicit
    # log_softmax, and a small batch's loss was a dozen primitive calls
    loss, total_weight = primitives(logp).nll_loss(
        dense(logp), target._data, None if weight is None else dense(weight), ignore_index, reduction
    )
    return wrap(loss, logp._device), wrap(total_weight, logp._device)


_nll_loss_reduced = get("nll_loss_reduced").forward  # nothing to record: the forward alone, not the entry


@op(
    "nll_loss",
    doc="The negative log-likelihood of log-probabilities against class indices.",
    composite=True,
    autocast="float32",
    function=False,
    method=False,
    functional=True,
)
def nll_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "nll_loss"
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    if _plain_classes(input, target, weight):
        return _plain_nll_loss(name, input, target, weight, ignore_index, reduction)
    check_float(name, "input", input)
    check_tensor(name, "target", target)
    if target.dtype.category != dt.INTEGER:
        raise DTypeError(f"{name}: expected target of class indices with an integer dtype (int64), got {target.dtype}")
    check_same_device(name, input, target, weight)
    rows, n_classes, loss_shape = _class_rows(name, input, target, False)
    _check_class_weight(name, weight, n_classes)
    target_rows = _target_rows(target)
    # class weights of another dtype (promoted), or differentiable ones (PyTorch's are not): composed
    composed = weight is not None and (weight.dtype is not input.dtype or needs_grad(weight))
    if composed or input._device.type != "cpu":  # (the CPU's primitive checks the targets in its one pass)
        _check_class_targets(name, target_rows, n_classes, ignore_index)
    if composed:
        losses, denominator = _picked_rows(rows, target_rows, weight, ignore_index, 0.0)
        return _reduce_rows(losses, denominator, loss_shape, reduction)
    if needs_grad(rows):
        loss = nll_loss_reduced(rows, target_rows, weight, ignore_index, reduction)
    else:
        loss = _nll_loss_reduced(rows, target_rows, weight, ignore_index, reduction)[0]
    return loss.reshape(loss_shape) if reduction == "none" and tuple(loss.shape) != loss_shape else loss


# ------------------------------------------------------------------------------------------------
# smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div
def _check_pair(op, input, target):
    check_float(op, "input", input)
    check_tensor(op, "target", target)
    check_same_device(op, input, target)
    _check_target_shape(op, input, target)


def _smooth_l1_grad(grad, input, target, beta, huber):
    # the slope of the quadratic part, limited to the linear part's: d / beta in [-1, 1] (huber: d in
    # [-delta, delta])
    d = input - target
    return grad * (clamp(d, -beta, beta) if huber else clamp(d / beta, -1.0, 1.0))


@_terms_op(
    "smooth_l1_terms",
    "Unreduced smooth L1 (or, with huber, Huber) losses of input against target, beta > 0.",
    node=lambda input, target, beta, huber: "HuberLossBackward0" if huber else "SmoothL1LossBackward0",
    grads={
        "input": _smooth_l1_grad,
        "target": lambda grad, input, target, beta, huber: -_smooth_l1_grad(grad, input, target, beta, huber),
    },
)
def smooth_l1_terms(input: Tensor, target: Tensor, beta: float, huber: bool) -> Tensor:
    # one op over the backend, where the composition dispatched seven ops: |d| = |input - target|, then
    # 0.5 d**2 / beta or |d| - 0.5 beta (huber: 0.5 d**2 or beta (|d| - 0.5 beta)), PyTorch's formulas
    # on the arrays, in the promoted dtype (the tensor helpers' wrapping and promotion around each call
    # cost as much as the calls)
    bk, d = primitives(input), result_type(input, target)
    diff = bk.unary("abs", bk.binary("sub", input._data, target._data, d))
    square = bk.binary("mul", bk.binary("mul", 0.5 if huber else 0.5 / beta, diff, d), diff, d)
    linear = bk.binary("sub", diff, 0.5 * beta, d)
    if huber:
        linear = bk.binary("mul", beta, linear, d)
    return wrap(bk.where(bk.binary("lt", diff, beta, d), square, linear, d), input._device)


_smooth_l1_terms = get("smooth_l1_terms").forward  # nothing to record: the forward alone, not the entry


def _host_loss(loss, input, target, param, reduction, batch=None):
    """``loss`` of CPU tensors ``input`` and ``target`` (neither recording) reduced as ``reduction`` says
    (``batch``: batchmean's divisor), in one call of the host module (backends/cpu/softmax_loss.py's
    pointwise_loss: its terms and reduction, where the terms' primitives and the reduction were eight
    NumPy calls); None where it does not compute it (another dtype or device, a target to broadcast, a
    binary cross-entropy value outside [0, 1]): the terms' path then, which names what is wrong."""
    # (primitives(input) is the CPU backend itself: a CPU tensor, no hook watching primitives, which
    # graph capture records and the profiler counts)
    if primitives(input) is not _cpu or target._device is not CPU or needs_grad(input, target):
        return None
    x = input._data
    if reduction != "none" and not x.size:
        return None  # (an empty sum or mean: the reduction's own 0 or NaN)
    divisor = 0 if reduction == "none" else 1 if reduction == "sum" else batch or x.size
    out = _host_pointwise_loss(loss, x, target._data, param, divisor)
    return None if out is None else wrap(out, CPU)


def _terms(op, forward, *args):
    """A loss's terms: the op ``op`` where a tensor of ``args`` records, else its ``forward`` alone."""
    return (op if needs_grad(*args) else forward)(*args)


@op(
    "smooth_l1_loss",
    doc="0.5 d**2 / beta where |d| < beta, |d| - 0.5 beta elsewhere (d = input - target).",
    composite=True,
    autocast="float32",
    function=False,
    method=False,
    functional=True,
)
def smooth_l1_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    name = "smooth_l1_loss"
    _check_pair(name, input, target)
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    if beta < 0:
        raise ValueError(f"{name}: beta must be non-negative, got {beta}")
    if beta == 0:  # the quadratic part vanishes: the L1 loss (and no division by beta)
        return _reduce(_abs(input - target), reduction)
    fused = _host_loss(name, input, target, beta, reduction)
    if fused is not None:
        return fused
    return _reduce(_terms(smooth_l1_terms, _smooth_l1_terms, input, target, beta, False), reduction)


@op(
    "huber_loss",
    doc="0.5 d**2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere (d = input - target).",
    composite=True,
    autocast="float32",
    function=False,
    method=False,
    functional=True,
)
def huber_loss(
    input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0, weight: Tensor | None = None
) -> Tensor:
    name = "huber_loss"
    _check_pair(name, input, target)
    reduction = _reduction_arg(name, None, None, reduction)
    if delta <= 0:
        raise ValueError(f"{name}: delta must be positive, got {delta}")
    if weight is None:
        fused = _host_loss(name, input, target, delta, reduction)
        if fused is not None:
            return fused
    terms = _terms(smooth_l1_terms, _smooth_l1_terms, input, target, delta, True)
    return _weighted_reduce(name, terms, weight, reduction)


def _bce_input_grad(grad, input, target):
    # the analytic gradient, finite at probabilities of exactly 0 or 1 (a composite log would give nan)
    return grad * (input - target) / clamp(input * (1.0 - input), min=1e-12)


def _bce_target_grad(grad, input):
    # -logit(input), unclamped, as PyTorch's binary_cross_entropy_target_backward: +-inf at 0 and 1
    return grad * (log1p(-input) - log(input))


@op(
    "binary_cross_entropy_terms",
    doc="Unreduced binary cross-entropy of probabilities against targets.",
    function=False,
    method=False,
    node="BinaryCrossEntropyBackward0",
    grads={"input": _bce_input_grad, "target": _bce_target_grad},
)
def binary_cross_entropy_terms(input: Tensor, target: Tensor) -> Tensor:
    # PyTorch's (t - 1) * log(1 - p) - t * log(p), each log limited from below at -100 (its bound that
    # keeps the loss of a saturated probability finite); on the arrays, target in input's dtype (the
    # composite casts it): the tensor helpers' wrapping and promotion around each of these nine calls
    # cost as much as the calls
    bk, d, x, t = primitives(input), input.dtype, input._data, target._data
    log_p = bk.clamp(bk.unary("log", x), -100.0, None)
    log_not_p = bk.clamp(bk.unary("log1p", bk.unary("neg", x)), -100.0, None)
    at_zero = bk.binary("mul", bk.binary("sub", t, 1.0, d), log_not_p, d)
    return wrap(bk.binary("sub", at_zero, bk.binary("mul", t, log_p, d), d), input._device)


_binary_cross_entropy_terms = get("binary_cross_entropy_terms").forward  # nothing to record: the forward alone


def _outside_unit_interval(t):
    """Whether a value of ``t`` lies outside [0, 1], a NaN included (PyTorch's check is ``0 <= v <= 1``,
    which a NaN fails; the extremes of a tensor holding a NaN are NaN)."""
    if not t.numel():
        return False
    lowest, largest = host_extremes(t)
    return not (lowest >= 0 and largest <= 1)


@op(
    "binary_cross_entropy",
    doc="Binary cross-entropy of probabilities in [0, 1] against targets.",
    composite=True,
    autocast="float32",
    function=False,
    method=False,
    functional=True,
)
def binary_cross_entropy(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "binary_cross_entropy"
    check_float(name, "input", input)
    check_tensor(name, "target", target)
    check_same_device(name, input, target, weight)
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(
            f"{name}: target size {fmt_shape(target.shape)} must be the same as input size {fmt_shape(input.shape)}"
        )
    if weight is None:  # (the host's terms check both ranges in the same call)
        fused = _host_loss(name, input, target, 0.0, reduction)
        if fused is not None:
            return fused
    # (the extremes in one read of the host: comparisons, an or and an any as ops dispatched eight times)
    if _outside_unit_interval(input):
        raise ValueError(
            f"{name}: all elements of input (shape {fmt_shape(input.shape)}) should be between "
            "0 and 1 (pass logits to binary_cross_entropy_with_logits instead)"
        )
    if _outside_unit_interval(target):
        raise ValueError(f"{name}: all elements of target (shape {fmt_shape(target.shape)}) should be between 0 and 1")
    if target.dtype is not input.dtype:
        target = target.to(dtype=input.dtype)
    loss = _terms(binary_cross_entropy_terms, _binary_cross_entropy_terms, input, target)
    if weight is not None:
        check_tensor(name, "weight", weight)
        if broadcast_shapes(name, tuple(weight.shape), tuple(input.shape)) != tuple(input.shape):
            raise ShapeError(
                f"{name}: weight of shape {fmt_shape(weight.shape)} does not broadcast to the "
                f"input's shape {fmt_shape(input.shape)}"
            )
        loss = loss * weight
    return _reduce(loss, reduction)


def _kl_div_target_grad(grad, input, target, log_target):
    if log_target:  # d/dt exp(t) (t - x)
        return grad * exp(target) * (target - input + 1.0)
    # d/dt t log(t) - t x, with the composite's 0 for t log t where t = 0 (a negative t's log: NaN, as
    # PyTorch's; at t = 0 PyTorch's xlogy backward reads 0/0, a NaN, where this keeps the limit from above)
    nonzero = target != 0
    return grad * (where(nonzero, target, 1.0).log() + nonzero.to(dtype=grad.dtype) - input)


@_terms_op(
    "kl_div_terms",
    "Unreduced KL divergence terms of target from log-probabilities input (log_target: target as logs).",
    node="SubBackward0",
    grads={
        "input": lambda grad, target, log_target: -grad * (exp(target) if log_target else target),
        "target": _kl_div_target_grad,
    },
)
def kl_div_terms(input: Tensor, target: Tensor, log_target: bool) -> Tensor:
    # on the backend, where the formula's ops dispatched five or six times
    if target.dtype is input.dtype:  # (the common case: on the arrays, without each step's wrapping)
        bk, d, x, t = primitives(input), input.dtype, input._data, target._data
        if log_target:
            return wrap(bk.binary("mul", bk.unary("exp", t), bk.binary("sub", t, x, d), d), input._device)
        logged = bk.unary("log", bk.where(bk.binary("ne", t, 0.0, d), t, 1.0, d))
        return wrap(bk.binary("sub", bk.binary("mul", t, logged, d), bk.binary("mul", t, x, d), d), input._device)
    if log_target:
        return binary("mul", unary("exp", target), binary("sub", target, input))
    # t (log t - input), with 0 where t = 0 (xlogy: a negative t's log is NaN, as PyTorch's); the log
    # reads 1 there so no -inf is made
    logged = unary("log", select(binary("ne", target, 0.0), target, 1.0))
    return binary("sub", binary("mul", target, logged), binary("mul", target, input))


_kl_div_terms = get("kl_div_terms").forward  # nothing to record: the forward alone


@op(
    "kl_div",
    doc="Kullback-Leibler divergence of target from input (input holds log-probabilities).",
    composite=True,
    autocast="float32",
    function=False,
    method=False,
    functional=True,
)
def kl_div(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    name = "kl_div"
    _check_pair(name, input, target)
    if reduction != "batchmean":
        reduction = _reduction_arg(name, size_average, reduce, reduction)
    batch = input.shape[0] if reduction == "batchmean" and input.ndim else None
    loss_name = "kl_div_log_target" if log_target else name
    fused = _host_loss(
        loss_name, input, target, 0.0, "sum" if batch is None and reduction == "batchmean" else reduction, batch
    )
    if fused is not None:
        return fused
    loss = _terms(kl_div_terms, _kl_div_terms, input, target, log_target)
    if reduction == "batchmean":
        total = _reduce(loss, "sum")
        if not input.ndim:
            return total
        return total / input.shape[0] if _in_graph(total) else binary("div", total, input.shape[0])
    return _reduce(loss, reduction)


# ------------------------------------------------------------------------------------------------
# More of PyTorch's activations and losses (issue 15), composed of the ops above
@op("softmin", doc="softmax(-input) along dim.", composite=True, function=False, method=False, functional=True)
def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: DType | None = None) -> Tensor:
    check_tensor("softmin", "input", input)
    return softmax(-input, dim, dtype)


def _mish_grad(grad, input):
    # PyTorch's: tanh(sp) + input * sigmoid(input) * (1 - tanh(sp)^2), sp = softplus(input) unthresholded
    t = softplus(input, 1.0, math.inf).tanh()
    return grad * (t + input * sigmoid(input) * (1 - t * t))


@op(
    "mish",
    plain="unary",
    dtypes=FLOATING,
    doc="input * tanh(softplus(input)).",
    node="MishBackward0",
    method=False,
    inplace=True,
    functional="inplace",
    grads={"input": _mish_grad},
)
def mish(input: Tensor) -> Tensor:
    check_float("mish", "input", input)
    return _float_unary("mish", input)


def _glu_grad(grad, input, dim):
    # d/da = sigmoid(b), d/db = a * sigmoid(b) * (1 - sigmoid(b)), side by side along dim
    axis = wrap_dim(dim, input.ndim, "glu")
    a, b = input.chunk(2, axis)
    gate = sigmoid(b)
    return cat([grad * gate, grad * a * gate * (1 - gate)], axis)


@op(
    "glu",
    dtypes=FLOATING,
    doc="a * sigmoid(b) for the halves a, b of input along dim.",
    node="GluBackward0",
    method=False,
    functional=True,
    grads={"input": _glu_grad},
)
def glu(input: Tensor, dim: int = -1) -> Tensor:
    check_tensor("glu", "input", input)
    x = input._data
    shape = x.shape
    if not shape:
        raise ShapeError("glu: does not support scalars (0-d tensors)")
    axis = wrap_dim(dim, len(shape), "glu")
    if shape[axis] % 2:
        raise ShapeError(
            f"glu: halving dimension must be even, but dimension {axis} of input {fmt_shape(shape)} "
            f"is size {shape[axis]}"
        )
    # the halves as the backend's slices and one sigmoid and one product: the chunk, slices, sigmoid and
    # product as ops dispatched five times (the product reads the first half where it is)
    bk, half = primitives(input), shape[axis] // 2
    if bk is _cpu:  # (the same values in one call of the host module, where it takes the array)
        fused = _host_glu(cast_type("CPUArray", x), axis)
        if fused is not None:
            return wrap(fused, CPU)
    lead = (slice(None),) * axis
    gate = bk.unary("sigmoid", bk.contiguous(bk.slice(x, lead + (slice(half, None),))))
    return wrap(bk.binary("mul", bk.slice(x, lead + (slice(0, half),)), gate, input.dtype), input._device)


def _loss_function(name, doc):
    return op(name, doc=doc, composite=True, autocast="float32", function=False, method=False, functional=True)


def _check_same_shapes(name, **tensors):
    for key, t in tensors.items():
        check_tensor(name, key, t)
    shapes = {key: tuple(t.shape) for key, t in tensors.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{key} {fmt_shape(s)}" for key, s in shapes.items())
        raise ShapeError(f"{name}: expected inputs of one shape, got {listed}")


@_loss_function("margin_ranking_loss", "max(0, -target * (input1 - input2) + margin), reduced.")
def margin_ranking_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "margin_ranking_loss"
    _check_same_shapes(name, input1=input1, input2=input2, target=target)
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    return _reduce(clamp(-target * (input1 - input2) + margin, min=0.0), reduction)


def _hinge_embedding_grad(grad, input, target, margin):
    # 1 where the input term counts, minus 1 where the margin term is active (clamp's >= 0 passes)
    active = (target != 1) & (margin - input >= 0)
    return grad * ((target != -1).to(dtype=grad.dtype) - active.to(dtype=grad.dtype))


@_terms_op(
    "hinge_embedding_terms",
    "Unreduced hinge embedding losses: max(0, margin - input) where target != 1, plus input where != -1.",
    node="AddBackward0",
    grads={"input": _hinge_embedding_grad},
)
def hinge_embedding_terms(input: Tensor, target: Tensor, margin: float) -> Tensor:
    # PyTorch's sum of two masked terms (a target other than 1 and -1 counts in both), on the backend:
    # the comparisons, clamp, wheres and sum as ops dispatched seven times
    shortfall = binary("sub", margin, input)
    shortfall = wrap(primitives(shortfall).clamp(shortfall._data, 0.0, None), shortfall._device)
    margin_part = select(binary("ne", target, 1.0), shortfall, 0.0)
    return binary("add", margin_part, select(binary("ne", target, -1.0), input, 0.0))


_hinge_embedding_terms = get("hinge_embedding_terms").forward  # nothing to record: the forward alone


@_loss_function("hinge_embedding_loss", "input where target is 1, max(0, margin - input) where it is -1, reduced.")
def hinge_embedding_loss(
    input: Tensor,
    target: Tensor,
    margin: float = 1.0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "hinge_embedding_loss"
    _check_pair(name, input, target)
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    return _reduce(_terms(hinge_embedding_terms, _hinge_embedding_terms, input, target, float(margin)), reduction)


def _soft_margin_grad(grad, input, target, of):
    # d/dx softplus(-t x) = -t sigmoid(-t x) (and -x sigmoid(-t x) for t)
    return grad * -of * sigmoid(-(target * input))


@_terms_op(
    "soft_margin_terms",
    "Unreduced soft margin losses log(1 + exp(-target * input)).",
    node="SoftMarginLossBackward0",
    grads={
        "input": lambda grad, input, target: _soft_margin_grad(grad, input, target, target),
        "target": lambda grad, input, target: _soft_margin_grad(grad, input, target, input),
    },
)
def soft_margin_terms(input: Tensor, target: Tensor) -> Tensor:
    # softplus(-t x) on the backend, where its ops dispatched three times
    bk = primitives(input)
    product = bk.binary("mul", target._data, input._data, result_type(target, input))
    return wrap(_softplus_of_negated(bk, product), input._device)


_soft_margin_terms = get("soft_margin_terms").forward  # nothing to record: the forward alone


@_loss_function("soft_margin_loss", "log(1 + exp(-target * input)), reduced.")
def soft_margin_loss(
    input: Tensor,
    target: Tensor,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "soft_margin_loss"
    _check_pair(name, input, target)
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    return _reduce(_terms(soft_margin_terms, _soft_margin_terms, input, target), reduction)


@_loss_function(
    "multilabel_soft_margin_loss",
    "The mean over classes of the binary logistic losses of input against 0/1 target, reduced.",
)
def multilabel_soft_margin_loss(
    input: Tensor,
    target: Tensor,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "multilabel_soft_margin_loss"
    _check_pair(name, input, target)
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        check_tensor(name, "weight", weight)
        loss = loss * weight
    axis = max(input.ndim - 1, 0)
    return _reduce(loss.sum(axis) / max(input.shape[axis] if input.ndim else 1, 1), reduction)


@_terms_op(
    "poisson_nll_terms",
    "Unreduced Poisson negative log likelihoods exp(input) - target * input of log rates input.",
    node="SubBackward0",
    grads={
        "input": lambda grad, input, target: grad * (exp(input) - target),
        "target": lambda grad, input: -grad * input,
    },
)
def poisson_nll_terms(input: Tensor, target: Tensor) -> Tensor:
    # on the backend: the exp, product and difference as ops dispatched three times
    return binary("sub", unary("exp", input), binary("mul", target, input))


_poisson_nll_terms = get("poisson_nll_terms").forward  # nothing to record: the forward alone


@_loss_function("poisson_nll_loss", "The Poisson negative log likelihood of target given rate input (or log rate).")
def poisson_nll_loss(
    input: Tensor,
    target: Tensor,
    log_input: bool = True,
    full: bool = False,
    size_average: bool | None = None,
    eps: float = 1e-8,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "poisson_nll_loss"
    _check_pair(name, input, target)
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    if log_input:
        loss = _terms(poisson_nll_terms, _poisson_nll_terms, input, target)
    else:
        loss = input - target * log(input + eps)
    if full:  # Stirling's term target log target - target + log(2 pi target) / 2, where target > 1
        safe = where(target > 1, target, 1.0)
        stirling = safe * log(safe) - safe + 0.5 * log(2 * math.pi * safe)
        loss = loss + where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


@_loss_function("gaussian_nll_loss", "The Gaussian negative log likelihood of target given mean input and var.")
def gaussian_nll_loss(
    input: Tensor, target: Tensor, var: Tensor | float, full: bool = False, eps: float = 1e-6, reduction: str = "mean"
) -> Tensor:
    name = "gaussian_nll_loss"
    _check_pair(name, input, target)
    reduction = _reduction_arg(name, None, None, reduction)
    var = var if has_shape(var) else binary("add", input.detach() * 0, float(var))
    shape, var_shape = tuple(input.shape), tuple(var.shape)
    if var_shape != shape:
        if var_shape == shape[:-1]:  # one variance per sample of a multivariate input
            var = var.unsqueeze(-1)
        elif not (var_shape[:-1] == shape[:-1] and var_shape[-1:] == (1,)):  # else homoscedastic
            raise ShapeError(f"{name}: var of shape {fmt_shape(var_shape)} does not fit input {fmt_shape(shape)}")
    if bool((var < 0).any()):
        raise ValueError(f"{name}: var has negative entry/entries")
    # PyTorch clamps a copy of var at eps outside the graph: the gradient passes as if unclamped
    var = var + (clamp(var, min=eps) - var).detach()
    loss = 0.5 * (log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


@_loss_function("cosine_embedding_loss", "1 - cos(x1, x2) where target is 1, max(0, cos - margin) where -1.")
def cosine_embedding_loss(
    input1: Tensor,
    input2: Tensor,
    target: Tensor,
    margin: float = 0.0,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "cosine_embedding_loss"
    _check_same_shapes(name, input1=input1, input2=input2)
    check_tensor(name, "target", target)
    if input1.ndim not in (1, 2) or tuple(target.shape) != tuple(input1.shape[:-1]):
        raise ShapeError(
            f"{name}: expected inputs (N, D) or (D,) and target (N,) or (), got inputs {fmt_shape(input1.shape)} "
            f"and target {fmt_shape(target.shape)}"
        )
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    eps = 1e-12  # PyTorch's: added to each squared magnitude
    if not needs_grad(input1, input2):
        return _reduce(_cosine_embedding_terms(input1, input2, target, float(margin), eps), reduction)
    product = _sum(input1 * input2, -1)
    cos = product / ((_sum(input1 * input1, -1) + eps) * (_sum(input2 * input2, -1) + eps)).sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, clamp(cos - margin, min=0.0), 0.0)
    return _reduce(loss, reduction)


def _cosine_embedding_terms(input1, input2, target, margin, eps):
    """cosine_embedding_loss's unreduced terms where nothing records: the formula below on the backend's
    arrays (a dozen calls where its ops dispatched as many times)."""
    bk, d, a, b = primitives(input1), result_type(input1, input2), input1._data, input2._data
    axis = (a.ndim - 1,)

    def total(u, v):
        return bk.reduce("sum", bk.binary("mul", u, v, d), axis, False)

    norms = bk.binary("mul", bk.binary("add", total(a, a), eps, d), bk.binary("add", total(b, b), eps, d), d)
    cos = bk.binary("div", total(a, b), bk.unary("sqrt", norms), d)
    t, td = target._data, target.dtype
    similar = bk.where(bk.binary("eq", t, 1, td), bk.binary("sub", 1.0, cos, d), 0.0, d)
    apart = bk.where(bk.binary("eq", t, -1, td), bk.clamp(bk.binary("sub", cos, margin, d), 0.0, None), 0.0, d)
    return wrap(bk.binary("add", similar, apart, d), input1._device)


def _triplet_hinge(d_positive, d_negative, margin):
    """max(0, margin + d_positive - d_negative): on the arrays where nothing records (the three ops'
    dispatch costs more than the arithmetic)."""
    if needs_grad(d_positive, d_negative):
        return clamp(margin + d_positive - d_negative, min=0.0)
    bk, d = primitives(d_positive), result_type(d_positive, d_negative)
    total = bk.binary("sub", bk.binary("add", d_positive._data, float(margin), d), d_negative._data, d)
    return wrap(bk.clamp(total, 0.0, None), d_positive._device)


@_loss_function("triplet_margin_loss", "max(0, d(anchor, positive) - d(anchor, negative) + margin), reduced.")
def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2,
    eps: float = 1e-6,
    swap: bool = False,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "triplet_margin_loss"
    _check_same_shapes(name, anchor=anchor, positive=positive, negative=negative)
    if anchor.ndim not in (1, 2):
        raise ShapeError(f"{name}: expected 1-d or 2-d inputs, got shape {fmt_shape(anchor.shape)}")
    if margin <= 0:
        raise ValueError(f"{name}: margin must be greater than 0, got {margin}")
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    d_positive = pairwise_distance(anchor, positive, p, eps)
    d_negative = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_negative = minimum(d_negative, pairwise_distance(positive, negative, p, eps))
    return _reduce(_triplet_hinge(d_positive, d_negative, margin), reduction)


def _multi_margin_grad(grad, rows, labels, p, margin, weight, reduction):
    """d/dx_j of mean_{j != y} w_y * max(0, margin - x_y + x_j) ** p: each active class j's term
    (1, or 2 * its hinge for p = 2), and minus their sum at the target's own class; times the loss's
    gradient (one per row, or one for a sum, over the rows for a mean)."""
    n_rows, n_classes = rows.shape
    hinge = margin - gather(rows, 1, labels) + rows
    classes = arange(n_classes, device=rows.device).unsqueeze(0)
    active = (hinge > 0) & (classes != labels)
    terms = where(active, hinge * 2.0 if p == 2 else 1.0, 0.0)
    scale = grad.reshape(-1, 1) / (n_classes * n_rows if reduction == "mean" else n_classes)
    if weight is not None:
        scale = scale * gather(weight, 0, labels.reshape(-1)).unsqueeze(1)
    terms = terms * scale
    return terms - where(classes == labels, terms.sum(1, keepdim=True), 0.0)


@op(
    "multi_margin_loss_reduced",
    doc="multi_margin_loss of (rows, C) scores against (rows, 1) int64 class indices, reduced.",
    function=False,
    method=False,
    node="MultiMarginLossBackward0",
    grads={"rows": _multi_margin_grad},
)
def multi_margin_loss_reduced(
    rows: Tensor, labels: Tensor, p: int, margin: float, weight: Tensor | None, reduction: str
) -> Tensor:
    # one primitive, the reduction inside: the composition dispatched fifteen public ops per call, and
    # its primitives a dozen calls
    n = rows.shape[0]
    bk = primitives(rows)
    loss = bk.multi_margin_loss(
        dense(rows), bk.view(dense(labels), (n,)), p, margin, None if weight is None else dense(weight), reduction
    )
    return wrap(loss, rows._device)


_multi_margin_loss_reduced = get("multi_margin_loss_reduced").forward  # nothing to record: the forward alone


@_loss_function("multi_margin_loss", "The mean over classes of max(0, margin - x[y] + x[j]) ** p for j != y, reduced.")
def multi_margin_loss(
    input: Tensor,
    target: Tensor,
    p: int = 1,
    margin: float = 1.0,
    weight: Tensor | None = None,
    size_average: bool | None = None,
    reduce: bool | None = None,
    reduction: str = "mean",
) -> Tensor:
    name = "multi_margin_loss"
    if (p == 1 or p == 2) and p.__class__ is int and _plain_classes(input, target, weight):
        reduction = _reduction_arg(name, size_average, reduce, reduction)
        w = None if weight is None else weight._data
        try:
            loss = primitives(input).multi_margin_loss(input._data, target._data, p, float(margin), w, reduction)
        except IndexError:
            _name_targets(name, input, target, None)
            raise
        return wrap(loss, input._device)
    check_float(name, "input", input)
    check_tensor(name, "target", target)
    if p not in (1, 2):
        raise ValueError(f"{name}: only p == 1 and p == 2 are supported, got {p}")
    rows = input.reshape(1, -1) if input.ndim <= 1 else input
    if rows.ndim != 2 or target.numel() != rows.shape[0] or target.ndim > 1:
        raise ShapeError(
            f"{name}: expected input (N, C) or (C,) and target (N,) or (), got {fmt_shape(input.shape)} and "
            f"{fmt_shape(target.shape)}"
        )
    reduction = _reduction_arg(name, size_average, reduce, reduction)
    n_classes = rows.shape[1]
    target_rows = _target_rows(target)
    if input._device.type != "cpu":  # the CPU's primitive checks the targets in its one pass
        _check_class_targets(name, target_rows, n_classes, None)
    # class indices are never differentiated: the backend's view, not a reshape op's dispatch
    labels = wrap(primitives(target_rows).view(dense(target_rows), (rows.shape[0], 1)), target_rows._device)
    if weight is not None:
        _check_class_weight(name, weight, n_classes)
        check_same_device(name, input, weight)
        weight = weight.to(dtype=input.dtype)
    args = (rows, labels, p, float(margin), weight, reduction)
    loss = multi_margin_loss_reduced(*args) if needs_grad(rows) else _multi_margin_loss_reduced(*args)
    return loss.reshape(()) if input.ndim <= 1 and reduction == "none" else loss


@_loss_function(
    "triplet_margin_with_distance_loss",
    "max(0, d(anchor, positive) - d(anchor, negative) + margin) for a given distance d, reduced.",
)
def triplet_margin_with_distance_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    *,
    distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
    margin: float = 1.0,
    swap: bool = False,
    reduction: str = "mean",
) -> Tensor:
    name = "triplet_margin_with_distance_loss"
    reduction = _reduction_arg(name, None, None, reduction)
    if margin <= 0:
        raise ValueError(f"{name}: margin must be greater than 0, got {margin}")
    distance = distance_function if distance_function is not None else pairwise_distance
    d_positive, d_negative = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_negative = minimum(d_negative, distance(positive, negative))
    return _reduce(_triplet_hinge(d_positive, d_negative, margin), reduction)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("softmax", onnx=lambda w, node, **params: w.softmax(node, **params), c=lambda lower, node: lower.softmax(node))


# The class losses' primitives as standard ONNX operators (``w`` is adcuda/onnx/exporter.py's writer),
# computed as the CPU primitives compute them: in float32 (float64 for float64 operands), the result
# cast to the primitive's dtype. The C export has none: it takes float32 inputs only, never class indices.
def _onnx_dtype(w, value):
    return dt.float64 if w.info(value.value).dtype is dt.float64 else dt.float32


def _onnx_class_rows(w, logp, target, weight, ignore_index, dtype):
    """-> (each row's ``-w[t] * logp[t]``, 0 where ``t == ignore_index``: NegativeLogLikelihoodLoss
    without reduction; the targets (N,) int64; whether each row counts; the class weights or None)."""
    t = w.operand(target, dt.int64)
    weights = None if weight is None else w.operand(weight, dtype)
    operands = [logp, t] + ([] if weights is None else [weights])
    rows = w.emit("NegativeLogLikelihoodLoss", operands, reduction="none", ignore_index=int(ignore_index))
    valid = w.emit("Not", [w.emit("Equal", [t, w.const(int(ignore_index), np.int64)])])
    return rows, t, valid, weights


def _onnx_total_weight(w, t, valid, weights, dtype):
    """The 0-d sum of ``w[t]`` over the rows that count (their count without weights)."""
    if weights is None:
        return w.reduce_over("ReduceSum", w.cast(valid, dtype.numpy), None, False)
    picked = w.emit("Gather", [weights, w.emit("Where", [valid, t, w.const(0, np.int64)])], axis=0)
    return w.reduce_over("ReduceSum", w.emit("Where", [valid, picked, w.const(0, dtype.numpy)]), None, False)


def _onnx_reduced(w, rows, reduction, total, dtype, node):
    """``rows`` reduced ('none', 'sum', or 'mean': over ``total``, a tensor name, or over the rows where
    None) into the node's first result, cast to its dtype."""
    if reduction == "sum" or (reduction == "mean" and total is not None):
        rows = w.reduce_over("ReduceSum", rows, None, False)
        if reduction == "mean":
            rows = w.emit("Div", [rows, total])  # 0 / 0: NaN where no row counts, as the primitive's
    elif reduction == "mean":
        rows = w.reduce_over("ReduceMean", rows, None, False)
    out_dtype = w.np_dtype(node.outputs[0])
    if out_dtype != dtype.numpy:
        w.emit("Cast", [rows], [w.out(node)], to=w.onnx_type(out_dtype))
    else:
        w.emit("Identity", [rows], [w.out(node)])


def _onnx_classifier_loss(w, node, logits, target, weight, ignore_index, label_smoothing):
    """LogSoftmax, NegativeLogLikelihoodLoss; with label smoothing, the weighted row sums of the
    log-probabilities mixed in. The rows' statistics are the backward's: refused as a result."""
    if node.outputs[1] is not None:
        w.refuse("classifier_loss's row statistics (the backward's) as a result")
    dtype = _onnx_dtype(w, logits)
    logp = w.emit("LogSoftmax", [w.operand(logits, dtype)], axis=1)
    rows, _, valid, weights = _onnx_class_rows(w, logp, target, weight, ignore_index, dtype)
    if label_smoothing:
        n_classes = w.static_size(logits.value, [1], "cross_entropy's label smoothing")
        weighted = logp if weights is None else w.emit("Mul", [logp, weights])
        smooth = w.reduce_over("ReduceSum", weighted, [1], False)
        smooth = w.emit("Where", [valid, smooth, w.const(0, dtype.numpy)])
        rows = w.emit(
            "Sub",
            [
                w.emit("Mul", [rows, w.const(1.0 - label_smoothing, dtype.numpy)]),
                w.emit("Mul", [smooth, w.const(label_smoothing / n_classes, dtype.numpy)]),
            ],
        )
    _onnx_reduced(w, rows, "none", None, dtype, node)


def _onnx_nll_loss(w, node, logp, target, weight, ignore_index, reduction):
    dtype = _onnx_dtype(w, logp)
    rows, t, valid, weights = _onnx_class_rows(w, w.operand(logp, dtype), target, weight, ignore_index, dtype)
    total = None
    if reduction == "mean" or node.outputs[1] is not None:
        total = _onnx_total_weight(w, t, valid, weights, dtype)
    if node.outputs[1] is not None:
        w.emit("Cast", [total], [w.out(node, 1)], to=w.onnx_type(w.np_dtype(node.outputs[1])))
    _onnx_reduced(w, rows, reduction, total, dtype, node)


def _onnx_multi_margin_loss(w, node, scores, target, p, margin, weight, reduction):
    """Each row's hinges ``margin - x[t] + x`` (GatherElements), those > 0 (a NaN one adds nothing), squared
    for p = 2, weighted by ``w[t]``, the target's own left out, summed over the C classes / C."""
    dtype = _onnx_dtype(w, scores)
    n_classes = w.static_size(scores.value, [1], "multi_margin_loss")
    x = w.operand(scores, dtype)
    t = w.emit("Unsqueeze", [w.operand(target, dt.int64), w.const([1], np.int64)])  # (N, 1)
    at_target = w.emit("GatherElements", [x, t], axis=1)
    hinge = w.emit("Add", [w.emit("Sub", [w.const(margin, dtype.numpy), at_target]), x])
    zero = w.const(0, dtype.numpy)
    hinge = w.emit("Where", [w.emit("Greater", [hinge, zero]), hinge, zero])
    if p == 2:
        hinge = w.emit("Mul", [hinge, hinge])
    if weight is not None:
        hinge = w.emit("Mul", [hinge, w.emit("Gather", [w.operand(weight, dtype), t], axis=0)])
    own = w.emit("Equal", [t, w.const(np.arange(n_classes), np.int64)])
    hinge = w.emit("Where", [own, zero, hinge])
    rows = w.emit("Div", [w.reduce_over("ReduceSum", hinge, [1], False), w.const(n_classes, dtype.numpy)])
    _onnx_reduced(w, rows, reduction, None, dtype, node)


lowering("classifier_loss", onnx=_onnx_classifier_loss)
lowering("nll_loss", onnx=_onnx_nll_loss)
lowering("multi_margin_loss", onnx=_onnx_multi_margin_loss)
