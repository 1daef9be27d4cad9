"""adcuda's array-machinery kernels (elementwise, reductions, indexing, layout, sort/scan, random)
against PyTorch and CuPy on one GPU, llm.c's dev/cuda way.

    python benchmarks/bench_kernels.py [--quick] [--json out.json]

1. Reference check: every benchmarked primitive on small odd shapes against the CPU backend (the run
   stops if one is off).
2. Memory-bound kernels on tensors of 64 MiB and more: CUDA-event medians, the bytes each kernel must
   move (inputs read once, outputs written once), achieved GB/s and its share of the device-to-device
   copy bandwidth measured here (cudaMemcpyAsync through the runtime), side by side with PyTorch and
   CuPy on the same data. Targets: >= 80% of the copy bandwidth, and no case slower than 1.1x PyTorch.
3. Launch overhead on tiny tensors: host time per op (1-element add, sum, index) through the backend
   primitive and through the Tensor API, against PyTorch eager.

adcuda's kernels are called through the backend primitives (no autograd bookkeeping) except in the
Tensor-API overhead row. Needs a GPU; elsewhere it says so and exits 0.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from _harness import cuda_event_seconds, emulated_reference_run, is_emulated, print_table  # noqa: E402

import adcuda  # noqa: E402
from adcuda import dtypes as dt  # noqa: E402


def optional(module):
    try:
        mod = __import__(module)
    except ImportError:
        return None
    try:
        if module == "torch":
            return mod if mod.cuda.is_available() else None
        return mod if mod.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # a CuPy without a usable driver raises its own errors
        return None


def timers(torch, cupy):
    """{contender: (record, synchronize, elapsed)} for the event timing of each."""
    def adcuda_record():
        event = adcuda.cuda.Event(enable_timing=True)
        event.record()
        return event
    out = {"adcuda": (adcuda_record, adcuda.cuda.synchronize, lambda s, e: s.elapsed_time(e))}
    if torch is not None:
        def torch_record():
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        out["torch"] = (torch_record, torch.cuda.synchronize, lambda s, e: s.elapsed_time(e))
    if cupy is not None:
        def cupy_record():
            event = cupy.cuda.Event()
            event.record()
            return event
        out["cupy"] = (cupy_record, cupy.cuda.Device().synchronize,
                       lambda s, e: cupy.cuda.get_elapsed_time(s, e))
    return out


# ---------------------------------------------------------------------------------------------
# 1. reference check
def check_against_cpu(cb, cpu):
    rng = np.random.default_rng(0)

    def close(got, expected, what, tolerance=2e-5):
        got = np.asarray(cb.to_numpy(got), np.float64)
        expected = np.asarray(expected, np.float64)
        if got.shape != expected.shape or not np.allclose(got, expected, rtol=tolerance, atol=tolerance,
                                                          equal_nan=True):
            raise SystemExit(f"reference check failed: {what}")

    def device(x, dtype=dt.float32):
        return cb.from_numpy(np.asarray(x), dtype)

    x = rng.standard_normal((37, 1031)).astype(np.float32)
    y = rng.standard_normal((37, 1031)).astype(np.float32)
    bias = rng.standard_normal(1031).astype(np.float32)
    for op in ("relu", "exp", "gelu", "sigmoid", "tanh", "silu"):
        close(cb.unary(op, device(x)), cpu.unary(op, x), f"unary {op}")
    for op in ("add", "mul", "maximum", "gt"):
        close(cb.binary(op, device(x), device(y), dt.float32), cpu.binary(op, x, y, dt.float32), f"binary {op}")
    close(cb.binary("add", device(x), device(bias), dt.float32), cpu.binary("add", x, bias, dt.float32),
          "add broadcast")
    close(cb.binary("mul", device(x), 0.5, dt.float32), cpu.binary("mul", x, 0.5, dt.float32), "mul scalar")
    close(cb.binary("add", cb.permute(device(x.T.copy()), (1, 0)), device(y), dt.float32),
          cpu.binary("add", x, y, dt.float32), "add transposed")
    close(cb.unary_backward("gelu", device(x), None, device(y)), cpu.unary_backward("gelu", x, None, y),
          "gelu backward")
    close(cb.where(device(x > 0, dt.bool_), device(x), device(y), dt.float32), cpu.where(x > 0, x, y, dt.float32),
          "where")
    close(cb.clamp(device(x), -0.5, 0.5), cpu.clamp(x, -0.5, 0.5), "clamp")
    for op, axes in (("sum", (0, 1)), ("sum", (1,)), ("sum", (0,)), ("amax", (1,)), ("mean", (1,))):
        close(cb.reduce(op, device(x), axes, False), cpu.reduce(op, x, axes, False), f"{op} over {axes}",
              tolerance=1e-4)
    close(cb.var(device(x), (1,), 1, False), cpu.var(x, (1,), 1, False), "var", tolerance=1e-4)
    close(cb.logsumexp(device(x), (1,), False), cpu.logsumexp(x, (1,), False), "logsumexp", tolerance=1e-4)
    close(cb.argreduce("argmax", device(x), 1, False), cpu.argreduce("argmax", x, 1, False), "argmax")
    values, indices = cb.sort(device(x), 1, False, True)
    ref_values, ref_indices = cpu.sort(x, 1, False, True)
    close(values, ref_values, "sort values")
    close(indices, ref_indices, "sort indices")
    close(cb.cumsum(device(x), 1), cpu.cumsum(x, 1), "cumsum", tolerance=1e-4)
    rows = rng.integers(0, 37, 301)
    close(cb.index(device(x), (device(rows, dt.int64),)), cpu.index(x, (rows,)), "index rows")
    mask = x > 0.5
    close(cb.index(device(x), (device(mask, dt.bool_),)), cpu.index(x, (mask,)), "index mask")
    grad = rng.standard_normal((301, 1031)).astype(np.float32)
    close(cb.index_put_(device(np.zeros_like(x)), (device(rows, dt.int64),), device(grad), True),
          cpu.index_put_(np.zeros_like(x), (rows,), grad, True), "index_put_ accumulate", tolerance=1e-4)
    close(cb.cat([device(x), device(y)], 1), cpu.cat([x, y], 1), "cat")
    close(cb.tril(device(x), 3), cpu.tril(x, 3), "tril")
    print("reference check: elementwise, reductions, sort, cumsum, indexing, cat and tril match the CPU backend")


# ---------------------------------------------------------------------------------------------
# 2. memory-bound kernels
def bandwidth_cases(cb, torch, cupy, quick):
    """{case: (bytes moved, {contender: zero-argument callable})}."""
    from adcuda import _native
    C = _native._C
    n = 1 << (24 if quick else 26)  # 64 MiB / 256 MiB of float32
    rows, width = n // 4096, 4096
    rng = np.random.default_rng(1)
    host = rng.standard_normal(n).astype(np.float32)
    host2 = rng.standard_normal(n).astype(np.float32)
    cases = {}

    x32, y32 = cb.from_numpy(host, dt.float32), cb.from_numpy(host2, dt.float32)
    xb, yb = cb.astype(x32, dt.bfloat16), cb.astype(y32, dt.bfloat16)
    copy_dst = cb.empty((n,), dt.float32)
    m32 = cb.view(x32, (rows, width))
    bias32 = cb.from_numpy(host[:width].copy(), dt.float32)
    mask = cb.binary("gt", x32, 0.0, dt.float32)
    t = {}
    if torch is not None:
        t["x"], t["y"] = torch.from_numpy(host).cuda(), torch.from_numpy(host2).cuda()
        t["xb"], t["yb"] = t["x"].bfloat16(), t["y"].bfloat16()
        t["dst"] = torch.empty_like(t["x"])
        t["m"], t["bias"] = t["x"].view(rows, width), t["x"][:width].clone()
        t["mask"] = t["x"] > 0
    c = {}
    if cupy is not None:
        c["x"], c["y"] = cupy.asarray(host), cupy.asarray(host2)
        c["dst"] = cupy.empty_like(c["x"])
        c["m"], c["bias"] = c["x"].reshape(rows, width), c["x"][:width].copy()
        c["mask"] = c["x"] > 0

    def add(name, nbytes, ours, theirs=None, cupys=None):
        contenders = {"adcuda": ours}
        if theirs is not None and torch is not None:
            contenders["torch"] = theirs
        if cupys is not None and cupy is not None:
            contenders["cupy"] = cupys
        cases[name] = (nbytes, contenders)

    f32, b16 = 4 * n, 2 * n
    add("copy D2D float32", 2 * f32, lambda: C.copy_(copy_dst, x32), lambda: t["dst"].copy_(t["x"]),
        lambda: c["dst"].__setitem__(Ellipsis, c["x"]))
    add("relu float32", 2 * f32, lambda: cb.unary("relu", x32), lambda: torch.relu(t["x"]),
        lambda: cupy.maximum(c["x"], 0))
    add("exp float32", 2 * f32, lambda: cb.unary("exp", x32), lambda: torch.exp(t["x"]), lambda: cupy.exp(c["x"]))
    add("gelu float32", 2 * f32, lambda: cb.unary("gelu", x32), lambda: torch.nn.functional.gelu(t["x"]))
    add("gelu bfloat16", 2 * b16, lambda: cb.unary("gelu", xb), lambda: torch.nn.functional.gelu(t["xb"]))
    add("add float32", 3 * f32, lambda: cb.binary("add", x32, y32, dt.float32), lambda: torch.add(t["x"], t["y"]),
        lambda: cupy.add(c["x"], c["y"]))
    add("add bfloat16", 3 * b16, lambda: cb.binary("add", xb, yb, dt.bfloat16), lambda: torch.add(t["xb"], t["yb"]))
    add("mul by scalar float32", 2 * f32, lambda: cb.binary("mul", x32, 0.5, dt.float32), lambda: t["x"] * 0.5,
        lambda: c["x"] * 0.5)
    add("add bias (rows, 4096) + (4096,)", 2 * f32, lambda: cb.binary("add", m32, bias32, dt.float32),
        lambda: t["m"] + t["bias"], lambda: c["m"] + c["bias"])
    add("add transposed view", 3 * f32, lambda: cb.binary("add", cb.permute(m32, (1, 0)), cb.permute(m32, (1, 0)),
                                                          dt.float32),
        lambda: t["m"].T + t["m"].T, lambda: c["m"].T + c["m"].T)
    add("gt -> bool float32", f32 + n, lambda: cb.binary("gt", x32, y32, dt.float32), lambda: t["x"] > t["y"],
        lambda: c["x"] > c["y"])
    add("where float32", 3 * f32 + n, lambda: cb.where(mask, x32, y32, dt.float32),
        lambda: torch.where(t["mask"], t["x"], t["y"]), lambda: cupy.where(c["mask"], c["x"], c["y"]))
    add("clamp float32", 2 * f32, lambda: cb.clamp(x32, -0.5, 0.5), lambda: torch.clamp(t["x"], -0.5, 0.5),
        lambda: cupy.clip(c["x"], -0.5, 0.5))
    add("gelu backward float32", 3 * f32, lambda: cb.unary_backward("gelu", x32, None, y32),
        lambda: torch.ops.aten.gelu_backward(t["y"], t["x"]))
    add("sum all float32", f32, lambda: cb.reduce("sum", x32, (0,), False), lambda: t["x"].sum(),
        lambda: c["x"].sum())
    add("sum rows (rows, 4096) dim 1", f32, lambda: cb.reduce("sum", m32, (1,), False), lambda: t["m"].sum(1),
        lambda: c["m"].sum(1))
    add("sum columns (rows, 4096) dim 0", f32, lambda: cb.reduce("sum", m32, (0,), False), lambda: t["m"].sum(0),
        lambda: c["m"].sum(0))
    add("mean bfloat16", b16, lambda: cb.reduce("mean", xb, (0,), False), lambda: t["xb"].mean())
    add("amax rows float32", f32, lambda: cb.reduce("amax", m32, (1,), False), lambda: t["m"].amax(1),
        lambda: c["m"].max(1))
    add("var rows float32", f32, lambda: cb.var(m32, (1,), 1, False), lambda: t["m"].var(1), lambda: c["m"].var(1))
    add("logsumexp rows float32", f32, lambda: cb.logsumexp(m32, (1,), False), lambda: torch.logsumexp(t["m"], 1))
    add("argmax rows float32", f32, lambda: cb.argreduce("argmax", m32, 1, False), lambda: t["m"].argmax(1),
        lambda: c["m"].argmax(1))
    add("cat halves float32", 2 * f32, lambda: cb.cat([x32, y32], 0), lambda: torch.cat([t["x"], t["y"]]),
        lambda: cupy.concatenate([c["x"], c["y"]]))
    side = int(np.sqrt(n))
    square = cb.view(x32, (side, side))
    add("tril float32", 2 * side * side * 4, lambda: cb.tril(square, 0),
        lambda: torch.tril(t["x"].view(side, side)), lambda: cupy.tril(c["x"].reshape(side, side)))
    picks = rng.integers(0, rows, rows)
    picks_dev = cb.from_numpy(picks, dt.int64)
    add("index rows (embedding) float32", 2 * f32, lambda: cb.index(m32, (picks_dev,)),
        lambda: t["m"][t["picks"]], lambda: c["m"][c["picks"]])
    grad = cb.from_numpy(rng.standard_normal((rows, width)).astype(np.float32), dt.float32)
    target = cb.full((rows, width), 0, dt.float32)
    add("index_put_ accumulate float32", 3 * f32, lambda: cb.index_put_(target, (picks_dev,), grad, True),
        lambda: t["target"].index_put_((t["picks"],), t["grad"], accumulate=True))
    add("rand float32", f32, lambda: cb.rand((n,), dt.float32, 1, 0), lambda: torch.rand(n, device="cuda"),
        lambda: cupy.random.random(n, dtype=cupy.float32))
    add("randn float32", f32, lambda: cb.randn((n,), dt.float32, 1, 0), lambda: torch.randn(n, device="cuda"),
        lambda: cupy.random.standard_normal(n, dtype=cupy.float32))
    add("bernoulli mask bool", n, lambda: cb.bernoulli((n,), 0.9, dt.bool_, 1, 0),
        lambda: torch.empty(n, device="cuda", dtype=torch.bool).bernoulli_(0.9))
    sort_rows = cb.view(x32, (n // 1024, 1024))
    add("sort rows of 1024 float32", 2 * f32 + 8 * n, lambda: cb.sort(sort_rows, 1, False, True),
        lambda: torch.sort(t["x"].view(-1, 1024), 1, stable=True), None)
    add("cumsum rows float32", 2 * f32, lambda: cb.cumsum(m32, 1), lambda: torch.cumsum(t["m"], 1),
        lambda: cupy.cumsum(c["m"], 1))
    if torch is not None:
        t["picks"] = torch.from_numpy(picks).cuda()
        t["grad"] = torch.randn(rows, width, device="cuda")
        t["target"] = torch.zeros(rows, width, device="cuda")
    if cupy is not None:
        c["picks"] = cupy.asarray(picks)
    return cases


# ---------------------------------------------------------------------------------------------
# 3. launch overhead on tiny tensors
def host_seconds(fn, synchronize, calls=2000):
    for _ in range(50):
        fn()
    synchronize()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        synchronize()
        rounds.append((time.perf_counter() - start) / calls)
    return statistics.median(rounds)


def overhead_cases(cb, torch):
    a = cb.from_numpy(np.ones(1, np.float32), dt.float32)
    idx = cb.from_numpy(np.zeros(1, np.int64), dt.int64)
    ta = adcuda.ones(1, device="cuda")
    results = {"adcuda": {
        "add (1,) primitive": host_seconds(lambda: cb.binary("add", a, a, dt.float32), adcuda.cuda.synchronize),
        "add (1,) Tensor API": host_seconds(lambda: ta + ta, adcuda.cuda.synchronize),
        "sum (1,) primitive": host_seconds(lambda: cb.reduce("sum", a, (0,), False), adcuda.cuda.synchronize),
        "exp (1,) Tensor API": host_seconds(lambda: ta.exp(), adcuda.cuda.synchronize),
        "rand (1,) primitive": host_seconds(lambda: cb.rand((1,), dt.float32, 0, 0), adcuda.cuda.synchronize),
        "cat 2x(1,) primitive": host_seconds(lambda: cb.cat([a, a], 0), adcuda.cuda.synchronize),
        "gather (1,) primitive": host_seconds(lambda: cb.gather(a, 0, idx), adcuda.cuda.synchronize, calls=300),
    }}
    if torch is not None:
        x = torch.ones(1, device="cuda")
        i = torch.zeros(1, dtype=torch.int64, device="cuda")
        sync = torch.cuda.synchronize
        results["torch"] = {
            "add (1,) primitive": host_seconds(lambda: torch.add(x, x), sync),
            "add (1,) Tensor API": host_seconds(lambda: x + x, sync),
            "sum (1,) primitive": host_seconds(lambda: x.sum(), sync),
            "exp (1,) Tensor API": host_seconds(lambda: x.exp(), sync),
            "rand (1,) primitive": host_seconds(lambda: torch.rand(1, device="cuda"), sync),
            "cat 2x(1,) primitive": host_seconds(lambda: torch.cat([x, x]), sync),
            "gather (1,) primitive": host_seconds(lambda: x.gather(0, i), sync, calls=300),
        }
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="64 MiB tensors instead of 256 MiB, fewer bursts")
    parser.add_argument("--json")
    args = parser.parse_args()
    if not adcuda.cuda.is_available():
        print(f"bench_kernels needs a GPU: {adcuda.cuda.unavailable_reason()}")
        return 0
    adcuda.init_cuda_context()
    from adcuda.backends import cpu
    from adcuda.backends import cuda as cb
    if is_emulated():
        return emulated_reference_run("kernels", args.json, [lambda: check_against_cpu(cb, cpu)])
    torch, cupy = optional("torch"), optional("cupy")
    check_against_cpu(cb, cpu)
    bursts = 3 if args.quick else 7
    clocks = timers(torch, cupy)

    cases = bandwidth_cases(cb, torch, cupy, args.quick)
    results = {name: {} for name in clocks}
    moved = {}
    for case, (nbytes, contenders) in cases.items():
        moved[case] = nbytes
        for name, fn in contenders.items():
            record, synchronize, elapsed = clocks[name]
            try:
                results[name][case] = cuda_event_seconds(record, synchronize, elapsed, fn, bursts, 5)
            except Exception as e:  # an API a contender's version lacks: leave its cell empty
                print(f"  {name} {case}: {type(e).__name__}: {e}", file=sys.stderr)
    results = {name: times for name, times in results.items() if times}
    rows = print_table(f"memory-bound kernels on {adcuda.cuda.get_device_name()} (time per call)", results,
                       unit="us", scale=1e6)
    copy_rate = moved["copy D2D float32"] / results["adcuda"]["copy D2D float32"]
    print(f"\nGB/s (device-to-device copy: {copy_rate / 1e9:.0f} GB/s; adcuda as % of it; others alongside):")
    for case, seconds in results["adcuda"].items():
        rate = moved[case] / seconds
        line = f"  {case:<36} adcuda {rate / 1e9:8.1f} ({100 * rate / copy_rate:5.1f}% of copy)"
        for name in ("torch", "cupy"):
            theirs = results.get(name, {}).get(case)
            if theirs:
                line += f"   {name} {moved[case] / theirs / 1e9:8.1f} (adcuda/{name} time {seconds / theirs:4.2f}x)"
        print(line)

    overhead = overhead_cases(cb, torch)
    rows += print_table("launch overhead on 1-element tensors (host time per op, synchronized)", overhead,
                        unit="us", scale=1e6)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": "kernels", "device": "cuda", "rows": rows, "bytes_moved": moved,
                       "copy_bandwidth_bytes_per_s": copy_rate}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
