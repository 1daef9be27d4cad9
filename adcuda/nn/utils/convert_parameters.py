"""``parameters_to_vector`` and ``vector_to_parameters``: parameters as one flat vector and back."""

from collections.abc import Iterable

from ...autograd.grad_mode import no_grad
from ...errors import DeviceError, ShapeError
from ...ops.layout import cat
from ...tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and joined, in order, into one 1-d tensor (differentiable)."""
    parameters = list(parameters)
    if not parameters:
        raise ShapeError("parameters_to_vector: expected at least one parameter")
    device = parameters[0].device
    for p in parameters:
        if p.device != device:
            raise DeviceError(f"parameters_to_vector: parameters on {device} and {p.device}; move them to one device")
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """The slices of 1-d ``vec`` written into the parameters, in order (their sizes must add up to vec's)."""
    if not isinstance(vec, Tensor) or vec.ndim != 1:
        raise ShapeError(
            f"vector_to_parameters: expected a 1-d tensor, got {getattr(vec, 'shape', type(vec).__name__)}"
        )
    parameters = list(parameters)
    total = sum(p.numel() for p in parameters)
    if total != vec.numel():
        raise ShapeError(f"vector_to_parameters: the parameters hold {total} values, vec has {vec.numel()}")
    start = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[start : start + n].reshape(tuple(p.shape)))
            start += n
