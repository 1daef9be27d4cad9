"""Matrix products: matmul (1-D, 2-D, batched with broadcasting), mm, bmm, outer, dot. Gradients by
gradcheck (including non-contiguous and empty operands), values against NumPy and PyTorch, float16
computed in fp32, and errors that name the op and both shapes or dtypes."""

import numpy as np
import pytest

import adcuda as A
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.errors import DTypeError, ShapeError, UnsupportedDTypeError

F64 = A.float64


def data(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(shape, seed=0):
    return A.tensor(data(shape, seed), dtype=F64, requires_grad=True)


# leaf shapes of the two operands and the result shape NumPy's matmul gives
MATMUL_SHAPES = {
    "vector.vector": ((4,), (4,)),
    "vector.matrix": ((4,), (4, 3)),
    "matrix.vector": ((3, 4), (4,)),
    "matrix.matrix": ((3, 4), (4, 2)),
    "batch.matrix": ((2, 3, 4), (4, 2)),
    "matrix.batch": ((3, 4), (2, 4, 2)),
    "vector.batch": ((4,), (2, 4, 3)),
    "batch.vector": ((2, 3, 4), (4,)),
    "broadcast batches": ((2, 1, 3, 4), (5, 4, 2)),
    "one-row": ((1, 4), (4, 1)),
    "empty inner": ((3, 0), (0, 2)),
    "empty outer": ((0, 4), (4, 2)),
}


@pytest.mark.parametrize("case", MATMUL_SHAPES)
def test_matmul_matches_numpy_and_gradchecks(case):
    sa, sb = MATMUL_SHAPES[case]
    a, b = leaf(sa, 1), leaf(sb, 2)
    out = A.matmul(a, b)
    expected = np.matmul(data(sa, 1), data(sb, 2))
    assert out.shape == expected.shape
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    assert gradcheck(A.matmul, (a, b))


def test_matmul_operator_and_methods():
    a, b = leaf((3, 4), 1), leaf((4, 2), 2)
    np.testing.assert_allclose((a @ b).detach().numpy(), A.mm(a, b).detach().numpy())
    np.testing.assert_allclose(a.matmul(b).detach().numpy(), a.mm(b).detach().numpy())
    x, y = leaf((2, 3, 4), 3), leaf((2, 4, 5), 4)
    np.testing.assert_allclose(A.bmm(x, y).detach().numpy(), np.matmul(data((2, 3, 4), 3), data((2, 4, 5), 4)))
    u, v = leaf((4,), 5), leaf((3,), 6)
    np.testing.assert_allclose(A.outer(u, v).detach().numpy(), np.outer(data((4,), 5), data((3,), 6)))
    np.testing.assert_allclose(A.dot(u, leaf((4,), 7)).item(), data((4,), 5) @ data((4,), 7))


def test_gradients_of_non_contiguous_operands():
    assert gradcheck(lambda a, b: a.t() @ b[:, ::2], (leaf((4, 3), 1), leaf((4, 6), 2)))
    assert gradcheck(lambda a, b: a.transpose(1, 2) @ b.expand(2, 4, 2), (leaf((2, 4, 3), 1), leaf((1, 4, 2), 2)))
    assert gradcheck(lambda a, b: A.bmm(a, b.transpose(1, 2)), (leaf((2, 3, 4), 1), leaf((2, 5, 4), 2)))
    assert gradcheck(lambda a, v: a.t() @ v[::2], (leaf((4, 3), 1), leaf((8,), 2)))  # matrix @ vector
    assert gradcheck(A.outer, (leaf((4,), 1), leaf((3,), 2)))
    assert gradcheck(lambda a, b: A.outer(a[::2], b), (leaf((6,), 1), leaf((2,), 2)))
    assert gradcheck(A.dot, (leaf((5,), 1), leaf((5,), 2)))


def test_second_derivative():
    assert gradgradcheck(A.matmul, (leaf((2, 3), 1), leaf((3, 2), 2)))
    assert gradgradcheck(A.matmul, (leaf((2, 2, 3), 1), leaf((3,), 2)))
    assert gradgradcheck(A.matmul, (leaf((2, 3), 1), leaf((3,), 2)))  # matrix @ vector: one product


def test_broadcast_batch_gradient_is_summed_back():
    a = A.ones(3, 2, 4, requires_grad=True)
    b = A.ones(4, 5, requires_grad=True)
    (a @ b).sum().backward()
    assert b.grad.shape == (4, 5) and b.grad.tolist() == [[6.0] * 5] * 4  # 3 batches x 2 rows
    assert a.grad.tolist() == [[[5.0] * 4] * 2] * 3


@pytest.mark.parametrize(
    "case", ["vector.vector", "matrix.vector", "batch.matrix", "broadcast batches", "vector.batch"]
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_matches_torch(case, dtype):
    torch = pytest.importorskip("torch")
    sa, sb = MATMUL_SHAPES[case]
    x, y = data(sa, 1), data(sb, 2)
    a, b = (A.tensor(v, dtype=getattr(A, dtype), requires_grad=True) for v in (x, y))
    ta, tb = (torch.tensor(v, dtype=getattr(torch, dtype), requires_grad=True) for v in (x, y))
    out, tout = a @ b, ta @ tb
    g = data(tuple(out.shape), 3)
    out.backward(A.tensor(g, dtype=out.dtype))
    tout.backward(torch.tensor(g, dtype=tout.dtype))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), **tol)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), **tol)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), **tol)


def test_float16_is_computed_in_fp32():
    a = A.tensor(data((8, 64), 1), dtype=A.float16, requires_grad=True)
    b = A.tensor(data((64, 8), 2), dtype=A.float16, requires_grad=True)
    out = a @ b
    assert out.dtype is A.float16
    reference = (a.detach().float() @ b.detach().float()).numpy()
    np.testing.assert_allclose(out.detach().numpy().astype(np.float32), reference, rtol=2e-3, atol=2e-2)
    out.sum().backward()
    assert a.grad.dtype is A.float16 and b.grad.dtype is A.float16
    # a long dot product of half values: exact in fp32, while half accumulation would stall at 2048
    ones = A.ones(1, 4096, dtype=A.float16)
    assert (ones @ ones.t()).item() == 4096.0


def test_integer_matmul():
    a, b = A.tensor([[1, 2], [3, 4]]), A.tensor([[5], [6]])
    assert (a @ b).tolist() == [[17], [39]] and (a @ b).dtype is A.int64


def test_errors_name_the_op_and_both_shapes():
    with pytest.raises(ShapeError, match=r"matmul: shapes \(2, 3\) and \(4, 5\) cannot be multiplied"):
        A.ones(2, 3) @ A.ones(4, 5)
    with pytest.raises(ShapeError, match=r"matmul: shapes \(3,\) and \(4,\)"):
        A.matmul(A.ones(3), A.ones(4))
    with pytest.raises(ShapeError, match=r"matmul: the batch dims of shapes \(2, 3, 4\) and \(3, 4, 5\)"):
        A.ones(2, 3, 4) @ A.ones(3, 4, 5)
    with pytest.raises(ShapeError, match="matmul: both arguments need to be at least 1D"):
        A.matmul(A.tensor(2.0), A.ones(2))
    with pytest.raises(UnsupportedDTypeError, match=r"matmul: .*same dtype.*float32 and adcuda\.float64"):
        A.ones(2, 3) @ A.ones(3, 2, dtype=A.float64)
    with pytest.raises(DTypeError, match="matmul: both operands must be Tensors"):
        A.matmul(A.ones(2), [1.0, 2.0])
    with pytest.raises(ShapeError, match=r"mm: both arguments must be 2-D, got \(2, 3, 4\) and \(4, 2\)"):
        A.mm(A.ones(2, 3, 4), A.ones(4, 2))
    with pytest.raises(ShapeError, match=r"mm: shapes \(2, 3\) and \(2, 3\)"):
        A.mm(A.ones(2, 3), A.ones(2, 3))
    with pytest.raises(ShapeError, match=r"bmm: .*\(2, 3, 4\) and \(3, 4, 5\)"):
        A.bmm(A.ones(2, 3, 4), A.ones(3, 4, 5))
    with pytest.raises(UnsupportedDTypeError, match="bmm: .*same dtype"):
        A.bmm(A.ones(1, 2, 2), A.ones(1, 2, 2, dtype=A.float16))
    with pytest.raises(ShapeError, match=r"outer: expected 1-D vectors, got \(2, 2\)"):
        A.outer(A.ones(2, 2), A.ones(2))
    with pytest.raises(ShapeError, match=r"dot: .*\(3,\) and \(4,\)"):
        A.dot(A.ones(3), A.ones(4))
