"""scaled_dot_product_attention's plain case (ops/attention.py ``_plain``): CPU float32/float64 query,
key and value of one batch shape that take no part in a graph, no mask, dropout or grouped heads and no
hook attached call the fused primitive at once; the result is the general path's, bit for bit, and every
other call takes that path (checks, broadcasting, recording). The CPU primitive's host forward for small
calls without mask or dropout (kernels/host/attention.cpp), and its softmax between BLAS's products for
larger ones, forward and backward, in both builds, against the NumPy reference."""

import importlib

import numpy as np
import pytest
from helpers import general_path, native_and_numpy

import adcuda
import adcuda.nn.functional as F
from adcuda.errors import AdcudaError

# (the module: adcuda.backends.cpu's package namespace binds the name to the function)
cpu_attention = importlib.import_module("adcuda.backends.cpu.attention")


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float64])
def test_the_plain_case_gives_what_the_general_path_gives(dtype):
    rng = np.random.default_rng(6)
    q, k = (adcuda.tensor(rng.standard_normal((2, 3, 4, 5)), dtype=dtype) for _ in range(2))
    k6 = adcuda.tensor(rng.standard_normal((2, 3, 6, 5)), dtype=dtype)
    v6 = adcuda.tensor(rng.standard_normal((2, 3, 6, 7)), dtype=dtype)
    for args, kwargs in (
        ((q, k, k), {}),
        ((q, k6, v6), {}),
        ((q, k6, v6), {"is_causal": True}),
        ((q, k, k), {"scale": 0.25}),
        ((q.mT.contiguous().mT, k, k), {}),
    ):
        fast = F.scaled_dot_product_attention(*args, **kwargs)
        general, seen = general_path(lambda args=args, kwargs=kwargs: F.scaled_dot_product_attention(*args, **kwargs))
        assert seen and fast.dtype == general.dtype == dtype and fast.shape == general.shape
        np.testing.assert_array_equal(fast.numpy(), general.numpy(), strict=True)


def test_other_calls_take_the_path():
    q = adcuda.ones(2, 4, 5)
    leaf = adcuda.ones(2, 4, 5, requires_grad=True)
    for args in ((leaf, q, q), (q, leaf, q), (q, q, leaf), (q, leaf[:], q)):
        out = F.scaled_dot_product_attention(*args)
        assert out.grad_fn is not None
    broadcast = F.scaled_dot_product_attention(adcuda.ones(3, 2, 4, 5), q, q)  # batch dims broadcast
    assert broadcast.shape == (3, 2, 4, 5)
    assert F.scaled_dot_product_attention(q, q[:, :0], q[:, :0]).shape == (2, 4, 5)  # no keys: zeros
    with pytest.raises(AdcudaError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(q, adcuda.ones(2, 4, 3), q)
    with pytest.raises(AdcudaError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(q, q.double(), q)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(
    "shapes",
    [
        ((2, 2, 8, 8), (2, 2, 8, 8), (2, 2, 8, 8)),
        ((3, 5, 4), (3, 7, 4), (3, 7, 6)),  # L < S, Ev != E
        ((4, 3), (2, 3), (2, 1)),  # L > S: causal rows past the keys see them all
        ((1, 1), (1, 1), (1, 3)),
        ((2, 0, 3), (2, 4, 3), (2, 4, 5)),  # no queries
    ],
)
def test_the_host_forward_matches_numpy(monkeypatch, dtype, is_causal, shapes):
    """kernels/host/attention.cpp against the NumPy path, its reference: output and logsumexp, a NaN,
    +inf and -inf query element each poisoning its row as NumPy's formulas do."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal(s).astype(dtype) * 3 for s in shapes)
    for poison in (None, np.nan, np.inf, -np.inf):
        qq = q.copy()
        if poison is not None and qq.size:
            qq.reshape(-1)[0] = poison
        with np.errstate(all="ignore"):  # (the reference's log(0) and inf - inf of poisoned rows)
            (out, lse), (out_ref, lse_ref) = native_and_numpy(
                monkeypatch, cpu_attention, cpu_attention.attention, qq, k, v, None, is_causal, 0.35
            )
        for got, want in ((out, out_ref), (lse, lse_ref)):
            assert got.dtype == want.dtype == dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=2e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_the_host_forward_takes_only_what_it_computes(monkeypatch):
    """Masks, dropout, mixed dtypes, broadcast batch dims and large products go to NumPy (BLAS); strided
    arrays to the host module (copied), as a captured replay's views of what its eager run copied."""
    calls = []
    native = cpu_attention._NATIVE

    class Spy:
        def cpu_attention(self, *args):
            calls.append(args)
            return native.cpu_attention(*args)

        def __getattr__(self, name):  # (the larger calls' softmax: test_the_host_softmax_matches_numpy)
            return getattr(native, name)

    monkeypatch.setattr(cpu_attention, "_NATIVE", Spy())
    q = np.ones((2, 4, 5), np.float32)
    cpu_attention.attention(q, q, q, None, False, 0.5)
    strided = q.transpose(0, 2, 1).copy().transpose(0, 2, 1)
    out, _ = cpu_attention.attention(strided, q, q, None, False, 0.5)
    assert len(calls) == 2 and out.tobytes() == cpu_attention.attention(q, q, q, None, False, 0.5)[0].tobytes()
    big = np.ones((2, 128, 64), np.float32)
    for args in (
        (q, q, q, np.ones((4, 4), bool), False, 0.5),
        (q, q, q, None, False, 0.5, 0.5, 1, 0),  # dropout
        (q, q.astype(np.float64), q, None, False, 0.5),
        (np.ones((3, 2, 4, 5), np.float32), q, q, None, False, 0.5),
        (big, big, big, None, False, 0.5),
    ):
        cpu_attention.attention(*args)
    assert len(calls) == 3


_BUILDS = [False, True] if cpu_attention._NATIVE is not None and cpu_attention._NATIVE.host_has_avx2() else [False]
# (L, S, E, Ev): more work than the host forward takes, rows longer and shorter than the keys, lengths
# that leave tails of every size past the AVX2 build's eight lanes
_LARGER = [(40, 37, 16, 9), (33, 64, 24, 24), (70, 13, 8, 5)]


def _qkv(rng, dtype, L, S, E, Ev, batch=(2, 3)):
    q, k, v = (rng.standard_normal(batch + shape).astype(dtype) * 2 for shape in ((L, E), (S, E), (S, Ev)))
    assert q.size * S + L * v.size > cpu_attention._NATIVE_WORK  # (not the small calls' host forward)
    return q, k, v


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("avx2", _BUILDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("sizes", _LARGER)
def test_the_host_softmax_matches_numpy(monkeypatch, fused, avx2, dtype, is_causal, sizes):
    """Larger calls: the host module's scores and softmax (cpu_attention_scores_softmax_, small heads) or
    BLAS's scores made probabilities by it (cpu_attention_softmax_) against the NumPy path: output and
    logsumexp, a NaN, +inf and -inf query element each poisoning its row as NumPy's formulas do; the
    backward's gradients (cpu_attention_softmax_backward_), with the forward's probabilities kept or
    computed again, which are the same bit for bit."""
    monkeypatch.setattr(cpu_attention, "_SOFTMAX_AVX2", avx2)
    if not fused:
        monkeypatch.setattr(cpu_attention, "_FUSED_WIDTH", 0)
    rng = np.random.default_rng(8)
    q, k, v = _qkv(rng, dtype, *sizes)
    # (float32: scores summed in another order than BLAS's, then exp'd)
    tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for poison in (None, np.nan, np.inf, -np.inf):
        qq = q.copy()
        if poison is not None:
            qq[1, 2, 3, 0] = poison
        with np.errstate(all="ignore"):
            (out, lse), (out_ref, lse_ref) = native_and_numpy(
                monkeypatch, cpu_attention, cpu_attention.attention, qq, k, v, None, is_causal, 0.3
            )
        for got, want in ((out, out_ref), (lse, lse_ref)):
            assert got.dtype == want.dtype == dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, **tolerance)
    g = rng.standard_normal(out.shape).astype(dtype)
    out, lse = cpu_attention.attention(q, k, v, None, is_causal, 0.3)
    grads, grads_ref = native_and_numpy(
        monkeypatch, cpu_attention, cpu_attention.attention_backward, g, q, k, v, out, lse, None, is_causal, 0.3
    )
    for got, want in zip(grads, grads_ref):  # (sums of terms of either sign, rounded in another order)
        assert got.dtype == want.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tolerance["rtol"] * 5, atol=tolerance["atol"] * 20)
    probs = np.empty(q.shape[:-1] + k.shape[-2:-1], dtype)
    kept_out, kept_lse = cpu_attention.attention(q, k, v, None, is_causal, 0.3, probs=probs)
    assert kept_out.tobytes() == out.tobytes() and kept_lse.tobytes() == lse.tobytes()
    kept = cpu_attention.attention_backward(g, q, k, v, out, lse, None, is_causal, 0.3, probs=probs)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(kept, grads))


def test_the_host_softmax_takes_strided_gradients_and_only_its_calls(monkeypatch):
    """The backward reads g and the output through their strides (a replay's views); masks, dropout and
    broadcast batch dims keep the NumPy path; wide heads take BLAS's scores."""
    rng = np.random.default_rng(9)
    q, k, v = _qkv(rng, np.float32, 33, 64, 24, 24)
    out, lse = cpu_attention.attention(q, k, v, None, True, 0.2)
    g = rng.standard_normal(out.shape[:-2] + out.shape[-1:] + out.shape[-2:-1]).astype(np.float32)
    strided_g, strided_out = g.swapaxes(-1, -2), np.asfortranarray(out)
    got = cpu_attention.attention_backward(strided_g, q, k, v, strided_out, lse, None, True, 0.2)
    want = cpu_attention.attention_backward(strided_g.copy(), q, k, v, out, lse, None, True, 0.2)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
    calls = []
    native = cpu_attention._NATIVE

    class Spy:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(native, name)

    monkeypatch.setattr(cpu_attention, "_NATIVE", Spy())
    for args in (
        (q, k, v, np.ones((33, 64), bool), False, 0.5),
        (q, k, v, None, False, 0.5, 0.5, 1, 0),  # dropout
        (q[None].repeat(2, 0), k, v, None, False, 0.5),  # broadcast batch dims
    ):
        cpu_attention.attention(*args)
    assert not {"cpu_attention_softmax_", "cpu_attention_scores_softmax_"} & set(calls)
    cpu_attention.attention(q, k, v, None, False, 0.5)
    assert calls[-1] == "cpu_attention_scores_softmax_"  # (24-wide heads of 64 keys)
    wide = rng.standard_normal((2, 33, cpu_attention._FUSED_WIDTH + 1)).astype(np.float32)
    cpu_attention.attention(wide, wide, wide, None, False, 0.5)
    assert calls[-1] == "cpu_attention_softmax_"  # (BLAS's scores)
