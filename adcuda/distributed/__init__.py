"""``adcuda.distributed``: data parallelism across processes, with ``torch.distributed``'s names.

Transports are existing engines, never our own: MPI (mpi4py) for CPU tensors and for start-up, NCCL
(CuPy's bindings) for CUDA tensors. Start the ranks with ``mpirun -n N python train.py`` or
``python -m adcuda.distributed.launch --nproc-per-node N train.py``, then::

    import adcuda.distributed as dist
    dist.init_process_group("mpi")          # or "nccl" on GPUs
    model = adcuda.nn.parallel.DistributedDataParallel(model)

Every collective waits at most the group's ``timeout``: a rank that died or stopped answering
makes the others raise ``DistributedError`` naming it, instead of hanging.
"""

from .errors import DistributedError
from .process_group import (
    GroupMember,
    ReduceOp,
    Work,
    all_gather,
    all_gather_object,
    all_reduce,
    all_reduce_found_inf,
    barrier,
    broadcast,
    broadcast_object_list,
    default_pg_timeout,
    destroy_process_group,
    get_backend,
    get_node_local_rank,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
)

__all__ = [
    "DistributedError",
    "GroupMember",
    "ReduceOp",
    "Work",
    "all_gather",
    "all_gather_object",
    "all_reduce",
    "all_reduce_found_inf",
    "barrier",
    "broadcast",
    "broadcast_object_list",
    "default_pg_timeout",
    "destroy_process_group",
    "get_backend",
    "get_node_local_rank",
    "get_rank",
    "get_world_size",
    "init_process_group",
    "is_available",
    "is_initialized",
    "is_mpi_available",
    "is_nccl_available",
]
