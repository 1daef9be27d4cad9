"""adcuda.autograd: the graph, the backward engine, grad modes, custom Functions, gradcheck, anomaly.

The engine is small in spirit (micrograd's idea: a backward rule per op, run in reverse dependency
order), but iterative, hookable and careful about saved values.
"""

from . import tensor_methods  # noqa: F401 (attaches backward, grad_fn, hooks, ... to Tensor)
from .anomaly import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .api import backward, grad
from .function import Function, FunctionCtx
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .graph import Node
from .variable import Variable

__all__ = [
    "backward",
    "grad",
    "Function",
    "FunctionCtx",
    "gradcheck",
    "gradgradcheck",
    "no_grad",
    "enable_grad",
    "set_grad_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
    "is_grad_enabled",
    "detect_anomaly",
    "set_detect_anomaly",
    "is_anomaly_enabled",
    "GradcheckError",
    "Node",
    "Variable",
]
