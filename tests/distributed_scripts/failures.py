"""Run under ``mpiexec -n 2`` or the launcher: ``failures.py MODE OUT_DIR``.

- ``placement``: each rank writes what the launcher told it (environment, argv, __name__) and exits.
- ``stop``: rank 1 stops answering (SIGSTOP) before a barrier; rank 0 must time out and name it.
- ``kill``: rank 1 is killed (SIGKILL) in the middle of DDP training; rank 0 must not hang.
- ``raise``: rank 1 raises; the job must end at once, long before the collectives' timeout.
"""

import datetime
import json
import os
import signal
import sys
import time

import adcuda
import adcuda.distributed as dist
from adcuda import nn

STOP_TIMEOUT_S = 2
LONG_TIMEOUT_S = 60


def placement(out_dir):
    rank = int(os.environ["RANK"])
    keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"env": {k: os.environ.get(k) for k in keys}, "argv": sys.argv, "name": __name__}, f)


def stop():
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=STOP_TIMEOUT_S))
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
    dist.barrier()


def kill():
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=LONG_TIMEOUT_S))
    rank = dist.get_rank()
    model = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
    opt = adcuda.optim.SGD(model.parameters(), lr=0.1)
    for step in range(100):
        if rank == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        model(adcuda.ones(3, 4)).sum().backward()
        opt.step()
        time.sleep(0.01)


def raise_on_rank1():
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=LONG_TIMEOUT_S))
    if dist.get_rank() == 1:
        raise RuntimeError("rank 1 failed on purpose")
    dist.barrier()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "placement":
        placement(sys.argv[2])
    else:
        {"stop": stop, "kill": kill, "raise": raise_on_rank1}[mode]()
