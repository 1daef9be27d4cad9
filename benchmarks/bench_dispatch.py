"""Per-op dispatch overhead on tiny tensors, and a forward+backward of a 3-op graph.

adcuda vs PyTorch CPU (when installed), each in its own process, one thread each. On 4-element
tensors the arithmetic is negligible, so the time is the framework's own cost per op: argument
checks, type promotion, allocation of the result, graph recording.

    python benchmarks/bench_dispatch.py [--quick] [--json out.json]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import contender_main, print_table, run_contenders, single_thread_env  # noqa: E402


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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    results = run_contenders(os.path.abspath(__file__), ["adcuda", "torch"], ["--quick"] if args.quick else [])
    rows = print_table("Dispatch overhead per call (1 thread, 4-element tensors); ratio > 1: adcuda slower", results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "dispatch", "rows": rows}, f, indent=2)


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for)
    else:
        main()
