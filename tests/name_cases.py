"""The checks test_names_ops.py and test_names_more.py run on each entry of their ``CASES``:
``(fn, floats, others)``, where ``fn(module, F, *inputs)`` is written once for adcuda and PyTorch
alike, ``floats`` are the inputs differentiated (in float64) and ``others`` the rest (indices); and
``case_tests``, which makes them one test per case."""

import warnings

import numpy as np
import pytest

import adcuda
import adcuda.nn.functional as F
from adcuda.autograd import gradcheck


def gpu(test):
    return pytest.mark.cuda(
        pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")(test)
    )


def rnd(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def ours(array, requires_grad=False):
    if array.dtype.kind == "f":
        return adcuda.tensor(array, dtype=adcuda.float64, requires_grad=requires_grad)
    return adcuda.tensor(array)


def check_gradcheck(case):
    fn, floats, others = case
    inputs = [ours(a, True) for a in floats] + [ours(a) for a in others]
    assert gradcheck(lambda *t: fn(adcuda, F, *t), tuple(inputs), eps=1e-6, atol=1e-6, rtol=1e-4)


def check_matches_pytorch(torch, case, grad_rtol=1e-9):
    """Values, shapes and the gradients of a random output gradient against PyTorch's."""
    fn, floats, others = case
    mine = [ours(a, True) for a in floats] + [ours(a) for a in others]
    theirs = [torch.tensor(a, requires_grad=True) for a in floats] + [torch.tensor(a) for a in others]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch's own deprecation notes
        out, expected = fn(adcuda, F, *mine), fn(torch, torch.nn.functional, *theirs)
    assert tuple(out.shape) == tuple(expected.shape)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = rnd(*expected.shape, seed=9)
    out.backward(adcuda.tensor(g, dtype=adcuda.float64))
    expected.backward(torch.tensor(g))
    for a, b in zip(mine, theirs):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=grad_rtol, atol=1e-12)


def check_cuda_matches_cpu(case):
    """Float32 values and gradients on the GPU against the CPU's."""
    fn, floats, others = case
    results = {}
    for device in ("cpu", "cuda"):
        inputs = [adcuda.tensor(a, dtype=adcuda.float32, device=device, requires_grad=True) for a in floats]
        inputs += [adcuda.tensor(a, device=device) for a in others]
        out = fn(adcuda, F, *inputs)
        g = rnd(*out.shape, seed=9)
        out.backward(adcuda.tensor(g, dtype=adcuda.float32, device=device))
        results[device] = [out.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in inputs[: len(floats)]]
    for got, expected in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def case_tests(cases, not_smooth, grad_rtol=None):
    """The tests a module runs on its ``cases`` (``{name: case}``), to be bound to test names there:
    gradcheck (but for the names in ``not_smooth``, not differentiable at ties), against PyTorch
    (``grad_rtol``: a looser gradient tolerance by name), and CUDA against the CPU."""
    names = pytest.mark.parametrize("name", sorted(cases))

    @names
    def test_gradcheck(name):
        if name in not_smooth:
            pytest.skip("not differentiable at ties (compared with PyTorch below)")
        check_gradcheck(cases[name])

    @names
    def test_matches_pytorch(name):
        check_matches_pytorch(pytest.importorskip("torch"), cases[name], (grad_rtol or {}).get(name, 1e-9))

    @gpu
    @names
    def test_ops_on_cuda_match_the_cpu(name):
        check_cuda_matches_cpu(cases[name])

    return test_gradcheck, test_matches_pytorch, test_ops_on_cuda_match_the_cpu
