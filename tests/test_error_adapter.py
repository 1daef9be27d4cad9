"""The adapter at the dispatch point: any error NumPy or Python raises below an op reaches the user as
an adcuda error that names the op and the shapes and dtypes of its arguments, still catchable as the
built-in class it was, with the original kept as ``__cause__``."""

import numpy as np
import pytest

import adcuda
from adcuda import errors
from adcuda.backends import cpu as cpu_backend


class _UserError(Exception):
    pass


RAISED = [
    (IndexError("tuple index out of range"), IndexError, errors.IndexOutOfRangeError),
    (np.exceptions.AxisError(3, 2), IndexError, errors.DimOutOfRangeError),
    (np.exceptions.AxisError(3, 2), ValueError, errors.DimOutOfRangeError),
    (ValueError("zero-size array to reduction operation"), ValueError, errors.InvalidArgumentError),
    (TypeError("unsupported operand"), TypeError, errors.DTypeError),
    (FloatingPointError("overflow encountered"), FloatingPointError, errors.NumericError),
    (ZeroDivisionError("integer division by zero"), ZeroDivisionError, errors.DivisionByZeroError),
    (OverflowError("Python int too large to convert"), OverflowError, errors.NumericOverflowError),
    (KeyError("missing"), KeyError, errors.MissingKeyError),
    (RuntimeError("native failure"), RuntimeError, errors.OpRuntimeError),
    (AttributeError("'list' object has no attribute 'shape'"), AttributeError, errors.ArgumentTypeError),
    (AttributeError("'list' object has no attribute 'shape'"), TypeError, errors.ArgumentTypeError),
]


def _raising(error):
    def primitive(*args, **kwargs):
        raise error

    return primitive


@pytest.mark.parametrize("raised, builtin, adapted", RAISED, ids=lambda v: type(v).__name__)
def test_a_raw_error_below_an_op_becomes_an_adcuda_error(monkeypatch, raised, builtin, adapted):
    monkeypatch.setattr(cpu_backend, "cumsum", _raising(raised))
    x = adcuda.ones(2, 3, dtype=adcuda.float64)
    with pytest.raises(builtin) as caught:
        adcuda.cumsum(x, 1)
    error = caught.value
    assert isinstance(error, adapted), type(error)
    assert isinstance(error, errors.AdcudaError)
    assert error.__cause__ is raised
    message = str(error)
    assert message.startswith("cumsum:"), message
    assert "(2, 3)" in message and "float64" in message, message


def test_an_error_of_user_code_passes_unchanged(monkeypatch):
    raised = _UserError("from a callback")
    monkeypatch.setattr(cpu_backend, "cumsum", _raising(raised))
    with pytest.raises(_UserError) as caught:
        adcuda.cumsum(adcuda.ones(3), 0)
    assert caught.value is raised


def test_adcuda_errors_pass_unchanged():
    with pytest.raises(errors.ShapeError) as caught:
        adcuda.ones(2, 3) + adcuda.ones(4)
    assert caught.value.__cause__ is None


def test_adapted_while_a_hook_watches(monkeypatch):
    monkeypatch.setattr(cpu_backend, "cumsum", _raising(IndexError("tuple index out of range")))
    with adcuda.profiler.profile():
        with pytest.raises(errors.IndexOutOfRangeError, match="^cumsum:"):
            adcuda.cumsum(adcuda.ones(3), 0)


def test_adapted_in_an_inplace_form(monkeypatch):
    monkeypatch.setattr(cpu_backend, "clamp", _raising(FloatingPointError("invalid value")))
    x = adcuda.ones(4)
    with pytest.raises(FloatingPointError) as caught:
        x.clamp_(0, 1)
    assert isinstance(caught.value, errors.NumericError)
    assert str(caught.value).startswith("clamp_:")


def test_adcuda_errors_are_runtime_errors_like_pytorchs():
    """PyTorch raises RuntimeError for shape and dtype mismatches: code that catches it keeps working."""
    with pytest.raises(RuntimeError):
        adcuda.cat([adcuda.zeros(2, 3), adcuda.zeros(3, 2)])
    with pytest.raises(RuntimeError):
        adcuda.zeros(3).gather(0, adcuda.tensor([5]))


@pytest.mark.parametrize(
    "call",
    [
        lambda: adcuda.tensor(1.0).chunk(2),
        lambda: adcuda.tensor(1.0).unbind(),
        lambda: adcuda.tensor(1.0).roll(1, 0),
        lambda: adcuda.tensor(1.0).split(1),
        lambda: adcuda.tensor(1.0).size(0),
        lambda: adcuda.tensor(1.0).stride(0),
        lambda: len(adcuda.tensor(1.0)),
        lambda: adcuda.zeros(3)["a"],
        lambda: adcuda.zeros(3)[1.5],
    ],
)
def test_no_raw_error_from_these(call):
    with pytest.raises(Exception) as caught:
        call()
    assert isinstance(caught.value, errors.AdcudaError), repr(caught.value)


def test_a_list_item_that_is_no_tensor_is_a_type_error_before_its_shapes():
    """PyTorch's argument parser refuses an item of a list of tensors that is something else (a
    TypeError) before the op looks at shapes; a Parameter is a tensor, and its shape error stays."""
    for call in (
        lambda: adcuda.meshgrid(adcuda.ones(2, 3), True),
        lambda: adcuda.block_diag(adcuda.ones(2), (0, 1)),
        lambda: adcuda.cartesian_prod(adcuda.ones(2), 2),
    ):
        with pytest.raises(TypeError, match="expected Tensor as element 1") as caught:
            call()
        assert isinstance(caught.value, errors.DTypeError)
    p, q = adcuda.nn.Parameter(adcuda.ones(2)), adcuda.nn.Parameter(adcuda.ones(2, 3))
    with pytest.raises(errors.ShapeError, match="cat: sizes of tensors must match"):
        adcuda.cat([p, q])


def test_a_functional_inplace_form_given_a_list_names_it():
    with pytest.raises(TypeError, match="relu_: input must be a Tensor, got list") as caught:
        adcuda.nn.functional.relu_([1.0, -1.0])
    assert isinstance(caught.value, errors.DTypeError)
