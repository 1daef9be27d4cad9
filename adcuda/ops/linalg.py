"""Matrix products: ``matmul`` (1-D, 2-D and batched with broadcast batch dims), ``mm bmm dot outer``
and ``nn.functional.linear``.

Forwards call the backend's gemm family (``matmul``: ``kernels/gemm.cu``). matmul, mm, bmm and
linear run in the autocast region's half dtype; dot promotes mixed inputs to float32."""
from __future__ import annotations

from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import Tensor, primitives
from .common import broadcast_shapes, check_same_device, wrap
from .registry import op


@op("mm_nd", doc="The batched matrix product of two tensors of >= 2 dims (broadcast batch dims).",
    function=False, method=False, node="MmBackward0",
    grads={"input": lambda grad, other: mm_nd(grad, other.mT),
           "other": lambda grad, input: mm_nd(input.mT, grad)})
def mm_nd(input: Tensor, other: Tensor) -> Tensor:
    return wrap(primitives(input).matmul(input._data, other._data), input._device)


@op("mv", doc="matrix @ vector as one product (the vector viewed as a column).", function=False, method=False,
    node="MvBackward0",
    grads={"input": lambda grad, vec: grad.unsqueeze(1) * vec.unsqueeze(0),
           "vec": lambda grad, input: matmul(input.mT, grad)})
def mv(input: Tensor, vec: Tensor) -> Tensor:
    bk = primitives(input)
    # a 1-D array is always viewable as a column; the (m, 1) product is contiguous, so is its row
    product = bk.matmul(input._data, bk.view(vec._data, (vec._data.shape[0], 1)))
    return wrap(bk.view(product, (input._data.shape[0],)), input._device)


def _matmul(name, input, other):
    """matmul's checks and dispatch; ``name`` names the public op in errors (matmul, mm, bmm, dot)."""
    if (input.__class__ is Tensor and other.__class__ is Tensor and input._device is other._device
            and input._data.dtype == other._data.dtype and input._data.ndim == 2
            and input._data.shape[1] == other._data.shape[0]):
        # fast paths for the common 2-D cases (linear layers): nothing to unsqueeze or broadcast
        if other._data.ndim == 2:
            return mm_nd(input, other)
        if other._data.ndim == 1:
            return mv(input, other)
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise DTypeError(f"{name}: both operands must be Tensors, got {type(input).__name__} and "
                         f"{type(other).__name__}")
    check_same_device(name, input, other)
    if input.ndim == 0 or other.ndim == 0:
        raise ShapeError(f"{name}: both arguments need to be at least 1D, but they are {input.ndim}D and "
                         f"{other.ndim}D")
    if input.dtype is not other.dtype:
        raise DTypeError(f"{name}: expected both operands to have the same dtype, but got {input.dtype} "
                         f"and {other.dtype}")
    a = input.unsqueeze(0) if input.ndim == 1 else input
    b = other.unsqueeze(-1) if other.ndim == 1 else other
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"{name}: shapes {fmt_shape(input.shape)} and {fmt_shape(other.shape)} cannot be "
                         f"multiplied ({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")
    try:
        broadcast_shapes(name, tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ShapeError:
        raise ShapeError(f"{name}: the batch dims of shapes {fmt_shape(input.shape)} and "
                         f"{fmt_shape(other.shape)} cannot be broadcast") from None
    out = mm_nd(a, b)
    if input.ndim == 1:
        out = out.squeeze(-2)
    if other.ndim == 1:
        out = out.squeeze(-1)
    return out


@op("matmul", doc="The matrix product: 1-D, 2-D and batched with broadcast batch dims.", composite=True,
    autocast="lower", operators=("__matmul__", "__rmatmul__"))
def matmul(input: Tensor, other: Tensor) -> Tensor:
    return _matmul("matmul", input, other)


@op("mm", doc="The product of two matrices.", composite=True, autocast="lower")
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm: both arguments must be 2-D, got {fmt_shape(input.shape)} and {fmt_shape(mat2.shape)}")
    return _matmul("mm", input, mat2)


@op("bmm", doc="The products of two batches of matrices (3-D, same batch size).", composite=True, autocast="lower")
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm: expected two 3-D tensors with the same batch size, got "
                         f"{fmt_shape(input.shape)} and {fmt_shape(mat2.shape)}")
    return _matmul("bmm", input, mat2)


@op("dot", doc="The inner product of two 1-D tensors.", composite=True, autocast="promote")
def dot(input: Tensor, other: Tensor) -> Tensor:
    if input.ndim != 1 or other.ndim != 1 or input.shape[0] != other.shape[0]:
        raise ShapeError(f"dot: expected 1-D tensors of the same size, got {fmt_shape(input.shape)} and "
                         f"{fmt_shape(other.shape)}")
    return _matmul("dot", input, other)


@op("outer", doc="The outer product of two 1-D tensors.", composite=True, aliases=("ger",))
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer: expected 1-D vectors, got {fmt_shape(input.shape)} and {fmt_shape(vec2.shape)}")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


# ------------------------------------------------------------------------------------------------
# linear
@op("linear_2d", doc="input @ weight.T + bias for a 2-D input as one product (PyTorch's addmm).",
    function=False, method=False, node="AddmmBackward0",
    # the weight gradient comes out as grad.T @ input in the weight's own (out, in) layout, so the leaf
    # takes it without the transposed copy that input @ weight.t() followed by a transpose back would need
    grads={"input": lambda grad, weight: mm_nd(grad, weight),
           "weight": lambda grad, input: mm_nd(grad.mT, input),
           "bias": lambda grad: grad.sum(0)})
def linear_2d(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    bk = primitives(input)
    data = bk.matmul(input._data, bk.permute(weight._data, (1, 0)))
    if bias is not None:
        data = bk.binary("add", data, bias._data, input.dtype)
    return wrap(data, input._device)


@op("linear", doc="input @ weight.T + bias; input (*, in_features), weight (out_features, in_features).",
    composite=True, autocast="lower", function=False, method=False, functional=True)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise DTypeError(f"linear: {name} must be a Tensor, got {type(t).__name__}")
    if weight.ndim not in (1, 2) or input.ndim == 0:
        raise ShapeError(f"linear: expected weight of shape (out_features, in_features) and input of shape "
                         f"(*, in_features), got weight {fmt_shape(weight.shape)} and input {fmt_shape(input.shape)}")
    in_features = weight.shape[-1]
    if input.shape[-1] != in_features:
        out_desc = f"out_features={weight.shape[0]}, " if weight.ndim == 2 else ""
        raise ShapeError(f"linear: input has {input.shape[-1]} features (shape {fmt_shape(input.shape)}) but weight "
                         f"of shape {fmt_shape(weight.shape)} expects {out_desc}in_features={in_features}")
    if weight.ndim == 2 and input.ndim >= 2 and input.dtype is weight.dtype and input.device == weight.device and (
            bias is None or (isinstance(bias, Tensor) and tuple(bias.shape) == (weight.shape[0],)
                             and bias.dtype is input.dtype and bias.device == input.device)):
        if input.ndim == 2:
            return linear_2d(input, weight, bias)
        lead = tuple(input.shape[:-1])
        return linear_2d(input.reshape(-1, in_features), weight, bias).reshape(lead + (weight.shape[0],))
    w_t = weight.t() if weight.ndim == 2 else weight
    if input.ndim > 2:
        # one 2-D product instead of a batched one: the weight gradient is then a single matmul
        lead = tuple(input.shape[:-1])
        out = matmul(input.reshape(-1, in_features), w_t).reshape(lead + tuple(w_t.shape[1:]))
    else:
        out = matmul(input, w_t)
    if bias is not None:
        if not isinstance(bias, Tensor):
            raise DTypeError(f"linear: bias must be a Tensor, got {type(bias).__name__}")
        out_features = tuple(w_t.shape[1:])
        if tuple(bias.shape) not in (out_features, (1,) * len(bias.shape)) or bias.ndim > 1:
            raise ShapeError(f"linear: bias of shape {fmt_shape(bias.shape)} does not match out_features "
                             f"{out_features[0] if out_features else 'of a 1-D weight'} (weight shape "
                             f"{fmt_shape(weight.shape)})")
        out = out + bias
    return out
