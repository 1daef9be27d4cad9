"""``adcuda.accelerator``: PyTorch's device-generic accelerator API. adcuda's one accelerator is CUDA,
so each call is the matching ``adcuda.cuda`` one; where no GPU is usable there is no accelerator
(``current_accelerator()`` is None, ``device_count()`` 0), and scripts fall back to the CPU."""

from . import cuda
from .device import device


def is_available():
    """Whether a CUDA device is usable."""
    return cuda.is_available()


def current_accelerator(check_available=False):
    """``device('cuda')`` where a CUDA device is usable, else None. (A CUDA build on a machine with no
    usable device has no accelerator either: adcuda then runs everything on the CPU, so both values of
    ``check_available`` give the same answer.)"""
    return device("cuda") if cuda.is_available() else None


def device_count():
    """The number of usable CUDA devices (0 without one)."""
    return cuda.device_count() if cuda.is_available() else 0


def current_device_index():
    """The calling thread's current CUDA device index."""
    return cuda.current_device()


def set_device_index(index):
    cuda.set_device(index)


def synchronize(device_index=None):
    """Wait for the work queued on a CUDA device (the current one by default)."""
    cuda.synchronize(device_index)


__all__ = [
    "is_available",
    "current_accelerator",
    "device_count",
    "current_device_index",
    "set_device_index",
    "synchronize",
]
