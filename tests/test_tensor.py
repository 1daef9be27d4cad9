"""The Tensor API basics: metadata, conversions to Python and NumPy (zero-copy on the CPU), dtype
and device moves, autograd flags, grad_fn names, repr, pickling and deepcopy."""

import copy
import pickle

import numpy as np
import pytest

import adcuda as A
from adcuda.errors import AutogradError, DTypeError, IndexOutOfRangeError, ShapeError


def test_metadata():
    t = A.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and isinstance(t.shape, A.Size) and repr(t.shape) == "adcuda.Size([2, 3])"
    assert t.dtype is A.float32 and t.device == A.device("cpu") and str(t.device) == "cpu"
    assert t.ndim == 2 and t.dim() == 2 and t.numel() == 6 and len(t) == 2
    assert t.size() == (2, 3) and t.size(1) == 3 and t.size(-1) == 3
    assert t.T.shape == (3, 2) and t.T.tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    assert t.stride() == (3, 1) and t.T.stride() == (1, 3) and t.is_contiguous()
    assert A.tensor(1.0).ndim == 0 and A.tensor(1.0).shape == () and A.tensor(1.0).numel() == 1
    with pytest.raises(IndexOutOfRangeError, match=r"size: dimension out of range"):
        t.size(2)


def test_default_dtypes():
    assert A.tensor([1, 2]).dtype is A.int64
    assert A.tensor([1.0, 2]).dtype is A.float32
    assert A.tensor([True]).dtype is A.bool
    assert A.tensor(np.ones(2)).dtype is A.float64  # NumPy's dtype is kept


def test_item_and_tolist():
    assert A.tensor([[2.5]]).item() == 2.5
    assert isinstance(A.tensor(3).item(), int) and isinstance(A.tensor(3.0).item(), float)
    assert A.tensor(True).item() is True
    assert A.tensor(3.0).tolist() == 3.0
    assert A.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ShapeError, match=r"item: a Tensor with 2 elements cannot be converted"):
        A.tensor([1.0, 2.0]).item()
    assert float(A.tensor([1.5])) == 1.5 and int(A.tensor(7)) == 7
    with pytest.raises(ShapeError, match="ambiguous"):
        bool(A.tensor([1.0, 2.0]))


def test_numpy_is_a_view_on_the_cpu():
    t = A.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = t.numpy()
    a[0, 0] = 9.0
    assert t[0, 0].item() == 9.0
    t.add_(1)
    assert a[0, 0] == 10.0
    v = t.t()
    assert np.shares_memory(v.numpy(), a) and v.numpy().strides == (4, 8)  # strides kept, no copy


def test_numpy_of_a_tensor_that_requires_grad_is_refused():
    x = A.ones(2, requires_grad=True)
    with pytest.raises(
        AutogradError, match=r"can't call numpy\(\) on a Tensor that requires grad.*detach\(\)\.numpy\(\)"
    ):
        x.numpy()
    with pytest.raises(AutogradError):
        (x * 2).numpy()
    assert x.detach().numpy().tolist() == [1.0, 1.0]


def test_from_numpy_is_zero_copy_both_ways():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = A.from_numpy(a)
    assert t.dtype is A.float32 and not t.requires_grad
    a[0, 0] = 100.0
    assert t[0, 0].item() == 100.0
    t[1, 2] = -1.0
    assert a[1, 2] == -1.0
    assert np.shares_memory(t.numpy(), a)
    strided = np.arange(12.0).reshape(3, 4)[:, ::2]
    s = A.from_numpy(strided)
    assert np.shares_memory(s.numpy(), strided) and s.stride() == (4, 2) and s.tolist() == strided.tolist()
    for dtype, want in (
        (np.float64, A.float64),
        (np.float16, A.float16),
        (np.int32, A.int32),
        (np.int64, A.int64),
        (np.bool_, A.bool),
    ):
        assert A.from_numpy(np.zeros(2, dtype=dtype)).dtype is want


def test_tensor_copies_its_data():
    a = np.ones(3, dtype=np.float32)
    t = A.tensor(a)
    a[0] = 5
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_dtype_and_device_conversions():
    t = A.tensor([1.5, -2.5])
    assert t.float() is t and t.cpu() is t and t.to("cpu") is t and t.to(A.float32) is t
    for method, dtype in (
        ("half", A.float16),
        ("double", A.float64),
        ("long", A.int64),
        ("int", A.int32),
        ("bool", A.bool),
    ):
        out = getattr(t, method)()
        assert out.dtype is dtype and not np.shares_memory(out.numpy(), t.numpy())
    assert t.long().tolist() == [1, -2]  # truncation toward zero, as in PyTorch
    assert t.to(dtype=A.float64).dtype is A.float64
    assert t.to("cpu", A.float16).dtype is A.float16
    assert t.to(A.tensor([1], dtype=A.int32)).dtype is A.int32
    copied = t.to(A.float32, copy=True)
    assert copied is not t and not np.shares_memory(copied.numpy(), t.numpy())
    assert t.type_as(A.tensor([1.0], dtype=A.float64)).dtype is A.float64


def test_conversions_are_differentiable():
    x = A.tensor([1.0, 2.0], requires_grad=True)
    y = x.double()
    assert y.grad_fn.name == "ToCopyBackward0" and not y.is_leaf
    (y * y).sum().backward()
    assert x.grad.dtype is A.float32 and x.grad.tolist() == [2.0, 4.0]
    assert not x.long().requires_grad  # integers carry no gradient


def test_requires_grad_is_leaf_and_grad_fn_names():
    x = A.ones(2)
    assert not x.requires_grad and x.is_leaf and x.grad_fn is None
    assert x.requires_grad_() is x and x.requires_grad and x.is_leaf
    y = x * 2
    assert y.requires_grad and not y.is_leaf
    names = {
        "MulBackward0": x * 2,
        "AddBackward0": x + 1,
        "SubBackward0": x - 1,
        "DivBackward0": x / 2,
        "NegBackward0": -x,
        "PowBackward0": x**2,
        "ExpBackward0": x.exp(),
        "SumBackward0": x.sum(),
        "ViewBackward0": x.view(2, 1),
        "PermuteBackward0": x.view(1, 2).permute(1, 0),
        "TBackward0": x.view(1, 2).t(),
        "TransposeBackward0": x.view(1, 2).transpose(0, 1),
        "SqueezeBackward0": x.view(1, 2).squeeze(0),
        "UnsqueezeBackward0": x.unsqueeze(0),
        "ExpandBackward0": x.expand(3, 2),
        "SliceBackward0": x[1:],
        "IndexBackward0": x[[0]],
        "CatBackward0": A.cat([x, x]),
        "CloneBackward0": x.clone(),
    }
    assert {name: t.grad_fn.name for name, t in names.items()} == {name: name for name in names}
    with pytest.raises(AutogradError, match="only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    x.requires_grad_(False)
    assert not x.requires_grad
    assert y.grad_fn.next_functions[0][0].name == "AccumulateGrad"


def test_repr():
    assert repr(A.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(A.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(A.tensor(3)) == "tensor(3)"
    assert repr(A.tensor([1.0], dtype=A.float64)) == "tensor([1.], dtype=adcuda.float64)"
    assert repr(A.tensor([1], dtype=A.int32)) == "tensor([1], dtype=adcuda.int32)"
    x = A.tensor([1.0], requires_grad=True)
    assert repr(x) == "tensor([1.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2.], grad_fn=<MulBackward0>)"
    assert repr(A.zeros(0)) == "tensor([])"


def test_pickle_round_trip():
    for t in (
        A.tensor([[1.5, 2.5]], requires_grad=True),
        A.tensor([1, 2], dtype=A.int32),
        A.tensor(True),
        A.arange(6.0)[::2],
        A.ones(2, dtype=A.float16),
    ):
        out = pickle.loads(pickle.dumps(t))
        assert out.dtype is t.dtype and out.shape == t.shape and out.tolist() == t.tolist()
        assert out.requires_grad == t.requires_grad and out.is_leaf


def test_deepcopy_of_a_leaf_copies_data_and_grad():
    x = A.tensor([1.0, 2.0], requires_grad=True)
    x.grad = A.tensor([0.5, 0.5])
    y = copy.deepcopy(x)
    assert y is not x and y.requires_grad and y.is_leaf
    assert y.tolist() == [1.0, 2.0] and y.grad.tolist() == [0.5, 0.5]
    assert not np.shares_memory(y.detach().numpy(), x.detach().numpy())
    assert not np.shares_memory(y.grad.numpy(), x.grad.numpy())
    pair = copy.deepcopy([x, x])
    assert pair[0] is pair[1]  # the memo keeps shared references shared
    with pytest.raises(AutogradError, match="deepcopy"):
        copy.deepcopy(x * 2)


def test_tensor_constructor_is_pytorchs_legacy_one():
    # Tensor(data) copies data into a float32 tensor (tests/test_pytorch_names.py has the rest)
    assert A.Tensor([1, 2]).dtype is A.float32


def test_iteration_and_len():
    t = A.tensor([[1, 2], [3, 4]])
    assert [row.tolist() for row in t] == [[1, 2], [3, 4]]
    with pytest.raises(TypeError, match="0-d"):
        len(A.tensor(1))
    with pytest.raises(TypeError, match="0-d"):
        iter(A.tensor(1))


def test_integer_tensor_cannot_require_grad():
    with pytest.raises(DTypeError):
        A.tensor([1, 2], requires_grad=True)


def test_same_behaviour_as_torch():
    torch = pytest.importorskip("torch")
    for make in (lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]), lambda m: m.tensor([1, 2, 3]), lambda m: m.tensor(2.5)):
        ours, theirs = make(A), make(torch)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.ndim == theirs.ndim
        assert ours.numel() == theirs.numel() and ours.tolist() == theirs.tolist()
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        assert repr(ours).replace("adcuda", "torch") == repr(theirs)
        if ours.ndim == 2:
            assert ours.T.tolist() == theirs.T.tolist() and ours.stride() == theirs.stride()
