"""Matrix products: ``matmul`` (1-D, 2-D and batched with broadcast batch dims), ``mm bmm dot outer``
and ``nn.functional.linear``.

Forwards call the backend's gemm family (``matmul``: ``kernels/gemm.cu``). matmul, mm, bmm and
linear run in the autocast region's half dtype; dot promotes mixed inputs to float32."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np  # pdist's direct lane: the dtypes of the host arrays it takes

from .. import dtypes as dt
from ..autograd.graph import needs_grad
from ..backends import cpu as _cpu
from ..backends.cpu.gemm import plain_cosine_similarity
from ..backends.memo import remember
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedDTypeError, fmt_shape
from ..tensor import Tensor, primitives
from . import dispatch
from .common import broadcast_shapes, check_same_device, result_type, scalar_for, wrap, wrap_dim
from .dtype_support import FLOATING, NUMBERS
from .index import diagonal, index_key, triangle_coordinates
from .layout import cat
from .registry import get, lowering, op
from .sparse import SparseTensor, sparse_matmul

if TYPE_CHECKING:
    from ..types import Number, Sequence


@op(
    "mm_nd",
    doc="The batched matrix product of two tensors of >= 2 dims (broadcast batch dims).",
    function=False,
    method=False,
    node="MmBackward0",
    grads={"input": lambda grad, other: mm_nd(grad, other.mT), "other": lambda grad, input: mm_nd(input.mT, grad)},
)
def mm_nd(input: Tensor, other: Tensor) -> Tensor:
    return wrap(primitives(input).matmul(input._data, other._data), input._device)


@op(
    "mv",
    plain="product",
    dtypes=NUMBERS.unless_empty().one_dtype("input", "vec"),
    doc="matrix input (n, m) @ vector vec (m,) as one product (the backends' matrix-vector form).",
    node="MvBackward0",
    autocast="lower",
    grads={
        "input": lambda grad, vec: grad.unsqueeze(1) * vec.unsqueeze(0),
        "vec": lambda grad, input: matmul(input.mT, grad),
    },
)
def mv(input: Tensor, vec: Tensor) -> Tensor:
    return wrap(_matrix_vector("mv", input, vec), input._device)


def _matrix_vector(name, input, vec):
    """The backend's product of the matrix ``input`` and the vector ``vec``, checked (mv's, addmv's)."""
    # (one test for the common case, on the arrays: matmul's fast path calls mv for every matrix @
    # vector, and Tensor.shape builds a new tuple per read)
    if (
        input.__class__ is not Tensor
        or vec.__class__ is not Tensor
        or input._data.ndim != 2
        or vec._data.ndim != 1
        or input._data.shape[1] != vec._data.shape[0]
        or input._device is not vec._device
    ):
        _check_mv_operands(name, input, vec)
        if input.shape[1] != vec.shape[0]:
            raise ShapeError(
                f"{name}: input {fmt_shape(input.shape)} and vec {fmt_shape(vec.shape)} cannot be multiplied"
            )
        check_same_device(name, input, vec)
    return primitives(input).matmul(input._data, vec._data)


def _check_product_operands(name, input, other):
    """The operands of a product on one device and of one dtype (PyTorch's products promote nothing)."""
    check_same_device(name, input, other)
    if input.dtype is not other.dtype:
        raise UnsupportedDTypeError(
            f"{name}: expected both operands to have the same dtype, but got {input.dtype} and {other.dtype}"
        )


def _matmul(name, input, other):
    """matmul's checks and dispatch; ``name`` names the public op in errors (matmul, mm, bmm, dot)."""
    if input.__class__ is Tensor and other.__class__ is Tensor:
        a, b = input._data, other._data
        # fast paths for the common 2-D cases (linear layers): nothing to unsqueeze or broadcast (one
        # dtype object: the usual case; equal dtypes that are distinct objects take the general path)
        if a.ndim == 2 and a.dtype is b.dtype and input._device is other._device and a.shape[1] == b.shape[0]:
            if b.ndim == 1:
                return mv(input, other)
            if b.ndim == 2:
                return mm_nd(input, other)
    if input.__class__ is SparseTensor or other.__class__ is SparseTensor:
        return sparse_matmul(input, other, name)
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise DTypeError(
            f"{name}: both operands must be Tensors, got {type(input).__name__} and {type(other).__name__}"
        )
    if input.ndim == 0 or other.ndim == 0:
        raise ShapeError(f"{name}: both arguments need to be at least 1D, but they are {input.ndim}D and {other.ndim}D")
    _check_product_operands(name, input, other)
    a = input.unsqueeze(0) if input.ndim == 1 else input
    b = other.unsqueeze(-1) if other.ndim == 1 else other
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"{name}: shapes {fmt_shape(input.shape)} and {fmt_shape(other.shape)} cannot be "
            f"multiplied ({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})"
        )
    try:
        broadcast_shapes(name, tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ShapeError:
        raise ShapeError(
            f"{name}: the batch dims of shapes {fmt_shape(input.shape)} and "
            f"{fmt_shape(other.shape)} cannot be broadcast"
        ) from None
    out = mm_nd(a, b)
    if input.ndim == 1:
        out = out.squeeze(-2)
    if other.ndim == 1:
        out = out.squeeze(-1)
    return out


# matmul's and mm's declaration: composites (they record through mm_nd or mv) with the products' fast lane
_COMPOSITE_PRODUCT: dict[str, Any] = {
    "plain": "product",
    "dtypes": NUMBERS.unless_empty(),
    "composite": True,
    "autocast": "lower",
}


@op(
    "matmul",
    doc="The matrix product: 1-D, 2-D and batched with broadcast batch dims.",
    operators=("__matmul__", "__rmatmul__"),
    **_COMPOSITE_PRODUCT,
)
def matmul(input: Tensor, other: Tensor) -> Tensor:
    return _matmul("matmul", input, other)


@op("mm", doc="The product of two matrices.", **_COMPOSITE_PRODUCT)
def mm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm: both arguments must be 2-D, got {fmt_shape(input.shape)} and {fmt_shape(mat2.shape)}")
    return _matmul("mm", input, mat2)


@op(
    "bmm",
    plain="product",
    dtypes=NUMBERS.unless_empty(),
    doc="The products of two batches of matrices (3-D, same batch size).",
    node="BmmBackward0",
    autocast="lower",
    grads={"input": lambda grad, mat2: bmm(grad, mat2.mT), "mat2": lambda grad, input: bmm(input.mT, grad)},
)
def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    # one product primitive (matmul's general path checked and dispatched it as a second op)
    return wrap(_product("bmm", input, mat2, 3), input._device)


def _product(name, a, b, ndim):
    """The backend's product of ``a`` and ``b``, both matrices (``ndim`` 2) or batches of as many
    matrices (3), checked: the product primitive of bmm and of the add-a-product ops."""
    _check_product(name, a, b, ndim)
    return primitives(a).matmul(a._data, b._data)


def _check_product(name, a, b, ndim):
    """``a`` and ``b`` both matrices (``ndim`` 2) or batches of as many matrices (3) that multiply."""
    if (
        not isinstance(a, Tensor)
        or not isinstance(b, Tensor)
        or a.ndim != ndim
        or b.ndim != ndim
        or a.shape[-1] != b.shape[-2]
        or a.shape[0] != b.shape[0]
        and ndim == 3
    ):
        what = "two matrices" if ndim == 2 else "two 3-D tensors with the same batch size"
        raise ShapeError(
            f"{name}: expected {what} that can be multiplied, got shapes "
            f"{fmt_shape(getattr(a, 'shape', ()))} and {fmt_shape(getattr(b, 'shape', ()))}"
        )
    _check_product_operands(name, a, b)


def _dot(name, input, tensor):
    """dot's and vdot's forward: one product of a (1, n) view and the vector, not matmul's unsqueeze,
    product and squeeze as three dispatched ops (about 15x PyTorch's time for 128-vectors)."""
    x, y = input._data, tensor._data
    if x.ndim != 1 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ShapeError(
            f"{name}: expected 1-D tensors of the same size, got {fmt_shape(input.shape)} and {fmt_shape(tensor.shape)}"
        )
    if input._device is not tensor._device or x.dtype != y.dtype:
        if name == "vdot" and input.dtype is not tensor.dtype:
            raise InvalidArgumentError(
                f"vdot: expected both vectors to have the same dtype, got {input.dtype} and {tensor.dtype}"
            )
        _check_product_operands(name, input, tensor)
    bk = primitives(input)
    return wrap(bk.view(bk.matmul(bk.view(x, (1, x.shape[0])), y), ()), input._device)


@op(
    "dot",
    plain="product",
    dtypes=NUMBERS,
    doc="The inner product of two 1-D tensors.",
    node="DotBackward0",
    autocast="promote",
    grads={"input": lambda grad, tensor: grad * tensor, "tensor": lambda grad, input: grad * input},
)
def dot(input: Tensor, tensor: Tensor) -> Tensor:
    return _dot("dot", input, tensor)


@op(
    "vdot",
    plain="product",
    doc="The inner product of two 1-D tensors, the first conjugated (dot, for real tensors).",
    node="VdotBackward0",
    grads={"input": lambda grad, other: grad * other, "other": lambda grad, input: grad * input},
)
def vdot(input: Tensor, other: Tensor) -> Tensor:
    return _dot("vdot", input, other)


@op(
    "addr",
    plain="add_product",
    doc="beta * input + alpha * outer(vec1, vec2) (input ignored where beta is 0).",
    node="AddrBackward0",
    inplace=True,
    grads={
        "input": lambda grad, beta: _scaled(grad, beta),
        "vec1": lambda grad, vec2, alpha: _scaled((grad * vec2).sum(1), alpha),
        "vec2": lambda grad, vec1, alpha: _scaled((grad * vec1.unsqueeze(1)).sum(0), alpha),
    },
)
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    dtype = result_type(input, vec1, vec2)
    return _add_product("addr", input, _outer_array("addr", vec1, vec2, dtype), dtype, beta, alpha)


@op(
    "vander",
    doc="The Vandermonde matrix of the 1-D x: its columns powers of x (decreasing unless increasing).",
    composite=True,
    method=False,
)
def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:  # noqa: N803 (PyTorch's name)
    if x.ndim != 1:
        raise ShapeError(f"vander: x must be a one-dimensional tensor, got shape {fmt_shape(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {n}")
    # the running product of [1, x, x, ...]: PyTorch's form, so ints and bools give int64 as its cumprod
    if not needs_grad(x):  # on the backend's arrays (as ops, seven dispatches)
        bk, data = primitives(x), x._data
        dtype = dt.int64 if x.dtype is dt.bool_ else x.dtype
        rows = data.shape[0]
        column = bk.view(data if dtype is x.dtype else bk.astype(data, dtype), (rows, 1))
        columns = [bk.full((rows, 1), 1, dtype)] + ([bk.expand(column, (rows, n - 1))] if n > 1 else [])
        powers = bk.slice(bk.cumprod(bk.cat(columns, 1), 1), (slice(None), slice(0, n)))
        return wrap(powers if increasing else bk.flip(powers, (1,)), x._device)
    columns = [x.unsqueeze(1) * 0 + 1] + ([x.unsqueeze(1).expand(x.shape[0], n - 1)] if n > 1 else [])
    powers = cat(columns, 1).cumprod(1)[:, :n]
    return powers if increasing else powers.flip(1)


@op(
    "outer",
    plain="product",
    doc="The outer product of two 1-D tensors.",
    node="MulBackward0",  # PyTorch's outer is its mul of the two vectors' views
    aliases=("ger",),
    grads={
        "input": lambda grad, vec2: (grad * vec2).sum(1),
        "vec2": lambda grad, input: (grad * input.unsqueeze(1)).sum(0),
    },
)
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    return wrap(_outer_array("outer", input, vec2, result_type(input, vec2)), input._device)


def _outer_array(name, a, b, dtype):
    """The backend's outer product of the 1-D tensors ``a`` and ``b`` in ``dtype``: one product of a
    column and a row view (as ops, two unsqueezes and a mul dispatched)."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"{name}: expected 1-D vectors, got {fmt_shape(a.shape)} and {fmt_shape(b.shape)}")
    if a._device is not b._device:
        check_same_device(name, a, b)
    bk = primitives(a)
    x, y = a._data, b._data
    return bk.binary("mul", bk.view(x, (x.shape[0], 1)), bk.view(y, (1, y.shape[0])), dtype)


# ------------------------------------------------------------------------------------------------
# linear
def _rows(t):
    """``t`` (..., n) as a matrix of rows (n columns): itself when it already is one."""
    return t if t.ndim == 2 else t.reshape(-1, t.shape[-1])


def _row_array(t):
    """``t``'s array as a row-major matrix of rows (its last dim the columns): the array itself when it
    already is one."""
    bk = primitives(t)
    data = t._data
    if data.ndim == 2:
        return data
    shape = data.shape
    return bk.view(bk.contiguous(data), (math.prod(shape[:-1]), shape[-1]))


# linear_2d's gradients as the primitives compute them, for plain first-order backward: the same
# products as the formulas in ``grads``, without an op call (and its views) around each
def _linear_input_fused_grad(grad, weight, input_shape):
    bk = primitives(grad)
    dx = bk.matmul(_row_array(grad), weight._data)
    return wrap(dx if len(input_shape) == 2 else bk.view(dx, input_shape), grad._device)


def _linear_weight_fused_grad(grad, input):
    bk = primitives(grad)
    return wrap(bk.matmul(bk.permute(_row_array(grad), (1, 0)), _row_array(input)), grad._device)


def _linear_bias_fused_grad(grad):
    return wrap(primitives(grad).reduce("sum", _row_array(grad), (0,), False), grad._device)


@op(
    "linear_2d",
    doc="input (*, in) @ weight.T + bias as one 2-D product of input's rows (PyTorch's addmm).",
    function=False,
    method=False,
    node="AddmmBackward0",
    # the weight gradient comes out as grad.T @ input in the weight's own (out, in) layout, so the leaf
    # takes it without the transposed copy that input @ weight.t() followed by a transpose back would need;
    # an input with more than 2 dims is taken as its rows here rather than by reshape ops around the
    # product, which would each record a node (and run one more in backward)
    grads={
        "input": lambda grad, weight, input_shape: mm_nd(_rows(grad), weight).reshape(input_shape),
        "weight": lambda grad, input: mm_nd(_rows(grad).mT, _rows(input)),
        "bias": lambda grad: _rows(grad).sum(0),
    },
    fused={
        "input": _linear_input_fused_grad,
        "weight": _linear_weight_fused_grad,
        "bias": _linear_bias_fused_grad,
    },
)
def linear_2d(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    bk = primitives(input)
    x = input._data
    lead = x.shape[:-1]
    if len(lead) != 1:  # a contiguous array's rows are always a view
        x = bk.view(bk.contiguous(x), (math.prod(lead), x.shape[-1]))
    data = bk.matmul(x, bk.permute(weight._data, (1, 0)))
    if bias is not None:
        data = bk.binary("add", data, bias._data, input.dtype)
    if len(lead) != 1:
        data = bk.view(data, lead + (weight._data.shape[0],))
    return wrap(data, input._device)


def _linear_2d_call(input, weight, bias):
    """linear_2d, through its forward alone where nothing is recorded (its entry is a third of a small
    linear's cost)."""
    return (linear_2d if needs_grad(input, weight, bias) else get("linear_2d").forward)(input, weight, bias)


@op(
    "linear",
    dtypes=NUMBERS.unless_empty(),
    doc="input @ weight.T + bias; input (*, in_features), weight (out_features, in_features).",
    composite=True,
    autocast="lower",
    function=False,
    method=False,
    functional=True,
)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if input.__class__ is Tensor and weight.__class__ is Tensor and (bias is None or bias.__class__ is Tensor):
        # the common case in one test, on the arrays (Tensor.shape and .dtype make objects per read):
        # linear_2d's product, through its forward alone where nothing is recorded
        x, w = input._data, weight._data
        if (
            w.ndim == 2
            and x.ndim >= 2
            and x.shape[-1] == w.shape[1]
            and x.dtype is w.dtype
            and input._device is weight._device
            and (
                bias is None
                or bias._data.shape == w.shape[:1]
                and bias._data.dtype is x.dtype
                and bias._device is input._device
            )
        ):
            return _linear_2d_call(input, weight, bias)
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise DTypeError(f"linear: {name} must be a Tensor, got {type(t).__name__}")
    if weight.ndim not in (1, 2) or input.ndim == 0:
        raise ShapeError(
            f"linear: expected weight of shape (out_features, in_features) and input of shape "
            f"(*, in_features), got weight {fmt_shape(weight.shape)} and input {fmt_shape(input.shape)}"
        )
    in_features = weight.shape[-1]
    if input.shape[-1] != in_features:
        out_desc = f"out_features={weight.shape[0]}, " if weight.ndim == 2 else ""
        raise ShapeError(
            f"linear: input has {input.shape[-1]} features (shape {fmt_shape(input.shape)}) but weight "
            f"of shape {fmt_shape(weight.shape)} expects {out_desc}in_features={in_features}"
        )
    if (
        weight.ndim == 2
        and input.ndim >= 2
        and input.dtype is weight.dtype
        and input.device == weight.device
        and (
            bias is None
            or (
                isinstance(bias, Tensor)
                and tuple(bias.shape) == (weight.shape[0],)
                and bias.dtype is input.dtype
                and bias.device == input.device
            )
        )
    ):
        return _linear_2d_call(input, weight, bias)
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
            raise ShapeError(
                f"linear: bias of shape {fmt_shape(bias.shape)} does not match out_features "
                f"{out_features[0] if out_features else 'of a 1-D weight'} (weight shape "
                f"{fmt_shape(weight.shape)})"
            )
        out = out + bias
    return out


# ------------------------------------------------------------------------------------------------
# addmm, baddbmm, einsum; distances: cdist, pairwise_distance, cosine_similarity
def _add_product(name, input, product, dtype, beta, alpha):
    """beta * input + alpha * product over the backend's arrays, in ``dtype``: ``product`` the op's
    product (an array of that dtype), ``input`` broadcast to its shape; beta == 0 ignores input (NaN and
    inf in it included), as in PyTorch. The forward of addmm, baddbmm, addmv, addbmm and addr: the
    product and the sums as primitives, not ops dispatched one by one."""
    shape = product.shape  # (a backend array's: a tuple)
    if input._data.shape != shape:
        try:
            fits = broadcast_shapes(name, tuple(input.shape), shape) == shape
        except ShapeError:
            fits = False
        if not fits:
            raise ShapeError(
                f"{name}: input of shape {fmt_shape(input.shape)} does not broadcast to the product's "
                f"shape {fmt_shape(shape)}"
            )
        check_same_device(name, input)
    bk = primitives(input)
    if alpha.__class__ is float or beta.__class__ is float:  # (an integer product truncates them)
        alpha, beta = scalar_for(dtype, alpha), scalar_for(dtype, beta)
    if alpha != 1:
        product = bk.binary("mul", product, alpha, dtype)
    if beta == 0:
        return wrap(product, input._device)
    x = input._data if beta == 1 else bk.binary("mul", input._data, beta, dtype)
    return wrap(bk.binary("add", product, x, dtype), input._device)


def _scaled(t, factor):
    """``t * factor``, or ``t`` itself for a factor of 1 (the add-a-product ops' gradients)."""
    return t if factor == 1 else t * factor


@op(
    "addmm",
    plain="add_product",
    dtypes=NUMBERS.unless_empty().one_dtype("input", "mat1", "mat2"),
    inplace=True,
    doc="beta * input + alpha * (mat1 @ mat2) for matrices mat1 and mat2.",
    node="AddmmBackward0",
    autocast="lower",
    grads={
        "input": lambda grad, beta: _scaled(grad, beta),
        "mat1": lambda grad, mat2, alpha: _scaled(mm_nd(grad, mat2.mT), alpha),
        "mat2": lambda grad, mat1, alpha: _scaled(mm_nd(mat1.mT, grad), alpha),
    },
)
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    return _add_product("addmm", input, _product("addmm", mat1, mat2, 2), input.dtype, beta, alpha)


@op(
    "baddbmm",
    plain="add_product",
    dtypes=NUMBERS.unless_empty().one_dtype("input", "batch1", "batch2"),
    inplace=True,
    doc="beta * input + alpha * (batch1 @ batch2) for batches of matrices.",
    node="BaddbmmBackward0",
    autocast="lower",
    grads={
        "input": lambda grad, beta: _scaled(grad, beta),
        "batch1": lambda grad, batch2, alpha: _scaled(mm_nd(grad, batch2.mT), alpha),
        "batch2": lambda grad, batch1, alpha: _scaled(mm_nd(batch1.mT, grad), alpha),
    },
)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    return _add_product("baddbmm", input, _product("baddbmm", batch1, batch2, 3), input.dtype, beta, alpha)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_parse(equation, operands):
    """(per-operand label lists, output labels), '...' replaced by labels of their own (the leading
    broadcast dims, right-aligned across operands)."""
    equation = equation.replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(
            f"einsum: the equation {equation!r} names {len(terms)} operands, but {len(operands)} were given"
        )
    used = set(equation) - set(".,->")
    free = [c for c in _LETTERS if c not in used]
    ellipsis_rank = 0
    for term, t in zip(terms, operands):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, t.ndim - (len(term) - 3))
    broadcast = free[:ellipsis_rank]
    labels = []
    for i, (term, t) in enumerate(zip(terms, operands)):
        if any(c not in _LETTERS for c in term.replace("...", "")):
            raise ValueError(f"einsum: operand {i}'s subscripts {term!r} may only hold letters and one '...'")
        if "..." in term:
            head, _, tail = term.partition("...")
            rank = t.ndim - len(head) - len(tail)
            if rank < 0:
                raise ShapeError(
                    f"einsum: operand {i} of shape {fmt_shape(t.shape)} has fewer dims than its subscripts {term!r}"
                )
            term_labels = list(head) + broadcast[ellipsis_rank - rank :] + list(tail)
        else:
            term_labels = list(term)
        if len(term_labels) != t.ndim:
            raise ShapeError(
                f"einsum: operand {i} of shape {fmt_shape(t.shape)} has {t.ndim} dims but its "
                f"subscripts {term!r} name {len(term_labels)}"
            )
        labels.append(term_labels)
    if arrow:
        out = list(output.replace("...", "".join(broadcast))) if "..." in output else list(output)
        for c in out:
            if not any(c in ls for ls in labels):
                raise ValueError(f"einsum: output subscript {c!r} appears in no operand of {equation!r}")
    else:  # implicit output: the broadcast dims, then the labels used once, in alphabetical order
        counts = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out = broadcast + sorted(c for c, k in counts.items() if k == 1 and c not in broadcast)
    return labels, out


# _einsum_parse's results by (equation, the operands' dims), for the equations last used
_EINSUM_LABELS: dict[tuple[str, tuple[int, ...]], tuple[list[list[str]], list[str]]] = {}
_EINSUM_LABELS_KEPT = 64


def _einsum_labels(equation, operands):
    """``_einsum_parse``'s labels, kept for an equation and dims seen (its parse is a fifth of a small
    einsum's cost); copies, for the caller to keep as its own."""
    key = (equation, tuple(t.ndim for t in operands))
    parsed = _EINSUM_LABELS.get(key)
    if parsed is None:
        parsed = remember(_EINSUM_LABELS, key, _einsum_parse(equation, operands), _EINSUM_LABELS_KEPT)
    labels, out = parsed
    return [list(ls) for ls in labels], list(out)


def _einsum_diagonal(t, labels):
    """t with each label repeated within it reduced to its diagonal, labels unique."""
    while True:
        repeated = next((c for c in labels if labels.count(c) > 1), None)
        if repeated is None:
            return t, labels
        i = labels.index(repeated)
        j = labels.index(repeated, i + 1)
        n = t.shape[i]
        if t.shape[j] != n:
            raise ShapeError(
                f"einsum: subscript {repeated!r} is repeated within one operand over dims of sizes "
                f"{t.shape[i]} and {t.shape[j]}"
            )
        # the diagonal as PyTorch takes it: a view of t (its dim last), no mask multiplied in
        t = diagonal(t, 0, i, j)
        labels = [c for k, c in enumerate(labels) if k not in (i, j)] + [repeated]


def _sum_out(t, labels, keep):
    """t with the dims whose labels are not in ``keep`` summed away."""
    gone = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not gone:
        return t, labels
    return t.sum(gone), [c for c in labels if c in keep]


def _contract(a, a_labels, b, b_labels, keep):
    """The product of a and b summed over their shared labels not in ``keep``, as one batched matmul:
    (batch, a only, summed) @ (batch, summed, b only)."""
    sizes = {}
    for t, ls in ((a, a_labels), (b, b_labels)):
        for c, n in zip(ls, t.shape):
            if sizes.get(c, 1) not in (1, n) and n != 1:
                raise ShapeError(f"einsum: subscript {c!r} has sizes {sizes[c]} and {n} that do not broadcast")
            if sizes.get(c, 1) == 1:  # broadcasting: a size 1 takes the other's, 0 included
                sizes[c] = n
    batch = [c for c in a_labels if c in b_labels and c in keep]
    summed = [c for c in a_labels if c in b_labels and c not in keep]
    a_only = [c for c in a_labels if c not in b_labels]
    b_only = [c for c in b_labels if c not in a_labels]

    def arrange(t, ls, groups):
        """t's dims in the order of ``groups``' labels, broadcast, and merged group by group (each step
        left out where it would change nothing: every one is an op dispatched)."""
        order = [c for group in groups for c in group]
        axes = [ls.index(c) for c in order]
        if axes != sorted(axes):
            t = t.permute(axes)
        shape = tuple(sizes[c] for c in order)
        if tuple(t.shape) != shape:
            t = t.expand(shape)
        # (no batch labels: 2-D operands, matmul's matrix product)
        return _reshaped(t, tuple(math.prod(sizes[c] for c in group) for group in (groups if batch else groups[1:])))

    a3 = arrange(a, a_labels, (batch, a_only, summed))
    b3 = arrange(b, b_labels, (batch, summed, b_only))
    out_labels = batch + a_only + b_only
    # nothing summed: a broadcast product, as PyTorch's einsum takes it (so bool operands are fine there)
    product = a3 * b3 if not summed else matmul(a3, b3)
    return _reshaped(product, tuple(sizes[c] for c in out_labels)), out_labels


def _reshaped(t, shape):
    """``t.reshape(shape)``, or ``t`` where it has that shape already (no op dispatched)."""
    return t if tuple(t.shape) == shape else t.reshape(shape)


@op(
    "einsum",
    doc="Sums of products over the subscripts of an Einstein-summation equation.",
    composite=True,
    method=False,
    autocast="lower",
)
def einsum(equation: str, *operands: Tensor | Sequence[Tensor]) -> Tensor:
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise DTypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    for i, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise DTypeError(f"einsum: operand {i} must be a Tensor, got {type(t).__name__}")
    if not operands:
        raise ShapeError("einsum: at least one operand is needed")
    check_same_device("einsum", *operands)
    labels, out = _einsum_labels(equation, operands)
    if len(operands) == 2 and _is_matrix_product(labels, out, operands):
        return matmul(*operands)  # ('ij,jk->ik', 'bij,bjk->bik'): one product, none of the steps below
    terms = [_einsum_diagonal(t, ls) for t, ls in zip(operands, labels)]

    def needed_after(k):
        """The labels the output or the operands after the k-th still use."""
        keep = set(out)
        for _, ls in terms[k + 1 :]:
            keep.update(ls)
        return keep

    result, result_labels = terms[0]
    result, result_labels = _sum_out(result, result_labels, needed_after(0))
    for k in range(1, len(terms)):
        t, ls = terms[k]
        keep = needed_after(k)
        t, ls = _sum_out(t, ls, keep | set(result_labels))
        result, result_labels = _contract(result, result_labels, t, ls, keep)
    result, result_labels = _sum_out(result, result_labels, set(out))
    order = [result_labels.index(c) for c in out]
    return result.permute(order) if order != sorted(order) else result


def _is_matrix_product(labels, out, operands):
    """Whether an einsum of two operands is their (batched) matrix product: the same batch labels and
    sizes, (..., i, j) and (..., j, k) to (..., i, k) with i, j, k distinct and not batch labels."""
    (a_labels, b_labels), (a, b) = labels, operands
    n = len(a_labels)
    if n < 2 or len(b_labels) != n or len(out) != n or len(set(a_labels)) != n or len(set(b_labels)) != n:
        return False
    i, j = a_labels[-2:]
    batch = a_labels[:-2]
    if b_labels != batch + [j, b_labels[-1]] or out != batch + [i, b_labels[-1]] or b_labels[-1] in a_labels:
        return False
    a_shape, b_shape = a._data.shape, b._data.shape
    return a_shape[:-2] == b_shape[:-2] and a_shape[-1] == b_shape[-2] and a._data.dtype is b._data.dtype


def _check_float_pair(name, x1, x2):
    for what, t in (("x1", x1), ("x2", x2)):
        if not isinstance(t, Tensor) or not t.dtype.is_floating_point:
            raise DTypeError(
                f"{name}: {what} must be a floating point Tensor, got "
                f"{t.dtype if isinstance(t, Tensor) else type(t).__name__}"
            )
    check_same_device(name, x1, x2)


@op(
    "cdist",
    dtypes=FLOATING,
    doc="The p-norm distances between each row of x1 and each row of x2 (batched).",
    composite=True,
    method=False,
)
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    if x1.__class__ is Tensor and x2.__class__ is Tensor:
        a, b = x1._data, x2._data
        if (
            a.ndim == 2 == b.ndim
            and a.dtype is b.dtype  # (floating: the dtype rule checked x1)
            and a.shape[1] == b.shape[1]
            and x1._device is x2._device
            and 0 <= p < math.inf
            and not needs_grad(x1, x2)
        ):
            # two matrices of one dtype, the common call: the checks below pass, nothing to broadcast
            bk = primitives(x1)
            a, b = (bk.view(bk.contiguous(x), (1,) + x.shape) for x in (a, b))
            return wrap(bk.view(bk.cdist(a, b, float(p)), (a.shape[1], b.shape[1])), x1._device)
    _check_float_pair("cdist", x1, x2)
    if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            f"cdist: x1 {fmt_shape(x1.shape)} and x2 {fmt_shape(x2.shape)} must be (..., P, M) and "
            "(..., R, M) with the same number of columns M"
        )
    if p < 0:
        raise ValueError(f"cdist: p must be non-negative, got {p}")
    if math.isfinite(p) and not needs_grad(x1, x2):
        # one primitive (a host loop on the CPU) over the batch dims broadcast and flattened
        bk, dtype = primitives(x1), result_type(x1, x2)
        batch = broadcast_shapes("cdist", x1._data.shape[:-2], x2._data.shape[:-2])
        a, b = (_batch_of_matrices(t, dtype, batch) for t in (x1, x2))
        return wrap(bk.view(bk.cdist(a, b, float(p)), batch + (a.shape[1], b.shape[1])), x1._device)
    # the direct difference (P x R x M values): exact, and 0 (not NaN) gradients where rows coincide;
    # compute_mode is accepted and the direct form always used
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == 0:
        return (diff != 0).to(dtype=x1.dtype).sum(-1)
    if p == float("inf"):
        return diff.abs().amax(-1)
    return diff.norm(p, -1)


def _batch_of_matrices(t, dtype, batch):
    """``t``'s array (..., P, M) in ``dtype`` with its batch dims broadcast to ``batch``, as one contiguous
    (prod(batch), P, M)."""
    bk, data = primitives(t), t._data
    if t.dtype is not dtype:
        data = bk.astype(data, dtype)
    matrix = tuple(data.shape[-2:])
    if tuple(data.shape[:-2]) != batch:
        data = bk.expand(data, batch + matrix)
    return bk.view(bk.contiguous(data), (math.prod(batch),) + matrix)


@op(
    "pairwise_distance",
    doc="The p-norm of x1 - x2 + eps along the last dim.",
    composite=True,
    method=False,
    functional=True,
)
def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    if (
        p == 2
        and x1.__class__ is Tensor
        and x2.__class__ is Tensor
        and x1._data.shape == x2._data.shape
        and x1._data.ndim
        and x1._device is x2._device
        and x1.dtype is x2.dtype
        and x1.dtype in (dt.float32, dt.float64)
        and not needs_grad(x1, x2)
    ):
        # the common call, two float32/float64 operands of one shape: the checks below pass, and the norm
        # is the primitive calls pnorm's forward makes for p = 2, without its frames
        bk, dtype, axis = primitives(x1), x1.dtype, (x1._data.ndim - 1,)
        data = bk.binary("add", bk.binary("sub", x1._data, x2._data, dtype), eps, dtype)
        total = bk.reduce("sum", bk.binary("mul", data, data, dtype), axis, keepdim)
        return wrap(bk.unary("sqrt", total), x1._device)
    _check_float_pair("pairwise_distance", x1, x2)
    try:
        shape = broadcast_shapes("pairwise_distance", x1._data.shape, x2._data.shape)
    except ShapeError:
        raise ShapeError(
            f"pairwise_distance: x1 {fmt_shape(x1.shape)} and x2 {fmt_shape(x2.shape)} cannot be broadcast"
        ) from None
    if math.isfinite(p) and not needs_grad(x1, x2):
        bk, dtype = primitives(x1), result_type(x1, x2)
        data = bk.binary("add", bk.binary("sub", x1._data, x2._data, dtype), eps, dtype)
        return _pnorm_of(data if shape else bk.view(data, (1,)), x1._device, p, -1, keepdim)
    diff = x1 - x2 + eps
    if diff.ndim == 0:
        diff = diff.reshape(1)
    if p == float("inf"):
        return diff.abs().amax(-1, keepdim=keepdim)
    return diff.norm(p, -1, keepdim)


@op(
    "cosine_similarity",
    doc="x1 . x2 / (max(|x1|, eps) * max(|x2|, eps)) along dim.",
    composite=True,
    method=False,
    functional=True,
)
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    _check_float_pair("cosine_similarity", x1, x2)
    try:
        shape = broadcast_shapes("cosine_similarity", x1._data.shape, x2._data.shape)
    except ShapeError:
        raise ShapeError(
            f"cosine_similarity: x1 {fmt_shape(x1.shape)} and x2 {fmt_shape(x2.shape)} cannot be broadcast"
        ) from None
    if not needs_grad(x1, x2) and x1.dtype is x2.dtype and x1.dtype in (dt.float32, dt.float64):
        if dispatch._plain and shape and eps.__class__ is float:  # (a hook sees the backend calls below)
            result = plain_cosine_similarity(x1._data, x2._data, wrap_dim(dim, len(shape), "cosine_similarity"), eps)
            if result is not None:
                return wrap(result, x1._device)
        # the same formula on the backend's arrays, the norms as pnorm's forward computes them for p = 2
        bk, dtype, axis = primitives(x1), x1.dtype, (wrap_dim(dim, len(shape), "cosine_similarity"),)

        def unit_of(t):
            data = t._data if t._data.shape == shape else bk.expand(t._data, shape)
            norm = bk.unary("sqrt", bk.reduce("sum", bk.binary("mul", data, data, dtype), axis, True))
            return bk.binary("div", data, bk.clamp(norm, eps, None), dtype)

        product = bk.binary("mul", unit_of(x1), unit_of(x2), dtype)
        return wrap(bk.reduce("sum", product, axis, False), x1._device)
    if not needs_grad(x1, x2):
        # the same formula on the backend's arrays, pnorm's forward for the norms
        bk, device = primitives(x1), x1._device

        def unit(t):
            data = t._data if t._data.shape == shape else bk.expand(t._data, shape)
            return bk.binary("div", data, bk.clamp(_pnorm_of(data, device, 2, dim, True)._data, eps, None), t.dtype)

        product = bk.binary("mul", unit(x1), unit(x2), result_type(x1, x2))
        return wrap(bk.reduce("sum", product, (wrap_dim(dim, len(shape), "cosine_similarity"),), False), device)
    x1, x2 = x1.expand(shape), x2.expand(shape)
    n1 = x1.norm(2, dim, True).clamp_min(eps)
    n2 = x2.norm(2, dim, True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


# ------------------------------------------------------------------------------------------------
# More of PyTorch's linear algebra names (issue 15), composed of the ops above
def _check_mv_operands(name, input, vec):
    for what, t, ndim in (("input", input, 2), ("vec", vec, 1)):
        if not isinstance(t, Tensor):
            raise DTypeError(f"{name}: {what} must be a Tensor, got {type(t).__name__}")
        if t.ndim != ndim:
            raise ShapeError(f"{name}: {what} must be {ndim}-d, got shape {fmt_shape(t.shape)}")


@op(
    "addmv",
    plain="add_product",
    dtypes=NUMBERS.unless_empty().one_dtype("input", "mat", "vec"),
    doc="beta * input + alpha * (mat @ vec).",
    node="AddmvBackward0",
    inplace=True,
    autocast="lower",
    grads={
        "input": lambda grad, beta: _scaled(grad, beta),
        "mat": lambda grad, vec, alpha: _scaled(outer(grad, vec), alpha),
        "vec": lambda grad, mat, alpha: _scaled(mv(mat.mT, grad), alpha),
    },
)
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    return _add_product("addmv", input, _matrix_vector("mv", mat, vec), input.dtype, beta, alpha)


@op(
    "addbmm",
    plain="add_product",
    dtypes=NUMBERS.unless_empty().one_dtype("input", "batch1", "batch2"),
    doc="beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i].",
    node="AddbmmBackward0",
    inplace=True,
    autocast="lower",
    grads={
        "input": lambda grad, beta: _scaled(grad, beta),
        # each batch's product gets the whole gradient: the batch dim broadcast by the product
        "batch1": lambda grad, batch2, alpha: _scaled(mm_nd(grad.unsqueeze(0), batch2.mT), alpha),
        "batch2": lambda grad, batch1, alpha: _scaled(mm_nd(batch1.mT, grad.unsqueeze(0)), alpha),
    },
)
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Number = 1, alpha: Number = 1) -> Tensor:
    _check_product("addbmm", batch1, batch2, 3)
    # the sum of the batch's products as one product: batch1's matrices side by side (n, B * k) times
    # batch2's stacked (B * k, m), where a batched product and a sum over the batch cost two passes
    bk, a, b = primitives(input), batch1._data, batch2._data
    count, n, k = a.shape
    left = bk.view(bk.contiguous(bk.permute(a, (1, 0, 2))), (n, count * k))
    total = bk.matmul(left, bk.view(bk.contiguous(b), (count * k, b.shape[2])))
    return _add_product("addbmm", input, total, input.dtype, beta, alpha)


@op(
    "inner",
    dtypes=NUMBERS,
    doc="The sum of products over the last dims of input and other (times for a scalar).",
    composite=True,
)
def inner(input: Tensor, other: Tensor) -> Tensor:
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(
            f"inner: last dims of input {fmt_shape(input.shape)} and other {fmt_shape(other.shape)} differ"
        )
    if input.ndim == 1 and other.ndim == 1:  # two vectors: dot's one product, not tensordot's reshapes
        return dot(input, other)
    return tensordot(input, other, ([-1], [-1]))


@op(
    "tensordot",
    dtypes=NUMBERS,
    doc="The sum of products of a and b over dims (a count of trailing/leading dims, or two lists).",
    composite=True,
    autocast="lower",
)
def tensordot(a: Tensor, b: Tensor, dims: int | Sequence[int | Sequence[int]] = 2) -> Tensor:
    if (
        dims.__class__ is int
        and a.__class__ is Tensor
        and b.__class__ is Tensor
        and a._data.ndim == 2 == b._data.ndim
        and dims == 1
        and a._data.shape[1] == b._data.shape[0]
    ):
        return mm(a, b)  # two matrices over one dim: their product, none of the reshapes below
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise ShapeError(
                f"tensordot: dims {dims} out of range for a {fmt_shape(a.shape)} and b {fmt_shape(b.shape)}"
            )
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    dims_a = [d % a.ndim for d in dims_a] if a.ndim else dims_a
    dims_b = [d % b.ndim for d in dims_b] if b.ndim else dims_b
    if len(dims_a) != len(dims_b) or any(a.shape[i] != b.shape[j] for i, j in zip(dims_a, dims_b)):
        raise ShapeError(
            f"tensordot: contracted dims {dims_a} of a {fmt_shape(a.shape)} and {dims_b} of b "
            f"{fmt_shape(b.shape)} differ in size"
        )
    free_a = [i for i in range(a.ndim) if i not in dims_a]
    free_b = [j for j in range(b.ndim) if j not in dims_b]
    k = 1
    for i in dims_a:
        k *= a.shape[i]
    order_a, order_b = free_a + dims_a, dims_b + free_b
    left = a if order_a == sorted(order_a) else a.permute(order_a)
    right = b if order_b == sorted(order_b) else b.permute(order_b)
    rows, columns = math.prod(a.shape[i] for i in free_a), math.prod(b.shape[j] for j in free_b)
    product = mm(_reshaped(left, (rows, k)), _reshaped(right, (k, columns)))
    return _reshaped(product, tuple(a.shape[i] for i in free_a) + tuple(b.shape[j] for j in free_b))


@op("kron", doc="The Kronecker product of input and other.", composite=True, plain="product")
def kron(input: Tensor, other: Tensor) -> Tensor:
    a, b = input._data, other._data
    if a.ndim == b.ndim and a.dtype is b.dtype and input._device is other._device and not needs_grad(input, other):
        # the common call (one rank, one dtype, nothing to record) in a few steps: the product of the
        # interleaved views below, without padding either shape
        P, whole = primitives(input), slice(None)
        product = P.binary("mul", P.slice(a, (whole, None) * a.ndim), P.slice(b, (None, whole) * a.ndim), input.dtype)
        return wrap(P.view(P.contiguous(product), tuple(x * y for x, y in zip(a.shape, b.shape))), input._device)
    n = max(input.ndim, other.ndim)
    a_dims = (1,) * (n - input.ndim) + tuple(input._data.shape)
    b_dims = (1,) * (n - other.ndim) + tuple(other._data.shape)
    out_shape = tuple(x * y for x, y in zip(a_dims, b_dims))
    if needs_grad(input, other) or input.dtype is not other.dtype:
        # a's dims interleaved with b's: (a0, 1, a1, 1, ...) * (1, b0, 1, b1, ...)
        a_shape = tuple(s for d in a_dims for s in (d, 1))
        b_shape = tuple(s for d in b_dims for s in (1, d))
        return (input.reshape(a_shape) * other.reshape(b_shape)).reshape(out_shape)
    # without a gradient to build: one product of the backend's interleaved views (new axes after each
    # of a's dims and before each of b's; broadcasting puts in the missing leading pairs), where the
    # ops cost four dispatches
    check_same_device("kron", input, other)
    P, whole = primitives(input), slice(None)
    a = P.slice(input._data, (whole, None) * input._data.ndim)
    b = P.slice(other._data, (None, whole) * other._data.ndim)
    return wrap(P.view(P.contiguous(P.binary("mul", a, b, input.dtype)), out_shape), input._device)


@op(
    "cross",
    dtypes=NUMBERS.one_dtype("input", "other"),
    doc="The cross product of 3-vectors along dim (the first dim of size 3 when dim is None).",
    node="LinalgCrossBackward0",
    grads={
        "input": lambda grad, other, dim: cross(other, grad, dim),
        "other": lambda grad, input, dim: cross(grad, input, dim),
    },
)
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    a, b = input._data, other._data
    shape = a.shape
    if b.shape != shape or input._device is not other._device:
        check_same_device("cross", input, other)
        shape = broadcast_shapes("cross", a.shape, b.shape)
        a, b = (t._data if t._data.shape == shape else primitives(t).expand(t._data, shape) for t in (input, other))
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dimension of size 3 in input {fmt_shape(input.shape)}")
    d = dim % len(shape) if shape else 0
    if not shape or shape[d] != 3:
        raise ShapeError(
            f"cross: dimension {dim} of input {fmt_shape(input.shape)} and other {fmt_shape(other.shape)} "
            "must have size 3"
        )
    return wrap(primitives(input).cross(a, b, d), input._device)  # one primitive: a host loop on the CPU


@op("dist", dtypes=FLOATING.of("input", "other"), doc="The p-norm of input - other.", composite=True)
def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    shape = broadcast_shapes("dist", input._data.shape, other._data.shape)
    if math.isfinite(p) and p != 0 and input._device is other._device and not needs_grad(input, other):
        # the distance of two rows: cdist's primitive (a host loop on the CPU) over the broadcast values
        # (not for p = 0, whose count takes a NaN difference as nonzero in dist, as NaN in cdist)
        bk, a, b = primitives(input), input._data, other._data
        if a.dtype is not b.dtype:
            dtype = result_type(input, other)
            a, b = (t._data if t.dtype is dtype else bk.astype(t._data, dtype) for t in (input, other))
        if a.shape != shape:
            a = bk.expand(a, shape)
        if b.shape != shape:
            b = bk.expand(b, shape)
        row = (1, 1, math.prod(shape))
        return wrap(
            bk.view(bk.cdist(bk.view(bk.contiguous(a), row), bk.view(bk.contiguous(b), row), float(p)), ()),
            input._device,
        )
    if math.isfinite(p) and input._device is other._device and not needs_grad(input, other):
        bk = primitives(input)
        diff = bk.binary("sub", input._data, other._data, result_type(input, other))
        return _pnorm_of(diff, input._device, p, None, False)
    return (input - other).norm(p)


@op(
    "bilinear",
    dtypes=NUMBERS.unless_empty(),
    doc="input1^T weight[o] input2 + bias[o] for each output o (the last dims).",
    composite=True,
    function=False,
    method=False,
    functional=True,
    autocast="lower",
)
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    if (
        weight.ndim != 3
        or input1.ndim == 0
        or input2.ndim == 0
        or input1.shape[-1] != weight.shape[1]
        or input2.shape[-1] != weight.shape[2]
        or tuple(input1.shape[:-1]) != tuple(input2.shape[:-1])
        or (bias is not None and tuple(bias.shape) != (weight.shape[0],))
    ):
        raise ShapeError(
            f"bilinear: expected input1 (*, in1), input2 (*, in2), weight (out, in1, in2) and bias (out,), got "
            f"{fmt_shape(input1.shape)}, {fmt_shape(input2.shape)}, {fmt_shape(weight.shape)} and "
            f"{fmt_shape(bias.shape) if bias is not None else 'None'}"
        )
    # out[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j]: one product of input1's rows by the weight as
    # an (in1, out * in2) matrix, then input2's products summed over j (einsum's parse, permutes and
    # reshapes of the same cost five times this)
    out_features, in1, in2 = weight.shape
    lead = tuple(input1.shape[:-1])
    rows = math.prod(lead)
    mixed = matmul(_reshaped(input1, (rows, in1)), weight.permute(1, 0, 2).reshape(in1, out_features * in2))
    products = mixed.reshape(rows, out_features, in2) * _reshaped(input2, (rows, 1, in2))
    out = products.sum(-1, dtype=products.dtype)  # an int32 sum stays int32, as the product's
    out = _reshaped(out, lead + (out_features,))
    return out if bias is None else out + bias


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_REAL = (float, int)


def _pdist_direct(input, p=2):
    """pdist's direct lane (registry.py's ``direct=``): the CPU backend's pair distances of a float32/float64
    matrix taking no part in a graph, for a finite p >= 0 (the forward's case of one primitive, without
    its checks' frames); else None."""
    if input.__class__ is not Tensor or p.__class__ not in _REAL or not 0 <= p < math.inf:
        return None
    x = input._data
    if primitives(input) is not _cpu or x.ndim != 2 or (x.dtype is not _F32 and x.dtype is not _F64):
        return None
    return None if needs_grad(input) else wrap(_cpu.pdist(x, float(p)), input._device)


@op(
    "pdist",
    dtypes=FLOATING,
    doc="The p-norm distances between the rows of input (N, M), pairs i < j in order.",
    composite=True,
    function=True,
    method=False,
    functional=True,
    direct=_pdist_direct,
)
def pdist(input: Tensor, p: float = 2) -> Tensor:
    if not isinstance(input, Tensor) or input.ndim != 2:
        raise ShapeError(f"pdist: expected a 2-d input (N, M), got {getattr(input, 'shape', type(input).__name__)}")
    if p < 0:
        raise ValueError(f"pdist: p must be non-negative, got {p}")
    bk = primitives(input)
    if math.isfinite(p) and not needs_grad(input):
        return wrap(bk.pdist(input._data, float(p)), input._device)  # one primitive: a host loop on the CPU
    # the pairs (i, j), i < j, in row-major order, as PyTorch lists them, made on the host from the
    # size alone and sent once; the differences of the pairs only: no zero distance (the diagonal), whose
    # norm has no gradient
    pairs = triangle_coordinates(input.shape[0], input.shape[0], 1, False)  # kept by size, read-only
    first, second = (bk.from_numpy(rows, dt.int64) for rows in pairs)
    return (index_key(input, (first,)) - index_key(input, (second,))).norm(p, -1)


def _pnorm_of(diff, device, p, dim, keepdim):
    """The p-norm (finite p) over ``dim`` of the backend array ``diff``, by pnorm's forward alone: the
    distance ops' where no graph is recorded (pnorm's entry and the elementwise ops before it are most
    of a small call's cost)."""
    return get("pnorm").forward(wrap(diff, device), p, dim, keepdim)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("matmul", onnx=lambda w, node, **params: w.matmul(node, **params), c=lambda lower, node: lower.matmul(node))
