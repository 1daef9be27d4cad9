"""scaled_dot_product_attention: fused (the backend's attention family: ``kernels/attention.cu``,
forward and backward without keeping the probabilities) where it applies, composed of ops where
it does not (a mask that needs a gradient, no keys). Dropout on the probabilities is drawn inside
the primitive (kernels/attention_dropout.cuh: one Philox counter layout on both backends)."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..autograd.graph import needs_grad
from ..errors import DTypeError, ShapeError, fmt_shape
from ..random import default_generator
from ..tensor import Tensor, primitives
from . import dispatch
from .common import broadcast_shapes, check_float, check_same_device, check_tensor, dense, wrap
from .elementwise import where
from .factories import ones
from .random import dropout
from .registry import ReplayKeep, get, lowering, op
from .softmax_loss import softmax


@op(
    "scaled_dot_product_attention",
    doc="softmax(query @ key.T * scale + mask) @ value, optionally causal.",
    composite=True,
    autocast="lower",
    function=False,
    method=False,
    functional=True,
)
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    if attn_mask is None and dropout_p == 0.0 and not enable_gqa and _plain(query, key, value):
        # the plain case, found in one test on the arrays: it passes every check below and records nothing
        e = query._data.shape[-1]
        if scale is None:
            scale = 1.0 / math.sqrt(e) if e else 1.0
        return _attention_fused(query, key, value, None, is_causal, scale, 0.0, 0, 0)[0]
    name = "scaled_dot_product_attention"
    for what, t in (("query", query), ("key", key), ("value", value)):
        check_float(name, what, t)
        if t.ndim < 2:
            raise ShapeError(f"{name}: {what} must have at least 2 dims (..., L, E), got shape {fmt_shape(t.shape)}")
    if not (query.dtype is key.dtype is value.dtype):
        raise DTypeError(
            f"{name}: expected query, key and value to have the same dtype, got {query.dtype}, "
            f"{key.dtype} and {value.dtype}"
        )
    check_same_device(name, query, key, value, attn_mask)
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            f"{name}: query {fmt_shape(query.shape)}, key {fmt_shape(key.shape)} and value "
            f"{fmt_shape(value.shape)} do not fit: query and key need the same last dim, key and "
            "value the same sequence length (dim -2)"
        )
    if is_causal and attn_mask is not None:
        raise ValueError(f"{name}: explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{name}: dropout_p has to be between 0 and 1, but got {dropout_p}")
    if enable_gqa:
        key, value = _repeat_kv_heads(name, query, key), _repeat_kv_heads(name, query, value)
    batch = broadcast_shapes(name, tuple(query.shape[:-2]), tuple(key.shape[:-2]), tuple(value.shape[:-2]))
    scores_shape = batch + (query.shape[-2], key.shape[-2])
    if attn_mask is not None:
        attn_mask = _check_attn_mask(name, attn_mask, query, scores_shape)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    if (attn_mask is not None and needs_grad(attn_mask)) or key.shape[-2] == 0:
        # the fused primitive has no mask gradient (nor a use for zero keys, where every output is 0):
        # compose it from ops instead
        probs = _attention_probs(query, key, attn_mask, is_causal, scale)
        return dropout(probs, dropout_p) @ value
    # dropout is drawn inside the primitive from the generator's next draw over the probabilities,
    # and drawn again from the same (seed, offset) by the backward
    seed, offset = default_generator.next_offset(math.prod(scores_shape)) if dropout_p > 0.0 else (0, 0)
    args = (query, key, value, attn_mask, is_causal, scale, dropout_p, seed, offset)
    if needs_grad(query, key, value):
        return attention_fused(*args)
    return _attention_fused(*args)[0]  # nothing to record: the forward alone, not the entry


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _plain(query, key, value):
    """Whether an attention call without mask, dropout or grouped heads is the plain case: no hook attached
    (autocast, the profiler, capture), query, key and value CPU float32/float64 tensors of one dtype that
    take no part in a graph, of one batch shape (nothing to broadcast), (..., L, E), (..., S, E) and
    (..., S, Ev) with S > 0."""
    if not (dispatch._plain and query.__class__ is Tensor and key.__class__ is Tensor and value.__class__ is Tensor):
        return False
    q, k, v = query._data, key._data, value._data
    if not (
        q.__class__ is np.ndarray
        and k.__class__ is np.ndarray
        and v.__class__ is np.ndarray
        and (q.dtype is _F32 or q.dtype is _F64)
        and k.dtype is q.dtype
        and v.dtype is q.dtype
        and q.ndim >= 2
        and k.ndim == q.ndim == v.ndim
        and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]
        and q.shape[-1] == k.shape[-1]
        and k.shape[-2] == v.shape[-2] > 0
        and query._device is key._device is value._device
    ):
        return False
    for t in (query, key, value):
        if t._requires_grad or t._grad_fn is not None or t._base is not None and t.grad_fn is not None:
            return False
    return True


def _repeat_kv_heads(op, query, kv):
    """Grouped-query attention: each key/value head serves ``groups`` consecutive query heads."""
    if query.ndim < 3 or kv.ndim < 3:
        raise ShapeError(f"{op}: enable_gqa needs a heads dim (-3) in query and key/value")
    heads, kv_heads = query.shape[-3], kv.shape[-3]
    if kv_heads == heads:
        return kv
    if kv_heads == 0 or heads % kv_heads:
        raise ShapeError(
            f"{op}: number of query heads ({heads}) must be a multiple of the key/value "
            f"heads ({kv_heads}) with enable_gqa=True"
        )
    shape = tuple(kv.shape)
    expanded = kv.unsqueeze(-3).expand(shape[:-3] + (kv_heads, heads // kv_heads) + shape[-2:])
    return expanded.reshape(shape[:-3] + (heads,) + shape[-2:])


def _check_attn_mask(op, mask, query, scores_shape):
    check_tensor(op, "attn_mask", mask)
    if mask.dtype is not dt.bool_ and not mask.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected attn_mask dtype to be bool or floating point, got {mask.dtype}")
    if broadcast_shapes(op, tuple(mask.shape), scores_shape) != scores_shape:
        raise ShapeError(
            f"{op}: attn_mask of shape {fmt_shape(mask.shape)} does not broadcast to the "
            f"attention scores' shape {fmt_shape(scores_shape)} (batch..., L, S)"
        )
    if mask.dtype.is_floating_point and mask.dtype is not query.dtype:
        mask = mask.to(dtype=query.dtype)
    return mask


def _attention_probs(q, k, mask, is_causal, scale):
    """softmax(q k^T * scale + mask) as differentiable ops; a row no key may attend to gets zero
    weights (PyTorch's rule), with finite scores so no NaN reaches the backward."""
    scores = (q @ k.mT) * scale
    if mask is None and not is_causal:
        return softmax(scores, -1)
    if is_causal:
        allowed = ones((q.shape[-2], k.shape[-2]), dtype=dt.bool_, device=q.device).tril()
        scores = where(allowed, scores, -math.inf)
    elif mask.dtype is dt.bool_:
        scores = where(mask, scores, -math.inf)
    else:
        scores = scores + mask
    live = (scores > -math.inf).any(-1, keepdim=True)
    probs = softmax(where(live, scores, 0.0), -1)
    return where(live, probs, 0.0)


def _scores_shape(q, k, v):
    """(batch..., L, S): the probabilities the primitives' dropout draws over, batch broadcast from all three."""
    batch = broadcast_shapes(
        "scaled_dot_product_attention", tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2])
    )
    return batch + (q.shape[-2], k.shape[-2])


def _attention_grads(grad, query, key, value, attn_mask, is_causal, scale, dropout_p, seed, offset):
    probs = _attention_probs(query, key, attn_mask, is_causal, scale)
    kept, d_probs = probs, grad @ value.mT
    if dropout_p > 0.0:  # the forward's dropout, drawn again as a mask
        keep = wrap(
            primitives(query).attention_dropout_mask(_scores_shape(query, key, value), dropout_p, seed, offset),
            query._device,
        )
        factor = keep.to(dtype=probs.dtype) * (1.0 / (1.0 - dropout_p) if dropout_p < 1.0 else 0.0)
        kept, d_probs = probs * factor, d_probs * factor
    d_scores = probs * (d_probs - (d_probs * probs).sum(-1, keepdim=True))
    return (d_scores @ key) * scale, (d_scores.mT @ query) * scale, kept.mT @ grad


def _attention_fused_grads(grad, query, key, value, attn_mask, is_causal, scale, dropout_p, seed, offset, result, lse):
    return tuple(
        wrap(d, grad._device)
        # (the arrays as they are laid out: both backends take any strides, the CUDA one copying where
        # its kernels need rows in place)
        for d in primitives(grad).attention_backward(
            grad._data,
            query._data,
            key._data,
            value._data,
            result._data,
            lse._data,
            None if attn_mask is None else attn_mask._data,
            is_causal,
            scale,
            dropout_p,
            seed,
            offset,
        )
    )


@op(
    "attention_fused",
    doc="Attention by the fused primitive (its logsumexp rows kept for backward).",
    function=False,
    method=False,
    node="ScaledDotProductAttentionBackward0",
    extra_outputs=("lse",),
    grads={("query", "key", "value"): _attention_grads},
    fused={("query", "key", "value"): _attention_fused_grads},
)
def attention_fused(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    is_causal: bool,
    scale: float,
    dropout_p: float,
    seed: int,
    offset: int,
) -> tuple[Tensor, Tensor]:
    # (q, k and v as they are laid out, the heads of one projection: both backends take any strides)
    out, lse = primitives(query).attention(
        query._data,
        key._data,
        value._data,
        None if attn_mask is None else dense(attn_mask),
        is_causal,
        scale,
        dropout_p,
        seed,
        offset,
    )
    return wrap(out, query._device), wrap(lse, query._device)


_attention_fused = get("attention_fused").forward


def _attention_replay_pair(same, shape_of, forward, backward):
    """attention and its backward given the forward's own output and logsumexp, without masks, the same
    is_causal and scale: the probabilities (one score product and two passes fewer)."""
    q0, k0, v0, mask0, is_causal0, scale0 = forward[:6]
    _, q, k, _, _, _, mask, is_causal, scale = backward[:9]
    if mask is not None or mask0 is not None or is_causal0 != is_causal or scale0 != scale:
        return None
    if not (same(q0, q) and same(k0, k)):
        return None
    q_shape, k_shape = shape_of(q), shape_of(k)
    if len(q_shape) < 2 or len(k_shape) < 2:
        return None
    batch = broadcast_shapes("attention", q_shape[:-2], k_shape[:-2])
    return batch + (q_shape[-2], k_shape[-2]), (q, k, v0)


# what the exporters and capture know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering(
    "attention",
    onnx=lambda w, node, **params: w.attention(node, **params),
    c=lambda lower, node: lower.attention(node),
    replay_keeps=ReplayKeep(
        "probs", "attention_backward", results=(0, 1), reads=(4, 5), arity=9, pair=_attention_replay_pair
    ),
    strided_operands=(0, 1, 2),  # q, k, v
)
lowering("attention_backward", strided_operands=(0, 1, 2, 3))  # g, q, k, v
