"""F.interpolate (nearest, nearest-exact, linear, bilinear) and F.pad (constant, reflect, replicate,
circular) on the resample primitives: values and gradients against PyTorch where it is installed,
float64 gradchecks (also of the backwards, which are each other's gradients), the CPU primitives' own
rules, and bad input raising adcuda errors that name the op and the shapes."""

import math

import numpy as np
import pytest

import adcuda
import adcuda.nn.functional as F
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.backends import cpu
from adcuda.errors import ShapeError, UnsupportedDTypeError

RNG = np.random.default_rng(15)

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover - the comparisons need PyTorch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")

# (input shape, interpolate keywords): sizes 1 and 7, odd and equal sizes, factors that do not divide,
# a factor whose size equals the input's (PyTorch copies then), 1-d inputs
INTERPOLATIONS = [
    ((2, 3, 7, 5), dict(size=(13, 4))),
    ((1, 2, 1, 1), dict(size=(3, 7))),
    ((2, 1, 5, 9), dict(scale_factor=2.0)),
    ((1, 2, 7, 6), dict(scale_factor=1.7)),
    ((1, 1, 9, 8), dict(scale_factor=(0.6, 2.3))),
    ((1, 2, 7, 5), dict(scale_factor=1.1)),
    ((2, 2, 4, 4), dict(size=(4, 4))),
    ((1, 2, 16, 3), dict(size=(5, 1))),
    ((2, 3, 7), dict(size=12)),
    ((1, 2, 9), dict(scale_factor=0.5)),
    ((1, 1, 3, 700), dict(size=(5, 300))),  # dims past the dense-matrix limit: gathers and sorted runs
]
NEAREST = ["nearest", "nearest-exact"]


def _linear_mode(shape):
    return "linear" if len(shape) == 3 else "bilinear"


def _compare(ours, theirs, a, g_seed=0, atol=1e-12):
    """ours and theirs (functions of a tensor) on ``a``: values within ``atol``, gradients (sums in
    another order) within about ten times that, or the dtype's rounding."""
    x, tx = adcuda.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = ours(x), theirs(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=0, atol=atol)
    g = np.random.default_rng(g_seed).standard_normal(tuple(ty.shape)).astype(a.dtype)
    y.backward(adcuda.tensor(g))
    ty.backward(torch.tensor(g))
    rounding = 1e-13 if a.dtype == np.float64 else 1e-5
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=0, atol=max(atol * 10, rounding))


@needs_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=str)
@pytest.mark.parametrize("mode", NEAREST)
@pytest.mark.parametrize("shape, kw", INTERPOLATIONS)
def test_nearest_matches_pytorch_exactly(shape, kw, mode, dtype):
    """Values equal to PyTorch's; the gradient is the exact transpose of PyTorch's forward (PyTorch's own
    float64 backward finds its sources in float32 and so, at rounding boundaries, is not)."""
    a = RNG.standard_normal(shape).astype(dtype)
    x = adcuda.tensor(a, requires_grad=True)
    y = F.interpolate(x, mode=mode, **kw)
    np.testing.assert_array_equal(y.detach().numpy(), TF.interpolate(torch.tensor(a), mode=mode, **kw).numpy())
    plane = int(np.prod(shape[2:]))
    positions = np.arange(plane, dtype=dtype).reshape((1, 1) + shape[2:])
    sources = TF.interpolate(torch.tensor(positions), mode=mode, **kw).numpy().astype(np.int64).reshape(-1)
    g = RNG.standard_normal(tuple(y.shape)).astype(dtype)
    y.backward(adcuda.tensor(g))
    expected = np.zeros(shape[:2] + (plane,))
    np.add.at(expected, (slice(None), slice(None), sources), g.reshape(shape[:2] + (-1,)))
    np.testing.assert_allclose(x.grad.numpy().reshape(expected.shape), expected, rtol=0, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape, kw", INTERPOLATIONS)
def test_linear_matches_pytorch(shape, kw, align_corners, dtype):
    mode = _linear_mode(shape)
    a = RNG.standard_normal(shape).astype(dtype)
    # float32: PyTorch's CPU build may fuse the source position's multiply-add, which moves a weight by
    # up to an ulp of the position (about size * 6e-8); adcuda rounds each step, as its kernels do
    atol = 1e-12 if dtype == np.float64 else 2e-6 * max(1, max(shape[2:]) / 8)
    _compare(
        lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, **kw),
        lambda x: TF.interpolate(x, mode=mode, align_corners=align_corners, **kw),
        a,
        atol=atol,
    )


@needs_torch
def test_nearest_of_integers_refused_and_recompute_scale_factor_match_pytorch():
    a = RNG.integers(-50, 50, (2, 3, 5, 7))
    with pytest.raises(UnsupportedDTypeError, match="interpolate"):  # PyTorch has no integer kernel either
        F.interpolate(adcuda.tensor(a), scale_factor=1.6)
    for kw in (dict(scale_factor=1.6), dict(scale_factor=1.6, recompute_scale_factor=True), dict(size=(3, 11))):
        got = F.interpolate(adcuda.tensor(a, dtype=adcuda.float64), **kw)
        expected = TF.interpolate(torch.tensor(a, dtype=torch.float64), **kw).numpy()
        np.testing.assert_array_equal(got.numpy(), expected)


@pytest.mark.parametrize("mode", NEAREST + ["bilinear"])
def test_interpolate_gradcheck_and_gradgradcheck(mode):
    x = adcuda.tensor(RNG.standard_normal((1, 2, 4, 3)), requires_grad=True)
    kw = dict(size=(7, 5)) if mode == "bilinear" else dict(scale_factor=(1.7, 0.7))
    if mode == "bilinear":
        kw["align_corners"] = False
    assert gradcheck(lambda t: F.interpolate(t, mode=mode, **kw), (x,))
    assert gradgradcheck(lambda t: F.interpolate(t, mode=mode, **kw), (x,))


def test_linear_1d_gradcheck():
    x = adcuda.tensor(RNG.standard_normal((2, 2, 5)), requires_grad=True)
    assert gradcheck(lambda t: F.interpolate(t, size=9, mode="linear", align_corners=True), (x,))


@needs_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=str)
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize(
    "shape, kw",
    [
        ((2, 3, 17, 13), dict(size=(5, 4))),
        ((1, 2, 9, 31), dict(scale_factor=0.3)),
        ((1, 1, 16, 12), dict(scale_factor=(0.5, 0.77))),
        ((1, 2, 5, 31), dict(size=(8, 20))),  # up along one dim, down along the other
        ((1, 1, 6, 7), dict(size=(6, 7))),
    ],
)
def test_antialias_matches_pytorch(shape, kw, align_corners, mode, dtype):
    a = RNG.standard_normal(shape).astype(dtype)
    _compare(
        lambda x: F.interpolate(x, mode=mode, align_corners=align_corners, antialias=True, **kw),
        lambda x: TF.interpolate(x, mode=mode, align_corners=align_corners, antialias=True, **kw),
        a,
        atol=1e-12 if dtype == np.float64 else 5e-6,
    )


def test_antialias_gradcheck_and_refusals():
    x = adcuda.tensor(RNG.standard_normal((1, 1, 9, 7)), requires_grad=True)
    for mode in ("bilinear", "bicubic"):
        assert gradcheck(lambda t, mode=mode: F.interpolate(t, size=(4, 3), mode=mode, antialias=True), (x,))
    with pytest.raises(ValueError, match="interpolate: antialias"):
        F.interpolate(x, size=(4, 3), antialias=True)
    with pytest.raises(ValueError, match="interpolate: antialias"):
        F.interpolate(x[0], size=3, mode="linear", antialias=True)


# ------------------------------------------------------------------------------------------------------
# padding: (input shape, PyTorch's pad list (last dim first))
PADS = [
    ((2, 3, 7), (2, 1)),
    ((2, 3, 5, 6), (1, 2, 3, 0)),
    ((1, 2, 4, 5, 6), (1, 1, 2, 0, 0, 3)),
    ((2, 3, 5, 6), (-1, 2, 3, -2)),
    ((3, 1, 7), (0, 6)),
    ((1, 1, 1, 1), (0, 0, 0, 0)),
    ((2, 600), (5, 3)),  # past the dense-matrix limit
]
MODES = ["constant", "reflect", "replicate", "circular"]


def _pytorch_accepts(shape, pad, mode):
    sizes = shape[len(shape) - len(pad) // 2 :][::-1]
    pairs = list(zip(sizes, pad[0::2], pad[1::2]))
    if mode == "reflect":
        return all(max(b, a) < n for n, b, a in pairs)
    if mode == "circular":
        return all(max(b, a) <= n - max(-b, 0) - max(-a, 0) for n, b, a in pairs)
    return True


@needs_torch
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape, pad", PADS)
def test_pad_matches_pytorch_exactly(shape, pad, mode):
    if not _pytorch_accepts(shape, pad, mode):
        pytest.skip("PyTorch refuses this padding")
    value = 0.5 if mode == "constant" else None
    a = RNG.standard_normal(shape)
    _compare(
        lambda x: F.pad(x, pad, mode=mode, value=value), lambda x: TF.pad(x, pad, mode=mode, value=value), a, atol=0
    )


@needs_torch
def test_circular_cropping_wraps_the_cropped_dim_as_pytorch():
    a = np.arange(5.0).reshape(1, 1, 5)
    for pad in ((-1, 2), (2, -1), (-2, -1)):
        np.testing.assert_array_equal(
            F.pad(adcuda.tensor(a), pad, mode="circular").numpy(), TF.pad(torch.tensor(a), pad, mode="circular").numpy()
        )


@needs_torch
def test_pad_of_integers_and_booleans_and_more_than_three_dims():
    a = RNG.integers(-9, 9, (2, 3, 4, 2, 3))
    pad = (1, 0, 0, 2, 1, 1, 2, 0, 0, 1)  # five dims: the primitive twice, the second over moved dims
    np.testing.assert_array_equal(
        F.pad(adcuda.tensor(a), pad, value=7).numpy(), TF.pad(torch.tensor(a), pad, value=7).numpy()
    )
    b = a[0, 0] > 0
    got = F.pad(adcuda.tensor(b), (1, 1), value=True)
    np.testing.assert_array_equal(got.numpy(), TF.pad(torch.tensor(b), (1, 1), value=True).numpy())
    with pytest.raises(UnsupportedDTypeError, match="pad"):  # PyTorch's replication kernel has no bool either
        F.pad(adcuda.tensor(b), (1, 1), mode="replicate")
    x = adcuda.tensor(RNG.standard_normal((2, 2, 3, 2, 2)), requires_grad=True)
    assert gradcheck(lambda t: F.pad(t, pad, value=1.5), (x,))


@pytest.mark.parametrize("mode", MODES)
def test_pad_gradcheck_and_gradgradcheck(mode):
    x = adcuda.tensor(RNG.standard_normal((1, 2, 3, 4)), requires_grad=True)
    pad = (2, 1, 1, 2) if mode != "reflect" else (2, 3, 1, 2)
    assert gradcheck(lambda t: F.pad(t, pad, mode=mode), (x,))
    assert gradgradcheck(lambda t: F.pad(t, pad, mode=mode), (x,))


def test_pad_3d_gradcheck_with_cropping():
    x = adcuda.tensor(RNG.standard_normal((1, 1, 3, 4, 5)), requires_grad=True)
    for mode in ("replicate", "reflect"):
        assert gradcheck(lambda t, mode=mode: F.pad(t, (-1, 2, 2, -1, 1, 1), mode=mode), (x,))


def test_empty_inputs():
    x = adcuda.zeros((0, 3, 4, 5), requires_grad=True)
    y = F.interpolate(x, size=(7, 2), mode="bilinear")
    assert tuple(y.shape) == (0, 3, 7, 2)
    z = F.pad(x, (1, 1), mode="reflect")
    assert tuple(z.shape) == (0, 3, 4, 7)
    (y.sum() + z.sum()).backward()
    assert tuple(x.grad.shape) == (0, 3, 4, 5)
    assert tuple(F.pad(adcuda.zeros(2, 0), (1, 2), value=3.0).shape) == (2, 3)


def test_pad_and_interpolate_return_new_tensors():
    x = adcuda.tensor(RNG.standard_normal((1, 1, 3, 3)))
    before = x.numpy().copy()
    for y in (F.pad(x, (0, 0)), F.pad(x, ()), F.interpolate(x, size=(3, 3)), F.pad(x, (0, 0), mode="reflect")):
        y.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), before)
    for mode in MODES:  # the primitive too, with no dim padded
        assert not np.shares_memory(cpu.pad(before, (), mode, 0), before)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: F.pad(adcuda.zeros(1, 1, 3), (3, 0), mode="reflect"), ShapeError, ["pad", "reflect", "(1, 1, 3)"]),
        (lambda: F.pad(adcuda.zeros(1, 1, 3), (4, 0), mode="circular"), ShapeError, ["pad", "circular", "(1, 1, 3)"]),
        (lambda: F.pad(adcuda.zeros(1, 1, 3), (-2, -2)), ShapeError, ["pad", "negative", "(1, 1, 3)"]),
        (lambda: F.pad(adcuda.zeros(1, 0), (1, 1), mode="replicate"), ShapeError, ["pad", "empty", "(1, 0)"]),
        (lambda: F.pad(adcuda.zeros(2, 2), (1, 1, 1), value=1), ShapeError, ["pad", "divisible"]),
        (lambda: F.pad(adcuda.zeros(2, 2), (1, 1), mode="wrap"), ValueError, ["pad", "wrap"]),
        (lambda: F.pad(adcuda.zeros(2, 2), (1, 1), mode="reflect", value=2), ValueError, ["pad", "value"]),
        (
            lambda: F.interpolate(adcuda.zeros(1, 1, 4, 4, dtype=adcuda.int64), size=2, mode="bilinear"),
            UnsupportedDTypeError,
            ["interpolate", "int64"],
        ),
        (lambda: F.interpolate(adcuda.zeros(1, 1, 0, 4), size=(2, 2)), ShapeError, ["interpolate", "(0, 4)"]),
        (
            lambda: F.interpolate(adcuda.zeros(1, 1, 4, 4), scale_factor=0.1),
            ShapeError,
            ["interpolate", "(1, 1, 4, 4)"],
        ),
    ],
)
def test_bad_input_names_the_op_and_shapes(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value)


# ------------------------------------------------------------------------------------------------------
# the CPU primitives' own rules (the oracle of the CUDA kernels)
def test_nearest_rule_rounds_the_step_to_float32_as_pytorch():
    # 1 / 3 in float32 is a little above 1/3: output 3 reads input 1 (3 * 0.33333334 = 1.0000001)
    x = np.arange(8.0).reshape(1, 1, 1, 8)
    got = cpu.interpolate_nearest(x, (1, 24), (1.0, 1 / 3), False)
    assert got[0, 0, 0, 3] == 1.0
    assert got.dtype == x.dtype


def test_bilinear_backward_is_the_forwards_transpose():
    shape, out = (2, 1, 5, 7), (8, 3)
    for align_corners in (False, True):
        scales = tuple(((s - 1) / (o - 1) if align_corners else s / o) for s, o in zip(shape[2:], out))
        x, g = RNG.standard_normal(shape), RNG.standard_normal(shape[:2] + out)
        y = cpu.interpolate_bilinear(x, out, scales, align_corners)
        dx = cpu.interpolate_bilinear_backward(g, shape, scales, align_corners)
        assert math.isclose(float((y * g).sum()), float((x * dx).sum()), rel_tol=1e-12)


def test_pad_backward_is_the_forwards_transpose():
    shape, pads = (2, 3, 4, 5), (1, 3, -1, 2)
    for mode in ("reflect", "replicate", "circular", "constant"):
        x = RNG.standard_normal(shape)
        y = cpu.pad(x, pads, mode, 0)
        g = RNG.standard_normal(y.shape)
        dx = cpu.pad_backward(g, shape, pads, mode)
        # rounding is relative to the terms summed, not to their sum, which can cancel to near zero
        scale = float(np.abs(y * g).sum())
        assert math.isclose(float((y * g).sum()), float((x * dx).sum()), rel_tol=1e-12, abs_tol=1e-13 * scale), mode


def test_empty_cache_drops_the_kept_base_grids():
    # affine_grid keeps its base grid per (size, dtype, device): on CUDA a kept array holds a memory
    # block, so adcuda.cuda.empty_cache() drops the kept grids (made again on the next call)
    from adcuda.ops import resample

    theta = adcuda.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    first = F.affine_grid(theta, (1, 1, 3, 4), align_corners=False)
    assert resample._BASE_GRIDS
    adcuda.cuda.empty_cache()
    assert not resample._BASE_GRIDS
    np.testing.assert_array_equal(F.affine_grid(theta, (1, 1, 3, 4), align_corners=False).numpy(), first.numpy())
