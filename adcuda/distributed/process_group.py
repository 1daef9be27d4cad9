"""The default process group and the collectives on tensors, with ``torch.distributed``'s names.

Rank and world size come from MPI (every rank is an MPI process, started by ``mpirun -n N`` or
``python -m adcuda.distributed.launch``). Collectives work in place on the tensor: the transport
reads and writes its memory directly where it is contiguous and in a dtype the transport reduces;
otherwise through a contiguous copy written back when the collective completes. Every collective
returns a ``Work`` internally; ``async_op=True`` hands it to the caller.
"""

from __future__ import annotations

import datetime
import enum
import pickle
from typing import TYPE_CHECKING

from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..errors import DeviceError, DTypeError, ShapeError, fmt_shape
from ..factories import empty
from ..factories import tensor as make_tensor
from ..ops.optim import _foreach_copy_, _foreach_increment_version_
from ..tensor import Tensor
from . import environment
from .backends import mpi, nccl
from .errors import DistributedError

if TYPE_CHECKING:
    from ..types import Any, Callable, Device, Number, Sequence

# PyTorch's default: long enough for a slow first step, finite so that a dead rank is noticed.
default_pg_timeout = datetime.timedelta(minutes=30)


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"

    def __repr__(self):
        return f"<ReduceOp.{self.name}>"


class Work:
    """A collective in flight: ``wait()`` blocks until it is done (at most the group's timeout, or
    ``timeout``) and then finishes it (copies results back into the tensors); ``is_completed()`` polls."""

    def __init__(
        self, group: _Group, request: Any, what: str | Callable[[], str], finish: Callable[[], None] | None = None
    ) -> None:
        self._group = group
        self._request = request
        self._what = what  # a string, or a function making it (formatted only if the wait fails)
        self._finish = finish
        self._done = False

    def is_completed(self) -> bool:
        return self._done or self._group.backend.test(self._request)

    def wait(self, timeout: datetime.timedelta | float | None = None) -> bool:
        if not self._done:
            timeout_s = None if timeout is None else _seconds(timeout)
            self._group.backend.wait(self._request, self._what, timeout_s)
            self._done = True
            finish, self._finish = self._finish, None
            if finish is not None:
                finish()
        return True


class _Group:
    def __init__(self, backend, timeout_s):
        self.backend = backend
        self.rank = backend.rank
        self.world_size = backend.world_size
        self.timeout_s = timeout_s


_default = None


def _seconds(timeout):
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    else:
        seconds = float(timeout)
    if not seconds > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return seconds


def is_available() -> bool:
    """Whether some backend can start here (mpi4py imports, or NCCL and a GPU are there)."""
    return is_mpi_available() or is_nccl_available()


def is_mpi_available() -> bool:
    return mpi.is_available()


def is_nccl_available() -> bool:
    return nccl.is_available()


def is_initialized() -> bool:
    return _default is not None


def init_process_group(
    backend: str | None = None,
    init_method: str | None = None,
    timeout: datetime.timedelta | None = None,
    world_size: int = -1,
    rank: int = -1,
    store: Any = None,
    group_name: str = "",
    pg_options: Any = None,
    device_id: Device | int | None = None,
) -> None:
    """Join the default process group. ``backend``: ``"mpi"`` (CPU tensors) or ``"nccl"`` (CUDA
    tensors); None picks NCCL where it can run and MPI otherwise. Rank and world size are MPI's;
    ``rank``/``world_size`` (or the launcher's ``RANK``/``WORLD_SIZE``), when given, must agree."""
    global _default
    if _default is not None:
        raise DistributedError(
            "init_process_group: the default process group is already initialized; call destroy_process_group() first"
        )
    if store is not None:
        raise DistributedError("init_process_group: stores are not supported: the ranks meet through MPI")
    if init_method not in (None, "env://"):
        raise ValueError(
            f"init_process_group: init_method {init_method!r} is not supported: the ranks meet "
            "through MPI (leave it None, or 'env://')"
        )
    timeout_s = _seconds(default_pg_timeout if timeout is None else timeout)
    name = _backend_name(backend)
    transport = mpi.MPIBackend(timeout_s) if name == "mpi" else nccl.NCCLBackend(timeout_s, device_id)
    try:
        _check_placement(transport, rank, world_size)
    except DistributedError:
        transport.close()
        raise
    _default = _Group(transport, timeout_s)


def _backend_name(backend):
    if backend is None:
        return "nccl" if is_nccl_available() else "mpi"
    name = str(backend).lower()
    if name not in ("mpi", "nccl"):
        raise ValueError(f"init_process_group: unknown backend {backend!r} (expected 'mpi' or 'nccl')")
    return name


def _check_placement(transport, rank, world_size):
    """The caller's and the launcher's idea of rank and world size must match what MPI started."""
    (env_rank, rank_var), (env_size, size_var) = environment.rank_and_world_size()
    where = f"MPI started this process as rank {transport.rank} of {transport.world_size}"
    hint = "start every rank with mpirun -n N or python -m adcuda.distributed.launch --nproc-per-node N"
    for given, actual, what in ((world_size, transport.world_size, "world_size"), (rank, transport.rank, "rank")):
        if given is not None and given != -1 and given != actual:
            raise DistributedError(f"init_process_group: {what}={given} was given, but {where}; {hint}")
    if env_size is not None and env_size != transport.world_size:
        raise DistributedError(f"init_process_group: {size_var}={env_size} in the environment, but {where}; {hint}")
    if env_rank is not None and env_rank != transport.rank:
        raise DistributedError(f"init_process_group: {rank_var}={env_rank} in the environment, but {where}; {hint}")


def destroy_process_group(group: Any = None) -> None:
    global _default
    _check_group("destroy_process_group", group)
    if _default is None:
        raise DistributedError("destroy_process_group: the default process group is not initialized")
    group, _default = _default, None
    group.backend.close()


def _current(op, group=None):
    _check_group(op, group)
    if _default is None:
        raise DistributedError(
            f"{op}: the default process group has not been initialized; call "
            "adcuda.distributed.init_process_group() first"
        )
    return _default


def _check_group(op, group):
    if group is not None and group is not GroupMember.WORLD:
        raise DistributedError(f"{op}: only the default group (group=None) is supported")


class GroupMember:
    """``group=GroupMember.WORLD`` names the default group, as in PyTorch."""

    WORLD = object()


def get_rank(group: Any = None) -> int:
    return _current("get_rank", group).rank


def get_world_size(group: Any = None) -> int:
    return _current("get_world_size", group).world_size


def get_backend(group: Any = None) -> str:
    return _current("get_backend", group).backend.name


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """This process's index on its machine (``LOCAL_RANK``, or what ``mpiexec`` set), else
    ``fallback_rank``; PyTorch's name."""
    local = environment.local_rank()
    if local is not None:
        return local
    if fallback_rank is not None:
        return int(fallback_rank)
    raise DistributedError(
        "get_node_local_rank: neither LOCAL_RANK nor an MPI launcher's local rank is set, "
        "and no fallback_rank was given"
    )


# ---------------------------------------------------------------------------------------------- collectives
def _check_tensor(op, tensor, group):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected an adcuda Tensor, got {type(tensor).__name__}")
    wanted = "cpu" if group.backend.name == "mpi" else "cuda"
    if tensor.device.type != wanted:
        other = "nccl" if wanted == "cpu" else "mpi"
        raise DeviceError(
            f"{op}: the {group.backend.name} backend works on {wanted} tensors, got a tensor on "
            f"{tensor.device} (use backend='{other}' for {tensor.device.type} tensors)"
        )


def _run(work, async_op):
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Work | None:
    """Reduce ``tensor`` across all ranks, in place: every rank ends with the same result."""
    g = _current("all_reduce", group)
    _check_tensor("all_reduce", tensor, g)
    op = _reduce_op(op)
    dtype = tensor.dtype
    if op is ReduceOp.AVG and not dtype.is_floating_point:
        raise DTypeError(f"all_reduce: ReduceOp.AVG needs a floating point tensor, got {dtype}")
    data = tensor.detach()  # the same memory and version counter, outside any graph
    wire = _wire(data, g.backend.wire_dtype(dtype))
    transport_op = _BOOL_OPS[op] if dtype is dt.bool_ else ("sum" if op is ReduceOp.AVG else op.value)
    request = g.backend.all_reduce(wire, transport_op)

    def finish():
        with no_grad():
            _written_by_transport(data, wire)
            if op is ReduceOp.AVG and g.world_size > 1:
                wire.div_(float(g.world_size))
            if wire is not data:
                data.copy_(wire)

    return _run(Work(g, request, lambda: f"all_reduce({_describe(tensor)})", finish), async_op)


def _written_by_transport(data, wire):
    """The transport wrote the tensor's memory itself when ``wire`` is the tensor: count that write in
    its version counter (a copy back through ``copy_`` counts itself)."""
    if wire is data:
        _foreach_increment_version_([data])


def _wire(data, wire_dtype):
    """``data`` itself where the transport can use its memory as it is, else a contiguous copy in
    ``wire_dtype``."""
    if data.dtype is not wire_dtype:
        data = data.to(dtype=wire_dtype)
    return data.contiguous()


# bool tensors reduce as 0/1 integers: a sum or a max is "any", a min or a product is "all"
_BOOL_OPS = {ReduceOp.SUM: "max", ReduceOp.MAX: "max", ReduceOp.MIN: "min", ReduceOp.PRODUCT: "min"}


def _reduce_op(op):
    if isinstance(op, ReduceOp):
        return op
    try:
        return ReduceOp[str(op).upper()]
    except KeyError:
        raise ValueError(
            f"all_reduce: unknown reduce op {op!r} (expected one of "
            f"{', '.join('ReduceOp.' + o.name for o in ReduceOp)})"
        ) from None


def _describe(tensor):
    return f"{tensor.dtype} tensor of shape {fmt_shape(tensor.shape)}"


def _check_src(op, src, g):
    if not isinstance(src, int) or not 0 <= src < g.world_size:
        raise ValueError(f"{op}: src={src!r} is not a rank of this group (world size {g.world_size})")


def broadcast(tensor: Tensor, src: int, group: Any = None, async_op: bool = False) -> Work | None:
    """Overwrite ``tensor`` on every rank with rank ``src``'s."""
    g = _current("broadcast", group)
    _check_tensor("broadcast", tensor, g)
    _check_src("broadcast", src, g)
    data = tensor.detach()
    wire = _wire(data, data.dtype)
    request = g.backend.broadcast(wire, src)

    def finish():
        with no_grad():
            _written_by_transport(data, wire)
            if wire is not data:
                data.copy_(wire)

    return _run(Work(g, request, lambda: f"broadcast({_describe(tensor)}, src={src})", finish), async_op)


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: Any = None, async_op: bool = False) -> Work | None:
    """``tensor_list[r]`` receives rank ``r``'s ``tensor`` (same shape and dtype on every rank)."""
    g = _current("all_gather", group)
    _check_tensor("all_gather", tensor, g)
    tensor_list = list(tensor_list)
    if len(tensor_list) != g.world_size:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors but the world size is {g.world_size}")
    for i, out in enumerate(tensor_list):
        _check_tensor("all_gather", out, g)
        if tuple(out.shape) != tuple(tensor.shape) or out.dtype is not tensor.dtype:
            raise ShapeError(
                f"all_gather: tensor_list[{i}] is a {_describe(out)} but the input is a {_describe(tensor)}"
            )
    data = tensor.detach()
    gathered = empty((g.world_size,) + tuple(tensor.shape), dtype=tensor.dtype, device=tensor.device)
    request = g.backend.all_gather(gathered, _wire(data, data.dtype))

    def finish():
        with no_grad():
            _foreach_copy_([out.detach() for out in tensor_list], list(gathered.unbind(0)))

    return _run(Work(g, request, lambda: f"all_gather({_describe(tensor)})", finish), async_op)


def barrier(group: Any = None, async_op: bool = False, device_ids: Sequence[int] | None = None) -> Work | None:
    g = _current("barrier", group)
    return _run(Work(g, g.backend.barrier(), "barrier"), async_op)


def all_gather_object(object_list: list[Any], obj: Any, group: Any = None) -> None:
    """``object_list[r]`` becomes rank ``r``'s ``obj`` (any picklable object). Pickle runs code when it
    loads: exchange objects only between your own ranks, as here."""
    g = _current("all_gather_object", group)
    if len(object_list) != g.world_size:
        raise ValueError(
            f"all_gather_object: object_list has {len(object_list)} entries but the world size is {g.world_size}"
        )
    blobs = g.backend.all_gather_bytes(pickle.dumps(obj), "all_gather_object")
    object_list[:] = [pickle.loads(b) for b in blobs]


def broadcast_object_list(object_list: list[Any], src: int = 0, group: Any = None) -> None:
    """Replace ``object_list``'s entries on every rank by rank ``src``'s (picklable objects)."""
    g = _current("broadcast_object_list", group)
    _check_src("broadcast_object_list", src, g)
    payload = pickle.dumps(list(object_list)) if g.rank == src else b""
    blobs = g.backend.all_gather_bytes(payload, f"broadcast_object_list(src={src})")
    received = pickle.loads(blobs[src])
    if len(received) != len(object_list):
        raise ValueError(
            f"broadcast_object_list: rank {src} sent {len(received)} objects but this rank's list "
            f"has {len(object_list)} entries"
        )
    object_list[:] = received


def all_reduce_found_inf(found_inf: Tensor | Number, group: Any = None) -> Tensor | bool:
    """Agree across ranks on whether a gradient overflowed (for mixed precision with a GradScaler):
    True on every rank if it is true on any. ``found_inf`` is a bool, a number or a tensor (reduced
    in place with MAX, and returned). After DistributedDataParallel's all-reduce the gradients are
    the same on every rank, so their found-inf agrees already; use this for gradients reduced
    another way, or skipped by ``no_sync()``, so that every rank skips the same steps."""
    g = _current("all_reduce_found_inf", group)
    if isinstance(found_inf, Tensor):
        all_reduce(found_inf, ReduceOp.MAX)
        return found_inf
    device = "cpu" if g.backend.name == "mpi" else "cuda"
    flag = make_tensor([1.0 if found_inf else 0.0], device=device)
    all_reduce(flag, ReduceOp.MAX)
    return bool(flag.item())
