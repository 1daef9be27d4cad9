"""What observing costs: a training step and a tiny op with profiling off, under emit_nvtx() with
an NVTX tool attached, and under profile(); and emit_nvtx() with no tool attached, which must cost
what "off" costs.

The settings alternate round by round inside one process, so that a change in the machine's load
shifts them all alike; the median over the rounds is reported. The attached tool is
tests/nvtx_injection's recorder in counting mode (it counts the calls instead of logging them),
standing in for Nsight Systems, which loads through the same NVTX_INJECTION64_PATH hook; with a
tool attached or not is a property of the process, so that comparison takes two processes.

    python benchmarks/bench_profiler_overhead.py [--quick] [--json out.json]
"""

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import median_time, print_table, run_contenders, single_thread_env, smoke, write_report  # noqa: E402


def _load_recorder_builder():
    path = os.path.join(os.path.dirname(HERE), "tests", "nvtx_injection", "build.py")
    spec = importlib.util.spec_from_file_location("nvtx_recorder_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases():
    import adcuda as torch
    import adcuda.nn as nn
    import adcuda.nn.functional as F

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    a, b = torch.ones(4), torch.ones(4)

    def train_step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return {"training step (MLP 64-128-10, batch 32)": train_step, "tiny op (x + y, 4 elements)": lambda: a + b}


def child_main(process, quick):
    """Time every case under every setting of this process, alternating settings each round."""
    single_thread_env()
    from adcuda.profiler import emit_nvtx, profile

    settings = {"off": contextlib.nullcontext}
    if process == "tool":
        settings.update({"nvtx": emit_nvtx, "profile": profile})
    else:
        settings["nvtx-notool"] = emit_nvtx
    work = cases()
    times = {s: {c: [] for c in work} for s in settings}
    for _ in range(1 if smoke() else 3 if quick else 7):
        for setting, session in settings.items():
            with session() as active:
                if setting == "nvtx" and active._emitter is None:
                    raise RuntimeError("no NVTX tool attached: is NVTX_INJECTION64_PATH set?")
                for case, fn in work.items():
                    times[setting][case].append(median_time(fn, repeat=3, min_time=0.02))
    print(json.dumps({s: {c: statistics.median(v) for c, v in by_case.items()} for s, by_case in times.items()}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    extra = ["--quick"] if args.quick else []
    script = os.path.abspath(__file__)
    build = _load_recorder_builder()
    report = {}
    for key in ("NVTX_INJECTION64_PATH", "NVTX_RECORDER_OUTPUT", "ADCUDA_NVTX"):
        os.environ.pop(key, None)
    report["no tool attached"] = run_contenders(script, ["notool"], extra).get("notool")
    if build.compiler() is None:
        print("  (no C compiler to build the NVTX tool: nvtx and profile skipped)", file=sys.stderr)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["NVTX_INJECTION64_PATH"] = build.build_recorder(tmp)
            try:
                report["NVTX tool attached"] = run_contenders(script, ["tool"], extra).get("tool")
            finally:
                del os.environ["NVTX_INJECTION64_PATH"]
    rows = []
    for title, results in report.items():
        if not results:
            continue
        table = print_table(
            f"Profiling overhead, {title} (1 thread); off/X < 1: X is slower than off", results, baseline="off"
        )
        # off/X within adcuda, not adcuda against a contender: kept out of run.py's contender ratios
        rows += [
            {"case": f"{title}: {row['case']}", "seconds": row["seconds"], "ratio_off_over": row["ratio_adcuda_over"]}
            for row in table
        ]
        for case, base in results["off"].items():
            factors = "  ".join(f"{s} {results[s][case] / base:.2f}x" for s in results if s != "off")
            print(f"  slowdown vs off, {case}: {factors}")
    write_report(args.json, {"suite": "profiler_overhead", "rows": rows})


if __name__ == "__main__":
    if "--contender" in sys.argv:
        child_main(sys.argv[sys.argv.index("--contender") + 1], "--quick" in sys.argv)
    else:
        main()
