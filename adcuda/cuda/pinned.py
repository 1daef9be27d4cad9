"""Page-locked (pinned) host memory from adcuda's pinned pool (kernels/runtime/pinned_pool.h).

Every host<->device copy goes through pinned memory: a host->device copy from a pinned array can
run asynchronously (``.to("cuda", non_blocking=True)``), pageable data is first gathered into a pinned
staging block, and device->host copies land in a pinned block that ``.numpy()`` returns as a view.
Arrays here are NumPy arrays whose memory is a pool block; the block returns to the pool when the last
array over it goes, and is reused only after every copy queued on it has completed.
"""

from __future__ import annotations

import numpy as np

from .. import _native
from ..backends.pinned_host import in_pinned_pool, pinned_host_array
from ..errors import DeviceError
from .devices import unavailable_reason
from .fork import check_not_forked, is_initialized

__all__ = [
    "empty_pinned",
    "pin_array",
    "is_pinned_array",
    "pinned_memory_stats",
    "reset_peak_pinned_memory_stats",
    "empty_pinned_cache",
]

_STAT_KEYS = (
    "allocated_bytes",
    "peak_allocated_bytes",
    "reserved_bytes",
    "peak_reserved_bytes",
    "active_blocks",
    "cached_blocks",
    "pending_blocks",
    "allocations",
    "cache_hits",
    "host_allocs",
    "host_frees",
    "recorded_uses",
)


def empty_pinned(shape, dtype, op="empty_pinned"):
    """An uninitialised C-contiguous NumPy array of ``shape`` and NumPy ``dtype`` in pinned memory
    (an ordinary array when it has no elements)."""
    if all(int(size) for size in shape):
        check_not_forked(op)
        reason = unavailable_reason()
        if reason is not None:
            raise DeviceError(f"{op}: pinned (page-locked) host memory needs CUDA, which is not available: {reason}")
    return pinned_host_array(shape, dtype)


def pin_array(array, op="pin_memory"):
    """A copy of ``array`` in pinned memory (C-contiguous, same shape and dtype)."""
    pinned = empty_pinned(array.shape, array.dtype, op)
    np.copyto(pinned, array)
    return pinned


def _address(array):
    return array.__array_interface__["data"][0]


def _runtime():
    """The native runtime where this process has initialised CUDA, else None (nothing can be pinned)."""
    C = _native._C
    return C if is_initialized() and hasattr(C, "PinnedMemory") else None


def is_pool_pinned(array):
    """Whether ``array``'s memory lies in a block of adcuda's pinned pool."""
    return _runtime() is not None and in_pinned_pool(array)


def is_pinned_array(array):
    """Whether ``array``'s memory is page-locked (adcuda's pool, or any other library's pinned memory).
    False where CUDA is not usable."""
    C = _runtime()
    if C is None or array.size == 0:
        return False
    address = _address(array)
    return C.is_pool_pinned(address) or C.is_page_locked(address)


def pinned_memory_stats() -> dict[str, int]:
    """The pool's counters: bytes ``allocated`` (handed out) and ``reserved`` (from cudaHostAlloc) with
    peaks; blocks ``active``, ``cached`` and ``pending`` (freed, copies still queued); ``allocations``,
    ``cache_hits``, ``host_allocs``/``host_frees``, ``recorded_uses`` (copies noted on blocks)."""
    C = _runtime()
    return dict.fromkeys(_STAT_KEYS, 0) if C is None else C.pinned_memory_stats()


def reset_peak_pinned_memory_stats() -> None:
    C = _runtime()
    if C is not None:
        C.reset_peak_pinned_memory_stats()


def empty_pinned_cache() -> None:
    """Give the pool's unused blocks back to CUDA (after the copies pending on them complete)."""
    C = _runtime()
    if C is not None:
        C.pinned_empty_cache()
