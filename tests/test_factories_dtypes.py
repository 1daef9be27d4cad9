"""Factories (tensor from_numpy zeros ones full empty arange linspace eye rand randn randint randperm
*_like manual_seed), PyTorch's type promotion (a hard-coded table, and every combination against
PyTorch when installed), dtype conversions and their gradients, and bad input that names the op."""

import itertools

import numpy as np
import pytest

import adcuda as A
from adcuda.autograd import gradcheck
from adcuda.errors import DTypeError, ShapeError


# ---------------------------------------------------------------------------------------------------
# tensor() and from_numpy()
def test_tensor_infers_pytorch_dtypes():
    assert A.tensor([1, 2]).dtype is A.int64
    assert A.tensor([1, 2.5]).dtype is A.float32
    assert A.tensor([True, False]).dtype is A.bool
    assert A.tensor([True, 2]).dtype is A.int64
    assert A.tensor([[1, 2], [3, 4.0]]).dtype is A.float32
    assert A.tensor(3).dtype is A.int64 and A.tensor(3).shape == ()
    assert A.tensor(2.5).dtype is A.float32
    assert A.tensor([]).dtype is A.float32 and A.tensor([]).shape == (0,)
    assert A.tensor([[]]).shape == (1, 0)
    # NumPy scalars and arrays keep their dtype, as in PyTorch
    assert A.tensor(np.float64(1.5)).dtype is A.float64
    assert A.tensor([np.float64(1.5), 2.0]).dtype is A.float64
    assert A.tensor([np.int32(1), np.int32(2)]).dtype is A.int32
    assert A.tensor(np.zeros((2, 2), dtype=np.float16)).dtype is A.float16
    assert A.tensor([1, 2], dtype=A.float64).dtype is A.float64
    assert A.tensor([1.7, -1.7], dtype=A.int64).tolist() == [1, -1]


def test_tensor_copies_its_data():
    a = np.ones(3, dtype=np.float32)
    t = A.tensor(a)
    a[0] = 5
    assert t.tolist() == [1.0, 1.0, 1.0]
    src = A.tensor([1.0, 2.0], requires_grad=True)
    copy = A.tensor(src)
    assert not copy.requires_grad and copy.grad_fn is None
    copy.add_(1)
    assert src.tolist() == [1.0, 2.0]


def test_from_numpy_shares_memory():
    for np_dtype in (np.float32, np.float64, np.float16, np.int32, np.int64, np.bool_):
        a = np.zeros((2, 3), dtype=np_dtype)
        t = A.from_numpy(a)
        assert t.dtype.name == np.dtype(np_dtype).name.replace("bool", "bool")
        assert t.numpy() is a or np.shares_memory(t.numpy(), a)
    a = np.zeros(3, dtype=np.float32)
    t = A.from_numpy(a)
    t.add_(2)
    assert a.tolist() == [2.0, 2.0, 2.0]  # writes through the tensor show in the array
    a[1] = 7
    assert t.tolist() == [2.0, 7.0, 2.0]  # and the other way round
    strided = np.arange(12.0).reshape(3, 4)[:, ::2]
    assert A.from_numpy(strided).tolist() == strided.tolist()
    with pytest.raises(DTypeError, match="from_numpy: NumPy dtype uint8"):
        A.from_numpy(np.zeros(2, dtype=np.uint8))
    with pytest.raises(DTypeError, match="from_numpy: NumPy dtype complex64"):
        A.from_numpy(np.zeros(2, dtype=np.complex64))
    with pytest.raises(DTypeError, match="from_numpy: expected np.ndarray, got list"):
        A.from_numpy([1, 2])


# ---------------------------------------------------------------------------------------------------
# filled and ranged factories
def test_filled_factories():
    assert A.zeros(2, 3).tolist() == [[0.0] * 3] * 2 and A.zeros(2, 3).dtype is A.float32
    assert A.ones((2,), dtype=A.int64).tolist() == [1, 1]
    assert A.zeros([2, 3]).shape == (2, 3) and A.zeros(A.Size([4])).shape == (4,)
    assert A.zeros(()).shape == () and A.zeros(0, 3).shape == (0, 3)
    assert A.full((2, 2), 7).dtype is A.int64 and A.full((2,), 1.5).tolist() == [1.5, 1.5]
    assert A.full((1,), True).dtype is A.bool
    assert A.full((2,), 1.5, dtype=A.float16).dtype is A.float16
    assert A.empty(3, 4).shape == (3, 4) and A.empty(2, dtype=A.int32).dtype is A.int32
    x = A.ones(2, 3, requires_grad=True)
    assert x.requires_grad and x.is_leaf


def test_like_factories_keep_shape_dtype_and_device():
    base = A.ones(2, 3, dtype=A.float64)
    for fn in (A.zeros_like, A.ones_like, A.empty_like, A.rand_like, A.randn_like):
        out = fn(base)
        assert out.shape == (2, 3) and out.dtype is A.float64 and out.device == base.device
    assert A.full_like(base, 4).tolist() == [[4.0] * 3] * 2
    assert A.zeros_like(base, dtype=A.int32).dtype is A.int32
    assert A.ones_like(A.tensor([1, 2])).tolist() == [1, 1]
    assert A.zeros_like(base, requires_grad=True).requires_grad


@pytest.mark.parametrize(
    "args", [(5,), (1, 4), (0, 1, 0.1), (-1, -5, -1.5), (0.1, 0.9, 0.2), (3, 3), (10, 0, -3), (0, 10, 3)]
)
def test_arange_matches_numpy_length_and_values(args):
    out = A.arange(*args)
    expected = np.arange(*args)
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
    assert out.dtype is (A.float32 if any(isinstance(a, float) for a in args) else A.int64)


def test_linspace_and_eye():
    np.testing.assert_allclose(A.linspace(-1, 2, 7).numpy(), np.linspace(-1, 2, 7), rtol=1e-6)
    assert A.linspace(0, 1, 1).tolist() == [0.0] and A.linspace(0, 1, 0).shape == (0,)
    assert A.linspace(0, 1, 5, dtype=A.float64).dtype is A.float64
    assert A.eye(3).tolist() == np.eye(3).tolist() and A.eye(3).dtype is A.float32
    assert A.eye(2, 3, dtype=A.int64).tolist() == [[1, 0, 0], [0, 1, 0]]
    assert A.eye(0).shape == (0, 0)


def test_factories_match_torch():
    torch = pytest.importorskip("torch")
    for args in ((5,), (0.5, 3, 0.25), (-2, 7, 3), (1.0, -1.0, -0.3)):
        assert A.arange(*args).tolist() == pytest.approx(torch.arange(*args).tolist())
        assert str(A.arange(*args).dtype).split(".")[1] == str(torch.arange(*args).dtype).split(".")[1]
    assert A.linspace(-3, 5, 11).tolist() == pytest.approx(torch.linspace(-3, 5, 11).tolist())
    for value in (1, 2.5, True):
        assert A.full((2,), value).dtype.name == str(torch.full((2,), value).dtype).split(".")[1]


# ---------------------------------------------------------------------------------------------------
# random factories and the generator
def test_random_factories_ranges_and_statistics():
    A.manual_seed(123)
    u = A.rand(20000)
    assert u.dtype is A.float32 and 0.0 <= u.min().item() and u.max().item() < 1.0
    assert abs(u.mean().item() - 0.5) < 0.01
    n = A.randn(20000, dtype=A.float64)
    assert abs(n.mean().item()) < 0.03 and abs(n.std().item() - 1.0) < 0.03
    r = A.randint(-3, 4, (5000,))
    assert r.dtype is A.int64 and r.min().item() == -3 and r.max().item() == 3
    assert A.randint(5, (3, 2)).shape == (3, 2) and A.randint(5, (100,)).max().item() < 5
    assert A.randint(0, 2, (3,), dtype=A.int32).dtype is A.int32
    p = A.randperm(50)
    assert p.dtype is A.int64 and sorted(p.tolist()) == list(range(50))
    assert A.randperm(0).shape == (0,) and A.randperm(5, dtype=A.int32).dtype is A.int32
    assert A.rand(2, 3, dtype=A.float16).dtype is A.float16


def test_manual_seed_reproduces_every_draw():
    def draws():
        return (A.rand(3).tolist(), A.randn(2, 2).tolist(), A.randint(0, 100, (4,)).tolist(), A.randperm(10).tolist())

    A.manual_seed(7)
    first = draws()
    A.manual_seed(7)
    assert draws() == first
    A.manual_seed(8)
    assert draws() != first
    A.manual_seed(7)
    A.rand(3)
    assert A.rand(3).tolist() != first[0]  # successive draws differ
    g1, g2 = A.Generator().manual_seed(3), A.Generator().manual_seed(3)
    assert A.randn(4, generator=g1).tolist() == A.randn(4, generator=g2).tolist()
    state = A.get_rng_state()
    a = A.rand(2).tolist()
    A.set_rng_state(state)
    assert A.rand(2).tolist() == a


# ---------------------------------------------------------------------------------------------------
# bad input names the op
@pytest.mark.parametrize(
    "name, call",
    [
        ("zeros", lambda: A.zeros(-1, 2)),
        ("ones", lambda: A.ones(3, -2)),
        ("empty", lambda: A.empty(-5)),
        ("full", lambda: A.full((-1,), 2.0)),
        ("rand", lambda: A.rand(2, -3)),
        ("randn", lambda: A.randn(-1)),
        ("randint", lambda: A.randint(0, 5, (-1,))),
        ("eye", lambda: A.eye(-1)),
        ("linspace", lambda: A.linspace(0, 1, -1)),
    ],
)
def test_negative_sizes_are_shape_errors(name, call):
    with pytest.raises(ShapeError, match=rf"{name}: .*negative"):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: A.zeros(2**40, 2**20),
        lambda: A.ones(2**50),
        lambda: A.empty(2**40, 2**30),
        lambda: A.full((2**45, 2**10), 1.0),
        lambda: A.randn(2**40, 2**20),
    ],
)
def test_impossible_allocations_raise_memory_error(call):
    with pytest.raises(MemoryError, match=r"(zeros|ones|empty|full|randn): .*cannot allocate .* GiB"):
        call()


def test_bad_factory_arguments():
    with pytest.raises(ShapeError, match="tensor: expected a rectangular nested sequence"):
        A.tensor([[1, 2], [3]])
    with pytest.raises(ShapeError, match="tensor: expected a rectangular"):
        A.tensor([[1, 2], [3, [4]]])
    with pytest.raises(DTypeError, match="tensor: invalid data type 'str'"):
        A.tensor(["a", "b"])
    with pytest.raises(RuntimeError, match="tensor: could not infer dtype of generator"):  # PyTorch's class
        A.tensor(i for i in range(3))
    with pytest.raises(DTypeError, match="tensor: a value does not fit in adcuda.int64"):
        A.tensor([2**70])
    with pytest.raises(DTypeError, match="zeros: size must be a tuple of ints"):
        A.zeros(2.5)
    with pytest.raises(DTypeError, match="rand: expected a floating point dtype"):
        A.rand(2, dtype=A.int64)
    with pytest.raises(ShapeError, match="arange: step must be nonzero"):
        A.arange(0, 5, 0)
    with pytest.raises(ShapeError, match="arange: upper bound and larger bound inconsistent"):
        A.arange(0, 5, -1)
    with pytest.raises(ShapeError, match="randint: expected low < high"):
        A.randint(5, 5, (2,))
    with pytest.raises(DTypeError, match="tensor: NumPy dtype float8 is not supported"):
        A.tensor([1.0], dtype="float8")


@pytest.mark.parametrize(
    "name, call",
    [
        ("tensor", lambda: A.tensor([1, 2], requires_grad=True)),
        ("zeros", lambda: A.zeros(2, dtype=A.int64, requires_grad=True)),
        ("ones", lambda: A.ones(2, dtype=A.bool, requires_grad=True)),
        ("full", lambda: A.full((2,), 3, requires_grad=True)),
        ("requires_grad", lambda: A.tensor([1, 2]).requires_grad_()),
    ],
)
def test_integer_tensors_cannot_require_grad(name, call):
    with pytest.raises(DTypeError, match=rf"{name}: only .*floating point dtype can require gradients"):
        call()


# ---------------------------------------------------------------------------------------------------
# type promotion: (kind, value) operands: "t" a 1-D tensor, "z" a 0-d tensor, "s" a Python scalar
def operand(kind, spec):
    if kind == "s":
        return spec
    data = [1] if kind == "t" else 1
    return A.tensor(data, dtype=getattr(A, spec))


PROMOTION = [  # a + b -> dtype, by PyTorch's rules
    (("t", "int32"), ("t", "int64"), "int64"),
    (("t", "int32"), ("z", "int64"), "int32"),
    (("t", "int32"), ("s", 2), "int32"),
    (("t", "int32"), ("s", 2.5), "float32"),
    (("t", "int64"), ("z", "float64"), "float64"),
    (("t", "int64"), ("z", "float16"), "float16"),
    (("t", "bool"), ("s", 2), "int64"),
    (("t", "bool"), ("s", True), "bool"),
    (("t", "bool"), ("z", "int32"), "int32"),
    (("t", "bool"), ("s", 2.5), "float32"),
    (("t", "bool"), ("t", "bool"), "bool"),
    (("t", "float16"), ("t", "float32"), "float32"),
    (("t", "float16"), ("z", "float64"), "float16"),
    (("t", "float16"), ("s", 2.5), "float16"),
    (("t", "float16"), ("s", 2), "float16"),
    (("t", "float32"), ("t", "float64"), "float64"),
    (("t", "float32"), ("z", "float64"), "float32"),
    (("z", "float64"), ("z", "float32"), "float64"),
    (("z", "int32"), ("s", 2.5), "float32"),
    (("z", "float64"), ("s", 2.5), "float64"),
    (("z", "int64"), ("z", "int32"), "int64"),
    (("z", "bool"), ("s", 2), "int64"),
    (("t", "int32"), ("t", "float16"), "float16"),
    (("t", "int64"), ("t", "bool"), "int64"),
    (("z", "float16"), ("t", "int32"), "float16"),
    (("t", "int32"), ("z", "bool"), "int32"),
    (("s", 2.5), ("t", "int64"), "float32"),
]


@pytest.mark.parametrize("a, b, expected", PROMOTION)
def test_promotion_table(a, b, expected):
    x, y = operand(*a), operand(*b)
    assert (x + y).dtype.name == expected
    assert (x * y).dtype.name == expected
    assert A.where(A.tensor(True), x, y).dtype.name == expected if any(k != "s" for k, _ in (a, b)) else True
    assert (x == y).dtype is A.bool
    div = (x / y).dtype
    assert div.name == (expected if expected.startswith("float") else "float32")  # true division is float


def test_other_promotions():
    assert (A.tensor([1, 2]) / A.tensor([2, 2])).tolist() == [0.5, 1.0]
    assert (A.tensor([2, 3]) ** 0.5).dtype is A.float32
    assert (A.tensor([2.0], dtype=A.float16) ** 2).dtype is A.float16
    assert (2 ** A.tensor([2, 3])).dtype is A.int64
    assert (2.5 ** A.tensor([2, 3])).dtype is A.float32
    assert A.exp(A.tensor([1, 2])).dtype is A.float32 and A.sqrt(A.tensor([True])).dtype is A.float32
    assert A.maximum(A.tensor([1, 5]), A.tensor([2.0, 3.0])).tolist() == [2.0, 5.0]


DTYPES = ["bool", "int32", "int64", "float16", "float32", "float64"]
SCALARS = [True, 3, 2.5]


def test_promotion_matches_torch_for_every_combination():
    torch = pytest.importorskip("torch")

    def pair(kind, spec, lib):
        if kind == "s":
            return spec
        return lib.tensor([1] if kind == "t" else 1, dtype=getattr(lib, spec))

    kinds = [("t", d) for d in DTYPES] + [("z", d) for d in DTYPES] + [("s", v) for v in SCALARS]
    checked = 0
    for a, b in itertools.product(kinds, repeat=2):
        if a[0] == "s" and b[0] == "s":
            continue
        for op in ("add", "mul", "div", "maximum", "eq"):
            if op == "maximum" and "s" in (a[0], b[0]):
                continue
            try:
                expected = getattr(torch, op)(pair(*a, torch), pair(*b, torch)).dtype
            except (RuntimeError, TypeError):
                continue  # torch.eq(scalar, tensor) has no overload: a scalar goes second there
            got = getattr(A, op)(pair(*a, A), pair(*b, A)).dtype
            assert got.name == str(expected).split(".")[1], (op, a, b)
            checked += 1
    assert checked > 900


# ---------------------------------------------------------------------------------------------------
# conversions
def test_dtype_conversions():
    x = A.tensor([1.7, -1.7, 0.0, 2.5])
    assert x.long().tolist() == [1, -1, 0, 2]  # towards zero, as in PyTorch
    assert x.int().dtype is A.int32 and x.bool().tolist() == [True, True, False, True]
    assert x.double().dtype is A.float64 and x.half().dtype is A.float16 and x.half().float().dtype is A.float32
    assert x.to(A.float64).dtype is A.float64 and x.to(dtype=A.int64).dtype is A.int64
    assert x.to("cpu") is x and x.to(A.float32) is x
    assert x.to(A.float32, copy=True) is not x
    assert x.type_as(A.tensor([1])).dtype is A.int64
    assert x.to(A.tensor([1.0], dtype=A.float16)).dtype is A.float16
    assert A.tensor([True, False]).float().tolist() == [1.0, 0.0]
    assert x.type() == "adcuda.FloatTensor" and x.long().type() == "adcuda.LongTensor"
    assert x.type(A.float64).dtype is A.float64 and x.half().type() == "adcuda.HalfTensor"
    with np.errstate(over="ignore"):  # NumPy warns of the overflow; the result is PyTorch's
        assert A.tensor([1e5]).half().tolist() == [float("inf")]  # beyond half's range


def test_gradients_flow_through_dtype_conversions():
    x = A.tensor([0.5, -1.5, 2.0], dtype=A.float64, requires_grad=True)
    assert gradcheck(lambda v: v.float().double() * v, (x,), eps=1e-2, atol=1e-3)
    y = A.tensor([1.0, 2.0], requires_grad=True)
    h = y.half()
    assert h.grad_fn is not None
    (h * 3).sum().backward()
    assert y.grad.dtype is A.float32 and y.grad.tolist() == [3.0, 3.0]
    assert not y.long().requires_grad  # integer results carry no gradient


# ---------------------------------------------------------------------------------------------------
# dtype information and the default dtype
def test_finfo_and_iinfo():
    assert A.finfo(A.float16).max == 65504.0 and A.finfo(A.float16).eps == 2.0**-10
    assert A.finfo(A.float32).tiny == np.finfo(np.float32).tiny and A.finfo().bits == 32
    assert A.finfo(A.float64).min == -np.finfo(np.float64).max
    assert A.finfo(A.bfloat16).eps == 2.0**-7 and A.finfo(A.bfloat16).max > 3e38
    assert A.iinfo(A.int32).max == 2**31 - 1 and A.iinfo(A.int64).min == -(2**63)
    with pytest.raises(DTypeError, match="finfo: expected a floating point dtype"):
        A.finfo(A.int64)
    with pytest.raises(DTypeError, match="iinfo: expected an integer dtype"):
        A.iinfo(A.float32)


def test_finfo_matches_torch():
    torch = pytest.importorskip("torch")
    for name in ("float16", "bfloat16", "float32", "float64"):
        ours, theirs = A.finfo(getattr(A, name)), torch.finfo(getattr(torch, name))
        for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(ours, field) == getattr(theirs, field), (name, field)


def test_set_default_dtype():
    assert A.get_default_dtype() is A.float32
    A.set_default_dtype(A.float64)
    try:
        assert A.tensor([1.5]).dtype is A.float64 and A.zeros(2).dtype is A.float64
        assert (A.tensor([1, 2]) * 1.5).dtype is A.float64 and A.arange(0.0, 1.0, 0.5).dtype is A.float64
    finally:
        A.set_default_dtype(A.float32)
    assert A.tensor([1.5]).dtype is A.float32
    with pytest.raises(DTypeError, match="set_default_dtype: only floating point"):
        A.set_default_dtype(A.int64)
