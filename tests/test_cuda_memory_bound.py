"""The memory-bound kernels' fast paths against the CPU backend, the oracle: each case below is chosen
to land on a given path of a kernel (named in its comment), and each fast path is also fed the layouts
that must leave it (misaligned pointers from offset views, row strides that are not a multiple of the
vector width, rows that are not a multiple of it), so that both sides of every alignment check run.
fp32, fp16 and bf16 (bf16's reference runs in fp32 on the bf16-rounded inputs); odd sizes (1, 7,
1023, 65537), empty arrays. Needs a usable CUDA device (or the emulator); skipped otherwise.

The kernels (see each file's head comment): broadcast elementwise rows (kernels/elementwise_loops.cuh),
vectorised column reductions (reduce.cu), the fused layer-norm backward (norm.cu), cross-entropy
from the logits and a per-row log-sum-exp (softmax_loss.cu), the per-dtype multi-tensor SGD/Adam
(optim.cu) and row gathers (index.cu).
"""

import numpy as np
import pytest
from cuda_arrays import assert_matches, held, host_dtype, to_host

import adcuda
from adcuda import dtypes as dt
from adcuda.backends import cpu

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

HALVES = (dt.float16, dt.bfloat16)
FLOATS = (dt.float32,) + HALVES
TOLERANCE = {dt.float64: (1e-10, 1e-12), dt.float32: (2e-5, 2e-6), dt.float16: (4e-3, 2e-3), dt.bfloat16: (2e-2, 1e-2)}


def held_at_offset(cb, x, dtype, offset=1):
    """``x`` as a contiguous view starting ``offset`` elements into a larger array: its data pointer is
    not 16-byte aligned, so the vectorised paths must not take it."""
    x = np.asarray(x)
    flat, flat_host = held(cb, np.concatenate([np.zeros(offset), x.ravel()]), dtype)
    view = cb.view(cb.slice(flat, (slice(offset, None),)), x.shape)
    assert view is not None
    return view, flat_host[offset:].reshape(x.shape)


def check(cb, got, expected, dtype, scale=1.0, rtol=None):
    tolerance = TOLERANCE.get(dtype)
    if tolerance is not None:
        tolerance = (tolerance[0] if rtol is None else rtol, tolerance[1] * scale)
    assert_matches(cb, got, expected, tolerance)


def sample(shape, seed, scale=2.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


# =============================================================================================
# broadcast elementwise: the vectorised row kernel
# (a's shape, b's shape): the output's innermost merged dim is a row of a multiple of 8 elements and
# every operand runs along it (stride 1) or is constant along it (stride 0)
ROW_CASES = [
    ((7, 16), (16,)),  # a bias row against (M, N)
    ((7, 16), (7, 1)),  # a column: one value per row
    ((16,), (7, 1)),  # a row and a column, neither the output's shape
    ((5, 3, 8), (3, 1)),  # a column repeated over an outer dim: two outer dims
    ((2, 3, 4, 8), (3, 1, 1)),  # a conv-style (C, 1, 1) bias, constant along rows of 32
    ((3, 1, 16), (4, 16)),  # both operands broadcast, both along the row
    ((1023, 32), ()),  # a 0-d array
    ((1, 8), (8,)),  # one row
    ((65537,), (1,)),  # one row with a tail, a 1-element array constant along it
    ((9, 8), (9, 8)),  # no broadcast at all
    ((2, 0, 8), (8,)),  # empty
]
# rows the vectorised kernel cannot take, which the strided loop does
STRIDED_CASES = [
    ((7, 12), (12,)),  # 12: a multiple of 4 (float32 vectors) but not of 8 (half vectors)
    ((33, 7), (7,)),  # rows of 7
    ((1023, 3), (1023, 1)),
    ((2, 1, 2, 1, 8), (3, 1, 5, 8)),  # four outer dims after merging: more than the rows kernel indexes
]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shapes", ROW_CASES + STRIDED_CASES, ids=str)
@pytest.mark.parametrize("op", ["add", "mul", "gt"])
def test_broadcast_binary_matches_cpu(cb, op, dtype, shapes):
    a, a_host = held(cb, sample(shapes[0], 1), dtype)
    b, b_host = held(cb, sample(shapes[1], 2), dtype)
    out_dtype = dt.bool_ if op == "gt" else dtype
    for x, y, x_host, y_host in ((a, b, a_host, b_host), (b, a, b_host, a_host)):
        check(cb, cb.binary(op, x, y, dtype), cpu.binary(op, x_host, y_host, host_dtype(dtype)), out_dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("misaligned", ["along the row", "constant along the row", "output-shaped"])
def test_broadcast_with_a_misaligned_operand(cb, dtype, misaligned):
    """An operand that runs along the rows must start 16-byte aligned for the vectorised kernel (else
    the strided loop runs); one that is constant along them may start anywhere."""
    m, n = 7, 32
    full_host, row_host, column_host = sample((m, n), 3), sample((n,), 4), sample((m, 1), 5)
    full, full_host = held(cb, full_host, dtype)
    row, row_host = (held_at_offset if misaligned == "along the row" else held)(cb, row_host, dtype)
    column, column_host = (held_at_offset if misaligned == "constant along the row" else held)(cb, column_host, dtype)
    if misaligned == "output-shaped":
        full, full_host = held_at_offset(cb, full_host, dtype, offset=3)
    for x, x_host in ((row, row_host), (column, column_host)):
        check(cb, cb.binary("sub", full, x, dtype), cpu.binary("sub", full_host, x_host, host_dtype(dtype)), dtype)
    check(
        cb,
        cb.where(cb.binary("gt", column, 0.0, dtype), full, row, dtype),
        cpu.where(column_host > 0, full_host, row_host, host_dtype(dtype)),
        dtype,
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("row_stride", [20, 24, 17])
def test_broadcast_rows_of_a_strided_view(cb, dtype, row_stride):
    """(7, 16) rows taken from a (7, row_stride) array: their stride is a multiple of the vector width
    (vectorised) or not (strided) depending on the dtype."""
    store, store_host = held(cb, sample((7, row_stride), 6), dtype)
    rows = cb.slice(store, (slice(None), slice(0, 16)))
    bias, bias_host = held(cb, sample((16,), 7), dtype)
    check(
        cb,
        cb.binary("add", rows, bias, dtype),
        cpu.binary("add", store_host[:, :16], bias_host, host_dtype(dtype)),
        dtype,
    )


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_three_operand_kernels_broadcast_along_rows(cb, dtype):
    """where and the fused unary backward: three operands, each a row, a column or full."""
    x, x_host = held(cb, sample((5, 3, 16), 8), dtype)
    g, g_host = held(cb, sample((16,), 9), dtype)
    check(cb, cb.unary_backward("gelu", x, None, g), cpu.unary_backward("gelu", x_host, None, g_host), dtype, scale=4.0)
    cond_host = sample((3, 1), 10) > 0
    cond = cb.from_numpy(cond_host, dt.bool_)
    check(cb, cb.where(cond, x, g, dtype), cpu.where(cond_host, x_host, g_host, host_dtype(dtype)), dtype)
    check(cb, cb.where(cond, 1.5, x, dtype), cpu.where(cond_host, 1.5, x_host, host_dtype(dtype)), dtype)


# =============================================================================================
# column reductions: outputs one contiguous run, 16 bytes of them per lane
# (shape, axes): the kept dims merge into one run of a multiple of 8 elements (vectorised), or not
COLUMN_CASES = [
    ((1, 8), (0,)),
    ((7, 16), (0,)),
    ((1023, 64), (0,)),
    ((65537, 8), (0,)),  # few outputs: the rows are split over many blocks, then combined
    ((3, 5, 32), (0, 1)),  # a (B, T, C) bias gradient
    ((6, 4, 16), (0,)),  # kept dims (4, 16) merge into one run of 64
    ((33, 12), (0,)),  # float32: vectorised; half types: 12 is not a multiple of 8
    ((33, 7), (0,)),  # the scalar column layout
    ((0, 16), (0,)),  # nothing to reduce
]


def check_sum(cb, got, x_host, axes, dtype, keepdim=False, mean=False):
    """A sum (or mean) over ``axes`` against float64, within fp32 accumulation error (a few ulp of the
    sum of magnitudes, whatever the order of additions) plus the result's rounding to ``dtype``."""
    x = np.asarray(x_host, np.float64)
    count = max(int(np.prod([x.shape[d] for d in axes])), 1)
    expected = np.sum(x, axis=axes, keepdims=keepdim) / (count if mean else 1)
    bound = 4 * np.finfo(np.float32).eps * np.sum(np.abs(x), axis=axes, keepdims=keepdim) / (count if mean else 1)
    got_host = to_host(cb, got).astype(np.float64)
    assert got_host.shape == expected.shape
    error = np.abs(got_host - expected)
    assert np.all(error <= bound + TOLERANCE[dtype][0] * np.abs(expected) + 1e-30), np.max(error - bound)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("case", COLUMN_CASES, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_column_reductions_match_cpu(cb, op, dtype, case):
    shape, axes = case
    if op != "sum" and 0 in shape:
        pytest.skip("no identity / a mean of nothing: covered by test_cuda_parity")
    a, a_host = held(cb, sample(shape, 11), dtype)
    for keepdim in (False, True):
        got = cb.reduce(op, a, axes, keepdim)
        if op in ("sum", "mean"):
            check_sum(cb, got, a_host, axes, dtype, keepdim, mean=op == "mean")
        else:  # exact: no rounding anywhere
            check(cb, got, cpu.reduce(op, a_host, axes, keepdim), dtype, rtol=0)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_column_variance_matches_cpu(cb, dtype):
    a, a_host = held(cb, sample((1023, 24), 12), dtype)
    check(cb, cb.var(a, (0,), 1, False), cpu.var(a_host, (0,), 1, False), dtype, scale=4.0)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("layout", ["every other row", "a column slice", "a misaligned start", "a transposed view"])
def test_column_sums_of_views(cb, dtype, layout):
    """Row strides that are a multiple of the vector width keep the vectorised kernel; a misaligned
    start takes the scalar column layout; a transposed view reduces along contiguous rows instead."""
    x = sample((301, 48), 13)
    if layout == "every other row":
        store, store_host = held(cb, np.repeat(x, 2, axis=0), dtype)
        a, a_host = cb.slice(store, (slice(None, None, 2),)), store_host[::2]
    elif layout == "a column slice":
        store, store_host = held(cb, np.concatenate([x, x[:, :8]], axis=1), dtype)
        a, a_host = cb.slice(store, (slice(None), slice(0, 48))), store_host[:, :48]
    elif layout == "a misaligned start":
        a, a_host = held_at_offset(cb, x, dtype)
    else:
        store, store_host = held(cb, np.ascontiguousarray(x.T), dtype)
        a, a_host = cb.permute(store, (1, 0)), store_host.T
    check_sum(cb, cb.reduce("sum", a, (0,), False), a_host, (0,), dtype)


def test_column_sums_are_deterministic(cb):
    """Split over blocks, combined in a fixed order: the same bits on every run."""
    a, _ = held(cb, sample((65537, 16), 14), dt.float32)
    first = to_host(cb, cb.reduce("sum", a, (0,), False))
    second = to_host(cb, cb.reduce("sum", a, (0,), False))
    np.testing.assert_array_equal(first, second)


# =============================================================================================
# layer-norm backward: one pass for dx and the blocks' parameter-gradient partials (rows of up to
# 8192 elements), the separate dx and column kernels beyond
LAYER_NORM_SHAPES = [
    (1, 7),  # rows of 7: element by element
    (7, 1023),
    (3, 8),  # one pack per thread in half, two in float32
    (1023, 64),
    (4500, 8),  # more row groups than blocks (264 on the emulator): blocks take two steps
    (2, 8192),  # the longest fused row: 512 threads x 16 elements
    (2, 8200),  # past it: the separate kernels
]


def layer_norm_backward_case(cb, shape, dtype, affine, misaligned=False, seed=15):
    x, x_host = held(cb, sample(shape, seed) + 0.5, dtype)
    weight = weight_host = None
    if affine:
        weight, weight_host = held(cb, sample(shape[-1:], seed + 1), dtype)
    _, mean, rstd = cb.layer_norm(x, weight, None, 1, 1e-5)
    g, g_host = (held_at_offset if misaligned else held)(cb, sample(shape, seed + 2), dtype)
    got = cb.layer_norm_backward(g, x, weight, mean, rstd, 1)
    expected = cpu.layer_norm_backward(g_host, x_host, weight_host, to_host(cb, mean), to_host(cb, rstd), 1)
    return got, expected


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape", LAYER_NORM_SHAPES, ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["weight", "no weight"])
def test_layer_norm_backward_matches_cpu(cb, shape, dtype, affine):
    (dx, dweight, dbias), (dx_ref, dweight_ref, dbias_ref) = layer_norm_backward_case(cb, shape, dtype, affine)
    rows = shape[0]
    check(cb, dx, dx_ref, dtype, scale=8.0)
    check(cb, dbias, dbias_ref, dtype, scale=2.0 * np.sqrt(rows))
    assert (dweight is None) == (not affine)
    if affine:
        check(cb, dweight, dweight_ref, dtype, scale=4.0 * np.sqrt(rows))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_layer_norm_backward_with_a_misaligned_gradient(cb, dtype):
    """A gradient that starts off a 16-byte boundary: the fused kernel walks its rows one element at a
    time instead of in packs."""
    (dx, dweight, dbias), (dx_ref, dweight_ref, dbias_ref) = layer_norm_backward_case(
        cb, (33, 64), dtype, True, misaligned=True
    )
    check(cb, dx, dx_ref, dtype, scale=8.0)
    check(cb, dweight, dweight_ref, dtype, scale=24.0)
    check(cb, dbias, dbias_ref, dtype, scale=12.0)


def test_layer_norm_backward_is_deterministic(cb):
    first, _ = layer_norm_backward_case(cb, (4500, 24), dt.float32, True)
    second, _ = layer_norm_backward_case(cb, (4500, 24), dt.float32, True)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(to_host(cb, a), to_host(cb, b))


# =============================================================================================
# the fused classifier: losses from one read of the logits in their dtype and two statistics per row
# (no log-probabilities stored, no float32 copy of half logits); the gradient in the logits' dtype
def classifier_case(cb, logits, logits_host, target_host, ignore_index, label_smoothing, dtype, weight_host=None):
    n = target_host.shape[0]
    target = cb.from_numpy(target_host, dt.int64)
    wide = dt.float32
    weight = None if weight_host is None else cb.from_numpy(weight_host, wide)
    losses, stats = cb.classifier_loss(logits, target, weight, ignore_index, label_smoothing)
    ref_losses, ref_stats = cpu.classifier_loss(logits_host, target_host, weight_host, ignore_index, label_smoothing)
    assert cb.dtype_of(stats) is wide and to_host(cb, stats).shape == (n, 2) and cb.dtype_of(losses) is wide
    check(cb, stats, ref_stats, wide, scale=8.0)
    check(cb, losses, ref_losses, wide, scale=8.0)
    g_rows, g_rows_host = held(cb, sample((n,), 16), wide)
    grad = cb.classifier_loss_backward(logits, stats, target, weight, g_rows, ignore_index, label_smoothing)
    ref = cpu.classifier_loss_backward(
        logits_host, to_host(cb, stats), target_host, weight_host, g_rows_host, ignore_index, label_smoothing
    )
    assert cb.dtype_of(grad) is dtype
    check(cb, grad, ref, dtype, scale=2.0)
    ignored = target_host == ignore_index
    assert np.all(to_host(cb, losses)[ignored] == 0) and np.all(to_host(cb, grad)[ignored] == 0)
    return stats


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n, c", [(1, 7), (7, 1023), (3, 50257), (33, 4096)], ids=str)
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "class weights"])
def test_classifier_from_logits_and_statistics(cb, dtype, n, c, label_smoothing, weighted):
    """50257 classes (GPT-2's vocabulary): odd rows, so every row but the first starts off a 16-byte
    boundary (a scalar head before the packs), and 3 rows are split into chunks over many blocks."""
    logits, logits_host = held(cb, sample((n, c), 17), dtype)
    target_host = np.random.default_rng(18).integers(0, c, n).astype(np.int64)
    target_host[1::4] = -100
    weight_host = np.random.default_rng(19).uniform(0.25, 2.0, c).astype(np.float32) if weighted else None
    classifier_case(cb, logits, logits_host, target_host, -100, label_smoothing, dtype, weight_host)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_classifier_from_misaligned_logits(cb, dtype):
    """Logits that start off a 16-byte boundary: the backward cannot pair its packs with the freshly
    allocated gradient's, and walks element by element."""
    logits, logits_host = held_at_offset(cb, sample((5, 4099), 19), dtype)
    target_host = np.array([0, 4098, 17, -100, 2048], np.int64)
    classifier_case(cb, logits, logits_host, target_host, -100, 0.1, dtype)


@pytest.mark.parametrize("chunked", [False, True], ids=["one block per row", "chunked rows"])
def test_classifier_rows_with_inf_and_nan(cb, chunked):
    """A row holding a NaN or +inf, or only -inf, has a NaN log-sum (shift 0), so NaN losses and
    gradients, as PyTorch's; -inf logits among finite ones add nothing."""
    c = 9000 if chunked else 40
    x = sample((5, c), 20)
    x[0, 3] = np.nan
    x[1, c - 1] = np.inf
    x[2, : c // 2] = -np.inf
    x[3, :] = -np.inf
    logits, logits_host = held(cb, x, dt.float32)
    target_host = np.array([1, 2, 3 * c // 4, 0, -100], np.int64)
    for label_smoothing in (0.0, 0.2):
        stats = to_host(cb, classifier_case(cb, logits, logits_host, target_host, -100, label_smoothing, dt.float32))
    shift, log_sum = stats.T
    assert np.isnan(log_sum[0]) and np.isnan(log_sum[1]) and np.isfinite(log_sum[2]) and np.isnan(log_sum[3])
    assert shift[0] == shift[1] == shift[3] == 0 and shift[2] == np.float32(x[2].max())


def test_classifier_keeps_large_logits_apart_from_their_shift(cb):
    """Logits around 1e8: the shift and the log-sum stay apart, so the loss keeps log(3) where
    lse = m + log_sum would round it away in float32."""
    x = np.array([[1e8, 1e8, 1e8 - 64.0, 1e8]], np.float32)
    logits, logits_host = held(cb, x, dt.float32)
    target_host = np.array([2], np.int64)
    losses, _ = cb.classifier_loss(logits, cb.from_numpy(target_host, dt.int64), None, -100, 0.0)
    expected = cpu.classifier_loss(logits_host, target_host, None, -100, 0.0)[0]
    assert abs(float(to_host(cb, losses)[0]) - 64.0 - np.log(3.0)) < 1e-3
    check(cb, losses, expected, dt.float32)


def test_classifier_float64_keeps_float64_statistics(cb):
    logits, logits_host = held(cb, sample((4, 33), 21), dt.float64)
    target_host = np.array([0, 32, 5, 7], np.int64)
    losses, stats = cb.classifier_loss(logits, cb.from_numpy(target_host, dt.int64), None, -100, 0.0)
    assert cb.dtype_of(stats) is dt.float64 and cb.dtype_of(losses) is dt.float64
    ref_losses, ref_stats = cpu.classifier_loss(logits_host, target_host, None, -100, 0.0)
    check(cb, stats, ref_stats, dt.float64)
    check(cb, losses, ref_losses, dt.float64)


# =============================================================================================
# multi-tensor SGD and Adam: one kernel per dtype combination, 16 bytes per load where aligned
OPTIMIZER_SIZES = [(1,), (7,), (1023,), (65537,)]  # 65537: a chunk of 65536 and one more element


def optimizer_state(cb, param_dtype, grad_dtype, state_dtype, master_dtype, misaligned=False, seed=22):
    """(device, host) dicts of params, grads, three state lists and masters (None without)."""
    rng = np.random.default_rng(seed)
    make = held_at_offset if misaligned else held
    device, host = {}, {}
    for name, dtype in (
        ("params", param_dtype),
        ("grads", grad_dtype),
        ("m", state_dtype),
        ("v", state_dtype),
        ("vmax", state_dtype),
    ):
        values = [rng.standard_normal(s) * (0.1 if name in ("m", "v", "vmax") else 1.0) for s in OPTIMIZER_SIZES]
        if name in ("v", "vmax"):
            values = [np.abs(v) for v in values]
        pairs = [make(cb, v, dtype) for v in values]
        device[name], host[name] = [p[0] for p in pairs], [p[1] for p in pairs]
    if master_dtype is None:
        device["masters"] = host["masters"] = None
    else:
        pairs = [make(cb, p.astype(np.float64), master_dtype) for p in host["params"]]
        device["masters"], host["masters"] = [p[0] for p in pairs], [p[1] for p in pairs]
    return device, host


def check_optimizer_lists(cb, device, host, names, dtypes):
    if dtypes.get("masters") is dt.float64 and dtypes["m"] is dt.float32:
        # NumPy multiplies the float32 state by a Python float in float32 before the float64 sums: the
        # float64 master carries float32 rounding
        dtypes = {**dtypes, "masters": dt.float32}
    for name in names:
        for got, expected in zip(device[name], host[name]):
            check(cb, got, expected, dtypes[name], scale=10.0)


# (param, grad, state, master): the compiled combinations, and ones that go through fp32/fp64 copies
STEP_COMBINATIONS = [
    (dt.float32, dt.float32, dt.float32, None),
    (dt.float16, dt.float16, dt.float16, None),
    (dt.float16, dt.float16, dt.float32, dt.float32),
    (dt.float64, dt.float64, dt.float64, None),
    (dt.float32, dt.float16, dt.float32, None),  # a gradient in another dtype: copies
    (dt.float16, dt.float16, dt.float32, None),  # fp32 state for a half parameter without a master
    (dt.float32, dt.float32, dt.float32, dt.float32),  # a float32 master of a float32 parameter
    (dt.float32, dt.float64, dt.float32, dt.float64),  # a float64 master: float64 math
]


@pytest.mark.parametrize("dtypes", STEP_COMBINATIONS, ids=str)
@pytest.mark.parametrize("misaligned", [False, True], ids=["aligned", "misaligned"])
@pytest.mark.parametrize("amsgrad", [False, True], ids=["adam", "amsgrad"])
def test_adam_step_per_dtype_combination(cb, dtypes, misaligned, amsgrad):
    param_dtype, grad_dtype, state_dtype, master_dtype = dtypes
    device, host = optimizer_state(cb, *dtypes, misaligned=misaligned)
    for step in (1, 2):
        args = (step, 1e-2, 0.9, 0.999, 1e-8, 0.01, True)
        cb.adam_step_(
            device["params"],
            device["grads"],
            device["m"],
            device["v"],
            *args,
            device["masters"],
            device["vmax"] if amsgrad else None,
        )
        cpu.adam_step_(
            host["params"],
            host["grads"],
            host["m"],
            host["v"],
            *args,
            host["masters"],
            host["vmax"] if amsgrad else None,
        )
    names = ("params", "m", "v") + (("masters",) if master_dtype else ()) + (("vmax",) if amsgrad else ())
    check_optimizer_lists(
        cb,
        device,
        host,
        names,
        {"params": param_dtype, "m": state_dtype, "v": state_dtype, "vmax": state_dtype, "masters": master_dtype},
    )


@pytest.mark.parametrize("dtypes", STEP_COMBINATIONS, ids=str)
@pytest.mark.parametrize("misaligned", [False, True], ids=["aligned", "misaligned"])
def test_sgd_step_per_dtype_combination(cb, dtypes, misaligned):
    param_dtype, grad_dtype, state_dtype, master_dtype = dtypes
    device, host = optimizer_state(cb, *dtypes, misaligned=misaligned, seed=23)
    for step in range(2):
        args = (0.05, 0.9, 0.1, True, 1e-3, step == 0)
        cb.sgd_step_(device["params"], device["grads"], device["m"], *args, masters=device["masters"])
        cpu.sgd_step_(host["params"], host["grads"], host["m"], *args, masters=host["masters"])
    names = ("params", "m") + (("masters",) if master_dtype else ())
    check_optimizer_lists(cb, device, host, names, {"params": param_dtype, "m": state_dtype, "masters": master_dtype})


def test_adam_step_mixes_combinations_in_one_call(cb):
    """A call whose tensors differ in dtype: each group takes its own kernel, all in one call."""
    device32, host32 = optimizer_state(cb, dt.float32, dt.float32, dt.float32, None, seed=24)
    device16, host16 = optimizer_state(cb, dt.float16, dt.float16, dt.float16, None, seed=25)
    device = {k: device32[k] + device16[k] for k in ("params", "grads", "m", "v")}
    host = {k: host32[k] + host16[k] for k in ("params", "grads", "m", "v")}
    args = (3, 1e-3, 0.9, 0.999, 1e-8, 0.0, False)
    cb.adam_step_(device["params"], device["grads"], device["m"], device["v"], *args, None)
    cpu.adam_step_(host["params"], host["grads"], host["m"], host["v"], *args, None)
    for i, (got, expected) in enumerate(zip(device["params"], host["params"])):
        check(cb, got, expected, dt.float32 if i < len(OPTIMIZER_SIZES) else dt.float16, scale=10.0)


# =============================================================================================
# row gathers: each result row located once, contiguous rows moved in 16/8/4/2-byte units
GATHER_DTYPES = (dt.float32, dt.float16, dt.int64, dt.bool_)


def gather_input(cb, shape, dtype, seed, misaligned=False):
    values = np.random.default_rng(seed).standard_normal(shape) * 4
    if dtype is dt.bool_:
        values = values > 0
    elif dtype.category == dt.INTEGER:
        values = values.astype(np.int64)
    return (held_at_offset if misaligned else held)(cb, values, dtype)


def device_indices(cb, values):
    values = np.asarray(values, np.int64)
    return cb.from_numpy(values, dt.int64), values


@pytest.mark.parametrize("dtype", GATHER_DTYPES, ids=str)
@pytest.mark.parametrize("width", [1, 3, 8, 1023, 1024])
@pytest.mark.parametrize("misaligned", [False, True], ids=["aligned", "misaligned"])
def test_index_rows_on_the_leading_dim(cb, dtype, width, misaligned):
    """a[idx] on (rows, width): rows move in the widest unit the row length and the start allow (16
    bytes for 1024 float32s; single elements for 3, or for any misaligned start); negative indices
    and repeats."""
    a, a_host = gather_input(cb, (37, width), dtype, 26, misaligned)
    idx, idx_host = device_indices(cb, [0, 36, -1, 5, 5, -37, 20])
    check(cb, cb.index(a, (idx,)), cpu.index(a_host, (idx_host,)), dtype)


@pytest.mark.parametrize("dtype", GATHER_DTYPES, ids=str)
def test_index_rows_inside_a_tensor(cb, dtype):
    """Indexing a middle dim of (4, 9, 16): rows of 16 under two outer dims; two index arrays; a 0-d
    result; a strided view's rows (element by element)."""
    a, a_host = gather_input(cb, (4, 9, 16), dtype, 27)
    idx, idx_host = device_indices(cb, [[8, 0], [3, -2]])
    check(cb, cb.index(a, (slice(None), idx)), cpu.index(a_host, (slice(None), idx_host)), dtype)
    first, first_host = device_indices(cb, [3, 0, 1])
    second, second_host = device_indices(cb, [8, -1, 0])
    check(cb, cb.index(a, (first, second)), cpu.index(a_host, (first_host, second_host)), dtype)
    one, one_host = device_indices(cb, 2)
    check(cb, cb.index(a, (1, one, 7)), cpu.index(a_host, (1, one_host, 7)), dtype)
    view = cb.slice(a, (slice(None), slice(None), slice(None, None, 3)))
    check(cb, cb.index(view, (slice(None), idx)), cpu.index(a_host[:, :, ::3], (slice(None), idx_host)), dtype)


@pytest.mark.parametrize("dtype", GATHER_DTYPES, ids=str)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_along_an_axis(cb, dtype, axis):
    """PyTorch's gather: along the last dim every element of a row reads its own index (the row is
    located once); along dim 0 rows of the index pick elements of the input's columns."""
    a, a_host = gather_input(cb, (7, 1023), dtype, 28)
    axis_size = a_host.shape[axis]
    idx_host = np.random.default_rng(29).integers(-axis_size, axis_size, (5, 33))
    idx_host = np.where(idx_host < 0, idx_host + axis_size, idx_host)  # gather takes no negative index
    idx = cb.from_numpy(idx_host, dt.int64)
    check(cb, cb.gather(a, axis % 2, idx), cpu.gather(a_host, axis % 2, idx_host), dtype)
