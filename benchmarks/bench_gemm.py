"""adcuda's hand-written GEMM kernels against cuBLAS (through PyTorch and CuPy): TFLOP/s of square
products from 1024 to 8192 in fp32 (cuBLAS without TF32: the same arithmetic), fp16 and bf16, plus
the transposed layouts that linear layers and their backward multiply.

    python benchmarks/bench_gemm.py [--quick] [--json out.json]

Needs a GPU; elsewhere it says so and exits 0. First every dtype and layout is checked against a
NumPy float64 product on a small odd-sized problem (the benchmark stops if one is off); then each
product is timed with CUDA events around a burst of launches (median of several bursts), all
contenders in this process. Targets on an H200: tensor-core GEMM >= 60% of cuBLAS at 4096^3, fp32
GEMM >= 70% of cuBLAS SGEMM.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import cuda_event_seconds, print_table  # noqa: E402

import numpy as np  # noqa: E402

import adcuda  # noqa: E402

DTYPES = ("float32", "float16", "bfloat16")
# (name, A transposed, B transposed): x @ W^T is a linear layer's forward, g^T @ x its weight gradient
LAYOUTS = (("NN", False, False), ("NT", False, True), ("TN", True, False))


def optional_module(name):
    try:
        module = __import__(name)
    except ImportError:
        return None
    if name == "torch" and not module.cuda.is_available():
        return None
    return module


def adcuda_timer(fn, bursts, per_burst):
    def record():
        event = adcuda.cuda.Event(enable_timing=True)
        event.record()
        return event
    return cuda_event_seconds(record, adcuda.cuda.synchronize, lambda s, e: s.elapsed_time(e), fn, bursts=bursts,
                              per_burst=per_burst)


def torch_timer(torch, fn, bursts, per_burst):
    def record():
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
    return cuda_event_seconds(record, torch.cuda.synchronize, lambda s, e: s.elapsed_time(e), fn, bursts=bursts,
                              per_burst=per_burst)


def cupy_timer(cp, fn, bursts, per_burst):
    def record():
        event = cp.cuda.Event()
        event.record()
        return event
    return cuda_event_seconds(record, cp.cuda.Device().synchronize, lambda s, e: cp.cuda.get_elapsed_time(s, e), fn,
                              bursts=bursts, per_burst=per_burst)


def adcuda_operand(host, dtype, transposed):
    """A device tensor holding `host` (a float32 array), transposed as a view when asked (the kernel
    then reads it through swapped strides)."""
    stored = host.T.copy() if transposed else host
    t = adcuda.tensor(stored, device="cuda").to(dtype=getattr(adcuda, dtype))
    return t.mT if transposed else t


def check_against_numpy():
    """Every dtype and layout on an odd-sized problem against NumPy in float64."""
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
    print(f"reference check: every dtype and layout matches NumPy on {m}x{k}x{n}")


def measure(sizes, bursts):
    torch, cp = optional_module("torch"), optional_module("cupy")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False  # SGEMM against SGEMM
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    results = {"adcuda": {}}
    if torch is not None:
        results["torch"] = {}
    if cp is not None:
        results["cupy"] = {}
    flops = {}
    rng = np.random.default_rng(1)
    for size in sizes:
        a_host = rng.standard_normal((size, size)).astype(np.float32)
        b_host = rng.standard_normal((size, size)).astype(np.float32)
        per_burst = max(2, int(4e12 / (2 * size ** 3)))  # about 4 TFLOP per burst
        for dtype in DTYPES:
            layouts = LAYOUTS if size == 4096 else LAYOUTS[:1]
            for name, a_t, b_t in layouts:
                case = f"{dtype} {size}^3 {name}"
                flops[case] = 2.0 * size ** 3
                a, b = adcuda_operand(a_host, dtype, a_t), adcuda_operand(b_host, dtype, b_t)
                results["adcuda"][case] = adcuda_timer(lambda: a @ b, bursts, per_burst)
                if torch is not None:
                    ta = torch.from_numpy(a_host).cuda().to(getattr(torch, dtype))
                    tb = torch.from_numpy(b_host).cuda().to(getattr(torch, dtype))
                    ta, tb = (ta.t().contiguous().t() if a_t else ta), (tb.t().contiguous().t() if b_t else tb)
                    results["torch"][case] = torch_timer(torch, lambda: ta @ tb, bursts, per_burst)
                if cp is not None and dtype != "bfloat16":  # CuPy has no bfloat16
                    ca, cb = cp.asarray(a_host, dtype=dtype), cp.asarray(b_host, dtype=dtype)
                    ca, cb = (cp.asfortranarray(ca) if a_t else ca), (cp.asfortranarray(cb) if b_t else cb)
                    results["cupy"][case] = cupy_timer(cp, lambda: ca @ cb, bursts, per_burst)
        del a_host, b_host
    return results, flops


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1024 and 4096 only, fewer bursts")
    parser.add_argument("--json")
    args = parser.parse_args()
    if not adcuda.cuda.is_available():
        print(f"bench_gemm needs a GPU: {adcuda.cuda.unavailable_reason()}")
        return 0
    adcuda.init_cuda_context()
    from adcuda.backends.cuda import gemm
    print(f"{adcuda.cuda.get_device_name()}: {gemm.gemm_path()}")
    check_against_numpy()
    sizes = (1024, 4096) if args.quick else (1024, 2048, 4096, 8192)
    results, flops = measure(sizes, bursts=3 if args.quick else 7)
    rows = print_table("GEMM time per product (CUDA events; cuBLAS via torch/cupy, fp32 without TF32)", results,
                       unit="ms", scale=1e3)
    print("\nTFLOP/s (adcuda as % of each cuBLAS contender):")
    for case, seconds in results["adcuda"].items():
        line = f"  {case:<26} adcuda {flops[case] / seconds / 1e12:7.1f}"
        for who in ("torch", "cupy"):
            theirs = results.get(who, {}).get(case)
            if theirs:
                line += f"   {who} {flops[case] / theirs / 1e12:7.1f} ({100 * theirs / seconds:5.1f}%)"
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "gemm", "device": "cuda", "gemm_path": gemm.gemm_path(), "rows": rows,
                       "tflops": {who: {case: flops[case] / s / 1e12 for case, s in cases.items()}
                                  for who, cases in results.items()}}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
