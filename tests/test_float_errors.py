"""PyTorch's floating-point policy (adcuda/backends/float_errors.py): inf and nan arithmetic inside an op
or a backward pass says nothing, even where warnings are errors; the caller's own NumPy keeps its
error state; and Python conversions of nan/inf raise PyTorch's classes, as adcuda errors."""

import math
import warnings

import numpy as np
import pytest

import adcuda as A
from adcuda.errors import AdcudaError

F64 = A.float64


def _extremes():
    return A.tensor([0.0, -1.0, 1e4, -1e4, math.inf, -math.inf, math.nan], dtype=F64)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.exp(),
        lambda x: x.log(),
        lambda x: x.acos(),
        lambda x: x.cosh(),
        lambda x: x.reciprocal(),
        lambda x: x / 0.0,
        lambda x: x - x,
        lambda x: x.float().half(),  # float16 overflow on the cast
        lambda x: x.long(),  # nan and inf cast to an integer
        lambda x: x.var(),
        lambda x: x[:0].var(),  # 0/0 inside NumPy's own modules
        # (probabilities 0 and 1 exactly: the logs' -inf; not the NaN, which PyTorch's range check refuses)
        lambda x: A.nn.functional.binary_cross_entropy(x[:-1].sigmoid(), x[:-1].sigmoid()),
    ],
)
def test_no_warning_escapes_an_op(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as `python -W error` or pytest's filterwarnings=error
        call(_extremes())


def test_no_warning_escapes_backward():
    x = A.tensor([0.0, 1.0, -1.0], dtype=F64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x.log().sum().backward()  # 1/0 and log of a negative number
        assert x.grad.tolist() == [math.inf, 1.0, -1.0]
        (g,) = A.autograd.grad(x.sqrt().sum(), x, create_graph=True)  # 0.5 / sqrt(0), sqrt(-1)
        (gg,) = A.autograd.grad(g.sum(), x)
    assert g[0].item() == math.inf and math.isnan(gg[2].item())


def test_the_callers_numpy_state_is_kept():
    before = np.geterr()
    with np.errstate(divide="raise"):
        A.tensor([0.0]).log()  # silent inside the op...
        with pytest.raises(FloatingPointError):
            np.log(np.zeros(1))  # ...and the caller's "raise" holds again after it
    assert np.geterr() == before
    with pytest.raises(AdcudaError):
        A.ones(2) + A.ones(3)  # an op that raises puts the state back too
    assert np.geterr() == before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        np.log(np.zeros(1))
    assert any("divide by zero" in str(w.message) for w in caught)


@pytest.mark.parametrize(
    ("value", "cls"),
    [(math.nan, ValueError), (math.inf, OverflowError), (-math.inf, OverflowError)],
)
def test_int_of_nan_and_inf_raises_pytorchs_class(value, cls):
    with pytest.raises(cls, match="int: cannot convert float") as caught:
        int(A.tensor(value))
    assert isinstance(caught.value, AdcudaError)
    assert int(A.tensor(1e30)) == int(np.float32(1e30))


def test_index_and_iteration_errors_are_adcuda_type_errors():
    with pytest.raises(TypeError, match="__index__: only integer tensors") as caught:
        [0, 1][A.tensor(1.0)]
    assert isinstance(caught.value, AdcudaError)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor") as caught:
        iter(A.tensor(1.0))
    assert isinstance(caught.value, AdcudaError)
