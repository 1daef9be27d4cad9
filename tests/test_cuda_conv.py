"""GPU parity of the convolution and pooling kernels (kernels/convolution.cu, kernels/pooling.cu) against
the CPU backend, the oracle: conv2d and both its backwards in fp32 (SIMT kernel), fp16 and bf16
(tensor-core kernel) and fp64, on odd shapes (sizes 1 and 7, channel counts that are not multiples of
the tiles), strides, padding, dilation, groups and an empty batch; max and average (fixed and adaptive) pooling
forward and backward;
then end to end through the Tensor API (a conv layer's gradients on CUDA against the CPU's). Needs a
usable CUDA device (the emulator counts) and is skipped without one.

bfloat16 has no NumPy type, so its CPU reference runs in float32 on the bf16-rounded inputs.
"""

import numpy as np
import pytest
from cuda_arrays import assert_close_to_scale, held

import adcuda
import adcuda.nn.functional as F
from adcuda import dtypes as dt
from adcuda.backends import cpu
from adcuda.errors import DTypeError, ShapeError

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

# (rtol, atol) relative to the result's scale: sums of up to a few hundred products
TOLERANCE = {dt.float64: (1e-10, 1e-10), dt.float32: (1e-4, 1e-4), dt.float16: (1e-2, 1e-2), dt.bfloat16: (5e-2, 5e-2)}
RNG = np.random.default_rng(0)


def close(cb, got, want, dtype):
    assert_close_to_scale(cb, got, want, *TOLERANCE[dtype])


# (input shape, weight shape, stride, padding, dilation, groups)
CASES = [
    ((2, 3, 7, 7), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 4, 9, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),
    ((3, 1, 1, 1), (7, 1, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((2, 70, 5, 6), (65, 70, 1, 3), (1, 2), (0, 1), (1, 1), 1),  # more than one tile along N and K
    ((1, 6, 12, 11), (6, 1, 5, 5), (3, 2), (2, 2), (1, 1), 6),  # depthwise
    ((0, 3, 7, 7), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # empty batch
]


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}s{c[2]}p{c[3]}d{c[4]}g{c[5]}")
def test_conv2d_forward_and_backwards_match_the_cpu(cb, case, dtype):
    x_shape, w_shape, stride, padding, dilation, groups = case
    x, x_h = held(cb, RNG.standard_normal(x_shape), dtype)
    w, w_h = held(cb, RNG.standard_normal(w_shape), dtype)
    y = cb.conv2d(x, w, stride, padding, dilation, groups)
    y_want = cpu.conv2d(x_h, w_h, stride, padding, dilation, groups)
    close(cb, y, y_want, dtype)
    g, g_h = held(cb, RNG.standard_normal(y_want.shape), dtype)
    close(
        cb,
        cb.conv2d_backward_input(g, w, x_shape, stride, padding, dilation, groups),
        cpu.conv2d_backward_input(g_h, w_h, x_shape, stride, padding, dilation, groups),
        dtype,
    )
    close(
        cb,
        cb.conv2d_backward_weight(g, x, w_shape, stride, padding, dilation, groups),
        cpu.conv2d_backward_weight(g_h, x_h, w_shape, stride, padding, dilation, groups),
        dtype,
    )


# Shapes whose rows allow the tensor-core kernel's cp.async staging (channels per group x taps, and
# Ho*Wo, multiples of 8): several K tiles with a partial last one, partial M and N tiles, groups.
STAGED_CASES = [
    ((2, 8, 9, 8), (12, 8, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 16, 4, 6), (70, 16, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((2, 16, 6, 4), (8, 8, 1, 1), (1, 1), (0, 0), (1, 1), 2),
    ((1, 24, 7, 7), (9, 24, 2, 2), (2, 2), (1, 1), (1, 1), 1),  # Ho*Wo = 16, K = 96
]


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("case", STAGED_CASES, ids=lambda c: f"{c[0]}x{c[1]}s{c[2]}p{c[3]}g{c[5]}")
def test_staged_tensor_core_operands_match_the_cpu(cb, case, dtype):
    test_conv2d_forward_and_backwards_match_the_cpu(cb, case, dtype)


def test_misaligned_rows_take_the_gathering_kernel(cb):
    """A weight starting one element into its storage cannot go by 16-byte copies: same results."""
    x, x_h = held(cb, RNG.standard_normal((2, 8, 5, 8)), dt.float16)
    flat, flat_h = held(cb, RNG.standard_normal(4 * 8 * 3 * 3 + 1), dt.float16)
    w = cb.view(cb.slice(flat, (slice(1, None),)), (4, 8, 3, 3))
    w_h = flat_h[1:].reshape(4, 8, 3, 3)
    args = ((1, 1), (1, 1), (1, 1), 1)
    close(cb, cb.conv2d(x, w, *args), cpu.conv2d(x_h, w_h, *args), dt.float16)


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16], ids=lambda d: d.name)
def test_staged_backward_weight_splits_a_long_reduction(cb, dtype):
    """N*Ho*Wo = 2*40*40 split in ranges of 288 (not plane-aligned), grad copied by cp.async."""
    x, x_h = held(cb, RNG.standard_normal((2, 8, 40, 40)), dtype)
    g, g_h = held(cb, RNG.standard_normal((2, 4, 40, 40)), dtype)
    args = ((4, 8, 3, 3), (1, 1), (1, 1), (1, 1), 1)
    close(cb, cb.conv2d_backward_weight(g, x, *args), cpu.conv2d_backward_weight(g_h, x_h, *args), dtype)


def test_backward_weight_splits_a_long_reduction(cb):
    """N*Ho*Wo = 2*40*40 = 3200: the weight gradient is split over it and summed in a fixed order."""
    x, x_h = held(cb, RNG.standard_normal((2, 3, 40, 40)), dt.float32)
    g, g_h = held(cb, RNG.standard_normal((2, 4, 40, 40)), dt.float32)
    args = ((4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1)
    first = cb.conv2d_backward_weight(g, x, *args)
    close(cb, first, cpu.conv2d_backward_weight(g_h, x_h, *args), dt.float32)
    np.testing.assert_array_equal(cb.to_numpy(first), cb.to_numpy(cb.conv2d_backward_weight(g, x, *args)))


def test_non_contiguous_operands(cb):
    x, x_h = held(cb, RNG.standard_normal((2, 7, 6, 3)), dt.float32)
    x_t, x_th = cb.permute(x, (0, 3, 1, 2)), np.transpose(x_h, (0, 3, 1, 2))
    w, w_h = held(cb, RNG.standard_normal((4, 3, 2, 2)), dt.float32)
    close(
        cb, cb.conv2d(x_t, w, (1, 1), (0, 0), (1, 1), 1), cpu.conv2d(x_th, w_h, (1, 1), (0, 0), (1, 1), 1), dt.float32
    )


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.int64], ids=lambda d: d.name)
def test_max_pool_matches_the_cpu(cb, dtype):
    values = RNG.permutation(2 * 3 * 9 * 8).reshape(2, 3, 9, 8)
    x, x_h = held(cb, values, dtype)
    for args in [
        ((2, 2), (2, 2), (0, 0), (1, 1), (4, 4)),
        ((3, 2), (2, 1), (1, 1), (2, 1), (5, 8)),
        ((3, 3), (2, 2), (1, 1), (1, 1), (5, 4)),
    ]:  # the last: ceil_mode's window past the end
        v, i = cb.max_pool2d(x, *args)
        v_want, i_want = cpu.max_pool2d(x_h, *args)
        np.testing.assert_array_equal(np.array(cb.to_numpy(v), dtype=np.float64), v_want.astype(np.float64))
        np.testing.assert_array_equal(cb.to_numpy(i), i_want)
    v, i = cb.adaptive_max_pool2d(x, (4, 5))
    v_want, i_want = cpu.adaptive_max_pool2d(x_h, (4, 5))
    np.testing.assert_array_equal(cb.to_numpy(i), i_want)
    if dtype.is_floating_point:
        g, g_h = held(cb, RNG.standard_normal(i_want.shape), dtype)
        close(cb, cb.max_pool2d_backward(g, i, (2, 3, 9, 8)), cpu.max_pool2d_backward(g_h, i_want, (2, 3, 9, 8)), dtype)


def test_max_pool_nan_and_empty(cb):
    a = np.zeros((1, 1, 4, 4), np.float32)
    a[0, 0, 1, 1] = a[0, 0, 0, 1] = np.nan
    x, x_h = held(cb, a, dt.float32)
    v, i = cb.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), (2, 2))
    v_want, i_want = cpu.max_pool2d(x_h, (2, 2), (2, 2), (0, 0), (1, 1), (2, 2))
    np.testing.assert_array_equal(cb.to_numpy(i), i_want)
    np.testing.assert_array_equal(np.isnan(cb.to_numpy(v)), np.isnan(v_want))
    e, _ = held(cb, np.zeros((0, 3, 4, 4)), dt.float32)
    v, i = cb.max_pool2d(e, (2, 2), (2, 2), (0, 0), (1, 1), (2, 2))
    assert tuple(v.shape) == (0, 3, 2, 2)


# (input shape, kernel, stride, padding, out size (ceil_mode's where larger), count_include_pad, divisor)
AVG_CASES = [
    ((2, 3, 9, 8), (2, 2), (2, 2), (0, 0), (4, 4), True, None),
    ((1, 2, 7, 7), (3, 3), (2, 2), (1, 1), (4, 4), False, None),  # padding not counted
    ((2, 1, 5, 7), (2, 3), (2, 2), (1, 1), (3, 4), True, None),  # ceil_mode: the last window past the end
    ((1, 1, 1, 1023), (1, 7), (1, 3), (0, 3), (1, 341), True, 5),  # a divisor override; 1-d as 2-d
    ((0, 3, 4, 4), (2, 2), (2, 2), (0, 0), (2, 2), True, None),  # empty batch
]


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16, dt.float64], ids=lambda d: d.name)
@pytest.mark.parametrize("case", AVG_CASES, ids=lambda c: f"{c[0]}k{c[1]}s{c[2]}p{c[3]}")
def test_avg_pool_matches_the_cpu(cb, case, dtype):
    shape, kernel, stride, padding, out, include_pad, divisor = case
    x, x_h = held(cb, RNG.standard_normal(shape), dtype)
    args = (kernel, stride, padding)
    close(
        cb,
        cb.avg_pool2d(x, *args, out, include_pad, divisor),
        cpu.avg_pool2d(x_h, *args, out, include_pad, divisor),
        dtype,
    )
    g, g_h = held(cb, RNG.standard_normal(shape[:2] + out), dtype)
    close(
        cb,
        cb.avg_pool2d_backward(g, shape, *args, include_pad, divisor),
        cpu.avg_pool2d_backward(g_h, shape, *args, include_pad, divisor),
        dtype,
    )


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize(
    "shape,out", [((2, 3, 9, 8), (4, 5)), ((1, 2, 7, 7), (1, 1)), ((1, 1, 1, 1023), (1, 7)), ((2, 2, 5, 3), (7, 6))]
)
def test_adaptive_avg_pool_matches_the_cpu(cb, shape, out, dtype):
    x, x_h = held(cb, RNG.standard_normal(shape), dtype)
    close(cb, cb.adaptive_avg_pool2d(x, out), cpu.adaptive_avg_pool2d(x_h, out), dtype)
    g, g_h = held(cb, RNG.standard_normal(shape[:2] + out), dtype)
    close(cb, cb.adaptive_avg_pool2d_backward(g, shape), cpu.adaptive_avg_pool2d_backward(g_h, shape), dtype)


def test_avg_pool_strided_input_and_bad_input(cb):
    x, x_h = held(cb, RNG.standard_normal((2, 6, 5, 3)), dt.float32)
    x_t, x_th = cb.permute(x, (0, 3, 1, 2)), np.transpose(x_h, (0, 3, 1, 2))  # (2, 3, 6, 5), not contiguous
    args = ((2, 2), (2, 1), (1, 0), (4, 4), False, None)
    close(cb, cb.avg_pool2d(x_t, *args), cpu.avg_pool2d(x_th, *args), dt.float32)
    close(cb, cb.adaptive_avg_pool2d(x_t, (4, 2)), cpu.adaptive_avg_pool2d(x_th, (4, 2)), dt.float32)
    with pytest.raises(ShapeError, match="avg_pool2d: .*padding"):
        cb.avg_pool2d(x, (2, 2), (1, 1), (2, 0), (8, 2), True, None)
    with pytest.raises(DTypeError, match="adaptive_avg_pool2d"):
        cb.adaptive_avg_pool2d(cb.astype(x, dt.int64), (2, 2))


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float16], ids=str)
def test_average_pooling_ops_end_to_end(dtype):
    """F.avg_pool1d/2d and the adaptive forms on CUDA against the CPU: values and gradients."""
    x_np = RNG.standard_normal((2, 3, 11, 10)).astype(np.float32)
    results = {}
    for device in ("cpu", "cuda"):
        x = adcuda.tensor(x_np, dtype=dtype, device=device, requires_grad=True)
        outs = [
            F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            F.adaptive_avg_pool2d(x, (4, 3)),
            F.avg_pool1d(x[0], 4, 3, 2),
            F.adaptive_avg_pool1d(x[1], 6),
        ]
        sum(o.float().square().sum() for o in outs).backward()
        results[device] = [o.detach().float().cpu().numpy() for o in outs] + [x.grad.float().cpu().numpy()]
    tol = 1e-5 if dtype is adcuda.float32 else 1e-2
    for got, want in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float16], ids=str)
def test_a_cnn_layer_end_to_end(dtype):
    """conv -> relu -> max pool -> conv_transpose -> avg pool: values and gradients on CUDA vs the CPU."""
    x_np = RNG.standard_normal((2, 3, 10, 9)).astype(np.float32)
    w_np = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3
    wt_np = RNG.standard_normal((4, 2, 2, 2)).astype(np.float32) * 0.3
    results = {}
    for device in ("cpu", "cuda"):
        x = adcuda.tensor(x_np, dtype=dtype, device=device, requires_grad=True)
        w = adcuda.tensor(w_np, dtype=dtype, device=device, requires_grad=True)
        wt = adcuda.tensor(wt_np, dtype=dtype, device=device, requires_grad=True)
        h = F.max_pool2d(F.relu(F.conv2d(x, w, padding=1)), 2, ceil_mode=True)
        out = F.avg_pool2d(F.conv_transpose2d(h, wt, stride=2), 2)
        out.float().sum().backward()
        results[device] = [t.detach().float().cpu().numpy() for t in (out, x.grad, w.grad, wt.grad)]
    tol = 1e-4 if dtype is adcuda.float32 else 3e-2
    for got, want in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))
