"""The NCCL transport for CUDA tensors, through CuPy's ``cupy.cuda.nccl`` bindings (imported only
when a group asks for NCCL).

Start-up goes through MPI: rank 0 makes NCCL's unique id and every rank receives it over MPI, which
also gives rank and world size and carries small objects (DDP's shape check). A world of one
process needs no MPI. Each collective runs on a communication stream of its own, after the work
already queued on the compute stream (CuPy's current stream), so that it overlaps later compute;
its completion is an event that ``wait`` polls until the group's timeout, then aborts the NCCL
communicator (which frees the GPU from the stuck kernel) and raises.

Tensors are read through ``__cuda_array_interface__`` (pointer, shape, type), so anything that
exposes it (adcuda's CUDA tensors, CuPy arrays) can be reduced in place.
"""

import pickle
import time

from ... import cuda
from ...errors import DeviceError
from .. import environment
from ..errors import DistributedError
from . import mpi


def _import_nccl():
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as e:
        raise DeviceError(
            "init_process_group('nccl'): NCCL is used through CuPy's bindings, which could not be "
            f"imported ({e}); pip install 'adcuda[cuda]' and NCCL (nvidia-nccl-cu13)"
        ) from None
    if not getattr(nccl, "available", True):
        raise DeviceError(
            "init_process_group('nccl'): CuPy is installed but found no NCCL library; "
            "pip install nvidia-nccl-cu13 (or your CUDA version's NCCL)"
        )
    return cupy, nccl


def _require_cuda():
    if not cuda.is_available():
        raise DeviceError(
            f"init_process_group('nccl'): CUDA is not usable here ({cuda.unavailable_reason()}); "
            "NCCL needs one GPU per rank: use backend='mpi' for CPU tensors"
        )
    return cuda


def is_available():
    try:
        _require_cuda()
        _import_nccl()
    except DeviceError:
        return False
    return True


class _Request:
    """A collective queued on the communication stream: done when its event is."""

    __slots__ = ("event", "tensors")

    def __init__(self, event, tensors):
        self.event = event
        self.tensors = tensors  # kept alive until the collective has read and written them


class NCCLBackend:
    name = "nccl"

    def __init__(self, timeout_s, device_id=None):
        cuda = _require_cuda()
        self._cupy, self._nccl = _import_nccl()
        nccl = self._nccl
        self.timeout_s = timeout_s
        self.failure = None
        self._mpi = _mpi_if_available(timeout_s)
        if self._mpi is not None:
            self.rank, self.world_size = self._mpi.rank, self._mpi.world_size
        else:
            (rank, _), (size, _) = environment.rank_and_world_size()
            self.rank, self.world_size = rank or 0, size or 1
            if self.world_size > 1:
                raise DistributedError(
                    f"init_process_group('nccl'): a world of {self.world_size} processes needs "
                    "mpi4py to share NCCL's unique id: pip install 'adcuda[distributed]'"
                )
        self.device_index = self._pick_device(cuda, device_id)
        self._types = {
            "<f2": nccl.NCCL_FLOAT16,
            "<f4": nccl.NCCL_FLOAT32,
            "<f8": nccl.NCCL_FLOAT64,
            "<i4": nccl.NCCL_INT32,
            "<i8": nccl.NCCL_INT64,
            "|b1": nccl.NCCL_UINT8,
            "|u1": nccl.NCCL_UINT8,
        }
        self._ops = {"sum": nccl.NCCL_SUM, "product": nccl.NCCL_PROD, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}
        with self._cupy.cuda.Device(self.device_index):
            unique_id = nccl.get_unique_id() if self.rank == 0 else None
            if self._mpi is not None:
                blobs = self._mpi.all_gather_bytes(pickle.dumps(unique_id), "init_process_group('nccl')")
                unique_id = pickle.loads(blobs[0])
            self._comm = nccl.NcclCommunicator(self.world_size, unique_id, self.rank)
            self._stream = self._cupy.cuda.Stream(non_blocking=True)

    def _pick_device(self, cuda, device_id):
        """``device_id`` if given, else the local rank's GPU (the launcher shows each rank one GPU)."""
        count = cuda.device_count()
        if device_id is not None:
            index = device_id if isinstance(device_id, int) else (getattr(device_id, "index", None) or 0)
        else:
            index = environment.local_rank() or 0
            index %= count
        if not 0 <= index < count:
            raise DeviceError(f"init_process_group('nccl'): device cuda:{index} does not exist ({count} visible)")
        cuda.set_device(index)
        return index

    def wire_dtype(self, dtype):
        return dtype

    # ------------------------------------------------------------------ collectives on CUDA tensors
    def _pointer_count_type(self, tensor):
        interface = tensor.__cuda_tensor_interface__
        count = 1
        for s in interface["shape"]:
            count *= s
        typestr = interface["typestr"]
        if typestr not in self._types:
            raise DistributedError(f"nccl: no NCCL type for tensors of type {typestr!r}")
        return interface["data"][0], count, self._types[typestr]

    def _launch(self, call, tensors):
        self._check_usable()
        cupy = self._cupy
        with cupy.cuda.Device(self.device_index):
            ready = cupy.cuda.Event(disable_timing=True)
            ready.record(cupy.cuda.get_current_stream())
            self._stream.wait_event(ready)
            call(self._stream.ptr)
            done = cupy.cuda.Event(disable_timing=True)
            done.record(self._stream)
        return _Request(done, tensors)

    def all_reduce(self, tensor, op):
        ptr, count, kind = self._pointer_count_type(tensor)
        return self._launch(lambda s: self._comm.allReduce(ptr, ptr, count, kind, self._ops[op], s), (tensor,))

    def broadcast(self, tensor, src):
        ptr, count, kind = self._pointer_count_type(tensor)
        return self._launch(lambda s: self._comm.broadcast(ptr, ptr, count, kind, src, s), (tensor,))

    def all_gather(self, out, tensor):
        send, count, kind = self._pointer_count_type(tensor)
        receive = self._pointer_count_type(out)[0]
        return self._launch(lambda s: self._comm.allGather(send, receive, count, kind, s), (out, tensor))

    def barrier(self):
        if self._mpi is not None:
            return self._mpi.barrier()
        return self._launch(lambda s: None, ())

    def all_gather_bytes(self, data, what):
        if self._mpi is not None:
            return self._mpi.all_gather_bytes(data, what)
        return [bytes(data)]

    # ------------------------------------------------------------------ waiting, within the timeout
    def test(self, request):
        if isinstance(request, _Request):
            return request.event.done
        return self._mpi.test(request)

    def wait(self, request, what, timeout_s=None):
        if not isinstance(request, _Request):
            return self._mpi.wait(request, what, timeout_s)
        try:
            if self._mpi is not None:
                self._mpi.wait_for(lambda: request.event.done, what, timeout_s)
            else:
                self._wait_alone(request, what, timeout_s)
        except DistributedError as e:
            self.failure = str(e)
            self._comm.abort()
            raise

    def _wait_alone(self, request, what, timeout_s):
        self._check_usable()
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while not request.event.done:
            if time.monotonic() > deadline:
                what = what() if callable(what) else what
                raise DistributedError(f"{what}: NCCL did not finish within {timeout_s:g} s")
            time.sleep(1e-4)

    def _check_usable(self):
        if self.failure is not None:
            raise DistributedError(
                f"the process group failed earlier ({self.failure}); no collective can run on it any more"
            )

    def close(self):
        if self.failure is None:
            self._stream.synchronize()
            self._comm.destroy()
        if self._mpi is not None:
            self._mpi.close()


def _mpi_if_available(timeout_s):
    if not mpi.is_available():
        return None
    return mpi.MPIBackend(timeout_s)
