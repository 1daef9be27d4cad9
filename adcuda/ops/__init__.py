"""Every op, declared once in the registry (``registry.py``) by the module of its family, and called
through one dispatch point (``dispatch.py``).

Importing this package declares the ops and attaches their Tensor forms (methods, in-place forms,
operators, properties); ``adcuda`` and ``adcuda.nn.functional`` export their function forms.
"""

from ..tensor import Tensor

# importing a family module declares its ops
from . import (
    attention,
    autocast,
    conversion,
    convolution,
    elementwise,
    elementwise_more,
    embedding,
    factories,
    gemm,
    index,
    inplace,
    layout,
    norm,
    optim,
    pooling,
    random,
    recurrent,
    reduce,
    resample,
    softmax_loss,
    sort,
    sparse,
    special,
)
from .registry import all_ops, functional_forms, functions, get, install_methods

install_methods(Tensor)

__all__ = ["all_ops", "functional_forms", "functions", "get"]
