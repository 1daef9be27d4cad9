"""The CPU backend's layer norm, RMS norm, group norm and batch norm, forward and backward (kernels/norm.cu on CUDA)."""

from __future__ import annotations

import math

import numpy as np

from ... import _native
from ..seam import DType, declared
from ._common import _F32, _F64, BackendArray, _column_sums, _compute, _row_sums
from .storage import astype, dtype_of

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


# The host module's group norm forward (kernels/host/norm.cpp; None: NumPy's, the reference it is tested
# against), for arrays up to _NATIVE_MAX elements: there NumPy's calls cost a microsecond or more each
# whatever the size; above it its BLAS row sums are faster.
_NATIVE = _native._C if hasattr(_native._C, "cpu_normalize") else None
_NATIVE_MAX = 1 << 14


def _native_normalize(x, weight, bias, rows, groups, spread, eps):
    """The host module's (y, mean, rstd) (flat statistics), or None where it does not serve these arrays
    (another dtype, a strided or large array, parameters of another dtype): for a given x, always the
    same answer, so that a captured program's replay takes the path its eager run took."""
    if (
        _NATIVE is None
        or not (x.dtype == _F32 or x.dtype == _F64)
        or not 0 < x.size <= _NATIVE_MAX
        or not x.flags.c_contiguous
    ):
        return None
    for p in (weight, bias):
        if p is not None and (p.dtype != x.dtype or not p.flags.c_contiguous):
            return None
    return _NATIVE.cpu_normalize(x, weight, bias, rows, groups, spread, eps)


# Layer norm, forward and backward: the host module's row loops (kernels/host/norm.cpp), one read of
# x per statistic where NumPy makes seven passes forward and a dozen backward; None without the host module.
_LAYER_NORM = _native._C if hasattr(_native._C, "cpu_layer_norm") else None


def _native_layer_norm(*arrays):
    """The host module where it serves these arrays (None aside: all C-contiguous, of x's dtype, float32 or
    float64, x the first and not empty), else None: for given arrays always the same answer, so that a
    captured program's replay takes the path its eager run took."""
    x = arrays[0]
    if _LAYER_NORM is None or not (x.dtype == _F32 or x.dtype == _F64) or x.size == 0:
        return None
    for a in arrays:
        if a is not None and (a.__class__ is not np.ndarray or a.dtype != x.dtype or not a.flags.c_contiguous):
            return None
    return _LAYER_NORM


def layer_norm(
    x: BackendArray,
    weight: BackendArray | None,
    bias: BackendArray | None,
    n: int,
    eps: float,
    *,
    xhat: BackendArray | None = None,
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """Normalise the last ``n`` dims -> (y, mean, rstd); mean and rstd keep x's dims (size 1 there).
    ``xhat`` (CPU only, seam.CPU_REPLAY_KEYWORDS; an array of x's shape and compute dtype): where to keep
    the normalised x, (x - mean) * rstd, for a backward given it (graph capture's replay)."""
    size = x.shape[-1] if n == 1 and x.ndim and x.size else 0
    if (
        size
        and xhat is None
        and _LAYER_NORM is not None
        and (x.dtype is _F32 or x.dtype is _F64)
        and x.flags.c_contiguous
        and all(p is None or p.dtype is x.dtype and p.shape == (size,) and p.flags.c_contiguous for p in (weight, bias))
    ):
        # the common case first, before the declaration's checks (it passes them): a small layer norm's cost
        y, mean, rstd = _LAYER_NORM.cpu_layer_norm(x, weight, bias, x.size // size, eps, None)
        stat_shape = x.shape[:-1] + (1,)
        return y, mean.reshape(stat_shape), rstd.reshape(stat_shape)
    declared.layer_norm(x, weight, bias, n, eps)
    count = math.prod(x.shape[x.ndim - n :])
    stat_shape = x.shape[: x.ndim - n] + (1,) * n
    native = _native_layer_norm(x, weight, bias, xhat) if count else None
    if native is not None:
        y, mean, rstd = native.cpu_layer_norm(x, weight, bias, x.size // count, eps, xhat)
        return y, mean.reshape(stat_shape), rstd.reshape(stat_shape)
    xx = _compute(x)
    # the row sums are BLAS products with a vector of ones (_row_sums); the big temporaries are written
    # in place, the small per-row ones too (each NumPy call costs about a microsecond at these sizes)
    mean = _row_sums(xx, n)
    mean /= count
    y = np.subtract(xx, mean, out=xhat)
    var_ = _row_sums(np.square(y), n)
    var_ /= count
    var_ += eps
    rstd = np.sqrt(var_, out=var_)
    np.divide(1.0, rstd, out=rstd)
    y *= rstd
    if weight is not None:
        y = y * _compute(weight) if xhat is not None else np.multiply(y, _compute(weight), out=y)
    elif xhat is not None:
        y = y.copy()
    if bias is not None:
        y += _compute(bias)
    stat_dt = np.float64 if x.dtype == np.float64 else np.float32
    return y.astype(x.dtype, copy=False), mean.astype(stat_dt, copy=False), rstd.astype(stat_dt, copy=False)


def layer_norm_backward(
    g: BackendArray,
    x: BackendArray,
    weight: BackendArray | None,
    mean: BackendArray,
    rstd: BackendArray,
    n: int,
    *,
    xhat: BackendArray | None = None,
) -> tuple[BackendArray, BackendArray | None, BackendArray]:
    """-> (dx, dweight (None without a weight), dbias). ``xhat`` (CPU only, seam.CPU_REPLAY_KEYWORDS): the
    normalised x the forward kept (its ``xhat``) for this x, mean and rstd, read instead of computed."""
    declared.layer_norm_backward(g, x, weight, mean, rstd, n)
    count = math.prod(x.shape[x.ndim - n :])
    native = _native_layer_norm(x, g, weight, mean, rstd, xhat) if count else None
    if native is not None:
        dx, dweight, dbias = native.cpu_layer_norm_backward(g, x, weight, mean, rstd, x.size // count, xhat)
        normalised = x.shape[x.ndim - n :]
        return dx, None if dweight is None else dweight.reshape(normalised), dbias.reshape(normalised)
    gg, xx = _compute(g), _compute(x)
    kept = xhat is not None
    if xhat is None:
        xhat = xx - mean
        xhat *= rstd
    w = None if weight is None else _compute(weight)
    # (the row and column sums are BLAS products with a vector of ones, or with the weight: _row_sums,
    # _column_sums)
    g_xhat = gg * xhat
    dweight = _column_sums(g_xhat, n).astype(weight.dtype, copy=False) if weight is not None else None
    dbias = _column_sums(gg, n).astype(weight.dtype if weight is not None else g.dtype, copy=False)
    # dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)) with gx = g * weight, in one buffer; the
    # means over a row are dot products of g and of g * xhat with the weight (its values a row long)
    flat_w = None if w is None else w.reshape(-1).astype(gg.dtype, copy=False)
    gx_mean = _row_sums(gg, n, flat_w)
    gx_mean /= count
    proj = _row_sums(g_xhat, n, flat_w)
    proj /= count
    xhat = xhat * proj if kept else np.multiply(xhat, proj, out=xhat)  # (the kept one is read again)
    dx = gg * w if w is not None else gg.copy()
    dx -= gx_mean
    dx -= xhat
    dx *= rstd
    return dx.astype(x.dtype, copy=False), dweight, dbias


def add_layer_norm(
    x: BackendArray,
    residual: BackendArray,
    weight: BackendArray | None,
    bias: BackendArray | None,
    n: int,
    eps: float,
    y_dtype: DType,
) -> tuple[BackendArray, BackendArray, BackendArray, BackendArray]:
    """h = x + residual (rounded to x's dtype), then layer_norm of h -> (y in ``y_dtype``, h, mean, rstd):
    the reference the CUDA kernel's one pass is checked against."""
    declared.add_layer_norm(x, residual, weight, bias, n, eps, y_dtype)
    h = np.add(_compute(x), _compute(residual)).astype(x.dtype, copy=False)
    y, mean, rstd = layer_norm(h, weight, bias, n, eps)
    return astype(y, y_dtype) if dtype_of(y) is not y_dtype else y, h, mean, rstd


def add_layer_norm_backward(
    g: BackendArray,
    grad_sum: BackendArray | None,
    h: BackendArray,
    weight: BackendArray | None,
    mean: BackendArray,
    rstd: BackendArray,
    n: int,
) -> tuple[BackendArray, BackendArray | None, BackendArray]:
    """layer_norm_backward at h, plus ``grad_sum`` -> (dh, dweight (None without a weight), dbias)."""
    declared.add_layer_norm_backward(g, grad_sum, h, weight, mean, rstd, n)
    if g.dtype != h.dtype:
        g = g.astype(h.dtype)
    dh, dweight, dbias = layer_norm_backward(g, h, weight, mean, rstd, n)
    if grad_sum is not None:
        dh = np.add(_compute(dh), _compute(grad_sum)).astype(h.dtype, copy=False)
    return dh, dweight, dbias


def rms_norm(x: BackendArray, weight: BackendArray | None, n: int, eps: float) -> tuple[BackendArray, BackendArray]:
    """x / sqrt(mean(x^2 over the last ``n`` dims) + eps) * weight -> (y, rstd); rstd keeps x's dims (size 1 there)."""
    declared.rms_norm(x, weight, n, eps)
    xx = _compute(x)
    axes = tuple(range(x.ndim - n, x.ndim))
    count = math.prod(x.shape[x.ndim - n :])
    mean_square = np.add.reduce(xx * xx, axis=axes, keepdims=True)
    mean_square /= count
    mean_square += eps
    rstd = 1.0 / np.sqrt(mean_square)
    y = xx * rstd
    if weight is not None:
        y *= _compute(weight)
    stat_dt = np.float64 if x.dtype == np.float64 else np.float32
    return y.astype(x.dtype, copy=False), rstd.astype(stat_dt)


def rms_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, rstd: BackendArray, n: int
) -> tuple[BackendArray, BackendArray | None]:
    """-> (dx, dweight (None without a weight), in the weight's dtype)."""
    declared.rms_norm_backward(g, x, weight, rstd, n)
    gg, xx = _compute(g), _compute(x)
    axes = tuple(range(x.ndim - n, x.ndim))
    lead = tuple(range(x.ndim - n))
    count = math.prod(x.shape[x.ndim - n :])
    xhat = xx * rstd
    dweight = np.add.reduce(gg * xhat, axis=lead).astype(weight.dtype) if weight is not None else None
    gx = gg * _compute(weight) if weight is not None else gg
    # dx = rstd * (gx - xhat * mean(gx * xhat))
    proj = np.add.reduce(gx * xhat, axis=axes, keepdims=True)
    proj /= count
    xhat *= proj
    dx = gx - xhat
    dx *= rstd
    return dx.astype(x.dtype, copy=False), dweight


# batch norm: statistics per channel (dim 1) over every other dim
def _per_channel(a, ndim):
    """(C,) -> (1, C, 1, ...): broadcast over an input of ``ndim`` dims."""
    return a.reshape((1, -1) + (1,) * (ndim - 2))


def _channel_sums(a3, b3=None):
    """Per-channel sums of a3 (N, C, S), or of a3 * b3 without forming it: BLAS products (a
    matrix-vector product, row dot products) over each (n, c) row, then over N: 2-3x faster than
    NumPy's reduction over axes (0, 2)."""
    if b3 is None:
        return (a3 @ np.ones(a3.shape[2], a3.dtype)).sum(axis=0)
    return np.vecdot(a3, b3).sum(axis=0)


# The host module's batch norm, forward and backward (kernels/host/norm.cpp; None: NumPy's below,
# the reference it is tested against): three passes over x for the forward and two for the backward
# where NumPy makes five and eight, 2-3x faster at a CIFAR ResNet's or a DCGAN's sizes.
_NATIVE_BATCH_NORM = _native._C if hasattr(_native._C, "cpu_batch_norm") else None


def _native_batch_norm(*arrays):
    """The host module where it serves these arrays (those not None: one float32/float64 dtype, all
    C-contiguous), else None."""
    first = arrays[0]
    if _NATIVE_BATCH_NORM is None or not (first.dtype == _F32 or first.dtype == _F64):
        return None
    for a in arrays:
        if a is not None and (a.dtype != first.dtype or not a.flags.c_contiguous):
            return None
    return _NATIVE_BATCH_NORM


def batch_norm(
    x: BackendArray, weight: BackendArray | None, bias: BackendArray | None, eps: float
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """Normalise each channel (dim 1) of x (N, C, *) with its batch statistics -> (y, mean (C,), rstd (C,))."""
    declared.batch_norm(x, weight, bias, eps)
    native = _native_batch_norm(x, weight, bias)
    if native is not None:
        return native.cpu_batch_norm(x, weight, bias, eps)
    xx = _compute(x)
    n, c = x.shape[:2]
    count = x.size // c if c else 1
    x3 = xx.reshape(n, c, -1)
    # fused passes: the mean, x - mean into the output, its squares' sums, then one scale and one
    # shift per channel (rstd folded into the weight)
    mean = _channel_sums(x3) / count
    y = np.subtract(x3, mean[:, None])
    rstd = 1.0 / np.sqrt(_channel_sums(y, y) / count + eps)
    scale = rstd if weight is None else rstd * _compute(weight)
    y *= scale.astype(y.dtype, copy=False)[:, None]
    if bias is not None:
        y += _compute(bias).astype(y.dtype, copy=False)[:, None]
    stat_dt = np.float64 if x.dtype == np.float64 else np.float32
    return y.reshape(x.shape).astype(x.dtype, copy=False), mean.astype(stat_dt), rstd.astype(stat_dt)


def batch_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, mean: BackendArray, rstd: BackendArray
) -> tuple[BackendArray, BackendArray | None, BackendArray]:
    """-> (dx, dweight (None without a weight), dbias)."""
    declared.batch_norm_backward(g, x, weight, mean, rstd)
    native = _native_batch_norm(x, g, weight, mean, rstd)
    if native is not None:
        return native.cpu_batch_norm_backward(g, x, weight, mean, rstd)
    gg, xx = _compute(g), _compute(x)
    n, c = x.shape[:2]
    count = x.size // c if c else 1
    g3, xc = gg.reshape(n, c, -1), np.subtract(xx.reshape(n, c, -1), mean.astype(xx.dtype)[:, None])
    rstd = rstd.astype(xx.dtype)
    dbias = _channel_sums(g3)
    gxc = _channel_sums(g3, xc)  # sum of g * (x - mean): dweight = rstd * gxc
    # dx = k (g - mean(g) - xhat mean(g xhat)) with k = rstd * weight, as g * k - (xc * a + b) per channel
    k = rstd if weight is None else rstd * _compute(weight).astype(xx.dtype)
    xc *= (k * rstd * rstd * gxc / count)[:, None]
    xc += (k * dbias / count)[:, None]
    dx = np.multiply(g3, k[:, None])
    dx -= xc
    param_dt = weight.dtype if weight is not None else g.dtype
    return (
        dx.reshape(x.shape).astype(x.dtype, copy=False),
        None if weight is None else (rstd * gxc).astype(param_dt),
        dbias.astype(param_dt),
    )


# group norm: (N, C, *) as (N, G, C / G, S), statistics per (n, group), affine per channel
def _group_rows(x, groups):
    return x.reshape(x.shape[0], groups, x.shape[1] // groups * math.prod(x.shape[2:]))


def group_norm(
    x: BackendArray, weight: BackendArray | None, bias: BackendArray | None, groups: int, eps: float
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """Normalise each of ``groups`` channel groups of x (N, C, *) per sample, then scale and shift per
    channel -> (y, mean (N, groups), rstd (N, groups))."""
    declared.group_norm(x, weight, bias, groups, eps)
    native = _native_normalize(x, weight, bias, x.shape[0] * groups, groups, math.prod(x.shape[2:]), eps)
    if native is not None:
        y, mean, rstd = native
        return y, mean.reshape(x.shape[0], groups), rstd.reshape(x.shape[0], groups)
    rows = _compute(_group_rows(x, groups))
    mean = np.mean(rows, axis=2, keepdims=True)
    centered = rows - mean
    rstd = 1.0 / np.sqrt(np.mean(centered * centered, axis=2, keepdims=True) + eps)
    y = (centered * rstd).reshape(x.shape)
    if weight is not None:
        y = y * _per_channel(_compute(weight), x.ndim)
    if bias is not None:
        y = y + _per_channel(_compute(bias), x.ndim)
    stat_dt = np.float64 if x.dtype == np.float64 else np.float32
    return y.astype(x.dtype, copy=False), mean[:, :, 0].astype(stat_dt), rstd[:, :, 0].astype(stat_dt)


def group_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, mean: BackendArray, rstd: BackendArray, groups: int
) -> tuple[BackendArray, BackendArray | None, BackendArray]:
    """-> (dx, dweight (None without a weight), dbias), the parameters' in the weight's dtype (g's without one)."""
    declared.group_norm_backward(g, x, weight, mean, rstd, groups)
    rows = _compute(_group_rows(x, groups))
    gg = _compute(g)
    axes = (0,) + tuple(range(2, x.ndim))
    rstd_b = rstd[:, :, None]
    xhat = ((rows - mean[:, :, None]) * rstd_b).reshape(x.shape)
    dbias = np.sum(gg, axis=axes)
    dweight = np.sum(gg * xhat, axis=axes)
    gx = (gg * _per_channel(_compute(weight), x.ndim) if weight is not None else gg).reshape(rows.shape)
    xr = xhat.reshape(rows.shape)
    dx = rstd_b * (gx - np.mean(gx, axis=2, keepdims=True) - xr * np.mean(gx * xr, axis=2, keepdims=True))
    param_dt = weight.dtype if weight is not None else g.dtype
    return (
        dx.reshape(x.shape).astype(x.dtype, copy=False),
        None if weight is None else dweight.astype(param_dt),
        dbias.astype(param_dt),
    )


# The host module's running-statistics update (kernels/host/norm_running.cpp); None: the ops' path
_RUNNING = getattr(_native._C, "cpu_batch_norm_running", None)


def _running_array(running, dtype):
    return running is None or (
        running.__class__ is np.ndarray
        and running.dtype == dtype
        and running.ndim == 1
        and running.flags.c_contiguous
        and running.flags.writeable
    )


def running_update(
    running_mean: BackendArray | None,
    running_var: BackendArray | None,
    mean: BackendArray,
    rstd: BackendArray,
    momentum: float,
    eps: float,
    var_factor: float,
) -> bool:
    """A training batch norm's running statistics updated in place from its batch's ``mean`` and ``rstd``
    (C,), as its ops compute it (ops/norm.py's native_batch_norm): running_mean <- (1 - momentum)
    running_mean + momentum mean, running_var <- (1 - momentum) running_var + var_factor (1 / rstd^2 -
    eps), in one host call. Not a primitive of the seam: the ops' CPU shortcut, True where it took the
    arrays (C-contiguous writeable ones of mean's dtype, C of them), False where the ops compute it."""
    dtype = mean.dtype
    if not (
        _RUNNING is not None
        and mean.__class__ is np.ndarray
        and rstd.__class__ is np.ndarray
        and (dtype == _F32 or dtype == _F64)
        and rstd.dtype == dtype
        and mean.ndim == 1
        and rstd.shape == mean.shape
        and _running_array(running_mean, dtype)
        and _running_array(running_var, dtype)
        and (running_mean is None or running_mean.shape == mean.shape)
        and (running_var is None or running_var.shape == mean.shape)
    ):
        return False
    _RUNNING(running_mean, running_var, mean, rstd, momentum, eps, var_factor)
    return True
