"""Convolution: F.conv1d, F.conv2d, F.conv_transpose2d and nn.Conv1d/Conv2d/ConvTranspose2d.

float64 gradchecks (and gradgradchecks: the three convolution ops are each other's gradients),
values and gradients against PyTorch CPU where it is installed, state dicts both ways, and bad input
raising adcuda errors that name the op and the shapes. GPU parity lives in tests/test_cuda_conv.py.
"""

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.errors import DTypeError, ShapeError, UnsupportedDTypeError

RNG = np.random.default_rng(0)


def leaf(shape, dtype=np.float64):
    return adcuda.tensor(RNG.standard_normal(shape).astype(dtype), requires_grad=True)


# (input shape, weight shape, keyword arguments)
CONV2D = [
    ((2, 3, 7, 6), (4, 3, 3, 2), {}),
    ((1, 4, 9, 8), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    ((2, 2, 8, 9), (3, 2, 2, 3), dict(stride=(2, 1), padding=(2, 0), dilation=(2, 3))),
    ((1, 3, 5, 5), (3, 1, 3, 3), dict(padding="same", groups=3)),
    ((1, 2, 6, 5), (2, 2, 4, 2), dict(padding="same", dilation=1)),  # asymmetric 'same' (even kernel)
    ((1, 2, 6, 5), (2, 2, 3, 3), dict(padding="valid")),
    ((2, 3, 4, 4), (5, 3, 1, 1), {}),
    # one window, the whole input: a matrix product (stride irrelevant; groups split it)
    ((3, 4, 4, 3), (6, 2, 4, 3), dict(stride=2, groups=2)),
    ((2, 3, 2, 2), (4, 3, 2, 2), {}),
]
CONV1D = [
    ((2, 3, 11), (4, 3, 3), dict(stride=2, padding=1)),
    ((1, 4, 9), (4, 2, 2), dict(dilation=3, groups=2, padding="same")),
]
CONV_T2D = [
    ((2, 3, 4, 5), (3, 2, 3, 3), {}),
    ((1, 4, 3, 4), (4, 3, 3, 2), dict(stride=2, padding=1, output_padding=1, groups=2)),
    ((1, 2, 3, 3), (2, 2, 2, 3), dict(stride=(2, 3), dilation=(2, 1), output_padding=(1, 2))),
    ((3, 4, 1, 1), (4, 3, 4, 4), {}),  # a DCGAN generator's first layer: 1x1 -> 4x4, one window
]


def _ids(cases):
    return [f"{x}x{w}{kw}" for x, w, kw in cases]


@pytest.mark.parametrize("x_shape,w_shape,kw", CONV2D, ids=_ids(CONV2D))
def test_conv2d_gradcheck(x_shape, w_shape, kw):
    x, w, b = leaf(x_shape), leaf(w_shape), leaf(w_shape[0])
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, **kw), (x, w, b), eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("x_shape,w_shape,kw", CONV1D, ids=_ids(CONV1D))
def test_conv1d_gradcheck(x_shape, w_shape, kw):
    x, w, b = leaf(x_shape), leaf(w_shape), leaf(w_shape[0])
    assert gradcheck(lambda x, w, b: F.conv1d(x, w, b, **kw), (x, w, b), eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("x_shape,w_shape,kw", CONV_T2D, ids=_ids(CONV_T2D))
def test_conv_transpose2d_gradcheck(x_shape, w_shape, kw):
    out_channels = w_shape[1] * kw.get("groups", 1)
    x, w, b = leaf(x_shape), leaf(w_shape), leaf(out_channels)
    assert gradcheck(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), (x, w, b), eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("case", [CONV2D[1], CONV2D[2]], ids=_ids([CONV2D[1], CONV2D[2]]))
def test_conv2d_gradgradcheck(case):
    x_shape, w_shape, kw = case
    x, w = leaf(x_shape), leaf(w_shape)
    assert gradgradcheck(lambda x, w: F.conv2d(x, w, **kw), (x, w), atol=1e-5, rtol=1e-3)


def test_conv_transpose2d_gradgradcheck():
    x_shape, w_shape, kw = CONV_T2D[1]
    assert gradgradcheck(
        lambda x, w: F.conv_transpose2d(x, w, **kw), (leaf(x_shape), leaf(w_shape)), atol=1e-5, rtol=1e-3
    )


def test_unbatched_input_and_empty_batch():
    w = leaf((4, 3, 3, 3))
    x = leaf((3, 6, 6))
    y = F.conv2d(x, w, padding=1)
    assert y.shape == (4, 6, 6)
    np.testing.assert_allclose(y.detach().numpy(), F.conv2d(x.unsqueeze(0), w, padding=1)[0].detach().numpy())
    empty = adcuda.zeros((0, 3, 6, 6), dtype=adcuda.float64, requires_grad=True)
    out = F.conv2d(empty, w, padding=1)
    assert out.shape == (0, 4, 6, 6)
    out.sum().backward()
    assert empty.grad.shape == (0, 3, 6, 6)
    assert float(w.grad.abs().sum()) == 0.0


def test_float16_is_computed_in_float32():
    x = RNG.standard_normal((2, 3, 8, 8)).astype(np.float16)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float16)
    y = F.conv2d(adcuda.tensor(x), adcuda.tensor(w), padding=1)
    want = F.conv2d(adcuda.tensor(x.astype(np.float32)), adcuda.tensor(w.astype(np.float32)), padding=1)
    assert y.dtype is adcuda.float16
    np.testing.assert_allclose(y.numpy().astype(np.float32), want.numpy(), rtol=2e-3, atol=2e-2)


# ---------------------------------------------------------------------------------------------
# bad input
@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda: F.conv2d(adcuda.zeros(3, 8), adcuda.zeros(2, 3, 3, 3)), ShapeError, ["conv2d", "(3, 8)"]),
        (lambda: F.conv2d(adcuda.zeros(1, 3, 8, 8), adcuda.zeros(2, 3, 3)), ShapeError, ["conv2d", "(2, 3, 3)"]),
        (
            lambda: F.conv2d(adcuda.zeros(1, 3, 8, 8), adcuda.zeros(4, 1, 3, 3), groups=2),
            ShapeError,
            ["conv2d", "groups=2", "(1, 3, 8, 8)"],
        ),
        (
            lambda: F.conv2d(adcuda.zeros(1, 2, 3, 3), adcuda.zeros(4, 2, 5, 5)),
            ShapeError,
            ["conv2d", "larger than the padded input", "(1, 2, 3, 3)"],
        ),
        (
            lambda: F.conv2d(adcuda.zeros(1, 2, 5, 5), adcuda.zeros(4, 2, 3, 3), bias=adcuda.zeros(3)),
            ShapeError,
            ["conv2d", "bias"],
        ),
        (
            lambda: F.conv2d(adcuda.zeros(1, 2, 5, 5), adcuda.zeros(4, 2, 3, 3, dtype=adcuda.float64)),
            DTypeError,
            ["conv2d", "float64"],
        ),
        (
            lambda: F.conv2d(adcuda.zeros(1, 2, 5, 5, dtype=adcuda.int64), adcuda.zeros(4, 2, 3, 3)),
            UnsupportedDTypeError,
            ["conv2d", "int64"],
        ),
        (
            lambda: F.conv2d(adcuda.zeros(1, 2, 5, 5), adcuda.zeros(4, 2, 3, 3), stride=2, padding="same"),
            ValueError,
            ["conv2d", "same"],
        ),
        (lambda: F.conv1d(adcuda.zeros(1, 2, 5), adcuda.zeros(4, 2, 7)), ShapeError, ["conv1d", "(1, 2, 5)"]),
        (
            lambda: F.conv_transpose2d(adcuda.zeros(1, 3, 4, 4), adcuda.zeros(2, 3, 3, 3)),
            ShapeError,
            ["conv_transpose2d", "(1, 3, 4, 4)", "(2, 3, 3, 3)"],
        ),
        (
            lambda: F.conv_transpose2d(adcuda.zeros(1, 2, 4, 4), adcuda.zeros(2, 3, 3, 3), output_padding=1),
            ValueError,
            ["conv_transpose2d", "output_padding"],
        ),
        (lambda: nn.Conv2d(3, 4, 3, groups=2), ValueError, ["Conv2d", "groups"]),
    ],
)
def test_bad_input_names_the_op_and_shapes(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# ---------------------------------------------------------------------------------------------
# against PyTorch
try:
    import torch
except ImportError:  # pragma: no cover - PyTorch is optional
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def _both(shape):
    a = RNG.standard_normal(shape)
    return adcuda.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _compare(ours, theirs, inputs, rtol=1e-10, atol=1e-10):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)
    g = RNG.standard_normal(tuple(ours.shape))
    ours.backward(adcuda.tensor(g))
    theirs.backward(torch.tensor(g))
    for a, t in inputs:
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


@needs_torch
@pytest.mark.parametrize("x_shape,w_shape,kw", CONV2D, ids=_ids(CONV2D))
def test_conv2d_matches_pytorch(x_shape, w_shape, kw):
    (x, tx), (w, tw), (b, tb) = _both(x_shape), _both(w_shape), _both(w_shape[0])
    _compare(F.conv2d(x, w, b, **kw), torch.nn.functional.conv2d(tx, tw, tb, **kw), [(x, tx), (w, tw), (b, tb)])


@needs_torch
@pytest.mark.parametrize("x_shape,w_shape,kw", CONV1D, ids=_ids(CONV1D))
def test_conv1d_matches_pytorch(x_shape, w_shape, kw):
    (x, tx), (w, tw) = _both(x_shape), _both(w_shape)
    _compare(F.conv1d(x, w, **kw), torch.nn.functional.conv1d(tx, tw, **kw), [(x, tx), (w, tw)])


@needs_torch
@pytest.mark.parametrize("x_shape,w_shape,kw", CONV_T2D, ids=_ids(CONV_T2D))
def test_conv_transpose2d_matches_pytorch(x_shape, w_shape, kw):
    (x, tx), (w, tw) = _both(x_shape), _both(w_shape)
    (b, tb) = _both(w_shape[1] * kw.get("groups", 1))
    _compare(
        F.conv_transpose2d(x, w, b, **kw),
        torch.nn.functional.conv_transpose2d(tx, tw, tb, **kw),
        [(x, tx), (w, tw), (b, tb)],
    )


# the backward of the data takes three routes: stride 1 as a correlation with the flipped kernel
# (padding up to the kernel's extent), padding beyond it, and other strides by col2im (strided or
# by phase; the native module's col2im where it is built); im2col is NumPy's or the native module's,
# the latter also by kernel rows for a vertical stride of 1
BLOCKED = [
    ((5, 4, 7, 6), (6, 2, 3, 2), dict(padding=(1, 0), dilation=(1, 2), groups=2)),
    ((5, 3, 6, 6), (4, 3, 2, 2), dict(padding=2)),
    ((5, 3, 9, 8), (4, 3, 4, 3), dict(stride=(2, 3), padding=1)),
    ((3, 4, 9, 10), (4, 2, 3, 2), dict(stride=(3, 2), dilation=(2, 3), groups=2)),
    ((2, 4, 8, 7), (6, 2, 3, 2), dict(stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=2)),
]


@needs_torch
@pytest.mark.parametrize(
    "short_rows,few_channels,rows_per_tap",
    [(0, 0, 1000), (1000, 1000, 1000), (0, 1000, 1000), (0, 0, 0)],
    ids=["correlation", "by-phase", "strided", "kernel-rows"],
)
@pytest.mark.parametrize("block_bytes", [1, 1 << 20], ids=["sample-blocks", "one-block"])
@pytest.mark.parametrize("native", [False, True], ids=["numpy", "native"])
@pytest.mark.parametrize("x_shape,w_shape,kw", BLOCKED, ids=_ids(BLOCKED))
def test_conv2d_in_blocks_of_samples_matches_pytorch(
    monkeypatch, block_bytes, native, short_rows, few_channels, rows_per_tap, x_shape, w_shape, kw
):
    # the CPU backend makes the columns a block of samples at a time (one sample per block here) and
    # picks the data gradient's route by the channels and the output rows' length
    from adcuda.backends.cpu import convolution

    if native and convolution._NATIVE is None:
        pytest.skip("the native module is not built")
    if not native:
        monkeypatch.setattr(convolution, "_NATIVE", None)
    monkeypatch.setattr(convolution, "_BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(convolution, "_SHORT_ROWS", short_rows)
    monkeypatch.setattr(convolution, "_FEW_CHANNELS", few_channels)
    monkeypatch.setattr(convolution, "_ROWS_PER_TAP", rows_per_tap)
    monkeypatch.setattr(convolution, "_ROWS_MIN_DEPTH", rows_per_tap)
    (x, tx), (w, tw) = _both(x_shape), _both(w_shape)
    _compare(F.conv2d(x, w, **kw), torch.nn.functional.conv2d(tx, tw, **kw), [(x, tx), (w, tw)])
    (x, tx), (w, tw) = _both(x_shape), _both((w_shape[1] * kw.get("groups", 1), *w_shape[1:]))
    kw = {**kw, "groups": kw.get("groups", 1)}
    _compare(F.conv_transpose2d(x, w, **kw), torch.nn.functional.conv_transpose2d(tx, tw, **kw), [(x, tx), (w, tw)])


# strided layers with groups 1 and short rows: the last entry is a DCGAN's 4x4 stride-2 layer in small
CHANNELS_LAST = [
    ((3, 5, 9, 8), (4, 5, 4, 3), dict(stride=(2, 3), padding=1)),
    ((2, 3, 7, 9), (2, 3, 3, 2), dict(stride=(3, 2), padding=(2, 0), dilation=(2, 3))),
    ((4, 6, 8, 8), (5, 6, 4, 4), dict(stride=2, padding=1)),
]


@needs_torch
@pytest.mark.parametrize("block_bytes", [1, 1 << 20], ids=["sample-blocks", "one-block"])
@pytest.mark.parametrize("x_shape,w_shape,kw", CHANNELS_LAST, ids=_ids(CHANNELS_LAST))
def test_conv2d_by_channels_last_columns_matches_pytorch(monkeypatch, block_bytes, x_shape, w_shape, kw):
    # the native module's channels-last columns (forward, both gradients; conv_transpose2d's too),
    # taken here for any channel count: watched, so that the test fails if the route is not taken
    from adcuda.backends.cpu import convolution

    native = convolution._NATIVE
    if native is None:
        pytest.skip("the native module is not built")
    calls = []

    class Watched:
        def __getattr__(self, name):
            if name == "cpu_channels_last_columns":
                calls.append(name)
            return getattr(native, name)

    monkeypatch.setattr(convolution, "_NATIVE", Watched())
    monkeypatch.setattr(convolution, "_CHANNELS_LAST_DEPTH", 1)
    monkeypatch.setattr(convolution, "_BLOCK_BYTES", block_bytes)
    (x, tx), (w, tw) = _both(x_shape), _both(w_shape)
    _compare(F.conv2d(x, w, **kw), torch.nn.functional.conv2d(tx, tw, **kw), [(x, tx), (w, tw)])
    assert len(calls) >= 3  # the forward, the data's and the weight's gradients
    (x, tx), (w, tw) = _both(x_shape), _both((w_shape[1], *w_shape[1:]))
    _compare(F.conv_transpose2d(x, w, **kw), torch.nn.functional.conv_transpose2d(tx, tw, **kw), [(x, tx), (w, tw)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_channels_last_columns_are_the_columns_reordered(dtype):
    # the same windows as cpu_im2col's, each a row with the taps outermost; col2im adds them back alike
    from adcuda.backends.cpu import convolution

    native = convolution._NATIVE
    if native is None:
        pytest.skip("the native module is not built")
    x = RNG.standard_normal((3, 4, 9, 8)).astype(dtype)
    window = ((3, 2), (4, 3), (2, 3), (1, 1), (2, 1))  # kernel, output size, stride, padding, dilation
    cols = np.full((4 * 6, 2, 12), np.nan, dtype)
    native.cpu_im2col(x, cols, *window, 1)
    last = np.full((2, 12, 6 * 4), np.nan, dtype)
    native.cpu_channels_last_columns(x, last, *window, 1, True)
    reordered = last.reshape(2, 12, 6, 4).transpose(3, 2, 0, 1).reshape(24, 2, 12)
    np.testing.assert_array_equal(reordered, cols)
    dx, dx_last = np.zeros_like(x), np.full_like(x, np.nan)
    native.cpu_col2im(cols, dx[1:], *window)
    native.cpu_channels_last_columns(dx_last, last, *window, 1, False)
    np.testing.assert_allclose(dx_last[1:], dx[1:], rtol=1e-6 if dtype == np.float32 else 1e-12)
    assert np.isnan(dx_last[0]).all()  # only samples 1 and 2 are written


def test_native_gathers_reject_arrays_that_do_not_fit():
    from adcuda.backends.cpu import convolution

    native = convolution._NATIVE
    if native is None:
        pytest.skip("the native module is not built")
    x = np.zeros((2, 3, 5, 5), np.float32)
    window = ((3, 3), (3, 3), (1, 1), (0, 0), (1, 1))
    with pytest.raises(ValueError, match="cpu_im2col"):
        native.cpu_im2col(x, np.zeros((27, 2, 8), np.float32), *window, 0)  # Ho*Wo is 9
    with pytest.raises(ValueError, match="cpu_im2col"):
        native.cpu_im2col(x, np.zeros((27, 2, 9), np.float32), *window, 1)  # samples 1, 2 of 2
    with pytest.raises(ValueError, match="cpu_im2col"):
        native.cpu_im2col(x, np.zeros((27, 2, 9), np.float64), *window, 0)
    with pytest.raises(ValueError, match="cpu_col2im"):
        native.cpu_col2im(np.zeros((27, 2, 9), np.float32), np.zeros((2, 3, 5, 5), np.float32)[:, :, ::2], *window)
    with pytest.raises(ValueError, match="cpu_channels_last_columns"):  # (m, Ho*Wo, kh*kw*C): 27 last
        native.cpu_channels_last_columns(x, np.zeros((2, 27, 9), np.float32), *window, 0, True)
    with pytest.raises(ValueError, match="cpu_channels_last_columns"):
        native.cpu_channels_last_columns(x, np.zeros((2, 9, 27), np.float32), *window, 1, True)
    with pytest.raises(ValueError, match="cpu_channels_last_columns"):
        native.cpu_channels_last_columns(x, np.zeros((2, 9, 27), np.float32)[:, ::2], *window, 0, False)
    rows = np.zeros((1, 3, 4, 2, 20), np.float32)  # (G, kh, Og, m, span): 3 kernel rows of 20 columns
    with pytest.raises(ValueError, match="cpu_add_row_shifts"):
        native.cpu_add_row_shifts(rows, np.zeros((2, 4, 16), np.float32), 3)  # 2 * 3 + 16 > 20
    with pytest.raises(ValueError, match="cpu_add_row_shifts"):
        native.cpu_add_row_shifts(rows, np.zeros((2, 4, 8), np.float64), 3)
    cols = np.zeros((27, 2, 9), np.float32)
    native.cpu_im2col(x + 1, cols, *window, 0)
    assert cols.min() == 1  # no padding: every window inside the input


# (input shape, kernel, output size, stride, padding, dilation): short rows, padding past the kernel,
# dilation, a 1x1 output, a stride wider than the kernel
TABLE_WINDOWS = [
    ((3, 2, 8, 8), (4, 4), (4, 4), (2, 2), (1, 1), (1, 1)),
    ((2, 3, 5, 7), (3, 2), (5, 6), (1, 1), (2, 1), (2, 1)),
    ((2, 2, 4, 4), (4, 4), (1, 1), (1, 1), (0, 0), (1, 1)),
    ((2, 2, 9, 10), (2, 3), (3, 3), (3, 4), (0, 1), (1, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape,kernel,out,stride,padding,dilation", TABLE_WINDOWS)
def test_native_gathers_by_table_equal_the_row_loops(dtype, x_shape, kernel, out, stride, padding, dilation):
    # the table of offsets (short rows) and the row loops copy and add the same values in the same order
    from adcuda.backends.cpu import convolution

    native = convolution._NATIVE
    if native is None:
        pytest.skip("the native module is not built")
    n, c = x_shape[:2]
    x = RNG.standard_normal(x_shape).astype(dtype)
    window = (kernel, out, stride, padding, dilation)
    k, length = c * kernel[0] * kernel[1], out[0] * out[1]
    by_rows, by_table = (np.full((k, n - 1, length), np.nan, dtype) for _ in range(2))
    native.cpu_im2col(x, by_rows, *window, 1, False)
    native.cpu_im2col(x, by_table, *window, 1, True)
    assert not np.isnan(by_rows).any()
    np.testing.assert_array_equal(by_table, by_rows)
    # col2im of columns of any strides (here (N, K, L) transposed), added to what dx holds
    cols = RNG.standard_normal((n, k, length)).astype(dtype).transpose(1, 0, 2)
    dx_rows, dx_table = x.copy(), x.copy()
    native.cpu_col2im(cols, dx_rows, *window, False)
    native.cpu_col2im(cols, dx_table, *window, True)
    np.testing.assert_array_equal(dx_table, dx_rows)
    assert not np.array_equal(dx_rows, x)


@needs_torch
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [(1, 2), "same"])
def test_conv2d_module_padding_modes_and_state_dict_both_ways(mode, padding):
    theirs = torch.nn.Conv2d(3, 4, (3, 5), padding=padding, padding_mode=mode, dtype=torch.float64)
    ours = nn.Conv2d(3, 4, (3, 5), padding=padding, padding_mode=mode, dtype=adcuda.float64)
    assert ours.weight.shape == tuple(theirs.weight.shape) and ours.bias.shape == tuple(theirs.bias.shape)
    ours.load_state_dict({k: adcuda.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    (x, tx) = _both((2, 3, 6, 7))
    _compare(ours(x), theirs(tx), [(x, tx), (ours.weight, theirs.weight), (ours.bias, theirs.bias)])
    back = torch.nn.Conv2d(3, 4, (3, 5), padding=padding, padding_mode=mode, dtype=torch.float64)
    back.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    assert torch.equal(back.weight, theirs.weight)


@needs_torch
def test_conv1d_and_transpose_modules_match_pytorch():
    for ours, theirs, shape in [
        (
            nn.Conv1d(4, 6, 3, stride=2, groups=2, padding_mode="circular", padding=1, dtype=adcuda.float64),
            torch.nn.Conv1d(4, 6, 3, stride=2, groups=2, padding_mode="circular", padding=1, dtype=torch.float64),
            (2, 4, 9),
        ),
        (
            nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dtype=adcuda.float64),
            torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dtype=torch.float64),
            (2, 4, 5, 4),
        ),
    ]:
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
            k: tuple(v.shape) for k, v in theirs.state_dict().items()
        }
        ours.load_state_dict({k: adcuda.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
        (x, tx) = _both(shape)
        _compare(ours(x), theirs(tx), [(x, tx), (ours.weight, theirs.weight)])


@needs_torch
def test_conv_transpose2d_output_size_argument():
    ours = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, dtype=adcuda.float64)
    theirs = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, dtype=torch.float64)
    ours.load_state_dict({k: adcuda.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    (x, tx) = _both((1, 2, 4, 4))
    y = ours(x, output_size=(8, 8))
    assert y.shape == (1, 3, 8, 8)
    np.testing.assert_allclose(y.detach().numpy(), theirs(tx, output_size=(8, 8)).detach().numpy(), atol=1e-12)


def test_default_init_bounds_follow_fan_in():
    conv = nn.Conv2d(4, 8, 3, groups=2)
    bound = 1 / np.sqrt(2 * 3 * 3)
    assert float(conv.weight.abs().max()) <= bound and float(conv.bias.abs().max()) <= bound
    assert float(conv.weight.abs().max()) > bound / 2
