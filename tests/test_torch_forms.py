"""Argument forms PyTorch accepts (NumPy's keyword names, sizes and dims by keyword or as varargs, any
sequence as data, reflected operators), the ops copysign fmax fmin rsub unique_consecutive, and
diagonals as strided views: each against PyTorch."""

import collections

import numpy as np
import pytest

import adcuda

torch = pytest.importorskip("torch")

FORMS = [
    "lib.ones(2, 3).sum(1, keepdims=True)",
    "lib.ones(2, 3).sum(axis=0)",
    "lib.ones(2, 3).mean(dim=1, keepdims=True)",
    "lib.ones(2, 3).amax(axis=1, keepdims=True)",
    "lib.ones(2, 3).max(1, keepdims=True)[0]",
    "lib.std(lib.arange(6.0).reshape(2, 3), axis=1)",
    "lib.empty(size=(3, 4)).shape",
    "lib.zeros(size=(3, 4))",
    "lib.ones(size=[2])",
    "lib.rand(size=(2, 3)).shape",
    "lib.arange(24).reshape(2, 3, 4).flip(0, 2)",
    "lib.flip(lib.arange(24).reshape(2, 3, 4), (0, 2))",
    "lib.arange(24).reshape(2, 3, 4).flip(dims=(1,))",
    "lib.arange(6).tile(2, 1)",
    "lib.tile(lib.arange(6), dims=(2,))",
    "lib.arange(6).reshape(shape=(3, 2))",
    "lib.reshape(lib.arange(6), shape=(2, 3))",
    "lib.arange(6).view(size=(3, 2))",
    "lib.arange(6).reshape(2, 3).permute(dims=(1, 0))",
    "lib.permute(lib.arange(6).reshape(2, 3), dims=(1, 0))",
    "lib.arange(3).reshape(3, 1).expand(size=(3, 2))",
    "lib.arange(3).repeat(repeats=(2, 1))",
    "lib.tensor(collections.deque([1, 2, 3]))",
    "lib.tensor(range(4))",
    "lib.tensor([range(2), range(2)])",
    "lib.tensor(collections.deque([1.5, 2]))",
    "3 % lib.tensor([2.0, -2.0, 5.0])",
    "7 % lib.tensor([2, 3, -4])",
    "2 ** lib.tensor([1.0, 2.0, -1.0])",
    "7 // lib.tensor([2.0, -3.0])",
    "lib.copysign(lib.tensor([1.0, -2.0, 0.0, 3.0]), lib.tensor([-1.0, 1.0, -0.0, -2.0]))",
    "lib.copysign(lib.tensor([1, -2]), -1)",
    "lib.fmax(lib.tensor([1.0, float('nan'), 2.0, float('nan')]), lib.tensor([float('nan'), 1.0, 3.0, float('nan')]))",
    "lib.fmin(lib.tensor([1.0, float('nan'), 2.0]), lib.tensor([float('nan'), 1.0, 3.0]))",
    "lib.fmax(lib.tensor([1, 5]), lib.tensor([3.0, 2.0]))",
    "lib.rsub(lib.tensor([1.0, 2.0]), 3)",
    "lib.rsub(lib.tensor([1.0, 2.0]), lib.tensor(3.0), alpha=2)",
    "lib.unique_consecutive(lib.tensor([1, 1, 2, 2, 3, 1, 1, 2]))",
    "lib.unique_consecutive(lib.tensor([1, 1, 2, 2, 3, 1]), return_inverse=True, return_counts=True)",
    "lib.unique_consecutive(lib.tensor([[1, 1], [1, 1], [2, 3], [1, 1]]), return_counts=True, dim=0)",
    "lib.unique_consecutive(lib.tensor([], dtype=lib.int64), return_inverse=True, return_counts=True)",
]


def _run(lib, expression):
    try:
        return eval(expression, {"lib": lib, "collections": collections}), None
    except Exception as error:  # noqa: BLE001 (compared below)
        return None, error


def _plain(value):
    if isinstance(value, (tuple, list)) and not isinstance(value, (torch.Size, adcuda.Size)):
        return [_plain(v) for v in value]
    if hasattr(value, "shape") and hasattr(value, "tolist"):
        return (tuple(value.shape), str(value.dtype).split(".")[-1], np.asarray(value.tolist()).tolist())
    return tuple(value) if isinstance(value, (torch.Size, adcuda.Size)) else value


@pytest.mark.parametrize("expression", FORMS)
def test_form_matches_torch(expression):
    expected, torch_error = _run(torch, expression)
    assert torch_error is None, torch_error
    got, error = _run(adcuda, expression)
    assert error is None, f"adcuda raised {error!r}"
    assert str(_plain(got)) == str(_plain(expected))  # as text: NaN equals NaN


@pytest.mark.parametrize(
    "expression",
    [
        "lib.tensor(i for i in range(3))",
        "lib.tensor({1, 2})",
        "lib.tensor(None)",
        "lib.tensor('abc')",
        "lib.tensor([1, 'a'])",
        "lib.zeros(2, size=(3,))",
        "lib.arange(6).reshape(2, shape=(3,))",
    ],
)
def test_rejected_like_torch(expression):
    _, torch_error = _run(torch, expression)
    _, error = _run(adcuda, expression)
    assert torch_error is not None
    assert isinstance(error, adcuda.errors.AdcudaError), repr(error)
    assert isinstance(error, type(torch_error)), f"{error!r} is not a {type(torch_error).__name__}"


@pytest.mark.parametrize(
    "name, a, b",
    [
        ("copysign", [1.5, -2.0, 0.5, 3.0], [-1.0, 1.0, -2.0, 2.0]),
        ("fmax", [1.0, float("nan"), 2.0, 3.0], [float("nan"), 1.0, 2.0, 4.0]),
        ("fmin", [1.0, float("nan"), 2.0, 3.0], [float("nan"), 1.0, 2.0, 4.0]),
        ("rsub", [1.0, 2.0, 3.0, 4.0], [0.5, 0.5, 0.5, 0.5]),
    ],
)
def test_gradients_match_torch(name, a, b):
    grads = []
    for lib in (torch, adcuda):
        x = lib.tensor(a, dtype=lib.float64, requires_grad=True)
        y = lib.tensor(b, dtype=lib.float64, requires_grad=True)
        weights = lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64)
        (getattr(lib, name)(x, y) * weights).sum().backward()
        grads.append([x.grad.numpy(), y.grad.numpy()])
    for got, expected in zip(grads[1], grads[0]):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "make, offset, dims",
    [
        (lambda lib: lib.arange(12.0).reshape(3, 4), 0, (0, 1)),
        (lambda lib: lib.arange(12.0).reshape(3, 4), 1, (0, 1)),
        (lambda lib: lib.arange(12.0).reshape(3, 4), -2, (0, 1)),
        (lambda lib: lib.arange(12.0).reshape(3, 4).t(), 1, (0, 1)),
        (lambda lib: lib.arange(24.0).reshape(2, 3, 4), 0, (1, 2)),
        (lambda lib: lib.arange(24.0).reshape(2, 3, 4), 1, (-1, -2)),
    ],
)
def test_diagonal_is_a_strided_view(make, offset, dims):
    t, a = make(torch), make(adcuda)
    expected, got = t.diagonal(offset, *dims), a.diagonal(offset, *dims)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert got.stride() == expected.stride()
    got.fill_(-1.0)  # a view: the write reaches the input
    expected.fill_(-1.0)
    np.testing.assert_array_equal(a.numpy(), t.numpy())


def test_trace_and_fill_diagonal_match_torch():
    for shape, wrap in (((4, 4), False), ((7, 3), True), ((7, 3), False), ((3, 3, 3), False)):
        expected = torch.zeros(*shape).fill_diagonal_(2.0, wrap=wrap)
        got = adcuda.zeros(*shape).fill_diagonal_(2.0, wrap=wrap)
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert adcuda.trace(adcuda.arange(9.0).reshape(3, 3)).item() == 12.0


def test_diagonal_gradient_matches_torch():
    grads = []
    for lib in (torch, adcuda):
        x = lib.ones(3, 4, dtype=lib.float64, requires_grad=True)
        (x.diagonal(1) * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])
