"""Datasets with PyTorch's names: map-style ``Dataset`` (``__getitem__`` + ``__len__``), ``IterableDataset``
(``__iter__``), the ``TensorDataset Subset ConcatDataset ChainDataset`` wrappers and ``random_split``."""

from __future__ import annotations

import bisect
import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...factories import randperm
from ...random import Generator
from ...tensor import Tensor

if TYPE_CHECKING:
    from ...types import Iterable

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset", "random_split"]


class Dataset:
    """A map from keys (usually ``0..len-1``) to samples. Subclasses define ``__getitem__`` and, for the
    default samplers, ``__len__``; they may define ``__getitems__(indices)`` to fetch a whole batch."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A stream of samples. With ``num_workers > 0`` every worker runs its own copy of ``__iter__``, so a
    dataset that should not be read twice splits its stream with ``get_worker_info()``."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; every tensor has the same first dimension."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor")
        sizes = [t.shape[0] if t.ndim else None for t in tensors]
        if None in sizes or len(set(sizes)) != 1:
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ValueError(
                f"TensorDataset: size mismatch between tensors: every tensor needs the same "
                f"first dimension, got shapes {shapes}"
            )
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        # hand a whole batch to the wrapped dataset when it can fetch batches itself
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after the other: index ``i`` falls into the dataset whose range holds it."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset (use ChainDataset)")
        self.cumulative_sizes = []
        total = 0
        for d in self.datasets:
            total += len(d)
            self.cumulative_sizes.append(total)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError(
                    f"ConcatDataset: absolute value of index {idx} should not exceed dataset length {len(self)}"
                )
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        if dataset_idx == len(self.datasets):
            raise IndexError(f"ConcatDataset: index {idx} is out of range for length {len(self)}")
        start = self.cumulative_sizes[dataset_idx - 1] if dataset_idx > 0 else 0
        return self.datasets[dataset_idx][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, got {type(d).__name__}")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


def _lengths_from_fractions(fractions, total):
    """PyTorch's rule: floor every share, then hand the remainder out one by one from the first."""
    lengths = [int(math.floor(total * f)) for f in fractions]
    for i in range(total - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, n in enumerate(lengths):
        if n == 0:
            warnings.warn(f"random_split: length of split at index {i} is 0; this split will be empty", stacklevel=3)
    return lengths


def random_split(dataset: Dataset, lengths: Sequence[int | float], generator: Generator | None = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random ``Subset``s of the given lengths, or fractions
    that sum to 1. The permutation comes from ``generator`` (adcuda's default generator if None)."""
    lengths = list(lengths)
    total = len(dataset)
    if lengths and all(0 <= f <= 1 for f in lengths) and math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _lengths_from_fractions(lengths, total)
    if any(isinstance(n, float) and not float(n).is_integer() for n in lengths) or any(n < 0 for n in lengths):
        raise ValueError(
            f"random_split: lengths must be non-negative integers or fractions summing to 1, got {lengths}"
        )
    lengths = [int(n) for n in lengths]
    if sum(lengths) != total:
        raise ValueError(
            f"random_split: sum of input lengths ({sum(lengths)}) does not equal the length "
            f"of the input dataset ({total})"
        )
    order = randperm(total, generator=generator).tolist()
    splits, offset = [], 0
    for n in lengths:
        splits.append(Subset(dataset, order[offset : offset + n]))
        offset += n
    return splits
