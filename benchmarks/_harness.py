"""Shared machinery for the benchmarks: timing, one process per contender, ratio tables, and the
GPU bandwidth yardstick.

Each contender (adcuda, hand-written NumPy, PyTorch) runs in its own Python process so that thread
pools (OpenBLAS, PyTorch's intra-op pool) and allocator state never disturb each other; the parent
collects the medians as JSON and prints them side by side with ratios against adcuda.

A memory-bound GPU kernel is judged against the device-to-device copy bandwidth measured in the same
run (``copy_bandwidth``), on arrays of at least ``BANDWIDTH_BYTES`` so that DRAM, not the L2 cache,
is measured (``percent_of_copy``, ``format_bandwidth``). In the emulated build (``is_emulated``)
kernels run on the CPU: a suite runs its reference checks at small sizes and reports
``EMULATED_NO_TIMING`` instead of figures (``emulated_reference_run``).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# Each operand of a bandwidth case holds at least this many bytes: four times the largest L2 cache of
# a current GPU (the H100's and H200's 50-60 MB), so a kernel that re-reads its input still measures
# DRAM, not L2.
BANDWIDTH_BYTES = 256 << 20

# What an emulated run reports in place of a time.
EMULATED_NO_TIMING = "emulated: no timing"


def smoke():
    """Whether this is a smoke run (``benchmarks/run.py --smoke``, as CI runs it, sets ``BENCH_SMOKE=1``):
    every case is timed once, which checks that each suite runs end to end; its figures mean nothing."""
    return os.environ.get("BENCH_SMOKE") == "1"


def median_time(fn, *, repeat=7, min_time=0.05, warmup=3, clock=time.perf_counter):
    """Median seconds per call of ``fn`` over ``repeat`` rounds of at least ``min_time`` each, read on
    ``clock`` (wall time by default; ``time.process_time``, the process's CPU time, for single-threaded
    contenders on a machine shared with other work). A smoke run times one call."""
    if smoke():
        repeat, min_time, warmup = 1, 0.0, 1
    for _ in range(warmup):
        fn()
    number = 1
    while True:
        start = clock()
        for _ in range(number):
            fn()
        elapsed = clock() - start
        if elapsed >= min_time or number >= 1 << 20:
            break
        number *= 2
    rounds = []
    for _ in range(repeat):
        start = clock()
        for _ in range(number):
            fn()
        rounds.append((clock() - start) / number)
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


def run_contenders(script, contenders, extra_args=(), timeout=900, rounds=1, interpreters=None):
    """Run ``script --contender NAME --emit-json`` once per available contender; gather results.

    With ``rounds`` > 1 each contender runs that many times, the contenders taking turns (so a burst
    of load on a shared machine falls on all of them alike), and each case keeps its best time.
    ``interpreters`` adds contenders run by another Python: ``{label: (python, contender)}``, e.g. the
    adcuda of another checkout, for before/after figures from one run."""
    runs = [(name, sys.executable, name) for name in contenders if _available_or_say(name)]
    runs += [(label, python, contender) for label, (python, contender) in (interpreters or {}).items()]
    results = {}
    for _ in range(rounds):
        for label, python, contender in runs:
            cmd = [python, script, "--contender", contender, "--emit-json", *extra_args]
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"}
            )
            if proc.returncode != 0:
                print(f"  {label} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            times = json.loads(proc.stdout.strip().splitlines()[-1])
            if label in results:
                _keep_best(results[label], times)
            else:
                results[label] = times
    return results


def _keep_best(best, times):
    """Fold one round's ``times`` into ``best``: each number keeps its minimum; a contender's result may
    nest its figures in dicts (bench_amp's ``{"times": ..., "memory": ...}``), which fold alike."""
    for case, value in times.items():
        kept = best.get(case)
        if isinstance(kept, dict) and isinstance(value, dict):
            _keep_best(kept, value)
        elif isinstance(kept, (int, float)) and isinstance(value, (int, float)):
            best[case] = min(kept, value)
        elif kept is None:
            best[case] = value


def _available_or_say(name):
    if contender_available(name):
        return True
    print(f"  ({name} is not installed: skipped)", file=sys.stderr)
    return False


def print_table(title, results, unit="us", scale=1e6, baseline="adcuda"):
    """Rows = cases, columns = contenders' medians, then each contender's time / adcuda's time."""
    names = list(results)
    cases = list(next(iter(results.values())).keys()) if results else []
    others = [n for n in names if n != baseline]
    head = (
        f"{'case':<34}"
        + "".join(f"{n + ' ' + unit:>14}" for n in names)
        + "".join(f"{baseline + '/' + n:>16}" for n in others)
    )
    print(f"\n{title}\n{head}\n{'-' * len(head)}")
    rows = []
    for case in cases:
        vals = {n: results[n].get(case) for n in names}
        line = f"{case:<34}" + "".join(
            f"{vals[n] * scale:>14.2f}" if vals[n] is not None else f"{'-':>14}" for n in names
        )
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


def print_ms_table(what, results):
    """``print_table`` in milliseconds, titled ``what`` and the thread count each contender ran with."""
    title = f"{what} ({os.environ.get('BENCH_THREADS', '1')} thread(s)); ratio > 1: adcuda slower"
    return print_table(title, results, unit="ms", scale=1e3)


def run_contenders_on_device(script, suite, args, reference_checks):
    """``run_contenders`` of adcuda and PyTorch on ``args.device`` (a suite_parser(device=True) command
    line); None where a ``--device cuda`` run goes no further here (see ``timed_on_this_gpu``)."""
    if args.device == "cuda" and not timed_on_this_gpu(suite, args.json, reference_checks):
        return None
    results = run_contenders(
        script, ["adcuda", "torch"], ["--device", args.device] + (["--quick"] if args.quick else [])
    )
    if not results:
        sys.exit("no contender ran")
    return results


def run_contenders_under_load(script, contenders, extra_args, rounds, interpreters=None):
    """``run_contenders`` taking turns ``rounds`` times, and the line that says the machine's load while
    they ran (a CPU-time comparison on a shared machine is read with it)."""
    load = os.getloadavg()
    results = run_contenders(script, contenders, extra_args, rounds=rounds, interpreters=interpreters)
    after = os.getloadavg()
    return results, f"load average (1 min) {load[0]:.2f} at the start, {after[0]:.2f} at the end; best of {rounds}"


BEFORE = "adcuda before"  # the contender --before PYTHON adds: adcuda as another checkout imports it


def print_before_after(results, unit="us", scale=1e6, case_width=34):
    """Both adcudas (``BEFORE`` and "adcuda") against PyTorch, from the same run: the before/after
    figures a change is judged by."""
    head = (
        f"{'case':<{case_width}}{'torch ' + unit:>10}{'before ' + unit:>11}{'after ' + unit:>10}"
        f"{'before/torch':>14}{'after/torch':>13}"
    )
    print(f"\nBefore and after, against PyTorch (same run)\n{head}\n{'-' * len(head)}")
    for case, torch_s in results.get("torch", {}).items():
        before, after = results[BEFORE].get(case), results["adcuda"].get(case)
        if before is None or after is None:
            continue
        print(
            f"{case:<{case_width}}{torch_s * scale:>10.2f}{before * scale:>11.2f}{after * scale:>10.2f}"
            f"{before / torch_s:>13.2f}x{after / torch_s:>12.2f}x"
        )


def contender_main(cases_for, clock=time.perf_counter):
    """Entry point of a benchmark script run as one contender: print its medians (on ``clock``) as JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--contender", required=True)
    parser.add_argument("--emit-json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args, _ = parser.parse_known_args()
    cases = cases_for(args.contender, quick=args.quick)
    out = {name: median_time(fn, repeat=5 if args.quick else 9, clock=clock) for name, fn in cases.items()}
    print(json.dumps(out))


def device_contender_main(contender):
    """Entry point of a suite run as one contender on ``--device``: print what
    ``contender(name, device, quick)`` returns as JSON."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--contender", required=True)
    parser.add_argument("--emit-json", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(json.dumps(contender(args.contender, args.device, args.quick)))


def suite_parser(doc, *, device=False):
    """The command line every contender suite shares: ``--quick``, ``--device cpu|cuda`` (with
    ``device``), ``--threads`` and ``--json``; a suite adds its own options, then calls
    ``parse_suite_args``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    if device:
        parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=None, help="BLAS/PyTorch threads per contender")
    parser.add_argument("--json", help="write the results here")
    return parser


def parse_suite_args(parser):
    """``parser``'s arguments, with ``--threads`` passed on to every contender's process (``BENCH_THREADS``)."""
    args = parser.parse_args()
    if args.threads:
        os.environ["BENCH_THREADS"] = str(args.threads)
    return args


def single_thread_env():
    """Pin BLAS and PyTorch to the same thread count in every contender's process."""
    threads = os.environ.get("BENCH_THREADS", "1")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, threads)
    return int(threads)


def is_emulated():
    """Whether the installed adcuda is the emulated build (ADCUDA_CUDA=EMULATE): its "GPU" is the CPU
    emulator, where every kernel runs but no time means anything."""
    from adcuda import _native

    return bool(_native._C is not None and _native._C.build_info().get("cuda_emulated"))


def framework_event_seconds(framework, fn, bursts=5, per_burst=5):
    """``cuda_event_seconds`` with ``framework``'s events on its current stream (adcuda's and
    PyTorch's events have the same API)."""

    def record():
        event = framework.cuda.Event(enable_timing=True)
        event.record()
        return event

    return cuda_event_seconds(
        record, framework.cuda.synchronize, lambda start, end: start.elapsed_time(end), fn, bursts, per_burst
    )


def adcuda_event_seconds(fn, bursts=5, per_burst=5):
    """``cuda_event_seconds`` with adcuda's events on the current stream."""
    import adcuda

    return framework_event_seconds(adcuda, fn, bursts, per_burst)


def optional_cuda_torch():
    """PyTorch where it is installed and sees a GPU (the GPU suites' second contender), else None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def copy_bandwidth(nbytes=BANDWIDTH_BYTES, dtype="float32", bursts=5):
    """The device-to-device copy bandwidth in bytes per second (bytes read plus bytes written, per
    second) of a contiguous ``nbytes`` array of ``dtype`` through adcuda's runtime copy: the yardstick
    of every memory-bound kernel. The copy is checked once (a wrong copy would make a fast yardstick)."""
    import numpy as np

    from adcuda import _native
    from adcuda.backends import cuda as cb

    C = _native._C
    numel = nbytes // np.dtype(dtype).itemsize
    scalar = getattr(C.ScalarType, dtype)
    source = C.arange(0, 1, numel, scalar)
    target = C.DeviceArray.empty((numel,), scalar)
    C.copy_(target, source)
    ends = cb.to_numpy(target.as_strided((2,), (numel - 1,), 0))
    if ends.tolist() != np.array([0, numel - 1]).astype(dtype).tolist():
        raise SystemExit(f"copy_bandwidth: the reference copy is wrong (ends {ends.tolist()})")
    seconds = adcuda_event_seconds(lambda: C.copy_(target, source), bursts=bursts)
    return 2 * numel * np.dtype(dtype).itemsize / seconds


def percent_of_copy(bytes_moved, seconds, copy_rate):
    """A kernel's achieved bandwidth (``bytes_moved`` in ``seconds``) as a percentage of ``copy_rate``."""
    return 100.0 * bytes_moved / seconds / copy_rate


def format_bandwidth(bytes_moved, seconds, copy_rate):
    """``"2891.4 GB/s ( 86.2% of copy)"``: how a bandwidth case is printed in every suite."""
    return f"{bytes_moved / seconds / 1e9:8.1f} GB/s ({percent_of_copy(bytes_moved, seconds, copy_rate):5.1f}% of copy)"


def emulated_reference_run(suite, json_path, reference_checks):
    """What a GPU suite does in the emulated build: run ``reference_checks`` (callables that raise or
    exit non-zero when a result is wrong, at small sizes so the emulator finishes in seconds), print
    ``EMULATED_NO_TIMING`` and write ``{"suite", "device": "cuda", "emulated": true, "checks": n,
    "rows": []}`` to ``json_path``. Returns 0 (the exit code of the suite)."""
    for check in reference_checks:
        check()
    print(f"{suite}: {len(reference_checks)} reference check(s) passed on the emulator; {EMULATED_NO_TIMING}")
    write_report(
        json_path,
        {
            "suite": suite,
            "device": "cuda",
            "emulated": True,
            "status": EMULATED_NO_TIMING,
            "checks": len(reference_checks),
            "rows": [],
        },
    )
    return 0


def gpu_suite_args(suite, doc, quick_help, *, device_option=False):
    """The command line of ``bench_<suite>``, a suite that runs on a GPU only (``--quick``, ``--json``, and
    with ``device_option`` a ``--device`` whose one choice is cuda), with CUDA readied for it; None where
    no GPU is usable (it says why; the suite then exits 0)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    if device_option:
        parser.add_argument("--device", default="cuda", choices=("cuda",))
    parser.add_argument("--json")
    args = parser.parse_args()
    import adcuda

    if not adcuda.cuda.is_available():
        print(f"bench_{suite} needs a GPU: {adcuda.cuda.unavailable_reason()}")
        return None
    adcuda.init_cuda_context()
    return args


def timed_on_this_gpu(suite, json_path, reference_checks):
    """Whether a ``--device cuda`` run of ``bench_<suite>`` goes on to time: not where no GPU is usable
    (it says why), nor in the emulated build (it runs ``reference_checks``, see
    ``emulated_reference_run``)."""
    import adcuda.cuda

    if not adcuda.cuda.is_available():
        print(f"bench_{suite} --device cuda needs a usable GPU: {adcuda.cuda.unavailable_reason()}")
        return False
    if is_emulated():
        emulated_reference_run(suite, json_path, reference_checks)
        return False
    return True


def write_bandwidth_json(path, suite, rows, moved, copy_rate, bandwidth):
    """A GPU suite's report (its rows, the bytes each bandwidth case moved, the copy yardstick and the
    formatted bandwidths) to ``path``, where one is given."""
    write_report(
        path,
        {
            "suite": suite,
            "device": "cuda",
            "rows": rows,
            "bytes_moved": moved,
            "copy_bandwidth_bytes_per_s": copy_rate,
            "bandwidth": bandwidth,
        },
    )


def write_report(path, report):
    """A suite's JSON ``report`` to ``path`` (its ``--json``), where one is given."""
    if path:
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
