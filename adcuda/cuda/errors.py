"""The exceptions of ``adcuda.cuda``. Defined in Python so that every build (with or without CUDA) has
the same classes; the native runtime raises them too (``kernels/bindings.cpp``). ``BadForkError`` is
``adcuda.errors``' (the backends refuse with it too), re-exported here."""

from ..errors import BadForkError, DeviceError, IndexOutOfRangeError

__all__ = ["OutOfMemoryError", "BadForkError", "DeviceIndexError", "GraphCaptureError"]


class OutOfMemoryError(RuntimeError):
    """The caching allocator (or the pinned-memory pool) could not get memory even after releasing its
    cache; the message says how much was asked for and what is allocated and reserved. PyTorch's
    ``torch.cuda.OutOfMemoryError``."""


class DeviceIndexError(IndexOutOfRangeError):
    """A kernel found an index out of range (embedding, indexing, gather, scatter). GPU ops check their
    indices on the device without waiting for the answer, so this is raised by the next call that
    waits for the device (``item()``, ``.cpu()``, ``.numpy()``, ``synchronize()``), as PyTorch's
    device-side asserts are, naming the op and the index; the result of that op is not valid."""


class GraphCaptureError(DeviceError):
    """A CUDA graph could not be captured or replayed: a call that cannot be part of a graph was made
    during a capture (a synchronisation, a host read such as ``.item()``, a copy from host memory), or
    the graph was misused (replayed before ``capture_end`` or after ``reset``). The message names what
    was attempted. No PyTorch counterpart (PyTorch raises a plain RuntimeError from CUDA)."""
