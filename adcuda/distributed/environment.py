"""What the environment says about this process's place in a job: the launcher's variables
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``) and, where a job was started by ``mpiexec``/``mpirun``
directly, the ones each MPI implementation sets for its processes."""

import os

# Checked in order; the first one present wins.
_LOCAL_RANK_VARIABLES = (
    "LOCAL_RANK",
    "MPI_LOCALRANKID",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMIX_LOCAL_RANK",
    "SLURM_LOCALID",
)
_RANK_VARIABLES = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
_WORLD_SIZE_VARIABLES = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")


def _first_int(names):
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value), name
            except ValueError:
                raise ValueError(f"environment variable {name}={value!r} is not an integer") from None
    return None, None


def local_rank():
    """This process's index among the job's processes on this machine, or None if nothing says."""
    return _first_int(_LOCAL_RANK_VARIABLES)[0]


def rank_and_world_size():
    """``((rank, variable), (world_size, variable))`` as the environment gives them (None where absent)."""
    return _first_int(_RANK_VARIABLES), _first_int(_WORLD_SIZE_VARIABLES)
