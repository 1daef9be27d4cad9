"""Ops that were compositions of other ops and now have a direct path (issue 31: per-call overhead):
dot, stack, cat's one-pass path, slices with 0-d tensor bounds. Each against PyTorch where installed,
and against the composition it replaced: values, gradients, dtypes, errors."""

import numpy as np
import pytest

import adcuda
from adcuda.autograd import gradcheck
from adcuda.errors import DTypeError, IndexOutOfRangeError, IndexValueError, ShapeError, UnsupportedDTypeError

torch = pytest.importorskip("torch")


def both(a):
    return adcuda.tensor(a), torch.tensor(a)


def test_dot_values_gradients_and_node():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(128).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    x, y = adcuda.tensor(a, requires_grad=True), adcuda.tensor(b, requires_grad=True)
    out = adcuda.dot(x, y)
    assert out.shape == () and out.dtype is adcuda.float32 and out.grad_fn.name == "DotBackward0"
    np.testing.assert_allclose(out.item(), float(torch.dot(torch.tensor(a), torch.tensor(b))), rtol=1e-5)
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), b)
    np.testing.assert_array_equal(y.grad.numpy(), a)
    p, q = adcuda.randn(7, dtype=adcuda.float64, requires_grad=True), adcuda.randn(7, dtype=adcuda.float64)
    assert gradcheck(adcuda.dot, (p, q.requires_grad_()))
    assert adcuda.autograd.gradgradcheck(adcuda.dot, (p, q))


def test_dot_of_integers_strided_and_empty_vectors():
    ints = adcuda.arange(6)
    assert adcuda.dot(ints, ints).item() == 55 and adcuda.dot(ints, ints).dtype is adcuda.int64
    x = adcuda.arange(12.0)[::2]  # a strided view
    assert adcuda.dot(x, x).item() == float(torch.dot(torch.arange(12.0)[::2], torch.arange(12.0)[::2]))
    assert adcuda.dot(adcuda.zeros(0), adcuda.zeros(0)).item() == 0.0


def test_dot_errors_name_the_op():
    with pytest.raises(ShapeError, match="dot: expected 1-D tensors of the same size"):
        adcuda.dot(adcuda.ones(3), adcuda.ones(4))
    with pytest.raises(ShapeError, match="dot"):
        adcuda.dot(adcuda.ones(2, 2), adcuda.ones(2, 2))
    with pytest.raises(UnsupportedDTypeError, match="dot"):  # PyTorch: a RuntimeError, not a TypeError
        adcuda.dot(adcuda.ones(3), adcuda.ones(3, dtype=adcuda.float64))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack_along_each_dim_with_gradients(dim):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(5)]
    ours = [adcuda.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, expected = adcuda.stack(ours, dim), torch.stack(theirs, dim)
    assert tuple(out.shape) == tuple(expected.shape) and out.grad_fn.name == "StackBackward0"
    np.testing.assert_array_equal(out.detach().numpy(), expected.detach().numpy())
    weights = rng.standard_normal(tuple(expected.shape)).astype(np.float32)
    (out * adcuda.tensor(weights)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)


def test_stack_of_scalars_views_parameters_and_mixed_dtypes():
    assert adcuda.stack([adcuda.tensor(1.0), adcuda.tensor(2.0)]).tolist() == [1.0, 2.0]
    base, tbase = adcuda.arange(24.0).reshape(4, 6), torch.arange(24.0).reshape(4, 6)
    views = [base[:, ::2], base[:, 1::2]]  # non-contiguous
    for dim in (0, 2):
        expected = torch.stack([tbase[:, ::2], tbase[:, 1::2]], dim)
        np.testing.assert_array_equal(adcuda.stack(views, dim).numpy(), expected.numpy())
    mixed = adcuda.stack([adcuda.tensor([1, 2]), adcuda.tensor([0.5, 1.5])])
    assert mixed.dtype is adcuda.float32 and mixed.tolist() == [[1.0, 2.0], [0.5, 1.5]]
    params = [adcuda.nn.Parameter(adcuda.ones(2)), adcuda.nn.Parameter(adcuda.zeros(2))]
    adcuda.stack(params).sum().backward()
    assert params[0].grad.tolist() == [1.0, 1.0]
    p = adcuda.randn(3, dtype=adcuda.float64, requires_grad=True)
    q = adcuda.randn(3, dtype=adcuda.float64, requires_grad=True)
    assert gradcheck(lambda a, b: adcuda.stack([a, b], 1), (p, q))


def test_stack_errors_as_before():
    with pytest.raises(ShapeError, match="stack: expects each tensor to be equal size, but got \\(2,\\), \\(3,\\)"):
        adcuda.stack([adcuda.ones(2), adcuda.ones(3)])
    with pytest.raises(ValueError, match="non-empty"):
        adcuda.stack([])
    with pytest.raises(DTypeError, match="stack: tensors\\[1\\] must be a Tensor, got list"):
        adcuda.stack([adcuda.ones(2), [1.0, 2.0]])
    with pytest.raises(IndexError):
        adcuda.stack([adcuda.ones(2), adcuda.ones(2)], 3)


def test_cat_one_pass_path_agrees_with_pytorch():
    a, ta = both(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    b, tb = both(np.arange(4.0, dtype=np.float32).reshape(2, 2))
    np.testing.assert_array_equal(adcuda.cat([a, b], 1).numpy(), torch.cat([ta, tb], 1).numpy())
    np.testing.assert_array_equal(adcuda.cat([a, b], -1).numpy(), torch.cat([ta, tb], -1).numpy())
    assert tuple(adcuda.cat([a, adcuda.zeros(0)]).shape) == (2, 3)  # a legacy empty (0,) tensor is skipped
    assert adcuda.cat([adcuda.ones(2), adcuda.zeros(0)]).tolist() == [1.0, 1.0]
    with pytest.raises(ShapeError, match="cat: sizes of tensors must match except in dimension 0"):
        adcuda.cat([a, b])
    with pytest.raises(ShapeError, match="zero-dimensional"):
        adcuda.cat([adcuda.tensor(1.0), adcuda.tensor(2.0)])


def test_slices_with_0d_tensor_bounds_are_int_bounds():
    x = adcuda.arange(40.0).reshape(8, 5)
    t = torch.arange(40.0).reshape(8, 5)
    for start, stop, step in ((1, 5, None), (None, 6, 2), (-3, None, None), (2, 7, 3)):
        key = slice(*(None if v is None else adcuda.tensor(v) for v in (start, stop, step)))
        tkey = slice(*(None if v is None else torch.tensor(v) for v in (start, stop, step)))
        np.testing.assert_array_equal(x[key].numpy(), t[tkey].numpy())
        np.testing.assert_array_equal(x[key].numpy(), x[start:stop:step].numpy())
    assert adcuda.tensor([[7]]).item() == 7 and adcuda.ones(1, 1, 1).item() == 1.0
    with pytest.raises(ShapeError, match="item"):
        adcuda.ones(2).item()


@pytest.mark.parametrize("op", ["gather", "take", "index_select", "index_add"])
def test_index_range_checks_run_again_on_a_captured_replay(op):
    """The index family checks an index's range with the host loop only where graph capture records no
    host steps: a captured call still checks the index on every replay, after it was changed in place."""
    x = adcuda.randn(4, 5)
    rows = adcuda.from_numpy(np.array([[0, 1, 2, 3, 4]] * 4))
    flat = adcuda.from_numpy(np.array([0, 3]))
    calls = {
        "gather": lambda: adcuda.gather(x, 1, rows).sum(),
        "take": lambda: adcuda.take(x, flat).sum(),
        "index_select": lambda: adcuda.index_select(x, 0, flat).sum(),
        "index_add": lambda: adcuda.index_add(x, 0, flat, x[:2]).sum(),
    }
    compiled = adcuda.compile(calls[op], fullgraph=True)
    assert compiled().item() == compiled().item() == calls[op]().item()
    rows.copy_(adcuda.from_numpy(np.full((4, 5), 7)))
    flat.copy_(adcuda.from_numpy(np.array([0, 30])))
    with pytest.raises((IndexOutOfRangeError, IndexValueError), match="out of"):
        compiled()


def test_a_same_dtype_rule_checks_operands_by_position_keyword_and_default():
    """The generated wrapper of a ``one_dtype`` rule (dtype_support.checking_same): the operands read by
    name wherever they are given, defaults filled, the forward's name and other arguments kept."""
    from adcuda.ops.dtype_support import ANY, checking_same

    def toy(a, k, b=None, *, c=1):
        return a, k, b, c

    checked = checking_same("toy", ANY.one_dtype("a", "b"), toy)
    x32, x64 = adcuda.zeros(1), adcuda.zeros(1, dtype=adcuda.float64)
    assert checked.__name__ == "toy" and checked(x32, 0, x32, c=2) == (x32, 0, x32, 2)
    assert checked(x32, 0) == (x32, 0, None, 1) and checked(x64, 5, b=3.0) == (x64, 5, 3.0, 1)
    for call in (lambda: checked(x32, 0, x64), lambda: checked(x64, 0, b=x32), lambda: checked(b=x64, a=x32, k=0)):
        with pytest.raises(UnsupportedDTypeError, match="expected a and b to have the same dtype"):
            call()
