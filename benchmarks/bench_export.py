"""The C that ``adcuda.export.to_c`` writes, against adcuda's own forward: speed and static memory.

Models (eval forward, float32, seeded weights: speed does not depend on what they learned):
- the digits MLP ``adcuda train`` trains (standardize, 64-256-256-10 with GELU), batch 1 and batch 360
  (about the held-out test set);
- a small CNN (conv 1->8 3x3 + BatchNorm + ReLU, max pool, conv 8->16 3x3 + BatchNorm + ReLU, avg pool,
  Linear 784->10) on 1x28x28 images, batch 1 and 32;
- a causal pre-norm GELU transformer block (``nn.TransformerEncoderLayer`` d_model 64, 4 heads,
  feed-forward 128, under a causal mask) on 32 positions, batch 1 and 8.

Contenders: adcuda's eager forward under ``no_grad`` (one BLAS thread, its own process), and the
generated code compiled with ``cc -O2`` ("C -O2") and with ``cc -O3 -march=native`` ("C native"),
timed by the generated runner over many calls. Both are timed in process CPU time (single-threaded,
so on an idle machine it is the wall time; on a shared one it leaves out the time other work took).
Each C build is checked against adcuda's outputs first. The table's ratios are adcuda's time over
the C code's (above 1: the C code is faster). The second table is the generated code's static
memory: the scratch array (activations, reused by lifetime) and the weights (BatchNorm folded in);
the caller's input and output buffers are not counted.

    python benchmarks/bench_export.py [--quick] [--json out.json]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import contender_main, print_table, run_contenders, single_thread_env, smoke, write_report  # noqa: E402

EXIT_SKIPPED = 77
C_BUILDS = {"C -O2": ("-O2",), "C native": ("-O3", "-march=native")}
CASES = {
    "digits MLP, batch 1": ("digits", 1),
    "digits MLP, batch 360": ("digits", 360),
    "small CNN 28x28, batch 1": ("cnn", 1),
    "small CNN 28x28, batch 32": ("cnn", 32),
    "causal block 32x64, batch 1": ("block", 1),
    "causal block 32x64, batch 8": ("block", 8),
}
BLOCK_POSITIONS, BLOCK_WIDTH = 32, 64


def build_model(kind):
    import adcuda
    from adcuda import nn
    from adcuda.train import DigitsTask

    adcuda.manual_seed(0)
    if kind == "digits":
        model = DigitsTask(seed=0).build_model()
    elif kind == "block":

        class CausalBlock(nn.Module):
            def __init__(self):
                super().__init__()
                self.layer = nn.TransformerEncoderLayer(
                    BLOCK_WIDTH,
                    4,
                    dim_feedforward=2 * BLOCK_WIDTH,
                    batch_first=True,
                    norm_first=True,
                    activation="gelu",
                )

            def forward(self, x):
                mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
                return self.layer(x, src_mask=mask, is_causal=True)

        model = CausalBlock()
    else:
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Flatten(),
            nn.Linear(16 * 7 * 7, 10),
        )
    return model.eval()


def example(kind, batch):
    import adcuda

    adcuda.manual_seed(1)
    if kind == "block":
        return adcuda.randn(batch, BLOCK_POSITIONS, BLOCK_WIDTH)
    return adcuda.randn(batch, 64) if kind == "digits" else adcuda.randn(batch, 1, 28, 28)


def cases_for(contender, quick=False):
    import adcuda

    cases = {}
    for name, (kind, batch) in CASES.items():
        model, x = build_model(kind), example(kind, batch)

        def forward(model=model, x=x):
            with adcuda.no_grad():
                return model(x)

        cases[name] = forward
    return cases


def c_compiler():
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


def time_c(compiler, flags, export, directory, x, reference, quick):
    """Median seconds per forward of the generated code built with ``flags``, after checking its outputs."""
    import numpy as np

    exe = os.path.join(directory, "run" + "".join(f.strip("-=") for f in flags))
    subprocess.run(
        [compiler, "-std=c99", *flags, "-o", exe, export.source, os.path.join(directory, "model_main.c"), "-lm"],
        check=True,
    )
    x_path, out_path = os.path.join(directory, "in0.bin"), os.path.join(directory, "out0.bin")
    np.ascontiguousarray(x, np.float32).tofile(x_path)

    def run(repeats):
        proc = subprocess.run([exe, x_path, out_path, str(repeats)], capture_output=True, text=True, check=True)
        return float(proc.stdout.split()[-1])

    run(1)
    got = np.fromfile(out_path, np.float32)
    np.testing.assert_allclose(got.reshape(reference.shape), reference, rtol=1e-4, atol=1e-5)
    if smoke():
        return run(1)
    per_call = run(10)
    repeats = max(10, int((0.05 if quick else 0.2) / max(per_call, 1e-9)))
    times = sorted(run(repeats) for _ in range(3 if quick else 7))
    return times[len(times) // 2]


def measure_c(quick):
    """``({build: {case: seconds}}, memory rows)`` for the generated code of every case."""
    import adcuda
    from adcuda.export import to_c

    compiler = c_compiler()
    results = {build: {} for build in C_BUILDS}
    memory = []
    for name, (kind, batch) in CASES.items():
        model, x = build_model(kind), example(kind, batch)
        with adcuda.no_grad():
            reference = model(x).numpy()
        with tempfile.TemporaryDirectory() as directory:
            export = to_c(model, (x,), directory, runner=True)
            for build, flags in C_BUILDS.items():
                results[build][name] = time_c(compiler, flags, export, directory, x.numpy(), reference, quick)
        memory.append(
            {
                "case": name,
                "scratch_bytes": export.scratch_bytes,
                "weight_bytes": export.weight_bytes,
                "static_bytes": export.static_bytes,
                "input_bytes": 4 * x.numel(),
            }
        )
    return results, memory


def print_memory(memory):
    head = f"{'case':<34}{'scratch KiB':>14}{'weights KiB':>14}{'static KiB':>14}{'input KiB':>14}"
    print(f"\nstatic memory of the generated C (the caller's buffers not counted)\n{head}\n{'-' * len(head)}")
    for row in memory:
        print(
            f"{row['case']:<34}{row['scratch_bytes'] / 1024:>14.1f}{row['weight_bytes'] / 1024:>14.1f}"
            f"{row['static_bytes'] / 1024:>14.1f}{row['input_bytes'] / 1024:>14.1f}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if c_compiler() is None:
        print("no C compiler (cc, gcc or clang) on PATH: the generated C cannot be built", file=sys.stderr)
        return EXIT_SKIPPED
    single_thread_env()
    results = run_contenders(os.path.abspath(__file__), ["adcuda"], ["--quick"] if args.quick else [])
    c_results, memory = measure_c(args.quick)
    results.update(c_results)
    rows = print_table(
        "generated C vs adcuda's forward (1 thread, CPU time); ratio > 1: the C code is faster",
        results,
        unit="us",
        scale=1e6,
    )
    print_memory(memory)
    write_report(args.json, {"suite": "export", "rows": rows, "memory": memory})
    return 0


if __name__ == "__main__":
    if "--contender" in sys.argv:
        contender_main(cases_for, clock=time.process_time)
    else:
        sys.exit(main())
