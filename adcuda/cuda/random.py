"""``adcuda.cuda.manual_seed`` / ``manual_seed_all``: PyTorch's CUDA seeding calls, which scripts make
whether or not a GPU is there.

adcuda has one default generator for every device: a draw depends only on the seed and the sequence
of draws (counter-based Philox), never on the device. So seeding "the CUDA generator" is seeding that
one generator, and works the same with no GPU at all (PyTorch silently defers it there).
"""

from __future__ import annotations

from .. import random as _random


def manual_seed(seed: int) -> None:
    """Seed the default generator (the one every device draws from)."""
    _random.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed the default generator: one generator serves every device."""
    _random.manual_seed(seed)


def seed() -> None:
    """Seed the default generator with a fresh random number."""
    _random.seed()


def initial_seed() -> int:
    return _random.initial_seed()
