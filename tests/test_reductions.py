"""Reductions (sum mean prod amax amin max min var std logsumexp norm argmax argmin), the running sum
and the ordering ops (sort argsort topk): gradients by gradcheck on every kind of ``dim``, values
against NumPy and PyTorch, ties, dtypes, float16 accumulation and errors that name the op."""

import math

import numpy as np
import pytest

import adcuda as A
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.errors import IndexOutOfRangeError, InvalidArgumentError, ShapeError, UnsupportedDTypeError

F64 = A.float64


def data(shape, seed=0, positive=False):
    """Distinct values (no ties), so that max/min/sort gradients are well defined."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    vals = rng.permutation(n) / max(n, 1) * 3 - 1.5 + rng.uniform(0, 0.01, size=n)
    if positive:
        vals = np.abs(vals) + 0.5
    return vals.reshape(shape)


def leaf(shape, seed=0, positive=False):
    return A.tensor(data(shape, seed, positive), dtype=F64, requires_grad=True)


# name: (fn(x, dim, keepdim), needs positive input)
REDUCTIONS = {
    "sum": (lambda x, d, k: x.sum(d, keepdim=k), False),
    "mean": (lambda x, d, k: x.mean(d, keepdim=k), False),
    "amax": (lambda x, d, k: x.amax(() if d is None else d, keepdim=k), False),
    "amin": (lambda x, d, k: x.amin(() if d is None else d, keepdim=k), False),
    "var": (lambda x, d, k: x.var(d, keepdim=k), False),
    "var_correction0": (lambda x, d, k: x.var(d, keepdim=k, correction=0), False),
    "std": (lambda x, d, k: x.std(d, keepdim=k), False),
    "std_unbiased_false": (lambda x, d, k: x.std(d, False, k), False),
    "logsumexp": (lambda x, d, k: x.logsumexp(tuple(range(x.ndim)) if d is None else d, keepdim=k), False),
    "norm2": (lambda x, d, k: x.norm(dim=d, keepdim=k), False),
    "norm1": (lambda x, d, k: x.norm(1, dim=d, keepdim=k), False),
    "norm3": (lambda x, d, k: x.norm(3, dim=d, keepdim=k), False),
    "norm_inf": (lambda x, d, k: x.norm(float("inf"), dim=d, keepdim=k), False),
    "norm_neg_inf": (lambda x, d, k: x.norm(-float("inf"), dim=d, keepdim=k), False),
    "prod": (lambda x, d, k: x.prod() if d is None else x.prod(d if isinstance(d, int) else d[0], keepdim=k), True),
}

DIMS = {"all": None, "int": 1, "negative": -1, "tuple": (0, 2), "negative tuple": (-1, 0)}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_gradcheck(name, dim, keepdim):
    fn, positive = REDUCTIONS[name]
    assert gradcheck(lambda x: fn(x, DIMS[dim], keepdim), (leaf((2, 3, 4), positive=positive),))


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_gradcheck_on_non_contiguous_input(name):
    fn, positive = REDUCTIONS[name]
    assert gradcheck(lambda x: fn(x.transpose(0, 2)[:, ::2], 1, False), (leaf((4, 3, 4), positive=positive),))
    # along the expanded dim every value is the same (a kink of std/norm): reduce across it instead
    assert gradcheck(lambda x: fn(x.expand(3, 4), 1, False), (leaf((1, 4), positive=positive),))


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_of_a_0d_tensor(name):
    fn, positive = REDUCTIONS[name]
    if name.startswith(("var", "std")) and "0" not in name and "false" not in name:
        pytest.skip("one value has no unbiased spread")
    assert gradcheck(lambda x: fn(x, None, False), (leaf((), positive=positive),))
    assert gradcheck(lambda x: fn(x, 0, True), (leaf((), positive=positive),))


@pytest.mark.parametrize("name", ["sum", "mean", "logsumexp", "var", "std", "logsumexp", "prod"])
def test_second_derivative(name):
    fn, positive = REDUCTIONS[name]
    assert gradgradcheck(lambda x: fn(x, 1, False), (leaf((2, 3), positive=positive),))


def test_reductions_match_numpy():
    x = data((2, 3, 4), seed=3)
    t = A.tensor(x, dtype=F64)
    np.testing.assert_allclose(t.sum((0, 2)).numpy(), x.sum((0, 2)))
    np.testing.assert_allclose(t.mean(-1, keepdim=True).numpy(), x.mean(-1, keepdims=True))
    np.testing.assert_allclose(t.prod(1).numpy(), x.prod(1))
    np.testing.assert_allclose(t.amax((0, 1)).numpy(), x.max((0, 1)))
    np.testing.assert_allclose(t.amin().numpy(), x.min())
    np.testing.assert_allclose(t.var(1).numpy(), x.var(1, ddof=1))
    np.testing.assert_allclose(t.var(1, correction=0).numpy(), x.var(1))
    np.testing.assert_allclose(t.std((0, 2), correction=2).numpy(), x.std((0, 2), ddof=2))
    np.testing.assert_allclose(t.logsumexp(2).numpy(), np.log(np.exp(x).sum(2)))
    np.testing.assert_allclose(t.norm().numpy(), np.sqrt((x**2).sum()))
    np.testing.assert_allclose(t.norm(3, dim=(1, 2)).numpy(), (np.abs(x) ** 3).sum((1, 2)) ** (1 / 3))
    np.testing.assert_allclose(t.norm(0).numpy(), np.count_nonzero(x))
    np.testing.assert_allclose(t.norm(float("inf"), dim=0).numpy(), np.abs(x).max(0))
    assert t.argmax().item() == x.argmax()
    assert t.argmin(1).tolist() == x.argmin(1).tolist()
    assert t.argmax(2, keepdim=True).shape == (2, 3, 1)
    m = t.max(1)
    assert m.values.tolist() == x.max(1).tolist() and m.indices.tolist() == x.argmax(1).tolist()
    m = t.min(-1, keepdim=True)
    assert m.values.shape == (2, 3, 1) and m.indices.tolist() == x.argmin(-1)[..., None].tolist()
    assert t.max().item() == x.max() and t.min().item() == x.min()


def test_logsumexp_is_stable_for_large_values():
    x = A.tensor([1000.0, 1000.0, -float("inf")])
    assert x.logsumexp(0).item() == pytest.approx(1000 + math.log(2))
    assert A.tensor([-float("inf")] * 2).logsumexp(0).item() == -math.inf


def test_ties():
    x = A.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    x.amax(1).sum().backward()  # amax spreads the gradient over the tied maxima
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]
    x.grad = None
    out = x.max(1)
    assert out.indices.tolist() == [1, 0]  # the first maximum, as in PyTorch
    out.values.sum().backward()  # max(dim) gives it all to the index it returned
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    x.grad = None
    x.max().backward()
    assert x.grad.tolist() == [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]]


def test_zero_gradient_where_a_norm_or_spread_is_zero():
    x = A.zeros(2, 3, dtype=F64, requires_grad=True)
    (x.norm(dim=1).sum() + x.norm(3) + x.std(1).sum()).backward()
    assert x.grad.tolist() == [[0.0] * 3] * 2
    x = A.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=F64, requires_grad=True)
    x.prod(1).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0], [2.0, 1.0]]


def test_prod_gradient_with_a_single_zero():
    x = A.tensor([2.0, 0.0, 3.0], dtype=F64, requires_grad=True)
    x.prod().backward()
    assert x.grad.tolist() == [0.0, 6.0, 0.0]


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "var", "std", "logsumexp", "norm2", "norm3", "prod"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_reductions_match_torch(name, dtype):
    torch = pytest.importorskip("torch")
    fn, positive = REDUCTIONS[name]
    x = data((3, 4, 5), seed=7, positive=positive)
    a = A.tensor(x, dtype=getattr(A, dtype), requires_grad=True)
    t = torch.tensor(x, dtype=getattr(torch, dtype), requires_grad=True)
    for dim, keepdim in ((1, False), (-1, True), (None, False)):
        ya, yt = fn(a, dim, keepdim), fn(t, dim, keepdim)
        g = np.linspace(0.5, 1.5, max(ya.numel(), 1)).reshape(tuple(ya.shape))
        (ga,) = A.autograd.grad(ya, [a], A.tensor(g, dtype=ya.dtype))
        (gt,) = torch.autograd.grad(yt, [t], torch.tensor(g, dtype=yt.dtype))
        tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ya.detach().numpy(), yt.detach().numpy(), **tol)
        np.testing.assert_allclose(ga.numpy(), gt.numpy(), **tol)


def test_max_min_with_dim_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 0.0, 7.0]])
    for op in ("max", "min"):
        for dim, keepdim in ((0, False), (1, True), (-1, False)):
            ours = getattr(A.tensor(x), op)(dim, keepdim=keepdim)
            theirs = getattr(torch.tensor(x), op)(dim, keepdim=keepdim)
            assert ours.values.tolist() == theirs.values.tolist()
            assert ours.indices.tolist() == theirs.indices.tolist()
            assert type(ours).__name__ == op


# ---------------------------------------------------------------------------------------------------
# dtypes
def test_result_dtypes():
    assert A.tensor([1, 2], dtype=A.int32).sum().dtype is A.int64
    assert A.tensor([True, True, False]).sum().item() == 2
    assert A.tensor([2, 3], dtype=A.int32).prod().dtype is A.int64
    assert A.tensor([2, 3], dtype=A.int32).amax().dtype is A.int32
    assert A.tensor([1, 2]).sum(dtype=A.float64).dtype is A.float64
    assert A.tensor([1, 5, 2]).max(0).values.item() == 5
    assert A.tensor([1, 5, 2]).argmax().dtype is A.int64
    assert A.tensor([1.0, 2.0]).var().dtype is A.float32
    assert A.tensor([[True, False]]).all().item() is False and A.tensor([[True, False]]).any(1).tolist() == [True]
    with pytest.raises(UnsupportedDTypeError, match="mean: .*int64"):
        A.tensor([1, 2]).mean()
    with pytest.raises(UnsupportedDTypeError, match="var: .*int64"):
        A.tensor([1, 2]).var()
    with pytest.raises(UnsupportedDTypeError, match="norm: .*int64"):
        A.tensor([1, 2]).norm()


def test_float16_accumulates_in_fp32():
    ones = A.ones(4096, dtype=A.float16)
    total = ones.sum()
    assert total.dtype is A.float16 and total.item() == 4096.0  # half accumulation would stop at 2048
    assert ones.cumsum(0)[-1].item() == 4096.0
    x = A.full((3000,), 0.1, dtype=A.float16)
    assert x.mean().dtype is A.float16 and x.mean().item() == pytest.approx(0.1, rel=1e-3)
    h = A.tensor(data((8, 9), seed=2), dtype=A.float16)
    for op in (lambda t: t.var(1), lambda t: t.std(0), lambda t: t.logsumexp(1), lambda t: t.norm(dim=0)):
        out = op(h)
        assert out.dtype is A.float16
        np.testing.assert_allclose(out.numpy().astype(np.float32), op(h.float()).numpy(), rtol=1e-3, atol=1e-3)


def test_empty_reductions():
    e = A.zeros(0, 3)
    assert e.sum().item() == 0.0 and e.sum(0).tolist() == [0.0, 0.0, 0.0]
    assert e.prod(0).tolist() == [1.0, 1.0, 1.0]
    assert all(math.isnan(v) for v in e.mean(0).tolist())
    assert e.amax(1).shape == (0,)
    x = A.zeros(0, 3, dtype=F64, requires_grad=True)
    x.sum().backward()
    assert x.grad.shape == (0, 3)
    # PyTorch's classes: IndexError naming the empty dim; RuntimeError without a dim (IndexError for argmax)
    with pytest.raises(IndexError, match=r"amax: expected reduction dim 0 to have non-zero size \(input shape \(0, 3"):
        e.amax(0)
    with pytest.raises(IndexError, match="max: expected reduction dim 0 to have non-zero size"):
        e.max(0)
    with pytest.raises(RuntimeError, match="amax: expected reduction dim to be specified") as caught:
        e.amax()
    assert not isinstance(caught.value, IndexError)
    with pytest.raises(IndexError, match="argmax: expected reduction dim to be specified"):
        e.argmax()
    with pytest.raises(IndexError, match="median: expected reduction dim 0 to have non-zero size"):
        e.median(0)
    with pytest.raises(IndexError, match="kthvalue: expected reduction dim 0 to have non-zero size"):
        e.kthvalue(1, 0)


def test_dim_errors_name_the_op():
    x = A.ones(2, 3)
    for name, call in (
        ("sum", lambda: x.sum(2)),
        ("mean", lambda: x.mean(-3)),
        ("amax", lambda: x.amax(5)),
        ("max", lambda: x.max(2)),
        ("argmax", lambda: x.argmax(3)),
        ("var", lambda: x.var(2)),
        ("logsumexp", lambda: x.logsumexp(2)),
        ("cumsum", lambda: x.cumsum(2)),
        ("sort", lambda: x.sort(2)),
        ("topk", lambda: x.topk(1, dim=4)),
        ("norm", lambda: x.norm(dim=3)),
    ):
        with pytest.raises(IndexOutOfRangeError, match=rf"{name}: dimension out of range"):
            call()
    with pytest.raises(ShapeError, match="sum: dim .* more than once"):
        x.sum((1, -1))


# ---------------------------------------------------------------------------------------------------
# running sum and ordering
def test_cumsum():
    x = data((3, 4), seed=5)
    t = A.tensor(x, dtype=F64)
    np.testing.assert_allclose(t.cumsum(1).numpy(), np.cumsum(x, 1))
    np.testing.assert_allclose(A.cumsum(t, -2).numpy(), np.cumsum(x, 0))
    assert A.tensor([1, 2, 3], dtype=A.int32).cumsum(0).dtype is A.int64
    assert A.tensor([True, True]).cumsum(0).tolist() == [1, 2]
    assert A.tensor([1, 2]).cumsum(0, dtype=A.float32).dtype is A.float32
    assert A.tensor(2.0).cumsum(0).item() == 2.0
    for view in (lambda v: v.cumsum(1), lambda v: v.t().cumsum(0), lambda v: v[:, ::2].cumsum(-1)):
        assert gradcheck(view, (leaf((3, 4)),))
    assert gradgradcheck(lambda v: v.cumsum(0) ** 2, (leaf((4,)),))
    assert gradcheck(lambda v: v.cumsum(0), (leaf(()),))


def test_sort_and_argsort():
    x = A.tensor([[3.0, 1.0, float("nan"), 1.0], [2.0, 2.0, 0.0, 5.0]])
    s = x.sort()
    assert s.indices.tolist() == [[1, 3, 0, 2], [2, 0, 1, 3]]  # stable, NaN last
    assert s.values.tolist()[1] == [0.0, 2.0, 2.0, 5.0]
    d = A.sort(x, dim=1, descending=True)
    assert d.indices.tolist() == [[2, 0, 1, 3], [3, 0, 1, 2]]  # NaN first, ties in original order
    assert x.argsort(0).tolist() == [[1, 0, 1, 0], [0, 1, 0, 1]]
    assert A.argsort(x, dim=1, descending=True).tolist() == d.indices.tolist()
    assert A.tensor([3, 1, 2]).sort().values.tolist() == [1, 2, 3]
    z = A.tensor(5.0).sort()
    assert z.values.item() == 5.0 and z.indices.item() == 0
    assert type(s).__name__ == "sort"


def test_sort_and_topk_gradients():
    assert gradcheck(lambda v: v.sort(1).values, (leaf((3, 4)),))
    assert gradcheck(lambda v: v.sort(0, descending=True)[0], (leaf((3, 4)),))
    assert gradcheck(lambda v: v.t().sort(-1).values, (leaf((3, 4)),))
    assert gradcheck(lambda v: v.topk(2).values, (leaf((3, 4)),))
    assert gradcheck(lambda v: v.topk(3, dim=0, largest=False).values, (leaf((4, 2)),))
    assert gradgradcheck(lambda v: v.sort(1).values ** 2, (leaf((2, 3)),))


def test_topk():
    x = A.tensor([[1.0, 5.0, 3.0, 4.0], [9.0, 0.0, 2.0, 2.0]])
    top = x.topk(2)
    assert top.values.tolist() == [[5.0, 4.0], [9.0, 2.0]]
    assert top.indices.tolist() == [[1, 3], [0, 2]]
    low = A.topk(x, 3, dim=1, largest=False)
    assert low.values.tolist() == [[1.0, 3.0, 4.0], [0.0, 2.0, 2.0]]
    assert low.indices.tolist() == [[0, 2, 3], [1, 2, 3]]
    assert x.topk(0).values.shape == (2, 0)
    assert x.topk(1, dim=0).indices.tolist() == [[1, 0, 0, 0]]
    assert type(top).__name__ == "topk"
    with pytest.raises(InvalidArgumentError, match=r"topk: k \(5\) is out of range"):  # PyTorch's RuntimeError
        x.topk(5)
    with pytest.raises(InvalidArgumentError, match="topk: k"):
        x.topk(-1)


def test_ordering_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(4).integers(0, 4, size=(3, 7)).astype(np.float32)  # many ties
    for dim in (0, 1, -1):
        for descending in (False, True):
            ours = A.tensor(x).sort(dim, descending=descending)
            theirs = torch.tensor(x).sort(dim=dim, descending=descending, stable=True)
            assert ours.indices.tolist() == theirs.indices.tolist()
            assert ours.values.tolist() == theirs.values.tolist()
        np.testing.assert_allclose(A.tensor(x).cumsum(dim).numpy(), torch.tensor(x).cumsum(dim).numpy())
    y = data((4, 6), seed=9)
    for k, largest in ((3, True), (2, False)):
        ours, theirs = A.tensor(y).topk(k, 1, largest), torch.tensor(y).topk(k, 1, largest)
        assert ours.indices.tolist() == theirs.indices.tolist()


def test_median():
    x = A.tensor([[3.0, 1.0, 2.0, 5.0], [0.0, 4.0, -1.0, 6.0]])
    m = x.median(1)
    assert m.values.tolist() == [2.0, 0.0] and m.indices.tolist() == [2, 0]  # the lower of the two middles
    assert A.median(x, 0, keepdim=True).values.tolist() == [[0.0, 1.0, -1.0, 5.0]]
    assert x.median().item() == 2.0 and type(m).__name__ == "median"
    assert gradcheck(lambda v: v.median(1).values, (leaf((3, 5)),))
    assert gradcheck(lambda v: v.median(), (leaf((2, 3)),))
    assert math.isnan(A.zeros(0).median().item())  # PyTorch's NaN


def test_median_matches_torch():
    torch = pytest.importorskip("torch")
    y = data((5, 6), seed=11)
    for dim in (0, 1):
        ours, theirs = A.tensor(y).median(dim), torch.tensor(y).median(dim)
        assert ours.values.tolist() == theirs.values.tolist() and ours.indices.tolist() == theirs.indices.tolist()
    assert A.tensor(y).median().item() == torch.tensor(y).median().item()


def test_var_mean_std_mean_count_nonzero():
    x = data((3, 4), seed=12)
    v, m = A.var_mean(A.tensor(x, dtype=F64), 1)
    np.testing.assert_allclose(v.numpy(), x.var(1, ddof=1))
    np.testing.assert_allclose(m.numpy(), x.mean(1))
    s, m = A.tensor(x, dtype=F64).std_mean((0, 1), correction=0)
    np.testing.assert_allclose(s.numpy(), x.std())
    assert gradcheck(lambda t: A.std_mean(t, 0)[0] + A.var_mean(t, 0)[1], (leaf((3, 4)),))
    assert A.count_nonzero(A.tensor([[0, 1, 2], [0, 0, 3]]), 1).tolist() == [2, 1]
    assert A.tensor([0.0, 1.0]).count_nonzero().item() == 1


@pytest.mark.parametrize("shape", [(3, 5), (2048, 96), (2048, 384), (8192, 64), (0, 7), (7, 0)])
def test_cpu_sums_of_rows_and_over_leading_dims_by_blas_match_float64(shape):
    # (the CPU backend's BLAS sums with a vector of ones, in products of at most _UNTHREADED_GEMV elements)
    from adcuda.backends import cpu
    from adcuda.backends.cpu._common import _row_sums

    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    exact = a.astype(np.float64)
    np.testing.assert_allclose(cpu.reduce("sum", a, [0], False), exact.sum(0), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(cpu.reduce("sum", a, (0,), True), exact.sum(0, keepdims=True), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(_row_sums(a, 1), exact.sum(1, keepdims=True), rtol=1e-5, atol=1e-4)
