"""The CUDA backend's resampling (kernels/resample.cu), with the CPU backend's signatures, checks and
results: one thread per output element for the forwards; the backwards in gather form, one thread per
input element summing the output gradients that read it in a fixed order (no atomics: the same bits on
every run). Source positions are computed as the CPU backend computes them, so both pick the same pixels.
"""

from __future__ import annotations

from ... import _native
from .._padding import pad_plan
from ..seam import Scalar, Shape, declared
from ._common import BackendArray, dense

__all__ = [
    "interpolate_nearest",
    "interpolate_nearest_backward",
    "interpolate_bilinear",
    "interpolate_bilinear_backward",
    "pad",
    "pad_backward",
]


def interpolate_nearest(x: BackendArray, out_size: Shape, scales: tuple[float, float], exact: bool) -> BackendArray:
    """x (N, C, H, W) of any dtype resized to ``out_size`` (Ho, Wo): output (oh, ow) copies input
    (min(floor(oh * scale_h), H - 1), ...), or floor((o + 0.5) * scale) with ``exact`` (nearest-exact);
    ``scales`` (source steps per output position) and products in float32 (float64 data: float64)."""
    declared.interpolate_nearest(x, out_size, scales, exact)
    ho, wo = (int(s) for s in out_size)
    return _native._C.interpolate_nearest(dense(x), ho, wo, float(scales[0]), float(scales[1]), bool(exact))


def interpolate_nearest_backward(
    g: BackendArray, input_shape: Shape, scales: tuple[float, float], exact: bool
) -> BackendArray:
    """interpolate_nearest's gradient for an input of ``input_shape`` from the output's ``g``."""
    declared.interpolate_nearest_backward(g, input_shape, scales, exact)
    h, w = (int(s) for s in input_shape[2:])
    return _native._C.interpolate_nearest_backward(dense(g), h, w, float(scales[0]), float(scales[1]), bool(exact))


def interpolate_bilinear(
    x: BackendArray, out_size: Shape, scales: tuple[float, float], align_corners: bool
) -> BackendArray:
    """Bilinear interpolation of floating point x (N, C, H, W) to ``out_size``: PyTorch's source positions
    (scale * o with ``align_corners``, else max(scale * (o + 0.5) - 0.5, 0)) in float32 (float64 for
    float64 x)."""
    declared.interpolate_bilinear(x, out_size, scales, align_corners)
    ho, wo = (int(s) for s in out_size)
    return _native._C.interpolate_bilinear(dense(x), ho, wo, float(scales[0]), float(scales[1]), bool(align_corners))


def interpolate_bilinear_backward(
    g: BackendArray, input_shape: Shape, scales: tuple[float, float], align_corners: bool
) -> BackendArray:
    """interpolate_bilinear's gradient for an input of ``input_shape`` from the output's ``g``."""
    declared.interpolate_bilinear_backward(g, input_shape, scales, align_corners)
    h, w = (int(s) for s in input_shape[2:])
    return _native._C.interpolate_bilinear_backward(
        dense(g), h, w, float(scales[0]), float(scales[1]), bool(align_corners)
    )


def _flat_pads(plan):
    return [amount for _, _, before, after in plan for amount in (before, after)]


def pad(x: BackendArray, pads: Shape, mode: str, value: Scalar) -> BackendArray:
    """x (any dtype) with its last k = len(pads) // 2 <= 3 dims padded by (before, after) pairs, ``pads``
    holding them for those dims in order (negative amounts crop): outside the input ``value`` ('constant'),
    the mirror image without the edge repeated ('reflect'), the edge ('replicate') or the other end
    ('circular')."""
    plan, _ = pad_plan("pad", tuple(x.shape), pads, mode)
    return _native._C.pad(dense(x), _flat_pads(plan), mode, float(value))


def pad_backward(g: BackendArray, input_shape: Shape, pads: Shape, mode: str) -> BackendArray:
    """pad's gradient for an input of ``input_shape`` from the output's floating point ``g``: each input
    element sums every output gradient that read it."""
    declared.pad_backward(g, input_shape, pads, mode)
    input_shape = tuple(int(s) for s in input_shape)
    plan, _ = pad_plan("pad_backward", input_shape, pads, mode)
    return _native._C.pad_backward(dense(g), list(input_shape), _flat_pads(plan), mode)
