"""``adcuda.nn``: modules, parameters, initialisers and the functional API, with PyTorch's names."""

from . import functional, init, parallel, utils
from .modules import *  # noqa: F401,F403 (the layer classes, listed in modules.__all__)
from .modules import __all__ as _module_names
from .modules.module import StateDictError
from .parameter import Parameter

__all__ = ["Parameter", "StateDictError", "functional", "init", "parallel", "utils"] + list(_module_names)
