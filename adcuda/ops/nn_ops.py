"""Functional NN ops backed by fused primitives: softmax, log_softmax, cross_entropy, nll_loss,
layer_norm, embedding, dropout, scaled_dot_product_attention, and the losses built from them.

Each fused primitive has a backward primitive; that backward is itself recorded as an op (with a
composite backward rule) where a second derivative is asked for.
"""
from .. import dtypes as dt
from ..autograd.grad_mode import is_grad_enabled
from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import Tensor
from ._core import method, needs_grad, record, wrap, wrap_dim


def _softmax_impl(input, dim, log, dtype):
    if dtype is not None:
        input = input.to(dtype=dtype)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{'log_softmax' if log else 'softmax'}: expected a floating point tensor, got {input.dtype}")
    axis = wrap_dim(dim, input.ndim, "softmax") if input.ndim else 0
    if input.ndim == 0:
        from ..factories import zeros_like, ones_like
        return zeros_like(input) if log else ones_like(input)
    out = wrap(input._backend.softmax(input._data, axis, log), input._device)
    if needs_grad(input):
        def backward(node, g):
            (y,) = node.saved_tensors
            return _softmax_backward(y, g, axis, log)
        record("LogSoftmaxBackward0" if log else "SoftmaxBackward0", out, (input,), backward, saved=(out,))
    return out


def _softmax_backward(y, g, axis, log):
    if is_grad_enabled():  # building a graph of the backward: composite, differentiable form
        from .elementwise import exp
        from .reduction import sum as _sum
        if log:
            return g - exp(y) * _sum(g, axis, keepdim=True)
        return y * (g - _sum(g * y, axis, keepdim=True))
    return wrap(y._backend.softmax_backward(y._data, g._data, axis, log), g._device)


def softmax(input, dim=None, dtype=None, _stacklevel=3):
    if dim is None:
        raise TypeError("softmax: dim must be given (implicit dim is deprecated in PyTorch)")
    return _softmax_impl(input, dim, False, dtype)


def log_softmax(input, dim=None, dtype=None, _stacklevel=3):
    if dim is None:
        raise TypeError("log_softmax: dim must be given (implicit dim is deprecated in PyTorch)")
    return _softmax_impl(input, dim, True, dtype)


method("softmax")(softmax)
method("log_softmax")(log_softmax)
