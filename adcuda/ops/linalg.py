"""Matrix products: ``matmul`` (1-D, 2-D and batched with broadcast batch dims), ``mm bmm outer``."""
from ..amp.autocast import autocast_inputs
from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import Tensor
from ._core import broadcast_shapes, check_same_device, method, needs_grad, record, sum_to_shape, wrap


def matmul(input, other):
    return _matmul("matmul", input, other)


def _matmul(op, input, other):
    """matmul's checks and dispatch; ``op`` names the public op in errors (matmul, mm, bmm, dot)."""
    if (input.__class__ is Tensor and other.__class__ is Tensor and input._device is other._device
            and input._data.ndim == 2 == other._data.ndim and input._data.dtype == other._data.dtype
            and input._data.shape[1] == other._data.shape[0]):
        # fast path for the common 2-D case (linear layers): nothing to unsqueeze or broadcast
        input, other = autocast_inputs(op, input, other)
        return _matmul_nd(input, other)
    if (input.__class__ is Tensor and other.__class__ is Tensor and input._device is other._device
            and input._data.ndim == 2 and other._data.ndim == 1 and input._data.dtype == other._data.dtype
            and input._data.shape[1] == other._data.shape[0]):
        input, other = autocast_inputs(op, input, other)
        out = _matvec(input, other)
        if out is not None:
            return out
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise DTypeError(f"{op}: both operands must be Tensors, got {type(input).__name__} and "
                         f"{type(other).__name__}")
    check_same_device(op, input, other)
    input, other = autocast_inputs(op, input, other)
    if input.ndim == 0 or other.ndim == 0:
        raise ShapeError(f"{op}: both arguments need to be at least 1D, but they are {input.ndim}D and "
                         f"{other.ndim}D")
    if input.dtype is not other.dtype:
        raise DTypeError(f"{op}: expected both operands to have the same dtype, but got {input.dtype} "
                         f"and {other.dtype}")
    a = input.unsqueeze(0) if input.ndim == 1 else input
    b = other.unsqueeze(-1) if other.ndim == 1 else other
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"{op}: shapes {fmt_shape(input.shape)} and {fmt_shape(other.shape)} cannot be "
                         f"multiplied ({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")
    try:
        broadcast_shapes(op, tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    except ShapeError:
        raise ShapeError(f"{op}: the batch dims of shapes {fmt_shape(input.shape)} and "
                         f"{fmt_shape(other.shape)} cannot be broadcast") from None
    out = _matmul_nd(a, b)
    if input.ndim == 1:
        out = out.squeeze(-2)
    if other.ndim == 1:
        out = out.squeeze(-1)
    return out


def _matvec(m, v):
    """``m @ v`` for a matrix and a vector as one node; None where ``v`` can't be viewed as a column
    without a copy (the general path handles that)."""
    bk = m._backend
    column = bk.view(v._data, (v._data.shape[0], 1))
    if column is None:
        return None
    out = wrap(bk.view(bk.contiguous(bk.matmul(m._data, column)), (m._data.shape[0],)), m._device)
    if needs_grad(m, v):
        want_m, want_v = m.requires_grad, v.requires_grad

        def backward(node, g):
            matrix, vector = node.saved_tensors
            gm = g.unsqueeze(1) * vector.unsqueeze(0) if want_m else None
            gv = _matmul("matmul", matrix.mT, g) if want_v else None
            return gm, gv
        record("MvBackward0", out, (m, v), backward,
               saved=(m if want_v else None, v if want_m else None))
    return out


def _matmul_nd(a, b):
    out = wrap(a._backend.matmul(a._data, b._data), a._device)
    if needs_grad(a, b):
        a_shape, b_shape = tuple(a.shape), tuple(b.shape)
        want_a, want_b = a.requires_grad, b.requires_grad

        def backward(node, g):
            x, y = node.saved_tensors
            ga = sum_to_shape(_matmul_nd(g, y.mT), a_shape) if want_a else None
            gb = sum_to_shape(_matmul_nd(x.mT, g), b_shape) if want_b else None
            return ga, gb
        record("MmBackward0", out, (a, b), backward, saved=(a, b))
    return out


def linear_2d(input, weight, bias=None):
    """``input @ weight.T + bias`` for a 2-D input as one node (PyTorch's addmm): the weight gradient
    comes out as ``g.T @ input`` in the weight's own (out, in) layout, so the leaf takes it without the
    transposed copy that ``input @ weight.t()`` followed by a transpose back would need."""
    bk = input._backend
    data = bk.matmul(input._data, bk.permute(weight._data, (1, 0)))
    if bias is not None:
        data = bk.binary("add", data, bias._data, input.dtype)
    out = wrap(data, input._device)
    if needs_grad(input, weight, bias):
        want_x, want_w = input.requires_grad, weight.requires_grad
        want_b = bias is not None and bias.requires_grad

        def backward(node, g):
            x, w = node.saved_tensors
            gx = _matmul_nd(g, w) if want_x else None
            gw = _matmul_nd(g.mT, x) if want_w else None
            gb = g.sum(0) if want_b else None
            return gx, gw, gb
        record("AddmmBackward0", out, (input, weight, bias), backward,
               saved=(input if want_w else None, weight if want_x else None))
    return out


def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise ShapeError(f"mm: both arguments must be 2-D, got {fmt_shape(input.shape)} and {fmt_shape(mat2.shape)}")
    return _matmul("mm", input, mat2)


def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ShapeError(f"bmm: expected two 3-D tensors with the same batch size, got "
                         f"{fmt_shape(input.shape)} and {fmt_shape(mat2.shape)}")
    return _matmul("bmm", input, mat2)


def outer(input, vec2):
    if input.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"outer: expected 1-D vectors, got {fmt_shape(input.shape)} and {fmt_shape(vec2.shape)}")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1 or input.shape[0] != other.shape[0]:
        raise ShapeError(f"dot: expected 1-D tensors of the same size, got {fmt_shape(input.shape)} and "
                         f"{fmt_shape(other.shape)}")
    return _matmul("dot", input, other)


for _name in ("matmul", "mm", "bmm", "outer", "dot"):
    method(_name)(globals()[_name])
Tensor.__matmul__ = matmul
Tensor.__rmatmul__ = lambda self, other: matmul(other, self)
Tensor.ger = Tensor.outer
