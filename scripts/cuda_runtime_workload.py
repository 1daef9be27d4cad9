"""A small multi-threaded program over the CUDA runtime, for compute-sanitizer (memcheck, racecheck):
every thread allocates, fills, casts, copies strided views, moves data host<->device (pageable and
pinned, blocking and not), hands arrays to another stream and back, and checks each result against
NumPy. Exits 0 when every result is right; scripts/gpu_check.sh runs it under the sanitizer."""
import sys
import threading

import numpy as np

import adcuda
from adcuda import _native
from adcuda.backends import cuda as bk

C = _native._C


def work(seed, failures):
    rng = np.random.default_rng(seed)
    side = adcuda.cuda.Stream()
    for step in range(8):
        host = rng.standard_normal((17, 33)).astype(np.float32)
        x = bk.from_numpy(host, adcuda.float32)
        y = bk.astype(bk.flip(bk.permute(x, (1, 0)), (0,)), adcuda.float16)
        with adcuda.cuda.stream(side):
            z = bk.full((33, 17), float(step), adcuda.float64)
            bk.copy_(bk.slice(z, (slice(None, None, 2),)), bk.slice(y, (slice(None, None, 2),)))
        expected = np.full((33, 17), float(step))
        expected[::2] = np.flip(host.T, 0).astype(np.float16)[::2]
        if not np.array_equal(bk.to_numpy(z), expected):
            failures.append(f"thread {seed} step {step}: strided copy across streams")
        pinned = adcuda.from_numpy(host).pin_memory()
        moved = pinned.to("cuda", non_blocking=True)
        shared = adcuda.from_dlpack(moved)
        if shared.cpu().tolist() != pinned.tolist():
            failures.append(f"thread {seed} step {step}: pinned non-blocking copy / DLPack")
        ints = bk.arange(0, 1000, 3, adcuda.int64)
        if not np.array_equal(bk.to_numpy(bk.astype(ints, adcuda.int32)), np.arange(0, 1000, 3)):
            failures.append(f"thread {seed} step {step}: arange/astype")


def main():
    if not adcuda.cuda.is_available():
        print(f"needs a GPU: {adcuda.cuda.unavailable_reason()}")
        return 0
    adcuda.init_cuda_context()
    failures = []
    threads = [threading.Thread(target=work, args=(seed, failures)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    adcuda.cuda.synchronize()
    adcuda.cuda.empty_cache()
    adcuda.cuda.empty_pinned_cache()
    print("\n".join(failures) or "cuda runtime workload: all results right")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
