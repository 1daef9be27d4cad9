"""``Linear`` (y = x W^T + b), ``Bilinear`` (y = x1^T A x2 + b) and ``Identity``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ...errors import ShapeError, fmt_shape
from ...factories import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

if TYPE_CHECKING:
    from ...types import Any, Device, DType, Tensor


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments (as PyTorch's does)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


def _register_bias(module, bias, size, device, dtype):
    """``module.bias``: a parameter of ``size`` elements where ``bias`` asks for one, else None."""
    if bias:
        module.bias = Parameter(empty(size, device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)


class Linear(Module):
    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), device=device, dtype=dtype))
        _register_bias(self, bias, out_features, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        init._layer_default_(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise ShapeError(
                f"Linear: input of shape {fmt_shape(input.shape)} does not match in_features="
                f"{self.in_features} (the last dim of the input must be {self.in_features})"
            )
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for ``MultiheadAttention.out_proj``'s class: a ``Linear`` (PyTorch keeps it apart
    only for its quantization passes); checkpoints of attention layers name it."""


class Bilinear(Module):
    """y = x1^T A x2 + b, with PyTorch's parameter names and U(-1/sqrt(in1), 1/sqrt(in1)) init."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), device=device, dtype=dtype))
        _register_bias(self, bias, out_features, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1]) if self.weight.shape[1] > 0 else 0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
