"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_``.

The norm is accumulated in fp32 (fp64 for fp64 gradients) straight from the backend arrays, one
reduction per gradient, and the clip coefficient stays on the device: no host round trip unless
``error_if_nonfinite`` asks for one.
"""
import math

from ... import dtypes as dt
from ...autograd.grad_mode import no_grad
from ...errors import AdcudaError
from ...ops._core import wrap
from ...ops.shape import stack
from ...tensor import Tensor


class NonFiniteNormError(AdcudaError, RuntimeError):
    """clip_grad_norm_(error_if_nonfinite=True) met a NaN or infinite total norm."""


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _norm_dtype(grads):
    return dt.float64 if any(g.dtype is dt.float64 for g in grads) else dt.float32


def _partial_norm(g, norm_type, acc_dtype):
    """sum(|g|**p) (max |g| for p = inf) as a 0-d ``acc_dtype`` tensor on g's device."""
    bk = g._backend
    if norm_type == math.inf:
        part = bk.astype(bk.reduce("amax", bk.unary("abs", g._data), None, False), acc_dtype) if g.numel() else \
            bk.full((), 0.0, acc_dtype)
    elif norm_type == 2.0:
        part = bk.reduce("sum", bk.binary("mul", g._data, g._data, acc_dtype), None, False)
    elif norm_type == 1.0:
        part = bk.reduce("sum", bk.astype(bk.unary("abs", g._data), acc_dtype), None, False)
    else:
        part = bk.reduce("sum", bk.binary("pow", bk.unary("abs", g._data), norm_type, acc_dtype), None, False)
    return wrap(part, g.device)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of ``parameters`` so that their joint ``norm_type``-norm is at most
    ``max_norm``; returns the norm before clipping (a 0-d tensor). ``foreach`` is accepted for
    PyTorch compatibility: the work is always one reduction per gradient."""
    grads = _grads(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive or inf, got {norm_type}")
    from ...factories import tensor
    if not grads:
        return tensor(0.0)
    acc = _norm_dtype(grads)
    device = grads[0].device
    with no_grad():
        parts = stack([_partial_norm(g, norm_type, acc).to(device) for g in grads])
        if norm_type == math.inf:
            total = parts.amax()
        else:
            total = parts.sum() ** (1.0 / norm_type)
        if error_if_nonfinite and not total._all_finite():
            raise NonFiniteNormError(
                f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                "anyway, set `error_if_nonfinite=False`")
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            bk = g._backend
            c = coef.to(g.device)._data
            bk.copy_(g._data, bk.binary("mul", g._data, c, g.dtype))
            g._version.value += 1
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of ``parameters`` into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        bk = g._backend
        bk.copy_(g._data, bk.clamp(g._data, -clip_value, clip_value))
        g._version.value += 1
