"""Convolution, side by side with ratios.

On the CPU (default): conv2d forward+backward and one LeNet-5 training step (batch 64, 1x28x28, SGD),
adcuda vs PyTorch CPU, one thread each.

On CUDA (``--device cuda``): conv2d forward + both backwards in fp16 (the tensor-core implicit GEMM)
against the practical tensor-core limit, adcuda's own dense GEMM of the same M x N x K (what the
convolution would cost with its columns already in memory), and against PyTorch (cuDNN) where it is
installed. In the emulated build the kernels are checked against the CPU backend and no time is
reported.

    python benchmarks/bench_conv.py [--device cpu|cuda] [--quick] [--threads N] [--json out.json]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    adcuda_event_seconds,
    contender_main,
    emulated_reference_run,
    is_emulated,
    parse_suite_args,
    print_ms_table,
    run_contenders,
    single_thread_env,
    suite_parser,
    write_report,
)
from _models import lenet5, training_step  # noqa: E402

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
    w = lib.from_numpy(
        rng.standard_normal((out_channels, shape[1] // kw.get("groups", 1), kernel, kernel)).astype(np.float32) * 0.1
    ).requires_grad_()
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
    model = lenet5(lib.nn, padding=2)
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return training_step(opt, lambda: lib.nn.functional.cross_entropy(model(x), y))


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


# (input shape, out channels, kernel, padding): ResNet-like layers in fp16
CUDA_CASES = (((32, 64, 56, 56), 64, 3, 1), ((32, 256, 14, 14), 256, 3, 1), ((32, 128, 28, 28), 128, 1, 0))


def _cuda_reference_checks():
    """Small fp16 convolutions on the device against the CPU backend (for the emulated build)."""
    import numpy as np

    import adcuda
    from adcuda.backends import cpu
    from adcuda.backends import cuda as cb

    rng = np.random.default_rng(0)

    def check():
        x = rng.standard_normal((2, 5, 9, 8)).astype(np.float16)
        w = rng.standard_normal((7, 5, 3, 3)).astype(np.float16)
        args = ((1, 2), (1, 1), (1, 1), 1)
        got = cb.to_numpy(cb.conv2d(cb.from_numpy(x, adcuda.float16), cb.from_numpy(w, adcuda.float16), *args))
        want = cpu.conv2d(x, w, *args)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=5e-2)

    return [check]


def _cuda_row(shape, out_channels, kernel, padding, has_torch):
    """One case: adcuda's conv2d fwd+bwd vs its dense GEMMs of the same size, and vs PyTorch."""
    import adcuda

    n, c, h, w = shape
    x = adcuda.randn(shape, device="cuda", dtype=adcuda.float16, requires_grad=True)
    weight = adcuda.randn((out_channels, c, kernel, kernel), device="cuda", dtype=adcuda.float16, requires_grad=True)

    def conv_step():
        x.grad = weight.grad = None
        adcuda.nn.functional.conv2d(x, weight, padding=padding).sum().backward()

    conv = adcuda_event_seconds(conv_step)
    # the three GEMMs of a convolution step, dense: (N*H*W x C*k*k) @ (C*k*k x O) and its two transposes
    m, k_dim = n * h * w, c * kernel * kernel
    a = adcuda.randn((m, k_dim), device="cuda", dtype=adcuda.float16)
    b = adcuda.randn((k_dim, out_channels), device="cuda", dtype=adcuda.float16)
    g = adcuda.randn((m, out_channels), device="cuda", dtype=adcuda.float16)
    gemm = adcuda_event_seconds(lambda: (a @ b, g @ b.mT, a.mT @ g))
    row = {
        "case": f"conv2d fp16 fwd+bwd {shape} -> {out_channels}, {kernel}x{kernel}",
        "adcuda_s": conv,
        "dense_gemm_s": gemm,
        "ratio_adcuda_over": {"dense_gemm": conv / gemm},
    }
    if has_torch:
        import time

        import torch

        tx = torch.randn(shape, device="cuda", dtype=torch.float16, requires_grad=True)
        tw = torch.randn((out_channels, c, kernel, kernel), device="cuda", dtype=torch.float16, requires_grad=True)

        def torch_step():
            tx.grad = tw.grad = None
            torch.nn.functional.conv2d(tx, tw, padding=padding).sum().backward()

        for _ in range(3):
            torch_step()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            torch_step()
        torch.cuda.synchronize()
        row["torch_s"] = (time.perf_counter() - start) / 20
        row["ratio_adcuda_over"]["torch"] = conv / row["torch_s"]
    ratios = ", ".join(f"{k} {v:.2f}x" for k, v in row["ratio_adcuda_over"].items())
    print(f"{row['case']}: adcuda {conv * 1e3:.3f} ms; adcuda/{ratios}")
    return row


def _cuda_rows(quick):
    try:
        import torch

        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    return [
        _cuda_row(shape, out_channels, kernel, padding, has_torch)
        for shape, out_channels, kernel, padding in (CUDA_CASES[:1] if quick else CUDA_CASES)
    ]


def main():
    args = parse_suite_args(suite_parser(__doc__, device=True))
    if args.device == "cuda":
        if is_emulated():
            return emulated_reference_run("conv", args.json, _cuda_reference_checks())
        rows = _cuda_rows(args.quick)
        write_report(args.json, {"suite": "conv", "device": "cuda", "rows": rows})
        return 0
    results = run_contenders(os.path.abspath(__file__), ["adcuda", "torch"], ["--quick"] if args.quick else [])
    rows = print_ms_table("Convolution on the CPU", results)
    write_report(args.json, {"suite": "conv", "rows": rows})
    return 0


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for)
    else:
        sys.exit(main())
