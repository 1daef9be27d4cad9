"""One entry point over every benchmark suite in benchmarks/.

Each suite is a script that compares adcuda side by side with the contenders that are installed
(hand-written NumPy and PyTorch on the CPU; PyTorch and CuPy on a GPU), each contender in its own
process where thread pools would interfere, and prints its own table of medians and ratios. This
runner picks the suites that can run on the chosen device, runs each in a subprocess with a time
limit, echoes their tables, and writes one JSON document (structure in README.md, "Benchmarks") and
optionally a bar chart of the adcuda/contender ratios.

    python benchmarks/run.py --quick                      # CPU suites, a few minutes on 2 cores
    python benchmarks/run.py --device cuda --json bench.json --plot bench.png
    python benchmarks/run.py --suites dispatch,mlp_step   # a subset
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (script, devices it measures, whether the script takes --device)
SUITES = {
    "dispatch": ("bench_dispatch.py", ("cpu",), False),
    "mlp_step": ("bench_mlp_step.py", ("cpu",), False),
    "amp": ("bench_amp.py", ("cpu", "cuda"), True),
    "profiler_overhead": ("bench_profiler_overhead.py", ("cpu",), False),
    "distributed": ("bench_distributed.py", ("cpu",), False),
    "cuda_runtime": ("bench_cuda_runtime.py", ("cuda",), False),
    "kernels": ("bench_kernels.py", ("cuda",), False),
    "gemm": ("bench_gemm.py", ("cuda",), False),
    "nn_kernels": ("bench_nn_kernels.py", ("cuda",), False),
    "programs": ("bench_programs.py", ("cpu",), False),
}

SCHEMA_VERSION = 1


def _cuda_available():
    try:
        import adcuda.cuda
        return adcuda.cuda.is_available()
    except Exception:  # a broken install must not stop the CPU suites
        return False


def _machine():
    return {"python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()}


def _ratio_rows(suite, result):
    """(case, contender, adcuda time / contender time) from a suite's JSON, where it has them."""
    out = []
    for row in result.get("rows", []) if isinstance(result, dict) else []:
        for contender, ratio in (row.get("ratio_adcuda_over") or {}).items():
            out.append((f"{suite}: {row.get('case')}", contender, ratio))
    return out


def run_suite(name, device, quick, timeout):
    script, devices, takes_device = SUITES[name]
    path = os.path.join(HERE, script)
    record = {"script": script, "device": device}
    if device not in devices:
        return {**record, "status": "skipped", "reason": f"measures {', '.join(devices)} only"}
    if not os.path.exists(path):
        return {**record, "status": "skipped", "reason": f"{script} is not in this checkout"}
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "out.json")
        cmd = [sys.executable, path, "--json", out_json] + (["--quick"] if quick else [])
        if takes_device:
            cmd += ["--device", device]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {**record, "status": "failed", "reason": f"timed out after {timeout} s",
                    "wall_seconds": timeout}
        wall = time.perf_counter() - start
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            sys.stdout.write(proc.stderr[-3000:])
            return {**record, "status": "failed", "reason": f"exit code {proc.returncode}",
                    "wall_seconds": wall}
        if not os.path.exists(out_json):
            # a GPU suite on a machine without a GPU says so and exits 0 without results
            return {**record, "status": "skipped", "reason": proc.stdout.strip().splitlines()[-1:] or "no output",
                    "wall_seconds": wall}
        with open(out_json) as f:
            result = json.load(f)
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
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="auto: cuda when adcuda sees a usable GPU, else cpu")
    parser.add_argument("--suites", default="all", help=f"comma-separated subset of: {', '.join(SUITES)}")
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--plot", help="draw the ratios as a bar chart (needs matplotlib)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per suite")
    args = parser.parse_args(argv)
    device = args.device if args.device != "auto" else ("cuda" if _cuda_available() else "cpu")
    names = list(SUITES) if args.suites == "all" else [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        parser.error(f"unknown suite(s) {unknown}; known: {', '.join(SUITES)}")

    report = {"schema": SCHEMA_VERSION, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "device": device, "quick": args.quick, "machine": _machine(), "suites": {}}
    for name in names:
        print(f"\n===== {name} ({device}) =====", flush=True)
        report["suites"][name] = record = run_suite(name, device, args.quick, args.timeout)
        if record["status"] != "ok":
            print(f"  {record['status']}: {record.get('reason')}")

    ratios = [r for name, rec in report["suites"].items() if rec["status"] == "ok"
              for r in _ratio_rows(name, rec["result"])]
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
