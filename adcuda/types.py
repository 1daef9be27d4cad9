"""The names adcuda's public API is annotated with (PyTorch has them in ``torch.types``).

The ops, ``Tensor`` and the library modules write their annotations as strings (``from __future__ import
annotations``) and import these names only for type checkers, so annotating costs nothing at run time;
tests/test_type_hints.py evaluates every annotation against this module to keep them valid.

This module is a leaf: it imports nothing of adcuda when it runs. adcuda's own classes (``Tensor``,
``DType``, ...) are imported here for type checkers only, and at run time on first use of the name
(``adcuda.types.Tensor``, by module ``__getattr__``). The modules those classes come from (``tensor``,
``dtypes``, ``device``, ``random``, ``hooks``, ``autograd.graph``, ``autograd.grad_mode``) never import
this module, not even for type checkers: they import what they annotate with from where it is defined,
so a type checker sees no import circle through here (scripts/import_cycles.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from os import PathLike
from types import EllipsisType
from typing import TYPE_CHECKING, Any, BinaryIO

from numpy import ndarray

if TYPE_CHECKING:
    from .autograd.graph import Node
    from .device import device as Device
    from .dtypes import Number
    from .dtypes import dtype as DType
    from .hooks import RemovableHandle
    from .random import Generator
    from .tensor import GradFn, Size, Tensor

__all__ = [
    "Number",
    "DType",
    "Device",
    "Tensor",
    "Size",
    "Generator",
    "Node",
    "GradFn",
    "RemovableHandle",
    "ndarray",
    "Callable",
    "Iterable",
    "Iterator",
    "Mapping",
    "Sequence",
    "PathLike",
    "BinaryIO",
    "EllipsisType",
    "Any",
]

# adcuda's names: where each is defined (module, name there), imported on first use at run time
_DEFINED_IN = {
    "Number": ("adcuda.dtypes", "Number"),
    "DType": ("adcuda.dtypes", "dtype"),
    "Device": ("adcuda.device", "device"),
    "Tensor": ("adcuda.tensor", "Tensor"),
    "Size": ("adcuda.tensor", "Size"),
    "Generator": ("adcuda.random", "Generator"),
    "Node": ("adcuda.autograd.graph", "Node"),
    "GradFn": ("adcuda.tensor", "GradFn"),
    "RemovableHandle": ("adcuda.hooks", "RemovableHandle"),
}


def __getattr__(name: str) -> Any:
    if name not in _DEFINED_IN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _DEFINED_IN[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later uses are plain lookups
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
