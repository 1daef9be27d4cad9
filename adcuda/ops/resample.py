"""Resampling: interpolate (nearest, linear, bilinear, bicubic, area, antialiased) and affine_grid.

Nearest and (bi)linear interpolation run on the backend's resample family (``kernels/resample.cu``)
as linear op pairs (``upsample_nearest2d`` and its backward, the bilinear pair), each the other's
gradient, 1-d as planes of one row; bicubic and antialiased modes are a product with small constant
matrices (one matmul per spatial dim), differentiable through its ops; 'area' is adaptive average
pooling.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np  # the constant interpolation matrices, built on the host

from ..autograd.graph import needs_grad
from ..backends import device_caches
from ..backends.memo import remember
from ..errors import ShapeError, fmt_shape
from ..tensor import Tensor, primitives
from .autocast import is_enabled as autocast_enabled
from .common import check_tensor, int_tuple, wrap
from .dtype_support import FLOATING
from .factories import tensor
from .pooling import _adaptive_avg
from .registry import lowering, op

if TYPE_CHECKING:
    from ..types import Sequence


# one small matrix per spatial dim (bicubic and antialiased modes)
def _apply_matrices(x, matrices):
    """x (N, C, *spatial) with matrix i (out_i, in_i) applied along spatial dim i."""
    for i, m in enumerate(matrices):
        if m is None:
            continue
        dim = 2 + i
        mt = tensor(m.T.copy(), dtype=x.dtype, device=x.device)
        x = x @ mt if dim == x.ndim - 1 else (x.transpose(dim, -1) @ mt).transpose(dim, -1)
    return x


_INTERPOLATE_MODES = {
    "nearest": None,
    "nearest-exact": None,
    "linear": 1,
    "bilinear": 2,
    "bicubic": 2,
    "area": None,
}


def _source_scale(in_size, out_size, scale_factor, align_corners):
    """PyTorch's area_pixel_compute_scale: the source step per output position."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale_factor is not None:
        return 1.0 / scale_factor
    return in_size / out_size


# PyTorch's cubic convolution kernel (Keys, with A = -0.75): the weights of the four inputs around a
# source position t in [0, 1) past input floor(src) - 1, floor(src), floor(src) + 1, floor(src) + 2
_CUBIC_A = -0.75


def _cubic_near(x):
    """The kernel for |x| <= 1."""
    return ((_CUBIC_A + 2) * x - (_CUBIC_A + 3)) * x * x + 1


def _cubic_far(x):
    """The kernel for 1 < |x| < 2."""
    return ((_CUBIC_A * x - 5 * _CUBIC_A) * x + 8 * _CUBIC_A) * x - 4 * _CUBIC_A


def _cubic_matrix(in_size, out_size, scale, align_corners):
    """(out, in): bicubic interpolation along one dim as PyTorch computes it: the source position is
    not clamped (unlike linear's), and taps outside the input repeat its edge values."""
    m = np.zeros((out_size, in_size))
    for i in range(out_size):
        src = i * scale if align_corners else (i + 0.5) * scale - 0.5
        base = int(math.floor(src))
        t = src - base
        weights = (_cubic_far(t + 1), _cubic_near(t), _cubic_near(1 - t), _cubic_far(2 - t))
        for k, weight in enumerate(weights):
            m[i, min(max(base - 1 + k, 0), in_size - 1)] += weight
    return m


def _antialias_matrix(in_size, out_size, scale, cubic):
    """(out, in): PyTorch's antialiased interpolation along one dim. Downsampling widens the filter (a
    triangle for bilinear, Keys' cubic with A = -0.5 for bicubic) by the scale, so each output averages
    every input it covers; each row's weights are normalised to sum to 1 (which also handles the edges)."""
    half_width = 2.0 if cubic else 1.0
    support = half_width * scale if scale >= 1.0 else half_width
    stretch = 1.0 / scale if scale >= 1.0 else 1.0
    m = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = scale * (i + 0.5)
        start = max(int(center - support + 0.5), 0)
        stop = min(int(center + support + 0.5), in_size)
        distance = np.abs((np.arange(start, stop) - center + 0.5) * stretch)
        if cubic:
            near = ((-0.5 + 2) * distance - (-0.5 + 3)) * distance * distance + 1
            far = ((-0.5 * distance + 2.5) * distance - 4) * distance + 2
            weights = np.where(distance < 1, near, np.where(distance < 2, far, 0.0))
        else:
            weights = np.maximum(1 - distance, 0.0)
        total = weights.sum()
        m[i, start:stop] = weights / total if total != 0 else weights
    return m


def _nearest_scale(in_size, out_size, scale_factor, exact):
    """The source step of nearest interpolation: PyTorch's 'nearest' copies equal sizes and halves for
    doubled ones (whatever the factor); otherwise, and always for 'nearest-exact', 1 / scale_factor or
    in / out."""
    if not exact and out_size == in_size:
        return 1.0
    if not exact and out_size == 2 * in_size:
        return 0.5
    return 1.0 / scale_factor if scale_factor is not None else in_size / out_size


def _linear_scale(in_size, out_size, scale_factor, align_corners):
    """The source step of linear interpolation; PyTorch copies equal sizes, whatever the factor."""
    if out_size == in_size and not align_corners:
        return 1.0
    return _source_scale(in_size, out_size, scale_factor, align_corners)


# nearest and (bi)linear interpolation: the backend's resample kernels over (N, C, H, W), 1-d as H = 1;
# each op's gradient is the other's, as the two are transposes of each other
@op(
    "upsample_nearest2d",
    doc="input (N, C, H, W) resized to out_size by nearest neighbours (source step per dim: scales).",
    node="UpsampleNearest2DBackward0",
    function=False,
    method=False,
    grads={
        "input": lambda grad, input_shape, scales, exact: upsample_nearest2d_backward(grad, input_shape, scales, exact)
    },
)
def upsample_nearest2d(input: Tensor, out_size: Sequence[int], scales: Sequence[float], exact: bool) -> Tensor:
    bk = primitives(input)
    return wrap(bk.interpolate_nearest(input._data, tuple(out_size), tuple(scales), exact), input._device)


@op(
    "upsample_nearest2d_backward",
    doc="The gradient of upsample_nearest2d: each input position sums the outputs that copied it.",
    node="UpsampleNearest2DBackwardBackward0",
    function=False,
    method=False,
    grads={
        "grad_output": lambda grad, grad_output_shape, scales, exact: upsample_nearest2d(
            grad, tuple(grad_output_shape[2:]), scales, exact
        )
    },
)
def upsample_nearest2d_backward(
    grad_output: Tensor, input_shape: Sequence[int], scales: Sequence[float], exact: bool
) -> Tensor:
    bk = primitives(grad_output)
    dx = bk.interpolate_nearest_backward(grad_output._data, tuple(input_shape), tuple(scales), exact)
    return wrap(dx, grad_output._device)


@op(
    "upsample_bilinear2d",
    doc="input (N, C, H, W) resized to out_size by bilinear interpolation (source step per dim: scales).",
    node="UpsampleBilinear2DBackward0",
    function=False,
    method=False,
    grads={
        "input": lambda grad, input_shape, scales, align_corners: upsample_bilinear2d_backward(
            grad, input_shape, scales, align_corners
        )
    },
)
def upsample_bilinear2d(input: Tensor, out_size: Sequence[int], scales: Sequence[float], align_corners: bool) -> Tensor:
    bk = primitives(input)
    return wrap(bk.interpolate_bilinear(input._data, tuple(out_size), tuple(scales), align_corners), input._device)


@op(
    "upsample_bilinear2d_backward",
    doc="The gradient of upsample_bilinear2d: each input position sums its shares of the outputs.",
    node="UpsampleBilinear2DBackwardBackward0",
    function=False,
    method=False,
    grads={
        "grad_output": lambda grad, grad_output_shape, scales, align_corners: upsample_bilinear2d(
            grad, tuple(grad_output_shape[2:]), scales, align_corners
        )
    },
)
def upsample_bilinear2d_backward(
    grad_output: Tensor, input_shape: Sequence[int], scales: Sequence[float], align_corners: bool
) -> Tensor:
    bk = primitives(grad_output)
    dx = bk.interpolate_bilinear_backward(grad_output._data, tuple(input_shape), tuple(scales), align_corners)
    return wrap(dx, grad_output._device)


@op(
    "interpolate",
    dtypes=FLOATING,
    doc="input (N, C, *spatial) resized to size or by scale_factor (nearest, linear, bilinear, bicubic, area).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def interpolate(
    input: Tensor,
    size: int | Sequence[int] | None = None,
    scale_factor: float | tuple[float, ...] | list[float] | None = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    name = "interpolate"
    check_tensor(name, "input", input)
    spatial = input.ndim - 2
    if spatial not in (1, 2):
        raise ShapeError(f"{name}: expected a 3-d (N, C, L) or 4-d (N, C, H, W) input, got {fmt_shape(input.shape)}")
    if mode not in _INTERPOLATE_MODES:
        raise ValueError(f"{name}: mode {mode!r} is not supported (one of {', '.join(_INTERPOLATE_MODES)})")
    mode_spatial = _INTERPOLATE_MODES[mode]
    if mode_spatial is not None and mode_spatial != spatial:
        raise ShapeError(f"{name}: mode {mode!r} needs a {mode_spatial + 2}-d input, got {fmt_shape(input.shape)}")
    if align_corners is not None and _INTERPOLATE_MODES[mode] is None:
        raise ValueError(
            f"{name}: align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic"
        )
    if antialias and (mode not in ("bilinear", "bicubic") or spatial != 2):
        raise ValueError(f"{name}: antialias=True is only supported for 4-d bilinear and bicubic, got mode {mode!r}")
    align_corners = bool(align_corners)
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{name}: exactly one of size or scale_factor should be defined")
    sizes = tuple(input.shape[2:])
    if size is not None:
        out_size = int_tuple(name, "size", size, spatial)
        factors: tuple[float | None, ...] = (None,) * spatial
    else:
        assert scale_factor is not None  # exactly one of size and scale_factor (checked above)
        factors = tuple(
            float(f) for f in (scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * spatial)
        )
        if len(factors) != spatial:
            raise ShapeError(f"{name}: scale_factor {scale_factor} does not fit input {fmt_shape(input.shape)}")
        out_size = tuple(int(math.floor(s * f)) for s, f in zip(sizes, factors))
        if recompute_scale_factor:
            factors = (None,) * spatial
    if min(out_size) < 1:
        raise ShapeError(f"{name}: output size {out_size} must be positive (input {fmt_shape(input.shape)})")
    if mode == "area":
        return _adaptive_avg(name, input, out_size, spatial)
    if antialias:
        matrices = [
            _antialias_matrix(s, o, _source_scale(s, o, f, align_corners), mode == "bicubic")
            for s, o, f in zip(sizes, out_size, factors)
        ]
        return _apply_matrices(input, matrices)
    if mode in ("nearest", "nearest-exact"):
        exact = mode == "nearest-exact"
        scales = tuple(_nearest_scale(s, o, f, exact) for s, o, f in zip(sizes, out_size, factors))
        return _on_planes(upsample_nearest2d, input, out_size, scales, exact)
    if mode in ("linear", "bilinear"):
        scales = tuple(_linear_scale(s, o, f, align_corners) for s, o, f in zip(sizes, out_size, factors))
        return _on_planes(upsample_bilinear2d, input, out_size, scales, align_corners)
    matrices = [
        _cubic_matrix(s, o, _source_scale(s, o, f, align_corners), align_corners)
        for s, o, f in zip(sizes, out_size, factors)
    ]
    return _apply_matrices(input, matrices)


def _on_planes(resample, input, out_size, scales, flag):
    """resample (a 2-d op) over input (N, C, *spatial), a 1-d input as planes of one row; where nothing
    records, the op's forward alone (its entry costs as much as resampling a small batch)."""
    if not needs_grad(input):
        resample = resample.op.forward
    if input.ndim == 3:
        return resample(input.unsqueeze(2), (1,) + tuple(out_size), (1.0,) + scales, flag).squeeze(2)
    return resample(input, tuple(out_size), scales, flag)


@op(
    "affine_grid",
    doc="The sampling grid (N, H, W, 2) of the 2-d affine transforms theta (N, 2, 3), for grid_sample.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    name = "affine_grid"
    check_tensor(name, "theta", theta)
    size = tuple(int(s) for s in size)
    if len(size) != 4 or theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3) or theta.shape[0] != size[0]:
        raise ShapeError(
            f"{name}: expected theta (N, 2, 3) and a 4-d size (N, C, H, W) with the same N, got theta "
            f"{fmt_shape(theta.shape)} and size {size}"
        )
    n, _, h, w = size
    bk = primitives(theta)
    base = _base_grid(bk, h, w, bool(align_corners), theta.dtype, theta._device)
    if needs_grad(theta) or autocast_enabled(theta.device.type):
        return (wrap(base, theta._device) @ theta.mT).reshape(n, h, w, 2)
    # nothing to record: the product over the primitives (mT, matmul and reshape dispatched three times)
    grid = bk.matmul(base, bk.permute(theta._data, (0, 2, 1)))
    return wrap(bk.view(grid, (n, h, w, 2)), theta._device)


# affine_grid's base grids by (H, W, align_corners, dtype, device): constants of the sizes, read-only,
# made once (a program asks for the same one every step)
_BASE_GRIDS: dict[tuple[object, ...], object] = {}
_BASE_GRIDS_KEPT = 64
device_caches.register(_BASE_GRIDS.clear)  # (adcuda.cuda.empty_cache() drops them)


def _base_grid(bk, h, w, align_corners, d, device):
    """The base grid (1, H * W, 3): (x, y, 1) of every pixel, x and y the pixel centres in [-1, 1]
    (align_corners=True puts the end ones on -1 and 1)."""
    key = (h, w, align_corners, d, device)
    base = _BASE_GRIDS.get(key)
    if base is not None:
        return base

    def positions(count):
        steps = bk.arange(0, count, 1, d)
        if align_corners:
            return bk.binary("sub", bk.binary("mul", steps, 2.0 / (count - 1), d), 1.0, d) if count > 1 else steps
        return bk.binary(
            "sub", bk.binary("div", bk.binary("add", bk.binary("mul", steps, 2.0, d), 1.0, d), count, d), 1.0, d
        )

    xs = bk.expand(bk.view(positions(w), (1, w, 1)), (h, w, 1))
    ys = bk.expand(bk.view(positions(h), (h, 1, 1)), (h, w, 1))
    base = bk.view(bk.cat([xs, ys, bk.full((h, w, 1), 1.0, d)], 2), (1, h * w, 3))
    return remember(_BASE_GRIDS, key, base, _BASE_GRIDS_KEPT)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("interpolate_nearest", onnx=lambda w, node, **params: w.interpolate_nearest(node, **params))
lowering("interpolate_bilinear", onnx=lambda w, node, **params: w.interpolate_bilinear(node, **params))
