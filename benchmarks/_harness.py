"""Shared machinery for the benchmarks: timing, one process per contender, ratio tables.

Each contender (adcuda, hand-written NumPy, PyTorch) runs in its own Python process so that thread
pools (OpenBLAS, PyTorch's intra-op pool) and allocator state never disturb each other; the parent
collects the medians as JSON and prints them side by side with ratios against adcuda.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def median_time(fn, *, repeat=7, min_time=0.05, warmup=3):
    """Median seconds per call of ``fn`` over ``repeat`` rounds of at least ``min_time`` each."""
    for _ in range(warmup):
        fn()
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time or number >= 1 << 20:
            break
        number *= 2
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def cuda_event_seconds(record, synchronize, elapsed, fn, bursts, per_burst):
    """Median seconds per call of ``fn`` over ``bursts`` bursts of ``per_burst`` calls, each burst
    bracketed by two CUDA events (``record()`` returns a recorded event, ``elapsed(start, end)`` the
    milliseconds between two), so host launch overhead overlaps the GPU work as in a real loop."""
    for _ in range(3):
        fn()
    synchronize()
    times = []
    for _ in range(bursts):
        start = record()
        for _ in range(per_burst):
            fn()
        end = record()
        synchronize()
        times.append(elapsed(start, end) / 1e3 / per_burst)
    return statistics.median(times)


def contender_available(name):
    if name == "torch":
        try:
            import importlib.util
            return importlib.util.find_spec("torch") is not None
        except ValueError:
            return False
    return True


def run_contenders(script, contenders, extra_args=(), timeout=900):
    """Run ``script --contender NAME --emit-json`` once per available contender; gather results."""
    results = {}
    for name in contenders:
        if not contender_available(name):
            print(f"  ({name} is not installed: skipped)", file=sys.stderr)
            continue
        cmd = [sys.executable, script, "--contender", name, "--emit-json", *extra_args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if proc.returncode != 0:
            print(f"  {name} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        results[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


def print_table(title, results, unit="us", scale=1e6, baseline="adcuda"):
    """Rows = cases, columns = contenders' medians, then each contender's time / adcuda's time."""
    names = list(results)
    cases = list(next(iter(results.values())).keys()) if results else []
    others = [n for n in names if n != baseline]
    head = f"{'case':<34}" + "".join(f"{n + ' ' + unit:>14}" for n in names) + "".join(
        f"{baseline + '/' + n:>16}" for n in others)
    print(f"\n{title}\n{head}\n{'-' * len(head)}")
    rows = []
    for case in cases:
        vals = {n: results[n].get(case) for n in names}
        line = f"{case:<34}" + "".join(f"{vals[n] * scale:>14.2f}" if vals[n] is not None else f"{'-':>14}"
                                       for n in names)
        ratios = {}
        for n in others:
            if vals.get(baseline) and vals[n]:
                ratios[n] = vals[baseline] / vals[n]
                line += f"{ratios[n]:>15.2f}x"
            else:
                line += f"{'-':>16}"
        print(line)
        rows.append({"case": case, "seconds": vals, "ratio_adcuda_over": ratios})
    return rows


def contender_main(cases_for):
    """Entry point of a benchmark script run as one contender: print its medians as JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--contender", required=True)
    parser.add_argument("--emit-json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args, _ = parser.parse_known_args()
    cases = cases_for(args.contender, quick=args.quick)
    out = {name: median_time(fn, repeat=5 if args.quick else 9) for name, fn in cases.items()}
    print(json.dumps(out))


def single_thread_env():
    """Pin BLAS and PyTorch to the same thread count in every contender's process."""
    threads = os.environ.get("BENCH_THREADS", "1")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, threads)
    return int(threads)
