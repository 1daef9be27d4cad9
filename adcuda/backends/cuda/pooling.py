"""The CUDA backend's max and average pooling (kernels/pooling.cu), with the CPU backend's signatures, checks
and results: one thread per output element; max pooling's backward adds each gradient at its index with
float atomics in fp32 (fp64 for float64), half types converted after; average pooling's gathers, one thread
per input element, without atomics.
"""

from __future__ import annotations

from ... import _native
from ..seam import Shape, declared
from ._common import BackendArray, cast, dense, scalar_type

__all__ = [
    "max_pool2d",
    "adaptive_max_pool2d",
    "max_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
]

_NUMERIC = frozenset({"float16", "bfloat16", "float32", "float64", "int32", "int64"})


def max_pool2d(
    x: BackendArray, kernel: Shape, stride: Shape, padding: Shape, dilation: Shape, out_size: Shape
) -> tuple[BackendArray, BackendArray]:
    """Max over windows of x (N, C, H, W) padded by ``padding`` (never chosen) -> (values (N, C, Ho, Wo),
    int64 indices); ``out_size`` (Ho, Wo) is the op's (ceil_mode decides it), windows may run past the
    padded input's end."""
    declared.max_pool2d(x, kernel, stride, padding, dilation, out_size)
    values, indices = _native._C.max_pool2d(
        dense(x),
        int(kernel[0]),
        int(kernel[1]),
        int(stride[0]),
        int(stride[1]),
        int(padding[0]),
        int(padding[1]),
        int(dilation[0]),
        int(dilation[1]),
        int(out_size[0]),
        int(out_size[1]),
    )
    return values, indices


def adaptive_max_pool2d(x: BackendArray, out_size: Shape) -> tuple[BackendArray, BackendArray]:
    """Max over PyTorch's adaptive windows (rows floor(i*H/Ho) to ceil((i+1)*H/Ho)) -> (values, indices)."""
    declared.adaptive_max_pool2d(x, out_size)
    values, indices = _native._C.adaptive_max_pool2d(dense(x), int(out_size[0]), int(out_size[1]))
    return values, indices


def max_pool2d_backward(g: BackendArray, indices: BackendArray, input_shape: Shape) -> BackendArray:
    """Each output gradient added to the input position its index names -> dx of ``input_shape``."""
    declared.max_pool2d_backward(g, indices, input_shape)
    input_shape = tuple(int(s) for s in input_shape)
    accumulate = "float64" if g.dtype.name == "float64" else "float32"
    dx = _native._C.max_pool2d_backward(
        dense(cast(g, scalar_type(accumulate))),
        dense(cast(indices, scalar_type("int64"))),
        input_shape[2],
        input_shape[3],
    )
    return cast(dx, g.dtype)


def _window_args(kernel, stride, padding):
    return (int(kernel[0]), int(kernel[1]), int(stride[0]), int(stride[1]), int(padding[0]), int(padding[1]))


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
    return _native._C.avg_pool2d(
        dense(x),
        *_window_args(kernel, stride, padding),
        int(out_size[0]),
        int(out_size[1]),
        bool(count_include_pad),
        int(divisor_override or 0),
    )


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
    return _native._C.avg_pool2d_backward(
        dense(g),
        input_shape[2],
        input_shape[3],
        *_window_args(kernel, stride, padding),
        bool(count_include_pad),
        int(divisor_override or 0),
    )


def adaptive_avg_pool2d(x: BackendArray, out_size: Shape) -> BackendArray:
    """Means over PyTorch's adaptive windows (rows floor(i*H/Ho) to ceil((i+1)*H/Ho)) -> (N, C, Ho, Wo)."""
    declared.adaptive_avg_pool2d(x, out_size)
    n, c, h, w = x.shape
    return _native._C.adaptive_avg_pool2d(dense(x), int(out_size[0]), int(out_size[1]))


def adaptive_avg_pool2d_backward(g: BackendArray, input_shape: Shape) -> BackendArray:
    """adaptive_avg_pool2d's gradient for an input of ``input_shape`` from the output's ``g``."""
    declared.adaptive_avg_pool2d_backward(g, input_shape)
    input_shape = tuple(int(s) for s in input_shape)
    return _native._C.adaptive_avg_pool2d_backward(dense(g), input_shape[2], input_shape[3])
