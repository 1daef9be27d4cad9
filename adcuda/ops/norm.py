"""Normalisation: layer_norm and rms_norm (fused, on the backend's norm family: ``kernels/norm.cu``),
normalize, batch_norm, instance_norm and group_norm."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes as dt
from ..autograd import Function, is_grad_enabled, no_grad
from ..autograd.graph import needs_grad, version_counter
from ..backends.cpu.norm import running_update
from ..dtypes import finfo
from ..errors import ShapeError, fmt_shape
from ..tensor import Tensor, primitives
from . import autocast as autocast_regions
from . import dispatch
from .common import check_float, check_same_device, dense, wrap
from .dtype_support import FLOATING
from .elementwise import rsqrt
from .mutation import write_untracked
from .registry import ReplayKeep, get, lowering, op

if TYPE_CHECKING:
    from ..types import Sequence


def _affine_norm_grads(arrays, grad, weight, bias_shape):
    """A fused norm backward primitive's (dx, dweight, dbias) arrays as gradients on ``grad``'s device,
    None for the weight or bias the forward did not have."""
    dx, dw, db = arrays
    return (
        wrap(dx, grad._device),
        None if weight is None else wrap(dw, grad._device),
        None if bias_shape is None else wrap(db, grad._device),
    )


def _layer_norm_grads(grad, input, weight, bias_shape, normalized_shape, eps):
    """dx, dweight, dbias as differentiable ops, for create_graph=True."""
    x = input
    n = len(_normalized(normalized_shape))
    axes = tuple(range(x.ndim - n, x.ndim))
    lead = tuple(range(x.ndim - n))
    centered = x - x.mean(axes, keepdim=True)
    rstd = rsqrt((centered * centered).mean(axes, keepdim=True) + eps)
    xhat = centered * rstd
    gx = grad if weight is None else grad * weight
    dx = rstd * (gx - gx.mean(axes, keepdim=True) - xhat * (gx * xhat).mean(axes, keepdim=True))
    dw = None if weight is None else ((grad * xhat).sum(lead) if lead else grad * xhat)
    db = None if bias_shape is None else (grad.sum(lead) if lead else grad)
    return dx, dw, db


def _layer_norm_fused_grads(grad, input, weight, bias_shape, normalized_shape, mean, rstd):
    n = len(_normalized(normalized_shape))
    arrays = primitives(grad).layer_norm_backward(
        dense(grad), dense(input), None if weight is None else dense(weight), mean._data, rstd._data, n
    )
    return _affine_norm_grads(arrays, grad, weight, bias_shape)


def _normalized(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _plain(input, size, *params):
    """Whether a norm's call is its plain case, in one test on the arrays (Tensor.shape and .dtype make
    objects per read): no hook attached (autocast, the profiler, capture: ``dispatch._plain``), input a
    CPU float32/float64 tensor that takes no part in a graph, each parameter absent or a CPU tensor of its
    array dtype of shape ``(size,)`` that takes none either. Such a call passes every check of the op's
    path and records nothing, so the norms call their primitive straight away."""
    x = input._data if input.__class__ is Tensor else None
    if not (
        dispatch._plain
        and x.__class__ is np.ndarray
        and (x.dtype is _F32 or x.dtype is _F64)
        and not (
            input._requires_grad or input._grad_fn is not None or input._base is not None and input.grad_fn is not None
        )
    ):
        return False
    for p in params:
        if p is not None and not (
            p.__class__ is Tensor
            and p._data.__class__ is np.ndarray
            and p._data.dtype is x.dtype
            and p._data.shape == (size,)
            and p._device is input._device
            and not (p._requires_grad or p._grad_fn is not None or p._base is not None and p.grad_fn is not None)
        ):
            return False
    return True


def _last_size(normalized_shape):
    """The one size of a normalized_shape of one dim (an int, or a list or tuple of one int), else None."""
    if normalized_shape.__class__ is int:
        return normalized_shape
    if (
        normalized_shape.__class__ in (tuple, list)
        and len(normalized_shape) == 1
        and normalized_shape[0].__class__ is int
    ):
        return normalized_shape[0]
    return None


def _input_normalized_shape(name, input, normalized_shape):
    """layer_norm's and rms_norm's normalized_shape as a tuple, after checking that ``input`` is floating
    point and ends with that shape."""
    check_float(name, "input", input)
    shape = _normalized(normalized_shape)
    n = len(shape)
    if n == 0 or input.ndim < n or tuple(input.shape[input.ndim - n :]) != shape:
        raise ShapeError(
            f"{name}: given normalized_shape={shape}, expected input with shape "
            f"(*, {', '.join(str(s) for s in shape)}), but got input of shape "
            f"{fmt_shape(input.shape)}"
        )
    return shape


@op(
    "layer_norm",
    dtypes=FLOATING,
    doc="input normalised over its last dims (normalized_shape), then scaled and shifted.",
    node="NativeLayerNormBackward0",
    autocast="float32",
    function=False,
    method=False,
    functional=True,
    extra_outputs=("mean", "rstd"),
    grads={("input", "weight", "bias"): _layer_norm_grads},
    fused={("input", "weight", "bias"): _layer_norm_fused_grads},
)
def layer_norm(
    input: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> tuple[Tensor, Tensor, Tensor]:
    size = _last_size(normalized_shape)
    if size is not None and input._data.shape[-1:] == (size,) and _plain(input, size, weight, bias):
        bk, device = primitives(input), input._device
        y, mean, rstd = bk.layer_norm(
            bk.contiguous(input._data),
            None if weight is None else bk.contiguous(weight._data),
            None if bias is None else bk.contiguous(bias._data),
            1,
            eps,
        )
        return wrap(y, device), wrap(mean, device), wrap(rstd, device)
    name = "layer_norm"
    shape = _input_normalized_shape(name, input, normalized_shape)
    n = len(shape)
    for what, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            check_float(name, what, p)
            if tuple(p.shape) != shape:
                raise ShapeError(
                    f"{name}: expected {what} to be of the same shape as normalized_shape, but got "
                    f"{what} of shape {fmt_shape(p.shape)} and normalized_shape={shape}"
                )
    check_same_device(name, input, weight, bias)
    y, mean, rstd = primitives(input).layer_norm(
        dense(input), None if weight is None else dense(weight), None if bias is None else dense(bias), n, eps
    )
    device = input._device
    return wrap(y, device), wrap(mean, device), wrap(rstd, device)


# ------------------------------------------------------------------------------------------------
# The residual add fused with layer norm (a pre-LayerNorm transformer's ``h = x + branch; y = ln(h)``):
# one primitive reads x and the residual once and writes the sum (the next residual) and the
# normalised output, in the activation dtype under autocast; its backward adds the sum's gradient
# from its other uses to the norm's dx in the same pass. Two differentiable outputs, so an autograd
# Function (one node with two outputs) instead of a registry op; the primitives it calls are what
# graph capture records and the exporters lower (``lowering("add_layer_norm", ...)`` below).
class AddLayerNorm(Function):
    @staticmethod
    def forward(ctx, input, residual, weight, bias, n, eps, y_dtype):
        device = input._device
        y, h, mean, rstd = primitives(input).add_layer_norm(
            dense(input),
            dense(residual),
            None if weight is None else dense(weight),
            None if bias is None else dense(bias),
            n,
            eps,
            y_dtype,
        )
        y, h = wrap(y, device), wrap(h, device)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(h, weight, wrap(mean, device), wrap(rstd, device))
        ctx.n, ctx.eps, ctx.has_bias = n, eps, bias is not None
        return y, h

    @staticmethod
    def backward(ctx, grad_y, grad_h):
        h, weight, mean, rstd = ctx.saved_tensors
        bias_shape = tuple(h.shape[h.ndim - ctx.n :]) if ctx.has_bias else None
        if grad_y is None:  # y unused: its gradient is zero (the engine wants the parameters' too)
            grad_y = h.detach() * 0
        if is_grad_enabled():  # a graph of the backward is being built: differentiable ops
            g = grad_y.to(dtype=h.dtype)
            dh, dw, db = _layer_norm_grads(g, h, weight, bias_shape, h.shape[h.ndim - ctx.n :], ctx.eps)
            if grad_h is not None:
                dh = dh + grad_h
        else:
            arrays = primitives(h).add_layer_norm_backward(
                dense(grad_y),
                None if grad_h is None else dense(grad_h),
                h._data,
                None if weight is None else dense(weight),
                mean._data,
                rstd._data,
                ctx.n,
            )
            dh, dw, db = _affine_norm_grads(arrays, h, weight, bias_shape)
        return dh, dh, dw, db, None, None, None


def add_layer_norm(
    input: Tensor,
    residual: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> tuple[Tensor, Tensor]:
    """``h = input + residual`` and ``y = layer_norm(h, normalized_shape, weight, bias, eps)`` -> (y, h)
    in one pass over the rows (and one for the backward). ``h`` has the promoted dtype of the two;
    ``y`` has h's, except that under autocast a float32 h gives y in the autocast dtype (what the next
    matrix product reads: the float32 copy and its cast are never made). The same values as the unfused
    ``h = input + residual; y = F.layer_norm(h, ...)`` (then cast, under autocast), with one rounding of
    the backward's sum of gradients instead of two. PyTorch has no such op; the GPT blocks of
    benchmarks/bench_gpt2_step.py and nn.TransformerEncoderLayer(norm_first=True) use it."""
    name = "add_layer_norm"
    check_float(name, "input", input)
    check_float(name, "residual", residual)
    if tuple(input.shape) != tuple(residual.shape):
        raise ShapeError(
            f"{name}: the input {fmt_shape(input.shape)} and the residual {fmt_shape(residual.shape)} must have "
            "the same shape"
        )
    shape = _input_normalized_shape(name, input, normalized_shape)
    for what, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            check_float(name, what, p)
            if tuple(p.shape) != shape:
                raise ShapeError(
                    f"{name}: expected {what} to be of the same shape as normalized_shape, but got "
                    f"{what} of shape {fmt_shape(p.shape)} and normalized_shape={shape}"
                )
    check_same_device(name, input, residual, weight, bias)
    dtype = dt.promote_types(input.dtype, residual.dtype)
    input, residual = input.to(dtype=dtype), residual.to(dtype=dtype)
    device_type = input.device.type
    y_dtype = dtype
    if dtype is dt.float32 and autocast_regions.is_enabled(device_type):
        y_dtype = autocast_regions.region_dtype(device_type)
    return AddLayerNorm.apply(input, residual, weight, bias, len(shape), float(eps), y_dtype)


@op(
    "normalize",
    dtypes=FLOATING,
    doc="input / max(||input||_p, eps) along dim.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    if out is not None:
        raise TypeError("normalize: out= is not supported; assign the result instead")
    norm = input.norm(p, dim, keepdim=True).clamp(min=eps)
    return input / norm


# ------------------------------------------------------------------------------------------------
# batch, instance, group and RMS norm: PyTorch's functional forms. Batch norm's training statistics
# are the backend's batch_norm primitive (per-channel column reductions, fused with the normalising
# pass; a fused backward); group and instance norm take row statistics over (N, G) groups or (N, C)
# instances through the backend's group_norm (native_group_norm: statistics and the per-channel affine in
# one kernel); RMS norm is the backend's rms_norm (native_rms_norm). Group, instance and RMS norm are
# composites only for parameters of another dtype than the input's; eval-mode batch norm is a composite.
def _channel_shape(name, input, what="input"):
    """(1, C, 1, ...) for broadcasting per-channel values over input (N, C, *)."""
    if input.ndim < 2:
        raise ShapeError(
            f"{name}: expected {what} with at least 2 dims (N, C, *), but got {what} of shape {fmt_shape(input.shape)}"
        )
    return (1, input.shape[1]) + (1,) * (input.ndim - 2)


def _check_per_channel(name, input, **tensors):
    channels = input.shape[1]
    for what, t in tensors.items():
        if t is None:
            continue
        check_float(name, what, t)
        if tuple(t.shape) != (channels,):
            raise ShapeError(
                f"{name}: expected {what} of shape ({channels},) for input of shape "
                f"{fmt_shape(input.shape)} ({channels} channels), but got {what} of shape "
                f"{fmt_shape(t.shape)}"
            )
    check_same_device(name, input, *tensors.values())


def _affine(y, weight, bias, shape):
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def _update_running_(running, scaled_value, momentum):
    """running <- (1 - momentum) * running + scaled_value (the batch's value times momentum, a backend
    array), in place, outside the graph: the product and sum of running.mul_(1 - m).add_(value * m) on
    the arrays and one untracked write, with no op dispatch around each (a batch norm's statistics took
    ten)."""
    bk, d = primitives(running), running.dtype
    if bk.dtype_of(scaled_value) is not d:
        scaled_value = bk.astype(scaled_value, d)
    write_untracked(
        running, bk.binary("add", bk.binary("mul", running._data, 1.0 - momentum, d), scaled_value, d), "batch_norm"
    )


def _batch_norm_grads(grad, input, weight, bias_shape, eps):
    """dx, dweight, dbias as differentiable ops, for create_graph=True."""
    shape = _channel_shape("batch_norm", input)
    axes = (0,) + tuple(range(2, input.ndim))
    centered = input - input.mean(axes, keepdim=True)
    rstd = rsqrt((centered * centered).mean(axes, keepdim=True) + eps)
    xhat = centered * rstd
    gx = grad if weight is None else grad * weight.reshape(shape)
    dx = rstd * (gx - gx.mean(axes, keepdim=True) - xhat * (gx * xhat).mean(axes, keepdim=True))
    dw = None if weight is None else (grad * xhat).sum(axes)
    db = None if bias_shape is None else grad.sum(axes)
    return dx, dw, db


def _batch_norm_fused_grads(grad, input, weight, bias_shape, mean, rstd):
    arrays = primitives(grad).batch_norm_backward(
        dense(grad), dense(input), None if weight is None else dense(weight), mean._data, rstd._data
    )
    return _affine_norm_grads(arrays, grad, weight, bias_shape)


@op(
    "native_batch_norm",
    doc="input (N, C, *) normalised per channel with its batch statistics, scaled and "
    "shifted; the running statistics (or None) updated with momentum.",
    node="NativeBatchNormBackward0",
    function=False,
    method=False,
    extra_outputs=("mean", "rstd"),
    grads={("input", "weight", "bias"): _batch_norm_grads},
    fused={("input", "weight", "bias"): _batch_norm_fused_grads},
)
def native_batch_norm(
    input: Tensor,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    momentum: float | None = 0.1,
    eps: float = 1e-5,
) -> tuple[Tensor, Tensor, Tensor]:
    y, mean, rstd = primitives(input).batch_norm(
        dense(input), None if weight is None else dense(weight), None if bias is None else dense(bias), eps
    )
    device = input._device
    mean, rstd = wrap(mean, device), wrap(rstd, device)
    if running_mean is not None or running_var is not None:
        _update_running_stats(running_mean, running_var, mean, rstd, momentum, eps, input.numel() // input.shape[1])
    return wrap(y, device), mean, rstd


def _update_running_stats(running_mean, running_var, mean, rstd, momentum, eps, count):
    """The running statistics (either may be None) updated in place, outside the graph, from the batch's
    mean and rstd (C,): the running variance is unbiased (n / (n - 1)), as PyTorch's; in rstd's dtype, as
    the ops 1 / (rstd * rstd) - eps, times momentum * n / (n - 1), would compute it. CPU arrays of the
    statistics' dtype take the backend's one-call update (``running_update``) while no hook is attached
    (capture and the profiler see the ops' primitives), others the ops."""
    var_factor = momentum * count / (count - 1) if running_var is not None else 0.0
    if (
        dispatch._plain
        and momentum.__class__ is float
        and running_update(
            None if running_mean is None else running_mean._data,
            None if running_var is None else running_var._data,
            mean._data,
            rstd._data,
            momentum,
            float(eps),
            var_factor,
        )
    ):
        for running in (running_mean, running_var):
            if running is not None:
                version_counter(running).value += 1
        return
    bk, sd = primitives(rstd), rstd.dtype
    if running_mean is not None:
        _update_running_(running_mean, bk.binary("mul", mean._data, momentum, sd), momentum)
    if running_var is not None:
        r = rstd._data
        var = bk.binary("sub", bk.binary("div", 1.0, bk.binary("mul", r, r, sd), sd), float(eps), sd)
        _update_running_(running_var, bk.binary("mul", var, var_factor, sd), momentum)


_native_batch_norm = get("native_batch_norm").forward


@op(
    "batch_norm",
    doc="input (N, C, *) normalised per channel with the batch's (training) or the running "
    "statistics, then scaled and shifted.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def batch_norm(
    input: Tensor,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float | None = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    x = input._data if input.__class__ is Tensor else None
    if (
        training
        and momentum.__class__ is float
        and x is not None
        and x.ndim >= 2
        and x.size > x.shape[1]  # (more than one value per channel)
        and _plain(input, x.shape[1], running_mean, running_var, weight, bias)
    ):
        # the plain case: native_batch_norm's forward alone, nothing to check or record
        return _native_batch_norm(input, weight, bias, running_mean, running_var, momentum, eps)[0]
    name = "batch_norm"
    check_float(name, "input", input)
    shape = _channel_shape(name, input)
    _check_per_channel(name, input, running_mean=running_mean, running_var=running_var, weight=weight, bias=bias)
    if not training:
        if running_mean is None or running_var is None:
            raise ShapeError(
                f"{name}: running_mean and running_var must be given when training=False "
                f"(input of shape {fmt_shape(input.shape)})"
            )
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
        y = (input - mean.to(dtype=input.dtype)) * rsqrt(var.to(dtype=input.dtype) + eps)
        return _affine(y, weight, bias, shape)
    count = input.numel() // input.shape[1] if input.shape[1] else 0
    if input.numel() == 0:
        return _affine(input * 1.0, weight, bias, shape)
    if count <= 1:
        raise ShapeError(
            f"{name}: expected more than 1 value per channel when training, got input of shape {fmt_shape(input.shape)}"
        )
    track = momentum is not None
    return native_batch_norm(
        input, weight, bias, running_mean if track else None, running_var if track else None, momentum, eps
    )


@op(
    "instance_norm",
    doc="Each (sample, channel) of input (N, C, *) normalised over its own positions, then "
    "scaled and shifted per channel.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def instance_norm(
    input: Tensor,
    running_mean: Tensor | None = None,
    running_var: Tensor | None = None,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    x = input._data if input.__class__ is Tensor else None
    if (
        x is not None
        and use_input_stats
        and running_mean is None
        and running_var is None
        and x.ndim >= 3
        and x.size
        and x.size > x.shape[0] * x.shape[1]  # (more than one position)
        and _plain(input, x.shape[1], weight, bias)
    ):
        # the plain case: group norm with one channel per group, nothing to check or record
        return _native_group_norm(input, x.shape[1], weight, bias, eps)[0]
    name = "instance_norm"
    check_float(name, "input", input)
    shape = _channel_shape(name, input)
    _check_per_channel(name, input, running_mean=running_mean, running_var=running_var, weight=weight, bias=bias)
    if not use_input_stats:
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    n, c = input.shape[0], input.shape[1]
    positions = input.numel() // (n * c) if n * c else 0
    if input.numel() == 0:
        return _affine(input * 1.0, weight, bias, shape)
    if positions <= 1:
        raise ShapeError(
            f"{name}: expected more than 1 spatial element when training, got input of shape {fmt_shape(input.shape)}"
        )
    if _fusable_affine(input, weight, bias):
        # instance norm is group norm with one channel per group: statistics and affine in one kernel
        y = native_group_norm(input, c, weight, bias, eps)
    else:
        rows = input.reshape(n, c, positions)
        y = _affine(layer_norm(rows, (positions,), None, None, eps).reshape(tuple(input.shape)), weight, bias, shape)
    if running_mean is not None or running_var is not None:
        rows = input.reshape(n, c, positions)
        # the running statistics take the batch's mean of the per-instance ones (variance unbiased)
        with no_grad():
            if running_mean is not None:
                _update_running_(running_mean, (rows.mean(2).mean(0) * momentum)._data, momentum)
            if running_var is not None:
                _update_running_(running_var, (rows.var(2, correction=1).mean(0) * momentum)._data, momentum)
    return y


def _group_norm_grads(grad, input, num_groups, weight, bias_shape, eps):
    """dx, dweight, dbias as differentiable ops, for create_graph=True."""
    shape, n = tuple(input.shape), input.shape[0]
    rows = input.reshape(n, num_groups, -1)
    centered = rows - rows.mean(2, keepdim=True)
    rstd = rsqrt((centered * centered).mean(2, keepdim=True) + eps)
    xhat = centered * rstd
    gx = (grad if weight is None else grad * weight.reshape(_channel_shape("group_norm", input))).reshape(
        n, num_groups, -1
    )
    dx = (rstd * (gx - gx.mean(2, keepdim=True) - xhat * (gx * xhat).mean(2, keepdim=True))).reshape(shape)
    axes = (0,) + tuple(range(2, input.ndim))
    dw = None if weight is None else (grad * xhat.reshape(shape)).sum(axes)
    db = None if bias_shape is None else grad.sum(axes)
    return dx, dw, db


def _group_norm_fused_grads(grad, input, num_groups, weight, bias_shape, mean, rstd):
    arrays = primitives(grad).group_norm_backward(
        dense(grad), dense(input), None if weight is None else dense(weight), mean._data, rstd._data, num_groups
    )
    return _affine_norm_grads(arrays, grad, weight, bias_shape)


@op(
    "native_group_norm",
    doc="input (N, C, *) normalised per sample over each of num_groups channel groups, scaled and shifted "
    "per channel in the same pass (weight and bias in input's dtype).",
    node="NativeGroupNormBackward0",
    autocast="float32",
    function=False,
    method=False,
    extra_outputs=("mean", "rstd"),
    grads={("input", "weight", "bias"): _group_norm_grads},
    fused={("input", "weight", "bias"): _group_norm_fused_grads},
)
def native_group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> tuple[Tensor, Tensor, Tensor]:
    y, mean, rstd = primitives(input).group_norm(
        dense(input), None if weight is None else dense(weight), None if bias is None else dense(bias), num_groups, eps
    )
    device = input._device
    return wrap(y, device), wrap(mean, device), wrap(rstd, device)


_native_group_norm = get("native_group_norm").forward


def _fusable_affine(input, *params):
    """Whether the per-channel parameters can go into the fused kernels: absent, or in input's dtype (another
    dtype promotes the result, which the composite form gives)."""
    return all(p is None or p.dtype == input.dtype for p in params)


@op(
    "group_norm",
    doc="input (N, C, *) normalised over each of num_groups groups of channels, then scaled and shifted per channel.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def group_norm(
    input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    x = input._data if input.__class__ is Tensor else None
    if (
        x is not None
        and x.ndim >= 2
        and x.size
        and num_groups.__class__ is int
        and 0 < num_groups
        and x.shape[1] % num_groups == 0
        and _plain(input, x.shape[1], weight, bias)
    ):
        return _native_group_norm(input, num_groups, weight, bias, eps)[0]  # the plain case: nothing to check
    name = "group_norm"
    check_float(name, "input", input)
    shape = _channel_shape(name, input)
    _check_per_channel(name, input, weight=weight, bias=bias)
    n, c = input.shape[0], input.shape[1]
    if num_groups <= 0 or c % num_groups:
        raise ShapeError(
            f"{name}: expected the number of channels ({c}) of input of shape {fmt_shape(input.shape)} "
            f"to be divisible by num_groups={num_groups}"
        )
    if input.numel() == 0:
        return _affine(input * 1.0, weight, bias, shape)
    if _fusable_affine(input, weight, bias):
        if needs_grad(input, weight, bias) or autocast_regions.is_enabled(input.device.type):
            return native_group_norm(input, num_groups, weight, bias, eps)
        return _native_group_norm(input, num_groups, weight, bias, eps)[0]  # nothing to record: the forward alone
    per_group = input.numel() // (n * num_groups)
    # one row per (sample, group): the layer-norm kernel's row reduction does the statistics
    groups = input.reshape(n, num_groups, per_group)
    y = layer_norm(groups, (per_group,), None, None, eps).reshape(tuple(input.shape))
    return _affine(y, weight, bias, shape)


def _rms_norm_grads(grad, input, weight, normalized_shape, eps):
    """dx, dweight as differentiable ops, for create_graph=True."""
    n = len(_normalized(normalized_shape))
    axes = tuple(range(input.ndim - n, input.ndim))
    lead = tuple(range(input.ndim - n))
    rstd = rsqrt((input * input).mean(axes, keepdim=True) + eps)
    xhat = input * rstd
    gx = grad if weight is None else grad * weight
    dx = rstd * (gx - xhat * (gx * xhat).mean(axes, keepdim=True))
    dw = None if weight is None else ((grad * xhat).sum(lead) if lead else grad * xhat)
    return dx, dw


def _rms_norm_fused_grads(grad, input, weight, normalized_shape, rstd):
    n = len(_normalized(normalized_shape))
    dx, dw = primitives(grad).rms_norm_backward(
        dense(grad), dense(input), None if weight is None else dense(weight), rstd._data, n
    )
    return wrap(dx, grad._device), None if weight is None else wrap(dw, grad._device)


@op(
    "native_rms_norm",
    doc="input / sqrt(mean(input^2 over its last dims) + eps) * weight in one pass per row (weight in input's dtype).",
    node="FusedRmsNormBackward0",
    function=False,
    method=False,
    extra_outputs=("rstd",),
    grads={("input", "weight"): _rms_norm_grads},
    fused={("input", "weight"): _rms_norm_fused_grads},
)
def native_rms_norm(
    input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None, eps: float = 1e-5
) -> tuple[Tensor, Tensor]:
    n = len(_normalized(normalized_shape))
    y, rstd = primitives(input).rms_norm(dense(input), None if weight is None else dense(weight), n, eps)
    return wrap(y, input._device), wrap(rstd, input._device)


_native_rms_norm = get("native_rms_norm").forward


@op(
    "rms_norm",
    doc="input / sqrt(mean(input^2 over normalized_shape) + eps), then scaled by weight.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def rms_norm(
    input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    size = _last_size(normalized_shape)
    if size is not None and input._data.shape[-1:] == (size,) and _plain(input, size, weight):
        if eps is None:
            eps = finfo(input.dtype).eps
        return _native_rms_norm(input, (size,), weight, eps)[0]  # the plain case: nothing to check or record
    name = "rms_norm"
    shape = _input_normalized_shape(name, input, normalized_shape)
    n = len(shape)
    if weight is not None:
        check_float(name, "weight", weight)
        if tuple(weight.shape) != shape:
            raise ShapeError(
                f"{name}: expected weight of shape {shape} (normalized_shape), but got weight of "
                f"shape {fmt_shape(weight.shape)}"
            )
    check_same_device(name, input, weight)
    if eps is None:
        eps = finfo(input.dtype).eps
    if _fusable_affine(input, weight):
        # the backend's fused row kernel (statistics in fp32 at least, one rounding of y)
        return native_rms_norm(input, shape, weight, eps)
    # a weight of another dtype promotes the result, as PyTorch's: y in input's dtype, then the product
    axes = tuple(range(input.ndim - n, input.ndim))
    # the mean square in fp32 at least, as PyTorch's (half inputs would lose it)
    wide = input if input.dtype in (dt.float32, dt.float64) else input.to(dtype=dt.float32)
    y = (wide * rsqrt((wide * wide).mean(axes, keepdim=True) + eps)).to(dtype=input.dtype)
    return y if weight is None else y * weight


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)


def _layer_norm_replay_pair(same, shape_of, forward, backward):
    """layer_norm and its backward given the forward's own mean and rstd, with a weight: the normalised x
    (two passes fewer)."""
    x0, weight0, _, n0 = forward[:4]
    _, x, weight, _, _, n = backward[:6]
    if weight is None or weight0 is None or n0 != n or not same(x0, x):
        return None
    return shape_of(x), (x,)


lowering(
    "layer_norm",
    onnx=lambda w, node, **params: w.layer_norm(node, **params),
    c=lambda lower, node: lower.layer_norm(node),
    replay_keeps=ReplayKeep(
        "xhat", "layer_norm_backward", results=(1, 2), reads=(3, 4), arity=6, pair=_layer_norm_replay_pair
    ),
)


def _onnx_add_layer_norm(w, node, x, residual, weight, bias, n, eps, y_dtype):
    """Decomposed: an Add (the sum, the model's second result), then LayerNormalization of it, cast
    to y_dtype where that is not the sum's dtype."""
    total = w.emit("Add", [w.name(x.value), w.name(residual.value)], [w.out(node, 1) or w.fresh("sum")])
    dims = w.info(x.value).symbolic_shape[-n:]
    dtype = w.np_dtype(x.value)
    if (weight is None or bias is None) and any(not isinstance(d, int) for d in dims):
        w.refuse("add_layer_norm without weight or bias over a dynamic axis")
    scale = w.name(weight.value) if weight is not None else w.const(np.ones(dims), dtype)
    shift = w.name(bias.value) if bias is not None else w.const(np.zeros(dims), dtype)
    cast = y_dtype.numpy != dtype
    y = w.fresh("normalized") if cast else (w.out(node, 0) or "")
    outputs = [y, w.out(node, 2) or "", w.out(node, 3) or ""]
    while outputs and outputs[-1] == "":
        outputs.pop()
    w.emit("LayerNormalization", [total, scale, shift], outputs, axis=-n, epsilon=float(eps))
    if cast and w.out(node, 0) is not None:
        w.emit("Cast", [y], [w.out(node, 0)], to=w.onnx_type(y_dtype.numpy))


lowering("add_layer_norm", onnx=_onnx_add_layer_norm, c=lambda lower, node: lower.add_layer_norm(node))
lowering("batch_norm", onnx=lambda w, node, **params: w.batch_norm(node, **params))
lowering("rms_norm", onnx=lambda w, node, **params: w.rms_norm(node, **params))
lowering("group_norm", onnx=lambda w, node, **params: w.group_norm(node, **params))
