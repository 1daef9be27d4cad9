"""GPU parity of the resample kernels (kernels/resample.cu) against the CPU backend, the oracle: nearest and
bilinear interpolation and constant/reflect/replicate/circular padding, forward and backward, in fp32,
fp16, bf16 and fp64 (copies also in integer and bool dtypes), on sizes 1 and 7, odd and 1023-long rows,
non-contiguous and empty inputs; the backwards' bits the same on every run (gather form, no atomics);
then end to end through F.interpolate and F.pad. Needs a usable CUDA device (the emulator counts) and is
skipped without one.

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

# (rtol, atol) relative to the result's scale: sums of a few products
TOLERANCE = {dt.float64: (1e-12, 1e-12), dt.float32: (1e-5, 1e-5), dt.float16: (1e-2, 1e-2), dt.bfloat16: (2e-2, 2e-2)}
FLOATING = [dt.float32, dt.float16, dt.bfloat16, dt.float64]
RNG = np.random.default_rng(15)


def close(cb, got, want, dtype):
    assert_close_to_scale(cb, got, want, *TOLERANCE[dtype])


def same(cb, got, want):
    got = np.array(cb.to_numpy(got))
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def scales_of(shape, out, align_corners=False):
    return tuple(((s - 1) / (o - 1) if o > 1 else 0.0) if align_corners else s / o for s, o in zip(shape[2:], out))


# (input shape, output size): sizes 1 and 7, up and down, a 1023-long row, a plane of one row (1-d)
RESIZES = [
    ((2, 3, 7, 5), (13, 4)),
    ((1, 2, 1, 1), (3, 7)),
    ((1, 1, 7, 7), (1, 1)),
    ((1, 2, 1, 1023), (1, 311)),
    ((2, 1, 5, 9), (10, 18)),
    ((1, 3, 9, 8), (5, 18)),
]


@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.name)
@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("shape, out", RESIZES)
def test_nearest_matches_the_cpu(cb, shape, out, exact, dtype):
    scales = scales_of(shape, out)
    x, x_h = held(cb, RNG.standard_normal(shape), dtype)
    same(cb, cb.interpolate_nearest(x, out, scales, exact), cpu.interpolate_nearest(x_h, out, scales, exact))
    g, g_h = held(cb, RNG.standard_normal(shape[:2] + out), dtype)
    dx = cb.interpolate_nearest_backward(g, shape, scales, exact)
    close(cb, dx, cpu.interpolate_nearest_backward(g_h, shape, scales, exact), dtype)


@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.name)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape, out", RESIZES)
def test_bilinear_matches_the_cpu(cb, shape, out, align_corners, dtype):
    scales = scales_of(shape, out, align_corners)
    x, x_h = held(cb, RNG.standard_normal(shape), dtype)
    close(
        cb,
        cb.interpolate_bilinear(x, out, scales, align_corners),
        cpu.interpolate_bilinear(x_h, out, scales, align_corners),
        dtype,
    )
    g, g_h = held(cb, RNG.standard_normal(shape[:2] + out), dtype)
    dx = cb.interpolate_bilinear_backward(g, shape, scales, align_corners)
    close(cb, dx, cpu.interpolate_bilinear_backward(g_h, shape, scales, align_corners), dtype)


def test_scale_factor_steps_and_nearest_of_integers(cb):
    shape, out = (2, 3, 7, 6), (11, 10)
    steps = (1 / 1.7, 1 / 1.7)  # a scale factor's step, not in / out
    for dtype in (dt.int64, dt.int32, dt.bool_):
        x, x_h = held(cb, RNG.integers(-3, 3, shape), dtype)
        same(cb, cb.interpolate_nearest(x, out, steps, False), cpu.interpolate_nearest(x_h, out, steps, False))
    x, x_h = held(cb, RNG.standard_normal(shape), dt.float32)
    close(
        cb, cb.interpolate_bilinear(x, out, steps, False), cpu.interpolate_bilinear(x_h, out, steps, False), dt.float32
    )


def test_interpolate_non_contiguous_and_empty_and_bad_input(cb):
    x, x_h = held(cb, RNG.standard_normal((2, 6, 5, 3)), dt.float32)
    x_t, x_th = cb.permute(x, (0, 3, 1, 2)), np.transpose(x_h, (0, 3, 1, 2))  # (2, 3, 6, 5), not contiguous
    scales = scales_of((2, 3, 6, 5), (4, 9))
    same(cb, cb.interpolate_nearest(x_t, (4, 9), scales, False), cpu.interpolate_nearest(x_th, (4, 9), scales, False))
    close(
        cb,
        cb.interpolate_bilinear(x_t, (4, 9), scales, False),
        cpu.interpolate_bilinear(x_th, (4, 9), scales, False),
        dt.float32,
    )
    empty, _ = held(cb, np.zeros((0, 3, 4, 5)), dt.float32)
    assert tuple(cb.interpolate_bilinear(empty, (2, 2), (2.0, 2.5), True).shape) == (0, 3, 2, 2)
    assert tuple(cb.interpolate_nearest_backward(empty, (0, 3, 8, 1), (2.0, 5.0), False).shape) == (0, 3, 8, 1)
    with pytest.raises(ShapeError, match=r"interpolate_bilinear: .*\(2, 6, 15\)"):
        cb.interpolate_bilinear(cb.view(x, (2, 6, 15)), (2, 2), (1.0, 1.0), False)
    with pytest.raises(DTypeError, match="interpolate_bilinear"):
        cb.interpolate_bilinear(cb.astype(x, dt.int64), (2, 2), (1.0, 1.0), False)
    with pytest.raises(ShapeError, match="interpolate_nearest: cannot resize empty planes"):
        cb.interpolate_nearest(cb.slice(x, (slice(None), slice(None), slice(0, 0))), (2, 2), (1.0, 1.0), False)


# (input shape, pads in dim order for the last len // 2 dims)
PADS = [
    ((2, 3, 7), (2, 1)),
    ((1, 1), (0, 6)),
    ((2, 3, 5, 6), (1, 2, 3, 0)),
    ((1, 2, 4, 5, 6), (1, 1, 2, 0, 0, 3)),
    ((2, 3, 5, 6), (-1, 2, 3, -2)),
    ((3, 1023), (4, 1)),
    ((2, 7, 1), (3, 3, 0, 0)),
]
MODES = ["constant", "reflect", "replicate", "circular"]


def _fits(shape, pads, mode):
    try:
        cpu.pad(np.zeros(shape), pads, mode, 0)
    except ShapeError:
        return False
    return True


@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.name)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, pads", PADS)
def test_pad_matches_the_cpu(cb, shape, pads, mode, dtype):
    if not _fits(shape, pads, mode):
        with pytest.raises(ShapeError, match="pad: "):
            cb.pad(held(cb, np.zeros(shape), dtype)[0], pads, mode, 0)
        return
    x, x_h = held(cb, RNG.standard_normal(shape), dtype)
    value = 0.25 if mode == "constant" else 0
    same(cb, cb.pad(x, pads, mode, value), cpu.pad(x_h, pads, mode, value))
    y_shape = cpu.pad(x_h, pads, mode, value).shape
    g, g_h = held(cb, RNG.standard_normal(y_shape), dtype)
    close(cb, cb.pad_backward(g, shape, pads, mode), cpu.pad_backward(g_h, shape, pads, mode), dtype)


def test_pad_integers_bools_non_contiguous_empty_and_bad_input(cb):
    for dtype, value in ((dt.int64, -7), (dt.int32, 5), (dt.bool_, True)):
        x, x_h = held(cb, RNG.integers(0, 2, (2, 3, 4)), dtype)
        same(cb, cb.pad(x, (1, 2, 0, 3), "constant", value), cpu.pad(x_h, (1, 2, 0, 3), "constant", value))
        same(cb, cb.pad(x, (2, 1), "reflect", 0), cpu.pad(x_h, (2, 1), "reflect", 0))
    x, x_h = held(cb, RNG.standard_normal((4, 3, 5)), dt.float32)
    x_t, x_th = cb.permute(x, (2, 0, 1)), np.transpose(x_h, (2, 0, 1))
    same(cb, cb.pad(x_t, (1, 2, 2, 0), "replicate", 0), cpu.pad(x_th, (1, 2, 2, 0), "replicate", 0))
    empty, _ = held(cb, np.zeros((0, 4, 5)), dt.float32)
    assert tuple(cb.pad(empty, (1, 1), "reflect", 0).shape) == (0, 4, 7)
    assert tuple(cb.pad_backward(cb.pad(empty, (1, 1), "reflect", 0), (0, 4, 5), (1, 1), "reflect").shape) == (0, 4, 5)
    no_pads = cb.pad(x, (), "constant", 0)
    assert not cb.shares_memory(no_pads, x)
    with pytest.raises(ShapeError, match=r"pad: reflect .*\(4, 3, 5\)"):
        cb.pad(x, (5, 0), "reflect", 0)
    with pytest.raises(ShapeError, match="pad: expected"):
        cb.pad(x, (1, 1, 1, 1, 1, 1, 1, 1), "constant", 0)
    with pytest.raises(ValueError, match="pad: mode"):
        cb.pad(x, (1, 1), "wrap", 0)
    with pytest.raises(DTypeError, match="pad_backward"):
        cb.pad_backward(cb.astype(x, dt.int64), (4, 3, 3), (1, 1), "reflect")
    with pytest.raises(ShapeError, match=r"pad_backward: .*\(4, 3, 5\)"):
        cb.pad_backward(x, (4, 3, 5), (1, 1), "reflect")


def test_backwards_give_the_same_bits_every_run(cb):
    g, _ = held(cb, RNG.standard_normal((2, 3, 17, 23)), dt.float32)
    runs = [
        lambda: cb.interpolate_bilinear_backward(g, (2, 3, 5, 7), scales_of((2, 3, 5, 7), (17, 23)), False),
        lambda: cb.interpolate_nearest_backward(g, (2, 3, 5, 7), scales_of((2, 3, 5, 7), (17, 23)), False),
        lambda: cb.pad_backward(g, (2, 3, 9, 12), (4, 4, 5, 6), "replicate"),
    ]
    for run in runs:
        first = np.array(cb.to_numpy(run()))
        for _ in range(2):
            np.testing.assert_array_equal(np.array(cb.to_numpy(run())), first)


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float16, adcuda.bfloat16], ids=str)
def test_interpolate_and_pad_ops_end_to_end(dtype):
    """F.interpolate and F.pad on CUDA against the CPU (float32 there for bfloat16): values and gradients."""
    x_np = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
    on_cuda = adcuda.tensor(x_np, dtype=dtype, device="cuda")
    on_cpu = (on_cuda.float() if dtype is adcuda.bfloat16 else on_cuda).to("cpu")
    results = {}
    for device, x in (("cpu", on_cpu), ("cuda", on_cuda)):
        x = x.detach().requires_grad_()
        outs = [
            F.interpolate(x, scale_factor=1.7, mode="bilinear"),
            F.interpolate(x, size=(4, 11), mode="bilinear", align_corners=True),
            F.interpolate(x, scale_factor=(2, 0.6), mode="nearest"),
            F.interpolate(x[0], size=13, mode="linear"),
            F.interpolate(x, size=(5, 9), mode="nearest-exact"),
            F.pad(x, (2, 1, 1, 3), mode="reflect"),
            F.pad(x, (1, 0, 2, 2), value=0.5),
            F.pad(x[:, :, None], (1, 1, 2, 0, 0, 1), mode="replicate"),
            F.pad(x, (3, 3), mode="circular"),
        ]
        sum(o.float().square().sum() for o in outs).backward()
        results[device] = [o.detach().float().cpu().numpy() for o in outs] + [x.grad.float().cpu().numpy()]
    tol = 1e-5 if dtype is adcuda.float32 else 2e-2
    for got, want in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))
