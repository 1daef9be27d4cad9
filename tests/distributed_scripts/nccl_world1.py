"""The NCCL backend in a world of one process (a GPU machine with CuPy's NCCL bindings): its
collectives on device arrays, then, where adcuda has CUDA tensors, the process group and a
DistributedDataParallel training step on them. Exits non-zero on any mismatch."""

import datetime

import cupy

import adcuda
import adcuda.distributed as dist
from adcuda.distributed.backends.nccl import NCCLBackend


def backend_collectives():
    backend = NCCLBackend(timeout_s=60.0)
    assert (backend.rank, backend.world_size) == (0, 1)
    values = cupy.arange(7, dtype=cupy.float32)
    backend.wait(backend.all_reduce(values, "sum"), "all_reduce")
    assert bool((values == cupy.arange(7, dtype=cupy.float32)).all())
    halves = cupy.ones(5, dtype=cupy.float16)
    backend.wait(backend.all_reduce(halves, "max"), "all_reduce")
    assert bool((halves == 1).all())
    backend.wait(backend.broadcast(values, 0), "broadcast")
    gathered = cupy.zeros((1, 7), dtype=cupy.float32)
    backend.wait(backend.all_gather(gathered, values), "all_gather")
    assert bool((gathered[0] == values).all())
    backend.wait(backend.barrier(), "barrier")
    assert backend.all_gather_bytes(b"id", "objects") == [b"id"]
    backend.close()
    print("NCCL backend collectives on CuPy arrays: ok")


def training_on_cuda_tensors():
    try:
        adcuda.ones(1, device="cuda")
    except adcuda.DeviceError as e:
        print(f"adcuda CUDA tensors are not available, the process group part is not run: {e}")
        return
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=60))
    t = adcuda.full((3,), 2.0, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert t.cpu().tolist() == [2.0, 2.0, 2.0]
    model = adcuda.nn.Linear(4, 2).cuda()
    ddp = adcuda.nn.parallel.DistributedDataParallel(model)
    ddp(adcuda.ones(3, 4, device="cuda")).sum().backward()
    assert model.weight.grad is not None and model.weight.grad.cpu().tolist() == [[3.0] * 4] * 2
    dist.destroy_process_group()
    print("NCCL process group and DDP on CUDA tensors: ok")


if __name__ == "__main__":
    backend_collectives()
    training_on_cuda_tensors()
