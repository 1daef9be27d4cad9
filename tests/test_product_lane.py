"""The dispatch point's fast lane for the products (ops declared ``plain="product"`` or
``plain="add_product"``: mm, matmul, bmm, mv, dot, vdot, outer; addmm, addmv, baddbmm, addbmm, addr):
a plain call gives the general path's values bit for bit, dtype and shape; every other case (shapes that
do not multiply, batch dims to broadcast, an input that takes part in a composite op, scalars other
than the defaults) takes the path that names errors and records."""

import importlib
import warnings

import numpy as np
import pytest
import torch
from helpers import general_path

import adcuda
import adcuda.nn.functional as F
from adcuda.errors import AdcudaError
from adcuda.ops import dispatch, registry
from adcuda.profiler import profile

cpu_gemm = importlib.import_module("adcuda.backends.cpu.gemm")
PRODUCTS = sorted(o.name for o in registry.all_ops() if o.plain is not None and o.plain.endswith("product"))

# the operands' shapes of each op's cases: plain ones, and ones the lane leaves to the path (broadcast
# batch dims, an input that broadcasts to the product, strided views)
SHAPES = {
    "mm": [((3, 4), (4, 5)), ((1, 4), (4, 1)), ((0, 4), (4, 2))],
    "matmul": [((3, 4), (4, 5)), ((3, 4), (4,)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4,))],
    "bmm": [((2, 3, 4), (2, 4, 5)), ((1, 1, 1), (1, 1, 1))],
    "mv": [((3, 4), (4,)), ((0, 4), (4,))],
    "dot": [((7,), (7,)), ((0,), (0,))],
    "vdot": [((7,), (7,))],
    "outer": [((3,), (4,)), ((1,), (0,))],
    "kron": [((3,), (4,)), ((2, 3), (4, 2)), ((2, 1, 3), (1, 2, 2)), ((2, 3), (4,)), ((), ())],
    "addmm": [((3, 5), (3, 4), (4, 5)), ((5,), (3, 4), (4, 5)), ((1, 1), (3, 4), (4, 5))],
    "addmv": [((3,), (3, 4), (4,)), ((1,), (3, 4), (4,))],
    "baddbmm": [((2, 3, 5), (2, 3, 4), (2, 4, 5)), ((3, 5), (2, 3, 4), (2, 4, 5))],
    "addbmm": [((3, 5), (2, 3, 4), (2, 4, 5)), ((5,), (2, 3, 4), (2, 4, 5))],
    "addr": [((3, 4), (3,), (4,)), ((4,), (3,), (4,))],
}


def _arrays(shapes, dtype):
    rng = np.random.default_rng(1)
    out = []
    for shape in shapes:
        a = rng.standard_normal(shape).astype(dtype)
        if a.size > 2:
            a.flat[:2] = (np.inf, -0.0)  # IEEE specials go through as the path's
        out.append(a)
    return out


def _tensors(arrays, transposed):
    if not transposed:
        return [adcuda.tensor(a) for a in arrays]
    # strided views of the same values (the last two dims swapped twice)
    return [
        adcuda.tensor(np.ascontiguousarray(a.swapaxes(-1, -2))).mT if a.ndim >= 2 else adcuda.tensor(a) for a in arrays
    ]


def test_the_products_are_declared():
    assert {"mm", "matmul", "bmm", "mv", "dot", "addmm", "baddbmm", "addmv"} <= set(PRODUCTS) == set(SHAPES)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", PRODUCTS)
def test_the_lane_gives_what_the_general_path_gives(name, dtype):
    fn = getattr(adcuda, name)
    for shapes in SHAPES[name]:
        arrays = _arrays(shapes, dtype)
        for transposed in (False, True):
            tensors = _tensors(arrays, transposed)
            with np.errstate(all="raise"), warnings.catch_warnings():
                warnings.simplefilter("error")  # (inf in a product: quiet, as the path)
                fast = fn(*tensors)
            general, seen = general_path(lambda tensors=tensors: fn(*tensors))
            assert seen[0] == name  # (a composite: then the ops its forward calls)
            assert fast.dtype == general.dtype and fast.shape == general.shape
            np.testing.assert_array_equal(fast.numpy(), general.numpy(), strict=True)
            expected = getattr(torch, name)(*(torch.from_numpy(a) for a in arrays))
            assert tuple(fast.shape) == tuple(expected.shape)
            assert fast.dtype.name == str(expected.dtype).removeprefix("torch.")


def test_the_lane_really_runs_its_kernel(monkeypatch):
    """A plain call does not reach the forward (this test fails if the lane's tests never pass)."""
    called = []
    op = registry.get("bmm")
    forward = op.forward
    monkeypatch.setattr(op, "forward", lambda *a: called.append(1) or forward(*a))
    a = adcuda.ones(2, 3, 3)
    adcuda.bmm(a, a)
    assert not called  # (the entry holds the forward it was made with: the lane is the only way round)


@pytest.mark.parametrize("name", ["mm", "matmul"])
def test_a_composite_product_records_when_an_input_takes_part(name):
    fn = getattr(adcuda, name)
    leaf = adcuda.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    other = adcuda.tensor([[0.5, -1.0], [2.0, 0.25]])
    for a, b in ((leaf, other), (other, leaf), (leaf[:, :], other)):
        out = fn(a, b)
        assert out.grad_fn is not None
    fn(leaf, other).sum().backward()
    assert leaf.grad.tolist() == [[-0.5, 2.25], [-0.5, 2.25]]
    with adcuda.no_grad():
        assert fn(leaf, other).grad_fn is None


@pytest.mark.parametrize("name", ["bmm", "dot", "addmm", "addr"])
def test_recording_ops_record_from_the_lane(name):
    shapes = SHAPES[name][0]
    arrays = _arrays(shapes, np.float64)
    arrays = [np.nan_to_num(a, posinf=1.0) for a in arrays]

    def grads():
        tensors = [adcuda.tensor(a, requires_grad=True) for a in arrays]
        out = getattr(adcuda, name)(*tensors)
        out.sum().backward()
        return out.grad_fn.name(), [t.grad.numpy() for t in tensors]

    fast = grads()
    general, _ = general_path(grads)
    assert fast[0] == general[0]
    for f, g in zip(fast[1], general[1]):
        np.testing.assert_array_equal(f, g, strict=True)


def test_scalars_and_other_cases_take_the_path():
    x, v = adcuda.ones(2, 2), adcuda.ones(2)
    assert adcuda.addmm(x, x, x, beta=0.5, alpha=2).tolist() == [[4.5, 4.5], [4.5, 4.5]]
    assert adcuda.addmv(v, x, v, beta=0).tolist() == [2.0, 2.0]
    ints = adcuda.ones(2, 2, dtype=adcuda.int64)
    assert adcuda.mm(ints, ints).dtype == adcuda.int64
    x_ = adcuda.ones(2, 2)
    x_.addmm_(x, x)  # the in-place form: the path's
    assert x_.tolist() == [[3.0, 3.0], [3.0, 3.0]] and x_._version.value == 1


def test_bad_operands_still_raise_the_named_errors():
    x, v = adcuda.ones(2, 3), adcuda.ones(2)
    cases = [
        ("mm", lambda: adcuda.mm(x, x)),
        ("mm", lambda: adcuda.mm(x, v)),
        ("matmul", lambda: adcuda.matmul(x, x)),
        ("bmm", lambda: adcuda.bmm(adcuda.ones(2, 2, 3), adcuda.ones(3, 3, 2))),
        ("mv", lambda: adcuda.mv(x, v)),
        ("dot", lambda: adcuda.dot(v, adcuda.ones(3))),
        ("addmm", lambda: adcuda.addmm(adcuda.ones(3, 3), x, x.t())),  # the sum would broadcast the product
        ("addr", lambda: adcuda.addr(adcuda.ones(2, 2, 3), v, adcuda.ones(3))),
        ("mm", lambda: adcuda.mm(x, adcuda.ones(3, 2, dtype=adcuda.float64))),
    ]
    for name, call in cases:
        with pytest.raises(AdcudaError, match=name):
            call()


def test_the_profiler_sees_each_call():
    x = adcuda.ones(2, 2)
    with profile() as prof:
        adcuda.mm(x, x)
        adcuda.addmm(x, x, x)
    assert [e.name for e in prof.events()][:1] == ["mm"] and "addmm" in [e.name for e in prof.events()]
    assert dispatch._plain


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("ij,jk->ik", ((3, 4), (4, 5))),  # a matrix product: matmul's one call
        ("bij,bjk->bik", ((2, 3, 4), (2, 4, 5))),
        ("ij,jk->ki", ((3, 4), (4, 5))),  # the others: the general contraction
        ("ij,jj->ij", ((3, 4), (4, 4))),
        ("bij,cjk->bik", ((2, 3, 4), (2, 4, 5))),
        ("ij,jk->ik", ((1, 4), (4, 1))),
    ],
)
def test_einsum_of_a_matrix_product_is_matmul(equation, shapes):
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal(s) for s in shapes]
    leaves = [adcuda.tensor(a, requires_grad=True) for a in arrays]
    out = adcuda.einsum(equation, *leaves)
    expected = [torch.tensor(a, requires_grad=True) for a in arrays]
    reference = torch.einsum(equation, *expected)
    np.testing.assert_allclose(out.detach().numpy(), reference.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    reference.sum().backward()
    for leaf, t in zip(leaves, expected):
        np.testing.assert_allclose(leaf.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    with pytest.raises(AdcudaError, match="einsum"):
        adcuda.einsum("ij,jk->ik", adcuda.ones(2, 3), adcuda.ones(4, 5))


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float64])
def test_cosine_similarity_host_call_is_the_backend_calls(monkeypatch, dtype):
    """cosine_similarity outside a graph and any hook: one host call (kernels/host/gemm.cpp) for CPU arrays
    of one shape, the backend calls of the general path (a hook attached) for the rest; the same values
    (the sums' order aside), NaN and a zero row (its norm clamped to eps) included."""
    rng = np.random.default_rng(12)
    a = rng.standard_normal((3, 5, 4))
    b = rng.standard_normal((3, 5, 4))
    a[0, :, 1] = np.nan
    a[1, :, 2] = 0.0
    x, y = adcuda.tensor(a, dtype=dtype), adcuda.tensor(b, dtype=dtype)
    rtol = 1e-6 if dtype is adcuda.float32 else 1e-14
    calls = []
    host = cpu_gemm._COSINE
    monkeypatch.setattr(cpu_gemm, "_COSINE", lambda *args: calls.append(args) or host(*args))
    for args, kwargs in (
        ((x, y), {}),
        ((x, y), {"dim": -1}),
        ((x, y), {"dim": 0, "eps": 0.5}),
        ((x[:, :0], y[:, :0]), {}),  # no elements along dim: zeros
        ((x.mT, y.mT), {}),  # strided: the backend calls
        ((x, y[0]), {"dim": 2}),  # broadcast: the backend calls
    ):
        fast = F.cosine_similarity(*args, **kwargs)
        general, seen = general_path(lambda args=args, kwargs=kwargs: F.cosine_similarity(*args, **kwargs))
        assert seen and fast.dtype == general.dtype == dtype and fast.shape == general.shape
        np.testing.assert_allclose(fast.numpy(), general.numpy(), rtol=rtol, atol=1e-7)
    assert len(calls) == 4  # the four calls on arrays of one shape, laid out in rows
