"""Issue 27's names on CUDA against the CPU backend (which tests/test_names_27.py checks against
PyTorch): values at the edges in every dtype, gcd/lcm, gradients and isin. No PyTorch needed, so the
CUDA emulator runs them too."""

import math

import numpy as np
import pytest

import adcuda

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

INF, NAN = math.inf, math.nan
EDGES = [-1.0, 1.0, 0.0, -0.0, 0.5, -0.5, 2.0, -2.0, 3.0, 10.0, 30.0, INF, -INF, NAN, 1e30, -1e30, 1e-30, 1e-45]
UNARY = ["asin", "acos", "atan", "asinh", "acosh", "atanh", "erfc", "sinc", "deg2rad", "rad2deg"]
PREDICATES = ["isposinf", "isneginf"]
TOL = {"float32": 2e-6, "float64": 1e-12}
PAIRS = [(y, x) for y in (0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 1e30) for x in (0.0, -0.0, 2.0, -2.0, INF, -INF, 1e-30)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64"])
@pytest.mark.parametrize("name", UNARY + PREDICATES)
def test_cuda_unary_matches_cpu(name, dtype):
    values = EDGES if dtype != "int64" else [0, 1, 2, -1, 5]
    cpu_dtype = "float32" if dtype == "bfloat16" else dtype
    x = adcuda.tensor(values, dtype=getattr(adcuda, dtype), device="cuda")
    got = getattr(adcuda, name)(x)
    want = getattr(adcuda, name)(x.to("cpu", dtype=getattr(adcuda, cpu_dtype)))
    assert got.device.type == "cuda"
    rtol = {"float32": 2e-6, "float64": 1e-12, "float16": 1e-3, "bfloat16": 1e-2, "int64": 2e-6}[dtype]
    # an ulp of the smallest subnormals: CUDA's erfcf(10) is 2 of them where the correctly rounded value
    # (the CPU's) is 1, and bfloat16 flushes what is below its own smallest subnormal to 0
    atol = {"float32": 3e-45, "bfloat16": 1e-40}.get(dtype, 1e-300)
    np.testing.assert_allclose(
        got.to("cpu", dtype=want.dtype).numpy().astype(np.float64),
        want.numpy().astype(np.float64),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["atan2", "logaddexp2", "ldexp"])
def test_cuda_binary_matches_cpu(name, dtype):
    a, b = zip(*PAIRS, strict=True)
    if name == "ldexp":
        b = ([0.0, 3.0, -3.0, 10.0, -20.0, 1.0, 2.0] * 8)[: len(a)]
    d = getattr(adcuda, dtype)
    got = getattr(adcuda, name)(adcuda.tensor(a, dtype=d, device="cuda"), adcuda.tensor(b, dtype=d, device="cuda"))
    want = getattr(adcuda, name)(adcuda.tensor(a, dtype=d), adcuda.tensor(b, dtype=d))
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=TOL[dtype], atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_cuda_gcd_lcm_match_cpu(name, dtype):
    a, b = [0, 12, -18, 7, 0, 5, 1 << 20, -9], [0, 8, 12, -21, 5, -10, 3 << 12, 0]
    d = getattr(adcuda, dtype)
    got = getattr(adcuda, name)(adcuda.tensor(a, dtype=d, device="cuda"), adcuda.tensor(b, dtype=d, device="cuda"))
    want = getattr(adcuda, name)(adcuda.tensor(a, dtype=d), adcuda.tensor(b, dtype=d))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())


def test_cuda_gradients_and_isin_match_cpu():
    results = []
    for device in ("cpu", "cuda"):
        x = adcuda.tensor([0.3, -0.6, 0.9], dtype=adcuda.float64, device=device, requires_grad=True)
        y = adcuda.tensor([1.0, 2.0, -0.5], dtype=adcuda.float64, device=device, requires_grad=True)
        out = (x.asin() + x.erfc() + x.sinc() + adcuda.atan2(x, y) + x.atanh() + x.asinh()).sum()
        gx, gy = adcuda.autograd.grad(out, (x, y))
        found = adcuda.isin(adcuda.tensor([1, 2, 3], device=device), adcuda.tensor([3, 1], device=device))
        results.append((gx.cpu().numpy(), gy.cpu().numpy(), found.cpu().numpy()))
    for cpu, dev in zip(results[0], results[1], strict=True):
        np.testing.assert_allclose(dev, cpu, rtol=1e-12)
