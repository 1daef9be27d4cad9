"""``MultiheadAttention``: PyTorch's layer, parameters and masking rules.

Internally the sequence comes first, ``(L, N, E)``, as in PyTorch's functional form. Masks are
merged into one additive float mask (bool ``True`` means "do not attend", the opposite of
``scaled_dot_product_attention``'s bool masks). When the attention weights are not asked for, the
fused ``F.scaled_dot_product_attention`` computes the output without materialising them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ... import dtypes as dt
from ...errors import DTypeError, ShapeError, fmt_shape
from ...factories import empty, zeros
from ...ops.index import masked_fill
from ...ops.layout import cat
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module

if TYPE_CHECKING:
    from ...types import Device, DType, Tensor


def _additive_mask(mask, name, dtype):
    """A bool mask (True = masked out) or a float mask (added to the scores) as a float mask."""
    if mask is None:
        return None
    if mask.dtype is dt.bool_:
        return masked_fill(zeros(tuple(mask.shape), dtype=dtype, device=mask.device), mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise DTypeError(f"MultiheadAttention: only bool and floating types of {name} are supported, got {mask.dtype}")
    return mask.to(dtype=dtype)


def _pad_last(mask):
    """Append one 0 (= attend) column, for the extra key that add_bias_kv / add_zero_attn adds."""
    if mask is None:
        return None
    return cat([mask, zeros(tuple(mask.shape[:-1]) + (1,), dtype=mask.dtype, device=mask.device)], -1)


class MultiheadAttention(Module):
    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                f"num_heads={num_heads} instead"
            )
        if embed_dim % num_heads:
            raise ValueError(
                f"embed_dim must be divisible by num_heads, got embed_dim={embed_dim} and num_heads={num_heads}"
            )
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        factory = {"device": device, "dtype": dtype}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), **factory))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), **factory))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), **factory))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), **factory))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **factory))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **factory)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), **factory))
            self.bias_v = Parameter(empty((1, 1, embed_dim), **factory))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    # ------------------------------------------------------------------ checks
    def _check_shapes(self, query, key, value, key_padding_mask, attn_mask):
        if query.dim() not in (2, 3):
            raise ShapeError(
                f"MultiheadAttention: query should be unbatched 2D or batched 3D tensor but received "
                f"{query.dim()}-D query tensor (shape {fmt_shape(query.shape)})"
            )
        batched = query.dim() == 3
        for name, t in (("key", key), ("value", value)):
            if t.dim() != query.dim():
                raise ShapeError(
                    f"MultiheadAttention: for {'batched (3-D)' if batched else 'unbatched (2-D)'} "
                    f"query, expected {name} to be {query.dim()}-D, but received {t.dim()}-D "
                    f"(shape {fmt_shape(t.shape)})"
                )
        if query.shape[-1] != self.embed_dim:
            raise ShapeError(
                f"MultiheadAttention: was expecting embedding dimension of {self.embed_dim}, but got "
                f"query of shape {fmt_shape(query.shape)}"
            )
        if key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise ShapeError(
                f"MultiheadAttention: expected key and value feature sizes kdim={self.kdim} and "
                f"vdim={self.vdim}, got key {fmt_shape(key.shape)} and value {fmt_shape(value.shape)}"
            )
        if tuple(key.shape[:-1]) != tuple(value.shape[:-1]):
            raise ShapeError(
                f"MultiheadAttention: key shape {fmt_shape(key.shape)} does not match value shape "
                f"{fmt_shape(value.shape)}"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != query.dim() - 1:
            raise ShapeError(
                f"MultiheadAttention: for a {query.dim()}-D query, expected key_padding_mask to be "
                f"{query.dim() - 1}-D, but got shape {fmt_shape(key_padding_mask.shape)}"
            )
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise ShapeError(
                f"MultiheadAttention: expected attn_mask to be 2-D or 3-D, but got shape {fmt_shape(attn_mask.shape)}"
            )
        return batched

    def _project(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E : 2 * E], b[2 * E :])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:  # self-attention: one matmul for q, k and v
                return F.linear(query, w, b).chunk(3, -1)
            wq, wk, wv = w[:E], w[E : 2 * E], w[2 * E :]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        batched = self._check_shapes(query, key, value, key_padding_mask, attn_mask)
        if batched and self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        elif not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        tgt_len, bsz, E = query.shape
        src_len = key.shape[0]
        H, hd = self.num_heads, self.head_dim
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ShapeError(
                f"MultiheadAttention: expected key_padding_mask of shape {(bsz, src_len)}, but got "
                f"{fmt_shape(key_padding_mask.shape)}"
            )
        key_padding_mask = _additive_mask(key_padding_mask, "key_padding_mask", query.dtype)

        if is_causal and attn_mask is None:
            raise ValueError(
                "MultiheadAttention: need attn_mask if specifying the is_causal hint (pass the "
                "causal mask itself, e.g. a boolean triu mask with diagonal=1)"
            )
        if is_causal and key_padding_mask is None and not need_weights:
            attn_mask = None  # the hint lets the fused kernel build the causal mask itself
        else:
            attn_mask = _additive_mask(attn_mask, "attn_mask", query.dtype)
            is_causal = False  # the mask is applied explicitly (maybe merged with the padding mask)
        if attn_mask is not None:
            expected = (tgt_len, src_len) if attn_mask.dim() == 2 else (bsz * H, tgt_len, src_len)
            if tuple(attn_mask.shape) != expected:
                raise ShapeError(
                    f"MultiheadAttention: the shape of the {attn_mask.dim()}D attn_mask is "
                    f"{fmt_shape(attn_mask.shape)}, but should be {expected}."
                )
            if attn_mask.dim() == 2:
                attn_mask = attn_mask.unsqueeze(0)

        q, k, v = self._project(query, key, value)
        if self.bias_k is not None:
            k = cat([k, self.bias_k.repeat(1, bsz, 1)], 0)
            v = cat([v, self.bias_v.repeat(1, bsz, 1)], 0)
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)

        # (L, N, E) -> (N * H, L, hd)
        q = q.reshape(tgt_len, bsz * H, hd).transpose(0, 1)
        k = k.reshape(k.shape[0], bsz * H, hd).transpose(0, 1)
        v = v.reshape(v.shape[0], bsz * H, hd).transpose(0, 1)
        if self.add_zero_attn:
            extra = zeros((bsz * H, 1, hd), dtype=q.dtype, device=q.device)
            k = cat([k, extra], 1)
            v = cat([v, extra], 1)
            attn_mask = _pad_last(attn_mask)
            key_padding_mask = _pad_last(key_padding_mask)
        src_len = k.shape[1]

        if key_padding_mask is not None:
            kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, H, 1, src_len).reshape(bsz * H, 1, src_len)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm

        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q * math.sqrt(1.0 / hd)).matmul(k.transpose(-2, -1))
            if attn_mask is not None:
                scores = scores + attn_mask
            weights = F.softmax(scores, -1)
            if dropout_p > 0.0:
                weights = F.dropout(weights, p=dropout_p)
            out = weights.matmul(v)  # (N * H, L, hd)
            out = out.transpose(0, 1).reshape(tgt_len * bsz, E)
            out = F.linear(out, self.out_proj.weight, self.out_proj.bias).reshape(tgt_len, bsz, E)
            weights = weights.reshape(bsz, H, tgt_len, src_len)
            if average_attn_weights:
                weights = weights.mean(1)
            if not batched:
                out, weights = out.squeeze(1), weights.squeeze(0)
        else:
            if attn_mask is not None:
                attn_mask = (
                    attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else attn_mask.reshape(bsz, H, -1, src_len)
                )
            q = q.reshape(bsz, H, tgt_len, hd)
            k = k.reshape(bsz, H, src_len, hd)
            v = v.reshape(bsz, H, src_len, hd)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
            out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, E)
            out = F.linear(out, self.out_proj.weight, self.out_proj.bias).reshape(tgt_len, bsz, E)
            weights = None
            if not batched:
                out = out.squeeze(1)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        return out, weights
