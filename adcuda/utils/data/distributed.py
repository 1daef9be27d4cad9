"""``DistributedSampler``: each rank's share of a dataset, with PyTorch's algorithm.

Every rank draws the same permutation (adcuda's generator seeded with ``seed + epoch``), pads it
by repeating its head until it divides evenly (or, with ``drop_last``, cuts the tail), and takes
every ``num_replicas``-th index from its rank on; so the shares are disjoint, cover the dataset,
and have equal lengths, which keeps the ranks' collectives in step.
"""

import math

from ... import distributed as dist
from ...factories import randperm
from ...random import Generator
from .dataset import Dataset
from .sampler import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    def __init__(
        self,
        dataset: Dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            if not dist.is_initialized():
                raise RuntimeError(
                    "DistributedSampler: num_replicas and rank default to the process group's, but "
                    "the default process group has not been initialized; call "
                    "adcuda.distributed.init_process_group() or pass num_replicas and rank"
                )
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be a positive integer, got {num_replicas!r}")
        if not isinstance(rank, int) or rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if drop_last and len(dataset) % num_replicas != 0:
            # the largest even split that leaves no rank short: the tail is dropped
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            generator = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=generator).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Call at the start of every epoch, with the same value on every rank, for a new shuffle."""
        self.epoch = epoch
