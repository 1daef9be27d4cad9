"""Padding modules over ``F.pad``: ``ZeroPad1d/2d ConstantPad1d/2d ReflectionPad1d/2d
ReplicationPad1d/2d CircularPad1d/2d``, with PyTorch's padding order (last dim first: left, right,
then top, bottom)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import functional as F
from .module import Module

if TYPE_CHECKING:
    from ...types import Sequence, Tensor


class _PadNd(Module):
    _mode = "constant"
    _dims = 1

    def __init__(self, padding: int | Sequence[int], value: float = 0.0) -> None:
        super().__init__()
        if isinstance(padding, int):
            padding = (padding,) * (2 * self._dims)
        padding = tuple(padding)
        if len(padding) != 2 * self._dims:
            raise ValueError(
                f"{type(self).__name__}: padding must be an int or {2 * self._dims} ints, got {len(padding)}"
            )
        self.padding = padding
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        if self._mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}" + (f", value={self.value}" if self._mode == "constant" else "")


class ConstantPad1d(_PadNd):
    def __init__(self, padding: int | Sequence[int], value: float) -> None:
        super().__init__(padding, value)


class ConstantPad2d(ConstantPad1d):
    _dims = 2


class ZeroPad1d(_PadNd):
    def __init__(self, padding: int | Sequence[int]) -> None:
        super().__init__(padding, 0.0)


class ZeroPad2d(ZeroPad1d):
    _dims = 2


class ReflectionPad1d(ZeroPad1d):
    _mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    _dims = 2


class ReplicationPad1d(ZeroPad1d):
    _mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    _dims = 2


class CircularPad1d(ZeroPad1d):
    _mode = "circular"


class CircularPad2d(CircularPad1d):
    _dims = 2
