"""Per-op dispatch overhead on tiny tensors, and a forward+backward of a 3-op graph; then every public
op of the registry at small sizes (benchmarks/dispatch_ops.py), one row each, with the median and the
worst ratios.

adcuda vs PyTorch CPU (when installed), each in its own process, one thread each. On 4-element
tensors the arithmetic is negligible, so the time is the framework's own cost per op: argument
checks, type promotion, allocation of the result, graph recording. Times are each process's CPU
time (the contenders are single-threaded), so other work on a shared machine inflates them less
than wall time; ``--rounds N`` runs every contender N times, taking turns, and keeps the best.

``--before PYTHON`` adds the adcuda that another interpreter imports (the virtual environment of
another checkout) as a third contender: before/after ratios from one run, the same minute.

``--ops NAME,...`` times only those rows of the second table (re-measuring a few ops takes seconds,
not the minutes of every op).

    python benchmarks/bench_dispatch.py [--quick] [--rounds N] [--before PYTHON] [--ops NAME,...] [--json out.json]
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    BEFORE,
    median_time,
    print_before_after,
    print_table,
    run_contenders,
    single_thread_env,
)

WORST_SHOWN = 15  # the ops with the highest ratios, listed under the per-op table


def cases_for(contender, quick=False):
    threads = single_thread_env()
    if contender == "torch":
        import torch as lib

        lib.set_num_threads(threads)
    else:
        import adcuda as lib
    x, y = lib.ones(4), lib.ones(4)
    m = lib.ones(4, 4)
    leaf = lib.ones(4, requires_grad=True)

    def fwd_bwd_3op():
        loss = ((leaf * y).relu() + 1.0).sum()
        loss.backward()

    def no_grad_step():
        with lib.no_grad():
            leaf.mul_(1.0)

    return {
        "add (tensor + tensor)": lambda: x + y,
        "mul (tensor * scalar)": lambda: x * 2.0,
        "relu": lambda: x.relu(),
        "sum": lambda: x.sum(),
        "matmul 4x4 @ 4": lambda: m @ x,
        "reshape (view)": lambda: x.reshape(2, 2),
        "index [1:3]": lambda: x[1:3],
        "mul recording a graph": lambda: leaf * y,
        "fwd+bwd of a 3-op graph": fwd_bwd_3op,
        "in-place mul_ under no_grad": no_grad_step,
    }


def contender_main():
    """One contender's process: its medians (CPU time) of the basic cases and of every op, as JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--contender", required=True)
    parser.add_argument("--emit-json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ops")
    args, _ = parser.parse_known_args()
    repeat, min_time = (3, 0.01) if args.quick else (5, 0.02)

    def timed(cases):
        out = {}
        for name, fn in cases.items():
            try:
                fn()
            except Exception as error:  # a spec this library does not take: its row stays empty
                print(f"{name}: {type(error).__name__}: {error}", file=sys.stderr)
                continue
            out[name] = median_time(fn, repeat=repeat, min_time=min_time, clock=time.process_time)
        return out

    basic = timed(cases_for(args.contender, quick=args.quick))
    lib = __import__(args.contender)
    import dispatch_ops

    calls = dispatch_ops.calls(lib)
    if args.ops:
        calls = {name: calls[name] for name in args.ops.split(",") if name in calls}
    print(json.dumps({"basic": basic, "ops": timed(calls)}))


def summarize_ops(rows):
    """The median ratio over the ops and the worst ``WORST_SHOWN``, printed; returned for the JSON."""
    ratios = sorted(
        ((row["ratio_adcuda_over"]["torch"], row["case"]) for row in rows if "torch" in row["ratio_adcuda_over"]),
        reverse=True,
    )
    if not ratios:
        return {}
    median = statistics.median(r for r, _ in ratios)
    over_2 = sum(r > 2 for r, _ in ratios)
    print(
        f"\n{len(ratios)} ops: median adcuda/torch {median:.2f}x; {over_2} above 2x; "
        f"the worst {min(WORST_SHOWN, len(ratios))}:"
    )
    for ratio, case in ratios[:WORST_SHOWN]:
        print(f"  {case:<40}{ratio:6.2f}x")
    return {"ops": len(ratios), "median": median, "above_2x": over_2, "worst": ratios[:WORST_SHOWN]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="runs per contender, taking turns; the best counts")
    parser.add_argument("--before", metavar="PYTHON", help="also time the adcuda this interpreter imports")
    parser.add_argument("--ops", metavar="NAME,...", help="time only these rows of the table of every op")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.ops:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import dispatch_ops

        unknown = sorted(set(args.ops.split(",")) - set(dispatch_ops.specs()))
        if unknown:
            parser.error(f"--ops: no such rows: {', '.join(unknown)}")
    interpreters = {BEFORE: (args.before, "adcuda")} if args.before else None
    load = os.getloadavg()
    results = run_contenders(
        os.path.abspath(__file__),
        ["adcuda", "torch"],
        (["--quick"] if args.quick else []) + (["--ops", args.ops] if args.ops else []),
        rounds=args.rounds,
        interpreters=interpreters,
    )
    load_after = os.getloadavg()
    title = "Dispatch overhead per call (1 thread, 4-element tensors, CPU time); ratio > 1: adcuda slower"
    basic = {k: v["basic"] for k, v in results.items()}
    ops = {k: v["ops"] for k, v in results.items()}
    rows = print_table(title, {k: v for k, v in basic.items() if k != BEFORE})
    if BEFORE in results:
        print_before_after(basic, case_width=30)
    title = "Every public op at small sizes (benchmarks/dispatch_ops.py), CPU time per call; ratio > 1: adcuda slower"
    op_rows = print_table(title, {k: v for k, v in ops.items() if k != BEFORE})
    if BEFORE in results:
        print_before_after(ops, case_width=30)
    summary = summarize_ops(op_rows)
    print(f"load average (1 min) {load[0]:.2f} at the start, {load_after[0]:.2f} at the end; best of {args.rounds}")
    if args.json:
        with open(args.json, "w") as f:
            report = {"suite": "dispatch", "rows": {"basic": rows, "ops": op_rows}, "ops_summary": summary}
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main()
    else:
        main()
