"""embedding: rows of a weight matrix at integer indices (the backend's embedding family:
``kernels/embedding.cu``, which checks the indices on the device and sums the weight gradient
deterministically)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..errors import IndexOutOfRangeError, ShapeError, UnsupportedDTypeError, fmt_shape
from ..tensor import primitives
from .common import check_float, check_same_device, check_tensor, dense, filled, wrap
from .dtype_support import FLOATING
from .elementwise import where
from .factories import arange
from .index import index_put
from .registry import lowering, op

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
    check_tensor(name, "weight", weight)  # a lookup: rows of any dtype, as in PyTorch
    if input.dtype.category != dt.INTEGER:
        raise UnsupportedDTypeError(
            f"{name}: expected indices with an integer dtype (int64 or int32), got {input.dtype}"
        )
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
        check_float(name, "weight", weight)  # the norms of its rows are PyTorch's float-only norm's
        # out-of-range indices raise before the renorm indexes with them
        primitives(weight).embedding(weight._data, input._data)
        _renorm_rows_(weight, input, max_norm, norm_type)
    return embedding_lookup(input, weight, num_embeddings, padding_idx, scale_grad_by_freq)


# ------------------------------------------------------------------------------------------------
# embedding_bag (issue 15): the bags' rows reduced, composed of embedding and a scatter per bag
@op(
    "embedding_bag",
    dtypes=FLOATING.of_each("weight"),
    doc="The sum, mean or max of the rows of weight of each bag of indices (bags by offsets, or rows of 2-d input).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    name = "embedding_bag"
    check_tensor(name, "input", input)
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{name}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if input.ndim == 2:
        if offsets is not None:
            raise ShapeError(
                f"{name}: offsets must be None for a 2-d input (each row is a bag), got {fmt_shape(offsets.shape)}"
            )
        bags, length = input.shape
        bag_of = (arange(bags, device=input.device).unsqueeze(1) + input.new_zeros((1, length))).reshape(-1)
        flat = input.reshape(-1)
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ShapeError(f"{name}: a 1-d input needs 1-d offsets (where each bag starts)")
        n = input.shape[0]
        starts = offsets[:-1] if include_last_offset else offsets
        bags = starts.shape[0]
        if bags and (int(starts[0]) != 0 or int(starts.max()) > n):
            raise IndexOutOfRangeError(f"{name}: offsets must start at 0 and stay within input's {n} indices")
        # bag i holds the indices from starts[i] on: the bag of index j is the last start <= j
        bag_of = (starts.unsqueeze(0) <= arange(n, device=input.device).unsqueeze(1)).sum(1) - 1
        flat = input
    else:
        raise ShapeError(
            f"{name}: input must be 1-d (with offsets) or 2-d (a bag per row), got {fmt_shape(input.shape)}"
        )
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError(f"{name}: per_sample_weights are only supported for mode='sum', got mode={mode!r}")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ShapeError(
                f"{name}: per_sample_weights {fmt_shape(per_sample_weights.shape)} must have input "
                f"{fmt_shape(input.shape)}'s shape"
            )
    if input.ndim == 2 and mode != "max" and length and padding_idx is None and per_sample_weights is None:
        # bags of one length, nothing left out: the rows' sum or mean over each bag's dim (two ops,
        # where the scatter into bags below dispatches a dozen)
        bagged = embedding(input, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
        return bagged.sum(1) if mode == "sum" else bagged.mean(1)
    rows = embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    keep = None
    if padding_idx is not None:
        keep = flat != (padding_idx % weight.shape[0])  # padding entries count in no bag
        rows = rows * keep.unsqueeze(1).to(dtype=rows.dtype)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1).to(dtype=rows.dtype)
    dim = weight.shape[1]
    out = filled((bags, dim), 0, weight.dtype, weight._device)
    index = bag_of.unsqueeze(1).expand(bag_of.shape[0], dim)
    if mode == "max":
        if keep is not None:
            rows = where(keep.unsqueeze(1), rows, -math.inf)
        out = out.scatter_reduce(0, index, rows, "amax", include_self=False)
        return where(out == -math.inf, 0.0, out)  # an empty (or all-padding) bag gives zeros
    out = out.scatter_add(0, index, rows)
    if mode == "sum":
        return out
    counted = keep.to(dtype=weight.dtype) if keep is not None else flat.new_ones(flat.shape, dtype=weight.dtype)
    counts = filled((bags,), 0, weight.dtype, weight._device).scatter_add(0, bag_of, counted)
    return out / counts.clamp(min=1).unsqueeze(1)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("embedding", onnx=lambda w, node, **params: w.embedding(node, **params))
