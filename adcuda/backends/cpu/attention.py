"""The CPU backend's attention, forward and backward (kernels/attention.cu on CUDA): only the rows'
logsumexp is kept for the backward, as the CUDA kernels keep it.
"""
import numpy as np

from ._common import _compute

__all__ = ["attention", "attention_backward"]


def _attention_scores(q, k, mask, is_causal, scale):
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    allowed = None
    if is_causal:
        L, S = s.shape[-2], s.shape[-1]
        allowed = np.tril(np.ones((L, S), dtype=bool))
    if mask is not None:
        if mask.dtype == np.bool_:
            allowed = mask if allowed is None else np.logical_and(allowed, mask)
        else:
            s = s + _compute(mask)
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    return s


def attention(q, k, v, mask, is_causal, scale):
    """Softmax(q k^T * scale + mask) v; also the rows' logsumexp, which is all backward keeps."""
    qq, kk, vv = _compute(q), _compute(k), _compute(v)
    s = _attention_scores(qq, kk, mask, is_causal, scale)
    m = np.amax(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m)
    denom = np.sum(p, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.log(denom) + m
        p = np.where(denom > 0, p / np.where(denom > 0, denom, 1), 0)  # fully masked rows -> 0
    out = np.matmul(p, vv)
    return out.astype(q.dtype, copy=False), lse[..., 0]


def attention_backward(g, q, k, v, out, lse, mask, is_causal, scale):
    qq, kk, vv, gg, oo = (_compute(t) for t in (q, k, v, g, out))
    s = _attention_scores(qq, kk, mask, is_causal, scale)
    with np.errstate(invalid="ignore"):
        p = np.where(np.isfinite(lse[..., None]), np.exp(s - lse[..., None]), 0.0)
    dv = np.matmul(np.swapaxes(p, -1, -2), gg)
    dp = np.matmul(gg, np.swapaxes(vv, -1, -2))
    ds = p * (dp - np.sum(gg * oo, axis=-1, keepdims=True))
    dq = np.matmul(ds, kk) * scale
    dk = np.matmul(np.swapaxes(ds, -1, -2), qq) * scale
    return dq.astype(q.dtype, copy=False), dk.astype(k.dtype, copy=False), dv.astype(v.dtype, copy=False)
