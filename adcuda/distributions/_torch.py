"""The names the distributions are written with, as ``torch.<name>``: every op's function form (the
registry's, as ``adcuda`` exports them), factories, dtypes and grad modes. The package itself sits
above this library layer, so the distributions import this instead of ``adcuda``."""

from ..autograd.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..dtypes import bool_ as bool  # noqa: A004 (PyTorch's name)
from ..dtypes import finfo, float16, float32, float64, get_default_dtype, int64
from ..ops import functions
from ..tensor import Size, Tensor

globals().update(functions())

__all__ = [
    "Size",
    "Tensor",
    "bool",
    "enable_grad",
    "finfo",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "int64",
    "is_grad_enabled",
    "no_grad",
]
