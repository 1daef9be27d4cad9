"""Run under ``mpiexec -n 2``: DistributedDataParallel and the collectives, checked against one process.

``ddp_scenarios.py OUT_DIR [SCENARIO ...]``: each rank writes ``OUT_DIR/rank<r>.json`` (``{"rank": r,
"results": {...}}``, the measured differences and the observed errors); tests/test_distributed.py
asserts on them. Every rank builds its model from its
own seed (rank 1's differs) so that equality at the end also shows the broadcast from rank 0.
"""

import datetime
import json
import os
import sys

import numpy as np

import adcuda
import adcuda.distributed as dist
from adcuda import nn
from adcuda.nn.parallel import DistributedDataParallel as DDP

BATCH, IN, HIDDEN, OUT = 8, 5, 7, 3
STEPS = 4


class Net(nn.Module):
    def __init__(self, unused_branch=False):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, OUT)
        if unused_branch:
            self.spare = nn.Linear(IN, OUT)
        self.register_buffer("calls", adcuda.zeros(()))

    def forward(self, x):
        return self.fc2(adcuda.tanh(self.fc1(x)))


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((STEPS, BATCH, IN)).astype(np.float32)
    y = rng.standard_normal((STEPS, BATCH, OUT)).astype(np.float32)
    return adcuda.tensor(x), adcuda.tensor(y)


def seed_of(rank):
    return 1 + rank


def make_net(seed, **kwargs):
    adcuda.manual_seed(seed)
    return Net(**kwargs)


def reference(steps_of, **kwargs):
    """One process, the whole batch: the run DDP must reproduce."""
    net = make_net(seed_of(0), **kwargs)
    opt = adcuda.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x, y = data()
    for step in range(STEPS):
        opt.zero_grad()
        steps_of(net, x[step], y[step])
        opt.step()
    return net


def full_batch_step(net, x, y):
    nn.functional.mse_loss(net(x), y).backward()


def max_diff(a, b):
    return float(np.max(np.abs(a.detach().numpy().astype(np.float64) - b.detach().numpy().astype(np.float64))))


def params_of(module):
    return [p for _, p in sorted(module.named_parameters())]


def difference_across_ranks(module):
    """Largest difference between this rank's parameters and rank 0's."""
    across = 0.0
    for p in params_of(module):
        gathered = [adcuda.zeros_like(p) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, p.detach())
        across = max(across, max(max_diff(g, gathered[0]) for g in gathered))
    return across


def compare(ddp, ref):
    """Largest difference to the reference, and to rank 0's parameters."""
    to_reference = max(max_diff(p, q) for p, q in zip(params_of(ddp.module), params_of(ref)))
    return {"to_reference": to_reference, "across_ranks": difference_across_ranks(ddp.module)}


def half_batch(rank, world):
    per = BATCH // world
    return slice(rank * per, (rank + 1) * per)


def train_on_this_ranks_part(ddp):
    """STEPS steps of SGD, this rank on its part of each batch."""
    opt = adcuda.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    x, y = data()
    part = half_batch(dist.get_rank(), dist.get_world_size())
    for step in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x[step][part]), y[step][part]).backward()
        opt.step()


def train_ddp(**ddp_kwargs):
    ddp = DDP(make_net(seed_of(dist.get_rank())), **ddp_kwargs)
    train_on_this_ranks_part(ddp)
    return compare(ddp, reference(full_batch_step))


def train_no_sync():
    """Two micro-batches per rank, the first under no_sync(): the same as one full batch."""
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp = DDP(make_net(seed_of(rank)))
    opt = adcuda.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    x, y = data()
    part = half_batch(rank, world)
    rows = list(range(BATCH))[part]
    micro = [slice(rows[0], rows[0] + len(rows) // 2), slice(rows[0] + len(rows) // 2, rows[-1] + 1)]
    synced_before_last = []
    for step in range(STEPS):
        opt.zero_grad()
        with ddp.no_sync():
            (nn.functional.mse_loss(ddp(x[step][micro[0]]), y[step][micro[0]]) / 2).backward()
        gathered = [adcuda.zeros_like(ddp.module.fc1.weight) for _ in range(world)]
        dist.all_gather(gathered, ddp.module.fc1.weight.grad)
        synced_before_last.append(max_diff(gathered[0], gathered[1]))
        (nn.functional.mse_loss(ddp(x[step][micro[1]]), y[step][micro[1]]) / 2).backward()
        opt.step()
    result = compare(ddp, reference(full_batch_step))
    # under no_sync the ranks' gradients stay local, so they differ (their data does)
    result["local_grad_difference_under_no_sync"] = min(synced_before_last)
    return result


def train_unused():
    """find_unused_parameters=True with a branch no rank uses: its gradient stays None everywhere."""
    ddp = DDP(make_net(seed_of(dist.get_rank()), unused_branch=True), find_unused_parameters=True, bucket_cap_mb=1e-4)
    train_on_this_ranks_part(ddp)
    result = compare(ddp, reference(full_batch_step, unused_branch=True))
    result["spare_grad_is_none"] = ddp.module.spare.weight.grad is None
    return result


def unused_without_flag():
    """An unused parameter without find_unused_parameters: the next forward says which one."""
    rank = dist.get_rank()
    ddp = DDP(make_net(seed_of(rank), unused_branch=True))
    x, y = data()
    nn.functional.mse_loss(ddp(x[0]), y[0]).backward()
    try:
        ddp(x[0])
    except dist.DistributedError as e:
        return str(e)
    return None


def half_precision_master_weights():
    """float16 parameters with fp32 master weights: gradients reduced in fp32, ranks identical."""
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp = DDP(make_net(seed_of(rank)).half())
    opt = adcuda.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9, master_weights=True)
    x, y = data()
    part = half_batch(rank, world)
    for step in range(STEPS):
        opt.zero_grad()
        out = ddp(x[step][part].half()).float()
        nn.functional.mse_loss(out, y[step][part]).backward()
        opt.step()
    ref = make_net(seed_of(0)).half()
    ref_opt = adcuda.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, master_weights=True)
    for step in range(STEPS):
        ref_opt.zero_grad()
        nn.functional.mse_loss(ref(x[step].half()).float(), y[step]).backward()
        ref_opt.step()
    result = compare(ddp, ref)
    result["dtype"] = str(ddp.module.fc1.weight.grad.dtype)
    return result


def overflow_agrees():
    """An inf in one rank's gradient reaches every rank's averaged gradient (so a GradScaler skips the
    step everywhere), and all_reduce_found_inf agrees on a local flag."""
    rank = dist.get_rank()
    ddp = DDP(make_net(seed_of(rank)))
    x, y = data()
    scale = float("inf") if rank == 1 else 1.0
    (nn.functional.mse_loss(ddp(x[0]), y[0]) * scale).backward()
    finite = all(bool(adcuda.isfinite(p.grad).all()) for p in ddp.parameters())
    return {"grads_finite": finite, "found_inf_agreed": dist.all_reduce_found_inf(rank == 1)}


def grad_scaler_skips_together():
    """float16 + master weights + GradScaler: an overflow on rank 1 only makes every rank skip that
    step and back off the same way (the averaged gradients carry the inf to every rank)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp = DDP(make_net(seed_of(rank)).half())
    opt = adcuda.optim.SGD(ddp.parameters(), lr=0.1, master_weights=True)
    scaler = adcuda.amp.GradScaler(init_scale=1024.0)
    x, y = data()
    part = half_batch(rank, world)
    stepped, scales = [], []
    for step in range(STEPS):
        opt.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[step][part].half()).float(), y[step][part])
        if step == 1 and rank == 1:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        stepped.append(scaler.step(opt))
        scaler.update()
        scales.append(scaler.get_scale())
    return {"stepped": stepped, "scales": scales, "across_ranks": difference_across_ranks(ddp.module)}


def mismatched_shapes():
    rank = dist.get_rank()
    adcuda.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3 + rank), nn.Linear(3 + rank, 2))
    try:
        DDP(model)
    except dist.DistributedError as e:
        return str(e)
    return None


def collectives():
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    t = adcuda.full((2, 3), float(rank + 1))
    dist.all_reduce(t)
    out["sum"] = t.tolist()
    t = adcuda.full((2, 3), float(rank + 1))
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    out["avg"] = t.tolist()
    for op in ("MAX", "MIN", "PRODUCT"):
        t = adcuda.tensor([rank + 2, -rank], dtype=adcuda.int64)
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        out[op.lower()] = t.tolist()
    base = adcuda.arange(6.0).reshape(2, 3) * (rank + 1)
    view = base.t()  # not contiguous: reduced through a copy, written back in place
    dist.all_reduce(view)
    out["non_contiguous"] = base.tolist()
    h = adcuda.tensor([0.5, 1.5], dtype=adcuda.float16) * (rank + 1)
    dist.all_reduce(h)
    out["float16"] = [h.tolist(), str(h.dtype)]
    flags = adcuda.tensor([rank == 0, False])
    dist.all_reduce(flags)
    out["bool_any"] = flags.tolist()
    work = dist.all_reduce(adcuda.ones(3), async_op=True)
    out["async_wait"] = work.wait()
    b = adcuda.full((3,), float(rank))
    dist.broadcast(b, src=world - 1)
    out["broadcast"] = b.tolist()
    gathered = [adcuda.zeros(2, dtype=adcuda.int64) for _ in range(world)]
    dist.all_gather(gathered, adcuda.tensor([rank, 10 * rank]))
    out["all_gather"] = [g.tolist() for g in gathered]
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    out["all_gather_object"] = objects
    dist.barrier()
    try:
        dist.all_reduce(adcuda.ones(2, dtype=adcuda.int64), op=dist.ReduceOp.AVG)
    except adcuda.DTypeError as e:
        out["avg_int_error"] = str(e)
    return out


SCENARIOS = {
    "collectives": collectives,
    "train": lambda: train_ddp(),
    "train_small_buckets": lambda: train_ddp(bucket_cap_mb=1e-4),
    "no_sync": train_no_sync,
    "unused": train_unused,
    "unused_without_flag": unused_without_flag,
    "half_master_weights": half_precision_master_weights,
    "overflow": overflow_agrees,
    "grad_scaler": grad_scaler_skips_together,
    "mismatched_shapes": mismatched_shapes,
}


def main():
    dist.init_process_group("mpi", timeout=datetime.timedelta(seconds=20))
    out_dir, names = sys.argv[1], sys.argv[2:] or list(SCENARIOS)
    results = {name: SCENARIOS[name]() for name in names}
    rank = dist.get_rank()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world_size": dist.get_world_size(), "results": results}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
