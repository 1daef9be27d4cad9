"""The CUDA backend's 2-d convolution (kernels/convolution.cu: implicit GEMM, on the tensor cores for
float16/bfloat16, a SIMT kernel for float32/float64), with the CPU backend's signatures, checks and
results. Operands are made contiguous first; the kernels gather their windows themselves.
"""

from __future__ import annotations

from ... import _native
from ...errors import DTypeError
from .._convolution_shapes import conv2d_gradient_size, conv2d_output_size
from ..seam import Shape
from ._common import BackendArray, dense, is_floating

__all__ = ["conv2d", "conv2d_backward_input", "conv2d_backward_weight"]


def _float_operands(op, *arrays):
    for a in arrays:
        if not is_floating(a):
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype.name}")
    if len({a.dtype.name for a in arrays}) != 1:
        raise DTypeError(f"{op}: expected arrays of one dtype, got {', '.join(a.dtype.name for a in arrays)}")


def _geometry(input_shape, weight_shape, out_size, stride, padding, dilation, groups):
    n, c, h, w = input_shape
    o, _, kh, kw = weight_shape
    return [
        int(v)
        for v in (
            n,
            c,
            h,
            w,
            o,
            kh,
            kw,
            out_size[0],
            out_size[1],
            groups,
            stride[0],
            stride[1],
            padding[0],
            padding[1],
            dilation[0],
            dilation[1],
        )
    ]


def conv2d(
    x: BackendArray, weight: BackendArray, stride: Shape, padding: Shape, dilation: Shape, groups: int
) -> BackendArray:
    """Cross-correlation of x (N, C, H, W) with weight (O, C/groups, kh, kw), zero padding -> (N, O, Ho, Wo)."""
    _float_operands("conv2d", x, weight)
    out = conv2d_output_size("conv2d", tuple(x.shape), tuple(weight.shape), stride, padding, dilation, groups)
    return _native._C.conv2d(
        dense(x), dense(weight), _geometry(tuple(x.shape), tuple(weight.shape), out, stride, padding, dilation, groups)
    )


def conv2d_backward_input(
    g: BackendArray,
    weight: BackendArray,
    input_shape: Shape,
    stride: Shape,
    padding: Shape,
    dilation: Shape,
    groups: int,
) -> BackendArray:
    """The gradient of conv2d with respect to its input (of ``input_shape``); also conv_transpose2d."""
    _float_operands("conv2d_backward_input", g, weight)
    input_shape = tuple(int(s) for s in input_shape)
    out = conv2d_gradient_size(
        "conv2d_backward_input", g.shape, input_shape, tuple(weight.shape), stride, padding, dilation, groups
    )
    return _native._C.conv2d_backward_input(
        dense(g), dense(weight), _geometry(input_shape, tuple(weight.shape), out, stride, padding, dilation, groups)
    )


def conv2d_backward_weight(
    g: BackendArray, x: BackendArray, weight_shape: Shape, stride: Shape, padding: Shape, dilation: Shape, groups: int
) -> BackendArray:
    """The gradient of conv2d with respect to its weight (of ``weight_shape``): summed over N*Ho*Wo."""
    _float_operands("conv2d_backward_weight", g, x)
    weight_shape = tuple(int(s) for s in weight_shape)
    out = conv2d_gradient_size(
        "conv2d_backward_weight", g.shape, tuple(x.shape), weight_shape, stride, padding, dilation, groups
    )
    return _native._C.conv2d_backward_weight(
        dense(g), dense(x), _geometry(tuple(x.shape), weight_shape, out, stride, padding, dilation, groups)
    )
