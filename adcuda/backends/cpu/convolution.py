"""The CPU backend's 2-d convolution, forward and backward (kernels/convolution.cu on CUDA).

im2col as a strided view: the input's windows are one ``as_strided`` view of the zero-padded input,
laid out (N, C, kh, kw, Ho, Wo) so that one copy makes the column matrix of every sample and one
batched GEMM per call (weights (G, Og, K) times columns (N, G, K, Ho*Wo)) gives the output already in
NCHW order. The backward of the data is that GEMM transposed followed by col2im (one strided add per
kernel tap); the backward of the weights is one GEMM per group over N*Ho*Wo. Padding here is zeros
and symmetric; other padding modes and asymmetric 'same' padding are the op's (``F.pad`` first).
"""

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...errors import DTypeError, ShapeError, fmt_shape
from .._convolution_shapes import conv2d_output_size
from ..seam import BackendArray, Shape
from ._common import _compute

__all__ = ["conv2d", "conv2d_backward_input", "conv2d_backward_weight"]


def _float_operands(op, *arrays):
    for a in arrays:
        if a.dtype.kind != "f":
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype}")
    if len({a.dtype for a in arrays}) != 1:
        raise DTypeError(f"{op}: expected arrays of one dtype, got {', '.join(str(a.dtype) for a in arrays)}")


def _columns(x, kernel, out_size, stride, padding, dilation):
    """The windows of zero-padded ``x`` as a view (N, C, kh, kw, Ho, Wo)."""
    ph, pw = padding
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    sn, sc, sh, sw = x.strides
    return as_strided(
        x,
        (x.shape[0], x.shape[1]) + tuple(kernel) + tuple(out_size),
        (sn, sc, sh * dilation[0], sw * dilation[1], sh * stride[0], sw * stride[1]),
        writeable=False,
    )


def conv2d(
    x: BackendArray, weight: BackendArray, stride: Shape, padding: Shape, dilation: Shape, groups: int
) -> BackendArray:
    """Cross-correlation of x (N, C, H, W) with weight (O, C/groups, kh, kw), zero padding -> (N, O, Ho, Wo)."""
    _float_operands("conv2d", x, weight)
    ho, wo = conv2d_output_size("conv2d", x.shape, weight.shape, stride, padding, dilation, groups)
    n, c = x.shape[:2]
    o, cg, kh, kw = weight.shape
    if n == 0 or o == 0:
        return np.zeros((n, o, ho, wo), x.dtype)
    cols = _columns(_compute(x), (kh, kw), (ho, wo), stride, padding, dilation)
    cols = cols.reshape(n, groups, cg * kh * kw, ho * wo)  # the one copy: im2col
    w = _compute(weight).reshape(groups, o // groups, cg * kh * kw)
    y = np.matmul(w, cols)  # (N, G, Og, Ho*Wo)
    return y.reshape(n, o, ho, wo).astype(x.dtype, copy=False)


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
    ho, wo = conv2d_output_size("conv2d_backward_input", input_shape, weight.shape, stride, padding, dilation, groups)
    n, c, h, w_ = input_shape
    o, cg, kh, kw = weight.shape
    if tuple(g.shape) != (n, o, ho, wo):
        raise ShapeError(
            f"conv2d_backward_input: grad of shape {fmt_shape(g.shape)} does not fit input "
            f"{fmt_shape(input_shape)} and weight {fmt_shape(weight.shape)} (expected "
            f"{fmt_shape((n, o, ho, wo))})"
        )
    gc = _compute(g).reshape(n, groups, o // groups, ho * wo)
    w = _compute(weight).reshape(groups, o // groups, cg * kh * kw)
    dcols = np.matmul(w.transpose(0, 2, 1), gc).reshape(n, c, kh, kw, ho, wo)
    ph, pw = padding
    dx = np.zeros((n, c, h + 2 * ph, w_ + 2 * pw), dcols.dtype)
    sh, sw = stride
    dh, dw = dilation
    for i in range(kh):  # col2im: each kernel tap adds its column block back where it was read
        for j in range(kw):
            dx[:, :, i * dh : i * dh + sh * (ho - 1) + 1 : sh, j * dw : j * dw + sw * (wo - 1) + 1 : sw] += dcols[
                :, :, i, j
            ]
    return dx[:, :, ph : ph + h, pw : pw + w_].astype(g.dtype)


def conv2d_backward_weight(
    g: BackendArray, x: BackendArray, weight_shape: Shape, stride: Shape, padding: Shape, dilation: Shape, groups: int
) -> BackendArray:
    """The gradient of conv2d with respect to its weight (of ``weight_shape``): summed over N*Ho*Wo."""
    _float_operands("conv2d_backward_weight", g, x)
    weight_shape = tuple(int(s) for s in weight_shape)
    ho, wo = conv2d_output_size("conv2d_backward_weight", x.shape, weight_shape, stride, padding, dilation, groups)
    n, c = x.shape[:2]
    o, cg, kh, kw = weight_shape
    if tuple(g.shape) != (n, o, ho, wo):
        raise ShapeError(
            f"conv2d_backward_weight: grad of shape {fmt_shape(g.shape)} does not fit input "
            f"{fmt_shape(x.shape)} and weight {fmt_shape(weight_shape)} (expected "
            f"{fmt_shape((n, o, ho, wo))})"
        )
    if n == 0 or o == 0:
        return np.zeros(weight_shape, x.dtype)
    cols = _columns(_compute(x), (kh, kw), (ho, wo), stride, padding, dilation)
    cols = cols.reshape(n, groups, cg * kh * kw, ho * wo)
    gc = _compute(g).reshape(n, groups, o // groups, ho * wo)
    # one small GEMM per sample against the transposed column view, then the sum over the batch:
    # cheaper than one large GEMM, whose operands would need transposed copies
    dw = np.matmul(gc, cols.transpose(0, 1, 3, 2)).sum(axis=0)
    return dw.reshape(weight_shape).astype(x.dtype, copy=False)
