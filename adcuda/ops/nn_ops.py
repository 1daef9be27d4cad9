"""Functional NN ops: softmax, log_softmax, the losses (cross_entropy, nll_loss, mse_loss, l1_loss,
binary_cross_entropy_with_logits), softplus, logsigmoid, layer_norm, embedding, dropout and
scaled_dot_product_attention.

softmax, cross_entropy, layer_norm and attention run on fused primitives with fused backward
primitives. When a graph of the backward itself is being built (``create_graph=True``), each
backward rule switches to a composite form written with differentiable ops, so second derivatives
work; the fused primitive is only the fast path for plain first-order backward.

Fused primitives get contiguous arrays (``_dense``), so a device backend may assume a row-major
layout.
"""
import math
import numbers

from .. import dtypes as dt
from ..amp.autocast import autocast_inputs
from ..autograd.grad_mode import is_grad_enabled, no_grad
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError, fmt_shape
from ..tensor import Tensor
from ._core import (broadcast_shapes, check_inplace_allowed, check_same_device, commit_inplace, needs_grad,
                    record, sum_to_shape, wrap, wrap_dim)
from .elementwise import abs as _abs, exp, log1p, relu, sigmoid, where
from .indexing import gather, index_put


def _dense(t):
    return t._backend.contiguous(t._data)


def _check_tensor(op, name, x):
    if not isinstance(x, Tensor):
        raise DTypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


def _check_float(op, name, x):
    _check_tensor(op, name, x)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected {name} to be a floating point tensor, got {x.dtype}")


# ------------------------------------------------------------------------------------------------
# softmax / log_softmax
def _softmax_impl(input, dim, log, dtype):
    op = "log_softmax" if log else "softmax"
    if dim is None:
        raise TypeError(f"{op}: dim must be given (implicit dim is deprecated in PyTorch)")
    _check_tensor(op, "input", input)
    (input,) = autocast_inputs(op, input)
    if dtype is not None:
        input = input.to(dtype=dtype)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point tensor, got {input.dtype}")
    if input.ndim == 0:  # a 0-d tensor is one row of one element; keep it in the graph
        return _softmax_impl(input.reshape(1), 0, log, None).reshape(())
    axis = wrap_dim(dim, input.ndim, op)
    if input.numel() == 0:
        return input.clone()
    out = wrap(input._backend.softmax(_dense(input), axis, log), input._device)
    if needs_grad(input):
        def backward(node, g):
            (y,) = node.saved_tensors
            return _softmax_backward(y, g, axis, log)
        record("LogSoftmaxBackward0" if log else "SoftmaxBackward0", out, (input,), backward, saved=(out,))
    return out


def _softmax_backward(y, g, axis, log):
    if is_grad_enabled():  # building a graph of the backward: composite, differentiable form
        from .reduction import sum as _sum
        if log:
            return g - exp(y) * _sum(g, axis, keepdim=True)
        return y * (g - _sum(g * y, axis, keepdim=True))
    return wrap(y._backend.softmax_backward(y._data, _dense(g), axis, log), g._device)


# torch.softmax / Tensor.softmax order: (input, dim, dtype); F.softmax puts _stacklevel third
def softmax(input, dim=None, dtype=None):
    return _softmax_impl(input, dim, False, dtype)


def log_softmax(input, dim=None, dtype=None):
    return _softmax_impl(input, dim, True, dtype)


Tensor.softmax = softmax
Tensor.log_softmax = log_softmax


# ------------------------------------------------------------------------------------------------
# shared loss plumbing
def _reduction_arg(op, size_average, reduce, reduction):
    """PyTorch's legacy ``size_average``/``reduce`` flags override ``reduction`` when given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = ("mean" if size_average else "sum") if reduce else "none"
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{op}: {reduction} is not a valid value for reduction "
                         "(expected 'none', 'mean' or 'sum')")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def _weighted_reduce(op, loss, weight, reduction):
    """Elementwise losses times an optional same-shape weight; a weighted mean divides by the sum
    of the weights (PyTorch's rule for mse_loss / l1_loss ``weight``)."""
    if weight is None:
        return _reduce(loss, reduction)
    _check_tensor(op, "weight", weight)
    if tuple(weight.shape) != tuple(loss.shape):
        raise ShapeError(f"{op}: weight of shape {fmt_shape(weight.shape)} must have the input's shape "
                         f"{fmt_shape(loss.shape)}")
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
        raise ShapeError(f"{op}: target of shape {fmt_shape(target.shape)} does not match input of shape "
                         f"{fmt_shape(input.shape)} (broadcasting them would give {fmt_shape(shape)}); "
                         "reshape one of them")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _check_tensor("mse_loss", "input", input)
    _check_tensor("mse_loss", "target", target)
    input, target, weight = autocast_inputs("mse_loss", input, target, weight)
    reduction = _reduction_arg("mse_loss", size_average, reduce, reduction)
    _check_target_shape("mse_loss", input, target)
    diff = input - target
    return _weighted_reduce("mse_loss", diff * diff, weight, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _check_tensor("l1_loss", "input", input)
    _check_tensor("l1_loss", "target", target)
    input, target, weight = autocast_inputs("l1_loss", input, target, weight)
    reduction = _reduction_arg("l1_loss", size_average, reduce, reduction)
    _check_target_shape("l1_loss", input, target)
    return _weighted_reduce("l1_loss", _abs(input - target), weight, reduction)


# ------------------------------------------------------------------------------------------------
# softplus, logsigmoid, binary_cross_entropy_with_logits
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, linear where beta * x > threshold (as PyTorch)."""
    _check_float("softplus", "input", input)
    (input,) = autocast_inputs("softplus", input)
    with no_grad():
        bx = input * beta
        smooth = (log1p(exp(-_abs(bx))) + relu(bx)) / beta  # never exponentiates a positive number
        out = where(bx > threshold, input, smooth)
    if needs_grad(input):
        def backward(node, g):
            (x,) = node.saved_tensors
            bx = x * beta
            return g * where(bx > threshold, 1.0, sigmoid(bx))
        record("SoftplusBackward0", out, (input,), backward, saved=(input,))
    return out


def logsigmoid(input):
    # log(sigmoid(x)) = -softplus(-x), with no linear cut-off so it stays exact for very negative x
    return -softplus(-input, 1.0, math.inf)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    op = "binary_cross_entropy_with_logits"
    _check_float(op, "input", input)
    input, target, weight, pos_weight = autocast_inputs(op, input, target, weight, pos_weight)
    _check_tensor(op, "target", target)
    reduction = _reduction_arg(op, size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(f"{op}: target size {fmt_shape(target.shape)} must be the same as input size "
                         f"{fmt_shape(input.shape)}")
    for name, extra in (("weight", weight), ("pos_weight", pos_weight)):
        if extra is not None:
            _check_tensor(op, name, extra)
            if broadcast_shapes(op, tuple(extra.shape), tuple(input.shape)) != tuple(input.shape):
                raise ShapeError(f"{op}: {name} of shape {fmt_shape(extra.shape)} does not broadcast to "
                                 f"the input's shape {fmt_shape(input.shape)}")
    # (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x): log-sigmoid form, finite for any logit
    log_weight = 1.0 if pos_weight is None else 1.0 + (pos_weight - 1.0) * target
    loss = (1.0 - target) * input + log_weight * softplus(-input, 1.0, math.inf)
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
            raise ShapeError(f"{op}: class-probability target of shape {fmt_shape(target.shape)} must have "
                             f"the input's shape {fmt_shape(input.shape)}")
    elif tuple(target.shape) != loss_shape:
        if input.ndim >= 2 and target.ndim >= 1 and target.shape[0] != input.shape[0]:
            raise ShapeError(f"{op}: expected input batch_size ({input.shape[0]}) to match target "
                             f"batch_size ({target.shape[0]}); input shape {fmt_shape(input.shape)}, "
                             f"target shape {fmt_shape(target.shape)}")
        raise ShapeError(f"{op}: expected target of shape {fmt_shape(loss_shape)} for input of shape "
                         f"{fmt_shape(input.shape)}, got {fmt_shape(target.shape)}")
    if input.ndim == 1:
        rows = input.reshape(1, n_classes)
    elif input.ndim == 2:
        rows = input
    else:
        rows = input.movedim(1, -1).reshape(-1, n_classes)
    return rows, n_classes, loss_shape


def _target_kind(op, input, target):
    """True for class-probability targets, False for class indices (with the dtype checked)."""
    _check_tensor(op, "target", target)
    if target.dtype.is_floating_point:
        if tuple(target.shape) == tuple(input.shape):
            return True
        if input.ndim and tuple(target.shape) == _per_sample_shape(input):
            raise DTypeError(f"{op}: expected target of class indices with an integer dtype (int64), got "
                             f"{target.dtype}; a floating point target holds class probabilities and must "
                             f"have the input's shape {fmt_shape(input.shape)}")
        raise ShapeError(f"{op}: floating point (class-probability) target of shape "
                         f"{fmt_shape(target.shape)} must have the input's shape {fmt_shape(input.shape)}")
    if target.dtype.category != dt.INTEGER:
        raise DTypeError(f"{op}: expected target of class indices with an integer dtype (int64), got "
                         f"{target.dtype}")
    return False


def _check_class_weight(op, weight, n_classes):
    if weight is None:
        return
    _check_float(op, "weight", weight)
    if tuple(weight.shape) != (n_classes,):
        raise ShapeError(f"{op}: weight tensor should be defined either for all {n_classes} classes or no "
                         f"classes but got weight tensor of shape {fmt_shape(weight.shape)}")


def _check_class_targets(op, target, n_classes, ignore_index):
    if target.numel() == 0:
        return
    outside = ((target < 0) | (target >= n_classes)) & (target != ignore_index)
    if outside.any().item():
        bad = int(target[outside].reshape(-1)[0].item())
        raise IndexOutOfRangeError(f"{op}: target {bad} is out of bounds for {n_classes} classes (class "
                                   f"indices must be in [0, {n_classes - 1}] or equal ignore_index="
                                   f"{ignore_index})")


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


def _fused_cross_entropy_rows(logits, target, ignore_index, label_smoothing):
    bk = logits._backend
    loss_data, lse_data = bk.cross_entropy(_dense(logits), _dense(target), ignore_index, label_smoothing)
    losses = wrap(loss_data, logits._device)
    if needs_grad(logits):
        lse = wrap(lse_data, logits._device)

        def backward(node, g):
            x, row_lse, t = node.saved_tensors
            if is_grad_enabled():
                return _cross_entropy_grad_composite(x, t, g, ignore_index, label_smoothing)
            return wrap(bk.cross_entropy_backward(_dense(x), row_lse._data, t._data, _dense(g), ignore_index,
                                                  label_smoothing), g._device)
        record("CrossEntropyLossBackward0", losses, (logits,), backward, saved=(logits, lse, target))
    return losses


def _cross_entropy_grad_composite(logits, target, g, ignore_index, label_smoothing):
    from ..factories import arange
    n_classes = logits.shape[1]
    valid = target != ignore_index
    hit = (arange(n_classes, device=logits.device) == target.unsqueeze(1)).to(dtype=logits.dtype)
    q = hit * (1.0 - label_smoothing) + label_smoothing / n_classes
    return (softmax(logits, 1) - q) * (g * valid.to(dtype=g.dtype)).unsqueeze(1)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    op = "cross_entropy"
    _check_float(op, "input", input)
    input, target, weight = autocast_inputs(op, input, target, weight)
    reduction = _reduction_arg(op, size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    probabilities = _target_kind(op, input, target)
    check_same_device(op, input, target, weight)
    rows, n_classes, loss_shape = _class_rows(op, input, target, probabilities)
    _check_class_weight(op, weight, n_classes)
    if probabilities:
        if ignore_index != -100:
            raise ValueError(f"{op}: ignore_index is not supported for class-probability (floating point) "
                             "targets")
        return _soft_cross_entropy(input, target, weight, reduction, label_smoothing, n_classes)
    target_rows = target.reshape(-1).to(dtype=dt.int64)
    _check_class_targets(op, target_rows, n_classes, ignore_index)
    if weight is None:
        losses = _fused_cross_entropy_rows(rows, target_rows, ignore_index, label_smoothing)
        denominator = (target_rows != ignore_index).sum()
    else:
        losses, denominator = _picked_rows(log_softmax(rows, 1), target_rows, weight, ignore_index,
                                           label_smoothing)
    return _reduce_rows(losses, denominator, loss_shape, reduction)


def _soft_cross_entropy(input, target, weight, reduction, label_smoothing, n_classes):
    class_dim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, class_dim)
    if label_smoothing:
        target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
    if weight is not None:
        logp = logp * weight.reshape((n_classes,) + (1,) * (input.ndim - class_dim - 1))
    losses = -(target * logp).sum(class_dim)
    return _reduce(losses, reduction)  # the mean is over samples, whatever the weights


def _reduce_rows(losses, denominator, loss_shape, reduction):
    if reduction == "none":
        return losses.reshape(loss_shape)
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / denominator  # 0 / 0 = nan when every target is ignored, as in PyTorch


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    op = "nll_loss"
    _check_float(op, "input", input)
    input, target, weight = autocast_inputs(op, input, target, weight)
    reduction = _reduction_arg(op, size_average, reduce, reduction)
    _check_tensor(op, "target", target)
    if target.dtype.category != dt.INTEGER:
        raise DTypeError(f"{op}: expected target of class indices with an integer dtype (int64), got "
                         f"{target.dtype}")
    check_same_device(op, input, target, weight)
    rows, n_classes, loss_shape = _class_rows(op, input, target, False)
    _check_class_weight(op, weight, n_classes)
    target_rows = target.reshape(-1).to(dtype=dt.int64)
    _check_class_targets(op, target_rows, n_classes, ignore_index)
    losses, denominator = _picked_rows(rows, target_rows, weight, ignore_index, 0.0)
    return _reduce_rows(losses, denominator, loss_shape, reduction)


# ------------------------------------------------------------------------------------------------
# layer_norm
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    op = "layer_norm"
    _check_float(op, "input", input)
    input, weight, bias = autocast_inputs(op, input, weight, bias)
    shape = (int(normalized_shape),) if isinstance(normalized_shape, numbers.Integral) else tuple(
        int(s) for s in normalized_shape)
    n = len(shape)
    if n == 0 or input.ndim < n or tuple(input.shape[input.ndim - n:]) != shape:
        raise ShapeError(f"{op}: given normalized_shape={shape}, expected input with shape "
                         f"(*, {', '.join(str(s) for s in shape)}), but got input of shape "
                         f"{fmt_shape(input.shape)}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            _check_float(op, name, p)
            if tuple(p.shape) != shape:
                raise ShapeError(f"{op}: expected {name} to be of the same shape as normalized_shape, but got "
                                 f"{name} of shape {fmt_shape(p.shape)} and normalized_shape={shape}")
    check_same_device(op, input, weight, bias)
    bk = input._backend
    x = input.contiguous()
    y, mean, rstd = bk.layer_norm(x._data, None if weight is None else _dense(weight),
                                  None if bias is None else _dense(bias), n, eps)
    out = wrap(y, input._device)
    if needs_grad(input, weight, bias):
        has_weight, has_bias = weight is not None, bias is not None

        def backward(node, g):
            x, w, m, r = node.saved_tensors
            if is_grad_enabled():
                return _layer_norm_backward_composite(g, x, w, n, eps, has_bias)
            dx, dw, db = bk.layer_norm_backward(_dense(g), x._data, w._data if has_weight else None,
                                                m._data, r._data, n)
            return (wrap(dx, g._device), wrap(dw, g._device) if has_weight else None,
                    wrap(db, g._device) if has_bias else None)
        record("NativeLayerNormBackward0", out, (input, weight, bias), backward,
               saved=(x, weight, wrap(mean, input._device), wrap(rstd, input._device)))
    return out


def _layer_norm_backward_composite(g, x, w, n, eps, has_bias):
    from .elementwise import rsqrt
    axes = tuple(range(x.ndim - n, x.ndim))
    lead = tuple(range(x.ndim - n))
    centered = x - x.mean(axes, keepdim=True)
    rstd = rsqrt((centered * centered).mean(axes, keepdim=True) + eps)
    xhat = centered * rstd
    gx = g if w is None else g * w
    dx = rstd * (gx - gx.mean(axes, keepdim=True) - xhat * (gx * xhat).mean(axes, keepdim=True))
    dw = None if w is None else ((g * xhat).sum(lead) if lead else g * xhat)
    db = None if not has_bias else (g.sum(lead) if lead else g)
    return dx, dw, db


# ------------------------------------------------------------------------------------------------
# embedding
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    op = "embedding"
    _check_tensor(op, "input", input)
    _check_float(op, "weight", weight)
    if input.dtype.category != dt.INTEGER:
        raise DTypeError(f"{op}: expected indices with an integer dtype (int64 or int32), got {input.dtype}")
    if weight.ndim != 2:
        raise ShapeError(f"{op}: weight must be 2-D (num_embeddings, embedding_dim), got shape "
                         f"{fmt_shape(weight.shape)}")
    if sparse:
        raise NotImplementedError(f"{op}: sparse gradients are not supported by adcuda; use sparse=False")
    check_same_device(op, input, weight)
    num_embeddings = weight.shape[0]
    if padding_idx is not None:
        if not -num_embeddings <= padding_idx < num_embeddings:
            raise IndexOutOfRangeError(f"{op}: padding_idx {padding_idx} must be within num_embeddings "
                                       f"({num_embeddings})")
        padding_idx %= num_embeddings
    bk = weight._backend
    # the primitive checks the indices (on a GPU on the device, with its one sync): no host round trip here
    if max_norm is not None:
        bk.embedding(weight._data, input._data)  # out-of-range indices raise before the renorm indexes with them
        _renorm_rows_(weight, input, max_norm, norm_type)
    out = wrap(bk.embedding(weight._data, input._data), weight._device)
    if needs_grad(weight):
        def backward(node, g):
            (idx,) = node.saved_tensors
            if is_grad_enabled():
                return None, _embedding_backward_composite(g, idx, num_embeddings, padding_idx, scale_grad_by_freq)
            return None, wrap(g._backend.embedding_backward(_dense(g), idx._data, num_embeddings, padding_idx,
                                                            scale_grad_by_freq), g._device)
        record("EmbeddingBackward0", out, (input, weight), backward, saved=(input,))
    return out


def _embedding_backward_composite(g, idx, num_embeddings, padding_idx, scale_grad_by_freq):
    """The weight gradient as differentiable ops, for create_graph=True."""
    from ..factories import ones, zeros
    if padding_idx is not None:
        g = g * (idx != padding_idx).unsqueeze(-1).to(dtype=g.dtype)
    grad = index_put(zeros((num_embeddings, g.shape[-1]), dtype=g.dtype, device=g.device), (idx,), g,
                     accumulate=True)
    if scale_grad_by_freq:
        counts = index_put(zeros(num_embeddings, dtype=g.dtype, device=g.device), (idx,),
                           ones(tuple(idx.shape), dtype=g.dtype, device=g.device), accumulate=True)
        grad = grad / counts.clamp(min=1.0).unsqueeze(1)
    return grad


def _renorm_rows_(weight, indices, max_norm, norm_type):
    """PyTorch's embedding_renorm_: rows that ``indices`` reach and whose norm exceeds ``max_norm``
    are scaled down in place, outside the graph."""
    with no_grad():
        rows = weight[indices.reshape(-1)]
        norms = rows.norm(norm_type, 1, keepdim=True)
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[indices.reshape(-1)] = rows * scale


# ------------------------------------------------------------------------------------------------
# dropout
def apply_inplace(input, fn, op):
    """``fn(input)`` written back into ``input``'s memory. When a graph is recorded ``fn`` runs on a
    clone, so a backward rule that saved its input still finds the old value."""
    check_inplace_allowed(input, op)
    source = input.clone() if needs_grad(input) else input
    return commit_inplace(input, fn(source), op)


def dropout(input, p=0.5, training=True, inplace=False):
    _check_float("dropout", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if inplace:
        return apply_inplace(input, lambda x: dropout(x, p, True, False), "dropout_")
    if p == 1.0:
        return input * 0.0
    return _fused_dropout(input, p)


def _fused_dropout(input, p):
    """One primitive draws the mask (the generator's next ``bernoulli`` draw, as the two-step form took
    it) and applies it; the backward multiplies by the saved mask, never drawing again."""
    from ..random import default_generator
    seed, offset = default_generator.next_offset(input.numel())
    out_data, mask_data = input._backend.dropout(_dense(input), p, seed, offset)
    out = wrap(out_data, input._device)
    if needs_grad(input):
        scale = 1.0 / (1.0 - p)

        def backward(node, g):
            (mask,) = node.saved_tensors
            if is_grad_enabled():
                return (g * (mask.to(dtype=g.dtype) * scale),)
            return (wrap(g._backend.dropout_backward(_dense(g), mask._data, scale), g._device),)
        record("NativeDropoutBackward0", out, (input,), backward, saved=(wrap(mask_data, input._device),))
    return out


# ------------------------------------------------------------------------------------------------
# scaled_dot_product_attention
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    op = "scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_float(op, name, t)
        if t.ndim < 2:
            raise ShapeError(f"{op}: {name} must have at least 2 dims (..., L, E), got shape {fmt_shape(t.shape)}")
    query, key, value = autocast_inputs(op, query, key, value)
    if not (query.dtype is key.dtype is value.dtype):
        raise DTypeError(f"{op}: expected query, key and value to have the same dtype, got {query.dtype}, "
                         f"{key.dtype} and {value.dtype}")
    check_same_device(op, query, key, value, attn_mask)
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"{op}: query {fmt_shape(query.shape)}, key {fmt_shape(key.shape)} and value "
                         f"{fmt_shape(value.shape)} do not fit: query and key need the same last dim, key and "
                         "value the same sequence length (dim -2)")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout_p has to be between 0 and 1, but got {dropout_p}")
    if enable_gqa:
        key, value = _repeat_kv_heads(op, query, key), _repeat_kv_heads(op, query, value)
    batch = broadcast_shapes(op, tuple(query.shape[:-2]), tuple(key.shape[:-2]), tuple(value.shape[:-2]))
    scores_shape = batch + (query.shape[-2], key.shape[-2])
    if attn_mask is not None:
        attn_mask = _check_attn_mask(op, attn_mask, query, scores_shape)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    if dropout_p > 0.0 or (attn_mask is not None and needs_grad(attn_mask)) or key.shape[-2] == 0:
        # the fused primitive has neither dropout nor a mask gradient (nor a use for zero keys, where
        # every output is 0): compose it from ops instead
        probs = _attention_probs(query, key, attn_mask, is_causal, scale)
        return dropout(probs, dropout_p) @ value
    return _fused_attention(query, key, value, attn_mask, is_causal, scale)


def _repeat_kv_heads(op, query, kv):
    """Grouped-query attention: each key/value head serves ``groups`` consecutive query heads."""
    if query.ndim < 3 or kv.ndim < 3:
        raise ShapeError(f"{op}: enable_gqa needs a heads dim (-3) in query and key/value")
    heads, kv_heads = query.shape[-3], kv.shape[-3]
    if kv_heads == heads:
        return kv
    if kv_heads == 0 or heads % kv_heads:
        raise ShapeError(f"{op}: number of query heads ({heads}) must be a multiple of the key/value "
                         f"heads ({kv_heads}) with enable_gqa=True")
    shape = tuple(kv.shape)
    expanded = kv.unsqueeze(-3).expand(shape[:-3] + (kv_heads, heads // kv_heads) + shape[-2:])
    return expanded.reshape(shape[:-3] + (heads,) + shape[-2:])


def _check_attn_mask(op, mask, query, scores_shape):
    _check_tensor(op, "attn_mask", mask)
    if mask.dtype is not dt.bool_ and not mask.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected attn_mask dtype to be bool or floating point, got {mask.dtype}")
    if broadcast_shapes(op, tuple(mask.shape), scores_shape) != scores_shape:
        raise ShapeError(f"{op}: attn_mask of shape {fmt_shape(mask.shape)} does not broadcast to the "
                         f"attention scores' shape {fmt_shape(scores_shape)} (batch..., L, S)")
    if mask.dtype.is_floating_point and mask.dtype is not query.dtype:
        mask = mask.to(dtype=query.dtype)
    return mask


def _attention_probs(q, k, mask, is_causal, scale):
    """softmax(q k^T * scale + mask) as differentiable ops; a row no key may attend to gets zero
    weights (PyTorch's rule), with finite scores so no NaN reaches the backward."""
    scores = (q @ k.mT) * scale
    if mask is None and not is_causal:
        return softmax(scores, -1)
    if is_causal:
        from ..factories import ones
        allowed = ones((q.shape[-2], k.shape[-2]), dtype=dt.bool_, device=q.device).tril()
        scores = where(allowed, scores, -math.inf)
    elif mask.dtype is dt.bool_:
        scores = where(mask, scores, -math.inf)
    else:
        scores = scores + mask
    live = (scores > -math.inf).any(-1, keepdim=True)
    probs = softmax(where(live, scores, 0.0), -1)
    return where(live, probs, 0.0)


def _fused_attention(q, k, v, mask, is_causal, scale):
    bk = q._backend
    mask_data = _dense(mask) if mask is not None else None
    out_data, lse = bk.attention(_dense(q), _dense(k), _dense(v), mask_data, is_causal, scale)
    out = wrap(out_data, q._device)
    if needs_grad(q, k, v):
        shapes = (tuple(q.shape), tuple(k.shape), tuple(v.shape))

        def backward(node, g):
            q_, k_, v_, o, lse_, m = node.saved_tensors
            if is_grad_enabled():
                grads = _attention_grads_composite(g, q_, k_, v_, m, is_causal, scale)
            else:
                grads = (wrap(d, g._device) for d in bk.attention_backward(
                    _dense(g), _dense(q_), _dense(k_), _dense(v_), o._data, lse_._data,
                    m._data if m is not None else None, is_causal, scale))
            return tuple(sum_to_shape(d, s) for d, s in zip(grads, shapes))
        record("ScaledDotProductAttentionBackward0", out, (q, k, v), backward,
               saved=(q, k, v, out, wrap(lse, q._device), mask))
    return out


def _attention_grads_composite(g, q, k, v, mask, is_causal, scale):
    probs = _attention_probs(q, k, mask, is_causal, scale)
    d_probs = g @ v.mT
    d_scores = probs * (d_probs - (d_probs * probs).sum(-1, keepdim=True))
    return (d_scores @ k) * scale, (d_scores.mT @ q) * scale, probs.mT @ g

