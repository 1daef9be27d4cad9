"""adcuda's tensor-core attention (kernels/attention_flash.cuh) against PyTorch's
scaled_dot_product_attention on one GPU: forward, and forward + backward.

    python benchmarks/bench_attention.py [--quick] [--json out.json]

Shapes (B, H, T, d): (8, 12, 1024, 64) (GPT-2 small) and (4, 16, 2048, 128), causal and not, fp16 and
bf16. PyTorch runs under torch.nn.attention.sdpa_kernel with its flash backend when that runs on this
GPU (else the first of efficient / cuDNN / math that does), and the table names the backend used.
TFLOP/s counts the matrix products as FlashAttention does: 4 B H T^2 d for the forward (halved when
causal), 2.5x that for the backward. Target (issue 29, the kernels in FlashAttention-2's shapes) on an
H100: forward + backward >= 0.9x PyTorch SDPA with its flash backend; the table says per case whether it
is met, and the JSON holds the ratios ("fwd+bwd adcuda/torch").

Before timing, the kernels are checked against the CPU backend on small odd shapes (every head-dim tile,
causal, a mask, dropout); the benchmark stops if one is off. adcuda is called through its backend
primitives (no autograd bookkeeping), PyTorch through torch.nn.functional: its forward + backward is
one sdpa call and one torch.autograd.grad. Times are CUDA-event medians over bursts of calls. Needs a
GPU; elsewhere it says so and exits 0 (run.py reports the suite as skipped).
"""

import math
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
    optional_cuda_torch,
    print_table,
    write_report,
)

import adcuda  # noqa: E402

SHAPES = ((8, 12, 1024, 64), (4, 16, 2048, 128))
# forward + backward time of PyTorch's SDPA (flash backend) over adcuda's: at least this on an H100
TARGET_FWD_BWD_SHARE = 0.9
QUICK_SHAPES = ((2, 8, 512, 64), (1, 8, 1024, 128))


# ---------------------------------------------------------------------------------------------
# reference check
def check_against_cpu(cb, cpu, native):
    """Every tensor-core head-dim tile, causal and not, a bool mask and dropout, fp16 and bf16, forward
    and backward, against the CPU backend on the same rounded inputs."""
    rng = np.random.default_rng(0)
    cases = [
        (adcuda.float16, (1, 2, 77, 32), None, False, 0.0),
        (adcuda.bfloat16, (1, 2, 77, 64), None, True, 0.0),
        (adcuda.float16, (1, 2, 77, 96), None, True, 0.0),
        (adcuda.bfloat16, (2, 1, 77, 128), None, False, 0.0),
        (adcuda.float16, (1, 2, 77, 64), rng.random((77, 77)) < 0.8, False, 0.0),
        (adcuda.float16, (1, 2, 77, 64), None, True, 0.1),
        # across the forward's 128-query and the backward's 128-key blocks, with dropout's 32-key steps
        (adcuda.bfloat16, (1, 2, 150, 128), None, True, 0.1),
    ]
    for dtype, shape, mask, causal, dropout_p in cases:
        host = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
        q, k, v, g = (cb.from_numpy(h, dtype) for h in host)
        if native.attention_kernel_path(q, v) != "tensor cores":
            raise SystemExit(f"reference check: {dtype} head dim {shape[-1]} does not run on tensor cores")
        qh, kh, vh, gh = (np.asarray(cb.to_numpy(a), np.float32) for a in (q, k, v, g))
        mask_d = None if mask is None else cb.from_numpy(mask, adcuda.bool)
        draw = (dropout_p, 7, 11)
        scale = 1.0 / math.sqrt(shape[-1])
        out, lse = cb.attention(q, k, v, mask_d, causal, scale, *draw)
        out_ref, lse_ref = cpu.attention(qh, kh, vh, mask, causal, scale, *draw)
        outh, lseh = (np.asarray(cb.to_numpy(a), np.float32) for a in (out, lse))
        grads = cb.attention_backward(g, q, k, v, out, lse, mask_d, causal, scale, *draw)
        refs = cpu.attention_backward(gh, qh, kh, vh, outh, lseh, mask, causal, scale, *draw)
        tolerance = 3e-2 if dtype is adcuda.bfloat16 else 5e-3
        for name, got, expected in [("out", out, out_ref), ("lse", lse, lse_ref)] + list(
            zip(("dq", "dk", "dv"), grads, refs)
        ):
            got = np.asarray(cb.to_numpy(got), np.float64)
            expected = np.asarray(expected, np.float64)
            scale_of = max(np.abs(expected).max(initial=0.0), 1.0)
            if not np.allclose(got, expected, rtol=tolerance, atol=tolerance * scale_of):
                raise SystemExit(
                    f"reference check failed: {name} of {dtype} {shape} causal={causal} "
                    f"mask={mask is not None} dropout={dropout_p}"
                )
    print(
        "reference check: tensor-core attention forward and backward (head dims 32/64/96/128, causal, mask, "
        "dropout; fp16 and bf16) match the CPU backend"
    )


# ---------------------------------------------------------------------------------------------
# PyTorch's backend
def torch_sdpa_backend(torch, q):
    """(name, context factory) of the SDPA backend PyTorch runs for these inputs: flash if it runs here,
    else the first of efficient / cuDNN / math that does."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    for backend in (
        SDPBackend.FLASH_ATTENTION,
        SDPBackend.EFFICIENT_ATTENTION,
        SDPBackend.CUDNN_ATTENTION,
        SDPBackend.MATH,
    ):
        try:
            with sdpa_kernel(backend):
                sdpa(q, q, q, is_causal=True)
            torch.cuda.synchronize()
        except RuntimeError:
            continue
        return backend.name, lambda backend=backend: sdpa_kernel(backend)
    raise SystemExit("no PyTorch SDPA backend runs on this GPU")


# ---------------------------------------------------------------------------------------------
# timing
def time_adcuda(cb, host, dtype, causal, scale, bursts):
    """(forward, forward + backward) seconds of adcuda's primitives on these inputs."""
    q, k, v, g = (cb.from_numpy(h, dtype) for h in host)
    out, lse = cb.attention(q, k, v, None, causal, scale)

    def forward():
        cb.attention(q, k, v, None, causal, scale)

    def forward_backward():
        cb.attention(q, k, v, None, causal, scale)
        cb.attention_backward(g, q, k, v, out, lse, None, causal, scale)

    return adcuda_event_seconds(forward, bursts, 3), adcuda_event_seconds(forward_backward, bursts, 3)


def time_torch(torch, host, type_name, causal, bursts):
    """(forward, forward + backward) seconds of PyTorch's SDPA, and the name of the backend it ran."""
    tq, tk, tv, tg = (torch.from_numpy(h).to("cuda", getattr(torch, type_name)) for h in host)
    name, backend = torch_sdpa_backend(torch, tq)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    leaves = [t.detach().requires_grad_(True) for t in (tq, tk, tv)]

    def forward():
        with torch.no_grad(), backend():
            sdpa(tq, tk, tv, is_causal=causal)

    def forward_backward():
        with backend():
            y = sdpa(*leaves, is_causal=causal)
        torch.autograd.grad(y, leaves, tg)

    return (
        framework_event_seconds(torch, forward, bursts, 3),
        framework_event_seconds(torch, forward_backward, bursts, 3),
        name,
    )


def attention_cases(cb, native, torch, quick, bursts):
    results = {"adcuda": {}}
    if torch is not None:
        results["torch"] = {}
    flops, backends, paths = {}, {}, {}
    for batch, heads, length, dim in QUICK_SHAPES if quick else SHAPES:
        rng = np.random.default_rng(dim)
        host = [rng.standard_normal((batch, heads, length, dim)).astype(np.float32) for _ in range(4)]
        scale = 1.0 / math.sqrt(dim)
        for dtype in (adcuda.float16, adcuda.bfloat16):
            probe_q, probe_v = (cb.from_numpy(h[:1, :1, :1], dtype) for h in (host[0], host[2]))
            for causal in (False, True):
                label = f"B{batch} H{heads} T{length} d{dim} {dtype.name}{' causal' if causal else ''}"
                forward_flops = 4.0 * batch * heads * length * length * dim * (0.5 if causal else 1.0)
                flops[f"fwd {label}"] = forward_flops
                flops[f"fwd+bwd {label}"] = 3.5 * forward_flops
                paths[label] = native.attention_kernel_path(probe_q, probe_v)
                (results["adcuda"][f"fwd {label}"], results["adcuda"][f"fwd+bwd {label}"]) = time_adcuda(
                    cb, host, dtype, causal, scale, bursts
                )
                if torch is not None:
                    (results["torch"][f"fwd {label}"], results["torch"][f"fwd+bwd {label}"], backends[label]) = (
                        time_torch(torch, host, dtype.name, causal, bursts)
                    )
    return results, flops, backends, paths


def print_throughput(results, flops, backends, paths):
    print("\nTFLOP/s (adcuda kernels; PyTorch SDPA backend; adcuda's share of PyTorch's throughput):")
    for case, seconds in results["adcuda"].items():
        label = case.split(" ", 1)[1]
        line = f"  {case:<44} adcuda {flops[case] / seconds / 1e12:7.1f} ({paths[label]})"
        theirs = results.get("torch", {}).get(case)
        if theirs:
            line += (
                f"   torch {flops[case] / theirs / 1e12:7.1f} ({backends[label]})"
                f"   adcuda/torch {theirs / seconds:6.1%}"
            )
        print(line)


def target_shares(results, backends):
    """{case: PyTorch's time / adcuda's} for the forward + backward cases PyTorch ran with flash."""
    shares = {}
    for case, seconds in results["adcuda"].items():
        theirs = results.get("torch", {}).get(case)
        label = case.split(" ", 1)[1]
        if case.startswith("fwd+bwd ") and theirs and "flash" in backends.get(label, "").lower():
            shares[case] = theirs / seconds
    return shares


def print_target(shares):
    print(f"\nTarget: forward + backward >= {TARGET_FWD_BWD_SHARE:.0%} of PyTorch SDPA flash (on an H100):")
    if not shares:
        print("  not measured here (no PyTorch with CUDA, or its flash backend did not run)")
    for case, share in shares.items():
        print(f"  {case:<44} {share:6.1%}  {'met' if share >= TARGET_FWD_BWD_SHARE else 'NOT met'}")


def main():
    args = gpu_suite_args("attention", __doc__, "smaller shapes, fewer bursts")
    if args is None:
        return 0
    from adcuda import _native
    from adcuda.backends import cpu
    from adcuda.backends import cuda as cb

    native = _native._C
    if is_emulated():  # the rehearsal: the reference check at its small sizes, no timing
        return emulated_reference_run("attention", args.json, [lambda: check_against_cpu(cb, cpu, native)])
    torch = optional_cuda_torch()
    check_against_cpu(cb, cpu, native)
    bursts = 3 if args.quick else 7
    results, flops, backends, paths = attention_cases(cb, native, torch, args.quick, bursts)
    rows = print_table(f"attention on {adcuda.cuda.get_device_name()} (time per call)", results, unit="ms", scale=1e3)
    print_throughput(results, flops, backends, paths)
    shares = target_shares(results, backends)
    print_target(shares)
    write_report(
        args.json,
        {
            "suite": "attention",
            "device": "cuda",
            "rows": rows,
            "flops": flops,
            "torch_sdpa_backend": backends,
            "adcuda_kernels": paths,
            "target": {"fwd+bwd adcuda/torch flash at least": TARGET_FWD_BWD_SHARE},
            "fwd+bwd adcuda/torch": shares,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
