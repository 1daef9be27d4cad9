"""adcuda.compile (capture once, replay) against eager adcuda, PyTorch CPU eager and hand-written NumPy:

- one training step of an MLP 784-512-512-10 (batch 256, fp32, SGD: zero_grad, forward, cross-entropy,
  backward, step), the step of bench_mlp_step.py;
- forward+backward of a 3-op graph on 8x8 tensors (``((leaf * y).relu() + 1).sum().backward()``),
  where per-op dispatch is all there is;
- one AdamW step of the small GPT ``adcuda train`` trains on characters (the model of
  bench_nn_kernels.py, written once for both libraries), batch 32 x 64 tokens.

Each contender runs in its own process with one BLAS/PyTorch thread, on the same seeded data, and is
timed on the process's CPU time (``time.process_time``), the best of its rounds: on a shared machine
wall time counts other work, and the least CPU time a round took is the one the least disturbed by
cache and scheduler noise. The table's ratios are adcuda.compile's time over each other contender's
(below 1: compiled is faster). ``--rounds N`` runs every contender N times, taking turns, and keeps
each case's best.

``--before PYTHON`` adds the adcuda.compile that another interpreter imports (the virtual environment
of another checkout, e.g. main's) as one more contender, and a table of both against PyTorch and
NumPy: before/after figures from one run, the same minutes, the same load.

``--products`` instead times, in one process, the MLP step's five large matrix products (forward 1 and
2, the hidden gradient of layer 2, the weight gradients of layers 1 and 2) in every operand layout
NumPy can hand to BLAS, against the BLAS's rate on a 2048^3 product and the whole NumPy step: the floor
under what any replay of that step, which makes the same products, can reach against NumPy.

    python benchmarks/bench_compile.py [--quick] [--threads N] [--rounds N] [--before PYTHON] [--json out.json]
    python benchmarks/bench_compile.py --products
"""

import argparse
import functools
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import parse_suite_args, print_table, run_contenders, single_thread_env, smoke, suite_parser, write_report  # noqa: E402

if "--contender" in sys.argv or "--products" in sys.argv:
    single_thread_env()  # before anything imports NumPy: OpenBLAS reads its thread count once, at load
from bench_mlp_step import _framework_step, _numpy_step  # noqa: E402
from bench_nn_kernels import torch_models  # noqa: E402 (the GPT, written against any torch-like library)

MLP_CASE = "MLP 784-512-512-10 SGD step, batch 256"
TINY_CASE = "fwd+bwd of a 3-op graph, 8x8"
GPT_CASE = "small GPT AdamW step, batch 32x64"
COMPILED = "compiled"
BEFORE = "compiled before"
GPT_CONFIG = {"vocab_size": 96, "block_size": 64, "d_model": 96, "n_layers": 3, "n_heads": 4}
GPT_BATCH = 32


def _gpt_step(lib):
    import numpy as np

    rng = np.random.default_rng(3)
    ids = lib.from_numpy(rng.integers(0, GPT_CONFIG["vocab_size"], (GPT_BATCH, GPT_CONFIG["block_size"] + 1)))
    inputs, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    lib.manual_seed(0)
    model = torch_models(lib)[1](**GPT_CONFIG)
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)
    cross_entropy = lib.nn.functional.cross_entropy

    def step():
        logits = model(inputs)
        loss = cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return step


def _tiny_graph(lib):
    y = lib.ones(8, 8)
    leaf = lib.ones(8, 8, requires_grad=True)

    def fwd_bwd_3op():
        loss = ((leaf * y).relu() + 1.0).sum()
        loss.backward()

    return fwd_bwd_3op


def _tiny_graph_numpy():
    """The same forward and backward written out by hand (the gradient accumulates, as .grad does)."""
    import numpy as np

    y = np.ones((8, 8), np.float32)
    leaf = np.ones((8, 8), np.float32)
    grad = np.zeros((8, 8), np.float32)

    def fwd_bwd_3op():
        z = leaf * y
        loss = (np.maximum(z, 0) + 1.0).sum()
        grad.__iadd__(y * (z > 0))
        return loss

    return fwd_bwd_3op


def cases_for(contender, quick=False):
    threads = single_thread_env()
    if contender == "numpy":
        return {MLP_CASE: _numpy_step(), TINY_CASE: _tiny_graph_numpy()}
    if contender == "torch":
        import torch

        torch.set_num_threads(threads)
        return {MLP_CASE: _framework_step(torch), TINY_CASE: _tiny_graph(torch), GPT_CASE: _gpt_step(torch)}
    import adcuda

    cases = {MLP_CASE: _framework_step(adcuda), TINY_CASE: _tiny_graph(adcuda), GPT_CASE: _gpt_step(adcuda)}
    if contender == COMPILED:
        cases = {name: adcuda.compile(step, fullgraph=True) for name, step in cases.items()}
    return cases


def best_cpu_time(fn, *, rounds, min_time=0.05, warmup=3):
    """The least CPU seconds per call of ``fn`` over ``rounds`` rounds of at least ``min_time`` each (one
    call in a smoke run)."""
    if smoke():
        rounds, min_time, warmup = 1, 0.0, 1
    for _ in range(warmup):
        fn()
    number = 1
    while True:
        start = time.process_time()
        for _ in range(number):
            fn()
        elapsed = time.process_time() - start
        if elapsed >= min_time or number >= 1 << 20:
            break
        number *= 2
    best = elapsed / number
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - start) / number)
    return best


def contender_main():
    """One contender's process: its cases' best CPU times, printed as JSON for the parent."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--contender", required=True)
    parser.add_argument("--emit-json", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    cases = cases_for(args.contender, quick=args.quick)
    print(json.dumps({name: best_cpu_time(fn, rounds=5 if args.quick else 9) for name, fn in cases.items()}))


# the MLP step's large products as (name, M, K, N, how the step stores A, how it stores B): C (M, N) = A (M, K)
# @ B (K, N), "T" for an operand stored transposed (a row-major weight read as W^T, a gradient read as g^T)
MLP_PRODUCTS = [
    ("forward 1: x @ W1^T", 256, 784, 512, "", "T"),
    ("forward 2: h1 @ W2^T", 256, 512, 512, "", "T"),
    ("hidden grad: g2 @ W2", 256, 512, 512, "", ""),
    ("weight grad 2: g2^T @ h1", 512, 256, 512, "T", ""),
    ("weight grad 1: g1^T @ x", 512, 256, 784, "T", ""),
]


def products_main():
    """The ``--products`` table (see the module docstring), one thread, best CPU time of many rounds."""
    threads = single_thread_env()
    import numpy as np

    def best(fn):
        return best_cpu_time(fn, rounds=15, min_time=0.02)

    rng = np.random.default_rng(0)
    big = rng.standard_normal((2, 2048, 2048), dtype=np.float32)
    out = np.empty((2048, 2048), np.float32)
    ceiling = 2 * 2048**3 / best(lambda: np.matmul(big[0], big[1], out=out))
    print(
        f"MLP step products ({threads} thread(s), {_blas_name(np)}): a 2048^3 product runs at {ceiling / 1e9:.1f} "
        "GFLOP/s\n(ms per product; A/A^T, B/B^T: the operand stored as is or transposed; C^T: B^T A^T written "
        "row-major)"
    )
    layouts = [(a, b) for a in ("", "T") for b in ("", "T")]
    labels = ["A" + ("^T" if a else "") + ".B" + ("^T" if b else "") for a, b in layouts]
    head = f"{'product':<26}{'MxKxN':>14}" + "".join(f"{label:>10}" for label in labels)
    head += f"{'C^T':>9}{'step':>9}{'GFLOP/s':>9}{'of 2048^3':>11}"
    print(head + "\n" + "-" * len(head))
    total_step = total_best = 0.0
    for name, m, k, n, a_as, b_as in MLP_PRODUCTS:
        a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
        stored = {"": (a, b), "T": (np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T)}
        c, c_t = np.empty((m, n), np.float32), np.empty((n, m), np.float32)
        times = {(x, y): best(functools.partial(np.matmul, stored[x][0], stored[y][1], out=c)) for x, y in layouts}
        transposed = best(functools.partial(np.matmul, b.T, a.T, out=c_t))
        step = times[a_as, b_as]
        total_step += step
        total_best += min(min(times.values()), transposed)
        rate = 2 * m * k * n / step
        line = f"{name:<26}{f'{m}x{k}x{n}':>14}" + "".join(f"{times[layout] * 1e3:>10.3f}" for layout in layouts)
        print(line + f"{transposed * 1e3:>9.3f}{step * 1e3:>9.3f}{rate / 1e9:>9.1f}{rate / ceiling:>10.0%}")
    numpy_step = best(_numpy_step())
    print(
        f"\nthe five in the step's layouts: {total_step * 1e3:.3f} ms, in the best layouts {total_best * 1e3:.3f} ms; "
        f"the whole hand-written NumPy step: {numpy_step * 1e3:.3f} ms\n"
        f"a replay that did nothing but the five products would be {total_best / numpy_step:.2f}x the NumPy step"
    )


def _blas_name(np):
    """NumPy's BLAS and, for OpenBLAS, the kernels it chose for this CPU (its core name)."""
    config = np.show_config(mode="dicts") or {}
    blas = config.get("Build Dependencies", {}).get("blas", {})
    name = f"{blas.get('name', 'BLAS')} {blas.get('version', '')}".strip()
    try:
        import ctypes
        import glob

        libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*"))
        library = ctypes.CDLL(libs[0])
        for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            corename = getattr(library, symbol, None)
            if corename is not None:
                corename.restype = ctypes.c_char_p
                return f"{name}, {corename().decode()} kernels"
    except (IndexError, OSError):
        pass
    return name


def main():
    parser = suite_parser(__doc__)
    parser.add_argument("--products", action="store_true", help="the MLP step's products alone (see above)")
    parser.add_argument("--rounds", type=int, default=1, help="runs per contender, taking turns; the best counts")
    parser.add_argument("--before", metavar="PYTHON", help="also time the adcuda.compile this interpreter imports")
    args = parse_suite_args(parser)
    if args.products:
        products_main()
        return
    load_before = os.getloadavg()
    results = run_contenders(
        os.path.abspath(__file__),
        [COMPILED, "adcuda", "numpy", "torch"],
        ["--quick"] if args.quick else [],
        rounds=args.rounds,
        interpreters={BEFORE: (args.before, COMPILED)} if args.before else None,
    )
    load = os.getloadavg()
    rows = print_table(
        f"adcuda.compile ({os.environ.get('BENCH_THREADS', '1')} thread(s), best CPU time per process of "
        f"{args.rounds} round(s); load {load_before[0]:.1f} at the start, {load[0]:.1f} at the end, on "
        f"{os.cpu_count()} cores); ratio > 1: compiled slower",
        {name: times for name, times in results.items() if name != BEFORE},
        unit="us",
        scale=1e6,
        baseline=COMPILED,
    )
    if BEFORE in results:
        print_before_after(results)
    write_report(args.json, {"suite": "compile", "load": load, "rows": rows})


def print_before_after(results):
    """Both compiled adcudas' times over PyTorch's and NumPy's: what the compile work is judged by."""
    others = [name for name in ("torch", "numpy") if name in results]
    head = f"{'case':<42}" + "".join(f"{f'{who} / {other}':>24}" for other in others for who in (BEFORE, COMPILED))
    print(f"\nbefore/after (ratio < 1: compiled faster)\n{head}\n{'-' * len(head)}")
    for case in results[COMPILED]:
        line = f"{case:<42}"
        for other in others:
            for who in (BEFORE, COMPILED):
                mine, theirs = results.get(who, {}).get(case), results[other].get(case)
                line += f"{mine / theirs:>23.2f}x" if mine and theirs else f"{'-':>24}"
        print(line)


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main()
    else:
        main()
