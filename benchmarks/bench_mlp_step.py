"""One training step of an MLP 784-512-512-10 (batch 256, fp32, SGD): adcuda vs the same step
hand-written in NumPy (no autodiff: the floor for a NumPy-backed fallback) vs PyTorch CPU.

Each contender runs in its own process with the same BLAS thread count, on the same seeded data.

    python benchmarks/bench_mlp_step.py [--quick] [--threads N] [--json out.json]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    contender_main,
    parse_suite_args,
    print_ms_table,
    run_contenders,
    single_thread_env,
    suite_parser,
    write_report,
)
from _models import mlp, training_step  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 256
LR = 0.01


def _data():
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    return x, y


def _numpy_step():
    """Forward, softmax cross-entropy, backward and SGD update, written out by hand."""
    import numpy as np

    x, y = _data()
    rng = np.random.default_rng(1)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(fan_in)
        params.append(
            [
                rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                rng.uniform(-bound, bound, fan_out).astype(np.float32),
            ]
        )
    rows = np.arange(BATCH)

    def step():
        acts = [x]
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w.T + b
            if i < len(params) - 1:
                h = np.maximum(h, 0)
            acts.append(h)
        logits = acts[-1]
        shifted = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(shifted)
        probs /= probs.sum(axis=1, keepdims=True)
        loss = -np.log(probs[rows, y]).mean()
        g = probs
        g[rows, y] -= 1
        g /= BATCH
        for i in range(len(params) - 1, -1, -1):
            w, b = params[i]
            gw = g.T @ acts[i]
            gb = g.sum(axis=0)
            if i:
                g = (g @ w) * (acts[i] > 0)
            w -= LR * gw
            b -= LR * gb
        return loss

    return step


def _framework_step(lib):
    x_np, y_np = _data()
    lib.manual_seed(1)
    model = mlp(lib.nn, SIZES)
    opt = lib.optim.SGD(model.parameters(), lr=LR)
    x, y = lib.from_numpy(x_np), lib.from_numpy(y_np)
    return training_step(opt, lambda: lib.nn.functional.cross_entropy(model(x), y))


def cases_for(contender, quick=False):
    threads = single_thread_env()
    if contender == "numpy":
        return {"MLP 784-512-512-10 step, batch 256": _numpy_step()}
    if contender == "torch":
        import torch

        torch.set_num_threads(threads)
        return {"MLP 784-512-512-10 step, batch 256": _framework_step(torch)}
    import adcuda

    return {"MLP 784-512-512-10 step, batch 256": _framework_step(adcuda)}


def main():
    args = parse_suite_args(suite_parser(__doc__))
    results = run_contenders(os.path.abspath(__file__), ["adcuda", "numpy", "torch"], ["--quick"] if args.quick else [])
    rows = print_ms_table("MLP training step", results)
    write_report(args.json, {"suite": "mlp_step", "rows": rows})


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for)
    else:
        main()
