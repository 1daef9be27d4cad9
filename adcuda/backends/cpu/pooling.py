"""The CPU backend's max and average pooling, forward and backward (kernels/pooling.cu on CUDA).

Indices are PyTorch's: the flat position (h * W + w) of each maximum within its (n, c) plane, so one
backward serves fixed windows and adaptive ones. A NaN in a window is its maximum (PyTorch's rule:
the last NaN of the window); ties go to the first position in row-major window order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import _native
from ..seam import Shape, declared
from ._common import _F32, _F64, BackendArray, _compute

__all__ = [
    "max_pool2d",
    "adaptive_max_pool2d",
    "max_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
]


# The host module's forwards (kernels/host/pooling.cpp; None: NumPy's, the reference they are tested against)
_NATIVE = _native._C if hasattr(_native._C, "cpu_max_pool2d") else None


def plain_pooling(name: str) -> Callable[..., Any] | None:
    """The host module's forward ``cpu_<name>`` (max_pool2d, avg_pool2d, adaptive_max_pool2d,
    adaptive_avg_pool2d) for the pooling ops' direct lanes (ops/pooling.py), None without a host module:
    it takes a C-contiguous float32/float64 (N, C, H, W) array of no zero dim and the primitive's
    arguments after the op's checks (avg_pool2d: an int divisor_override, 0 for none; no zero output
    size), as the forwards above pass them, skipping the seam's checks and the NumPy path's choice."""
    return None if _NATIVE is None else getattr(_NATIVE, "cpu_" + name)


def _native_for(x):
    """The native module when it pools ``x`` (a C-contiguous float32/float64 array), else None."""
    if _NATIVE is not None and (x.dtype == _F32 or x.dtype == _F64) and x.flags.c_contiguous:
        return _NATIVE
    return None


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def max_pool2d(
    x: BackendArray, kernel: Shape, stride: Shape, padding: Shape, dilation: Shape, out_size: Shape
) -> tuple[BackendArray, BackendArray]:
    """Max over windows of x (N, C, H, W) padded by ``padding`` (never chosen) -> (values (N, C, Ho, Wo),
    int64 indices); ``out_size`` (Ho, Wo) is the op's (ceil_mode decides it), windows may run past the
    padded input's end."""
    declared.max_pool2d(x, kernel, stride, padding, dilation, out_size)
    native = _native_for(x)
    if native is not None:
        return native.cpu_max_pool2d(x, kernel, stride, padding, dilation, out_size)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    ho, wo = out_size
    # pad so that every window, the last ones of ceil_mode included, lies inside the array
    extra_h = max(0, (ho - 1) * sh + dh * (kh - 1) + 1 - (h + 2 * ph))
    extra_w = max(0, (wo - 1) * sw + dw * (kw - 1) + 1 - (w + 2 * pw))
    xc = _compute(x)
    lowest = _lowest(xc.dtype)
    xp = (
        xc
        if not (ph or pw or extra_h or extra_w)
        else np.pad(xc, ((0, 0), (0, 0), (ph, ph + extra_h), (pw, pw + extra_w)), constant_values=lowest)
    )
    taps = [
        xp[:, :, i * dh : i * dh + sh * (ho - 1) + 1 : sh, j * dw : j * dw + sw * (wo - 1) + 1 : sw]
        for i in range(kh)
        for j in range(kw)
    ]
    # whole-array passes over the kernel taps' strided views, in place (a few taps; a window copy and
    # an argmax along a short last axis cost several times more): the maximum (NaN propagates), then
    # the first tap that holds it, then PyTorch's rule for NaN (the window's last NaN)
    best = np.array(taps[0], copy=True)
    for tap in taps[1:]:
        np.maximum(best, tap, out=best)
    # the first tap that holds the maximum = the number of leading taps that do not (boolean passes
    # and adds: a masked copy per tap costs ten times more)
    last = len(taps) - 1
    chosen = np.zeros(best.shape, np.uint8 if last < 256 else np.int64)
    missed, differs = np.empty(best.shape, bool), np.empty(best.shape, bool)
    for t in range(last):
        if t == 0:
            np.not_equal(taps[0], best, out=missed)
        else:
            np.not_equal(taps[t], best, out=differs)
            missed &= differs
        np.add(chosen, missed.view(np.uint8), out=chosen, casting="unsafe")
    # one pass tells whether a NaN or the lowest value can be there at all (the sum is then not finite)
    unusual = xc.dtype.kind != "f" or not np.isfinite(np.add.reduce(best, axis=None))
    if unusual and xc.dtype.kind == "f" and np.isnan(best).any():
        for t, tap in enumerate(taps):
            np.copyto(chosen, t, where=np.isnan(tap))
    rows = np.arange(ho)[:, None] * sh - ph
    cols = np.arange(wo)[None, :] * sw - pw
    tap_offsets = np.array([t // kw * dh * w + t % kw * dw for t in range(last + 1)], np.int64)
    index = np.take(tap_offsets, chosen)
    index += rows * w + cols
    # a window of nothing but the lowest value: PyTorch names its first position inside the input
    if unusual:
        only_lowest = best == lowest
        if only_lowest.any():
            first_row = rows + (np.maximum(-rows, 0) + dh - 1) // dh * dh
            first_col = cols + (np.maximum(-cols, 0) + dw - 1) // dw * dw
            np.copyto(index, np.broadcast_to(first_row * w + first_col, index.shape), where=only_lowest)
    return best.astype(x.dtype, copy=False), index.astype(np.int64, copy=False)


def _adaptive_bounds(size, out):
    starts = (np.arange(out) * size) // out
    ends = -((-(np.arange(out) + 1) * size) // out)
    return starts, ends


def adaptive_max_pool2d(x: BackendArray, out_size: Shape) -> tuple[BackendArray, BackendArray]:
    """Max over PyTorch's adaptive windows (rows floor(i*H/Ho) to ceil((i+1)*H/Ho)) -> (values, indices)."""
    declared.adaptive_max_pool2d(x, out_size)
    n, c, h, w = x.shape
    ho, wo = out_size
    native = _native_for(x)
    if native is not None and n * c * ho * wo * h * w:
        return native.cpu_adaptive_max_pool2d(x, out_size)
    values = np.empty((n, c, ho, wo), x.dtype)
    indices = np.empty((n, c, ho, wo), np.int64)
    xc = _compute(x)
    for i, (h0, h1) in enumerate(zip(*_adaptive_bounds(h, ho))):
        for j, (w0, w1) in enumerate(zip(*_adaptive_bounds(w, wo))):
            window = xc[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            tap = np.argmax(window, axis=-1) if window.size else np.zeros((n, c), np.int64)
            if window.dtype.kind == "f" and window.size:  # PyTorch's rule: the window's last NaN
                nan = np.isnan(window)
                last_nan = window.shape[-1] - 1 - np.argmax(nan[..., ::-1], axis=-1)
                tap = np.where(nan.any(axis=-1), last_nan, tap)
            values[:, :, i, j] = np.take_along_axis(window, tap[..., None], axis=-1)[..., 0] if window.size else 0
            indices[:, :, i, j] = (h0 + tap // (w1 - w0)) * w + w0 + tap % (w1 - w0)
    return values, indices


def max_pool2d_backward(g: BackendArray, indices: BackendArray, input_shape: Shape) -> BackendArray:
    """Each output gradient added to the input position its index names -> dx of ``input_shape``."""
    declared.max_pool2d_backward(g, indices, input_shape)
    input_shape = tuple(int(s) for s in input_shape)
    n, c, h, w = input_shape
    plane = h * w
    flat = indices.reshape(n * c, g.shape[2] * g.shape[3]) + (np.arange(n * c) * plane)[:, None]
    dx = np.bincount(flat.ravel(), weights=_compute(g).ravel(), minlength=n * c * plane)
    return dx.reshape(input_shape).astype(g.dtype, copy=False)


# ------------------------------------------------------------------------------------------------
# average pooling: fixed windows as sums of the zero-padded input's strided views (the backward adds the
# divided gradient back through the same views); adaptive windows as one averaging matrix per dim
def _avg_layout(size, out, k, s, p, count_include_pad):
    """Per output along one dim: its divisor share, and the padding after for the last windows."""
    starts = np.arange(out) * s - p
    ends = np.minimum(starts + k, size + p)
    counts = ends - starts if count_include_pad else np.minimum(ends, size) - np.maximum(starts, 0)
    return counts, max(0, (out - 1) * s + k - (size + 2 * p))


def _avg_plan(input_shape, out_size, kernel, stride, padding, count_include_pad, divisor_override):
    """-> (the divisor of every window (Ho, Wo), per-dim (before, after) padding); the same few plans
    serve a whole training run, so they are made once (a dozen small NumPy calls cost more than the
    pooling of a small batch)."""
    return _cached_avg_plan(
        tuple(int(s) for s in input_shape[2:]),
        tuple(int(o) for o in out_size),
        tuple(int(k) for k in kernel),
        tuple(int(s) for s in stride),
        tuple(int(p) for p in padding),
        bool(count_include_pad),
        None if divisor_override is None else float(divisor_override),
    )


@functools.lru_cache(maxsize=256)
def _cached_avg_plan(spatial, out_size, kernel, stride, padding, count_include_pad, divisor_override):
    layouts = [
        _avg_layout(size, o, k, s, p, count_include_pad)
        for size, o, k, s, p in zip(spatial, out_size, kernel, stride, padding)
    ]
    divisor = (
        np.full(out_size, divisor_override)
        if divisor_override is not None
        else np.multiply.outer(layouts[0][0], layouts[1][0]).astype(np.float64)
    )
    divisor.flags.writeable = False  # shared by every call with this plan
    return divisor, tuple((p, p + extra) for p, (_, extra) in zip(padding, layouts))


def _padded(a, pads):
    """``a`` with zeros around its last two dims by ``pads``; ``a`` itself when there are none
    (np.pad costs more than a small pooling)."""
    if not any(before or after for before, after in pads):
        return a
    (top, bottom), (left, right) = pads
    out = np.zeros(a.shape[:2] + (a.shape[2] + top + bottom, a.shape[3] + left + right), a.dtype)
    out[:, :, top : top + a.shape[2], left : left + a.shape[3]] = a
    return out


def _taps(a, kernel, stride, out_size):
    ho, wo = out_size
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            yield a[:, :, i : i + stride[0] * (ho - 1) + 1 : stride[0], j : j + stride[1] * (wo - 1) + 1 : stride[1]]


def avg_pool2d(
    x: BackendArray,
    kernel: Shape,
    stride: Shape,
    padding: Shape,
    out_size: Shape,
    count_include_pad: bool,
    divisor_override: int | None,
) -> BackendArray:
    """Window means of x (N, C, H, W): each window's sum over the input it covers (zero padding), divided by
    ``divisor_override`` if given, else by its size clipped to the padded input (``count_include_pad``) or to
    the input; ``out_size`` (Ho, Wo) is the op's (ceil_mode decides it)."""
    declared.avg_pool2d(x, kernel, stride, padding, out_size, count_include_pad, divisor_override)
    n, c = x.shape[:2]
    ho, wo = out_size
    if not (n and c and ho and wo):
        return np.zeros((n, c, int(ho), int(wo)), x.dtype)
    native = _native_for(x)
    if native is not None and (divisor_override is None or divisor_override.__class__ is int):
        override = 0 if divisor_override is None else divisor_override  # the host module's 0: none
        return native.cpu_avg_pool2d(x, kernel, stride, padding, out_size, count_include_pad, override)
    out_size = (int(ho), int(wo))
    divisor, pads = _avg_plan(x.shape, out_size, kernel, stride, padding, count_include_pad, divisor_override)
    xp = _padded(_compute(x), pads)
    total = np.zeros((n, c) + out_size, xp.dtype)
    for tap in _taps(xp, kernel, stride, out_size):
        total += tap
    total /= divisor
    return total.astype(x.dtype, copy=False)


def avg_pool2d_backward(
    g: BackendArray,
    input_shape: Shape,
    kernel: Shape,
    stride: Shape,
    padding: Shape,
    count_include_pad: bool,
    divisor_override: int | None,
) -> BackendArray:
    """avg_pool2d's gradient for an input of ``input_shape`` from the output's ``g`` (N, C, Ho, Wo)."""
    declared.avg_pool2d_backward(g, input_shape, kernel, stride, padding, count_include_pad, divisor_override)
    input_shape = tuple(int(s) for s in input_shape)
    out_size = tuple(g.shape[2:])
    if g.size == 0:
        return np.zeros(input_shape, g.dtype)
    divisor, pads = _avg_plan(input_shape, out_size, kernel, stride, padding, count_include_pad, divisor_override)
    share = _compute(g) / divisor
    padded = tuple(s + a + b for s, (a, b) in zip(input_shape[2:], pads))
    dxp = np.zeros(input_shape[:2] + padded, share.dtype)
    for tap in _taps(dxp, kernel, stride, out_size):
        tap += share
    (ph, _), (pw, _) = pads
    dx = dxp[:, :, ph : ph + input_shape[2], pw : pw + input_shape[3]]
    return np.ascontiguousarray(dx).astype(g.dtype, copy=False)


def _adaptive_matrices(sizes, out_size, dtype):
    """One (out, size) averaging matrix per spatial dim: row o averages window o."""
    return [_adaptive_matrix(int(size), int(out), np.dtype(dtype)) for size, out in zip(sizes, out_size)]


@functools.lru_cache(maxsize=256)
def _adaptive_matrix(size, out, dtype):
    """Made once per (size, out, dtype): a Python loop over the windows costs more than the pooling."""
    m = np.zeros((out, size), dtype)
    for o, (start, end) in enumerate(zip(*_adaptive_bounds(size, out))):
        m[o, start:end] = 1.0 / (end - start)
    m.flags.writeable = False  # shared by every call of this shape
    return m


def adaptive_avg_pool2d(x: BackendArray, out_size: Shape) -> BackendArray:
    """Means over PyTorch's adaptive windows (rows floor(i*H/Ho) to ceil((i+1)*H/Ho)) -> (N, C, Ho, Wo)."""
    declared.adaptive_avg_pool2d(x, out_size)
    n, c, h, w = x.shape
    ho, wo = (int(o) for o in out_size)
    if n * c * ho * wo == 0:
        return np.zeros((n, c, ho, wo), x.dtype)
    native = _native_for(x)
    if native is not None and h * w:
        return native.cpu_adaptive_avg_pool2d(x, (ho, wo))
    xc = _compute(x)
    rows, cols = _adaptive_matrices((h, w), (ho, wo), xc.dtype)
    return (rows @ xc @ cols.T).astype(x.dtype, copy=False)


def adaptive_avg_pool2d_backward(g: BackendArray, input_shape: Shape) -> BackendArray:
    """adaptive_avg_pool2d's gradient for an input of ``input_shape`` from the output's ``g``."""
    declared.adaptive_avg_pool2d_backward(g, input_shape)
    input_shape = tuple(int(s) for s in input_shape)
    if g.size == 0:
        return np.zeros(input_shape, g.dtype)
    gc = _compute(g)
    rows, cols = _adaptive_matrices(input_shape[2:], g.shape[2:], gc.dtype)
    return (rows.T @ gc @ cols).astype(g.dtype, copy=False)
