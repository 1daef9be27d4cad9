"""The caching device allocator's API, with PyTorch's names (``memory_allocated``,
``max_memory_allocated``, ``memory_reserved``, ``reset_peak_memory_stats``, ``empty_cache``,
``memory_stats``). How the allocator works: kernels/runtime/allocator.h.

As in PyTorch, these answer zeros (and ``empty_cache`` does nothing) in a process that has not
initialised CUDA, so scripts can call them unconditionally.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _native
from ..backends import device_caches
from .devices import _device_index
from .errors import OutOfMemoryError
from .fork import is_initialized

if TYPE_CHECKING:
    from ..types import Device

__all__ = [
    "memory_allocated",
    "max_memory_allocated",
    "memory_reserved",
    "max_memory_reserved",
    "reset_peak_memory_stats",
    "reset_max_memory_allocated",
    "empty_cache",
    "memory_stats",
    "OutOfMemoryError",
]

# memory_stats() keys, PyTorch's: "<stat>.<pool>.<current|peak|allocated|freed>" and counters.
_POOLS = ("all", "small_pool", "large_pool")
_STAT_KEYS = tuple(
    [
        f"{stat}.{pool}.{field}"
        for stat in (
            "allocated_bytes",
            "requested_bytes",
            "reserved_bytes",
            "active",
            "active_bytes",
            "segment",
            "allocation",
        )
        for pool in _POOLS
        for field in ("current", "peak", "allocated", "freed")
    ]
    + [f"{stat}.{pool}.current" for stat in ("inactive_split", "inactive_split_bytes") for pool in _POOLS]
    + [
        "num_alloc_retries",
        "num_ooms",
        "num_device_alloc",
        "num_device_free",
        "cache_hits",
        "cross_stream_reuses",
        "pending_blocks",
        "cached_blocks",
    ]
)


def _runtime_ready():
    return is_initialized() and hasattr(_native._C, "memory_stats")


def memory_stats(device: Device | str | int | None = None) -> dict[str, int]:
    """The caching allocator's statistics for ``device``, under PyTorch's names: for each of
    ``allocated_bytes`` (in blocks handed out), ``requested_bytes`` (what callers asked for),
    ``reserved_bytes`` (in segments from cudaMalloc), ``active``/``active_bytes`` (blocks handed out or
    still waiting for another stream's work), ``segment`` and ``allocation`` (requests), the keys
    ``"<stat>.<all|small_pool|large_pool>.<current|peak|allocated|freed>"``; ``inactive_split`` and
    ``inactive_split_bytes`` (free blocks that share a segment with a block in use, so their memory
    cannot go back to CUDA: fragmentation) with ``.current``; ``num_alloc_retries``, ``num_ooms``,
    ``num_device_alloc``, ``num_device_free``; and adcuda's own ``cache_hits``, ``cross_stream_reuses``,
    ``pending_blocks``, ``cached_blocks``. How the allocator works: kernels/runtime/allocator.h."""
    if not _runtime_ready():
        return dict.fromkeys(_STAT_KEYS, 0)
    return _native._C.memory_stats(_device_index(device, "memory_stats"))


def memory_allocated(device: Device | str | int | None = None) -> int:
    """Bytes in blocks handed out to arrays on ``device`` (rounded to the allocator's size classes)."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: Device | str | int | None = None) -> int:
    """The peak of ``memory_allocated`` since the start or the last ``reset_peak_memory_stats``."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: Device | str | int | None = None) -> int:
    """Bytes the allocator holds from CUDA on ``device`` (handed out plus cached)."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: Device | str | int | None = None) -> int:
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: Device | str | int | None = None) -> None:
    """Peaks start again from the current values."""
    if _runtime_ready():
        _native._C.reset_peak_memory_stats(_device_index(device, "reset_peak_memory_stats"))


reset_max_memory_allocated = reset_peak_memory_stats


def empty_cache() -> None:
    """Give every segment with no block in use back to CUDA, after the work that may still use its
    blocks is done. Memory held by live tensors is not freed, nor the free blocks that share a segment
    with them (``inactive_split_bytes``). The ops' caches of constant arrays (per-shape grids) are
    dropped first, so that none keeps a block alive."""
    device_caches.clear_all()
    if _runtime_ready():
        _native._C.empty_cache()
