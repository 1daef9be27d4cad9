"""Data parallelism on the CPU: 1 vs 2 MPI processes (one BLAS thread each).

- Training step of an MLP 784-512-512-10 with DistributedDataParallel (forward, backward with the
  bucketed all-reduce, SGD step): the same global batch of 256 split over the ranks (strong
  scaling), and 256 per rank (weak scaling); plus the cost of the DDP wrapper in a world of one.
- all_reduce time: ``adcuda.distributed.all_reduce`` vs the raw mpi4py ``Allreduce`` it is built on,
  on the same buffers (the difference is adcuda's non-blocking, deadline-polled wait).
- Bucket overlap: from ``adcuda.profiler`` in one step, when each bucket's all-reduce starts relative
  to the backward ops (``--trace PATH`` also writes rank 0's Chrome trace of that step).

    python benchmarks/bench_distributed.py [--quick] [--trace step.json]

Needs mpi4py and an mpiexec (pip install 'adcuda[distributed]').
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import smoke  # noqa: E402

SIZES = (784, 512, 512, 10)
GLOBAL_BATCH = 256


# ---------------------------------------------------------------------------------------------- one rank
def _model_and_data(batch, seed_offset):
    import numpy as np

    import adcuda
    from adcuda import nn

    adcuda.manual_seed(0)
    layers = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    rng = np.random.default_rng(seed_offset)
    x = adcuda.tensor(rng.standard_normal((batch, SIZES[0])).astype(np.float32))
    y = adcuda.tensor(rng.integers(0, SIZES[-1], batch))
    return model, x, y


def _timed_rounds(step, rounds, steps_per_round):
    """Median seconds per step; every rank runs the same fixed counts (a collective per step); one step in
    a smoke run."""
    import adcuda.distributed as dist

    if smoke():
        rounds, steps_per_round = 1, 1
    for _ in range(3):
        step()
    times = []
    for _ in range(rounds):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps_per_round):
            step()
        times.append((time.perf_counter() - start) / steps_per_round)
    return statistics.median(times)


def _training_step(per_rank_batch, wrap):
    import adcuda
    import adcuda.distributed as dist
    from adcuda import nn

    model, x, y = _model_and_data(per_rank_batch, dist.get_rank())
    if wrap:
        model = nn.parallel.DistributedDataParallel(model)
    opt = adcuda.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step, model


def _all_reduce_times(rounds):
    import numpy as np
    from mpi4py import MPI

    import adcuda
    import adcuda.distributed as dist

    gradient_floats = sum(i * o + o for i, o in zip(SIZES[:-1], SIZES[1:]))
    out = {}
    for label, n in (
        ("4 KB", 1024),
        ("256 KB", 65536),
        (f"{gradient_floats * 4 / 2**20:.1f} MB (MLP grads)", gradient_floats),
    ):
        t = adcuda.ones(n)
        array = np.ones(n, np.float32)
        out[f"all_reduce {label}"] = {
            "adcuda": _timed_rounds(lambda t=t: dist.all_reduce(t), rounds, 20),
            "mpi4py": _timed_rounds(lambda array=array: MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, array), rounds, 20),
        }
    return out


def _overlap(trace_path):
    """When each bucket's all-reduce starts, in ms from the start of backward, and when backward ends."""
    import adcuda
    import adcuda.distributed as dist
    from adcuda import nn

    model, x, y = _model_and_data(GLOBAL_BATCH // dist.get_world_size(), dist.get_rank())
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.5)
    for _ in range(2):
        nn.functional.cross_entropy(ddp(x), y).backward()
    loss = nn.functional.cross_entropy(ddp(x), y)
    with adcuda.profiler.profile() as prof:
        loss.backward()
    if trace_path and dist.get_rank() == 0:
        prof.export_chrome_trace(trace_path)
    events = prof.events()
    backward = [e for e in events if e.kind == "backward"]
    begin = min(e.start_ns for e in backward)
    launches = sorted(
        (e.start_ns - begin) / 1e6 for e in events if e.name.startswith("DistributedDataParallel.all_reduce")
    )
    waits = [e for e in events if e.name.startswith("DistributedDataParallel.wait")]
    return {
        "bucket_starts_ms": launches,
        "backward_end_ms": (max(e.end_ns for e in backward) - begin) / 1e6,
        "final_wait_ms": sum(e.end_ns - e.start_ns for e in waits) / 1e6,
    }


def worker(out_path, quick, trace_path):
    import adcuda.distributed as dist

    dist.init_process_group("mpi")
    world = dist.get_world_size()
    rounds = 3 if quick else 7
    steps = 3 if quick else 8
    results = {}
    strong, _ = _training_step(GLOBAL_BATCH // world, wrap=True)
    results[f"DDP step, global batch {GLOBAL_BATCH}"] = _timed_rounds(strong, rounds, steps)
    weak, _ = _training_step(GLOBAL_BATCH, wrap=True)
    results[f"DDP step, {GLOBAL_BATCH} per rank"] = _timed_rounds(weak, rounds, steps)
    if world == 1:
        plain, _ = _training_step(GLOBAL_BATCH, wrap=False)
        results[f"no DDP step, batch {GLOBAL_BATCH}"] = _timed_rounds(plain, rounds, steps)
    else:
        results.update(_all_reduce_times(rounds))
        results["overlap"] = _overlap(trace_path)
    if dist.get_rank() == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------------------- the comparison
def _run_world(n, quick, trace_path):
    from adcuda.distributed.launch import find_mpiexec

    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "rank0.json")
        command = [find_mpiexec(), "-n", str(n), sys.executable, os.path.abspath(__file__), "--worker", out]
        command += ["--quick"] * quick + (["--trace", trace_path] if trace_path else [])
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        proc = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        if proc.returncode != 0:
            raise SystemExit(f"world of {n} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        with open(out) as f:
            return json.load(f)


def report(one, two):
    print(f"\nTraining step, MLP {'-'.join(map(str, SIZES))}, 1 BLAS thread per process (ms)")
    head = f"{'case':<36}{'1 process':>12}{'2 processes':>14}{'1p/2p':>9}"
    print(head + "\n" + "-" * len(head))
    strong = f"DDP step, global batch {GLOBAL_BATCH}"
    weak = f"DDP step, {GLOBAL_BATCH} per rank"
    print(
        f"{strong:<36}{one[strong] * 1e3:>12.2f}{two[strong] * 1e3:>14.2f}{one[strong] / two[strong]:>8.2f}x"
        "   (speed-up; 2.00x is perfect)"
    )
    print(
        f"{weak:<36}{one[weak] * 1e3:>12.2f}{two[weak] * 1e3:>14.2f}{one[weak] / two[weak]:>8.2f}x"
        "   (weak-scaling efficiency; 1.00x is perfect)"
    )
    plain = f"no DDP step, batch {GLOBAL_BATCH}"
    print(
        f"DDP wrapper in a world of one: {one[weak] * 1e3:.2f} ms vs {one[plain] * 1e3:.2f} ms unwrapped "
        f"({one[weak] / one[plain]:.2f}x)"
    )

    print("\nall_reduce between 2 processes (us)")
    head = f"{'case':<36}{'adcuda':>12}{'mpi4py':>12}{'adcuda/mpi4py':>16}"
    print(head + "\n" + "-" * len(head))
    for case, times in two.items():
        if case.startswith("all_reduce"):
            print(
                f"{case:<36}{times['adcuda'] * 1e6:>12.1f}{times['mpi4py'] * 1e6:>12.1f}"
                f"{times['adcuda'] / times['mpi4py']:>15.2f}x"
            )

    overlap = two["overlap"]
    starts = ", ".join(f"{t:.2f}" for t in overlap["bucket_starts_ms"])
    before_end = sum(t < overlap["backward_end_ms"] for t in overlap["bucket_starts_ms"])
    print(
        f"\nBucket overlap (2 processes, bucket_cap_mb=0.5, rank 0): "
        f"backward runs {overlap['backward_end_ms']:.2f} ms; "
        f"bucket all-reduces start at {starts} ms ({before_end} of {len(overlap['bucket_starts_ms'])} while "
        f"backward still runs); final wait {overlap['final_wait_ms']:.2f} ms"
    )


# benchmarks/run.py reports a suite that exits with this status as skipped, with its last stderr line
EXIT_SKIPPED = 77


def _exit_skipped_without_mpi():
    """Without mpi4py or an mpiexec there is nothing to measure: say so and exit as skipped."""
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        print("needs mpi4py, which is not installed (pip install 'adcuda[distributed]')", file=sys.stderr)
        sys.exit(EXIT_SKIPPED)
    from adcuda.distributed.launch import find_mpiexec

    try:
        find_mpiexec()
    except SystemExit as missing:
        print(str(missing), file=sys.stderr)
        sys.exit(EXIT_SKIPPED)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--trace", default=None, help="write rank 0's Chrome trace of one DDP backward here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help="also write the measurements here")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.quick, args.trace and os.path.abspath(args.trace))
        return
    _exit_skipped_without_mpi()
    one = _run_world(1, args.quick, None)
    two = _run_world(2, args.quick, args.trace and os.path.abspath(args.trace))
    report(one, two)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"1": one, "2": two}, f, indent=1)


if __name__ == "__main__":
    main()
