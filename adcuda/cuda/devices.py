"""Query and control CUDA devices, with PyTorch's names.

Where no device is usable (no GPU, no driver, a build without CUDA, or a GPU this build has no code
for), ``is_available()`` is False, ``unavailable_reason()`` says why, and every call that needs a
device raises ``adcuda.errors.DeviceError`` with that reason instead of crashing. The query itself
(asked once per process) is ``adcuda.backends.cuda_availability``'s, which the CUDA backend checks too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _native
from ..backends.cuda_availability import (
    device_count,
    is_available,
    kernel_image_for,  # noqa: F401 (adcuda.cuda's, re-exported from here)
    unavailable_reason,
)
from ..backends.cuda_availability import device_properties as _properties
from ..backends.cuda_availability import query as _query  # noqa: F401 (adcuda.cuda's, re-exported from here)
from ..backends.cuda_availability import require_cuda as _require_cuda
from ..device import device as device_type
from ..errors import DeviceError

if TYPE_CHECKING:
    from ..types import Any, Device

__all__ = [
    "is_available",
    "device_count",
    "unavailable_reason",
    "get_device_name",
    "get_device_properties",
    "get_device_capability",
    "current_device",
    "set_device",
    "synchronize",
    "device",
    "mem_get_info",
]


def _device_index(device, op_name):
    """A valid device index from ``None`` (the current device), an int, ``"cuda"``/``"cuda:N"`` or an
    ``adcuda.device``."""
    _require_cuda(op_name)
    if device is None:
        return current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        try:
            parsed = device_type(device)
        except DeviceError as exc:
            raise DeviceError(f"{op_name}: {exc}") from None
        if parsed.type != "cuda":
            raise DeviceError(f"{op_name}: expected a CUDA device, got '{parsed}'")
        if parsed.index is None:
            return current_device()
        index = parsed.index
    count = device_count()
    if not 0 <= index < count:
        raise DeviceError(
            f"{op_name}: invalid CUDA device index {index}; "
            f"{count} device{'s' if count != 1 else ''} visible (cuda:0..cuda:{count - 1})"
        )
    return index


def get_device_properties(device: Device | str | int | None = None) -> Any:
    """Name, compute capability, memory and SM count of a device (PyTorch's ``_CudaDeviceProperties``)."""
    return _properties(_device_index(device, "get_device_properties"))


def get_device_name(device: Device | str | int | None = None) -> str:
    return _properties(_device_index(device, "get_device_name")).name


def get_device_capability(device: Device | str | int | None = None) -> tuple[int, int]:
    props = _properties(_device_index(device, "get_device_capability"))
    return props.major, props.minor


def current_device() -> int:
    """The calling thread's current CUDA device index."""
    _require_cuda("current_device")
    return _native._C.cuda_current_device()


def set_device(device: Device | str | int) -> None:
    """Make ``device`` the calling thread's current CUDA device."""
    index = _device_index(device, "set_device")  # raises the clear error first where CUDA is unusable
    _native._C.cuda_set_device(index)


def synchronize(device: Device | str | int | None = None) -> None:
    """Wait until all work queued on ``device`` (default: the current one) has finished."""
    index = _device_index(device, "synchronize")
    C = _native._C
    previous = C.cuda_current_device()
    if index == previous:
        C.cuda_synchronize()
        return
    C.cuda_set_device(index)
    try:
        C.cuda_synchronize()
    finally:
        C.cuda_set_device(previous)


class device:
    """``with adcuda.cuda.device(1):`` makes a device current for the block (PyTorch's
    ``torch.cuda.device``); ``None`` or a negative index leaves the current device as it is."""

    def __init__(self, device: Device | str | int | None) -> None:
        self._index = None if device is None or (isinstance(device, int) and device < 0) else device
        self._previous = None

    def __enter__(self) -> device:
        if self._index is None:
            return self
        index = _device_index(self._index, "device")
        self._previous = current_device()
        if index != self._previous:
            _native._C.cuda_set_device(index)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            _native._C.cuda_set_device(self._previous)
            self._previous = None


def mem_get_info(device: Device | str | int | None = None) -> tuple[int, int]:
    """``(free, total)`` bytes of device memory, as the driver reports them (all processes together)."""
    index = _device_index(device, "mem_get_info")  # first: a host-only _C has no memory_info to look up
    return tuple(_native._C.memory_info(index))
