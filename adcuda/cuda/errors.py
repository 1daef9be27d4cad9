"""The exceptions of ``adcuda.cuda``. Defined in Python so that every build (with or without CUDA) has
the same classes; the native runtime raises them too (``kernels/bindings.cpp``). ``BadForkError`` is
``adcuda.errors``' (the backends refuse with it too), re-exported here."""
from ..errors import BadForkError

__all__ = ["OutOfMemoryError", "BadForkError"]


class OutOfMemoryError(RuntimeError):
    """The caching allocator (or the pinned-memory pool) could not get memory even after releasing its
    cache; the message says how much was asked for and what is allocated and reserved. PyTorch's
    ``torch.cuda.OutOfMemoryError``."""
