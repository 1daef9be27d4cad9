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


_CAUSAL = {}


def _causal_allowed(L, S):
    """The (L, S) bool mask of the keys each query may see under ``is_causal`` (cached: every layer of
    every step asks for the same few)."""
    allowed = _CAUSAL.get((L, S))
    if allowed is None:
        allowed = _CAUSAL[(L, S)] = np.tril(np.ones((L, S), dtype=bool))
    return allowed


def _attention_scores(q, k, mask, is_causal, scale):
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    s *= scale
    allowed = None
    if is_causal:
        allowed = _causal_allowed(s.shape[-2], s.shape[-1])
    if mask is not None:
        if mask.dtype == np.bool_:
            allowed = mask if allowed is None else np.logical_and(allowed, mask)
        else:
            s = s + _compute(mask)
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    return s


# (NumPy's warnings for log(0) and inf - inf in the fully masked rows are silenced by the package's
# filter; no np.errstate, which costs microseconds a call)
def attention(q: BackendArray, k: BackendArray, v: BackendArray, mask: BackendArray | None, is_causal: bool,
              scale: float) -> tuple[BackendArray, BackendArray]:
    """Softmax(q k^T * scale + mask) v; also the rows' logsumexp, which is all backward keeps."""
    qq, kk, vv = _operands("attention", q, k, v)
    p = _attention_scores(qq, kk, mask, is_causal, scale)
    m = np.amax(p, axis=-1, keepdims=True, initial=-np.inf)  # initial: no keys (S = 0) is no error
    m = np.where(np.isfinite(m), m, 0)
    p -= m
    np.exp(p, out=p)
    denom = np.sum(p, axis=-1, keepdims=True)
    lse = np.log(denom) + m
    # a fully masked row is all zeros (exp(-inf)) over a zero sum: divided by 1 it stays 0
    p /= np.where(denom > 0, denom, 1)
    out = np.matmul(p, vv)
    return out.astype(q.dtype, copy=False), lse[..., 0]


def attention_backward(g: BackendArray, q: BackendArray, k: BackendArray, v: BackendArray, out: BackendArray,
                       lse: BackendArray, mask: BackendArray | None, is_causal: bool,
                       scale: float) -> tuple[BackendArray, BackendArray, BackendArray]:
    qq, kk, vv = _operands("attention_backward", q, k, v)
    gg, oo = _compute(g), _compute(out)
    p = _attention_scores(qq, kk, mask, is_causal, scale)
    # a row with no finite logsumexp (fully masked) has no probabilities: subtracting +inf zeroes it
    p -= np.where(np.isfinite(lse), lse, np.inf)[..., None]
    np.exp(p, out=p)
    dv = np.matmul(np.swapaxes(p, -1, -2), gg)
    ds = np.matmul(gg, np.swapaxes(vv, -1, -2))
    ds -= np.sum(gg * oo, axis=-1, keepdims=True)
    ds *= p
    dq = np.matmul(ds, kk)
    dq *= scale
    dk = np.matmul(np.swapaxes(ds, -1, -2), qq)
    dk *= scale
    return dq.astype(q.dtype, copy=False), dk.astype(k.dtype, copy=False), dv.astype(v.dtype, copy=False)
