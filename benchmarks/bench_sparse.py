"""Sparse x dense products: adcuda.sparse.mm against torch.sparse.mm on the CPU, each in its own process,
one thread each, CPU time per call.

The matrices are coalesced COO tensors made from the same seed in both: a Cora-sized graph adjacency
(2708 x 2708, about 13,000 entries with the self loops, as a GCN's) times its layers' dense operands
(16 hidden features and 1433 input features), forward and forward + backward (gradients to the dense
operand and to the values), and a larger random matrix (20,000 x 20,000, 200,000 entries) times 64
columns. adcuda's CPU product is a NumPy row-segmented sum over the CSR row pointers
(adcuda/backends/cpu/sparse.py).

    python benchmarks/bench_sparse.py [--quick] [--rounds N] [--json out.json]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from _harness import contender_main, print_table, run_contenders_under_load, single_thread_env, write_report  # noqa: E402

# (case, rows = columns of the sparse matrix, entries, dense columns, backward too)
CASES = (
    ("GCN adjacency @ (2708, 16)", 2708, 13_000, 16, False),
    ("GCN adjacency @ (2708, 16) fwd+bwd", 2708, 13_000, 16, True),
    ("GCN adjacency @ (2708, 1433)", 2708, 13_000, 1433, False),
    ("20000^2, 200k entries @ (20000, 64)", 20_000, 200_000, 64, False),
)
QUICK = ("GCN adjacency @ (2708, 16)", "GCN adjacency @ (2708, 16) fwd+bwd")


def cases_for(contender, quick=False):
    threads = single_thread_env()
    if contender == "torch":
        import torch as lib

        lib.set_num_threads(threads)
    else:
        import adcuda as lib
    cases = {}
    for name, n, nnz, width, backward in CASES:
        if quick and name not in QUICK:
            continue
        rng = np.random.default_rng(0)
        indices = rng.integers(0, n, (2, nnz))
        values = rng.standard_normal(nnz).astype(np.float32)
        dense = rng.standard_normal((n, width)).astype(np.float32)
        matrix = lib.sparse_coo_tensor(lib.tensor(indices), lib.tensor(values), (n, n)).coalesce()
        matrix = matrix.detach().requires_grad_(backward)  # a leaf: its gradient accumulates call after call
        d = lib.tensor(dense, requires_grad=backward)
        if backward:
            cases[name] = lambda matrix=matrix, d=d: lib.sparse.mm(matrix, d).sum().backward()
        else:
            cases[name] = lambda matrix=matrix, d=d: lib.sparse.mm(matrix, d)
    return cases


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="runs per contender, taking turns; the best counts")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    results, load = run_contenders_under_load(
        os.path.abspath(__file__), ["adcuda", "torch"], ["--quick"] if args.quick else [], args.rounds
    )
    title = "sparse.mm, CSR x dense on the CPU (1 thread, CPU time per call); ratio > 1: adcuda slower"
    rows = print_table(title, results)
    print(load)
    write_report(args.json, {"suite": "sparse", "rows": rows})


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for, clock=time.process_time)
    else:
        main()
