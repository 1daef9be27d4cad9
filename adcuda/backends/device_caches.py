"""Caches of backend arrays kept across op calls (constant grids made once per shape and device: affine_grid's
base grids, scatter's and nonzero's index grids). A cached CUDA array holds its memory block for as long as
the cache keeps it, so each cache registers how it is cleared here, and ``adcuda.cuda.empty_cache()`` clears
them all before it gives free segments back to CUDA (they are made again on their next use)."""

from __future__ import annotations

from collections.abc import Callable

_CLEARS: list[Callable[[], None]] = []


def register(clear: Callable[[], None]) -> None:
    """Have ``empty_cache()`` call ``clear`` (it drops a cache's arrays)."""
    _CLEARS.append(clear)


def clear_all() -> None:
    """Drop every registered cache's arrays."""
    for clear in _CLEARS:
        clear()
