"""Activation modules: thin wrappers over ``adcuda.nn.functional``."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from ...autograd.grad_mode import no_grad
from ...factories import full
from .. import functional as F
from ..parameter import Parameter

# torch.nn.modules.activation is where PyTorch defines it: programs and pickles name it by this path
from .attention import MultiheadAttention as MultiheadAttention
from .module import Module

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...types import Device, DType, Tensor


def _softmax_dim(name, ndim, dim):
    """PyTorch's deprecated implicit dim for ``Softmax()`` built without one."""
    if dim is not None:
        return dim
    warnings.warn(
        f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
        stacklevel=4,
    )
    return 0 if ndim in (0, 1, 3) else 1


# (the private bases below have comments, not docstrings: their subclasses would show them as their own)
class _InplaceActivation(Module):
    # an activation whose function takes ``inplace=``; subclasses name the function

    _function: Callable[..., Tensor]

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _SoftmaxAlongDim(Module):
    # Softmax, LogSoftmax and Softmin: the function along ``dim`` (PyTorch's implicit choice where None)

    _function: Callable[..., Tensor]

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, _softmax_dim(self._function.__name__, input.ndim, self.dim))

    def extra_repr(self):
        return f"dim={self.dim}"


class _Elementwise(Module):
    # an activation without arguments: its function of the input

    _function: Callable[..., Tensor]

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input)


class ReLU(_InplaceActivation):
    _function = staticmethod(F.relu)


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(_InplaceActivation):
    _function = staticmethod(F.silu)


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input.sigmoid()


class Softmax(_SoftmaxAlongDim):
    _function = staticmethod(F.softmax)


class LogSoftmax(_SoftmaxAlongDim):
    _function = staticmethod(F.log_softmax)


# ------------------------------------------------------------------------------------------------
# More of PyTorch's activation modules (issue 15), over the functions of the same names
class ReLU6(_InplaceActivation):
    _function = staticmethod(F.relu6)


class SELU(_InplaceActivation):
    _function = staticmethod(F.selu)


class Hardsigmoid(_InplaceActivation):
    _function = staticmethod(F.hardsigmoid)


class Hardswish(_InplaceActivation):
    _function = staticmethod(F.hardswish)


class Mish(_InplaceActivation):
    _function = staticmethod(F.mish)


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, inplace=self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, inplace=self.inplace)


class Hardtanh(Module):
    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
    ) -> None:
        super().__init__()
        # PyTorch's former names, still taken with its warning
        if min_value is not None:
            warnings.warn(
                "keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning, stacklevel=2
            )
            min_val = min_value
        if max_value is not None:
            warnings.warn(
                "keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning, stacklevel=2
            )
            max_val = max_value
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, inplace=self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, inplace=self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class LogSigmoid(_Elementwise):
    _function = staticmethod(F.logsigmoid)


class Softsign(_Elementwise):
    _function = staticmethod(F.softsign)


class Tanhshrink(_Elementwise):
    _function = staticmethod(F.tanhshrink)


class GLU(Module):
    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(_SoftmaxAlongDim):
    _function = staticmethod(F.softmin)


class PReLU(Module):
    """max(0, x) + weight * min(0, x), with one learned slope or one per channel (dim 1)."""

    def __init__(
        self,
        num_parameters: int = 1,
        init: float = 0.25,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype, device=device))

    def reset_parameters(self):
        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softmax2d(Module):
    """softmax over the channels (dim -3) of (N, C, H, W) or (C, H, W) input."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-d or 4-d input, got shape {tuple(input.shape)}")
        return F.softmax(input, -3)


class Hardshrink(Module):
    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)


class RReLU(Module):
    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")
