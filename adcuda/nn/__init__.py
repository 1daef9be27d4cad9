"""``adcuda.nn``: modules, parameters, initialisers and the functional API, with PyTorch's names."""
from . import functional
from . import init
from .parameter import Parameter
from .modules import *  # noqa: F401,F403 (the layer classes, listed in modules.__all__)
from .modules import __all__ as _module_names
from .modules.module import StateDictError
from . import utils
from . import parallel

__all__ = ["Parameter", "StateDictError", "functional", "init", "parallel", "utils"] + list(_module_names)
