"""The ops that only exist in place: ``fill_ zero_ copy_``. (In-place forms of other ops, ``add_``
and the rest, are generated from the out-of-place ops by the registry.)

Each writes into the tensor's memory and bumps the version counter that saved values are checked
against; while recording, the tensor's history moves to the written value."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ..autograd.grad_mode import state as grad_state
from ..autograd.graph import needs_grad, requires_grad
from ..device import CPU
from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import Tensor, version_counter
from . import dispatch
from .common import filled, scalar_into
from .mutation import check_inplace_allowed, commit_inplace, write_untracked
from .registry import lowering, op

if TYPE_CHECKING:
    from ..backends.seam import CPUArray
    from ..types import Number


def _untracked(t):
    """Whether a write into ``t`` has nothing to record and nothing that could refuse it (what
    ``check_inplace_allowed`` and the recording test would find): not a view, no history, no
    requires_grad, and no dim that repeats an element (stride 0). Then the write goes straight to
    ``write_untracked``."""
    return t._base is None and not t._requires_grad and t._grad_fn is None and 0 not in t._data.strides


def _fill(self, value, name, checked=False):
    """``checked``: value is a number every dtype takes as it is (zero_'s 0)."""
    if value.__class__ is not Tensor and _untracked(self):
        return write_untracked(self, scalar_into(name, value, self.dtype), name)
    check_inplace_allowed(self, name)
    if not checked:
        if isinstance(value, Tensor):
            if value.ndim:
                raise ShapeError(
                    f"{name}: only supports a 0-dimensional value tensor, got shape {fmt_shape(value.shape)}"
                )
            if needs_grad(value):
                return commit_inplace(self, value.to(dtype=self.dtype).expand(tuple(self.shape)), name)
            value = value.item()
        value = scalar_into(name, value, self.dtype)
    if requires_grad(self) and grad_state.enabled:  # (needs_grad, the tensor asked first: the cheaper test)
        return commit_inplace(self, filled(self.shape, value, self.dtype, self._device), name)
    return write_untracked(self, value, name)


# The methods Tensor.zero_, fill_ and copy_: while no hook is attached (the dispatch point's lanes are
# open: ``dispatch._plain``), a write into an untracked, writable CPU tensor of a value that needs no
# conversion NumPy could warn about is made at once and the version counter bumped, as the op would;
# everything else, and every call a hook may watch (a profiler sees the op), is the op's.
def _writable_at_once(t):
    """``t``'s array where the methods below may write it at once, else None."""
    if dispatch._plain and t.__class__ is Tensor and t._device is CPU and _untracked(t):
        data = cast("CPUArray", t._data)
        if data.flags.writeable:  # (a read-only array: the op names the error)
            return data
    return None


def _zero_method(self: Tensor) -> Tensor:
    # _writable_at_once and _untracked read in line, and the version counter where it is made: their
    # calls were a third of a small zero_ (an optimizer's zero_grad, a buffer reset)
    data: CPUArray = self._data  # type: ignore[assignment]  # (a CPU one where it is read: no cast's call)
    if (
        dispatch._plain
        and self.__class__ is Tensor
        and self._device is CPU
        and self._base is None
        and not self._requires_grad
        and self._grad_fn is None
        and 0 not in data.strides
    ):
        try:
            data.fill(0)
        except ValueError:  # a read-only array (asked so rather than of its flags): the op names it
            return zero_(self)
        vc = self._vc
        (version_counter(self) if vc is None else vc).value += 1
        return self
    return zero_(self)


def _fill_method(self: Tensor, value: Tensor | Number) -> Tensor:
    data = _writable_at_once(self) if value.__class__ in _NUMBERS else None
    if data is None:
        return fill_(self, value)
    # (a value that does not fit raises, named; one that fits converts without a NumPy warning)
    data.fill(scalar_into("fill_", value, self.dtype))
    version_counter(self).value += 1
    return self


_NUMBERS = (int, float, bool)


def _copy_method(
    self: Tensor, src: Tensor | None = None, non_blocking: bool = False, *, other: Tensor | None = None
) -> Tensor:
    data = _writable_at_once(self) if other is None and isinstance(src, Tensor) else None
    if data is None or src is None:
        return copy_(self, src, non_blocking, other=other)
    source = src._data
    if src._device is not CPU or source.dtype != data.dtype or source.shape != data.shape or requires_grad(src):
        return copy_(self, src, non_blocking)
    data[...] = source  # (NumPy copies through a buffer where the two overlap)
    version_counter(self).value += 1
    return self


@op("fill_", doc="Every element set to value, in place.", composite=True, function=False, method=_fill_method)
def fill_(self: Tensor, value: Tensor | Number) -> Tensor:
    return _fill(self, value, "fill_")


@op("zero_", doc="Every element set to 0, in place.", composite=True, function=False, method=_zero_method)
def zero_(self: Tensor) -> Tensor:
    if _untracked(self):
        return write_untracked(self, 0, "zero_")
    return _fill(self, 0, "zero_", checked=True)


@op(
    "copy_",
    doc="src's values (broadcast, converted) written into this tensor.",
    composite=True,
    function=False,
    method=_copy_method,
)
def copy_(
    self: Tensor, src: Tensor | None = None, non_blocking: bool = False, *, other: Tensor | None = None
) -> Tensor:
    # other: the name of PyTorch's overload without non_blocking (x.copy_(other=y))
    if (src is None) == (other is None):
        raise DTypeError("copy_: expected exactly one of src and other")
    src = other if src is None else src
    if (
        src.__class__ is Tensor
        and src._device is self._device
        and src._data.dtype == self._data.dtype
        and src._data.shape == self._data.shape
        and _untracked(self)
        and not requires_grad(src)
    ):
        return write_untracked(self, src._data, "copy_")  # nothing to convert, broadcast or record
    check_inplace_allowed(self, "copy_")
    if not isinstance(src, Tensor):
        raise DTypeError(f"copy_: src must be a Tensor, got {type(src).__name__}")
    if (src._device is not self._device and src._device != self._device) or src.dtype is not self.dtype:
        src = src.to(self._device, self.dtype)
    if src._data.shape == self._data.shape and not (needs_grad(src) or needs_grad(self)):
        return write_untracked(self, src._data, "copy_")  # nothing to broadcast or record: no view made
    try:
        value = src.expand(tuple(self.shape))
    except ShapeError:
        raise ShapeError(
            f"copy_: src of shape {fmt_shape(src.shape)} cannot be broadcast to {fmt_shape(self.shape)}"
        ) from None
    if needs_grad(src) or needs_grad(self):
        return commit_inplace(self, value.clone(), "copy_")
    return write_untracked(self, value._data, "copy_")


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("copy_", onnx=lambda w, node, **params: w.copy_(node, **params))
