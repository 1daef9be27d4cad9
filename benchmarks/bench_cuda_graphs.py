"""A small GPT training step replayed through CUDA graphs (``adcuda.compile`` on CUDA tensors) against
the same step in eager adcuda and in PyTorch eager, on one GPU.

    python benchmarks/bench_cuda_graphs.py [--quick] [--json out.json]

The model is bench_gpt2_step.py's GPT (nanoGPT-style pre-LayerNorm blocks, causal
scaled_dot_product_attention, tied LM head) at a small size: 4 layers, width 256, 4 heads, a
1024-token vocabulary, batch 8 x 128 tokens, in float32, where each kernel takes microseconds and
launch and Python dispatch costs show. One step: zero_grad, forward, cross-entropy, backward, AdamW
(bench_gpt2_step.py's settings). Every contender starts from the same weights and batch.

- ``adcuda graphs``: the step under ``adcuda.compile``: the first call records it eagerly, the second
  captures the forward and backward as CUDA graphs, and later calls replay them with AdamW's fused
  multi-tensor step launched between (a host step: it reads the step count and learning rate);
- ``adcuda``: the same step eagerly;
- ``torch``: the same model in PyTorch eager (AdamW fused=True).

Reported: ms per step (CUDA-event medians over bursts of steps, after warmup steps) and the ratios;
the aim on an H200 is the graphed step at least 1.2x PyTorch eager's speed. Before timing, the three
contenders' losses over the first steps must agree (float32 rounding), and so must the graphed and
eager adcuda parameters after them. In the emulated build only that check runs, at a tiny size (no
timing). Needs a GPU otherwise; elsewhere it says so and exits 0.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
from _harness import emulated_reference_run, is_emulated, print_table, write_report  # noqa: E402
from bench_gpt2_step import (  # noqa: E402
    adamw,
    copy_weights,
    event_timer,
    gpt2,
    losses_agree,
    optional_torch,
    token_batch,
    training_step,
    weights_of,
)

import adcuda  # noqa: E402

SMALL = {"vocab": 1024, "positions": 128, "layers": 4, "heads": 4, "width": 256}
SMALL_BATCH, SMALL_LENGTH = 8, 128
TINY = {"vocab": 37, "positions": 8, "layers": 2, "heads": 2, "width": 32}
TINY_BATCH, TINY_LENGTH = 2, 8
CHECK_STEPS = 4
LOSS_RTOL = 1e-4  # float32, the same weights and batch: rounding differences only
CASE = "small GPT AdamW step"


def contender_step(lib, weights, config, batch, graphs):
    """(step callable, model) in ``lib`` from ``weights``; through adcuda.compile when ``graphs``."""
    model = gpt2(lib, config)
    copy_weights(lib, model, weights)
    model.to("cuda")
    inputs, targets = (lib.tensor(a).to("cuda") for a in batch)
    step = training_step(lib, model, adamw(lib, model), inputs, targets, None)
    return (adcuda.compile(step, fullgraph=True) if graphs else step), model


def first_losses(lib, weights, config, batch, graphs):
    step, model = contender_step(lib, weights, config, batch, graphs)
    losses = [float(step().item()) for _ in range(CHECK_STEPS)]
    return losses, model


def check_against_eager(config=TINY, batch_shape=(TINY_BATCH, TINY_LENGTH)):
    """The graphed step's losses and final parameters equal the eager step's (and PyTorch's losses
    where it runs on this GPU) over CHECK_STEPS steps from the same weights and batch."""
    adcuda.manual_seed(0)
    weights = weights_of(gpt2(adcuda, config))
    batch = token_batch(config, *batch_shape)
    eager, eager_model = first_losses(adcuda, weights, config, batch, graphs=False)
    graphed, graphed_model = first_losses(adcuda, weights, config, batch, graphs=True)
    if not losses_agree(graphed, eager, LOSS_RTOL):
        raise SystemExit(f"CUDA-graph losses {graphed} differ from eager adcuda's {eager}")
    for (name, a), b in zip(eager_model.state_dict().items(), graphed_model.state_dict().values()):
        if not np.allclose(a.cpu().numpy(), b.cpu().numpy(), rtol=1e-4, atol=1e-5):
            raise SystemExit(f"after {CHECK_STEPS} steps the graphed and eager parameters differ ({name})")
    torch = optional_torch("cuda")
    if torch is not None and not is_emulated():
        reference, _ = first_losses(torch, weights, config, batch, graphs=False)
        if not losses_agree(graphed, reference, LOSS_RTOL * 10):
            raise SystemExit(f"CUDA-graph losses {graphed} differ from PyTorch's {reference}")
    print(f"reference check: {CHECK_STEPS} steps, graphed losses {', '.join(f'{x:.5f}' for x in graphed)} = eager")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer timed steps")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    if is_emulated():
        return emulated_reference_run("cuda_graphs", args.json, [check_against_eager])
    if not adcuda.cuda.is_available():
        print(f"bench_cuda_graphs: needs a GPU ({adcuda.cuda.unavailable_reason()})")
        return 0
    check_against_eager(SMALL, (SMALL_BATCH, SMALL_LENGTH))
    bursts, per_burst = (3, 5) if args.quick else (7, 10)
    adcuda.manual_seed(0)
    weights = weights_of(gpt2(adcuda, SMALL))
    batch = token_batch(SMALL, SMALL_BATCH, SMALL_LENGTH)
    results = {}
    for who, lib, graphs in (("adcuda graphs", adcuda, True), ("adcuda", adcuda, False)):
        step, _ = contender_step(lib, weights, SMALL, batch, graphs)
        results[who] = {CASE: event_timer(lib)(step, bursts, per_burst)}
        del step
    torch = optional_torch("cuda")
    if torch is not None:
        step, _ = contender_step(torch, weights, SMALL, batch, graphs=False)
        results["torch"] = {CASE: event_timer(torch)(step, bursts, per_burst)}
    title = (
        f"small GPT ({SMALL['layers']} layers, width {SMALL['width']}) float32 training step, "
        f"B={SMALL_BATCH} T={SMALL_LENGTH}, on {adcuda.cuda.get_device_name()} (time per step)"
    )
    rows = print_table(title, results, unit="ms", scale=1e3, baseline="adcuda graphs")
    graphed = results["adcuda graphs"][CASE]
    print(f"\n  CUDA graphs vs eager adcuda: {results['adcuda'][CASE] / graphed:.2f}x faster")
    if "torch" in results:
        print(f"  CUDA graphs vs PyTorch eager: {results['torch'][CASE] / graphed:.2f}x faster (aim >= 1.2x)")
    write_report(args.json, {"suite": "cuda_graphs", "device": "cuda", "rows": rows, "config": SMALL})
    return 0


if __name__ == "__main__":
    sys.exit(main())
