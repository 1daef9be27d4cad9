"""The CPU backend's resampling: nearest and bilinear interpolation and padding, forward and backward
(kernels/resample.cu on CUDA).

Every output element reads input positions a rule picks; the rules are computed here exactly as the
kernels compute them (source positions in float32, or float64 for float64 bilinear, each product and sum
rounded on its own), so both backends pick the same pixels. Each op is separable: a map along each dim
(output o reads input index[o] with a weight), applied as a product with its dense matrix where the dim
is small (one BLAS call) and as gathers where it is large; the backwards apply the transposed maps
(nearest and pad copies stay exact gathers forward).
"""

from __future__ import annotations

import functools

import numpy as np

from .._padding import circular_period, pad_plan
from ..memo import remember
from ..seam import Scalar, Shape, declared
from ._common import BackendArray, _compute

__all__ = [
    "interpolate_nearest",
    "interpolate_nearest_backward",
    "interpolate_bilinear",
    "interpolate_bilinear_backward",
    "pad",
    "pad_backward",
]


@functools.lru_cache(maxsize=256)  # the same few per training run: made once, shared read-only
def _nearest_sources(n, out, scale, exact, wide):
    """Input position of each of ``out`` output positions, as PyTorch's CPU kernels compute it: floor(o *
    scale) with the scale and product in float32 (float64 for float64 data, ``wide``), or for
    nearest-exact floor((o + 0.5) * scale) with the product in float64; rounded to float32 before the
    floor."""
    scale = np.float64(scale if wide else np.float32(scale))
    o = np.arange(out)
    if exact:
        src = ((o + 0.5) * scale).astype(np.float32)
    elif wide:
        src = (o * scale).astype(np.float32)
    else:
        src = o.astype(np.float32) * np.float32(scale)
    sources = np.minimum(np.floor(src).astype(np.int64), n - 1)
    sources.flags.writeable = False
    return sources


def _linear_taps(n, out, scale, align_corners, acc):
    """(i0, i1, l0, l1) per output position: PyTorch's source position in ``acc`` (float32 or float64)."""
    scale = acc.type(scale)
    o = np.arange(out).astype(acc)
    if align_corners:
        src = scale * o
    else:
        src = np.maximum(scale * (o + acc.type(0.5)) + acc.type(-0.5), acc.type(0))
    i0 = np.minimum(src.astype(np.int64), n - 1)
    l1 = np.minimum(src - i0.astype(acc), acc.type(1))
    i1 = i0 + (i0 + 1 < n)
    return i0, i1, acc.type(1) - l1, l1


# above this many (outputs x inputs) along a dim, a dense matrix of the map costs more than gathering
_DENSE_LIMIT = 1 << 16


def _along_dim(weight, axis, ndim):
    shape = [1] * ndim
    shape[axis] = len(weight)
    return weight.reshape(shape)


def _map_matrix(taps, m, n, dtype):
    """(m, n): output o of a dim of m reads input index[o] with weight[o], for each (index, weight) tap
    (weight None: 1)."""
    matrix = np.zeros((m, n), dtype)
    rows = np.arange(m)
    for index, weight in taps:
        np.add.at(matrix, (rows, index), 1 if weight is None else weight)
    return matrix


def _apply_matrix(a, axis, matrix):
    """a with ``matrix`` (new size, old size) applied along ``axis``, as BLAS products (NumPy's batched
    matmul would not batch its BLAS calls)."""
    if axis == a.ndim - 1:
        return (a.reshape(-1, a.shape[-1]) @ matrix.T).reshape(a.shape[:-1] + (matrix.shape[0],))
    return np.moveaxis(np.tensordot(matrix, a, axes=([1], [axis])), 0, axis)


def _resample_dim(a, axis, taps, m):
    """The m outputs along ``axis``: sum over taps of weight[o] * a[..., index[o], ...]."""
    n = a.shape[axis]
    if m * n <= _DENSE_LIMIT:
        return _apply_matrix(a, axis, _map_matrix(taps, m, n, a.dtype))
    out = 0
    for index, weight in taps:
        term = np.take(a, index, axis)
        out = out + (term if weight is None else term * _along_dim(weight, axis, a.ndim))
    return out


def _resample_dim_backward(g, axis, taps, n):
    """The transpose of ``_resample_dim``: each of the n inputs sums the gradients of the outputs that read
    it, weighted (for large dims: the outputs sorted by index and their runs summed by np.add.reduceat)."""
    m = g.shape[axis]
    if m * n <= _DENSE_LIMIT:
        return _apply_matrix(g, axis, _map_matrix(taps, m, n, g.dtype).T)
    out = 0
    for index, weight in taps:
        part = g if weight is None else g * _along_dim(weight, axis, g.ndim)
        if np.any(index[1:] < index[:-1]):
            order = np.argsort(index, kind="stable")
            part, index = np.take(part, order, axis), index[order]
        shape = list(g.shape)
        shape[axis] = n
        sums = np.zeros(shape, g.dtype)
        if m:
            targets, starts = np.unique(index, return_index=True)
            key = [slice(None)] * g.ndim
            key[axis] = targets
            sums[tuple(key)] = np.add.reduceat(part, starts, axis=axis)
        out = out + sums
    return out


def interpolate_nearest(x: BackendArray, out_size: Shape, scales: tuple[float, float], exact: bool) -> BackendArray:
    """x (N, C, H, W) of any dtype resized to ``out_size`` (Ho, Wo): output (oh, ow) copies input
    (min(floor(oh * scale_h), H - 1), ...), or floor((o + 0.5) * scale) with ``exact`` (nearest-exact);
    ``scales`` (source steps per output position) and products in float32 (float64 data: float64)."""
    declared.interpolate_nearest(x, out_size, scales, exact)
    n, c, h, w = x.shape
    ho, wo = (int(s) for s in out_size)
    if n * c * ho * wo == 0:
        return np.zeros((n, c, ho, wo), x.dtype)
    wide = x.dtype == np.float64
    rows = _nearest_sources(h, ho, scales[0], exact, wide)
    cols = _nearest_sources(w, wo, scales[1], exact, wide)
    return x.take(rows, 2).take(cols, 3)


def interpolate_nearest_backward(
    g: BackendArray, input_shape: Shape, scales: tuple[float, float], exact: bool
) -> BackendArray:
    """interpolate_nearest's gradient for an input of ``input_shape`` from the output's ``g``."""
    declared.interpolate_nearest_backward(g, input_shape, scales, exact)
    n, c, h, w = (int(s) for s in input_shape)
    ho, wo = g.shape[2:]
    if n * c * h * w == 0 or g.size == 0:
        return np.zeros((n, c, h, w), g.dtype)
    gc = _compute(g)
    wide = g.dtype == np.float64
    dx = _resample_dim_backward(gc, 2, [(_nearest_sources(h, ho, scales[0], exact, wide), None)], h)
    dx = _resample_dim_backward(dx, 3, [(_nearest_sources(w, wo, scales[1], exact, wide), None)], w)
    return np.ascontiguousarray(dx.astype(g.dtype, copy=False))


def _acc(dtype):
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def interpolate_bilinear(
    x: BackendArray, out_size: Shape, scales: tuple[float, float], align_corners: bool
) -> BackendArray:
    """Bilinear interpolation of floating point x (N, C, H, W) to ``out_size``: PyTorch's source positions
    (scale * o with ``align_corners``, else max(scale * (o + 0.5) - 0.5, 0)) in float32 (float64 for
    float64 x)."""
    declared.interpolate_bilinear(x, out_size, scales, align_corners)
    n, c, h, w = x.shape
    ho, wo = (int(s) for s in out_size)
    if n * c * ho * wo == 0:
        return np.zeros((n, c, ho, wo), x.dtype)
    acc = _acc(x.dtype)
    h0, h1, hl0, hl1 = _linear_taps(h, ho, scales[0], align_corners, acc)
    w0, w1, wl0, wl1 = _linear_taps(w, wo, scales[1], align_corners, acc)
    xc = _compute(x)
    # along W first (the rows the kernel calls upper and lower), then their blend along H
    out = _resample_dim(_resample_dim(xc, 3, [(w0, wl0), (w1, wl1)], wo), 2, [(h0, hl0), (h1, hl1)], ho)
    return out.astype(x.dtype, copy=False)


def interpolate_bilinear_backward(
    g: BackendArray, input_shape: Shape, scales: tuple[float, float], align_corners: bool
) -> BackendArray:
    """interpolate_bilinear's gradient for an input of ``input_shape`` from the output's ``g``."""
    declared.interpolate_bilinear_backward(g, input_shape, scales, align_corners)
    n, c, h, w = (int(s) for s in input_shape)
    ho, wo = g.shape[2:]
    if n * c * h * w == 0 or g.size == 0:
        return np.zeros((n, c, h, w), g.dtype)
    acc = _acc(g.dtype)
    h0, h1, hl0, hl1 = _linear_taps(h, ho, scales[0], align_corners, acc)
    w0, w1, wl0, wl1 = _linear_taps(w, wo, scales[1], align_corners, acc)
    gc = _compute(g)
    rows = _resample_dim_backward(gc, 2, [(h0, hl0), (h1, hl1)], h)
    dx = _resample_dim_backward(rows, 3, [(w0, wl0), (w1, wl1)], w)
    return np.ascontiguousarray(dx.astype(g.dtype, copy=False))


def _pad_sources(n, before, after, mode):
    """The input position each output position reads along one dim (-1: the constant)."""
    j = np.arange(-before, n + after)
    inside = (j >= 0) & (j < n)
    if mode == "constant":
        return np.where(inside, j, -1)
    if mode == "reflect":
        return np.where(j < 0, -j, np.where(j >= n, 2 * (n - 1) - j, j))
    if mode == "replicate":
        return np.clip(j, 0, n - 1)
    period = circular_period(n, before, after)
    return np.where(j < 0, j + period, np.where(j >= n, j - period, j))


def _overlap(plan):
    """Slices of the input and the output that hold the same elements (constant padding)."""
    src, dst = {}, {}
    for dim, n, before, after in plan:
        src[dim] = slice(max(-before, 0), n - max(-after, 0))
        dst[dim] = slice(max(before, 0), max(before, 0) + max(n - max(-before, 0) - max(-after, 0), 0))
    return src, dst


def _key(ndim, slices):
    return tuple(slices.get(d, slice(None)) for d in range(ndim))


# (input shape, pads) -> (output shape, input key, output key) of constant padding
_CONSTANT_PADS: dict[tuple[Shape, Shape], tuple[Shape, tuple[slice, ...], tuple[slice, ...]]] = {}
_CONSTANT_PADS_KEPT = 256


def pad(x: BackendArray, pads: Shape, mode: str, value: Scalar) -> BackendArray:
    """x (any dtype) with its last k = len(pads) // 2 <= 3 dims padded by (before, after) pairs, ``pads``
    holding them for those dims in order (negative amounts crop): outside the input ``value`` ('constant'),
    the mirror image without the edge repeated ('reflect'), the edge ('replicate') or the other end
    ('circular')."""
    if mode == "constant":
        try:  # a program pads a few shapes: each one's plan is worked out once (3 us of Python a call)
            out_shape, src, dst = _CONSTANT_PADS[x.shape, pads]
        except (KeyError, TypeError):  # (TypeError: pads in a list)
            plan, out_shape = pad_plan("pad", x.shape, pads, mode)
            src, dst = (_key(x.ndim, part) for part in _overlap(plan))
            if pads.__class__ is tuple:
                remember(_CONSTANT_PADS, (x.shape, pads), (out_shape, src, dst), _CONSTANT_PADS_KEPT)
        out = np.empty(out_shape, x.dtype)
        out.fill(value)  # (np.full's Python wrapper doubles the cost on a small array)
        out[dst] = x[src]
        return out
    plan, out_shape = pad_plan("pad", x.shape, pads, mode)
    out = x.copy()  # a new array even when no dim is padded
    for dim, n, before, after in plan:
        out = np.take(out, _pad_sources(n, before, after, mode), dim)
    return out


def pad_backward(g: BackendArray, input_shape: Shape, pads: Shape, mode: str) -> BackendArray:
    """pad's gradient for an input of ``input_shape`` from the output's floating point ``g``: each input
    element sums every output gradient that read it."""
    declared.pad_backward(g, input_shape, pads, mode)
    input_shape = tuple(int(s) for s in input_shape)
    plan, out_shape = pad_plan("pad_backward", input_shape, pads, mode)
    if mode == "constant":
        dx = np.zeros(input_shape, g.dtype)
        src, dst = _overlap(plan)
        dx[_key(g.ndim, src)] = g[_key(g.ndim, dst)]
        return dx
    dx = _compute(g)
    for dim, n, before, after in plan:
        dx = _resample_dim_backward(dx, dim, [(_pad_sources(n, before, after, mode), None)], n)
    return np.ascontiguousarray(dx.astype(g.dtype, copy=False))
