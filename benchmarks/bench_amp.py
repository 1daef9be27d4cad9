"""Mixed precision vs float32: training-step time and parameter + optimizer-state memory of an MLP
784-512-512-10 (batch 256, AdamW), side by side in one run.

Modes (each contender runs the ones it has):
  fp32      float32 weights, no scaler
  half      float16 weights with float32 master weights (``master_weights=True``), GradScaler,
            loss in float32 (adcuda only: PyTorch has no master-weights option)
  autocast  float32 weights, ``autocast`` (float16 GEMMs), GradScaler

On the CPU fallback float16 is storage only (every primitive computes in float32 and converts on
the way in and out), so expect mixed precision to be no faster there, and usually slower: the
ratios printed are the honest ones. On a GPU (``--device cuda``) the same script measures the real
thing, half-precision GEMMs and halved activation traffic. Memory is counted from the tensors
themselves (parameters plus optimizer state, masters included); note that float32 masters make
``half`` hold more parameter + optimizer bytes than ``fp32`` with Adam: mixed precision saves
activation memory and bandwidth, not optimizer memory.

    python benchmarks/bench_amp.py [--quick] [--device cpu|cuda] [--threads N] [--json out.json]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    device_contender_main,
    median_time,
    parse_suite_args,
    print_ms_table,
    run_contenders_on_device,
    single_thread_env,
    suite_parser,
    write_report,
)
from _models import mlp  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 256
LR = 1e-3
MODES = ("fp32", "half", "autocast")


def _data():
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    return x, y


def _setup(lib, mode, device):
    """A model, optimizer and one training-step closure for ``mode``; None where ``lib`` lacks it."""
    if mode == "half" and lib.__name__ != "adcuda":
        return None
    x_np, y_np = _data()
    lib.manual_seed(1)
    nn = lib.nn
    model = mlp(nn, SIZES).to(device)
    x, y = lib.from_numpy(x_np).to(device), lib.from_numpy(y_np).to(device)
    extra = {}
    if mode == "half":
        model.half()
        x = x.half()
        extra["master_weights"] = True
    opt = lib.optim.AdamW(model.parameters(), lr=LR, **extra)
    scaler = lib.amp.GradScaler(device, enabled=mode != "fp32")
    cross_entropy = nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        with lib.autocast(device, dtype=lib.float16, enabled=mode == "autocast"):
            loss = cross_entropy(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    step()  # optimizer state and masters exist from here on
    return step, model, opt


def _state_bytes(model, opt):
    """Bytes held by the parameters and the optimizer state (moments, masters; not the step counts)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for state in opt.state.values():
        total += sum(v.numel() * v.element_size() for k, v in state.items() if k != "step" and hasattr(v, "numel"))
    return total


def _synchronizing(lib, device, step):
    if device == "cpu":
        return step

    def synced():
        step()
        lib.cuda.synchronize()

    return synced


def contender(name, device, quick):
    import warnings

    threads = single_thread_env()
    if name == "torch":
        import torch as lib

        lib.set_num_threads(threads)
    else:
        import adcuda as lib
    times, memory = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GradScaler/autocast say they are not needed on the CPU: we know
        for mode in MODES:
            built = _setup(lib, mode, device)
            if built is None:
                continue
            step, model, opt = built
            times[f"{mode} step"] = median_time(_synchronizing(lib, device, step), repeat=5 if quick else 9)
            memory[f"{mode} param+optimizer"] = _state_bytes(model, opt)
    return {"times": times, "memory": memory}


def _tiny_steps_on_the_emulator():
    """Each mode's training step on a 7-9-3 MLP, batch 5, on the emulated GPU: three steps, losses finite."""
    import math

    import adcuda

    global SIZES, BATCH
    SIZES, BATCH = (7, 9, 3), 5
    for mode in MODES:
        step, _, _ = _setup(adcuda, mode, "cuda")
        losses = [float(step()) for _ in range(3)]
        if not all(math.isfinite(loss) for loss in losses):
            raise SystemExit(f"bench_amp: {mode} steps on the emulator gave losses {losses}")


def _ratio_table(results):
    """Each contender's mixed-precision modes against its own fp32 run."""
    print(f"\n{'contender':<10}{'mode':<10}{'step time / fp32':>18}{'param+opt bytes':>18}{'bytes / fp32':>14}")
    rows = []
    for name, res in results.items():
        base_t, base_m = res["times"]["fp32 step"], res["memory"]["fp32 param+optimizer"]
        for mode in MODES:
            t, m = res["times"].get(f"{mode} step"), res["memory"].get(f"{mode} param+optimizer")
            if t is None:
                continue
            print(f"{name:<10}{mode:<10}{t / base_t:>17.2f}x{m:>18,}{m / base_m:>13.2f}x")
            rows.append(
                {"contender": name, "mode": mode, "time_ratio": t / base_t, "bytes": m, "bytes_ratio": m / base_m}
            )
    return rows


def main():
    args = parse_suite_args(suite_parser(__doc__, device=True))
    results = run_contenders_on_device(os.path.abspath(__file__), "amp", args, [_tiny_steps_on_the_emulator])
    if results is None:
        return
    timing_rows = print_ms_table(
        f"MLP 784-512-512-10 AdamW step on {args.device}", {name: res["times"] for name, res in results.items()}
    )
    ratio_rows = _ratio_table(results)
    if args.device == "cpu":
        print("\n(on the CPU float16 is storage only: a ratio above 1x is the cost of the conversions, not a bug)")
    write_report(args.json, {"suite": "amp", "device": args.device, "rows": timing_rows, "ratios": ratio_rows})


if __name__ == "__main__":
    if "--contender" in sys.argv:
        device_contender_main(contender)
    else:
        main()
