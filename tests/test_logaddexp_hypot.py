"""logaddexp and hypot: added as the example of what a new elementwise op takes (one registry entry in
adcuda/ops/elementwise.py, one entry in the CPU backend's BINARY_OPS, one functor in
kernels/functors.cuh with its line in kernels/elementwise_binary.cu's binary table).

On the CPU: float64 gradcheck (and gradgradcheck), values and gradients against PyTorch, broadcasting,
scalar operands, the overflow the ops exist to avoid. With a GPU (``cuda``-marked, run on the CUDA
emulator without one): the primitive against the CPU backend in fp32/fp16/bf16/fp64 on odd, empty,
0-d, strided and broadcast shapes, and the ops' forward and backward against the CPU."""

import numpy as np
import pytest
from cuda_arrays import assert_matches, held

import adcuda
from adcuda import dtypes as dt
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.backends import cpu

OPS = ("logaddexp", "hypot")
F64 = adcuda.float64
CUDA = adcuda.cuda.is_available()


def gpu(test):
    return pytest.mark.cuda(pytest.mark.skipif(not CUDA, reason="needs a usable CUDA device")(test))


def rng(seed):
    return np.random.default_rng(seed)


def leaf(values, dtype=F64, device="cpu"):
    return adcuda.tensor(np.asarray(values), dtype=dtype, device=device, requires_grad=True)


@pytest.mark.parametrize("name", OPS)
def test_declared_once_with_function_method_and_node(name):
    definition = adcuda.ops.get(name)
    assert definition.family == "elementwise" and definition.differentiable
    assert getattr(adcuda, name) is definition.entry and getattr(adcuda.Tensor, name) is definition.entry
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    assert getattr(a, name)(b).grad_fn.name == {"logaddexp": "LogaddexpBackward0", "hypot": "HypotBackward0"}[name]


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((), (5,))], ids=str)
def test_gradcheck_and_gradgradcheck(name, shapes):
    fn = getattr(adcuda, name)
    a, b = leaf(rng(1).standard_normal(shapes[0]) * 2), leaf(rng(2).standard_normal(shapes[1]) * 2)
    assert gradcheck(fn, (a, b))
    assert gradgradcheck(fn, (a, b))


@pytest.mark.parametrize("name", OPS)
def test_values_and_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    a_np = np.concatenate([rng(3).standard_normal(20) * 5, [0.0, -0.0, 700.0, -700.0, 1e-200, np.inf, -np.inf]])
    b_np = np.concatenate([rng(4).standard_normal(20) * 5, [0.0, 1.0, 700.0, 750.0, 1e-200, 1.0, -np.inf]])
    g_np = rng(5).uniform(0.5, 1.5, a_np.shape)
    a, b = leaf(a_np), leaf(b_np)
    out = getattr(adcuda, name)(a, b)
    out.backward(adcuda.tensor(g_np, dtype=F64))
    ta, tb = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (a_np, b_np))
    tout = getattr(torch, name)(ta, tb)
    tout.backward(torch.tensor(g_np))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-14, atol=0)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12, atol=1e-300, equal_nan=True)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-300, equal_nan=True)


def test_no_overflow_where_the_naive_formulas_overflow():
    big = adcuda.tensor([1000.0, 2e38], dtype=adcuda.float32)  # exp(1000) and (2e38)^2 overflow float32
    assert adcuda.logaddexp(big[:1], big[:1]).item() == pytest.approx(1000.0 + np.log(2.0))
    assert adcuda.hypot(big[1:], big[1:]).item() == pytest.approx(2e38 * np.sqrt(2.0), rel=1e-6)
    tiny = adcuda.tensor([1e-30], dtype=adcuda.float32)  # tiny * tiny underflows to 0 in float32
    assert adcuda.hypot(tiny, tiny).item() == pytest.approx(1e-30 * np.sqrt(2.0), rel=1e-6)


@pytest.mark.parametrize("name", OPS)
def test_promotion_scalars_and_broadcast(name):
    fn = getattr(adcuda, name)
    ints = adcuda.tensor([3, 4])
    with pytest.raises(NotImplementedError, match=name):  # two integer tensors: PyTorch raises this too
        fn(ints, ints)
    assert fn(ints, adcuda.tensor([1.0])).dtype is adcuda.float32  # promoted to a float: computed
    x = leaf([[1.0], [2.0]])
    out = fn(x, 2.0)
    assert out.shape == (2, 1) and out.requires_grad
    np.testing.assert_allclose(
        fn(x, adcuda.tensor([0.5, 1.5, 2.5], dtype=F64)).detach().numpy(),
        getattr(np, name)(x.detach().numpy(), [0.5, 1.5, 2.5]),
        rtol=1e-15,
    )
    with pytest.raises(adcuda.ShapeError, match=name):
        fn(adcuda.ones(2), adcuda.ones(3))


# ------------------------------------------------------------------------------------------------
# on a GPU (or the CUDA emulator)
FLOATS = (dt.float32, dt.float16, dt.bfloat16, dt.float64)
TOLERANCE = {dt.float64: (1e-12, 1e-13), dt.float32: (3e-6, 1e-6), dt.float16: (4e-3, 2e-3), dt.bfloat16: (2e-2, 1e-2)}


def _check(cb, got, expected, dtype):
    assert_matches(cb, got, expected, TOLERANCE[dtype])


@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize(
    "shapes",
    [
        ((1,), (1,)),
        ((7,), (7,)),
        ((1023,), (1023,)),
        ((65537,), (1,)),
        ((), ()),
        ((0,), (0,)),
        ((3, 0, 2), (1, 2)),
        ((33, 65), (65,)),
        ((7, 1), (1, 9)),
    ],
    ids=str,
)
def test_primitive_matches_the_cpu_backend(cb, name, dtype, shapes):
    ref_dtype = dt.float32 if dtype is dt.bfloat16 else dtype
    a, a_host = held(cb, rng(6).standard_normal(shapes[0]) * 4, dtype)
    b, b_host = held(cb, rng(7).standard_normal(shapes[1]) * 4, dtype)
    _check(cb, cb.binary(name, a, b, dtype), cpu.binary(name, a_host, b_host, ref_dtype), dtype)
    _check(cb, cb.binary(name, a, 1.5, dtype), cpu.binary(name, a_host, 1.5, ref_dtype), dtype)
    _check(cb, cb.binary(name, 1.5, b, dtype), cpu.BINARY_OPS[name](np.asarray(1.5, b_host.dtype), b_host), dtype)


@gpu
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("name", OPS)
def test_primitive_on_strided_and_special_values(cb, name, dtype):
    ref_dtype = dt.float32 if dtype is dt.bfloat16 else dtype
    special = [0.0, -0.0, 1.0, -1.0, 30.0, -30.0, np.inf, -np.inf, np.nan]
    a_np, b_np = (g.ravel() for g in np.meshgrid(special, special))
    a, a_host = held(cb, a_np, dtype)
    b, b_host = held(cb, b_np, dtype)
    _check(cb, cb.binary(name, a, b, dtype), cpu.binary(name, a_host, b_host, ref_dtype), dtype)
    m, m_host = held(cb, rng(8).standard_normal((9, 14)) * 3, dtype)
    t = cb.permute(m, (1, 0))  # transposed
    s = cb.slice(m, (slice(None), slice(None, None, 2)))  # every other column
    _check(cb, cb.binary(name, t, t, dtype), cpu.binary(name, m_host.T, m_host.T, ref_dtype), dtype)
    _check(cb, cb.binary(name, s, s, dtype), cpu.binary(name, m_host[:, ::2], m_host[:, ::2], ref_dtype), dtype)


@gpu
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", (adcuda.float32, adcuda.float64), ids=str)
def test_op_forward_and_backward_match_the_cpu(name, dtype):
    a_np, b_np = rng(9).standard_normal((5, 7)) * 3, rng(10).standard_normal((7,)) * 3
    results = {}
    for device in ("cpu", "cuda"):
        a, b = leaf(a_np, dtype, device), leaf(b_np, dtype, device)
        out = getattr(adcuda, name)(a, b)
        out.backward(adcuda.ones((5, 7), dtype=dtype, device=device))
        results[device] = [t.detach().cpu().numpy() for t in (out, a.grad, b.grad)]
    rtol = 1e-12 if dtype is adcuda.float64 else 2e-5
    for got, expected in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol)


@gpu
@pytest.mark.parametrize("name", OPS)
def test_gradient_matches_central_differences_on_the_gpu(name):
    """float64 on the device: the backward's vector-Jacobian product against central differences of
    the forward, both computed there."""
    fn = getattr(adcuda, name)
    r = rng(11)
    values = [r.standard_normal((3, 4)) * 2, r.standard_normal((3, 4)) * 2]
    xs = [leaf(v, device="cuda") for v in values]
    u = adcuda.tensor(r.standard_normal((3, 4)), dtype=F64, device="cuda")
    grads = adcuda.autograd.grad((fn(*xs) * u).sum(), xs)
    eps = 1e-6
    for k in range(2):
        v = r.standard_normal((3, 4))
        analytical = float((grads[k].cpu().numpy() * v).sum())
        with adcuda.no_grad():
            shifted = [
                float(
                    (
                        fn(
                            *[
                                adcuda.tensor(x + (sign * eps * v if i == k else 0), dtype=F64, device="cuda")
                                for i, x in enumerate(values)
                            ]
                        )
                        * u
                    )
                    .sum()
                    .item()
                )
                for sign in (1, -1)
            ]
        assert analytical == pytest.approx((shifted[0] - shifted[1]) / (2 * eps), rel=1e-5, abs=1e-7)
