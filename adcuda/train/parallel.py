"""``adcuda train --distributed``: where this process stands in a data-parallel job, the process group
around a run, and each rank's share of the training samples.

Every rank seeds the same generators and draws the same random numbers (dropout, augmentation,
sampling), so that rank 0's checkpoint holds the random state of every rank and a resumed run
continues exactly; the ranks differ only in the samples they train on.
"""

import contextlib
import dataclasses

from .. import distributed as dist
from ..distributed import environment
from ..factories import tensor
from ..nn.parallel import DistributedDataParallel
from ..utils.data import Sampler
from .errors import SettingsError


@dataclasses.dataclass(frozen=True)
class World:
    """This process's place in the job: rank ``rank`` of ``size`` processes."""

    rank: int
    size: int

    @property
    def is_main(self):
        return self.rank == 0


def launched_world(ask_mpi=True):
    """The ``World`` that ``mpirun``/``mpiexec`` or ``adcuda.distributed.launch`` started this process
    into, or None for a process started on its own. The environment is asked first; ``ask_mpi``:
    then MPI itself (for launchers whose variables adcuda does not know; this initialises MPI)."""
    (rank, _), (size, _) = environment.rank_and_world_size()
    if size is not None:
        return World(rank or 0, size)
    if not ask_mpi:
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    comm = MPI.COMM_WORLD
    return World(comm.Get_rank(), comm.Get_size()) if comm.Get_size() > 1 else None


@contextlib.contextmanager
def process_group(device_type):
    """The default process group for a run (NCCL for CUDA, MPI for the CPU), yielding this process's
    ``World``; one the caller initialised already is used and left as it is."""
    if dist.is_initialized():
        yield World(dist.get_rank(), dist.get_world_size())
        return
    if launched_world() is None:
        raise SettingsError(
            "--distributed: this process was not started as part of a job; use --nproc-per-node N "
            "to start N processes, or start them with mpirun -n N"
        )
    dist.init_process_group("nccl" if device_type == "cuda" else "mpi")
    yield World(dist.get_rank(), dist.get_world_size())
    # Only after a run that finished: a rank that failed must not wait in this collective for the others
    # (which may be waiting in a training step for it); the launcher ends the whole job instead.
    dist.destroy_process_group()


def wrap(model):
    """``model`` (already on its device, in its final dtype) as a DistributedDataParallel replica."""
    return DistributedDataParallel(model)


def mean_over_ranks(total, count, device):
    """``sum(total) / sum(count)`` over every rank (for the epoch's training loss)."""
    sums = tensor([float(total), float(count)], device=device)
    dist.all_reduce(sums)
    total, count = sums.tolist()
    return total / max(count, 1)


class RankShare(Sampler):
    """Rank ``rank``'s share of ``sampler``'s indices: every ``world_size``-th one from ``rank`` on.
    For a sampler that draws the same indices on every rank (its generator seeded alike), so the
    shares are disjoint; its length must be a multiple of ``world_size``, so the shares are equal."""

    def __init__(self, sampler, world):
        if len(sampler) % world.size:
            raise ValueError(f"RankShare: {len(sampler)} samples cannot be shared evenly by {world.size} ranks")
        self.sampler = sampler
        self.world = world

    def __iter__(self):
        for i, index in enumerate(self.sampler):
            if i % self.world.size == self.world.rank:
                yield index

    def __len__(self):
        return len(self.sampler) // self.world.size
