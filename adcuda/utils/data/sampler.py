"""Samplers: which indices a DataLoader fetches, in which order, and how they are grouped into batches."""

from __future__ import annotations

import numbers
from collections.abc import Sized
from typing import TYPE_CHECKING

from ... import dtypes as adcuda_dtypes
from ... import random as adcuda_random
from ...factories import as_tensor, randint, randperm
from ...ops.random import multinomial

if TYPE_CHECKING:
    from ...types import Generator, Iterable, Sequence

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
]


class Sampler:
    """Yields dataset keys. Subclasses define ``__iter__`` and, where it is known, ``__len__``."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _seeded_generator(generator):
    """``generator``, or a fresh one seeded from adcuda's default generator (so that ``manual_seed``
    fixes the order, and two epochs still differ)."""
    if generator is not None:
        return generator
    seed = int(randint(0, 2**62, (), generator=adcuda_random.default_generator).item())
    return adcuda_random.Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """A random permutation of the indices (or ``num_samples`` draws with replacement), from adcuda's
    generator."""

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement should be a boolean value, got {replacement!r}")
        if (
            not isinstance(self.num_samples, numbers.Integral)
            or isinstance(self.num_samples, bool)
            or self.num_samples <= 0
        ):
            raise ValueError(f"RandomSampler: num_samples should be a positive integer value, got {self.num_samples!r}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = _seeded_generator(self.generator)
        if self.replacement:
            for start in range(0, self.num_samples, 32):
                count = min(32, self.num_samples - start)
                yield from randint(0, n, (count,), generator=generator).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=generator).tolist()
        yield from randperm(n, generator=generator).tolist()[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        order = randperm(len(self.indices), generator=_seeded_generator(self.generator)).tolist()
        for i in order:
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of ``batch_size`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size should be a positive integer value, got {batch_size!r}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a boolean value, got {drop_last!r}")
        self.sampler = sampler
        self.batch_size = int(batch_size)
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights`` (with or without
    replacement), from adcuda's generator."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Generator | None = None,
    ) -> None:
        if not isinstance(num_samples, numbers.Integral) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(
                f"WeightedRandomSampler: num_samples should be a positive integer value, got {num_samples!r}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(f"WeightedRandomSampler: replacement should be a boolean value, got {replacement!r}")
        weights = as_tensor(weights, dtype=adcuda_dtypes.float64)
        if weights.ndim != 1:
            raise ValueError(
                f"WeightedRandomSampler: weights should be a 1-d sequence, got shape {tuple(weights.shape)}"
            )
        self.weights = weights
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        drawn = multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from drawn.tolist()

    def __len__(self):
        return self.num_samples
