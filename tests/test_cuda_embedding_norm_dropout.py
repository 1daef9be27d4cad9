"""GPU parity tests of the embedding kernels (kernels/embedding.cu), the global gradient norm
(kernels/optim.cu) and fused dropout (kernels/random.cu) against the CPU backend, the oracle, in fp32,
fp16 and bf16 (fp64 where the CPU keeps it), on odd sizes (1, 7, 1023, 65537 rows), repeated indices,
padding_idx, strided and offset (unaligned) inputs, 0-d and empty arrays; then through the ops
(F.embedding, F.dropout, clip_grad_norm_). Everything here needs a usable CUDA device and is skipped
without one.

Where the kernels do the CPU's arithmetic in the CPU's order the comparison is bit for bit: the
embedding gather; the embedding backward, whose runs are summed in index order in fp32 exactly as
np.add.at does; dropout's x * scale. bfloat16 has no NumPy type: its references are computed in fp32
from the bf16-held inputs and rounded to bf16 on the device. The dropout mask is compared with the CUDA
backend's own bernoulli draw (the two backends' Philox streams differ by design).
"""

import math

import numpy as np
import pytest
from cuda_arrays import held, to_device, to_host

import adcuda
import adcuda.nn.functional as F
from adcuda import dtypes as dt
from adcuda import nn
from adcuda.backends import cpu
from adcuda.errors import DTypeError, IndexOutOfRangeError, ShapeError

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

FLOAT_TYPES = (dt.float32, dt.float16, dt.bfloat16)
ALL_FLOAT_TYPES = FLOAT_TYPES + (dt.float64,)


def rounded(cb, reference, dtype):
    """An fp32/fp64 host reference as the device would store it in ``dtype`` (bf16 rounding on the device)."""
    return to_host(cb, to_device(cb, reference, dtype))


def rng(seed=0):
    return np.random.default_rng(seed)


def assert_same(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    np.testing.assert_array_equal(got, expected)


# =============================================================================================
# embedding forward
@pytest.mark.parametrize("dtype", ALL_FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("index_dtype", (dt.int64, dt.int32), ids=str)
@pytest.mark.parametrize(
    "num_embeddings, dim, index_shape",
    [
        (1, 1, (5,)),
        (7, 3, (2, 9)),
        (1023, 64, (31, 33)),
        (65537, 8, (70000,)),
        (7, 300, ()),
        (5, 2, (0,)),
        (9, 7, (3, 0, 2)),
    ],
)
def test_embedding_matches_cpu(cb, dtype, index_dtype, num_embeddings, dim, index_shape):
    g = rng(num_embeddings + dim)
    weight, weight_host = held(cb, g.standard_normal((num_embeddings, dim)), dtype)
    idx_host = g.integers(0, num_embeddings, index_shape)
    idx = cb.from_numpy(idx_host, index_dtype)
    got = cb.embedding(weight, idx)
    assert cb.dtype_of(got) is dtype
    assert_same(to_host(cb, got), cpu.embedding(weight_host, idx_host))


@pytest.mark.parametrize("dtype", (dt.float32, dt.float16), ids=str)
def test_embedding_reads_strided_and_unaligned_weights(cb, dtype):
    """Rows of a wider table (row stride 37 elements) starting at an odd column, and a transposed
    table (its rows are not contiguous: copied first): every move width from 2 bytes up."""
    g = rng(1)
    big, big_host = held(cb, g.standard_normal((50, 37)), dtype)
    idx_host = g.integers(0, 50, (6, 11))
    idx = cb.from_numpy(idx_host, dt.int64)
    for columns in (slice(0, 32), slice(1, 9), slice(3, 4), slice(0, 37)):
        view = cb.slice(big, (slice(None), columns))
        assert_same(to_host(cb, cb.embedding(view, idx)), cpu.embedding(big_host[:, columns], idx_host))
    rows = cb.slice(big, (slice(1, None, 2), slice(None)))
    assert_same(
        to_host(cb, cb.embedding(rows, cb.from_numpy(idx_host % 25, dt.int64))),
        cpu.embedding(big_host[1::2], idx_host % 25),
    )
    transposed = cb.permute(big, (1, 0))
    assert_same(
        to_host(cb, cb.embedding(transposed, cb.from_numpy(idx_host % 37, dt.int64))),
        cpu.embedding(big_host.T, idx_host % 37),
    )


@pytest.mark.parametrize("bad", (-1, 7, 1 << 40))
def test_embedding_out_of_range_raises_like_the_cpu(cb, bad):
    weight = cb.from_numpy(np.zeros((7, 4), np.float32), dt.float32)
    idx_host = np.array([[0, 6, 3], [2, bad, 5]])
    # found on the device, raised at the next synchronising call
    with pytest.raises(IndexOutOfRangeError, match=rf"embedding: index {bad} is out of range for num_embeddings=7"):
        to_host(cb, cb.embedding(weight, cb.from_numpy(idx_host, dt.int64)))
    with pytest.raises(IndexOutOfRangeError, match=rf"embedding: index {bad} "):
        cpu.embedding(np.zeros((7, 4), np.float32), idx_host)
    # every index bad (and an empty table): one of them is named
    with pytest.raises(IndexOutOfRangeError, match="num_embeddings=0"):
        to_host(
            cb,
            cb.embedding(
                cb.from_numpy(np.zeros((0, 4), np.float32), dt.float32), cb.from_numpy(np.arange(70000), dt.int64)
            ),
        )
    # the device is fine afterwards
    ok = cb.embedding(weight, cb.from_numpy(np.array([1, 2]), dt.int64))
    assert_same(to_host(cb, ok), np.zeros((2, 4), np.float32))


def test_embedding_rejects_bad_arguments(cb):
    weight = cb.from_numpy(np.zeros((3, 2), np.float32), dt.float32)
    with pytest.raises(DTypeError, match="integers"):
        cb.embedding(weight, cb.from_numpy(np.zeros(2, np.float32), dt.float32))
    with pytest.raises(ShapeError, match="2-D"):
        cb.embedding(cb.from_numpy(np.zeros(3, np.float32), dt.float32), cb.from_numpy(np.zeros(1, np.int64), dt.int64))


# =============================================================================================
# embedding backward
def backward_case(cb, dtype, num_embeddings, index_shape, dim, seed, index_high=None):
    g = rng(seed)
    idx_host = g.integers(0, index_high or num_embeddings, index_shape)
    # mixed magnitudes: a different summation order would change the last bits
    grad_values = g.standard_normal(index_shape + (dim,)) * 10.0 ** g.integers(-2, 3, index_shape + (dim,))
    grad, grad_host = held(cb, grad_values, dtype)
    return grad, grad_host, idx_host


def check_backward(
    cb, dtype, grad, grad_host, idx_host, num_embeddings, padding_idx, scale_grad_by_freq, index_dtype=dt.int64
):
    idx = cb.from_numpy(idx_host, index_dtype)
    got = cb.embedding_backward(grad, idx, num_embeddings, padding_idx, scale_grad_by_freq)
    assert cb.dtype_of(got) is dtype
    expected = cpu.embedding_backward(grad_host, idx_host, num_embeddings, padding_idx, scale_grad_by_freq)
    assert_same(to_host(cb, got), rounded(cb, expected, dtype) if dtype is dt.bfloat16 else expected)
    again = cb.embedding_backward(grad, idx, num_embeddings, padding_idx, scale_grad_by_freq)
    assert_same(to_host(cb, again), to_host(cb, got))  # deterministic, bit for bit


@pytest.mark.parametrize("dtype", ALL_FLOAT_TYPES, ids=str)
@pytest.mark.parametrize(
    "num_embeddings, index_shape, dim, index_high",
    [
        (1, (7,), 5, None),  # one row, every index on it
        (7, (1023,), 3, None),  # long runs of repeats
        (1023, (40, 51), 130, None),  # more than one column tile (128 per warp pass)
        (65537, (70001,), 4, None),  # most rows once or twice, many never
        (65537, (3000,), 9, 40),  # a big table, few rows used many times
    ],
)
@pytest.mark.parametrize("padding_idx, scale_grad_by_freq", [(None, False), (0, False), (None, True), (2, True)])
def test_embedding_backward_matches_cpu_bit_for_bit(
    cb, dtype, num_embeddings, index_shape, dim, index_high, padding_idx, scale_grad_by_freq
):
    if padding_idx is not None and padding_idx >= num_embeddings:
        pytest.skip("padding_idx outside the table")
    grad, grad_host, idx_host = backward_case(
        cb, dtype, num_embeddings, index_shape, dim, seed=num_embeddings + dim, index_high=index_high
    )
    check_backward(cb, dtype, grad, grad_host, idx_host, num_embeddings, padding_idx, scale_grad_by_freq)


def test_embedding_backward_int32_indices_and_one_long_run(cb):
    """65537 gradient rows all adding into one weight row: a single warp walks the whole run in order."""
    grad, grad_host, _ = backward_case(cb, dt.float32, 3, (65537,), 33, seed=4)
    idx_host = np.full(65537, 1)
    check_backward(cb, dt.float32, grad, grad_host, idx_host, 3, None, False, index_dtype=dt.int32)
    check_backward(cb, dt.float32, grad, grad_host, idx_host, 3, None, True, index_dtype=dt.int32)
    check_backward(cb, dt.float32, grad, grad_host, idx_host, 3, 1, False, index_dtype=dt.int32)


@pytest.mark.parametrize("dtype", FLOAT_TYPES, ids=str)
def test_embedding_backward_empty_and_degenerate(cb, dtype):
    no_indices = cb.from_numpy(np.zeros(0, np.int64), dt.int64)
    empty = cb.embedding_backward(to_device(cb, np.zeros((0, 6)), dtype), no_indices, 5, None, True)
    assert_same(to_host(cb, empty), np.zeros((5, 6), np.float32 if dtype is dt.bfloat16 else dtype.numpy))
    zeros = cb.from_numpy(np.zeros(3, np.int64), dt.int64)
    no_rows = cb.embedding_backward(to_device(cb, np.ones((3, 6)), dtype), zeros, 0, None, False)
    assert cb.shape_of(no_rows) == (0, 6)
    no_columns = cb.embedding_backward(
        to_device(cb, np.ones((3, 0)), dtype), cb.from_numpy(np.zeros(3, np.int64), dt.int64), 4, None, False
    )
    assert cb.shape_of(no_columns) == (4, 0)
    grad, grad_host, idx_host = backward_case(cb, dtype, 7, (), 5, seed=6)  # 0-d indices
    check_backward(cb, dtype, grad, grad_host, idx_host, 7, None, False)


def test_embedding_backward_takes_strided_grads_and_rejects_bad_ones(cb):
    g = rng(7)
    grad_store, grad_store_host = held(cb, g.standard_normal((9, 4, 6)), dt.float32)
    grad = cb.permute(grad_store, (1, 0, 2))  # not contiguous: copied first
    idx_host = g.integers(0, 5, (4, 9))
    got = cb.embedding_backward(grad, cb.from_numpy(idx_host, dt.int64), 5, None, False)
    assert_same(
        to_host(cb, got), cpu.embedding_backward(np.transpose(grad_store_host, (1, 0, 2)), idx_host, 5, None, False)
    )
    with pytest.raises(ShapeError, match="embedding_backward"):
        cb.embedding_backward(grad, cb.from_numpy(np.zeros(4, np.int64), dt.int64), 5, None, False)
    with pytest.raises(DTypeError, match="floating"):
        cb.embedding_backward(
            cb.from_numpy(np.zeros((2, 3), np.int64), dt.int64),
            cb.from_numpy(np.zeros(2, np.int64), dt.int64),
            5,
            None,
            False,
        )


# =============================================================================================
# global norm
NORM_TYPES = (2.0, 1.0, math.inf, 3.0, 0.5)
NORM_TOLERANCE = {dt.float64: 1e-12, dt.float32: 2e-5, dt.float16: 2e-5, dt.bfloat16: 2e-5}
NORM_SHAPES = [(1,), (7,), (1023,), (65537,), (), (0,), (3, 5), (2 * 65536 + 7,)]


def norm_arrays(cb, dtypes, seed=0, shapes=NORM_SHAPES):
    g = rng(seed)
    pairs = [held(cb, g.standard_normal(s) * 3, dtypes[i % len(dtypes)]) for i, s in enumerate(shapes)]
    return [d for d, _ in pairs], [h for _, h in pairs]


def check_norm(cb, arrays, hosts, p, tolerance):
    got = cb.global_norm(arrays, p)
    expected = cpu.global_norm(hosts, p)
    assert cb.shape_of(got) == () and cb.dtype_of(got).numpy == expected.dtype
    np.testing.assert_allclose(to_host(cb, got), expected, rtol=tolerance, equal_nan=True)
    assert_same(to_host(cb, cb.global_norm(arrays, p)), to_host(cb, got))  # deterministic, bit for bit
    return got


@pytest.mark.parametrize("p", NORM_TYPES)
@pytest.mark.parametrize("dtype", ALL_FLOAT_TYPES, ids=str)
def test_global_norm_matches_cpu(cb, dtype, p):
    arrays, hosts = norm_arrays(cb, [dtype])
    check_norm(cb, arrays, hosts, p, NORM_TOLERANCE[dtype])


@pytest.mark.parametrize("p", NORM_TYPES)
def test_global_norm_of_mixed_dtypes(cb, p):
    arrays, hosts = norm_arrays(cb, [dt.float16, dt.bfloat16, dt.float32])
    assert cb.dtype_of(check_norm(cb, arrays, hosts, p, 2e-5)) is dt.float32
    wide, wide_hosts = norm_arrays(cb, [dt.float16, dt.float64, dt.float32], seed=1)
    got = check_norm(cb, wide, wide_hosts, p, 1e-6)  # the fp32 / fp16 arrays were exact in fp64 too
    assert cb.dtype_of(got) is dt.float64


def test_global_norm_over_many_tensors_and_unaligned_views(cb):
    """60 tensors take several launches of the multi-tensor table; views starting at an odd element
    take the unaligned (scalar) loads."""
    g = rng(2)
    arrays, hosts = norm_arrays(cb, [dt.float32, dt.float16], seed=3, shapes=[(n % 13 + 1, 5) for n in range(60)])
    base, base_host = held(cb, g.standard_normal(70001), dt.float16)
    arrays.append(cb.slice(base, (slice(1, None),)))
    hosts.append(base_host[1:])
    for p in NORM_TYPES:
        check_norm(cb, arrays, hosts, p, 2e-5)


@pytest.mark.parametrize("p", (2.0, 1.0, math.inf, 3.0))
def test_global_norm_propagates_inf_and_nan(cb, p):
    g = rng(4)
    clean = g.standard_normal(70000).astype(np.float32)
    with_inf, with_nan = clean.copy(), clean.copy()
    with_inf[12345] = -np.inf
    with_nan[65536] = np.nan
    both = with_inf.copy()
    both[69999] = np.nan
    for poisoned, expected in ((with_inf, math.inf), (with_nan, math.nan), (both, math.nan)):
        got = float(
            to_host(cb, cb.global_norm([cb.from_numpy(clean, dt.float32), cb.from_numpy(poisoned, dt.float32)], p))
        )
        assert got == expected or (math.isnan(expected) and math.isnan(got))


def test_global_norm_of_nothing_and_bad_arguments(cb):
    for p in (2.0, math.inf, 3.0):
        assert float(to_host(cb, cb.global_norm([], p))) == 0.0
        assert float(to_host(cb, cb.global_norm([cb.from_numpy(np.zeros((0, 3), np.float32), dt.float32)], p))) == 0.0
    with pytest.raises(ValueError, match="norm_type"):
        cb.global_norm([cb.from_numpy(np.ones(2, np.float32), dt.float32)], 0.0)
    with pytest.raises(DTypeError, match="floating"):
        cb.global_norm([cb.from_numpy(np.ones(2, np.int64), dt.int64)], 2.0)


def test_global_norm_accumulates_half_in_float32(cb):
    arrays = [cb.from_numpy(np.full(4, 60000.0, np.float16), dt.float16)]
    assert float(to_host(cb, cb.global_norm(arrays, 2.0))) == pytest.approx(120000.0, rel=1e-6)


# =============================================================================================
# dropout
def check_dropout(cb, x, x_host, dtype, p, seed, offset):
    out, mask = cb.dropout(x, p, seed, offset)
    mask_host = to_host(cb, mask)
    assert cb.dtype_of(mask) is dt.bool_ and cb.dtype_of(out) is dtype
    assert_same(mask_host, to_host(cb, cb.bernoulli(cb.shape_of(x), 1.0 - p, dt.bool_, seed, offset)))
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    expected = cpu.dropout_backward(x_host, mask_host, scale)  # the CPU's x * (scale where kept)
    assert_same(to_host(cb, out), rounded(cb, expected, dtype) if dtype is dt.bfloat16 else expected)
    again, mask_again = cb.dropout(x, p, seed, offset)
    assert_same(to_host(cb, again), to_host(cb, out))
    assert_same(to_host(cb, mask_again), mask_host)
    return mask, mask_host


@pytest.mark.parametrize("dtype", ALL_FLOAT_TYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (1,), (7,), (1023,), (65537,), (33, 31), (0,), (4, 0)])
def test_dropout_matches_bernoulli_and_cpu_arithmetic(cb, dtype, shape):
    x, x_host = held(cb, rng(5).standard_normal(shape), dtype)
    mask, mask_host = check_dropout(cb, x, x_host, dtype, 0.3, seed=1234, offset=77)
    if mask_host.size > 1000:
        assert abs(mask_host.mean() - 0.7) < 0.02
    g, g_host = held(cb, rng(6).standard_normal(shape), dtype)
    got = cb.dropout_backward(g, mask, 1 / 0.7)
    expected = cpu.dropout_backward(g_host, mask_host, 1 / 0.7)
    assert_same(to_host(cb, got), rounded(cb, expected, dtype) if dtype is dt.bfloat16 else expected)


@pytest.mark.parametrize("dtype", (dt.float32, dt.float16), ids=str)
def test_dropout_of_strided_and_unaligned_inputs(cb, dtype):
    store, store_host = held(cb, rng(7).standard_normal((40, 27)), dtype)
    check_dropout(cb, cb.permute(store, (1, 0)), store_host.T, dtype, 0.5, seed=9, offset=0)
    flat, flat_host = held(cb, rng(8).standard_normal(1031), dtype)
    check_dropout(cb, cb.slice(flat, (slice(1, None),)), flat_host[1:], dtype, 0.5, seed=9, offset=4096)


def test_dropout_edge_probabilities_seeds_and_errors(cb):
    x_host = np.array([1.0, np.nan, np.inf, -2.0, 3.0], np.float32)
    x = cb.from_numpy(x_host, dt.float32)
    for p in (0.0, 1.0):
        check_dropout(cb, x, x_host, dt.float32, p, seed=3, offset=0)
    big = cb.from_numpy(np.ones(10000, np.float32), dt.float32)
    _, a = cb.dropout(big, 0.5, 1, 0)
    _, b = cb.dropout(big, 0.5, 1, 10000)
    _, c = cb.dropout(big, 0.5, 2, 0)
    assert (to_host(cb, a) != to_host(cb, b)).any() and (to_host(cb, a) != to_host(cb, c)).any()
    with pytest.raises(ValueError, match="between 0 and 1"):
        cb.dropout(x, 1.5, 0, 0)
    with pytest.raises(DTypeError, match="floating"):
        cb.dropout(cb.from_numpy(np.ones(3, np.int64), dt.int64), 0.5, 0, 0)
    with pytest.raises(ShapeError, match="dropout_backward"):
        cb.dropout_backward(x, cb.from_numpy(np.ones(4, bool), dt.bool_), 2.0)


# =============================================================================================
# the ops on a GPU
def test_f_embedding_and_its_backward_on_cuda():
    g = rng(9)
    weight_host = g.standard_normal((1023, 24)).astype(np.float32)
    idx_host = g.integers(0, 1023, (16, 65))
    idx_host[0, :5] = 7
    upstream = g.standard_normal((16, 65, 24)).astype(np.float32)
    outputs, grads = {}, {}
    for device in ("cpu", "cuda"):
        weight = adcuda.tensor(weight_host, device=device, requires_grad=True)
        out = F.embedding(adcuda.tensor(idx_host, device=device), weight, padding_idx=7, scale_grad_by_freq=True)
        out.backward(adcuda.tensor(upstream, device=device))
        outputs[device], grads[device] = out.detach().cpu().numpy(), weight.grad.cpu().numpy()
    assert_same(outputs["cuda"], outputs["cpu"])
    assert_same(grads["cuda"], grads["cpu"])
    with pytest.raises(IndexOutOfRangeError, match="num_embeddings=1023"):  # raised at the sync
        F.embedding(adcuda.tensor([3, 1023], device="cuda"), adcuda.tensor(weight_host, device="cuda")).cpu()


def test_f_dropout_on_cuda_is_the_two_step_draw_and_backward_uses_the_mask():
    from adcuda.factories import bernoulli_mask

    x = adcuda.tensor(rng(10).standard_normal((37, 29)).astype(np.float32), device="cuda", requires_grad=True)
    adcuda.manual_seed(21)
    keep = bernoulli_mask(tuple(x.shape), 1.0 - 0.4, adcuda.float32, "cuda")
    expected = (x.detach() * (keep * (1.0 / 0.6))).cpu().numpy()
    adcuda.manual_seed(21)
    out = F.dropout(x, 0.4)
    assert_same(out.detach().cpu().numpy(), expected)
    out.backward(adcuda.full((37, 29), 2.0, device="cuda"))
    kept = keep.cpu().numpy() != 0
    assert_same(x.grad.cpu().numpy(), np.where(kept, np.float32(2.0) * np.float32(1 / 0.6), 0.0).astype(np.float32))


@pytest.mark.parametrize("norm_type", (2.0, math.inf, 3.0))
def test_clip_grad_norm_on_cuda_matches_cpu(norm_type):
    g = rng(11)
    shapes = [(300, 7), (1,), (65537,), (0,), (5, 5)]
    grads = [g.standard_normal(s).astype(np.float32) for s in shapes]
    totals, clipped = {}, {}
    for device in ("cpu", "cuda"):
        params = [nn.Parameter(adcuda.zeros(*s, device=device)) for s in shapes]
        for p, grad in zip(params, grads):
            p.grad = adcuda.tensor(grad, device=device)
        total = nn.utils.clip_grad_norm_(params, 1.0, norm_type=norm_type)
        assert total.device.type == device
        totals[device] = float(total)
        clipped[device] = [p.grad.cpu().numpy() for p in params]
    assert totals["cuda"] == pytest.approx(totals["cpu"], rel=2e-5)
    for got, expected in zip(clipped["cuda"], clipped["cpu"]):
        np.testing.assert_allclose(got, expected, rtol=5e-5, atol=1e-7)
