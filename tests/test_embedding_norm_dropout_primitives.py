"""The CPU backend's embedding, embedding_backward, global_norm, dropout and dropout_backward
primitives against plain NumPy (the CPU backend is the oracle the CUDA kernels are tested against,
tests/test_cuda_embedding_norm_dropout.py), and the ops built on them: F.embedding, F.dropout and
nn.utils.clip_grad_norm_.
"""

import importlib
import math

import numpy as np
import pytest

import adcuda
import adcuda.nn.functional as F
from adcuda import nn
from adcuda.backends import cpu
from adcuda.errors import DTypeError, IndexOutOfRangeError, ShapeError


def rng(seed=0):
    return np.random.default_rng(seed)


# =============================================================================================
# embedding
@pytest.mark.parametrize("dtype", (np.float16, np.float32, np.float64))
@pytest.mark.parametrize("index_dtype", (np.int32, np.int64))
@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (3, 5), (2, 0, 4)])
def test_embedding_picks_rows(dtype, index_dtype, shape):
    weight = rng(1).standard_normal((11, 6)).astype(dtype)
    idx = rng(2).integers(0, 11, shape).astype(index_dtype)
    out = cpu.embedding(weight, idx)
    assert out.shape == shape + (6,) and out.dtype == weight.dtype
    np.testing.assert_array_equal(out, weight[idx.reshape(-1)].reshape(shape + (6,)))
    out[...] = 0  # a copy, never a view of the weight
    assert np.abs(weight).sum() > 0


@pytest.mark.parametrize("bad", [-1, 11, 1 << 40])
def test_embedding_out_of_range_names_op_index_and_size(bad):
    weight = np.zeros((11, 3), np.float32)
    idx = np.array([[0, 3], [bad, 10]])
    with pytest.raises(IndexOutOfRangeError, match=rf"embedding: index {bad} .*num_embeddings=11"):
        cpu.embedding(weight, idx)


def test_embedding_rejects_bad_arguments():
    with pytest.raises(DTypeError, match="integers"):
        cpu.embedding(np.zeros((3, 2), np.float32), np.array([0.0, 1.0]))
    with pytest.raises(ShapeError, match="2-D"):
        cpu.embedding(np.zeros(3, np.float32), np.array([0]))


def sequential_backward(grad, idx, num_embeddings, padding_idx, scale_grad_by_freq, acc=np.float32):
    """The plain definition: one index after the other, each added into its row in ``acc``."""
    dim = grad.shape[-1]
    rows = grad.reshape(-1, dim).astype(acc)
    out = np.zeros((num_embeddings, dim), acc)
    counts = np.zeros(num_embeddings, np.int64)
    for i, k in enumerate(idx.reshape(-1)):
        if k == padding_idx:
            continue
        counts[k] += 1
        for c in range(dim):
            out[k, c] = acc(out[k, c] + rows[i, c])
    if scale_grad_by_freq:
        for k in range(num_embeddings):
            if counts[k]:
                out[k] = out[k] / acc(counts[k])
    return out.astype(grad.dtype)


# (the module: adcuda.backends.cpu's package namespace binds the name to the function)
cpu_embedding = importlib.import_module("adcuda.backends.cpu.embedding")


@pytest.fixture(params=["host", "numpy"])
def summing(request, monkeypatch):
    """Each test below on both paths of the sequential sum: the host module's index_add loop and the
    NumPy grouping by occurrence (int32 indices and pure-source checkouts take it)."""
    if request.param == "numpy":
        monkeypatch.setattr(cpu_embedding, "_native_index_along", None)
    elif cpu_embedding._native_index_along is None:
        pytest.skip("the host module was built without kernels/host/index.cpp")
    return request.param


@pytest.mark.parametrize("dtype, acc", [(np.float32, np.float32), (np.float16, np.float32), (np.float64, np.float64)])
@pytest.mark.parametrize("padding_idx", (None, 2))
@pytest.mark.parametrize("scale_grad_by_freq", (False, True))
def test_embedding_backward_is_the_sequential_sum(dtype, acc, padding_idx, scale_grad_by_freq, summing):
    g = rng(3)
    idx = g.integers(0, 7, (9, 13))  # 117 indices into 7 rows: long runs of repeats
    # values of mixed magnitude, so that the order of the additions shows in the last bits
    grad = (g.standard_normal((9, 13, 5)) * 10.0 ** g.integers(-3, 4, (9, 13, 5))).astype(dtype)
    got = cpu.embedding_backward(grad, idx, 8, padding_idx, scale_grad_by_freq)
    expected = sequential_backward(grad, idx, 8, padding_idx, scale_grad_by_freq, acc)
    assert got.dtype == grad.dtype and got.shape == (8, 5)
    np.testing.assert_array_equal(got, expected)  # bit for bit
    np.testing.assert_array_equal(got[7], 0.0)  # never looked up
    if padding_idx is not None:
        np.testing.assert_array_equal(got[padding_idx], 0.0)
    again = cpu.embedding_backward(grad, idx, 8, padding_idx, scale_grad_by_freq)
    np.testing.assert_array_equal(again, got)


@pytest.mark.parametrize("dtype", (np.float32, np.float64))
def test_embedding_backward_with_uneven_counts_and_negative_zeros_is_the_sequential_sum(dtype, summing):
    # indices from once to 40 times each, in no order, so that the occurrence layers hold different
    # sets of rows; some rows all -0.0 (a sum from 0 is +0.0), others mixing -0.0 with values
    g = rng(5)
    idx = g.permutation(np.repeat(np.arange(12), [1, 40, 2, 9, 1, 17, 3, 3, 25, 1, 6, 11]))
    grad = (g.standard_normal((idx.size, 4)) * 10.0 ** g.integers(-6, 7, (idx.size, 4))).astype(dtype)
    grad[g.random(grad.shape) < 0.3] = -0.0
    grad[idx == 0] = -0.0
    got = cpu.embedding_backward(grad, idx, 13, None, False)
    expected = sequential_backward(grad, idx, 13, None, False, dtype)
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))  # bit for bit, signs of 0


def test_embedding_backward_of_an_index_repeated_past_the_pass_limit_is_sequential_too(summing):
    # 200 occurrences of index 1: beyond the per-occurrence passes, the element-by-element scatter
    g = rng(4)
    idx = np.r_[np.ones(200, np.int64), g.integers(0, 5, 30)]
    grad = (g.standard_normal((230, 3)) * 10.0 ** g.integers(-3, 4, (230, 3))).astype(np.float32)
    got = cpu.embedding_backward(grad, idx, 5, None, False)
    np.testing.assert_array_equal(got, sequential_backward(grad, idx, 5, None, False, np.float32))


def test_embedding_backward_order_is_observable():
    """The data above is one where summing in another order changes the last bits, so the
    bit-for-bit comparison fails if the primitive does not sum in index order."""
    g = rng(3)
    idx = g.integers(0, 7, (9, 13)).reshape(-1)
    grad = (g.standard_normal((9, 13, 5)) * 10.0 ** g.integers(-3, 4, (9, 13, 5))).astype(np.float32).reshape(-1, 5)
    forward = sequential_backward(grad, idx, 8, None, False)
    backward = sequential_backward(grad[::-1], idx[::-1], 8, None, False)
    assert (forward != backward).any()


def test_embedding_backward_counts_and_padding_closed_form():
    idx = np.array([1, 1, 3, 0, 1])
    grad = np.ones((5, 2), np.float32)
    np.testing.assert_array_equal(cpu.embedding_backward(grad, idx, 5, None, False)[:, 0], [1, 3, 0, 1, 0])
    np.testing.assert_array_equal(cpu.embedding_backward(grad, idx, 5, None, True)[:, 0], [1, 1, 0, 1, 0])
    np.testing.assert_array_equal(cpu.embedding_backward(grad, idx, 5, 1, True)[:, 0], [1, 0, 0, 1, 0])


def test_embedding_backward_empty_and_errors():
    out = cpu.embedding_backward(np.zeros((0, 4), np.float32), np.zeros(0, np.int64), 3, None, True)
    np.testing.assert_array_equal(out, np.zeros((3, 4), np.float32))
    with pytest.raises(ShapeError, match="embedding_backward"):
        cpu.embedding_backward(np.zeros((2, 4), np.float32), np.zeros(3, np.int64), 3, None, False)
    with pytest.raises(IndexOutOfRangeError, match="embedding_backward: index 3 .*num_embeddings=3"):
        cpu.embedding_backward(np.zeros((2, 4), np.float32), np.array([0, 3]), 3, None, False)


# =============================================================================================
# global_norm
def reference_norm(arrays, p):
    flat = np.concatenate([np.asarray(a, np.float64).reshape(-1) for a in arrays] + [np.zeros(0)])
    if flat.size == 0:
        return 0.0
    if p == math.inf:
        return np.abs(flat).max()
    return np.sum(np.abs(flat) ** p) ** (1.0 / p)


@pytest.mark.parametrize("p", (2.0, 1.0, math.inf, 3.0, 0.5))
def test_global_norm_is_the_norm_of_the_concatenation(p):
    g = rng(5)
    arrays = [g.standard_normal(s).astype(np.float32) for s in [(3, 4), (1,), (0,), (1023,), (2, 7, 7)]]
    got = cpu.global_norm(arrays, p)
    assert got.shape == () and got.dtype == np.float32
    np.testing.assert_allclose(float(got), reference_norm(arrays, p), rtol=1e-5)
    np.testing.assert_array_equal(cpu.global_norm(arrays, p), got)  # deterministic
    half = [a.astype(np.float16) for a in arrays]
    assert cpu.global_norm(half, p).dtype == np.float32
    np.testing.assert_allclose(float(cpu.global_norm(half, p)), reference_norm(half, p), rtol=1e-5)


def test_global_norm_is_float64_when_any_array_is():
    arrays = [np.full(3, 1.0, np.float32), np.array([1e-9, 2.0])]
    got = cpu.global_norm(arrays, 2.0)
    assert got.dtype == np.float64
    assert float(got) == pytest.approx(math.sqrt(3 + 1e-18 + 4), rel=1e-15)


def test_global_norm_accumulates_half_in_float32():
    arrays = [np.full(4, 60000.0, np.float16)]  # the squares overflow float16
    assert float(cpu.global_norm(arrays, 2.0)) == pytest.approx(120000.0, rel=1e-6)


def test_global_norm_empty_is_zero():
    for p in (2.0, math.inf, 3.0):
        assert float(cpu.global_norm([], p)) == 0.0
        assert float(cpu.global_norm([np.zeros((0, 3), np.float32)], p)) == 0.0


@pytest.mark.parametrize("p", (2.0, 1.0, math.inf, 3.0))
def test_global_norm_propagates_inf_and_nan(p):
    finite = np.ones(5, np.float32)
    with_inf = np.array([1.0, -np.inf], np.float32)
    with_nan = np.array([np.nan, 1.0], np.float32)
    assert math.isinf(float(cpu.global_norm([finite, with_inf], p)))
    assert math.isnan(float(cpu.global_norm([with_nan, finite], p)))
    assert math.isnan(float(cpu.global_norm([with_inf, with_nan], p)))


def test_global_norm_rejects_bad_arguments():
    for p in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="norm_type"):
            cpu.global_norm([np.ones(2, np.float32)], p)
    with pytest.raises(DTypeError, match="floating"):
        cpu.global_norm([np.ones(2, np.int64)], 2.0)


# =============================================================================================
# dropout
@pytest.mark.parametrize("dtype", (np.float16, np.float32, np.float64))
@pytest.mark.parametrize("shape", [(), (1,), (7,), (33, 31)])
def test_dropout_mask_is_the_bernoulli_draw_and_out_is_scaled(dtype, shape):
    x = rng(6).standard_normal(shape).astype(dtype)
    out, mask = cpu.dropout(x, 0.3, 1234, 77)
    assert mask.dtype == np.bool_ and mask.shape == shape and out.dtype == x.dtype
    np.testing.assert_array_equal(mask, cpu.bernoulli(shape, 1.0 - 0.3, adcuda.bool, 1234, 77))
    acc = np.float64 if dtype == np.float64 else np.float32
    expected = (x.astype(acc) * np.where(mask, acc(1 / 0.7), acc(0))).astype(dtype)
    np.testing.assert_array_equal(out, expected)
    again, mask_again = cpu.dropout(x, 0.3, 1234, 77)
    np.testing.assert_array_equal(again, out)
    np.testing.assert_array_equal(mask_again, mask)
    g = rng(7).standard_normal(shape).astype(dtype)
    np.testing.assert_array_equal(
        cpu.dropout_backward(g, mask, 1 / 0.7), (g.astype(acc) * np.where(mask, acc(1 / 0.7), acc(0))).astype(dtype)
    )


def test_dropout_depends_on_seed_and_offset_and_drops_about_p():
    x = np.ones((100, 100), np.float32)
    _, a = cpu.dropout(x, 0.25, 1, 0)
    _, b = cpu.dropout(x, 0.25, 1, 10000)
    _, c = cpu.dropout(x, 0.25, 2, 0)
    assert (a != b).any() and (a != c).any()
    assert abs(a.mean() - 0.75) < 0.02


def test_dropout_edge_probabilities_and_non_finite_values():
    x = np.array([1.0, np.nan, np.inf, -2.0], np.float32)
    out, mask = cpu.dropout(x, 0.0, 3, 0)
    assert mask.all()
    np.testing.assert_array_equal(out, x)
    out, mask = cpu.dropout(x, 1.0, 3, 0)
    assert not mask.any()
    np.testing.assert_array_equal(out, [0.0, np.nan, np.nan, -0.0])  # x * 0, as PyTorch's x * mask * scale
    with pytest.raises(ValueError, match="between 0 and 1"):
        cpu.dropout(x, 1.5, 3, 0)
    with pytest.raises(DTypeError, match="floating"):
        cpu.dropout(np.ones(3, np.int64), 0.5, 3, 0)


# =============================================================================================
# the ops on top
def test_f_embedding_checks_bounds_through_the_primitive_only(monkeypatch):
    """No host round trip of its own: the bound check is the primitive's (on a GPU, its one sync)."""
    weight = adcuda.tensor(rng(8).standard_normal((6, 3)), requires_grad=True)
    idx = adcuda.tensor([[1, 5], [5, 0]])

    def no_host_copy(a):
        raise AssertionError("embedding read an array back to the host")

    monkeypatch.setattr(cpu, "to_numpy", no_host_copy)
    out = F.embedding(idx, weight, padding_idx=5)
    out.sum().backward()
    monkeypatch.undo()
    np.testing.assert_array_equal(weight.grad.numpy()[:, 0], [1, 1, 0, 0, 0, 0])
    with pytest.raises(IndexOutOfRangeError, match=r"embedding: index 6 .*num_embeddings=6"):
        F.embedding(adcuda.tensor([0, 6]), weight)
    with pytest.raises(IndexOutOfRangeError, match=r"index -1 "):
        F.embedding(adcuda.tensor([-1]), weight)


def test_f_embedding_backward_uses_the_fused_primitive_and_max_norm_still_checks(monkeypatch):
    calls = []
    original = cpu.embedding_backward
    monkeypatch.setattr(cpu, "embedding_backward", lambda *a: calls.append(a[2:]) or original(*a))
    weight = adcuda.tensor(rng(9).standard_normal((4, 2)), requires_grad=True)
    F.embedding(adcuda.tensor([1, 1, 3, 0]), weight, scale_grad_by_freq=True).sum().backward()
    assert calls == [(4, None, True)]
    np.testing.assert_array_equal(weight.grad.numpy()[:, 0], [1.0, 1.0, 0.0, 1.0])
    with pytest.raises(IndexOutOfRangeError, match="embedding: index 4"):
        F.embedding(adcuda.tensor([4]), weight.detach(), max_norm=1.0)


def test_f_embedding_double_backward_composite():
    weight = adcuda.tensor(rng(10).standard_normal((5, 3)), requires_grad=True)
    idx = adcuda.tensor([[1, 0, 4], [4, 4, 2]])
    out = F.embedding(idx, weight, padding_idx=2, scale_grad_by_freq=True)
    (g,) = adcuda.autograd.grad((out * out).sum(), weight, create_graph=True)
    expected = cpu.embedding_backward(2 * out.detach().numpy(), idx.numpy(), 5, 2, True)
    np.testing.assert_allclose(g.detach().numpy(), expected, rtol=1e-12)
    (gg,) = adcuda.autograd.grad(g.sum(), weight)
    # g_k = 2 w_k for a looked-up row k; its gradient flows back through the lookup, which divides by
    # the count again: 2 / count_k (row 4 is looked up 3 times; row 2 is padding, row 3 never used)
    np.testing.assert_allclose(gg.numpy()[:, 0], [2.0, 2.0, 0.0, 0.0, 2.0 / 3.0], rtol=1e-12)


def test_f_dropout_draws_what_bernoulli_mask_drew():
    """Fusing the draw changed nothing a seeded program sees: the same mask from the same generator
    state, and the generator left where the two-step version left it."""
    from adcuda.factories import bernoulli_mask

    x = adcuda.tensor(rng(11).standard_normal((37, 29)), dtype=adcuda.float32)
    adcuda.manual_seed(21)
    keep = bernoulli_mask(tuple(x.shape), 1.0 - 0.4, adcuda.float32, "cpu")
    expected = (x * (keep * (1.0 / 0.6))).numpy()
    after_two_step = adcuda.rand(3).numpy()
    adcuda.manual_seed(21)
    np.testing.assert_array_equal(F.dropout(x, 0.4).numpy(), expected)
    np.testing.assert_array_equal(adcuda.rand(3).numpy(), after_two_step)


def test_f_dropout_backward_reuses_the_saved_mask(monkeypatch):
    x = adcuda.ones(50, 40, requires_grad=True)
    adcuda.manual_seed(4)
    out = F.dropout(x, 0.5)
    kept = out.detach().numpy() != 0

    def redraw(*args):
        raise AssertionError("dropout's backward drew random numbers")

    monkeypatch.setattr(cpu, "dropout", redraw)
    monkeypatch.setattr(cpu, "bernoulli", redraw)
    monkeypatch.setattr(cpu, "rand", redraw)
    assert out.grad_fn.name == "NativeDropoutBackward0"
    out.backward(adcuda.full((50, 40), 3.0))
    np.testing.assert_array_equal(x.grad.numpy(), np.where(kept, 6.0, 0.0))


def test_f_dropout_create_graph_gives_the_same_gradient():
    x = adcuda.tensor(rng(12).standard_normal((6, 5)), requires_grad=True)
    adcuda.manual_seed(9)
    out = F.dropout(x, 0.3)
    kept = out.detach().numpy() != 0
    (fused,) = adcuda.autograd.grad((out * out).sum(), x, retain_graph=True)
    (composite,) = adcuda.autograd.grad((out * out).sum(), x, create_graph=True)
    np.testing.assert_array_equal(composite.detach().numpy(), fused.numpy())
    (second,) = adcuda.autograd.grad(composite.sum(), x)
    # d/dx of 2 * x * (mask * scale)^2
    np.testing.assert_allclose(second.numpy(), np.where(kept, 2.0 / 0.7**2, 0.0), rtol=1e-12)


def test_clip_grad_norm_makes_one_global_norm_call(monkeypatch):
    calls = []
    original = cpu.global_norm
    monkeypatch.setattr(cpu, "global_norm", lambda arrays, p: calls.append(len(arrays)) or original(arrays, p))
    g = rng(14)
    params = [nn.Parameter(adcuda.zeros(*s)) for s in [(3, 4), (5,), (0,), (2, 2, 2)]]
    grads = [g.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,), (0,), (2, 2, 2)]]
    for p, grad in zip(params, grads):
        p.grad = adcuda.tensor(grad)
    total = nn.utils.clip_grad_norm_(params, 0.5, norm_type=3.0)
    assert calls == [4]
    expected = reference_norm(grads, 3.0)
    assert float(total) == pytest.approx(expected, rel=1e-5)
    for p, grad in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), grad * (0.5 / (expected + 1e-6)), rtol=1e-5)


def test_clip_grad_norm_errors_and_empty():
    p = nn.Parameter(adcuda.zeros(2))
    p.grad = adcuda.tensor([math.inf, 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    total = nn.utils.clip_grad_norm_([p], 1.0)  # no error asked for: scaled by the inf norm
    assert math.isinf(float(total))
    with pytest.raises(ValueError, match="norm_type"):
        nn.utils.clip_grad_norm_([p], 1.0, norm_type=0)
    assert float(nn.utils.clip_grad_norm_([nn.Parameter(adcuda.zeros(2))], 1.0)) == 0.0
