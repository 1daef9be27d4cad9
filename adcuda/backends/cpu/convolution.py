"""The CPU backend's 2-d convolution, forward and backward (kernels/convolution.cu on CUDA).

im2col as a strided view: the input's windows are one ``as_strided`` view of the zero-padded input,
laid out (C, kh, kw, N, L) so that one copy makes the column matrix (K, N * L) of the whole batch and
one GEMM per group gives the output. With stride 1 the rows are "wide" (see ``_column_matrix``): the
copy moves contiguous runs and col2im in the backward of the data is one 2-d add per kernel tap;
other strides gather (Ho, Wo) windows and scatter back through strided views. The backward of the
weights is one GEMM per group over N * L. Padding here is zeros
and symmetric; other padding modes and asymmetric 'same' padding are the op's (``F.pad`` first).
"""

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...errors import DTypeError, ShapeError, fmt_shape
from .._convolution_shapes import conv2d_output_size
from ..seam import BackendArray, Shape
from . import threads
from ._common import _compute

__all__ = ["conv2d", "conv2d_backward_input", "conv2d_backward_weight"]


def _float_operands(op, *arrays):
    for a in arrays:
        if a.dtype.kind != "f":
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype}")
    if len({a.dtype for a in arrays}) != 1:
        raise DTypeError(f"{op}: expected arrays of one dtype, got {', '.join(str(a.dtype) for a in arrays)}")


def _padded(x, padding, tail):
    """x (N, C, H, W) zero-padded by ``padding`` (top/bottom, left/right), its planes flattened to
    (N, C, Hp * Wp + tail) with ``tail`` zeros after each plane; -> (array, (Hp, Wp))."""
    n, c, h, w = x.shape
    ph, pw = padding
    hp, wp = h + 2 * ph, w + 2 * pw
    if not (ph or pw or tail):
        return x.reshape(n, c, hp * wp), (hp, wp)
    out = np.zeros((n, c, hp * wp + tail), x.dtype)
    out[:, :, : hp * wp].reshape(n, c, hp, wp)[:, :, ph : ph + h, pw : pw + w] = x
    return out, (hp, wp)


def _column_matrix(x, kernel, out_size, stride, padding, dilation):
    """The im2col matrix of x (N, C, H, W) as one contiguous array (C * kh * kw, N, L) -> (matrix, row).

    With stride 1 a kernel tap's inputs for a whole output plane are one contiguous run of the
    flattened padded plane: output position (y, x) of a "wide" output plane (Ho, Wp) reads flat
    input y * Wp + x + i * dh * Wp + j * dw for tap (i, j). The matrix then holds wide rows
    (L = Ho * Wp; the Wp - Wo columns past each row's end are junk that the GEMM's other operand
    zeroes or the caller drops) and the copy that makes it moves long contiguous runs. Otherwise
    L = Ho * Wo, gathered through a strided view. ``row`` is the width of one output row in L."""
    n, c = x.shape[:2]
    kh, kw = kernel
    ho, wo = out_size
    dh, dw = dilation
    if tuple(stride) == (1, 1):
        flat, (hp, wp) = _padded(x, padding, dw * (kw - 1))
        sn, sc, se = flat.strides
        view = as_strided(flat, (c, kh, kw, n, ho * wp), (sc, se * dh * wp, se * dw, sn, se), writeable=False)
        return np.ascontiguousarray(view).reshape(c * kh * kw, n, ho * wp), wp
    ph, pw = padding
    if ph or pw:
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    sn, sc, sh, sw = x.strides
    view = as_strided(
        x,
        (c, kh, kw, n, ho, wo),
        (sc, sh * dh, sw * dw, sn, sh * stride[0], sw * stride[1]),
        writeable=False,
    )
    return np.ascontiguousarray(view).reshape(c * kh * kw, n, ho * wo), wo


def _wide(g, row):
    """g (N, O, Ho, Wo) as the GEMM operand (O, N, Ho * row): zeros past each row's Wo values."""
    n, o, ho, wo = g.shape
    if row == wo:
        return np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(o, n, ho * wo)
    out = np.zeros((o, n, ho, row), g.dtype)
    out[..., :wo] = g.transpose(1, 0, 2, 3)
    return out.reshape(o, n, ho * row)


def conv2d(
    x: BackendArray, weight: BackendArray, stride: Shape, padding: Shape, dilation: Shape, groups: int
) -> BackendArray:
    """Cross-correlation of x (N, C, H, W) with weight (O, C/groups, kh, kw), zero padding -> (N, O, Ho, Wo)."""
    _float_operands("conv2d", x, weight)
    ho, wo = conv2d_output_size("conv2d", x.shape, weight.shape, stride, padding, dilation, groups)
    n, c = x.shape[:2]
    o, cg, kh, kw = weight.shape
    if n == 0 or o == 0 or ho * wo == 0:
        return np.zeros((n, o, ho, wo), x.dtype)
    cols, row = _column_matrix(_compute(x), (kh, kw), (ho, wo), stride, padding, dilation)
    w = _compute(weight).reshape(groups, o // groups, cg * kh * kw)
    # one GEMM per group over every sample's columns: (Og, K) @ (K, N * L)
    y = threads.matmul(w, cols.reshape(groups, cg * kh * kw, n * ho * row))
    y = y.reshape(o, n, ho, row)[..., :wo].transpose(1, 0, 2, 3)
    return np.ascontiguousarray(y, dtype=x.dtype)


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
    ph, pw = padding
    sh, sw = stride
    dh, dw = dilation
    gc = _compute(g)
    w = _compute(weight).reshape(groups, o // groups, cg, kh * kw)
    if (sh, sw) == (1, 1) and n and c and ho * wo:
        # col2im on flattened wide planes: a tap's block (C, N, Ho * Wp), zero past each row's Wo
        # values, lands at one offset of every padded plane, so each tap is one 2-d add
        hp, wp = h + 2 * ph, w_ + 2 * pw
        plane = hp * wp + dw * (kw - 1)
        gw = _wide(gc, wp).reshape(groups, o // groups, n * ho * wp)
        w_taps = w.transpose(0, 3, 2, 1).reshape(groups, kh * kw * cg, o // groups)
        blocks = threads.matmul(w_taps, gw).reshape(groups, kh, kw, cg, n, ho * wp)
        dx = np.zeros((groups, cg, n, plane), blocks.dtype)
        for i in range(kh):
            for j in range(kw):
                at = i * dh * wp + j * dw
                dx[..., at : at + ho * wp] += blocks[:, i, j]
        dx = dx[..., : hp * wp].reshape(c, n, hp, wp)[:, :, ph : ph + h, pw : pw + w_].transpose(1, 0, 2, 3)
        return np.ascontiguousarray(dx, dtype=g.dtype)
    gg = gc.reshape(n, groups, o // groups, ho * wo)
    dcols = threads.matmul(w.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1), gg)
    dcols = dcols.reshape(n, c, kh, kw, ho, wo)
    dx = np.zeros((n, c, h + 2 * ph, w_ + 2 * pw), dcols.dtype)
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
    if n == 0 or o == 0 or ho * wo == 0:
        return np.zeros(weight_shape, x.dtype)
    cols, row = _column_matrix(_compute(x), (kh, kw), (ho, wo), stride, padding, dilation)
    gw = _wide(_compute(g), row).reshape(groups, o // groups, n * ho * row)
    # one GEMM per group over N * L, against the transposed column matrix (BLAS reads it as is)
    dw = threads.matmul(gw, cols.reshape(groups, cg * kh * kw, n * ho * row).transpose(0, 2, 1))
    return dw.reshape(weight_shape).astype(x.dtype, copy=False)
