"""adcuda's two GEMM paths against PyTorch's matmul (cuBLAS), in TFLOP/s: the products of a GPT-2-small
bf16 training step (batch 8 x 1024 tokens, width 768; the weight-gradient shapes with K = 8192 and the
50257-token language-model head, whose gradient rows are 50257 elements apart), and square products
(1024^3, 4096^3 in bf16; 4096^3 in fp16 and fp32 without TF32).

    python benchmarks/bench_gemm.py [--quick] [--json out.json]

Contenders, all in this process: adcuda's hand-written kernels (ADCUDA_GEMM=handwritten), adcuda on
cuBLASLt (when it loads: pip install "adcuda[cublas]"), torch. Needs a GPU; elsewhere it says so and
exits 0. First every layout is checked against a NumPy float64 product on a small odd-sized problem
(the benchmark stops if one is off); then each product is timed with CUDA events around a burst of
launches (median of several bursts). Each hand-written half-precision row names the kernel that ran
(sm90_wgmma: TMA + wgmma on a 9.0 GPU with an sm_90a build; sm80_mma_sync otherwise). Targets on an
H100/H200 (issue 29): hand-written bf16 >= 80% of cuBLAS at 4096^3 and >= 50% on the GPT-2 shapes;
the cuBLASLt path within 5% of torch.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from _harness import (  # noqa: E402
    adcuda_event_seconds,
    emulated_reference_run,
    framework_event_seconds,
    gpu_suite_args,
    is_emulated,
    print_table,
    write_report,
)

import adcuda  # noqa: E402

DTYPES = ("float32", "float16", "bfloat16")
# (name, A transposed, B transposed): x @ W^T is a linear layer's forward, g^T @ x its weight gradient
LAYOUTS = (("NN", False, False), ("NT", False, True), ("TN", True, False))
TOKENS, WIDTH, VOCAB = 8192, 768, 50257
# (case, M, K, N, layout, dtype): linear layers store W as (out, in), so forward is NT, dX = dY @ W is
# NN and dW = dY^T @ X is TN.
CASES = (
    ("gpt2 qkv fwd", TOKENS, WIDTH, 3 * WIDTH, "NT", "bfloat16"),
    ("gpt2 qkv dW", 3 * WIDTH, TOKENS, WIDTH, "TN", "bfloat16"),
    ("gpt2 fc fwd", TOKENS, WIDTH, 4 * WIDTH, "NT", "bfloat16"),
    ("gpt2 proj fwd", TOKENS, 4 * WIDTH, WIDTH, "NT", "bfloat16"),
    ("gpt2 fc dW", 4 * WIDTH, TOKENS, WIDTH, "TN", "bfloat16"),
    ("gpt2 lm-head fwd", TOKENS, WIDTH, VOCAB, "NT", "bfloat16"),
    ("gpt2 lm-head dX", TOKENS, VOCAB, WIDTH, "NN", "bfloat16"),
    ("gpt2 lm-head dW", VOCAB, TOKENS, WIDTH, "TN", "bfloat16"),
    ("square 1024^3", 1024, 1024, 1024, "NN", "bfloat16"),
    ("square 4096^3", 4096, 4096, 4096, "NN", "bfloat16"),
    ("square 4096^3", 4096, 4096, 4096, "NN", "float16"),
    ("square 4096^3", 4096, 4096, 4096, "NN", "float32"),
)
QUICK = ("gpt2 qkv fwd", "gpt2 qkv dW", "gpt2 lm-head dX", "square 4096^3")


def optional_module(name):
    try:
        module = __import__(name)
    except ImportError:
        return None
    if name == "torch" and not module.cuda.is_available():
        return None
    return module


def adcuda_operand(host, dtype, transposed):
    """A device tensor holding `host` (a float32 array), transposed as a view when asked (the kernel
    then reads it through swapped strides)."""
    stored = host.T.copy() if transposed else host
    t = adcuda.tensor(stored, device="cuda").to(dtype=getattr(adcuda, dtype))
    return t.mT if transposed else t


def check_against_numpy(mode):
    """Every dtype and layout on an odd-sized problem against NumPy in float64, on ADCUDA_GEMM=mode."""
    use_path(mode)
    rng = np.random.default_rng(0)
    m, k, n = 257, 131, 97
    a_host = rng.standard_normal((m, k)).astype(np.float32)
    b_host = rng.standard_normal((k, n)).astype(np.float32)
    tolerance = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 8e-2}
    for dtype in DTYPES:
        for name, a_t, b_t in LAYOUTS:
            a = adcuda_operand(a_host, dtype, a_t)
            b = adcuda_operand(b_host, dtype, b_t)
            got = (a @ b).float().cpu().numpy().astype(np.float64)
            a_held = a.float().cpu().numpy().astype(np.float64)
            b_held = b.float().cpu().numpy().astype(np.float64)
            expected = a_held @ b_held
            error = np.abs(got - expected).max() / max(np.abs(expected).max(), 1e-6)
            if not error < tolerance[dtype]:
                raise SystemExit(f"reference check failed: {dtype} {name} relative error {error:.2e}")
    print(f"reference check ({mode}): every dtype and layout matches NumPy on {m}x{k}x{n}")


def use_path(mode):
    """Route adcuda's matmul through ADCUDA_GEMM=mode from now on; False if that path cannot load."""
    from adcuda.backends.cuda import gemm as cuda_gemm

    os.environ["ADCUDA_GEMM"] = mode
    cuda_gemm.reset_gemm_selection()
    try:
        return cuda_gemm.gemm_selection().path == mode
    except RuntimeError:
        return False


def measure(cases, bursts):
    torch = optional_module("torch")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False  # SGEMM against SGEMM
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    paths = [("adcuda hand-written", "handwritten")]
    if use_path("cublaslt"):
        paths.append(("adcuda cuBLASLt", "cublaslt"))
    results = {name: {} for name, _ in paths}
    if torch is not None:
        results["torch"] = {}
    flops = {}
    kernels = {}  # case -> the hand-written kernel that ran it
    from adcuda import _native

    native = _native._C
    rng = np.random.default_rng(1)
    for label, m, k, n, layout, dtype in cases:
        case = f"{label} {dtype} {m}x{k}x{n} {layout}"
        flops[case] = 2.0 * m * k * n
        a_host = rng.standard_normal((m, k)).astype(np.float32)
        b_host = rng.standard_normal((k, n)).astype(np.float32)
        a_t, b_t = layout[0] == "T", layout[1] == "T"
        per_burst = max(2, int(2e12 / flops[case]))  # about 2 TFLOP per burst
        a, b = adcuda_operand(a_host, dtype, a_t), adcuda_operand(b_host, dtype, b_t)
        for name, mode in paths:
            use_path(mode)
            results[name][case] = adcuda_event_seconds(lambda a=a, b=b: a @ b, bursts, per_burst)
            if mode == "handwritten" and dtype != "float32":
                kernels[case] = native.gemm_last_half_kernel()
        del a, b
        if torch is not None:
            ta = torch.from_numpy(a_host.T.copy() if a_t else a_host).cuda().to(getattr(torch, dtype))
            tb = torch.from_numpy(b_host.T.copy() if b_t else b_host).cuda().to(getattr(torch, dtype))
            ta, tb = (ta.t() if a_t else ta), (tb.t() if b_t else tb)
            results["torch"][case] = framework_event_seconds(torch, lambda ta=ta, tb=tb: ta @ tb, bursts, per_burst)
            del ta, tb
    use_path("auto")
    return results, flops, kernels


def main():
    args = gpu_suite_args("gemm", __doc__, "1024 and 4096 only, fewer bursts")
    if args is None:
        return 0
    from adcuda.backends.cuda import gemm as cuda_gemm

    print(f"{adcuda.cuda.get_device_name()}: {cuda_gemm.gemm_selection().reason}; {cuda_gemm.gemm_path()}")
    if is_emulated():
        return emulated_reference_run("gemm", args.json, [lambda: check_against_numpy("handwritten")])
    check_against_numpy("handwritten")
    if use_path("cublaslt"):
        check_against_numpy("cublaslt")
    cases = [c for c in CASES if c[0] in QUICK] if args.quick else list(CASES)
    results, flops, kernels = measure(cases, bursts=3 if args.quick else 7)
    rows = print_table(
        "GEMM time per product (CUDA events; torch = cuBLAS, fp32 without TF32)",
        results,
        unit="ms",
        scale=1e3,
        baseline="adcuda hand-written",
    )
    print(
        "\nTFLOP/s, and each adcuda path as % of torch, [the hand-written kernel that ran] (targets: hand-written "
        ">= 80% at 4096^3 bf16 and >= 50% on the GPT-2 shapes; cuBLASLt >= 95%):"
    )
    for case in flops:
        line = f"  {case:<52}"
        theirs = results.get("torch", {}).get(case)
        for who, cases_of in results.items():
            seconds = cases_of.get(case)
            if seconds:
                line += f" {who} {flops[case] / seconds / 1e12:7.1f}"
                if who != "torch" and theirs:
                    line += f" ({100 * theirs / seconds:5.1f}%)"
        if case in kernels:
            line += f" [{kernels[case]}]"
        print(line)
    write_report(
        args.json,
        {
            "suite": "gemm",
            "device": "cuda",
            "gemm_kernels": cuda_gemm.gemm_path(),
            "kernel_ran": kernels,
            "rows": rows,
            "tflops": {
                who: {case: flops[case] / s / 1e12 for case, s in cases.items()} for who, cases in results.items()
            },
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
