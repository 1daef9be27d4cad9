"""adcuda.nn.functional: forward values and gradients of the functional NN ops.

Every op has a float64 gradcheck (and the fused ones a gradgradcheck) and closed-form checks that
need no oracle; where PyTorch is installed, forward values and gradients are also compared with it
in float64, float32 and (forward only) float16.
"""

import math

import numpy as np
import pytest

import adcuda
import adcuda.nn.functional as F
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.errors import DTypeError, IndexOutOfRangeError, ShapeError, UnsupportedDTypeError

f64 = adcuda.float64


def rnd(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def leaf(array, dtype=f64):
    return adcuda.tensor(np.asarray(array), dtype=dtype, requires_grad=True)


def const(array, dtype=None):
    return adcuda.tensor(np.asarray(array), dtype=dtype)


# ------------------------------------------------------------------------------------------------
# gradcheck in float64 (no oracle needed)
TARGET = np.array([0, 3, -100, 2, 3])
WEIGHT = np.array([0.5, 1.0, 2.0, 0.25])
KEEP = np.array(
    [
        [True, False, True, True, False],
        [False, False, False, False, False],  # a query that may attend to nothing
        [True, True, True, False, False],
    ]
)

GRADCHECK_CASES = {
    "softmax": (lambda x: F.softmax(x, 1), [rnd(3, 4)]),
    "softmax_noncontiguous": (lambda x: F.softmax(x.t(), 0), [rnd(4, 3)]),
    "softmax_0d": (lambda x: F.softmax(x, 0), [np.array(0.7)]),
    "log_softmax": (lambda x: F.log_softmax(x, -1), [rnd(2, 3, 4)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, const(TARGET)), [rnd(5, 4)]),
    "cross_entropy_smoothing_sum": (
        lambda x: F.cross_entropy(x, const(TARGET), label_smoothing=0.2, reduction="sum"),
        [rnd(5, 4)],
    ),
    "cross_entropy_none_noncontiguous": (
        lambda x: F.cross_entropy(x.t(), const(TARGET), reduction="none"),
        [rnd(4, 5)],
    ),
    "cross_entropy_class_weight": (
        lambda x, w: F.cross_entropy(x, const(TARGET), weight=w, label_smoothing=0.1),
        [rnd(5, 4), WEIGHT],
    ),
    "cross_entropy_spatial": (
        lambda x: F.cross_entropy(x, const(np.array([[0, 2, 1], [1, 1, -100]])), ignore_index=-100),
        [rnd(2, 3, 3)],
    ),
    "cross_entropy_unbatched": (lambda x: F.cross_entropy(x, const(np.array(2))), [rnd(4)]),
    "cross_entropy_probabilities": (
        lambda x, p: F.cross_entropy(x, p, weight=const(WEIGHT, f64), label_smoothing=0.1),
        [rnd(3, 4), np.random.default_rng(1).random((3, 4))],
    ),
    "nll_loss_weight_ignore": (
        lambda x, w: F.nll_loss(x, const(np.array([0, 3, 1, 2, 3])), weight=w, ignore_index=3),
        [rnd(5, 4), WEIGHT],
    ),
    "mse_loss": (lambda x, y: F.mse_loss(x, y), [rnd(3, 4), rnd(3, 4, seed=1)]),
    "mse_loss_weight_sum": (
        lambda x, y, w: F.mse_loss(x, y, weight=w, reduction="sum"),
        [rnd(3, 4), rnd(3, 4, seed=1), np.random.default_rng(2).random((3, 4))],
    ),
    "l1_loss_broadcast_target": (lambda x, y: F.l1_loss(x, y, reduction="none"), [rnd(3, 4), rnd(4, seed=1)]),
    "bce_with_logits": (
        lambda x, t: F.binary_cross_entropy_with_logits(
            x, t, weight=const(rnd(4, seed=3), f64), pos_weight=const(np.array([0.5, 1, 2, 3.0]), f64)
        ),
        [rnd(3, 4, scale=5), np.random.default_rng(1).random((3, 4))],
    ),
    "softplus": (lambda x: F.softplus(x, beta=2.0, threshold=4.0), [rnd(3, 4, scale=3)]),
    "logsigmoid": (F.logsigmoid, [rnd(3, 4, scale=10)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (3, 4), w, b), [rnd(2, 3, 4), rnd(3, 4, seed=1), rnd(3, 4, seed=2)]),
    "layer_norm_plain_noncontiguous": (lambda x: F.layer_norm(x.transpose(0, 1), (3,)), [rnd(3, 2)]),
    "layer_norm_bias_only": (lambda x, b: F.layer_norm(x, 4, bias=b), [rnd(3, 4), rnd(4, seed=1)]),
    # a padding row's gradient is zero by design, which a numerical Jacobian cannot see: padding_idx
    # is unused here and checked in test_embedding_rows_padding_gradient_and_max_norm
    "embedding_repeated_rows": (
        lambda w: F.embedding(const(np.array([[0, 2], [2, 1]])), w, padding_idx=-1),
        [rnd(5, 3)],
    ),
    "linear": (lambda x, w, b: F.linear(x, w, b), [rnd(2, 3, 4), rnd(5, 4, seed=1), rnd(5, seed=2)]),
    "linear_no_bias_1d_input": (lambda x, w: F.linear(x, w), [rnd(4), rnd(5, 4, seed=1)]),
    "attention": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        [rnd(2, 3, 4), rnd(2, 5, 4, seed=1), rnd(2, 5, 2, seed=2)],
    ),
    "attention_causal_scale": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
        [rnd(3, 4), rnd(5, 4, seed=1), rnd(5, 2, seed=2)],
    ),
    "attention_bool_mask_broadcast": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=const(KEEP)),
        [rnd(2, 3, 4), rnd(1, 5, 4, seed=1), rnd(1, 5, 2, seed=2)],
    ),
    "attention_float_mask_with_grad": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        [rnd(2, 3, 4), rnd(2, 5, 4, seed=1), rnd(2, 5, 2, seed=2), rnd(3, 5, seed=3)],
    ),
    "attention_gqa": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        [rnd(1, 4, 2, 3), rnd(1, 2, 3, 3, seed=1), rnd(1, 2, 3, 2, seed=2)],
    ),
    "pad_constant_crop": (lambda x: F.pad(x, (1, -1, 0, 2), value=0.5), [rnd(2, 3, 4)]),
    "pad_reflect": (lambda x: F.pad(x, (2, 1), mode="reflect"), [rnd(2, 4)]),
    "pad_replicate": (lambda x: F.pad(x, (1, 2, 2, 0), mode="replicate"), [rnd(2, 3, 2)]),
    "pad_circular": (lambda x: F.pad(x, (3, 1), mode="circular"), [rnd(2, 3)]),
    "normalize": (lambda x: F.normalize(x, dim=-1), [rnd(3, 4)]),
    "dropout_eval": (lambda x: F.dropout(x, 0.5, training=False), [rnd(3, 4)]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), [rnd(3, 4)]),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), [rnd(3, 4)]),
    "empty_batch_sum": (
        lambda x: F.cross_entropy(x, const(np.zeros(0, np.int64)), reduction="sum"),
        [np.zeros((0, 3))],
    ),
}


@pytest.mark.parametrize("name", sorted(GRADCHECK_CASES))
def test_gradcheck(name):
    fn, arrays = GRADCHECK_CASES[name]
    assert gradcheck(fn, tuple(leaf(a) for a in arrays), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradcheck_dropout_with_a_fixed_mask():
    x = leaf(rnd(4, 5))

    def fn(t):
        adcuda.manual_seed(7)  # the same mask for every evaluation
        return F.dropout(t, 0.3)

    assert gradcheck(fn, (x,))


GRADGRAD_CASES = {
    "softmax": (lambda x: F.softmax(x, 1), [rnd(2, 3)]),
    "log_softmax": (lambda x: F.log_softmax(x, 0), [rnd(3, 2)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (3,), w, b), [rnd(2, 3), rnd(3, seed=1), rnd(3, seed=2)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, const(np.array([1, -100, 2])), label_smoothing=0.3), [rnd(3, 3)]),
    "cross_entropy_none": (lambda x: F.cross_entropy(x, const(np.array([1, 0])), reduction="none"), [rnd(2, 3)]),
    "attention": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
        [rnd(2, 3, 2), rnd(2, 4, 2, seed=1), rnd(2, 4, 3, seed=2)],
    ),
    "attention_causal": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [rnd(1, 3, 2), rnd(1, 3, 2, seed=1), rnd(1, 3, 2, seed=2)],
    ),
    "attention_masked": (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=const(KEEP[:, :3])),
        [rnd(3, 2), rnd(3, 2, seed=1), rnd(3, 2, seed=2)],
    ),
    "softplus": (lambda x: F.softplus(x), [rnd(2, 3)]),
}


@pytest.mark.parametrize("name", sorted(GRADGRAD_CASES))
def test_gradgradcheck(name):
    fn, arrays = GRADGRAD_CASES[name]
    assert gradgradcheck(fn, tuple(leaf(a) for a in arrays), atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("name", sorted(GRADGRAD_CASES))
def test_create_graph_backward_equals_the_fused_backward(name):
    # gradgradcheck differentiates the composite backward but cannot tell whether that backward is
    # right; it must give the same first derivative as the fused backward primitive (checked by gradcheck)
    fn, arrays = GRADGRAD_CASES[name]
    inputs = [leaf(a) for a in arrays]
    out = fn(*inputs)
    seed = adcuda.tensor(rnd(*out.shape, seed=5) if out.ndim else np.array(0.7), dtype=f64)
    fused = adcuda.autograd.grad([out], inputs, [seed], retain_graph=True)
    composite = adcuda.autograd.grad([out], inputs, [seed], create_graph=True)
    for a, b in zip(fused, composite):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-13)


# ------------------------------------------------------------------------------------------------
# closed forms and semantics (no oracle needed)
def test_cross_entropy_is_minus_log_softmax_at_the_target_averaged_over_kept_rows():
    x = rnd(5, 4)
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    kept = [i for i, t in enumerate(TARGET) if t != -100]
    want = -np.mean([logp[i, TARGET[i]] for i in kept])
    got = F.cross_entropy(const(x), const(TARGET)).item()
    assert got == pytest.approx(want, rel=1e-12)
    none = F.cross_entropy(const(x), const(TARGET), reduction="none").numpy()
    assert none[2] == 0.0 and none.shape == (5,)


def test_cross_entropy_class_weights_use_the_weighted_mean():
    x, t = rnd(4, 3), np.array([0, 2, 2, 1])
    w = np.array([1.0, 3.0, 0.5])
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    picked = np.array([-logp[i, c] * w[c] for i, c in enumerate(t)])
    got = F.cross_entropy(const(x), const(t), weight=const(w)).item()
    assert got == pytest.approx(picked.sum() / w[t].sum(), rel=1e-12)


def test_cross_entropy_label_smoothing_matches_smoothed_probability_targets():
    x, t = rnd(4, 5), np.array([0, 4, 1, 1])
    smoothing = 0.25
    soft = np.eye(5)[t] * (1 - smoothing) + smoothing / 5
    by_index = F.cross_entropy(const(x), const(t), label_smoothing=smoothing).item()
    by_probability = F.cross_entropy(const(x), const(soft)).item()
    assert by_index == pytest.approx(by_probability, rel=1e-12)


def test_cross_entropy_every_target_ignored_is_nan_for_mean_and_zero_for_sum():
    x = const(rnd(2, 3))
    t = const(np.array([-100, -100]))
    assert math.isnan(F.cross_entropy(x, t).item())
    assert F.cross_entropy(x, t, reduction="sum").item() == 0.0


def test_cross_entropy_gradient_of_ignored_rows_is_exactly_zero():
    x = leaf(rnd(5, 4))
    F.cross_entropy(x, const(TARGET), label_smoothing=0.1).backward()
    assert np.all(x.grad.numpy()[2] == 0.0)
    assert np.all(x.grad.numpy()[[0, 1, 3, 4]] != 0.0)


def test_cross_entropy_fused_and_composite_paths_agree():
    x = rnd(6, 5)
    t = np.array([0, 4, -100, 2, 2, 1])
    fused, composite = leaf(x), leaf(x)
    F.cross_entropy(fused, const(t), label_smoothing=0.2).backward()
    # a weight of ones takes the composite path, and must not change anything
    F.cross_entropy(composite, const(t), weight=const(np.ones(5)), label_smoothing=0.2).backward()
    np.testing.assert_allclose(fused.grad.numpy(), composite.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_legacy_size_average_and_reduce_flags():
    x, y = const(rnd(3, 4)), const(rnd(3, 4, seed=1))
    assert F.mse_loss(x, y, size_average=False).item() == pytest.approx(F.mse_loss(x, y, reduction="sum").item())
    assert tuple(F.mse_loss(x, y, reduce=False).shape) == (3, 4)


def test_bce_with_logits_is_finite_for_huge_logits_and_has_gradient_minus_half_at_zero():
    x = const(np.array([-1000.0, 1000.0]))
    t = const(np.array([1.0, 0.0]))
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(x, t, reduction="none").numpy(), [1000.0, 1000.0])
    z = leaf(np.zeros(3))  # zero logits (a zero-initialised head): the gradient is sigmoid(0) - t
    F.binary_cross_entropy_with_logits(z, const(np.array([1.0, 0.0, 0.5])), reduction="sum").backward()
    np.testing.assert_allclose(z.grad.numpy(), [-0.5, 0.5, 0.0], atol=1e-15)


def test_softplus_threshold_and_logsigmoid_tail():
    x = const(np.array([30.0, -30.0, 2.0]))
    np.testing.assert_allclose(
        F.softplus(x).numpy(), [30.0, math.log1p(math.exp(-30.0)), math.log1p(math.exp(2.0))], rtol=1e-14
    )
    np.testing.assert_allclose(F.logsigmoid(const(np.array([-800.0, 800.0]))).numpy(), [-800.0, 0.0])


def test_layer_norm_normalises_the_trailing_dims():
    x = rnd(4, 2, 5, scale=3) + 7
    y = F.layer_norm(const(x), (2, 5), eps=0.0).numpy()
    np.testing.assert_allclose(y.reshape(4, -1).mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(y.reshape(4, -1).std(1), 1, rtol=1e-12)


def test_dropout_is_reproducible_scaled_and_drops_about_p():
    x = adcuda.ones(200, 100)
    adcuda.manual_seed(3)
    a = F.dropout(x, 0.25).numpy()
    adcuda.manual_seed(3)
    b = F.dropout(x, 0.25).numpy()
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((a == 0).mean() - 0.25) < 0.02
    c = F.dropout(x, 0.25).numpy()  # the generator moved on: a different mask
    assert (a != c).any()


def test_dropout_edge_probabilities_and_inplace():
    x = leaf(rnd(3, 4))
    assert F.dropout(x, 0.0) is x and F.dropout(x, 0.9, training=False) is x
    zeroed = F.dropout(x, 1.0)
    assert np.all(zeroed.detach().numpy() == 0.0)
    zeroed.sum().backward()
    assert np.all(x.grad.numpy() == 0.0)
    h = leaf(rnd(3, 4)) * 1.0
    before = h.detach().numpy().copy()
    adcuda.manual_seed(5)
    out = F.dropout(h, 0.5, inplace=True)
    kept = h.detach().numpy() != 0
    assert out is h and 0 < kept.sum() < kept.size
    np.testing.assert_allclose(h.detach().numpy()[kept], 2 * before[kept], rtol=1e-12)


def test_embedding_rows_padding_gradient_and_max_norm():
    w = leaf(rnd(6, 3))
    idx = const(np.array([[1, 5], [5, 0]]))
    out = F.embedding(idx, w, padding_idx=5)
    np.testing.assert_array_equal(out.detach().numpy()[0, 1], w.detach().numpy()[5])
    out.sum().backward()
    grad = w.grad.numpy()
    np.testing.assert_array_equal(grad[5], 0.0)
    np.testing.assert_array_equal(grad[[0, 1]], 1.0)
    np.testing.assert_array_equal(grad[[2, 3, 4]], 0.0)
    scaled = leaf(rnd(4, 2))
    F.embedding(const(np.array([1, 1, 3, 0])), scaled, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_array_equal(scaled.grad.numpy()[:, 0], [1.0, 1.0, 0.0, 1.0])  # row 1: 2 uses / 2
    table = const(np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]]))
    F.embedding(const(np.array([0, 1])), table, max_norm=1.0)
    norms = np.linalg.norm(table.numpy(), axis=1)
    np.testing.assert_allclose(norms[:2], [1.0, 0.5], rtol=1e-6)
    assert norms[2] == pytest.approx(10.0)  # not looked up, so left alone


def test_attention_masked_keys_and_empty_rows_get_exactly_zero_gradient():
    q, k, v = leaf(rnd(2, 3, 4)), leaf(rnd(2, 5, 4, seed=1)), leaf(rnd(2, 5, 2, seed=2))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=const(KEEP))
    np.testing.assert_array_equal(out.detach().numpy()[:, 1], 0.0)  # a query with no keys gives 0
    (out * const(rnd(2, 3, 2, seed=4))).sum().backward()
    never_attended = ~KEEP.any(0)
    np.testing.assert_array_equal(k.grad.numpy()[:, never_attended], 0.0)
    np.testing.assert_array_equal(v.grad.numpy()[:, never_attended], 0.0)
    np.testing.assert_array_equal(q.grad.numpy()[:, 1], 0.0)
    assert np.all(np.isfinite(q.grad.numpy()))


def test_attention_composite_paths_match_the_fused_one():
    q, k, v = rnd(2, 3, 4), rnd(2, 5, 4, seed=1), rnd(2, 5, 2, seed=2)
    additive = np.where(KEEP, 0.0, -np.inf)
    fused = F.scaled_dot_product_attention(const(q), const(k), const(v), attn_mask=const(KEEP)).numpy()
    # a float mask that requires grad takes the composite path
    composite = F.scaled_dot_product_attention(const(q), const(k), const(v), attn_mask=leaf(additive)).detach()
    np.testing.assert_allclose(fused, composite.numpy(), rtol=1e-12, atol=1e-14)
    adcuda.manual_seed(0)
    dropped = F.scaled_dot_product_attention(const(q), const(k), const(v), attn_mask=const(KEEP), dropout_p=0.5)
    assert np.all(np.isfinite(dropped.numpy())) and np.all(dropped.numpy()[:, 1] == 0.0)


def test_attention_dropout_drops_the_probabilities_its_mask_primitive_draws():
    """Dropout runs inside the fused primitive, on the generator's next draw; attention_dropout_mask
    gives the same keep-mask (both backends draw it from one Philox counter layout)."""
    from adcuda.backends import cpu
    from adcuda.random import default_generator

    q, k, v = const(rnd(2, 3, 4)), const(rnd(2, 5, 4, seed=1)), const(rnd(2, 5, 2, seed=2))
    adcuda.manual_seed(11)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)
    adcuda.manual_seed(11)
    keep = cpu.attention_dropout_mask((2, 3, 5), 0.3, *default_generator.next_offset(2 * 3 * 5))
    assert 0 < keep.sum() < keep.size
    probs = F.softmax(q @ k.transpose(-1, -2) * 0.5, -1).numpy()
    np.testing.assert_allclose(out.numpy(), (probs * keep / 0.7) @ v.numpy(), rtol=1e-12)


def test_attention_dropout_gradients_and_second_derivatives():
    """The fused backward draws the forward's mask again; under create_graph the composite rule
    rebuilds it with attention_dropout_mask."""
    q, k, v = leaf(rnd(2, 3, 4)), leaf(rnd(2, 5, 4, seed=1)), leaf(rnd(2, 5, 2, seed=2))

    def attend(q, k, v):
        adcuda.manual_seed(5)  # the same draw at every evaluation
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True)

    assert gradcheck(attend, (q, k, v))
    assert gradgradcheck(attend, (q, k, v))


def test_attention_with_no_keys_gives_zeros():
    q = leaf(rnd(2, 3, 4))
    out = F.scaled_dot_product_attention(q, const(np.zeros((2, 0, 4))), const(np.zeros((2, 0, 5))))
    assert tuple(out.shape) == (2, 3, 5) and not out.detach().numpy().any()
    out.sum().backward()
    assert not q.grad.numpy().any()


def test_attention_causal_equals_an_explicit_lower_triangular_mask():
    q, k, v = const(rnd(2, 4, 3)), const(rnd(2, 6, 3, seed=1)), const(rnd(2, 6, 2, seed=2))
    tri = const(np.tril(np.ones((4, 6), dtype=bool)))
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy(),
        F.scaled_dot_product_attention(q, k, v, attn_mask=tri).numpy(),
        rtol=1e-13,
    )


def test_pad_values_and_crop():
    x = const(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(F.pad(x, (1, -1), value=9.0).numpy(), [[9, 0, 1], [9, 3, 4]])
    np.testing.assert_array_equal(F.pad(x, (0, 0, -1, 0)).numpy(), [[3, 4, 5]])
    np.testing.assert_array_equal(F.pad(x, (2, 1), mode="reflect").numpy()[0], [2, 1, 0, 1, 2, 1])
    np.testing.assert_array_equal(F.pad(x, (2, 1), mode="replicate").numpy()[0], [0, 0, 0, 1, 2, 2])
    np.testing.assert_array_equal(F.pad(x, (2, 1), mode="circular").numpy()[0], [1, 2, 0, 1, 2, 0])


def test_linear_is_input_times_weight_transposed_plus_bias():
    x, w, b = rnd(2, 3, 4), rnd(5, 4, seed=1), rnd(5, seed=2)
    np.testing.assert_allclose(F.linear(const(x), const(w), const(b)).numpy(), x @ w.T + b, rtol=1e-13)


def test_inplace_activations_write_into_the_input_and_keep_gradients_right():
    base = leaf(rnd(3, 4))
    h = base * 1.0
    out = F.silu(h, inplace=True)
    assert out is h
    out.sum().backward()
    x = base.detach().numpy()
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(base.grad.numpy(), s * (1 + x * (1 - s)), rtol=1e-12)
    h2 = const(rnd(3, 4))
    F.relu(h2, inplace=True)
    assert h2.numpy().min() >= 0.0


def test_softmax_method_takes_dtype_and_functional_keeps_pytorch_argument_order():
    x = const(rnd(2, 3), adcuda.float32)
    assert x.softmax(1, adcuda.float64).dtype is f64
    assert F.softmax(x, 1, 3).dtype is adcuda.float32  # the third positional is _stacklevel
    assert F.log_softmax(x, 1, dtype=f64).dtype is f64
    assert adcuda.softmax(x, 1, f64).dtype is f64  # torch.softmax(input, dim, dtype)


def test_reexports():
    x = const(rnd(2, 3))
    np.testing.assert_allclose(F.tanh(x).numpy(), np.tanh(x.numpy()))
    np.testing.assert_allclose(F.sigmoid(x).numpy(), 1 / (1 + np.exp(-x.numpy())))
    np.testing.assert_array_equal(F.one_hot(const(np.array([0, 2]))).numpy(), [[1, 0, 0], [0, 0, 1]])


# ------------------------------------------------------------------------------------------------
# bad inputs: the right exception class, and a message that names the op
ERROR_CASES = {
    "ce_float_class_index_target": (
        lambda: F.cross_entropy(const(rnd(3, 4)), const(np.array([0.0, 1, 2]))),
        DTypeError,
        "cross_entropy",
    ),
    "ce_bool_target": (
        lambda: F.cross_entropy(const(rnd(2, 4)), const(np.array([True, False]))),
        DTypeError,
        "cross_entropy",
    ),
    "ce_batch_mismatch": (
        lambda: F.cross_entropy(const(rnd(3, 4)), const(np.array([0, 1]))),
        ShapeError,
        "cross_entropy",
    ),
    "ce_probability_shape": (lambda: F.cross_entropy(const(rnd(3, 4)), const(rnd(3, 5))), ShapeError, "cross_entropy"),
    "ce_class_out_of_range": (
        lambda: F.cross_entropy(const(rnd(3, 4)), const(np.array([0, 4, 1]))),
        IndexOutOfRangeError,
        "cross_entropy: target 4 is out of bounds for 4 classes",
    ),
    "ce_negative_class": (
        lambda: F.cross_entropy(const(rnd(3, 4)), const(np.array([0, -1, 1]))),
        IndexOutOfRangeError,
        "target -1",
    ),
    "ce_weight_shape": (
        lambda: F.cross_entropy(const(rnd(3, 4)), const(np.array([0, 1, 1])), weight=const(np.ones(3))),
        ShapeError,
        "cross_entropy",
    ),
    "ce_reduction": (
        lambda: F.cross_entropy(const(rnd(3, 4)), const(np.array([0, 1, 1])), reduction="avg"),
        ValueError,
        "cross_entropy",
    ),
    "ce_label_smoothing": (
        lambda: F.cross_entropy(const(rnd(3, 4)), const(np.array([0, 1, 1])), label_smoothing=1.5),
        ValueError,
        "cross_entropy",
    ),
    "ce_ignore_index_with_probabilities": (
        lambda: F.cross_entropy(const(rnd(3, 4)), const(rnd(3, 4)), ignore_index=0),
        ValueError,
        "cross_entropy",
    ),
    "ce_integer_input": (
        lambda: F.cross_entropy(const(np.ones((3, 4), np.int64)), const(np.array([0, 1, 1]))),
        UnsupportedDTypeError,
        "cross_entropy",
    ),
    "nll_class_out_of_range": (
        lambda: F.nll_loss(const(rnd(3, 4)), const(np.array([0, 9, 1]))),
        IndexOutOfRangeError,
        "nll_loss: target 9",
    ),
    "mse_broadcast_changes_shape": (lambda: F.mse_loss(const(rnd(4, 1)), const(rnd(4))), ShapeError, "mse_loss"),
    "mse_incompatible": (lambda: F.mse_loss(const(rnd(4, 3)), const(rnd(5))), ShapeError, "mse_loss"),
    "mse_weight_shape": (
        lambda: F.mse_loss(const(rnd(4, 3)), const(rnd(4, 3)), weight=const(rnd(3))),
        ShapeError,
        "mse_loss",
    ),
    "l1_shape": (lambda: F.l1_loss(const(rnd(4, 1)), const(rnd(4))), ShapeError, "l1_loss"),
    "bce_shape": (
        lambda: F.binary_cross_entropy_with_logits(const(rnd(4, 3)), const(rnd(3))),
        ShapeError,
        "binary_cross_entropy_with_logits",
    ),
    "layer_norm_shape": (lambda: F.layer_norm(const(rnd(2, 3)), (4,)), ShapeError, "layer_norm"),
    "layer_norm_weight_shape": (
        lambda: F.layer_norm(const(rnd(2, 3)), (3,), weight=const(np.ones(4))),
        ShapeError,
        "layer_norm",
    ),
    "dropout_p_high": (lambda: F.dropout(const(rnd(2)), 1.2), ValueError, "dropout"),
    "dropout_p_negative": (lambda: F.dropout(const(rnd(2)), -0.1), ValueError, "dropout"),
    "embedding_out_of_range": (
        lambda: F.embedding(const(np.array([0, 7])), const(rnd(7, 2))),
        IndexOutOfRangeError,
        "embedding: index 7 is out of range for num_embeddings=7",
    ),
    "embedding_negative": (
        lambda: F.embedding(const(np.array([-1])), const(rnd(7, 2))),
        IndexOutOfRangeError,
        "embedding: index -1",
    ),
    "embedding_float_indices": (lambda: F.embedding(const(np.array([0.0])), const(rnd(7, 2))), DTypeError, "embedding"),
    "embedding_padding_idx": (
        lambda: F.embedding(const(np.array([0])), const(rnd(7, 2)), padding_idx=7),
        IndexOutOfRangeError,
        "embedding",
    ),
    "linear_features": (
        lambda: F.linear(const(rnd(2, 3)), const(rnd(4, 5))),
        ShapeError,
        "linear: input has 3 features",
    ),
    "linear_bias": (lambda: F.linear(const(rnd(2, 5)), const(rnd(4, 5)), const(rnd(3))), ShapeError, "linear"),
    "attention_causal_and_mask": (
        lambda: F.scaled_dot_product_attention(
            const(rnd(3, 2)), const(rnd(3, 2)), const(rnd(3, 2)), attn_mask=const(np.ones((3, 3), bool)), is_causal=True
        ),
        ValueError,
        "scaled_dot_product_attention",
    ),
    "attention_head_dims": (
        lambda: F.scaled_dot_product_attention(const(rnd(3, 2)), const(rnd(3, 4)), const(rnd(3, 2))),
        ShapeError,
        "scaled_dot_product_attention",
    ),
    "attention_mask_dtype": (
        lambda: F.scaled_dot_product_attention(
            const(rnd(3, 2)), const(rnd(3, 2)), const(rnd(3, 2)), attn_mask=const(np.ones((3, 3), np.int64))
        ),
        DTypeError,
        "scaled_dot_product_attention",
    ),
    "attention_mask_shape": (
        lambda: F.scaled_dot_product_attention(
            const(rnd(3, 2)), const(rnd(4, 2)), const(rnd(4, 2)), attn_mask=const(np.ones((2, 3, 4), bool))
        ),
        ShapeError,
        "scaled_dot_product_attention",
    ),
    "pad_odd_length": (lambda: F.pad(const(rnd(2, 3)), (1, 2, 3)), ShapeError, "pad"),
    "pad_reflect_too_wide": (lambda: F.pad(const(rnd(2, 3)), (3, 0), mode="reflect"), ShapeError, "pad"),
    "pad_mode": (lambda: F.pad(const(rnd(2, 3)), (1, 1), mode="mirror"), ValueError, "pad"),
    "softmax_without_dim": (lambda: F.softmax(const(rnd(2, 3))), TypeError, "softmax"),
}


@pytest.mark.parametrize("name", sorted(ERROR_CASES))
def test_bad_input_raises_a_clear_error(name):
    call, exc, fragment = ERROR_CASES[name]
    with pytest.raises(exc) as caught:
        call()
    assert fragment in str(caught.value)


# ------------------------------------------------------------------------------------------------
# comparison with PyTorch (optional oracle). A case is (make, arrays, needs_grad): ``make(module)``
# builds the function from a functional module (ours or torch's), applied to the float arrays.
TORCH_CASES = {
    "softmax": ((lambda f: lambda x: f.softmax(x, 1)), [rnd(4, 7)], [True]),
    "log_softmax": ((lambda f: lambda x: f.log_softmax(x, 0)), [rnd(5, 3)], [True]),
    "cross_entropy": ((lambda f: lambda x: f.cross_entropy(x, as_t(f, TARGET))), [rnd(5, 4)], [True]),
    "cross_entropy_smooth_weight_none": (
        (
            lambda f: (
                lambda x: f.cross_entropy(
                    x, as_t(f, TARGET), weight=as_t(f, WEIGHT, x), label_smoothing=0.15, reduction="none"
                )
            )
        ),
        [rnd(5, 4)],
        [True],
    ),
    "cross_entropy_smooth_weight_mean": (
        (lambda f: lambda x: f.cross_entropy(x, as_t(f, TARGET), weight=as_t(f, WEIGHT, x), label_smoothing=0.15)),
        [rnd(5, 4)],
        [True],
    ),
    "cross_entropy_spatial_ignore": (
        (lambda f: lambda x: f.cross_entropy(x, as_t(f, np.array([[0, 2, 1], [1, 1, 0]])), ignore_index=1)),
        [rnd(2, 3, 3)],
        [True],
    ),
    "cross_entropy_probabilities": (
        (lambda f: lambda x, p: f.cross_entropy(x, p, label_smoothing=0.1, reduction="sum")),
        [rnd(3, 4), np.random.default_rng(1).random((3, 4))],
        [True, True],
    ),
    "nll_loss": ((lambda f: lambda x: f.nll_loss(x, as_t(f, TARGET), weight=as_t(f, WEIGHT, x))), [rnd(5, 4)], [True]),
    "mse_loss": ((lambda f: lambda x, y: f.mse_loss(x, y)), [rnd(3, 4), rnd(3, 4, seed=1)], [True, True]),
    "mse_loss_weight": (
        (lambda f: lambda x, y, w: f.mse_loss(x, y, weight=w)),
        [rnd(3, 4), rnd(3, 4, seed=1), np.random.default_rng(2).random((3, 4))],
        [True, True, False],
    ),
    "l1_loss_weight_sum": (
        (lambda f: lambda x, y, w: f.l1_loss(x, y, weight=w, reduction="sum")),
        [rnd(3, 4), rnd(3, 4, seed=1), np.random.default_rng(2).random((3, 4))],
        [True, True, False],
    ),
    "bce_with_logits": (
        (lambda f: lambda x, t, w, pw: f.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw)),
        [
            rnd(3, 4, scale=4),
            np.random.default_rng(1).random((3, 4)),
            np.random.default_rng(2).random(4),
            np.array([0.5, 1.0, 2.0, 3.0]),
        ],
        [True, True, False, False],
    ),
    "softplus": ((lambda f: lambda x: f.softplus(x, beta=1.5, threshold=3.0)), [rnd(3, 5, scale=3)], [True]),
    "logsigmoid": ((lambda f: lambda x: f.logsigmoid(x)), [rnd(3, 5, scale=5)], [True]),
    "layer_norm": (
        (lambda f: lambda x, w, b: f.layer_norm(x, (3, 4), w, b, 1e-3)),
        [rnd(2, 3, 4), rnd(3, 4, seed=1), rnd(3, 4, seed=2)],
        [True, True, True],
    ),
    "embedding": (
        (lambda f: lambda w: f.embedding(as_t(f, np.array([[1, 2, 2], [0, 4, 1]])), w, padding_idx=2)),
        [rnd(5, 3)],
        [True],
    ),
    "embedding_scale_grad_by_freq": (
        (lambda f: lambda w: f.embedding(as_t(f, np.array([[1, 2, 2], [0, 2, 1]])), w, scale_grad_by_freq=True)),
        [rnd(5, 3)],
        [True],
    ),
    "linear": (
        (lambda f: lambda x, w, b: f.linear(x, w, b)),
        [rnd(2, 3, 4), rnd(5, 4, seed=1), rnd(5, seed=2)],
        [True, True, True],
    ),
    "attention": (
        (lambda f: lambda q, k, v: f.scaled_dot_product_attention(q, k, v)),
        [rnd(2, 2, 3, 8), rnd(2, 2, 5, 8, seed=1), rnd(2, 2, 5, 4, seed=2)],
        [True] * 3,
    ),
    "attention_causal_rectangular": (
        (lambda f: lambda q, k, v: f.scaled_dot_product_attention(q, k, v, is_causal=True)),
        [rnd(2, 4, 8), rnd(2, 6, 8, seed=1), rnd(2, 6, 4, seed=2)],
        [True] * 3,
    ),
    "attention_bool_mask_empty_row": (
        (lambda f: lambda q, k, v: f.scaled_dot_product_attention(q, k, v, attn_mask=as_t(f, KEEP))),
        [rnd(2, 3, 8), rnd(2, 5, 8, seed=1), rnd(2, 5, 4, seed=2)],
        [True] * 3,
    ),
    "attention_float_mask": (
        (lambda f: lambda q, k, v, m: f.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.5)),
        [rnd(2, 3, 8), rnd(2, 5, 8, seed=1), rnd(2, 5, 4, seed=2), rnd(1, 3, 5, seed=3)],
        [True] * 3 + [False],
    ),
    "pad_constant": ((lambda f: lambda x: f.pad(x, (1, -1, 2, 0), value=1.5)), [rnd(2, 3, 4)], [True]),
    "pad_reflect": ((lambda f: lambda x: f.pad(x, (2, 1), mode="reflect")), [rnd(2, 3, 4)], [True]),
    "pad_replicate": ((lambda f: lambda x: f.pad(x, (1, 2, 2, 1), mode="replicate")), [rnd(1, 3, 4)], [True]),
    "normalize": ((lambda f: lambda x: f.normalize(x, p=2.0, dim=0)), [rnd(3, 4)], [True]),
    "gelu": ((lambda f: lambda x: f.gelu(x)), [rnd(3, 4)], [True]),
    "leaky_relu": ((lambda f: lambda x: f.leaky_relu(x, 0.1)), [rnd(3, 4)], [True]),
}


def as_t(module, array, like=None):
    """An index or weight array as a tensor of the module's library (dtype of ``like`` for floats)."""
    if module is F:
        return const(array, like.dtype if like is not None else None)
    import torch

    t = torch.as_tensor(array)
    return t.to(like.dtype) if like is not None else t


def _run_both(torch, name, np_dtype, adcuda_dtype, torch_dtype, with_grad):
    make, arrays, grads = TORCH_CASES[name]
    arrays = [a.astype(np_dtype) for a in arrays]
    ours = [adcuda.tensor(a, dtype=adcuda_dtype, requires_grad=with_grad and g) for a, g in zip(arrays, grads)]
    theirs = [torch.tensor(a, dtype=torch_dtype, requires_grad=with_grad and g) for a, g in zip(arrays, grads)]
    return make(F)(*ours), make(torch.nn.functional)(*theirs), ours, theirs, grads


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(TORCH_CASES))
def test_matches_torch(name, dtype):
    torch = pytest.importorskip("torch")
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=2e-6)
    out, ref, ours, theirs, grads = _run_both(
        torch, name, np.float64, getattr(adcuda, dtype), getattr(torch, dtype), True
    )
    assert out.dtype is getattr(adcuda, dtype)
    assert tuple(out.shape) == tuple(ref.shape)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), **tol)
    seed = rnd(*ref.shape, seed=9) if ref.ndim else np.array(1.3)
    (out * adcuda.tensor(seed, dtype=out.dtype)).sum().backward()
    (ref * torch.tensor(seed, dtype=ref.dtype)).sum().backward()
    for a, b, g in zip(ours, theirs, grads):
        if g:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)


_HALF_CASES = [
    "softmax",
    "log_softmax",
    "cross_entropy",
    "cross_entropy_smooth_weight_mean",
    "mse_loss",
    "bce_with_logits",
    "softplus",
    "layer_norm",
    "embedding",
    "linear",
    "attention",
    "attention_bool_mask_empty_row",
    "pad_constant",
    "gelu",
]


@pytest.mark.parametrize("name", _HALF_CASES)
def test_float16_forward_is_close_to_a_float32_reference(name):
    torch = pytest.importorskip("torch")
    # the reference computes in float32 on the same float16-rounded inputs
    out, ref, _, _, _ = _run_both(torch, name, np.float16, adcuda.float16, torch.float32, False)
    assert out.dtype is adcuda.float16
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.numpy(), rtol=4e-3, atol=4e-3)
