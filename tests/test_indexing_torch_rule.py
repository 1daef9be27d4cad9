"""PyTorch's advanced-indexing rule (not NumPy's), checked against PyTorch on many keys: integers are
selections applied first, so an integer beside or between index tensors moves none of their dims;
0-d integer tensors act as integers; an Ellipsis over no dims separates nothing; reading, writing
(``__setitem__``, ``index_put``) and gradients; ``range``, tuples and lists as indices."""

import itertools
import random
import warnings

import numpy as np
import pytest

import adcuda

torch = pytest.importorskip("torch")

SHAPE = (3, 4, 5, 2)


def _items(lib):
    """Index items by name, built for ``lib`` (adcuda or torch)."""
    return {
        "0": 0,
        "-1": -1,
        ":": slice(None),
        "1:": slice(1, None),
        "::2": slice(None, None, 2),
        "None": None,
        "...": Ellipsis,
        "[0,1]": [0, 1],
        "[[1],[0]]": [[1], [0]],
        "t[1,0]": lib.tensor([1, 0]),
        "t0d": lib.tensor(1),
        "range2": range(2),
        "True": True,
        "tTrue": lib.tensor(True),
    }


NAMES = list(_items(torch))


def _key(lib, names):
    items = _items(lib)
    return tuple(items[n] for n in names)


def _result(lib, x, names):
    try:
        return x[_key(lib, names)], None
    except (IndexError, RuntimeError, ValueError, TypeError) as error:
        return None, error


def _keys():
    rng = random.Random(27)
    keys = [
        ("0", ":", "[0,1]"),
        ("[0,1]", "0"),
        (":", "0", "[0,1]"),
        ("[0,1]", "0", "[0,1]"),
        ("[0,1]", ":", "0"),
        (":", "[0,1]", "...", "[0,1]"),
        ("[0,1]", "None", "[0,1]"),
        ("t0d", ":", "[0,1]"),
        ("0", ":", "t[1,0]", "-1"),
        ("[[1],[0]]", "0", ":", "[0,1]"),
        ("range2", "[0,1]"),
        ("True", "0", ":", "[0,1]"),
        (":", "0", "True", "[0,1]"),
        ("...", "0", "[0,1]"),
        ("[0,1]", "...", "0"),
        ("t0d",),
        ("t0d", "t0d"),
        ("tTrue", "[0,1]"),
    ]
    while len(keys) < 400:
        n = rng.randint(1, 5)
        key = tuple(rng.choice(NAMES) for _ in range(n))
        if key.count("...") <= 1:  # PyTorch takes several, each over the same dims; NumPy and adcuda refuse
            keys.append(key)
    return keys


KEYS = _keys()


@pytest.mark.parametrize("names", KEYS, ids=lambda k: ",".join(k))
def test_read_matches_torch(names):
    data = np.arange(np.prod(SHAPE)).reshape(SHAPE)
    expected, t_error = _result(torch, torch.tensor(data), names)
    got, a_error = _result(adcuda, adcuda.tensor(data), names)
    if t_error is not None:
        assert a_error is not None, f"torch raised {t_error!r}, adcuda gave shape {tuple(got.shape)}"
        assert isinstance(a_error, adcuda.errors.AdcudaError), repr(a_error)
        return
    assert a_error is None, f"adcuda raised {a_error!r}; torch gave shape {tuple(expected.shape)}"
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.parametrize("names", KEYS[::3], ids=lambda k: ",".join(k))
def test_write_matches_torch(names):
    data = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
    t, a = torch.tensor(data), adcuda.tensor(data)
    expected, t_error = _result(torch, t, names)
    if t_error is not None or expected.numel() == 0:
        return
    # values that differ everywhere, in PyTorch's layout of the indexed part
    values = np.arange(expected.numel(), dtype=np.float32).reshape(tuple(expected.shape)) + 1000
    t[_key(torch, names)] = torch.tensor(values)
    a[_key(adcuda, names)] = adcuda.tensor(values)
    if t._version and len(set(np.asarray(values).ravel())) == values.size:  # no duplicate positions
        np.testing.assert_array_equal(a.numpy(), t.numpy())
    # a value that broadcasts along the leading dims
    if expected.ndim:
        row = np.arange(expected.shape[-1], dtype=np.float32) - 50
        t[_key(torch, names)] = torch.tensor(row)
        a[_key(adcuda, names)] = adcuda.tensor(row)
        np.testing.assert_array_equal(a.numpy(), t.numpy())


@pytest.mark.parametrize("names", KEYS[1::5], ids=lambda k: ",".join(k))
def test_gradient_matches_torch(names):
    data = np.random.default_rng(0).standard_normal(SHAPE)
    t = torch.tensor(data, requires_grad=True)
    a = adcuda.tensor(data, requires_grad=True)
    expected, t_error = _result(torch, t, names)
    if t_error is not None:
        return
    weights = np.arange(expected.numel(), dtype=np.float64).reshape(tuple(expected.shape))
    (expected * torch.tensor(weights)).sum().backward()
    got, _ = _result(adcuda, a, names)
    (got * adcuda.tensor(weights)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy())


def test_issue_example():
    x = adcuda.arange(16).reshape(2, 2, 4)
    assert x[0, :, [0, 1]].tolist() == [[0, 1], [4, 5]]


@pytest.mark.parametrize(
    "key",
    [
        lambda lib: (lib.tensor([0, 2]), slice(None), 1),
        lambda lib: (1, slice(None), lib.tensor([[0], [1]])),
        lambda lib: (slice(None), 1, slice(None), lib.tensor([1, 0, 1])),
        lambda lib: (lib.tensor(1), slice(None), lib.tensor([1, 0, 1])),
    ],
)
def test_write_with_recording_matches_torch(key):
    data = np.zeros(SHAPE)
    t_key, a_key = key(torch), key(adcuda)
    shape = tuple(torch.zeros(SHAPE)[t_key].shape)
    values = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) + 1
    tv = torch.tensor(values, requires_grad=True)
    av = adcuda.tensor(values, requires_grad=True)
    t = torch.tensor(data, requires_grad=True).clone()
    a = adcuda.tensor(data, requires_grad=True).clone()
    t[t_key] = tv * 2
    a[a_key] = av * 2
    np.testing.assert_array_equal(a.detach().numpy(), t.detach().numpy())
    weights = np.arange(np.prod(SHAPE), dtype=np.float64).reshape(SHAPE)
    (t * torch.tensor(weights)).sum().backward()
    (a * adcuda.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(av.grad.numpy(), tv.grad.numpy())


def test_index_put_function_with_tensor_indices():
    data = np.zeros((3, 4))
    rows, cols = [0, 2, 2], [1, 0, 3]
    values = np.array([1.0, 2.0, 3.0])
    expected = torch.tensor(data).index_put((torch.tensor(rows), torch.tensor(cols)), torch.tensor(values), True)
    got = adcuda.tensor(data).index_put((adcuda.tensor(rows), adcuda.tensor(cols)), adcuda.tensor(values), True)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_range_read_and_write():
    x = adcuda.zeros(3, 4)
    idx = adcuda.tensor([0, 1, 2])
    x[range(3), idx] = 1.0
    assert x[range(3), idx].tolist() == [1.0, 1.0, 1.0]
    assert x.sum().item() == 3.0


def test_list_key_read_as_tuple_where_torch_does():
    y = np.arange(8).reshape(2, 4)
    for key in ([[0, 1], [1, 0]], [0, [1]], [slice(None), 0], [None, 0]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's deprecation of this form
            expected = torch.tensor(y)[key]
        got = adcuda.tensor(y)[key]
        assert tuple(got.shape) == tuple(expected.shape), key
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.tensor(y)[[torch.tensor(0), torch.tensor(1)]]
    got = adcuda.tensor(y)[[adcuda.tensor(0), adcuda.tensor(1)]]
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_slice_with_0d_tensor_bounds():
    x = adcuda.arange(10)
    assert x[adcuda.tensor(2) : adcuda.tensor(7) : adcuda.tensor(2)].tolist() == [2, 4, 6]


def test_combinations_of_two_arrays_and_an_int_cover_every_position():
    data = np.arange(np.prod(SHAPE)).reshape(SHAPE)
    t, a = torch.tensor(data), adcuda.tensor(data)
    for perm in itertools.permutations(["[0,1]", "t[1,0]", "0", ":"]):
        expected = t[_key(torch, perm)]
        got = a[_key(adcuda, perm)]
        np.testing.assert_array_equal(got.numpy(), expected.numpy(), err_msg=str(perm))
