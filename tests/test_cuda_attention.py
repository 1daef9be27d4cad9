"""The attention kernels (kernels/attention.cu: tensor cores in attention_flash.cuh, CUDA cores in
attention_simt.cuh) against the CPU backend, the oracle: forward (output and logsumexp) and backward
(dq, dk, dv) for every mask kind, causal, dropout, head dims 32/64/80/96/128, fp16 and bf16 (the
tensor-core path) and fp32 (the CUDA-core path), sequence lengths that are not multiples of the 64-row
tiles, a single query, cross-attention (L != S), strided and misaligned views; the dropout mask drawn
identically by both backends; the dispatch between the two kernel families; bad input. Lengths cross the
forward's 128-query and the backward's 128-key blocks (7, 129, 200, 257, 1023). Sizes are small: on the
CUDA emulator every CUDA thread is a fiber on the CPU.

bfloat16 has no NumPy type, so its CPU reference runs in float32 on the bf16-rounded inputs.
"""

import math

import numpy as np
import pytest
from cuda_arrays import held, host_dtype, to_host

import adcuda
from adcuda import dtypes as dt
from adcuda.backends import cpu
from adcuda.errors import DTypeError, ShapeError

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

HALF_TYPES = (dt.float16, dt.bfloat16)
# (rtol, atol) of one result element. The tensor-core kernels round P (and dS) to the input type before
# multiplying, as FlashAttention does, so half-type results carry one more rounding than the CPU's.
TOLERANCE = {dt.float32: (2e-5, 2e-6), dt.float16: (5e-3, 3e-3), dt.bfloat16: (3e-2, 2e-2)}


def check(cb, got, expected, dtype, scale=1.0):
    rtol, atol = TOLERANCE[dtype]
    got_host = to_host(cb, got).astype(np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert got_host.shape == expected.shape, (got_host.shape, expected.shape)
    np.testing.assert_allclose(got_host, expected, rtol=rtol, atol=atol * scale, equal_nan=True)


def run_attention(cb, dtype, q, k, v, mask=None, is_causal=False, scale=None, dropout=(0.0, 0, 0), seed=0):
    """Forward and backward on the device and on the CPU from the same inputs (host arrays or
    (device, host) pairs); checks every result and returns the device ones."""
    pairs = [x if isinstance(x, tuple) else held(cb, x, dtype) for x in (q, k, v)]
    (qd, qh), (kd, kh), (vd, vh) = pairs
    scale = 1.0 / math.sqrt(qh.shape[-1]) if scale is None else scale
    mask_d = mask_h = None
    if mask is not None:
        mask_d, mask_h = (cb.from_numpy(mask, dt.bool_), mask) if mask.dtype == np.bool_ else held(cb, mask, dtype)
    out, lse = cb.attention(qd, kd, vd, mask_d, is_causal, scale, *dropout)
    out_ref, lse_ref = cpu.attention(qh, kh, vh, mask_h, is_causal, scale, *dropout)
    check(cb, out, out_ref, dtype, scale=2.0)
    np.testing.assert_allclose(to_host(cb, lse), lse_ref, rtol=1e-4, atol=1e-4 if dtype is dt.float32 else 1e-2)

    grad_d, grad_h = held(cb, np.random.default_rng(seed + 1).standard_normal(out_ref.shape), dtype)
    dq, dk, dv = cb.attention_backward(grad_d, qd, kd, vd, out, lse, mask_d, is_causal, scale, *dropout)
    refs = cpu.attention_backward(
        grad_h, qh, kh, vh, to_host(cb, out), to_host(cb, lse), mask_h, is_causal, scale, *dropout
    )
    magnitude = 4.0 * math.sqrt(max(kh.shape[-2], 1)) * (1.0 / (1.0 - dropout[0]) if dropout[0] < 1 else 1.0)
    for got, ref in zip((dq, dk, dv), refs):
        check(cb, got, ref, dtype, scale=magnitude)
    return out, lse, (dq, dk, dv)


def normal(seed, *shapes):
    g = np.random.default_rng(seed)
    return [g.standard_normal(s) for s in shapes]


# ---------------------------------------------------------------------------------------------
# which kernels run
@pytest.mark.parametrize(
    "dtype, E, Ev, path",
    [
        (dt.float16, 64, 64, "tensor cores"),
        (dt.bfloat16, 128, 128, "tensor cores"),
        (dt.float16, 80, 96, "tensor cores"),
        (dt.bfloat16, 8, 8, "tensor cores"),
        (dt.float16, 20, 20, "cuda cores"),
        (dt.float16, 136, 64, "cuda cores"),
        (dt.float16, 64, 12, "cuda cores"),
        (dt.float32, 64, 64, "cuda cores"),
        (dt.float64, 64, 64, "cuda cores"),
    ],
)
def test_dispatch_picks_tensor_cores_for_half_types_with_head_dims_multiple_of_8_up_to_128(
    cb, native, dtype, E, Ev, path
):
    q = cb.from_numpy(np.zeros((2, E), host_dtype(dtype).numpy), dtype)
    v = cb.from_numpy(np.zeros((2, Ev), host_dtype(dtype).numpy), dtype)
    assert native.attention_kernel_path(q, v) == path


# ---------------------------------------------------------------------------------------------
# tensor cores: head dims, causal, tile edges
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("head_dim", (32, 64, 80, 96, 128))
def test_head_dims_match_cpu(cb, dtype, head_dim):
    """70 queries and keys: one full 64-key step and a partial one (a partial 128-row block); 80 and 96 run
    in the 128 kernels with zero-filled columns."""
    q, k, v = normal(head_dim, (1, 2, 70, head_dim), (1, 2, 70, head_dim), (1, 2, 70, head_dim))
    run_attention(cb, dtype, q, k, v, is_causal=head_dim in (64, 96))


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("L, S", [(1, 1), (1, 70), (70, 1), (33, 100), (100, 33), (64, 128)])
@pytest.mark.parametrize("is_causal", (False, True))
def test_query_and_key_lengths_match_cpu(cb, dtype, L, S, is_causal):
    """A single query, cross-attention both ways, exact tiles; causal is top-left aligned (query i sees
    keys j <= i), so with L > S the last queries see every key and with L < S most keys are unseen."""
    q, k, v = normal(L * 1000 + S, (2, L, 32), (2, S, 32), (2, S, 32))
    run_attention(cb, dtype, q, k, v, is_causal=is_causal)


@pytest.mark.parametrize("dtype, head_dim", [(dt.float16, 64), (dt.bfloat16, 128), (dt.bfloat16, 32)], ids=str)
@pytest.mark.parametrize("L, S", [(7, 129), (129, 7), (200, 257)])
@pytest.mark.parametrize("is_causal", (False, True))
def test_lengths_across_the_128_row_blocks_match_cpu(cb, dtype, head_dim, L, S, is_causal):
    """The forward's blocks of 128 queries (4 warps of 32 rows, key steps of 64, or 32 at head dim 128)
    and the backward's blocks of 128 keys (8 warps of 16): partial blocks and warps at both ends, a warp
    with no valid row, causal diagonals inside a block, several blocks adding into one query's dQ."""
    q, k, v = normal(L + S + head_dim, (1, 2, L, head_dim), (1, 2, S, head_dim), (1, 2, S, head_dim))
    run_attention(cb, dtype, q, k, v, is_causal=is_causal)


def test_a_long_odd_sequence_matches_cpu(cb):
    """1023 queries and keys, causal: 8 query blocks of 128 (the last one row short) and 16 key steps each."""
    q, k, v = normal(1023, (1, 1023, 64), (1, 1023, 64), (1, 1023, 64))
    run_attention(cb, dt.bfloat16, q, k, v, is_causal=True)


@pytest.mark.parametrize(
    "dtype, head_dim, scale", [(dt.float16, 64, -0.7), (dt.bfloat16, 128, -0.4), (dt.float16, 64, 0.0)], ids=str
)
def test_negative_and_zero_scales_match_cpu(cb, dtype, head_dim, scale):
    """The forward keeps scores unscaled and takes the row maximum before scaling, which needs scale >= 0: a
    negative scale flips Q's sign in shared memory instead. Causal and a partial tile put masked tiles (scaled
    first) beside unmasked ones (scaled in the exponent's FFMA), so both must agree on one running maximum."""
    q, k, v = normal(int(10 * abs(scale)) + head_dim, (2, 150, head_dim), (2, 150, head_dim), (2, 150, head_dim))
    run_attention(cb, dtype, q * 2, k * 2, v, is_causal=True, scale=scale)


def test_masks_across_several_blocks_match_cpu(cb):
    """A bool and an additive mask over 129 queries and 140 keys: tiles under a mask array in every block
    and step of both passes, at head dim 128 (32-key forward steps)."""
    q, k, v = normal(18, (1, 2, 129, 128), (1, 2, 140, 128), (1, 2, 140, 128))
    rng = np.random.default_rng(19)
    run_attention(cb, dt.bfloat16, q, k, v, mask=rng.random((129, 140)) < 0.6)
    additive = rng.standard_normal((2, 129, 140))
    additive[..., 130] = -np.inf
    run_attention(cb, dt.float16, q, k, v, mask=additive)


def test_value_head_dim_differs_from_query_head_dim(cb):
    q, k, v = normal(3, (1, 3, 40, 64), (1, 3, 50, 64), (1, 3, 50, 24))
    run_attention(cb, dt.float16, q, k, v)


def test_custom_scale_and_large_scores(cb):
    """Large scores exercise the running max: exp2 of (score - max) never overflows."""
    q, k, v = normal(4, (1, 1, 90, 64), (1, 1, 90, 64), (1, 1, 90, 64))
    run_attention(cb, dt.float16, q * 3, k * 3, v, scale=0.9)


# ---------------------------------------------------------------------------------------------
# masks
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("mask_shape", [(2, 3, 20, 70), (20, 70), (3, 1, 70), (2, 1, 20, 1), (70,)])
def test_bool_masks_broadcast_match_cpu(cb, dtype, mask_shape):
    q, k, v = normal(5, (2, 3, 20, 32), (2, 3, 70, 32), (2, 3, 70, 32))
    mask = np.random.default_rng(6).random(mask_shape) < 0.7
    run_attention(cb, dtype, q, k, v, mask=mask)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("mask_shape", [(20, 70), (2, 1, 1, 70)])
def test_additive_masks_match_cpu(cb, dtype, mask_shape):
    q, k, v = normal(7, (2, 3, 20, 32), (2, 3, 70, 32), (2, 3, 70, 32))
    mask = np.random.default_rng(8).standard_normal(mask_shape) * 2
    mask[..., 5] = -np.inf  # a key nobody attends to
    run_attention(cb, dtype, q, k, v, mask=mask)


def test_fully_masked_rows_give_zero_output_zero_grads_and_minus_inf_lse(cb):
    mask = np.ones((20, 70), bool)
    mask[3, :] = False  # query 3 attends to nothing
    mask[:, 66] = False  # key 66 (in the partial tile) is never attended to
    q, k, v = normal(9, (1, 2, 20, 64), (1, 2, 70, 64), (1, 2, 70, 64))
    out, lse, (dq, dk, dv) = run_attention(cb, dt.float16, q, k, v, mask=mask)
    assert np.all(to_host(cb, out)[:, :, 3] == 0) and np.all(np.isneginf(to_host(cb, lse)[:, :, 3]))
    assert np.all(to_host(cb, dq)[:, :, 3] == 0)
    assert np.all(to_host(cb, dk)[:, :, 66] == 0) and np.all(to_host(cb, dv)[:, :, 66] == 0)


def test_additive_minus_inf_rows_match_cpu(cb):
    mask = np.zeros((20, 70))
    mask[4, :] = -np.inf
    q, k, v = normal(10, (1, 1, 20, 32), (1, 1, 70, 32), (1, 1, 70, 32))
    out, lse, _ = run_attention(cb, dt.bfloat16, q, k, v, mask=mask)
    assert np.all(to_host(cb, out)[:, :, 4] == 0) and np.all(np.isneginf(to_host(cb, lse)[:, :, 4]))


# ---------------------------------------------------------------------------------------------
# layouts: strided views, broadcast batch dims, misaligned views (copied for cp.async)
def test_heads_split_from_a_packed_qkv_tensor(cb):
    """q, k, v as strided views of one (B, T, 3, H, E) projection, the layout a fused QKV linear gives."""
    B, T, H, E = 2, 37, 3, 32
    (qkv,) = normal(11, (B, T, 3, H, E))
    qkv_d, qkv_h = held(cb, qkv, dt.float16)
    views = []
    for index in range(3):
        d = cb.permute(cb.slice(qkv_d, (slice(None), slice(None), index)), (0, 2, 1, 3))
        views.append((d, np.transpose(qkv_h[:, :, index], (0, 2, 1, 3))))
    run_attention(cb, dt.float16, *views, is_causal=True)


def test_misaligned_and_broadcast_operands(cb):
    """q starts one element into its buffer (not 16-byte aligned): the host copies it; k and v
    broadcast over the batch."""
    (q_wide,) = normal(12, (2, 30, 72))
    q_d, q_h = held(cb, q_wide, dt.bfloat16)
    q_view = (cb.slice(q_d, (slice(None), slice(None), slice(1, 65))), q_h[:, :, 1:65])
    k, v = normal(13, (1, 50, 64), (1, 50, 64))
    run_attention(cb, dt.bfloat16, q_view, k, v)


def test_many_batch_entries(cb):
    q, k, v = normal(14, (3, 5, 9, 32), (3, 5, 9, 32), (3, 5, 9, 32))
    run_attention(cb, dt.float16, q, k, v, is_causal=True)


# ---------------------------------------------------------------------------------------------
# dropout
@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (2, 3, 17, 33), (40, 16)])
def test_dropout_mask_is_the_same_on_both_backends(cb, shape):
    keep = to_host(cb, cb.attention_dropout_mask(shape, 0.3, 1234, 56))
    expected = cpu.attention_dropout_mask(shape, 0.3, 1234, 56)
    assert keep.dtype == np.bool_ and np.array_equal(keep, expected)


def test_dropout_mask_keeps_a_fraction_one_minus_p_and_depends_on_the_draw(cb):
    keep = to_host(cb, cb.attention_dropout_mask((4, 64, 96), 0.25, 7, 0))
    assert abs(keep.mean() - 0.75) < 0.01
    assert not np.array_equal(keep, to_host(cb, cb.attention_dropout_mask((4, 64, 96), 0.25, 7, 1)))
    assert not np.array_equal(keep, to_host(cb, cb.attention_dropout_mask((4, 64, 96), 0.25, 8, 0)))
    assert to_host(cb, cb.attention_dropout_mask((3, 5), 0.0, 7, 0)).all()
    assert not to_host(cb, cb.attention_dropout_mask((3, 5), 1.0, 7, 0)).any()


@pytest.mark.parametrize(
    "dtype, head_dim", [(dt.float16, 64), (dt.bfloat16, 128), (dt.float16, 32), (dt.float32, 64)], ids=str
)
@pytest.mark.parametrize("is_causal", (False, True))
def test_dropout_matches_cpu_forward_and_backward(cb, dtype, head_dim, is_causal):
    """Both backends drop the same probabilities (tensor cores for the half types, CUDA cores for fp32),
    and the backward draws the forward's mask again."""
    q, k, v = normal(head_dim, (1, 2, 70, head_dim), (1, 2, 75, head_dim), (1, 2, 75, head_dim))
    run_attention(cb, dtype, q, k, v, is_causal=is_causal, dropout=(0.2, 99, 1 << 33))


@pytest.mark.parametrize("dtype, head_dim", [(dt.bfloat16, 64), (dt.float16, 128)], ids=str)
def test_dropout_across_several_blocks_matches_cpu(cb, dtype, head_dim):
    """Dropout drawn per 16 x 16 tile by warps of 32 query rows (forward, 32-key steps) and of 16 keys
    (backward, 128-key blocks), over several blocks of both."""
    q, k, v = normal(head_dim + 1, (2, 140, head_dim), (2, 131, head_dim), (2, 131, head_dim))
    run_attention(cb, dtype, q, k, v, is_causal=True, dropout=(0.25, 5, 77))


def test_dropout_with_a_mask(cb):
    q, k, v = normal(15, (2, 20, 32), (2, 40, 32), (2, 40, 32))
    mask = np.random.default_rng(16).random((20, 40)) < 0.8
    run_attention(cb, dt.float16, q, k, v, mask=mask, dropout=(0.5, 3, 4))


def test_dropout_one_gives_zeros_and_the_undropped_lse(cb):
    q, k, v = normal(17, (1, 10, 32), (1, 12, 32), (1, 12, 32))
    out, lse, (dq, dk, dv) = run_attention(cb, dt.float16, q, k, v, dropout=(1.0, 3, 4))
    assert not to_host(cb, out).any() and not to_host(cb, dv).any() and np.isfinite(to_host(cb, lse)).all()


# ---------------------------------------------------------------------------------------------
# bad input
def test_bad_input_errors(cb):
    def arr(shape, dtype=dt.float16):
        return cb.from_numpy(np.zeros(shape, host_dtype(dtype).numpy), dtype)

    q = arr((2, 4, 64))
    with pytest.raises(ValueError, match="attention: dropout probability has to be between 0 and 1"):
        cb.attention(q, q, q, None, False, 1.0, 1.5, 0, 0)
    with pytest.raises(ValueError, match="attention_dropout_mask: dropout probability"):
        cb.attention_dropout_mask((3, 4), -0.1, 0, 0)
    with pytest.raises(ShapeError, match="do not fit"):
        cb.attention(q, arr((2, 5, 32)), arr((2, 5, 32)), None, False, 1.0)
    with pytest.raises(ShapeError, match="mask of shape"):
        cb.attention(q, q, q, cb.from_numpy(np.ones((3, 4), bool), dt.bool_), False, 1.0)
    with pytest.raises(DTypeError, match="floating point"):
        cb.attention(cb.from_numpy(np.zeros((2, 4, 8), np.int32), dt.int32), q, q, None, False, 1.0)
    out, lse = cb.attention(q, q, q, None, False, 1.0)
    with pytest.raises(ShapeError, match="attention_backward: the gradient has shape"):
        cb.attention_backward(arr((2, 4, 32)), q, q, q, out, lse, None, False, 1.0)
    with pytest.raises(ValueError, match="attention_backward: lse must be"):
        cb.attention_backward(
            out, q, q, q, out, cb.from_numpy(np.zeros((2, 5), np.float32), dt.float32), None, False, 1.0
        )


# ---------------------------------------------------------------------------------------------
# through the Tensor API: scaled_dot_product_attention with dropout runs the fused primitive
def test_sdpa_dropout_runs_fused_and_matches_cpu():
    import adcuda.nn.functional as F

    def run(device):
        adcuda.manual_seed(123)
        g = np.random.default_rng(18)
        q, k, v = (
            adcuda.tensor(
                g.standard_normal((2, 3, 33, 32)).astype(np.float32),
                device=device,
                dtype=dt.float16,
                requires_grad=True,
            )
            for _ in range(3)
        )
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True)
        out.float().sum().backward()
        return [x.detach().float().cpu().numpy() for x in (out, q.grad, k.grad, v.grad)]

    for got, expected in zip(run("cuda"), run("cpu")):
        np.testing.assert_allclose(got, expected, rtol=1e-2, atol=2e-2)
