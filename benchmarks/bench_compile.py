"""adcuda.compile (capture once, replay) against eager adcuda, PyTorch CPU eager and hand-written NumPy:

- one training step of an MLP 784-512-512-10 (batch 256, fp32, SGD: zero_grad, forward, cross-entropy,
  backward, step), the step of bench_mlp_step.py;
- forward+backward of a 3-op graph on 8x8 tensors (``((leaf * y).relu() + 1).sum().backward()``),
  where per-op dispatch is all there is.

Each contender runs in its own process with one BLAS/PyTorch thread, on the same seeded data. The
table's ratios are adcuda.compile's time over each other contender's (below 1: compiled is faster).

    python benchmarks/bench_compile.py [--quick] [--threads N] [--json out.json]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import contender_main, print_table, run_contenders, single_thread_env  # noqa: E402
from bench_mlp_step import _framework_step, _numpy_step  # noqa: E402

MLP_CASE = "MLP 784-512-512-10 SGD step, batch 256"
TINY_CASE = "fwd+bwd of a 3-op graph, 8x8"
COMPILED = "compiled"


def _tiny_graph(lib):
    y = lib.ones(8, 8)
    leaf = lib.ones(8, 8, requires_grad=True)

    def fwd_bwd_3op():
        loss = ((leaf * y).relu() + 1.0).sum()
        loss.backward()
    return fwd_bwd_3op


def _tiny_graph_numpy():
    """The same forward and backward written out by hand (the gradient accumulates, as .grad does)."""
    import numpy as np
    y = np.ones((8, 8), np.float32)
    leaf = np.ones((8, 8), np.float32)
    grad = np.zeros((8, 8), np.float32)

    def fwd_bwd_3op():
        z = leaf * y
        loss = (np.maximum(z, 0) + 1.0).sum()
        grad.__iadd__(y * (z > 0))
        return loss
    return fwd_bwd_3op


def cases_for(contender, quick=False):
    threads = single_thread_env()
    if contender == "numpy":
        return {MLP_CASE: _numpy_step(), TINY_CASE: _tiny_graph_numpy()}
    if contender == "torch":
        import torch
        torch.set_num_threads(threads)
        return {MLP_CASE: _framework_step(torch), TINY_CASE: _tiny_graph(torch)}
    import adcuda
    mlp, tiny = _framework_step(adcuda), _tiny_graph(adcuda)
    if contender == COMPILED:
        mlp, tiny = adcuda.compile(mlp, fullgraph=True), adcuda.compile(tiny, fullgraph=True)
    return {MLP_CASE: mlp, TINY_CASE: tiny}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="BLAS/PyTorch threads per contender")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.threads:
        os.environ["BENCH_THREADS"] = str(args.threads)
    results = run_contenders(os.path.abspath(__file__), [COMPILED, "adcuda", "numpy", "torch"],
                             ["--quick"] if args.quick else [])
    rows = print_table(f"adcuda.compile ({os.environ.get('BENCH_THREADS', '1')} thread(s)); "
                       "ratio > 1: compiled slower", results, unit="us", scale=1e6, baseline=COMPILED)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "compile", "rows": rows}, f, indent=2)


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for)
    else:
        main()
