"""The caching device allocator's API, with PyTorch's names (``memory_allocated``,
``max_memory_allocated``, ``memory_reserved``, ``reset_peak_memory_stats``, ``empty_cache``,
``memory_stats``). How the allocator works: kernels/runtime/allocator.h.

As in PyTorch, these answer zeros (and ``empty_cache`` does nothing) in a process that has not
initialised CUDA, so scripts can call them unconditionally.
"""
from .. import _native
from .devices import _device_index
from .errors import OutOfMemoryError
from .fork import is_initialized

__all__ = ["memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
           "reset_peak_memory_stats", "reset_max_memory_allocated", "empty_cache", "memory_stats",
           "OutOfMemoryError"]

_STAT_KEYS = (
    "allocated_bytes", "peak_allocated_bytes", "requested_bytes", "reserved_bytes", "peak_reserved_bytes",
    "small_pool_allocated_bytes", "small_pool_reserved_bytes", "large_pool_allocated_bytes",
    "large_pool_reserved_bytes", "active_blocks", "cached_blocks", "pending_blocks", "allocations", "frees",
    "cache_hits", "cross_stream_reuses", "cuda_mallocs", "cuda_frees", "alloc_retries", "ooms",
)


def _runtime_ready():
    return is_initialized() and hasattr(_native._C, "memory_stats")


def memory_stats(device=None):
    """The allocator's counters for ``device``: bytes ``allocated`` (in blocks handed out), ``requested``,
    ``reserved`` (from cudaMalloc) with peaks and per-pool splits; block counts (``active``, ``cached``,
    ``pending`` on another stream's work); and event counts (``cache_hits``, ``cross_stream_reuses``,
    ``cuda_mallocs``, ``alloc_retries``, ``ooms``, ...)."""
    if not _runtime_ready():
        return dict.fromkeys(_STAT_KEYS, 0)
    return _native._C.memory_stats(_device_index(device, "memory_stats"))


def memory_allocated(device=None):
    """Bytes in blocks handed out to arrays on ``device`` (rounded to the allocator's size classes)."""
    return memory_stats(device)["allocated_bytes"]


def max_memory_allocated(device=None):
    """The peak of ``memory_allocated`` since the start or the last ``reset_peak_memory_stats``."""
    return memory_stats(device)["peak_allocated_bytes"]


def memory_reserved(device=None):
    """Bytes the allocator holds from CUDA on ``device`` (handed out plus cached)."""
    return memory_stats(device)["reserved_bytes"]


def max_memory_reserved(device=None):
    return memory_stats(device)["peak_reserved_bytes"]


def reset_peak_memory_stats(device=None):
    """Peaks start again from the current values."""
    if _runtime_ready():
        _native._C.reset_peak_memory_stats(_device_index(device, "reset_peak_memory_stats"))


reset_max_memory_allocated = reset_peak_memory_stats


def empty_cache():
    """Give every cached (unused) block back to CUDA, after the work that may still use them is done.
    Memory held by live tensors is not freed."""
    if _runtime_ready():
        _native._C.empty_cache()
