"""The CPU backend's 2-d convolution, forward and backward (kernels/convolution.cu on CUDA).

im2col as a strided view: the input's windows are one ``as_strided`` view of the zero-padded input,
laid out (C, kh, kw, N, L); a block of samples at a time (about ``_BLOCK_BYTES``, so the columns stay
in cache) is copied into the column matrix (K, m * L) and one GEMM per group gives its outputs. With
stride 1 the rows are "wide" (see ``_windows``) so the copy moves contiguous runs. The backward of
the weights is one GEMM per group and block over m * L. The backward of the data, with stride 1
and enough channels, is the correlation of g with the flipped kernel (``_flipped``); otherwise the
columns' gradient is one GEMM, added back (col2im) into one plane per output phase, one contiguous
add per kernel tap (stride 1 or short rows), or through strided views (a correlation per phase
measured slower at DCGAN's sizes). Padding here is zeros and symmetric; other padding modes and
asymmetric 'same' padding are the op's (``F.pad`` first).

Where the native module is built (every install; not a pure-source checkout), im2col and col2im are
its ``cpu_im2col`` and ``cpu_col2im`` (kernels/host/convolution.cpp): one pass each, the padding read
as zeros, no wide rows, so the GEMMs hold only real output columns; output rows of a few values go
through a table of per-tap offsets, and conv2d by kernel rows sums its shifted products there too
(``cpu_add_row_shifts``). The NumPy gathers above stay the reference they are tested against
(``_NATIVE = None`` selects them). A convolution whose one window is the whole input is a matrix
product on either path (``_one_window``). Strided layers of many channels and short output rows
gather channels-last columns instead (``_channels_last``: ``cpu_channels_last_columns``), each tap a
contiguous run of C values.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ... import _native
from ...errors import DTypeError
from .._convolution_shapes import conv2d_gradient_size, conv2d_output_size
from ..seam import Shape
from . import threads
from ._common import BackendArray, _compute

__all__ = ["conv2d", "conv2d_backward_input", "conv2d_backward_weight"]

# The native module's gathers (None: NumPy's): a module with both, or neither (a stale build).
_NATIVE = _native._C if hasattr(_native._C, "cpu_im2col") and hasattr(_native._C, "cpu_col2im") else None
_NATIVE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _native_for(a):
    """The native module when it serves arrays like ``a`` (float32 / float64), else None."""
    return _NATIVE if _NATIVE is not None and a.dtype in _NATIVE_DTYPES else None


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


# The column block of one GEMM holds about this many bytes, so that it is written and read back while
# it is still in the core's L2 cache; the batch is cut into blocks of whole samples of about this size
# (the whole batch at once spills to memory: 2x slower for a CIFAR ResNet's 3x3 convolutions).
_BLOCK_BYTES = 1 << 20

# Output rows shorter than this make col2im's strided adds slow (a loop step per few elements), so
# conv2d_backward_input adds them by phase instead (``_col2im_by_phase``); measured: 4x4 stride-2
# DCGAN layers with rows of 8 or fewer 1.2-1.6x faster that way, rows of 16 faster the strided way.
_SHORT_ROWS = 16

# Output rows this short or shorter are gathered (im2col) and added back (col2im) by the native
# module's table of offsets, one flat loop per tap and plane: measured at a DCGAN's 4x4 stride-2
# layers, rows of 4 1.2-1.6x faster that way, rows of 8 even to 1.3x, rows of 16 slower.
_TABLE_ROWS = 8

# Multiply-adds few enough that the correlation's extra ones cost less than col2im's passes.
_FEW_PRODUCTS = 1 << 22

# conv2d by kernel rows (``_conv_by_kernel_rows``) where the output has at least this many rows per
# kernel row past the first, so that the rows it computes and drops (dh * (kh - 1) per plane) stay
# few: a ResNet's 3x3 layers at 32x32 run 1.5x faster that way, at 16x16 1.1x.
_ROWS_PER_TAP = 4

# ... but only where a kernel row's GEMM is deep enough: with C / groups * kw below this (a first
# layer's 3 or 1 channels: 9 or 5) its inner dimension starves the GEMM and plain im2col is 1.3-1.8x
# faster (a CIFAR ResNet's 3 -> 16 3x3, LeNet's 1 -> 6 5x5); LeNet's 6 * 5 = 30 gains by rows.
_ROWS_MIN_DEPTH = 16

# The stride-1 input gradient as a correlation (see conv2d_backward_input) makes GEMMs of C / groups
# rows: with fewer than this (LeNet's 6) they run slowly and col2im by phase is 2x faster; with a
# ResNet's 16 the correlation is 2.4x faster than col2im.
_FEW_CHANNELS = 16


# A strided convolution (groups 1) of at least this many input channels and output rows of at most
# ``_TABLE_ROWS`` values gathers channels-last columns (``_channels_last``): each tap a contiguous run
# of C values where the NCHW gathers move one value at a time. Measured at a DCGAN's 4x4 stride-2
# layers of 32-128 channels: the columns 2-3x faster, each pass (forward and both gradients) 1.1-1.3x;
# a first layer's 3 channels make runs too short to pay, and with rows of 16 (a ResNet's 3x3 stride-2
# layer) the NCHW row loops are 2x faster than making each sample channels-last.
_CHANNELS_LAST_DEPTH = 16


def _channels_last(native, stride, channels, groups, row):
    """Whether a convolution takes the channels-last columns (the native module's only); ``row``:
    the output rows' length."""
    return (
        native is not None
        and groups == 1
        and tuple(stride) != (1, 1)
        and channels >= _CHANNELS_LAST_DEPTH
        and row <= _TABLE_ROWS
    )


def _windows(x, kernel, out_size, stride, padding, dilation):
    """Every window of x (N, C, H, W) as a strided view (C, kh, kw, N, ...) -> (view, row), not copied.

    With stride 1 a kernel tap's inputs for a whole output plane are one contiguous run of the
    flattened padded plane: output position (y, x) of a "wide" output plane (Ho, Wp) reads flat
    input y * Wp + x + i * dh * Wp + j * dw for tap (i, j). The view then holds wide rows
    (L = Ho * Wp, last axis; the Wp - Wo columns past each row's end are junk that the GEMM's other
    operand zeroes or the caller drops) and copying it moves long contiguous runs. Otherwise the
    last axes are (Ho, Wo), gathered. ``row`` is the width of one output row in L."""
    n, c = x.shape[:2]
    kh, kw = kernel
    ho, wo = out_size
    dh, dw = dilation
    if tuple(stride) == (1, 1):
        flat, (hp, wp) = _padded(x, padding, dw * (kw - 1))
        sn, sc, se = flat.strides
        return as_strided(flat, (c, kh, kw, n, ho * wp), (sc, se * dh * wp, se * dw, sn, se), writeable=False), wp
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
    return view, wo


def _blocks(view, groups):
    """The im2col matrix of ``view`` (from ``_windows``), a block of samples at a time:
    yields (first sample, samples, columns (groups, K / groups, samples * L))."""
    c, kh, kw, n = view.shape[:4]
    per_sample = c * kh * kw * int(np.prod(view.shape[4:])) * view.itemsize
    step = max(1, _BLOCK_BYTES // max(per_sample, 1))
    for n0 in range(0, n, step):
        block = np.ascontiguousarray(view[:, :, :, n0 : n0 + step])
        yield n0, block.shape[3], block.reshape(groups, c // groups * kh * kw, -1)


def _native_blocks(native, x, kernel, out_size, stride, padding, dilation, groups, channels_last=False):
    """``_blocks`` by the native im2col of x (N, C, H, W): yields (first sample, samples, columns
    (groups, K / groups, samples * Ho * Wo)), one buffer reused block after block; ``channels_last``
    (groups 1): columns (samples * Ho * Wo, kh * kw * C) instead, each window a row, taps outermost."""
    n, c = x.shape[:2]
    x = np.ascontiguousarray(x)
    k = c * kernel[0] * kernel[1]
    length = out_size[0] * out_size[1]
    step = max(1, _BLOCK_BYTES // max(k * length * x.itemsize, 1))
    buffer = np.empty(k * min(step, n) * length, x.dtype)
    window = (tuple(kernel), tuple(out_size), tuple(stride), tuple(padding), tuple(dilation))
    for n0 in range(0, n, step):
        m = min(step, n - n0)
        if channels_last:
            cols = buffer[: k * m * length].reshape(m, length, k)
            native.cpu_channels_last_columns(x, cols, *window, n0, True)
            yield n0, m, cols.reshape(m * length, k)
            continue
        cols = buffer[: k * m * length].reshape(k, m, length)
        native.cpu_im2col(x, cols, *window, n0, out_size[1] <= _TABLE_ROWS)
        yield n0, m, cols.reshape(groups, k // groups, m * length)


def _taps_last(weight):
    """weight (O, C, kh, kw) as (O, kh * kw * C), the order of the channels-last columns."""
    o = weight.shape[0]
    return np.ascontiguousarray(weight.transpose(0, 2, 3, 1)).reshape(o, -1)


def _one_window(spatial, kernel, padding, dilation):
    """Whether the only window of an input of ``spatial`` (H, W) is the whole unpadded input: the
    convolution is then a matrix product of the flattened samples and kernels, with no columns to
    gather or add back (a DCGAN's last discriminator and first generator layers, 4x4 -> 1x1)."""
    return tuple(padding) == (0, 0) and tuple(dilation) == (1, 1) and tuple(spatial) == tuple(kernel)


def _sample_rows(a, groups):
    """a (N, C, ...) as (groups, N, C / groups * ...): each group's flattened samples, a view."""
    return a.reshape(a.shape[0], groups, -1).transpose(1, 0, 2)


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
    xc = _compute(x)
    w = _compute(weight).reshape(groups, o // groups, cg * kh * kw)
    out = np.empty((n, o, ho, wo), x.dtype)
    if _one_window(x.shape[2:], (kh, kw), padding, dilation):
        # (groups, N, K / groups) @ (groups, K / groups, O / groups): every sample's one output
        y = threads.matmul(_sample_rows(xc, groups), w.transpose(0, 2, 1))
        out[...] = y.transpose(1, 0, 2).reshape(out.shape)
        return out
    native = _native_for(xc)
    by_rows = stride[0] == 1 and kh > 1 and ho >= _ROWS_PER_TAP * dilation[0] * (kh - 1) and cg * kw >= _ROWS_MIN_DEPTH
    # (the row sums write into `out` natively: only where it has the computing dtype, not float16's
    # float32 products)
    if native is not None and by_rows and out.dtype == xc.dtype:
        return _conv_by_kernel_rows(native, xc, _compute(weight), out, stride, padding, dilation, groups)
    if _channels_last(native, stride, c, groups, wo):
        w_taps = np.ascontiguousarray(_taps_last(_compute(weight)).T)
        window = ((kh, kw), (ho, wo), stride, padding, dilation, 1)
        for n0, m, cols in _native_blocks(native, xc, *window, channels_last=True):
            # (m * L, K) @ (K, O), both operands as stored: OpenBLAS runs this 1.1-1.4x faster than
            # (O, K) @ (K, m * L) through a transposed view, at a DCGAN's and a ResNet's strided layers
            out[n0 : n0 + m] = threads.matmul(cols, w_taps).reshape(m, ho, wo, o).transpose(0, 3, 1, 2)
        return out
    if native is not None:
        for n0, m, cols in _native_blocks(native, xc, (kh, kw), (ho, wo), stride, padding, dilation, groups):
            out[n0 : n0 + m] = threads.matmul(w, cols).reshape(o, m, ho, wo).transpose(1, 0, 2, 3)
        return out
    view, row = _windows(xc, (kh, kw), (ho, wo), stride, padding, dilation)
    for n0, m, cols in _blocks(view, groups):
        # one GEMM per group over a block of samples' columns: (Og, K) @ (K, m * L)
        y = threads.matmul(w, cols).reshape(o, m, ho, row)
        out[n0 : n0 + m] = y[..., :wo].transpose(1, 0, 2, 3)
    return out


def _conv_by_kernel_rows(native, x, weight, out, stride, padding, dilation, groups):
    """conv2d with a vertical stride of 1 by kernel rows: the columns hold the windows of one kernel
    row (C * kw rows over the Ho + dh * (kh - 1) padded input rows the kernel reaches, a third of a
    3x3 kernel's im2col), one GEMM per group gives every kernel row's products, (kh * Og, C * kw) @
    (C * kw, m * Hr * Wo), and the output is the sum of the kh row-shifted products. Taller GEMMs
    (a 16-channel 3x3 layer's 16 rows become 48: OpenBLAS runs few rows slowly) and a third of the
    column copies, for Hr / Ho more multiply-adds."""
    n, c = x.shape[:2]
    o, cg, kh, kw = weight.shape
    ho, wo = out.shape[2:]
    dh = dilation[0]
    og, hr = o // groups, ho + dh * (kh - 1)
    w_rows = weight.reshape(groups, og, cg, kh, kw).transpose(0, 3, 1, 2, 4).reshape(groups, kh * og, cg * kw)
    kernel, size = (1, kw), (hr, wo)
    stride, dilation = (1, stride[1]), (1, dilation[1])
    for n0, m, cols in _native_blocks(native, x, kernel, size, stride, padding, dilation, groups):
        # kernel row i's products for output row y are at padded row y + i * dh: with the planes
        # flat, the Ho rows from there on are one contiguous run
        rows = threads.matmul(w_rows, cols).reshape(groups, kh, og, m, hr * wo)
        # the kh shifted products summed into the block's outputs in one pass
        native.cpu_add_row_shifts(rows, out[n0 : n0 + m].reshape(m, o, ho * wo), dh * wo)
    return out


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
    ho, wo = conv2d_gradient_size(
        "conv2d_backward_input", g.shape, input_shape, weight.shape, stride, padding, dilation, groups
    )
    n, c, h, w_ = input_shape
    o, cg, kh, kw = weight.shape
    if not (n and c and o and ho * wo):
        return np.zeros(input_shape, g.dtype)
    if _one_window((h, w_), (kh, kw), padding, dilation):
        # (groups, N, O / groups) @ (groups, O / groups, K / groups): each sample's window gradient
        wg = _compute(weight).reshape(groups, o // groups, cg * kh * kw)
        dx = threads.matmul(_sample_rows(_compute(g), groups), wg)
        return np.ascontiguousarray(dx.transpose(1, 0, 2)).reshape(input_shape).astype(g.dtype, copy=False)
    ph, pw = padding
    sh, sw = stride
    dh, dw = dilation
    qh, qw = dh * (kh - 1) - ph, dw * (kw - 1) - pw
    # the correlation below makes H * W / (Ho * Wo) times col2im's multiply-adds: not where g is mostly
    # the padding and that counts (a DCGAN generator's first layer, 1x1 -> 4x4: 16 times, 33M)
    wasteful = h * w_ > 2 * ho * wo and n * c * h * w_ * (o // groups) * kh * kw > _FEW_PRODUCTS
    if (sh, sw) == (1, 1) and qh >= 0 and qw >= 0 and c // groups >= _FEW_CHANNELS and not wasteful:
        # a stride-1 correlation's input gradient is the correlation of g, padded by the kernel's
        # extent less the padding, with the flipped kernel: conv2d's blocked GEMMs, no col2im
        return conv2d(g, _flipped(weight, groups), (1, 1), (qh, qw), dilation, groups)
    gc = _compute(g)
    native = _native_for(gc)
    if _channels_last(native, stride, c, groups, wo):
        return _col2im_channels_last(native, gc, weight, input_shape, stride, padding, dilation).astype(
            g.dtype, copy=False
        )
    if native is not None:
        return _col2im_native(native, gc, weight, input_shape, stride, padding, dilation, groups).astype(
            g.dtype, copy=False
        )
    if (sh, sw) == (1, 1) or wo < _SHORT_ROWS:
        return _col2im_by_phase(gc, weight, input_shape, stride, padding, dilation, groups).astype(g.dtype, copy=False)
    w = _compute(weight).reshape(groups, o // groups, cg * kh * kw)
    dcols = threads.matmul(w.transpose(0, 2, 1), gc.reshape(n, groups, o // groups, ho * wo))
    dcols = dcols.reshape(n, c, kh, kw, ho, wo)
    dx = np.zeros((n, c, h + 2 * ph, w_ + 2 * pw), dcols.dtype)
    for i in range(kh):  # col2im: each kernel tap adds its column block back where it was read
        for j in range(kw):
            dx[:, :, i * dh : i * dh + sh * (ho - 1) + 1 : sh, j * dw : j * dw + sw * (wo - 1) + 1 : sw] += dcols[
                :, :, i, j
            ]
    return dx[:, :, ph : ph + h, pw : pw + w_].astype(g.dtype)


def _col2im_native(native, g, weight, input_shape, stride, padding, dilation, groups):
    """conv2d_backward_input by the native col2im: per block of samples, the columns' gradient
    W^T @ g as one GEMM per group over the block's outputs, added back into the block's planes."""
    n, c = input_shape[:2]
    o, cg, kh, kw = weight.shape
    ho, wo = g.shape[2:]
    og, length, k = o // groups, ho * wo, c * kh * kw
    w_t = _compute(weight).reshape(groups, og, cg * kh * kw).transpose(0, 2, 1)
    dx = np.zeros(input_shape, g.dtype)
    step = max(1, _BLOCK_BYTES // max(k * length * g.itemsize, 1))
    window = ((kh, kw), (ho, wo), tuple(stride), tuple(padding), tuple(dilation))
    for n0 in range(0, n, step):
        m = min(step, n - n0)
        # g's block as (groups, O / groups, m * L): the block's outputs side by side, per group
        gb = np.ascontiguousarray(g[n0 : n0 + m].reshape(m, groups, og, length).transpose(1, 2, 0, 3))
        dcols = threads.matmul(w_t, gb.reshape(groups, og, m * length)).reshape(k, m, length)
        native.cpu_col2im(dcols, dx[n0 : n0 + m], *window, wo <= _TABLE_ROWS)
    return dx


def _col2im_channels_last(native, g, weight, input_shape, stride, padding, dilation):
    """conv2d_backward_input (groups 1) by channels-last columns: per block of samples, the columns'
    gradient (m * L, O) @ (O, K) from g made channels-last, added back into the block's planes."""
    n = input_shape[0]
    o, c, kh, kw = weight.shape
    ho, wo = g.shape[2:]
    length, k = ho * wo, c * kh * kw
    w_taps = _taps_last(_compute(weight))
    dx = np.empty(input_shape, g.dtype)
    step = max(1, _BLOCK_BYTES // max(k * length * g.itemsize, 1))
    window = ((kh, kw), (ho, wo), tuple(stride), tuple(padding), tuple(dilation))
    for n0 in range(0, n, step):
        m = min(step, n - n0)
        g_last = np.ascontiguousarray(g[n0 : n0 + m].transpose(0, 2, 3, 1)).reshape(m * length, o)
        dcols = threads.matmul(g_last, w_taps).reshape(m, length, k)
        native.cpu_channels_last_columns(dx, dcols, *window, n0, False)
    return dx


def _col2im_by_phase(g, weight, input_shape, stride, padding, dilation, groups):
    """conv2d_backward_input's col2im for short output rows, by phase: padded row y = s * t + r lands
    in phase plane r, so tap i (offset i * d) adds to plane (i * d) % s at row offset (i * d) // s.
    With the g rows "wide" (width ws, zeros past Wo) a tap's block for a whole plane is one
    contiguous run: kh * kw 2-d adds, then one interleaving copy."""
    n, c, h, w_ = input_shape
    o, cg, kh, kw = weight.shape
    ho, wo = g.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    hp, wp = h + 2 * ph, w_ + 2 * pw
    hs = max(-(-hp // sh), ho + dh * (kh - 1) // sh)
    ws = max(-(-wp // sw), wo + dw * (kw - 1) // sw)
    gw = _wide(g, ws).reshape(groups, o // groups, n * ho * ws)
    w_taps = _compute(weight).reshape(groups, o // groups, cg, kh, kw).transpose(0, 3, 4, 2, 1)
    blocks = threads.matmul(w_taps.reshape(groups, kh * kw * cg, o // groups), gw).reshape(
        groups, kh, kw, cg, n, ho * ws
    )
    phases = np.zeros((sh, sw, groups, cg, n, hs * ws + dw * (kw - 1) // sw), blocks.dtype)
    for i in range(kh):
        ay, ry = divmod(i * dh, sh)
        for j in range(kw):
            ax, rx = divmod(j * dw, sw)
            at = ay * ws + ax
            phases[ry, rx, ..., at : at + ho * ws] += blocks[:, i, j]
    dx = phases[..., : hs * ws].reshape(sh, sw, c, n, hs, ws).transpose(3, 2, 4, 0, 5, 1)
    dx = dx.reshape(n, c, hs * sh, ws * sw)[:, :, ph : ph + h, pw : pw + w_]
    return np.ascontiguousarray(dx)


def _flipped(weight, groups):
    """weight (O, C/groups, kh, kw) as the kernel (C, O/groups, kh, kw) of the transposed
    correlation: each group's channel axes swapped, the taps reversed."""
    o, cg, kh, kw = weight.shape
    swapped = weight.reshape(groups, o // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)
    return swapped.reshape(groups * cg, o // groups, kh, kw)[:, :, ::-1, ::-1]


def conv2d_backward_weight(
    g: BackendArray, x: BackendArray, weight_shape: Shape, stride: Shape, padding: Shape, dilation: Shape, groups: int
) -> BackendArray:
    """The gradient of conv2d with respect to its weight (of ``weight_shape``): summed over N*Ho*Wo."""
    _float_operands("conv2d_backward_weight", g, x)
    weight_shape = tuple(int(s) for s in weight_shape)
    ho, wo = conv2d_gradient_size(
        "conv2d_backward_weight", g.shape, x.shape, weight_shape, stride, padding, dilation, groups
    )
    n, c = x.shape[:2]
    o, cg, kh, kw = weight_shape
    if n == 0 or o == 0 or ho * wo == 0:
        return np.zeros(weight_shape, x.dtype)
    xc, gc = _compute(x), _compute(g)
    if _one_window(x.shape[2:], (kh, kw), padding, dilation):
        # (groups, O / groups, N) @ (groups, N, K / groups): summed over the samples' one window each
        dw = threads.matmul(_sample_rows(gc, groups).transpose(0, 2, 1), _sample_rows(xc, groups))
        return dw.reshape(weight_shape).astype(x.dtype, copy=False)
    native = _native_for(xc)
    if _channels_last(native, stride, c, groups, wo):
        dw = None
        for n0, m, cols in _native_blocks(native, xc, (kh, kw), (ho, wo), stride, padding, dilation, 1, True):
            # (O, m * L) @ (m * L, K): the block's share, taps outermost
            part = threads.matmul(_wide(gc[n0 : n0 + m], wo).reshape(o, m * ho * wo), cols)
            dw = part if dw is None else np.add(dw, part, out=dw)
        assert dw is not None  # n > 0 (checked above)
        return np.ascontiguousarray(dw.reshape(o, kh, kw, c).transpose(0, 3, 1, 2)).astype(x.dtype, copy=False)
    if native is not None:
        blocks = _native_blocks(native, xc, (kh, kw), (ho, wo), stride, padding, dilation, groups)
        row = wo
    else:
        view, row = _windows(xc, (kh, kw), (ho, wo), stride, padding, dilation)
        blocks = _blocks(view, groups)
    dw = None
    for n0, m, cols in blocks:
        gw = _wide(gc[n0 : n0 + m], row).reshape(groups, o // groups, m * ho * row)
        # one GEMM per group over the block's N * L, as (K, m * L) @ (m * L, Og): OpenBLAS runs this
        # form 2-3x faster than (Og, m * L) @ (m * L, K) with the long axis last in both operands
        part = threads.matmul(cols, gw.transpose(0, 2, 1))
        dw = part if dw is None else np.add(dw, part, out=dw)
    assert dw is not None  # n > 0 (checked above), so there was at least one block
    return np.ascontiguousarray(dw.transpose(0, 2, 1)).reshape(weight_shape).astype(x.dtype, copy=False)
