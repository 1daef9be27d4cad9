"""``nn.Parameter``: a leaf tensor that a ``Module`` registers as one of its parameters.

Ops and autograd recognise tensors with the fast check ``x.__class__ is Tensor``; a subclass would
fail it and be treated as a constant. So ``Parameter`` is a real subclass (``type(p) is Parameter``
and ``isinstance(p, Parameter)`` hold) whose ``__class__`` reports ``Tensor``, which keeps every op
treating it as the tensor it is. Ops on a parameter build plain ``Tensor`` results, as in PyTorch.
"""

from ..factories import empty, tensor
from ..ops.optim import _make_subclass
from ..tensor import Tensor


class Parameter(Tensor):
    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> "Parameter":
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: data must be a Tensor, got {type(data).__name__}")
        return _make_subclass(cls, data, requires_grad)

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # everything happens in __new__; Tensor.__init__ would refuse

    @property
    def __class__(self):
        return Tensor

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach().cpu().numpy(), str(self.device), self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        copy = Parameter(self.detach().clone(), self.requires_grad)
        if self.grad is not None:
            copy.grad = self.grad.detach().clone()
        memo[id(self)] = copy
        return copy


def _rebuild_parameter(array, device, requires_grad):
    return Parameter(tensor(array, device=device), requires_grad)
