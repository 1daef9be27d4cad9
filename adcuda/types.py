"""The names adcuda's public API is annotated with (PyTorch has them in ``torch.types``).

The ops, ``Tensor`` and the library modules write their annotations as strings (``from __future__ import
annotations``) and import these names only for type checkers, so annotating costs nothing at run time;
tests/test_type_hints.py evaluates every annotation against this module to keep them valid.
"""

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from os import PathLike
from typing import Any, BinaryIO

from numpy import ndarray

from .autograd.graph import Node, RemovableHandle
from .device import device as Device
from .dtypes import dtype as DType
from .random import Generator
from .tensor import Size, Tensor

__all__ = [
    "Number",
    "DType",
    "Device",
    "Tensor",
    "Size",
    "Generator",
    "Node",
    "RemovableHandle",
    "ndarray",
    "Callable",
    "Iterable",
    "Iterator",
    "Mapping",
    "Sequence",
    "PathLike",
    "BinaryIO",
    "Any",
]

Number = bool | int | float
"""A Python scalar, where PyTorch takes one in place of a tensor."""
