"""Convolution on the CPU: conv2d forward+backward and one LeNet-5 training step (batch 64, 1x28x28,
SGD), adcuda vs PyTorch CPU, one thread each, side by side with ratios.

    python benchmarks/bench_conv.py [--quick] [--threads N] [--json out.json]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import contender_main, print_table, run_contenders, single_thread_env  # noqa: E402

BATCH = 64
CONV_CASES = (  # (input shape, out channels, kernel, keyword arguments)
    ((BATCH, 16, 14, 14), 32, 3, dict(padding=1)),
    ((BATCH, 3, 32, 32), 16, 5, dict(stride=1)),
    ((BATCH, 32, 16, 16), 32, 3, dict(padding=1, groups=4)),
)


def _conv_case(lib, shape, out_channels, kernel, kw):
    import numpy as np
    rng = np.random.default_rng(0)
    x = lib.from_numpy(rng.standard_normal(shape).astype(np.float32)).requires_grad_()
    w = lib.from_numpy(rng.standard_normal((out_channels, shape[1] // kw.get("groups", 1), kernel, kernel))
                       .astype(np.float32) * 0.1).requires_grad_()
    conv2d = lib.nn.functional.conv2d

    def step():
        x.grad = w.grad = None
        conv2d(x, w, **kw).sum().backward()
    return step


def _lenet_step(lib):
    import numpy as np
    rng = np.random.default_rng(0)
    x = lib.from_numpy(rng.standard_normal((BATCH, 1, 28, 28)).astype(np.float32))
    y = lib.from_numpy(rng.integers(0, 10, BATCH).astype(np.int64))
    lib.manual_seed(1)
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cross_entropy = nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _cases(lib, quick):
    cases = {f"LeNet-5 training step, batch {BATCH}": _lenet_step(lib)}
    for shape, out_channels, kernel, kw in CONV_CASES[:1] if quick else CONV_CASES:
        label = f"conv2d fwd+bwd {shape} -> {out_channels}, {kernel}x{kernel} {kw}"
        cases[label] = _conv_case(lib, shape, out_channels, kernel, kw)
    return cases


def cases_for(contender, quick=False):
    threads = single_thread_env()
    if contender == "torch":
        import torch
        torch.set_num_threads(threads)
        return _cases(torch, quick)
    import adcuda
    return _cases(adcuda, quick)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="BLAS/PyTorch threads per contender")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if args.threads:
        os.environ["BENCH_THREADS"] = str(args.threads)
    results = run_contenders(os.path.abspath(__file__), ["adcuda", "torch"], ["--quick"] if args.quick else [])
    rows = print_table(f"Convolution on the CPU ({os.environ.get('BENCH_THREADS', '1')} thread(s)); "
                       "ratio > 1: adcuda slower", results, unit="ms", scale=1e3)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "conv", "rows": rows}, f, indent=2)


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for)
    else:
        main()
