"""The CPU backend's attention, forward and backward (kernels/attention.cu on CUDA): only the rows'
logsumexp is kept for the backward, as the CUDA kernels keep it. Dropout draws the CUDA kernels' exact
mask (kernels/attention_dropout.cuh's Philox counter layout, computed here in NumPy).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _native
from ...errors import DTypeError, ShapeError, fmt_shape
from ..seam import Shape
from . import threads
from ._common import _F32, _F64, BackendArray, _compute, _row_sums

__all__ = ["attention", "attention_backward", "attention_dropout_mask"]


# The host module's forward (kernels/host/attention.cpp; None: NumPy's, the reference it is tested against)
# for calls without mask or dropout whose products have at most _NATIVE_WORK multiply-adds: there the
# dozen NumPy calls below cost several times the arithmetic, and BLAS is not yet worth its call.
_NATIVE = _native._C if hasattr(_native._C, "cpu_attention") else None
_NATIVE_WORK = 1 << 15


def _native_attention(q, k, v):
    """The host module where its forward takes q, k and v (float32/float64 arrays of one dtype and batch
    shape that fit (..., L, E), (..., S, E), (..., S, Ev), of little work), else None: whatever their
    strides (a captured program's replay hands attention the views its eager run copied), so that the
    same values take the same path."""
    fits = (
        (q.dtype == _F32 or q.dtype == _F64)
        and k.dtype == q.dtype
        and v.dtype == q.dtype
        and q.ndim >= 2
        and k.ndim == q.ndim == v.ndim
        and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
        and q.shape[-1] == k.shape[-1]
        and k.shape[-2] == v.shape[-2]
        and q.size * k.shape[-2] + q.shape[-2] * v.size <= _NATIVE_WORK
    )
    return _NATIVE if fits else None


# The larger calls without mask or dropout (those _native_attention leaves to NumPy): BLAS computes the
# scores and the products, the host module the softmax between them (cpu_attention_softmax_: max, exp,
# sum and scale along each row while it is in cache, the hidden keys of a causal row skipped) and the
# scores' gradient in the backward (cpu_attention_softmax_backward_: p (g v^T - sum(g out)) scale in one
# pass). NumPy makes a dozen passes over the (B..., L, S) scores for those (a small GPT's 32x4x64x64: 1.3
# ms of a 2.2 ms forward and backward). The forward and the backward pick it by the same rule, so that
# the backward's probabilities are the forward's bit for bit. _SOFTMAX_AVX2: which build of its loops
# runs (None: the CPU's best; tests run both where the CPU has AVX2).
_SOFTMAX_AVX2: bool | None = None
# Small heads (E and S at most these) take the scores from the host module too, with their softmax
# (cpu_attention_scores_softmax_: row by row in cache, a causal row's hidden keys never computed), where
# BLAS's batched products of a few thousand multiply-adds each cost more than their arithmetic and the
# scores go out to memory and back before the softmax (a small GPT's 32x4x64x64 scores of 24-wide heads:
# its attention forward 1.31 -> 1.23 ms a layer in a compiled training step; the backward's g v^T done the
# same way measured slower than BLAS's, and stays BLAS's)
_FUSED_WIDTH = 64
_FUSED_KEYS = 256


def _host_softmax(q, k, v, mask, dropout_p):
    """Whether attention of q, k and v (computing arrays of one dtype) takes the host softmax: no mask,
    no dropout, one batch shape."""
    return (
        _NATIVE is not None
        and mask is None
        and not dropout_p
        and q.dtype == k.dtype == v.dtype
        and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
    )


def _fused(q, k):
    """Whether the host module computes the scores of q and k too (_FUSED_WIDTH)."""
    return q.shape[-1] <= _FUSED_WIDTH and k.shape[-2] <= _FUSED_KEYS


def _host_probabilities(q, k, is_causal, scale, into=None):
    """(probabilities, logsumexp) of the host softmax: the scores q k^T * scale computed into ``into``
    (the replay's kept probabilities; None: a new array), then made probabilities in place."""
    target = into if into is not None and _kept_probs(into, q) else None
    if _fused(q, k):
        p = target if target is not None else np.empty(q.shape[:-1] + k.shape[-2:-1], q.dtype)
        lse = _NATIVE.cpu_attention_scores_softmax_(q, k, p, is_causal, scale, _SOFTMAX_AVX2)
    else:
        p = _product(q * q.dtype.type(scale), np.swapaxes(k, -1, -2), target)
        lse = _NATIVE.cpu_attention_softmax_(p, is_causal, _SOFTMAX_AVX2)
    if into is not None and target is None:
        np.copyto(into, p)
    return p, lse


def _rows(*arrays):
    """The arrays C-contiguous (copies of strided ones: the host module reads rows)."""
    return tuple(a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays)


def _kept_probs(probs, q):
    """Whether the host forward writes the probabilities into ``probs`` (a C-contiguous writeable array of
    q's dtype; the replay's buffers are)."""
    return probs.dtype == q.dtype and probs.flags.c_contiguous and probs.flags.writeable


def _operands(op, q, k, v):
    """q, k and v computed in fp32 (fp64 kept), k and v first taken in q's dtype, as on CUDA."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype.kind != "f":
            raise DTypeError(f"{op}: expected {name} to be a floating point array, got {t.dtype}")
        if t.ndim < 2:
            raise ShapeError(f"{op}: {name} must have at least 2 dims (..., L, E), got {fmt_shape(t.shape)}")
    return _compute(q), _compute(k.astype(q.dtype, copy=False)), _compute(v.astype(q.dtype, copy=False))


_CAUSAL: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _causal_allowed(L, S):
    """The (L, S) bool mask of the keys each query may see under ``is_causal``, and its negation
    (cached: every layer of every step asks for the same few)."""
    masks = _CAUSAL.get((L, S))
    if masks is None:
        allowed = np.tril(np.ones((L, S), dtype=bool))
        masks = _CAUSAL[(L, S)] = (allowed, ~allowed)
    return masks


# Scores within +-60 (all of them, before masking) need no shift by their row's maximum: exp(s) then
# neither overflows (in a row sum of up to 5e10 keys) nor leaves float32's normal range, and the
# probabilities are exp(s) / sum(exp(s)) directly. NumPy's maximum along short rows is the slowest
# step of the forward (37 us of 143 on the GPT's 8x4x32x32 scores); the range check is two reductions
# over the whole array.
_UNSHIFTED_RANGE = 60.0


def _attention_scores(q, k, mask, is_causal, scale):
    """The scores and how to mask them: ``(s, unshifted, keep)``. Scores in the unshifted range
    (_UNSHIFTED_RANGE; NaN and inf are not) come unmasked, with ``keep`` (1 where a key is seen, 0
    where masked; None without a mask) for ``_unshifted_exp`` to multiply exp(s) by; others come
    masked (-inf where hidden), ``keep`` None. The forward and the backward both ask this of the
    same scores, so both compute the probabilities the same way."""
    # (q scaled, not the scores: E values a row instead of S)
    s = threads.matmul(q * q.dtype.type(scale), np.swapaxes(k, -1, -2))
    allowed = hidden = None
    if is_causal:
        allowed, hidden = _causal_allowed(s.shape[-2], s.shape[-1])
    if mask is not None:
        if mask.dtype == np.bool_:
            allowed = mask if allowed is None else np.logical_and(allowed, mask)
            hidden = None
        else:
            s = s + _compute(mask)
    if s.size > 0 and -_UNSHIFTED_RANGE <= s.min() and s.max() <= _UNSHIFTED_RANGE:
        # exp(s) of a finite score times 0 is the 0 that exp(-inf) gives: a multiplication after the
        # exp masks as the -inf fill would, at a third of np.copyto's cost with a mask
        return s, True, None if allowed is None else _as_factor(allowed, s.dtype)
    if allowed is not None:
        if np.broadcast_shapes(allowed.shape, s.shape) == s.shape:
            # in place: a third of np.where's time for the causal mask
            np.copyto(s, -np.inf, where=np.logical_not(allowed) if hidden is None else hidden)
        else:  # a mask with more batch dims than the scores broadcasts them
            s = np.where(allowed, s, -np.inf)
    return s, False, None


_FACTORS: dict[tuple[tuple[int, ...], np.dtype], np.ndarray] = {}


def _as_factor(allowed, dtype):
    """The bool mask ``allowed`` as 1s and 0s of ``dtype`` (cached for the causal masks, which every
    layer of every step asks for)."""
    causal = _CAUSAL.get(allowed.shape)
    if causal is None or causal[0] is not allowed:
        return allowed.astype(dtype)
    factor = _FACTORS.get((allowed.shape, dtype))
    if factor is None:
        factor = _FACTORS[(allowed.shape, dtype)] = allowed.astype(dtype)
    return factor


def _unshifted_exp(s, keep, out=None):
    """exp(s), masked by ``keep`` (see _attention_scores), into ``out`` where given (else s's memory)
    if the mask does not broadcast the scores."""
    p = np.exp(s, out=s if out is None else out)
    if keep is None:
        return p
    return np.multiply(p, keep, out=p if np.broadcast_shapes(keep.shape, p.shape) == p.shape else None)


def _inverse_row_sums(lse):
    """exp(-logsumexp) of each row (0 for a fully masked row, logsumexp -inf): what the unshifted
    exp(s) of a row is multiplied by to give its probabilities, in the forward and the backward alike."""
    return np.exp(-np.where(np.isfinite(lse), lse, np.inf))


def _product(a, b, into):
    """a @ b (batched), into ``into`` (an array of the product's shape, e.g. a view of a larger one) where
    given and of the product's dtype: NumPy's matmul hands BLAS its rows whatever their stride, the
    same numbers as a new array's."""
    if into is None or into.dtype != np.result_type(a, b):
        return threads.matmul(a, b)
    return threads.run_product(np.matmul, a, b, into, work=threads.matmul_work(a, b))


def _philox4x32_10(counter_words, seed):
    """Philox4x32-10 of kernels/philox.cuh over rows of four uint32 counter words, keyed by the 64-bit
    ``seed``: the same words the CUDA kernels draw."""
    mask32 = np.uint64(0xFFFFFFFF)
    c0, c1, c2, c3 = (w.astype(np.uint64) for w in counter_words)
    key0, key1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    for round_ in range(10):
        if round_:
            key0 = (key0 + np.uint64(0x9E3779B9)) & mask32
            key1 = (key1 + np.uint64(0xBB67AE85)) & mask32
        product0 = np.uint64(0xD2511F53) * c0
        product1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (
            (product1 >> np.uint64(32)) ^ c1 ^ key0,
            product1 & mask32,
            (product0 >> np.uint64(32)) ^ c3 ^ key1,
            product0 & mask32,
        )
    return c0, c1, c2, c3


def _attention_dropout_keep(batch, L, S, p, seed, offset):
    """Which probabilities of a (batch..., L, S) attention dropout keeps: kernels/attention_dropout.cuh's
    counter layout, so that both backends drop the same ones. Per batch entry b, 16 x 16 tile
    (i16, j16) and block (a, c) in 0..7 x 0..7, Philox block ((b * ceil(L/16) + i16) * ceil(S/16) + j16)
    * 64 + 8 a + c at counter offset ``offset`` gives its words to (a, c), (a, c + 8), (a + 8, c),
    (a + 8, c + 8) of the tile; an element is kept when its word is below floor((1 - p) 2^32)."""
    if p == 0.0:
        return np.ones(tuple(batch) + (L, S), dtype=bool)
    entries = int(np.prod(batch, dtype=np.int64))
    query_tiles, key_tiles = -(-L // 16), -(-S // 16)
    blocks = np.arange(entries * query_tiles * key_tiles * 64, dtype=np.uint64)
    seed, offset = int(seed) & (2**64 - 1), int(offset) & (2**64 - 1)
    offset_words = (np.uint64(offset & 0xFFFFFFFF), np.uint64(offset >> 32))
    words = _philox4x32_10(
        (
            blocks & np.uint64(0xFFFFFFFF),
            blocks >> np.uint64(32),
            np.full_like(blocks, offset_words[0]),
            np.full_like(blocks, offset_words[1]),
        ),
        seed,
    )
    threshold = np.uint64(min(math.floor((1.0 - p) * 2.0**32), 2**32 - 1))
    kept = np.stack([w < threshold for w in words], axis=-1)  # (blocks, word); word = 2 * (i >= 8) + (j >= 8)
    kept = kept.reshape(entries, query_tiles, key_tiles, 8, 8, 2, 2)  # (b, i16, j16, a, c, i high, j high)
    kept = kept.transpose(0, 1, 5, 3, 2, 6, 4).reshape(entries, query_tiles * 16, key_tiles * 16)
    return kept[:, :L, :S].reshape(tuple(batch) + (L, S))


def _check_dropout_p(op, dropout_p):
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {dropout_p}")


def attention_dropout_mask(shape: Shape, p: float, seed: int, offset: int) -> BackendArray:
    """The bool keep-mask (batch..., L, S) that attention's dropout with (p, seed, offset) applies."""
    _check_dropout_p("attention_dropout_mask", p)
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)
    if len(shape) < 2:
        raise ShapeError(f"attention_dropout_mask: shape {fmt_shape(shape)} needs at least 2 dims (..., L, S)")
    return _attention_dropout_keep(shape[:-2], shape[-2], shape[-1], p, seed, offset)


def _attention_dropout_factor(probs, v, dropout_p, seed, offset):
    """z of dropout(p) = p z over the batch dims of the probabilities and v, broadcast: 1 / (1 - p) where
    kept, 0 where dropped (None without dropout)."""
    if not dropout_p:
        return None
    batch = np.broadcast_shapes(probs.shape[:-2], v.shape[:-2])
    keep = _attention_dropout_keep(batch, probs.shape[-2], probs.shape[-1], dropout_p, seed, offset)
    scale = 1.0 / (1.0 - dropout_p) if dropout_p < 1.0 else 0.0
    return np.where(keep, probs.dtype.type(scale), probs.dtype.type(0))


def attention(
    q: BackendArray,
    k: BackendArray,
    v: BackendArray,
    mask: BackendArray | None,
    is_causal: bool,
    scale: float,
    dropout_p: float = 0.0,
    seed: int = 0,
    offset: int = 0,
    *,
    probs: BackendArray | None = None,
    into: BackendArray | None = None,
) -> tuple[BackendArray, BackendArray]:
    """Softmax(q k^T * scale + mask) v; also the rows' logsumexp, which is all backward keeps. With
    ``dropout_p`` the probabilities are dropped by the Philox draw ``(seed, offset)`` and the rest
    scaled by 1 / (1 - dropout_p); the logsumexp is of the probabilities before dropout.

    The probabilities are exp(scores - logsumexp), as the backward computes them again, bit for bit:
    ``probs`` (CPU only, seam.CPU_REPLAY_KEYWORDS: an array of the scores' shape and compute dtype)
    keeps them, for a backward given them as its ``probs`` (graph capture's replay); ``into`` (CPU only,
    likewise: an array of the output's shape, a view of the replay's buffer) is where the output goes
    where it has the computing dtype."""
    _check_dropout_p("attention", dropout_p)
    native = _native_attention(q, k, v) if mask is None and not dropout_p else None
    if native is not None and (probs is None or _kept_probs(probs, q)):
        out, lse = native.cpu_attention(*_rows(q, k, v), is_causal, scale, probs)
        if into is not None and into.dtype == out.dtype:
            np.copyto(into, out)
            out = into
        return out, lse
    qq, kk, vv = _operands("attention", q, k, v)
    if _host_softmax(qq, kk, vv, mask, dropout_p):
        p, lse = _host_probabilities(qq, kk, is_causal, scale, probs)
        return _product(p, vv, into).astype(q.dtype, copy=False), lse
    # (the big temporaries are written in place; NumPy's warnings for log(0) and inf - inf in fully
    # masked rows are silenced by the package's filter, no np.errstate, which costs microseconds)
    s, unshifted, keep = _attention_scores(qq, kk, mask, is_causal, scale)
    if unshifted:
        p = _unshifted_exp(s, keep, probs)
        lse = np.log(_row_sums(p, 1))
        p *= _inverse_row_sums(lse)
    else:
        m = np.amax(s, axis=-1, keepdims=True, initial=-np.inf)  # initial: no keys (S = 0) is no error
        m = np.where(np.isfinite(m), m, 0)
        p = np.subtract(s, m, out=probs)
        np.exp(p, out=p)
        lse = np.log(_row_sums(p, 1)) + m
        # a fully masked row (logsumexp -inf) has no probabilities: subtracting +inf zeroes it
        np.subtract(s, np.where(np.isfinite(lse), lse, np.inf), out=p)
        np.exp(p, out=p)
    z = _attention_dropout_factor(p, vv, dropout_p, seed, offset)
    out = _product(p if z is None else p * z, vv, into)
    return out.astype(q.dtype, copy=False), lse[..., 0]


def attention_backward(
    g: BackendArray,
    q: BackendArray,
    k: BackendArray,
    v: BackendArray,
    out: BackendArray,
    lse: BackendArray,
    mask: BackendArray | None,
    is_causal: bool,
    scale: float,
    dropout_p: float = 0.0,
    seed: int = 0,
    offset: int = 0,
    *,
    probs: BackendArray | None = None,
    into: tuple[BackendArray | None, BackendArray | None, BackendArray | None] | None = None,
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """``probs`` (CPU only, seam.CPU_REPLAY_KEYWORDS): the probabilities the forward kept (its
    ``probs``) for these q, k, mask and logsumexp, read instead of computed again; ``into`` (likewise):
    where dq, dk and dv go (arrays of their shapes or None each), as the forward's ``into``."""
    _check_dropout_p("attention_backward", dropout_p)
    qq, kk, vv = _operands("attention_backward", q, k, v)
    gg, oo = _compute(g), _compute(out)
    native = _native_attention(q, k, v) if mask is None and not dropout_p and probs is None else None
    host = _host_softmax(qq, kk, vv, mask, dropout_p)
    if probs is not None:
        p = probs
    elif native is not None and lse.dtype == q.dtype:
        p = native.cpu_attention_probs(*_rows(q, k, lse), is_causal, scale)  # the host forward's, bit for bit
    elif host:
        p = _host_probabilities(qq, kk, is_causal, scale)[0]  # the forward's, bit for bit
    else:
        # the probabilities as the forward computed them, bit for bit
        p, unshifted, keep = _attention_scores(qq, kk, mask, is_causal, scale)
        if unshifted:
            p = _unshifted_exp(p, keep)
            factor = _inverse_row_sums(lse)[..., None]
            # (v's batch dims may broadcast the output, and its logsumexps, beyond the scores')
            p = np.multiply(p, factor, out=p if factor.shape[:-2] == p.shape[:-2] else None)
        else:
            # a row with no finite logsumexp (fully masked) has no probabilities: subtracting +inf zeroes it
            shift = np.where(np.isfinite(lse), lse, np.inf)[..., None]
            if shift.shape[:-2] == p.shape[:-2]:
                p -= shift
            else:  # v's batch dims broadcast the output (and its logsumexps) beyond the scores'
                p = p - shift
            np.exp(p, out=p)
    z = _attention_dropout_factor(p, vv, dropout_p, seed, offset)
    into_q, into_k, into_v = (None, None, None) if into is None else into
    dv = _product(np.swapaxes(p if z is None else p * z, -1, -2), gg, into_v)
    ds = threads.matmul(gg, np.swapaxes(vv, -1, -2))
    if host and _NATIVE is not None and gg.dtype == oo.dtype == ds.dtype == p.dtype:  # (_NATIVE: for mypy)
        # (the scores' gradient times scale: the products below give dq and dk)
        _NATIVE.cpu_attention_softmax_backward_(ds, _rows(p)[0], gg, oo, scale, _SOFTMAX_AVX2)
        dq = _product(ds, kk, into_q)
        dk = _product(np.swapaxes(ds, -1, -2), qq, into_k)
    else:
        if z is not None:
            ds *= z
        ds -= _row_sums(gg * oo, 1)
        ds *= p
        dq = _product(ds, kk, into_q)
        dq *= scale
        dk = _product(np.swapaxes(ds, -1, -2), qq, into_k)
        dk *= scale
    return dq.astype(q.dtype, copy=False), dk.astype(k.dtype, copy=False), dv.astype(v.dtype, copy=False)
