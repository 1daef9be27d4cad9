"""The CUDA runtime against PyTorch's and CuPy's: host->device bandwidth from pageable and from pinned
memory, and allocation latency of the caching allocator (against cudaMalloc/cudaFree and the other
libraries' pools).

    python benchmarks/bench_cuda_runtime.py [--quick] [--json out.json]

Needs a GPU; elsewhere it says so and exits 0. All contenders run in one process (each keeps its own
caches); every copy is timed to completion (the stream is synchronised inside the timed call).
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import median_time, print_table  # noqa: E402

import numpy as np  # noqa: E402

import adcuda  # noqa: E402


def _optional(name):
    try:
        module = __import__(name)
    except ImportError:
        return None
    if name == "torch" and not module.cuda.is_available():
        return None
    return module


def copy_cases(nbytes, repeat):
    from adcuda.backends import cuda as bk
    host = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
    pinned = adcuda.from_numpy(host).pin_memory()
    stream = adcuda.cuda.current_stream()
    label = f"{nbytes >> 20} MiB"
    results = {"adcuda": {
        f"H2D {label} pageable": median_time(lambda: (bk.from_numpy(host, adcuda.float32), stream.synchronize()),
                                             repeat=repeat),
        f"H2D {label} pinned": median_time(lambda: (pinned.to("cuda", non_blocking=True), stream.synchronize()),
                                           repeat=repeat),
    }}
    torch = _optional("torch")
    if torch is not None:
        source, source_pinned = torch.from_numpy(host), torch.from_numpy(host).pin_memory()
        results["torch"] = {
            f"H2D {label} pageable": median_time(lambda: (source.to("cuda"), torch.cuda.synchronize()),
                                                 repeat=repeat),
            f"H2D {label} pinned": median_time(
                lambda: (source_pinned.to("cuda", non_blocking=True), torch.cuda.synchronize()), repeat=repeat),
        }
    cp = _optional("cupy")
    if cp is not None:
        import cupyx
        target = cp.empty(host.shape, dtype=cp.float32)
        host_pinned = cupyx.empty_pinned(host.shape, dtype=np.float32)
        host_pinned[...] = host
        results["cupy"] = {
            f"H2D {label} pageable": median_time(lambda: (target.set(host), cp.cuda.Device().synchronize()),
                                                 repeat=repeat),
            f"H2D {label} pinned": median_time(lambda: (target.set(host_pinned), cp.cuda.Device().synchronize()),
                                               repeat=repeat),
        }
    return results


def allocation_cases(sizes, repeat):
    from adcuda import _native
    C = _native._C
    scalar = C.ScalarType.bool
    results = {"adcuda": {}}
    torch, cp = _optional("torch"), _optional("cupy")
    if torch is not None:
        results["torch"] = {}
    if cp is not None:
        results["cupy"] = {}
    for nbytes in sizes:
        label = f"{nbytes >> 10} KiB" if nbytes < 1 << 20 else f"{nbytes >> 20} MiB"
        case = f"alloc+free {label} (cached)"
        results["adcuda"][case] = median_time(lambda: C.DeviceArray.empty((nbytes,), scalar), repeat=repeat)
        results["adcuda"][f"alloc+free {label} cudaMalloc"] = median_time(
            lambda: C.raw_free(C.raw_malloc(nbytes, 0), 0), repeat=repeat)
        if torch is not None:
            results["torch"][case] = median_time(lambda: torch.empty(nbytes, dtype=torch.uint8, device="cuda"),
                                                 repeat=repeat)
        if cp is not None:
            results["cupy"][case] = median_time(lambda: cp.cuda.alloc(nbytes), repeat=repeat)
    return results


def merge(*parts):
    merged = {}
    for part in parts:
        for contender, cases in part.items():
            merged.setdefault(contender, {}).update(cases)
    return merged


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", default="cuda", choices=("cuda",))
    parser.add_argument("--json")
    args = parser.parse_args()
    if not adcuda.cuda.is_available():
        print(f"bench_cuda_runtime needs a GPU: {adcuda.cuda.unavailable_reason()}")
        return 0
    adcuda.init_cuda_context()
    repeat = 5 if args.quick else 9
    sizes = (1 << 20, 64 << 20) if args.quick else (1 << 20, 64 << 20, 256 << 20)
    copies = merge(*(copy_cases(n, repeat) for n in sizes))
    rows = print_table(f"host->device copies on {adcuda.cuda.get_device_name()} (time per copy, to completion)",
                       copies, unit="ms", scale=1e3)
    print("\nbandwidth (GB/s):")
    for case in copies["adcuda"]:
        nbytes = int(case.split()[1]) << 20
        line = "  ".join(f"{who} {nbytes / cases[case] / 1e9:6.1f}" for who, cases in copies.items() if case in cases)
        print(f"  {case:<26} {line}")
    allocations = allocation_cases((4 << 10, 1 << 20, 64 << 20), repeat)
    rows += print_table("allocation + free (the array is dropped at once)", allocations, unit="us", scale=1e6)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "cuda_runtime", "device": "cuda", "rows": rows,
                       "allocator": adcuda.cuda.memory_stats(), "pinned_pool": adcuda.cuda.pinned_memory_stats()},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
