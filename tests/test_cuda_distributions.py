"""adcuda.distributions and the special functions on the CUDA backend, against the CPU backend (no
PyTorch needed: the CPU, checked against PyTorch in tests/test_distributions.py, is the oracle)."""

import numpy as np
import pytest

import adcuda
import adcuda.distributions as D

CUDA = adcuda.cuda.is_available()
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not CUDA, reason="needs a usable CUDA device")]

F64 = adcuda.float64
RNG = np.random.default_rng(29)
SPECIAL_X = np.concatenate([RNG.uniform(-9.5, 40, 200), [1e-8, 0.5, 1.0, 2.0, 1e3, -0.5, -2.5, -7.3, -1e-30]])
SPECIAL_X = SPECIAL_X[np.abs(SPECIAL_X - np.round(SPECIAL_X)) > 1e-3 * (SPECIAL_X < -1e-6)]
POS = RNG.uniform(0.3, 4.0, size=(2, 3))
POS2 = RNG.uniform(0.3, 4.0, size=(2, 3))
LOC = RNG.normal(size=(2, 3))
COV = np.array([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 1.5]])


def on(device, requires_grad=False):
    def make(values):
        return adcuda.tensor(np.asarray(values, np.float64), device=device, requires_grad=requires_grad)

    return make


@pytest.mark.parametrize("dtype", [adcuda.float32, F64], ids=lambda d: d.name)
@pytest.mark.parametrize(
    "name,fn",
    [
        ("lgamma", adcuda.lgamma),
        ("digamma", adcuda.digamma),
        ("trigamma", lambda v: adcuda.polygamma(1, v)),
        ("polygamma3", lambda v: adcuda.polygamma(3, v)),
        ("mvlgamma", lambda v: adcuda.mvlgamma(v.abs() + 1.5, 3)),
    ],
)
def test_special_functions_and_gradients_match_cpu(name, fn, dtype):
    rtol = 2e-5 if dtype is adcuda.float32 else 1e-11
    x_cpu = adcuda.tensor(SPECIAL_X, dtype=dtype, requires_grad=True)
    x_cuda = adcuda.tensor(SPECIAL_X, dtype=dtype, device="cuda", requires_grad=True)
    y_cpu, y_cuda = fn(x_cpu), fn(x_cuda)
    assert y_cuda.device.type == "cuda" and y_cuda.dtype is dtype
    np.testing.assert_allclose(y_cuda.detach().cpu().numpy(), y_cpu.detach().numpy(), rtol=rtol, atol=rtol)
    y_cpu.sum().backward()
    y_cuda.sum().backward()
    np.testing.assert_allclose(x_cuda.grad.cpu().numpy(), x_cpu.grad.numpy(), rtol=rtol * 10, atol=rtol)


def test_erfinv_and_its_gradient_match_cpu():
    z = np.linspace(-0.99, 0.99, 51)
    for dtype in (adcuda.float32, F64, adcuda.float16):
        got = adcuda.erfinv(adcuda.tensor(z, dtype=dtype, device="cuda")).cpu().numpy()
        np.testing.assert_allclose(got, adcuda.erfinv(adcuda.tensor(z, dtype=dtype)).numpy(), rtol=1e-5)
    x_cpu, x_cuda = on("cpu", True)(z), on("cuda", True)(z)
    adcuda.erfinv(x_cpu).sum().backward()
    adcuda.erfinv(x_cuda).sum().backward()
    np.testing.assert_allclose(x_cuda.grad.cpu().numpy(), x_cpu.grad.numpy(), rtol=1e-11)


FAMILIES = {
    "Normal": (lambda w: D.Normal(w(LOC), w(POS)), RNG.normal(size=(2, 3))),
    "Gamma": (lambda w: D.Gamma(w(POS), w(POS2)), POS2),
    "Beta": (lambda w: D.Beta(w(POS), w(POS2)), RNG.uniform(0.1, 0.9, size=(2, 3))),
    "Dirichlet": (lambda w: D.Dirichlet(w(POS)), (lambda p: p / p.sum(-1, keepdims=True))(POS2)),
    "Categorical": (lambda w: D.Categorical(logits=w(LOC)), np.array([0.0, 2.0])),
    "MVN": (lambda w: D.MultivariateNormal(w(LOC), covariance_matrix=w(COV)), RNG.normal(size=(2, 3))),
    "Poisson": (lambda w: D.Poisson(w(POS * 5)), np.array([[0.0, 3, 7], [12, 1, 5]])),
    "Laplace": (lambda w: D.Laplace(w(LOC), w(POS)), RNG.normal(size=(2, 3))),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_log_prob_entropy_and_sampling_on_cuda(name):
    build, value = FAMILIES[name]
    cpu, cuda = build(on("cpu")), build(on("cuda"))
    np.testing.assert_allclose(
        cuda.log_prob(on("cuda")(value)).cpu().numpy(), cpu.log_prob(on("cpu")(value)).numpy(), rtol=1e-10
    )
    if name != "Poisson":
        np.testing.assert_allclose(cuda.entropy().cpu().numpy(), cpu.entropy().numpy(), rtol=1e-10)
    adcuda.manual_seed(4)
    samples = cuda.sample((3000,))
    assert samples.device.type == "cuda" and tuple(samples.shape) == (3000,) + tuple(cpu._extended_shape())
    assert bool(cpu.support.check(samples.cpu()).all())
    if name != "Categorical":
        mean, var = cpu.mean.numpy(), cpu.variance.numpy()
        np.testing.assert_array_less(np.abs(samples.cpu().numpy().mean(0) - mean), 6 * np.sqrt(var / 3000))
    adcuda.manual_seed(4)
    np.testing.assert_array_equal(cuda.sample((3000,)).cpu().numpy(), samples.cpu().numpy())


@pytest.mark.parametrize("name", ["Normal", "Gamma", "Beta", "Dirichlet", "MVN", "Laplace"])
def test_rsample_gradients_reach_cuda_parameters(name):
    build, _ = FAMILIES[name]
    params = []

    def wrap(values):
        t = on("cuda", True)(values)
        params.append(t)
        return t

    dist = build(wrap)
    adcuda.manual_seed(5)
    (dist.rsample((64,)) ** 2).mean().backward()
    for p in params:
        assert p.grad is not None and p.grad.device.type == "cuda"
        assert np.isfinite(p.grad.cpu().numpy()).all()


def test_kl_divergence_on_cuda_matches_cpu():
    for pair in (
        lambda w: (D.Normal(w(LOC), w(POS)), D.Normal(w(POS2), w(POS))),
        lambda w: (D.Gamma(w(POS), w(POS2)), D.Gamma(w(POS2), w(POS))),
        lambda w: (D.Dirichlet(w(POS)), D.Dirichlet(w(POS2))),
        lambda w: (
            D.MultivariateNormal(w(LOC), covariance_matrix=w(COV)),
            D.MultivariateNormal(w(LOC[0]), covariance_matrix=w(COV + np.eye(3))),
        ),
    ):
        got = D.kl_divergence(*pair(on("cuda"))).cpu().numpy()
        # (atol: a KL near 0 is a difference of terms of order 1)
        np.testing.assert_allclose(got, D.kl_divergence(*pair(on("cpu"))).numpy(), rtol=1e-10, atol=1e-12)
