"""What observing costs: a training step and a tiny op with profiling off ("off"), under
emit_nvtx() with an NVTX tool attached ("nvtx"), and under profile() ("profile"); plus "off-after"
(off, after a profile session has ended) and "nvtx-notool" (emit_nvtx() with no tool attached),
which must both cost what "off" costs.

Each setting runs in its own process. The attached tool is tests/nvtx_injection's recorder in
counting mode (it counts the calls instead of logging them), standing in for Nsight Systems,
which loads through the same NVTX_INJECTION64_PATH hook.

    python benchmarks/bench_profiler_overhead.py [--quick] [--json out.json]
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import contender_main, print_table, run_contenders, single_thread_env  # noqa: E402

SETTINGS = ("off", "off-after", "nvtx-notool", "nvtx", "profile")


def _load_recorder_builder():
    path = os.path.join(os.path.dirname(HERE), "tests", "nvtx_injection", "build.py")
    spec = importlib.util.spec_from_file_location("nvtx_recorder_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases_for(setting, quick=False):
    single_thread_env()
    import adcuda as torch
    import adcuda.nn as nn
    import adcuda.nn.functional as F
    from adcuda.profiler import emit_nvtx, profile

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

    if setting == "off-after":
        with profile():
            train_step()
    elif setting in ("nvtx", "nvtx-notool"):
        session = emit_nvtx()
        session.__enter__()     # for the life of this process
        if setting == "nvtx" and not session._emitter:
            raise RuntimeError("no NVTX tool attached: is NVTX_INJECTION64_PATH set?")
    elif setting == "profile":
        session = profile()
        session.__enter__()
    return {"training step (MLP 64-128-10, batch 32)": train_step, "tiny op (x + y, 4 elements)": lambda: a + b}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    extra = ["--quick"] if args.quick else []
    script = os.path.abspath(__file__)
    build = _load_recorder_builder()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        recorder = build.build_recorder(tmp) if build.compiler() else None
        for setting in SETTINGS:
            if setting == "nvtx" and recorder is None:
                print("  (nvtx: no C compiler to build the NVTX tool: skipped)", file=sys.stderr)
                continue
            env = {"NVTX_INJECTION64_PATH": recorder} if setting == "nvtx" else {}
            saved = {k: os.environ.get(k) for k in ("NVTX_INJECTION64_PATH", "NVTX_RECORDER_OUTPUT", "ADCUDA_NVTX")}
            for k in saved:
                os.environ.pop(k, None)
            os.environ.update(env)
            try:
                results.update(run_contenders(script, [setting], extra))
            finally:
                for k, v in saved.items():
                    os.environ.pop(k, None)
                    if v is not None:
                        os.environ[k] = v
    rows = print_table("Profiling overhead (1 thread); off/X < 1: X is slower than off", results, baseline="off")
    if "off" in results:
        print("\nslowdown vs off (X / off):")
        for case, base in results["off"].items():
            factors = "  ".join(f"{s} {results[s][case] / base:.2f}x" for s in results if s != "off")
            print(f"  {case}: {factors}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "profiler_overhead", "rows": rows}, f, indent=2)


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for)
    else:
        main()
