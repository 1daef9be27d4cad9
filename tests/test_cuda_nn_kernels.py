"""GPU parity tests of the GEMM, fused NN and optimizer kernels (kernels/gemm.cu, softmax_loss.cu,
norm.cu, attention.cu, optim.cu) against the CPU backend, the oracle: every primitive forward and
backward, in fp32, fp16 and bf16 (fp64 where the CPU backend keeps it), on odd shapes (1, 7, 1023,
65537, sizes that are not multiples of the kernels' tiles), transposed, strided and broadcast
operands, empty arrays, every attention mask kind; then end to end through the Tensor API and
``adcuda train``. Everything here needs a usable CUDA device and is skipped without one.

bfloat16 has no NumPy type, so its CPU reference runs in float32 on the bf16-rounded inputs.
"""

import math

import numpy as np
import pytest

import adcuda
from adcuda import dtypes as dt
from adcuda.backends import cpu
from adcuda.errors import DTypeError, ShapeError

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

HALF_TYPES = (dt.float16, dt.bfloat16)
FLOAT_TYPES = (dt.float32, dt.float16, dt.bfloat16)
# (rtol, atol) for results that went through one rounding to the dtype after fp32 math
TOLERANCE = {dt.float64: (1e-10, 1e-12), dt.float32: (2e-5, 2e-6), dt.float16: (4e-3, 2e-3), dt.bfloat16: (2e-2, 1e-2)}


@pytest.fixture(scope="module")
def cb():
    from adcuda.backends import cuda

    return cuda


@pytest.fixture(scope="module")
def native():
    from adcuda import _native

    return _native._C


def host_dtype(dtype):
    return dt.float32 if dtype is dt.bfloat16 else dtype


def to_device(cb, x, dtype):
    return cb.from_numpy(np.asarray(x, dtype=host_dtype(dtype).numpy), dtype)


def to_host(cb, a):
    return np.array(cb.to_numpy(a))


def held(cb, x, dtype):
    """(device array, the values it holds as a CPU-backend array): the CPU reference gets exactly the
    rounded inputs the GPU sees (float32 for bfloat16)."""
    a = to_device(cb, x, dtype)
    return a, to_host(cb, a)


def check(cb, got, expected, dtype, scale=1.0, rtol=None, atol=None):
    """Compare a device result with the CPU backend's, within the dtype's tolerance (atol scaled by
    ``scale``, the magnitude the result's error grows with)."""
    default_rtol, default_atol = TOLERANCE[dtype]
    got_host = to_host(cb, got).astype(np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert got_host.shape == expected.shape, (got_host.shape, expected.shape)
    np.testing.assert_allclose(
        got_host,
        expected,
        rtol=rtol if rtol is not None else default_rtol,
        atol=(atol if atol is not None else default_atol) * scale,
        equal_nan=True,
    )


def rng(seed=0):
    return np.random.default_rng(seed)


# =============================================================================================
# GEMM
def matmul_reference(a_host, b_host):
    return np.matmul(a_host.astype(np.float64), b_host.astype(np.float64))


def check_matmul(cb, a, a_host, b, b_host, dtype):
    got = cb.matmul(a, b)
    assert cb.dtype_of(got) is dtype
    k = a_host.shape[-1]
    magnitude = (
        math.sqrt(max(k, 1)) * max(np.abs(a_host).max(initial=0), 1e-3) * max(np.abs(b_host).max(initial=0), 1e-3)
    )
    check(cb, got, matmul_reference(a_host, b_host), dtype, scale=magnitude, rtol=TOLERANCE[dtype][0] * 4)


@pytest.mark.parametrize("dtype", (dt.float32, dt.float64, dt.float16, dt.bfloat16), ids=str)
@pytest.mark.parametrize(
    "m, k, n",
    [
        (1, 1, 1),
        (1, 7, 1),
        (7, 1, 9),
        (33, 65, 17),
        (128, 128, 128),
        (129, 257, 127),
        (1, 1023, 3),
        (1023, 5, 1),
        (300, 1000, 260),
        (64, 8, 8),
        (136, 40, 264),
    ],
)
def test_matmul_2d_matches_cpu(cb, dtype, m, k, n):
    g = rng(m * 7 + k * 3 + n)
    a, a_host = held(cb, g.standard_normal((m, k)), dtype)
    b, b_host = held(cb, g.standard_normal((k, n)), dtype)
    check_matmul(cb, a, a_host, b, b_host, dtype)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("a_transposed, b_transposed", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("m, k, n", [(64, 32, 48), (129, 67, 33), (256, 256, 136)])
def test_matmul_transposed_views_match_cpu(cb, dtype, a_transposed, b_transposed, m, k, n):
    """A transposed view has swapped strides; the kernels read it in place (tensor cores through
    ldmatrix.trans where the layout allows)."""
    g = rng(11)
    a_store, a_store_host = held(cb, g.standard_normal((k, m) if a_transposed else (m, k)), dtype)
    b_store, b_store_host = held(cb, g.standard_normal((n, k) if b_transposed else (k, n)), dtype)
    a = cb.permute(a_store, (1, 0)) if a_transposed else a_store
    b = cb.permute(b_store, (1, 0)) if b_transposed else b_store
    a_host = a_store_host.T if a_transposed else a_store_host
    b_host = b_store_host.T if b_transposed else b_store_host
    check_matmul(cb, a, a_host, b, b_host, dtype)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
def test_matmul_strided_and_offset_views_match_cpu(cb, dtype):
    g = rng(3)
    big, big_host = held(cb, g.standard_normal((70, 90)), dtype)
    # every other row, columns from an odd offset: neither stride is the dense one, nor is the start aligned
    a = cb.slice(big, (slice(1, None, 2), slice(3, 43)))
    a_host = big_host[1::2, 3:43]
    b, b_host = held(cb, g.standard_normal((40, 24)), dtype)
    check_matmul(cb, a, a_host, b, b_host, dtype)
    # a column block of a wider matrix as B (leading stride 90, not a multiple of 8)
    b2 = cb.slice(big, (slice(0, 40), slice(5, 29)))
    check_matmul(cb, a, a_host, b2, big_host[0:40, 5:29], dtype)


@pytest.mark.parametrize("dtype", (dt.float32, dt.float16), ids=str)
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [
        ((2, 3, 33, 17), (17, 9)),  # B shared by the batch: folded into one (2*3*33) x 9 product
        ((2, 1, 16, 24), (1, 3, 24, 40)),  # broadcast batch dims on both sides
        ((5, 31, 64), (5, 64, 7)),  # plain batched
        ((1, 40, 40), (40, 40)),  # batch of 1
        ((7, 8), (4, 8, 16)),  # A shared by the batch
    ],
)
def test_matmul_batched_and_broadcast_match_cpu(cb, dtype, a_shape, b_shape):
    g = rng(5)
    a, a_host = held(cb, g.standard_normal(a_shape), dtype)
    b, b_host = held(cb, g.standard_normal(b_shape), dtype)
    check_matmul(cb, a, a_host, b, b_host, dtype)


def test_matmul_expanded_and_transposed_batches(cb):
    """Stride-0 (expanded) batch dims and a batch of transposed matrices, read without copies."""
    g = rng(8)
    a, a_host = held(cb, g.standard_normal((1, 20, 30)), dt.float16)
    a_expanded = cb.expand(a, (6, 20, 30))
    b_store, b_host_store = held(cb, g.standard_normal((6, 50, 30)), dt.float16)
    b = cb.permute(b_store, (0, 2, 1))
    check_matmul(cb, a_expanded, np.broadcast_to(a_host, (6, 20, 30)), b, np.swapaxes(b_host_store, 1, 2), dt.float16)


def test_matmul_more_batches_than_one_grid_dimension(cb):
    """70000 batch entries: more than gridDim.z's 65535, so blocks loop over batch entries."""
    g = rng(9)
    a, a_host = held(cb, g.standard_normal((70000, 2, 3)), dt.float32)
    b, b_host = held(cb, g.standard_normal((70000, 3, 2)), dt.float32)
    check_matmul(cb, a, a_host, b, b_host, dt.float32)


@pytest.mark.parametrize("m, k, n", [(0, 4, 5), (4, 0, 5), (4, 5, 0), (0, 0, 0)])
def test_matmul_empty(cb, m, k, n):
    a = cb.from_numpy(np.ones((m, k), np.float32), dt.float32)
    b = cb.from_numpy(np.ones((k, n), np.float32), dt.float32)
    got = to_host(cb, cb.matmul(a, b))
    np.testing.assert_array_equal(got, np.zeros((m, n), np.float32))  # K = 0: zeros, as NumPy


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
def test_matmul_bias_epilogue(cb, native, dtype):
    g = rng(12)
    a, a_host = held(cb, g.standard_normal((37, 29)), dtype)
    b, b_host = held(cb, g.standard_normal((29, 45)), dtype)
    bias, bias_host = held(cb, g.standard_normal(45), dtype)
    got = native.matmul(a, b, bias)
    check(cb, got, matmul_reference(a_host, b_host) + bias_host, dtype, scale=10.0)


def test_matmul_errors(cb):
    a = cb.from_numpy(np.ones((3, 4), np.float32), dt.float32)
    b = cb.from_numpy(np.ones((5, 2), np.float32), dt.float32)
    with pytest.raises(ShapeError, match="cannot be multiplied"):
        cb.matmul(a, b)
    with pytest.raises(ShapeError, match="batch dims"):
        cb.matmul(
            cb.from_numpy(np.ones((2, 3, 4), np.float32), dt.float32),
            cb.from_numpy(np.ones((3, 4, 2), np.float32), dt.float32),
        )
    ints = cb.from_numpy(np.ones((3, 4), np.int64), dt.int64)
    with pytest.raises(DTypeError, match="floating point"):
        cb.matmul(ints, cb.from_numpy(np.ones((4, 2), np.int64), dt.int64))


def test_gemm_path_is_reported():
    from adcuda.backends.cuda import gemm

    path = gemm.gemm_path()
    assert "mma.sync" in path and "SIMT" in path
    assert "GEMM" in adcuda.info() and "mma.sync" in adcuda.info()


# =============================================================================================
# softmax / log-softmax
SOFTMAX_CASES = [
    ((1,), 0),
    ((7,), 0),
    ((3, 1023), 1),
    ((2, 65537), 1),
    ((4, 5, 6), 0),
    ((4, 5, 6), 1),
    ((4, 5, 6), 2),
    ((16, 64), 1),
    ((3, 8), 0),
]


@pytest.mark.parametrize("dtype", FLOAT_TYPES + (dt.float64,), ids=str)
@pytest.mark.parametrize("shape, axis", SOFTMAX_CASES)
@pytest.mark.parametrize("log", (False, True))
def test_softmax_forward_and_backward_match_cpu(cb, dtype, shape, axis, log):
    g = rng(len(shape) * 10 + axis)
    x, x_host = held(cb, g.standard_normal(shape) * 3, dtype)
    y = cb.softmax(x, axis, log)
    y_ref = cpu.softmax(x_host, axis, log)
    check(cb, y, y_ref, dtype, scale=4.0 if log else 1.0)
    grad, grad_host = held(cb, g.standard_normal(shape), dtype)
    y_held = to_host(cb, y)  # backward from the output the GPU produced, as autograd would
    dx = cb.softmax_backward(y, grad, axis, log)
    check(cb, dx, cpu.softmax_backward(y_held, grad_host, axis, log), dtype, scale=4.0)


def test_softmax_non_finite_rows_match_cpu(cb):
    """inf and NaN rows take NumPy's order of operations: the same NaNs and zeros as the CPU."""
    x_host = np.array(
        [
            [0.0, 1.0, 2.0, 3.0],
            [-np.inf, -np.inf, -np.inf, -np.inf],
            [np.inf, 0.0, 1.0, -1.0],
            [np.nan, 0.0, 1.0, 2.0],
            [-np.inf, 0.0, -np.inf, 5.0],
        ],
        np.float32,
    )
    x = cb.from_numpy(x_host, dt.float32)
    for log in (False, True):
        for axis in (0, 1):
            got = to_host(cb, cb.softmax(x, axis, log))
            np.testing.assert_allclose(got, cpu.softmax(x_host, axis, log), rtol=1e-6, atol=1e-7, equal_nan=True)


def test_softmax_of_a_transposed_view(cb):
    g = rng(4)
    store, store_host = held(cb, g.standard_normal((9, 13)), dt.float32)
    view = cb.permute(store, (1, 0))
    check(cb, cb.softmax(view, 1, False), cpu.softmax(store_host.T, 1, False), dt.float32)


def test_softmax_empty(cb):
    x = cb.from_numpy(np.zeros((0, 5), np.float32), dt.float32)
    assert to_host(cb, cb.softmax(x, 1, False)).shape == (0, 5)


# =============================================================================================
# cross-entropy
@pytest.mark.parametrize("dtype", FLOAT_TYPES + (dt.float64,), ids=str)
@pytest.mark.parametrize("n, c", [(1, 1), (7, 3), (300, 10), (5, 1023), (3, 4099), (64, 65), (2, 32768)])
@pytest.mark.parametrize("ignore_index, label_smoothing", [(-100, 0.0), (2, 0.0), (-100, 0.1), (1, 0.25)])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "class weights"])
def test_classifier_forward_and_backward_match_cpu(cb, dtype, n, c, ignore_index, label_smoothing, weighted):
    g = rng(n + c)
    logits, logits_host = held(cb, g.standard_normal((n, c)) * 2, dtype)
    target_host = g.integers(0, c, n).astype(np.int64)
    target_host[::3] = ignore_index  # every third row ignored (a class index itself where ignore_index is one)
    target = cb.from_numpy(target_host, dt.int64)
    wide = dt.float64 if dtype is dt.float64 else dt.float32
    weight, weight_host = held(cb, g.uniform(0.25, 2.0, c), wide) if weighted else (None, None)
    losses, stats = cb.classifier_loss(logits, target, weight, ignore_index, label_smoothing)
    ref_losses, ref_stats = cpu.classifier_loss(logits_host, target_host, weight_host, ignore_index, label_smoothing)
    assert cb.dtype_of(stats) is wide and cb.dtype_of(losses) is wide  # float32 losses from half logits
    check(cb, stats, ref_stats, wide, scale=8.0)
    check(cb, losses, ref_losses, wide, scale=8.0)
    assert np.all(to_host(cb, losses)[target_host == ignore_index] == 0)
    g_rows, g_rows_host = held(cb, g.standard_normal(n), wide)
    grad = cb.classifier_loss_backward(logits, stats, target, weight, g_rows, ignore_index, label_smoothing)
    ref = cpu.classifier_loss_backward(
        logits_host, to_host(cb, stats), target_host, weight_host, g_rows_host, ignore_index, label_smoothing
    )
    assert cb.dtype_of(grad) is dtype  # the gradient in the logits' dtype
    check(cb, grad, ref, dtype, scale=2.0)
    assert np.all(to_host(cb, grad)[target_host == ignore_index] == 0)  # ignored rows: exactly zero


def test_classifier_int32_targets(cb):
    g = rng(21)
    logits, logits_host = held(cb, g.standard_normal((6, 4)), dt.float32)
    target_host = np.array([0, 3, 1, 2, 2, 0], np.int32)
    losses, _ = cb.classifier_loss(logits, cb.from_numpy(target_host, dt.int32), None, -100, 0.0)
    check(cb, losses, cpu.classifier_loss(logits_host, target_host.astype(np.int64), None, -100, 0.0)[0], dt.float32)


def test_classifier_shape_errors(cb):
    logits = cb.from_numpy(np.zeros((3, 4), np.float32), dt.float32)
    target = cb.from_numpy(np.zeros(3, np.int64), dt.int64)
    with pytest.raises(ShapeError, match=r"\(N, C\)"):
        cb.classifier_loss(logits, cb.from_numpy(np.zeros(2, np.int64), dt.int64), None, -100, 0.0)
    with pytest.raises(DTypeError, match="integers"):
        cb.classifier_loss(logits, cb.from_numpy(np.zeros(3, np.float32), dt.float32), None, -100, 0.0)
    with pytest.raises(ShapeError, match="class weights"):
        cb.classifier_loss(logits, target, cb.from_numpy(np.ones(5, np.float32), dt.float32), -100, 0.0)


# =============================================================================================
# layer norm
@pytest.mark.parametrize("dtype", FLOAT_TYPES + (dt.float64,), ids=str)
@pytest.mark.parametrize(
    "shape, n",
    [
        ((1, 1), 1),
        ((7, 5), 1),
        ((300, 1023), 1),
        ((4, 3, 64), 1),
        ((4, 3, 64), 2),
        ((2, 5000), 1),
        ((1, 65537), 1),
        ((64, 768), 1),
    ],
)
@pytest.mark.parametrize("affine", ("both", "weight", "none"))
def test_layer_norm_forward_and_backward_match_cpu(cb, dtype, shape, n, affine):
    g = rng(sum(shape) + n)
    x, x_host = held(cb, g.standard_normal(shape) * 2 + 0.5, dtype)
    normalized = shape[len(shape) - n :]
    weight = bias = weight_host = bias_host = None
    if affine in ("both", "weight"):
        weight, weight_host = held(cb, g.standard_normal(normalized), dtype)
    if affine == "both":
        bias, bias_host = held(cb, g.standard_normal(normalized), dtype)
    y, mean, rstd = cb.layer_norm(x, weight, bias, n, 1e-5)
    y_ref, mean_ref, rstd_ref = cpu.layer_norm(x_host, weight_host, bias_host, n, 1e-5)
    check(cb, y, y_ref, dtype, scale=4.0)
    assert to_host(cb, mean).shape == mean_ref.shape and to_host(cb, rstd).shape == rstd_ref.shape
    stat_tolerance = 1e-10 if dtype is dt.float64 else 1e-5
    np.testing.assert_allclose(to_host(cb, mean), mean_ref, rtol=stat_tolerance, atol=stat_tolerance)
    np.testing.assert_allclose(to_host(cb, rstd), rstd_ref, rtol=stat_tolerance, atol=stat_tolerance)

    grad, grad_host = held(cb, g.standard_normal(shape), dtype)
    dx, dweight, dbias = cb.layer_norm_backward(grad, x, weight, mean, rstd, n)
    dx_ref, dweight_ref, dbias_ref = cpu.layer_norm_backward(grad_host, x_host, weight_host, mean_ref, rstd_ref, n)
    rows = int(np.prod(shape[: len(shape) - n]))
    check(cb, dx, dx_ref, dtype, scale=8.0)
    check(cb, dbias, dbias_ref, dtype, scale=2.0 * math.sqrt(rows))
    if weight is None:
        assert dweight is None
    else:
        check(cb, dweight, dweight_ref, dtype, scale=4.0 * math.sqrt(rows))


@pytest.mark.parametrize(
    "dtype, y_dtype",
    [
        (dt.float32, dt.float32),
        (dt.float32, dt.bfloat16),  # autocast's: a float32 residual stream, the bf16 activation
        (dt.float32, dt.float16),
        (dt.float16, dt.float16),
        (dt.bfloat16, dt.bfloat16),
        (dt.float64, dt.float64),
    ],
    ids=str,
)
@pytest.mark.parametrize("shape", [(7, 768), (3, 5, 7), (1, 1), (2, 9000)])
@pytest.mark.parametrize("with_grad_sum", [True, False])
def test_add_layer_norm_matches_cpu(cb, dtype, y_dtype, shape, with_grad_sum):
    """The fused residual add and layer norm and its fused backward against the CPU primitives:
    packed rows (768), unpacked (7), one element, and rows past the fused backward's limit (9000)."""
    g = rng(sum(shape))
    x, x_host = held(cb, g.standard_normal(shape) * 2 + 0.5, dtype)
    residual, residual_host = held(cb, g.standard_normal(shape), dtype)
    weight, weight_host = held(cb, g.standard_normal(shape[-1:]), dtype)
    bias, bias_host = held(cb, g.standard_normal(shape[-1:]), dtype)
    y, h, mean, rstd = cb.add_layer_norm(x, residual, weight, bias, 1, 1e-5, y_dtype)
    # (the CPU backend holds bfloat16 values as float32, so it does not round the sum to bfloat16: the
    # statistics and y are checked against the layer norm of the GPU's sum, itself checked first)
    _, h_ref, _, _ = cpu.add_layer_norm(x_host, residual_host, weight_host, bias_host, 1, 1e-5, host_dtype(y_dtype))
    assert cb.dtype_of(y) is y_dtype and cb.dtype_of(h) is dtype
    check(cb, h, h_ref, dtype)
    h_ref = to_host(cb, h)
    y_ref, mean_ref, rstd_ref = cpu.layer_norm(h_ref, weight_host, bias_host, 1, 1e-5)
    check(cb, y, y_ref, y_dtype, scale=4.0)
    stat_tolerance = 1e-10 if dtype is dt.float64 else 1e-5
    np.testing.assert_allclose(to_host(cb, rstd), rstd_ref, rtol=stat_tolerance, atol=stat_tolerance)

    grad, grad_host = held(cb, g.standard_normal(shape), y_dtype)
    grad_sum = grad_sum_host = None
    if with_grad_sum:
        grad_sum, grad_sum_host = held(cb, g.standard_normal(shape), dtype)
    dh, dweight, dbias = cb.add_layer_norm_backward(grad, grad_sum, h, weight, mean, rstd, 1)
    dh_ref, dweight_ref, dbias_ref = cpu.add_layer_norm_backward(
        grad_host, grad_sum_host, h_ref, weight_host, mean_ref, rstd_ref, 1
    )
    rows = int(np.prod(shape[:-1]))
    check(cb, dh, dh_ref, dtype, scale=8.0)
    check(cb, dweight, dweight_ref, dtype, scale=4.0 * math.sqrt(rows))
    check(cb, dbias, dbias_ref, dtype, scale=2.0 * math.sqrt(rows))


def test_add_layer_norm_errors(cb):
    x, _ = held(cb, np.ones((2, 4)), dt.float32)
    other, _ = held(cb, np.ones((2, 3)), dt.float32)
    with pytest.raises(ShapeError, match="add_layer_norm"):
        cb.add_layer_norm(x, other, None, None, 1, 1e-5, dt.float32)
    half, _ = held(cb, np.ones((2, 4)), dt.float16)
    with pytest.raises(DTypeError, match="add_layer_norm"):
        cb.add_layer_norm(half, half, None, None, 1, 1e-5, dt.bfloat16)


def test_layer_norm_backward_over_no_rows_gives_zero_parameter_grads(cb):
    x = cb.from_numpy(np.zeros((0, 6), np.float32), dt.float32)
    weight = cb.from_numpy(np.ones(6, np.float32), dt.float32)
    y, mean, rstd = cb.layer_norm(x, weight, None, 1, 1e-5)
    dx, dweight, dbias = cb.layer_norm_backward(x, x, weight, mean, rstd, 1)
    assert to_host(cb, dx).shape == (0, 6)
    np.testing.assert_array_equal(to_host(cb, dweight), np.zeros(6, np.float32))
    np.testing.assert_array_equal(to_host(cb, dbias), np.zeros(6, np.float32))


def test_layer_norm_weight_gradients_are_deterministic(cb):
    """Partial sums per block, then one ordered sum per column: bit-identical run to run."""
    g = rng(31)
    x, _ = held(cb, g.standard_normal((4096, 96)), dt.float32)
    weight, _ = held(cb, g.standard_normal(96), dt.float32)
    grad, _ = held(cb, g.standard_normal((4096, 96)), dt.float32)
    _, mean, rstd = cb.layer_norm(x, weight, None, 1, 1e-5)
    first = [to_host(cb, t) for t in cb.layer_norm_backward(grad, x, weight, mean, rstd, 1)]
    second = [to_host(cb, t) for t in cb.layer_norm_backward(grad, x, weight, mean, rstd, 1)]
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


# =============================================================================================
# attention
def attention_inputs(cb, dtype, q_shape, k_shape, v_shape, seed=0):
    g = rng(seed)
    return [held(cb, g.standard_normal(s), dtype) for s in (q_shape, k_shape, v_shape)]


def check_attention(
    cb, dtype, q_shape, k_shape, v_shape, mask_host=None, mask_dtype=None, is_causal=False, scale=None, seed=0
):
    (q, q_h), (k, k_h), (v, v_h) = attention_inputs(cb, dtype, q_shape, k_shape, v_shape, seed)
    scale = 1.0 / math.sqrt(q_shape[-1]) if scale is None else scale
    mask = mask_ref = None
    if mask_host is not None:
        if mask_dtype is dt.bool_:
            mask, mask_ref = cb.from_numpy(mask_host, dt.bool_), mask_host
        else:
            mask, mask_ref = held(cb, mask_host, dtype)
    out, lse = cb.attention(q, k, v, mask, is_causal, scale)
    out_ref, lse_ref = cpu.attention(q_h, k_h, v_h, mask_ref, is_causal, scale)
    check(cb, out, out_ref, dtype, scale=2.0)
    np.testing.assert_allclose(to_host(cb, lse), lse_ref, rtol=1e-4, atol=1e-4 if dtype is dt.float32 else 1e-2)

    g = rng(seed + 1)
    grad, grad_h = held(cb, g.standard_normal(out_ref.shape), dtype)
    out_h = to_host(cb, out)
    dq, dk, dv = cb.attention_backward(grad, q, k, v, out, lse, mask, is_causal, scale)
    refs = cpu.attention_backward(grad_h, q_h, k_h, v_h, out_h, to_host(cb, lse), mask_ref, is_causal, scale)
    length = max(k_shape[-2], 1)
    for got, ref in zip((dq, dk, dv), refs):
        check(cb, got, ref, dtype, scale=4.0 * math.sqrt(length))
    return (out, dq, dk, dv), refs


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize(
    "q_shape, k_shape, v_shape",
    [
        ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1)),
        ((2, 3, 7, 5), (2, 3, 9, 5), (2, 3, 9, 3)),  # L != S, Ev != E, odd sizes
        ((1, 4, 65, 32), (1, 4, 65, 32), (1, 4, 65, 32)),  # the small GPT's heads, a tile and one more
        ((2, 1, 33, 16), (1, 3, 40, 16), (1, 3, 40, 16)),  # broadcast batch dims
        ((3, 100, 64), (3, 130, 64), (3, 130, 64)),  # one batch dim
        ((2, 17, 130), (2, 17, 130), (2, 17, 33)),  # head dim over 128
    ],
)
@pytest.mark.parametrize("is_causal", (False, True))
def test_attention_matches_cpu(cb, dtype, q_shape, k_shape, v_shape, is_causal):
    check_attention(cb, dtype, q_shape, k_shape, v_shape, is_causal=is_causal)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("mask_shape", [(9, 11), (2, 1, 9, 11), (1, 3, 1, 11), (11,)])
def test_attention_bool_masks_match_cpu(cb, dtype, mask_shape):
    g = rng(41)
    mask = g.random(mask_shape) < 0.7
    check_attention(cb, dtype, (2, 3, 9, 8), (2, 3, 11, 8), (2, 3, 11, 8), mask, dt.bool_)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
def test_attention_additive_masks_match_cpu(cb, dtype):
    g = rng(42)
    mask = g.standard_normal((9, 11)) * 2
    mask[2, :] = -np.inf  # a row with nothing to attend to: zeros out, -inf lse
    mask[:, 4] = -np.inf
    check_attention(cb, dtype, (2, 3, 9, 8), (2, 3, 11, 8), (2, 3, 11, 8), mask, dtype)


def test_attention_fully_masked_rows_and_masked_keys_get_exactly_zero(cb):
    mask = np.ones((6, 40), bool)
    mask[1, :] = False  # query 1 attends to nothing
    mask[:, 35] = False  # key 35 is never attended to
    (out, dq, dk, dv), _ = check_attention(cb, dt.float32, (2, 6, 16), (2, 40, 16), (2, 40, 16), mask, dt.bool_)
    assert np.all(to_host(cb, out)[:, 1] == 0) and np.all(to_host(cb, dq)[:, 1] == 0)
    assert np.all(to_host(cb, dk)[:, 35] == 0) and np.all(to_host(cb, dv)[:, 35] == 0)


def test_attention_causal_with_more_queries_than_keys(cb):
    """Top-left aligned causal mask (query i sees keys j <= i): rows past the keys see all of them."""
    check_attention(cb, dt.float32, (1, 70, 8), (1, 20, 8), (1, 20, 8), is_causal=True)
    check_attention(cb, dt.float32, (1, 20, 8), (1, 70, 8), (1, 70, 8), is_causal=True)


def test_attention_long_sequence_and_custom_scale(cb):
    check_attention(cb, dt.float16, (1, 2, 1023, 64), (1, 2, 1023, 64), (1, 2, 1023, 64), is_causal=True, scale=0.3)


def test_attention_large_head_dims_use_more_shared_memory(cb):
    check_attention(cb, dt.float32, (1, 40, 512), (1, 50, 512), (1, 50, 256))


def test_attention_shape_errors(cb):
    q = cb.from_numpy(np.zeros((2, 4, 8), np.float32), dt.float32)
    k = cb.from_numpy(np.zeros((2, 5, 7), np.float32), dt.float32)
    with pytest.raises(ShapeError, match="do not fit"):
        cb.attention(q, k, k, None, False, 1.0)
    k = cb.from_numpy(np.zeros((3, 5, 8), np.float32), dt.float32)
    with pytest.raises(ShapeError, match="batch dims"):
        cb.attention(q, k, k, None, False, 1.0)
    k = cb.from_numpy(np.zeros((2, 5, 8), np.float32), dt.float32)
    bad_mask = cb.from_numpy(np.ones((4, 6), bool), dt.bool_)
    with pytest.raises(ShapeError, match="mask"):
        cb.attention(q, k, k, bad_mask, False, 1.0)


# =============================================================================================
# optimizers and loss scaling
def optimizer_tensors(cb, sizes, param_dtype, state_dtype, with_masters, seed=0):
    """(device lists, host lists) of params, grads, two state lists and masters."""
    g = rng(seed)
    device, host = {}, {}
    for name in ("params", "grads", "state1", "state2", "state3"):
        arrays = [g.standard_normal(s) * (0.1 if name.startswith("state") else 1.0) for s in sizes]
        if name == "state2":
            arrays = [np.abs(a) for a in arrays]  # second moments are non-negative
        dtype = param_dtype if name in ("params", "grads") else state_dtype
        pairs = [held(cb, a, dtype) for a in arrays]
        device[name] = [p[0] for p in pairs]
        host[name] = [p[1] for p in pairs]
    if with_masters:
        device["masters"] = [cb.astype(p, dt.float32) for p in device["params"]]
        host["masters"] = [p.astype(np.float32) for p in host["params"]]
    else:
        device["masters"] = host["masters"] = None
    return device, host


SIZES = [(1,), (7,), (33, 5), (65537,), (200003,)]


@pytest.mark.parametrize(
    "param_dtype, state_dtype, with_masters",
    [
        (dt.float32, dt.float32, False),
        (dt.float16, dt.float32, True),
        (dt.bfloat16, dt.float32, True),
        (dt.float16, dt.float16, False),
        (dt.float64, dt.float64, False),
    ],
    ids=str,
)
@pytest.mark.parametrize(
    "decoupled, amsgrad, weight_decay",
    [(False, False, 0.0), (False, True, 0.1), (True, False, 0.01), (True, True, 0.0)],
)
def test_adam_step_matches_cpu(cb, param_dtype, state_dtype, with_masters, decoupled, amsgrad, weight_decay):
    if param_dtype is dt.bfloat16 and not with_masters:
        pytest.skip("the CPU oracle has no bfloat16 state")
    device, host = optimizer_tensors(cb, SIZES, param_dtype, state_dtype, with_masters)
    maxes_device = device["state3"] if amsgrad else None
    maxes_host = host["state3"] if amsgrad else None
    for step in (1, 2, 3):
        args = (step, 1e-2, 0.9, 0.999, 1e-8, weight_decay, decoupled)
        cb.adam_step_(
            device["params"],
            device["grads"],
            device["state1"],
            device["state2"],
            *args,
            device["masters"],
            maxes_device,
        )
        cpu_params = [p.astype(np.float32) if param_dtype is dt.bfloat16 else p for p in host["params"]]
        cpu.adam_step_(cpu_params, host["grads"], host["state1"], host["state2"], *args, host["masters"], maxes_host)
        host["params"] = cpu_params
    for name in ("params", "state1", "state2") + (("masters",) if with_masters else ()):
        dtype = param_dtype if name == "params" else (dt.float32 if name == "masters" else state_dtype)
        for got, expected in zip(device[name], host[name]):
            check(cb, got, expected, dtype, scale=10.0)


@pytest.mark.parametrize(
    "param_dtype, with_masters",
    [(dt.float32, False), (dt.float16, True), (dt.float64, False), (dt.float16, False)],
    ids=str,
)
@pytest.mark.parametrize(
    "momentum, dampening, nesterov, weight_decay",
    [(0.0, 0.0, False, 0.0), (0.9, 0.0, False, 0.0), (0.9, 0.1, False, 1e-3), (0.9, 0.0, True, 1e-2)],
)
def test_sgd_step_matches_cpu(cb, param_dtype, with_masters, momentum, dampening, nesterov, weight_decay):
    state_dtype = dt.float32 if with_masters else param_dtype
    device, host = optimizer_tensors(cb, SIZES, param_dtype, state_dtype, with_masters, seed=1)
    for step in range(3):
        bufs_device = device["state1"] if momentum else None
        bufs_host = host["state1"] if momentum else None
        args = (0.05, momentum, dampening, nesterov, weight_decay, step == 0)
        cb.sgd_step_(device["params"], device["grads"], bufs_device, *args, masters=device["masters"])
        cpu.sgd_step_(host["params"], host["grads"], bufs_host, *args, masters=host["masters"])
    for got, expected in zip(device["params"], host["params"]):
        check(cb, got, expected, param_dtype, scale=10.0)
    if momentum:
        for got, expected in zip(device["state1"], host["state1"]):
            check(cb, got, expected, state_dtype, scale=10.0)


def test_adam_step_over_more_tensors_than_one_launch_table(cb):
    """60 tensors: more than one kernel argument table holds, so the call takes several launches."""
    sizes = [(n % 13 + 1, 3) for n in range(60)]
    device, host = optimizer_tensors(cb, sizes, dt.float32, dt.float32, False, seed=2)
    args = (1, 1e-3, 0.9, 0.999, 1e-8, 0.0, True)
    cb.adam_step_(device["params"], device["grads"], device["state1"], device["state2"], *args, None)
    cpu.adam_step_(host["params"], host["grads"], host["state1"], host["state2"], *args, None)
    for got, expected in zip(device["params"], host["params"]):
        check(cb, got, expected, dt.float32, scale=10.0)


@pytest.mark.parametrize("poison", (None, np.inf, -np.inf, np.nan))
@pytest.mark.parametrize("into_wider", (False, True))
def test_unscale_and_check_matches_cpu(cb, poison, into_wider):
    g = rng(3)
    grads_host = [g.standard_normal(s).astype(np.float16) * 100 for s in ((5,), (70000,), (3, 3))]
    if poison is not None:
        grads_host[1][12345] = poison
    cpu_outs = [np.empty(a.shape, np.float32) if into_wider else a.copy() for a in grads_host]
    cpu_found = cpu.unscale_and_check_(cpu_outs, [a.copy() for a in grads_host], np.array(1 / 1024, np.float32))
    grads = [cb.from_numpy(a, dt.float16) for a in grads_host]
    outs = [cb.empty(a.shape, dt.float32) for a in grads_host] if into_wider else grads
    inv_scale = cb.from_numpy(np.array(1 / 1024, np.float32), dt.float32)
    found = cb.unscale_and_check_(outs, grads, inv_scale)
    assert to_host(cb, found).shape == () and float(to_host(cb, found)) == float(cpu_found)
    for got, expected in zip(outs, cpu_outs):
        np.testing.assert_allclose(to_host(cb, got), expected, rtol=1e-3, equal_nan=True)


def test_unscale_and_check_with_nothing_to_check(cb):
    found = cb.unscale_and_check_([], [], cb.from_numpy(np.array(0.5, np.float32), dt.float32))
    assert float(to_host(cb, found)) == 0.0


def test_update_scale_follows_cpu_over_a_sequence(cb):
    """Growth after `growth_interval` clean steps, back-off on inf, clamped to [min, max], NaN counts."""
    scale = cb.from_numpy(np.array(1024.0, np.float32), dt.float32)
    tracker = cb.from_numpy(np.array(0, np.int32), dt.int32)
    cpu_scale, cpu_tracker = np.array(1024.0, np.float32), np.array(0, np.int32)
    for flag in (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, np.nan, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0):
        found = cb.from_numpy(np.array(flag, np.float32), dt.float32)
        cb.update_scale_(scale, tracker, found, 2.0, 0.5, 3, 1.0, 4096.0)
        cpu.update_scale_(cpu_scale, cpu_tracker, np.array(flag, np.float32), 2.0, 0.5, 3, 1.0, 4096.0)
        assert float(to_host(cb, scale)) == float(cpu_scale)
        assert int(to_host(cb, tracker)) == int(cpu_tracker)


# =============================================================================================
# through the Tensor API (autograd's fused backward paths) and end to end
def test_tensor_level_ops_match_cpu_forward_and_backward():
    import adcuda.nn.functional as F

    g = rng(50)
    x_host = g.standard_normal((4, 6, 32)).astype(np.float32)
    w_host = g.standard_normal((48, 32)).astype(np.float32)
    target_host = g.integers(0, 10, 24)

    def run(device):
        x = adcuda.tensor(x_host, device=device, requires_grad=True)
        w = adcuda.tensor(w_host, device=device, requires_grad=True)
        ln = F.layer_norm(x, (32,))
        h = ln @ w.mT
        q, k, v = h.split(16, dim=-1)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        logits = att.reshape(24, 16)[:, :10]
        loss = F.cross_entropy(logits, adcuda.tensor(target_host, device=device), label_smoothing=0.1)
        loss.backward()
        return loss.item(), x.grad.cpu().numpy(), w.grad.cpu().numpy()

    loss_cpu, dx_cpu, dw_cpu = run("cpu")
    loss_gpu, dx_gpu, dw_gpu = run("cuda")
    assert abs(loss_cpu - loss_gpu) < 1e-5
    np.testing.assert_allclose(dx_gpu, dx_cpu, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw_gpu, dw_cpu, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_train_digits_on_cuda_reaches_the_cpu_quality(tmp_path):
    from adcuda.train import TASKS, TrainConfig, train

    results = {}
    for device in ("cpu", "cuda"):
        config = TrainConfig(task="digits", out=str(tmp_path / device), epochs=1, device=device, quiet=True)
        results[device] = train(config, TASKS["digits"])
    assert results["cuda"]["test_accuracy"] >= results["cpu"]["test_accuracy"] - 0.03
    assert abs(results["cuda"]["test_loss"] - results["cpu"]["test_loss"]) < 0.1
