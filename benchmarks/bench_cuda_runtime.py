"""The CUDA runtime against PyTorch's and CuPy's: host<->device bandwidth from pageable and from
pinned memory, the device-to-device copy bandwidth (the yardstick of every memory-bound kernel), and
allocation latency of the caching allocator (against cudaMalloc/cudaFree and the other libraries' pools).

    python benchmarks/bench_cuda_runtime.py [--quick] [--json out.json]

Bandwidth cases move BANDWIDTH_BYTES (256 MiB) or more, so DRAM and the host link are measured, not
the L2 cache; the device-to-device copies are timed with CUDA events, the host<->device copies to
completion (the stream is synchronised inside the timed call). All contenders run in one process (each
keeps its own caches). Needs a GPU; elsewhere it says so and exits 0. In the emulated build
(ADCUDA_CUDA=EMULATE) it checks every path at small sizes and reports "emulated: no timing".
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from _harness import (  # noqa: E402
    BANDWIDTH_BYTES,
    adcuda_event_seconds,
    copy_bandwidth,
    cuda_event_seconds,
    emulated_reference_run,
    format_bandwidth,
    gpu_suite_args,
    is_emulated,
    median_time,
    print_table,
    write_report,
)

import adcuda  # noqa: E402


def _optional(name):
    try:
        module = __import__(name)
    except ImportError:
        return None
    try:
        if name == "torch":
            return module if module.cuda.is_available() else None
        return module if module.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # a CuPy without a usable driver raises its own errors
        return None


def _label(nbytes):
    return f"{nbytes >> 10} KiB" if nbytes < 1 << 20 else f"{nbytes >> 20} MiB"


def host_copy_cases(nbytes, repeat):
    """Host->device and device->host copies of ``nbytes``, pageable and pinned, each to completion."""
    from adcuda.backends import cuda as bk

    host = np.random.default_rng(0).standard_normal(nbytes // 4).astype(np.float32)
    pinned = adcuda.from_numpy(host).pin_memory()
    device = bk.from_numpy(host, adcuda.float32)
    back = np.empty_like(host)
    C = adcuda._native._C
    stream = adcuda.cuda.current_stream()
    label = _label(nbytes)
    results = {
        "adcuda": {
            f"H2D {label} pageable": median_time(
                lambda: (bk.from_numpy(host, adcuda.float32), stream.synchronize()), repeat=repeat
            ),
            f"H2D {label} pinned": median_time(
                lambda: (pinned.to("cuda", non_blocking=True), stream.synchronize()), repeat=repeat
            ),
            f"D2H {label} pageable": median_time(lambda: C.copy_device_to_host(back, device), repeat=repeat),
        }
    }
    torch = _optional("torch")
    if torch is not None:
        source, source_pinned = torch.from_numpy(host), torch.from_numpy(host).pin_memory()
        on_device = source.to("cuda")
        results["torch"] = {
            f"H2D {label} pageable": median_time(lambda: (source.to("cuda"), torch.cuda.synchronize()), repeat=repeat),
            f"H2D {label} pinned": median_time(
                lambda: (source_pinned.to("cuda", non_blocking=True), torch.cuda.synchronize()), repeat=repeat
            ),
            f"D2H {label} pageable": median_time(lambda: on_device.cpu(), repeat=repeat),
        }
    cp = _optional("cupy")
    if cp is not None:
        import cupyx

        target = cp.empty(host.shape, dtype=cp.float32)
        host_pinned = cupyx.empty_pinned(host.shape, dtype=np.float32)
        host_pinned[...] = host
        results["cupy"] = {
            f"H2D {label} pageable": median_time(
                lambda: (target.set(host), cp.cuda.Device().synchronize()), repeat=repeat
            ),
            f"H2D {label} pinned": median_time(
                lambda: (target.set(host_pinned), cp.cuda.Device().synchronize()), repeat=repeat
            ),
            f"D2H {label} pageable": median_time(lambda: target.get(), repeat=repeat),
        }
    return results


def device_copy_cases(nbytes, bursts):
    """Device-to-device copies of a contiguous float32 array of ``nbytes`` (CUDA-event medians)."""
    C = adcuda._native._C
    numel = nbytes // 4
    source = C.arange(0, 1, numel, C.ScalarType.float32)
    target = C.DeviceArray.empty((numel,), C.ScalarType.float32)
    case = f"D2D {_label(nbytes)} float32"
    results = {"adcuda": {case: adcuda_event_seconds(lambda: C.copy_(target, source), bursts=bursts)}}
    torch = _optional("torch")
    if torch is not None:
        a, b = torch.arange(numel, dtype=torch.float32, device="cuda"), torch.empty(numel, device="cuda")

        def record():
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event

        results["torch"] = {
            case: cuda_event_seconds(
                record, torch.cuda.synchronize, lambda s, e: s.elapsed_time(e), lambda: b.copy_(a), bursts, 5
            )
        }
    cp = _optional("cupy")
    if cp is not None:
        a, b = cp.arange(numel, dtype=cp.float32), cp.empty(numel, dtype=cp.float32)

        def record():
            event = cp.cuda.Event()
            event.record()
            return event

        results["cupy"] = {
            case: cuda_event_seconds(
                record,
                cp.cuda.Device().synchronize,
                lambda s, e: cp.cuda.get_elapsed_time(s, e),
                lambda: b.__setitem__(Ellipsis, a),
                bursts,
                5,
            )
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
        case = f"alloc+free {_label(nbytes)} (cached)"
        results["adcuda"][case] = median_time(lambda n=nbytes: C.DeviceArray.empty((n,), scalar), repeat=repeat)
        results["adcuda"][f"alloc+free {_label(nbytes)} cudaMalloc"] = median_time(
            lambda n=nbytes: C.raw_free(C.raw_malloc(n, 0), 0), repeat=repeat
        )
        if torch is not None:
            results["torch"][case] = median_time(
                lambda n=nbytes: torch.empty(n, dtype=torch.uint8, device="cuda"), repeat=repeat
            )
        if cp is not None:
            results["cupy"][case] = median_time(lambda n=nbytes: cp.cuda.alloc(n), repeat=repeat)
    return results


def _bytes_of(case):
    """The bytes of a case named "<what> <n> MiB ..." or "<what> <n> KiB ..."."""
    words = case.split()
    return int(words[1]) << (20 if words[2] == "MiB" else 10)


def merge(*parts):
    merged = {}
    for part in parts:
        for contender, cases in part.items():
            merged.setdefault(contender, {}).update(cases)
    return merged


def reference_checks():
    """Every path the timed cases take, at small odd sizes, against NumPy."""
    from adcuda.backends import cuda as bk

    C = adcuda._native._C

    def host_copies():
        host = np.random.default_rng(1).standard_normal(1023).astype(np.float32)
        pinned = adcuda.from_numpy(host).pin_memory()
        back = np.empty_like(host)
        C.copy_device_to_host(back, bk.from_numpy(host, adcuda.float32))
        moved = pinned.to("cuda", non_blocking=True).cpu().numpy()
        if not (np.array_equal(back, host) and np.array_equal(moved, host)):
            raise SystemExit("bench_cuda_runtime: a host<->device copy is wrong")

    def device_copy():
        rate = copy_bandwidth(nbytes=4 * 1031, bursts=1)  # checks the copy it times
        if not rate > 0:
            raise SystemExit("bench_cuda_runtime: the copy bandwidth is not positive")

    def allocation():
        before = adcuda.cuda.memory_stats()["allocation.all.allocated"]
        for nbytes in (1, 4 << 10, 1 << 20, (1 << 20) + 1):
            C.DeviceArray.empty((nbytes,), C.ScalarType.bool)
        C.raw_free(C.raw_malloc(4096, 0), 0)
        if adcuda.cuda.memory_stats()["allocation.all.allocated"] - before != 4:
            raise SystemExit("bench_cuda_runtime: the allocator did not count four allocations")

    return [host_copies, device_copy, allocation]


def main():
    args = gpu_suite_args(
        "cuda_runtime", __doc__, "fewer repeats and sizes (bandwidth sizes stay >= 256 MiB)", device_option=True
    )
    if args is None:
        return 0
    if is_emulated():
        return emulated_reference_run("cuda_runtime", args.json, reference_checks())
    for check in reference_checks():
        check()
    repeat, bursts = (5, 3) if args.quick else (9, 7)
    sizes = (BANDWIDTH_BYTES,) if args.quick else (BANDWIDTH_BYTES, 4 * BANDWIDTH_BYTES)
    copy_rate = copy_bandwidth(BANDWIDTH_BYTES, bursts=bursts)
    device_copies = merge(*(device_copy_cases(n, bursts) for n in sizes))
    rows = print_table(
        f"device-to-device copies on {adcuda.cuda.get_device_name()} (time per copy, CUDA events)",
        device_copies,
        unit="ms",
        scale=1e3,
    )
    host_copies = merge(*(host_copy_cases(n, repeat) for n in sizes))
    rows += print_table("host<->device copies (time per copy, to completion)", host_copies, unit="ms", scale=1e3)
    moved = {}
    for case in device_copies["adcuda"]:
        moved[case] = 2 * _bytes_of(case)  # read and written
    for case in host_copies["adcuda"]:
        moved[case] = _bytes_of(case)
    print(
        f"\nbandwidth (the device-to-device copy of {BANDWIDTH_BYTES >> 20} MiB moves {copy_rate / 1e9:.0f} GB/s, "
        "read plus written):"
    )
    for copies, of_copy in ((device_copies, True), (host_copies, False)):
        for case in copies["adcuda"]:
            cells = [
                f"{who} "
                + (
                    format_bandwidth(moved[case], seconds[case], copy_rate)
                    if of_copy
                    else f"{moved[case] / seconds[case] / 1e9:8.1f} GB/s"
                )
                for who, seconds in copies.items()
                if case in seconds
            ]
            print(f"  {case:<26} " + "   ".join(cells))
    allocations = allocation_cases((4 << 10, 1 << 20, 64 << 20), repeat)
    rows += print_table("allocation + free (the array is dropped at once)", allocations, unit="us", scale=1e6)
    write_report(
        args.json,
        {
            "suite": "cuda_runtime",
            "device": "cuda",
            "rows": rows,
            "copy_bandwidth_bytes_per_s": copy_rate,
            "bytes_moved": moved,
            "allocator": adcuda.cuda.memory_stats(),
            "pinned_pool": adcuda.cuda.pinned_memory_stats(),
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
