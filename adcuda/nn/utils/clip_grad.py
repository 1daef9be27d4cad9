"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_``, and the two halves of the first,
``get_total_norm`` and ``clip_grads_with_norm_`` (PyTorch's names).

The norm is accumulated in fp32 (fp64 for fp64 gradients) by one multi-tensor ``adcuda._global_norm``
per device (on a GPU, multi-tensor launches and one finishing block); the clip coefficient stays on
the device and scales every gradient through ``_foreach_mul_``: no host round trip unless
``error_if_nonfinite`` asks for one.
"""

from collections.abc import Iterable

from ...autograd.grad_mode import no_grad
from ...errors import AdcudaError
from ...factories import tensor
from ...ops.elementwise import isfinite
from ...ops.optim import _foreach_clamp_, _foreach_mul_, _global_norm
from ...tensor import Tensor

TensorsT = Tensor | Iterable[Tensor]


class NonFiniteNormError(AdcudaError, RuntimeError):
    """clip_grad_norm_(error_if_nonfinite=True) met a NaN or infinite total norm."""


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _by_device(tensors):
    groups = {}
    for t in tensors:
        groups.setdefault(t.device, []).append(t)
    return groups


def get_total_norm(
    tensors: TensorsT, norm_type: float | str = 2.0, error_if_nonfinite: bool = False, foreach: bool | None = None
) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` taken together, a 0-d tensor on the first one's
    device: one ``_global_norm`` per device (normally just one); tensors spread over several devices
    have their per-device norms combined by one more on the first device (the norm of the norms is
    the norm of the whole). ``foreach`` is accepted for PyTorch compatibility."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"get_total_norm: norm_type must be positive or inf, got {norm_type}")
    if not tensors:
        return tensor(0.0)
    with no_grad():
        norms = [_global_norm(group, norm_type) for group in _by_device(tensors).values()]
        first = tensors[0].device
        total = norms[0] if len(norms) == 1 else _global_norm([n.to(first) for n in norms], norm_type)
        if error_if_nonfinite and not bool(isfinite(total)):
            raise NonFiniteNormError(
                f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it "
                "cannot be clipped. To disable this error and scale the gradients by the non-finite norm "
                "anyway, set `error_if_nonfinite=False`"
            )
    return total


def clip_grads_with_norm_(
    parameters: TensorsT, max_norm: float, total_norm: Tensor, foreach: bool | None = None
) -> None:
    """Scale the gradients of ``parameters`` by ``min(1, max_norm / (total_norm + 1e-6))``, in place,
    with the coefficient left on the device."""
    _scale(_grads(parameters), max_norm, total_norm)


def _scale(grads, max_norm, total_norm):
    if not grads:
        return
    with no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for device, group in _by_device(grads).items():
            _foreach_mul_(group, coef.to(device))


def clip_grad_norm_(
    parameters: TensorsT,
    max_norm: float,
    norm_type: float | str = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients of ``parameters`` so that their joint ``norm_type``-norm is at most
    ``max_norm``; returns the norm before clipping (a 0-d tensor). ``foreach`` is accepted for
    PyTorch compatibility: the norm is always one multi-tensor reduction per device."""
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    _scale(grads, max_norm, total)
    return total


def clip_grad_value_(parameters: TensorsT, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient of ``parameters`` into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    with no_grad():
        for group in _by_device(_grads(parameters)).values():
            _foreach_clamp_(group, -clip_value, clip_value)
