"""Sparse COO tensors (adcuda/ops/sparse.py) against PyTorch: construction, coalesce, to_dense and
to_sparse, the products by dense matrices (values and gradients, to the dense operand and to the sparse
values), sparse.sum, errors; float64 gradchecks of the product ops; and, on CUDA (or the emulator), the
sparse primitives against the CPU backend on odd shapes."""

import numpy as np
import pytest

import adcuda
from adcuda import dtypes as dt
from adcuda.backends import cpu
from adcuda.errors import DeviceError, DTypeError, InvalidArgumentError, LayoutError, ShapeError
from adcuda.ops.sparse import _sddmm

try:
    import torch
except ImportError:  # PyTorch is the oracle: the tests that need it skip (``oracle``); the CUDA ones run
    torch = None


@pytest.fixture
def torch_oracle():
    pytest.importorskip("torch")


oracle = pytest.mark.usefixtures("torch_oracle")
pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")  # PyTorch's, at construction

gpu = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]


def coo(rng, rows, cols, nnz, duplicates=False, dense_dims=()):
    """Random COO parts (indices (2, nnz) int64, values float32), unsorted; with duplicates repeated."""
    r = rng.integers(0, rows, nnz)
    c = rng.integers(0, cols, nnz)
    if duplicates and nnz >= 4:
        r[nnz // 2 :: 3], c[nnz // 2 :: 3] = r[0], c[0]
    return np.stack([r, c]).astype(np.int64), rng.standard_normal((nnz, *dense_dims)).astype(np.float32)


def both(indices, values, size=None, requires_grad=False):
    s = adcuda.sparse_coo_tensor(indices, values, size, requires_grad=requires_grad)
    extra = () if size is None else (size,)  # PyTorch takes no size=None
    t = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), *extra, requires_grad=requires_grad)
    return s, t


def assert_close(ours, theirs, rtol=1e-5, atol=1e-5):
    if theirs.layout == torch.sparse_coo:
        assert ours.layout is adcuda.sparse_coo
        theirs = theirs.coalesce()
        ours = ours.coalesce()
        np.testing.assert_array_equal(ours.indices().numpy(), theirs.indices().numpy())
        np.testing.assert_allclose(ours.values().detach().numpy(), theirs.values().detach().numpy(), rtol, atol)
        assert tuple(ours.shape) == tuple(theirs.shape)
        return
    assert ours.layout is adcuda.strided
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol, atol)


# ---------------------------------------------------------------------------------------------
# construction, metadata, coalesce, conversions
@oracle
def test_construction_infers_the_size_and_keeps_the_entries_as_given():
    indices, values = np.array([[1, 0, 1, 2], [0, 2, 0, 1]]), np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    s, t = both(indices, values)
    assert tuple(s.shape) == tuple(t.shape) == (3, 3)
    assert (s.sparse_dim(), s.dense_dim(), s._nnz(), s.is_coalesced()) == (2, 0, 4, False)
    assert s.is_sparse and s.layout is adcuda.sparse_coo and isinstance(s, adcuda.Tensor)
    assert s.dtype is adcuda.float32 and s.numel() == 9 and s.ndim == 2 and s.size(1) == 3
    np.testing.assert_array_equal(s._indices().numpy(), indices)
    np.testing.assert_array_equal(s._values().numpy(), values)
    assert adcuda.ones(2).layout is adcuda.strided and not adcuda.ones(2).is_sparse


@pytest.mark.parametrize("case", ["duplicates", "unsorted", "empty", "hybrid", "one entry"])
@oracle
def test_coalesce_matches_pytorch(case):
    rng = np.random.default_rng(0)
    dense_dims = (3,) if case == "hybrid" else ()
    nnz = {"empty": 0, "one entry": 1}.get(case, 17)
    indices, values = coo(rng, 5, 4, nnz, duplicates=case == "duplicates", dense_dims=dense_dims)
    s, t = both(indices, values, (5, 4, *dense_dims))
    c, tc = s.coalesce(), t.coalesce()
    assert c.is_coalesced() and tc.is_coalesced()
    np.testing.assert_array_equal(c.indices().numpy(), tc.indices().numpy())
    np.testing.assert_allclose(c.values().numpy(), tc.values().numpy(), rtol=1e-6, atol=1e-6)
    assert c.coalesce() is c


@oracle
def test_to_dense_adds_duplicates_and_to_sparse_round_trips():
    rng = np.random.default_rng(1)
    indices, values = coo(rng, 6, 5, 20, duplicates=True)
    s, t = both(indices, values, (6, 5))
    assert_close(s.to_dense(), t.to_dense())
    dense = adcuda.tensor(t.to_dense().numpy())
    back = dense.to_sparse()
    assert back.is_coalesced()
    assert_close(back, t.to_dense().to_sparse())
    assert_close(back.to_dense(), t.to_dense())
    assert dense.to_dense() is dense
    assert back.to_sparse() is back and back.to_sparse_coo() is back
    assert_close(dense.to_sparse_coo(), t.to_dense().to_sparse_coo())


@oracle
def test_to_sparse_with_dense_dims_and_hybrid_to_dense():
    x = np.zeros((4, 3, 2), np.float32)
    x[1, 2, 0], x[3, 0, 1], x[3, 0, 0] = 1.5, -2.0, 4.0
    ours, theirs = adcuda.tensor(x).to_sparse(2), torch.tensor(x).to_sparse(2)
    assert (ours.sparse_dim(), ours.dense_dim()) == (theirs.sparse_dim(), theirs.dense_dim()) == (2, 1)
    assert_close(ours, theirs)
    assert_close(ours.to_dense(), theirs.to_dense())


def test_dtype_device_and_requires_grad_arguments():
    s = adcuda.sparse_coo_tensor([[0, 1], [1, 0]], [1, 2])
    assert s.dtype is adcuda.int64  # as PyTorch infers from Python ints
    s = adcuda.sparse_coo_tensor([[0, 1], [1, 0]], [1, 2], (2, 3), dtype=adcuda.float64, device="cpu")
    assert s.dtype is adcuda.float64 and s.device == adcuda.device("cpu") and tuple(s.shape) == (2, 3)
    v = adcuda.tensor([1.0, 2.0])
    s = adcuda.sparse_coo_tensor([[0, 1]], v, requires_grad=True)
    assert s.requires_grad and s.is_leaf and not v.requires_grad  # its own leaf; v is left as it is
    assert s.double().dtype is adcuda.float64 and s.to(adcuda.float16).dtype is adcuda.float16
    legacy = adcuda.sparse.FloatTensor(adcuda.tensor([[0, 1], [1, 0]]), adcuda.tensor([1, 2]), adcuda.Size([2, 2]))
    assert legacy.dtype is adcuda.float32 and legacy.layout is adcuda.sparse_coo and tuple(legacy.shape) == (2, 2)
    assert adcuda.sparse.DoubleTensor([[0, 1]], [1.0, 2.0]).dtype is adcuda.float64
    module = adcuda.nn.Module()
    module.register_buffer("adjacency", s)  # a GCN keeps its adjacency as a buffer
    assert module.double().adjacency.dtype is adcuda.float64 and module.adjacency.is_sparse
    assert s.detach().requires_grad is False and s.cpu() is s


@oracle
def test_gradient_flows_to_the_values_the_tensor_was_made_from():
    i = np.array([[1, 0, 1, 2], [0, 2, 0, 1]])
    v_np = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    d_np = np.random.default_rng(2).standard_normal((3, 2)).astype(np.float32)
    v, tv = adcuda.tensor(v_np, requires_grad=True), torch.tensor(v_np, requires_grad=True)
    d, td = adcuda.tensor(d_np, requires_grad=True), torch.tensor(d_np, requires_grad=True)
    adcuda.sparse.mm(adcuda.sparse_coo_tensor(i, v, (3, 3)), d).pow(2).sum().backward()
    torch.sparse.mm(torch.sparse_coo_tensor(torch.tensor(i), tv, (3, 3)), td).pow(2).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(d.grad.numpy(), td.grad.numpy(), rtol=1e-5)


def test_repr_is_pytorchs():
    s = adcuda.sparse_coo_tensor([[1, 0, 1, 2], [0, 2, 0, 1]], [1.0, 2.0, 3.0, 4.0], (3, 3), requires_grad=True)
    assert repr(s) == (
        "tensor(indices=tensor([[1, 0, 1, 2],\n"
        "                       [0, 2, 0, 1]]),\n"
        "       values=tensor([1., 2., 3., 4.]),\n"
        "       size=(3, 3), nnz=4, layout=adcuda.sparse_coo, requires_grad=True)"
    )
    assert "dtype=adcuda.float64" in repr(s.double())


# ---------------------------------------------------------------------------------------------
# products
PRODUCTS = {
    "sparse.mm": (lambda a, b: adcuda.sparse.mm(a, b), lambda a, b: torch.sparse.mm(a, b)),
    "spmm": (lambda a, b: adcuda.spmm(a, b), lambda a, b: torch.spmm(a, b)),
    "mm": (lambda a, b: adcuda.mm(a, b), lambda a, b: torch.mm(a, b)),
    "Tensor.mm": (lambda a, b: a.mm(b), lambda a, b: a.mm(b)),
    "matmul": (lambda a, b: adcuda.matmul(a, b), lambda a, b: torch.matmul(a, b)),
    "@": (lambda a, b: a @ b, lambda a, b: a @ b),
}

SHAPES = {  # (rows, inner, columns, nnz)
    "square": (7, 7, 5, 20),
    "one column": (9, 6, 1, 15),
    "1023 columns": (5, 4, 1023, 9),
    "no entries": (4, 3, 6, 0),
    "empty rows": (40, 8, 3, 5),
}


@pytest.mark.parametrize("product", PRODUCTS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("duplicates", [False, True])
@oracle
def test_products_and_gradients_match_pytorch(product, shape, duplicates):
    rows, inner, columns, nnz = SHAPES[shape]
    rng = np.random.default_rng(3)
    indices, values = coo(rng, rows, inner, nnz, duplicates)
    d_np = rng.standard_normal((inner, columns)).astype(np.float32)
    ours, theirs = PRODUCTS[product]
    v, tv = adcuda.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    d, td = adcuda.tensor(d_np, requires_grad=True), torch.tensor(d_np, requires_grad=True)
    out = ours(adcuda.sparse_coo_tensor(indices, v, (rows, inner)), d)
    expected = theirs(torch.sparse_coo_tensor(torch.tensor(indices), tv, (rows, inner)), td)
    assert_close(out, expected)
    g = rng.standard_normal((rows, columns)).astype(np.float32)
    out.backward(adcuda.tensor(g))
    expected.backward(torch.tensor(g))
    np.testing.assert_allclose(d.grad.numpy(), td.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-5, atol=1e-5)


@oracle
def test_sparse_leaf_gets_a_sparse_gradient_on_its_entries():
    rng = np.random.default_rng(4)
    indices, values = coo(rng, 6, 5, 12, duplicates=True)
    s, t = both(indices, values, (6, 5), requires_grad=True)
    d_np = rng.standard_normal((5, 3)).astype(np.float32)
    adcuda.sparse.mm(s, adcuda.tensor(d_np)).sum().backward()
    torch.sparse.mm(t, torch.tensor(d_np)).sum().backward()
    assert s.grad.layout is adcuda.sparse_coo
    assert_close(s.grad, t.grad)
    s.grad, t.grad = None, None
    assert s.grad is None
    adcuda.sparse.sum(s).backward()
    torch.sparse.sum(t).backward()
    assert_close(s.grad, t.grad)


@oracle
def test_dense_times_sparse_vector_forms_and_a_non_contiguous_dense_operand():
    rng = np.random.default_rng(5)
    indices, values = coo(rng, 6, 4, 10, duplicates=True)
    s, t = both(indices, values, (6, 4))
    wide = rng.standard_normal((3, 8)).astype(np.float32)
    # a transposed view and a strided slice: neither is contiguous
    assert_close(s @ adcuda.tensor(wide)[:, ::2].t(), t @ torch.tensor(wide)[:, ::2].t())
    left = rng.standard_normal((2, 6)).astype(np.float32)
    assert_close(adcuda.tensor(left) @ s, torch.tensor(left) @ t)
    assert_close(adcuda.mm(adcuda.tensor(left), s), torch.mm(torch.tensor(left), t))
    bias = rng.standard_normal((6, 3)).astype(np.float32)
    feats = rng.standard_normal((4, 3)).astype(np.float32)
    addmm = adcuda.sparse.addmm(adcuda.tensor(bias), s, adcuda.tensor(feats), beta=0.5, alpha=2.0)
    assert_close(addmm, torch.sparse.addmm(torch.tensor(bias), t, torch.tensor(feats), beta=0.5, alpha=2.0))
    vec = rng.standard_normal(4).astype(np.float32)
    assert_close(adcuda.matmul(s, adcuda.tensor(vec)), torch.matmul(t, torch.tensor(vec)))
    assert_close(s.t() @ adcuda.tensor(left).t(), t.t() @ torch.tensor(left).t())


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), -1, 2, (0, 2), (1, 2)])
@oracle
def test_sparse_sum_matches_pytorch(dim):
    rng = np.random.default_rng(6)
    indices, values = coo(rng, 5, 4, 11, duplicates=True, dense_dims=(3,))
    v, tv = adcuda.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    s = adcuda.sparse_coo_tensor(indices, v, (5, 4, 3))
    t = torch.sparse_coo_tensor(torch.tensor(indices), tv, (5, 4, 3))
    out = adcuda.sparse.sum(s) if dim is None else adcuda.sparse.sum(s, dim)
    expected = torch.sparse.sum(t) if dim is None else torch.sparse.sum(t, dim)
    assert_close(out, expected)
    (out.to_dense() if out.is_sparse else out).pow(2).sum().backward()
    (expected.to_dense() if expected.is_sparse else expected).pow(2).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), rtol=1e-5, atol=1e-5)


@oracle
def test_scalar_products_sums_and_transpose():
    rng = np.random.default_rng(7)
    indices, values = coo(rng, 4, 5, 9, duplicates=True)
    s, t = both(indices, values, (4, 5))
    assert_close(s * 2.5, t * 2.5)
    assert_close(3 * s, 3 * t)
    assert_close(s / 2, t / 2)
    assert_close(-s, -t)
    assert_close(s + s, t + t)
    assert (s.coalesce() + s.coalesce()).is_coalesced()
    assert_close(s.sub(s.coalesce() * 2), t.sub(t.coalesce() * 2))
    dense = rng.standard_normal((4, 5)).astype(np.float32)
    assert_close(s + adcuda.tensor(dense), torch.tensor(dense) + t)
    assert_close(adcuda.tensor(dense) + s, torch.tensor(dense) + t)
    assert_close(s.t(), t.t())
    assert_close(s.transpose(0, 1).to_dense(), t.transpose(0, 1).to_dense())
    assert_close(s.sum(), t.sum())


# ---------------------------------------------------------------------------------------------
# gradcheck (float64) of the product ops, first and second order
def test_gradcheck_of_the_products_in_float64():
    rng = np.random.default_rng(8)
    indices, values = coo(rng, 5, 4, 9, duplicates=True)
    idx = adcuda.tensor(indices)
    v = adcuda.tensor(values.astype(np.float64), requires_grad=True)
    d = adcuda.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    a = adcuda.tensor(rng.standard_normal((5, 3)), requires_grad=True)

    def product(v, d):
        return adcuda.sparse.mm(adcuda.sparse_coo_tensor(idx, v, (5, 4)), d)

    assert adcuda.autograd.gradcheck(product, (v, d))
    assert adcuda.autograd.gradgradcheck(product, (v, d))
    assert adcuda.autograd.gradcheck(
        lambda v: adcuda.sparse.sum(adcuda.sparse_coo_tensor(idx, v, (5, 4)), 1).to_dense(), (v,)
    )
    assert adcuda.autograd.gradcheck(lambda v: adcuda.sparse_coo_tensor(idx, v, (5, 4)).coalesce().values(), (v,))
    assert adcuda.autograd.gradcheck(lambda x: x.to_sparse().values(), (a,))
    # the value gradient's op (one dot product per entry) and its own gradients
    assert adcuda.autograd.gradcheck(lambda a, d: _sddmm(idx, a, d), (a, d))
    assert adcuda.autograd.gradgradcheck(lambda a, d: _sddmm(idx, a, d), (a, d))


# ---------------------------------------------------------------------------------------------
# errors
def test_construction_errors_name_the_problem():
    with pytest.raises(
        InvalidArgumentError, match="size is inconsistent with indices: for dim 0, size is 3 but found index 5"
    ):
        adcuda.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,), check_invariants=True)
    with pytest.raises(InvalidArgumentError, match="found negative index -1 for dim 0"):
        adcuda.sparse_coo_tensor([[0, -1]], [1.0, 2.0])
    with pytest.raises(ShapeError, match="indices must be sparse_dim x nnz"):
        adcuda.sparse_coo_tensor([0, 1], [1.0, 2.0])
    with pytest.raises(ShapeError, match="indices and values must have same nnz"):
        adcuda.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0])
    with pytest.raises(ShapeError, match="len\\(size\\) == sparse_dim \\+ dense_dim"):
        adcuda.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2,))
    with pytest.raises(ShapeError, match="values has incorrect size"):
        adcuda.sparse_coo_tensor([[0, 1]], [[1.0, 2.0], [3.0, 4.0]], (2, 3))
    with pytest.raises(DTypeError, match="indices must be an int64 tensor"):
        adcuda.sparse_coo_tensor([[0.5, 1.0]], [1.0, 2.0])


def test_product_errors():
    s = adcuda.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0])
    with pytest.raises(ShapeError, match=r"mm: shapes \(2, 2\) and \(3, 2\) cannot be multiplied"):
        adcuda.mm(s, adcuda.ones(3, 2))
    with pytest.raises(DTypeError, match="same dtype"):
        adcuda.sparse.mm(s, adcuda.ones(2, 2, dtype=adcuda.float64))
    with pytest.raises(ShapeError, match="dense operand must be 2-D"):
        adcuda.sparse.mm(s, adcuda.ones(2))
    with pytest.raises(LayoutError, match="two sparse tensors"):
        adcuda.sparse.mm(s, s)
    hybrid = adcuda.sparse_coo_tensor([[0, 1]], [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(ShapeError, match="sparse_dim 2, dense_dim 0"):
        adcuda.sparse.mm(hybrid, adcuda.ones(2, 2))
    with pytest.raises(LayoutError, match="spmm: expected a sparse matrix"):
        adcuda.spmm(adcuda.ones(2, 2), adcuda.ones(2, 2))


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda s: s.exp(), "exp"),
        (lambda s: adcuda.exp(s), "exp"),
        (lambda s: adcuda.relu(s), "relu"),
        (lambda s: s.view(4), "view"),
        (lambda s: s.reshape(4), "reshape"),
        (lambda s: adcuda.cat([s, s]), "cat"),
        (lambda s: adcuda.softmax(s, 0), "softmax"),
        (lambda s: s.numpy(), "numpy"),
        (lambda s: s.item(), "item"),
        (lambda s: s.is_contiguous(), "is_contiguous"),
        (lambda s: s.values(), "values"),
        (lambda s: s * adcuda.ones(2, 2), "mul"),
    ],
)
def test_unsupported_ops_raise_a_layout_error_naming_the_op(call, name):
    s = adcuda.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0])
    with pytest.raises(LayoutError, match=f"^{name}: "):
        call(s)


@pytest.mark.parametrize("indices_on", ["cpu", "cuda"])
@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
def test_devices_must_match(indices_on):
    other = "cuda" if indices_on == "cpu" else "cpu"
    with pytest.raises(DeviceError, match="same device"):
        adcuda.sparse_coo_tensor(adcuda.tensor([[0, 1]], device=indices_on), adcuda.tensor([1.0, 2.0], device=other))
    s = adcuda.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], device=indices_on)
    with pytest.raises(DeviceError, match="same device"):
        adcuda.sparse.mm(s, adcuda.ones(2, 2, device=other))


# ---------------------------------------------------------------------------------------------
# CUDA (or the emulator) against the CPU backend
CUDA_DTYPES = [(dt.float32, 1e-5), (dt.float16, 2e-3), (dt.bfloat16, 1e-2)]


@pytest.mark.parametrize("dtype, tol", CUDA_DTYPES, ids=lambda x: getattr(x, "name", ""))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("sorted_rows", [False, True])
@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
def test_cuda_primitives_match_the_cpu(dtype, tol, shape, sorted_rows):
    """coo_to_csr, spmm and sddmm on CUDA against the CPU backend's in float32 on the same (rounded)
    inputs; the dense operand a transposed view (not contiguous), duplicates and empty rows included."""
    from adcuda.backends import cuda

    rows, inner, columns, nnz = SHAPES[shape]
    rng = np.random.default_rng(9)
    indices, values = coo(rng, rows, inner, nnz, duplicates=True)
    if sorted_rows:
        indices = indices[:, np.argsort(indices[0], kind="stable")]
    dense_t = rng.standard_normal((columns, inner)).astype(np.float32)  # the dense operand is its transpose
    grad = rng.standard_normal((rows, columns)).astype(np.float32)

    def stored(x):  # x in ``dtype`` on the device
        return cuda.astype(cuda.from_numpy(x, dt.float32), dtype)

    def rounded(x):  # x as ``dtype`` holds it, back in float32 on the host
        return cuda.to_numpy(cuda.astype(stored(x), dt.float32))

    r, c = cpu.from_numpy(indices[0].copy(), dt.int64), cpu.from_numpy(indices[1].copy(), dt.int64)
    row_ptr, order = cpu.coo_to_csr(r, rows, sorted_rows)
    dense = cpu.permute(rounded(dense_t), (1, 0))
    want = [cpu.spmm(row_ptr, order, c, rounded(values), dense), cpu.sddmm(r, c, rounded(grad), dense)]

    R, C = cuda.from_numpy(indices[0].copy(), dt.int64), cuda.from_numpy(indices[1].copy(), dt.int64)
    got_ptr, got_order = cuda.coo_to_csr(R, rows, sorted_rows)
    np.testing.assert_array_equal(cuda.to_numpy(got_ptr), row_ptr)
    if order is None:
        assert got_order is None
    else:
        np.testing.assert_array_equal(cuda.to_numpy(got_order), order)
    dense_on_device = cuda.permute(stored(dense_t), (1, 0))
    got = [
        cuda.spmm(got_ptr, got_order, C, stored(values), dense_on_device),
        cuda.sddmm(R, C, stored(grad), dense_on_device),
    ]
    for g, w in zip(got, want):
        assert cuda.dtype_of(g) is dtype
        scale = max(1.0, float(np.abs(w).max(initial=0)))
        np.testing.assert_allclose(cuda.to_numpy(cuda.astype(g, dt.float32)), w, rtol=tol, atol=tol * scale)


@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
def test_cuda_sparse_tensors_end_to_end_match_the_cpu():
    rng = np.random.default_rng(10)
    indices, values = coo(rng, 33, 17, 60, duplicates=True)
    d_np = rng.standard_normal((17, 40)).astype(np.float32)
    results = {}
    for device in ("cpu", "cuda"):
        s = adcuda.sparse_coo_tensor(indices, values, (33, 17), device=device, requires_grad=True)
        d = adcuda.tensor(d_np, device=device, requires_grad=True)
        out = adcuda.sparse.mm(s, d)
        (out * out).sum().backward()
        c = s.detach().coalesce()
        results[device] = [
            x.cpu().numpy()
            for x in (out.detach(), d.grad, s.grad.values(), c.indices(), c.values(), s.detach().to_dense())
        ]
        assert s.grad.device == adcuda.device(device)
    for got, want in zip(results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    moved = adcuda.sparse_coo_tensor(indices, values, (33, 17)).cuda()
    assert moved.device.type == "cuda" and moved._indices().device.type == "cuda"
    assert moved.cpu().device.type == "cpu"
