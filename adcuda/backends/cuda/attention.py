"""The CUDA backend's memory-efficient attention, forward and backward (kernels/attention.cu), with
the CPU backend's signatures, dtype rules and results: only the rows' logsumexp is kept for the
backward, which recomputes the probabilities. Half types are computed in fp32 (on tensor cores for
fp16 and bf16). Dropout is drawn inside the kernels, the CPU backend's mask exactly.
"""

from __future__ import annotations

from ... import _native
from ...errors import ShapeError, fmt_shape
from ..seam import Shape
from ._common import (
    BackendArray,
    broadcast_shape,
    cast,
    dense,
    require_floating,
    rows_dense,
    shape_tuple,
    statistics_type,
)

__all__ = ["attention", "attention_backward", "attention_dropout_mask"]

_U64 = (1 << 64) - 1  # seeds and offsets are taken modulo 2^64, as the kernels' counters are


def _attention_operands(op, q, k, v, mask):
    for name, t in (("q", q), ("k", k), ("v", v)):
        require_floating(op, name, t)
        if t.ndim < 2:
            raise ShapeError(f"{op}: {name} must have at least 2 dims (..., L, E), got {fmt_shape(t.shape)}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"{op}: q {fmt_shape(q.shape)}, k {fmt_shape(k.shape)} and v {fmt_shape(v.shape)} do not "
            "fit: q and k need the same last dim, k and v the same sequence length"
        )
    batch = broadcast_shape(tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2]))
    if batch is None:
        raise ShapeError(
            f"{op}: the batch dims of q {fmt_shape(q.shape)}, k {fmt_shape(k.shape)} and v "
            f"{fmt_shape(v.shape)} cannot be broadcast"
        )
    if mask is not None:
        scores = batch + (q.shape[-2], k.shape[-2])
        if broadcast_shape(tuple(mask.shape), scores) != scores:
            raise ShapeError(
                f"{op}: mask of shape {fmt_shape(mask.shape)} does not broadcast to the scores' shape "
                f"{fmt_shape(scores)}"
            )
        if mask.dtype.name != "bool":
            mask = cast(mask, q.dtype)  # an additive mask, added in q's dtype
    return rows_dense(q), rows_dense(cast(k, q.dtype)), rows_dense(cast(v, q.dtype)), mask, batch


def _check_dropout_p(op, dropout_p):
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {dropout_p}")


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
) -> tuple[BackendArray, BackendArray]:
    """Softmax(q k^T * scale + mask) v -> (out, logsumexp rows) without keeping the probabilities; with
    ``dropout_p`` the probabilities are dropped by the Philox draw ``(seed, offset)`` (the CPU backend
    draws the same mask)."""
    _check_dropout_p("attention", dropout_p)
    q, k, v, mask, _ = _attention_operands("attention", q, k, v, mask)
    return tuple(
        _native._C.attention(
            q, k, v, mask, bool(is_causal), float(scale), float(dropout_p), int(seed) & _U64, int(offset) & _U64
        )
    )


def attention_dropout_mask(shape: Shape, p: float, seed: int, offset: int) -> BackendArray:
    """The bool keep-mask (batch..., L, S) that attention's dropout with (p, seed, offset) applies."""
    _check_dropout_p("attention_dropout_mask", p)
    shape = shape_tuple(shape)
    if len(shape) < 2:
        raise ShapeError(f"attention_dropout_mask: shape {fmt_shape(shape)} needs at least 2 dims (..., L, S)")
    return _native._C.attention_dropout_mask(shape, float(p), int(seed) & _U64, int(offset) & _U64)


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
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """-> (dq, dk, dv), each in its input's dtype, with the broadcast batch shape; the dropout arguments
    are the forward's."""
    _check_dropout_p("attention_backward", dropout_p)
    dtypes = (q.dtype, k.dtype, v.dtype)
    q, k, v, mask, batch = _attention_operands("attention_backward", q, k, v, mask)
    expected = batch + (q.shape[-2], v.shape[-1])
    for name, t in (("gradient", g), ("output", out)):
        if tuple(t.shape) != expected:
            raise ShapeError(
                f"attention_backward: the {name} has shape {fmt_shape(t.shape)}, expected {fmt_shape(expected)}"
            )
    grads = _native._C.attention_backward(
        dense(cast(g, q.dtype)),
        q,
        k,
        v,
        dense(cast(out, q.dtype)),
        dense(cast(lse, statistics_type(q))),
        mask,
        bool(is_causal),
        float(scale),
        float(dropout_p),
        int(seed) & _U64,
        int(offset) & _U64,
    )
    return tuple(cast(d, dtype) for d, dtype in zip(grads, dtypes))
