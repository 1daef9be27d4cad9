"""The CPU backend's gamma family, erfinv and i0 through the host module (``_C.host_special_unary``: the
CUDA kernels' functors of kernels/functors.cuh, run on the host) against the NumPy series of
adcuda/backends/cpu/_special.py (the reference) and against PyTorch: ordinary and extreme arguments,
the poles at the non-positive integers, signed zeros, subnormals, inf and nan; dtypes and shapes."""

import numpy as np
import pytest
import torch

import adcuda
from adcuda._native import _C
from adcuda.backends.cpu import _special

pytestmark = pytest.mark.skipif(
    getattr(_C, "host_special_unary", None) is None, reason="needs the native module adcuda._C"
)

OPS = ("lgamma", "digamma", "trigamma", "erfinv", "i0")
SPECIAL = [0.0, -0.0, 1.0, 2.0, -1.0, -2.0, -7.0, 0.5, -0.5, -2.5, 1e-8, -1e-8, 5e-324, -5e-324, 1e-310]
SPECIAL += [1e15, -1e15 - 0.5, 1e300, -1e300, np.inf, -np.inf, np.nan, 0.9999999, 1.0000001, 1.4616321]


def _arguments(op, dtype):
    rng = np.random.default_rng(31)
    if op == "erfinv":
        x = [rng.uniform(-1, 1, 4000), 1 - 10.0 ** rng.uniform(-15, -1, 500), [1.0, -1.0, 0.0, -0.0]]
        x += [[1.5, -1.0000001, np.inf, -np.inf, np.nan, 1e-300, -1e-310]]
    else:
        spread = 10.0 ** rng.uniform(-300, 300, 500)
        x = [rng.uniform(-40, 40, 4000), rng.uniform(0, 3, 2000), spread, -spread, np.arange(-20.0, 21.0)]
        x += [SPECIAL]
    with np.errstate(over="ignore"):  # float32: the largest magnitudes become inf, kept as cases
        return np.concatenate([np.asarray(part, np.float64) for part in x]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", OPS)
def test_native_path_is_the_reference(op, dtype):
    """The two implementations of one algorithm differ only where their math libraries' log/sin/erf
    round the last bit differently: within 4 ulp of the result, or, near the roots of lgamma and
    digamma (results near 0 computed as differences of terms up to ~30), 4 ulp of those terms."""
    assert _special._native is not None  # the host module of every build has it
    x = _arguments(op, dtype)
    got = getattr(_special, op)(x)
    with np.errstate(all="ignore"):  # the reference warns of the overflows it computes through
        expected = getattr(_special, op + "_reference")(x).astype(dtype)
    assert got.dtype == dtype and got.shape == x.shape
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, expected, rtol=4 * eps, atol=4 * 32 * eps if dtype == np.float64 else 0)
    # the special values exactly: poles (inf or nan, as PyTorch), signed zeros' infinities, nan
    exact = ~np.isfinite(expected) | (expected == 0)
    assert got[exact].tobytes() == expected[exact].tobytes()


def _torch(op, x):
    fn = (lambda t: torch.polygamma(1, t)) if op == "trigamma" else getattr(torch, op)
    return fn(torch.from_numpy(x)).numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", OPS)
def test_native_path_against_pytorch(op, dtype):
    """Nowhere farther from PyTorch than the reference is (beyond the last-bit differences above),
    the special values PyTorch's, and within a few ulp of PyTorch where both algorithms are accurate
    to a few dozen ulp: well away from the roots and poles (near them a relative error is an absolute one
    over a tiny result, or a rounded argument's sin^2), and erfinv away from +-1."""
    x = _arguments(op, dtype)
    got = getattr(_special, op)(x)
    with np.errstate(all="ignore"):
        reference = getattr(_special, op + "_reference")(x).astype(dtype)
    expected = _torch(op, x)
    eps = np.finfo(dtype).eps
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite], expected[~finite])  # nan's sign bit aside
    with np.errstate(all="ignore"):
        slack = 4 * eps * np.abs(expected) + (4 * 32 * eps if dtype == np.float64 else 0)
        assert np.all(np.abs(got - expected)[finite] <= (np.abs(reference - expected) + slack)[finite])
    accurate = (np.abs(x) <= 0.9) if op == "erfinv" else (x >= 3) & (x < 1e6)
    # PyTorch's float64 trigamma is itself accurate to about 3e-10 near 3 (ours to 2e-16, against mpmath)
    rtol = 1e-9 if op == "trigamma" and dtype == np.float64 else 64 * eps
    if op == "i0":  # both series meet at 20, where each is good to about 2e-14 (PyTorch's Chebyshev to 1e-16)
        rtol = max(rtol, 1e-13)
    np.testing.assert_allclose(got[accurate], expected[accurate], rtol=rtol, atol=0)


@pytest.mark.parametrize("op", ["lgamma", "digamma", "erfinv", "i0"])
def test_public_ops_take_the_native_path_for_every_dtype_and_shape(op):
    """float16 through float32, integers through float64, 0-d, empty and strided inputs: the public op
    gives PyTorch's values, dtypes and shapes."""
    fn, theirs = getattr(adcuda, op), getattr(torch, op)
    base = (
        np.array([[0.25, -0.5, 0.75], [0.1, 0.6, -0.3]])
        if op == "erfinv"
        else np.array([[0.5, 3.0, 7.25], [-2.5, 10.0, 1.5]])
    )
    for data in (base, base.T, base[:, ::-2], base[0, 0], base[:0]):
        for dtype in ("float16", "float32", "float64"):
            ours = fn(adcuda.tensor(np.ascontiguousarray(data), dtype=getattr(adcuda, dtype)))
            expected = theirs(torch.tensor(np.ascontiguousarray(data), dtype=getattr(torch, dtype)))
            assert tuple(ours.shape) == tuple(expected.shape) and str(ours.dtype)[7:] == str(expected.dtype)[6:]
            np.testing.assert_allclose(ours.numpy().astype(np.float64), expected.numpy().astype(np.float64), rtol=1e-3)
    ints = adcuda.tensor([1, 2, 3]) if op != "erfinv" else adcuda.tensor([0, 0])
    np.testing.assert_allclose(fn(ints).numpy(), theirs(torch.tensor(ints.tolist())).numpy(), rtol=1e-6)
