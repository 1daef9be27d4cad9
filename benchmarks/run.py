"""One entry point over every benchmark suite in benchmarks/.

Each suite is a script that compares adcuda side by side with the contenders that are installed
(hand-written NumPy and PyTorch on the CPU; PyTorch and CuPy on a GPU), each contender in its own
process where thread pools would interfere, and prints its own table of medians and ratios. This
runner picks the suites that can run on the chosen device, runs each in a subprocess with a time
limit, echoes their tables, and writes one JSON document (structure in README.md, "Benchmarks") and
optionally a bar chart of the adcuda/contender ratios.

    python benchmarks/run.py --quick                      # CPU suites, a few minutes on 2 cores
    python benchmarks/run.py --smoke                      # each case timed once: do the suites run? (CI)
    python benchmarks/run.py --device cuda --json bench.json --plot bench.png
    python benchmarks/run.py --suites dispatch,mlp_step   # a subset
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))


class Suite(NamedTuple):
    script: str
    devices: tuple  # the devices it measures
    takes_device: bool  # whether the script takes --device
    requires: tuple = ()  # optional Python packages it needs, checked before it runs
    install: str = ""  # how to install them


SUITES = {
    "dispatch": Suite("bench_dispatch.py", ("cpu",), False),
    "mlp_step": Suite("bench_mlp_step.py", ("cpu",), False),
    "amp": Suite("bench_amp.py", ("cpu", "cuda"), True),
    "profiler_overhead": Suite("bench_profiler_overhead.py", ("cpu",), False),
    "distributed": Suite("bench_distributed.py", ("cpu",), False, ("mpi4py",), "pip install 'adcuda[distributed]'"),
    "cuda_runtime": Suite("bench_cuda_runtime.py", ("cuda",), False),
    "kernels": Suite("bench_kernels.py", ("cuda",), False),
    "gemm": Suite("bench_gemm.py", ("cuda",), False),
    "nn_kernels": Suite("bench_nn_kernels.py", ("cuda",), False),
    "attention": Suite("bench_attention.py", ("cuda",), False),
    "gpt2_step": Suite("bench_gpt2_step.py", ("cuda",), False),
    "cuda_graphs": Suite("bench_cuda_graphs.py", ("cuda",), False),
    "compile": Suite("bench_compile.py", ("cpu",), False),
    "conv": Suite("bench_conv.py", ("cpu", "cuda"), True),
    "rnn": Suite("bench_rnn.py", ("cpu", "cuda"), True),
    "programs": Suite("bench_programs.py", ("cpu",), False),
    "export": Suite("bench_export.py", ("cpu",), False),
    "threads": Suite("bench_threads.py", ("cpu",), False),
    "sparse": Suite("bench_sparse.py", ("cpu",), False),
}

# A suite that cannot run here (a missing tool, no GPU) says why on its last line of stderr and exits
# with this status (automake's "skipped"); run.py reports it as skipped, not failed.
EXIT_SKIPPED = 77

SCHEMA_VERSION = 1


def _cuda_available():
    try:
        import adcuda.cuda

        return adcuda.cuda.is_available()
    except Exception:  # a broken install must not stop the CPU suites
        return False


def _machine():
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def _ratio_rows(suite, result):
    """(case, contender, adcuda time / contender time) from a suite's JSON: its ``rows``, a list of
    ``{"case", "ratio_adcuda_over": {contender: ratio}}`` (or such lists by table title). Anything else
    in a suite's output is left out, never a crash after the suites have run."""
    rows = result.get("rows") if isinstance(result, dict) else None
    if isinstance(rows, dict):
        rows = [
            dict(row, case=f"{title}: {row.get('case')}")
            for title, table in rows.items()
            if isinstance(table, list)
            for row in table
            if isinstance(row, dict)
        ]
    out = []
    for row in rows if isinstance(rows, list) else []:
        ratios = row.get("ratio_adcuda_over") if isinstance(row, dict) else None
        if not isinstance(ratios, dict):
            continue
        for contender, ratio in ratios.items():
            if isinstance(ratio, (int, float)) and not isinstance(ratio, bool):
                out.append((f"{suite}: {row.get('case')}", contender, ratio))
    return out


def _missing(modules):
    """The modules among ``modules`` that cannot be imported here."""
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def _last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no reason given"


def run_suite(name, device, quick, timeout):
    suite = SUITES[name]
    path = os.path.join(HERE, suite.script)
    record = {"script": suite.script, "device": device}
    if device not in suite.devices:
        return {**record, "status": "skipped", "reason": f"measures {', '.join(suite.devices)} only"}
    if not os.path.exists(path):
        return {**record, "status": "skipped", "reason": f"{suite.script} is not in this checkout"}
    missing = _missing(suite.requires)
    if missing:
        return {
            **record,
            "status": "skipped",
            "reason": f"needs {', '.join(missing)}, which is not installed ({suite.install})",
        }
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "out.json")
        cmd = [sys.executable, path, "--json", out_json] + (["--quick"] if quick else [])
        if suite.takes_device:
            cmd += ["--device", device]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {**record, "status": "failed", "reason": f"timed out after {timeout} s", "wall_seconds": timeout}
        wall = time.perf_counter() - start
        sys.stdout.write(proc.stdout)
        if proc.returncode == EXIT_SKIPPED:
            return {**record, "status": "skipped", "reason": _last_line(proc.stderr), "wall_seconds": wall}
        if proc.returncode != 0:
            sys.stdout.write(proc.stderr[-3000:])
            return {**record, "status": "failed", "reason": f"exit code {proc.returncode}", "wall_seconds": wall}
        if not os.path.exists(out_json):
            # a GPU suite on a machine without a GPU says so and exits 0 without results
            return {**record, "status": "skipped", "reason": _last_line(proc.stdout), "wall_seconds": wall}
        try:
            with open(out_json) as f:
                result = json.load(f)
        except ValueError as error:
            return {**record, "status": "failed", "reason": f"its JSON is unreadable: {error}", "wall_seconds": wall}
    return {**record, "status": "ok", "wall_seconds": wall, "result": result}


def plot(ratios, path):
    import matplotlib  # optional: only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{case} vs {who}" for case, who, _ in ratios]
    values = [r for _, _, r in ratios]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(values) + 1.5))
    ax.barh(range(len(values)), values, color=["tab:green" if v <= 1 else "tab:red" for v in values])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(range(len(values)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("adcuda time / contender time (below 1: adcuda faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats and smaller cases")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="--quick with every case timed once (BENCH_SMOKE=1): checks that the suites run, as CI does; "
        "the figures mean nothing",
    )
    parser.add_argument(
        "--device",
        default="auto",
        choices=("auto", "cpu", "cuda"),
        help="auto: cuda when adcuda sees a usable GPU, else cpu",
    )
    parser.add_argument("--suites", default="all", help=f"comma-separated subset of: {', '.join(SUITES)}")
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--plot", help="draw the ratios as a bar chart (needs matplotlib)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per suite")
    args = parser.parse_args(argv)
    if args.smoke:
        args.quick = True
        os.environ["BENCH_SMOKE"] = "1"  # the suites' processes inherit it (benchmarks/_harness.py's smoke())
    device = args.device if args.device != "auto" else ("cuda" if _cuda_available() else "cpu")
    names = list(SUITES) if args.suites == "all" else [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {unknown}; known: {', '.join(SUITES)}")

    report = {
        "schema": SCHEMA_VERSION,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "device": device,
        "quick": args.quick,
        "smoke": args.smoke,
        "machine": _machine(),
        "suites": {},
    }
    for name in names:
        print(f"\n===== {name} ({device}) =====", flush=True)
        report["suites"][name] = record = run_suite(name, device, args.quick, args.timeout)
        if record["status"] != "ok":
            print(f"  {record['status']}: {record.get('reason')}")

    ratios = [
        r for name, rec in report["suites"].items() if rec["status"] == "ok" for r in _ratio_rows(name, rec["result"])
    ]
    print("\n===== summary: adcuda time / contender time (below 1: adcuda faster) =====")
    for case, who, ratio in ratios:
        print(f"{case:<60} vs {who:<8} {ratio:6.2f}x")
    for name, rec in report["suites"].items():
        print(f"{name:<20} {rec['status']:<8} {rec.get('wall_seconds', 0):7.1f} s  {rec.get('reason', '')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    if args.plot and ratios:
        plot(ratios, args.plot)
    failed = [n for n, rec in report["suites"].items() if rec["status"] == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
