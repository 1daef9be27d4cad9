"""CPU time of a training run on a busy machine: adcuda's thread policy (adcuda/backends/cpu/threads.py)
against one BLAS thread, and against PyTorch under the same load.

The suite starts its own busy process (a loop that spins until the suite ends), so that each run
shares the cores with at least one other, then runs, one after another and taking turns over
``--rounds``:

- ``adcuda train`` (the README's main job, the digits MLP) with the default threads, and the same run
  with ``OPENBLAS_NUM_THREADS=1``;
- one digits training program (MLP 64-256-256-10, GELU and dropout, AdamW, batch 32, a validation pass
  per epoch), the same source run with ``import adcuda as torch`` and with ``import torch``, each
  with its library's default threads.

Each figure is the CPU time of that run's process (user + system, all its threads: what the work cost
the machine, whatever the load did to its wall time), read from ``resource.getrusage`` of the finished
child, the least over the rounds. The criteria (issue 31): ``adcuda train`` within 1.3x of its
one-thread run, and the adcuda program no worse than PyTorch's.

``--sweep`` instead measures where a second BLAS thread pays (the ``WORK_PER_THREAD`` of threads.py):
square and MLP-shaped float32 products on one and on two threads, the 5th percentile of many calls
each, so that only calls in which both threads had a core count on a shared machine.

    python benchmarks/bench_threads.py [--quick] [--rounds N] [--json out.json]
    python benchmarks/bench_threads.py --sweep
"""

import argparse
import importlib.resources
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import smoke, write_report  # noqa: E402

# The same program for both libraries (``--program LIB EPOCHS``): the digits MLP of ``adcuda train``.
PROGRAM = r"""
import gzip, sys
import numpy as np
lib_name, epochs, digits_csv = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch = __import__(lib_name)
nn, F = torch.nn, torch.nn.functional
with gzip.open(digits_csv, "rt") as f:
    table = np.loadtxt(f, delimiter=",", dtype=np.int64)
torch.manual_seed(0)
order = np.random.default_rng(0).permutation(len(table))
x = torch.tensor((table[order, :64] / 16.0).astype(np.float32))
y = torch.tensor(table[order, 64])
n_train = int(0.8 * len(table))
x_train, y_train, x_val, y_val = x[:n_train], y[:n_train], x[n_train:], y[n_train:]
mean, scale = x_train.mean(0), x_train.std(0) + 0.1
layers, width = [], 64
for size in (256, 256):
    layers += [nn.Linear(width, size), nn.GELU(), nn.Dropout(0.1)]
    width = size
model = nn.Sequential(*layers, nn.Linear(width, 10))
opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train), batch_size=32, shuffle=True)
for epoch in range(epochs):
    model.train()
    for xb, yb in loader:
        loss = F.cross_entropy(model((xb - mean) / scale), yb, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        accuracy = (model((x_val - mean) / scale).argmax(1) == y_val).float().mean().item()
print(f"validation accuracy {accuracy:.3f}")
"""

# The busy process: it spins until its parent is gone, so that a suite killed at its time limit leaves
# no spinning orphan behind.
BUSY = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass\n"

ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _clean_env(extra=()):
    """This environment without thread settings (the benchmarks' harness may have set them), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ONE_THREAD}
    return {**env, **dict(extra)}


def cpu_seconds(case, command, env):
    """The CPU time (user + system) of ``command`` run to its end as a child of this process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"bench_threads: {case} failed:\n{proc.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def runs(epochs, out_dir, torch_ok):
    adcuda_cli = [sys.executable, "-m", "adcuda", "train", "--task", "digits", "--device", "cpu", "--quiet"]
    train = adcuda_cli + ["--epochs", str(epochs), "--out", out_dir]
    program = [sys.executable, "-c", PROGRAM]
    digits = str(importlib.resources.files("adcuda.data").joinpath("digits.csv.gz"))
    cases = {
        "adcuda train, default threads": (train, _clean_env()),
        "adcuda train, OPENBLAS_NUM_THREADS=1": (train, _clean_env(ONE_THREAD)),
        "digits program, adcuda": (program + ["adcuda", str(epochs), digits], _clean_env()),
    }
    if torch_ok:
        cases["digits program, torch"] = (program + ["torch", str(epochs), digits], _clean_env())
        # what PyTorch's run costs on one thread: the yardstick of the default-threads runs
        cases["digits program, torch, one thread"] = (program + ["torch", str(epochs), digits], _clean_env(ONE_THREAD))
    return cases


def measure(epochs, rounds):
    torch_ok = importlib.util.find_spec("torch") is not None
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    best = {}
    load = os.getloadavg()
    try:
        time.sleep(0.5)  # the busy process up and spinning
        with tempfile.TemporaryDirectory() as out_dir:
            for _ in range(rounds):
                for case, (command, env) in runs(epochs, out_dir, torch_ok).items():
                    seconds = cpu_seconds(case, command, env)
                    best[case] = min(best.get(case, seconds), seconds)
    finally:
        busy.kill()
        busy.wait()
    return best, load, os.getloadavg()


def report(best, epochs, rounds, load, load_after):
    print(
        f"\nCPU time of whole runs ({epochs} epochs of the digits MLP) beside one busy process, best of {rounds}; "
        f"load {load[0]:.1f} at the start, {load_after[0]:.1f} at the end, on {os.cpu_count()} cores"
    )
    for case, seconds in best.items():
        print(f"  {case:<40} {seconds:8.2f} s")
    comparisons = [
        ("adcuda train: default threads / one BLAS thread", "adcuda train, default threads",
         "adcuda train, OPENBLAS_NUM_THREADS=1", "one thread", 1.3),
        ("digits program: adcuda / torch", "digits program, adcuda", "digits program, torch", "torch", 1.0),
        ("adcuda train / torch's digits program", "adcuda train, default threads", "digits program, torch",
         "torch program", None),
    ]  # fmt: skip
    rows = []
    print(f"\n  {'ratio':<50}{'value':>8}  criterion")
    for title, num, den, contender, limit in comparisons:
        if num not in best or den not in best:
            continue
        ratio = best[num] / best[den]
        verdict = "" if limit is None else (f"<= {limit}: " + ("met" if ratio <= limit else "NOT MET"))
        print(f"  {title:<50}{ratio:7.2f}x  {verdict}")
        seconds = {num: best[num], den: best[den]}
        rows.append({"case": title, "seconds": seconds, "ratio_adcuda_over": {contender: ratio}})
    return rows


def sweep():
    """Where a second BLAS thread pays: the 5th-percentile time of one product on one and on two threads."""
    import numpy as np
    from threadpoolctl import ThreadpoolController

    pool = ThreadpoolController().select(user_api="blas")

    def low_time(a, b, threads, calls):
        for lib in pool.lib_controllers:
            lib.set_num_threads(threads)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            a.dot(b)
            times.append(time.perf_counter() - start)
        times.sort()
        return times[len(times) // 20]

    shapes = [(n, n, n) for n in (48, 64, 96, 128, 160, 192, 256, 384)]
    shapes += [(32, 64, 256), (32, 256, 256), (256, 32, 256), (64, 256, 256), (128, 256, 256), (256, 784, 512)]
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; float32 products, 5th percentile of many calls")
    print(f"{'M x K x N':<18}{'M*K*N':>12}{'1 thread us':>14}{'2 threads us':>14}{'speed-up':>10}")
    rng = np.random.default_rng(0)
    for m, k, n in shapes:
        a, b = rng.random((m, k), np.float32), rng.random((k, n), np.float32)
        calls = max(50, min(2000, int(3e8 / (m * k * n))))
        one = min(low_time(a, b, 1, calls) for _ in range(3))
        two = min(low_time(a, b, 2, calls) for _ in range(3))
        print(f"{f'{m} x {k} x {n}':<18}{m * k * n:>12,}{one * 1e6:>14.1f}{two * 1e6:>14.1f}{one / two:>9.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer epochs and rounds")
    parser.add_argument("--rounds", type=int, default=None, help="runs of each case, taking turns; the least counts")
    parser.add_argument("--sweep", action="store_true", help="measure where a second BLAS thread pays instead")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.sweep:
        return sweep()
    epochs = 1 if smoke() else 4 if args.quick else 10
    rounds = args.rounds or (1 if smoke() else 2 if args.quick else 3)
    best, load, load_after = measure(epochs, rounds)
    rows = report(best, epochs, rounds, load, load_after)
    write_report(args.json, {"suite": "threads", "rows": rows, "cpu_seconds": best})


if __name__ == "__main__":
    main()
