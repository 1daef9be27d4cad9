"""Pooling and interpolation: max/avg pooling (1-d, 2-d, adaptive), F.interpolate, the modules.

float64 gradchecks, values, indices and gradients against PyTorch CPU where installed, and bad
input raising adcuda errors that name the op and the shapes.
"""

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.errors import ShapeError

try:
    import torch
except ImportError:  # pragma: no cover - PyTorch is optional
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

RNG = np.random.default_rng(1)

# (function name, input shape, keyword arguments)
CASES = [
    ("max_pool2d", (2, 3, 7, 6), dict(kernel_size=2)),
    ("max_pool2d", (1, 2, 9, 8), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("max_pool2d", (1, 2, 9, 9), dict(kernel_size=(3, 2), stride=(2, 1), dilation=(2, 1), padding=(1, 0))),
    ("max_pool1d", (2, 3, 11), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avg_pool2d", (2, 3, 7, 6), dict(kernel_size=2)),
    ("avg_pool2d", (1, 2, 8, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avg_pool2d", (1, 2, 8, 7), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True)),
    ("avg_pool2d", (1, 2, 6, 6), dict(kernel_size=(2, 3), divisor_override=4)),
    ("avg_pool1d", (2, 3, 10), dict(kernel_size=4, stride=3, padding=2, count_include_pad=False)),
    ("adaptive_avg_pool2d", (2, 3, 7, 9), dict(output_size=(3, 4))),
    ("adaptive_avg_pool2d", (2, 3, 5, 5), dict(output_size=1)),
    ("adaptive_avg_pool2d", (1, 2, 5, 6), dict(output_size=(None, 4))),
    ("adaptive_avg_pool1d", (2, 3, 10), dict(output_size=4)),
    ("adaptive_max_pool2d", (2, 3, 7, 9), dict(output_size=(3, 4))),
    ("adaptive_max_pool2d", (1, 2, 4, 4), dict(output_size=(5, 3))),
    ("interpolate", (1, 2, 4, 5), dict(scale_factor=2, mode="nearest")),
    ("interpolate", (1, 2, 5, 4), dict(size=(3, 7), mode="nearest")),
    ("interpolate", (1, 2, 5, 4), dict(size=(3, 7), mode="nearest-exact")),
    ("interpolate", (1, 2, 4, 5), dict(size=(7, 3), mode="bilinear", align_corners=False)),
    ("interpolate", (1, 2, 4, 5), dict(scale_factor=1.5, mode="bilinear", align_corners=True)),
    ("interpolate", (1, 2, 4, 5), dict(scale_factor=2.5, mode="bilinear")),
    ("interpolate", (2, 3, 6), dict(size=9, mode="linear")),
    ("interpolate", (2, 3, 7, 7), dict(size=(3, 2), mode="area")),
    ("interpolate", (1, 2, 4, 5), dict(size=(9, 7), mode="bicubic")),
    ("interpolate", (1, 2, 6, 5), dict(size=(3, 2), mode="bicubic", align_corners=False)),
    ("interpolate", (1, 2, 4, 5), dict(scale_factor=1.7, mode="bicubic", align_corners=True)),
    ("interpolate", (2, 1, 3, 4), dict(scale_factor=(2.5, 0.75), mode="bicubic")),
    ("interpolate", (1, 1, 1, 5), dict(size=(4, 5), mode="bicubic", align_corners=True)),
]


def _ids(cases):
    return [f"{name}{shape}{kw}" for name, shape, kw in cases]


def _distinct(shape):
    """Values without ties (max pooling's gradient is not defined at a tie)."""
    return RNG.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64) / 7.0


@pytest.mark.parametrize("name,shape,kw", CASES, ids=_ids(CASES))
def test_gradcheck(name, shape, kw):
    x = adcuda.tensor(_distinct(shape), requires_grad=True)
    fn = getattr(F, name)
    assert gradcheck(lambda x: fn(x, **kw), (x,), eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name,shape,kw", [CASES[1], CASES[13]], ids=_ids([CASES[1], CASES[13]]))
def test_max_pool_gradgradcheck(name, shape, kw):
    x = adcuda.tensor(_distinct(shape), requires_grad=True)
    assert gradgradcheck(lambda x: getattr(F, name)(x, **kw), (x,), atol=1e-5, rtol=1e-3)


@needs_torch
@pytest.mark.parametrize("name,shape,kw", CASES, ids=_ids(CASES))
def test_matches_pytorch(name, shape, kw):
    a = _distinct(shape)
    x, tx = adcuda.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = getattr(F, name)(x, **kw), getattr(torch.nn.functional, name)(tx, **kw)
    assert y.shape == tuple(ty.shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = RNG.standard_normal(tuple(y.shape))
    y.backward(adcuda.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


MAX_CASES = [c for c in CASES if "max" in c[0]]


@needs_torch
@pytest.mark.parametrize("name,shape,kw", MAX_CASES, ids=_ids(MAX_CASES))
def test_indices_match_pytorch(name, shape, kw):
    a = _distinct(shape)
    _, indices = getattr(F, name)(adcuda.tensor(a), **kw, return_indices=True)
    _, t_indices = getattr(torch.nn.functional, name)(torch.tensor(a), **kw, return_indices=True)
    assert indices.dtype is adcuda.int64
    np.testing.assert_array_equal(indices.numpy(), t_indices.numpy())


@needs_torch
def test_max_pool_nan_and_ties_and_unbatched():
    a = np.zeros((2, 4, 4))
    a[0, 1, 1] = np.nan
    y, idx = F.max_pool2d(adcuda.tensor(a), 2, return_indices=True)
    ty, tidx = torch.nn.functional.max_pool2d(torch.tensor(a), 2, return_indices=True)
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


def test_float16_and_empty_batch():
    x = adcuda.tensor(RNG.standard_normal((2, 3, 6, 6)).astype(np.float16))
    assert F.max_pool2d(x, 2).dtype is adcuda.float16
    assert F.avg_pool2d(x, 2).dtype is adcuda.float16
    empty = adcuda.zeros((0, 3, 6, 6), requires_grad=True)
    out = F.max_pool2d(empty, 2)
    assert out.shape == (0, 3, 3, 3)
    out.sum().backward()
    assert empty.grad.shape == (0, 3, 6, 6)


@pytest.mark.parametrize(
    "call,error,words",
    [
        (lambda: F.max_pool2d(adcuda.zeros(3), 2), ShapeError, ["max_pool2d", "(3,)"]),
        (lambda: F.max_pool2d(adcuda.zeros(1, 1, 2, 2), 3), ShapeError, ["max_pool2d", "(1, 1, 2, 2)"]),
        (lambda: F.max_pool2d(adcuda.zeros(1, 1, 8, 8), 2, padding=2), ValueError, ["max_pool2d", "half"]),
        (lambda: F.avg_pool2d(adcuda.zeros(1, 1, 2, 2), 3), ShapeError, ["avg_pool2d", "(1, 1, 2, 2)"]),
        (lambda: F.avg_pool1d(adcuda.zeros(1, 1, 2, 2, 2), 1), ShapeError, ["avg_pool1d", "(1, 1, 2, 2, 2)"]),
        (lambda: F.adaptive_avg_pool2d(adcuda.zeros(1, 1, 4, 4), (2, 2, 2)), ShapeError, ["adaptive_avg_pool2d"]),
        (lambda: F.interpolate(adcuda.zeros(1, 1, 4, 4), size=2, scale_factor=2), ValueError, ["interpolate"]),
        (
            lambda: F.interpolate(adcuda.zeros(1, 1, 4), size=2, mode="bilinear"),
            ShapeError,
            ["interpolate", "(1, 1, 4)"],
        ),
        (
            lambda: F.interpolate(adcuda.zeros(1, 1, 4), size=2, mode="bicubic"),
            ShapeError,
            ["interpolate", "bicubic", "(1, 1, 4)"],
        ),
        (
            lambda: F.interpolate(adcuda.zeros(1, 1, 4, 4), size=2, mode="nearest", antialias=True),
            ValueError,
            ["interpolate", "antialias"],
        ),
    ],
)
def test_bad_input_names_the_op_and_shapes(call, error, words):
    with pytest.raises(error) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


@needs_torch
def test_modules_match_pytorch():
    a = _distinct((2, 3, 9, 8))
    for ours, theirs in [
        (nn.MaxPool2d(3, 2, 1, ceil_mode=True), torch.nn.MaxPool2d(3, 2, 1, ceil_mode=True)),
        (
            nn.AvgPool2d(2, count_include_pad=False, padding=1),
            torch.nn.AvgPool2d(2, count_include_pad=False, padding=1),
        ),
        (nn.AdaptiveAvgPool2d((2, 3)), torch.nn.AdaptiveAvgPool2d((2, 3))),
        (nn.AdaptiveMaxPool2d(4), torch.nn.AdaptiveMaxPool2d(4)),
        (nn.Upsample(scale_factor=2, mode="bilinear"), torch.nn.Upsample(scale_factor=2, mode="bilinear")),
        (nn.Flatten(), torch.nn.Flatten()),
    ]:
        np.testing.assert_allclose(ours(adcuda.tensor(a)).numpy(), theirs(torch.tensor(a)).numpy(), atol=1e-12)
    b = _distinct((2, 3, 10))
    for ours, theirs in [
        (nn.MaxPool1d(3, 2), torch.nn.MaxPool1d(3, 2)),
        (nn.AvgPool1d(3), torch.nn.AvgPool1d(3)),
        (nn.AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4)),
    ]:
        np.testing.assert_allclose(ours(adcuda.tensor(b)).numpy(), theirs(torch.tensor(b)).numpy(), atol=1e-12)


@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float16], ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_on_cuda_matches_the_cpu(dtype, align_corners):
    # a composition of CUDA matmuls: values and gradients as the CPU backend's
    a = RNG.standard_normal((2, 3, 7, 1023 // 93)).astype(np.float32)
    g = RNG.standard_normal((2, 3, 13, 5)).astype(np.float32)
    results = {}
    for device in ("cpu", "cuda"):
        x = adcuda.tensor(a, dtype=dtype, device=device, requires_grad=True)
        y = F.interpolate(x, size=(13, 5), mode="bicubic", align_corners=align_corners)
        y.backward(adcuda.tensor(g, dtype=dtype, device=device))
        assert y.dtype is dtype and y.device.type == device
        results[device] = (y.detach().cpu().float().numpy(), x.grad.cpu().float().numpy())
    tolerance = dict(rtol=1e-5, atol=1e-5) if dtype is adcuda.float32 else dict(rtol=2e-2, atol=2e-2)
    for got, expected in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, expected, **tolerance)


def test_planned_calls_check_and_record_as_the_first():
    # a call's checked arguments are remembered per input shape and dtype (ops/pooling.py's plans): a
    # later call with a float kernel, an integer input of the same shape, or an input that requires grad
    # must still be refused or recorded as the first call would
    x = adcuda.randn(2, 3, 8)
    for _ in range(2):
        assert F.max_pool1d(x, 2).shape == (2, 3, 4)
        assert F.avg_pool1d(x, 2).shape == (2, 3, 4)
        assert F.max_pool1d(x[0], 2).shape == (3, 4)  # unbatched: its own plan
    with pytest.raises(adcuda.errors.AdcudaError, match="max_pool1d"):
        F.max_pool1d(x, 2.0)
    with pytest.raises(ShapeError, match="floating point"):
        F.avg_pool1d(adcuda.zeros(2, 3, 8, dtype=adcuda.int64), 2)
    w = x.clone().requires_grad_()
    for pool in (F.max_pool1d, F.avg_pool1d, F.adaptive_avg_pool1d, F.adaptive_max_pool1d):
        y = pool(w, 2)
        assert y.grad_fn is not None and y.shape[:2] == (2, 3)
        y.sum().backward()
    assert w.grad is not None and w.grad.shape == (2, 3, 8)
