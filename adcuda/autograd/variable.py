"""``Variable``: PyTorch's pre-0.4 wrapper, kept as PyTorch keeps it, so that old scripts run: it
returns the tensor itself, with ``requires_grad`` set as asked."""

from ..errors import DTypeError
from ..tensor import Tensor


def Variable(data: Tensor, requires_grad: bool = False, volatile: bool = False) -> Tensor:  # noqa: N802
    """``data`` itself with ``requires_grad`` set (``volatile`` is accepted and, as in PyTorch, ignored:
    use ``no_grad()``)."""
    if not isinstance(data, Tensor):
        raise DTypeError(f"Variable: data must be a Tensor, got {type(data).__name__}")
    if requires_grad:
        data.requires_grad_(True)
    return data
