"""adcuda's random number generator: a Philox key (the seed) and a counter offset.

Every random primitive takes ``(seed, offset)`` and the generator advances the offset past what the
draw used, so results depend only on ``manual_seed`` and the sequence of draws, never on the
backend's launch configuration. DataLoader workers reseed it per worker.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .device import device as Device

_DEFAULT_SEED = 67280421310721

# Set by graph capture (adcuda.capture) while it records: sees every draw, so a replay can draw again
# from the same stream instead of reusing the captured numbers.
_draw_observer = None


def set_draw_observer(observer):
    """Install ``observer(generator, numel, seed, offset)`` (or None); returns the previous one."""
    global _draw_observer
    previous, _draw_observer = _draw_observer, observer
    return previous


class Generator:
    def __init__(self, device: Device | str = "cpu") -> None:
        self.device = device
        self._lock = threading.Lock()
        self._seed = _DEFAULT_SEED
        self._offset = 0

    def manual_seed(self, seed: int) -> Generator:
        seed = int(seed)
        if seed < 0:
            seed &= 0xFFFFFFFFFFFFFFFF
        with self._lock:
            self._seed = seed
            self._offset = 0
        return self

    def seed(self) -> int:
        return self.manual_seed(int.from_bytes(os.urandom(8), "little"))._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> tuple[int, int]:
        return (self._seed, self._offset)

    def set_state(self, state: tuple[int, int]) -> None:
        self._seed, self._offset = int(state[0]), int(state[1])

    def next_offset(self, numel: int) -> tuple[int, int]:
        """Reserve counter blocks for a draw of ``numel`` values; return (seed, offset)."""
        # each Philox block gives 4 x 64 bits; reserve generously so rejection sampling never
        # overlaps the next draw (a positive int as it is: max and int cost a third of this call)
        step = numel if numel.__class__ is int and numel > 0 else max(int(numel), 1)
        with self._lock:
            offset = self._offset
            self._offset = offset + step
            seed = self._seed
        if _draw_observer is not None:
            _draw_observer(self, numel, seed, offset)
        return seed, offset


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    default_generator.manual_seed(seed)
    return default_generator


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> tuple[int, int]:
    return default_generator.get_state()


def set_rng_state(state: tuple[int, int]) -> None:
    default_generator.set_state(state)
