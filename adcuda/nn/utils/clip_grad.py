"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_``.

The norm is accumulated in fp32 (fp64 for fp64 gradients) straight from the backend arrays by one
``global_norm`` call for all gradients (on a GPU, multi-tensor launches and one finishing block), and
the clip coefficient stays on the device: no host round trip unless ``error_if_nonfinite`` asks for one.
"""
from ...autograd.grad_mode import no_grad
from ...errors import AdcudaError
from ...ops._core import wrap
from ...tensor import Tensor


class NonFiniteNormError(AdcudaError, RuntimeError):
    """clip_grad_norm_(error_if_nonfinite=True) met a NaN or infinite total norm."""


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _total_norm(grads, norm_type):
    """The norm of all gradients together: one ``global_norm`` call per device (normally just one);
    gradients spread over several devices have their per-device norms combined by one more call on
    the first device (the norm of the norms is the norm of the whole)."""
    by_device = {}
    for g in grads:
        by_device.setdefault(g.device, []).append(g)
    norms = [wrap(group[0]._backend.global_norm([g._data for g in group], norm_type), device)
             for device, group in by_device.items()]
    if len(norms) == 1:
        return norms[0]
    first = grads[0].device
    norms = [n.to(first) for n in norms]
    return wrap(norms[0]._backend.global_norm([n._data for n in norms], norm_type), first)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of ``parameters`` so that their joint ``norm_type``-norm is at most
    ``max_norm``; returns the norm before clipping (a 0-d tensor). ``foreach`` is accepted for
    PyTorch compatibility: the norm is always one multi-tensor ``global_norm``."""
    grads = _grads(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive or inf, got {norm_type}")
    from ...factories import tensor
    if not grads:
        return tensor(0.0)
    with no_grad():
        total = _total_norm(grads, norm_type)
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
