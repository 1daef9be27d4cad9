"""adcuda's array-machinery kernels (elementwise, reductions, indexing, layout, sort/scan, random)
against PyTorch and CuPy on one GPU, llm.c's dev/cuda way.

    python benchmarks/bench_kernels.py [--quick] [--json out.json]

1. Reference check: every benchmarked primitive on small odd shapes against the CPU backend (the run
   stops if one is off), the fast paths included (broadcast rows and columns, column sums, row
   gathers).
2. Memory-bound kernels, every operand of at least 256 MiB (four times an H200's L2, so DRAM is
   measured): CUDA-event medians, the bytes each kernel must move (inputs read once, outputs written
   once; a broadcast bias or column counts once), achieved GB/s and its share of the device-to-device
   copy bandwidth measured in the same run (benchmarks/_harness.py), side by side with PyTorch and
   CuPy on the same shapes. Targets on an H200: >= 80% of the copy bandwidth on contiguous data,
   >= 60% with broadcast operands, and no case slower than 1.1x PyTorch.
3. Launch overhead on tiny tensors: host time per op (1-element add, sum, index) through the backend
   primitive and through the Tensor API, against PyTorch eager.

adcuda's kernels are called through the backend primitives (no autograd bookkeeping) except in the
Tensor-API overhead row. ``--quick`` takes fewer bursts and leaves CuPy out (its kernels compile on
first use, which a budgeted run cannot spare); the arrays stay at 256 MiB. In the emulated build
(ADCUDA_CUDA=EMULATE) it runs the reference check and reports "emulated: no timing"; without a GPU
it says so and exits 0.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from _harness import (  # noqa: E402
    BANDWIDTH_BYTES,
    copy_bandwidth,
    cuda_event_seconds,
    emulated_reference_run,
    format_bandwidth,
    gpu_suite_args,
    is_emulated,
    percent_of_copy,
    print_table,
    write_bandwidth_json,  # noqa: E402
)

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

        out["cupy"] = (cupy_record, cupy.cuda.Device().synchronize, lambda s, e: cupy.cuda.get_elapsed_time(s, e))
    return out


# ---------------------------------------------------------------------------------------------
# 1. reference check
def check_against_cpu(cb, cpu):
    rng = np.random.default_rng(0)

    def close(got, expected, what, tolerance=2e-5):
        got = np.asarray(cb.to_numpy(got), np.float64)
        expected = np.asarray(expected, np.float64)
        if got.shape != expected.shape or not np.allclose(
            got, expected, rtol=tolerance, atol=tolerance, equal_nan=True
        ):
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
    close(
        cb.binary("add", device(x), device(bias), dt.float32), cpu.binary("add", x, bias, dt.float32), "add broadcast"
    )
    wide = rng.standard_normal((37, 1024)).astype(np.float32)
    column = rng.standard_normal((37, 1)).astype(np.float32)
    conv = rng.standard_normal((2, 8, 4, 16)).astype(np.float32)
    channel = rng.standard_normal((8, 1, 1)).astype(np.float32)
    close(
        cb.binary("add", device(wide), device(wide[0]), dt.float32),
        cpu.binary("add", wide, wide[0], dt.float32),
        "add bias row (vectorised)",
    )
    close(
        cb.binary("mul", device(wide), device(column), dt.float32),
        cpu.binary("mul", wide, column, dt.float32),
        "mul column (vectorised)",
    )
    close(
        cb.binary("add", device(conv), device(channel), dt.float32),
        cpu.binary("add", conv, channel, dt.float32),
        "add conv bias (vectorised)",
    )
    close(
        cb.binary("mul", device(wide), device(column[0, 0]), dt.float32),
        cpu.binary("mul", wide, column[0, 0], dt.float32),
        "mul 0-d array (vectorised)",
    )
    for op in ("sum", "amax"):
        close(
            cb.reduce(op, device(wide), (0,), False),
            cpu.reduce(op, wide, (0,), False),
            f"{op} columns (vectorised)",
            tolerance=1e-4,
        )
    picks = rng.integers(0, 1024, (37, 300))
    close(cb.gather(device(wide), 1, device(picks, dt.int64)), cpu.gather(wide, 1, picks), "gather along the last dim")
    close(cb.binary("mul", device(x), 0.5, dt.float32), cpu.binary("mul", x, 0.5, dt.float32), "mul scalar")
    close(
        cb.binary("add", cb.permute(device(x.T.copy()), (1, 0)), device(y), dt.float32),
        cpu.binary("add", x, y, dt.float32),
        "add transposed",
    )
    close(
        cb.unary_backward("gelu", device(x), None, device(y)), cpu.unary_backward("gelu", x, None, y), "gelu backward"
    )
    close(
        cb.where(device(x > 0, dt.bool_), device(x), device(y), dt.float32), cpu.where(x > 0, x, y, dt.float32), "where"
    )
    close(cb.clamp(device(x), -0.5, 0.5), cpu.clamp(x, -0.5, 0.5), "clamp")
    for op, axes in (("sum", (0, 1)), ("sum", (1,)), ("sum", (0,)), ("amax", (1,)), ("mean", (1,))):
        close(
            cb.reduce(op, device(x), axes, False), cpu.reduce(op, x, axes, False), f"{op} over {axes}", tolerance=1e-4
        )
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
    close(
        cb.index_put_(device(np.zeros_like(x)), (device(rows, dt.int64),), device(grad), True),
        cpu.index_put_(np.zeros_like(x), (rows,), grad, True),
        "index_put_ accumulate",
        tolerance=1e-4,
    )
    close(cb.cat([device(x), device(y)], 1), cpu.cat([x, y], 1), "cat")
    close(cb.tril(device(x), 3), cpu.tril(x, 3), "tril")
    print(
        "reference check: elementwise (broadcast rows and columns included), reductions (columns included), sort, "
        "cumsum, indexing, gather, cat and tril match the CPU backend"
    )


# ---------------------------------------------------------------------------------------------
# 2. memory-bound kernels
def bandwidth_cases(cb, torch, cupy):
    """{case: (bytes moved, {contender: zero-argument callable})}; every operand >= BANDWIDTH_BYTES."""
    n = BANDWIDTH_BYTES // 4  # float32 elements per operand
    n16 = BANDWIDTH_BYTES // 2  # bfloat16 elements per operand
    width = 4096
    rows = n // width
    gpt_width = 768  # GPT-2's: a bias gradient's columns
    gpt_rows, gpt_rows16 = n // gpt_width, n16 // gpt_width
    conv = (n // (64 * 64 * 64), 64, 64, 64)  # (N, C, H, W) against a (C, 1, 1) bias
    rng = np.random.default_rng(1)
    cases = {}

    # device-side random data: the host would spend seconds per 256 MiB array
    x32, y32 = cb.randn((n,), dt.float32, 1, 0), cb.randn((n,), dt.float32, 2, 0)
    xb, yb = cb.randn((n16,), dt.bfloat16, 3, 0), cb.randn((n16,), dt.bfloat16, 4, 0)
    m32 = cb.view(x32, (rows, width))
    mb = cb.view(xb, (n16 // width, width))
    bias32, biasb = cb.randn((width,), dt.float32, 5, 0), cb.randn((width,), dt.bfloat16, 5, 0)
    column32 = cb.randn((rows, 1), dt.float32, 6, 0)
    channel32 = cb.randn((conv[1], 1, 1), dt.float32, 7, 0)
    x_conv = cb.view(x32, conv)
    scale = cb.full((), 0.5, dt.float32)
    mask = cb.binary("gt", x32, 0.0, dt.float32)
    gpt32 = cb.view(cb.slice(x32, (slice(0, gpt_rows * gpt_width),)), (gpt_rows, gpt_width))
    gptb = cb.view(cb.slice(xb, (slice(0, gpt_rows16 * gpt_width),)), (gpt_rows16, gpt_width))
    picks_host = rng.integers(0, rows, rows)
    picks = cb.from_numpy(picks_host, dt.int64)
    last_picks_host = rng.integers(0, width, (rows, width // 4))
    last_picks = cb.from_numpy(last_picks_host, dt.int64)
    grad = cb.randn((rows, width), dt.float32, 8, 0)
    target = cb.full((rows, width), 0, dt.float32)
    sort_rows = cb.view(x32, (n // 1024, 1024))
    side = int(np.sqrt(n))
    square = cb.view(x32, (side, side))
    from adcuda import _native

    C = _native._C
    copy_dst = cb.empty((n,), dt.float32)

    t = {}
    if torch is not None:
        t["x"], t["y"] = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        t["xb"], t["yb"] = torch.randn(n16, device="cuda").bfloat16(), torch.randn(n16, device="cuda").bfloat16()
        t["dst"] = torch.empty_like(t["x"])
        t["m"], t["mb"] = t["x"].view(rows, width), t["xb"].view(-1, width)
        t["bias"], t["biasb"] = torch.randn(width, device="cuda"), torch.randn(width, device="cuda").bfloat16()
        t["column"], t["channel"] = torch.randn(rows, 1, device="cuda"), torch.randn(conv[1], 1, 1, device="cuda")
        t["conv"], t["scale"] = t["x"].view(conv), torch.tensor(0.5, device="cuda")
        t["mask"] = t["x"] > 0
        t["gpt"] = t["x"][: gpt_rows * gpt_width].view(gpt_rows, gpt_width)
        t["gptb"] = t["xb"][: gpt_rows16 * gpt_width].view(gpt_rows16, gpt_width)
        t["picks"], t["last_picks"] = torch.from_numpy(picks_host).cuda(), torch.from_numpy(last_picks_host).cuda()
        t["grad"], t["target"] = torch.randn(rows, width, device="cuda"), torch.zeros(rows, width, device="cuda")
    c = {}
    if cupy is not None:
        c["x"] = cupy.random.standard_normal(n, dtype=cupy.float32)
        c["y"] = cupy.random.standard_normal(n, dtype=cupy.float32)
        c["dst"] = cupy.empty_like(c["x"])
        c["m"], c["bias"] = c["x"].reshape(rows, width), cupy.random.standard_normal(width, dtype=cupy.float32)
        c["column"] = cupy.random.standard_normal((rows, 1), dtype=cupy.float32)
        c["channel"] = cupy.random.standard_normal((conv[1], 1, 1), dtype=cupy.float32)
        c["conv"], c["gpt"] = c["x"].reshape(conv), c["x"][: gpt_rows * gpt_width].reshape(gpt_rows, gpt_width)
        c["mask"] = c["x"] > 0
        c["picks"] = cupy.asarray(picks_host)

    def add(name, nbytes, ours, theirs=None, cupys=None):
        contenders = {"adcuda": ours}
        if theirs is not None and torch is not None:
            contenders["torch"] = theirs
        if cupys is not None and cupy is not None:
            contenders["cupy"] = cupys
        cases[name] = (nbytes, contenders)

    f32, b16 = 4 * n, 2 * n16
    add(
        "copy D2D float32",
        2 * f32,
        lambda: C.copy_(copy_dst, x32),
        lambda: t["dst"].copy_(t["x"]),
        lambda: c["dst"].__setitem__(Ellipsis, c["x"]),
    )
    add(
        "relu float32",
        2 * f32,
        lambda: cb.unary("relu", x32),
        lambda: torch.relu(t["x"]),
        lambda: cupy.maximum(c["x"], 0),
    )
    add("exp float32", 2 * f32, lambda: cb.unary("exp", x32), lambda: torch.exp(t["x"]), lambda: cupy.exp(c["x"]))
    add("gelu float32", 2 * f32, lambda: cb.unary("gelu", x32), lambda: torch.nn.functional.gelu(t["x"]))
    add("gelu bfloat16", 2 * b16, lambda: cb.unary("gelu", xb), lambda: torch.nn.functional.gelu(t["xb"]))
    add(
        "add float32",
        3 * f32,
        lambda: cb.binary("add", x32, y32, dt.float32),
        lambda: torch.add(t["x"], t["y"]),
        lambda: cupy.add(c["x"], c["y"]),
    )
    add("add bfloat16", 3 * b16, lambda: cb.binary("add", xb, yb, dt.bfloat16), lambda: torch.add(t["xb"], t["yb"]))
    add(
        "mul by scalar float32",
        2 * f32,
        lambda: cb.binary("mul", x32, 0.5, dt.float32),
        lambda: t["x"] * 0.5,
        lambda: c["x"] * 0.5,
    )
    # broadcast operands: the small one is read once (from cache), the big one and the result stream
    add(
        "broadcast: add bias (rows, 4096) + (4096,) float32",
        2 * f32,
        lambda: cb.binary("add", m32, bias32, dt.float32),
        lambda: t["m"] + t["bias"],
        lambda: c["m"] + c["bias"],
    )
    add(
        "broadcast: add bias (rows, 4096) + (4096,) bfloat16",
        2 * b16,
        lambda: cb.binary("add", mb, biasb, dt.bfloat16),
        lambda: t["mb"] + t["biasb"],
    )
    add(
        "broadcast: mul column (rows, 4096) * (rows, 1) float32",
        2 * f32,
        lambda: cb.binary("mul", m32, column32, dt.float32),
        lambda: t["m"] * t["column"],
        lambda: c["m"] * c["column"],
    )
    add(
        "broadcast: conv bias (N, 64, 64, 64) + (64, 1, 1) float32",
        2 * f32,
        lambda: cb.binary("add", x_conv, channel32, dt.float32),
        lambda: t["conv"] + t["channel"],
        lambda: c["conv"] + c["channel"],
    )
    add(
        "broadcast: mul by a 0-d array float32",
        2 * f32,
        lambda: cb.binary("mul", x32, scale, dt.float32),
        lambda: t["x"] * t["scale"],
    )
    add(
        "broadcast: where (rows, 4096) ? x : bias float32",
        2 * f32 + n,
        lambda: cb.where(cb.view(mask, (rows, width)), m32, bias32, dt.float32),
        lambda: torch.where(t["mask"].view(rows, width), t["m"], t["bias"]),
    )
    add(
        "add transposed view",
        3 * f32,
        lambda: cb.binary("add", cb.permute(m32, (1, 0)), cb.permute(m32, (1, 0)), dt.float32),
        lambda: t["m"].T + t["m"].T,
        lambda: c["m"].T + c["m"].T,
    )
    add(
        "gt -> bool float32",
        2 * f32 + n,
        lambda: cb.binary("gt", x32, y32, dt.float32),
        lambda: t["x"] > t["y"],
        lambda: c["x"] > c["y"],
    )
    add(
        "where float32",
        3 * f32 + n,
        lambda: cb.where(mask, x32, y32, dt.float32),
        lambda: torch.where(t["mask"], t["x"], t["y"]),
        lambda: cupy.where(c["mask"], c["x"], c["y"]),
    )
    add(
        "clamp float32",
        2 * f32,
        lambda: cb.clamp(x32, -0.5, 0.5),
        lambda: torch.clamp(t["x"], -0.5, 0.5),
        lambda: cupy.clip(c["x"], -0.5, 0.5),
    )
    add(
        "gelu backward float32",
        3 * f32,
        lambda: cb.unary_backward("gelu", x32, None, y32),
        lambda: torch.ops.aten.gelu_backward(t["y"], t["x"]),
    )
    add("sum all float32", f32, lambda: cb.reduce("sum", x32, (0,), False), lambda: t["x"].sum(), lambda: c["x"].sum())
    add(
        "sum rows (rows, 4096) dim 1",
        f32,
        lambda: cb.reduce("sum", m32, (1,), False),
        lambda: t["m"].sum(1),
        lambda: c["m"].sum(1),
    )
    add(
        "columns: sum (rows, 4096) dim 0 float32",
        f32,
        lambda: cb.reduce("sum", m32, (0,), False),
        lambda: t["m"].sum(0),
        lambda: c["m"].sum(0),
    )
    add(
        "columns: bias grad sum (rows, 768) dim 0 float32",
        4 * gpt_rows * gpt_width,
        lambda: cb.reduce("sum", gpt32, (0,), False),
        lambda: t["gpt"].sum(0),
        lambda: c["gpt"].sum(0),
    )
    add(
        "columns: bias grad sum (rows, 768) dim 0 bfloat16",
        2 * gpt_rows16 * gpt_width,
        lambda: cb.reduce("sum", gptb, (0,), False),
        lambda: t["gptb"].sum(0),
    )
    add(
        "columns: amax (rows, 4096) dim 0 float32",
        f32,
        lambda: cb.reduce("amax", m32, (0,), False),
        lambda: t["m"].amax(0),
        lambda: c["m"].max(0),
    )
    add("mean bfloat16", b16, lambda: cb.reduce("mean", xb, (0,), False), lambda: t["xb"].mean())
    add(
        "amax rows float32",
        f32,
        lambda: cb.reduce("amax", m32, (1,), False),
        lambda: t["m"].amax(1),
        lambda: c["m"].max(1),
    )
    add("var rows float32", f32, lambda: cb.var(m32, (1,), 1, False), lambda: t["m"].var(1), lambda: c["m"].var(1))
    add("logsumexp rows float32", f32, lambda: cb.logsumexp(m32, (1,), False), lambda: torch.logsumexp(t["m"], 1))
    add(
        "argmax rows float32",
        f32,
        lambda: cb.argreduce("argmax", m32, 1, False),
        lambda: t["m"].argmax(1),
        lambda: c["m"].argmax(1),
    )
    add(
        "cat halves float32",
        2 * f32,
        lambda: cb.cat([x32, y32], 0),
        lambda: torch.cat([t["x"], t["y"]]),
        lambda: cupy.concatenate([c["x"], c["y"]]),
    )
    add(
        "tril float32",
        2 * side * side * 4,
        lambda: cb.tril(square, 0),
        lambda: torch.tril(t["x"].view(side, side)),
        lambda: cupy.tril(c["x"].reshape(side, side)),
    )
    # a gather reads its indices and the rows it picks once, and writes the result
    add(
        "gather: index rows (embedding-like) float32",
        2 * f32 + 8 * rows,
        lambda: cb.index(m32, (picks,)),
        lambda: t["m"][t["picks"]],
        lambda: c["m"][c["picks"]],
    )
    add(
        "gather: along the last dim float32",
        2 * (f32 // 4) + 8 * (n // 4),
        lambda: cb.gather(m32, 1, last_picks),
        lambda: torch.gather(t["m"], 1, t["last_picks"]),
    )
    add(
        "index_put_ accumulate float32",
        3 * f32,
        lambda: cb.index_put_(target, (picks,), grad, True),
        lambda: t["target"].index_put_((t["picks"],), t["grad"], accumulate=True),
    )
    add(
        "rand float32",
        f32,
        lambda: cb.rand((n,), dt.float32, 1, 0),
        lambda: torch.rand(n, device="cuda"),
        lambda: cupy.random.random(n, dtype=cupy.float32),
    )
    add(
        "randn float32",
        f32,
        lambda: cb.randn((n,), dt.float32, 1, 0),
        lambda: torch.randn(n, device="cuda"),
        lambda: cupy.random.standard_normal(n, dtype=cupy.float32),
    )
    add(
        "bernoulli mask bool",
        n,
        lambda: cb.bernoulli((n,), 0.9, dt.bool_, 1, 0),
        lambda: torch.empty(n, device="cuda", dtype=torch.bool).bernoulli_(0.9),
    )
    add(
        "sort rows of 1024 float32",
        2 * f32 + 8 * n,
        lambda: cb.sort(sort_rows, 1, False, True),
        lambda: torch.sort(t["x"].view(-1, 1024), 1, stable=True),
        None,
    )
    add(
        "cumsum rows float32",
        2 * f32,
        lambda: cb.cumsum(m32, 1),
        lambda: torch.cumsum(t["m"], 1),
        lambda: cupy.cumsum(c["m"], 1),
    )
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
    results = {
        "adcuda": {
            "add (1,) primitive": host_seconds(lambda: cb.binary("add", a, a, dt.float32), adcuda.cuda.synchronize),
            "add (1,) Tensor API": host_seconds(lambda: ta + ta, adcuda.cuda.synchronize),
            "sum (1,) primitive": host_seconds(lambda: cb.reduce("sum", a, (0,), False), adcuda.cuda.synchronize),
            "exp (1,) Tensor API": host_seconds(lambda: ta.exp(), adcuda.cuda.synchronize),
            "rand (1,) primitive": host_seconds(lambda: cb.rand((1,), dt.float32, 0, 0), adcuda.cuda.synchronize),
            "cat 2x(1,) primitive": host_seconds(lambda: cb.cat([a, a], 0), adcuda.cuda.synchronize),
            "gather (1,) primitive": host_seconds(lambda: cb.gather(a, 0, idx), adcuda.cuda.synchronize, calls=300),
        }
    }
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
    args = gpu_suite_args("kernels", __doc__, "fewer bursts, no CuPy (the arrays stay 256 MiB)")
    if args is None:
        return 0
    from adcuda.backends import cpu
    from adcuda.backends import cuda as cb

    if is_emulated():
        return emulated_reference_run("kernels", args.json, [lambda: check_against_cpu(cb, cpu)])
    torch, cupy = optional("torch"), None if args.quick else optional("cupy")
    check_against_cpu(cb, cpu)
    bursts = 3 if args.quick else 7
    clocks = timers(torch, cupy)
    copy_rate = copy_bandwidth(bursts=bursts)
    print(f"device-to-device copy of {BANDWIDTH_BYTES >> 20} MiB float32: {copy_rate / 1e9:.1f} GB/s (the yardstick)")

    cases = bandwidth_cases(cb, torch, cupy)
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
    rows = print_table(
        f"memory-bound kernels on {adcuda.cuda.get_device_name()} (time per call)", results, unit="us", scale=1e6
    )
    print("\nGB/s (adcuda as % of the copy bandwidth; others alongside; targets: 80% contiguous, 60% broadcast):")
    bandwidth = {}
    for case, seconds in results["adcuda"].items():
        bandwidth[case] = {
            "bytes": moved[case],
            "seconds": seconds,
            "percent_of_copy": percent_of_copy(moved[case], seconds, copy_rate),
        }
        line = f"  {case:<58} adcuda {format_bandwidth(moved[case], seconds, copy_rate)}"
        for name in ("torch", "cupy"):
            theirs = results.get(name, {}).get(case)
            if theirs:
                line += (
                    f"   {name} {moved[case] / theirs / 1e9:8.1f} GB/s (adcuda/{name} time {seconds / theirs:4.2f}x)"
                )
        print(line)
    # kept even if the overhead section is cut short
    write_bandwidth_json(args.json, "kernels", rows, moved, copy_rate, bandwidth)

    overhead = overhead_cases(cb, torch)
    rows += print_table(
        "launch overhead on 1-element tensors (host time per op, synchronized)", overhead, unit="us", scale=1e6
    )
    write_bandwidth_json(args.json, "kernels", rows, moved, copy_rate, bandwidth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
