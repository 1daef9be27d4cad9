"""The CUDA backend's layer norm, RMS norm, group norm and batch norm, forward and backward (kernels/norm.cu),
with the CPU backend's signatures, dtype rules and results. Half types are computed in fp32.
"""

from __future__ import annotations

from ... import _native
from ..seam import DType, declared
from ._common import BackendArray, cast, dense, scalar_type, statistics_type

__all__ = [
    "layer_norm",
    "layer_norm_backward",
    "add_layer_norm",
    "add_layer_norm_backward",
    "rms_norm",
    "rms_norm_backward",
    "group_norm",
    "group_norm_backward",
    "batch_norm",
    "batch_norm_backward",
]


# weight and bias go to the kernel in x's dtype (their gradients come back in theirs)
def _backward_operands(g, x, weight, *statistics):
    """A fused backward kernel's operands: g and weight in x's dtype, the saved statistics in theirs
    (float64 for float64 x, else float32), all dense."""
    stats = statistics_type(x)
    weight = None if weight is None else dense(cast(weight, x.dtype))
    return (dense(cast(g, x.dtype)), dense(x), weight, *(dense(cast(s, stats)) for s in statistics))


def _in_cpu_dtypes(dx, dweight, dbias, weight, g):
    """A fused backward kernel's (dx, dweight, dbias) in the CPU backend's dtypes: dweight in weight's,
    dbias in weight's (g's without a weight)."""
    if weight is not None:
        dweight = cast(dweight, weight.dtype)
    return dx, dweight, cast(dbias, weight.dtype if weight is not None else g.dtype)


def layer_norm(
    x: BackendArray, weight: BackendArray | None, bias: BackendArray | None, n: int, eps: float
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """Normalise the last ``n`` dims -> (y, mean, rstd); mean and rstd keep x's dims (size 1 there)."""
    declared.layer_norm(x, weight, bias, n, eps)
    params = [None if p is None else dense(cast(p, x.dtype)) for p in (weight, bias)]
    return tuple(_native._C.layer_norm(dense(x), params[0], params[1], n, float(eps)))


def layer_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, mean: BackendArray, rstd: BackendArray, n: int
) -> tuple[BackendArray, BackendArray | None, BackendArray]:
    """-> (dx, dweight (None without a weight), dbias)."""
    declared.layer_norm_backward(g, x, weight, mean, rstd, n)
    dx, dweight, dbias = _native._C.layer_norm_backward(*_backward_operands(g, x, weight, mean, rstd), n)
    return _in_cpu_dtypes(dx, dweight, dbias, weight, g)


def add_layer_norm(
    x: BackendArray,
    residual: BackendArray,
    weight: BackendArray | None,
    bias: BackendArray | None,
    n: int,
    eps: float,
    y_dtype: DType,
) -> tuple[BackendArray, BackendArray, BackendArray, BackendArray]:
    """h = x + residual, then layer_norm of h -> (y in ``y_dtype``, h, mean, rstd), in one kernel."""
    declared.add_layer_norm(x, residual, weight, bias, n, eps, y_dtype)
    params = [None if p is None else dense(cast(p, x.dtype)) for p in (weight, bias)]
    return tuple(
        _native._C.add_layer_norm(
            dense(x), dense(residual), params[0], params[1], n, float(eps), scalar_type(y_dtype.name)
        )
    )


def add_layer_norm_backward(
    g: BackendArray,
    grad_sum: BackendArray | None,
    h: BackendArray,
    weight: BackendArray | None,
    mean: BackendArray,
    rstd: BackendArray,
    n: int,
) -> tuple[BackendArray, BackendArray | None, BackendArray]:
    """layer_norm_backward at h, plus ``grad_sum``, in one pass -> (dh, dweight (None without a weight), dbias)."""
    declared.add_layer_norm_backward(g, grad_sum, h, weight, mean, rstd, n)
    operands = _backward_operands(g, h, weight, mean, rstd)
    summed = None if grad_sum is None else dense(cast(grad_sum, h.dtype))
    dh, dweight, dbias = _native._C.add_layer_norm_backward(operands[0], summed, *operands[1:], n)
    return _in_cpu_dtypes(dh, dweight, dbias, weight, operands[0])


def rms_norm(x: BackendArray, weight: BackendArray | None, n: int, eps: float) -> tuple[BackendArray, BackendArray]:
    """x / sqrt(mean(x^2 over the last ``n`` dims) + eps) * weight -> (y, rstd); rstd keeps x's dims (size 1 there)."""
    declared.rms_norm(x, weight, n, eps)
    return tuple(_native._C.rms_norm(dense(x), None if weight is None else dense(cast(weight, x.dtype)), n, float(eps)))


def rms_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, rstd: BackendArray, n: int
) -> tuple[BackendArray, BackendArray | None]:
    """-> (dx, dweight (None without a weight), in the weight's dtype)."""
    declared.rms_norm_backward(g, x, weight, rstd, n)
    dx, dweight = _native._C.rms_norm_backward(*_backward_operands(g, x, weight, rstd), n)
    return dx, None if weight is None else cast(dweight, weight.dtype)


def batch_norm(
    x: BackendArray, weight: BackendArray | None, bias: BackendArray | None, eps: float
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """Normalise each channel (dim 1) of x (N, C, *) with its batch statistics -> (y, mean (C,), rstd (C,))."""
    declared.batch_norm(x, weight, bias, eps)
    params = [None if p is None else dense(cast(p, x.dtype)) for p in (weight, bias)]
    return tuple(_native._C.batch_norm(dense(x), params[0], params[1], float(eps)))


def batch_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, mean: BackendArray, rstd: BackendArray
) -> tuple[BackendArray, BackendArray | None, BackendArray]:
    """-> (dx, dweight (None without a weight), dbias)."""
    declared.batch_norm_backward(g, x, weight, mean, rstd)
    dx, dweight, dbias = _native._C.batch_norm_backward(*_backward_operands(g, x, weight, mean, rstd))
    return _in_cpu_dtypes(dx, dweight, dbias, weight, g)


def group_norm(
    x: BackendArray, weight: BackendArray | None, bias: BackendArray | None, groups: int, eps: float
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """Normalise each of ``groups`` channel groups of x (N, C, *) per sample, then scale and shift per
    channel -> (y, mean (N, groups), rstd (N, groups))."""
    declared.group_norm(x, weight, bias, groups, eps)
    params = [None if p is None else dense(cast(p, x.dtype)) for p in (weight, bias)]
    return tuple(_native._C.group_norm(dense(x), params[0], params[1], int(groups), float(eps)))


def group_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, mean: BackendArray, rstd: BackendArray, groups: int
) -> tuple[BackendArray, BackendArray | None, BackendArray]:
    """-> (dx, dweight (None without a weight), dbias), the parameters' in the weight's dtype (g's without one)."""
    declared.group_norm_backward(g, x, weight, mean, rstd, groups)
    dx, dweight, dbias = _native._C.group_norm_backward(*_backward_operands(g, x, weight, mean, rstd), int(groups))
    return _in_cpu_dtypes(dx, dweight, dbias, weight, g)
