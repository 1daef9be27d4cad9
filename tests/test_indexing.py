"""Indexing: reading and ``[]=`` with ints, stepped slices, None, Ellipsis, integer tensors and
lists, boolean masks and mixes of them, against NumPy and PyTorch; gradients by gradcheck;
gather, scatter_add, index_select, masked_fill(_), tril, triu, one_hot; and errors that name the
op, the index and the shape."""

import numpy as np
import pytest

import adcuda as A
from adcuda.autograd import gradcheck
from adcuda.errors import (
    AutogradError,
    IndexOutOfRangeError,
    IndexValueError,
    ShapeError,
    UnsupportedDTypeError,
)

F64 = A.float64
BASE = np.arange(24.0).reshape(2, 3, 4)
RNG = np.random.default_rng(0)
SMALL = RNG.standard_normal((2, 3, 4))


def leaf(array):
    return A.tensor(np.asarray(array, dtype=np.float64), dtype=F64, requires_grad=True)


def shares(a, b):
    return np.shares_memory(a.detach().numpy(), b.detach().numpy())


# name: key builder taking the module (adcuda or torch) -> key; NumPy takes the same key with
# tensors turned into arrays
KEYS = {
    "int": lambda m: 1,
    "negative int": lambda m: -1,
    "ints": lambda m: (1, 2, 3),
    "slice": lambda m: slice(1, None),
    "stepped slices": lambda m: (slice(None), slice(None, None, 2), slice(1, None, 3)),
    "slice past the end": lambda m: slice(1, 10),
    "negative slice bounds": lambda m: (slice(None), slice(-2, None)),
    "empty slice": lambda m: slice(2, 1),
    "0-d tensor bounds": lambda m: slice(m.tensor(1), m.tensor(-1)),
    "0-d int32 and None bounds": lambda m: slice(None, m.tensor(2, dtype=m.int32)),
    "None": lambda m: None,
    "None in the middle": lambda m: (0, None, slice(None), None),
    "Ellipsis": lambda m: (Ellipsis, 1),
    "Ellipsis and None": lambda m: (1, Ellipsis, None),
    "Ellipsis alone": lambda m: Ellipsis,
    "int list": lambda m: [1, 0, 1],
    "negative int list": lambda m: [-1, 0],
    "int tensor": lambda m: m.tensor([1, 0]),
    "int32 tensor": lambda m: m.tensor([1, 0], dtype=m.int32),
    "2-d int tensor": lambda m: m.tensor([[0, 1], [1, 1]]),
    "two int lists": lambda m: ([0, 1], [2, 0]),
    "broadcast int lists": lambda m: (m.tensor([[0], [1]]), m.tensor([0, 2])),
    "list and slice": lambda m: (slice(None), [2, 0], slice(1, 3)),
    "lists split by a slice": lambda m: ([0, 1], slice(None), [3, 0]),
    "int and list": lambda m: (1, [0, 2], slice(None, None, 2)),
    "mask": lambda m: m.tensor(BASE) > 10,
    "mask of leading dims": lambda m: m.tensor(BASE[:, :, 0]) > 5,
    "mask of one dim": lambda m: (slice(None), m.tensor([True, False, True])),
    "mask and int": lambda m: (m.tensor([False, True]), 2),
    "bool list": lambda m: [True, False],
    "empty list": lambda m: [],
    "None and list": lambda m: (None, [0, 1]),
}


def numpy_key(key):
    from adcuda import Tensor

    items = key if isinstance(key, tuple) else (key,)
    out = tuple(k.numpy() if isinstance(k, Tensor) else k for k in items)
    return out if isinstance(key, tuple) else out[0]


@pytest.mark.parametrize("name", sorted(KEYS))
def test_reading_matches_numpy(name):
    key = KEYS[name](A)
    got = A.tensor(BASE, dtype=F64)[key]
    want = BASE[numpy_key(key)]
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_reading_matches_torch(name):
    torch = pytest.importorskip("torch")
    got = A.tensor(BASE, dtype=F64)[KEYS[name](A)]
    want = torch.tensor(BASE)[KEYS[name](torch)]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", sorted(KEYS))
def test_reading_gradcheck(name):
    key = KEYS[name](A)
    assert gradcheck(lambda x: x[key] * 1.0, (leaf(SMALL),))


BASIC = ["int", "ints", "slice", "stepped slices", "None in the middle", "Ellipsis", "Ellipsis alone"]
ADVANCED = ["int list", "int tensor", "mask", "list and slice"]


@pytest.mark.parametrize("name", BASIC)
def test_basic_keys_give_views(name):
    t = A.tensor(BASE, dtype=F64)
    v = t[KEYS[name](A)]
    assert shares(v, t) and v._version is t._version


@pytest.mark.parametrize("name", ADVANCED)
def test_advanced_keys_give_copies(name):
    t = A.tensor(BASE, dtype=F64)
    v = t[KEYS[name](A)]
    assert not shares(v, t)


def test_repeated_indices_accumulate_their_gradients():
    x = leaf([1.0, 2.0, 3.0])
    (x[[0, 0, 2, 0]] * A.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64)).sum().backward()
    assert x.grad.tolist() == [7.0, 0.0, 3.0]


# ----------------------------------------------------------------------------------------------
# assignment
ASSIGN = {
    "int, scalar": (lambda m: 0, lambda m: 5.0),
    "slice, broadcast row": (
        lambda m: (slice(None), slice(0, 2)),
        lambda m: m.tensor([1.0, 2.0, 3.0, 4.0], dtype=m.float64),
    ),
    "stepped, scalar": (lambda m: (Ellipsis, slice(None, None, 2)), lambda m: -1.0),
    "None, scalar": (lambda m: (None, 1), lambda m: 3.0),
    "list, 0-d tensor": (lambda m: [1, 0], lambda m: m.tensor(7.0, dtype=m.float64)),
    "list and int, broadcast": (
        lambda m: (slice(None), [0, 2], 1),
        lambda m: m.tensor([[9.0], [8.0]], dtype=m.float64),
    ),
    "mask, scalar": (lambda m: m.tensor(BASE) > 5, lambda m: 0.0),
    "mask, values": (lambda m: m.tensor(BASE) > 20, lambda m: m.tensor([1.0, 2.0, 3.0], dtype=m.float64)),
    "2-d int tensor": (lambda m: m.tensor([[0, 1]]), lambda m: 3.0),
    "int value into float": (lambda m: 1, lambda m: 4),
}


def _assign(module, name):
    key, value = ASSIGN[name]
    t = module.tensor(BASE.copy())
    t[key(module)] = value(module)
    return t


@pytest.mark.parametrize("name", sorted(ASSIGN))
def test_assignment_matches_numpy_and_bumps_the_version(name):
    got = _assign(A, name)
    key, value = ASSIGN[name]
    want = BASE.copy()
    v = value(A)
    want[numpy_key(key(A))] = v.numpy() if isinstance(v, A.Tensor) else v
    np.testing.assert_array_equal(got.numpy(), want)
    assert got._version.value == 1


@pytest.mark.parametrize("name", sorted(ASSIGN))
def test_assignment_matches_torch(name):
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(_assign(A, name).numpy(), _assign(torch, name).numpy())


def test_assignment_through_a_view_writes_the_base():
    t = A.tensor(BASE, dtype=F64)
    t[1][0, ::2] = -1.0
    assert t[1, 0].tolist() == [-1.0, 13.0, -1.0, 15.0]


def test_assigning_a_value_that_requires_grad():
    v = leaf([1.0, 2.0, 3.0, 4.0])
    t = A.zeros(2, 3, 4, dtype=F64)
    t[:, 1] = v * 2
    assert t.requires_grad
    (t * A.tensor(BASE, dtype=F64)).sum().backward()
    np.testing.assert_array_equal(v.grad.numpy(), 2 * BASE[:, 1].sum(0))


def test_assigning_into_a_tensor_that_requires_grad():
    x = leaf(SMALL)
    y = x * 1
    y[0, :, 1:3] = 0.0
    y.sum().backward()
    want = np.ones_like(SMALL)
    want[0, :, 1:3] = 0
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_assignment_gradcheck_with_basic_and_advanced_keys():
    def fn(x, v):
        y = x * 1
        y[:, [0, 2], 1] = v[:1, 0] * 3  # advanced key, broadcast value
        y[1, 1:, ::2] = v  # basic key
        y[A.tensor(SMALL[:, :, 0] > 0), 3] = v[1, 1]  # mask and int
        return y

    assert gradcheck(fn, (leaf(SMALL), leaf(RNG.standard_normal((2, 2)))))


def test_assignment_with_duplicate_indices_matches_torch_gradients():
    torch = pytest.importorskip("torch")
    results = []
    for m in (A, torch):
        x = m.tensor(BASE, dtype=m.float64, requires_grad=True)
        v = m.tensor([1.0, 2.0, 3.0, 4.0], dtype=m.float64, requires_grad=True)
        y = x * 2
        y[:, [0, 0]] = v
        y[0, 1:] = v * 3
        (y * y).sum().backward()
        results.append((x.grad.numpy().copy(), v.grad.numpy().copy()))
    np.testing.assert_allclose(results[0][0], results[1][0])
    np.testing.assert_allclose(results[0][1], results[1][1])


def test_assignment_into_a_leaf_that_requires_grad_is_refused():
    with pytest.raises(AutogradError, match="index_put_: a leaf Variable"):
        leaf([1.0, 2.0])[0] = 3.0


# ----------------------------------------------------------------------------------------------
# gather, scatter_add, index_select, masked_fill, tril, triu, one_hot
IDX = np.array([[[0, 3], [1, 1], [2, 0]], [[3, 3], [0, 1], [2, 2]]])


def test_gather_and_scatter_add_match_numpy():
    t = A.tensor(BASE, dtype=F64)
    np.testing.assert_array_equal(t.gather(2, A.tensor(IDX)).numpy(), np.take_along_axis(BASE, IDX, 2))
    src = A.tensor(BASE[:, :, :2].copy(), dtype=F64)
    want = BASE.copy()
    for i, j, k in np.ndindex(*IDX.shape):
        want[i, j, IDX[i, j, k]] += BASE[i, j, k]
    np.testing.assert_array_equal(A.scatter_add(t, 2, A.tensor(IDX), src).numpy(), want)


def test_index_ops_match_torch():
    torch = pytest.importorskip("torch")
    for m_a, m_t in ((A, torch),):
        a, t = m_a.tensor(BASE), m_t.tensor(BASE)
        pairs = [
            (a.gather(1, m_a.tensor([[[0, 2, 1, 0]]])), t.gather(1, m_t.tensor([[[0, 2, 1, 0]]]))),
            (
                a.scatter_add(2, m_a.tensor(IDX), a[:, :, :2].contiguous()),
                t.scatter_add(2, m_t.tensor(IDX), t[:, :, :2].contiguous()),
            ),
            (a.index_select(1, m_a.tensor([2, 0, 2])), t.index_select(1, m_t.tensor([2, 0, 2]))),
            (a.masked_fill(a > 5, -1.0), t.masked_fill(t > 5, -1.0)),
            (
                a.masked_fill(m_a.tensor([True, False, False, True]), 0.5),
                t.masked_fill(m_t.tensor([True, False, False, True]), 0.5),
            ),
            (a.tril(), t.tril()),
            (a.triu(1), t.triu(1)),
            (a.tril(-1), t.tril(-1)),
            (a.triu(-2), t.triu(-2)),
            (A.nn.functional.one_hot(m_a.tensor([0, 2, 1])), torch.nn.functional.one_hot(m_t.tensor([0, 2, 1]))),
            (
                A.nn.functional.one_hot(m_a.tensor([[1], [0]]), 4),
                torch.nn.functional.one_hot(m_t.tensor([[1], [0]]), 4),
            ),
        ]
        for got, want in pairs:
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_one_hot_values_and_dtype():
    got = A.one_hot(A.tensor([2, 0]), 3)
    assert got.dtype == A.int64 and got.tolist() == [[0, 0, 1], [1, 0, 0]]
    assert tuple(A.one_hot(A.tensor([], dtype=A.int64), 3).shape) == (0, 3)


INDEX_OPS = {
    "gather": lambda x: x.gather(2, A.tensor(IDX)),
    "gather smaller index": lambda x: x.gather(1, A.tensor([[[0, 2]]])),
    "scatter_add": lambda x: A.zeros(2, 3, 4, dtype=F64).scatter_add(2, A.tensor(IDX), x[:, :, :2]),
    "scatter_add into input": lambda x: x.scatter_add(2, A.tensor(IDX), x[:, :, 1:3] * 2),
    "index_select": lambda x: x.index_select(1, A.tensor([2, 0, 2])),
    "masked_fill": lambda x: x.masked_fill(A.tensor(SMALL) > 0, 3.0),
    "masked_fill tensor value": lambda x: x.masked_fill(A.tensor(SMALL) > 0, x[0, 0, 0]),
    "tril": lambda x: x.tril(),
    "triu": lambda x: x.triu(1),
}


@pytest.mark.parametrize("name", sorted(INDEX_OPS))
def test_index_ops_gradcheck(name):
    assert gradcheck(INDEX_OPS[name], (leaf(SMALL),))


def test_masked_fill_in_place():
    t = A.tensor(BASE, dtype=F64)
    out = t.masked_fill_(t > 20, 0.0)
    assert out is t and t._version.value == 1
    assert t.numpy().max() == 20.0
    x = leaf(SMALL)
    y = x * 1
    y.masked_fill_(A.tensor(SMALL) > 0, 0.0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), (SMALL <= 0).astype(float))


# ----------------------------------------------------------------------------------------------
# errors
INDEX_ERRORS = [
    (
        "int out of range",
        lambda t: t[2],
        IndexOutOfRangeError,
        r"index: index \[2\] .*shape \(2, 3, 4\).*out of bounds",
    ),
    (
        "second int out of range",
        lambda t: t[:, 5],
        IndexOutOfRangeError,
        r"index \[slice\(None, None, None\), 5\].*\(2, 3, 4\)",
    ),
    ("negative int out of range", lambda t: t[-3], IndexOutOfRangeError, r"\[-3\].*\(2, 3, 4\)"),
    ("list out of range", lambda t: t[[0, 2]], IndexOutOfRangeError, r"index: index \[\[0, 2\]\].*\(2, 3, 4\)"),
    (
        "tensor out of range",
        lambda t: t[A.tensor([0, 7])],
        IndexOutOfRangeError,
        r"index: index \[tensor of shape \(2,\)\].*\(2, 3, 4\).*7",
    ),
    ("too many indices", lambda t: t[0, 0, 0, 0], IndexOutOfRangeError, "too many indices"),
    ("mask shape", lambda t: t[A.tensor([True, False, True])], IndexOutOfRangeError, r"\(2, 3, 4\)"),
    ("float tensor", lambda t: t[A.tensor([0.0])], IndexOutOfRangeError, "long, int or bool"),
    ("negative step", lambda t: t[::-1], ValueError, "index: slice step must be greater than zero, got -1"),
    ("zero step", lambda t: t[::0], ValueError, "step must be greater than zero"),
    ("string", lambda t: t["a"], TypeError, "unsupported index of type str"),
    (
        "gather out of range",
        lambda t: t.gather(2, A.tensor([[[0, 4]]])),
        IndexValueError,
        r"gather: index 4 is out of bounds for dimension 2 with size 4 \(input shape \(2, 3, 4\)\)",
    ),
    ("gather negative", lambda t: t.gather(2, A.tensor([[[-1]]])), IndexValueError, "gather: index -1"),
    ("gather rank", lambda t: t.gather(2, A.tensor([0])), ShapeError, "same number of dimensions"),
    ("gather float index", lambda t: t.gather(2, A.tensor([[[0.0]]])), IndexValueError, "gather: index must be"),
    ("gather dim", lambda t: t.gather(3, A.tensor([[[0]]])), IndexOutOfRangeError, "gather: dimension out of range"),
    (
        "scatter_add out of range",
        lambda t: t.scatter_add(2, A.tensor([[[4]]]), t),
        IndexValueError,
        r"scatter_add: index 4 is out of bounds.*\(2, 3, 4\)",
    ),
    (
        "scatter_add src too small",
        lambda t: t.scatter_add(2, A.tensor([[[0, 1]]]), A.ones(1, 1, 1, dtype=F64)),
        ShapeError,
        "scatter_add: index",
    ),
    (
        "index_select out of range",
        lambda t: t.index_select(1, A.tensor([3])),
        IndexValueError,
        r"index_select: index 3 is out of bounds for dimension 1 with size 3",
    ),
    ("index_select 2-d", lambda t: t.index_select(0, A.tensor([[0]])), IndexOutOfRangeError, "1-D"),
    ("masked_fill int mask", lambda t: t.masked_fill(A.tensor([1, 0, 1, 0]), 1.0), IndexValueError, "bool"),
    (
        "masked_fill shape",
        lambda t: t.masked_fill(A.tensor([True, False]), 1.0),
        ShapeError,
        r"masked_fill: mask of shape \(2,\).*\(2, 3, 4\)",
    ),
    ("masked_fill 1-d value", lambda t: t.masked_fill(t > 3, A.tensor([2.0])), ShapeError, "0-dimensional"),
    ("tril 1-d", lambda t: t[0, 0].tril(), ShapeError, r"tril: input tensor must have at least 2 dimensions.*\(4,\)"),
    ("one_hot too big", lambda t: A.one_hot(A.tensor([0, 5]), 4), IndexValueError, "one_hot: class value 5"),
    ("one_hot negative", lambda t: A.one_hot(A.tensor([-1]), 4), IndexValueError, "non-negative"),
    ("one_hot float", lambda t: A.one_hot(A.tensor([1.0]), 3), UnsupportedDTypeError, "one_hot"),
]


@pytest.mark.parametrize("name,call,error,pattern", INDEX_ERRORS, ids=[e[0] for e in INDEX_ERRORS])
def test_index_errors(name, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(A.tensor(BASE, dtype=F64))


ASSIGN_ERRORS = [
    ("out of range", 3, 9.0, IndexOutOfRangeError, r"index_put_: index \[3\].*\(2, 3, 4\)"),
    ("list out of range", (slice(None), [0, 3]), 9.0, IndexOutOfRangeError, r"index_put_.*\(2, 3, 4\)"),
    ("negative step", slice(None, None, -1), 1.0, ValueError, "step must be greater than zero"),
    (
        "value shape",
        (slice(None), 1),
        A.ones(3, dtype=F64),
        ShapeError,
        r"index_put_: value of shape \(3,\) cannot be written to index .*\(2, 3, 4\)",
    ),
]


@pytest.mark.parametrize("name,key,value,error,pattern", ASSIGN_ERRORS, ids=[e[0] for e in ASSIGN_ERRORS])
def test_assignment_errors(name, key, value, error, pattern):
    t = A.tensor(BASE, dtype=F64)
    with pytest.raises(error, match=pattern):
        t[key] = value
    np.testing.assert_array_equal(t.numpy(), BASE)  # nothing was written


def test_assignment_errors_while_recording():
    y = leaf(SMALL) * 1
    with pytest.raises(ShapeError, match=r"index_put_: value of shape \(3,\)"):
        y[:, 1] = A.ones(3, dtype=F64)
    with pytest.raises(IndexOutOfRangeError, match=r"index_put_.*\(2, 3, 4\)"):
        y[:, [0, 5]] = 1.0


def test_pytorch_rejects_negative_steps_too():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError):
        torch.zeros(3)[::-1]
