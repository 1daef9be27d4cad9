"""embedding: rows of a weight matrix at integer indices (the backend's embedding family:
``kernels/embedding.cu``, which checks the indices on the device and sums the weight gradient
deterministically)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError, fmt_shape
from ..tensor import primitives
from .common import check_float, check_same_device, check_tensor, dense, filled, wrap
from .elementwise import where
from .indexing import index_put
from .registry import op

if TYPE_CHECKING:
    from ..types import Tensor


def _lookup_grad(grad, input, num_embeddings, padding_idx, scale_grad_by_freq):
    """The weight gradient as differentiable ops, for create_graph=True."""
    g, idx = grad, input
    if padding_idx is not None:
        g = g * (idx != padding_idx).unsqueeze(-1).to(dtype=g.dtype)
    weight_grad = index_put(filled((num_embeddings, g.shape[-1]), 0, g.dtype, g._device), (idx,), g, accumulate=True)
    if scale_grad_by_freq:
        counts = index_put(
            filled((num_embeddings,), 0, g.dtype, g._device),
            (idx,),
            filled(tuple(idx.shape), 1, g.dtype, g._device),
            accumulate=True,
        )
        weight_grad = weight_grad / counts.clamp(min=1.0).unsqueeze(1)
    return weight_grad


def _lookup_fused_grad(grad, input, num_embeddings, padding_idx, scale_grad_by_freq):
    return wrap(
        primitives(grad).embedding_backward(dense(grad), input._data, num_embeddings, padding_idx, scale_grad_by_freq),
        grad._device,
    )


@op(
    "embedding_lookup",
    doc="The rows of weight at input (indices checked by the primitive).",
    function=False,
    method=False,
    node="EmbeddingBackward0",
    grads={"weight": _lookup_grad},
    fused={"weight": _lookup_fused_grad},
)
def embedding_lookup(
    input: Tensor, weight: Tensor, num_embeddings: int, padding_idx: int | None, scale_grad_by_freq: bool
) -> Tensor:
    # the primitive checks the indices (on a GPU on the device, with its one sync): no host round trip here
    return wrap(primitives(weight).embedding(weight._data, input._data), weight._device)


def _renorm_rows_(weight, indices, max_norm, norm_type):
    """PyTorch's embedding_renorm_: rows that ``indices`` reach and whose norm exceeds ``max_norm``
    are scaled down in place, outside the graph."""
    with no_grad():
        rows = weight[indices.reshape(-1)]
        norms = rows.norm(norm_type, 1, keepdim=True)
        scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[indices.reshape(-1)] = rows * scale


@op(
    "embedding",
    doc="The rows of weight at the integer indices input (with padding_idx, max_norm renorm).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    name = "embedding"
    check_tensor(name, "input", input)
    check_float(name, "weight", weight)
    if input.dtype.category != dt.INTEGER:
        raise DTypeError(f"{name}: expected indices with an integer dtype (int64 or int32), got {input.dtype}")
    if weight.ndim != 2:
        raise ShapeError(
            f"{name}: weight must be 2-D (num_embeddings, embedding_dim), got shape {fmt_shape(weight.shape)}"
        )
    if sparse:
        raise NotImplementedError(f"{name}: sparse gradients are not supported by adcuda; use sparse=False")
    check_same_device(name, input, weight)
    num_embeddings = weight.shape[0]
    if padding_idx is not None:
        if not -num_embeddings <= padding_idx < num_embeddings:
            raise IndexOutOfRangeError(
                f"{name}: padding_idx {padding_idx} must be within num_embeddings ({num_embeddings})"
            )
        padding_idx %= num_embeddings
    if max_norm is not None:
        # out-of-range indices raise before the renorm indexes with them
        primitives(weight).embedding(weight._data, input._data)
        _renorm_rows_(weight, input, max_norm, norm_type)
    return embedding_lookup(input, weight, num_embeddings, padding_idx, scale_grad_by_freq)
