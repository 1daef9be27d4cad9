"""The Transformer layers of "Attention Is All You Need" with PyTorch's names, parameters and masking
rules: ``TransformerEncoderLayer``, ``TransformerDecoderLayer``, their stacks ``TransformerEncoder``
and ``TransformerDecoder``, and the encoder-decoder ``Transformer``.

Parameter names are PyTorch's (``self_attn.in_proj_weight``, ``linear1.weight``, ``norm1.bias``,
``layers.0...``), so state dicts load both ways. Masks follow ``MultiheadAttention``: a bool mask's
``True`` means "do not attend", a float mask is added to the scores. Every layer computes what
PyTorch's reference ("slow") path computes; PyTorch's eval-mode fast path with nested tensors (which
writes 0 at padded positions of a ``src_key_padding_mask``) has no counterpart here: padded positions
hold the same values as in training mode.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from ... import dtypes as dt
from ...errors import DTypeError, ShapeError, fmt_shape
from ...factories import full, zeros
from ...ops.index import masked_fill, triu
from ...ops.norm import add_layer_norm
from .. import functional as F
from .. import init
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm

if TYPE_CHECKING:
    from ...types import Callable, Device, DType, Tensor


def generate_square_subsequent_mask(sz: int, device: Device | str | None = None, dtype: DType | None = None) -> Tensor:
    """The causal mask of a sequence of ``sz``: ``-inf`` above the diagonal (future positions), 0 elsewhere."""
    return triu(full((sz, sz), float("-inf"), dtype=dtype or dt.float32, device=device), diagonal=1)


def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise ValueError(f"activation should be relu/gelu, not {activation}")
    if not callable(activation):
        raise TypeError(f"activation should be 'relu', 'gelu' or a callable, got {type(activation).__name__}")
    return activation


def _float_mask(mask, name, dtype):
    """A bool mask (True = masked out) as the additive float mask of ``dtype``; a float mask as it is."""
    if mask is None:
        return None
    if mask.dtype is dt.bool_:
        return masked_fill(zeros(tuple(mask.shape), dtype=dtype, device=mask.device), mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise DTypeError(f"Transformer: only bool and floating types of {name} are supported, got {mask.dtype}")
    return mask


def _detect_is_causal(mask, is_causal, size):
    """``is_causal`` as given, or (None) whether ``mask`` is exactly the causal mask of ``size``, so the
    layers can use the fused causal kernel for a mask built with ``generate_square_subsequent_mask``."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    if tuple(mask.shape) != (size, size):
        return False
    return bool((mask == generate_square_subsequent_mask(size, device=mask.device, dtype=mask.dtype)).all())


def _seq_len(x, batch_first):
    return x.shape[1] if batch_first and x.dim() == 3 else x.shape[0]


def _stack_self_attention_mask(layers, x, mask, mask_name, is_causal):
    """A stack's self-attention mask for ``x`` as a float mask, and whether it is causal (as given, or
    detected from the mask) in the batch layout of the stack's layers."""
    mask = _float_mask(mask, mask_name, x.dtype)
    batch_first = bool(layers) and layers[0].self_attn.batch_first
    return mask, _detect_is_causal(mask, is_causal, _seq_len(x, batch_first))


class _TransformerLayer(Module):
    # What the encoder and decoder layers share: PyTorch's constructor (the decoder adds attention to the
    # encoder's output, ``multihead_attn``, with its own norm and dropout), registering the submodules in
    # PyTorch's order so state dicts and reprs match, and the self-attention and feed-forward blocks.
    _attends_to_memory = False

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}

        def attention():
            return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **factory)

        def layer_norm():
            return LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)

        self.self_attn = attention()
        if self._attends_to_memory:
            self.multihead_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = layer_norm()
        self.norm2 = layer_norm()
        if self._attends_to_memory:
            self.norm3 = layer_norm()
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if self._attends_to_memory:
            self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)
        self.batch_first = batch_first

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        # the feed-forward block's residual dropout is the layer's last: dropout2, or dropout3 in the decoder
        last_dropout = self.dropout3 if self._attends_to_memory else self.dropout2
        return last_dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _plain_layer_norm(norm):
    """Whether ``norm`` is a LayerNorm whose forward is F.layer_norm alone (no subclass, no hooks), so
    that add_layer_norm may stand for it."""
    return type(norm) is LayerNorm and not norm._forward_hooks and not norm._forward_pre_hooks


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention and a feed-forward block, each in a residual connection with layer norm
    (after it by default, before it with ``norm_first``)."""

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        if self.norm_first:
            branch = self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            if _plain_layer_norm(self.norm2):
                # the residual add and norm2 in one pass (and one for their backward)
                y, x = add_layer_norm(
                    branch, x, self.norm2.normalized_shape, self.norm2.weight, self.norm2.bias, self.norm2.eps
                )
                return x + self._ff_block(y)
            x = x + branch
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention over the target, attention to the encoder's output (``memory``) and a
    feed-forward block, each in a residual connection with layer norm (after it by default, before
    it with ``norm_first``)."""

    _attends_to_memory = True

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            return x + self._ff_block(self.norm3(x))
        x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self.norm3(x + self._ff_block(x))

    def _mha_block(self, x, memory, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(
            x,
            memory,
            memory,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout2(x)


def _clones(layer, n):
    """``n`` independent deep copies of ``layer`` (PyTorch's stacks copy the layer they are given)."""
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` applied in turn, then ``norm`` (if given).
    ``enable_nested_tensor`` and ``mask_check`` are accepted for compatibility (no nested tensors here)."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        mask, is_causal = _stack_self_attention_mask(self.layers, src, mask, "mask", is_causal)
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=src_key_padding_mask)
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` applied in turn, then ``norm`` (if given)."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        tgt_mask, tgt_is_causal = _stack_self_attention_mask(self.layers, tgt, tgt_mask, "tgt_mask", tgt_is_causal)
        output = tgt
        for layer in self.layers:
            output = layer(
                output,
                memory,
                tgt_mask=tgt_mask,
                memory_mask=memory_mask,
                tgt_key_padding_mask=tgt_key_padding_mask,
                memory_key_padding_mask=memory_key_padding_mask,
                tgt_is_causal=tgt_is_causal,
                memory_is_causal=memory_is_causal,
            )
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """An encoder stack and a decoder stack (each ending in a layer norm); ``custom_encoder`` and
    ``custom_decoder`` replace them. Matrices are initialised Xavier-uniform, as in PyTorch."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        layer_args = dict(
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            batch_first=batch_first,
            norm_first=norm_first,
            bias=bias,
            **factory,
        )
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(d_model, nhead, **layer_args),
                num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory),
            )
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(d_model, nhead, **layer_args),
                num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory),
            )
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        batch_dim = 0 if self.batch_first else 1
        if src.dim() == 3 and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise ShapeError(
                f"Transformer: the batch number of src and tgt must be equal, got src "
                f"{fmt_shape(src.shape)} and tgt {fmt_shape(tgt.shape)} (batch_first={self.batch_first})"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(
                f"Transformer: the feature number of src and tgt must be equal to d_model={self.d_model}, "
                f"got src {fmt_shape(src.shape)} and tgt {fmt_shape(tgt.shape)}"
            )
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask=tgt_mask,
            memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask,
            tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(
        sz: int, device: Device | str | None = None, dtype: DType | None = None
    ) -> Tensor:
        """The causal mask of a sequence of ``sz``: ``-inf`` above the diagonal, 0 elsewhere."""
        return generate_square_subsequent_mask(sz, device=device, dtype=dtype)
