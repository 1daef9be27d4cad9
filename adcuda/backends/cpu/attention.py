"""The CPU backend's attention, forward and backward (kernels/attention.cu on CUDA): only the rows'
logsumexp is kept for the backward, as the CUDA kernels keep it.
"""
import numpy as np

from ...errors import DTypeError, ShapeError, fmt_shape
from ..seam import BackendArray
from ._common import _compute

__all__ = ["attention", "attention_backward"]


def _operands(op, q, k, v):
    """q, k and v computed in fp32 (fp64 kept), k and v first taken in q's dtype, as on CUDA."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype.kind != "f":
            raise DTypeError(f"{op}: expected {name} to be a floating point array, got {t.dtype}")
        if t.ndim < 2:
            raise ShapeError(f"{op}: {name} must have at least 2 dims (..., L, E), got {fmt_shape(t.shape)}")
    return _compute(q), _compute(k.astype(q.dtype, copy=False)), _compute(v.astype(q.dtype, copy=False))


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


def attention(q: BackendArray, k: BackendArray, v: BackendArray, mask: BackendArray | None, is_causal: bool,
              scale: float) -> tuple[BackendArray, BackendArray]:
    """Softmax(q k^T * scale + mask) v; also the rows' logsumexp, which is all backward keeps."""
    qq, kk, vv = _operands("attention", q, k, v)
    s = _attention_scores(qq, kk, mask, is_causal, scale)
    m = np.amax(s, axis=-1, keepdims=True, initial=-np.inf)  # initial: no keys (S = 0) is no error
    m = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m)
    denom = np.sum(p, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.log(denom) + m
        p = np.where(denom > 0, p / np.where(denom > 0, denom, 1), 0)  # fully masked rows -> 0
    out = np.matmul(p, vv)
    return out.astype(q.dtype, copy=False), lse[..., 0]


def attention_backward(g: BackendArray, q: BackendArray, k: BackendArray, v: BackendArray, out: BackendArray,
                       lse: BackendArray, mask: BackendArray | None, is_causal: bool,
                       scale: float) -> tuple[BackendArray, BackendArray, BackendArray]:
    qq, kk, vv = _operands("attention_backward", q, k, v)
    gg, oo = _compute(g), _compute(out)
    s = _attention_scores(qq, kk, mask, is_causal, scale)
    with np.errstate(invalid="ignore"):
        p = np.where(np.isfinite(lse[..., None]), np.exp(s - lse[..., None]), 0.0)
    dv = np.matmul(np.swapaxes(p, -1, -2), gg)
    dp = np.matmul(gg, np.swapaxes(vv, -1, -2))
    ds = p * (dp - np.sum(gg * oo, axis=-1, keepdims=True))
    dq = np.matmul(ds, kk) * scale
    dk = np.matmul(np.swapaxes(ds, -1, -2), qq) * scale
    return dq.astype(q.dtype, copy=False), dk.astype(k.dtype, copy=False), dv.astype(v.dtype, copy=False)
