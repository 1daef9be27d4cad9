"""fill_, zero_ and copy_ write straight into a tensor that has nothing to record and nothing that could
refuse the write (ops/inplace.py, ``_untracked``); every other tensor takes the checked path. Both must
bump the version counter, and the checked path must still refuse what PyTorch refuses. The casts
(float(), half(), ..., type_as) give the tensor itself where its dtype is already the one asked."""

import numpy as np
import pytest
from helpers import WatchOps

import adcuda as torch
from adcuda.errors import InvalidArgumentError


def _written(write):
    t = torch.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    before = t._version.value
    out = write(t)
    assert out is t
    assert t._version.value == before + 1
    return t.numpy()


def test_untracked_writes_write_and_bump_the_version():
    np.testing.assert_array_equal(_written(lambda t: t.zero_()), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(_written(lambda t: t.fill_(2.5)), np.full((2, 3), 2.5, np.float32))
    src = torch.tensor(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(_written(lambda t: t.copy_(src)), np.ones((2, 3), np.float32))
    # another dtype, or a shape that broadcasts: the checked path converts and broadcasts
    np.testing.assert_array_equal(_written(lambda t: t.copy_(torch.tensor([1, 2, 3]))), [[1, 2, 3], [1, 2, 3]])


def test_a_saved_tensor_written_untracked_fails_backward():
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3)
    (a * b).sum()  # saves b
    y = a * b
    b.zero_()
    with pytest.raises(torch.AutogradError):
        y.sum().backward()


def test_a_view_and_its_base_see_the_write():
    base = torch.zeros(2, 3)
    v = base[0]
    v.fill_(4.0)
    assert base._version.value == 1 and v._version is base._version
    np.testing.assert_array_equal(base.numpy()[0], [4.0, 4.0, 4.0])
    base.copy_(torch.ones(2, 3))
    np.testing.assert_array_equal(v.numpy(), [1.0, 1.0, 1.0])


def test_what_may_not_be_written_is_refused():
    leaf = torch.zeros(3, requires_grad=True)
    for write in (lambda t: t.zero_(), lambda t: t.fill_(1.0), lambda t: t.copy_(torch.ones(3))):
        with pytest.raises(torch.AutogradError, match="leaf Variable"):
            write(leaf)
    expanded = torch.zeros(1, 3).expand(2, 3)
    with pytest.raises(torch.ShapeError, match="single memory location"):
        expanded.zero_()
    with pytest.raises(InvalidArgumentError, match="overflow"):
        torch.zeros(3, dtype=torch.int32).fill_(2**40)


def test_a_write_with_history_is_recorded():
    a = torch.ones(3, requires_grad=True)
    y = a * 2.0
    y.copy_(a * 3.0)
    assert y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0, 3.0])
    z = a * 2.0
    z.zero_()
    z.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 3.0, 3.0])


@pytest.mark.parametrize(
    ("cast", "dtype"),
    [
        ("float", "float32"),
        ("double", "float64"),
        ("half", "float16"),
        ("int", "int32"),
        ("long", "int64"),
        ("bool", "bool"),
    ],
)
def test_a_cast_to_the_same_dtype_is_the_tensor_itself(cast, dtype):
    t = torch.zeros(2, dtype=getattr(torch, dtype))
    assert getattr(t, cast)() is t
    assert t.type_as(torch.ones(1, dtype=getattr(torch, dtype))) is t
    other = torch.zeros(2, dtype=torch.float32 if dtype != "float32" else torch.float64)
    converted = getattr(other, cast)()
    assert converted is not other and converted.dtype == getattr(torch, dtype)
    assert converted._data.__array_interface__["data"][0] != other._data.__array_interface__["data"][0]


def test_a_cast_records_its_gradient():
    a = torch.ones(3, dtype=torch.float64, requires_grad=True)
    b = a.float()
    assert b.dtype == torch.float32 and b.grad_fn is not None
    (b * 2.0).sum().backward()
    assert a.grad.dtype == torch.float64
    np.testing.assert_array_equal(a.grad.numpy(), [2.0, 2.0, 2.0])


_WRITES = {
    "zero_": lambda t: t.zero_(),
    "fill_": lambda t: t.fill_(0.0),
    "copy_": lambda t: t.copy_(torch.zeros(2, 3)),
}


@pytest.mark.parametrize("name", sorted(_WRITES))
def test_a_write_is_an_op_call_while_a_hook_watches(name):
    from adcuda.ops import dispatch

    watch = WatchOps()
    t = torch.ones(2, 3)
    dispatch.add_hook(watch)
    try:
        assert _WRITES[name](t) is t
    finally:
        dispatch.remove_hook(watch)
    assert name in watch.seen
    assert t._version.value == 1 and not t.numpy().any()


@pytest.mark.parametrize("name", sorted(_WRITES))
def test_a_write_into_a_read_only_array_is_the_ops_error(name):
    array = np.ones((2, 3), np.float32)
    array.setflags(write=False)
    t = torch.from_numpy(array)
    with pytest.raises(torch.AdcudaError):
        _WRITES[name](t)
    assert t._version.value == 0


def test_fill_converts_as_the_op_and_refuses_what_does_not_fit():
    t = torch.zeros(3, dtype=torch.int32)
    t.fill_(2.7)
    np.testing.assert_array_equal(t.numpy(), [2, 2, 2])
    b = torch.zeros(2, dtype=torch.bool)
    b.fill_(0.5)
    assert b.numpy().all()
    with pytest.raises(InvalidArgumentError, match="fill_"):
        torch.zeros(2, dtype=torch.float16).fill_(1e6)
    with pytest.raises(InvalidArgumentError, match="fill_"):
        torch.zeros(2, dtype=torch.int64).fill_(float("nan"))


def test_copy_from_an_overlapping_view_of_itself():
    t = torch.tensor(np.arange(4.0, dtype=np.float32))
    t.copy_(t.flip(0))  # (a copy: flip makes one)
    np.testing.assert_array_equal(t.numpy(), [3.0, 2.0, 1.0, 0.0])
    m = torch.tensor(np.arange(9.0, dtype=np.float32).reshape(3, 3))
    m.copy_(m.t())
    np.testing.assert_array_equal(m.numpy(), np.arange(9.0).reshape(3, 3).T)
