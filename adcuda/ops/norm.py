"""Normalisation: layer_norm (fused, on the backend's norm family: ``kernels/norm.cu``) and
normalize."""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

from ..errors import ShapeError, fmt_shape
from ..tensor import primitives
from .common import check_float, check_same_device, dense, wrap
from .elementwise import rsqrt
from .registry import op

if TYPE_CHECKING:
    from ..types import Sequence, Tensor


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
    dx, dw, db = primitives(grad).layer_norm_backward(dense(grad), dense(input),
                                                      None if weight is None else dense(weight),
                                                      mean._data, rstd._data, n)
    return (wrap(dx, grad._device), None if weight is None else wrap(dw, grad._device),
            None if bias_shape is None else wrap(db, grad._device))


def _normalized(normalized_shape):
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


@op("layer_norm", doc="input normalised over its last dims (normalized_shape), then scaled and shifted.",
    node="NativeLayerNormBackward0", autocast="float32", function=False, method=False, functional=True,
    extra_outputs=("mean", "rstd"),
    grads={("input", "weight", "bias"): _layer_norm_grads},
    fused={("input", "weight", "bias"): _layer_norm_fused_grads})
def layer_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> tuple[Tensor, Tensor, Tensor]:
    name = "layer_norm"
    check_float(name, "input", input)
    shape = _normalized(normalized_shape)
    n = len(shape)
    if n == 0 or input.ndim < n or tuple(input.shape[input.ndim - n:]) != shape:
        raise ShapeError(f"{name}: given normalized_shape={shape}, expected input with shape "
                         f"(*, {', '.join(str(s) for s in shape)}), but got input of shape "
                         f"{fmt_shape(input.shape)}")
    for what, p in (("weight", weight), ("bias", bias)):
        if p is not None:
            check_float(name, what, p)
            if tuple(p.shape) != shape:
                raise ShapeError(f"{name}: expected {what} to be of the same shape as normalized_shape, but got "
                                 f"{what} of shape {fmt_shape(p.shape)} and normalized_shape={shape}")
    check_same_device(name, input, weight, bias)
    y, mean, rstd = primitives(input).layer_norm(dense(input), None if weight is None else dense(weight),
                                                 None if bias is None else dense(bias), n, eps)
    device = input._device
    return wrap(y, device), wrap(mean, device), wrap(rstd, device)


@op("normalize", doc="input / max(||input||_p, eps) along dim.", composite=True, function=False, method=False,
    functional=True)
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    if out is not None:
        raise TypeError("normalize: out= is not supported; assign the result instead")
    norm = input.norm(p, dim, keepdim=True).clamp(min=eps)
    return input / norm
