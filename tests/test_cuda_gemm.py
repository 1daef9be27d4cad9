"""GPU tests of the GEMM paths (kernels/gemm*.cu) against the CPU backend: the hand-written
tensor-core kernel on every operand layout it has a variant for (cp.async or element loads; K- or
M/N-contiguous), leading dimensions that are not multiples of 8 (a 50257-wide language-model head),
1-row and 1-column products, batched and broadcast batches, split-K on and off, and the epilogue
(bias, GELU, the pre-activation); the cuBLASLt path where cuBLASLt loads (`needs cuBLAS`).

Shapes stay small: on the CPU emulator a 128 x 256 block tile of the tensor-core kernel costs about
a tenth of a second per K tile. The GPU-less tests of the path selection and the loader are in
tests/test_gemm_selection.py; the sm_90a kernel's are in tests/test_cuda_gemm_sm90.py.
"""

import math

import numpy as np
import pytest

import adcuda
from adcuda import dtypes as dt

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

HALF_TYPES = (dt.float16, dt.bfloat16)
# relative error of one rounding to the dtype (the products and sums are fp32)
EPSILON = {dt.float16: 2.0**-10, dt.bfloat16: 2.0**-7, dt.float32: 2.0**-20, dt.float64: 2.0**-48}


@pytest.fixture(scope="module")
def cb():
    from adcuda.backends import cuda

    return cuda


@pytest.fixture(scope="module")
def native():
    from adcuda import _native

    return _native._C


@pytest.fixture(autouse=True)
def mma_sync_kernel(monkeypatch):
    """These are the mma.sync kernel's tests: on a 9.0 device the sm_90a kernel would take most of these
    products (its own tests are tests/test_cuda_gemm_sm90.py)."""
    monkeypatch.setenv("ADCUDA_GEMM_SM90", "0")


@pytest.fixture
def split_k(monkeypatch):
    """split_k(n) forces n K splits on the tensor-core kernel for the rest of the test (1: none)."""

    def force(count):
        monkeypatch.setenv("ADCUDA_GEMM_SPLIT_K", str(count))

    return force


def host_dtype(dtype):
    return dt.float32 if dtype is dt.bfloat16 else dtype


def held(cb, x, dtype):
    """(device array, the values it holds as float64): the reference sees the rounded inputs."""
    a = cb.from_numpy(np.asarray(x, dtype=host_dtype(dtype).numpy), dtype)
    return a, np.array(cb.to_numpy(a)).astype(np.float64)


def check(cb, got, expected, dtype, k):
    """Within a few roundings of the output, scaled by the size of the terms summed (K of them)."""
    got_host = np.array(cb.to_numpy(got)).astype(np.float64)
    assert got_host.shape == expected.shape, (got_host.shape, expected.shape)
    scale = math.sqrt(max(k, 1)) * max(1.0, float(np.abs(expected).max(initial=0.0)) / math.sqrt(max(k, 1)))
    np.testing.assert_allclose(got_host, expected, rtol=4 * EPSILON[dtype], atol=4 * EPSILON[dtype] * scale)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def operand(cb, g, rows, cols, dtype, layout):
    """A (rows x cols) device operand stored as `layout` says, and its values.

    row / col: contiguous, or the transpose of a contiguous array (16-byte loadable: cp.async);
    row_ld50257 / col_ld50257: a block of a 50257-wide matrix (rows, or columns, 50257 elements
    apart: element loads); strided: every other element of both dims (no unit stride at all);
    offset: contiguous rows starting one element past an aligned address, ending at the storage's
    end (an A read by elements: its last 16-byte block is not all inside the storage);
    offset_in_blocks: the same with 7 elements of storage after it (an A read by realigned vectors)."""
    if layout == "row":
        return held(cb, g.standard_normal((rows, cols)), dtype)
    if layout == "col":
        store, host = held(cb, g.standard_normal((cols, rows)), dtype)
        return cb.permute(store, (1, 0)), host.T
    if layout == "row_ld50257":
        store, host = held(cb, g.standard_normal((rows, 50257)), dtype)
        return cb.slice(store, (slice(None), slice(3, 3 + cols))), host[:, 3 : 3 + cols]
    if layout == "col_ld50257":
        store, host = held(cb, g.standard_normal((cols, 50257)), dtype)
        view = cb.slice(store, (slice(None), slice(5, 5 + rows)))
        return cb.permute(view, (1, 0)), host[:, 5 : 5 + rows].T
    if layout == "strided":
        store, host = held(cb, g.standard_normal((2 * rows, 2 * cols)), dtype)
        return cb.slice(store, (slice(None, None, 2), slice(None, None, 2))), host[::2, ::2]
    if layout == "offset":
        store, host = held(cb, g.standard_normal(rows * cols + 1), dtype)
        view = cb.view(cb.slice(store, (slice(1, None),)), (rows, cols))
        return view, host[1:].reshape(rows, cols)
    if layout == "offset_in_blocks":
        store, host = held(cb, g.standard_normal(rows * cols + 8), dtype)
        view = cb.view(cb.slice(store, (slice(1, 1 + rows * cols),)), (rows, cols))
        return view, host[1 : 1 + rows * cols].reshape(rows, cols)
    raise ValueError(layout)


# =============================================================================================
# the hand-written tensor-core kernel
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("a_layout, b_layout", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
def test_all_four_transposes(cb, native, split_k, dtype, a_layout, b_layout):
    """NN, NT, TN, TT with M, N, K that fill no tile evenly (cp.async variants, zero-filled edges)."""
    split_k(1)
    g = np.random.default_rng(1)
    a, a_host = operand(cb, g, 37, 45, dtype, a_layout)
    b, b_host = operand(cb, g, 45, 50, dtype, b_layout)
    check(cb, native.matmul(a, b), a_host @ b_host, dtype, 45)


@pytest.mark.parametrize(
    "dtype, a_layout, b_layout", [(dt.float16, "row", "col"), (dt.bfloat16, "col", "row")], ids=str
)
def test_interior_and_edge_tiles(cb, native, split_k, dtype, a_layout, b_layout):
    """259 x 96 @ 96 x 263: block tiles wholly inside the matrices (copied without bounds checks)
    next to edge tiles, over three K tiles."""
    split_k(1)
    g = np.random.default_rng(13)
    a, a_host = operand(cb, g, 259, 96, dtype, a_layout)
    b, b_host = operand(cb, g, 96, 263, dtype, b_layout)
    check(cb, native.matmul(a, b), a_host @ b_host, dtype, 96)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize(
    "a_layout, b_layout",
    [
        ("row_ld50257", "row"),  # dX = dY @ W of a 50257-token head: A's rows 50257 apart (realigned)
        ("col_ld50257", "row"),  # dW = dY^T @ X: A's columns 50257 apart (realigned)
        ("row", "row_ld50257"),  # B's rows 50257 apart (B staged into aligned rows)
        ("col", "col_ld50257"),
        ("strided", "strided"),  # no unit stride on either operand (A by element loads)
        ("offset", "offset"),  # dense, but starting 2 bytes past 16-byte alignment
    ],
)
def test_unaligned_leading_dimensions_stay_on_tensor_cores(cb, native, split_k, dtype, a_layout, b_layout):
    split_k(1)
    g = np.random.default_rng(2)
    a, a_host = operand(cb, g, 19, 40, dtype, a_layout)
    b, b_host = operand(cb, g, 40, 23, dtype, b_layout)
    check(cb, native.matmul(a, b), a_host @ b_host, dtype, 40)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("splits", [1, 2])
@pytest.mark.parametrize("a_layout", ["row_ld50257", "col_ld50257", "offset_in_blocks", "offset"])
@pytest.mark.parametrize("m, k, n", [(65, 129, 7), (7, 65, 129), (129, 7, 65), (1, 129, 1), (66, 40, 1)])
def test_realigned_loads_and_stores_at_every_edge(cb, native, split_k, dtype, splits, a_layout, m, k, n):
    """A by realigned 16-byte vectors (rows or columns 50257 apart, or a dense A 2 bytes off
    alignment; by elements where its storage ends inside its last block) on sizes that end mid-chunk
    in every dim, K split or not; N odd or 1, so the epilogue realigns the output rows too."""
    split_k(splits)
    g = np.random.default_rng(17)
    a, a_host = operand(cb, g, m, k, dtype, a_layout)
    b, b_host = operand(cb, g, k, n, dtype, "col")
    check(cb, native.matmul(a, b), a_host @ b_host, dtype, k)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
def test_language_model_head_width(cb, native, split_k, dtype):
    """N = 50257 (197 column tiles, the last one 81 wide; rows of C not 16-byte aligned)."""
    split_k(1)
    g = np.random.default_rng(3)
    a, a_host = operand(cb, g, 2, 16, dtype, "row")
    b, b_host = operand(cb, g, 16, 50257, dtype, "col")  # x @ W^T with W (50257, 16)
    check(cb, native.matmul(a, b), a_host @ b_host, dtype, 16)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("m, k, n", [(1, 33, 20), (20, 33, 1), (1, 1, 1), (9, 1, 12), (1, 300, 1)])
@pytest.mark.parametrize("layout", ["row", "col"])
def test_one_row_one_column(cb, native, split_k, dtype, m, k, n, layout):
    split_k(1)
    g = np.random.default_rng(4)
    a, a_host = operand(cb, g, m, k, dtype, layout)
    b, b_host = operand(cb, g, k, n, dtype, layout)
    check(cb, native.matmul(a, b), a_host @ b_host, dtype, k)


@pytest.mark.parametrize("dtype", HALF_TYPES + (dt.float32,), ids=str)
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((3, 20, 24), (24, 16)),  # B shared: folded into one 60 x 16 product
        ((2, 1, 17, 24), (3, 24, 9)),  # broadcast batch dims on both sides
        ((4, 9, 40), (4, 40, 11)),  # plain batched
    ],
)
def test_batched_and_broadcast(cb, native, split_k, dtype, a_shape, b_shape):
    split_k(1)
    g = np.random.default_rng(5)
    a, a_host = held(cb, g.standard_normal(a_shape), dtype)
    b, b_host = held(cb, g.standard_normal(b_shape), dtype)
    check(cb, native.matmul(a, b), np.matmul(a_host, b_host), dtype, a_shape[-1])


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("splits", [1, 2, 3, 64])
def test_split_k_matches_and_is_deterministic(cb, native, split_k, dtype, splits):
    """K = 200 is 7 K tiles: 2 and 3 splits leave a short last split, 64 is cut down to 7."""
    split_k(splits)
    g = np.random.default_rng(6)
    a, a_host = operand(cb, g, 24, 200, dtype, "col")
    b, b_host = operand(cb, g, 200, 36, dtype, "row")
    first = native.matmul(a, b)
    check(cb, first, a_host @ b_host, dtype, 200)
    again = native.matmul(a, b)
    np.testing.assert_array_equal(np.array(cb.to_numpy(first)), np.array(cb.to_numpy(again)))


def test_shared_unaligned_b_under_a_strided_batch(cb, native, split_k):
    """B (24 x 9: rows 18 bytes apart) shared by a batch that cannot fold into M: staged once."""
    split_k(1)
    g = np.random.default_rng(8)
    a_store, a_store_host = held(cb, g.standard_normal((6, 20, 24)), dt.float16)
    a = cb.slice(a_store, (slice(None, None, 2),))  # matrices 2 * 20 * 24 apart
    b, b_host = held(cb, g.standard_normal((24, 9)), dt.float16)
    check(cb, native.matmul(a, b), np.matmul(a_store_host[::2], b_host), dt.float16, 24)


def test_split_k_batched_with_unaligned_operand(cb, native, split_k):
    split_k(3)
    g = np.random.default_rng(7)
    a, a_host = held(cb, g.standard_normal((2, 9, 130)), dt.bfloat16)
    b_store, b_store_host = held(cb, g.standard_normal((2, 131, 10)), dt.bfloat16)
    b = cb.slice(b_store, (slice(None), slice(1, None), slice(None)))  # rows 10 apart, start 2 bytes off
    check(cb, native.matmul(a, b), np.matmul(a_host, b_store_host[:, 1:, :]), dt.bfloat16, 130)


@pytest.mark.parametrize("dtype", HALF_TYPES + (dt.float32,), ids=str)
@pytest.mark.parametrize("splits", [1, 2])
def test_epilogue_bias_gelu_and_preactivation(cb, native, split_k, dtype, splits):
    """gelu_tanh(a @ b + bias) and a @ b + bias in one call, without and with split-K (whose reduction
    applies the epilogue), N odd: rows not 16-byte aligned, the realigned epilogue."""
    split_k(splits)
    g = np.random.default_rng(8)
    a, a_host = operand(cb, g, 21, 70, dtype, "row")
    b, b_host = operand(cb, g, 70, 33, dtype, "col")
    bias, bias_host = held(cb, g.standard_normal(33), dtype)
    out, pre = native.matmul(a, b, bias=bias, activation="gelu_tanh", save_preactivation=True)
    expected_pre = a_host @ b_host + bias_host
    check(cb, pre, expected_pre, dtype, 70)
    check(cb, out, gelu_tanh(expected_pre), dtype, 70)
    plain = native.matmul(a, b, bias=bias)
    check(cb, plain, expected_pre, dtype, 70)


def test_epilogue_vector_stores(cb, native, split_k):
    """N a multiple of 8: the epilogue's 16-byte row stores, with a strided bias."""
    split_k(1)
    g = np.random.default_rng(9)
    a, a_host = operand(cb, g, 130, 24, dt.float16, "row")
    b, b_host = operand(cb, g, 24, 264, dt.float16, "row")
    bias_store, bias_store_host = held(cb, g.standard_normal(528), dt.float16)
    bias = cb.slice(bias_store, (slice(None, None, 2),))
    check(cb, native.matmul(a, b, bias=bias), a_host @ b_host + bias_store_host[::2], dt.float16, 24)


def test_bad_epilogue_arguments(cb, native, split_k):
    a, _ = held(cb, np.ones((2, 3)), dt.float16)
    b, _ = held(cb, np.ones((3, 4)), dt.float16)
    with pytest.raises(ValueError, match="activation must be"):
        native.matmul(a, b, activation="relu6")
    split_k(0)
    with pytest.raises(ValueError, match="ADCUDA_GEMM_SPLIT_K"):
        native.matmul(a, b)


def test_gemm_path_names_the_tensor_core_kernel():
    from adcuda.backends.cuda import gemm as cuda_gemm

    path = cuda_gemm.gemm_path()
    assert "64x64 warp tiles" in path and "split-K" in path
    facts = adcuda.info(as_dict=True)
    assert facts["gemm_kernels"] == path
    assert facts["gemm"]["path"] in ("handwritten", "cublaslt") and facts["gemm"]["reason"]


# =============================================================================================
# cuBLASLt (where it loads: the nvidia-cublas wheel or a CUDA toolkit on a GPU machine)
def cublaslt_loaded():
    if not adcuda.cuda.is_available():
        return False  # the module's skip applies; the CUDA backend may not even import
    from adcuda.backends.cuda import gemm as cuda_gemm

    try:
        return cuda_gemm.gemm_selection().path == "cublaslt"
    except RuntimeError:
        return False


needs_cublas = pytest.mark.skipif("not cublaslt_loaded()", reason="needs cuBLAS (pip install 'adcuda[cublas]')")


@needs_cublas
@pytest.mark.parametrize("dtype", HALF_TYPES + (dt.float32, dt.float64), ids=str)
@pytest.mark.parametrize(
    "a_layout, b_layout",
    [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col"), ("row_ld50257", "col"), ("strided", "row")],
)
def test_cublaslt_matches_cpu(cb, native, dtype, a_layout, b_layout):
    """Every layout, including one cuBLASLt cannot express (no unit stride: the hand-written kernels)."""
    g = np.random.default_rng(10)
    a, a_host = operand(cb, g, 37, 45, dtype, a_layout)
    b, b_host = operand(cb, g, 45, 50, dtype, b_layout)
    check(cb, native.matmul(a, b, allow_cublaslt=True), a_host @ b_host, dtype, 45)


@needs_cublas
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
def test_cublaslt_epilogues_match_handwritten(cb, native, dtype):
    """BIAS, GELU_BIAS and GELU_AUX_BIAS against the hand-written epilogue, batched too."""
    g = np.random.default_rng(11)
    a, _ = held(cb, g.standard_normal((3, 33, 64)), dtype)
    b, _ = held(cb, g.standard_normal((64, 48)), dtype)
    bias, _ = held(cb, g.standard_normal(48), dtype)
    for options in (
        {"bias": bias},
        {"bias": bias, "activation": "gelu_tanh"},
        {"bias": bias, "activation": "gelu_tanh", "save_preactivation": True},
    ):
        lt = native.matmul(a, b, allow_cublaslt=True, **options)
        hand = native.matmul(a, b, allow_cublaslt=False, **options)
        for got, want in zip(lt if isinstance(lt, tuple) else (lt,), hand if isinstance(hand, tuple) else (hand,)):
            np.testing.assert_allclose(
                np.array(cb.to_numpy(got)),
                np.array(cb.to_numpy(want)),
                rtol=4 * EPSILON[dtype],
                atol=4 * EPSILON[dtype] * 8,
            )


@needs_cublas
def test_matmul_primitive_uses_the_selected_path(cb):
    from adcuda.backends.cuda import gemm as cuda_gemm

    assert cuda_gemm.gemm_selection().reason.startswith("cuBLASLt 13.")
    g = np.random.default_rng(12)
    a, a_host = held(cb, g.standard_normal((64, 32)), dt.bfloat16)
    b, b_host = held(cb, g.standard_normal((32, 16)), dt.bfloat16)
    check(cb, cb.matmul(a, b), a_host @ b_host, dt.bfloat16, 32)


def test_backend_matmul_epilogue_options(cb, split_k):
    """The CUDA backend's primitive: bias (in another dtype: cast to the operands'), GELU, pre-activation."""
    split_k(1)
    g = np.random.default_rng(14)
    a, a_host = operand(cb, g, 5, 24, dt.bfloat16, "row")
    b, b_host = operand(cb, g, 24, 12, dt.bfloat16, "col")
    bias, bias_host = held(cb, g.standard_normal(12), dt.float32)
    bias_rounded = np.array(cb.to_numpy(cb.astype(bias, dt.bfloat16))).astype(np.float64)
    out, pre = cb.matmul(a, b, bias=bias, activation="gelu_tanh", save_preactivation=True)
    expected_pre = a_host @ b_host + bias_rounded
    check(cb, pre, expected_pre, dt.bfloat16, 24)
    check(cb, out, gelu_tanh(expected_pre), dt.bfloat16, 24)
    assert abs(bias_host - bias_rounded).max() > 0  # the cast happened
    from adcuda.backends import cpu

    cpu_out, cpu_pre = cpu.matmul(
        a_host.astype(np.float32),
        b_host.astype(np.float32),
        bias=bias_rounded.astype(np.float32),
        activation="gelu_tanh",
        save_preactivation=True,
    )
    check(cb, out, cpu_out.astype(np.float64), dt.bfloat16, 24)
    check(cb, pre, cpu_pre.astype(np.float64), dt.bfloat16, 24)
    with pytest.raises(ValueError, match="activation must be None or 'gelu_tanh'"):
        cb.matmul(a, b, activation="relu")
    from adcuda.errors import ShapeError

    with pytest.raises(ShapeError, match=r"the bias must have shape \(12,\)"):
        cb.matmul(a, b, bias=cb.astype(a, dt.bfloat16))
